//! Truncation sweep: a model with several initializers (raw_data and typed fields),
//! cut at every length. Each prefix must open to an error or to a consistent model
//! (protobuf can end at a field boundary), never panic.

use bytes::Bytes;
use prost::Message;
use tensorfmt_core::{Order, ReadOptions, Tensor};
use tensorfmt_onnx::proto::{ModelProto, NodeProto, TensorProto};
use tensorfmt_onnx::{read_model_file, weights_model, write_model};

fn model_bytes() -> Vec<u8> {
    let a = Tensor::from_vec(
        (0..24).map(|x| x as f32).collect(),
        [2, 3, 4],
        Order::RowMajor,
    )
    .unwrap();
    let b = Tensor::from_vec(vec![1i64, -2, 3], [3], Order::RowMajor).unwrap();
    let mut m: ModelProto = weights_model(&[("a".into(), a), ("b".into(), b)]).unwrap();
    let g = m.graph.as_mut().unwrap();
    g.initializer.push(TensorProto {
        name: "c".into(),
        dims: vec![2],
        data_type: 1,
        float_data: vec![0.5, 1.5],
        ..Default::default()
    });
    g.node.push(NodeProto {
        op_type: "Add".into(),
        input: vec!["a".into(), "a".into()],
        output: vec!["y".into()],
        ..Default::default()
    });
    let mut out = Vec::new();
    write_model(&mut out, &m).unwrap();
    assert_eq!(ModelProto::decode(out.as_slice()).unwrap(), m);
    out
}

#[test]
fn every_prefix_is_an_error_or_a_consistent_model() {
    let full = model_bytes();
    let whole = read_model_file(Bytes::from(full.clone()), &ReadOptions::default()).unwrap();
    assert_eq!(whole.initializers.len(), 3);
    let mut ok = 0;
    for len in 0..full.len() {
        let cut = Bytes::copy_from_slice(&full[..len]);
        match read_model_file(cut, &ReadOptions::default()) {
            Ok(m) => {
                ok += 1;
                // Whatever a prefix yields is a prefix of the whole model's tensors.
                for ((n1, t1), (n2, t2)) in m.initializers.iter().zip(&whole.initializers) {
                    assert_eq!((n1, t1), (n2, t2), "prefix {len}");
                }
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
    // Only the cuts between whole fields after the graph's start parse.
    assert!(ok < 10, "{ok} prefixes parsed");
}
