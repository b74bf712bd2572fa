//! Every corpus deploy net with seeded random weights (tensorfmt-caffe's
//! shapes from `infer_shapes`): lowers, or fails with the documented
//! reason. Run with `TENSORFMT_KEEP_ONNX=dir` to keep the models (and the random
//! caffemodels) for the Python comparison against OpenCV.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tensorfmt_caffe::{infer_shapes, parse_net, random_weights, NetDef, Schema};
use tensorfmt_core::testing::corpus_dir;
use tensorfmt_core::{DType, Order, Tensor};
use tensorfmt_lower::{lower, LowerError, LowerOptions};

/// The fork schema a corpus net needs.
pub fn fork_schema(net: &str) -> Option<&'static str> {
    Some(match net {
        "pspnet50_ade20k" => "hszhao_PSPNet_caffe.proto",
        "enet_cityscapes" => "TimoSaemann_caffe-enet_caffe.proto",
        "segnet_driving_webdemo" => "alexgkendall_caffe-segnet_caffe.proto",
        "shufflenet_1x_g3" | "shufflenet_v2_1x" => "farmingyard_ShuffleNet_caffe.proto.snippet",
        _ => return None,
    })
}

/// Nets that do not lower, with the reason the README gives.
const KNOWN_FAILURES: &[(&str, &str)] = &[];

/// Input shapes for nets whose declared ones are placeholders (OpenPose: 1x1).
pub fn input_override(net: &str) -> Vec<(String, Vec<usize>)> {
    match net {
        "openpose_coco_linevec" => vec![("image".into(), vec![1, 3, 184, 184])],
        _ => Vec::new(),
    }
}

fn parse(dir: &Path, name: &str) -> NetDef {
    let schema = match fork_schema(name) {
        Some(f) => Schema::compile(&dir.join("forks").join(f), &Default::default()).unwrap(),
        None => Schema::builtin().clone(),
    };
    let text = std::fs::read_to_string(dir.join(format!("{name}.prototxt"))).unwrap();
    parse_net(&text, &schema, &Default::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_corpus_net_lowers_or_fails_as_documented() {
    let Some(dir) = corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe") else {
        return;
    };
    let dir = dir.join("nets");
    let keep = std::env::var_os("TENSORFMT_KEEP_ONNX").map(PathBuf::from);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".prototxt")
                .map(String::from)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 45, "{} nets", names.len());
    // TENSORFMT_NETS=a,b: only those (for keeping a few models).
    if let Ok(only) = std::env::var("TENSORFMT_NETS") {
        names.retain(|n| only.split(',').any(|o| o == n));
    }
    let mut report = Vec::new();
    for name in &names {
        let net = parse(&dir, name);
        // Inputs without a usable shape (openpose declares 1x1) keep theirs: the test
        // is about the lowering.
        let over = input_override(name);
        let t0 = std::time::Instant::now();
        let shapes = infer_shapes(&net, &over).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Zero-filled blobs of Caffe's shapes: the lowering does not look at values, and
        // random ones cost seconds per VGG in a debug build (pytest uses random ones).
        let mut blobs: HashMap<String, Vec<Tensor>> =
            if std::env::var_os("TENSORFMT_RANDOM_WEIGHTS").is_some() {
                random_weights(&net, &shapes, 1).into_iter().collect()
            } else {
                net.layers
                    .iter()
                    .zip(&shapes.layers)
                    .filter(|(_, s)| !s.params.is_empty())
                    .map(|(l, s)| {
                        let zeros = s.params.iter().map(|p| {
                            Tensor::zeros(DType::F32, p.clone(), Order::RowMajor).unwrap()
                        });
                        (l.name.clone(), zeros.collect())
                    })
                    .collect()
            };
        let opts = LowerOptions {
            input_shapes: over,
            ..Default::default()
        };
        let t1 = std::time::Instant::now();
        let result = lower(&net, &mut blobs, &opts);
        eprintln!("{name}: weights {:?}, lowering {:?}", t1 - t0, t1.elapsed());
        match result {
            Ok(l) => {
                assert!(blobs.is_empty(), "{name}: unused blobs {:?}", blobs.keys());
                if let Some(k) = &keep {
                    let mut f = std::fs::File::create(k.join(format!("{name}.onnx"))).unwrap();
                    tensorfmt_onnx::write_model(&mut f, &l.model).unwrap();
                }
                report.push(format!("{name}: ok, outputs {:?}", l.outputs));
            }
            Err(e) => {
                let expected = KNOWN_FAILURES.iter().find(|(n, _)| n == name);
                match (&e, expected) {
                    (LowerError::Unsupported { layers }, Some((_, kind)))
                        if layers.iter().any(|l| &l.kind == kind) =>
                    {
                        report.push(format!("{name}: unsupported as documented: {e}"));
                    }
                    _ => panic!("{name}: {e}"),
                }
            }
        }
    }
    println!("{}", report.join("\n"));
}
