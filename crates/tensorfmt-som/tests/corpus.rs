//! Data-driven tests over the shared PINK corpus (`corpus/som/`, see its SOURCES.md):
//! header values and element counts of every file, expected values, rejections with
//! typed errors, and byte-identical re-serialisation of every v2 file.

use std::path::{Path, PathBuf};

use tensorfmt_core::{DType, ReadOptions};
use tensorfmt_som::{
    write_data, write_mapping, write_rotflip, write_som, FileKind, MapLayout, ReadConfig, SomError,
    SomFile, WriteConfig,
};

fn corpus() -> Option<PathBuf> {
    tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "som")
}

/// Expected reading of one corpus file.
struct Want {
    path: &'static str,
    kind: FileKind,
    /// Entries (data, mapping, rotation/flip) or neurons (SOM).
    count: u64,
    map: &'static [usize],
    hex: bool,
    item: &'static [usize],
    header_bytes: usize,
    comment_lines: usize,
    /// Kind hint needed for ambiguous legacy files.
    hint: Option<FileKind>,
}

#[allow(clippy::too_many_arguments)] // one row of the table
const fn w(
    path: &'static str,
    kind: FileKind,
    count: u64,
    map: &'static [usize],
    hex: bool,
    item: &'static [usize],
    header_bytes: usize,
    comment_lines: usize,
) -> Want {
    Want {
        path,
        kind,
        count,
        map,
        hex,
        item,
        header_bytes,
        comment_lines,
        hint: None,
    }
}

use FileKind::{Data as D, Mapping as M, RotFlip as R, Som as S};

const V2: &[Want] = &[
    w(
        "upstream_v2/test_m_20_95_95.som",
        S,
        4,
        &[2, 2],
        false,
        &[135, 135],
        44,
        0,
    ),
    w(
        "upstream_v2/test_m_20_95_95.map",
        M,
        20,
        &[2, 2],
        false,
        &[],
        32,
        0,
    ),
    w(
        "upstream_v2/test_m_20_95_95@d9188e5.map",
        M,
        20,
        &[10, 10],
        false,
        &[],
        32,
        0,
    ),
    w(
        "upstream_v2/test_m_20_95_95.pink",
        D,
        20,
        &[],
        false,
        &[95, 95],
        32,
        0,
    ),
    w(
        "upstream_v2/my_map_file.map",
        M,
        5,
        &[10, 10],
        false,
        &[],
        32,
        0,
    ),
    w(
        "upstream_v2/my_pink_file_radio.pink",
        D,
        5,
        &[],
        false,
        &[95, 95],
        32,
        0,
    ),
    w(
        "upstream_v2/my_pink_file_optical.pink",
        D,
        5,
        &[],
        false,
        &[95, 95],
        32,
        0,
    ),
    w("upstream_v2/data.bin", D, 1, &[], false, &[64, 64], 32, 0),
    w(
        "generated_v2/shapes16.bin",
        D,
        12,
        &[],
        false,
        &[16, 16],
        130,
        2,
    ),
    w(
        "generated_v2/shapes16_noheader.bin",
        D,
        12,
        &[],
        false,
        &[16, 16],
        32,
        0,
    ),
    w(
        "generated_v2/shapes16_2ch.bin",
        D,
        12,
        &[],
        false,
        &[2, 16, 16],
        94,
        1,
    ),
    w(
        "generated_v2/som_cart3x3.bin",
        S,
        9,
        &[3, 3],
        false,
        &[23, 23],
        44,
        0,
    ),
    w(
        "generated_v2/som_cart4x2.bin",
        S,
        8,
        &[4, 2],
        false,
        &[23, 23],
        44,
        0,
    ),
    w(
        "generated_v2/som_cart5x1.bin",
        S,
        5,
        &[5],
        false,
        &[23, 23],
        40,
        0,
    ),
    w(
        "generated_v2/som_cart2x2x2.bin",
        S,
        8,
        &[2, 2, 2],
        false,
        &[23, 23],
        48,
        0,
    ),
    w(
        "generated_v2/som_cart3x3_2ch.bin",
        S,
        9,
        &[3, 3],
        false,
        &[2, 23, 23],
        48,
        0,
    ),
    w(
        "generated_v2/som_cart3x3_reinit.bin",
        S,
        9,
        &[3, 3],
        false,
        &[23, 23],
        116,
        2,
    ),
    w(
        "generated_v2/som_cart3x3_2ch_reinit.bin",
        S,
        9,
        &[3, 3],
        false,
        &[2, 23, 23],
        120,
        2,
    ),
    w(
        "generated_v2/som_hex3.bin",
        S,
        7,
        &[3, 3],
        true,
        &[23, 23],
        44,
        0,
    ),
    w(
        "generated_v2/som_hex5.bin",
        S,
        19,
        &[5, 5],
        true,
        &[23, 23],
        44,
        0,
    ),
    w(
        "generated_v2/map_cart3x3.bin",
        M,
        12,
        &[3, 3],
        false,
        &[],
        32,
        0,
    ),
    w(
        "generated_v2/rotflip_cart3x3.bin",
        R,
        12,
        &[3, 3],
        false,
        &[],
        28,
        0,
    ),
    w(
        "generated_v2/map_cart4x2.bin",
        M,
        12,
        &[4, 2],
        false,
        &[],
        32,
        0,
    ),
    w(
        "generated_v2/rotflip_cart4x2_noflip.bin",
        R,
        12,
        &[4, 2],
        false,
        &[],
        28,
        0,
    ),
    w(
        "generated_v2/map_cart2x2x2.bin",
        M,
        12,
        &[2, 2, 2],
        false,
        &[],
        36,
        0,
    ),
    w(
        "generated_v2/map_cart3x3_2ch.bin",
        M,
        12,
        &[3, 3],
        false,
        &[],
        32,
        0,
    ),
    w(
        "generated_v2/map_hex3.bin",
        M,
        12,
        &[3, 3],
        true,
        &[],
        32,
        0,
    ),
    w(
        "generated_v2/rotflip_hex3.bin",
        R,
        12,
        &[3, 3],
        true,
        &[],
        28,
        0,
    ),
    w(
        "generated_v2/map_hex5.bin",
        M,
        12,
        &[5, 5],
        true,
        &[],
        32,
        0,
    ),
    w(
        "generated_v2/rotflip_hex5.bin",
        R,
        12,
        &[5, 5],
        true,
        &[],
        28,
        0,
    ),
];

const fn hinted(mut x: Want, k: FileKind) -> Want {
    x.hint = Some(k);
    x
}

const LEGACY: &[Want] = &[
    hinted(w("legacy/image.bin", D, 1, &[], false, &[2, 3], 16, 0), D),
    hinted(
        w(
            "legacy/image_with_header.bin",
            D,
            1,
            &[],
            false,
            &[2, 3],
            41,
            1,
        ),
        D,
    ),
    w(
        "legacy/som_10x10.bin",
        S,
        100,
        &[10, 10],
        false,
        &[44, 44],
        24,
        0,
    ),
    w(
        "legacy/som_5x5x5.bin",
        S,
        125,
        &[5, 5, 5],
        false,
        &[44, 44],
        24,
        0,
    ),
    w(
        "legacy/som_4x3x2.bin",
        S,
        24,
        &[4, 3, 2],
        false,
        &[44, 44],
        24,
        0,
    ),
    w(
        "legacy/som_5x3x1.bin",
        S,
        15,
        &[5, 3],
        false,
        &[44, 44],
        24,
        0,
    ),
    w("legacy/som_20.bin", S, 20, &[20], false, &[44, 44], 24, 0),
    hinted(
        w(
            "legacy/map_5x5x5.bin",
            M,
            4000,
            &[5, 5, 5],
            false,
            &[],
            16,
            0,
        ),
        M,
    ),
    w("legacy/som.bin", S, 100, &[10, 10], false, &[44, 44], 20, 0),
    w(
        "legacy/som_shapes_shuffled.bin",
        S,
        100,
        &[10, 10],
        false,
        &[44, 44],
        12,
        0,
    ),
    w("legacy/test.bin", D, 2, &[], false, &[2, 3], 12, 0),
];

fn open(dir: &Path, want: &Want) -> SomFile {
    let config = ReadConfig {
        legacy_kind: want.hint,
        ..ReadConfig::default()
    };
    SomFile::open_with(dir.join(want.path), &config)
        .unwrap_or_else(|e| panic!("{}: {e}", want.path))
}

fn check(f: &SomFile, want: &Want) {
    let p = want.path;
    assert_eq!(f.kind(), want.kind, "{p}");
    assert_eq!(f.payload_offset(), want.header_bytes, "{p}");
    assert_eq!(f.comments().lines.len(), want.comment_lines, "{p}");
    let elem = match f.kind() {
        R => 5,
        _ => f.dtype().unwrap().size(),
    };
    match want.kind {
        S => {
            assert_eq!(f.neuron_count(), Some(want.count as usize), "{p}");
            assert_eq!(f.neuron_dims(), Some(want.item), "{p}");
            let per: usize = want.item.iter().product();
            assert_eq!(f.payload_len(), want.count as usize * per * elem, "{p}");
        }
        D => {
            assert_eq!(f.n_entries(), Some(want.count), "{p}");
            assert_eq!(f.entry_dims(), Some(want.item), "{p}");
            let per: usize = want.item.iter().product();
            assert_eq!(f.payload_len(), want.count as usize * per * elem, "{p}");
        }
        M | R => {
            assert_eq!(f.n_entries(), Some(want.count), "{p}");
            let n = f.neuron_count().unwrap();
            assert_eq!(f.payload_len(), want.count as usize * n * elem, "{p}");
        }
    }
    if want.kind != D {
        let m = f.map_layout().unwrap();
        assert_eq!(m.dims(), want.map, "{p}");
        assert_eq!(m.is_hexagonal(), want.hex, "{p}");
        if want.hex && f.version() == 2 {
            assert!(f.hex_inferred(), "{p}: PINK writes layout code 0");
            assert_eq!(f.som_layout_code(), Some(0), "{p}");
        }
    }
    // The whole payload is covered (no trailing bytes, except image_with_header).
    let trailing = f.bytes().len() - f.payload_offset() - f.payload_len();
    let expect_trailing = usize::from(p.ends_with("image_with_header.bin"));
    assert_eq!(trailing, expect_trailing, "{p}");
}

#[test]
fn every_v2_file_reads_with_sources_values() {
    let Some(dir) = corpus() else { return };
    for want in V2 {
        let f = open(&dir, want);
        check(&f, want);
        assert_eq!(f.version(), 2);
        assert_eq!(f.dtype(), (want.kind != R).then_some(DType::F32));
    }
}

#[test]
fn every_legacy_file_reads_with_sources_values() {
    let Some(dir) = corpus() else { return };
    for want in LEGACY {
        let f = open(&dir, want);
        check(&f, want);
        assert!(f.legacy_format().is_some(), "{}", want.path);
    }
}

#[test]
fn unambiguous_legacy_files_need_no_hint_and_ambiguous_ones_list_candidates() {
    let Some(dir) = corpus() else { return };
    for want in LEGACY {
        let r = SomFile::open(dir.join(want.path));
        match want.hint {
            None => check(&r.unwrap(), want),
            Some(_) => match r {
                Err(SomError::LegacyAmbiguous { candidates, .. }) => {
                    assert!(candidates.len() >= 2, "{}", want.path);
                    assert!(candidates.iter().any(|c| c.contains(want.kind.name())));
                }
                other => panic!("{}: expected ambiguity, got {other:?}", want.path),
            },
        }
    }
    // Legacy reading can be switched off.
    let off = ReadConfig {
        legacy: false,
        ..ReadConfig::default()
    };
    assert!(matches!(
        SomFile::open_with(dir.join("legacy/som_10x10.bin"), &off),
        Err(SomError::NotPink { .. })
    ));
}

#[test]
fn legacy_values() {
    let Some(dir) = corpus() else { return };
    let hint = ReadConfig {
        legacy_kind: Some(D),
        ..ReadConfig::default()
    };
    for p in ["legacy/image.bin", "legacy/image_with_header.bin"] {
        let f = SomFile::open_with(dir.join(p), &hint).unwrap();
        assert_eq!(
            f.entry(0).unwrap().to_vec::<f32>().unwrap(),
            vec![1.1, 2.1, 3.1, 4.1, 5.1, 6.1],
            "{p}"
        );
        assert_eq!(f.fields_value("n_images"), Some(1));
    }
    let f = SomFile::open(dir.join("legacy/image_with_header.bin"))
        .err()
        .unwrap();
    assert!(f.to_string().contains("v1 data"), "{f}");
    let f = SomFile::open(dir.join("legacy/som_10x10.bin")).unwrap();
    assert_eq!(f.fields_value("neuron_width"), Some(44));
    assert_eq!(f.fields_value("channels"), Some(1));
}

/// Lookup helper for integer header fields.
trait Fields {
    fn fields_value(&self, name: &str) -> Option<i64>;
}
impl Fields for SomFile {
    fn fields_value(&self, name: &str) -> Option<i64> {
        self.header_fields().iter().find_map(|(k, v)| match v {
            tensorfmt_core::FieldValue::Int(i) if k == name => Some(*i),
            tensorfmt_core::FieldValue::UInt(i) if k == name => Some(*i as i64),
            _ => None,
        })
    }
}

#[test]
fn transitional_format_and_invalid_files_are_rejected() {
    let Some(dir) = corpus() else { return };
    let e = SomFile::open(dir.join("legacy/som@5db20d9.bin")).unwrap_err();
    match &e {
        SomError::NotPink {
            offset,
            value,
            detail,
        } => {
            assert_eq!(*offset, 79);
            assert_eq!(*value, 5);
            assert!(detail.contains("END OF HEADER"), "{detail}");
        }
        other => panic!("unexpected {other:?}"),
    }
    for (p, expected) in [
        ("invalid/test_pink_header@d15bfd3.bin", 1_200_000u64),
        ("invalid/test_pink_header@615e2ab.bin", 480_000),
    ] {
        match SomFile::open(dir.join(p)).unwrap_err() {
            SomError::Truncated {
                offset,
                expected: e,
                actual,
                complete_entries,
                ..
            } => {
                assert_eq!(
                    (offset, e, actual, complete_entries),
                    (32, expected, 0, 0),
                    "{p}"
                );
            }
            other => panic!("{p}: unexpected {other:?}"),
        }
    }
    match SomFile::open(dir.join("invalid/test_pink_data.bin")).unwrap_err() {
        SomError::NotPink { offset, value, .. } => {
            assert_eq!(offset, 0);
            assert!(value.abs() > 1 << 24, "float bits read as an int: {value}");
        }
        other => panic!("unexpected {other:?}"),
    }
    // Every invalid file is also refused by the facade and by sniff.
    for entry in std::fs::read_dir(dir.join("invalid")).unwrap() {
        let p = entry.unwrap().path();
        let b = std::fs::read(&p).unwrap();
        assert!(!tensorfmt_som::sniff(&b, b.len() as u64), "{}", p.display());
        let e = tensorfmt_som::open_tensor_file(b.into(), &ReadOptions::default());
        assert!(e.is_err(), "{}", p.display());
    }
}

#[test]
fn expected_values() {
    let Some(dir) = corpus() else { return };
    let g = |p: &str| SomFile::open(dir.join("generated_v2").join(p)).unwrap();
    // Same payload with and without the comment block.
    let a = g("shapes16.bin");
    let b = g("shapes16_noheader.bin");
    assert_eq!(
        a.entries(0..12).unwrap().to_vec::<f32>().unwrap(),
        b.entries(0..12).unwrap().to_vec::<f32>().unwrap()
    );
    assert_eq!(
        a.comments().texts()[0],
        "synthetic bars and blobs, 12 images 16x16, float32"
    );
    assert!(a.comments().end_line);
    // Re-initialised SOM: comments copied verbatim, payload identical.
    let s = g("som_cart3x3.bin");
    let r = g("som_cart3x3_reinit.bin");
    assert_eq!(r.comments().lines.len(), 2);
    assert_eq!(
        s.som_tensor().unwrap().to_vec::<f32>().unwrap(),
        r.som_tensor().unwrap().to_vec::<f32>().unwrap()
    );
    // PINK's 4-byte loader shift is real data in the reinit file, not ours.
    let c = g("som_cart3x3_2ch.bin")
        .som_tensor()
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let cr = g("som_cart3x3_2ch_reinit.bin")
        .som_tensor()
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(cr[0].to_bits(), 23);
    assert_eq!(&cr[1..], &c[..c.len() - 1]);
    // Rotation/flip records.
    let tau = std::f32::consts::TAU;
    let rf = g("rotflip_cart3x3.bin");
    let (fl, an) = rf.rotflip_tensors(0..12).unwrap();
    let fl = fl.to_vec::<u8>().unwrap();
    assert!(fl.contains(&0) && fl.contains(&1) && fl.iter().all(|&x| x <= 1));
    for a in an.to_vec::<f32>().unwrap() {
        let k = a / (tau / 4.0);
        assert!(
            (k - k.round()).abs() < 1e-5 && (0.0..4.0).contains(&k.round()),
            "{a}"
        );
    }
    let nf = g("rotflip_cart4x2_noflip.bin")
        .rotflip_tensors(0..12)
        .unwrap()
        .0;
    assert!(nf.to_vec::<u8>().unwrap().iter().all(|&x| x == 0));
    let h5 = g("rotflip_hex5.bin");
    let mut seen = std::collections::BTreeSet::new();
    for e in 0..12 {
        for n in 0..19 {
            let r = h5.rotflip(e, n).unwrap();
            let k = r.transform_index(8);
            assert!(k < 16);
            assert!((r.angle - (k % 8) as f32 * tau / 8.0).abs() < 1e-5);
            seen.insert(k % 8);
        }
    }
    assert!(seen.len() > 1);
    // Mapping: distances are non-negative, best matches are in range; counts add up.
    for p in ["map_cart3x3.bin", "map_hex5.bin", "map_cart2x2x2.bin"] {
        let m = g(p);
        let d = m.distances(0..12).unwrap().to_vec::<f32>().unwrap();
        assert!(d.iter().all(|&x| x >= 0.0), "{p}");
        let counts = m.bmu_counts().unwrap();
        assert_eq!(counts.len(), m.neuron_count().unwrap());
        assert_eq!(counts.iter().sum::<u64>(), 12, "{p}");
    }
    let my = SomFile::open(dir.join("upstream_v2/my_map_file.map")).unwrap();
    let v = my.distances(0..5).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(v.len(), 500);
    // SOURCES.md says "all values equal": they are equal within each entry (every
    // neuron of the untrained SOM is identical), not across entries.
    for row in v.chunks(100) {
        assert!(row.iter().all(|&x| x == row[0]));
    }
    assert_eq!(my.best_matches().unwrap(), vec![Some(0); 5]);
    // Hexagonal axial coordinates match the spec table for d = 3.
    let h3 = g("som_hex3.bin");
    assert_eq!(
        h3.hex_axial().unwrap().to_vec::<i32>().unwrap(),
        vec![1, 0, 2, 0, 0, 1, 1, 1, 2, 1, 0, 2, 1, 2]
    );
    assert_eq!(
        h3.neuron_at(&[0, 1]).unwrap().to_vec::<f32>().unwrap(),
        h3.neuron(2).unwrap().to_vec::<f32>().unwrap()
    );
    // Non-square SOM: neuron (i0, i1) of dims [4, 2] is i0 * 2 + i1.
    let c42 = g("som_cart4x2.bin");
    assert_eq!(c42.som_tensor().unwrap().dims(), &[4, 2, 23, 23]);
    assert_eq!(
        c42.neuron_at(&[3, 0]).unwrap().to_vec::<f32>().unwrap(),
        c42.neuron(6).unwrap().to_vec::<f32>().unwrap()
    );
}

/// Re-serialises a file with the public writers.
fn reserialize(f: &SomFile) -> Vec<u8> {
    let config = WriteConfig {
        comments: f.comments().lines.clone(),
        data_type: f.data_type().unwrap_or(tensorfmt_som::DataType::F32),
        pink_cli_compat: f.hex_inferred(),
        end_line: f.comments().end_line,
    };
    let mut out = Vec::new();
    let n = f.n_entries().unwrap_or(0) as usize;
    match f.kind() {
        D => write_data(&mut out, &f.entries(0..n).unwrap(), &config).unwrap(),
        S => write_som(
            &mut out,
            f.map_layout().unwrap(),
            f.neuron_dims().unwrap(),
            &f.som_tensor().unwrap(),
            &config,
        )
        .unwrap(),
        M => write_mapping(
            &mut out,
            f.map_layout().unwrap(),
            &f.distances(0..n).unwrap(),
            &config,
        )
        .unwrap(),
        R => {
            let m: &MapLayout = f.map_layout().unwrap();
            let recs: Vec<_> = (0..n)
                .flat_map(|e| (0..m.neuron_count()).map(move |k| (e, k)))
                .map(|(e, k)| f.rotflip(e, k).unwrap())
                .collect();
            write_rotflip(&mut out, m, n, &recs, &config).unwrap()
        }
    }
    out
}

#[test]
fn every_v2_file_reserializes_byte_identically() {
    let Some(dir) = corpus() else { return };
    for want in V2 {
        let bytes = std::fs::read(dir.join(want.path)).unwrap();
        let f = SomFile::from_bytes(bytes.clone().into()).unwrap();
        assert!(reserialize(&f) == bytes, "{}", want.path);
    }
}

#[test]
fn facade_exports_issue_names_and_shapes() {
    let Some(dir) = corpus() else { return };
    let open = |p: &str, o: &ReadOptions| {
        let b = tensorfmt_core::io::map_file(dir.join(p)).unwrap();
        assert!(
            tensorfmt_som::sniff(&b[..b.len().min(4096)], b.len() as u64),
            "{p}"
        );
        tensorfmt_som::open_tensor_file(b, o).unwrap()
    };
    let d = ReadOptions::default();
    let names = |f: &dyn tensorfmt_core::TensorFile| {
        f.tensors()
            .into_iter()
            .map(|i| (i.name, i.dtype, i.shape.into_dims()))
            .collect::<Vec<_>>()
    };
    let f = open("generated_v2/shapes16_2ch.bin", &d);
    assert_eq!(
        names(&*f),
        vec![("data".to_string(), DType::F32, vec![12, 2, 16, 16])]
    );
    let f = open("generated_v2/som_cart2x2x2.bin", &d);
    assert_eq!(
        names(&*f),
        vec![("som".to_string(), DType::F32, vec![2, 2, 2, 23, 23])]
    );
    let f = open("generated_v2/som_hex5.bin", &d);
    assert_eq!(
        names(&*f),
        vec![
            ("som".to_string(), DType::F32, vec![19, 23, 23]),
            ("hex_axial".to_string(), DType::I32, vec![19, 2])
        ]
    );
    assert!(f.kind().contains("hexagonal 5x5, inferred"), "{}", f.kind());
    assert!(!f.warnings().is_empty());
    let f = open("generated_v2/map_cart4x2.bin", &d);
    assert_eq!(
        names(&*f),
        vec![("distances".to_string(), DType::F32, vec![12, 4, 2])]
    );
    let f = open("generated_v2/map_hex3.bin", &d);
    assert_eq!(
        names(&*f),
        vec![("distances".to_string(), DType::F32, vec![12, 7])]
    );
    let f = open("generated_v2/rotflip_hex5.bin", &d);
    assert_eq!(
        names(&*f),
        vec![
            ("flip".to_string(), DType::U8, vec![12, 19]),
            ("angle".to_string(), DType::F32, vec![12, 19])
        ]
    );
    f.validate().unwrap();
    // Entry range selection and chunk streaming.
    let o = ReadOptions {
        frames: Some((3, Some(5))),
        ..ReadOptions::default()
    };
    let f = open("upstream_v2/test_m_20_95_95.pink", &o);
    let t = f.read_tensor("data").unwrap();
    assert_eq!(t.dims(), &[2, 95, 95]);
    let full = open("upstream_v2/test_m_20_95_95.pink", &d);
    let all = full.read_tensor("data").unwrap().to_vec::<f32>().unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), all[3 * 9025..5 * 9025]);
    let pieces: Vec<_> = full
        .read_chunks("data")
        .unwrap()
        .map(|c| c.unwrap())
        .collect();
    let joined: Vec<f32> = pieces
        .iter()
        .flat_map(|p| p.to_vec::<f32>().unwrap())
        .collect();
    assert_eq!(joined, all);
    let past = ReadOptions {
        frames: Some((1 << 40, None)), // past the last entry: empty, as a Python slice
        ..ReadOptions::default()
    };
    let b = tensorfmt_core::io::map_file(dir.join("upstream_v2/test_m_20_95_95.pink")).unwrap();
    let f = tensorfmt_som::open_tensor_file(b, &past).unwrap();
    assert_eq!(f.tensors()[0].shape.dims()[0], 0);
    // Every readable file sniffs; the hinted legacy ones do not (ambiguous).
    for want in LEGACY.iter().filter(|w| w.hint.is_none()) {
        let b = std::fs::read(dir.join(want.path)).unwrap();
        assert!(
            tensorfmt_som::sniff(&b[..b.len().min(4096)], b.len() as u64),
            "{}",
            want.path
        );
    }
}

#[test]
fn npy_som_converts_to_the_same_payload() {
    let Some(dir) = corpus() else { return };
    let npy = std::fs::read(dir.join("related/som-shapes-cartesian2d-8x8.npy")).unwrap();
    let hlen = u16::from_le_bytes([npy[8], npy[9]]) as usize;
    let payload = &npy[10 + hlen..];
    let t = tensorfmt_core::Tensor::from_bytes(
        DType::F32,
        [8, 8, 90, 90],
        tensorfmt_core::Order::RowMajor,
        bytes::Bytes::copy_from_slice(payload),
    )
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("som.bin");
    let o = tensorfmt_core::WriteOptions {
        kind: Some("som".into()),
        ..Default::default()
    };
    tensorfmt_som::save_tensors(&p, &[("som".into(), t)], &o).unwrap();
    let written = std::fs::read(&p).unwrap();
    assert_eq!(&written[44..], payload);
    let f = SomFile::open(&p).unwrap();
    assert_eq!(f.map_layout().unwrap().dims(), vec![8, 8]);
    assert_eq!(f.neuron_dims(), Some(&[90, 90][..]));
}

#[test]
fn sniff_has_no_false_positives_on_other_corpora() {
    for fmt in ["pvp", "primitiv", "caffe"] {
        let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), fmt) else {
            continue;
        };
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let mut head = vec![0u8; 4096];
                let n =
                    std::io::Read::read(&mut std::fs::File::open(&p).unwrap(), &mut head).unwrap();
                let len = std::fs::metadata(&p).unwrap().len();
                assert!(!tensorfmt_som::sniff(&head[..n], len), "{}", p.display());
            }
        }
    }
}
