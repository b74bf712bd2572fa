//! Writes that lose nothing: every writer fed a sink that fails after N bytes returns
//! an error (never a panic), path-level writes that fail part-way leave the old file
//! (or none), and appends killed at random moments (a child process) leave a file that
//! reads as the whole frames written so far.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use tensorfmt_core::testing::{FailAfter, PassThenFail};
use tensorfmt_core::{Order, ReadOptions, Tensor, WriteOptions};
use tensorfmt_pvp::write::{DenseWriter, SparseWriter, WeightGeometry, WeightWriter};
use tensorfmt_pvp::{open_tensor_file, save_tensors, PvpError};

/// Writes a small file of each kind into `w`; the first error is returned.
fn write_dense<W: Write + std::io::Seek>(w: W) -> Result<(), PvpError> {
    let mut d = DenseWriter::new(w, 3, 2, 2)?;
    for k in 0..4 {
        d.write_frame(k as f64, &[k as f32; 12])?;
    }
    d.finish().map(drop)
}

fn write_sparse<W: Write + std::io::Seek>(w: W, values: bool) -> Result<(), PvpError> {
    let mut s = if values {
        SparseWriter::values(w, 5, 2, 1)?
    } else {
        SparseWriter::binary(w, 5, 2, 1)?
    };
    for k in 0..4u32 {
        let idx: Vec<u32> = (0..k + 1).collect();
        let v: Vec<f32> = if values {
            idx.iter().map(|&i| i as f32 + 0.5).collect()
        } else {
            Vec::new()
        };
        s.write_frame(k as f64, &idx, &v)?;
    }
    s.finish().map(drop)
}

fn write_weights<W: Write + std::io::Seek>(w: W, bytes: bool) -> Result<(), PvpError> {
    let g = WeightGeometry::non_shared(2, 1, 1, 1, 0, 3, 1, 2, 2);
    let n = g.frame_values()?;
    let mut ww = WeightWriter::new(w, g, bytes)?;
    for k in 0..3 {
        let v: Vec<f32> = (0..n).map(|i| (i + k) as f32 / 7.0).collect();
        ww.write_frame(k as f64, &v)?;
    }
    ww.finish().map(drop)
}

type Writer = fn(&mut FailAfter) -> Result<(), PvpError>;

#[test]
fn every_writer_reports_a_failing_sink_at_every_byte() {
    let writers: [(&str, Writer); 5] = [
        ("dense", |w| write_dense(w)),
        ("sparse binary", |w| write_sparse(w, false)),
        ("sparse values", |w| write_sparse(w, true)),
        ("kernel f32", |w| write_weights(w, false)),
        ("non-shared byte", |w| write_weights(w, true)),
    ];
    for (name, write) in writers {
        let mut full = FailAfter::new(usize::MAX);
        write(&mut full).unwrap();
        let len = full.written().len();
        for n in 0..len {
            let mut sink = FailAfter::new(n);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write(&mut sink)))
                .unwrap_or_else(|_| panic!("{name}: panic with a sink failing after {n} bytes"));
            match r {
                Err(PvpError::Io(_)) => {}
                other => panic!("{name}: sink failing after {n} of {len} bytes gave {other:?}"),
            }
            // What reached the sink reads as whole frames or is an error, never a panic.
            let got = Bytes::copy_from_slice(sink.written());
            let _ = open_tensor_file(got, &ReadOptions::default()).map(|f| {
                for t in f.tensors() {
                    let _ = f.read_tensor(&t.name);
                }
            });
        }
    }
}

fn dense_tensor(frames: usize, fill: f32) -> Vec<(String, Tensor)> {
    let v = vec![fill; frames * 6];
    vec![(
        "values".into(),
        Tensor::from_vec(v, [frames, 2, 3, 1], Order::RowMajor).unwrap(),
    )]
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn a_failed_save_leaves_the_old_file_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.pvp");
    // CSR input whose last row holds an index beyond the width: the writer fails
    // after the earlier frames went to the temporary file.
    let frames = 50;
    let mut indptr = vec![0i64];
    let mut indices = Vec::new();
    for k in 0..frames {
        indices.extend([1u32, 2]);
        if k == frames - 1 {
            indices.push(999);
        }
        indptr.push(indices.len() as i64);
    }
    let n = indices.len();
    let bad = vec![
        (
            "indptr".to_string(),
            Tensor::from_vec(indptr, [frames + 1], Order::RowMajor).unwrap(),
        ),
        (
            "indices".to_string(),
            Tensor::from_vec(indices, [n], Order::RowMajor).unwrap(),
        ),
        (
            "shape".to_string(),
            Tensor::from_vec(vec![frames as i64, 10], [2], Order::RowMajor).unwrap(),
        ),
    ];
    let o = WriteOptions::default();
    // No old file: none afterwards.
    assert!(save_tensors(&p, &bad, &o).is_err());
    assert!(!p.exists());
    assert!(leftovers(dir.path()).is_empty());
    // An old file: unchanged afterwards.
    save_tensors(&p, &dense_tensor(2, 7.0), &o).unwrap();
    let before = std::fs::read(&p).unwrap();
    assert!(save_tensors(&p, &bad, &o).is_err());
    assert_eq!(std::fs::read(&p).unwrap(), before);
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
    // A write through the atomic file failing part-way (the sink gives out).
    let r = tensorfmt_core::io::write_atomic(&p, |f| -> Result<(), PvpError> {
        write_dense(std::io::BufWriter::new(PassThenFail::new(f, 200)))
    });
    assert!(r.is_err());
    assert_eq!(std::fs::read(&p).unwrap(), before);
    assert!(leftovers(dir.path()).is_empty());
}

const CHILD_ENV: &str = "TENSORFMT_PVP_APPEND_CHILD";
/// 512 x 512 f32 = 1 MiB per frame: big enough for a kill to land inside a write.
const SIDE: usize = 512;

/// Child half of `killed_appends_leave_whole_frames`: appends frames (frame k holds
/// the value k everywhere, time k) until killed, printing each acknowledged count.
#[test]
fn append_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return; // Only runs as the re-executed child.
    };
    let mut out = std::io::stdout();
    for _ in 0..400 {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let mut w = DenseWriter::append(f).unwrap();
        let k = w.frames();
        w.write_frame(k as f64, &vec![k as f32; SIDE * SIDE])
            .unwrap();
        w.finish().unwrap();
        writeln!(out, "{}", k + 1).unwrap();
        out.flush().unwrap();
    }
}

/// A small, dependency-free pseudo-random delay.
fn jitter(seed: u64) -> Duration {
    let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    Duration::from_millis(10 + x % 150)
}

#[test]
fn killed_appends_leave_whole_frames() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("movie.pvp");
    {
        let f = std::fs::File::create(&p).unwrap();
        let mut w = DenseWriter::new(f, SIDE, SIDE, 1).unwrap();
        w.write_frame(0.0, &vec![0.0; SIDE * SIDE]).unwrap();
        w.finish().unwrap();
    }
    let exe = std::env::current_exe().unwrap();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut partial_seen = 0;
    for round in 0..5u64 {
        let mut child = Command::new(&exe)
            .args(["--exact", "append_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &p)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(jitter(seed.wrapping_add(round)));
        child.kill().unwrap();
        let out = child.wait_with_output().unwrap();
        let acked = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().last()?.parse::<usize>().ok())
            .max()
            .unwrap_or(0);
        let data = tensorfmt_core::io::read_file(&p).unwrap();
        let f = open_tensor_file(data.clone(), &ReadOptions::default()).unwrap_or_else(|e| {
            panic!("round {round}: killed append left an unreadable file: {e}")
        });
        let times = f.read_tensor("time").unwrap().to_vec::<f64>().unwrap();
        assert!(
            times.len() >= acked.max(1),
            "round {round}: {} frames, {acked} acknowledged",
            times.len()
        );
        for (k, chunk) in f.read_chunks("values").unwrap().enumerate() {
            let v = chunk.unwrap().to_vec::<f32>().unwrap();
            assert_eq!(times[k], k as f64);
            assert!(v.iter().all(|&x| x == k as f32), "round {round} frame {k}");
        }
        eprintln!(
            "round {round}: {} frames ({acked} acknowledged), {} bytes",
            times.len(),
            data.len()
        );
        let frame = 8 + SIDE * SIDE * 4;
        if !(data.len() - 80).is_multiple_of(frame) {
            partial_seen += 1;
            assert!(f.warnings().iter().any(|w| w.contains("partial frame")));
            let strict = ReadOptions {
                strict: true,
                ..ReadOptions::default()
            };
            assert!(matches!(
                open_tensor_file(data, &strict),
                Err(PvpError::Truncated { .. })
            ));
        }
    }
    eprintln!("killed appends: 5 rounds, {partial_seen} left a partial last frame");
    // The typed writer continues such a file (over the partial frame).
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&p)
        .unwrap();
    let mut w = DenseWriter::append(f).unwrap();
    let k = w.frames();
    w.write_frame(k as f64, &vec![k as f32; SIDE * SIDE])
        .unwrap();
    w.finish().unwrap();
    let f = open_tensor_file(
        tensorfmt_core::io::read_file(&p).unwrap(),
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(f.tensors()[0].shape.dims()[0], k + 1);
}
