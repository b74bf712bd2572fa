//! Hostile input through the facade view and the typed reader: allocation bombs, counts
//! of 2^32 - 1, overflowing shapes, deep nesting, and every limit. Each is a typed error
//! naming offset and field, found before anything is allocated from the declared size,
//! and fast.

// `expect_err` needs `T: Debug`, which `Box<dyn TensorFile>` is not.
#![allow(clippy::err_expect)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use tensorfmt_core::{Limits, ReadOptions};
use tensorfmt_primitiv::{open_tensor_file, read_file, Mode, PrimitivError, ReaderOptions};

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn tiny_alloc() -> ReadOptions {
    ReadOptions {
        limits: Limits {
            max_alloc: 1 << 12,
            ..Limits::default()
        },
        ..ReadOptions::default()
    }
}

fn open_err(bytes: Vec<u8>, opts: &ReadOptions) -> PrimitivError {
    let t = Instant::now();
    let e = open_tensor_file(Bytes::from(bytes), opts)
        .err()
        .expect("an error");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t.elapsed()
    );
    e
}

const PARAM: &str = "ce00000000 ce00000001 ce00000200";
const MODEL: &str = "ce00000000 ce00000001 ce00000300";
const OPTIMIZER: &str = "ce00000000 ce00000001 ce00000400";

#[test]
fn bin32_of_4_gib_in_a_100_byte_file() {
    // A Tensor of dims [2^30 - 1 + ...]: the bin claims 2^32 - 1 bytes; 100 bytes in all.
    let mut b = unhex(&format!("{PARAM} 91 ce3fffffff ce00000001 c6ffffffff"));
    b.resize(100, 0);
    let e = open_err(b, &tiny_alloc());
    assert!(
        matches!(
            e,
            PrimitivError::Eof { offset: 26, field: "value", needed, available: 74 }
                if needed == 5 + 0xffff_ffff
        ),
        "{e:?}"
    );
}

#[test]
fn counts_of_2_pow_32_minus_1() {
    // map32 (optimizer configs), array32 (dims, model key), uint32 counts (stats, entries).
    let cases: [(&str, &str); 5] = [
        ("map32", "{OPTIMIZER} dfffffffff a0"),
        ("array32 dims", "{PARAM} ddffffffff ce00000001"),
        ("array32 key", "{MODEL} ce00000001 ddffffffff a0"),
        (
            "stat count",
            "{PARAM} 90 ce00000001 c404 00000000 ceffffffff",
        ),
        ("entry count", "{MODEL} ceffffffff"),
    ];
    for (what, hex) in cases {
        let hex = hex
            .replace("{OPTIMIZER}", OPTIMIZER)
            .replace("{PARAM}", PARAM)
            .replace("{MODEL}", MODEL);
        // Default limits: over max_items (2^28) where the count is checked up front;
        // dims are read one by one as primitiv does, so there the bytes run out.
        let e = open_err(unhex(&hex), &tiny_alloc());
        match what {
            "array32 dims" => assert!(
                matches!(
                    e,
                    PrimitivError::Eof {
                        offset: 25,
                        field: "dims",
                        ..
                    }
                ),
                "{what}: {e:?}"
            ),
            _ => assert!(
                matches!(e, PrimitivError::Limit { value, limit, .. } if value >= 0xffff_ffff && limit == 1 << 28),
                "{what}: {e:?}"
            ),
        }
        // Without limits the bytes present still bound everything.
        let unlimited = ReadOptions {
            limits: Limits::unlimited(),
            ..ReadOptions::default()
        };
        let e = open_err(unhex(&hex), &unlimited);
        assert!(matches!(e, PrimitivError::Eof { .. }), "{what}: {e:?}");
    }
}

#[test]
fn max_items_counts_all_declared_counts_together() {
    // A parameter with 3 stats (each count alone is fine at max_items 3), in a model
    // of 1 entry with a 1-part key: 1 + 1 + 3 = 5 > 3.
    let tensor = "90 ce00000001 c404 00000000";
    let stat = format!("a161 {tensor}");
    let hex = format!("{MODEL} ce00000001 91 a177 {tensor} ce00000003 {stat} {stat} {stat}");
    let opts = ReadOptions {
        limits: Limits {
            max_items: 3,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let e = open_err(unhex(&hex), &opts);
    assert!(
        matches!(
            e,
            PrimitivError::Limit {
                offset: 35,
                field: "stat count",
                value: 5,
                limit: 3
            }
        ),
        "{e:?}"
    );
}

#[test]
fn shapes_whose_size_overflows_or_exceeds_the_data() {
    // 8 dims of 2^32 - 1: the product overflows u64 (reported at the bin, offset 61).
    let mut b = unhex(&format!("{PARAM} 98"));
    for _ in 0..8 {
        b.extend(unhex("ceffffffff"));
    }
    b.extend(unhex("ce00000001 c400 ce00000000"));
    let e = open_err(b, &tiny_alloc());
    assert!(
        matches!(
            e,
            PrimitivError::Overflow {
                offset: 61,
                field: "value"
            }
        ),
        "{e:?}"
    );
    // 2^48 elements fit u64 but not the 4-byte bin: a length mismatch, no allocation.
    let b = unhex(&format!(
        "{PARAM} 93 ce00010000 ce00010000 ce00010000 ce00000001 c404 00000000 ce00000000"
    ));
    let e = open_err(b, &tiny_alloc());
    assert!(
        matches!(e, PrimitivError::LengthMismatch { expected, actual: 4, .. } if expected == 4 << 48),
        "{e:?}"
    );
}

#[test]
fn deep_nesting_is_a_marker_error() {
    // 100 000 nested arrays where the dims start: the first element must be a uint32.
    let mut b = unhex(PARAM);
    b.extend(std::iter::repeat_n(0x91, 100_000));
    let e = open_err(b, &tiny_alloc());
    assert!(
        matches!(
            e,
            PrimitivError::Marker {
                offset: 16,
                field: "dims",
                expected: "ce",
                observed: 0x91
            }
        ),
        "{e:?}"
    );
    // Nested maps where an optimizer key should be.
    let mut b = unhex(OPTIMIZER);
    b.extend(std::iter::repeat_n(0x81, 100_000));
    let e = open_err(b, &tiny_alloc());
    assert!(
        matches!(e, PrimitivError::Marker { offset: 16, .. }),
        "{e:?}"
    );
}

#[test]
fn max_rank_and_max_alloc() {
    // 3 dims with max_rank 2.
    let b = unhex(&format!(
        "{PARAM} 93 ce00000002 ce00000002 ce00000002 ce00000001 c420 {} ce00000000",
        "00".repeat(32)
    ));
    let opts = ReadOptions {
        limits: Limits {
            max_rank: 2,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let e = open_err(b.clone(), &opts);
    assert!(
        matches!(
            e,
            PrimitivError::Limit {
                offset: 15,
                field: "value",
                value: 3,
                limit: 2
            }
        ),
        "{e:?}"
    );
    // The row-major copy of a matrix (32 bytes) is the one allocation on read.
    let small = ReadOptions {
        limits: Limits {
            max_alloc: 16,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let f = open_tensor_file(b.into(), &small).unwrap();
    assert!(f.read_tensor("value").is_err());
    assert!(f.validate().is_err());
    // A key longer than max_alloc.
    let b = unhex(&format!(
        "{OPTIMIZER} 81 b0{} ce00000001 80",
        "61".repeat(16)
    ));
    let opts = ReadOptions {
        limits: Limits {
            max_alloc: 8,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let e = open_err(b, &opts);
    assert!(
        matches!(
            e,
            PrimitivError::Limit {
                offset: 16,
                field: "uint_configs",
                value: 16,
                limit: 8
            }
        ),
        "{e:?}"
    );
}

#[test]
fn strict_follows_primitiv_and_lenient_warns() {
    // Header and counts as fixints (generic msgpack): primitiv refuses it.
    let b = unhex("00 01 cd0200 90 01 c404 0000803f 00");
    let strict = ReadOptions {
        strict: true,
        ..ReadOptions::default()
    };
    let e = open_err(b.clone(), &strict);
    assert!(
        matches!(
            e,
            PrimitivError::Marker {
                offset: 0,
                field: "ver_major",
                ..
            }
        ),
        "{e:?}"
    );
    let f = open_tensor_file(b.clone().into(), &ReadOptions::default()).unwrap();
    assert_eq!(
        f.read_tensor("value").unwrap().to_vec::<f32>().unwrap(),
        [1.0]
    );
    let w = f.warnings();
    assert!(
        w.len() == 1 && w[0].starts_with("offset 0: 5 value(s)") && w[0].contains("refuses"),
        "{w:?}"
    );
    // The typed reader's modes agree.
    let typed = |mode| {
        read_file(
            b.clone().into(),
            &ReaderOptions {
                mode,
                ..ReaderOptions::default()
            },
        )
    };
    assert!(typed(Mode::Primitiv).is_err());
    assert!(typed(Mode::Lenient).is_ok());
    // A `cb` float in an optimizer: a warning too.
    let b = unhex(&format!("{OPTIMIZER} 80 81 a178 cb3ff0000000000000"));
    let f = open_tensor_file(b.clone().into(), &ReadOptions::default()).unwrap();
    assert!(
        f.warnings()[0].starts_with("offset 19: 1 value(s)"),
        "{:?}",
        f.warnings()
    );
    assert!(open_tensor_file(b.into(), &strict).is_err());
}
