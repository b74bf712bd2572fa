//! Round trips through the CLI for every writable format: a fixture is exported to an
//! interchange format (safetensors or npz), imported back into its own format, and
//! `tensorfmt diff` must exit 0 for the export and for the re-import. This is how a
//! user checks a conversion.

mod common;

use std::path::Path;

use common::{testdata, tf};

/// `orig` -> `via` extension -> back to `back_name` (with extra convert args), diff 0.
fn round_trip(orig: &Path, via: &str, back_name: &str, back_args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let stem = orig.file_stem().unwrap().to_str().unwrap();
    let exported = dir.path().join(format!("{stem}.{via}"));
    let back = dir.path().join(back_name);
    let (code, out, err) = tf(args!["convert", orig, exported]);
    assert_eq!(code, 0, "export {}: {err}", orig.display());
    assert!(out.contains("wrote "), "{out}");
    let (code, out, err) = tf(args!["diff", orig, exported]);
    assert_eq!(
        code,
        0,
        "diff after export of {}: {out}{err}",
        orig.display()
    );
    let mut args = args!["convert", exported, back];
    args.extend(back_args.iter().map(std::ffi::OsString::from));
    let (code, _, err) = tf(&args);
    assert_eq!(code, 0, "import {}: {err}", back.display());
    // --tensors-only: the tensors come back exactly; the kind and header fields of the
    // legacy format do not all survive a trip through safetensors yet (plain `diff`
    // reports them, checked by `header_losses_are_reported`).
    let (code, out, err) = tf(args!["diff", "--tensors-only", orig, back]);
    assert_eq!(
        code,
        0,
        "diff after import of {}: {out}{err}",
        back.display()
    );
    assert!(out.starts_with("equal: "), "{out}");
    // The reimported file also passes validation (a PINK file of another type than f32
    // is what PINK 2.5 refuses, said so, and what tensorfmt reads) and diffs equal in
    // JSON.
    let (code, out, _) = tf(args!["validate", back]);
    if code != 0 {
        assert!(out.contains("PINK 2.5 reads"), "{out}");
        assert_eq!(tf(args!["validate", "--lenient", "-q", back]).0, 0);
    }
    let (code, out, _) = tf(args!["diff", "--json", "--tensors-only", back, orig]);
    assert_eq!(code, 0);
    assert_eq!(common::json(&out)["equal"], true);
}

#[test]
fn npy() {
    for f in [
        "f32_2x3.npy",
        "f64_be_3.npy",
        "i16_fortran_2x3.npy",
        "bf16_4.npy",
    ] {
        round_trip(&testdata("core", f), "npz", "back.npy", &[]);
        round_trip(&testdata("core", f), "safetensors", "back.npy", &[]);
    }
}

#[test]
fn npz() {
    round_trip(
        &testdata("core", "mixed.npz"),
        "safetensors",
        "back.npz",
        &[],
    );
}

#[test]
fn safetensors() {
    round_trip(
        &testdata("core", "model.safetensors"),
        "npz",
        "back.safetensors",
        &[],
    );
}

#[test]
fn pvp() {
    for (f, kind) in [
        ("dense_f32.pvp", "pvp:dense"),
        ("kernel_f32.pvp", "pvp:weights"),
        ("kernel_byte.pvp", "pvp:weights"),
        ("sparse_values_dt4.pvp", "pvp:sparse"),
        ("sparse_binary.pvp", "pvp:sparse"),
    ] {
        round_trip(&testdata("pvp", f), "safetensors", "back.pvp", &[]);
        round_trip(&testdata("pvp", f), "npz", "back.pvp", &["--to", kind]);
    }
}

#[test]
fn som_data_and_som() {
    // Data files (kind som-data) and trained SOMs (kind som), cartesian and hexagonal.
    // A SOM of rank-2 neurons on a 2-d map exports as one rank-5 tensor: which axes are
    // the map is not recorded, so importing it back needs `--set som_rank=2`.
    round_trip(
        &testdata("som", "data_f32_2x3.bin"),
        "safetensors",
        "back.bin",
        &["--to", "som-data"],
    );
    // The PINK writer stores f32 unless told otherwise (see below).
    round_trip(
        &testdata("som", "data_f64.bin"),
        "npz",
        "back.bin",
        &["--dtype", "f64"],
    );
    round_trip(
        &testdata("som", "data_u8_rank1.bin"),
        "npz",
        "back.bin",
        &["--to", "som-data", "--dtype", "u8"],
    );
    round_trip(
        &testdata("som", "som_cart_3x2.bin"),
        "safetensors",
        "back.bin",
        &["--to", "som:som"],
    );
    round_trip(
        &testdata("som", "som_cart_2x2_2ch.bin"),
        "npz",
        "back.bin",
        &["--set", "som_rank=2"],
    );
    round_trip(
        &testdata("som", "som_hex3.bin"),
        "safetensors",
        "back.bin",
        &[],
    );
    round_trip(&testdata("som", "map_cart_2x3.bin"), "npz", "back.bin", &[]);
}

#[test]
fn primitiv() {
    for f in [
        "model_nested_adam.data",
        "parameter_2x3_stats.data",
        "tensor_3x2_batch2.data",
    ] {
        round_trip(&testdata("primitiv", f), "safetensors", "back.data", &[]);
        round_trip(&testdata("primitiv", f), "npz", "back.data", &[]);
    }
}

#[test]
fn caffe_caffemodel_and_binaryproto() {
    round_trip(
        &testdata("caffe", "v2_tiny.caffemodel"),
        "safetensors",
        "back.caffemodel",
        &[],
    );
    round_trip(
        &testdata("caffe", "v1_legacy.caffemodel"),
        "npz",
        "back.caffemodel",
        &[],
    );
    round_trip(
        &testdata("caffe", "v0_net.caffemodel"),
        "safetensors",
        "back.caffemodel",
        &[],
    );
    round_trip(
        &testdata("caffe", "mean_legacy.binaryproto"),
        "safetensors",
        "back.binaryproto",
        &[],
    );
    round_trip(
        &testdata("caffe", "unpacked.binaryproto"),
        "npz",
        "back.binaryproto",
        &[],
    );
    // Chained through both interchange formats.
    round_trip(
        &testdata("caffe", "tiny.solverstate"),
        "npz",
        "back.solverstate",
        &[],
    );
}

#[test]
fn caffemodel_safetensors_caffemodel_then_a_change_is_seen() {
    // The example: caffemodel -> safetensors -> caffemodel, and a diff that must
    // fail after one value changes.
    let dir = tempfile::tempdir().unwrap();
    let orig = testdata("caffe", "v2_tiny.caffemodel");
    let st = dir.path().join("m.safetensors");
    assert_eq!(tf(args!["convert", orig, st]).0, 0);
    let f = tensorfmt::open(&st, &Default::default()).unwrap();
    let mut ts: Vec<(String, tensorfmt::Tensor)> = f
        .tensors()
        .into_iter()
        .map(|i| (i.name.clone(), f.read_tensor(&i.name).unwrap()))
        .collect();
    let last = ts.last_mut().unwrap();
    let mut v = last.1.to_vec::<f32>().unwrap();
    v[0] += 1e-3;
    last.1 =
        tensorfmt::Tensor::from_vec(v, last.1.dims().to_vec(), tensorfmt::Order::RowMajor).unwrap();
    let changed = dir.path().join("changed.safetensors");
    tensorfmt::save(
        &changed,
        tensorfmt::Format::Safetensors,
        &ts,
        &Default::default(),
    )
    .unwrap();
    let back = dir.path().join("back.caffemodel");
    assert_eq!(tf(args!["convert", changed, back]).0, 0);
    let (code, out, _) = tf(args!["diff", "--tensors-only", orig, back]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("1 of "), "{out}");
    assert_eq!(
        tf(args![
            "diff",
            "--tensors-only",
            orig,
            back,
            "--atol",
            "1e-2"
        ])
        .0,
        0
    );
}

#[test]
fn som_writer_dtype_is_a_dtype_difference_only() {
    // Written back as f32 (asked for, so the original layout is not restored): `diff`
    // reports the dtype, and `--allow-dtype` confirms the values survived (f64 0.5
    // steps, i16 fit f32).
    let dir = tempfile::tempdir().unwrap();
    for f in ["data_f64.bin", "data_i16.bin"] {
        let orig = testdata("som", f);
        let npz = dir.path().join(format!("{f}.npz"));
        let back = dir.path().join(format!("back_{f}"));
        assert_eq!(tf(args!["convert", orig, npz]).0, 0);
        assert_eq!(tf(args!["convert", "--dtype", "f32", npz, back]).0, 0);
        let (code, out, _) = tf(args!["diff", "--tensors-only", orig, back]);
        assert_eq!(code, 1, "{out}");
        assert!(
            out.contains("data: dtype ") && out.contains(" vs f32"),
            "{out}"
        );
        assert_eq!(
            tf(args!["diff", "--tensors-only", orig, back, "--allow-dtype"]).0,
            0
        );
    }
}

/// `diff` compares what the formats distinguish (issue 16, item 5): a primitiv batch of
/// vectors and a matrix of the same exported shape differ; so do a caffemodel and a
/// copy written from its tensors alone (the trip through safetensors keeps the net's
/// name and layer types only while the tensors are unchanged).
#[test]
fn header_losses_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let batched = testdata("primitiv", "tensor_3x2_batch2.data");
    let plain = dir.path().join("plain.data");
    // The same numbers as one [3, 2, 2] tensor without a batch.
    let t = tensorfmt::Document::open(&batched)
        .unwrap()
        .read_all()
        .unwrap();
    tensorfmt::save(
        &plain,
        tensorfmt::Format::Primitiv,
        &[("tensor".into(), t[0].1.clone())],
        &tensorfmt::WriteOptions {
            kind: Some("tensor".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let (code, out, _) = tf(args!["diff", &batched, &plain]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("header batch: 2 != 1"), "{out}");
    assert_eq!(tf(args!["diff", "--tensors-only", &batched, &plain]).0, 0);
    let orig = testdata("caffe", "v2_tiny.caffemodel");
    let st = dir.path().join("t.safetensors");
    let back = dir.path().join("back.caffemodel");
    assert_eq!(tf(args!["convert", &orig, &st]).0, 0);
    assert_eq!(tf(args!["convert", &st, &back]).0, 0);
    assert_eq!(std::fs::read(&orig).unwrap(), std::fs::read(&back).unwrap());
    // Widened to f64 on the way, the tensors no longer match the recorded layout.
    let wide = dir.path().join("wide.safetensors");
    let (code, _, err) = tf(args!["convert", "--dtype", "f64", &orig, &wide]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = tf(args!["convert", &wide, &back, "--force"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = tf(args!["diff", &orig, &back]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("header name"), "{out}");
    // Across formats only the tensors are compared.
    assert_eq!(tf(args!["diff", &orig, &st]).0, 0);
}
