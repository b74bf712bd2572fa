//! Export names of a Model are one-to-one: keys containing `.`, `/` or `\` (or bytes
//! that are not UTF-8) never make two parameters share a name, and writing the
//! exported tensors back gives the same model.

use tensorfmt_core::{TensorFile, WriteOptions};
use tensorfmt_primitiv::{
    build, read_file, to_bytes, Key, Model, Parameter, PrimitivData, PrimitivFile, PrimitivShape,
    PrimitivTensor, ReaderOptions,
};

fn param(v: f32) -> Parameter {
    let t = PrimitivTensor::from_f32(PrimitivShape::new([1], 1).unwrap(), &[v]).unwrap();
    let mut p = Parameter::new(t.clone()).unwrap();
    p.set_stat("Adam.m1", t);
    p
}

fn path(keys: &[&[u8]]) -> Vec<Key> {
    keys.iter().map(|k| Key::new(k.to_vec())).collect()
}

#[test]
fn colliding_paths_keep_distinct_names_and_round_trip() {
    let paths = [
        path(&[b"a.b"]),
        path(&[b"a", b"b"]),
        path(&[b"c/d"]),
        path(&[b"c", b"d"]),
        path(&[b"e\\", b"f"]),
        path(&[b"e\\.f"]),
        path(&[b"g\xff"]),
        path(&[b"g\\xff"]),
    ];
    let mut m = Model::new();
    for (i, p) in paths.iter().enumerate() {
        m.insert(p.clone(), param(i as f32));
    }
    let bytes = to_bytes(&PrimitivData::Model(m.clone())).unwrap();
    let f = PrimitivFile::new(
        read_file(bytes.into(), &ReaderOptions::default()).unwrap(),
        u64::MAX,
    );
    let names: Vec<String> = f.tensors().into_iter().map(|t| t.name).collect();
    assert_eq!(names.len(), 2 * paths.len(), "{names:?}");
    assert!(
        !f.warnings().iter().any(|w| w.contains("taken twice")),
        "{:?}",
        f.warnings()
    );
    // Every parameter is found under its own name, with its own value.
    for (i, p) in paths.iter().enumerate() {
        let name = Model::export_name(p);
        assert_eq!(Model::parse_export_name(&name).as_ref(), Some(p), "{name}");
        let v = f.read_tensor(&name).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(v, vec![i as f32], "{name}");
        assert!(names.contains(&format!("{name}/Adam.m1")), "{names:?}");
        assert_eq!(m.get_dotted(&name), m.get(p));
    }
    // The header's entries are the same names.
    let h = f.header();
    let entries = &h.iter().find(|(k, _)| k == "entries").unwrap().1;
    let tensorfmt_core::FieldValue::Map(entries) = entries else {
        panic!("{entries:?}")
    };
    assert_eq!(entries.len(), paths.len());
    // Writing the exported tensors back keeps every parameter under its key path.
    let named: Vec<_> = names
        .iter()
        .map(|n| (n.clone(), f.read_tensor(n).unwrap()))
        .collect();
    let PrimitivData::Model(back) = build(&named, &WriteOptions::default()).unwrap() else {
        panic!("not a model")
    };
    assert_eq!(back, m);
}

#[test]
fn malformed_escapes_are_refused() {
    for bad in [r"a\q", r"a\", r"a\x4", r"a\x+1", "a/b"] {
        assert_eq!(Model::parse_export_name(bad), None, "{bad}");
    }
    let t =
        tensorfmt_core::Tensor::from_vec(vec![1f32], [1], tensorfmt_core::Order::RowMajor).unwrap();
    let err = build(&[(r"a\q".to_string(), t)], &WriteOptions::default()).unwrap_err();
    assert!(err.to_string().contains("export name"), "{err}");
}
