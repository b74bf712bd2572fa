//! Cost grows linearly in the number of tensors (issue 27, item 1).
//!
//! Each path (open and list, read every tensor, convert to npz or to safetensors,
//! diff against itself) runs on files of `SMALL` and of `LARGE = 10 * SMALL` tiny
//! tensors, for each source format with a many-tensor kind (safetensors, npz,
//! primitiv models, caffemodels). A linear path takes about 10 times longer on the
//! large file; a lookup by name inside a loop over names (quadratic) takes about 100
//! times longer. The test asserts a ratio under 15, on the best of three runs of each
//! size, in CPU time, so that a loaded machine does not fail it.

use std::path::Path;
use std::time::Duration;

use tensorfmt::diff::{compare, DiffOptions};
use tensorfmt::{Format, Order, Tensor, TensorFile, WriteOptions};

const SMALL: usize = 2_000;
const LARGE: usize = 20_000;
const MAX_RATIO: f64 = 15.0;

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

/// The fastest of three runs of `f`, in CPU time.
fn best_of_3(mut f: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let t = cpu_time();
            f();
            cpu_time().saturating_sub(t)
        })
        .min()
        .unwrap()
}

/// Times every path over one source file.
fn paths(src: &Path, dir: &Path) -> Vec<(&'static str, Duration)> {
    let names =
        |f: &dyn TensorFile| -> Vec<String> { f.tensors().into_iter().map(|i| i.name).collect() };
    let doc = tensorfmt::open(src, &Default::default()).unwrap();
    let all = names(doc.as_ref());
    let mut out = vec![
        (
            "open",
            best_of_3(|| {
                let d = tensorfmt::open(src, &Default::default()).unwrap();
                assert_eq!(d.tensors().len(), all.len());
            }),
        ),
        (
            "read every tensor",
            best_of_3(|| {
                for n in &all {
                    doc.read_tensor(n).unwrap();
                }
            }),
        ),
    ];
    // One conversion per source (both writers share the listing code): to npz from
    // safetensors, to safetensors from the others.
    let (label, format, ext) = if src.extension().is_some_and(|e| e == "safetensors") {
        ("convert to npz", Format::Npz, "npz")
    } else {
        ("convert to safetensors", Format::Safetensors, "safetensors")
    };
    let out_path = dir.join(format!("out.{ext}"));
    out.push((
        label,
        best_of_3(|| {
            tensorfmt::convert(doc.as_ref(), &all, &out_path, format, &quick()).unwrap();
        }),
    ));
    let other = tensorfmt::open(src, &Default::default()).unwrap();
    out.push((
        "diff",
        best_of_3(|| {
            let r = compare(doc.as_ref(), other.as_ref(), &DiffOptions::default()).unwrap();
            assert!(r.is_equal());
        }),
    ));
    out
}

#[test]
fn cost_grows_linearly_in_the_number_of_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (format, ext) in [
        (Format::Safetensors, "safetensors"),
        (Format::Npz, "npz"),
        (Format::Primitiv, "data"),
        (Format::Caffe, "caffemodel"),
    ] {
        let mut times = Vec::new();
        for n in [SMALL, LARGE] {
            let src = dir.path().join(format!("src{n}.{ext}"));
            tensorfmt::save(&src, format, &tensors(format, n), &quick()).unwrap();
            let listed = tensorfmt::open(&src, &Default::default())
                .unwrap()
                .tensors()
                .len();
            assert_eq!(listed, n, "{format:?}");
            times.push(paths(&src, dir.path()));
        }
        for ((label, small), (_, large)) in times[0].iter().zip(&times[1]) {
            // A floor of 2 ms for the small run: below it the ratio is timer noise.
            let ratio = large.as_secs_f64() / small.as_secs_f64().max(2e-3);
            let line = format!(
                "{format:?} {label}: {SMALL} tensors {:.1} ms, {LARGE} tensors {:.1} ms, ratio {ratio:.1}",
                small.as_secs_f64() * 1e3,
                large.as_secs_f64() * 1e3
            );
            eprintln!("{line}");
            if ratio >= MAX_RATIO {
                failures.push(line);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "cost grows faster than linearly (ratio >= {MAX_RATIO} for 10x the tensors):\n{}",
        failures.join("\n")
    );
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
        let again = best_of_3(|| {
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
