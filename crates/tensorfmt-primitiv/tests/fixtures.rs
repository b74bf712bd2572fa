//! The golden fixtures in `testdata/primitiv/` (built byte by byte by
//! `xtask/src/fixtures/primitiv.rs`, not by our writer): our writer reproduces each from
//! the same content, and reading then writing each gives the same bytes.

use std::path::PathBuf;

use bytes::Bytes;
use tensorfmt_primitiv::*;

fn fixture(name: &str) -> Bytes {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/primitiv")
        .join(name);
    Bytes::from(
        std::fs::read(&p)
            .unwrap_or_else(|e| panic!("{}: {e} (run `cargo xtask fixtures`)", p.display())),
    )
}

fn range(a: usize, b: usize, scale: f32) -> Vec<f32> {
    (a..b).map(|i| i as f32 * scale).collect()
}

fn tensor(dims: &[u32], batch: u32, v: &[f32]) -> PrimitivTensor {
    PrimitivTensor::from_f32(PrimitivShape::new(dims, batch).unwrap(), v).unwrap()
}

/// Key path, dims, values, with Adam stats.
type Entry = (&'static [&'static str], &'static [u32], Vec<f32>, bool);

/// The same contents as the generator, built through the API.
fn expected() -> Vec<(&'static str, PrimitivData)> {
    let mut v = Vec::new();
    v.push((
        "shape_4x3_batch2.data",
        PrimitivData::Shape(PrimitivShape::new([4, 3], 2).unwrap()),
    ));
    v.push((
        "tensor_3x2_batch2.data",
        PrimitivData::Tensor(tensor(&[3, 2], 2, &range(0, 12, 0.5))),
    ));

    let mut p = Parameter::new(tensor(&[2, 3], 1, &range(1, 7, 1.0))).unwrap();
    // Inserted out of order: set_stat keeps them sorted.
    p.set_stat("batched", tensor(&[3], 2, &range(0, 6, 10.0)));
    let m2 = [
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        f32::MIN_POSITIVE,
        f32::MAX,
        1e-45,
    ];
    p.set_stat("Adam.m2", tensor(&[2, 3], 1, &m2));
    p.set_stat(
        "Adam.m1",
        tensor(&[2, 3], 1, &[0.1, -0.2, 0.3, -0.4, 0.5, -0.6]),
    );
    v.push(("parameter_2x3_stats.data", PrimitivData::Parameter(p)));

    let p = Parameter::new(tensor(&[10, 30], 1, &range(0, 300, 0.25))).unwrap();
    v.push(("parameter_10x30_bin16.data", PrimitivData::Parameter(p)));

    let mut m = Model::new();
    const LONG: &str = "a_parameter_name_that_is_exactly_40_char";
    let entries: [Entry; 5] = [
        (&["w"], &[2, 2], range(1, 5, 1.0), false),
        (&["enc", "w"], &[3, 2], range(10, 16, 1.0), false),
        (&["dec", "w"], &[2, 2], range(20, 24, 1.0), true),
        (&["dec", "attn", LONG], &[], vec![7.0], false),
        (&["b"], &[2], vec![0.5, -0.5], true),
    ];
    for (key, dims, values, with_stats) in entries {
        let mut p = Parameter::new(tensor(dims, 1, &values)).unwrap();
        if with_stats {
            let m1: Vec<f32> = values.iter().map(|v| v * 0.1).collect();
            let m2: Vec<f32> = values.iter().map(|v| v * v * 0.001).collect();
            p.set_stat("Adam.m2", tensor(dims, 1, &m2));
            p.set_stat("Adam.m1", tensor(dims, 1, &m1));
        }
        m.insert(key.iter().map(|&k| Key::from(k)).collect(), p);
    }
    v.push(("model_nested_adam.data", PrimitivData::Model(m)));

    let s = OptimizerSettings {
        epoch: 12,
        lr_scale: 0.5,
        l2_strength: 1e-4,
        clip_threshold: 5.0,
        algorithm: Algorithm::Adam {
            alpha: 0.002,
            beta1: 0.8,
            beta2: 0.99,
            eps: 1e-6,
        },
        ..OptimizerSettings::default()
    };
    v.push((
        "optimizer_adam.data",
        PrimitivData::Optimizer(Optimizer::from_settings(&s)),
    ));
    v
}

#[test]
fn writer_reproduces_every_fixture() {
    for (name, data) in expected() {
        assert_eq!(to_bytes(&data).unwrap(), fixture(name).as_ref(), "{name}");
    }
}

#[test]
fn every_fixture_reads_back_and_round_trips() {
    for (name, data) in expected() {
        let bytes = fixture(name);
        assert!(sniff(&bytes, bytes.len() as u64), "{name}");
        let pedantic = ReaderOptions {
            mode: Mode::Pedantic,
            ..ReaderOptions::default()
        };
        let d = read_file(bytes.clone(), &pedantic).unwrap();
        assert_eq!(d.data, data, "{name}");
        assert_eq!(to_bytes(&d.data).unwrap(), bytes.as_ref(), "{name}");
    }
}
