//! The shared corpus (`../shared/corpus/primitiv`): every golden/ and synthesized/ file
//! decodes to the content of `expected.json` and is written back byte for byte; every
//! edge/ file gives primitiv's result.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::Value;
use tensorfmt_core::{Order, ReadOptions, TensorFile, WriteOptions};
use tensorfmt_primitiv::*;

fn corpus() -> Option<PathBuf> {
    tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "primitiv")
}

fn load(dir: &Path, rel: &str) -> Bytes {
    Bytes::from(std::fs::read(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}")))
}

fn files(dir: &Path, sub: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join(sub))
        .unwrap()
        .map(|e| format!("{sub}/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|n| n.ends_with(".data"))
        .collect();
    v.sort();
    v
}

fn opts() -> ReaderOptions {
    ReaderOptions::default()
}

fn check_tensor(what: &str, t: &PrimitivTensor, e: &Value) {
    let dims: Vec<u32> = e["dims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(t.shape().dims(), dims.as_slice(), "{what}: dims");
    assert_eq!(
        u64::from(t.shape().batch()),
        e["batch"].as_u64().unwrap(),
        "{what}: batch"
    );
    let vals = t.to_f32_vec();
    assert_eq!(
        vals.len() as u64,
        e["n_floats"].as_u64().unwrap(),
        "{what}: n_floats"
    );
    let as_f32 = |v: &Value| -> Vec<f32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect()
    };
    if let Some(all) = e.get("data_f32") {
        assert_eq!(vals, as_f32(all), "{what}: data");
    } else {
        let first4 = as_f32(&e["first4"]);
        let last2 = as_f32(&e["last2"]);
        assert_eq!(&vals[..4], first4.as_slice(), "{what}: first4");
        assert_eq!(&vals[vals.len() - 2..], last2.as_slice(), "{what}: last2");
    }
}

fn check_parameter(what: &str, p: &Parameter, e: &Value) {
    check_tensor(&format!("{what} value"), p.value(), &e["value"]);
    let stats = e["stats"].as_array().unwrap();
    assert_eq!(p.stats().len(), stats.len(), "{what}: stat count");
    for ((k, t), es) in p.stats().iter().zip(stats) {
        assert_eq!(
            k.to_string(),
            es["key"].as_str().unwrap(),
            "{what}: stat order"
        );
        check_tensor(&format!("{what} stat {k}"), t, &es["tensor"]);
    }
}

#[test]
fn golden_and_synthesized_match_expected_json() {
    let Some(dir) = corpus() else { return };
    let expected: Value =
        serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    let mut seen = 0;
    for rel in files(&dir, "golden")
        .into_iter()
        .chain(files(&dir, "synthesized"))
    {
        let e = &expected[&rel];
        assert!(e.is_object(), "{rel} missing from expected.json");
        let bytes = load(&dir, &rel);
        assert_eq!(bytes.len() as u64, e["size"].as_u64().unwrap());
        let d = read_file(bytes, &opts()).unwrap_or_else(|err| panic!("{rel}: {err}"));
        assert!(d.warnings.is_empty(), "{rel}: {:?}", d.warnings);
        assert_eq!(
            u64::from(d.data.data_type().code()),
            e["data_type"].as_u64().unwrap(),
            "{rel}"
        );
        match &d.data {
            PrimitivData::Shape(s) => {
                let es = &e["shape"];
                let dims: Vec<u32> = es["dims"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_u64().unwrap() as u32)
                    .collect();
                assert_eq!(s.dims(), dims.as_slice(), "{rel}");
                assert_eq!(u64::from(s.batch()), es["batch"].as_u64().unwrap(), "{rel}");
            }
            PrimitivData::Tensor(t) => check_tensor(&rel, t, &e["tensor"]),
            PrimitivData::Parameter(p) => check_parameter(&rel, p, &e["parameter"]),
            PrimitivData::Model(m) => {
                let entries = e["model"].as_array().unwrap();
                assert_eq!(m.len(), entries.len(), "{rel}");
                for ((path, p), ee) in m.entries().zip(entries) {
                    let keys: Vec<String> = path.iter().map(|k| k.to_string()).collect();
                    let ekeys: Vec<String> = ee["key"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|k| k.as_str().unwrap().to_string())
                        .collect();
                    assert_eq!(keys, ekeys, "{rel}: entry order");
                    check_parameter(&format!("{rel} {}", keys.join(".")), p, &ee["parameter"]);
                }
            }
            PrimitivData::Optimizer(o) => {
                let eo = &e["optimizer"];
                let eu = eo["uint_configs"].as_object().unwrap();
                let ef = eo["float_configs"].as_object().unwrap();
                assert_eq!(o.uint_configs.len(), eu.len(), "{rel}");
                assert_eq!(o.float_configs.len(), ef.len(), "{rel}");
                for (k, v) in eu {
                    assert_eq!(o.uint(k).map(u64::from), v.as_u64(), "{rel} {k}");
                }
                for (k, v) in ef {
                    assert_eq!(o.float(k), v.as_f64().map(|x| x as f32), "{rel} {k}");
                }
            }
        }
        if let Some(hex) = e.get("hex").and_then(Value::as_str) {
            let got: String = load(&dir, &rel)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(got, hex, "{rel}: hex");
        }
        seen += 1;
    }
    assert_eq!(seen, 25);
}

#[test]
fn golden_and_synthesized_round_trip_byte_for_byte() {
    let Some(dir) = corpus() else { return };
    for rel in files(&dir, "golden")
        .into_iter()
        .chain(files(&dir, "synthesized"))
    {
        let bytes = load(&dir, &rel);
        let d = read_file(bytes.clone(), &opts()).unwrap();
        let out = to_bytes(&d.data).unwrap();
        assert_eq!(out, bytes.as_ref(), "{rel}: read-then-write differs");
        // Also through the file writer (atomic).
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("out.data");
        write_file(&p, &d.data).unwrap();
        assert_eq!(
            std::fs::read(&p).unwrap(),
            bytes.as_ref(),
            "{rel}: write_file differs"
        );
    }
}

#[test]
fn every_corpus_file_is_sniffed_and_truncations_fail_cleanly() {
    let Some(dir) = corpus() else { return };
    for sub in ["golden", "synthesized", "edge"] {
        for rel in files(&dir, sub) {
            let bytes = load(&dir, &rel);
            let head = &bytes[..bytes.len().min(4096)];
            let expect = !rel.contains("bad_header_fixint")
                && !rel.contains("bad_version")
                && !rel.contains("bad_truncated_after_header");
            assert_eq!(sniff(head, bytes.len() as u64), expect, "{rel}");
            if sub == "edge" {
                continue;
            }
            for cut in 0..bytes.len() {
                match read_file(bytes.slice(..cut), &opts()) {
                    Err(PrimitivError::Eof {
                        offset,
                        available,
                        needed,
                        ..
                    }) => {
                        assert!(
                            offset <= cut as u64 && needed > available,
                            "{rel} cut at {cut}"
                        );
                    }
                    other => panic!("{rel} cut at {cut}: {other:?}"),
                }
            }
        }
    }
}

fn edge(dir: &Path, name: &str, as_type: DataType) -> Result<Decoded, PrimitivError> {
    read_as(load(dir, &format!("edge/{name}")), as_type, &opts())
}

#[test]
fn edge_files_give_primitivs_result() {
    let Some(dir) = corpus() else { return };
    use DataType::*;
    use PrimitivError as E;
    let err = |name: &str, t: DataType| edge(&dir, name, t).map(|_| ()).unwrap_err();

    let e = err("bad_version_0_2.data", Parameter);
    assert!(
        matches!(
            e,
            E::Version {
                offset: 0,
                major: 0,
                minor: 2
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("required: 0.1, observed: 0.2"));

    let e = err("bad_header_fixint.data", Parameter);
    assert!(
        matches!(
            e,
            E::Marker {
                offset: 0,
                expected: "ce",
                observed: 0x00,
                ..
            }
        ),
        "{e:?}"
    );

    let e = err("bad_datatype_shape_for_param.data", Parameter);
    assert!(
        matches!(
            e,
            E::DataTypeMismatch {
                offset: 10,
                required: 0x200,
                observed: 0
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("required: 200, observed: 0"));

    let e = err("bad_truncated_after_header.data", Parameter);
    assert!(
        matches!(
            e,
            E::Eof {
                offset: 15,
                field: "dims",
                ..
            }
        ),
        "{e:?}"
    );
    let e = err("bad_truncated_in_bin.data", Parameter);
    assert!(
        matches!(
            e,
            E::Eof {
                offset: 31,
                needed: 18,
                available: 15,
                ..
            }
        ),
        "{e:?}"
    );

    let e = err("bad_bin_length_mismatch.data", Parameter);
    assert!(
        matches!(
            e,
            E::LengthMismatch {
                expected: 8,
                actual: 4,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("8 != data.size(): 4"));

    let e = err("bad_dim_fixint.data", Parameter);
    assert!(
        matches!(
            e,
            E::Marker {
                offset: 16,
                field: "dims",
                expected: "ce",
                observed: 0x01
            }
        ),
        "{e:?}"
    );

    let e = err("bad_float_as_f64.data", Optimizer);
    assert!(
        matches!(
            e,
            E::Marker {
                expected: "ca",
                observed: 0xcb,
                field: "float_configs",
                ..
            }
        ),
        "{e:?}"
    );

    let e = err("bad_param_batch2.data", Parameter);
    assert!(
        matches!(e, E::ParameterBatch { batch: 2, ref dims, .. } if dims.is_empty()),
        "{e:?}"
    );
    assert!(e.to_string().contains("should be 1. shape: []x2"));

    let e = err("bad_zero_dim.data", Parameter);
    assert!(
        matches!(e, E::InvalidShape { batch: 1, ref dims, .. } if dims == &[0]),
        "{e:?}"
    );
    assert!(e.to_string().contains("Invalid shape: [0]x1"));

    let e = err("bad_nine_dims.data", Parameter);
    assert!(
        matches!(
            e,
            E::TooManyDims {
                depth: 9,
                offset: 15,
                ..
            }
        ),
        "{e:?}"
    );

    // Accepted inputs.
    let d = edge(&dir, "ok_trailing_garbage.data", Parameter).unwrap();
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    let PrimitivData::Parameter(p) = &d.data else {
        panic!()
    };
    assert_eq!(p.value().to_f32_vec(), [1., 2., 3., 4.]);
    let pedantic = ReaderOptions {
        mode: Mode::Pedantic,
        ..opts()
    };
    assert!(matches!(
        read_file(load(&dir, "edge/ok_trailing_garbage.data"), &pedantic),
        Err(E::TrailingBytes {
            offset: 54,
            count: 2
        })
    ));

    let d = edge(&dir, "ok_noncanonical_headers.data", Parameter).unwrap();
    let PrimitivData::Parameter(p) = &d.data else {
        panic!()
    };
    assert_eq!(p.value().shape().dims(), [2, 2]);
    assert_eq!(p.stats().len(), 1);
    assert_eq!(p.stats()[0].0, "a");
    assert_eq!(p.stat("a").unwrap().to_f32_vec(), [5., 6., 7., 8.]);
    assert!(d.warnings.is_empty());
    // Written back in the smallest forms: the golden one-stat layout.
    let out = to_bytes(&d.data).unwrap();
    assert_eq!(out.len(), 90);
    assert_eq!(read_file(out.into(), &opts()).unwrap().data, d.data);

    let d = edge(&dir, "ok_dims_with_trailing_ones.data", Parameter).unwrap();
    let PrimitivData::Parameter(p) = &d.data else {
        panic!()
    };
    assert_eq!(p.value().shape().dims(), [2, 2]);
    let golden = load(&dir, "golden/parameter_2x2_nostats.data");
    assert_eq!(to_bytes(&d.data).unwrap(), golden.as_ref());

    let d = edge(&dir, "ok_model_duplicate_key.data", Model).unwrap();
    let PrimitivData::Model(m) = &d.data else {
        panic!()
    };
    assert_eq!(m.len(), 1);
    assert_eq!(m.get_dotted("p").unwrap().value().to_f32_vec()[0], 5.0);
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    assert!(matches!(
        read_file(load(&dir, "edge/ok_model_duplicate_key.data"), &pedantic),
        Err(E::DuplicateKey {
            field: "param_key",
            ..
        })
    ));

    let d = edge(
        &dir,
        "ok_optimizer_unknown_and_missing_keys.data",
        Optimizer,
    )
    .unwrap();
    let PrimitivData::Optimizer(o) = &d.data else {
        panic!()
    };
    assert_eq!(o.uint("Optimizer.epoch"), Some(3));
    assert_eq!(o.float("Foo.unknown"), Some(9.0));
    let s = o.settings();
    assert_eq!(
        (s.epoch, s.lr_scale, s.l2_strength, s.clip_threshold),
        (3, 1.0, 0.0, 0.0)
    );
    assert_eq!(s.algorithm, Algorithm::Unknown);
    assert_eq!(s.extra_float, vec![(Key::from("Foo.unknown"), 9.0)]);
    assert_eq!(
        s.missing,
        [
            "Optimizer.lr_scale",
            "Optimizer.l2_strength",
            "Optimizer.clip_threshold"
        ]
    );
}

#[test]
fn loading_into_a_model_is_atomic() {
    let Some(dir) = corpus() else { return };
    let read_model = |rel: &str| match read_file(load(&dir, rel), &opts()).unwrap().data {
        PrimitivData::Model(m) => m,
        other => panic!("{rel}: {other:?}"),
    };
    // Upstream's test layout: a model with only `p` cannot load `sm.p`.
    let file = read_model("golden/model_p_sm_p.data");
    let dup = read_model("edge/ok_model_duplicate_key.data");
    let mut target = dup.clone();
    let before = target.clone();
    let e = target.load_from(&file, true).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Model does not have a parameter with name: 'sm.p'"
    );
    assert_eq!(target, before, "nothing loaded");
    // The other way round: `sm.p` is reported missing, `p` is replaced.
    let mut target = file.clone();
    let missing = target.load_from(&dup, false).unwrap();
    assert_eq!(missing, vec![vec![Key::from("sm"), Key::from("p")]]);
    assert_eq!(target.get_dotted("p").unwrap().value().to_f32_vec()[0], 5.0);
    // Stats are taken only when asked for.
    let adam = read_model("golden/model_nested_adam_step1.data");
    let mut target = read_model("golden/model_nested.data");
    assert!(target.load_from(&adam, false).unwrap().is_empty());
    assert!(target.entries().all(|(_, p)| p.stats().is_empty()));
    assert_eq!(
        target,
        read_model("golden/model_nested_adam_step1_without_stats.data")
    );
    target.load_from(&adam, true).unwrap();
    assert_eq!(target, adam);
}

#[test]
fn optimizer_kinds_are_recognised() {
    let Some(dir) = corpus() else { return };
    let cases = [
        ("sgd", OptimizerKind::Sgd),
        ("momentumsgd_defaults", OptimizerKind::MomentumSgd),
        ("adagrad_defaults", OptimizerKind::AdaGrad),
        ("rmsprop_defaults", OptimizerKind::RmsProp),
        ("adadelta_defaults", OptimizerKind::AdaDelta),
        ("adam", OptimizerKind::Adam),
        ("adam_defaults", OptimizerKind::Adam),
        ("adam_after_step1", OptimizerKind::Adam),
    ];
    for (name, kind) in cases {
        let d = read_as(
            load(&dir, &format!("golden/optimizer_{name}.data")),
            DataType::Optimizer,
            &opts(),
        )
        .unwrap();
        let PrimitivData::Optimizer(o) = &d.data else {
            panic!()
        };
        assert_eq!(o.kind(), Some(kind), "{name}");
        let s = o.settings();
        assert!(
            s.missing.is_empty() && s.extra_float.is_empty() && s.extra_uint.is_empty(),
            "{name}: {s:?}"
        );
        if name.ends_with("defaults") {
            assert_eq!(s.algorithm, Algorithm::defaults(kind), "{name}");
            assert_eq!(
                (s.epoch, s.lr_scale, s.l2_strength, s.clip_threshold),
                (0, 1.0, 0.0, 0.0)
            );
        }
        // Rebuilt from the typed view: same content, complete key set, sorted order.
        let rebuilt = Optimizer::from_settings(&s);
        let mut a = o.clone();
        a.uint_configs.sort_by(|x, y| x.0.cmp(&y.0));
        a.float_configs.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(rebuilt, a, "{name}");
    }
    let d = read_file(load(&dir, "golden/optimizer_sgd.data"), &opts()).unwrap();
    let PrimitivData::Optimizer(o) = &d.data else {
        panic!()
    };
    let s = o.settings();
    assert_eq!(s.algorithm, Algorithm::Sgd { eta: 1.0 });
    assert_eq!(
        (s.epoch, s.lr_scale, s.l2_strength, s.clip_threshold),
        (2, 3.0, 4.0, 5.0)
    );
    let d = read_file(load(&dir, "golden/optimizer_adam.data"), &opts()).unwrap();
    let PrimitivData::Optimizer(o) = &d.data else {
        panic!()
    };
    assert_eq!(
        o.settings().algorithm,
        Algorithm::Adam {
            alpha: 0.002,
            beta1: 0.8,
            beta2: 0.99,
            eps: 1e-6
        }
    );
}

#[test]
fn tensor_file_export_names_and_numpy_order() {
    let Some(dir) = corpus() else { return };
    let ro = ReadOptions::default();
    let f = open_tensor_file(load(&dir, "golden/model_nested_adam_step1.data"), &ro).unwrap();
    assert_eq!(f.kind(), "model");
    let names: Vec<String> = f.tensors().into_iter().map(|t| t.name).collect();
    assert_eq!(names.len(), 18);
    assert_eq!(&names[..3], ["b", "b/Adam.m2", "b/Adam.m1"]);
    assert!(names.contains(&"dec.attn.a_parameter_name_that_is_40_chars_long_/Adam.m1".to_string()));
    let info = f.tensors().into_iter().find(|t| t.name == "enc.w").unwrap();
    assert_eq!(info.shape.dims(), [3, 2]);
    f.validate().unwrap();

    let f = open_tensor_file(load(&dir, "golden/model_nested.data"), &ro).unwrap();
    // enc.w {3,2} = 10..15 column-major: numpy [[10, 13], [11, 14], [12, 15]]
    let t = f.read_tensor("enc.w").unwrap();
    assert_eq!(t.order(), Order::RowMajor);
    assert_eq!(t.dims(), [3, 2]);
    assert_eq!(t.to_vec::<f32>().unwrap(), [10., 13., 11., 14., 12., 15.]);
    assert_eq!(
        f.read_tensor("dec.attn.v").unwrap().dims(),
        [] as [usize; 0]
    );
    assert!(f.read_tensor("nope").is_err());

    // A batched stat: dims [2], batch 3 -> logical [2, 3] (batch last).
    let f = open_tensor_file(load(&dir, "golden/parameter_3_batched_stat.data"), &ro).unwrap();
    let names: Vec<String> = f.tensors().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["value", "batched"]);
    let t = f.read_tensor("batched").unwrap();
    assert_eq!(t.dims(), [2, 3]);
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        [100., 102., 104., 101., 103., 105.]
    );

    let f = open_tensor_file(load(&dir, "synthesized/tensor_2x3_batch2.data"), &ro).unwrap();
    assert_eq!(f.tensors()[0].name, "tensor");
    assert_eq!(f.tensors()[0].shape.dims(), [2, 3, 2]);
    let t = f.read_tensor("tensor").unwrap();
    assert_eq!(t.get::<f32>(&[1, 2, 1]).unwrap(), 12.0);
    assert_eq!(t.get::<f32>(&[1, 0, 0]).unwrap(), 2.0);

    let f = open_tensor_file(load(&dir, "golden/optimizer_adam.data"), &ro).unwrap();
    assert!(f.tensors().is_empty());
    let h = f.header();
    assert!(h
        .iter()
        .any(|(k, v)| k == "optimizer" && v.to_string() == "Adam"));
    assert!(h
        .iter()
        .any(|(k, v)| k == "float_configs" && v.to_string().contains("Adam.beta1: 0.8")));

    let f = open_tensor_file(load(&dir, "synthesized/shape_3_batch4.data"), &ro).unwrap();
    assert!(f.tensors().is_empty());
    assert!(f
        .header()
        .iter()
        .any(|(k, v)| k == "batch" && v.to_string() == "4"));

    let f = open_tensor_file(load(&dir, "edge/ok_trailing_garbage.data"), &ro).unwrap();
    assert_eq!(f.warnings().len(), 1);
    let e: tensorfmt_core::Error = open_tensor_file(load(&dir, "edge/bad_zero_dim.data"), &ro)
        .err()
        .unwrap()
        .into();
    assert!(e.to_string().starts_with("primitiv: "), "{e}");
}

#[test]
fn save_tensors_reverses_the_export() {
    let Some(dir) = corpus() else { return };
    let ro = ReadOptions::default();
    let tmp = tempfile::tempdir().unwrap();
    let named = |f: &dyn TensorFile| -> Vec<(String, tensorfmt_core::Tensor)> {
        f.tensors()
            .into_iter()
            .map(|i| (i.name.clone(), f.read_tensor(&i.name).unwrap()))
            .collect()
    };
    // Models without stats and one-stat parameters come back byte for byte.
    for (rel, extra) in [
        ("golden/model_nested.data", false),
        ("golden/model_p_sm_p.data", false),
        ("golden/parameter_2x2_stat_a.data", false),
        ("golden/parameter_scalar.data", false),
        ("golden/parameter_128x128_bin32.data", false),
        ("golden/parameter_3_batched_stat.data", true),
    ] {
        let bytes = load(&dir, rel);
        let f = open_tensor_file(bytes.clone(), &ro).unwrap();
        let mut wo = WriteOptions::default();
        if rel.contains("parameter") {
            wo.kind = Some("parameter".into());
        }
        if extra {
            wo.extra.insert("batch_axis".into(), "true".into());
        }
        let out = tmp.path().join("o.data");
        save_tensors(&out, &named(f.as_ref()), &wo).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), bytes.as_ref(), "{rel}");
    }
    // Stats in hash order: same content, stats sorted.
    let bytes = load(&dir, "golden/model_nested_adam_step1.data");
    let f = open_tensor_file(bytes.clone(), &ro).unwrap();
    let out = tmp.path().join("adam.data");
    save_tensors(&out, &named(f.as_ref()), &WriteOptions::default()).unwrap();
    let PrimitivData::Model(mut orig) = read_file(bytes, &opts()).unwrap().data else {
        panic!()
    };
    for (_, p) in orig.entries_mut() {
        p.sort_stats();
    }
    let again = read_file(tensorfmt_core::io::read_file(&out).unwrap(), &opts())
        .unwrap()
        .data;
    assert_eq!(again, PrimitivData::Model(orig));
    // A single tensor named `value` makes a Parameter file.
    let f = open_tensor_file(load(&dir, "golden/parameter_2x2_nostats.data"), &ro).unwrap();
    save_tensors(&out, &named(f.as_ref()), &WriteOptions::default()).unwrap();
    assert_eq!(
        std::fs::read(&out).unwrap(),
        load(&dir, "golden/parameter_2x2_nostats.data").as_ref()
    );
}
