//! Legacy MPI dense files (spec §8) of several process grids and frame counts,
//! including those whose plain frame size also divides the file (issue 23 item 6:
//! a6.pvp's geometry, 2x2 processes of 4x4x1, with 3 or 6 frames was read as 11 or
//! 22 frames of 4x4x1 with garbage times).
//!
//! The expected values are what OpenPV's `readpvpfile.m` reads under Octave: process
//! counts `nxGlobal/nx`, `nyGlobal/ny`, frame size `recordsize*datasize*procs + 8`,
//! `nbands` frames, each frame one f64 time and the process blocks in rank order
//! (process row outer, column inner), block (px, py) covering x in [px*nx, ...),
//! y in [py*ny, ...).

use tensorfmt_pvp::{filetype, Header, PvpFile};

/// The global value of neuron (y, x, f) in frame t.
fn value(t: usize, y: usize, x: usize, f: usize) -> f32 {
    (t * 10_000 + y * 100 + x * 10 + f) as f32
}

fn time(t: usize) -> f64 {
    0.5 + t as f64
}

/// A legacy MPI dense file as a 2012 OpenPV run of `xp` x `yp` processes wrote it.
fn mpi_file(nx: usize, ny: usize, nf: usize, xp: usize, yp: usize, frames: usize) -> Vec<u8> {
    let mut h = Header::activity(filetype::DENSE, nx as i32, ny as i32, nf as i32, 3, 4);
    h.nxprocs = xp as i32;
    h.nyprocs = yp as i32;
    h.numrecords = (xp * yp) as i32;
    h.recordsize = (nx * ny * nf) as i32;
    h.nx_extended = (nx * xp) as i32;
    h.ny_extended = (ny * yp) as i32;
    h.nbatch = 0;
    h.nbands = frames as i32;
    h.time = 0.0;
    let mut b = h.to_bytes().to_vec();
    for t in 0..frames {
        b.extend_from_slice(&time(t).to_le_bytes());
        for py in 0..yp {
            for px in 0..xp {
                for y in 0..ny {
                    for x in 0..nx {
                        for f in 0..nf {
                            let v = value(t, py * ny + y, px * nx + x, f);
                            b.extend_from_slice(&v.to_le_bytes());
                        }
                    }
                }
            }
        }
    }
    b
}

/// What readpvpfile.m returns: (time, values as [y][x][f] row-major) per frame.
fn octave_reading(b: &[u8]) -> Vec<(f64, Vec<f32>)> {
    let i = |k: usize| i32::from_le_bytes(b[4 * k..4 * k + 4].try_into().unwrap()) as usize;
    let (nx, ny, nf, recordsize, datasize) = (i(3), i(4), i(5), i(7), i(8));
    let (gnx, gny, nbands) = (i(12), i(13), i(17));
    let (xp, yp) = (gnx / nx, gny / ny);
    let framesize = recordsize * datasize * xp * yp + 8;
    (0..nbands)
        .map(|t| {
            let o = 80 + t * framesize;
            let time = f64::from_le_bytes(b[o..o + 8].try_into().unwrap());
            let mut out = vec![0f32; gnx * gny * nf];
            for p in 0..xp * yp {
                let (px, py) = (p % xp, p / xp);
                for k in 0..recordsize {
                    let s = o + 8 + (p * recordsize + k) * 4;
                    let v = f32::from_le_bytes(b[s..s + 4].try_into().unwrap());
                    let (y, x, f) = (k / (nx * nf), (k / nf) % nx, k % nf);
                    out[((py * ny + y) * gnx + px * nx + x) * nf + f] = v;
                }
            }
            (time, out)
        })
        .collect()
}

fn our_reading(b: &[u8]) -> (Vec<usize>, Vec<(f64, Vec<f32>)>) {
    let PvpFile::Dense(r) = PvpFile::from_bytes(b.to_vec().into()).unwrap() else {
        panic!("not dense")
    };
    let dims = r.frame_dtype_dims().1;
    let frames = r
        .frames()
        .map(|f| {
            let f = f.unwrap();
            (f.time, f.values.to_vec::<f32>().unwrap())
        })
        .collect();
    (dims, frames)
}

#[test]
fn mpi_files_read_as_octave_reads_them() {
    // (nx, ny, nf, nxprocs, nyprocs)
    let grids = [
        (4, 4, 1, 2, 2), // a6.pvp
        (1, 1, 1, 4, 4), // plain frame 12 bytes, MPI frame 72: 6 plain frames each
        (3, 2, 2, 2, 1),
        (2, 3, 1, 1, 3),
        (2, 2, 3, 3, 2),
        (1, 1, 1, 2, 1), // plain 12, MPI 16: 4 MPI frames are 16/3... collide every 3
    ];
    for (nx, ny, nf, xp, yp) in grids {
        for frames in 0..=12 {
            let b = mpi_file(nx, ny, nf, xp, yp, frames);
            let expected = octave_reading(&b);
            let (dims, got) = our_reading(&b);
            let what = format!("{xp}x{yp} processes of {nx}x{ny}x{nf}, {frames} frames");
            assert_eq!(dims, vec![ny * yp, nx * xp, nf], "{what}");
            assert_eq!(got.len(), frames, "{what}");
            assert_eq!(got, expected, "{what}");
            for (t, (tm, v)) in got.iter().enumerate() {
                assert_eq!(*tm, time(t), "{what}");
                assert_eq!(v[0], value(t, 0, 0, 0), "{what}");
            }
        }
    }
}

/// The exact cases: a6.pvp's geometry with 3 and 6 frames.
#[test]
fn a6_geometry_with_3_and_6_frames() {
    for frames in [3, 6] {
        let (dims, got) = our_reading(&mpi_file(4, 4, 1, 2, 2, frames));
        assert_eq!(dims, vec![8, 8, 1]);
        assert_eq!(got.len(), frames);
        let times: Vec<f64> = got.iter().map(|f| f.0).collect();
        assert_eq!(times, (0..frames).map(time).collect::<Vec<_>>());
    }
}

/// The neighbour: a gathered file that keeps nxprocs > 1 but whose header says the
/// frame is global (nxExtended = nx, numrecords = 1, nbands = plain count) stays
/// plain even when the MPI frame size also divides the file.
#[test]
fn gathered_file_with_nxprocs_stays_plain() {
    let (nx, ny, frames) = (4usize, 4usize, 11usize); // 11 * 72 = 3 * 264
    let mut h = Header::activity(filetype::DENSE, nx as i32, ny as i32, 1, 3, 4);
    (h.nxprocs, h.nyprocs, h.nbands) = (2, 2, frames as i32);
    let mut b = h.to_bytes().to_vec();
    for t in 0..frames {
        b.extend_from_slice(&time(t).to_le_bytes());
        for i in 0..nx * ny {
            b.extend_from_slice(&(i as f32).to_le_bytes());
        }
    }
    let (dims, got) = our_reading(&b);
    assert_eq!(dims, vec![4, 4, 1]);
    assert_eq!(got.len(), frames);
    assert_eq!(got[10].0, time(10));
}
