//! `convert --dense` and `convert --like ORIGINAL` (issue 23 items 5 and 7).

mod common;

use common::{testdata, tf};
use tensorfmt::{Document, Format, TensorFile};

#[test]
fn like_writes_into_the_original_structure() {
    let dir = tempfile::tempdir().unwrap();
    let orig = testdata("caffe", "v1_legacy.caffemodel");
    // The tensors alone, as a numpy user would save them (no metadata).
    let tensors = Document::open(&orig).unwrap().read_all().unwrap();
    let plain = dir.path().join("plain.safetensors");
    tensorfmt::save(&plain, Format::Safetensors, &tensors, &Default::default()).unwrap();
    let out = dir.path().join("out.caffemodel");
    let (code, out_text, err) = tf(args!["convert", &plain, &out, "--like", &orig]);
    assert_eq!(code, 0, "{out_text}{err}");
    // Everything comes back, header (net name, layer types, V1 layers) included.
    let (code, text, err) = tf(args!["diff", &orig, &out]);
    assert_eq!(code, 0, "{text}{err}");
    // Without --like the weights-only write differs in the header.
    let weights_only = dir.path().join("w.caffemodel");
    assert_eq!(tf(args!["convert", &plain, &weights_only]).0, 0);
    assert_eq!(tf(args!["diff", &orig, &weights_only]).0, 1);
    // A misfit is refused and leaves nothing.
    let other = testdata("caffe", "v2_tiny.caffemodel");
    let bad = dir.path().join("bad.caffemodel");
    let (code, _, err) = tf(args!["convert", &plain, &bad, "--like", &other]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("like="), "{err}");
    assert!(!bad.exists());
}

#[test]
fn dense_is_asked_for_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let src = testdata("pvp", "sparse_values_dt3.pvp");
    let sparse = dir.path().join("s.npz");
    let (code, text, err) = tf(args!["convert", &src, &sparse]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("wrote 6 tensors"), "{text}");
    let names: Vec<String> = Document::open(&sparse)
        .unwrap()
        .tensors()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert!(names.contains(&"indptr".to_string()), "{names:?}");
    let dense = dir.path().join("d.npz");
    assert_eq!(tf(args!["convert", &src, &dense, "--dense"]).0, 0);
    let d = Document::open(&dense).unwrap();
    assert!(d.tensors().iter().any(|i| i.name == "values"));
    // The original and both outputs diff equal.
    assert_eq!(tf(args!["diff", &src, &sparse]).0, 0);
    assert_eq!(tf(args!["diff", &src, &dense, "--tensors-only"]).0, 0);
}

/// `--sparse` to npz or safetensors is the sparse layout they get by default (scipy's
/// `save_npz` members with `shape` and `frame_shape`, and the carried original): it
/// used to write a bare CSR triple that lost the frame shape, so converting it back
/// made a PVP file of the wrong geometry with exit 0.
#[test]
fn sparse_to_npz_keeps_the_frame_shape() {
    let dir = tempfile::tempdir().unwrap();
    let src = testdata("pvp", "sparse_values_dt4.pvp");
    for ext in ["npz", "safetensors"] {
        let csr = dir.path().join(format!("e.{ext}"));
        let (code, _, err) = tf(args!["convert", &src, &csr, "--sparse"]);
        assert_eq!(code, 0, "{err}");
        let names = Document::open(&csr).unwrap().names();
        assert!(names.iter().any(|n| n == "frame_shape"), "{ext}: {names:?}");
        let back = dir.path().join(format!("back_{ext}.pvp"));
        let (code, _, err) = tf(args!["convert", &csr, &back]);
        assert_eq!(code, 0, "{err}");
        let (code, text, err) = tf(args!["diff", &src, &back]);
        assert_eq!(code, 0, "{ext}: {text}{err}");
    }
}
