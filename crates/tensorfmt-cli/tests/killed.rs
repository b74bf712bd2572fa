//! A conversion killed at any moment leaves the output name either absent (or, when
//! it existed, holding the old file untouched) or holding a complete file that
//! validates: never a half-written file. The input is a ~200 MiB `.npy` generated
//! here; the child is killed with SIGKILL after several delays.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tensorfmt::{DType, Format, Order, ReadOptions, Tensor};

const ROWS: usize = 51_200;
const COLS: usize = 1024; // 51200 x 1024 f32 = 200 MiB

/// Writes a `[ROWS, COLS]` f32 npy file (numpy's v1 header) in large blocks.
fn big_npy(path: &Path) {
    let header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({ROWS}, {COLS}), }}");
    let total = 10 + header.len() + 1;
    let padded = header + &" ".repeat(total.next_multiple_of(64) - total) + "\n";
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    f.write_all(b"\x93NUMPY\x01\x00").unwrap();
    f.write_all(&(padded.len() as u16).to_le_bytes()).unwrap();
    f.write_all(padded.as_bytes()).unwrap();
    let mut block = Vec::with_capacity(COLS * 4 * 64);
    for r in 0..ROWS {
        for c in 0..COLS {
            block.extend_from_slice(&((r * 7 + c) as f32 * 0.25).to_le_bytes());
        }
        if block.len() >= COLS * 4 * 64 {
            f.write_all(&block).unwrap();
            block.clear();
        }
    }
    f.write_all(&block).unwrap();
    f.flush().unwrap();
}

/// A small valid file of the target format (the "old" output).
fn old_target(path: &Path, format: Format) -> Vec<u8> {
    let t = Tensor::from_vec(vec![1f32, 2.0, 3.0], [3], Order::RowMajor).unwrap();
    tensorfmt::save(path, format, &[("old".into(), t)], &Default::default()).unwrap();
    std::fs::read(path).unwrap()
}

/// What is at `target` now: nothing, the old bytes, or a complete new file.
fn classify(target: &Path, old: Option<&[u8]>) -> &'static str {
    let Ok(meta) = std::fs::metadata(target) else {
        assert!(old.is_none(), "the old target vanished");
        return "absent";
    };
    if let Some(old) = old {
        if meta.len() == old.len() as u64 && std::fs::read(target).unwrap() == old {
            return "old";
        }
    }
    let f = tensorfmt::open(target, &ReadOptions::default())
        .unwrap_or_else(|e| panic!("half file at {}: {e}", target.display()));
    f.validate()
        .unwrap_or_else(|e| panic!("half file at {}: {e}", target.display()));
    let infos = f.tensors();
    assert_eq!(infos.len(), 1);
    assert_eq!(infos[0].dtype, DType::F32);
    assert_eq!(infos[0].shape.dims(), &[ROWS, COLS]);
    // Spot-check the last row (a file cut short would not get here, but be sure).
    let t = f.read_tensor(&infos[0].name).unwrap();
    let last = t
        .slice_outer(ROWS - 1, ROWS)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(last[COLS - 1], ((ROWS - 1) * 7 + COLS - 1) as f32 * 0.25);
    "new"
}

fn kill_after(input: &Path, target: &Path, delay: Duration, force: bool) -> bool {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("tensorfmt"));
    cmd.arg("convert").arg(input).arg(target).arg("--quiet");
    if force {
        cmd.arg("--force");
    }
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while start.elapsed() < delay {
        if child.try_wait().unwrap().is_some() {
            return true; // finished before the kill
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let status = child.wait().unwrap();
    status.success()
}

fn killed_conversions(ext: &str, format: Format) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.npy");
    big_npy(&input);
    assert_eq!(
        std::fs::metadata(&input).unwrap().len(),
        128 + (ROWS * COLS * 4) as u64
    );
    let delays = [0, 30, 100, 250, 500, 900, 1500, 2500];
    let mut seen = Vec::new();
    for (i, ms) in delays.into_iter().enumerate() {
        // Without an existing target.
        let target: PathBuf = dir.path().join(format!("out{i}.{ext}"));
        let finished = kill_after(&input, &target, Duration::from_millis(ms), false);
        let state = classify(&target, None);
        if finished {
            assert_eq!(state, "new");
        }
        seen.push(state);
        // Over an existing target (--force).
        let old_path = dir.path().join(format!("old{i}.{ext}"));
        let old = old_target(&old_path, format);
        let finished = kill_after(&input, &old_path, Duration::from_millis(ms), true);
        let state = classify(&old_path, Some(&old));
        assert_ne!(state, "absent");
        if finished {
            assert_eq!(state, "new");
        }
        seen.push(state);
        // Leftover temporary files are the only other debris; remove them so the
        // disk does not fill up.
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().unwrap().to_str().unwrap().ends_with(".tmp") {
                std::fs::remove_file(p).unwrap();
            }
        }
        for p in [&target, &old_path] {
            let _ = std::fs::remove_file(p);
        }
    }
    // A conversion left alone completes.
    let target = dir.path().join(format!("whole.{ext}"));
    assert!(kill_after(&input, &target, Duration::from_secs(600), false));
    assert_eq!(classify(&target, None), "new");
    eprintln!("{ext}: states after kills at {delays:?} ms: {seen:?}");
}

#[test]
fn killed_npz_conversion_never_leaves_a_half_file() {
    killed_conversions("npz", Format::Npz);
}

#[test]
fn killed_safetensors_conversion_never_leaves_a_half_file() {
    killed_conversions("safetensors", Format::Safetensors);
}
