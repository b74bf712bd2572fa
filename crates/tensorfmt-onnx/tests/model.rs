//! What a model holds beyond its initializers' values: names onnxruntime resolves
//! (duplicates, empty names, merged graph fields), the structure digest `diff`
//! compares, sparse initializers described at open and densified when read, and the
//! typed-field edges onnx accepts.

mod common;
use common::model;

use bytes::Bytes;
use prost::Message;
use tensorfmt_core::{Limits, ReadOptions, TensorFile};
use tensorfmt_onnx::proto::{
    tensor_proto::Segment, AttributeProto, GraphProto, ModelProto, NodeProto, SparseTensorProto,
    TensorProto, TypeProto, ValueInfoProto,
};
use tensorfmt_onnx::{read_model_file, ModelFile, OnnxFile};

fn f32s(name: &str, v: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: vec![v.len() as i64],
        data_type: 1,
        float_data: v.to_vec(),
        ..Default::default()
    }
}

fn sparse(name: &str, v: &[f32], idx: &[i64], dims: &[i64]) -> SparseTensorProto {
    SparseTensorProto {
        values: Some(f32s(name, v)),
        indices: Some(TensorProto {
            dims: vec![idx.len() as i64],
            data_type: 7,
            int64_data: idx.to_vec(),
            ..Default::default()
        }),
        dims: dims.to_vec(),
    }
}

fn read(b: Bytes) -> ModelFile {
    read_model_file(b, &ReadOptions::default()).unwrap()
}

fn names(m: &ModelFile) -> Vec<(String, Vec<f32>)> {
    let f = OnnxFile::new(m.clone());
    f.tensors()
        .iter()
        .map(|i| {
            (
                i.name.clone(),
                f.read_tensor(&i.name).unwrap().to_vec::<f32>().unwrap(),
            )
        })
        .collect()
}

fn graph_model(g: GraphProto) -> Bytes {
    ModelProto {
        ir_version: 8,
        graph: Some(g),
        ..Default::default()
    }
    .encode_to_vec()
    .into()
}

/// Two initializers named `w`: onnxruntime computes with the last (and warns); the
/// reader gave `w` the first and renamed the other silently.
#[test]
fn a_duplicate_name_is_the_tensor_onnxruntime_uses() {
    let m = read(model(vec![f32s("w", &[1.0]), f32s("w", &[2.0])]));
    assert_eq!(
        names(&m),
        [
            ("graph.initializer[0]".to_string(), vec![1.0]),
            ("w".to_string(), vec![2.0])
        ]
    );
    assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
    let w = &m.warnings[0];
    assert!(
        w.contains("\"w\"")
            && w.contains("graph.initializer[1], the one onnxruntime uses")
            && w.contains("onnxruntime does not use")
            && w.contains("\"graph.initializer[0]\""),
        "{w}"
    );
}

/// A dense and a sparse initializer of one name: onnxruntime uses the sparse one
/// (sparse initializers are added after the dense ones), wherever it is.
#[test]
fn a_sparse_initializer_owns_a_name_it_shares_with_a_dense_one() {
    let g = GraphProto {
        initializer: vec![f32s("w", &[1.0, 1.0, 1.0, 1.0])],
        sparse_initializer: vec![sparse("w", &[9.0], &[2], &[4])],
        ..Default::default()
    };
    let m = read(graph_model(g));
    assert_eq!(
        names(&m),
        [
            ("graph.initializer[0]".to_string(), vec![1.0; 4]),
            ("w".to_string(), vec![0.0, 0.0, 9.0, 0.0])
        ]
    );
    assert!(
        m.warnings[0].contains("1 dense, 1 sparse"),
        "{:?}",
        m.warnings
    );
    // Two sparse ones: onnxruntime refuses the model; the last is read as the name, and
    // the warning says so.
    let g = GraphProto {
        sparse_initializer: vec![
            sparse("w", &[1.0], &[0], &[1]),
            sparse("w", &[2.0], &[0], &[1]),
        ],
        ..Default::default()
    };
    let m = read(graph_model(g));
    assert_eq!(names(&m)[1], ("w".to_string(), vec![2.0]));
    assert!(
        m.warnings[0].contains("onnxruntime refuses the model"),
        "{:?}",
        m.warnings
    );
}

/// `cat a.onnx b.onnx`: protobuf merges the two `graph` fields into one graph, whose
/// initializers are both's. `W` was read as the last, listed twice, and a conversion
/// failed on the duplicate.
#[test]
fn graph_fields_occurring_twice_are_one_graph() {
    let a = model(vec![f32s("W", &[1.0]), f32s("A", &[5.0])]);
    let b = model(vec![f32s("W", &[2.0])]);
    let mut both = a.to_vec();
    both.extend_from_slice(&b);
    let m = read(both.into());
    assert_eq!(
        names(&m),
        [
            ("graph.initializer[0]".to_string(), vec![1.0]),
            ("A".to_string(), vec![5.0]),
            ("W".to_string(), vec![2.0])
        ]
    );
    assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
}

/// A synthetic name never takes a real tensor's name: an empty name (or a duplicate)
/// whose place is also the name of a tensor in the file gets a suffix.
#[test]
fn synthetic_names_are_given_after_the_real_ones() {
    let m = read(model(vec![
        f32s("", &[1.0]),
        f32s("graph.initializer[0]", &[2.0]),
    ]));
    assert_eq!(
        names(&m),
        [
            ("graph.initializer[0]~1".to_string(), vec![1.0]),
            ("graph.initializer[0]".to_string(), vec![2.0])
        ]
    );
    assert!(m.warnings[0].contains("has no name"), "{:?}", m.warnings);
    let m = read(model(vec![
        f32s("a", &[1.0]),
        f32s("a", &[2.0]),
        f32s("graph.initializer[0]", &[3.0]),
    ]));
    let got: Vec<String> = names(&m).into_iter().map(|(n, _)| n).collect();
    assert_eq!(got, ["graph.initializer[0]~1", "a", "graph.initializer[0]"]);
}

fn digest(b: Bytes) -> String {
    read(b).structure.unwrap()
}

/// `diff` compared two models' initializers and header: an Add become Mul, an input's
/// shape, a doc string, a value in an If branch's initializer and a left-out float8
/// weight all compared equal. The structure digest covers everything but the exported
/// tensors' own records.
#[test]
fn the_structure_digest_sees_everything_but_the_exported_tensors() {
    let value = |name: &str, dims: &[i64]| {
        ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(tensorfmt_onnx::proto::type_proto::Value::TensorType(
                tensorfmt_onnx::proto::type_proto::Tensor {
                    elem_type: 1,
                    shape: Some(tensorfmt_onnx::proto::TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|&d| tensorfmt_onnx::proto::tensor_shape_proto::Dimension {
                                value: Some(
                                    tensorfmt_onnx::proto::tensor_shape_proto::dimension::Value::DimValue(d),
                                ),
                                ..Default::default()
                            })
                            .collect(),
                    }),
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    }
    };
    #[derive(Clone)]
    struct V {
        w: f32,
        op: &'static str,
        shape: i64,
        doc: &'static str,
        branch: f32,
        f8: u8,
    }
    let make = |v: V| {
        let then = GraphProto {
            initializer: vec![f32s("c", &[v.branch])],
            ..Default::default()
        };
        let f8 = TensorProto {
            name: "f8".into(),
            dims: vec![1],
            data_type: 17, // FLOAT8E4M3FN: left out
            raw_data: vec![v.f8].into(),
            ..Default::default()
        };
        let g = GraphProto {
            node: vec![
                NodeProto {
                    op_type: v.op.into(),
                    input: vec!["x".into(), "W".into()],
                    output: vec!["y".into()],
                    ..Default::default()
                },
                NodeProto {
                    op_type: "If".into(),
                    attribute: vec![AttributeProto {
                        name: "then_branch".into(),
                        r#type: 5,
                        g: Some(then),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            ],
            initializer: vec![f32s("W", &[1.0, v.w]), f8],
            input: vec![value("x", &[v.shape])],
            ..Default::default()
        };
        let mut m = ModelProto {
            ir_version: 8,
            graph: Some(g),
            doc_string: v.doc.into(),
            ..Default::default()
        };
        m.opset_import
            .push(tensorfmt_onnx::proto::OperatorSetIdProto {
                domain: String::new(),
                version: 17,
            });
        Bytes::from(m.encode_to_vec())
    };
    let base = V {
        w: 1.0,
        op: "Add",
        shape: 2,
        doc: "",
        branch: 10.0,
        f8: 0x38,
    };
    let d0 = digest(make(base.clone()));
    // An exported tensor's value is compared as a tensor, not here.
    assert_eq!(
        d0,
        digest(make(V {
            w: 7.0,
            ..base.clone()
        }))
    );
    for (what, v) in [
        (
            "op",
            V {
                op: "Mul",
                ..base.clone()
            },
        ),
        (
            "input shape",
            V {
                shape: 3,
                ..base.clone()
            },
        ),
        (
            "doc_string",
            V {
                doc: "changed",
                ..base.clone()
            },
        ),
        (
            "subgraph initializer",
            V {
                branch: 99.0,
                ..base.clone()
            },
        ),
        (
            "left-out float8 weight",
            V {
                f8: 0x40,
                ..base.clone()
            },
        ),
    ] {
        assert_ne!(d0, digest(make(v)), "{what}");
    }
    // In the header, where diff compares it.
    let f = OnnxFile::new(read(make(base)));
    assert!(f
        .header()
        .iter()
        .any(|(k, v)| k == "structure" && v.to_string().contains(&d0)));
}

/// Where a tensor's bytes are kept (inline or in an external file) is storage: the
/// digest is the same.
#[test]
fn the_structure_digest_ignores_where_tensors_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let t = tensorfmt_core::Tensor::from_vec(
        vec![0.5f32; 2048],
        [2048],
        tensorfmt_core::Order::RowMajor,
    )
    .unwrap();
    let tensors = [("fc.weight".to_string(), t)];
    let inside = dir.path().join("inside.onnx");
    let beside = dir.path().join("beside.onnx");
    tensorfmt_onnx::save_tensors(&inside, &tensors, &Default::default()).unwrap();
    let mut o = tensorfmt_core::WriteOptions::default();
    o.extra.insert("external_data".into(), "true".into());
    tensorfmt_onnx::save_tensors(&beside, &tensors, &o).unwrap();
    let at = |p: &std::path::Path| {
        tensorfmt_onnx::read_model_file_at(
            std::fs::read(p).unwrap().into(),
            &Default::default(),
            dir.path(),
        )
        .unwrap()
    };
    let (a, b) = (at(&inside), at(&beside));
    assert_eq!(b.external_files.len(), 1);
    assert_eq!(a.structure, b.structure);
}

/// A sparse initializer of dims [40000, 40000] in 65 bytes was densified at open
/// (6.4 GB): listing it costs nothing now, and reading it is checked against
/// `max_alloc` first.
#[test]
fn a_sparse_initializer_is_densified_only_when_read() {
    let g = GraphProto {
        sparse_initializer: vec![sparse("s", &[5.0], &[3], &[40_000, 40_000])],
        ..Default::default()
    };
    let opts = ReadOptions {
        limits: Limits {
            max_alloc: 1 << 30,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let f = tensorfmt_onnx::open_tensor_file(graph_model(g), &opts).unwrap();
    assert_eq!(f.tensors()[0].shape.dims(), &[40_000, 40_000]);
    let e = f.read_tensor("s").unwrap_err().to_string();
    assert!(e.contains("6400000000") && e.contains("limit"), "{e}");
    // Within the limit: the dense tensor.
    let g = GraphProto {
        sparse_initializer: vec![sparse("s", &[5.0], &[3], &[2, 2])],
        ..Default::default()
    };
    let f = tensorfmt_onnx::open_tensor_file(graph_model(g), &opts).unwrap();
    assert_eq!(
        f.read_tensor("s").unwrap().to_vec::<f32>().unwrap(),
        [0.0, 0.0, 0.0, 5.0]
    );
    // A bad index is still refused at open.
    let g = GraphProto {
        sparse_initializer: vec![sparse("s", &[5.0], &[4], &[2, 2])],
        ..Default::default()
    };
    assert!(read_model_file(graph_model(g), &opts).is_err());
}

/// FLOAT16 / BFLOAT16 `int32_data` holding a sign-extended pattern (-16384 for
/// 0xC000, which onnx's writer makes and onnx reads as -2.0) made the file unreadable.
#[test]
fn half_floats_in_int32_data_are_their_low_16_bits() {
    for data_type in [10, 16] {
        let t = TensorProto {
            name: "h".into(),
            dims: vec![3],
            data_type,
            int32_data: vec![-16384, 15360, -32768],
            ..Default::default()
        };
        let m = read(model(vec![t]));
        let bits: Vec<u16> = m.initializers[0]
            .1
            .bytes()
            .chunks(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(bits, [0xC000, 0x3C00, 0x8000]);
    }
}

/// A tensor with a `segment` made the whole file unreadable: it is left out, named,
/// as a type without a dtype is.
#[test]
fn a_segmented_tensor_is_left_out_not_the_file() {
    let seg = TensorProto {
        segment: Some(Segment { begin: 0, end: 1 }),
        ..f32s("seg", &[1.0])
    };
    let m = read(model(vec![seg, f32s("w", &[2.0])]));
    assert_eq!((m.initializers.len(), m.left_out), (1, 1));
    assert!(
        m.warnings[0].contains("\"seg\"") && m.warnings[0].contains("segment"),
        "{:?}",
        m.warnings
    );
    assert_eq!(
        OnnxFile::new(m)
            .header()
            .iter()
            .find(|(k, _)| k == "initializers")
            .unwrap()
            .1
            .to_string(),
        "2"
    );
}

/// `raw_data` present but empty beside `float_data`: onnx takes `raw_data` (and
/// errors on its size); the reader took `float_data`.
#[test]
fn a_present_empty_raw_data_is_the_data() {
    // prost does not write an empty bytes field: put it on the wire by hand.
    let mut t = f32s("r", &[9.0, 9.0]).encode_to_vec();
    t.extend_from_slice(&[0x4a, 0x00]); // field 9 (raw_data), length 0
    let mut g = Vec::new();
    g.push(0x2a); // field 5 (initializer)
    g.push(t.len() as u8);
    g.extend_from_slice(&t);
    let mut m = vec![0x08, 0x08, 0x3a, g.len() as u8];
    m.extend_from_slice(&g);
    let e = read_model_file(m.into(), &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("graph.initializer[0]") && e.contains("raw_data has 0 bytes"),
        "{e}"
    );
}

/// Tensors that are not exported (a subgraph's initializer, a left-out weight) count in
/// the digest by their data, wherever it is stored: onnx's `save_model(...,
/// save_as_external_data=True)` moves them to the external file too. A left-out
/// weight's external file is listed, as an exported one's is.
#[test]
fn tensors_not_exported_count_by_their_data_not_its_storage() {
    use tensorfmt_onnx::proto::StringStringEntryProto as Entry;
    let dir = tempfile::tempdir().unwrap();
    let raw = |name: &str, data_type: i32, bytes: &[u8]| TensorProto {
        name: name.into(),
        dims: vec![bytes.len() as i64 / if data_type == 1 { 4 } else { 1 }],
        data_type,
        raw_data: bytes.to_vec().into(),
        ..Default::default()
    };
    let external = |name: &str, data_type: i32, n: usize, loc: &str| TensorProto {
        name: name.into(),
        dims: vec![n as i64 / if data_type == 1 { 4 } else { 1 }],
        data_type,
        data_location: 1,
        external_data: vec![Entry {
            key: "location".into(),
            value: loc.into(),
        }],
        ..Default::default()
    };
    let make = |branch: TensorProto, f8: TensorProto| {
        graph_model(GraphProto {
            node: vec![NodeProto {
                op_type: "If".into(),
                attribute: vec![AttributeProto {
                    name: "then_branch".into(),
                    r#type: 5,
                    g: Some(GraphProto {
                        initializer: vec![branch],
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            initializer: vec![f8],
            ..Default::default()
        })
    };
    let at = |b: Bytes| {
        tensorfmt_onnx::read_model_file_at(b, &ReadOptions::default(), dir.path()).unwrap()
    };
    let c = 10f32.to_le_bytes();
    std::fs::write(dir.path().join("c.bin"), c).unwrap();
    std::fs::write(dir.path().join("f8.bin"), [0x38]).unwrap();
    let inline = at(make(raw("c", 1, &c), raw("f8", 17, &[0x38])));
    let beside = at(make(
        external("c", 1, 4, "c.bin"),
        external("f8", 17, 1, "f8.bin"),
    ));
    assert_eq!(inline.structure, beside.structure);
    assert_eq!(beside.external_files, ["c.bin", "f8.bin"]);
    assert_eq!(beside.left_out, 1);
    std::fs::write(dir.path().join("c.bin"), 99f32.to_le_bytes()).unwrap();
    let changed = at(make(
        external("c", 1, 4, "c.bin"),
        external("f8", 17, 1, "f8.bin"),
    ));
    assert_ne!(changed.structure, beside.structure);
    // A left-out weight's missing file is an error, as any other's.
    let e = tensorfmt_onnx::read_model_file_at(
        make(raw("c", 1, &c), external("f8", 17, 1, "gone.bin")),
        &ReadOptions::default(),
        dir.path(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("gone.bin") && e.contains("graph.initializer[0]"),
        "{e}"
    );
}
