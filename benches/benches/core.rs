//! Core tensor operations beside a memcpy of the same bytes in the same run.
//!
//! Run: `cargo bench -p tensorfmt-benches --bench core`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use tensorfmt_core::{DType, Order, Tensor};

const BYTES: usize = 64 << 20;

fn bench(c: &mut Criterion) {
    let n = BYTES / 4;
    let data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.25).collect();
    let t = Tensor::from_vec(data.clone(), [4096, n / 4096], Order::RowMajor).unwrap();
    let mut g = c.benchmark_group("core_64MiB");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(BYTES as u64));
    let mut dst = vec![0f32; n];
    g.bench_function("memcpy_prefaulted", |b| {
        b.iter(|| dst.copy_from_slice(black_box(&data)))
    });
    g.bench_function("memcpy_fresh_vec", |b| b.iter(|| black_box(data.to_vec())));
    g.bench_function("cast_f32_f16_f32", |b| {
        b.iter(|| black_box(t.cast(DType::F16).unwrap().cast(DType::F32).unwrap()))
    });
    g.bench_function("to_order_col_major", |b| {
        b.iter(|| black_box(t.to_order(Order::ColumnMajor).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
