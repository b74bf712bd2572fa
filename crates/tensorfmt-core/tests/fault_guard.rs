//! The fault guard (issue 15): a mapped input that shrinks under us reads as zeros
//! instead of killing the process, and no output written meanwhile is published.
//!
//! Its own test binary: a guarded fault makes every `AtomicFile` of the process that was
//! open at the time refuse to commit, which would disturb unrelated tests running
//! concurrently in a shared binary.

use std::io::Write;

use tensorfmt_core::io::{guarded_faults, map_file, AtomicFile};
use tensorfmt_core::Error;

#[test]
fn a_shrinking_input_reads_zeros_and_blocks_commits() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bin");
    std::fs::write(&input, vec![7u8; 4 * 4096]).unwrap();
    let mapped = map_file(&input).unwrap();
    assert!(mapped.iter().all(|&b| b == 7));

    let out = dir.path().join("out.bin");
    std::fs::write(&out, b"previous output").unwrap();
    let mut w = AtomicFile::create(&out).unwrap();
    let before = guarded_faults();
    // Another process (here: us, through another handle) truncates the input.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&input)
        .unwrap()
        .set_len(4096)
        .unwrap();
    // Without the guard this read is a SIGBUS.
    let tail = mapped.slice(2 * 4096..3 * 4096);
    assert!(tail.iter().all(|&b| b == 0), "vanished pages read as zeros");
    assert!(guarded_faults() > before);
    // The page that is still in the file reads as before.
    assert!(mapped[..4096].iter().all(|&b| b == 7));

    w.write_all(&tail).unwrap();
    let err = w.commit().unwrap_err();
    assert!(matches!(err, Error::InputChanged { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("in.bin") && msg.contains("changed"), "{msg}");
    // The previous output is intact and no temporary file is left.
    assert_eq!(std::fs::read(&out).unwrap(), b"previous output");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");

    // A write that starts after the fault commits normally.
    let mut w = AtomicFile::create(&out).unwrap();
    w.write_all(b"new").unwrap();
    w.commit().unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), b"new");
}

#[test]
fn faults_outside_our_mappings_are_not_swallowed() {
    // A child process faults on a mapping we never registered: it must still die of
    // SIGBUS (the guard hands the fault to the default action), not read zeros.
    if std::env::var("TENSORFMT_FAULT_CHILD").is_ok() {
        tensorfmt_core::io::install_fault_guard();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.bin");
        std::fs::write(&p, vec![1u8; 8192]).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        // SAFETY: test-only: a mapping the guard does not know, truncated on purpose to
        // check that its fault still ends the process.
        let m = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(0)
            .unwrap();
        let v = std::hint::black_box(m[4096]);
        println!("read {v} without a fault");
        std::process::exit(0);
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "faults_outside_our_mappings_are_not_swallowed",
            "--exact",
            "--nocapture",
        ])
        .env("TENSORFMT_FAULT_CHILD", "1")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGBUS), "{out:?}");
}
