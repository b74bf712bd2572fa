//! Sparse stays sparse (issue 23 item 5): a sparse PVP converts to npz in scipy's
//! `save_npz` layout and to safetensors as the CSR triple (never a dense balloon),
//! densifies only when asked and within a bound, and converts back to the sparse PVP.

use std::io::Cursor;
use std::path::Path;

use tensorfmt::interop::sparse::MAX_DENSE_BYTES;
use tensorfmt::pvp::write::SparseWriter;
use tensorfmt::{open, Format, PvpFile, ReadOptions, SparseOutput, TensorFile, WriteOptions};

/// A sparse-values PVP of `frames` frames over `nx x ny x nf`, frame k active at
/// neurons k, 2k+1, ... with values k + 0.5.
fn sparse_pvp(path: &Path, nx: usize, ny: usize, nf: usize, frames: usize) {
    let mut w = SparseWriter::values(Cursor::new(Vec::new()), nx, ny, nf).unwrap();
    let n = (nx * ny * nf) as u32;
    for k in 0..frames as u32 {
        let idx: Vec<u32> = vec![k % n, (2 * k + 1) % n, n - 1 - (k % 3)];
        let mut idx = idx;
        idx.sort_unstable();
        idx.dedup();
        let vals: Vec<f32> = idx.iter().map(|&i| k as f32 + 0.5 + i as f32).collect();
        w.write_frame(k as f64 * 2.0, &idx, &vals).unwrap();
    }
    std::fs::write(path, w.finish().unwrap().into_inner()).unwrap();
}

/// indptr, indices, data, times, (nx, ny, nf).
type Csr = (
    Vec<i64>,
    Vec<u32>,
    Vec<f32>,
    Vec<f64>,
    (usize, usize, usize),
);

fn csr_of(path: &Path) -> Csr {
    let PvpFile::Sparse(r) = PvpFile::open(path).unwrap() else {
        panic!("{} is not sparse", path.display())
    };
    let n = r.len().unwrap();
    let c = r.to_csr(0..n).unwrap();
    let times = (0..n).map(|k| r.time(k).unwrap()).collect();
    let l = r.layout();
    (c.indptr, c.indices, c.data, times, (l.nx, l.ny, l.nf))
}

#[test]
fn sparse_pvp_to_npz_and_safetensors_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s.pvp");
    sparse_pvp(&src, 5, 4, 3, 7);
    let want = csr_of(&src);
    let doc = open(&src, &ReadOptions::default()).unwrap();
    for (ext, format) in [("npz", Format::Npz), ("safetensors", Format::Safetensors)] {
        let out = dir.path().join(format!("s.{ext}"));
        let report = doc.convert_to(&out, format).unwrap();
        let back = open(&out, &ReadOptions::default()).unwrap();
        let mut names: Vec<String> = back.tensors().into_iter().map(|i| i.name).collect();
        names.sort();
        assert_eq!(
            names,
            ["data", "frame_shape", "indices", "indptr", "shape", "time"],
            "{ext}"
        );
        assert_eq!(report.written.len(), 6, "{ext}: {report:?}");
        let shape = back.read_tensor("shape").unwrap().to_vec::<i64>().unwrap();
        assert_eq!(shape, [7, 60]);
        let fs = back.read_tensor("frame_shape").unwrap();
        assert_eq!(fs.to_vec::<i64>().unwrap(), [4, 5, 3]);
        let indices = back.read_tensor("indices").unwrap();
        assert_eq!(indices.dtype(), tensorfmt::DType::I32);
        let indices: Vec<u32> = indices
            .to_vec::<i32>()
            .unwrap()
            .iter()
            .map(|&i| i as u32)
            .collect();
        assert_eq!(indices, want.1);
        assert_eq!(
            back.read_tensor("data").unwrap().to_vec::<f32>().unwrap(),
            want.2
        );
        assert_eq!(
            back.read_tensor("time").unwrap().to_vec::<f64>().unwrap(),
            want.3
        );
        if format == Format::Npz {
            let header = back.header();
            let f = header
                .iter()
                .find(|(k, _)| k == "format")
                .map(|(_, v)| v.to_string());
            assert_eq!(f.as_deref(), Some("csr"));
        }
        // And back to PVP: the sparse file again.
        let again = dir.path().join(format!("again_{ext}.pvp"));
        let report = back.convert_to(&again, Format::Pvp).unwrap();
        assert!(!report.dropped_some(), "{ext}: {}", report.summary());
        assert_eq!(csr_of(&again), want, "{ext}");
    }
}

#[test]
fn huge_sparse_stays_small_and_dense_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("big.pvp");
    // 4096 x 4096 x 16 neurons: 1 GiB per dense frame, 3 frames.
    sparse_pvp(&src, 4096, 4096, 16, 3);
    let doc = open(&src, &ReadOptions::default()).unwrap();
    let out = dir.path().join("big.npz");
    doc.convert_to(&out, Format::Npz).unwrap();
    assert!(std::fs::metadata(&out).unwrap().len() < 4096);
    let back = open(&out, &ReadOptions::default()).unwrap();
    assert_eq!(
        back.read_tensor("shape").unwrap().to_vec::<i64>().unwrap(),
        [3, 4096 * 4096 * 16]
    );

    // Densifying beyond the bound is refused, naming the options; nothing is left.
    let dense = WriteOptions {
        sparse: SparseOutput::Dense,
        ..WriteOptions::default()
    };
    let names = doc.names();
    let out2 = dir.path().join("dense.npz");
    let err = doc
        .convert_to_with(&out2, Format::Npz, None, &dense)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--dense") && err.contains("dense=True"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{:.1} GiB",
            MAX_DENSE_BYTES as f64 / (1u64 << 30) as f64
        )),
        "{err}"
    );
    let err = doc
        .convert_to_with(
            dir.path().join("d.npy"),
            Format::Npy,
            Some(&names[..1]),
            &Default::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("to_scipy") && err.contains("npz"), "{err}");
    assert!(!out2.exists() && !dir.path().join("d.npy").exists());
}

#[test]
fn dense_when_asked_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s.pvp");
    sparse_pvp(&src, 5, 4, 3, 2);
    let doc = open(&src, &ReadOptions::default()).unwrap();
    let dense = WriteOptions {
        sparse: SparseOutput::Dense,
        ..WriteOptions::default()
    };
    for (ext, format) in [("npz", Format::Npz), ("safetensors", Format::Safetensors)] {
        let out = dir.path().join(format!("d.{ext}"));
        doc.convert_to_with(&out, format, None, &dense).unwrap();
        let back = open(&out, &ReadOptions::default()).unwrap();
        let v = back.read_tensor("values").unwrap();
        assert_eq!(v.dims(), &[2, 4, 5, 3]);
        assert_eq!(v, doc.read_tensor("values").unwrap());
        // The setting is no metadata of the output.
        assert!(!back
            .header()
            .iter()
            .any(|(k, v)| k == "dense" || v.to_string().contains("\"dense\"")));
    }
}

/// The CSR arrays of an npz / safetensors stand for the original's `values` through
/// `as_original`; their statistics come from the entries and equal the PVP reader's.
#[test]
fn the_csr_view_has_the_original_statistics_from_its_entries() {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/sparse_values_dt4.pvp");
    let dir = tempfile::tempdir().unwrap();
    let pvp = tensorfmt::Document::open(&src).unwrap();
    for via in [Format::Npz, Format::Safetensors] {
        let mid = dir.path().join(format!("x.{}", via.extensions()[0]));
        pvp.convert_to(&mid, via).unwrap();
        let doc = tensorfmt::Document::open(&mid).unwrap();
        let view = tensorfmt::interop::sparse::as_original(&doc)
            .unwrap()
            .expect("a CSR layout");
        assert_eq!(
            view.stats("values").unwrap(),
            pvp.stats("values").unwrap(),
            "{via}"
        );
        assert!(view.source_layout("values").is_none());
    }
}
