//! One-run throughput summary for every format, printed as a markdown table.
//!
//! For each format, N rounds (min and median over the rounds are printed): each round
//! makes a file of about 64 MiB of f32 payload, then runs each of the following once
//! after a warm-up, one after another, so every path and its baseline alternate:
//! * `memcpy`: the payload copied into a reused, pre-faulted buffer (the zero-copy
//!   baseline), and `fresh Vec`: each tensor's bytes copied into a new allocation of
//!   its size (the owned baseline: large fresh buffers pay page faults, buffers the
//!   allocator recycles do not, so the baseline allocates like the owned paths);
//! * zero-copy read: open the mapped file and walk every tensor's pieces through the
//!   facade (`read_chunks`), reading every byte (a vectorised XOR, as the format benches
//!   do); for formats whose layout needs a transform (primitiv: column-major to
//!   row-major; caffe: packed floats are decoded) the facade copies, so their native
//!   zero-copy view is measured too;
//! * owned read: open and decode every tensor into a fresh `Vec<f32>`
//!   (`read_tensor` + `to_vec`);
//! * write: the format's writer from in-memory tensors to a file (`tensorfmt::save`),
//!   against `memcpy` and against `std::fs::write` of the same bytes (the floor for
//!   writing a file: the kernel copies every byte into the page cache).
//!
//! `cargo run --release -p tensorfmt-benches --bin summary -- [REPS] [FORMAT]`

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tensorfmt::{Format, Order, ReadOptions, Tensor, WriteOptions};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const MIB: usize = 1 << 20;

fn best<T>(reps: usize, mut f: impl FnMut() -> T) -> Duration {
    black_box(f()); // warm-up
    (0..reps)
        .map(|_| {
            let t0 = Instant::now();
            black_box(f());
            t0.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Reads every byte: XOR of 8-byte words (vectorises; works at any alignment).
fn touch(b: &[u8]) -> u64 {
    let mut acc = [0u64; 4];
    let mut words = b.chunks_exact(32);
    for w in &mut words {
        for (a, x) in acc.iter_mut().zip(w.chunks_exact(8)) {
            *a ^= u64::from_le_bytes(x.try_into().unwrap_or_default());
        }
    }
    let tail = words.remainder().iter().fold(0u64, |a, &x| a ^ x as u64);
    acc.iter().fold(tail, |a, &x| a ^ x)
}

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + seed) % 1000) as f32 * 1e-3)
        .collect()
}

/// Builds the file for one format in `dir`; returns its path.
fn make(format: Format, dir: &Path) -> Res<PathBuf> {
    let floats = 64 * MIB / 4;
    Ok(match format {
        Format::Pvp => {
            let p = dir.join("a.pvp");
            let (nx, ny, nf) = (128, 128, 8); // 512 KiB frames
            let f = std::io::BufWriter::new(std::fs::File::create(&p)?);
            let mut w = tensorfmt::pvp::write::DenseWriter::new(f, nx, ny, nf)?;
            for k in 0..floats / (nx * ny * nf) {
                w.write_frame(k as f64, &values(nx * ny * nf, k))?;
            }
            w.finish()?;
            p
        }
        Format::Som => {
            let p = dir.join("a.bin");
            let side = 128; // 64 KiB entries
            let mut w = tensorfmt::som::DataWriter::create(
                &p,
                &[side, side],
                &tensorfmt::som::WriteConfig::default(),
            )?;
            for k in 0..floats / (side * side) {
                let e: Vec<u8> = values(side * side, k)
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect();
                w.append_bytes(&e)?;
            }
            w.commit()?;
            p
        }
        Format::Caffe => {
            // One BlobProto: key 2a, varint length, packed floats, then the shape.
            let p = dir.join("a.binaryproto");
            let rows = floats / 1024;
            let mut out = vec![0x2a];
            let mut len = (floats * 4) as u64;
            while len >= 0x80 {
                out.push(len as u8 | 0x80);
                len >>= 7;
            }
            out.push(len as u8);
            for v in values(floats, 0) {
                out.extend_from_slice(&v.to_le_bytes());
            }
            let mut dims = Vec::new();
            for mut d in [rows as u64, 1024] {
                while d >= 0x80 {
                    dims.push(d as u8 | 0x80);
                    d >>= 7;
                }
                dims.push(d as u8);
            }
            out.extend_from_slice(&[0x3a, dims.len() as u8 + 2, 0x0a, dims.len() as u8]);
            out.extend_from_slice(&dims);
            std::fs::write(&p, out)?;
            p
        }
        _ => {
            // 16 tensors of [1024, 1024] f32 (4 MiB each); npy holds one [16384, 1024].
            let ext = match format {
                Format::Npy => "npy",
                Format::Npz => "npz",
                Format::Safetensors => "safetensors",
                _ => "data",
            };
            let p = dir.join(format!("a.{ext}"));
            let tensors: Vec<(String, Tensor)> = if format == Format::Npy {
                vec![(
                    "a".into(),
                    Tensor::from_vec(values(floats, 0), [floats / 1024, 1024], Order::RowMajor)?,
                )]
            } else {
                (0..16)
                    .map(|i| -> Res<(String, Tensor)> {
                        let v = values(1024 * 1024, i);
                        let t = if format == Format::Primitiv {
                            Tensor::from_vec(v, [1024, 1024], Order::ColumnMajor)?
                        } else {
                            Tensor::from_vec(v, [1024, 1024], Order::RowMajor)?
                        };
                        Ok((format!("layer{i:02}.w"), t))
                    })
                    .collect::<Res<_>>()?
            };
            tensorfmt::save(&p, format, &tensors, &WriteOptions::default())?;
            p
        }
    })
}

struct Row {
    name: String,
    payload: usize,
    memcpy: Duration,
    fresh: Duration,
    zero_copy: Duration,
    zero_copy_note: &'static str,
    native: Option<(Duration, &'static str)>,
    owned: Duration,
    write: Duration,
    fs_write: Duration,
}

fn measure(format: Format, dir: &Path, reps: usize) -> Res<Row> {
    let path = make(format, dir)?;
    let o = ReadOptions::default();
    let data = tensorfmt::io::map_file(&path)?;
    let file = tensorfmt::open_bytes(data.clone(), format, Some(&path), &o)?;
    let infos = file.tensors();
    let payload: usize = infos
        .iter()
        .map(|i| i.shape.byte_len(i.dtype.size()).unwrap_or(0))
        .sum();
    // Warm the page cache and check the content is what was written.
    black_box(touch(&data));
    let src: Vec<u8> = data[..payload.min(data.len())].to_vec();
    let mut dst = vec![0u8; src.len()];
    let memcpy = best(reps, || dst.copy_from_slice(&src));
    // The owned paths allocate one buffer per tensor: so does this baseline (the
    // allocator reuses small freed buffers without new page faults, large ones not).
    let sizes: Vec<usize> = infos
        .iter()
        .map(|i| i.shape.byte_len(i.dtype.size()).unwrap_or(0))
        .collect();
    let fresh = best(reps, || {
        let mut at = 0;
        for &n in &sizes {
            let n = n.min(src.len() - at);
            black_box(src[at..at + n].to_vec());
            at += n;
        }
    });
    let inside = |b: &Bytes| {
        let (a, n) = (data.as_ptr() as usize, data.len());
        let p = b.as_ptr() as usize;
        b.is_empty() || (p >= a && p + b.len() <= a + n)
    };
    let mut copied = 0usize;
    let zero_copy = best(reps, || -> u64 {
        let f = tensorfmt::open_bytes(data.clone(), format, Some(&path), &o).unwrap();
        let mut acc = 0;
        for i in f.tensors() {
            for c in f.read_chunks(&i.name).unwrap() {
                let c = c.unwrap();
                if !inside(c.bytes()) {
                    copied += c.bytes().len();
                }
                acc ^= touch(c.bytes());
            }
        }
        acc
    });
    // Small side tensors (PVP frame times) are built, not viewed: ignore them.
    let copies = copied > payload / 100;
    let zero_copy_note = if copies {
        match format {
            Format::Primitiv => "copies: column-major to row-major",
            _ => "copies",
        }
    } else {
        ""
    };
    let native = match format {
        Format::Primitiv if copies => Some((
            best(reps, || -> u64 {
                let d = tensorfmt::primitiv::read_file(
                    data.clone(),
                    &tensorfmt::primitiv::ReaderOptions::default(),
                )
                .unwrap();
                let tensorfmt::primitiv::PrimitivData::Model(m) = d.data else {
                    return 0;
                };
                m.entries()
                    .map(|(_, p)| touch(p.value().to_core().unwrap().bytes()))
                    .fold(0, |a, x| a ^ x)
            }),
            "primitiv::read_file, column-major views",
        )),
        _ => None,
    };
    let owned = best(reps, || -> usize {
        let f = tensorfmt::open_bytes(data.clone(), format, Some(&path), &o).unwrap();
        let mut n = 0;
        for i in f.tensors() {
            let t = f.read_tensor(&i.name).unwrap();
            // Owned: the decoded tensor when the reader made one, else one copy of
            // the view into the file.
            if !inside(t.bytes()) {
                n += black_box(t).numel();
            } else if t.dtype() == tensorfmt::DType::F32 {
                n += black_box(t.to_vec::<f32>().unwrap()).len();
            } else {
                n += black_box(t.bytes().to_vec()).len();
            }
        }
        n
    });
    // Write: the tensors as read (owned, in memory) through the format's writer.
    let tensors: Vec<(String, Tensor)> = infos
        .iter()
        .map(|i| -> Res<(String, Tensor)> {
            let t = file.read_tensor(&i.name)?;
            let t = Tensor::from_bytes(
                t.dtype(),
                t.shape().clone(),
                t.order(),
                Bytes::from(t.bytes().to_vec()),
            )?;
            Ok((i.name.clone(), t))
        })
        .collect::<Res<_>>()?;
    let out = dir.join(format!(
        "out.{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or("x")
    ));
    let wo = WriteOptions {
        kind: (format == Format::Caffe).then(|| "binaryproto".to_string()),
        ..WriteOptions::default()
    };
    let write = best(reps, || {
        tensorfmt::save(&out, format, &tensors, &wo).unwrap()
    });
    let written = std::fs::read(&out)?;
    let back = tensorfmt::open_bytes(Bytes::from(written), format, Some(&out), &o)?;
    let names = back.tensors();
    for ((n, t), info) in tensors.iter().zip(&names) {
        let name = if format == Format::Npy { &info.name } else { n };
        if &back.read_tensor(name)? != t {
            return Err(format!("{format}: {n} does not read back").into());
        }
    }
    let plain = dir.join("plain.bin");
    let fs_write = best(reps, || std::fs::write(&plain, &src).unwrap());
    for p in [&path, &out, &plain] {
        std::fs::remove_file(p)?;
    }
    Ok(Row {
        name: format.to_string(),
        payload,
        memcpy,
        fresh,
        zero_copy,
        zero_copy_note,
        native,
        owned,
        write,
        fs_write,
    })
}

fn main() -> Res<()> {
    let reps: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(7);
    // An optional second argument limits the run to one format (for profiling).
    let only = std::env::args().nth(2);
    let dir = tempfile::tempdir()?;
    let gbs = |bytes: usize, d: Duration| bytes as f64 / 1e9 / d.as_secs_f64();
    let pct = |base: Duration, d: Duration| 100.0 * base.as_secs_f64() / d.as_secs_f64();
    println!(
        "min / median of {reps} rounds (each path and its baselines once per round, after a warm-up); GB/s of f32 payload; % = baseline time / path time\n"
    );
    println!("| format | MiB | memcpy GB/s | fresh Vec GB/s | zero-copy read GB/s (% memcpy) | owned read GB/s (% fresh Vec) | write GB/s (% memcpy, % fs::write) |");
    println!("|---|---|---|---|---|---|---|");
    let mut notes = Vec::new();
    for format in [
        Format::Pvp,
        Format::Som,
        Format::Primitiv,
        Format::Caffe,
        Format::Npy,
        Format::Npz,
        Format::Safetensors,
    ] {
        if only.as_ref().is_some_and(|o| *o != format.to_string()) {
            continue;
        }
        let rounds: Vec<Row> = (0..reps)
            .map(|_| measure(format, dir.path(), 1))
            .collect::<Res<_>>()?;
        let r = &rounds[0];
        let p = r.payload;
        // Min and median over the rounds of one column.
        let mm = |f: &dyn Fn(&Row) -> Duration| -> [Duration; 2] {
            let mut v: Vec<Duration> = rounds.iter().map(f).collect();
            v.sort();
            [v[0], v[v.len() / 2]]
        };
        let (memcpy, fresh, zero_copy) =
            (mm(&|r| r.memcpy), mm(&|r| r.fresh), mm(&|r| r.zero_copy));
        let (owned, write, fs_write) = (mm(&|r| r.owned), mm(&|r| r.write), mm(&|r| r.fs_write));
        // "min / median" of a throughput, and of a percentage against a baseline.
        let g = |d: [Duration; 2]| format!("{:.2} / {:.2}", gbs(p, d[0]), gbs(p, d[1]));
        let c = |base: [Duration; 2], d: [Duration; 2]| {
            format!("{:.0} / {:.0} %", pct(base[0], d[0]), pct(base[1], d[1]))
        };
        let zc = format!(
            "{} ({}){}",
            g(zero_copy),
            c(memcpy, zero_copy),
            if r.zero_copy_note.is_empty() {
                String::new()
            } else {
                format!(" [{}]", r.zero_copy_note)
            }
        );
        if let Some((_, what)) = r.native {
            let native = mm(&|r| r.native.map(|n| n.0).unwrap_or_default());
            notes.push(format!(
                "* {}: {what}: {} GB/s ({} of memcpy)",
                r.name,
                g(native),
                c(memcpy, native)
            ));
        }
        println!(
            "| {} | {} | {} | {} | {zc} | {} ({}) | {} ({}, {}) |",
            r.name,
            p / MIB,
            g(memcpy),
            g(fresh),
            g(owned),
            c(fresh, owned),
            g(write),
            c(memcpy, write),
            c(fs_write, write),
        );
    }
    println!();
    for n in notes {
        println!("{n}");
    }
    Ok(())
}
