//! Issue 24: safe on any tree and any terminal. Real temporary trees with symlink
//! loops, FIFOs, colliding outputs, inputs in the output directory, hostile names and
//! signals sent to child processes.

mod common;

use std::io::Read;
use std::os::unix::fs::symlink;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{testdata, tf};

fn bin() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin!("tensorfmt"))
}

/// Waits for `child` at most `secs` seconds; kills it (and fails) when it hangs.
fn wait_within(mut child: Child, secs: u64, what: &str) -> (i32, String, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut so = String::new();
            let mut se = String::new();
            if let Some(mut o) = child.stdout.take() {
                o.read_to_string(&mut so).unwrap();
            }
            if let Some(mut e) = child.stderr.take() {
                e.read_to_string(&mut se).unwrap();
            }
            assert!(!se.contains("panicked"), "{what}: {se}");
            return (status.code().unwrap_or(-1), so, se);
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {secs} s (hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `tensorfmt ARGS` with a time limit (output collected through files, so a
/// large output cannot block the child).
fn run_within(args: Vec<std::ffi::OsString>, secs: u64) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let (o, e) = (dir.path().join("out"), dir.path().join("err"));
    let child = bin()
        .args(&args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap())
        .spawn()
        .unwrap();
    let (code, _, _) = wait_within(child, secs, &format!("{args:?}"));
    let so = String::from_utf8_lossy(&std::fs::read(&o).unwrap()).into_owned();
    let se = String::from_utf8_lossy(&std::fs::read(&e).unwrap()).into_owned();
    assert!(!se.contains("panicked"), "{se}");
    (code, so, se)
}

/// A safetensors file holding one f32 `[2]` tensor per name.
fn safetensors(path: &Path, names: &[&str]) {
    let mut header = serde_json::Map::new();
    for (k, n) in names.iter().enumerate() {
        header.insert(
            n.to_string(),
            serde_json::json!({"dtype": "F32", "shape": [2], "data_offsets": [8 * k, 8 * k + 8]}),
        );
    }
    let mut text = serde_json::to_string(&header).unwrap();
    while !text.len().is_multiple_of(8) {
        text.push(' ');
    }
    let mut bytes = (text.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(text.as_bytes());
    for k in 0..names.len() {
        bytes.extend_from_slice(&(k as f32).to_le_bytes());
        bytes.extend_from_slice(&1.5f32.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if !e.file_name().to_string_lossy().starts_with('.') {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

// ---- 1. no panic on long names; every text column bounded ----

#[test]
fn a_name_over_65535_bytes_is_printed_bounded_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let long = "n".repeat(70_000);
    let f = dir.path().join("long.safetensors");
    safetensors(&f, &[&long, "short"]);
    std::fs::copy(testdata("core", "f32_2x3.npy"), dir.path().join("z.npy")).unwrap();
    for extra in [&[][..], &["--stats"][..]] {
        let mut a = args!["inspect", f];
        a.extend(extra.iter().map(std::ffi::OsString::from));
        let (code, out, err) = run_within(a.clone(), 30);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("short"), "{out}");
        assert!(out.contains("(70000 bytes)"), "{out}");
        assert!(out.lines().all(|l| l.len() < 400), "an unbounded line");
    }
    // `inspect -r` goes on past it.
    let (code, out, err) = run_within(args!["inspect", "-r", dir.path().as_os_str()], 30);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("f32_2x3") || out.contains("z.npy"), "{out}");
    // To npz (whose member names have 16-bit lengths): a clean error, no zip noise.
    let npz = dir.path().join("long.npz");
    let (code, _, err) = run_within(args!["convert", f, npz], 30);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("65,535") && !err.contains("ZipWriter"),
        "{err}"
    );
    assert!(!npz.exists());
    // JSON keeps the whole name.
    let (code, out, _) = run_within(args!["inspect", "--json", f.as_os_str()], 30);
    assert_eq!(code, 0);
    assert!(out.contains(&long));
    // The same for a caffemodel's layer and a primitiv model's parameter (the panic was
    // the same column width for every format).
    let t = tensorfmt::Tensor::from_vec(vec![1f32, 2.0], [2], tensorfmt::Order::RowMajor).unwrap();
    for (format, file, name, short) in [
        (
            tensorfmt::Format::Caffe,
            "long.caffemodel",
            format!("{long}/0"),
            "short/0",
        ),
        (
            tensorfmt::Format::Primitiv,
            "long.data",
            long.clone(),
            "short",
        ),
    ] {
        let p = dir.path().join(file);
        let tensors = [(name.clone(), t.clone()), (short.to_string(), t.clone())];
        tensorfmt::save(&p, format, &tensors, &Default::default()).unwrap();
        for extra in [&[][..], &["--stats"][..]] {
            let mut a = args!["inspect", &p];
            a.extend(extra.iter().map(std::ffi::OsString::from));
            let (code, out, err) = run_within(a, 30);
            assert_eq!(code, 0, "{file}: {err}");
            assert!(
                out.contains(&format!("({} bytes)", name.len())),
                "{file}: {out}"
            );
            assert!(
                out.lines().all(|l| l.len() < 400),
                "{file}: an unbounded line"
            );
        }
    }
}

// ---- 4. symlink loops and special files ----

#[test]
fn symlink_loops_are_walked_once_and_fifos_are_refused_not_opened() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::copy(testdata("core", "f32_2x3.npy"), tree.join("a.npy")).unwrap();
    std::fs::copy(testdata("core", "mixed.npz"), tree.join("sub/b.npz")).unwrap();
    symlink(".", tree.join("loop1")).unwrap();
    symlink(".", tree.join("loop2")).unwrap();
    symlink("..", tree.join("sub/up")).unwrap();
    mkfifo(&tree.join("m.npy"));

    let (code, out, err) = run_within(args!["validate", "-r", tree.as_os_str()], 30);
    assert_eq!(code, 1, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "each file once: {out}");
    assert!(
        out.contains("a.npy: ok") && out.contains("b.npz: ok"),
        "{out}"
    );
    assert!(
        out.contains("m.npy: error:") && out.contains("not a regular file"),
        "{out}"
    );

    let dst = dir.path().join("out");
    let (code, out, err) = run_within(
        args![
            "convert",
            "-r",
            tree.as_os_str(),
            dst.as_os_str(),
            "--to",
            "safetensors"
        ],
        30,
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("not a regular file"), "{err}");
    let written = files_below(&dst);
    assert_eq!(
        written,
        vec![dst.join("a.safetensors"), dst.join("sub/b.safetensors")],
        "one output per file, none 40 links deep"
    );

    // A glob with `**` over the same loops ends too.
    let pattern = format!("{}/**/*.npy", tree.display());
    let (code, out, _) = run_within(args!["validate", &pattern], 30);
    assert_eq!(code, 1);
    assert_eq!(out.lines().count(), 2, "{out}");

    // One FIFO named on the command line: refused at once by every command.
    let fifo = tree.join("m.npy");
    for a in [
        args!["inspect", fifo],
        args!["validate", fifo],
        args!["convert", fifo, dst.join("m.npz")],
        args!["diff", fifo, tree.join("a.npy")],
    ] {
        let (code, out, err) = run_within(a.clone(), 20);
        assert!(code == 1 || code == 2, "{a:?}: {code} {out}{err}");
        assert!(
            format!("{out}{err}").contains("not a regular file"),
            "{a:?}: {out}{err}"
        );
    }
}

// ---- 2. an input is never an output ----

#[test]
fn inputs_are_never_outputs_whatever_the_path_text() {
    let dir = tempfile::tempdir().unwrap();
    let s2 = dir.path().join("s2");
    std::fs::create_dir(&s2).unwrap();
    std::fs::copy(testdata("core", "f32_2x3.npy"), s2.join("x.npy")).unwrap();
    std::fs::copy(testdata("core", "mixed.npz"), s2.join("x.npz")).unwrap();
    let mine = std::fs::read(s2.join("x.npz")).unwrap();
    for force in [false, true] {
        let mut cmd = bin();
        cmd.current_dir(dir.path())
            .args(["convert", "-r", "./s2", "s2", "--to", "npz", "-q"]);
        if force {
            cmd.arg("--force");
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(1), "force={force}");
        assert_eq!(
            std::fs::read(s2.join("x.npz")).unwrap(),
            mine,
            "force={force}: input rewritten"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is the input"), "{err}");
    }
    // One file onto itself by another spelling, even with --force.
    let out = bin()
        .current_dir(dir.path())
        .args(["convert", "s2/x.npz", "./s2/../s2/x.npz", "--force"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(s2.join("x.npz")).unwrap(), mine);
}

#[test]
fn existing_outputs_need_force_unless_they_are_our_own_earlier_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let dst = dir.path().join("dst");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&dst).unwrap();
    std::fs::copy(testdata("core", "f32_2x3.npy"), src.join("x.npy")).unwrap();
    std::fs::copy(testdata("core", "f64_be_3.npy"), src.join("y.npy")).unwrap();
    // The user's own dst/x.npz, newer than the input.
    std::fs::write(dst.join("x.npz"), b"mine, not yours").unwrap();
    let conv = |force: bool| {
        let mut a = args!["convert", "-r", src, dst, "--to", "npz"];
        if force {
            a.push("--force".into());
        }
        run_within(a.clone(), 30)
    };
    let (code, _, err) = conv(false);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("use --force"), "{err}");
    assert_eq!(
        std::fs::read(dst.join("x.npz")).unwrap(),
        b"mine, not yours"
    );
    assert!(dst.join("y.npz").is_file());
    // Rerun: our own y.npz is up to date (skipped), the user's file still refused.
    let (code, out, err) = conv(false);
    assert_eq!(code, 1);
    assert!(out.contains("y.npy: skipped"), "{out}{err}");
    // A changed input: our own output is converted again without --force.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::copy(testdata("core", "f32_2x3.npy"), src.join("y.npy")).unwrap();
    let (_, out, _) = conv(false);
    assert!(out.contains("y.npy -> "), "{out}");
    // Replaced by the user: no longer ours.
    std::fs::write(dst.join("y.npz"), b"edited").unwrap();
    std::thread::sleep(Duration::from_millis(20));
    std::fs::copy(testdata("core", "f64_be_3.npy"), src.join("y.npy")).unwrap();
    let (code, _, err) = conv(false);
    assert_eq!(code, 1);
    assert!(
        err.contains("y.npy: error") && err.contains("use --force"),
        "{err}"
    );
    assert_eq!(std::fs::read(dst.join("y.npz")).unwrap(), b"edited");
    let (code, _, err) = conv(true);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(dst.join("x.npz")).unwrap().starts_with(b"PK"));

    // A dangling symbolic link at a single output needs --force too.
    let link = dir.path().join("dangling.npz");
    symlink("nowhere/at/all", &link).unwrap();
    let (code, _, err) = tf(args!["convert", src.join("x.npy"), &link]);
    assert_eq!(code, 2, "{err}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let (code, _, err) = tf(args!["convert", src.join("x.npy"), &link, "--force"]);
    assert_eq!(code, 0, "{err}");
}

// ---- 3. colliding outputs ----

#[test]
fn colliding_outputs_are_found_before_writing_and_all_fail() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::copy(testdata("core", "f32_2x3.npy"), src.join("x.npy")).unwrap();
    std::fs::copy(
        testdata("core", "model.safetensors"),
        src.join("x.safetensors"),
    )
    .unwrap();
    std::fs::copy(testdata("core", "f32_2x3.npy"), src.join("a/y.npy")).unwrap();
    std::fs::copy(testdata("core", "f64_be_3.npy"), src.join("b/y.npy")).unwrap();
    std::fs::copy(testdata("core", "bf16_4.npy"), src.join("z.npy")).unwrap();
    let dst = dir.path().join("dst");
    for _ in 0..2 {
        let (code, out, err) = run_within(
            args![
                "convert",
                "-r",
                src.as_os_str(),
                dst.as_os_str(),
                "--to",
                "npz"
            ],
            30,
        );
        assert_eq!(code, 1, "{out}{err}");
        assert!(
            !dst.join("x.npz").exists(),
            "a colliding output was written"
        );
        assert!(
            err.contains("x.npy: error") && err.contains("x.safetensors: error"),
            "{err}"
        );
        assert!(err.contains("would also be the output of"), "{err}");
        assert!(dst.join("z.npz").is_file() && dst.join("a/y.npz").is_file());
    }
    // Two files named on the command line with one stem.
    let (code, _, err) = run_within(
        args![
            "convert",
            src.join("a/y.npy").as_os_str(),
            src.join("b/y.npy").as_os_str(),
            dir.path().join("flat").as_os_str(),
            "--to",
            "npz",
        ],
        30,
    );
    assert_eq!(code, 1, "{err}");
    assert!(!dir.path().join("flat/y.npz").exists());
}

// ---- 5. control characters never reach the terminal ----

#[test]
fn control_characters_are_escaped_in_every_text_output() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("t");
    std::fs::create_dir(&tree).unwrap();
    let evil = "a\u{1b}[31mred\nsplit\u{9b}";
    let f = tree.join("e\u{1b}[2Jvil.safetensors");
    safetensors(&f, &[evil, "plain"]);
    let g = tree.join("other.safetensors");
    safetensors(&g, &["plain", "x\u{1b}]0;title\u{7}"]);
    std::fs::write(tree.join("b\u{1b}[5mad.npy"), b"\x93NUMPY garbage").unwrap();
    let clean = |what: &str, out: &str, err: &str| {
        for s in [out, err] {
            assert!(
                !s.contains('\u{1b}') && !s.contains('\u{9b}') && !s.contains('\u{7}'),
                "{what}: {s:?}"
            );
        }
    };
    let (code, out, err) = run_within(args!["inspect", f.as_os_str()], 30);
    assert_eq!(code, 0, "{err}");
    clean("inspect", &out, &err);
    assert!(out.contains("\\u{1b}[31mred\\nsplit"), "{out}");
    let (_, out, err) = run_within(args!["inspect", "-r", tree.as_os_str()], 30);
    clean("inspect -r", &out, &err);
    let (_, out, err) = run_within(args!["validate", "-r", tree.as_os_str()], 30);
    clean("validate -r", &out, &err);
    assert_eq!(out.lines().count(), 3, "{out}");
    let (_, out, err) = run_within(args!["diff", f.as_os_str(), g.as_os_str()], 30);
    clean("diff", &out, &err);
    let dst = dir.path().join("out");
    let (_, out, err) = run_within(
        args![
            "convert",
            "-r",
            tree.as_os_str(),
            dst.as_os_str(),
            "--to",
            "npz"
        ],
        30,
    );
    clean("convert -r", &out, &err);
    let (code, out, err) = run_within(
        args!["inspect", tree.join("b\u{1b}[5mad.npy").as_os_str()],
        30,
    );
    assert_eq!(code, 1);
    clean("error message", &out, &err);
}

// ---- 7. a closed pipe does not hide failures; signals leave no temporaries ----

#[test]
fn a_closed_stdout_does_not_turn_a_failure_into_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(testdata("core", "f32_2x3.npy"), dir.path().join("a.npy")).unwrap();
    std::fs::write(dir.path().join("b.npy"), b"broken").unwrap();
    for args in [
        vec!["validate", "-r"],
        vec!["inspect", "-r"],
        vec!["validate", "-r", "--json"],
    ] {
        let mut child = bin()
            .args(&args)
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // `| head -0`: the reader is gone before any line
        let status = child.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(1),
            "{args:?}: a failed file must not exit 0"
        );
    }
}

/// A 192 MiB npy of zeros (sparse on disk).
fn big_zeros(path: &Path) {
    let rows = 48 * 1024;
    let header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, 1024), }}");
    let total = 10 + header.len() + 1;
    let padded = header + &" ".repeat(total.next_multiple_of(64) - total) + "\n";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    bytes.extend_from_slice(padded.as_bytes());
    let len = bytes.len() as u64 + rows as u64 * 1024 * 4;
    std::fs::write(path, &bytes).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn sigterm_and_sigint_remove_the_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.npy");
    big_zeros(&input);
    for (sig, name) in [(libc::SIGTERM, "TERM"), (libc::SIGINT, "INT")] {
        let out = dir.path().join(format!("out_{name}.npz"));
        let child = bin()
            .args([
                "convert",
                "--quiet",
                "--dtype",
                "f64",
                "--set",
                "compress=deflate",
            ])
            .arg(&input)
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as libc::pid_t;
        let start = Instant::now();
        while temporaries(dir.path()).is_empty() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no temporary file appeared"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(100));
        // SAFETY: signals our own child.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        let status = wait_for(child);
        assert_eq!(status.signal(), Some(sig), "dies of the signal: {status:?}");
        assert!(
            temporaries(dir.path()).is_empty(),
            "{:?}",
            temporaries(dir.path())
        );
        assert!(!out.exists());
    }
}

fn wait_for(mut child: Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("did not end after the signal");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
