//! Truncation sweep through the facade: every corpus file and every golden fixture,
//! cut at header, frame, patch and entry starts (and their neighbours) plus an even
//! sample of other lengths. Opening and fully reading a prefix (list + read every
//! tensor + validate) never panics; leniently it gives the whole frames before the cut
//! with a warning (or an error when not even one frame is whole), strictly an error.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use tensorfmt_core::testing::{prefix_lengths_within, read_fully};
use tensorfmt_core::{ReadOptions, TensorFile};
use tensorfmt_pvp::{open_tensor_file, ArborSource, OpenOptions, PvpFile};

fn files() -> Vec<PathBuf> {
    let mut v = Vec::new();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp");
    walk(&fixtures, &mut v);
    if let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "pvp") {
        walk(&dir, &mut v);
    }
    v.sort();
    v
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "pvp") {
            out.push(p);
        }
    }
}

/// What the whole file reads as: frame ends and times, the original layout.
struct Original {
    /// End offset of each frame.
    frame_ends: Vec<usize>,
    /// Structure starts for the sweep.
    boundaries: Vec<usize>,
    times: Vec<f64>,
    /// Only modern layouts have a unique shorter reading (legacy detection by size
    /// may explain a prefix as another legacy layout).
    modern: bool,
    strict_ok: bool,
    /// Activity files: a header alone is a valid empty file.
    activity: bool,
}

fn original(b: &Bytes) -> Original {
    let lenient = OpenOptions {
        allow_truncated: true,
        ..OpenOptions::default()
    };
    let f = PvpFile::from_bytes_with(b.clone(), &lenient).unwrap();
    let mut boundaries = vec![80, 104];
    let (frame_ends, modern) = match &f {
        PvpFile::Dense(r) => {
            let l = r.layout();
            let ends = (1..=r.len()).map(|k| l.frame_offset(k) as usize).collect();
            boundaries.extend((0..r.len()).map(|k| l.frame_offset(k) as usize + 8));
            (ends, l.is_contiguous() && l.has_time)
        }
        PvpFile::Sparse(r) => {
            let t = r.table().unwrap();
            let es = r.layout().entry_bytes;
            let mut ends = Vec::new();
            for (k, (&o, &n)) in t.offsets.iter().zip(&t.counts).enumerate() {
                let o = o as usize;
                let end = o + 12 + n as usize * es;
                ends.push(end);
                boundaries.push(o + 12);
                if k < 4 {
                    // Entry starts of the first frames.
                    boundaries.extend((0..(n as usize).min(16)).map(|i| o + 12 + i * es));
                }
            }
            (ends, true)
        }
        PvpFile::Weights(r) => {
            let l = r.layout();
            let fb = l.frame_bytes as usize;
            let ends = (1..=r.len()).map(|k| k * fb).collect();
            // Patch starts of frame 0 (the first 32).
            let pb = l.patch_bytes();
            let n = (l.arbors * l.numpatches).min(32);
            boundaries.extend((0..n).map(|i| 104 + i * pb));
            (
                ends,
                l.arbor_source == ArborSource::Nbands && l.patch_header_bytes == 8,
            )
        }
    };
    boundaries.extend(frame_ends.iter().copied());
    let strict = OpenOptions {
        strict: true,
        ..OpenOptions::default()
    };
    let strict_ok = PvpFile::from_bytes_with(b.clone(), &strict).is_ok();
    let activity = !matches!(f, PvpFile::Weights(_));
    let times = full_read(b, &ReadOptions::default())
        .unwrap()
        .read_tensor("time")
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    Original {
        frame_ends,
        boundaries,
        times,
        modern,
        strict_ok,
        activity,
    }
}

fn full_read(b: &Bytes, o: &ReadOptions) -> Result<Box<dyn TensorFile>, tensorfmt_core::Error> {
    let f = open_tensor_file(b.clone(), o)?;
    read_fully(f.as_ref())?;
    Ok(f)
}

#[test]
fn every_prefix_of_every_file() {
    let start = Instant::now();
    let (mut n_files, mut n_cuts, mut shorter_ok) = (0, 0, 0);
    let mut failures = Vec::new();
    let strict = ReadOptions {
        strict: true,
        ..ReadOptions::default()
    };
    for path in files() {
        let name = path.display().to_string();
        let whole = Bytes::from(std::fs::read(&path).unwrap());
        let o = original(&whole);
        // Each prefix is read in full (sparse files decoded to dense), so files with
        // a bigger decoded size get fewer cuts: about 100 MB of decoding per file.
        let decoded: usize = open_tensor_file(whole.clone(), &ReadOptions::default())
            .unwrap()
            .tensors()
            .iter()
            .map(|t| t.shape.dims().iter().product::<usize>() * t.dtype.size())
            .sum();
        let budget = ((100usize << 20) / decoded.max(1)).clamp(48, 4096);
        let cs = prefix_lengths_within(whole.len(), &o.boundaries, budget);
        n_files += 1;
        n_cuts += cs.len();
        let file_start = Instant::now();
        let file_cuts = cs.len();
        for cut in cs {
            let b = whole.slice(..cut);
            let r = catch_unwind(AssertUnwindSafe(|| {
                let lenient = full_read(&b, &ReadOptions::default());
                let strict = full_read(&b, &strict);
                (
                    lenient.map(|f| (f.read_tensor("time"), f.warnings())),
                    strict.is_ok(),
                )
            }));
            let Ok((lenient, strict_ok)) = r else {
                failures.push(format!("{name}: PANIC at cut {cut}"));
                continue;
            };
            let whole_frames = o.frame_ends.iter().filter(|&&e| e <= cut).count();
            // A weight file has no frame count in its header: cut at a frame end it is
            // a valid shorter file, even strictly.
            let weight_frame_end = !o.activity && o.frame_ends.contains(&cut);
            // Spec §6.6: weight layouts are detected by size, so a prefix can fit a
            // legacy layout (with plausible patch headers); it then reads as that
            // layout, with a warning saying so.
            let mut reinterpreted = false;
            match lenient {
                Ok((times, warnings)) => {
                    shorter_ok += 1;
                    let times = times.unwrap().to_vec::<f64>().unwrap();
                    let same = times[..] == o.times[..whole_frames];
                    reinterpreted = !o.activity && !same && !warnings.is_empty();
                    if o.modern && !same && !reinterpreted {
                        failures.push(format!(
                            "{name}: cut {cut} read {} frames, expected {whole_frames}",
                            times.len()
                        ));
                    }
                    if o.modern && warnings.is_empty() && !weight_frame_end {
                        failures.push(format!("{name}: cut {cut} read without a warning"));
                    }
                }
                Err(e) => {
                    let empty_file = o.activity && cut == 80;
                    let allowed = whole_frames == 0 && !empty_file;
                    if o.modern && !allowed {
                        failures.push(format!(
                            "{name}: cut {cut} ({whole_frames} whole frames) failed: {e}"
                        ));
                    }
                }
            }
            if strict_ok && o.strict_ok && o.modern && !weight_frame_end && !reinterpreted {
                failures.push(format!("{name}: strict read of cut {cut} succeeded"));
            }
        }
        if std::env::var_os("SWEEP_VERBOSE").is_some() {
            eprintln!(
                "{name}: {} bytes, {file_cuts} cuts, {:?}",
                whole.len(),
                file_start.elapsed()
            );
        }
    }
    let elapsed = start.elapsed();
    eprintln!(
        "truncation sweep: {n_files} files, {n_cuts} prefixes ({shorter_ok} read as shorter files) in {elapsed:?}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
