//! The real Caffe files of the shared corpus (`corpus/caffe/SOURCES.md`): layer names,
//! types, blob shapes and values as documented, byte-exact round trips through our
//! writer, and agreement with the prost-generated decoder.

use std::path::PathBuf;

use bytes::Bytes;
use prost::Message;
use tensorfmt_caffe::{
    open_tensor_file, proto, read_blob_proto, read_model, read_solver_state, sniff, CaffeFile,
    FileKind, NetVersion, RawBlob,
};
use tensorfmt_core::{ReadOptions, TensorFile};

fn corpus() -> Option<PathBuf> {
    tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe")
}

fn load(dir: &std::path::Path, name: &str) -> Bytes {
    tensorfmt_core::io::map_file(dir.join(name)).unwrap()
}

const MODELS: [&str; 7] = [
    "v1_cifar10_quick_iter_4000.caffemodel",
    "v1_cifar10_full_iter_70000.caffemodel",
    "v2_lenet_iter_10000.caffemodel",
    "mtcnn_det1.caffemodel",
    "mtcnn_det2.caffemodel",
    "mtcnn_det3.caffemodel",
    "mtcnn_det4.caffemodel",
];

fn legacy(b: &RawBlob) -> Option<[i32; 4]> {
    b.has_legacy()
        .then(|| [b.num, b.channels, b.height, b.width].map(|v| v.unwrap_or(0)))
}

#[test]
fn v1_cifar10_quick_layers_and_legacy_shapes() {
    let Some(dir) = corpus() else { return };
    let m = read_model(load(&dir, "v1_cifar10_quick_iter_4000.caffemodel")).unwrap();
    assert_eq!(m.version, NetVersion::V1);
    assert_eq!(m.name.as_deref(), Some("CIFAR10_quick"));
    assert_eq!(m.layers.len(), 13);
    let expect: [(&str, [i32; 4], [i32; 4]); 5] = [
        ("conv1", [32, 3, 5, 5], [1, 1, 1, 32]),
        ("conv2", [32, 32, 5, 5], [1, 1, 1, 32]),
        ("conv3", [64, 32, 5, 5], [1, 1, 1, 64]),
        ("ip1", [1, 1, 64, 1024], [1, 1, 1, 64]),
        ("ip2", [1, 1, 10, 64], [1, 1, 1, 10]),
    ];
    let mut total = 0;
    for (name, w, b) in expect {
        let l = m.layer(name).unwrap();
        assert_eq!(l.blobs.len(), 2, "{name}");
        assert_eq!(legacy(&l.blobs[0]), Some(w), "{name}");
        assert_eq!(legacy(&l.blobs[1]), Some(b), "{name}");
        total += l.blobs.iter().map(|b| b.data.len() / 4).sum::<usize>();
    }
    assert_eq!(total, 145_578);
    assert_eq!(m.layer("conv1").unwrap().type_name, "Convolution");
    assert_eq!(m.layer("ip1").unwrap().type_name, "InnerProduct");
    let types: Vec<&str> = m.layers.iter().map(|l| l.type_name.as_str()).collect();
    for t in ["Data", "Pooling", "ReLU", "SoftmaxWithLoss"] {
        assert!(types.contains(&t), "{t} in {types:?}");
    }
    // The squeezed modern shapes and the exported tensors.
    let ip1 = &m.layer("ip1").unwrap().blobs;
    assert_eq!(ip1[0].legacy_squeezed_shape("x").unwrap(), vec![64, 1024]);
    assert_eq!(ip1[1].legacy_squeezed_shape("x").unwrap(), vec![64]);
    let f = open_tensor_file(
        load(&dir, "v1_cifar10_quick_iter_4000.caffemodel"),
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(f.read_tensor("ip1/0").unwrap().dims(), &[64, 1024]);
    assert_eq!(f.read_tensor("conv1/0").unwrap().dims(), &[32, 3, 5, 5]);
    assert_eq!(f.tensors().len(), 10);
    // blobs_lr / weight_decay are unpacked (wire type 5) and decoded by prost.
    let i = m.layers.iter().position(|l| l.name == "conv1").unwrap();
    let p = m.v1_layer_parameter(i).unwrap();
    assert_eq!(p.blobs_lr.len(), 2);
    assert_eq!(p.bottom, vec!["data".to_string()]);
}

#[test]
fn v1_cifar10_full_has_lrn_and_ip1() {
    let Some(dir) = corpus() else { return };
    let m = read_model(load(&dir, "v1_cifar10_full_iter_70000.caffemodel")).unwrap();
    assert_eq!(m.name.as_deref(), Some("CIFAR10_full"));
    assert_eq!(m.layers.len(), 14);
    assert!(m.layers.iter().any(|l| l.type_name == "LRN"));
    let ip1 = &m.layer("ip1").unwrap().blobs;
    assert_eq!(legacy(&ip1[0]), Some([1, 1, 10, 1024]));
    assert_eq!(legacy(&ip1[1]), Some([1, 1, 1, 10]));
    assert_eq!(
        legacy(&m.layer("conv3").unwrap().blobs[0]),
        Some([64, 32, 5, 5])
    );
}

#[test]
fn v2_lenet_shapes_and_topology() {
    let Some(dir) = corpus() else { return };
    let m = read_model(load(&dir, "v2_lenet_iter_10000.caffemodel")).unwrap();
    assert_eq!(m.version, NetVersion::V2);
    assert_eq!(m.name.as_deref(), Some("LeNet"));
    assert_eq!(m.layers.len(), 9);
    let expect: [(&str, &[usize], &[usize]); 4] = [
        ("conv1", &[20, 1, 5, 5], &[20]),
        ("conv2", &[50, 20, 5, 5], &[50]),
        ("ip1", &[500, 800], &[500]),
        ("ip2", &[10, 500], &[10]),
    ];
    let f = CaffeFile::open(
        load(&dir, "v2_lenet_iter_10000.caffemodel"),
        &Default::default(),
    )
    .unwrap();
    let mut total = 0;
    for (name, w, b) in expect {
        let l = m.layer(name).unwrap();
        assert!(!l.blobs[0].has_legacy());
        assert_eq!(l.blobs[0].shape_dims("x").unwrap(), w);
        assert_eq!(l.blobs[1].shape_dims("x").unwrap(), b);
        assert_eq!(f.read_tensor(&format!("{name}/0")).unwrap().dims(), w);
        total += l.blobs.iter().map(|b| b.data.len() / 4).sum::<usize>();
    }
    assert_eq!(total, 431_080);
    assert_eq!(m.layer("conv1").unwrap().type_name, "Convolution");
    for i in 0..m.layers.len() {
        assert_eq!(
            m.layer_parameter(i).unwrap().phase,
            Some(proto::Phase::Train as i32)
        );
    }
}

#[test]
fn mtcnn_models() {
    let Some(dir) = corpus() else { return };
    let cases: [(&str, &str, usize, &str, &[usize]); 4] = [
        (
            "mtcnn_det1.caffemodel",
            "12Net",
            18,
            "conv1",
            &[10, 3, 3, 3],
        ),
        ("mtcnn_det2.caffemodel", "24Net", 22, "conv4", &[128, 576]),
        ("mtcnn_det3.caffemodel", "48Net", 25, "conv5", &[256, 1152]),
        ("mtcnn_det4.caffemodel", "24Net", 67, "fc4", &[256, 2880]),
    ];
    for (file, name, n, layer, shape) in cases {
        let m = read_model(load(&dir, file)).unwrap();
        assert_eq!(m.name.as_deref(), Some(name), "{file}");
        assert_eq!(m.layers.len(), n, "{file}");
        assert_eq!(
            m.layer(layer).unwrap().blobs[0].shape_dims("x").unwrap(),
            shape,
            "{file}"
        );
        m.validate().unwrap();
    }
    let m1 = read_model(load(&dir, "mtcnn_det1.caffemodel")).unwrap();
    assert_eq!(
        m1.layer("conv1").unwrap().blobs[1].shape_dims("x").unwrap(),
        vec![10]
    );
    assert_eq!(m1.layer("PReLU1").unwrap().type_name, "PReLU");
    assert_eq!(
        m1.layer("PReLU1").unwrap().blobs[0]
            .shape_dims("x")
            .unwrap(),
        vec![10]
    );
    assert_eq!(
        m1.layer("conv4-2").unwrap().blobs[0]
            .shape_dims("x")
            .unwrap(),
        vec![4, 32, 1, 1]
    );
    let m4 = read_model(load(&dir, "mtcnn_det4.caffemodel")).unwrap();
    let floats: usize = m4
        .layers
        .iter()
        .flat_map(|l| &l.blobs)
        .map(|b| b.data.len() / 4)
        .sum();
    assert_eq!(floats, 948_102);
    assert!(m4.layers.iter().any(|l| l.type_name == "Concat"));
}

#[test]
fn every_model_round_trips_byte_for_byte() {
    let Some(dir) = corpus() else { return };
    for file in MODELS {
        let data = load(&dir, file);
        let m = read_model(data.clone()).unwrap();
        assert!(m.to_bytes() == data[..], "{file} changed on rewrite");
    }
}

#[test]
fn fork_models_round_trip_with_replaced_blobs() {
    let Some(dir) = corpus() else { return };
    for file in [
        "mtcnn_det1.caffemodel",
        "mtcnn_det2.caffemodel",
        "mtcnn_det3.caffemodel",
    ] {
        let data = load(&dir, file);
        let mut m = read_model(data.clone()).unwrap();
        // Replace every blob by a re-built copy (new buffers, same values and shapes).
        for l in &mut m.layers {
            for b in &mut l.blobs {
                let dims: Vec<i64> = b.shape.clone().unwrap_or_default();
                *b = RawBlob::from_f32(&dims, &b.data_f32());
            }
        }
        assert!(m.to_bytes() == data[..], "{file}");
        // Changed weights: only the payload bytes differ, the fork fields survive.
        let conv1 = &mut m
            .layers
            .iter_mut()
            .find(|l| l.name == "conv1")
            .unwrap()
            .blobs[0];
        let mut v = conv1.data_f32();
        v[0] += 1.0;
        let dims = conv1.shape.clone().unwrap();
        *conv1 = RawBlob::from_f32(&dims, &v);
        let out = m.to_bytes();
        assert_eq!(out.len(), data.len());
        let changed = out.iter().zip(data.iter()).filter(|(a, b)| a != b).count();
        assert!(
            (1..=4).contains(&changed),
            "{file}: {changed} bytes changed"
        );
        let again = read_model(out.into()).unwrap();
        assert_eq!(again.layer("conv1").unwrap().blobs[0].data_f32()[0], v[0]);
    }
}

#[test]
fn prost_drops_fork_fields_but_agrees_on_blobs() {
    let Some(dir) = corpus() else { return };
    for file in MODELS {
        let data = load(&dir, file);
        let p = proto::NetParameter::decode(data.clone()).unwrap();
        let m = read_model(data).unwrap();
        let blobs: Vec<&proto::BlobProto> = if m.version == NetVersion::V2 {
            p.layer.iter().flat_map(|l| &l.blobs).collect()
        } else {
            p.layers.iter().flat_map(|l| &l.blobs).collect()
        };
        let ours: Vec<&RawBlob> = m.layers.iter().flat_map(|l| &l.blobs).collect();
        assert_eq!(blobs.len(), ours.len(), "{file}");
        for (a, b) in blobs.iter().zip(ours) {
            assert_eq!(a.data, b.data_f32(), "{file}");
            assert_eq!(a.shape.as_ref().map(|s| s.dim.clone()), b.shape, "{file}");
            assert_eq!(
                (a.num, a.channels, a.height, a.width),
                (b.num, b.channels, b.height, b.width)
            );
            // Our blob encoder is prost's encoder for the same message.
            assert_eq!(a.encode_to_vec(), b.to_bytes(), "{file}");
        }
    }
}

#[test]
fn solverstate_history() {
    let Some(dir) = corpus() else { return };
    let data = load(&dir, "v1_cifar10_quick_iter_4000.solverstate");
    let s = read_solver_state(data.clone()).unwrap();
    assert_eq!(s.iter, Some(4000));
    assert_eq!(
        s.learned_net.as_deref(),
        Some("examples/cifar10/cifar10_quick_iter_4000.caffemodel")
    );
    assert_eq!(s.current_step.unwrap_or(0), 0); // absent: the default, 0
    assert_eq!(s.history.len(), 10);
    assert!(s.to_bytes() == data[..]);
    let m = read_model(load(&dir, "v1_cifar10_quick_iter_4000.caffemodel")).unwrap();
    let params: Vec<&RawBlob> = m.layers.iter().flat_map(|l| &l.blobs).collect();
    for (h, p) in s.history.iter().zip(params) {
        assert_eq!(legacy(h), legacy(p));
    }
    let f = open_tensor_file(data, &ReadOptions::default()).unwrap();
    assert_eq!(f.tensors().len(), 10);
    assert_eq!(f.read_tensor("history/0").unwrap().dims(), &[32, 3, 5, 5]);
    assert_eq!(f.read_tensor("history/7").unwrap().dims(), &[64]);
}

#[test]
fn mean_file() {
    let Some(dir) = corpus() else { return };
    let data = load(&dir, "mean_227.binaryproto");
    let b = read_blob_proto(data.clone()).unwrap();
    assert_eq!(legacy(&b), Some([1, 3, 227, 227]));
    assert!(b.shape.is_none());
    let v = b.data_f32();
    assert_eq!(v.len(), 154_587);
    for (got, want) in v.iter().zip([125.42f32, 127.91, 128.20]) {
        assert!((got - want).abs() < 0.005, "{got} vs {want}");
    }
    assert!(b.to_bytes() == data[..]);
    let f = open_tensor_file(data.clone(), &ReadOptions::default()).unwrap();
    assert_eq!(f.kind(), "mean file (BlobProto)");
    assert_eq!(f.read_tensor("mean").unwrap().dims(), &[1, 3, 227, 227]);
    // Written back from the tensor as compute_image_mean would: the same bytes.
    let dir2 = tempfile::tempdir().unwrap();
    let p = dir2.path().join("m.binaryproto");
    tensorfmt_caffe::save_tensors(
        &p,
        &[("mean".into(), f.read_tensor("mean").unwrap())],
        &Default::default(),
    )
    .unwrap();
    assert!(std::fs::read(&p).unwrap() == data[..]);
}

#[test]
fn detection_and_sniffing_of_every_file() {
    let Some(dir) = corpus() else { return };
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let want = if name.ends_with(".caffemodel") {
            FileKind::Model
        } else if name.ends_with(".solverstate") {
            FileKind::SolverState
        } else if name.ends_with(".binaryproto") {
            FileKind::Mean
        } else {
            continue;
        };
        let data = std::fs::read(&p).unwrap();
        assert_eq!(tensorfmt_caffe::detect_kind(&data), Some(want), "{name}");
        assert!(
            sniff(&data[..4096.min(data.len())], data.len() as u64),
            "{name}"
        );
        let f = open_tensor_file(data.into(), &ReadOptions::default()).unwrap();
        f.validate().unwrap();
        n += 1;
    }
    assert_eq!(n, 9);
}
