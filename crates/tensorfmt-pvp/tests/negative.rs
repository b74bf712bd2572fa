//! Bad input: truncation at every byte, trailing garbage, bad header fields, illegal
//! combinations, bad sparse indices, inconsistent weight frames. Always a typed error
//! (or, at a frame boundary, a shorter valid file), never a panic.

use std::path::PathBuf;

use bytes::Bytes;
use tensorfmt_core::ReadOptions;
use tensorfmt_pvp::WeightLayout;
use tensorfmt_pvp::{OpenOptions, PvpError, PvpFile};

const FIXTURES: [&str; 9] = [
    "dense_f32.pvp",
    "sparse_binary.pvp",
    "sparse_values_dt3.pvp",
    "sparse_values_dt4.pvp",
    "kernel_f32.pvp",
    "kernel_byte.pvp",
    "kernel_byte_constant.pvp",
    "nonshared_f32.pvp",
    "nonshared_byte.pvp",
];

fn golden(name: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/pvp")
            .join(name),
    )
    .unwrap()
}

fn strict() -> OpenOptions {
    OpenOptions {
        strict: true,
        ..OpenOptions::default()
    }
}

/// Opens and decodes every frame.
fn full_read(b: &[u8], opts: &OpenOptions) -> Result<usize, PvpError> {
    let f = PvpFile::from_bytes_with(Bytes::copy_from_slice(b), opts)?;
    let n = f.frame_count()?;
    match &f {
        PvpFile::Dense(r) => r.frames().try_for_each(|x| x.map(drop))?,
        PvpFile::Sparse(r) => r.frames().try_for_each(|x| x.map(drop))?,
        PvpFile::Weights(r) => r.frames().try_for_each(|x| x.map(drop))?,
    }
    Ok(n)
}

/// Frame start offsets of a fixture (from its reader), plus its length.
fn boundaries(b: &[u8]) -> Vec<usize> {
    let f = PvpFile::from_bytes(Bytes::copy_from_slice(b)).unwrap();
    let mut v: Vec<usize> = match &f {
        PvpFile::Dense(r) => (0..r.len())
            .map(|k| r.layout().frame_offset(k) as usize)
            .collect(),
        PvpFile::Sparse(r) => r
            .table()
            .unwrap()
            .offsets
            .iter()
            .map(|&o| o as usize)
            .collect(),
        PvpFile::Weights(r) => (0..r.len())
            .map(|k| k * r.layout().frame_bytes as usize)
            .collect(),
    };
    v.push(b.len());
    v
}

#[test]
fn truncation_at_every_byte() {
    for name in FIXTURES {
        let b = golden(name);
        let bounds = boundaries(&b);
        let weights = name.contains("kernel") || name.contains("nonshared");
        for cut in 0..b.len() {
            let lenient = full_read(&b[..cut], &OpenOptions::default());
            let strict_r = full_read(&b[..cut], &strict());
            let frames = bounds.iter().position(|&o| o == cut);
            match frames {
                // A cut exactly at a frame boundary is a shorter valid file (activity
                // files need their header; weight files need at least one frame).
                Some(k) if cut >= 80 && !(weights && k == 0) => {
                    assert_eq!(lenient.unwrap(), k, "{name} cut at {cut}");
                    // nbands (activity) disagrees: strict mode refuses.
                    if !weights {
                        assert!(
                            matches!(
                                strict_r,
                                Err(PvpError::BadField {
                                    field: "nbands",
                                    offset: 68,
                                    ..
                                })
                            ),
                            "{name} {cut}"
                        );
                    }
                }
                _ if weights && lenient.is_ok() => {
                    // The legacy detection (spec §6.6) may explain a cut weight file as
                    // another layout with plausible patch headers: never the original one.
                    let PvpFile::Weights(r) =
                        PvpFile::from_bytes(Bytes::copy_from_slice(&b[..cut])).unwrap()
                    else {
                        panic!()
                    };
                    let PvpFile::Weights(o) =
                        PvpFile::from_bytes(Bytes::copy_from_slice(&b)).unwrap()
                    else {
                        panic!()
                    };
                    let key = |l: &WeightLayout| (l.arbors, l.patch_header_bytes);
                    assert_ne!(key(r.layout()), key(o.layout()), "{name} cut at {cut}");
                    assert!(!r.warnings().is_empty());
                }
                _ => {
                    let e = lenient.expect_err(&format!("{name} cut at {cut} must fail"));
                    assert!(
                        matches!(e, PvpError::Truncated { .. } | PvpError::BadSize { .. }),
                        "{name} cut at {cut}: {e}"
                    );
                }
            }
        }
    }
}

#[test]
fn tolerated_truncation_keeps_whole_frames() {
    let b = golden("dense_f32.pvp");
    let opts = OpenOptions {
        allow_truncated: true,
        ..OpenOptions::default()
    };
    let f = PvpFile::from_bytes_with(Bytes::copy_from_slice(&b[..b.len() - 5]), &opts).unwrap();
    assert_eq!(f.frame_count().unwrap(), 2);
    assert!(f.warnings().iter().any(|w| w.contains("partial frame 2")));
    let b = golden("sparse_values_dt3.pvp");
    let f = PvpFile::from_bytes_with(Bytes::copy_from_slice(&b[..b.len() - 1]), &opts).unwrap();
    assert_eq!(f.frame_count().unwrap(), 2);
    assert!(
        f.warnings().iter().any(|w| w.contains("partial")),
        "{:?}",
        f.warnings()
    );
}

#[test]
fn trailing_garbage_is_an_error() {
    for name in FIXTURES {
        let mut b = golden(name);
        b.extend_from_slice(&[0xAB; 5]);
        let e = full_read(&b, &OpenOptions::default()).unwrap_err();
        assert!(
            matches!(e, PvpError::Truncated { .. } | PvpError::BadSize { .. }),
            "{name}: {e}"
        );
    }
}

fn set_i32(b: &mut [u8], index: usize, v: i32) {
    b[index * 4..index * 4 + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn bad_header_fields() {
    let base = golden("dense_f32.pvp");
    let cases: [(usize, i32, &str); 6] = [
        (0, 81, "headersize"),
        (1, 26, "numparams"),
        (2, 7, "filetype"),
        (3, 0, "nx"),
        (4, -3, "ny"),
        (5, 0, "nf"),
    ];
    for (index, value, field) in cases {
        let mut b = base.clone();
        set_i32(&mut b, index, value);
        match PvpFile::from_bytes(b.into()).unwrap_err() {
            PvpError::BadField {
                field: f,
                offset,
                value: v,
                ..
            } => {
                assert_eq!((f, offset, v), (field, index as u64 * 4, value as i64));
            }
            e => panic!("{field}: {e}"),
        }
    }
    // Weight frames need 104 / 26.
    let mut b = golden("kernel_f32.pvp");
    set_i32(&mut b, 0, 80);
    assert!(matches!(
        PvpFile::from_bytes(b.into()),
        Err(PvpError::BadField {
            field: "headersize",
            ..
        })
    ));
}

#[test]
fn datasize_datatype_mismatch() {
    // (file, datatype, datasize) outside spec §3.3.
    let cases = [
        ("dense_f32.pvp", 3, 8),
        ("dense_f32.pvp", 1, 1),
        ("sparse_binary.pvp", 3, 4),
        ("sparse_values_dt3.pvp", 3, 4),
        ("kernel_f32.pvp", 2, 4),
        ("kernel_byte.pvp", 1, 4),
    ];
    for (name, datatype, datasize) in cases {
        let mut b = golden(name);
        set_i32(&mut b, 9, datatype);
        set_i32(&mut b, 8, datasize);
        let e = PvpFile::from_bytes(b.into()).unwrap_err();
        assert!(
            matches!(e, PvpError::BadCombination { datatype: d, datasize: s, .. } if d == datatype && s == datasize),
            "{name}: {e}"
        );
        assert!(e.to_string().contains(&format!("datatype {datatype}")));
    }
}

#[test]
fn sparse_index_out_of_range() {
    // sparse_values_dt3: frame 0 at 80, entries at 92: (1, .5) (4, -2) (11, 3.25); width 12.
    let mut b = golden("sparse_values_dt3.pvp");
    b[108..112].copy_from_slice(&12u32.to_le_bytes());
    let PvpFile::Sparse(r) = PvpFile::from_bytes(b.into()).unwrap() else {
        panic!()
    };
    match r.frame(0).unwrap_err() {
        PvpError::BadIndex {
            offset,
            frame,
            index,
            ..
        } => assert_eq!((offset, frame, index), (108, 0, 12)),
        e => panic!("{e}"),
    }
    assert!(r.frame(1).is_ok());
    assert!(r.to_csr(0..3).is_err());
    // Binary: frame 0 indices at 92.
    let mut b = golden("sparse_binary.pvp");
    b[96..100].copy_from_slice(&8u32.to_le_bytes());
    let f = tensorfmt_pvp::open_tensor_file(b.into(), &ReadOptions::default()).unwrap();
    assert!(f.validate().is_err());
}

#[test]
fn sparse_duplicates_rejected_in_strict_mode() {
    let mut b = golden("sparse_values_dt3.pvp");
    b[100..104].copy_from_slice(&1u32.to_le_bytes()); // second entry index 4 -> 1
    assert!(full_read(&b, &OpenOptions::default()).is_ok());
    let e = full_read(&b, &strict()).unwrap_err();
    assert!(
        matches!(
            e,
            PvpError::BadIndex {
                offset: 100,
                index: 1,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn negative_active_count() {
    let mut b = golden("sparse_binary.pvp");
    b[88..92].copy_from_slice(&(-1i32).to_le_bytes());
    let PvpFile::Sparse(r) = PvpFile::from_bytes(b.into()).unwrap() else {
        panic!()
    };
    assert!(matches!(
        r.len(),
        Err(PvpError::NegativeCount {
            offset: 88,
            frame: 0,
            count: -1
        })
    ));
}

#[test]
fn weight_frame_header_must_match_frame_0() {
    let b = golden("kernel_f32.pvp");
    let fs = b.len() / 2;
    for (index, v) in [(0usize, 80i32), (20, 2), (25, 3), (9, 1)] {
        let mut c = b.clone();
        c[fs + index * 4..fs + index * 4 + 4].copy_from_slice(&v.to_le_bytes());
        let PvpFile::Weights(r) = PvpFile::from_bytes(c.into()).unwrap() else {
            panic!()
        };
        assert!(r.frame(0).is_ok());
        assert!(
            matches!(r.frame(1), Err(PvpError::BadWeightFrame { frame: 1, offset, .. }) if offset == fs as u64),
            "field {index}"
        );
    }
}

#[test]
fn huge_declared_sizes_fail_before_allocating() {
    let mut b = golden("dense_f32.pvp");
    for (i, v) in [(3, 65536), (4, 65536), (5, 1000)] {
        set_i32(&mut b, i, v);
    }
    assert!(matches!(
        PvpFile::from_bytes(b.clone().into()),
        Err(PvpError::Truncated { offset: 80, .. })
    ));
    for i in 3..6 {
        set_i32(&mut b, i, i32::MAX);
    }
    assert!(matches!(
        PvpFile::from_bytes(b.into()),
        Err(PvpError::Overflow(_))
    ));
    let mut b = golden("kernel_f32.pvp");
    b[100..104].copy_from_slice(&i32::MAX.to_le_bytes());
    for (i, v) in [(20, 65536), (21, 65536), (22, 1)] {
        set_i32(&mut b, i, v);
    }
    assert!(matches!(
        PvpFile::from_bytes(b.clone().into()),
        Err(PvpError::BadSize { .. })
    ));
    for i in 20..23 {
        set_i32(&mut b, i, i32::MAX);
    }
    assert!(matches!(
        PvpFile::from_bytes(b.into()),
        Err(PvpError::Overflow(_))
    ));
    // A frame-count limit.
    let b = golden("sparse_binary.pvp");
    let opts = OpenOptions {
        limits: tensorfmt_core::Limits {
            max_items: 2,
            ..Default::default()
        },
        ..Default::default()
    };
    let f = PvpFile::from_bytes_with(b.into(), &opts).unwrap();
    assert!(matches!(
        f.frame_count(),
        Err(PvpError::LimitExceeded { .. })
    ));
    // An allocation limit on decoded weights.
    let opts = OpenOptions {
        limits: tensorfmt_core::Limits {
            max_alloc: 16,
            ..Default::default()
        },
        ..Default::default()
    };
    let PvpFile::Weights(r) =
        PvpFile::from_bytes_with(golden("kernel_f32.pvp").into(), &opts).unwrap()
    else {
        panic!()
    };
    assert!(matches!(r.frame(0), Err(PvpError::LimitExceeded { .. })));
}

#[test]
fn bad_patch_header_rejected_in_strict_mode() {
    let mut b = golden("nonshared_f32.pvp");
    b[104..106].copy_from_slice(&4u16.to_le_bytes()); // nx = 4 > nxp = 3
    let PvpFile::Weights(r) = PvpFile::from_bytes(b.clone().into()).unwrap() else {
        panic!()
    };
    assert_eq!(r.frame(0).unwrap().patches[0].nx, 4);
    let PvpFile::Weights(r) = PvpFile::from_bytes_with(b.into(), &strict()).unwrap() else {
        panic!()
    };
    assert!(matches!(
        r.frame(0),
        Err(PvpError::BadWeightFrame { offset: 104, .. })
    ));
}

#[test]
fn frame_ranges_and_indices() {
    // Both ends stop at the last frame, as a Python slice's do.
    let open = |frames| {
        tensorfmt_pvp::open_tensor_file(
            golden("dense_f32.pvp").into(),
            &ReadOptions {
                frames: Some(frames),
                ..ReadOptions::default()
            },
        )
    };
    let f = open((2, Some(4))).unwrap();
    assert_eq!(f.tensors()[0].shape.dims()[0], 1);
    assert_eq!(open((4, None)).unwrap().tensors()[0].shape.dims()[0], 0); // a Python slice
    let PvpFile::Dense(r) = PvpFile::from_bytes(golden("dense_f32.pvp").into()).unwrap() else {
        panic!()
    };
    assert!(matches!(
        r.frame(3),
        Err(PvpError::FrameOutOfRange { index: 3, count: 3 })
    ));
    assert_eq!(r.frame_wrapped(4).unwrap().index, 1);
    assert_eq!(r.frame_at(-3).unwrap().index, 0);
}

#[test]
fn tiny_and_empty_inputs() {
    for n in [0usize, 1, 79] {
        assert!(matches!(
            PvpFile::from_bytes(Bytes::from(vec![0u8; n])),
            Err(PvpError::Truncated { offset: 0, .. })
        ));
        assert!(!tensorfmt_pvp::sniff(&vec![0u8; n], n as u64));
    }
    assert!(PvpFile::from_bytes(Bytes::from(vec![0u8; 200])).is_err());
}

mod mutations {
    //! A poor man's fuzzer inside `cargo test`: random byte edits and cuts of every
    //! golden fixture must never panic (the cargo-fuzz target does the same at scale).
    use super::*;
    use proptest::prelude::*;

    fn exercise(b: Vec<u8>) {
        let limits = tensorfmt_core::Limits {
            max_alloc: 1 << 24,
            max_items: 1 << 12,
            ..Default::default()
        };
        for sparse_csr in [false, true] {
            let opts = ReadOptions {
                limits,
                sparse_csr,
                ..ReadOptions::default()
            };
            if let Ok(f) = tensorfmt_pvp::open_tensor_file(b.clone().into(), &opts) {
                let _ = f.validate();
                for i in f.tensors() {
                    if let Ok(t) = f.read_tensor(&i.name) {
                        assert_eq!(t.shape(), &i.shape);
                    }
                }
            }
        }
        let o = OpenOptions {
            limits,
            strict: true,
            allow_truncated: true,
        };
        let _ = full_read(&b, &o);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn random_edits_never_panic(
            file in 0usize..FIXTURES.len(),
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
            cut in any::<Option<usize>>(),
        ) {
            let mut b = golden(FIXTURES[file]);
            for (pos, v) in edits {
                let n = b.len();
                b[pos % n] = v;
            }
            if let Some(c) = cut {
                let n = b.len();
                b.truncate(c % (n + 1));
            }
            exercise(b);
        }
    }
}
