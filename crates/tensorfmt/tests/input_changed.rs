//! A failed input stays failed (issue 23 item 8): once a document's mapped file shrank
//! under it (another process truncated it), every later call on that document raises
//! `InputChanged`, and no conversion of it commits output, even though the vanished
//! pages now read as zeros without faulting again.
//!
//! Its own test binary: a guarded fault makes every `AtomicFile` of the process that was
//! open at the time refuse to commit, which would disturb unrelated tests.

use tensorfmt::{open, Error, Format, Order, ReadOptions, Tensor, TensorFile};

fn truncate(path: &std::path::Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn changed<T: std::fmt::Debug>(r: tensorfmt::Result<T>, what: &str) {
    match r {
        Err(Error::InputChanged { path }) => assert!(path.contains("big.safetensors"), "{path}"),
        other => panic!("{what}: expected InputChanged, got {other:?}"),
    }
}

#[test]
fn every_call_after_an_input_change_fails() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("big.safetensors");
    let w = Tensor::from_vec(
        (0..1 << 20).map(|i| i as f32).collect::<Vec<_>>(),
        [1 << 20],
        Order::RowMajor,
    )
    .unwrap();
    let b = Tensor::from_vec(vec![1f32; 1 << 18], [1 << 18], Order::RowMajor).unwrap();
    tensorfmt::save(
        &src,
        Format::Safetensors,
        &[("w".into(), w), ("b".into(), b)],
        &Default::default(),
    )
    .unwrap();
    let doc = open(&src, &ReadOptions::default()).unwrap();
    truncate(&src, 4096);
    changed(doc.entry("w").unwrap().stats(), "first stats");
    // The vanished pages are zero pages now: a second pass would not fault again.
    changed(doc.entry("w").unwrap().stats(), "second stats");
    changed(doc.stats("b"), "stats of the other tensor");
    changed(doc.read_tensor("w"), "read");
    changed(doc.file().read_tensor("b"), "read through file()");
    changed((*doc).read_tensor("b"), "read through Deref");
    changed(doc.read_all(), "read_all");
    let out = dir.path().join("out.npz");
    std::fs::write(&out, b"previous").unwrap();
    changed(doc.convert_to(&out, Format::Npz), "convert");
    changed(
        doc.convert_to(&out, Format::Safetensors),
        "convert to its own format",
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"previous");
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["big.safetensors", "out.npz"]);

    // A document opened afterwards reads what the file now is (here: not a whole
    // safetensors file any more), and an unrelated document is not poisoned.
    assert!(open(&src, &ReadOptions::default()).is_err());
    let other = dir.path().join("other.npz");
    let t = Tensor::from_vec(vec![2f32; 8], [8], Order::RowMajor).unwrap();
    tensorfmt::save(&other, Format::Npz, &[("t".into(), t)], &Default::default()).unwrap();
    let ok = open(&other, &ReadOptions::default()).unwrap();
    assert_eq!(ok.stats("t").unwrap().sum, 16.0);
}
