//! Faults from outside (issue 15): an input truncated while `convert` reads it, a killed
//! writer's temporary file, a full disk.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tensorfmt::pvp::write::DenseWriter;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tensorfmt")
}

/// A dense PVP movie of about `mib` MiB.
fn movie(path: &Path, mib: usize) {
    let (nx, ny, nf) = (256, 256, 4);
    let frame: Vec<f32> = (0..nx * ny * nf).map(|i| (i % 97) as f32).collect();
    let frames = (mib << 20) / (frame.len() * 4);
    let f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = DenseWriter::new(f, nx, ny, nf).unwrap();
    for k in 0..frames {
        w.write_frame(k as f64, &frame).unwrap();
    }
    w.finish().unwrap();
}

fn temporaries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tmp"))
        .collect()
}

#[test]
fn an_input_truncated_during_convert_is_an_error_not_a_bus_error() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("movie.pvp");
    let out = dir.path().join("movie.npz");
    let mut changed = 0;
    for delay_ms in [0u64, 20, 60, 150, 400] {
        movie(&input, 96);
        std::fs::write(&out, b"previous output").unwrap();
        let child = Command::new(bin())
            .args(["convert", "--force", "--quiet"])
            .arg(&input)
            .arg(&out)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let len = std::fs::metadata(&input).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&input)
            .unwrap()
            .set_len(len / 3)
            .unwrap();
        let result = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&result.stderr);
        assert_eq!(
            result.status.signal(),
            None,
            "delay {delay_ms}: killed by a signal; {err}"
        );
        match result.status.code() {
            Some(0) => {
                // Finished before the truncation: a whole, readable output.
                let doc = tensorfmt::Document::open(&out).unwrap();
                doc.validate().unwrap();
            }
            Some(1) => {
                assert!(
                    err.contains("movie.pvp")
                        && (err.contains("changed") || err.contains("truncated")),
                    "delay {delay_ms}: {err}"
                );
                // The previous output is intact.
                assert!(
                    std::fs::read(&out).unwrap() == b"previous output",
                    "delay {delay_ms}: the previous output was replaced; {err}"
                );
                if err.contains("changed") {
                    changed += 1;
                }
            }
            other => panic!("delay {delay_ms}: exit {other:?}: {err}"),
        }
        assert!(
            temporaries(dir.path()).is_empty(),
            "delay {delay_ms}: {:?}",
            temporaries(dir.path())
        );
    }
    assert!(
        changed > 0,
        "no run saw the input change (all finished first or failed at open)"
    );
}

#[test]
fn a_killed_writers_temporary_is_removed_by_the_next_write_a_live_ones_is_not() {
    let dir = tempfile::tempdir().unwrap();
    // A process that has exited: its pid is free (and not ours).
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = dir.path().join(format!(".out.npz.{dead}.0.tmp"));
    std::fs::write(&stale, vec![0u8; 1000]).unwrap();
    // A live writer: this test process.
    let live = dir
        .path()
        .join(format!(".out.npz.{}.7.tmp", std::process::id()));
    std::fs::write(&live, b"in progress").unwrap();
    let other_target = dir.path().join(format!(".other.npz.{dead}.0.tmp"));
    std::fs::write(&other_target, b"x").unwrap();
    let out = dir.path().join("out.npz");
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/core/mixed.npz");
    let status = Command::new(bin())
        .args(["convert", "--quiet"])
        .arg(&input)
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(!stale.exists(), "the killed writer's temporary is gone");
    assert!(live.exists(), "a live writer's temporary is never removed");
    assert!(
        other_target.exists(),
        "other targets' temporaries are not ours to clean"
    );
}

#[test]
fn a_full_disk_names_the_output_and_keeps_the_old_one() {
    let ok = Command::new("unshare")
        .args(["-rm", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPING full-disk test: cannot create a mount namespace (unshare -rm) here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.pvp");
    movie(&input, 6);
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    for (to, name) in [
        ("npz", "out.npz"),
        ("safetensors", "out.safetensors"),
        ("pvp", "out.pvp"),
    ] {
        let script = format!(
            "mount -t tmpfs -o size=2m tmpfs {mnt} && printf previous > {mnt}/{name} && \
             {bin} convert --force --quiet --to {to} {input} {mnt}/{name}; code=$?; \
             cat {mnt}/{name}; echo; ls -a {mnt}; exit $code",
            mnt = mnt.display(),
            bin = bin(),
            input = input.display(),
        );
        let out = Command::new("unshare")
            .args(["-rm", "sh", "-c", &script])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{to}: {err}");
        assert!(
            err.contains(&format!("{}/{name}", mnt.display())) && err.contains("No space left"),
            "{to}: the error names the output: {err}"
        );
        assert!(
            err.contains("writing"),
            "{to}: the error names the operation: {err}"
        );
        assert!(
            !err.contains("ZipWriter"),
            "{to}: nothing printed from destructors: {err}"
        );
        assert!(
            stdout.starts_with("previous"),
            "{to}: old output intact: {stdout}"
        );
        assert!(
            !stdout.contains(".tmp"),
            "{to}: no temporary left: {stdout}"
        );
    }
}
