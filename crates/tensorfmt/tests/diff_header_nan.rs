//! A file equals itself (issue 23 item 9): header fields that are NaN (PVP `time`,
//! `wMin`, `wMax`) compare equal to NaN, as numpy's `equal_nan` does.

use std::io::Cursor;
use std::path::Path;

use tensorfmt::diff::{compare, DiffOptions};
use tensorfmt::pvp::write::{DenseWriter, WeightGeometry, WeightWriter};
use tensorfmt::{open, ReadOptions};

fn diff_self(path: &Path) {
    let a = open(path, &ReadOptions::default()).unwrap();
    let b = open(path, &ReadOptions::default()).unwrap();
    let r = compare(&a, &b, &DiffOptions::default()).unwrap();
    assert!(
        r.header.is_empty(),
        "{}: header differs from itself: {:?}",
        path.display(),
        r.header
    );
    assert!(r.is_equal(), "{}", path.display());
}

#[test]
fn nan_header_fields_equal_themselves() {
    let dir = tempfile::tempdir().unwrap();

    // Dense activity with a NaN header time (offset 72).
    let mut w = DenseWriter::new(Cursor::new(Vec::new()), 2, 1, 1).unwrap();
    w.write_frame(f64::NAN, &[1.0, f32::NAN]).unwrap();
    let mut bytes = w.finish().unwrap().into_inner();
    bytes[72..80].copy_from_slice(&f64::NAN.to_le_bytes());
    let dense = dir.path().join("dense.pvp");
    std::fs::write(&dense, &bytes).unwrap();
    diff_self(&dense);

    // A kernel file whose wMin and wMax (offsets 92 and 96) are NaN.
    let geom = WeightGeometry::kernel(1, 1, 1, 2, 2, 1, 1);
    let mut w = WeightWriter::new(Cursor::new(Vec::new()), geom, false).unwrap();
    w.write_frame(0.0, &[1.0, 2.0, 3.0, 4.0]).unwrap();
    let mut bytes = w.finish().unwrap().into_inner();
    bytes[92..96].copy_from_slice(&f32::NAN.to_le_bytes());
    bytes[96..100].copy_from_slice(&f32::NAN.to_le_bytes());
    let weights = dir.path().join("w.pvp");
    std::fs::write(&weights, &bytes).unwrap();
    diff_self(&weights);
}

#[test]
fn nan_against_a_number_still_differs() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = DenseWriter::new(Cursor::new(Vec::new()), 1, 1, 1).unwrap();
    w.write_frame(0.0, &[1.0]).unwrap();
    let bytes = w.finish().unwrap().into_inner();
    let mut nan = bytes.clone();
    nan[72..80].copy_from_slice(&f64::NAN.to_le_bytes());
    let (pa, pb) = (dir.path().join("a.pvp"), dir.path().join("b.pvp"));
    std::fs::write(&pa, &bytes).unwrap();
    std::fs::write(&pb, &nan).unwrap();
    let a = open(&pa, &ReadOptions::default()).unwrap();
    let b = open(&pb, &ReadOptions::default()).unwrap();
    let r = compare(&a, &b, &DiffOptions::default()).unwrap();
    assert_eq!(r.header.len(), 1, "{:?}", r.header);
    assert_eq!(r.header[0].0, "time");
    assert!(!r.is_equal());
}
