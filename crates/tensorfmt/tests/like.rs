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
        let back = Document::open(&out).unwrap();
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
        for (n, t) in &tensors {
            assert_eq!(&back.read_tensor(n).unwrap(), t, "{name}: {n}");
        }
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
