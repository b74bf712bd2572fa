//! Writer tests: exact headers, comment rules, hexagonal layout codes, streaming with
//! a patched entry count, atomic failure, `save_tensors` conversions, strict-mode
//! reader rules, and a property test that whatever we write reads back unchanged.

use std::io::Cursor;

use proptest::prelude::*;
use tensorfmt_core::{DType, Order, ReadOptions, Tensor, WriteOptions};
use tensorfmt_som::{
    encode_comments, write_mapping, write_rotflip, write_som, DataType, DataWriter, FileKind,
    HexGrid, MapLayout, ReadConfig, RotFlip, SomError, SomFile, WriteConfig,
};

fn ints(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn f32s(n: usize) -> Vec<f32> {
    (0..n).map(|v| v as f32 * 0.5 - 3.0).collect()
}

#[test]
fn comment_writer_rules() {
    assert!(encode_comments(&[]).unwrap().is_empty());
    let b = encode_comments(&["a".into(), "#raw".into()]).unwrap();
    assert_eq!(b, b"# a\n#raw\n# END OF HEADER\n");
    assert!(matches!(
        encode_comments(&["x\ny".into()]),
        Err(SomError::BadComment { line: 0, .. })
    ));
    assert!(matches!(
        encode_comments(&["ok".into(), "é".into()]),
        Err(SomError::BadComment { line: 1, .. })
    ));
    assert!(encode_comments(&["# END OF HEADER".into()]).is_err());
}

#[test]
fn streaming_writer_patches_count_after_comments() {
    let config = WriteConfig {
        comments: vec!["three entries".into()],
        ..WriteConfig::default()
    };
    let mut w = DataWriter::new(Cursor::new(Vec::new()), &[2, 3], &config).unwrap();
    let t = Tensor::from_vec(f32s(6), [2, 3], Order::RowMajor).unwrap();
    w.append(&t).unwrap();
    let two = Tensor::from_vec(f32s(12), [2, 2, 3], Order::RowMajor).unwrap();
    w.append(&two).unwrap();
    assert!(w
        .append(&Tensor::from_vec(f32s(6), [3, 2], Order::RowMajor).unwrap())
        .is_err());
    assert!(w
        .append(&Tensor::from_vec(vec![0f64; 6], [2, 3], Order::RowMajor).unwrap())
        .is_err());
    assert_eq!(w.count(), 3);
    let bytes = w.finish().unwrap().into_inner();
    let head = b"# three entries\n# END OF HEADER\n";
    assert_eq!(&bytes[..head.len()], head);
    assert_eq!(
        ints(&bytes[head.len()..head.len() + 32]),
        vec![2, 0, 0, 3, 0, 2, 2, 3]
    );
    let f = SomFile::from_bytes(bytes.into()).unwrap();
    assert_eq!(f.n_entries_offset(), Some(head.len() as u64 + 12));
    assert_eq!(f.entry(2).unwrap().to_vec::<f32>().unwrap(), f32s(12)[6..]);
    // Misaligned (comment length 32 + 32 = 64 is aligned; make one that is not).
    let config = WriteConfig {
        comments: vec!["odd".into()],
        ..WriteConfig::default()
    };
    let mut w = DataWriter::new(Cursor::new(Vec::new()), &[3], &config).unwrap();
    w.append_bytes(&[0u8; 24]).unwrap();
    assert!(w.append_bytes(&[0u8; 5]).is_err());
    let f = SomFile::from_bytes(w.finish().unwrap().into_inner().into()).unwrap();
    let e = f.entry(1).unwrap();
    assert!(
        e.is_aligned(),
        "entries at odd offsets are copied to aligned storage"
    );
    assert_eq!(e.as_slice::<f32>().unwrap(), &[0.0; 3]);
}

#[test]
fn atomic_data_writer_leaves_nothing_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.bin");
    let w = DataWriter::create(&p, &[4, 4], &WriteConfig::default()).unwrap();
    // No entries: PINK requires at least one, so finishing fails and nothing appears.
    assert!(w.commit().is_err());
    assert!(!p.exists());
    {
        let mut w = DataWriter::create(&p, &[4, 4], &WriteConfig::default()).unwrap();
        w.append_bytes(&[0u8; 64]).unwrap();
        // dropped without commit
    }
    assert!(!p.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let mut w = DataWriter::create(&p, &[4, 4], &WriteConfig::default()).unwrap();
    w.append_bytes(&[0u8; 128]).unwrap();
    assert_eq!(w.commit().unwrap(), 2);
    assert_eq!(SomFile::open(&p).unwrap().n_entries(), Some(2));
}

#[test]
fn hexagonal_layout_codes() {
    let map = MapLayout::Hexagonal(HexGrid::new(5).unwrap());
    let som = Tensor::from_vec(f32s(19 * 4), [19, 2, 2], Order::RowMajor).unwrap();
    for (compat, code) in [(false, 1), (true, 0)] {
        let mut b = Vec::new();
        let c = WriteConfig {
            pink_cli_compat: compat,
            end_line: false,
            ..WriteConfig::default()
        };
        write_som(&mut b, &map, &[2, 2], &som, &c).unwrap();
        assert_eq!(ints(&b[..44]), vec![2, 1, 0, code, 2, 5, 5, 0, 2, 2, 2]);
        let f = SomFile::from_bytes(b.into()).unwrap();
        assert!(f.map_layout().unwrap().is_hexagonal());
        assert_eq!(f.hex_inferred(), compat);
        assert_eq!(
            f.neuron_at(&[2, 2]).unwrap().to_vec::<f32>().unwrap(),
            f32s(76)[36..40]
        );
    }
    // Mapping: hexagonal with code 1 and a size that fits.
    let mut b = Vec::new();
    let d = Tensor::from_vec(f32s(2 * 19), [2, 19], Order::RowMajor).unwrap();
    write_mapping(&mut b, &map, &d, &WriteConfig::default()).unwrap();
    assert_eq!(ints(&b[..32]), vec![2, 2, 0, 2, 1, 2, 5, 5]);
    // Wrong element counts are refused.
    let bad = Tensor::from_vec(f32s(20), [20], Order::RowMajor).unwrap();
    assert!(write_mapping(&mut Vec::new(), &map, &bad, &WriteConfig::default()).is_err());
}

#[test]
fn rotflip_writer_and_reader() {
    let map = MapLayout::Cartesian(vec![2]);
    let recs = vec![
        RotFlip {
            flip_byte: 0,
            angle: 0.0,
        },
        RotFlip {
            flip_byte: 1,
            angle: 1.5,
        },
        RotFlip {
            flip_byte: 1,
            angle: 3.0,
        },
        RotFlip {
            flip_byte: 0,
            angle: 4.5,
        },
    ];
    let mut b = Vec::new();
    write_rotflip(&mut b, &map, 2, &recs, &WriteConfig::default()).unwrap();
    assert_eq!(ints(&b[..24]), vec![2, 3, 2, 0, 1, 2]);
    assert_eq!(b.len(), 24 + 4 * 5);
    assert_eq!(&b[24 + 5..24 + 10], &[1, 0, 0, 0xc0, 0x3f]);
    let f = SomFile::from_bytes(b.clone().into()).unwrap();
    assert_eq!(f.rotflip(1, 0).unwrap(), recs[2]);
    let bad = vec![
        RotFlip {
            flip_byte: 2,
            angle: 0.0
        };
        4
    ];
    assert!(write_rotflip(&mut Vec::new(), &map, 2, &bad, &WriteConfig::default()).is_err());
    // A flip byte of 2 is read as flipped, but refused in strict mode.
    b[24] = 2;
    let f = SomFile::from_bytes(b.clone().into()).unwrap();
    assert!(f.rotflip(0, 0).unwrap().flipped());
    let strict = ReadConfig {
        strict: true,
        ..ReadConfig::default()
    };
    assert!(matches!(
        SomFile::from_bytes_with(b.into(), &strict),
        Err(SomError::BadFlip {
            offset: 24,
            value: 2
        })
    ));
}

#[test]
fn transform_indices() {
    let r = RotFlip {
        flip_byte: 0,
        angle: 3.0 * std::f32::consts::TAU / 360.0,
    };
    assert_eq!(r.transform_index(360), 3);
    // PINK 2.0-2.4.1 wrote k * pi / (8 * numrot).
    let old = RotFlip {
        flip_byte: 1,
        angle: 3.0 * std::f32::consts::PI / (8.0 * 360.0),
    };
    assert_eq!(old.legacy_transform_index(360), 363);
}

#[test]
fn reader_edge_cases() {
    let hdr = |v: &[i32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    // Trailing bytes: a warning, or an error in strict mode.
    let mut b = hdr(&[2, 0, 0, 1, 0, 1, 2]);
    b.extend_from_slice(&[0u8; 9]);
    let f = SomFile::from_bytes(b.clone().into()).unwrap();
    assert!(f.warnings()[0].contains("1 unexpected bytes"));
    let strict = ReadConfig {
        strict: true,
        ..ReadConfig::default()
    };
    assert!(matches!(
        SomFile::from_bytes_with(b.into(), &strict),
        Err(SomError::TrailingBytes {
            offset: 36,
            count: 1
        })
    ));
    // Rank 4 is accepted leniently, refused strictly.
    let mut b = hdr(&[2, 0, 0, 1, 0, 4, 1, 1, 1, 2]);
    b.extend_from_slice(&[0u8; 8]);
    assert!(SomFile::from_bytes(b.clone().into()).is_ok());
    assert!(matches!(
        SomFile::from_bytes_with(b.into(), &strict),
        Err(SomError::BadRank {
            value: 4,
            max: 3,
            ..
        })
    ));
    // A [5, 5] payload between the hexagonal and cartesian sizes fits neither.
    let mut b = hdr(&[2, 2, 0, 1, 0, 2, 5, 5]);
    b.extend_from_slice(&[0u8; 4 * 20]);
    assert!(matches!(
        SomFile::from_bytes(b.into()),
        Err(SomError::MapSizeMismatch {
            cartesian: 100,
            hexagonal: 76,
            actual: 80,
            ..
        })
    ));
    // Short SOM payload: truncated with the count of complete neurons.
    let mut b = hdr(&[2, 1, 0, 0, 2, 2, 2, 0, 2, 2, 2]);
    b.extend_from_slice(&[0u8; 40]);
    assert!(matches!(
        SomFile::from_bytes(b.into()),
        Err(SomError::Truncated {
            expected: 64,
            actual: 40,
            complete_entries: 2,
            ..
        })
    ));
    // Non-f32 data types are read with their width.
    let mut b = hdr(&[2, 0, 6, 2, 0, 1, 3]);
    b.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
    let f = SomFile::from_bytes(b.into()).unwrap();
    assert_eq!(f.dtype(), Some(DType::U8));
    assert_eq!(f.entry(1).unwrap().to_vec::<u8>().unwrap(), vec![4, 5, 6]);
    // Absurd counts fail on the size check, before any allocation, and limits apply.
    let b = hdr(&[2, 0, 0, i32::MAX, 0, 3, i32::MAX, i32::MAX, i32::MAX]);
    assert!(SomFile::from_bytes(b.clone().into()).is_err());
    let tight = ReadConfig {
        limits: tensorfmt_core::Limits {
            max_items: 10,
            ..Default::default()
        },
        ..ReadConfig::default()
    };
    assert!(matches!(
        SomFile::from_bytes_with(b.into(), &tight),
        Err(SomError::LimitExceeded {
            what: "n_entries",
            ..
        })
    ));
    // Wrong-kind accessors are typed errors.
    let mut b = hdr(&[2, 0, 0, 1, 0, 1, 1]);
    b.extend_from_slice(&[0u8; 4]);
    let f = SomFile::from_bytes(b.into()).unwrap();
    assert!(matches!(f.neuron(0), Err(SomError::WrongKind { .. })));
    assert!(matches!(f.entry(1), Err(SomError::OutOfRange { .. })));
}

#[test]
fn save_tensors_conversions() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.bin");
    // numpy images HWC u8 -> channel-first f32 data file.
    let hwc: Vec<u8> = (0..2 * 3 * 3 * 2).map(|v| v as u8).collect();
    let t = Tensor::from_vec(hwc, [2, 3, 3, 2], Order::RowMajor).unwrap();
    let mut o = WriteOptions {
        kind: Some("som-data".into()),
        ..Default::default()
    };
    o.extra.insert("channels".into(), "last".into());
    o.extra.insert("comment".into(), "from numpy".into());
    tensorfmt_som::save_tensors(&p, &[("images".into(), t)], &o).unwrap();
    let f = SomFile::open(&p).unwrap();
    assert_eq!(f.comments().texts(), vec!["from numpy"]);
    assert_eq!(f.entry_dims(), Some(&[2, 3, 3][..]));
    // channel 1 of entry 0 = odd values 1, 3, ..., 17
    let e = f.entry(0).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(&e[9..], &[1., 3., 5., 7., 9., 11., 13., 15., 17.]);
    // Storing another data type.
    let o = WriteOptions {
        kind: Some("som-data".into()),
        dtype: Some(DType::F64),
        ..Default::default()
    };
    let t = Tensor::from_vec(f32s(8), [2, 2, 2], Order::RowMajor).unwrap();
    tensorfmt_som::save_tensors(&p, &[("data".into(), t.clone())], &o).unwrap();
    assert_eq!(
        SomFile::open(&p).unwrap().data_type(),
        DataType::from_code(1)
    );
    let o = WriteOptions {
        dtype: Some(DType::F16),
        ..o
    };
    assert!(tensorfmt_som::save_tensors(&p, &[("data".into(), t)], &o).is_err());
    // Hexagonal SOM from [neurons, h, w], round trip through the facade.
    let som = Tensor::from_vec(f32s(7 * 9), [7, 3, 3], Order::RowMajor).unwrap();
    let o = WriteOptions {
        kind: Some("som".into()),
        hex: true,
        ..Default::default()
    };
    tensorfmt_som::save_tensors(&p, &[("som".into(), som.clone())], &o).unwrap();
    let tf =
        tensorfmt_som::open_tensor_file(std::fs::read(&p).unwrap().into(), &ReadOptions::default())
            .unwrap();
    assert_eq!(
        tf.read_tensor("som").unwrap().to_vec::<f32>().unwrap(),
        f32s(63)
    );
    let axial = tf.read_tensor("hex_axial").unwrap();
    // Convert back with the exported tensors (hex_axial marks the layout).
    let p2 = dir.path().join("y.bin");
    let back = vec![
        ("som".to_string(), tf.read_tensor("som").unwrap()),
        ("hex_axial".to_string(), axial),
    ];
    tensorfmt_som::save_tensors(&p2, &back, &WriteOptions::default()).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(&p2).unwrap());
    let o = WriteOptions {
        kind: Some("som".into()),
        hex: true,
        ..Default::default()
    };
    let eight = Tensor::from_vec(f32s(8 * 9), [8, 3, 3], Order::RowMajor).unwrap();
    assert!(tensorfmt_som::save_tensors(&p, &[("som".into(), eight)], &o).is_err());
    // Cartesian rank 5 needs a split; som_rank=2 gives multi-channel neurons.
    let five = Tensor::from_vec(f32s(2 * 2 * 2 * 3 * 3), [2, 2, 2, 3, 3], Order::RowMajor).unwrap();
    let mut o = WriteOptions {
        kind: Some("som".into()),
        ..Default::default()
    };
    assert!(tensorfmt_som::save_tensors(&p, &[("som".into(), five.clone())], &o).is_err());
    o.extra.insert("som_rank".into(), "2".into());
    tensorfmt_som::save_tensors(&p, &[("som".into(), five)], &o).unwrap();
    let f = SomFile::open(&p).unwrap();
    assert_eq!(f.neuron_dims(), Some(&[2, 3, 3][..]));
    assert_eq!(f.map_layout().unwrap().dims(), vec![2, 2]);
    // Mapping and rotation/flip from exported names.
    let d = Tensor::from_vec(f32s(3 * 4), [3, 2, 2], Order::RowMajor).unwrap();
    tensorfmt_som::save_tensors(&p, &[("distances".into(), d)], &WriteOptions::default()).unwrap();
    let f = SomFile::open(&p).unwrap();
    assert_eq!(f.kind(), FileKind::Mapping);
    assert_eq!(f.best_matches().unwrap(), vec![Some(0); 3]);
    let flip = Tensor::from_vec(vec![0u8, 1, 1, 0], [2, 2], Order::RowMajor).unwrap();
    let angle = Tensor::from_vec(vec![0f32, 1., 2., 3.], [2, 2], Order::RowMajor).unwrap();
    let mut o = WriteOptions::default();
    o.extra.insert("som_dims".into(), "2,1".into());
    tensorfmt_som::save_tensors(&p, &[("flip".into(), flip), ("angle".into(), angle)], &o).unwrap();
    let f = SomFile::open(&p).unwrap();
    assert_eq!(f.map_layout().unwrap().dims(), vec![2, 1]);
    assert_eq!(
        f.rotflip(1, 1).unwrap(),
        RotFlip {
            flip_byte: 0,
            angle: 3.0
        }
    );
}

fn dtype_strategy() -> impl Strategy<Value = DType> {
    prop::sample::select(vec![
        DType::F32,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ])
}

proptest! {
    #[test]
    fn data_round_trip(
        dims in prop::collection::vec(1usize..5, 1..4),
        n in 1usize..5,
        dtype in dtype_strategy(),
        comments in prop::collection::vec("[ -~&&[^#]]{0,12}", 0..3),
        seed in any::<u8>(),
    ) {
        let per: usize = dims.iter().product();
        let mut shape = vec![n];
        shape.extend_from_slice(&dims);
        let bytes: Vec<u8> = (0..n * per * dtype.size()).map(|i| (i as u8).wrapping_mul(seed | 1)).collect();
        let t = Tensor::from_bytes(dtype, shape.clone(), Order::RowMajor, bytes.clone()).unwrap();
        let config = WriteConfig { comments: comments.clone(), data_type: DataType::from_dtype(dtype).unwrap(), ..WriteConfig::default() };
        let mut out = Vec::new();
        tensorfmt_som::write_data(&mut out, &t, &config).unwrap();
        let f = SomFile::from_bytes(out.into()).unwrap();
        prop_assert_eq!(f.dtype(), Some(dtype));
        prop_assert_eq!(f.comments().lines.len(), comments.len());
        let back = f.entries(0..n).unwrap();
        prop_assert_eq!(back.dims(), &shape[..]);
        prop_assert_eq!(&back.bytes()[..], &bytes[..]);
    }

    #[test]
    fn som_round_trip(d in prop::sample::select(vec![1usize, 3, 5, 7]), hex in any::<bool>(), nd in 1usize..4, compat in any::<bool>()) {
        let map = if hex { MapLayout::Hexagonal(HexGrid::new(d).unwrap()) } else { MapLayout::Cartesian(vec![d, d]) };
        let n = map.neuron_count();
        let som = Tensor::from_vec(f32s(n * nd * nd), [n, nd, nd], Order::RowMajor).unwrap();
        let mut out = Vec::new();
        let config = WriteConfig { pink_cli_compat: compat, ..WriteConfig::default() };
        write_som(&mut out, &map, &[nd, nd], &som, &config).unwrap();
        let f = SomFile::from_bytes(out.into()).unwrap();
        // With layout code 0, d = 1 reads as cartesian (1 neuron both ways).
        prop_assert_eq!(f.map_layout().unwrap().is_hexagonal(), hex && (d > 1 || !compat));
        prop_assert_eq!(f.som_tensor().unwrap().to_vec::<f32>().unwrap(), f32s(n * nd * nd));
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(f) = tensorfmt_som::open_tensor_file(b.clone().into(), &ReadOptions::default()) {
            let _ = f.validate();
        }
        let _ = tensorfmt_som::sniff(&b, b.len() as u64);
    }
}

#[test]
fn fuzz_regressions() {
    // Neuron size x element size overflowed before the checked multiplication (found
    // by cargo fuzz): a SOM header with absurd neuron dims must be a typed error.
    let mut b: Vec<u8> = [2i32, 1, 0, 0, 2, 2, 2, 0, 3, 1 << 30, 1 << 30, 8]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    b.extend_from_slice(&[0u8; 16]);
    assert!(SomFile::from_bytes(b.into()).is_err());
    // Huge indices are out of range, not an overflow.
    let mut b: Vec<u8> = [2i32, 0, 0, 1, 0, 1, 1]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    b.extend_from_slice(&[0u8; 4]);
    let f = SomFile::from_bytes(b.into()).unwrap();
    assert!(matches!(
        f.entry(usize::MAX),
        Err(SomError::OutOfRange { .. })
    ));
    let m = MapLayout::Cartesian(vec![usize::MAX, 3]);
    assert_eq!(m.index(&[usize::MAX - 1, 2]), None);
}

#[test]
fn empty_mapping_with_a_huge_map_is_capped() {
    // Zero entries (allowed leniently) leave the map size unbacked by bytes (found by
    // cargo fuzz: bmu_counts then allocated one counter per claimed neuron).
    let b: Vec<u8> = [2i32, 2, 0, 0, 0, 2, 1 << 12, 1 << 12]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let tight = ReadConfig {
        limits: tensorfmt_core::Limits {
            max_items: 1 << 20,
            ..Default::default()
        },
        ..ReadConfig::default()
    };
    assert!(matches!(
        SomFile::from_bytes_with(b.clone().into(), &tight),
        Err(SomError::LimitExceeded {
            what: "neuron count",
            ..
        })
    ));
    // 2^24 neurons pass the default cap of 2^28 items.
    let f = SomFile::from_bytes(b.into()).unwrap();
    assert_eq!((f.n_entries(), f.neuron_count()), (Some(0), Some(1 << 24)));
}

#[test]
fn huge_hexagonal_layouts_are_refused_before_allocating() {
    // Layout code 1 with d = 2^31 - 1 and zero entries (found by cargo fuzz: the row
    // table of the grid was built before any size check).
    let d = i32::MAX;
    let b: Vec<u8> = [2i32, 2, 0, 0, 1, 2, d, d]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert!(matches!(
        SomFile::from_bytes(b.into()),
        Err(SomError::LimitExceeded {
            what: "neuron count",
            ..
        })
    ));
}

/// What the PINK reader (and `validate`) refuses is refused when writing, naming the
/// value, nothing written: a layout of rank above 3 (a mapping of a 2x2x2x2 map, a SOM
/// of rank-4 neurons, rank-5 distances were written with exit 0) and a mapping or
/// rotation/flip file of no entries (an empty `--frames` selection).
#[test]
fn what_pink_refuses_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.bin");
    let save = |tensors: &[(&str, Tensor)], kind: &str, set: &[(&str, &str)]| {
        let mut o = WriteOptions {
            kind: Some(kind.into()),
            ..Default::default()
        };
        for (k, v) in set {
            o.extra.insert(k.to_string(), v.to_string());
        }
        let named: Vec<(String, Tensor)> = tensors
            .iter()
            .map(|(n, t)| (n.to_string(), t.clone()))
            .collect();
        let r = tensorfmt_som::save_tensors(&p, &named, &o);
        assert!(!p.exists(), "{kind} {set:?}: written");
        r.unwrap_err().to_string()
    };
    let t = |dims: &[usize]| {
        let n = dims.iter().product();
        Tensor::from_vec(f32s(n), dims.to_vec(), Order::RowMajor).unwrap()
    };
    let e = save(&[("distances", t(&[2, 2, 2, 2, 2]))], "som-mapping", &[]);
    assert!(e.contains("SOM layout rank 4"), "{e}");
    let e = save(&[("distances", t(&[1, 2, 2, 2, 2, 2]))], "som-mapping", &[]);
    assert!(e.contains("SOM layout rank 5"), "{e}");
    let e = save(&[("som", t(&[2, 2, 2, 2, 2]))], "som", &[("som_rank", "1")]);
    assert!(e.contains("neuron layout rank 4"), "{e}");
    let e = save(&[("data", t(&[2, 2, 2, 2, 2]))], "som-data", &[]);
    assert!(e.contains("[entries, h, w]"), "{e}");
    let flip = Tensor::from_vec(vec![0u8; 16], [1, 16], Order::RowMajor).unwrap();
    let angle = Tensor::from_vec(vec![0f32; 16], [1, 16], Order::RowMajor).unwrap();
    let e = save(
        &[("flip", flip), ("angle", angle)],
        "som-rotflip",
        &[("som_dims", "2,2,2,2")],
    );
    assert!(e.contains("SOM layout rank 4"), "{e}");
    // No entries.
    let e = save(&[("distances", t(&[0, 2, 3]))], "som-mapping", &[]);
    assert!(e.contains("no entries"), "{e}");
    let none_u8 = Tensor::from_vec(Vec::<u8>::new(), [0, 4], Order::RowMajor).unwrap();
    let none_f32 = Tensor::from_vec(Vec::<f32>::new(), [0, 4], Order::RowMajor).unwrap();
    let e = save(
        &[("flip", none_u8), ("angle", none_f32)],
        "som-rotflip",
        &[],
    );
    assert!(e.contains("no entries"), "{e}");
    let e = save(&[("data", t(&[0, 2, 2]))], "som-data", &[]);
    assert!(e.contains("entries > 0"), "{e}");
    // The lower-level writers too.
    let map = MapLayout::Cartesian(vec![2, 2, 2, 2]);
    let four = t(&[1, 2, 2, 2, 2]);
    assert!(write_mapping(&mut Vec::new(), &map, &four, &WriteConfig::default()).is_err());
    let map = MapLayout::Cartesian(vec![2, 3]);
    assert!(write_rotflip(&mut Vec::new(), &map, 0, &[], &WriteConfig::default()).is_err());
}
