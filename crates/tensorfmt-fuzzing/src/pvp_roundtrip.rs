//! The `pvp_roundtrip` fuzz target's body, a structured round trip for PVP files: a
//! random valid description (kind, dims, element type, frames, values) is written with
//! our streaming writers (sometimes in two sessions, the second through `append`), read
//! back strictly (typed readers and the TensorFile view) and must be equal: bit for
//! bit, except byte weights, which are within (wMax - wMin) / 510 of the input.
use std::io::Cursor;

use arbitrary::Arbitrary;
use bytes::Bytes;
use tensorfmt_core::ReadOptions;
use tensorfmt_pvp::write::{DenseWriter, SparseWriter, WeightGeometry, WeightWriter};
use tensorfmt_pvp::{OpenOptions, PvpFile};

#[derive(Arbitrary, Debug)]
enum Kind {
    Dense,
    SparseBinary,
    SparseValues { datatype4: bool },
    Kernel { bytes: bool },
    NonShared { bytes: bool, mx: u8, my: u8 },
}

#[derive(Arbitrary, Debug)]
struct Desc {
    kind: Kind,
    nx: u8,
    ny: u8,
    nf: u8,
    patch: (u8, u8, u8),
    arbors: u8,
    frames: u8,
    /// Frames written before re-opening with `append` (dense, sparse, weights).
    split: u8,
    times: Vec<u64>,
    values: Vec<u32>,
    /// Per frame, which neurons are active (sparse).
    active: Vec<Vec<u16>>,
}

fn value(d: &Desc, i: usize) -> f32 {
    if d.values.is_empty() {
        0.0
    } else {
        f32::from_bits(d.values[i % d.values.len()])
    }
}

fn time(d: &Desc, k: usize) -> f64 {
    if d.times.is_empty() {
        k as f64
    } else {
        f64::from_bits(d.times[k % d.times.len()])
    }
}

fn strict() -> OpenOptions {
    OpenOptions {
        strict: true,
        ..OpenOptions::default()
    }
}

/// What kind of file a description writes.
fn kind(d: &Desc) -> &'static str {
    match d.kind {
        Kind::Dense => "dense",
        Kind::SparseBinary => "sparse binary",
        Kind::SparseValues { datatype4: false } => "sparse values",
        Kind::SparseValues { datatype4: true } => "sparse values datatype 4",
        Kind::Kernel { bytes: false } => "kernel f32",
        Kind::Kernel { bytes: true } => "kernel byte",
        Kind::NonShared { bytes: false, .. } => "non-shared f32",
        Kind::NonShared { bytes: true, .. } => "non-shared byte",
    }
}

/// Builds a description from `data` (as `fuzz_target!(|d: Desc| ..)` would), writes
/// it, reads it back and compares; returns the kind of file written (none when `data`
/// is too short for a description).
///
/// ```
/// assert_eq!(tensorfmt_fuzzing::pvp_roundtrip(&[0; 64]), Some("dense"));
/// ```
pub fn pvp_roundtrip(data: &[u8]) -> Option<&'static str> {
    let d: Desc = crate::take_rest(data)?;
    let (nx, ny, nf) = (
        (d.nx % 6) as usize + 1,
        (d.ny % 6) as usize + 1,
        (d.nf % 4) as usize + 1,
    );
    let frames = (d.frames % 6) as usize;
    let split = (d.split as usize) % (frames + 1);
    let n = nx * ny * nf;
    let mut buf = Cursor::new(Vec::new());
    match d.kind {
        Kind::Dense => {
            let frame = |k: usize| -> Vec<f32> { (0..n).map(|i| value(&d, k * n + i)).collect() };
            let mut w = DenseWriter::new(&mut buf, nx, ny, nf).unwrap();
            for k in 0..split {
                w.write_frame(time(&d, k), &frame(k)).unwrap();
            }
            w.finish().unwrap();
            let mut w = DenseWriter::append(&mut buf).unwrap();
            assert_eq!(w.frames(), split);
            for k in split..frames {
                w.write_frame(time(&d, k), &frame(k)).unwrap();
            }
            w.finish().unwrap();
            let bytes = Bytes::from(buf.into_inner());
            let PvpFile::Dense(r) = PvpFile::from_bytes_with(bytes.clone(), &strict()).unwrap()
            else {
                panic!("not dense")
            };
            assert_eq!(r.len(), frames);
            for k in 0..frames {
                let f = r.frame(k).unwrap();
                assert_eq!(f.time.to_bits(), time(&d, k).to_bits());
                assert_eq!(f.values.dims(), &[ny, nx, nf]);
                let got: Vec<u32> = f
                    .values
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                let want: Vec<u32> = frame(k).iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want, "frame {k}");
            }
            facade(bytes, frames);
        }
        Kind::SparseBinary | Kind::SparseValues { .. } => {
            let values = !matches!(d.kind, Kind::SparseBinary);
            let frame = |k: usize| -> (Vec<u32>, Vec<f32>) {
                let mut idx: Vec<u32> = d
                    .active
                    .get(k)
                    .map(|a| a.iter().map(|&i| (i as usize % n) as u32).collect())
                    .unwrap_or_default();
                idx.sort_unstable();
                idx.dedup();
                let v = if values {
                    idx.iter()
                        .enumerate()
                        .map(|(j, _)| value(&d, k * 64 + j))
                        .collect()
                } else {
                    Vec::new()
                };
                (idx, v)
            };
            let make = |b| match d.kind {
                Kind::SparseValues { datatype4: true } => {
                    SparseWriter::values_datatype4(b, nx, ny, nf)
                }
                Kind::SparseValues { .. } => SparseWriter::values(b, nx, ny, nf),
                _ => SparseWriter::binary(b, nx, ny, nf),
            };
            let mut w: SparseWriter<&mut Cursor<Vec<u8>>> = make(&mut buf).unwrap();
            for k in 0..split {
                let (i, v) = frame(k);
                // Written in reverse order: the writer sorts.
                let (ri, rv): (Vec<u32>, Vec<f32>) = i
                    .iter()
                    .rev()
                    .zip(v.iter().rev().chain(std::iter::repeat(&0.0)).take(i.len()))
                    .map(|(a, b)| (*a, *b))
                    .unzip();
                w.write_frame(time(&d, k), &ri, if values { &rv } else { &[] })
                    .unwrap();
            }
            w.finish().unwrap();
            let mut w = SparseWriter::append(&mut buf).unwrap();
            assert_eq!(w.frames(), split);
            for k in split..frames {
                let (i, v) = frame(k);
                w.write_frame(time(&d, k), &i, &v).unwrap();
            }
            w.finish().unwrap();
            let bytes = Bytes::from(buf.into_inner());
            let PvpFile::Sparse(r) = PvpFile::from_bytes_with(bytes.clone(), &strict()).unwrap()
            else {
                panic!("not sparse")
            };
            assert_eq!(r.len().unwrap(), frames);
            for k in 0..frames {
                let f = r.frame(k).unwrap();
                let (i, v) = frame(k);
                assert_eq!(f.time.to_bits(), time(&d, k).to_bits());
                assert_eq!(f.indices, i);
                let want: Vec<u32> = if values {
                    v.iter().map(|x| x.to_bits()).collect()
                } else {
                    vec![1f32.to_bits(); i.len()]
                };
                let got: Vec<u32> = f.values.iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, want);
            }
            facade(bytes, frames);
        }
        Kind::Kernel { bytes: byte } | Kind::NonShared { bytes: byte, .. } => {
            let (nxp, nyp, nfp) = (
                (d.patch.0 % 4) as usize + 1,
                (d.patch.1 % 4) as usize + 1,
                (d.patch.2 % 3) as usize + 1,
            );
            let arbors = (d.arbors % 3) as usize + 1;
            let g = match d.kind {
                Kind::NonShared { mx, my, .. } => WeightGeometry::non_shared(
                    nx,
                    ny,
                    nf,
                    (mx % 3) as usize,
                    (my % 3) as usize,
                    nxp,
                    nyp,
                    nfp,
                    arbors,
                ),
                _ => WeightGeometry::kernel(nx, ny, nf, nxp, nyp, nfp, arbors),
            };
            let nv = g.frame_values().unwrap();
            let frames = frames.max(1);
            let split = split.clamp(1, frames);
            let frame = |k: usize| -> Vec<f32> {
                (0..nv)
                    .map(|i| {
                        let v = value(&d, k * nv + i);
                        // Byte weights need finite values (and a sane range).
                        if byte {
                            if v.is_finite() {
                                v.clamp(-1e30, 1e30)
                            } else {
                                0.0
                            }
                        } else {
                            v
                        }
                    })
                    .collect()
            };
            let mut w = WeightWriter::new(&mut buf, g, byte).unwrap();
            for k in 0..split {
                w.write_frame(time(&d, k), &frame(k)).unwrap();
            }
            w.finish().unwrap();
            let mut w = WeightWriter::append(&mut buf).unwrap();
            assert_eq!(w.frames(), split);
            for k in split..frames {
                w.write_frame(time(&d, k), &frame(k)).unwrap();
            }
            w.finish().unwrap();
            let bytes = Bytes::from(buf.into_inner());
            let PvpFile::Weights(r) = PvpFile::from_bytes_with(bytes.clone(), &strict()).unwrap()
            else {
                panic!("not weights")
            };
            assert_eq!(r.len(), frames);
            assert_eq!(r.layout().arbors, arbors);
            for k in 0..frames {
                let f = r.frame(k).unwrap();
                assert_eq!(f.time().to_bits(), time(&d, k).to_bits());
                let got = f.weights.to_vec::<f32>().unwrap();
                let want = frame(k);
                if byte {
                    let (lo, hi) = (f.wmin() as f64, f.wmax() as f64);
                    let tol = (hi - lo) / 510.0 + (hi.abs() + lo.abs()) * 1e-6 + 1e-30;
                    for (g, w) in got.iter().zip(&want) {
                        assert!(
                            ((*g as f64) - (*w as f64)).abs() <= tol,
                            "{g} vs {w} (range {lo}..{hi})"
                        );
                    }
                } else {
                    let got: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
                    let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(got, want, "frame {k}");
                }
            }
            facade(bytes, frames);
        }
    }
    Some(kind(&d))
}

/// The TensorFile view (strict, dense and CSR) lists and reads every tensor.
fn facade(bytes: Bytes, frames: usize) {
    for sparse_csr in [false, true] {
        let o = ReadOptions {
            strict: true,
            sparse_csr,
            ..Default::default()
        };
        let f = tensorfmt_pvp::open_tensor_file(bytes.clone(), &o).unwrap();
        assert!(f.warnings().is_empty(), "{:?}", f.warnings());
        for info in f.tensors() {
            let t = f.read_tensor(&info.name).unwrap();
            assert_eq!(t.dims(), info.shape.dims(), "{}", info.name);
        }
        assert_eq!(f.read_tensor("time").unwrap().numel(), frames);
        f.validate().unwrap();
    }
}

#[cfg(test)]
mod tests {
    use crate::inputs::{descriptions, kinds};

    #[test]
    fn every_kind_round_trips() {
        let reached = kinds(
            "pvp_roundtrip",
            &descriptions(3000, 15),
            super::pvp_roundtrip,
        );
        let all = [
            "dense",
            "sparse binary",
            "sparse values",
            "sparse values datatype 4",
            "kernel f32",
            "kernel byte",
            "non-shared f32",
            "non-shared byte",
        ];
        for kind in all {
            assert!(
                reached.get(kind).is_some_and(|&n| n >= 20),
                "{kind}: {reached:?}"
            );
        }
    }
}
