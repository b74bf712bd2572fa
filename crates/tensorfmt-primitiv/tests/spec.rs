//! Spec rules (`specs/primitiv.md`) as tests that need no corpus: the golden hex
//! vectors of §10 built from the API, the reader rules of §2.2 and §11, modes, limits.

use bytes::Bytes;
use proptest::prelude::*;
use tensorfmt_core::{Limits, Order, Tensor};
use tensorfmt_primitiv::*;

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn read(b: Vec<u8>) -> Result<Decoded, PrimitivError> {
    read_file(Bytes::from(b), &ReaderOptions::default())
}

fn tensor(dims: &[u32], batch: u32, v: &[f32]) -> PrimitivTensor {
    PrimitivTensor::from_f32(PrimitivShape::new(dims, batch).unwrap(), v).unwrap()
}

fn param(dims: &[u32], v: &[f32]) -> Parameter {
    Parameter::new(tensor(dims, 1, v)).unwrap()
}

fn keys(k: &[&str]) -> Vec<Key> {
    k.iter().map(|&s| Key::from(s)).collect()
}

const P2X2: &str = "ce00000000 ce00000001 ce00000200 92 ce00000002 ce00000002 ce00000001
    c410 0000803f 00000040 00004040 00008040 ce00000000";

#[test]
fn golden_parameter_vectors() {
    let p = param(&[2, 2], &[1., 2., 3., 4.]);
    assert_eq!(
        to_bytes(&PrimitivData::Parameter(p.clone())).unwrap(),
        unhex(P2X2)
    );
    let mut with_a = p;
    with_a.set_stat("a", tensor(&[2, 2], 1, &[10., 20., 30., 40.]));
    let mut expected = unhex(P2X2);
    expected.truncate(49);
    expected.extend(unhex(
        "ce00000001 a161 92 ce00000002 ce00000002 ce00000001 c410 00002041 0000a041 0000f041 00002042",
    ));
    assert_eq!(
        to_bytes(&PrimitivData::Parameter(with_a)).unwrap(),
        expected
    );
    let scalar = param(&[], &[f32::from_bits(0x4049_0fd0)]); // 3.14159
    assert_eq!(
        to_bytes(&PrimitivData::Parameter(scalar)).unwrap(),
        unhex("ce00000000 ce00000001 ce00000200 90 ce00000001 c404 d00f4940 ce00000000")
    );
}

#[test]
fn golden_model_vectors() {
    let mut m = Model::new();
    // Inserted out of order: written sorted by key vector.
    m.insert(keys(&["sm", "p"]), param(&[2, 2], &[5., 6., 7., 8.]));
    m.insert(keys(&["p"]), param(&[2, 2], &[1., 2., 3., 4.]));
    let expected = unhex(
        "ce00000000 ce00000001 ce00000300 ce00000002
         91 a170
         92 ce00000002 ce00000002 ce00000001 c410 0000803f 00000040 00004040 00008040 ce00000000
         92 a2736d a170
         92 ce00000002 ce00000002 ce00000001 c410 0000a040 0000c040 0000e040 00000041 ce00000000",
    );
    assert_eq!(to_bytes(&PrimitivData::Model(m)).unwrap(), expected);

    let mut n = Model::new();
    let long = "a_parameter_name_that_is_40_chars_long_";
    n.insert(keys(&["w"]), param(&[2, 2], &[1., 2., 3., 4.]));
    n.insert(
        keys(&["enc", "w"]),
        param(&[3, 2], &[10., 11., 12., 13., 14., 15.]),
    );
    n.insert(
        keys(&["dec", "w"]),
        param(&[2, 3], &[20., 21., 22., 23., 24., 25.]),
    );
    n.insert(keys(&["dec", "attn", "v"]), param(&[], &[42.]));
    n.insert(keys(&["dec", "attn", long]), param(&[1], &[7.]));
    n.insert(keys(&["b"]), param(&[2], &[5., 6.]));
    let expected = unhex(concat!(
        "ce00000000ce00000001ce00000300ce0000000691a16291ce00000002ce00000001c4080000a0400000c040ce00000000",
        "93a3646563a46174746ed927615f706172616d657465725f6e616d655f746861745f69735f34305f63686172735f6c6f6e675f",
        "90ce00000001c4040000e040ce0000000093a3646563a46174746ea17690ce00000001c40400002842ce00000000",
        "92a3646563a17792ce00000002ce00000003ce00000001c4180000a0410000a8410000b0410000b8410000c0410000c841ce00000000",
        "92a3656e63a17792ce00000003ce00000002ce00000001c418000020410000304100004041000050410000604100007041ce00000000",
        "91a17792ce00000002ce00000002ce00000001c4100000803f000000400000404000008040ce00000000",
    ));
    assert_eq!(expected.len(), 296);
    assert_eq!(to_bytes(&PrimitivData::Model(n)).unwrap(), expected);
}

#[test]
fn golden_optimizer_and_shape_vectors() {
    // Upstream hash order, reproduced by holding the maps in that order.
    let o = Optimizer {
        uint_configs: vec![(Key::from("Optimizer.epoch"), 2)],
        float_configs: vec![
            (Key::from("SGD.eta"), 1.0),
            (Key::from("Optimizer.clip_threshold"), 5.0),
            (Key::from("Optimizer.l2_strength"), 4.0),
            (Key::from("Optimizer.lr_scale"), 3.0),
        ],
    };
    let bytes = to_bytes(&PrimitivData::Optimizer(o.clone())).unwrap();
    assert_eq!(bytes.len(), 132);
    assert_eq!(
        &bytes[..17],
        unhex("ce00000000 ce00000001 ce00000400 81 af").as_slice()
    );
    assert_eq!(read(bytes).unwrap().data, PrimitivData::Optimizer(o));

    let shape =
        |d: &[u32], b| to_bytes(&PrimitivData::Shape(PrimitivShape::new(d, b).unwrap())).unwrap();
    let s23 = unhex("ce00000000 ce00000001 ce00000000 92 ce00000002 ce00000003 ce00000001");
    assert_eq!(shape(&[2, 3], 1), s23);
    assert_eq!(shape(&[2, 3, 1, 1], 1), s23);
    assert_eq!(
        shape(&[], 1),
        unhex("ce00000000 ce00000001 ce00000000 90 ce00000001")
    );
    assert_eq!(shape(&[1, 1], 1), shape(&[], 1));
    assert_eq!(
        shape(&[3], 4),
        unhex("ce00000000 ce00000001 ce00000000 91 ce00000003 ce00000004")
    );
    let t: Vec<f32> = (1..=12).map(|x| x as f32).collect();
    let bytes = to_bytes(&PrimitivData::Tensor(tensor(&[2, 3], 2, &t))).unwrap();
    assert_eq!(bytes.len(), 81);
    assert_eq!(
        &bytes[..33],
        unhex("ce00000000 ce00000001 ce00000100 92 ce00000002 ce00000003 ce00000002 c430")
            .as_slice()
    );
    assert_eq!(&bytes[33..37], 1f32.to_le_bytes());
}

#[test]
fn bin16_and_bin32_lengths() {
    let v: Vec<f32> = (0..100).map(|i| i as f32 * 0.25).collect();
    let b = to_bytes(&PrimitivData::Parameter(param(&[10, 10], &v))).unwrap();
    assert_eq!(b.len(), 439);
    assert_eq!(&b[31..34], [0xc5, 0x01, 0x90]);
    let v: Vec<f32> = (0..16384).map(|i| -1.0 + i as f32 / 8192.0).collect();
    let b = to_bytes(&PrimitivData::Parameter(param(&[128, 128], &v))).unwrap();
    assert_eq!(b.len(), 65577);
    assert_eq!(&b[31..36], [0xc6, 0, 1, 0, 0]);
}

#[test]
fn reader_marker_rules() {
    // uint32 as anything but ce is rejected by default, accepted by lenient mode.
    let generic = unhex("00 01 cd0200 92 02 02 01 c410 0000803f 00000040 00004040 00008040 00");
    let e = read(generic.clone()).unwrap_err();
    assert!(matches!(
        e,
        PrimitivError::Marker {
            offset: 0,
            expected: "ce",
            observed: 0,
            ..
        }
    ));
    let lenient = ReaderOptions {
        mode: Mode::Lenient,
        ..ReaderOptions::default()
    };
    let d = read_file(generic.into(), &lenient).unwrap();
    assert_eq!(to_bytes(&d.data).unwrap(), unhex(P2X2));
    for marker in ["cc01", "cd0001", "cf0000000000000001"] {
        let mut b = unhex("ce00000000");
        b.extend(unhex(marker));
        assert!(matches!(
            read(b).unwrap_err(),
            PrimitivError::Marker { offset: 5, .. }
        ));
    }
    // cf above u32 is an overflow even in lenient mode.
    let b = unhex("ce00000000 ce00000001 cf0000000100000000");
    assert!(matches!(
        read_file(b.into(), &lenient),
        Err(PrimitivError::Overflow { offset: 10, .. })
    ));
    // Float as f64: lenient accepts exact values only.
    let opt = |f: &str| unhex(&format!("ce00000000 ce00000001 ce00000400 80 81 a161 {f}"));
    assert!(matches!(
        read(opt("cb3ff0000000000000")),
        Err(PrimitivError::Marker {
            expected: "ca",
            observed: 0xcb,
            ..
        })
    ));
    let d = read_file(opt("cb3ff0000000000000").into(), &lenient).unwrap();
    let PrimitivData::Optimizer(o) = d.data else {
        panic!()
    };
    assert_eq!(o.float("a"), Some(1.0));
    assert!(read_file(opt("cb3fb999999999999a").into(), &lenient).is_err()); // 0.1 as f64
                                                                             // Container markers.
    let b = unhex("ce00000000 ce00000001 ce00000200 c0");
    let e = read(b).unwrap_err();
    assert!(matches!(
        e,
        PrimitivError::Marker {
            offset: 15,
            expected: "array",
            observed: 0xc0,
            ..
        }
    ));
    assert!(e.to_string().contains("observed: c0"), "{e}");
    let b = unhex("ce00000000 ce00000001 ce00000200 90 ce00000001 a0");
    assert!(matches!(
        read(b),
        Err(PrimitivError::Marker {
            expected: "bin",
            ..
        })
    ));
    let b = unhex("ce00000000 ce00000001 ce00000400 90");
    assert!(matches!(
        read(b),
        Err(PrimitivError::Marker {
            expected: "map",
            ..
        })
    ));
    let b = unhex("ce00000000 ce00000001 ce00000400 81 c400");
    assert!(matches!(
        read(b),
        Err(PrimitivError::Marker {
            expected: "str",
            field: "uint_configs",
            ..
        })
    ));
}

#[test]
fn header_checks() {
    let b = unhex("ce00000001 ce00000001 ce00000200");
    assert!(matches!(
        read(b),
        Err(PrimitivError::Version {
            major: 1,
            minor: 1,
            ..
        })
    ));
    let b = unhex("ce00000000 ce00000001 ce00000500 90");
    assert!(matches!(
        read(b),
        Err(PrimitivError::UnknownDataType {
            offset: 10,
            observed: 0x500
        })
    ));
    let b = unhex(P2X2);
    let e = read_as(b.into(), DataType::Model, &ReaderOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "offset 10: Data type mismatched. required: 300, observed: 200"
    );
}

#[test]
fn hostile_counts_fail_before_allocating() {
    // Without limits, every declared size is checked against the bytes present.
    let o = ReaderOptions {
        limits: Limits::unlimited(),
        ..ReaderOptions::default()
    };
    // 2^32 - 1 stats, 2^32 - 1 model entries, map sizes, bin and str lengths, dims.
    let cases = [
        "ce00000000 ce00000001 ce00000200 90 ce00000001 c404 00000000 ceffffffff",
        "ce00000000 ce00000001 ce00000300 ceffffffff",
        "ce00000000 ce00000001 ce00000300 ce00000001 ddffffffff a0",
        "ce00000000 ce00000001 ce00000400 dfffffffff",
        "ce00000000 ce00000001 ce00000400 80 dfffffffff a0",
        "ce00000000 ce00000001 ce00000200 90 ce00000001 c6ffffffff 00",
        "ce00000000 ce00000001 ce00000400 81 dbffffffff 00",
        "ce00000000 ce00000001 ce00000000 ddffffffff ce00000001",
    ];
    for c in cases {
        let e = read_file(unhex(c).into(), &o).unwrap_err();
        assert!(matches!(e, PrimitivError::Eof { .. }), "{c}: {e:?}");
        let e = read_file(unhex(c).into(), &ReaderOptions::default()).unwrap_err();
        assert!(
            matches!(e, PrimitivError::Eof { .. } | PrimitivError::Limit { .. }),
            "{c}: {e:?}"
        );
    }
    let tight = ReaderOptions {
        limits: Limits {
            max_items: 3,
            ..Limits::default()
        },
        ..ReaderOptions::default()
    };
    let e = read_file(unhex(cases[0]).into(), &tight).unwrap_err();
    assert!(
        matches!(
            e,
            PrimitivError::Limit {
                value: 0xffffffff,
                limit: 3,
                ..
            }
        ),
        "{e:?}"
    );
    // Eight dims of 2^32 - 1 overflow u64 sizes: reported as such.
    let mut b = unhex("ce00000000 ce00000001 ce00000100 98");
    for _ in 0..8 {
        b.extend(unhex("ceffffffff"));
    }
    b.extend(unhex("ce00000001 c400"));
    assert!(matches!(read(b), Err(PrimitivError::Overflow { .. })));
    // Nine dims of 1 fail (counted before trailing 1s are dropped); eight are fine.
    let dims = |n: usize| {
        let mut b = unhex(&format!(
            "ce00000000 ce00000001 ce00000000 {:02x}",
            0x90 + n
        ));
        for _ in 0..n {
            b.extend(unhex("ce00000001"));
        }
        b.extend(unhex("ce00000001"));
        b
    };
    assert!(matches!(
        read(dims(9)),
        Err(PrimitivError::TooManyDims { depth: 9, .. })
    ));
    assert_eq!(
        read(dims(8)).unwrap().data,
        PrimitivData::Shape(PrimitivShape::scalar())
    );
    // Zero batch.
    let b = unhex("ce00000000 ce00000001 ce00000000 90 ce00000000");
    assert!(matches!(
        read(b),
        Err(PrimitivError::InvalidShape { batch: 0, .. })
    ));
}

#[test]
fn duplicates_and_keys() {
    // Stats: first wins (primitiv emplaces into an unordered_map).
    let mut b = unhex(P2X2);
    b.truncate(49);
    b.extend(unhex(
        "ce00000002 a161 90 ce00000001 c404 0000803f a161 90 ce00000001 c404 00000040",
    ));
    let d = read(b.clone()).unwrap();
    let PrimitivData::Parameter(p) = &d.data else {
        panic!()
    };
    assert_eq!(p.stats().len(), 1);
    assert_eq!(p.stat("a").unwrap().to_f32_vec(), [1.0]);
    assert_eq!(d.warnings.len(), 1);
    let pedantic = ReaderOptions {
        mode: Mode::Pedantic,
        ..ReaderOptions::default()
    };
    assert!(matches!(
        read_file(b.into(), &pedantic),
        Err(PrimitivError::DuplicateKey {
            field: "stat_key",
            ..
        })
    ));
    // Optimizer maps: first wins.
    let b = unhex("ce00000000 ce00000001 ce00000400 82 a161 ce00000001 a161 ce00000002 80");
    let d = read(b).unwrap();
    let PrimitivData::Optimizer(o) = &d.data else {
        panic!()
    };
    assert_eq!(o.uint_configs, vec![(Key::from("a"), 1)]);
    // Non-UTF-8 keys are kept as bytes, escaped when shown; pedantic rejects them.
    let b = unhex("ce00000000 ce00000001 ce00000400 81 a2 61ff ce00000007 80");
    let d = read(b.clone()).unwrap();
    let PrimitivData::Optimizer(o) = &d.data else {
        panic!()
    };
    assert_eq!(o.uint_configs[0].0.as_bytes(), [0x61, 0xff]);
    assert_eq!(o.uint_configs[0].0.to_string(), "a\\xff");
    assert_eq!(to_bytes(&d.data).unwrap(), b);
    assert!(matches!(
        read_file(b.into(), &pedantic),
        Err(PrimitivError::NonUtf8Key { .. })
    ));
    // An empty model key path is refused.
    let b = unhex(
        "ce00000000 ce00000001 ce00000300 ce00000001 90 90 ce00000001 c404 00000000 ce00000000",
    );
    assert!(matches!(
        read(b),
        Err(PrimitivError::EmptyKey { offset: 20 })
    ));
    // Pre-release names are flagged.
    let b = unhex(
        "ce00000000 ce00000001 ce00000400 80 81 b0 547261696e65722e6c725f7363616c65 ca3f800000",
    );
    assert_eq!(read(b).unwrap().warnings.len(), 1);
}

#[test]
fn writer_refuses_what_primitiv_cannot_read() {
    let p = param(&[2], &[1., 2.]);
    let mut m = Model::new();
    m.insert(keys(&["a"]), p.clone());
    m.insert(keys(&["a", "b"]), p.clone());
    assert!(matches!(
        to_bytes(&PrimitivData::Model(m)),
        Err(PrimitivError::Unwritable(_))
    ));
    let batched = tensor(&[2], 2, &[1., 2., 3., 4.]);
    assert!(matches!(
        Parameter::new(batched.clone()),
        Err(PrimitivError::ParameterBatch { .. })
    ));
    // Stats may be batched.
    let mut q = p.clone();
    q.set_stat("s", batched);
    let d = PrimitivData::Parameter(q);
    assert_eq!(read(to_bytes(&d).unwrap()).unwrap().data, d);
    // f64 or integer tensors are not silently narrowed; f16 is widened.
    let f64t = Tensor::from_vec(vec![1f64], [1], Order::RowMajor).unwrap();
    assert!(matches!(
        PrimitivTensor::from_core(&f64t, false),
        Err(PrimitivError::Unwritable(_))
    ));
    let f16t = f64t.cast(tensorfmt_core::DType::F16).unwrap();
    assert_eq!(
        PrimitivTensor::from_core(&f16t, false)
            .unwrap()
            .to_f32_vec(),
        [1.0]
    );
    let zero = Tensor::from_vec(Vec::<f32>::new(), [0, 2], Order::RowMajor).unwrap();
    assert!(matches!(
        PrimitivTensor::from_core(&zero, false),
        Err(PrimitivError::InvalidShape { .. })
    ));
    let deep = Tensor::from_vec(vec![0f32; 512], [2; 9], Order::RowMajor).unwrap();
    assert!(matches!(
        PrimitivTensor::from_core(&deep, false),
        Err(PrimitivError::TooManyDims { depth: 9, .. })
    ));
    // Building from names: a stat without its value, unknown kinds, duplicates.
    let t = Tensor::from_vec(vec![1f32], [1], Order::RowMajor).unwrap();
    let wo = tensorfmt_core::WriteOptions::default();
    assert!(build(&[("w/Adam.m1".into(), t.clone())], &wo).is_err());
    assert!(build(&[("w".into(), t.clone()), ("w".into(), t.clone())], &wo).is_err());
    let other = tensorfmt_core::WriteOptions {
        kind: Some("caffemodel".into()),
        ..wo.clone()
    };
    assert!(build(&[("w".into(), t.clone())], &other).is_err());
    let as_param = tensorfmt_core::WriteOptions {
        kind: Some("parameter".into()),
        ..wo.clone()
    };
    assert!(build(&[("w".into(), t.clone())], &as_param).is_err());
    let as_tensor = tensorfmt_core::WriteOptions {
        kind: Some("tensor".into()),
        ..wo
    };
    assert!(matches!(
        build(&[("x".into(), t)], &as_tensor),
        Ok(PrimitivData::Tensor(_))
    ));
}

#[test]
fn sniff_rejects_other_formats() {
    assert!(sniff(&unhex(P2X2), 54));
    assert!(!sniff(
        b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False}",
        128
    ));
    // PVP: a little-endian int32 header size of 80 first.
    assert!(!sniff(
        &[80, 0, 0, 0, 20, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0],
        1000
    ));
    // PINK: int32 version words; protobuf: a field tag such as 0x0a.
    assert!(!sniff(
        &[2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        1000
    ));
    assert!(!sniff(
        &[0x0a, 0x05, b'l', b'e', b'n', b'e', b't', 0x12, 0, 0, 0, 0, 0, 0, 0, 0],
        1000
    ));
    // The right header but the wrong first member.
    let mut b = unhex(P2X2);
    b[15] = 0xce;
    assert!(!sniff(&b, 54));
}

fn arb_tensor(batch: bool) -> impl Strategy<Value = PrimitivTensor> {
    (
        prop::collection::vec(1u32..4, 0..4),
        if batch { 1u32..3 } else { 1u32..2 },
    )
        .prop_flat_map(|(dims, b)| {
            let n = dims.iter().product::<u32>() * b;
            prop::collection::vec(any::<u32>().prop_map(f32::from_bits), n as usize)
                .prop_map(move |v| tensor(&dims, b, &v))
        })
}

fn arb_parameter() -> impl Strategy<Value = Parameter> {
    (
        arb_tensor(false),
        prop::collection::vec(("[a-zA-Z.]{0,40}", arb_tensor(true)), 0..3),
    )
        .prop_map(|(v, stats)| {
            let mut p = Parameter::new(v).unwrap();
            for (k, t) in stats {
                p.set_stat(k.as_str(), t);
            }
            p
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn model_round_trip(entries in prop::collection::vec(("[a-c]{1,2}", arb_parameter()), 0..5)) {
        let mut m = Model::new();
        for (name, p) in entries {
            m.insert(vec![Key::from("root"), Key::from(name)], p);
        }
        let d = PrimitivData::Model(m);
        let bytes = to_bytes(&d).unwrap();
        let back = read(bytes.clone()).unwrap();
        prop_assert!(back.warnings.is_empty());
        // NaN payloads survive bit for bit, so compare bytes rather than floats.
        prop_assert_eq!(to_bytes(&back.data).unwrap(), bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..200), dt in 0u8..5) {
        let mut b = unhex("ce00000000 ce00000001 ce00000000");
        b[13] = dt;
        b.extend(tail);
        for mode in [Mode::Primitiv, Mode::Pedantic, Mode::Lenient] {
            let _ = read_file(b.clone().into(), &ReaderOptions { mode, ..ReaderOptions::default() });
        }
    }

    #[test]
    fn mutated_golden_never_panics(pos in 0usize..90, byte in any::<u8>()) {
        let mut b = unhex(P2X2);
        b.truncate(49);
        b.extend(unhex("ce00000001 a161 92 ce00000002 ce00000002 ce00000001 c410 00002041 0000a041 0000f041 00002042"));
        b[pos] = byte;
        if let Ok(d) = read(b) {
            let out = to_bytes(&d.data).unwrap();
            prop_assert_eq!(read(out).unwrap().data, d.data);
        }
    }
}
