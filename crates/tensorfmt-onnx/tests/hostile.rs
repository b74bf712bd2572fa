//! Hostile input: bad sizes, bad dtypes, allocation bombs, deep nesting and limits give
//! errors naming the place, never panics or huge allocations.

mod common;
use common::model;

use bytes::Bytes;
use prost::Message;
use tensorfmt_core::{Limits, Order, ReadOptions, Tensor};
use tensorfmt_onnx::proto::{
    GraphProto, ModelProto, NodeProto, StringStringEntryProto, TensorProto,
};
use tensorfmt_onnx::{open_tensor_file, read_model_file, OnnxError};

fn tensor_err(t: TensorProto) -> String {
    match read_model_file(model(vec![t]), &ReadOptions::default()) {
        Err(e @ OnnxError::Tensor { .. }) => e.to_string(),
        other => panic!("expected a tensor error, got {other:?}"),
    }
}

#[test]
fn raw_data_must_match_the_shape() {
    let e = tensor_err(TensorProto {
        name: "w".into(),
        dims: vec![4],
        data_type: 1,
        raw_data: vec![0u8; 12].into(),
        ..Default::default()
    });
    assert!(
        e.contains("graph.initializer[0]") && e.contains("needs 16"),
        "{e}"
    );
}

#[test]
fn huge_dims_are_refused_before_allocating() {
    for dims in [vec![1 << 40], vec![i64::MAX, i64::MAX], vec![-1]] {
        let e = tensor_err(TensorProto {
            dims: dims.clone(),
            data_type: 1,
            float_data: vec![1.0],
            ..Default::default()
        });
        assert!(!e.is_empty(), "{dims:?}");
    }
}

#[test]
fn unsupported_types_and_external_data_are_named() {
    // A type without a tensorfmt dtype leaves that weight out, named, not the model.
    let m = read_model_file(
        model(vec![
            TensorProto {
                name: "s".into(),
                dims: vec![1],
                data_type: 8,
                ..Default::default()
            },
            TensorProto {
                name: "w".into(),
                dims: vec![1],
                data_type: 1,
                float_data: vec![2.0],
                ..Default::default()
            },
        ]),
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!((m.initializers.len(), m.left_out), (1, 1));
    assert!(m.warnings[0].contains("\"s\"") && m.warnings[0].contains("STRING"));
    let e = tensor_err(TensorProto {
        dims: vec![1],
        data_type: 99,
        ..Default::default()
    });
    assert!(e.contains("99"), "{e}");
    let e = tensor_err(TensorProto {
        name: "big".into(),
        dims: vec![1],
        data_type: 1,
        data_location: 1,
        external_data: vec![StringStringEntryProto {
            key: "location".into(),
            value: "w.bin".into(),
        }],
        ..Default::default()
    });
    assert!(e.contains("w.bin"), "{e}");
}

#[test]
fn typed_fields_are_read_with_their_narrowing() {
    let f16 = half_bits(1.5);
    let m = read_model_file(
        model(vec![
            TensorProto {
                name: "h".into(),
                dims: vec![1],
                data_type: 10,
                int32_data: vec![f16 as i32],
                ..Default::default()
            },
            TensorProto {
                name: "b".into(),
                dims: vec![2],
                data_type: 9,
                int32_data: vec![1, 0],
                ..Default::default()
            },
            TensorProto {
                name: "u".into(),
                dims: vec![1],
                data_type: 12,
                uint64_data: vec![7],
                ..Default::default()
            },
            TensorProto {
                name: "e".into(),
                dims: vec![0, 3],
                data_type: 1,
                ..Default::default()
            },
        ]),
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(
        m.initializers[0]
            .1
            .cast(tensorfmt_core::DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![1.5]
    );
    assert_eq!(m.initializers[1].1.bytes().as_ref(), &[1, 0]);
    assert_eq!(m.initializers[2].1.to_vec::<u32>().unwrap(), vec![7]);
    assert_eq!(m.initializers[3].1.dims(), &[0, 3]);
}

fn half_bits(x: f32) -> u16 {
    // 1.5 = sign 0, exponent 15, mantissa 0x200
    assert_eq!(x, 1.5);
    0x3e00
}

#[test]
fn raw_data_is_zero_copy() {
    let t = Tensor::from_vec(vec![1f32; 256], [256], Order::RowMajor).unwrap();
    let mut buf = Vec::new();
    tensorfmt_onnx::write_tensors(&mut buf, &[("w".into(), t)]).unwrap();
    let data = Bytes::from(buf);
    let range = data.as_ptr() as usize..data.as_ptr() as usize + data.len();
    let m = read_model_file(data.clone(), &ReadOptions::default()).unwrap();
    assert!(range.contains(&(m.initializers[0].1.bytes().as_ptr() as usize)));
}

#[test]
fn limits_cap_items_rank_and_allocation() {
    let many: Vec<TensorProto> = (0..50)
        .map(|i| TensorProto {
            name: format!("t{i}"),
            dims: vec![0],
            data_type: 1,
            ..Default::default()
        })
        .collect();
    let opts = ReadOptions {
        limits: Limits {
            max_items: 10,
            ..Limits::default()
        },
        ..Default::default()
    };
    assert!(matches!(
        read_model_file(model(many), &opts),
        Err(OnnxError::Limit {
            what: "item count",
            ..
        })
    ));
    let deep = TensorProto {
        dims: vec![1; 100],
        data_type: 1,
        float_data: vec![1.0],
        ..Default::default()
    };
    let opts = ReadOptions {
        limits: Limits {
            max_rank: 8,
            ..Limits::default()
        },
        ..Default::default()
    };
    assert!(matches!(
        read_model_file(model(vec![deep]), &opts),
        Err(OnnxError::Limit { what: "rank", .. })
    ));
    let big = TensorProto {
        dims: vec![1000],
        data_type: 1,
        float_data: vec![0.0; 1000],
        ..Default::default()
    };
    let opts = ReadOptions {
        limits: Limits {
            max_alloc: 1000,
            ..Limits::default()
        },
        ..Default::default()
    };
    assert!(matches!(
        read_model_file(model(vec![big]), &opts),
        Err(OnnxError::Limit {
            what: "allocation",
            ..
        })
    ));
}

#[test]
fn garbage_and_deep_nesting_are_errors() {
    for bytes in [
        &b""[..],
        &[0x08][..],
        &[0x08, 0x08, 0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f][..],
        &[0x0b, 0x0c][..],
        &[0x08, 0x08, 0x3a, 0x02, 0x2a, 0x10][..],
        &[0xff; 12][..],
    ] {
        assert!(
            open_tensor_file(Bytes::copy_from_slice(bytes), &ReadOptions::default()).is_err(),
            "{bytes:?}"
        );
    }
    // A node whose attribute holds a graph holding a node ...: the reader walks
    // subgraphs (for their external data) to protobuf's nesting limit of 100
    // messages, as deep as onnx and onnxruntime parse; deeper is an error naming it.
    let nested = |levels: usize| {
        let mut g = GraphProto::default();
        for _ in 0..levels {
            g = GraphProto {
                node: vec![NodeProto {
                    attribute: vec![tensorfmt_onnx::proto::AttributeProto {
                        g: Some(g),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            };
        }
        let m = ModelProto {
            ir_version: 8,
            graph: Some(g),
            ..Default::default()
        };
        read_model_file(m.encode_to_vec().into(), &ReadOptions::default())
    };
    assert_eq!(nested(30).unwrap().nodes, 1);
    let e = nested(200).unwrap_err().to_string();
    assert!(
        e.contains("deeper than 100") && e.contains("graph.node[0].attribute[0].g.node[0]"),
        "{e}"
    );
}

#[test]
fn sniff_accepts_onnx_and_refuses_caffe_mean_files() {
    let mut buf = Vec::new();
    tensorfmt_onnx::write_tensors(&mut buf, &[]).unwrap();
    assert!(tensorfmt_onnx::sniff(&buf, buf.len() as u64));
    let mean = [
        0x08, 1, 0x10, 1, 0x18, 1, 0x20, 2, 0x2a, 8, 0, 0, 0, 0x3f, 0, 0, 0x80, 0x3f,
    ];
    assert!(!tensorfmt_onnx::sniff(&mean, mean.len() as u64));
}

#[test]
fn sniff_refuses_a_solver_state_with_a_small_iter() {
    // SolverState: iter 5, learned_net "x.caffemodel", a history blob (data: 2 floats).
    let mut s = vec![0x08, 5, 0x12, 12];
    s.extend_from_slice(b"x.caffemodel");
    s.extend_from_slice(&[0x1a, 10, 0x2a, 8, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]);
    assert!(!tensorfmt_onnx::sniff(&s, s.len() as u64));
    // A model written by python onnx: ir_version, graph, opset_import.
    let m = ModelProto {
        ir_version: 10,
        graph: Some(GraphProto {
            name: "g".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec();
    assert!(tensorfmt_onnx::sniff(&m, m.len() as u64));
}

/// Issue 34 §4: typed fields were narrowed without a check: BOOL from 7 and -1 became
/// bytes 7 and 255 (and were written to safetensors as BOOL), INT8 300 became 44,
/// UINT32 2^40 became 0. A value its element type cannot hold is refused, naming the
/// field, the index and the value; in range, every type reads back exactly.
#[test]
fn typed_values_the_element_type_cannot_hold_are_refused() {
    let ints = |data_type: i32, v: Vec<i32>| TensorProto {
        name: "t".into(),
        dims: vec![v.len() as i64],
        data_type,
        int32_data: v,
        ..Default::default()
    };
    let u64s = |data_type: i32, v: Vec<u64>| TensorProto {
        name: "t".into(),
        dims: vec![v.len() as i64],
        data_type,
        uint64_data: v,
        ..Default::default()
    };
    // (BOOL 9, INT8 3, UINT8 2, INT16 5, UINT16 4, FLOAT16 10, BFLOAT16 16)
    for (t, what) in [
        (ints(9, vec![1, 7]), "BOOL"),
        (ints(9, vec![-1]), "BOOL"),
        (ints(3, vec![300]), "INT8"),
        (ints(3, vec![-129]), "INT8"),
        (ints(2, vec![256]), "UINT8"),
        (ints(2, vec![-1]), "UINT8"),
        (ints(5, vec![40000]), "INT16"),
        (ints(4, vec![70000]), "UINT16"),
        (ints(10, vec![65536]), "FLOAT16"),
        (ints(16, vec![-32769]), "BFLOAT16"),
        (u64s(12, vec![1 << 40]), "UINT32"),
    ] {
        let e = tensor_err(t);
        assert!(e.contains("cannot hold") && e.contains(what), "{what}: {e}");
    }
    // raw_data of BOOL holds 0 or 1 only, too.
    let e = tensor_err(TensorProto {
        name: "t".into(),
        dims: vec![2],
        data_type: 9,
        raw_data: vec![1u8, 7].into(),
        ..Default::default()
    });
    assert!(e.contains("BOOL") && e.contains("7"), "{e}");
    // In range: exact.
    let ok = |t: TensorProto| {
        read_model_file(model(vec![t]), &ReadOptions::default())
            .unwrap()
            .initializers
            .remove(0)
            .1
    };
    assert_eq!(ok(ints(9, vec![0, 1])).bytes().as_ref(), [0, 1]);
    assert_eq!(
        ok(ints(3, vec![-128, 127])).to_vec::<i8>().unwrap(),
        [-128, 127]
    );
    assert_eq!(
        ok(ints(4, vec![0, 65535])).to_vec::<u16>().unwrap(),
        [0, 65535]
    );
    assert_eq!(
        ok(u64s(12, vec![u32::MAX as u64])).to_vec::<u32>().unwrap(),
        [u32::MAX]
    );
}
