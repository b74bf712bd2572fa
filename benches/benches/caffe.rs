//! Caffe benchmarks: decoding the spec's synthetic 200 MB BlobProto (shape
//! [50000, 1000], 50 M f32) into an owned `Vec<f32>`, beside a memcpy of the same payload
//! in the same run (the floor), and reading + decoding the file end to end from disk.
//! The spec's baseline (C-backed Python protobuf, upb) is 0.232 s to parse (860 MB/s)
//! and 1.02 s end to end. Set `TENSORFMT_CAFFE_BENCH_FLOATS` for a smaller blob.
//! Also: parsing the largest corpus model (`mtcnn_det4.caffemodel`) when present.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tensorfmt_caffe::{decode_f32, map_path, read_blob_proto, read_model, CaffeReadOptions};

fn floats() -> usize {
    std::env::var("TENSORFMT_CAFFE_BENCH_FLOATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000_000)
}

/// The spec's synthetic blob: key 2a, varint length, payload, then shape [50000, 1000].
fn synthetic_blob(n: usize) -> Vec<u8> {
    let payload = n * 4;
    let mut out = Vec::with_capacity(payload + 32);
    out.push(0x2a);
    let mut len = payload as u64;
    while len >= 0x80 {
        out.push(len as u8 | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
    let mut x = 12345u32;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.extend_from_slice(&((x as f32 / u32::MAX as f32) - 0.5).to_le_bytes());
    }
    let rows = (n / 1000).max(1) as u64;
    let cols = (n as u64) / rows;
    let mut dims = Vec::new();
    for mut d in [rows, cols] {
        while d >= 0x80 {
            dims.push(d as u8 | 0x80);
            d >>= 7;
        }
        dims.push(d as u8);
    }
    out.extend_from_slice(&[0x3a, dims.len() as u8 + 2, 0x0a, dims.len() as u8]);
    out.extend_from_slice(&dims);
    out
}

fn bench_blob(c: &mut Criterion) {
    let n = floats();
    let file = Bytes::from(synthetic_blob(n));
    let header = file.len() - n * 4 - 9;
    let payload = file.slice(header..header + n * 4);
    let mut g = c.benchmark_group("caffe_blob_200MB");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_secs(1));
    g.throughput(Throughput::Bytes(file.len() as u64));
    g.bench_function("memcpy_payload_floor", |b| {
        b.iter(|| {
            let mut v = vec![0u8; payload.len()];
            v.copy_from_slice(&payload);
            black_box(v)
        })
    });
    g.bench_function("parse_zero_copy", |b| {
        b.iter(|| black_box(read_blob_proto(file.clone()).unwrap()))
    });
    g.bench_function("decode_to_vec_f32", |b| {
        b.iter(|| {
            let blob = read_blob_proto(file.clone()).unwrap();
            let t = blob.tensor("blob").unwrap();
            black_box((t.dims().len(), decode_f32(&blob.data)))
        })
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blob.binaryproto");
    std::fs::write(&path, &file).unwrap();
    g.bench_function("end_to_end_mmap_decode_to_vec_f32", |b| {
        b.iter(|| {
            let data = map_path(&path, &CaffeReadOptions::default()).unwrap();
            let blob = read_blob_proto(data).unwrap();
            black_box(decode_f32(&blob.data))
        })
    });
    g.bench_function("end_to_end_read_decode_to_vec_f32", |b| {
        b.iter(|| {
            let data = Bytes::from(std::fs::read(&path).unwrap());
            let blob = read_blob_proto(data).unwrap();
            black_box(decode_f32(&blob.data))
        })
    });
    g.finish();
}

fn bench_model(c: &mut Criterion) {
    let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe") else {
        return;
    };
    let data = Bytes::from(std::fs::read(dir.join("mtcnn_det4.caffemodel")).unwrap());
    let mut g = c.benchmark_group("caffe_mtcnn_det4");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("parse", |b| {
        b.iter(|| black_box(read_model(data.clone()).unwrap()))
    });
    g.bench_function("parse_and_decode_all_blobs", |b| {
        b.iter(|| {
            let m = read_model(data.clone()).unwrap();
            let v: Vec<Vec<f32>> = m
                .layers
                .iter()
                .flat_map(|l| &l.blobs)
                .map(|b| b.data_f32())
                .collect();
            black_box(v)
        })
    });
    let m = read_model(data.clone()).unwrap();
    g.bench_function("serialize", |b| b.iter(|| black_box(m.to_bytes())));
    g.finish();
}

criterion_group!(benches, bench_blob, bench_model);
criterion_main!(benches);
