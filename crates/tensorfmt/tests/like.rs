//! `like=ORIGINAL` (issue 23 item 7): new tensors written into the structure of an
//! existing file of the same legacy format keep everything besides the tensors (net
//! name, layer types, blob-less layers, legacy shapes, solver iter, PVP headers, PINK
//! comments, primitiv optimizer state); tensors that do not fit are refused and
//! nothing is written.

use std::path::{Path, PathBuf};

use tensorfmt::{DType, Document, Format, Order, Tensor, TensorFile, WriteOptions};

/// Saves `tensors` as `out`'s format with `like=orig`.
fn save_like(
    out: &Path,
    orig: &Path,
    tensors: &[(String, Tensor)],
) -> tensorfmt::Result<tensorfmt::WriteReport> {
    let format = Format::from_path(out).expect("an extension");
    let like = WriteOptions {
        like: Some(orig.to_path_buf()),
        ..WriteOptions::default()
    };
    tensorfmt::save(out, format, tensors, &like)
}

/// The written file `out`, opened, after checking that it reads back every one of
/// `tensors` (`what` names the case in a failure).
fn reads_back(out: &Path, tensors: &[(String, Tensor)], what: &str) -> Document {
    let back = Document::open(out).unwrap();
    for (n, t) in tensors {
        assert_eq!(&back.read_tensor(n).unwrap(), t, "{what}: {n}");
    }
    back
}

fn fixture(dir: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(dir)
        .join(name)
}

/// Every f32 tensor doubled (same dtype and shape).
fn doubled(doc: &Document) -> Vec<(String, Tensor)> {
    doc.read_all()
        .unwrap()
        .into_iter()
        .map(|(n, t)| {
            if t.dtype() != DType::F32 {
                return (n, t);
            }
            let v: Vec<f32> = t.to_vec::<f32>().unwrap().iter().map(|x| x * 2.0).collect();
            (
                n,
                Tensor::from_vec(v, t.dims().to_vec(), Order::RowMajor).unwrap(),
            )
        })
        .collect()
}

#[test]
fn edited_tensors_keep_the_original_structure() {
    let files = [
        ("caffe", "v2_tiny.caffemodel"),
        ("caffe", "v1_legacy.caffemodel"),
        ("caffe", "v0_net.caffemodel"),
        ("caffe", "tiny.solverstate"),
        ("pvp", "dense_f32.pvp"),
        ("pvp", "kernel_f32.pvp"),
        ("som", "data_f32_2ch_comments.bin"),
        ("som", "som_hex3.bin"),
        ("primitiv", "model_nested_adam.data"),
        ("primitiv", "optimizer_adam.data"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (d, name) in files {
        let orig = fixture(d, name);
        let doc = Document::open(&orig).unwrap();
        let tensors = doubled(&doc);
        let out = dir.path().join(name);
        let _ = std::fs::remove_file(&out);
        save_like(&out, &orig, &tensors).unwrap_or_else(|e| panic!("{name}: {e}"));
        let back = reads_back(&out, &tensors, name);
        assert_eq!(back.kind(), doc.kind(), "{name}");
        // Headers of tensor-free fields are the original's. PVP weight frames' wMin/wMax
        // are too (kept from the original: informational for float weights, as the spec
        // says; byte weights, which they decode, are written anew), but they describe
        // the original's values, so weights files are compared on everything else.
        let keep = |h: Vec<(String, tensorfmt::FieldValue)>| -> Vec<_> {
            h.into_iter()
                .filter(|(k, _)| !matches!(k.as_str(), "wMin" | "wMax" | "wmin" | "wmax"))
                .collect()
        };
        assert_eq!(keep(back.header()), keep(doc.header()), "{name}");
    }
}

#[test]
fn tensors_that_do_not_fit_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let orig = fixture("caffe", "v2_tiny.caffemodel");
    let doc = Document::open(&orig).unwrap();
    let mut tensors = doc.read_all().unwrap();
    tensors[0].1 = Tensor::from_vec(vec![1f32; 3], [3], Order::RowMajor).unwrap();
    let out = dir.path().join("x.caffemodel");
    let err = save_like(&out, &orig, &tensors).unwrap_err().to_string();
    assert!(
        err.contains("like=") && err.contains("nothing was written"),
        "{err}"
    );
    assert!(!out.exists());
    // Another format than the original's is refused too.
    let err = save_like(&dir.path().join("x.pvp"), &orig, &tensors)
        .unwrap_err()
        .to_string();
    assert!(err.contains("the original is caffe"), "{err}");
}

/// No conversion writes over the file it reads (as the CLI refuses it): the same path,
/// a hard link and a symbolic link to the input are refused, with the input intact,
/// whatever the entry (here the library's; the CLI and Python go through the same).
#[test]
fn a_document_is_never_converted_onto_itself() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.npz");
    std::fs::copy(fixture("core", "mixed.npz"), &src).unwrap();
    let before = std::fs::read(&src).unwrap();
    let hard = dir.path().join("hard.npz");
    std::fs::hard_link(&src, &hard).unwrap();
    let soft = dir.path().join("soft.npz");
    std::os::unix::fs::symlink(&src, &soft).unwrap();
    let doc = Document::open(&src).unwrap();
    let first = [doc.names()[0].clone()];
    for out in [&src, &hard, &soft] {
        let e = doc
            .convert_to_with(out, Format::Npz, Some(&first), &WriteOptions::default())
            .unwrap_err();
        assert!(e.to_string().contains("never overwritten"), "{e}");
        let e = doc.convert_to(out, Format::Npz).unwrap_err();
        assert!(e.to_string().contains("never overwritten"), "{e}");
    }
    assert_eq!(std::fs::read(&src).unwrap(), before);
}

fn header_field(doc: &Document, key: &str) -> String {
    doc.header()
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| format!("{v:?}"))
        .unwrap_or_else(|| panic!("no header field {key}"))
}

/// `tensors` with `f` applied to tensor `name`'s values (as f32 or f64).
fn edited<T: tensorfmt::Element>(
    doc: &Document,
    name: &str,
    f: impl Fn(&mut Vec<T>),
) -> Vec<(String, Tensor)> {
    let mut tensors = doc.read_all().unwrap();
    let (_, t) = tensors.iter_mut().find(|(n, _)| n == name).unwrap();
    let mut v = t.to_vec::<T>().unwrap();
    f(&mut v);
    *t = Tensor::from_vec(v, t.dims().to_vec(), Order::RowMajor).unwrap();
    tensors
}

/// Audit: `like=` refused, writing nothing, any edit of a tensor the format does not
/// store verbatim (a sparse PVP file's entries (and its plain f64 frame times); byte
/// weights; legacy MPI blocks; unpacked Caffe blobs), while the carried route wrote
/// such edits anew with a warning. They are written anew from the tensors with the
/// original's layout (the same kind, datatype, geometry), and a warning says so.
#[test]
fn edits_not_stored_verbatim_are_written_anew_in_the_originals_layout() {
    let dir = tempfile::tempdir().unwrap();
    let first_nonzero = |v: &mut Vec<f32>| {
        let i = v.iter().position(|&x| x != 0.0).unwrap();
        v[i] *= 2.0;
    };
    // Another weight of the first frame: byte weights stay exact.
    let copy_second = |v: &mut Vec<f32>| {
        let j = v.iter().position(|&x| x != v[0]).unwrap();
        v[0] = v[j];
    };
    type Edit = Box<dyn Fn(&Document) -> Vec<(String, Tensor)>>;
    let cases: Vec<(&str, &str, &str, Edit)> = vec![
        (
            "pvp",
            "sparse_values_dt4.pvp",
            "values",
            Box::new(move |d| edited::<f32>(d, "values", first_nonzero)),
        ),
        (
            "pvp",
            "sparse_values_dt3.pvp",
            "values",
            Box::new(move |d| edited::<f32>(d, "values", first_nonzero)),
        ),
        (
            "pvp",
            "sparse_binary.pvp",
            "values",
            Box::new(|d| {
                edited::<f32>(d, "values", |v| {
                    let i = v.iter().position(|&x| x == 0.0).unwrap();
                    v[i] = 1.0;
                })
            }),
        ),
        (
            "pvp",
            "kernel_byte.pvp",
            "weights",
            Box::new(move |d| edited::<f32>(d, "weights", copy_second)),
        ),
        (
            "pvp",
            "nonshared_byte.pvp",
            "weights",
            Box::new(move |d| edited::<f32>(d, "weights", copy_second)),
        ),
    ];
    for (d, name, changed, edit) in cases {
        let orig = fixture(d, name);
        let doc = Document::open(&orig).unwrap();
        let tensors = edit(&doc);
        let out = dir.path().join(format!("{changed}_{name}"));
        let report =
            save_like(&out, &orig, &tensors).unwrap_or_else(|e| panic!("{name} {changed}: {e}"));
        let back = reads_back(&out, &tensors, name);
        assert_eq!(back.kind(), doc.kind(), "{name}");
        for key in ["filetype", "datatype", "nx", "ny", "nf"] {
            assert_eq!(
                header_field(&back, key),
                header_field(&doc, key),
                "{name}: {key}"
            );
        }
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.contains("written anew") && w.contains(&format!("{changed:?}"))),
            "{name}: {:?}",
            report.warnings
        );
        assert!(
            !report.warnings.iter().any(|w| w.contains("plain bytes")),
            "{name}: {:?}",
            report.warnings
        );
    }
}

/// A Caffe blob stored unpacked (`repeated float data` one tag per value) is written
/// anew, packed, in the original's structure, with its shape in the original's
/// convention: the fixture's `shape { dim: 3 }` was written as legacy (1, 1, 1, 3),
/// which pycaffe's `blobproto_to_array` reads as (1, 1, 1, 3), not (3,).
#[test]
fn an_edited_unpacked_caffe_blob_is_written_anew() {
    let dir = tempfile::tempdir().unwrap();
    let orig = fixture("caffe", "unpacked.binaryproto");
    let doc = Document::open(&orig).unwrap();
    let tensors = doubled(&doc);
    let out = dir.path().join("mean.binaryproto");
    let report = save_like(&out, &orig, &tensors).unwrap();
    let blob = |p: &Path| tensorfmt::caffe::read_blob_proto(std::fs::read(p).unwrap().into());
    let (before, after) = (blob(&orig).unwrap(), blob(&out).unwrap());
    assert!(!before.has_legacy());
    assert_eq!((after.has_legacy(), &after.shape), (false, &before.shape));
    let back = reads_back(&out, &tensors, "unpacked mean");
    assert_eq!(back.kind(), doc.kind());
    assert_eq!(back.layout_settings(), doc.layout_settings());
    assert!(
        report.warnings.iter().any(|w| w.contains("written anew")),
        "{:?}",
        report.warnings
    );
}

/// A binary sparse file whose edited values are no longer all 0 or 1 becomes a sparse
/// values file, and the warning says the kind changed (it was a silent change, or a
/// binary file that turned 0.5 into 1).
#[test]
fn a_binary_sparse_file_with_other_values_becomes_a_values_file_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let orig = fixture("pvp", "sparse_binary.pvp");
    let doc = Document::open(&orig).unwrap();
    let tensors = edited::<f32>(&doc, "values", |v| {
        let i = v.iter().position(|&x| x != 0.0).unwrap();
        v[i] = 0.5;
    });
    let out = dir.path().join("half.pvp");
    let report = save_like(&out, &orig, &tensors).unwrap();
    let back = Document::open(&out).unwrap();
    assert_eq!(back.kind(), "sparse values activity");
    assert_eq!(
        back.read_tensor("values").unwrap(),
        tensors.iter().find(|(n, _)| n == "values").unwrap().1
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("sparse binary") && w.contains("sparse values")),
        "{:?}",
        report.warnings
    );
}

/// Names, dtypes and shapes still decide: a sparse file's values of another shape are
/// refused and nothing is written, as before.
#[test]
fn a_sparse_edit_of_another_shape_is_still_refused() {
    let dir = tempfile::tempdir().unwrap();
    let orig = fixture("pvp", "sparse_values_dt4.pvp");
    let mut tensors = Document::open(&orig).unwrap().read_all().unwrap();
    let (_, t) = tensors.iter_mut().find(|(n, _)| n == "values").unwrap();
    let v = t.to_vec::<f32>().unwrap();
    let n = v.len();
    *t = Tensor::from_vec(v, [n], Order::RowMajor).unwrap();
    let out = dir.path().join("flat.pvp");
    let err = save_like(&out, &orig, &tensors).unwrap_err().to_string();
    assert!(err.contains("nothing was written"), "{err}");
    assert!(!out.exists());
}

/// The corpus' legacy MPI dense file (process blocks) edited: written anew as a dense
/// file of the same frames, with a warning (its blocks are not spliced).
#[test]
fn an_edited_legacy_mpi_file_is_written_anew() {
    let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "pvp") else {
        return;
    };
    let orig = dir.join("legacy/GPUSystemTest/a6.pvp");
    let doc = Document::open(&orig).unwrap();
    let tensors = edited::<f32>(&doc, "values", |v| {
        let last = v.len() - 1;
        v[last] += 1.0;
    });
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("a6.pvp");
    let report = save_like(&out, &orig, &tensors).unwrap();
    reads_back(&out, &tensors, "a6.pvp");
    assert!(
        report.warnings.iter().any(|w| w.contains("written anew")),
        "{:?}",
        report.warnings
    );
}

/// A sparse file's frame times are plain f64 at each frame's start: an edit of them
/// alone is spliced in place (it was refused, saying they were not plain bytes), the
/// rest of the file, header included, byte for byte the original's.
#[test]
fn sparse_frame_times_are_spliced_in_place() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "sparse_values_dt4.pvp",
        "sparse_values_dt3.pvp",
        "sparse_binary.pvp",
    ] {
        let orig = fixture("pvp", name);
        let doc = Document::open(&orig).unwrap();
        let tensors = edited::<f64>(&doc, "time", |v| v.iter_mut().for_each(|t| *t += 0.5));
        let out = dir.path().join(name);
        let report = save_like(&out, &orig, &tensors).unwrap();
        assert!(report.warnings.is_empty(), "{name}: {:?}", report.warnings);
        let (a, b) = (std::fs::read(&orig).unwrap(), std::fs::read(&out).unwrap());
        assert_eq!(a.len(), b.len(), "{name}");
        let differ = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        assert!(
            differ > 0 && differ <= 8 * doc.read_tensor("time").unwrap().dims()[0],
            "{name}"
        );
        let back = reads_back(&out, &tensors, name);
        assert_eq!(back.header(), doc.header(), "{name}");
    }
}
