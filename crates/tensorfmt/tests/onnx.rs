//! ONNX through the facade: detection by content, initializers as tensors, conversion
//! of a Caffe model's weights to ONNX and of ONNX weights to safetensors.

use tensorfmt::{Document, Format};
use tensorfmt_core::testing::corpus_dir;

#[test]
fn onnx_is_detected_by_content_and_converts_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let t =
        tensorfmt::Tensor::from_vec(vec![1f32, 2.0, 3.0], [3], tensorfmt::Order::RowMajor).unwrap();
    // Named .bin: content wins over the extension.
    let p = dir.path().join("weights.bin");
    tensorfmt_onnx::save_tensors(&p, &[("fc.bias".into(), t.clone())], &Default::default())
        .unwrap();
    assert_eq!(tensorfmt::detect(&p).unwrap(), Format::Onnx);
    let doc = Document::open(&p).unwrap();
    assert_eq!(doc.file_format(), Format::Onnx);
    let st = dir.path().join("w.safetensors");
    doc.convert_to(&st, Format::Safetensors).unwrap();
    let back = Document::open(&st).unwrap();
    assert_eq!(back.entry("fc.bias").unwrap().read().unwrap(), t);
}

#[test]
fn caffe_weights_convert_to_onnx_initializers() {
    let Some(corpus) = corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lenet.onnx");
    let src = corpus.join("v2_lenet_iter_10000.caffemodel");
    let a = Document::open(&src).unwrap();
    a.convert_to(&out, Format::Onnx).unwrap();
    let b = Document::open(&out).unwrap();
    assert_eq!(b.file_format(), Format::Onnx);
    for name in ["conv1/0", "ip2/1"] {
        assert_eq!(
            a.entry(name).unwrap().read().unwrap(),
            b.entry(name).unwrap().read().unwrap(),
            "{name}"
        );
    }
}

/// Where an ONNX model keeps its payloads (inside, or in `NAME.onnx.data` beside it)
/// is storage, not content: the same weights saved both ways diff as equal.
#[test]
fn external_data_is_storage_not_a_difference() {
    use tensorfmt::diff::{compare, DiffOptions};
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<f32> = (0..1024).map(|i| i as f32).collect();
    let t = tensorfmt::Tensor::from_vec(big, [1024], tensorfmt::Order::RowMajor).unwrap();
    let tensors = [("fc.weight".to_string(), t)];
    let inside = dir.path().join("inside.onnx");
    let beside = dir.path().join("beside.onnx");
    tensorfmt_onnx::save_tensors(&inside, &tensors, &Default::default()).unwrap();
    let mut o = tensorfmt::WriteOptions::default();
    o.extra.insert("external_data".into(), "true".into());
    tensorfmt_onnx::save_tensors(&beside, &tensors, &o).unwrap();
    assert!(dir.path().join("beside.onnx.data").is_file());
    let a = tensorfmt::open(&inside, &Default::default()).unwrap();
    let b = tensorfmt::open(&beside, &Default::default()).unwrap();
    assert!(b.header().iter().any(|(k, _)| k == "external_data"));
    let r = compare(&a, &b, &DiffOptions::default()).unwrap();
    assert!(r.header.is_empty(), "{:?}", r.header);
    assert!(r.is_equal());
}
