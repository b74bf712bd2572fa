//! How cost grows with the number of tensors and of frames (issue 27, item 1 and
//! Done-when), with the Python anchors timed in the same run.
//!
//! `cargo run --release -p tensorfmt-benches --bin growth -- [REPEAT] [MAX_N] [PYTHON]`
//!
//! `GROWTH_CPU=1` times CPU instead of wall time (both sides) on a loaded machine.
//!
//! (defaults: 5 runs per cell, n up to 100000, `target/py-venv/bin/python` for the
//! anchors; `PYTHON=-` skips them). Not run in CI (minutes); the cheap guard is
//! `crates/tensorfmt/tests/growth.rs`.
//!
//! Tensors: files of n = 1k, 10k, 100k tensors of 16 x 16 f32 in each source format
//! (npz, safetensors, primitiv model, caffemodel); for each, `open` (list), `load`
//! (decode every tensor), `inspect` (header, listing and statistics of every tensor),
//! `convert` to safetensors and to npz, `diff` with a copy. Frames: dense PVP movies of
//! 1k to 300k frames of 8 x 8 x 1 f32, `open`, `convert` to npz and safetensors.
//!
//! Every cell prints min and median of REPEAT runs (ours interleaved with the anchor
//! where there is one), the growth exponent fitted between consecutive sizes
//! (log(t2 / t1) / log(n2 / n1): 1 is linear, 2 quadratic), and the ratio ours /
//! anchor (below 1 is faster than the anchor). Anchors (benches/python/anchors.py):
//! safetensors -> npz: `safetensors.numpy.load_file` + `np.savez`; npz -> safetensors:
//! `np.load` + `save_file`; npz open: `np.load` (lazy) and its `.files`; safetensors
//! open: `safe_open(...).keys()`; caffemodel load and -> safetensors: `caffe_pb2`'s
//! `NetParameter.ParseFromString` + `np.array(blob.data)` per blob (+ `save_file`).
//! primitiv has no Python reader, so its rows have no anchor.
//!
//! `GROWTH_ONLY=TEXT` runs only the rows whose label contains TEXT (e.g. `data diff`,
//! `frames`), for profiling one cell: `perf record -g target/release/growth 1 100000 -`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use tensorfmt::diff::{compare, DiffOptions};
use tensorfmt::{Format, Order, Tensor, TensorFile, WriteOptions};

fn quick() -> WriteOptions {
    WriteOptions {
        skip_fsync: true,
        ..WriteOptions::default()
    }
}

/// Seconds of CPU time this process has used (all threads).
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Seconds of one run of `f`: wall time, or CPU time with `GROWTH_CPU=1` (on a loaded
/// machine wall time charges long runs with other processes' time slices; the anchors
/// then report `time.process_time()` too).
fn once(f: &mut dyn FnMut()) -> f64 {
    if std::env::var_os("GROWTH_CPU").is_some() {
        let t = cpu_seconds();
        f();
        return cpu_seconds() - t;
    }
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

/// Min and median of a sample.
fn min_median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

/// The Python anchor `op` on `input` (writing `output`), timed inside Python over one
/// run; `None` when no Python is configured or the anchor fails.
fn anchor(python: &Option<PathBuf>, op: &str, input: &Path, output: &Path) -> Option<f64> {
    let py = python.as_ref()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/anchors.py");
    let out = Command::new(py)
        .arg(&script)
        .arg(op)
        .arg(input)
        .arg(output)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "anchor {op} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn tensors(format: Format, n: usize) -> Vec<(String, Tensor)> {
    (0..n)
        .map(|i| {
            let name = match format {
                Format::Caffe => format!("layer{i:06}/0"),
                Format::Primitiv => format!("p{i:06}"),
                _ => format!("t{i:06}"),
            };
            let v: Vec<f32> = (0..256).map(|j| (i * 256 + j) as f32 * 1e-3).collect();
            (
                name,
                Tensor::from_vec(v, [16, 16], Order::RowMajor).unwrap(),
            )
        })
        .collect()
}

/// One size of a row: n, our min and median, the anchor's min and median, and the
/// 1-minute load average when the cell was done.
type Cell = (usize, f64, f64, Option<(f64, f64)>, String);

struct Row {
    label: String,
    sizes: Vec<Cell>,
}

impl Row {
    fn print(&self) {
        let mut line = format!("| {} |", self.label);
        for (k, (n, min, med, anchor, load)) in self.sizes.iter().enumerate() {
            line.push_str(&format!(" {n}: {:.1} / {:.1} ms", min * 1e3, med * 1e3));
            if let Some((amin, amed)) = anchor {
                line.push_str(&format!(
                    " (anchor {:.1} / {:.1} ms, ratio {:.2} / {:.2})",
                    amin * 1e3,
                    amed * 1e3,
                    min / amin,
                    med / amed
                ));
            }
            if k > 0 {
                let (n0, t0) = (self.sizes[k - 1].0, self.sizes[k - 1].1);
                let e = (min / t0).ln() / (*n as f64 / n0 as f64).ln();
                line.push_str(&format!(", exponent {e:.2}"));
            }
            line.push_str(&format!(", load {load} |"));
        }
        println!("{line}");
    }
}

/// Whether the row `label` runs (`GROWTH_ONLY` unset, or a part of the label).
fn selected(label: &str) -> bool {
    std::env::var("GROWTH_ONLY").map_or(true, |only| label.contains(&only))
}

/// The 1-minute load average.
fn load_now() -> String {
    load_average()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string()
}

/// The Done-when checks of issue 27 over every row measured: the exponent of min
/// times from 10k to 100k tensors (and from 100k to 300k frames) is at most 1.15, and
/// each conversion with an anchor at 10k tensors is within 2x of it (ratio of the
/// minima <= 2). Prints one line per failing cell and a verdict.
fn verdict(rows: &[Row]) -> bool {
    let mut ok = true;
    let mut worst: Option<(f64, &str)> = None;
    for r in rows {
        for w in r.sizes.windows(2) {
            let ((n0, t0), (n1, t1)) = ((w[0].0, w[0].1), (w[1].0, w[1].1));
            // Below a millisecond (opening a movie: constant) the ratio is noise.
            if n0 < 10_000 || t1 < 1e-3 {
                continue;
            }
            let e = (t1 / t0).ln() / (n1 as f64 / n0 as f64).ln();
            if worst.is_none_or(|(x, _)| e > x) {
                worst = Some((e, &r.label));
            }
            if e > 1.15 {
                ok = false;
                println!("MISS: {} {n0} -> {n1}: exponent {e:.2} > 1.15", r.label);
            }
        }
        if r.label.contains("convert") {
            for (n, min, _, anchor, _) in &r.sizes {
                if let (10_000, Some((amin, _))) = (*n, anchor) {
                    if min / amin > 2.0 {
                        ok = false;
                        println!(
                            "MISS: {} at 10000: ratio {:.2} to the anchor > 2",
                            r.label,
                            min / amin
                        );
                    }
                }
            }
        }
    }
    if let Some((e, label)) = worst {
        println!("largest exponent from 10k up: {e:.2} ({label})");
    }
    println!(
        "verdict: {}",
        if ok {
            "OK (exponents from 10k up <= 1.15, 10k conversions within 2x of the anchors)"
        } else {
            "MISS (see above)"
        }
    );
    ok
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let repeat: usize = args.first().map(|s| s.parse()).transpose()?.unwrap_or(5);
    let repeat = repeat.max(1);
    let max_n: usize = args
        .get(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(100_000);
    let python = match args.get(2).map(String::as_str) {
        Some("-") => None,
        Some(p) => Some(PathBuf::from(p)),
        None => Some(PathBuf::from("target/py-venv/bin/python")).filter(|p| p.exists()),
    };
    let dir = tempfile::tempdir()?;
    println!(
        "growth: {repeat} runs per cell (min / median), load average before: {}",
        load_average()
    );
    let sizes: Vec<usize> = [1_000, 10_000, 100_000]
        .into_iter()
        .filter(|&n| n <= max_n)
        .collect();
    let mut all: Vec<Row> = Vec::new();
    for (format, ext) in [
        (Format::Npz, "npz"),
        (Format::Safetensors, "safetensors"),
        (Format::Primitiv, "data"),
        (Format::Caffe, "caffemodel"),
    ] {
        let ops = [
            "open",
            "load",
            "inspect",
            "convert -> safetensors",
            "convert -> npz",
            "diff",
        ];
        let mut rows: Vec<Row> = ops
            .iter()
            .map(|op| Row {
                label: format!("{ext} {op}"),
                sizes: Vec::new(),
            })
            .collect();
        if !rows.iter().any(|r| selected(&r.label)) {
            continue;
        }
        for &n in &sizes {
            let src = dir.path().join(format!("src{n}.{ext}"));
            let copy = dir.path().join(format!("copy{n}.{ext}"));
            let named = tensors(format, n);
            tensorfmt::save(&src, format, &named, &quick())?;
            tensorfmt::save(&copy, format, &named, &quick())?;
            drop(named);
            let out_st = dir.path().join("out.safetensors");
            let out_npz = dir.path().join("out.npz");
            for (i, op) in ops.iter().enumerate() {
                if !selected(&rows[i].label) {
                    continue;
                }
                let mut ours = Vec::new();
                let mut theirs = Vec::new();
                let anchor_op = match (format, *op) {
                    (Format::Npz, "open") => Some("npz-open"),
                    (Format::Safetensors, "open") => Some("safetensors-open"),
                    (Format::Npz, "convert -> safetensors") => Some("npz-to-safetensors"),
                    (Format::Safetensors, "convert -> npz") => Some("safetensors-to-npz"),
                    (Format::Npz, "load") => Some("npz-load"),
                    (Format::Safetensors, "load") => Some("safetensors-load"),
                    (Format::Caffe, "load") => Some("caffemodel-load"),
                    (Format::Caffe, "convert -> safetensors") => Some("caffemodel-to-safetensors"),
                    _ => None,
                };
                for _ in 0..repeat {
                    ours.push(once(&mut || {
                        let doc = tensorfmt::open(&src, &Default::default()).unwrap();
                        let names: Vec<String> =
                            doc.tensors().into_iter().map(|i| i.name).collect();
                        match *op {
                            "open" => assert_eq!(names.len(), n),
                            "load" => {
                                for name in &names {
                                    doc.read_tensor(name).unwrap();
                                }
                            }
                            "inspect" => {
                                let _ = doc.header();
                                for name in &names {
                                    doc.stats(name).unwrap();
                                }
                            }
                            "convert -> safetensors" => {
                                doc.convert_to_with(
                                    &out_st,
                                    Format::Safetensors,
                                    Some(&names),
                                    &quick(),
                                )
                                .unwrap();
                            }
                            "convert -> npz" => {
                                doc.convert_to_with(&out_npz, Format::Npz, Some(&names), &quick())
                                    .unwrap();
                            }
                            _ => {
                                let other = tensorfmt::open(&copy, &Default::default()).unwrap();
                                let r =
                                    compare(doc.as_ref(), other.as_ref(), &DiffOptions::default())
                                        .unwrap();
                                assert!(r.is_equal());
                            }
                        }
                    }));
                    if let Some(a) = anchor_op {
                        let out = if a.ends_with("npz") {
                            &out_npz
                        } else {
                            &out_st
                        };
                        if let Some(t) = anchor(&python, a, &src, out) {
                            theirs.push(t);
                        }
                    }
                }
                let (min, med) = min_median(ours);
                let anchor = (!theirs.is_empty()).then(|| min_median(theirs));
                rows[i].sizes.push((n, min, med, anchor, load_now()));
            }
        }
        for r in rows.iter().filter(|r| !r.sizes.is_empty()) {
            r.print();
        }
        all.extend(rows);
    }
    // Frames: dense PVP movies of small frames.
    let frame_counts: Vec<usize> = [1_000, 10_000, 100_000, 300_000]
        .into_iter()
        .filter(|&n| n <= max_n.max(1_000) * 3)
        .collect();
    let mut rows: Vec<Row> = [
        "pvp open (frames)",
        "pvp convert -> npz (frames)",
        "pvp convert -> safetensors (frames)",
    ]
    .iter()
    .map(|l| Row {
        label: l.to_string(),
        sizes: Vec::new(),
    })
    .collect();
    let frame_counts = if rows.iter().any(|r| selected(&r.label)) {
        frame_counts
    } else {
        Vec::new()
    };
    for &frames in &frame_counts {
        let src = dir.path().join(format!("movie{frames}.pvp"));
        let v: Vec<f32> = (0..frames * 64).map(|i| (i % 97) as f32).collect();
        let values = Tensor::from_vec(v, [frames, 8, 8, 1], Order::RowMajor)?;
        tensorfmt::save(&src, Format::Pvp, &[("values".into(), values)], &quick())?;
        for (i, target) in [None, Some(Format::Npz), Some(Format::Safetensors)]
            .into_iter()
            .enumerate()
        {
            if !selected(&rows[i].label) {
                continue;
            }
            let out = dir.path().join(match target {
                Some(Format::Npz) => "movie.npz",
                _ => "movie.safetensors",
            });
            let mut ours = Vec::new();
            for _ in 0..repeat {
                ours.push(once(&mut || {
                    let doc = tensorfmt::open(&src, &Default::default()).unwrap();
                    if let Some(f) = target {
                        let names: Vec<String> =
                            doc.tensors().into_iter().map(|i| i.name).collect();
                        doc.convert_to_with(&out, f, Some(&names), &quick())
                            .unwrap();
                    }
                }));
            }
            let (min, med) = min_median(ours);
            rows[i].sizes.push((frames, min, med, None, load_now()));
        }
    }
    for r in rows.iter().filter(|r| !r.sizes.is_empty()) {
        r.print();
    }
    all.extend(rows);
    println!("load average after: {}", load_average());
    verdict(&all);
    Ok(())
}
