//! Opt-in: our shape rules against OpenCV 4's Caffe importer. Each listed corpus net is
//! written with random weights from the inferred parameter shapes (so OpenCV also checks
//! every parameter blob shape when it loads them), loaded with
//! `cv2.dnn.readNetFromCaffe`, and `Net.getLayersShapes` is compared with
//! `infer_shapes` for every layer OpenCV keeps under its Caffe name.
//!
//! Set `TENSORFMT_OPENCV_PYTHON` to a Python with `cv2` 4.x (`opencv-python-headless<5`),
//! e.g. `TENSORFMT_OPENCV_PYTHON=target/py-venv/bin/python`.

use std::collections::HashMap;
use std::path::PathBuf;

use tensorfmt_caffe::{
    blob_from_tensor, encode_weights_model, infer_shapes, parse_net, random_weights, Schema,
    WeightsLayer,
};

const SCRIPT: &str = r#"
import sys, cv2, numpy as np
proto, model, shape = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(',')]
net = cv2.dnn.readNetFromCaffe(proto, model)
ids, ins, outs = net.getLayersShapes(shape)
names = net.getLayerNames()
for i, lid in enumerate(ids):
    lid = int(np.array(lid).flatten()[0])
    if lid == 0:
        continue
    shapes = ';'.join(','.join(str(int(d)) for d in np.array(s).flatten()) for s in outs[i])
    print(names[lid - 1] + '\t' + shapes)
"#;

#[test]
fn shapes_agree_with_opencv() {
    let Some(python) = std::env::var_os("TENSORFMT_OPENCV_PYTHON") else {
        eprintln!(
            "SKIPPED: set TENSORFMT_OPENCV_PYTHON to a Python with OpenCV 4 to compare shapes"
        );
        return;
    };
    let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe") else {
        return;
    };
    let nets = dir.join("nets");
    let tmp = tempfile::tempdir().unwrap();
    let mut compared = 0;
    for net in [
        "mnist_lenet",
        "cifar10_quick",
        "cifar10_full",
        "bvlc_googlenet",
        "squeezenet_v1_0",
        "squeezenet_v1_1",
        "mobilenet_v1",
        "mobilenet_v2",
        "mtcnn_det1",
        "mtcnn_det2",
        "mtcnn_det3",
        "mtcnn_det4",
        "mobilenet_ssd",
        "opencv_face_detector",
        "age_net",
        "shufflenet_v2_1x",
        "inception_v3",
        "se_bn_inception",
        "xception",
        "densenet121",
        "colorization_v2",
        "resnet50",
    ] {
        let proto = nets.join(format!("{net}.prototxt"));
        let text = std::fs::read_to_string(&proto).unwrap();
        // OpenCV reads ShuffleNet's fork field as a custom parameter; our builtin schema
        // needs the snippet.
        let schema = if net.starts_with("shufflenet") {
            Schema::compile(
                &nets.join("forks/farmingyard_ShuffleNet_caffe.proto.snippet"),
                &Default::default(),
            )
            .unwrap()
        } else {
            Schema::builtin().clone()
        };
        let def = parse_net(&text, &schema, &Default::default()).unwrap();
        let shapes = infer_shapes(&def, &[]).unwrap();
        let layers: Vec<WeightsLayer> = random_weights(&def, &shapes, 3)
            .into_iter()
            .map(|(name, blobs)| WeightsLayer {
                name,
                type_name: None,
                blobs: blobs.iter().map(|t| blob_from_tensor(t).unwrap()).collect(),
            })
            .collect();
        let model: PathBuf = tmp.path().join(format!("{net}.caffemodel"));
        std::fs::write(&model, encode_weights_model(Some(net), &layers)).unwrap();
        let input = shapes.inputs[0]
            .1
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let out = std::process::Command::new(&python)
            .args(["-c", SCRIPT])
            .arg(&proto)
            .arg(&model)
            .arg(&input)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{net}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs: HashMap<String, Vec<Vec<usize>>> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (name, s) = l.split_once('\t').unwrap();
                let shapes = s
                    .split(';')
                    .map(|one| {
                        one.split(',')
                            .filter(|d| !d.is_empty())
                            .map(|d| d.parse().unwrap())
                            .collect()
                    })
                    .collect();
                (name.to_string(), shapes)
            })
            .collect();
        for l in &shapes.layers {
            // OpenCV gives Silence an output; Caffe's has no top.
            if let Some(t) = theirs.get(&l.name).filter(|_| l.kind != "Silence") {
                assert_eq!(t, &l.tops, "{net}: layer {}", l.name);
                compared += 1;
            }
        }
    }
    eprintln!("{compared} layer outputs agree with OpenCV");
    assert!(compared > 2000);
}
