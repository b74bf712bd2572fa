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
