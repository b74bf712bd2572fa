//! Hostile headers (allocation bombs) and the facade's `ReadOptions` (limits, kind
//! hint, strict): every declared size beyond the bytes present or beyond a limit is a
//! typed error naming the field, returned fast and before any allocation.

use bytes::Bytes;
use tensorfmt_core::testing::{assert_fast as fast, format_error, read_fully};
use tensorfmt_core::{Limits, ReadOptions, TensorFile};
use tensorfmt_som::{open_tensor_file, ReadConfig, SomError, SomFile};

trait Fails<E> {
    fn fails(self) -> E;
}

impl<T, E> Fails<E> for Result<T, E> {
    fn fails(self) -> E {
        match self {
            Ok(_) => panic!("expected an error"),
            Err(e) => e,
        }
    }
}

fn tiny() -> ReadOptions {
    ReadOptions {
        limits: Limits {
            max_alloc: 1 << 16,
            max_items: 1 << 12,
            max_rank: 8,
            ..Limits::default()
        },
        ..ReadOptions::default()
    }
}

fn ints(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn full_read(b: &[u8], o: &ReadOptions) -> Result<Box<dyn TensorFile>, tensorfmt_core::Error> {
    let f = open_tensor_file(Bytes::copy_from_slice(b), o)?;
    read_fully(f.as_ref())?;
    Ok(f)
}

fn som_err(e: &tensorfmt_core::Error) -> &SomError {
    format_error::<SomError>(e)
}

#[test]
fn data_dims_whose_product_overflows() {
    let b = ints(&[2, 0, 0, 1, 0, 3, i32::MAX, i32::MAX, i32::MAX]);
    let e = fast("overflow", || full_read(&b, &tiny()).fails());
    assert!(matches!(som_err(&e), SomError::Overflow { .. }), "{e}");
    // SOM: map dims and neuron dims that overflow together.
    let b = ints(&[2, 1, 0, 0, 2, 65535, 65535, 0, 2, 65535, 65535]);
    let e = fast("som", || full_read(&b, &tiny()).fails());
    assert!(
        matches!(
            som_err(&e),
            SomError::Overflow { .. } | SomError::LimitExceeded { .. }
        ),
        "{e}"
    );
}

#[test]
fn data_file_claiming_2_pow_40_values() {
    // 2^31 - 1 entries of 512 floats (~2^40 values, 4 TiB) in a 40-byte file.
    let mut b = ints(&[2, 0, 0, i32::MAX, 0, 1, 512]);
    b.extend_from_slice(&[0; 12]);
    let o = ReadOptions {
        limits: Limits {
            max_items: u64::MAX,
            ..tiny().limits
        },
        ..ReadOptions::default()
    };
    let e = fast("entries", || full_read(&b, &o).fails());
    match som_err(&e) {
        SomError::Truncated {
            offset,
            expected,
            actual,
            ..
        } => assert_eq!(
            (*offset, *expected, *actual),
            (28, i32::MAX as u64 * 2048, 12)
        ),
        other => panic!("{other}"),
    }
    // With the default item limit the count itself is refused, naming the field.
    let e = fast("limit", || full_read(&b, &tiny()).fails());
    assert!(
        matches!(
            som_err(&e),
            SomError::LimitExceeded {
                what: "n_entries",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn rank_of_2_pow_31() {
    for rank in [i32::MAX, i32::MIN, 0, 9] {
        let mut b = ints(&[2, 0, 0, 1, 0, rank]);
        b.extend_from_slice(&[0; 64]);
        let e = fast("rank", || full_read(&b, &tiny()).fails());
        assert!(
            matches!(som_err(&e), SomError::BadRank { offset: 20, value, .. } if *value == rank),
            "{e}"
        );
    }
    // Limits::max_rank is honoured below the format's own maximum.
    let b = [ints(&[2, 0, 0, 1, 0, 3, 1, 1, 1]), vec![0; 4]].concat();
    assert!(full_read(&b, &tiny()).is_ok());
    let o = ReadOptions {
        limits: Limits {
            max_rank: 2,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let e = full_read(&b, &o).fails();
    assert!(
        matches!(som_err(&e), SomError::BadRank { max: 2, .. }),
        "{e}"
    );
}

#[test]
fn hexagonal_and_empty_mapping_neuron_counts() {
    // A hexagonal SOM of side 2^31 - 1: the neuron count is checked before the grid.
    let b = ints(&[2, 1, 0, 1, 2, i32::MAX, i32::MAX, 0, 2, 1, 1]);
    let e = fast("hex", || full_read(&b, &tiny()).fails());
    assert!(
        matches!(
            som_err(&e),
            SomError::LimitExceeded {
                what: "neuron count",
                ..
            }
        ),
        "{e}"
    );
    // An empty mapping file does not back its map with bytes: the neuron count is
    // an item count, and per-neuron results are allocations.
    let b = ints(&[2, 2, 0, 0, 0, 2, 1 << 14, 1 << 14]);
    let e = fast("mapping", || full_read(&b, &tiny()).fails());
    assert!(
        matches!(
            som_err(&e),
            SomError::LimitExceeded {
                what: "neuron count",
                ..
            }
        ),
        "{e}"
    );
    let config = ReadConfig {
        limits: Limits {
            max_alloc: 1 << 16,
            ..Limits::default()
        },
        ..ReadConfig::default()
    };
    let f = SomFile::from_bytes_with(Bytes::from(b), &config).unwrap();
    assert!(matches!(
        fast("bmu", || f.bmu_counts().fails()),
        SomError::Core(tensorfmt_core::Error::LimitExceeded { .. })
    ));
}

#[test]
fn unaligned_copies_honour_max_alloc() {
    // A comment block of 3 bytes makes the f32 payload unaligned: reading copies.
    let mut b = b"#a\n".to_vec();
    b.extend(ints(&[2, 0, 0, 4, 0, 2, 32, 32]));
    b.extend(std::iter::repeat_n(0u8, 4 * 32 * 32 * 4));
    let data = Bytes::from(b);
    let f = open_tensor_file(data.slice(0..), &ReadOptions::default()).unwrap();
    let t = f.read_tensor("data").unwrap();
    assert_eq!(t.dims(), &[4, 32, 32]);
    let o = ReadOptions {
        limits: Limits {
            max_alloc: 4096,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let f = open_tensor_file(data.slice(0..), &o).unwrap();
    if !t.is_aligned() {
        let e = f.read_tensor("data").fails();
        assert!(matches!(
            som_err(&e),
            SomError::Core(tensorfmt_core::Error::LimitExceeded { .. })
        ));
    }
    // One entry (4 KiB) at a time fits.
    let chunks = f.read_chunks("data").unwrap().count();
    assert!(chunks >= 1);
}

#[test]
fn kind_hint_reads_ambiguous_legacy_corpus_files() {
    let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "som") else {
        return;
    };
    for (path, hint, tensor, dims) in [
        ("legacy/image.bin", "data", "data", vec![1, 2, 3]),
        (
            "legacy/image_with_header.bin",
            "som-data",
            "data",
            vec![1, 2, 3],
        ),
        (
            "legacy/map_5x5x5.bin",
            "mapping",
            "distances",
            vec![4000, 5, 5, 5],
        ),
    ] {
        let data = tensorfmt_core::io::map_file(dir.join(path)).unwrap();
        let e = open_tensor_file(data.clone(), &ReadOptions::default()).fails();
        assert!(matches!(e, SomError::LegacyAmbiguous { .. }), "{path}: {e}");
        let o = ReadOptions {
            kind: Some(hint.into()),
            ..ReadOptions::default()
        };
        let f = open_tensor_file(data.clone(), &o).unwrap();
        let t = f.read_tensor(tensor).unwrap();
        assert_eq!(t.dims(), &dims[..], "{path}");
        // A hint that fits no reading is an error naming the file, not a guess.
        let o = ReadOptions {
            kind: Some("rotflip".into()),
            ..ReadOptions::default()
        };
        assert!(open_tensor_file(data.clone(), &o).is_err(), "{path}");
        let o = ReadOptions {
            kind: Some("bogus".into()),
            ..ReadOptions::default()
        };
        assert!(matches!(
            open_tensor_file(data, &o).fails(),
            SomError::InvalidInput(_)
        ));
    }
}

#[test]
fn strict_is_wired_through_the_facade() {
    let mut b = ints(&[2, 0, 0, 1, 0, 1, 2]);
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(b"junk");
    let f = full_read(&b, &ReadOptions::default()).unwrap();
    assert!(f.warnings().iter().any(|w| w.contains("unexpected bytes")));
    let strict = ReadOptions {
        strict: true,
        ..ReadOptions::default()
    };
    let e = full_read(&b, &strict).fails();
    assert!(
        matches!(
            som_err(&e),
            SomError::TrailingBytes {
                offset: 36,
                count: 4
            }
        ),
        "{e}"
    );
    // Strict: ranks above 3 and empty mapping files are refused.
    let b = [ints(&[2, 0, 0, 1, 0, 4, 1, 1, 1, 1]), vec![0; 4]].concat();
    assert!(full_read(&b, &ReadOptions::default()).is_ok());
    assert!(matches!(
        som_err(&full_read(&b, &strict).fails()),
        SomError::BadRank { max: 3, .. }
    ));
    let b = ints(&[2, 2, 0, 0, 0, 2, 2, 2]);
    assert!(full_read(&b, &ReadOptions::default()).is_ok());
    assert!(matches!(
        som_err(&full_read(&b, &strict).fails()),
        SomError::BadEntryCount { offset: 12, .. }
    ));
}
