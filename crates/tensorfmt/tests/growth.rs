//! Cost grows linearly in the number of tensors (issue 27, item 1).
//!
//! Each path (open and list, read every tensor, convert to npz or to safetensors,
//! diff against itself) runs on files of `SMALL` and of `LARGE = 10 * SMALL` tiny
//! tensors, for each source format with a many-tensor kind (safetensors, npz,
//! primitiv models, caffemodels). A linear path takes about 10 times longer on the
//! large file; a lookup by name inside a loop over names (quadratic) takes about 100
//! times longer. The test asserts a ratio under 15.
//!
//! The measurement is built so that a loaded machine (CI, parallel test binaries)
//! does not fail a linear path: times are CPU time, not wall time (and the two tests
//! of this file never measure at the same time); one sample of the
//! small file is 10 runs in a row, so both sizes are timed over windows of the same
//! length and see the same interference; samples of the two sizes alternate; each
//! size keeps its fastest of `SAMPLES`; and a path over the bound is measured again
//! (up to `ATTEMPTS` times) before it fails. A quadratic pass is over the bound on
//! every attempt (about 100), so the re-measurement cannot hide one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tensorfmt::diff::{compare, DiffOptions};
use tensorfmt::{Format, Order, Tensor, TensorFile, WriteOptions};

/// Held by each test while it measures: the clock is the whole process's CPU time, so
/// a test measuring while the other one runs would be charged with its work (cargo runs
/// the tests of a binary in parallel).
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn measuring() -> std::sync::MutexGuard<'static, ()> {
    MEASURING.lock().unwrap_or_else(|p| p.into_inner())
}

const SMALL: usize = 1_000;
const LARGE: usize = 10 * SMALL;
const MAX_RATIO: f64 = 15.0;
const SAMPLES: usize = 5;
const ATTEMPTS: usize = 3;

/// `n` small f32 tensors named as `format`'s writer wants them.
fn tensors(format: Format, n: usize) -> Vec<(String, Tensor)> {
    (0..n)
        .map(|i| {
            let name = match format {
                // One layer per tensor (`layer/blob`).
                Format::Caffe => format!("layer{i:06}/0"),
                // A model's parameter paths.
                Format::Primitiv => format!("p{i:06}"),
                _ => format!("t{i:06}"),
            };
            let t = Tensor::from_vec(vec![i as f32; 4], [2, 2], Order::RowMajor).unwrap();
            (name, t)
        })
        .collect()
}

fn quick() -> WriteOptions {
    WriteOptions {
        skip_fsync: true,
        ..WriteOptions::default()
    }
}

/// CPU time used by this process so far (all threads). Wall-clock time on a loaded
/// machine charges a long run with every other process's time slices and a short run
/// with few of them, which alone can make a linear ratio look quadratic.
fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// One source file, opened twice (diff compares two documents), with its names.
struct Source {
    doc: tensorfmt::Document,
    other: tensorfmt::Document,
    names: Vec<String>,
    path: PathBuf,
    out: PathBuf,
}

impl Source {
    fn new(format: Format, ext: &str, n: usize, dir: &Path) -> Source {
        let path = dir.join(format!("src{n}.{ext}"));
        tensorfmt::save(&path, format, &tensors(format, n), &quick()).unwrap();
        let doc = tensorfmt::open(&path, &Default::default()).unwrap();
        let names: Vec<String> = doc.tensors().into_iter().map(|i| i.name).collect();
        assert_eq!(names.len(), n, "{format:?}");
        let other = tensorfmt::open(&path, &Default::default()).unwrap();
        // One conversion per source (both writers share the listing code): to npz
        // from safetensors, to safetensors from the others.
        let out_ext = if ext == "safetensors" {
            "npz"
        } else {
            "safetensors"
        };
        let out = dir.join(format!("out{n}.{out_ext}"));
        Source {
            doc,
            other,
            names,
            path,
            out,
        }
    }
}

type Timed = fn(&Source);

/// The paths timed, each a function of one source.
const PATHS: [(&str, Timed); 4] = [
    ("open", |s| {
        let d = tensorfmt::open(&s.path, &Default::default()).unwrap();
        assert_eq!(d.tensors().len(), s.names.len());
    }),
    ("read every tensor", |s| {
        for n in &s.names {
            s.doc.read_tensor(n).unwrap();
        }
    }),
    ("convert", |s| {
        let format = if s.out.extension().is_some_and(|e| e == "npz") {
            Format::Npz
        } else {
            Format::Safetensors
        };
        s.doc
            .convert_to_with(&s.out, format, Some(&s.names), &quick())
            .unwrap();
    }),
    ("diff", |s| {
        let r = compare(s.doc.as_ref(), s.other.as_ref(), &DiffOptions::default()).unwrap();
        assert!(r.is_equal());
    }),
];

/// CPU time of `runs` runs of `path` over `s`, divided by `runs`.
fn sample(path: Timed, s: &Source, runs: u32) -> Duration {
    let t = cpu_time();
    for _ in 0..runs {
        path(s);
    }
    cpu_time().saturating_sub(t) / runs
}

/// The fastest small and large times of `path`, sampled alternately.
fn measure(path: Timed, small: &Source, large: &Source) -> (Duration, Duration) {
    let ratio = (LARGE / SMALL) as u32;
    let (mut s, mut l) = (Duration::MAX, Duration::MAX);
    for _ in 0..SAMPLES {
        s = s.min(sample(path, small, ratio));
        l = l.min(sample(path, large, 1));
    }
    (s, l)
}

#[test]
fn cost_grows_linearly_in_the_number_of_tensors() {
    let _alone = measuring();
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (format, ext) in [
        (Format::Safetensors, "safetensors"),
        (Format::Npz, "npz"),
        (Format::Primitiv, "data"),
        (Format::Caffe, "caffemodel"),
    ] {
        let small = Source::new(format, ext, SMALL, dir.path());
        let large = Source::new(format, ext, LARGE, dir.path());
        for (label, path) in PATHS {
            let mut line = String::new();
            for attempt in 1..=ATTEMPTS {
                let (s, l) = measure(path, &small, &large);
                // A floor of 0.2 ms for the small run: below it the ratio is timer noise.
                let ratio = l.as_secs_f64() / s.as_secs_f64().max(2e-4);
                line = format!(
                    "{format:?} {label}: {SMALL} tensors {:.2} ms, {LARGE} tensors {:.1} ms, ratio {ratio:.1} (attempt {attempt})",
                    s.as_secs_f64() * 1e3,
                    l.as_secs_f64() * 1e3
                );
                eprintln!("{line}");
                if ratio < MAX_RATIO {
                    line.clear();
                    break;
                }
            }
            if !line.is_empty() {
                failures.push(line);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "cost grows faster than linearly (ratio >= {MAX_RATIO} for 10x the tensors, on each of {ATTEMPTS} attempts):\n{}",
        failures.join("\n")
    );
}

/// The fastest of five runs of `f`, in CPU time.
fn best_of_5(mut f: impl FnMut()) -> Duration {
    (0..5)
        .map(|_| {
            let t = cpu_time();
            f();
            cpu_time().saturating_sub(t)
        })
        .min()
        .unwrap()
}

/// A sparse PVP movie of `frames` frames of 4 neurons (one active per frame).
fn sparse_movie(path: &Path, frames: usize) {
    let mut v = vec![0f32; frames * 4];
    for k in 0..frames {
        v[k * 4 + k % 4] = 1.0 + k as f32;
    }
    let values = Tensor::from_vec(v, [frames, 1, 4, 1], Order::RowMajor).unwrap();
    let target: tensorfmt::Target = "pvp:sparse".parse().unwrap();
    tensorfmt::save_to(path, &target, &[("values".into(), values)], &quick()).unwrap();
}

/// Opening the same sparse file again reuses its frame index (issue 27, item 4): the
/// second open of a few frames costs the same at 1k and at 100k frames (a rescan of
/// the frame headers made it 100 times longer).
#[test]
fn reopening_a_sparse_file_does_not_rescan_its_frames() {
    let _alone = measuring();
    let dir = tempfile::tempdir().unwrap();
    let opts = tensorfmt::ReadOptions {
        frames: Some((2, Some(12))),
        ..Default::default()
    };
    let mut seconds = Vec::new();
    for frames in [1_000, 100_000] {
        let p = dir.path().join(format!("s{frames}.pvp"));
        sparse_movie(&p, frames);
        let first = tensorfmt::open(&p, &opts).unwrap();
        let time = first.read_tensor("time").unwrap();
        let values = first.read_tensor("values").unwrap();
        let again = best_of_5(|| {
            for _ in 0..20 {
                let d = tensorfmt::open(&p, &opts).unwrap();
                assert_eq!(d.tensors()[0].shape.dims()[0], 10);
            }
        });
        let d = tensorfmt::open(&p, &opts).unwrap();
        assert_eq!(d.read_tensor("time").unwrap(), time);
        assert_eq!(d.read_tensor("values").unwrap(), values);
        assert_eq!(values.to_vec::<f32>().unwrap()[0..4], [0.0, 0.0, 3.0, 0.0]);
        seconds.push(again.as_secs_f64());
    }
    let ratio = seconds[1] / seconds[0].max(1e-4);
    eprintln!(
        "20 reopenings: 1k frames {:.2} ms, 100k frames {:.2} ms, ratio {ratio:.1}",
        seconds[0] * 1e3,
        seconds[1] * 1e3
    );
    assert!(
        ratio < 10.0,
        "reopening costs grow with the frame count: {ratio:.1}"
    );
    // A rewritten file (new size) is scanned again, not read with the old index.
    let p = dir.path().join("s1000.pvp");
    sparse_movie(&p, 1_500);
    let all = tensorfmt::open(&p, &Default::default()).unwrap();
    assert_eq!(all.tensors()[0].shape.dims()[0], 1_500);
}
