//! Golden fixtures (`testdata/pvp/`, written by `cargo xtask fixtures` from byte-level
//! builders): our writers reproduce them byte for byte and our readers read them back.
//! The data formulas are those of `xtask/src/fixtures/pvp.rs`.

use std::io::Cursor;
use std::path::PathBuf;

use tensorfmt_pvp::write::{DenseWriter, SparseWriter, WeightGeometry, WeightWriter};
use tensorfmt_pvp::{OpenOptions, PvpFile};

fn golden(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pvp")
        .join(name);
    std::fs::read(&p)
        .unwrap_or_else(|e| panic!("{}: {e} (run `cargo xtask fixtures`)", p.display()))
}

fn dense_value(k: usize, i: usize) -> f32 {
    (k * 12 + i) as f32 * 0.25 - 1.0
}

fn weight_value(k: usize, i: usize) -> f32 {
    ((k * 37 + i * 11) % 17) as f32 / 4.0 - 2.0
}

const BINARY_FRAMES: [&[u32]; 3] = [&[0, 3, 7], &[], &[5]];
const VALUE_FRAMES: [&[(u32, f32)]; 3] = [&[(1, 0.5), (4, -2.0), (11, 3.25)], &[(0, 0.0)], &[]];

fn open(b: Vec<u8>) -> PvpFile {
    PvpFile::from_bytes_with(
        b.into(),
        &OpenOptions {
            strict: true,
            ..OpenOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn dense_f32() {
    let mut w = DenseWriter::new(Cursor::new(Vec::new()), 3, 2, 2).unwrap();
    for (k, t) in [0.5, 1.5, 2.5].into_iter().enumerate() {
        let v: Vec<f32> = (0..12).map(|i| dense_value(k, i)).collect();
        w.write_frame(t, &v).unwrap();
    }
    let out = w.finish().unwrap().into_inner();
    assert_eq!(out, golden("dense_f32.pvp"));
    let PvpFile::Dense(r) = open(out) else {
        panic!()
    };
    for k in 0..3 {
        let f = r.frame(k).unwrap();
        assert_eq!(f.values.dims(), &[2, 3, 2]);
        assert_eq!(
            f.values.to_vec::<f32>().unwrap(),
            (0..12).map(|i| dense_value(k, i)).collect::<Vec<_>>()
        );
        assert_eq!(f.time, k as f64 + 0.5);
    }
}

#[test]
fn sparse_binary() {
    let mut w = SparseWriter::binary(Cursor::new(Vec::new()), 4, 2, 1).unwrap();
    for (k, idx) in BINARY_FRAMES.iter().enumerate() {
        // Reversed input: the writer sorts.
        let rev: Vec<u32> = idx.iter().rev().copied().collect();
        w.write_frame((k + 1) as f64, &rev, &[]).unwrap();
    }
    let out = w.finish().unwrap().into_inner();
    assert_eq!(out, golden("sparse_binary.pvp"));
    let PvpFile::Sparse(r) = open(out) else {
        panic!()
    };
    for (k, idx) in BINARY_FRAMES.iter().enumerate() {
        let f = r.frame(k).unwrap();
        assert_eq!(f.indices, idx.to_vec());
        assert!(f.values.iter().all(|&v| v == 1.0));
    }
}

fn sparse_values(datatype4: bool, name: &str) {
    let c = Cursor::new(Vec::new());
    let mut w = if datatype4 {
        SparseWriter::values_datatype4(c, 3, 2, 2)
    } else {
        SparseWriter::values(c, 3, 2, 2)
    }
    .unwrap();
    for (k, e) in VALUE_FRAMES.iter().enumerate() {
        let idx: Vec<u32> = e.iter().map(|p| p.0).collect();
        let val: Vec<f32> = e.iter().map(|p| p.1).collect();
        w.write_frame(k as f64, &idx, &val).unwrap();
    }
    let out = w.finish().unwrap().into_inner();
    assert_eq!(out, golden(name));
    let PvpFile::Sparse(r) = open(out) else {
        panic!()
    };
    for (k, e) in VALUE_FRAMES.iter().enumerate() {
        let f = r.frame(k).unwrap();
        let got: Vec<(u32, f32)> = f.indices.into_iter().zip(f.values).collect();
        assert_eq!(got, e.to_vec(), "explicit zero values are kept");
    }
    let dense = r.to_dense(0..3).unwrap();
    assert_eq!(dense.dims(), &[3, 2, 3, 2]);
    assert_eq!(dense.get::<f32>(&[0, 1, 2, 1]).unwrap(), 3.25); // k = 11
}

#[test]
fn sparse_values_dt3() {
    sparse_values(false, "sparse_values_dt3.pvp");
}

#[test]
fn sparse_values_dt4() {
    sparse_values(true, "sparse_values_dt4.pvp");
}

fn weights(g: WeightGeometry, bytes: bool, frames: usize, constant: Option<f32>, name: &str) {
    let n = g.frame_values().unwrap();
    let mut w = WeightWriter::new(Cursor::new(Vec::new()), g, bytes).unwrap();
    let data: Vec<Vec<f32>> = (0..frames)
        .map(|k| {
            (0..n)
                .map(|i| constant.unwrap_or_else(|| weight_value(k, i)))
                .collect()
        })
        .collect();
    for (k, v) in data.iter().enumerate() {
        w.write_frame(10.0 * k as f64, v).unwrap();
    }
    let out = w.finish().unwrap().into_inner();
    assert_eq!(out, golden(name), "{name}");
    let PvpFile::Weights(r) = open(out) else {
        panic!()
    };
    assert_eq!(r.len(), frames);
    for (k, v) in data.iter().enumerate() {
        let f = r.frame(k).unwrap();
        assert_eq!(f.time(), 10.0 * k as f64);
        assert_eq!(
            f.weights.dims(),
            &[g.arbors, g.numpatches().unwrap(), g.nyp, g.nxp, g.nfp]
        );
        let got = f.weights.to_vec::<f32>().unwrap();
        let (lo, hi) = (f.wmin(), f.wmax());
        for (a, b) in got.iter().zip(v) {
            if bytes {
                let tol = if hi > lo {
                    (hi - lo) / 510.0 * 1.0001
                } else {
                    0.0
                };
                let expect = if hi > lo { *b } else { lo };
                assert!((a - expect).abs() <= tol, "{name}: {a} vs {b}");
            } else {
                assert_eq!(a, b);
            }
        }
        assert!(f
            .patches
            .iter()
            .all(|p| (p.nx as usize, p.ny as usize, p.offset) == (g.nxp, g.nyp, Some(0))));
    }
}

#[test]
fn kernel_f32() {
    weights(
        WeightGeometry::kernel(1, 1, 2, 3, 2, 1, 2),
        false,
        2,
        None,
        "kernel_f32.pvp",
    );
}

#[test]
fn kernel_byte() {
    weights(
        WeightGeometry::kernel(1, 1, 2, 3, 2, 1, 2),
        true,
        2,
        None,
        "kernel_byte.pvp",
    );
}

#[test]
fn kernel_byte_constant_writes_zeros() {
    weights(
        WeightGeometry::kernel(1, 1, 2, 3, 2, 1, 2),
        true,
        1,
        Some(0.35),
        "kernel_byte_constant.pvp",
    );
    let b = golden("kernel_byte_constant.pvp");
    // wMin == wMax: every stored byte is 0 and decodes to wMin.
    assert!(b[104..].chunks(14).all(|p| p[8..].iter().all(|&x| x == 0)));
}

#[test]
fn nonshared_f32() {
    weights(
        WeightGeometry::non_shared(2, 2, 1, 1, 1, 3, 3, 1, 1),
        false,
        1,
        None,
        "nonshared_f32.pvp",
    );
}

#[test]
fn nonshared_byte() {
    weights(
        WeightGeometry::non_shared(2, 2, 1, 1, 1, 3, 3, 1, 1),
        true,
        1,
        None,
        "nonshared_byte.pvp",
    );
}
