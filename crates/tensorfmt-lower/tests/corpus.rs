//! The real-weight corpus models lower (LeNet, CIFAR-10 quick/full, MTCNN det1-4 with
//! the nets/ prototxts); the written ONNX reads back with our reader.

use std::path::PathBuf;

use tensorfmt_core::testing::corpus_dir;
use tensorfmt_lower::{convert_files, LowerOptions, Sources};

fn corpus() -> Option<PathBuf> {
    corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe")
}

#[test]
fn real_models_convert() {
    let Some(dir) = corpus() else { return };
    let out_dir = std::env::var_os("TENSORFMT_KEEP_ONNX").map(PathBuf::from);
    let tmp = tempfile::tempdir().unwrap();
    for (model, net) in [
        ("v2_lenet_iter_10000.caffemodel", "mnist_lenet.prototxt"),
        (
            "v1_cifar10_quick_iter_4000.caffemodel",
            "cifar10_quick.prototxt",
        ),
        (
            "v1_cifar10_full_iter_70000.caffemodel",
            "cifar10_full.prototxt",
        ),
        ("mtcnn_det1.caffemodel", "mtcnn_det1.prototxt"),
        ("mtcnn_det2.caffemodel", "mtcnn_det2.prototxt"),
        ("mtcnn_det3.caffemodel", "mtcnn_det3.prototxt"),
        ("mtcnn_det4.caffemodel", "mtcnn_det4.prototxt"),
    ] {
        let out = out_dir
            .clone()
            .unwrap_or(tmp.path().to_path_buf())
            .join(net.replace(".prototxt", ".onnx"));
        let src = Sources {
            caffemodel: &dir.join(model),
            prototxt: &dir.join("nets").join(net),
            fork_proto: None,
        };
        let lowered = convert_files(src, &out, &LowerOptions::default(), &Default::default())
            .unwrap_or_else(|e| panic!("{net}: {e}"));
        assert!(!lowered.outputs.is_empty());
        let back = tensorfmt_onnx::read_model_file(
            std::fs::read(&out).unwrap().into(),
            &Default::default(),
        )
        .unwrap();
        assert_eq!(back.outputs, lowered.outputs, "{net}");
        assert!(back.nodes > 0);
    }
}
