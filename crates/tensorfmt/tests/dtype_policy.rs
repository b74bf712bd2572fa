//! What `--dtype` (`WriteOptions::dtype`, Python's `dtype=`) does to a conversion: it is
//! the type of the values. A sparse tensor's layout (the CSR `indptr`, `indices`,
//! `shape`, `frame_shape` and the frames' `time`) keeps its types in every output, so
//! the file is still the same sparse tensor; and every value the type asked does not
//! keep is counted in a warning (bool included: anything but 0 and 1).

use std::path::{Path, PathBuf};

use tensorfmt::{open, DType, Document, Format, Order, ReadOptions, Tensor, WriteOptions};

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel)
}

fn with_dtype(d: DType) -> WriteOptions {
    WriteOptions {
        dtype: Some(d),
        ..WriteOptions::default()
    }
}

/// The names, dtypes and values (as f64) of every tensor of `path`.
fn listing(path: &Path) -> Vec<(String, DType, Vec<f64>)> {
    let f = open(path, &ReadOptions::default()).unwrap();
    let mut v: Vec<_> = f
        .tensors()
        .into_iter()
        .map(|i| {
            let t = f.read_tensor(&i.name).unwrap().cast(DType::F64).unwrap();
            (i.name, i.dtype, t.to_vec::<f64>().unwrap())
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn get<'a>(l: &'a [(String, DType, Vec<f64>)], name: &str) -> &'a (String, DType, Vec<f64>) {
    l.iter()
        .find(|(n, _, _)| n == name)
        .unwrap_or_else(|| panic!("no {name} in {l:?}"))
}

/// F2 / F7: a sparse PVP to npz and safetensors with a dtype: only `data` takes it; the
/// index arrays, shapes and times are those of the conversion without one, and the file
/// converts back to a PVP of the same geometry.
#[test]
fn dtype_on_a_sparse_pvp_is_the_values_type_only() {
    let dir = tempfile::tempdir().unwrap();
    for src in ["pvp/sparse_values_dt4.pvp", "pvp/sparse_binary.pvp"] {
        let src = testdata(src);
        let doc = Document::open(&src).unwrap();
        let want_shape = doc.entry("values").unwrap().shape().dims().to_vec();
        for (ext, format) in [("npz", Format::Npz), ("safetensors", Format::Safetensors)] {
            let plain = dir.path().join(format!("plain.{ext}"));
            let _ = std::fs::remove_file(&plain);
            doc.convert_to(&plain, format).unwrap();
            let plain = listing(&plain);
            for d in [DType::I8, DType::U8, DType::Bool, DType::F16, DType::F64] {
                let out = dir.path().join(format!("{d}.{ext}"));
                let _ = std::fs::remove_file(&out);
                let written = doc.convert_to_with(&out, format, None, &with_dtype(d));
                if format == Format::Npz && d == DType::F16 {
                    // scipy.sparse has no float16: load_npz would refuse the file.
                    let e = written.unwrap_err().to_string();
                    assert!(e.contains("scipy.sparse has no f16"), "{e}");
                    assert!(!out.exists());
                    continue;
                }
                written.unwrap();
                let got = listing(&out);
                for name in ["indptr", "indices", "shape", "frame_shape", "time"] {
                    assert_eq!(get(&got, name), get(&plain, name), "{src:?} {ext} {d}");
                }
                assert_eq!(get(&got, "data").1, d, "{src:?} {ext} {d}");
                let back = dir.path().join(format!("{d}_{ext}.pvp"));
                let _ = std::fs::remove_file(&back);
                Document::open(&out)
                    .unwrap()
                    .convert_to(&back, Format::Pvp)
                    .unwrap();
                let back = Document::open(&back).unwrap();
                assert_eq!(
                    back.entry("values").unwrap().shape().dims(),
                    &want_shape[..],
                    "{src:?} {ext} {d}"
                );
            }
        }
    }
}

/// F7: what the values' type does not keep is counted, in the sparse layout as
/// anywhere (sparse_values_dt4 holds 0.5, -2, 3.25 and 0: -2 saturates to 0 in u8).
#[test]
fn a_sparse_layouts_values_are_counted_when_the_type_loses_them() {
    let dir = tempfile::tempdir().unwrap();
    let doc = Document::open(testdata("pvp/sparse_values_dt4.pvp")).unwrap();
    for ext in ["npz", "safetensors"] {
        let format = if ext == "npz" {
            Format::Npz
        } else {
            Format::Safetensors
        };
        let out = dir.path().join(format!("u8.{ext}"));
        let r = doc
            .convert_to_with(&out, format, None, &with_dtype(DType::U8))
            .unwrap();
        assert!(
            r.warnings
                .iter()
                .any(|w| w.starts_with("data: 1 value(s) of f32 stored as u8")),
            "{ext}: {:?}",
            r.warnings
        );
        assert_eq!(get(&listing(&out), "data").2, [0.0, 0.0, 3.0, 0.0], "{ext}");
    }
}

/// F2 for tensors in memory: a CSR group (what Python's `save(scipy_matrix, shape=...)`
/// hands over) keeps its index arrays' types whatever the dtype, in every output that
/// stores them as they are.
#[test]
fn a_csr_group_in_memory_keeps_its_index_types() {
    let dir = tempfile::tempdir().unwrap();
    let indptr = Tensor::from_vec(vec![0i64, 2, 3, 3], [4], Order::RowMajor).unwrap();
    let indices = Tensor::from_vec(vec![1u32, 200, 7], [3], Order::RowMajor).unwrap();
    let data = Tensor::from_vec(vec![0.5f32, 2.0, 1.0], [3], Order::RowMajor).unwrap();
    let shape = Tensor::from_vec(vec![3i64, 300], [2], Order::RowMajor).unwrap();
    let tensors = [
        ("indptr".to_string(), indptr.clone()),
        ("indices".to_string(), indices.clone()),
        ("data".to_string(), data),
        ("shape".to_string(), shape.clone()),
    ];
    for (ext, format) in [
        ("npz", Format::Npz),
        ("safetensors", Format::Safetensors),
        ("onnx", Format::Onnx),
    ] {
        let out = dir.path().join(format!("m.{ext}"));
        let r = tensorfmt::save(&out, format, &tensors, &with_dtype(DType::I8)).unwrap();
        let f = open(&out, &ReadOptions::default()).unwrap();
        assert_eq!(f.read_tensor("indptr").unwrap(), indptr, "{ext}");
        assert_eq!(f.read_tensor("indices").unwrap(), indices, "{ext}");
        assert_eq!(f.read_tensor("shape").unwrap(), shape, "{ext}");
        let d = f.read_tensor("data").unwrap();
        assert_eq!(d.dtype(), DType::I8, "{ext}");
        assert_eq!(d.to_vec::<i8>().unwrap(), [0, 2, 1], "{ext}");
        // Nothing about the index arrays wrapping; 0.5 -> 0 is rounding, not counted.
        assert!(r.warnings.is_empty(), "{ext}: {:?}", r.warnings);
    }
}

/// F6: a bool cast changes every value but 0 and 1 (NaN included); they are counted,
/// from integers and floats, in every target.
#[test]
fn a_bool_cast_counts_what_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let ints = Tensor::from_vec(vec![0i32, 1, 8, -1, 99], [5], Order::RowMajor).unwrap();
    let floats =
        Tensor::from_vec(vec![0f32, 1.0, 0.5, f32::NAN, -0.0], [5], Order::RowMajor).unwrap();
    let tensors = [("i".to_string(), ints), ("f".to_string(), floats)];
    let src = dir.path().join("src.npz");
    tensorfmt::save(&src, Format::Npz, &tensors, &WriteOptions::default()).unwrap();
    for (ext, format) in [
        ("npz", Format::Npz),
        ("safetensors", Format::Safetensors),
        ("onnx", Format::Onnx),
    ] {
        let out = dir.path().join(format!("b.{ext}"));
        let r = tensorfmt::save(&out, format, &tensors, &with_dtype(DType::Bool)).unwrap();
        says_both(&r.warnings, ext);
        // And through a conversion (the streamed path) too.
        let again = dir.path().join(format!("again.{ext}"));
        let r = Document::open(&src)
            .unwrap()
            .convert_to_with(&again, format, None, &with_dtype(DType::Bool))
            .unwrap();
        says_both(&r.warnings, ext);
        assert_eq!(
            listing(&again)
                .iter()
                .map(|(_, _, v)| v.clone())
                .collect::<Vec<_>>(),
            [vec![0.0, 1.0, 1.0, 1.0, 0.0], vec![0.0, 1.0, 1.0, 1.0, 1.0]],
            "{ext}"
        );
    }
}

/// The bool-cast warnings of the test above, for both tensors.
fn says_both(warnings: &[String], ext: &str) {
    for p in [
        "i: 3 value(s) of i32 stored as bool",
        "f: 2 value(s) of f32 stored as bool",
    ] {
        assert!(
            warnings.iter().any(|w| w.starts_with(p)),
            "{ext}: {warnings:?}"
        );
    }
}

/// F10: a sparse PVP read as CSR arrays (`--sparse`, Python `sparse=True`) to ONNX
/// keeps the frame shape, and converts back to a PVP of the source's geometry.
#[test]
fn csr_arrays_to_onnx_keep_the_frame_shape() {
    let dir = tempfile::tempdir().unwrap();
    let src = testdata("pvp/sparse_values_dt4.pvp");
    let csr = tensorfmt::document::open(
        &src,
        &ReadOptions {
            sparse_csr: true,
            ..ReadOptions::default()
        },
    )
    .unwrap();
    let out = dir.path().join("s.onnx");
    csr.convert_to(&out, Format::Onnx).unwrap();
    let f = open(&out, &ReadOptions::default()).unwrap();
    assert_eq!(
        f.read_tensor("frame_shape")
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        [2, 3, 2]
    );
    let back = dir.path().join("back.pvp");
    Document::open(&out)
        .unwrap()
        .convert_to(&back, Format::Pvp)
        .unwrap();
    let want = Document::open(&src).unwrap().read_all().unwrap();
    let got = Document::open(&back).unwrap().read_all().unwrap();
    assert_eq!(got, want);
}

/// bfloat16 in npy / npz is numpy's raw `|V2`: said, with the way to view it; not said
/// of safetensors, which has the type.
#[test]
fn bf16_for_numpy_says_how_to_view_it() {
    let dir = tempfile::tempdir().unwrap();
    let doc = Document::open(testdata("pvp/dense_f32.pvp")).unwrap();
    for (ext, format, said) in [
        ("npz", Format::Npz, true),
        ("safetensors", Format::Safetensors, false),
    ] {
        let out = dir.path().join(format!("b.{ext}"));
        let r = doc
            .convert_to_with(&out, format, None, &with_dtype(DType::BF16))
            .unwrap();
        let note = r.warnings.iter().any(|w| w.contains("ml_dtypes"));
        assert_eq!(note, said, "{ext}: {:?}", r.warnings);
    }
    let t = Tensor::from_vec(vec![1f32, 2.0], [2], Order::RowMajor).unwrap();
    let out = dir.path().join("one.npy");
    let r = tensorfmt::save(
        &out,
        Format::Npy,
        &[("t".into(), t)],
        &with_dtype(DType::BF16),
    )
    .unwrap();
    assert!(
        r.warnings.iter().any(|w| w.contains("|V2")),
        "{:?}",
        r.warnings
    );
}

/// A whole legacy file retyped to npz / safetensors carries no skeleton; the
/// conversion says that converting back will not give the original (a primitiv
/// Parameter came back as a Model, without a word).
#[test]
fn a_retyped_legacy_file_says_it_carries_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let src = testdata("primitiv/parameter_2x3_stats.data");
    let out = dir.path().join("p.npz");
    let r = Document::open(&src)
        .unwrap()
        .convert_to_with(&out, Format::Npz, None, &with_dtype(DType::F64))
        .unwrap();
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("not kept in the metadata") && w.contains("Model")),
        "{:?}",
        r.warnings
    );
    // Without a dtype the skeleton travels, and nothing is said.
    let out = dir.path().join("q.npz");
    let r = Document::open(&src)
        .unwrap()
        .convert_to(&out, Format::Npz)
        .unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

/// `--dtype u8` on PVP weights writes OpenPV's byte weights: each frame quantised to
/// 256 levels between its min and max, never saturated. The warning counts the values
/// the levels do not hold (it said they were saturated, of weights within range); a
/// file already of byte weights changes nothing and says nothing.
#[test]
fn byte_weights_count_what_quantising_changes() {
    let dir = tempfile::tempdir().unwrap();
    for (src, want) in [("pvp/kernel_f32.pvp", true), ("pvp/kernel_byte.pvp", false)] {
        let path = testdata(src);
        let out = dir.path().join("w.pvp");
        let r = Document::open(&path)
            .unwrap()
            .convert_to_with(&out, Format::Pvp, None, &with_dtype(DType::U8))
            .unwrap();
        let (a, b) = (listing(&path), listing(&out));
        let (x, y) = (&get(&a, "weights").2, &get(&b, "weights").2);
        let changed = x.iter().zip(y).filter(|(p, q)| p != q).count();
        assert_eq!(changed > 0, want, "{src}");
        assert!(
            !r.warnings.iter().any(|w| w.contains("saturated")),
            "{src}: {:?}",
            r.warnings
        );
        let said: Vec<_> = r
            .warnings
            .iter()
            .filter(|w| w.contains("byte weights"))
            .collect();
        if want {
            assert_eq!(said.len(), 1, "{src}: {:?}", r.warnings);
            assert!(
                said[0].starts_with(&format!("weights: {changed} value(s)")),
                "{}",
                said[0]
            );
        } else {
            assert!(said.is_empty(), "{src}: {said:?}");
        }
    }
}
