//! Writers: nbands patched after every frame, appends, save_tensors round trips
//! through the TensorFile export names, and property-based read-back.

use std::fs::File;
use std::io::Cursor;

use proptest::prelude::*;
use tensorfmt_core::{DType, Order, ReadOptions, Tensor, TensorFile, WriteOptions};
use tensorfmt_pvp::write::{DenseWriter, SparseWriter, WeightGeometry, WeightWriter};
use tensorfmt_pvp::{OpenOptions, PvpFile};

fn strict() -> OpenOptions {
    OpenOptions {
        strict: true,
        ..OpenOptions::default()
    }
}

#[test]
fn every_prefix_written_so_far_is_a_valid_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.pvp");
    let mut w = DenseWriter::new(File::create(&p).unwrap(), 2, 2, 1).unwrap();
    for k in 0..4 {
        w.write_frame(k as f64 + 0.25, &[k as f32; 4]).unwrap();
        // A crash now leaves a file whose nbands and header time are already right.
        let f = PvpFile::from_bytes_with(std::fs::read(&p).unwrap().into(), &strict()).unwrap();
        assert_eq!(f.frame_count().unwrap(), k + 1);
        assert_eq!(f.header().nbands, k as i32 + 1);
        assert_eq!(f.header().time, 0.25);
    }
    let sp = dir.path().join("s.pvp");
    let mut w = SparseWriter::values(File::create(&sp).unwrap(), 4, 1, 1).unwrap();
    for k in 0..3u32 {
        w.write_frame(k as f64, &[k], &[1.5]).unwrap();
        let f = PvpFile::from_bytes_with(std::fs::read(&sp).unwrap().into(), &strict()).unwrap();
        assert_eq!(f.frame_count().unwrap(), k as usize + 1);
    }
}

#[test]
fn appends_continue_existing_files() {
    let mut buf = Cursor::new(Vec::new());
    let mut w = SparseWriter::binary(&mut buf, 3, 1, 1).unwrap();
    w.write_frame(0.0, &[1], &[]).unwrap();
    w.finish().unwrap();
    let mut w = SparseWriter::append(&mut buf).unwrap();
    assert_eq!(w.frames(), 1);
    w.write_frame(1.0, &[0, 2], &[]).unwrap();
    w.finish().unwrap();
    let PvpFile::Sparse(r) = PvpFile::from_bytes_with(buf.into_inner().into(), &strict()).unwrap()
    else {
        panic!()
    };
    assert_eq!(r.to_csr(0..2).unwrap().indptr, vec![0, 1, 3]);

    let g = WeightGeometry::non_shared(2, 1, 1, 1, 0, 3, 1, 1, 2);
    let mut buf = Cursor::new(Vec::new());
    let n = g.frame_values().unwrap();
    let mut w = WeightWriter::new(&mut buf, g, true).unwrap();
    w.write_frame(0.0, &vec![0.5; n]).unwrap();
    w.finish().unwrap();
    let mut w = WeightWriter::append(&mut buf).unwrap();
    assert_eq!(w.frames(), 1);
    w.write_frame(5.0, &(0..n).map(|i| i as f32).collect::<Vec<_>>())
        .unwrap();
    w.finish().unwrap();
    let PvpFile::Weights(r) = PvpFile::from_bytes_with(buf.into_inner().into(), &strict()).unwrap()
    else {
        panic!()
    };
    assert_eq!(r.len(), 2);
    assert_eq!(r.layout().numpatches, 4); // (2 + 2*1) x 1 x 1
    let f = r.frame(1).unwrap();
    assert_eq!((f.time(), f.wmin(), f.wmax()), (5.0, 0.0, (n - 1) as f32));
    let tol = (n - 1) as f32 / 510.0;
    for (i, x) in f.weights.to_vec::<f32>().unwrap().into_iter().enumerate() {
        assert!((x - i as f32).abs() <= tol, "byte weight {i}: {x}");
    }

    // Appending to a file of another kind is refused.
    let mut buf = Cursor::new(Vec::new());
    DenseWriter::new(&mut buf, 1, 1, 1)
        .unwrap()
        .finish()
        .unwrap();
    assert!(SparseWriter::append(&mut buf).is_err());
    assert!(WeightWriter::append(&mut buf).is_err());
    assert!(DenseWriter::append(&mut buf).is_ok());
}

#[test]
fn writer_input_errors() {
    let mut w = DenseWriter::new(Cursor::new(Vec::new()), 2, 1, 1).unwrap();
    assert!(w.write_frame(0.0, &[1.0]).is_err());
    assert!(DenseWriter::new(Cursor::new(Vec::new()), 0, 1, 1).is_err());
    let mut s = SparseWriter::values(Cursor::new(Vec::new()), 2, 1, 1).unwrap();
    assert!(s.write_frame(0.0, &[1, 1], &[1.0, 2.0]).is_err());
    assert!(s.write_frame(0.0, &[0], &[]).is_err());
    let mut b = SparseWriter::binary(Cursor::new(Vec::new()), 2, 1, 1).unwrap();
    assert!(b.write_frame(0.0, &[0], &[1.0]).is_err());
    let g = WeightGeometry::kernel(1, 1, 1, 1, 1, 2, 1);
    let mut w = WeightWriter::new(Cursor::new(Vec::new()), g, true).unwrap();
    assert!(w.write_frame(0.0, &[f32::NAN, 1.0]).is_err());
    assert!(w.write_frame(0.0, &[1.0]).is_err());
}

fn round_trip(
    tensors: &[(String, Tensor)],
    opts: &WriteOptions,
    read: &ReadOptions,
) -> Box<dyn TensorFile> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.pvp");
    tensorfmt_pvp::save_tensors(&p, tensors, opts).unwrap();
    tensorfmt_pvp::open_tensor_file(tensorfmt_core::io::read_file(&p).unwrap(), read).unwrap()
}

#[test]
fn save_tensors_dense_round_trip() {
    let v = Tensor::from_vec(
        (0..24).map(|i| i as f32).collect::<Vec<_>>(),
        [2, 3, 2, 2],
        Order::RowMajor,
    )
    .unwrap();
    let t = Tensor::from_vec(vec![5.0f64, 6.0], [2], Order::RowMajor).unwrap();
    let f = round_trip(
        &[("values".into(), v.clone()), ("time".into(), t.clone())],
        &WriteOptions::default(),
        &ReadOptions::default(),
    );
    assert_eq!(f.kind(), "dense activity");
    assert_eq!(f.read_tensor("values").unwrap(), v);
    assert_eq!(f.read_tensor("time").unwrap(), t);
    // A single frame [ny, nx, nf] in another dtype, column-major.
    let one = Tensor::from_vec(vec![1i32, 2, 3, 4], [2, 2, 1], Order::ColumnMajor).unwrap();
    let f = round_trip(
        &[("values".into(), one.clone())],
        &WriteOptions::default(),
        &ReadOptions::default(),
    );
    let back = f.read_tensor("values").unwrap();
    assert_eq!(back.dims(), &[1, 2, 2, 1]);
    assert_eq!(
        back.reshape([2, 2, 1]).unwrap(),
        one.to_order(Order::RowMajor)
            .unwrap()
            .cast(DType::F32)
            .unwrap()
    );
}

#[test]
fn save_tensors_sparse_round_trip() {
    let indptr = Tensor::from_vec(vec![0i64, 2, 2, 3], [4], Order::RowMajor).unwrap();
    let indices = Tensor::from_vec(vec![5u32, 1, 7], [3], Order::RowMajor).unwrap();
    let data = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], [3], Order::RowMajor).unwrap();
    let shape = Tensor::from_vec(vec![3i64, 8], [2], Order::RowMajor).unwrap();
    let mut opts = WriteOptions::default();
    opts.extra.insert("nx".into(), "4".into());
    opts.extra.insert("ny".into(), "2".into());
    let named = [
        ("indptr".to_string(), indptr.clone()),
        ("indices".to_string(), indices),
        ("data".to_string(), data),
        ("shape".to_string(), shape.clone()),
    ];
    let f = round_trip(
        &named,
        &opts,
        &ReadOptions {
            sparse_csr: true,
            ..ReadOptions::default()
        },
    );
    assert_eq!(f.kind(), "sparse values activity");
    assert_eq!(f.read_tensor("indptr").unwrap(), indptr);
    assert_eq!(
        f.read_tensor("indices").unwrap().to_vec::<u32>().unwrap(),
        vec![1, 5, 7]
    ); // sorted
    assert_eq!(
        f.read_tensor("data").unwrap().to_vec::<f32>().unwrap(),
        vec![-1.0, 0.5, 2.0]
    );
    assert_eq!(f.read_tensor("shape").unwrap(), shape);
    let dense = round_trip(&named, &opts, &ReadOptions::default())
        .read_tensor("values")
        .unwrap();
    assert_eq!(dense.dims(), &[3, 2, 4, 1]);
    assert_eq!(dense.get::<f32>(&[0, 1, 1, 0]).unwrap(), 0.5); // k = 5 -> y 1, x 1
                                                               // Without data: binary; datatype 4 on request.
    let f = round_trip(&named[..2], &opts, &ReadOptions::default());
    assert_eq!(f.kind(), "sparse binary activity");
    opts.extra.insert("datatype".into(), "4".into());
    let f = round_trip(&named, &opts, &ReadOptions::default());
    assert!(f
        .header()
        .iter()
        .any(|(k, v)| k == "datatype" && v.to_string() == "4"));
    // Frame selection.
    let f = round_trip(
        &named,
        &opts,
        &ReadOptions {
            frames: Some((2, None)),
            sparse_csr: true,
            ..Default::default()
        },
    );
    assert_eq!(
        f.read_tensor("indptr").unwrap().to_vec::<i64>().unwrap(),
        vec![0, 1]
    );
    assert_eq!(
        f.read_tensor("time").unwrap().to_vec::<f64>().unwrap(),
        vec![2.0]
    );
}

/// A CSR input's `frame_shape` is its geometry: `--set nx/ny/nf` may repeat it, not
/// change it (it re-shaped an 8x8x3 layer to 96x2x1, exit 0), as for a dense input.
#[test]
fn sparse_settings_must_repeat_the_frame_shape() {
    let indptr = Tensor::from_vec(vec![0i64, 1, 2], [3], Order::RowMajor).unwrap();
    let indices = Tensor::from_vec(vec![5u32, 23], [2], Order::RowMajor).unwrap();
    let data = Tensor::from_vec(vec![0.5f32, 2.0], [2], Order::RowMajor).unwrap();
    let shape = Tensor::from_vec(vec![2i64, 24], [2], Order::RowMajor).unwrap();
    let frame_shape = Tensor::from_vec(vec![2i64, 4, 3], [3], Order::RowMajor).unwrap();
    let named = [
        ("indptr".to_string(), indptr),
        ("indices".to_string(), indices),
        ("data".to_string(), data),
        ("shape".to_string(), shape),
        ("frame_shape".to_string(), frame_shape),
    ];
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.pvp");
    for (key, value) in [("ny", "3"), ("nf", "2"), ("nx", "2")] {
        let mut opts = WriteOptions::default();
        opts.extra.insert(key.into(), value.into());
        let err = tensorfmt_pvp::save_tensors(&p, &named, &opts)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("--set {key}={value}")), "{err}");
        assert!(!p.exists(), "{key}");
    }
    // Repeating it is fine.
    let mut opts = WriteOptions::default();
    opts.extra.insert("ny".into(), "2".into());
    opts.extra.insert("nf".into(), "3".into());
    let f = round_trip(&named, &opts, &ReadOptions::default());
    assert_eq!(f.read_tensor("values").unwrap().dims(), &[2, 2, 4, 3]);
}

/// No frames: an activity file is its header alone (as OpenPV leaves one before its
/// first frame), which reads back; a weight file, whose header is each frame's, is
/// refused before anything is written (it was a 0-byte file the read-back refused).
#[test]
fn no_frames_is_a_header_or_a_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("e.pvp");
    let none = Tensor::from_vec(Vec::<f32>::new(), [0, 2, 3, 1], Order::RowMajor).unwrap();
    for kind in ["dense", "sparse"] {
        let opts = WriteOptions {
            kind: Some(kind.into()),
            ..WriteOptions::default()
        };
        let f = round_trip(
            &[("values".into(), none.clone())],
            &opts,
            &Default::default(),
        );
        assert_eq!(
            f.read_tensor("values").unwrap().dims(),
            &[0, 2, 3, 1],
            "{kind}"
        );
    }
    let w = Tensor::from_vec(Vec::<f32>::new(), [0, 1, 4, 2, 2, 1], Order::RowMajor).unwrap();
    let err = tensorfmt_pvp::save_tensors(&p, &[("weights".into(), w)], &Default::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("no frames"), "{err}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn save_tensors_weights_round_trip() {
    let w = Tensor::from_vec(
        (0..48).map(|i| i as f32 / 8.0).collect::<Vec<_>>(),
        [2, 1, 4, 2, 3, 1],
        Order::RowMajor,
    )
    .unwrap();
    let f = round_trip(
        &[("weights".into(), w.clone())],
        &WriteOptions::default(),
        &ReadOptions::default(),
    );
    assert_eq!(f.kind(), "shared weights");
    assert_eq!(f.read_tensor("weights").unwrap(), w);
    assert_eq!(
        f.read_tensor("time").unwrap().to_vec::<f64>().unwrap(),
        vec![0.0, 1.0]
    );
    let chunks: Vec<Tensor> = f
        .read_chunks("weights")
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[1].dims(), &[1, 1, 4, 2, 3, 1]);
    // Byte weights: within (wMax - wMin) / 510 of the input.
    let opts = WriteOptions {
        dtype: Some(DType::U8),
        ..WriteOptions::default()
    };
    let f = round_trip(
        &[("weights".into(), w.clone())],
        &opts,
        &ReadOptions::default(),
    );
    let got = f.read_tensor("weights").unwrap().to_vec::<f32>().unwrap();
    for (frame, (a, b)) in got
        .chunks(24)
        .zip(w.to_vec::<f32>().unwrap().chunks(24))
        .enumerate()
    {
        let (lo, hi) = (
            b.iter().copied().fold(f32::MAX, f32::min),
            b.iter().copied().fold(f32::MIN, f32::max),
        );
        for (x, y) in a.iter().zip(b) {
            assert!(
                (x - y).abs() <= (hi - lo) / 510.0 * 1.0001,
                "frame {frame}: {x} vs {y}"
            );
        }
    }
    // Forcing a kind needs its tensors.
    let bad = WriteOptions {
        kind: Some("sparse".into()),
        ..WriteOptions::default()
    };
    let dir = tempfile::tempdir().unwrap();
    assert!(
        tensorfmt_pvp::save_tensors(&dir.path().join("y.pvp"), &[("weights".into(), w)], &bad)
            .is_err()
    );
    assert!(
        !dir.path().join("y.pvp").exists(),
        "failed writes leave nothing"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn dense_reads_back(nx in 1usize..5, ny in 1usize..4, nf in 1usize..3, frames in 0usize..4, seed in any::<u32>()) {
        let n = nx * ny * nf;
        let mut w = DenseWriter::new(Cursor::new(Vec::new()), nx, ny, nf).unwrap();
        let data: Vec<Vec<f32>> = (0..frames).map(|k| (0..n).map(|i| (seed as f32) * 1e-3 + (k * n + i) as f32).collect()).collect();
        for (k, v) in data.iter().enumerate() {
            w.write_frame(k as f64 * 0.5, v).unwrap();
        }
        let bytes = w.finish().unwrap().into_inner();
        let PvpFile::Dense(r) = PvpFile::from_bytes_with(bytes.into(), &strict()).unwrap() else { panic!() };
        prop_assert_eq!(r.len(), frames);
        for (k, v) in data.iter().enumerate() {
            let f = r.frame(k).unwrap();
            prop_assert_eq!(f.values.dims(), &[ny, nx, nf]);
            prop_assert_eq!(&f.values.to_vec::<f32>().unwrap(), v);
            prop_assert_eq!(f.time, k as f64 * 0.5);
        }
    }

    #[test]
    fn sparse_reads_back(width in 1usize..40, frames in proptest::collection::vec(proptest::collection::btree_map(0u32..40, -5.0f32..5.0, 0..10), 0..5)) {
        let mut w = SparseWriter::values(Cursor::new(Vec::new()), width, 1, 1).unwrap();
        let mut expect = Vec::new();
        for (k, m) in frames.iter().enumerate() {
            let e: Vec<(u32, f32)> = m.iter().filter(|(i, _)| (**i as usize) < width).map(|(i, v)| (*i, *v)).collect();
            let (idx, val): (Vec<u32>, Vec<f32>) = e.iter().rev().copied().unzip();
            w.write_frame(k as f64, &idx, &val).unwrap();
            expect.push(e);
        }
        let bytes = w.finish().unwrap().into_inner();
        let PvpFile::Sparse(r) = PvpFile::from_bytes_with(bytes.into(), &strict()).unwrap() else { panic!() };
        prop_assert_eq!(r.len().unwrap(), frames.len());
        let csr = r.to_csr(0..frames.len()).unwrap();
        prop_assert_eq!(csr.width, width);
        for (k, e) in expect.iter().enumerate() {
            let (a, b) = (csr.indptr[k] as usize, csr.indptr[k + 1] as usize);
            let got: Vec<(u32, f32)> = csr.indices[a..b].iter().copied().zip(csr.data[a..b].iter().copied()).collect();
            prop_assert_eq!(&got, e);
        }
    }
}

#[test]
fn appends_to_older_kernel_headers_and_never_to_legacy_mpi_files() {
    // An older kernel header (the pre layer 8x4x2 as nx, ny, nf over 2 patches):
    // numpatches is the unit cell (spec §6.3), so it continues, header kept.
    let g = WeightGeometry::kernel(1, 1, 2, 2, 2, 1, 1).with_header_dims([8, 4, 2]);
    let n = g.frame_values().unwrap();
    let mut buf = Cursor::new(Vec::new());
    let mut w = WeightWriter::new(&mut buf, g, false).unwrap();
    w.write_frame(0.0, &vec![0.5; n]).unwrap();
    w.finish().unwrap();
    let mut w = WeightWriter::append(&mut buf).unwrap();
    w.write_frame(1.0, &vec![0.25; n]).unwrap();
    w.finish().unwrap();
    let bytes = buf.into_inner();
    let frame = bytes.len() / 2;
    for at in [0, frame] {
        let nx = i32::from_le_bytes(bytes[at + 12..at + 16].try_into().unwrap());
        assert_eq!(nx, 8, "frame at {at}");
    }
    let PvpFile::Weights(r) = PvpFile::from_bytes_with(bytes.into(), &strict()).unwrap() else {
        panic!()
    };
    assert_eq!(r.len(), 2);
    // A legacy MPI weight file (2x2 processes) would get modern frames after legacy ones.
    let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "pvp") else {
        return;
    };
    let legacy = std::fs::read(dir.join("legacy/BIDS/w0_last.pvp")).unwrap();
    let err = WeightWriter::append(Cursor::new(legacy))
        .unwrap_err()
        .to_string();
    assert!(err.contains("legacy MPI"), "{err}");
}
