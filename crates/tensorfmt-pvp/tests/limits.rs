//! Hostile headers (allocation bombs) and the facade's `ReadOptions` (limits, strict):
//! every declared size beyond the bytes present or beyond a limit is a typed error,
//! returned fast and before any allocation sized from the file.

use bytes::Bytes;
use tensorfmt_core::testing::{assert_fast as fast, format_error, read_fully};
use tensorfmt_core::{Limits, ReadOptions, TensorFile};
use tensorfmt_pvp::{
    datatype, filetype, open_tensor_file, Header, OpenOptions, PvpError, PvpFile, WeightExtra,
    WeightHeader,
};

/// `unwrap_err` without needing `Debug` on the success value.
trait Fails<E> {
    fn fails(self) -> E;
}

impl<T, E> Fails<E> for Result<T, E> {
    fn fails(self) -> E {
        match self {
            Ok(_) => panic!("expected an error"),
            Err(e) => e,
        }
    }
}

/// Limits small enough that any allocation sized from a hostile header would trip them.
fn tiny() -> Limits {
    Limits {
        max_alloc: 1 << 16,
        max_items: 1 << 12,
        max_rank: 8,
        ..Limits::default()
    }
}

fn opts(strict: bool) -> ReadOptions {
    ReadOptions {
        limits: tiny(),
        strict,
        ..ReadOptions::default()
    }
}

/// Opens through the facade and reads every tensor, then validates; the first error.
fn full_read(b: &[u8], o: &ReadOptions) -> Result<Box<dyn TensorFile>, tensorfmt_core::Error> {
    let f = open_tensor_file(Bytes::copy_from_slice(b), o)?;
    read_fully(f.as_ref())?;
    Ok(f)
}

/// The PVP error inside a facade error.
fn pvp(e: &tensorfmt_core::Error) -> &PvpError {
    format_error::<PvpError>(e)
}

fn dense(nx: i32, ny: i32, nf: i32, frames: usize) -> Vec<u8> {
    let mut h = Header::activity(filetype::DENSE, nx, ny, nf, datatype::FLOAT, 4);
    h.nbands = frames as i32;
    let mut b = h.to_bytes().to_vec();
    let per = (nx * ny * nf) as usize;
    for k in 0..frames {
        b.extend_from_slice(&(k as f64).to_le_bytes());
        for i in 0..per {
            b.extend_from_slice(&(i as f32).to_le_bytes());
        }
    }
    b
}

fn set_i32(b: &mut [u8], index: usize, v: i32) {
    b[index * 4..index * 4 + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn dense_header_claiming_2_pow_31_frames() {
    let mut b = dense(2, 2, 1, 1);
    set_i32(&mut b, 17, i32::MAX); // nbands
    let e = fast("strict", || full_read(&b, &opts(true)).fails());
    assert!(
        matches!(
            pvp(&e),
            PvpError::BadField {
                field: "nbands",
                offset: 68,
                ..
            }
        ),
        "{e}"
    );
    // Lenient: the real frame count wins, with a warning.
    let f = fast("lenient", || full_read(&b, &opts(false)).unwrap());
    assert_eq!(f.tensors()[0].shape.dims(), &[1, 2, 2, 1]);
    assert!(f.warnings().iter().any(|w| w.contains("nbands")));
}

#[test]
fn dense_frame_size_overflow_and_oversize() {
    // nx*ny*nf*4 overflows u64.
    let mut b = dense(2, 2, 1, 1);
    for i in 3..6 {
        set_i32(&mut b, i, i32::MAX);
    }
    for strict in [false, true] {
        let e = fast("overflow", || full_read(&b, &opts(strict)).fails());
        assert!(matches!(pvp(&e), PvpError::Overflow(_)), "{e}");
    }
    // 2^16 x 2^16 x 1000 floats per frame in a 100-byte file: more than the file holds.
    let mut b = dense(2, 2, 1, 1);
    for (i, v) in [(3, 65536), (4, 65536), (5, 1000)] {
        set_i32(&mut b, i, v);
    }
    for strict in [false, true] {
        let e = fast("oversize", || full_read(&b, &opts(strict)).fails());
        assert!(
            matches!(pvp(&e), PvpError::Truncated { offset: 80, .. }),
            "{e}"
        );
    }
}

#[test]
fn dense_allocation_and_rank_limits() {
    let b = dense(64, 64, 4, 3); // 64 KiB per frame
    let o = ReadOptions {
        limits: Limits {
            max_alloc: 1000,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let f = open_tensor_file(Bytes::from(b.clone()), &o).unwrap();
    let e = fast("alloc", || f.read_tensor("values").fails());
    assert!(
        matches!(
            pvp(&e),
            PvpError::LimitExceeded {
                what: "allocation",
                limit: 1000,
                ..
            }
        ),
        "{e}"
    );
    // Streaming a frame at a time is zero-copy: no allocation to limit.
    assert_eq!(f.read_chunks("values").unwrap().count(), 3);
    let o = ReadOptions {
        limits: Limits {
            max_rank: 3,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let e = open_tensor_file(Bytes::from(b.clone()), &o).fails();
    assert!(matches!(
        e,
        PvpError::LimitExceeded {
            what: "tensor rank",
            value: 4,
            ..
        }
    ));
    let o = ReadOptions {
        limits: Limits {
            max_items: 2,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let e = open_tensor_file(Bytes::from(b), &o).fails();
    assert!(matches!(
        e,
        PvpError::LimitExceeded {
            what: "frame count",
            value: 3,
            ..
        }
    ));
}

fn sparse_frame(b: &mut Vec<u8>, time: f64, idx: &[u32]) {
    b.extend_from_slice(&time.to_le_bytes());
    b.extend_from_slice(&(idx.len() as i32).to_le_bytes());
    for &i in idx {
        b.extend_from_slice(&i.to_le_bytes());
    }
}

#[test]
fn sparse_frame_claiming_2_pow_30_entries() {
    let mut h = Header::activity(filetype::SPARSE_BINARY, 8, 8, 1, datatype::INT, 4);
    h.nbands = 2;
    let mut b = h.to_bytes().to_vec();
    sparse_frame(&mut b, 0.0, &[1, 2, 3]);
    let bomb = b.len();
    sparse_frame(&mut b, 1.0, &[4]);
    set_i32(&mut b[bomb + 8..], 0, 1 << 30);
    let limits = Limits {
        max_items: u64::MAX,
        ..tiny()
    };
    let strict = ReadOptions {
        limits,
        strict: true,
        ..ReadOptions::default()
    };
    let e = fast("strict", || full_read(&b, &strict).fails());
    match pvp(&e) {
        PvpError::Truncated { offset, needed, .. } => {
            assert_eq!((*offset, *needed), (bomb as u64, 12 + (4u64 << 30)))
        }
        other => panic!("{other}"),
    }
    // Lenient: the whole frame before it, with a warning.
    let lenient = ReadOptions {
        strict: false,
        ..strict.clone()
    };
    let f = fast("lenient", || full_read(&b, &lenient).unwrap());
    assert_eq!(f.read_tensor("values").unwrap().dims(), &[1, 8, 8, 1]);
    assert!(f.warnings().iter().any(|w| w.contains("partial frame 1")));
    // As the first frame: nothing whole, an error either way.
    let mut b0 = h.to_bytes().to_vec();
    sparse_frame(&mut b0, 0.0, &[4]);
    set_i32(&mut b0[88..], 0, 1 << 30);
    let e = fast("first", || full_read(&b0, &lenient).fails());
    assert!(
        matches!(pvp(&e), PvpError::Truncated { offset: 80, .. }),
        "{e}"
    );
    // The per-frame entry count is an item count too.
    let e = fast("items", || full_read(&b, &opts(false)).fails());
    assert!(
        matches!(
            pvp(&e),
            PvpError::LimitExceeded {
                what: "active entries in one frame",
                ..
            }
        ),
        "{e}"
    );
    // nx*ny*nf beyond u32 indices.
    let mut c = b.clone();
    for i in 3..6 {
        set_i32(&mut c, i, i32::MAX);
    }
    assert!(matches!(
        open_tensor_file(c.into(), &opts(false)),
        Err(PvpError::Overflow(_))
    ));
}

#[test]
fn sparse_frame_table_and_decoded_size_are_limited() {
    // Many empty frames: the scan stops at max_items.
    let mut h = Header::activity(filetype::SPARSE_BINARY, 1000, 1000, 1, datatype::INT, 4);
    h.nbands = 5000;
    let mut b = h.to_bytes().to_vec();
    for k in 0..5000 {
        sparse_frame(&mut b, k as f64, &[]);
    }
    let e = fast("frames", || {
        open_tensor_file(Bytes::from(b.clone()), &opts(false)).fails()
    });
    assert!(
        matches!(
            e,
            PvpError::LimitExceeded {
                what: "frame count",
                ..
            }
        ),
        "{e}"
    );
    // Dense decoding of 1e6-neuron frames is an allocation beyond max_alloc.
    let o = ReadOptions {
        limits: Limits {
            max_alloc: 1 << 20,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let f = open_tensor_file(Bytes::from(b), &o).unwrap();
    let e = fast("dense", || f.read_tensor("values").fails());
    assert!(
        matches!(
            pvp(&e),
            PvpError::LimitExceeded {
                what: "allocation",
                ..
            }
        ),
        "{e}"
    );
}

fn kernel(nxp: i32, nyp: i32, nfp: i32, numpatches: i32, arbors: i32) -> Vec<u8> {
    let mut base = Header::activity(
        filetype::SHARED_WEIGHTS,
        1,
        1,
        numpatches,
        datatype::FLOAT,
        4,
    );
    base.headersize = 104;
    base.numparams = 26;
    base.numrecords = arbors;
    base.nbands = arbors;
    let h = WeightHeader {
        base,
        extra: WeightExtra {
            nxp,
            nyp,
            nfp,
            wmin: 0.0,
            wmax: 1.0,
            numpatches,
        },
    };
    let mut b = h.to_bytes().to_vec();
    let vals = (nxp * nyp * nfp) as usize;
    for _ in 0..arbors * numpatches {
        b.extend_from_slice(&(nxp as u16).to_le_bytes());
        b.extend_from_slice(&(nyp as u16).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend(std::iter::repeat_n(0u8, vals * 4));
    }
    b
}

#[test]
fn weight_bombs() {
    let good = kernel(2, 2, 1, 3, 1);
    assert!(full_read(&good, &opts(true)).is_ok());
    // Huge patch counts in a small file: no frame size fits.
    let mut b = good.clone();
    set_i32(&mut b, 25, i32::MAX);
    for strict in [false, true] {
        let e = fast("numpatches", || full_read(&b, &opts(strict)).fails());
        assert!(matches!(pvp(&e), PvpError::BadSize { .. }), "{e}");
    }
    // nxp*nyp*nfp*4 overflows.
    let mut b = good.clone();
    for i in 20..23 {
        set_i32(&mut b, i, i32::MAX);
    }
    let e = fast("patch", || full_read(&b, &opts(false)).fails());
    assert!(matches!(pvp(&e), PvpError::Overflow(_)), "{e}");
    // 2^31 arbors.
    let mut b = good.clone();
    set_i32(&mut b, 17, i32::MAX);
    set_i32(&mut b, 6, i32::MAX);
    let f = fast("arbors", || full_read(&b, &opts(false)).unwrap());
    assert!(f.warnings().iter().any(|w| w.contains("arbor count 1")));
    // Patches per frame beyond max_items; decoded frame beyond max_alloc.
    let many = kernel(1, 1, 1, 5000, 1);
    let e = fast("patches", || full_read(&many, &opts(false)).fails());
    assert!(
        matches!(e, tensorfmt_core::Error::Format { .. })
            && matches!(
                pvp(&e),
                PvpError::LimitExceeded {
                    what: "patches per frame",
                    ..
                }
            ),
        "{e}"
    );
    let big = kernel(64, 64, 4, 2, 1);
    let e = fast("alloc", || full_read(&big, &opts(false)).fails());
    assert!(
        matches!(
            pvp(&e),
            PvpError::LimitExceeded {
                what: "allocation",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn strict_is_wired_through_the_facade() {
    // A crash-truncated dense file: three whole frames and half of a fourth, nbands 3.
    let mut b = dense(4, 2, 1, 3);
    let frame = 8 + 4 * 8;
    b.extend_from_slice(&dense(4, 2, 1, 1)[80..80 + frame / 2]);
    let lenient = full_read(&b, &ReadOptions::default()).unwrap();
    assert_eq!(
        lenient
            .read_tensor("time")
            .unwrap()
            .to_vec::<f64>()
            .unwrap(),
        vec![0.0, 1.0, 2.0]
    );
    assert!(lenient
        .warnings()
        .iter()
        .any(|w| w.contains("partial frame 3")));
    let strict = ReadOptions {
        strict: true,
        ..ReadOptions::default()
    };
    let e = full_read(&b, &strict).fails();
    assert!(
        matches!(pvp(&e), PvpError::Truncated { offset, .. } if *offset == 80 + 3 * frame as u64),
        "{e}"
    );
    // nbands left one short by a crash between the frame and the header patch.
    let mut b = dense(4, 2, 1, 3);
    set_i32(&mut b, 17, 2);
    assert!(full_read(&b, &ReadOptions::default()).is_ok());
    let e = full_read(&b, &strict).fails();
    assert!(
        matches!(
            pvp(&e),
            PvpError::BadField {
                field: "nbands",
                ..
            }
        ),
        "{e}"
    );
    // Duplicate sparse indices: accepted leniently, refused strictly.
    let mut h = Header::activity(filetype::SPARSE_BINARY, 4, 1, 1, datatype::INT, 4);
    h.nbands = 1;
    let mut b = h.to_bytes().to_vec();
    sparse_frame(&mut b, 0.0, &[1, 1]);
    assert!(full_read(&b, &ReadOptions::default()).is_ok());
    let e = full_read(&b, &strict).fails();
    assert!(matches!(pvp(&e), PvpError::BadIndex { .. }), "{e}");
    // A truncated weight file: whole frames leniently, an error strictly.
    let mut w = kernel(2, 2, 1, 3, 1);
    let one = w.len();
    w.extend_from_slice(&w.clone()[..one - 7]);
    let f = full_read(&w, &ReadOptions::default()).unwrap();
    assert_eq!(f.tensors()[0].shape.dims()[0], 1);
    assert!(
        f.warnings().iter().any(|x| x.contains("partial frame 1")),
        "{:?}",
        f.warnings()
    );
    let e = full_read(&w, &strict).fails();
    assert!(matches!(pvp(&e), PvpError::BadSize { .. }), "{e}");
    // The typed API keeps its own default (truncation is an error).
    assert!(PvpFile::from_bytes_with(Bytes::from(w), &OpenOptions::default()).is_err());
}
