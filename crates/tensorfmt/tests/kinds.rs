//! Every file's kind has an identifier (`TensorFile::kind_id`), one of its format's
//! `Format::kinds`, and every kind a format writes is one it reads back as itself:
//! Python's `Document.kind` shows it and `to=` takes it, without parsing the prose of
//! `TensorFile::kind`.

mod common;

use tensorfmt::{Document, Format};

#[test]
fn every_file_kind_is_one_of_its_formats_kinds() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/core");
    let mut files = common::legacy_files();
    files.extend(std::fs::read_dir(root).unwrap().map(|e| e.unwrap().path()));
    let mut seen = std::collections::HashSet::new();
    for p in files {
        let Ok(doc) = Document::open(&p) else {
            continue; // a hostile or truncated corpus file
        };
        let id = doc.kind_id();
        assert!(
            doc.file_format().kinds().contains(&id),
            "{}: kind {id:?} ({}) is not one of {:?}",
            p.display(),
            doc.kind(),
            doc.file_format().kinds()
        );
        seen.insert((doc.file_format(), id));
    }
    for f in [Format::Pvp, Format::Som, Format::Primitiv, Format::Caffe] {
        for w in f.write_kinds() {
            assert!(f.kinds().contains(w), "{f}: {w}");
        }
        assert!(seen.iter().any(|(g, _)| *g == f), "no {f} file seen");
    }
}

/// PINK's own names (`.pink` data, `.som` maps, `.map` mappings, as PINK's examples and
/// the corpus' real files have them) are PINK files by extension too, each implying its
/// kind; every real one round-trips through safetensors back to its own name.
#[test]
fn pinks_own_extensions_name_their_kinds() {
    use tensorfmt::{Target, WriteOptions};
    for (name, kind) in [
        ("a.pink", "som-data"),
        ("a.som", "som"),
        ("a.map", "som-mapping"),
    ] {
        let t = Target::from_path(name.as_ref()).unwrap();
        assert_eq!(
            (t.format, t.kind.as_deref()),
            (Format::Som, Some(kind)),
            "{name}"
        );
    }
    assert_eq!(Target::from_path("a.bin".as_ref()).unwrap().kind, None);
    let Some(dir) = tensorfmt::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "som") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut seen = 0;
    for e in std::fs::read_dir(dir.join("upstream_v2")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x == "bin") {
            continue;
        }
        assert_eq!(
            tensorfmt::detect(&p).unwrap(),
            Format::Som,
            "{}",
            p.display()
        );
        let doc = Document::open(&p).unwrap();
        let st = tmp.path().join("x.safetensors");
        doc.convert_to(&st, Format::Safetensors).unwrap();
        let back = tmp.path().join(p.file_name().unwrap());
        let target = Target::from_path(&back).unwrap();
        Document::open(&st)
            .unwrap()
            .convert_to_with(&back, target, None, &WriteOptions::default())
            .unwrap();
        assert_eq!(
            std::fs::read(&back).unwrap(),
            std::fs::read(&p).unwrap(),
            "{}",
            p.display()
        );
        seen += 1;
    }
    assert!(seen >= 7, "{seen}");
}

/// A `--set` key the writer does not read is refused, naming the ones it does (a typo
/// such as `compres=deflate` or `external-data=true` was silently ignored); safetensors
/// keeps any key as metadata.
#[test]
fn settings_a_writer_does_not_read_are_refused() {
    use tensorfmt::settings::SettingValue;
    use tensorfmt::{Order, Tensor, WriteOptions};
    let dir = tempfile::tempdir().unwrap();
    let t = Tensor::from_vec(vec![1f32; 6], [2, 3], Order::RowMajor).unwrap();
    let tensors = [("values".to_string(), t)];
    for (f, name) in [
        (Format::Npy, "a.npy"),
        (Format::Npz, "a.npz"),
        (Format::Pvp, "a.pvp"),
        (Format::Som, "a.bin"),
        (Format::Primitiv, "a.data"),
        (Format::Caffe, "a.caffemodel"),
        (Format::Onnx, "a.onnx"),
    ] {
        let mut o = WriteOptions::default();
        o.set("compres", "deflate").unwrap();
        let p = dir.path().join(name);
        let e = tensorfmt::save(&p, f, &tensors, &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"compres\" means nothing"), "{f}: {e}");
        assert!(!p.exists());
        for known in f.settings().unwrap() {
            let key = known.key.replace('.', ".x");
            let value = match known.value {
                SettingValue::Choice(words) => words[0],
                SettingValue::Counts => "2,3",
                _ => "1",
            };
            let mut o = WriteOptions::default();
            o.set(&key, value).unwrap();
            if let Err(e) = tensorfmt::save(&p, f, &tensors, &o) {
                // Listed: never "unknown"; at most not for this kind, or a bad value.
                assert!(
                    !e.to_string().contains("writer (its settings"),
                    "{f} {key}: {e}"
                );
            }
        }
    }
    let mut o = WriteOptions::default();
    o.set("anything", "kept").unwrap();
    tensorfmt::save(
        &dir.path().join("a.safetensors"),
        Format::Safetensors,
        &tensors,
        &o,
    )
    .unwrap();
}

/// An npz member that is not a tensor (a numpy string, as the fixtures made by a
/// Caffe script carry the Caffe commit) is left out with a warning, and the archive's
/// arrays read (the whole archive was refused); a conversion says so too.
#[test]
fn npz_members_that_are_not_tensors_are_left_out_with_a_warning() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/lower/lstm_cont/io.npz");
    let doc = Document::open(&p).unwrap();
    assert_eq!(doc.names().len(), 6);
    let w = doc.warnings();
    assert!(
        w.iter()
            .any(|w| w.contains("caffe_commit.npy") && w.contains("left out")),
        "{w:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let r = doc
        .convert_to(dir.path().join("o.safetensors"), Format::Safetensors)
        .unwrap();
    assert!(
        r.warnings.iter().any(|w| w.contains("left out")),
        "{:?}",
        r.warnings
    );
}

/// A cast that changes values says so: integers past float32's exact range into a
/// caffemodel, floats saturated by an integer `--dtype` (NaN, inf, out of range); a
/// cast that keeps every value says nothing.
#[test]
fn casts_that_change_values_are_warned_about() {
    use tensorfmt::{DType, Order, Tensor, WriteOptions};
    let dir = tempfile::tempdir().unwrap();
    let big = Tensor::from_vec(vec![(1i64 << 40) + 1, -5], [2], Order::RowMajor).unwrap();
    let r = tensorfmt::save(
        &dir.path().join("a.caffemodel"),
        Format::Caffe,
        &[("b".into(), big)],
        &WriteOptions::default(),
    )
    .unwrap();
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("1 value(s) of i64 stored as f32")),
        "{:?}",
        r.warnings
    );
    let fl = Tensor::from_vec(
        vec![0.5f64, 1e6, -3.7, f64::NAN, f64::INFINITY],
        [5],
        Order::RowMajor,
    )
    .unwrap();
    let i8_ = WriteOptions {
        dtype: Some(DType::I8),
        ..Default::default()
    };
    let src = dir.path().join("f.npy");
    tensorfmt::save(
        &src,
        Format::Npy,
        &[("f".into(), fl)],
        &WriteOptions::default(),
    )
    .unwrap();
    let doc = Document::open(&src).unwrap();
    let r = doc
        .convert_to_with(dir.path().join("o.npy"), Format::Npy, None, &i8_)
        .unwrap();
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("3 value(s) of f64 stored as i8")),
        "{:?}",
        r.warnings
    );
    let small = Tensor::from_vec(vec![1.5f32, -2.0], [2], Order::RowMajor).unwrap();
    let r = tensorfmt::save(
        &dir.path().join("s.npz"),
        Format::Npz,
        &[("s".into(), small)],
        &i8_,
    )
    .unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

/// A carried original is restored only as the kind the output asks for: `y.som` of a
/// carried PINK data file, or `--to blobprotovector` of a caffemodel, writes that kind
/// from the tensors (and says the original was not restored), not the original.
#[test]
fn a_carried_original_is_restored_only_as_the_kind_asked() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let dir = tempfile::tempdir().unwrap();
    let npz = dir.path().join("x.npz");
    Document::open(root.join("som/data_f32_2x3.bin"))
        .unwrap()
        .convert_to(&npz, Format::Npz)
        .unwrap();
    let carried = Document::open(&npz).unwrap();
    let same = dir.path().join("back.bin");
    carried.convert_to(&same, Format::Som).unwrap();
    assert_eq!(
        std::fs::read(&same).unwrap(),
        std::fs::read(root.join("som/data_f32_2x3.bin")).unwrap()
    );
    let som = dir.path().join("out.som");
    let target = tensorfmt::Target::from_path(&som).unwrap();
    let r = carried
        .convert_to_with(&som, target, None, &Default::default())
        .unwrap();
    assert!(
        r.warnings.iter().any(|w| w.contains("not restored")),
        "{:?}",
        r.warnings
    );
    assert_eq!(Document::open(&som).unwrap().kind_id(), "som");
}

/// A frame range is read as a Python slice (empty past the end); converting a weights
/// file to no frames, which no reader opens, fails and leaves no file.
#[test]
fn a_conversion_of_no_weight_frames_leaves_nothing() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let o = tensorfmt::ReadOptions {
        frames: Some((5, Some(9))),
        ..Default::default()
    };
    let doc = Document::open_with(root.join("pvp/kernel_f32.pvp"), &o).unwrap();
    assert_eq!(doc.tensors()[0].shape.dims()[0], 0);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("none.pvp");
    assert!(doc.convert_to(&out, Format::Pvp).is_err());
    assert!(!out.exists());
}

/// A legacy PINK file that fits several readings was refused even where its name says
/// which (PINK's examples name mappings `.map`, SOMs `.som`, data `.pink`): the name now
/// settles it, with a warning; `--kind` still comes first, and a `.bin` stays ambiguous.
#[test]
fn a_legacy_pink_files_name_settles_its_kind() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    for v in [4000i32, 5, 5, 5] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    bytes.extend(std::iter::repeat_n(0u8, 4000 * 125 * 4));
    let at = |name: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, &bytes).unwrap();
        p
    };
    let e = Document::open(at("x.bin")).unwrap_err().to_string();
    assert!(e.contains("ambiguous"), "{e}");
    let doc = Document::open(at("x.map")).unwrap();
    assert_eq!(doc.file().kind_id(), "som-mapping");
    assert!(
        doc.file()
            .warnings()
            .iter()
            .any(|w| w.contains("its name suggests")),
        "{:?}",
        doc.file().warnings()
    );
    assert_eq!(
        Document::open(at("x.pink")).unwrap().file().kind_id(),
        "som-data"
    );
    let asked = tensorfmt::ReadOptions {
        kind: Some("data".into()),
        ..Default::default()
    };
    let doc = tensorfmt::open(&at("y.map"), &asked).unwrap();
    assert_eq!(doc.file().kind_id(), "som-data");
}
