//! Stream a PetaVision activity file frame by frame and print per-frame statistics
//! (min, max, mean, non-zero count), in bounded memory: one frame is decoded at a time
//! (dense frames are zero-copy slices of the mapped file; sparse frames are expanded
//! one at a time).
//!
//! ```sh
//! cargo run -p tensorfmt --example pvp_frame_stats -- [ACTIVITY.pvp]
//! ```
//!
//! Without an argument it first writes a 200-frame 128 x 128 x 4 dense activity file
//! (52 MB) with the PVP writer to the system temp directory, then streams it.

use std::error::Error;
use std::path::{Path, PathBuf};

use tensorfmt::pvp::write::DenseWriter;
use tensorfmt::{Document, Stats};

/// One line of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameStats {
    /// Frame number.
    pub index: usize,
    /// Simulation time stored with the frame.
    pub time: f64,
    /// min, max, mean, non-zero count, ... of the frame's activity.
    pub stats: Stats,
}

/// Streams the `values` of a PVP activity file (dense or sparse) frame by frame.
pub fn run(path: &Path) -> Result<Vec<FrameStats>, Box<dyn Error>> {
    let doc = Document::open(path)?;
    let values = doc.entry("values").map_err(|_| {
        format!(
            "{}: a {} file has no activity frames ({})",
            path.display(),
            doc.file_format(),
            doc.kind()
        )
    })?;
    // The frame times are small: read them whole. The values are streamed.
    let times = doc.entry("time")?.read()?.to_vec::<f64>()?;
    println!(
        "{}: {}, values {} {}",
        path.display(),
        doc.kind(),
        values.dtype(),
        values.shape()
    );
    println!(
        "{:>6} {:>10} {:>12} {:>12} {:>12} {:>9}",
        "frame", "time", "min", "max", "mean", "nonzero"
    );
    let mut out = Vec::with_capacity(times.len());
    let mut index = 0;
    for chunk in values.chunks()? {
        let chunk = chunk?; // [k, ny, nx, nf], usually k = 1
        let frames = chunk.dims()[0];
        for j in 0..frames {
            let frame = if frames == 1 {
                chunk.clone()
            } else {
                chunk.slice_outer(j, j + 1)?
            };
            let stats = frame.stats();
            let time = times.get(index).copied().unwrap_or(f64::NAN);
            println!(
                "{index:>6} {time:>10.3} {:>12.5} {:>12.5} {:>12.5} {:>9}",
                stats.min.unwrap_or(f64::NAN),
                stats.max.unwrap_or(f64::NAN),
                stats.mean.unwrap_or(f64::NAN),
                stats.nonzero
            );
            out.push(FrameStats { index, time, stats });
            index += 1;
        }
    }
    Ok(out)
}

/// The activity the generated file holds: travelling rectified waves, different per
/// feature, so that the statistics change from frame to frame.
pub fn activity(k: usize, nx: usize, ny: usize, nf: usize) -> Vec<f32> {
    let mut v = Vec::with_capacity(nx * ny * nf);
    for y in 0..ny {
        for x in 0..nx {
            for f in 0..nf {
                let phase = x as f32 * 0.11 + k as f32 * 0.3 + f as f32 * 1.7;
                let a = phase.sin() * (y as f32 * 0.07 + k as f32 * 0.05).cos() - 0.2;
                v.push(a.max(0.0) * (1.0 + f as f32));
            }
        }
    }
    v
}

/// Writes a dense activity file (`[y][x][f]` order per frame, time `0.5 * k`) one
/// frame at a time: the writer never holds more than one frame either.
pub fn generate(
    path: &Path,
    nx: usize,
    ny: usize,
    nf: usize,
    frames: usize,
) -> Result<(), Box<dyn Error>> {
    let file = tensorfmt::io::AtomicFile::create(path)?;
    let mut w = DenseWriter::new(file, nx, ny, nf)?;
    for k in 0..frames {
        w.write_frame(0.5 * k as f64, &activity(k, nx, ny, nf))?;
    }
    w.finish()?.commit()?;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let path = match std::env::args_os().nth(1) {
        Some(p) => PathBuf::from(p),
        None => {
            let p = std::env::temp_dir().join("tensorfmt_example_activity.pvp");
            let (nx, ny, nf, frames) = (128, 128, 4, 200);
            println!(
                "writing {frames} frames of {ny} x {nx} x {nf} to {}",
                p.display()
            );
            generate(&p, nx, ny, nf, frames)?;
            p
        }
    };
    let stats = run(&path)?;
    let busiest = stats.iter().max_by_key(|s| s.stats.nonzero);
    if let Some(b) = busiest {
        println!(
            "{} frames; most active: frame {} ({} non-zero)",
            stats.len(),
            b.index,
            b.stats.nonzero
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_stats_match_the_generated_frames() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.pvp");
        let (nx, ny, nf, frames) = (16, 8, 3, 12);
        generate(&p, nx, ny, nf, frames).unwrap();
        let got = run(&p).unwrap();
        assert_eq!(got.len(), frames);
        for (k, s) in got.iter().enumerate() {
            assert_eq!((s.index, s.time), (k, 0.5 * k as f64));
            assert_eq!(s.stats, Stats::of(&activity(k, nx, ny, nf)), "frame {k}");
            assert!(s.stats.nonzero > 0 && s.stats.nonzero < nx * ny * nf);
        }
        assert_ne!(got[0].stats, got[1].stats);
    }

    #[test]
    fn sparse_and_bundled_files_stream_too() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp");
        for name in [
            "dense_f32.pvp",
            "sparse_values_dt4.pvp",
            "sparse_binary.pvp",
        ] {
            let doc = Document::open(root.join(name)).unwrap();
            let whole = doc.entry("values").unwrap().read().unwrap();
            let got = run(&root.join(name)).unwrap();
            assert_eq!(got.len(), whole.dims()[0], "{name}");
            let total = got.iter().fold(Stats::default(), |a, s| a.merge(&s.stats));
            assert_eq!(total.nonzero, whole.stats().nonzero, "{name}");
        }
        // A weights file has no activity: a clear error.
        let e = run(&root.join("kernel_f32.pvp")).unwrap_err().to_string();
        assert!(e.contains("no activity frames"), "{e}");
    }
}
