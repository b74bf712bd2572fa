//! Golden fixtures from `cargo xtask fixtures` (`testdata/caffe/`, built by an independent
//! byte-level builder): our reader must produce each `.dump`, and our writers must
//! reproduce the fixture bytes exactly.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use tensorfmt_caffe::{
    open_tensor_file, read_blob_vector, read_model, read_solver_state, save_tensors, RawBlob,
};
use tensorfmt_core::{DType, ReadOptions, TensorFile, WriteOptions};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/caffe")
}

fn read(name: &str) -> Bytes {
    std::fs::read(testdata().join(name)).unwrap().into()
}

fn dump(f: &dyn TensorFile) -> String {
    let mut s = format!("kind: {}\n", f.kind());
    for info in f.tensors() {
        let t = f.read_tensor(&info.name).unwrap();
        let vals: Vec<String> = match t.dtype() {
            DType::F64 => t
                .to_vec::<f64>()
                .unwrap()
                .iter()
                .map(f64::to_string)
                .collect(),
            DType::F32 => t
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(f32::to_string)
                .collect(),
            _ => t
                .cast(DType::F32)
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(f32::to_string)
                .collect(),
        };
        s.push_str(&format!(
            "tensor {} {} {:?} = {}\n",
            info.name,
            info.dtype.name(),
            info.shape.dims(),
            vals.join(" ")
        ));
    }
    s
}

#[test]
fn every_fixture_matches_its_dump() {
    let mut n = 0;
    for e in std::fs::read_dir(testdata()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "dump") {
            continue;
        }
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let want = std::fs::read_to_string(testdata().join(format!("{name}.dump"))).unwrap();
        let data = read(&name);
        assert!(
            tensorfmt_caffe::sniff(&data, data.len() as u64),
            "{name} not sniffed"
        );
        // The dumps record what Caffe itself does: strict mode.
        let strict = ReadOptions {
            strict: true,
            ..ReadOptions::default()
        };
        if name == "mixed_layers.caffemodel" {
            // Not strict: read as OpenCV did (the V1 `layers`), with a warning.
            let f = open_tensor_file(data.clone(), &ReadOptions::default()).unwrap();
            assert!(f.kind().contains("V1"), "{}", f.kind());
            assert!(
                f.warnings()[0].contains("Caffe refuses"),
                "{:?}",
                f.warnings()
            );
        }
        match open_tensor_file(data, &strict) {
            Ok(f) => assert_eq!(dump(f.as_ref()), want, "{name}"),
            Err(e) => {
                let text = want
                    .strip_prefix("error: ")
                    .unwrap_or_else(|| panic!("{name}: {e}"));
                assert!(e.to_string().contains(text.trim()), "{name}: {e}");
            }
        }
        n += 1;
    }
    assert_eq!(n, 12);
}

#[test]
fn models_rewrite_byte_for_byte() {
    for name in [
        "v2_tiny.caffemodel",
        "v1_legacy.caffemodel",
        "v0_net.caffemodel",
    ] {
        let data = read(name);
        let m = read_model(data.clone()).unwrap();
        assert!(m.to_bytes() == data[..], "{name}");
    }
    // Replacing blobs keeps the unknown field of the V1 layer's inner_product_param.
    let data = read("v1_legacy.caffemodel");
    let mut m = read_model(data.clone()).unwrap();
    m.set_blobs("ip1", vec![RawBlob::from_f32(&[3, 2], &[0.0; 6])])
        .unwrap();
    let out = m.to_bytes();
    let again = read_model(out.clone().into()).unwrap();
    assert_eq!(again.layer("ip1").unwrap().blobs.len(), 1);
    let before = m.v1_layer_parameter(0).unwrap();
    let after = again.v1_layer_parameter(0).unwrap();
    assert_eq!(before, after);
    assert!(
        out.windows(2).any(|w| w == [0x98, 0x06]),
        "fork field 99 kept"
    );
}

#[test]
fn writers_reproduce_fixtures() {
    let dir = tempfile::tempdir().unwrap();
    // Mean file from its tensor: legacy fields, as compute_image_mean.
    let mean = open_tensor_file(read("mean_legacy.binaryproto"), &ReadOptions::default()).unwrap();
    let p = dir.path().join("m.binaryproto");
    save_tensors(
        &p,
        &[("mean".into(), mean.read_tensor("mean").unwrap())],
        &WriteOptions::default(),
    )
    .unwrap();
    assert!(std::fs::read(&p).unwrap() == read("mean_legacy.binaryproto")[..]);
    // BlobProtoVector from its tensors.
    let v = open_tensor_file(read("two.blobprotovector"), &ReadOptions::default()).unwrap();
    let tensors: Vec<_> = v
        .tensors()
        .iter()
        .map(|i| (i.name.clone(), v.read_tensor(&i.name).unwrap()))
        .collect();
    let p = dir.path().join("v.bin");
    let opts = WriteOptions {
        kind: Some("blobprotovector".into()),
        ..Default::default()
    };
    save_tensors(&p, &tensors, &opts).unwrap();
    assert!(std::fs::read(&p).unwrap() == read("two.blobprotovector")[..]);
    assert_eq!(
        read_blob_vector(read("two.blobprotovector")).unwrap().len(),
        2
    );
    // Solver state.
    let s = read_solver_state(read("tiny.solverstate")).unwrap();
    assert!(s.to_bytes() == read("tiny.solverstate")[..]);
    // Weights-only caffemodel from the V2 fixture's tensors: same blobs (the fixture's
    // topology fields aside), readable with identical tensors.
    let f = open_tensor_file(read("v2_tiny.caffemodel"), &ReadOptions::default()).unwrap();
    let tensors: Vec<_> = f
        .tensors()
        .iter()
        .map(|i| (i.name.clone(), f.read_tensor(&i.name).unwrap()))
        .collect();
    let p = dir.path().join("w.caffemodel");
    save_tensors(&p, &tensors, &WriteOptions::default()).unwrap();
    let g = open_tensor_file(std::fs::read(&p).unwrap().into(), &ReadOptions::default()).unwrap();
    assert_eq!(dump(g.as_ref()), dump(f.as_ref()));
    let orig = read_model(read("v2_tiny.caffemodel")).unwrap();
    let new = read_model(std::fs::read(&p).unwrap().into()).unwrap();
    for (a, b) in orig.layers.iter().zip(&new.layers) {
        for (x, y) in a.blobs.iter().zip(&b.blobs) {
            assert_eq!(x.to_bytes(), y.to_bytes());
        }
    }
}
