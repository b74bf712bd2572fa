//! External data files beside a model: read as ONNX's loader reads them (mapped, zero
//! copy), and refused where ONNX's loader refuses them (a location outside the model's
//! directory, a symlink, a hard link, a range beyond the file), the error naming the
//! tensor and the location, nothing outside the directory ever opened.

mod common;
use common::model;

use std::path::Path;

use tensorfmt_core::ReadOptions;
use tensorfmt_onnx::proto::{StringStringEntryProto, TensorProto};
use tensorfmt_onnx::{read_model_file, read_model_file_at, ModelFile};

fn external(name: &str, dims: &[i64], keys: &[(&str, &str)]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 1,
        data_location: 1,
        external_data: keys
            .iter()
            .map(|(k, v)| StringStringEntryProto {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect(),
        ..Default::default()
    }
}

fn read(dir: &Path, inits: Vec<TensorProto>) -> Result<ModelFile, String> {
    read_model_file_at(model(inits), &ReadOptions::default(), dir).map_err(|e| e.to_string())
}

fn floats(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn tensors_are_slices_of_one_mapped_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = floats(&[1.0, 2.0, 3.0]);
    data.extend([0u8; 4]); // alignment padding, as onnx's writer may leave
    data.extend(floats(&[4.0, 5.0]));
    std::fs::write(dir.path().join("model.onnx.data"), &data).unwrap();
    let m = read(
        dir.path(),
        vec![
            external(
                "a",
                &[3],
                &[
                    ("location", "model.onnx.data"),
                    ("offset", "0"),
                    ("length", "12"),
                ],
            ),
            // No length: the data runs to the end of the file (ONNX's loader).
            external(
                "b",
                &[2],
                &[
                    ("location", "./model.onnx.data"),
                    ("offset", "16"),
                    ("checksum", "x"),
                ],
            ),
        ],
    )
    .unwrap();
    assert_eq!(
        m.initializers[0].1.to_vec::<f32>().unwrap(),
        [1.0, 2.0, 3.0]
    );
    assert_eq!(m.initializers[1].1.to_vec::<f32>().unwrap(), [4.0, 5.0]);
    // Zero copy: both tensors lie in one mapping, 16 bytes apart.
    let (a, b) = (m.initializers[0].1.bytes(), m.initializers[1].1.bytes());
    assert_eq!(b.as_ptr() as usize - a.as_ptr() as usize, 16);
    // A subdirectory of the model's directory is inside it.
    std::fs::create_dir(dir.path().join("weights")).unwrap();
    std::fs::write(dir.path().join("weights/w"), floats(&[7.0])).unwrap();
    let m = read(
        dir.path(),
        vec![external("w", &[1], &[("location", "weights/w")])],
    )
    .unwrap();
    assert_eq!(m.initializers[0].1.to_vec::<f32>().unwrap(), [7.0]);
}

#[test]
fn locations_outside_the_model_directory_are_refused_unread() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("model");
    std::fs::create_dir(&dir).unwrap();
    let secret = root.path().join("secret");
    std::fs::write(&secret, floats(&[9.0])).unwrap();
    std::os::unix::fs::symlink(&secret, dir.join("link")).unwrap();
    std::os::unix::fs::symlink(root.path(), dir.join("up")).unwrap();
    std::fs::hard_link(&secret, dir.join("hard")).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/w"), [0u8; 4]).unwrap();
    std::os::unix::fs::symlink(dir.join("sub"), dir.join("inner")).unwrap();
    let secret_path = secret.to_str().unwrap().to_string();
    for (location, why) in [
        ("../secret", "'..'"),
        ("sub/../../secret", "'..'"),
        (secret_path.as_str(), "absolute"),
        ("link", "symbolic link"),
        ("up/secret", "symbolic link"),
        ("inner/w", "symbolic link"), // a link inside the directory, to a subdirectory of it
        ("hard", "hard link"),
        ("sub", "not a regular file"),
        ("a\0b", "NUL"),
    ] {
        let e = read(&dir, vec![external("w", &[1], &[("location", location)])]).unwrap_err();
        assert!(
            e.contains(why) && e.contains("\"w\"") && e.contains("graph.initializer[0]"),
            "{location:?}: {e}"
        );
    }
    // A missing file is an I/O error (Python's FileNotFoundError), naming both.
    let e = read_model_file_at(
        model(vec![external("w", &[1], &[("location", "missing.bin")])]),
        &ReadOptions::default(),
        &dir,
    )
    .unwrap_err();
    assert_eq!(
        tensorfmt_core::Classify::kind(&e),
        tensorfmt_core::ErrorKind::Io
    );
    let e = e.to_string();
    assert!(e.contains("missing.bin") && e.contains("\"w\""), "{e}");
    let e = read(&dir, vec![external("w", &[1], &[("offset", "0")])]).unwrap_err();
    assert!(e.contains("no 'location'"), "{e}");
}

#[test]
fn ranges_and_sizes_are_checked_against_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d"), floats(&[1.0, 2.0])).unwrap();
    for (keys, want) in [
        (vec![("offset", "9")], "beyond the end"),
        (vec![("offset", "4"), ("length", "8")], "beyond the end"),
        (
            vec![("length", "18446744073709551615"), ("offset", "1")],
            "beyond the end",
        ),
        (vec![("offset", "-1")], "non-negative decimal"),
        (vec![("length", "0x10")], "non-negative decimal"),
        // A range that is not the tensor's size: the raw_data check names both.
        (vec![("length", "4")], "external data in \"d\" has 4 bytes"),
        (vec![], "needs 12"), // to the end of the 8-byte file, for 3 floats
    ] {
        let mut k = vec![("location", "d")];
        k.extend(keys.iter().cloned());
        let dims: &[i64] = if keys.is_empty() { &[3] } else { &[2] };
        let e = read(dir.path(), vec![external("w", dims, &k)]).unwrap_err();
        assert!(e.contains(want), "{keys:?}: {e}");
    }
}

#[test]
fn a_model_given_as_bytes_names_the_file_it_cannot_read() {
    let e = read_model_file(
        model(vec![external("w", &[1], &[("location", "w.bin")])]),
        &ReadOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("w.bin") && e.contains("without a directory"),
        "{e}"
    );
}

/// As ONNX's loader and onnxruntime decide: only `data_location: EXTERNAL` puts a
/// tensor's data in a file (a DEFAULT tensor with stray `external_data` keys keeps its
/// `raw_data`); a `location` given twice, an offset with a sign, a location with a
/// control character, a backslash or a trailing slash are refused.
#[test]
fn external_means_data_location_external_and_keys_are_strict() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d"), floats(&[0.0, 1.0])).unwrap();
    let mut inline = external("w", &[2], &[("location", "d")]);
    inline.data_location = 0;
    inline.raw_data = floats(&[7.0, 7.0]).into();
    let m = read(dir.path(), vec![inline]).unwrap();
    assert!(m.external_files.is_empty());
    assert_eq!(
        m.initializers[0].1.bytes().as_ref(),
        floats(&[7.0, 7.0]).as_slice()
    );
    for (keys, want) in [
        (vec![("location", "d"), ("location", "e")], "twice"),
        (
            vec![("location", "d"), ("offset", "+0")],
            "non-negative decimal",
        ),
        (vec![("location", "..\t/d")], "control character"),
        (vec![("location", "d\n")], "control character"),
        (vec![("location", "sub\\d")], "backslash"),
        (vec![("location", "d/")], "trailing"),
    ] {
        let e = read(dir.path(), vec![external("w", &[2], &keys)]).unwrap_err();
        assert!(e.contains(want), "{keys:?}: {e}");
    }
}

/// A model saved with `convert_attribute=True` keeps a Constant node's tensor in its
/// external file too; so can a subgraph's initializer, a sparse attribute's values and
/// a function's Constant. Only the initializers' files were listed, so a copy of the
/// model with its listed files lacked one (onnxruntime refused it), and a missing or
/// short file passed `validate`.
#[test]
fn external_data_anywhere_in_the_model_is_listed_and_checked() {
    use prost::Message;
    use tensorfmt_onnx::proto::{
        AttributeProto, GraphProto, ModelProto, NodeProto, SparseTensorProto,
    };
    // ModelProto.functions (25): a FunctionProto {name: 1, node: 7}, which the crate's
    // schema leaves out, on the wire by hand.
    let field = |out: &mut Vec<u8>, number: u8, body: &[u8]| {
        out.push(number << 3 | 2);
        prost::encoding::encode_varint(body.len() as u64, out);
        out.extend_from_slice(body);
    };
    let constant = |name: &str, t: TensorProto| NodeProto {
        name: name.into(),
        op_type: "Constant".into(),
        output: vec![name.to_lowercase()],
        attribute: vec![AttributeProto {
            name: "value".into(),
            r#type: 4,
            t: Some(t),
            ..Default::default()
        }],
        ..Default::default()
    };
    let four = |loc: &str| external("k", &[4], &[("location", loc), ("length", "16")]);
    let branch = GraphProto {
        initializer: vec![four("sub.bin")],
        ..Default::default()
    };
    let sparse_attr = AttributeProto {
        name: "sparse_value".into(),
        r#type: 11,
        sparse_tensor: Some(SparseTensorProto {
            values: Some(external("v", &[1], &[("location", "sp.bin")])),
            indices: Some(TensorProto {
                dims: vec![1],
                data_type: 7,
                int64_data: vec![0],
                ..Default::default()
            }),
            dims: vec![4],
        }),
        ..Default::default()
    };
    let model = |m_bin: &str| {
        ModelProto {
            ir_version: 8,
            graph: Some(GraphProto {
                node: vec![
                    constant("Const_K", four(m_bin)),
                    NodeProto {
                        name: "If_0".into(),
                        op_type: "If".into(),
                        attribute: vec![AttributeProto {
                            name: "then_branch".into(),
                            r#type: 5,
                            g: Some(branch.clone()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    },
                    NodeProto {
                        name: "Sparse_0".into(),
                        op_type: "Constant".into(),
                        attribute: vec![sparse_attr.clone()],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            ..Default::default()
        }
        .encode_to_vec()
    };
    let model = |m_bin: &str| {
        let mut function = Vec::new();
        field(&mut function, 1, b"F");
        field(
            &mut function,
            7,
            &constant("InF", four("fn.bin")).encode_to_vec(),
        );
        let mut m = model(m_bin);
        m.push(0xca); // field 25, wire type 2: a two-byte key
        m.push(0x01);
        prost::encoding::encode_varint(function.len() as u64, &mut m);
        m.extend_from_slice(&function);
        m
    };
    let dir = tempfile::tempdir().unwrap();
    for f in ["m.bin", "sub.bin", "fn.bin"] {
        std::fs::write(dir.path().join(f), floats(&[1.0, 2.0, 3.0, 4.0])).unwrap();
    }
    std::fs::write(dir.path().join("sp.bin"), floats(&[7.0])).unwrap();
    let opts = ReadOptions::default();
    let m = read_model_file_at(model("m.bin").into(), &opts, dir.path()).unwrap();
    assert_eq!(m.external_files, ["m.bin", "sub.bin", "sp.bin", "fn.bin"]);
    assert!(m.initializers.is_empty());
    // Described (a remote model): listed by their text.
    let d = tensorfmt_onnx::read_model_file_described(model("m.bin").into(), &opts).unwrap();
    assert_eq!(d.external_files, m.external_files);
    // Missing, short, outside: refused, naming the tensor and where it is.
    let e = read_model_file_at(model("gone.bin").into(), &opts, dir.path())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("gone.bin")
            && e.contains("graph.node[0] (\"Const_K\").attribute[0] (\"value\").t"),
        "{e}"
    );
    std::fs::write(dir.path().join("short.bin"), floats(&[1.0])).unwrap();
    let e = read_model_file_at(model("short.bin").into(), &opts, dir.path())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"k\"") && e.contains("beyond the end of \"short.bin\""),
        "{e}"
    );
    let e = read_model_file_at(model("../m.bin").into(), &opts, dir.path())
        .unwrap_err()
        .to_string();
    assert!(e.contains("'..'") && e.contains("Const_K"), "{e}");
    // A model given as bytes cannot have its files checked: refused, as for initializers.
    assert!(read_model_file(model("m.bin").into(), &opts).is_err());
    // Without a length, the file must still hold the tensor's bytes.
    let e = read_model_file_at(
        ModelProto {
            ir_version: 8,
            graph: Some(GraphProto {
                node: vec![constant(
                    "C",
                    external("k", &[4], &[("location", "sp.bin")]),
                )],
                ..Default::default()
            }),
            ..Default::default()
        }
        .encode_to_vec()
        .into(),
        &opts,
        dir.path(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("4 bytes in \"sp.bin\"") && e.contains("needs 16"),
        "{e}"
    );
}
