//! Writes that lose nothing: every writer, fed a sink that fails after N bytes, returns
//! an error (never a panic) and has written exactly the first N bytes of the right
//! output; a writer process killed part-way leaves the old file under the target name.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use tensorfmt_caffe::{
    read_blob_proto, read_blob_vector, read_model, read_solver_state, write_tensors, RawBlob,
};
use tensorfmt_core::testing::{corpus_dir, prefix_lengths, FailAfter};
use tensorfmt_core::{Order, Tensor, WriteOptions};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/caffe")
}

/// Runs `write` into `FailAfter(n)` for a sweep of `n` below the full length (every n
/// for small outputs): each must fail with the first `n` bytes of `full` written.
fn sweep(what: &str, full: &[u8], write: impl Fn(&mut FailAfter) -> bool) -> usize {
    let ns = prefix_lengths(full.len(), &[]);
    for &n in &ns {
        let mut w = FailAfter::new(n);
        assert!(
            !write(&mut w),
            "{what}: a write failing after {n} bytes succeeded"
        );
        assert_eq!(
            w.written(),
            &full[..n],
            "{what}: bytes before the failure at {n}"
        );
    }
    let mut w = FailAfter::new(full.len());
    assert!(write(&mut w), "{what}: the full write failed");
    assert_eq!(w.written(), full, "{what}");
    ns.len()
}

#[test]
fn every_writer_fails_cleanly_part_way() {
    let mut runs = 0;
    for name in [
        "v2_tiny.caffemodel",
        "v1_legacy.caffemodel",
        "v0_net.caffemodel",
        "mixed_layers.caffemodel",
    ] {
        let data: Bytes = std::fs::read(testdata().join(name)).unwrap().into();
        let m = if name.starts_with("mixed") {
            let o = tensorfmt_caffe::CaffeReadOptions {
                mixed_layers: tensorfmt_caffe::MixedLayers::PreferV1,
                ..Default::default()
            };
            tensorfmt_caffe::read_model_with(data.clone(), &o).unwrap()
        } else {
            read_model(data.clone()).unwrap()
        };
        runs += sweep(name, &data, |w| m.write_to(w).is_ok());
    }
    let mean: Bytes = std::fs::read(testdata().join("mean_legacy.binaryproto"))
        .unwrap()
        .into();
    let b = read_blob_proto(mean.clone()).unwrap();
    runs += sweep("mean", &mean, |w| b.write_to(w).is_ok());
    let st: Bytes = std::fs::read(testdata().join("tiny.solverstate"))
        .unwrap()
        .into();
    let s = read_solver_state(st.clone()).unwrap();
    runs += sweep("solverstate", &st, |w| s.write_to(w).is_ok());
    // write_tensors, every kind.
    let t = |v: Vec<f32>, d: &[usize]| Tensor::from_vec(v, d, Order::RowMajor).unwrap();
    let named = [
        (
            "conv/0".to_string(),
            t((0..24).map(|x| x as f32).collect(), &[2, 3, 2, 2]),
        ),
        ("conv/1".to_string(), t(vec![0.5, -0.5], &[2])),
    ];
    // A BlobProtoVector's blobs are named by their index.
    let vector: Vec<(String, Tensor)> = named
        .iter()
        .map(|(n, t)| (n.replace("conv/", "blobs/"), t.clone()))
        .collect();
    for kind in ["caffemodel", "blobprotovector", "binaryproto"] {
        let tensors = match kind {
            "binaryproto" => &named[..1],
            "blobprotovector" => &vector[..],
            _ => &named[..],
        };
        let opts = WriteOptions {
            kind: Some(kind.into()),
            ..WriteOptions::default()
        };
        let mut full = Vec::new();
        write_tensors(&mut full, tensors, &opts).unwrap();
        runs += sweep(kind, &full, |w| write_tensors(w, tensors, &opts).is_ok());
    }
    let vec_bytes = {
        let mut v = Vec::new();
        write_tensors(
            &mut v,
            &vector,
            &WriteOptions {
                kind: Some("blobprotovector".into()),
                ..WriteOptions::default()
            },
        )
        .unwrap();
        v
    };
    assert_eq!(read_blob_vector(vec_bytes.into()).unwrap().len(), 2);
    let history = vec![("history/0".to_string(), t(vec![1.0; 6], &[2, 3]))];
    let opts = WriteOptions {
        kind: Some("solverstate".into()),
        ..WriteOptions::default()
    };
    let mut full = Vec::new();
    write_tensors(&mut full, &history, &opts).unwrap();
    runs += sweep("solverstate tensors", &full, |w| {
        write_tensors(w, &history, &opts).is_ok()
    });
    eprintln!("caffe writers: {runs} failing writes checked");
}

#[test]
fn corpus_models_fail_cleanly_part_way() {
    let Some(dir) = corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe") else {
        return;
    };
    let t = Instant::now();
    let mut runs = 0;
    // The two smallest models are swept (about 1 500 failure points each); every
    // failure point re-encodes the model up to it, so the multi-MB ones are left to
    // the byte-identity test in corpus.rs.
    for name in [
        "mtcnn_det1.caffemodel",
        "v1_cifar10_full_iter_70000.caffemodel",
    ] {
        let data = tensorfmt_core::io::map_file(dir.join(name)).unwrap();
        let m = read_model(data.clone()).unwrap();
        runs += sweep(name, &data, |w| m.write_to(w).is_ok());
    }
    eprintln!(
        "caffe corpus writers: {runs} failing writes in {:?}",
        t.elapsed()
    );
}

/// The child side of `killed_writer_leaves_the_old_file`: rewrites a big model over
/// and over until killed. Does nothing unless the parent set the variable.
#[test]
fn child_writer_loop() {
    let Ok(target) = std::env::var("TENSORFMT_CAFFE_KILL_TARGET") else {
        return;
    };
    let big = Tensor::from_vec(vec![0.25f32; 16 << 20], [16 << 20], Order::RowMajor).unwrap();
    let named = [("big/0".to_string(), big)];
    loop {
        tensorfmt_caffe::save_tensors(Path::new(&target), &named, &WriteOptions::default())
            .unwrap();
    }
}

#[test]
fn killed_writer_leaves_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("model.caffemodel");
    let old = tensorfmt_caffe::encode_weights_model(
        Some("old"),
        &[tensorfmt_caffe::WeightsLayer {
            name: "w".into(),
            type_name: None,
            blobs: vec![RawBlob::from_f32(&[2], &[1.0, 2.0])],
        }],
    );
    // The target is either the old file or a complete new one, never a half file.
    tensorfmt_core::testing::kill_rewriting_child(
        "child_writer_loop",
        "TENSORFMT_CAFFE_KILL_TARGET",
        &target,
        &old,
        &[0, 30, 120],
        |now| {
            let m = read_model(now.to_vec().into()).unwrap();
            assert_eq!(m.layers[0].blobs[0].data.len(), 64 << 20);
        },
    );
}
