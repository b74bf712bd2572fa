//! PVP benchmarks, each beside a memcpy of the same bytes in the same run:
//! dense frame iteration over a 256 MiB mmapped file (zero-copy scan and decode into
//! owned f32), the sparse frame-table scan, and byte-weight decoding.
//!
//! `cargo bench -p tensorfmt-benches --bench pvp`

use std::hint::black_box;
use std::io::BufWriter;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tensorfmt_pvp::write::{DenseWriter, SparseWriter, WeightGeometry, WeightWriter};
use tensorfmt_pvp::{DenseReader, OpenOptions, SparseReader, WeightReader};

fn temp_file(
    dir: &tempfile::TempDir,
    name: &str,
) -> (std::path::PathBuf, BufWriter<std::fs::File>) {
    let p = dir.path().join(name);
    let f = BufWriter::with_capacity(1 << 20, std::fs::File::create(&p).unwrap());
    (p, f)
}

/// XOR of all f32 bit patterns: reads every byte, vectorises.
fn touch(v: &[f32]) -> u32 {
    v.iter().fold(0u32, |a, x| a ^ x.to_bits())
}

fn dense(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (nx, ny, nf, frames) = (128usize, 128usize, 8usize, 512usize); // 512 KiB frames, 256 MiB
    let (p, f) = temp_file(&dir, "dense.pvp");
    let mut w = DenseWriter::new(f, nx, ny, nf).unwrap();
    let frame: Vec<f32> = (0..nx * ny * nf).map(|i| i as f32 * 1e-3).collect();
    for k in 0..frames {
        w.write_frame(k as f64, &frame).unwrap();
    }
    w.finish().unwrap();
    let data = tensorfmt_core::io::map_file(&p).unwrap();
    let r = DenseReader::new(data.clone(), &OpenOptions::default()).unwrap();
    let payload = (nx * ny * nf * 4 * frames) as u64;

    let mut g = c.benchmark_group("pvp_dense_256MiB");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(payload));
    let mut dst = vec![0u8; data.len()];
    g.bench_function("memcpy_file", |b| {
        b.iter(|| {
            dst.copy_from_slice(&data);
            black_box(&dst);
        })
    });
    g.bench_function("zero_copy_frame_scan", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for f in r.frames() {
                let f = f.unwrap();
                acc ^= touch(f.values.as_slice::<f32>().unwrap());
            }
            black_box(acc)
        })
    });
    g.bench_function("copy_frames_into_fresh_vec", |b| {
        b.iter(|| {
            for k in 0..frames {
                let raw = r.raw_frame_bytes(k).unwrap();
                black_box(raw.to_vec());
            }
        })
    });
    g.bench_function("decode_frames_owned_f32", |b| {
        b.iter(|| {
            for k in 0..frames {
                black_box(r.frame_f32(k).unwrap());
            }
        })
    });
    g.bench_function("decode_frames_tensor_to_vec", |b| {
        b.iter(|| {
            for f in r.frames() {
                black_box(f.unwrap().values.to_vec::<f32>().unwrap());
            }
        })
    });
    g.finish();
}

fn sparse(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (n, frames) = (64 * 64 * 64usize, 500usize); // 2 % active, ~21 MB
    let (p, f) = temp_file(&dir, "sparse.pvp");
    let mut w = SparseWriter::values(f, 64, 64, 64).unwrap();
    let idx: Vec<u32> = (0..n as u32).step_by(50).collect();
    let val: Vec<f32> = idx.iter().map(|&i| i as f32).collect();
    for k in 0..frames {
        w.write_frame(k as f64, &idx, &val).unwrap();
    }
    w.finish().unwrap();
    let data = tensorfmt_core::io::map_file(&p).unwrap();
    let mut g = c.benchmark_group("pvp_sparse_scan");
    g.sample_size(20);
    g.throughput(Throughput::Bytes(data.len() as u64));
    let mut dst = vec![0u8; data.len()];
    g.bench_function("memcpy_file", |b| {
        b.iter(|| {
            dst.copy_from_slice(&data);
            black_box(&dst);
        })
    });
    g.bench_function("frame_table_scan", |b| {
        b.iter(|| {
            let r = SparseReader::new(data.clone(), &OpenOptions::default()).unwrap();
            black_box(r.table().unwrap().offsets.len())
        })
    });
    g.bench_function("decode_all_frames", |b| {
        let r = SparseReader::new(data.clone(), &OpenOptions::default()).unwrap();
        b.iter(|| {
            for f in r.frames() {
                black_box(f.unwrap());
            }
        })
    });
    g.finish();
}

fn byte_weights(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let geom = WeightGeometry::kernel(32, 32, 1, 16, 16, 3, 1); // 1024 patches of 16x16x3
    let (p, f) = temp_file(&dir, "w.pvp");
    let mut w = WeightWriter::new(f, geom, true).unwrap();
    let vals: Vec<f32> = (0..geom.frame_values().unwrap())
        .map(|i| (i % 251) as f32 / 250.0)
        .collect();
    for k in 0..10 {
        w.write_frame(k as f64, &vals).unwrap();
    }
    w.finish().unwrap();
    let data = tensorfmt_core::io::map_file(&p).unwrap();
    let r = WeightReader::new(data.clone(), &OpenOptions::default()).unwrap();
    let mut g = c.benchmark_group("pvp_byte_weights");
    g.sample_size(20);
    g.throughput(Throughput::Bytes(data.len() as u64));
    let mut dst = vec![0u8; data.len()];
    g.bench_function("memcpy_file", |b| {
        b.iter(|| {
            dst.copy_from_slice(&data);
            black_box(&dst);
        })
    });
    g.bench_function("decode_to_f32", |b| {
        b.iter(|| {
            for f in r.frames() {
                black_box(f.unwrap());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, dense, sparse, byte_weights);
criterion_main!(benches);
