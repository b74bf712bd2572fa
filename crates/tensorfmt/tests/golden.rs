//! The interchange readers against the byte-level fixtures of `testdata/core/`
//! (built by `cargo xtask fixtures`, not by our writers), and our writers against
//! them byte for byte where the format fixes the bytes.

use std::path::PathBuf;

use tensorfmt::interop::{npy, safetensors as st};
use tensorfmt::{DType, Format, Order, ReadOptions, Tensor, TensorFile, WriteOptions};

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/core")
        .join(name)
}

fn open(name: &str) -> Box<dyn TensorFile> {
    tensorfmt::open(&sample(name), &ReadOptions::default())
        .unwrap()
        .into()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.cast(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

const F32_VALUES: [f32; 6] = [0.5, -1.25, 2.0, 3.75, -0.0, 100.0];

#[test]
fn detection_by_content() {
    for (name, format) in [
        ("f32_2x3.npy", Format::Npy),
        ("mixed.npz", Format::Npz),
        ("model.safetensors", Format::Safetensors),
    ] {
        assert_eq!(tensorfmt::detect(&sample(name)).unwrap(), format, "{name}");
        let bytes = std::fs::read(sample(name)).unwrap();
        assert_eq!(
            tensorfmt::detect_bytes(&bytes, bytes.len() as u64, None),
            Some(format)
        );
    }
}

#[test]
fn npy_c_order_f32_and_writer_identity() {
    let f = open("f32_2x3.npy");
    assert_eq!((f.format(), f.kind()), ("npy", "array".to_string()));
    let info = &f.tensors()[0];
    assert_eq!(
        (info.name.as_str(), info.dtype, info.shape.dims()),
        ("f32_2x3", DType::F32, &[2, 3][..])
    );
    let t = f.read_tensor("f32_2x3").unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), F32_VALUES);
    assert!(f.warnings().is_empty());
    f.validate().unwrap();
    // Our writer reproduces the numpy-layout fixture byte for byte.
    let mine =
        npy::to_bytes(&Tensor::from_vec(F32_VALUES.to_vec(), [2, 3], Order::RowMajor).unwrap())
            .unwrap();
    assert_eq!(mine, std::fs::read(sample("f32_2x3.npy")).unwrap());
}

#[test]
fn npy_fortran_order_is_exported_row_major() {
    let f = open("i16_fortran_2x3.npy");
    assert_eq!(f.kind(), "array (Fortran order)");
    let t = f.read_tensor("i16_fortran_2x3").unwrap();
    assert_eq!(t.order(), Order::RowMajor);
    assert_eq!(t.to_vec::<i16>().unwrap(), vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(t.get::<i16>(&[1, 0]).unwrap(), 4);
}

#[test]
fn npy_bf16_and_big_endian() {
    let t = open("bf16_4.npy").read_tensor("bf16_4").unwrap();
    assert_eq!(t.dtype(), DType::BF16);
    assert_eq!(f64s(&t), vec![1.0, -2.0, 0.5, 3.0]);
    let t = open("f64_be_3.npy").read_tensor("f64_be_3").unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.5, -2.25, 1e10]);
}

#[test]
fn npz_stored_and_deflated_members() {
    let f = open("mixed.npz");
    assert_eq!(f.format(), "npz");
    assert_eq!(f.kind(), "archive (stored and deflated)");
    let names: Vec<String> = f.tensors().into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["weights", "bias", "flags"]);
    assert_eq!(
        f.read_tensor("weights").unwrap().to_vec::<f32>().unwrap(),
        F32_VALUES
    );
    assert_eq!(
        f.read_tensor("bias").unwrap().to_vec::<i64>().unwrap(),
        vec![-1, 0, 7]
    );
    let flags = f.read_tensor("flags").unwrap();
    assert_eq!(
        (flags.dtype(), flags.bytes().as_ref()),
        (DType::Bool, &[1u8, 0, 0, 1][..])
    );
    f.validate().unwrap();
}

#[test]
fn safetensors_sample_and_writer_identity() {
    let f = open("model.safetensors");
    let names: Vec<String> = f.tensors().into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["layer.bias", "embed.weight", "mask"]);
    assert_eq!(
        f64s(&f.read_tensor("layer.bias").unwrap()),
        vec![0.25, -1.0, 8.0]
    );
    let e = f.read_tensor("embed.weight").unwrap();
    assert_eq!((e.dtype(), e.dims()), (DType::F16, &[2, 2][..]));
    assert_eq!(f64s(&e), vec![1.0, -2.0, 0.5, 0.0]);
    assert_eq!(f.read_tensor("mask").unwrap().bytes().as_ref(), &[0, 1]);
    assert!(f
        .header()
        .iter()
        .any(|(k, v)| k == "__metadata__" && v.to_string() == "{format: pt}"));

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("again.safetensors");
    let mut o = WriteOptions::default();
    o.extra.insert("format".into(), "pt".into());
    let tensors: Vec<(String, Tensor)> = names
        .iter()
        .map(|n| (n.clone(), f.read_tensor(n).unwrap()))
        .collect();
    st::save(&out, &tensors, &o).unwrap();
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(sample("model.safetensors")).unwrap()
    );
}

#[test]
fn conversions_between_the_three_formats_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let src = tensorfmt::Document::open(sample("mixed.npz")).unwrap();
    let names: Vec<String> = src.tensors().into_iter().map(|i| i.name).collect();
    let st_path = dir.path().join("m.safetensors");
    src.convert_to_with(
        &st_path,
        Format::Safetensors,
        Some(&names),
        &WriteOptions::default(),
    )
    .unwrap();
    let mid = tensorfmt::Document::open(&st_path).unwrap();
    let npz_path = dir.path().join("m.npz");
    mid.convert_to_with(
        &npz_path,
        Format::Npz,
        Some(&names),
        &WriteOptions::default(),
    )
    .unwrap();
    let back = tensorfmt::open(&npz_path, &ReadOptions::default()).unwrap();
    for n in &names {
        assert_eq!(
            back.read_tensor(n).unwrap(),
            src.read_tensor(n).unwrap(),
            "{n}"
        );
    }
}

/// Opens, validates and decodes everything; errors are fine, panics are not.
fn exercise(bytes: Vec<u8>, format: Format) {
    let Ok(f) = tensorfmt::open_bytes(bytes.into(), format, None, &ReadOptions::default()) else {
        return;
    };
    let _ = f.validate();
    let _ = f.header();
    for info in f.tensors() {
        if let Ok(t) = f.read_tensor(&info.name) {
            assert_eq!((t.dtype(), t.shape()), (info.dtype, &info.shape));
        }
    }
}

#[test]
fn truncations_and_byte_flips_never_panic() {
    for (name, format) in [
        ("f32_2x3.npy", Format::Npy),
        ("i16_fortran_2x3.npy", Format::Npy),
        ("f64_be_3.npy", Format::Npy),
        ("mixed.npz", Format::Npz),
        ("model.safetensors", Format::Safetensors),
    ] {
        let good = std::fs::read(sample(name)).unwrap();
        for n in 0..good.len() {
            let r = tensorfmt::open_bytes(
                good[..n].to_vec().into(),
                format,
                None,
                &ReadOptions::default(),
            )
            .and_then(|f| f.validate());
            assert!(r.is_err(), "{name}: prefix of {n} bytes accepted");
        }
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut b = good.clone();
                b[i] ^= flip;
                exercise(b, format);
            }
        }
    }
}
