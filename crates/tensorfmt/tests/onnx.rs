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

/// A model with a graph and an initializer whose type numpy has no dtype for (left out,
/// with a warning). Returns the model's bytes.
fn model_with_a_left_out_tensor() -> Vec<u8> {
    use prost::Message;
    use tensorfmt_onnx::proto::{
        tensor_proto::DataType, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    };
    let w = TensorProto {
        name: "w".into(),
        dims: vec![2],
        data_type: DataType::Float as i32,
        float_data: vec![1.0, 2.0],
        ..Default::default()
    };
    let s = TensorProto {
        name: "labels".into(),
        dims: vec![1],
        data_type: DataType::String as i32,
        string_data: vec![bytes::Bytes::from_static(b"cat")],
        ..Default::default()
    };
    let node = NodeProto {
        op_type: "Identity".into(),
        input: vec!["w".into()],
        output: vec!["y".into()],
        ..Default::default()
    };
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            name: "g".into(),
            node: vec![node],
            initializer: vec![w, s],
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

/// A copy with nothing asked keeps the whole model even when the reader left a tensor
/// out of its view (a string initializer): that is not a lenient reading to repair.
/// It used to write a weights-only model instead (graph and left-out tensor lost),
/// with a warning that said a copy keeps the whole model.
#[test]
fn a_model_with_left_out_tensors_is_copied_whole() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.onnx");
    std::fs::write(&src, model_with_a_left_out_tensor()).unwrap();
    let doc = Document::open(&src).unwrap();
    assert!(
        !doc.warnings().is_empty(),
        "the string tensor is left out with a warning"
    );
    let out = dir.path().join("copy.onnx");
    doc.convert_to(&out, Format::Onnx).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&src).unwrap());
}

/// To npz or safetensors, the graph is not carried: said, as it is for an ONNX
/// output that cannot be a copy.
#[test]
fn the_graph_left_behind_is_said_for_every_target() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.onnx");
    std::fs::write(&src, model_with_a_left_out_tensor()).unwrap();
    let doc = Document::open(&src).unwrap();
    for out in ["w.npz", "w.safetensors"] {
        let r = doc
            .convert_to(
                dir.path().join(out),
                Format::from_path(std::path::Path::new(out)).unwrap(),
            )
            .unwrap();
        assert!(
            r.warnings.iter().any(|w| w.contains("graph (1 node)")),
            "{out}: {:?}",
            r.warnings
        );
    }
}
