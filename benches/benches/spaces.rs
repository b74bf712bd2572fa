//! Space conversions of a 256 x 3 x 32 x 32 f32 batch (12 MiB) beside a plain copy of
//! the same bytes in the same run.
//!
//! Run: `cargo bench -p tensorfmt-benches --bench spaces`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use tensorfmt_core::{Order, Tensor};
use tensorfmt_spaces::{Axes, Batch, Conv2DSpace, Space};

const N: usize = 256;
const C: usize = 3;
const H: usize = 32;
const W: usize = 32;

fn conv(axes: Axes) -> Space {
    Space::from(Conv2DSpace::new(H, W, C).unwrap().with_axes(axes))
}

fn bench(c: &mut Criterion) {
    let n = N * C * H * W;
    let data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.25).collect();
    let bc01 = Batch::from(Tensor::from_vec(data.clone(), [N, C, H, W], Order::RowMajor).unwrap());
    let (s_bc01, s_b01c, s_c01b) = (conv(Axes::BC01), conv(Axes::B01C), conv(Axes::C01B));
    let vector = Space::vector(C * H * W);
    let b01c = s_bc01.format_as(&bc01, &s_b01c).unwrap();
    let flat = s_bc01.format_as(&bc01, &vector).unwrap();

    let mut g = c.benchmark_group("spaces_256x3x32x32_f32");
    g.sample_size(20);
    g.throughput(Throughput::Bytes((n * 4) as u64));
    let mut dst = vec![0f32; n];
    g.bench_function("memcpy_prefaulted", |b| {
        b.iter(|| dst.copy_from_slice(black_box(&data)))
    });
    g.bench_function("memcpy_fresh_vec", |b| b.iter(|| black_box(data.to_vec())));
    g.bench_function("conv_bc01_to_b01c", |b| {
        b.iter(|| black_box(s_bc01.format_as(black_box(&bc01), &s_b01c).unwrap()))
    });
    g.bench_function("conv_b01c_to_bc01", |b| {
        b.iter(|| black_box(s_b01c.format_as(black_box(&b01c), &s_bc01).unwrap()))
    });
    g.bench_function("conv_bc01_to_c01b", |b| {
        b.iter(|| black_box(s_bc01.format_as(black_box(&bc01), &s_c01b).unwrap()))
    });
    g.bench_function("conv_bc01_to_vector", |b| {
        b.iter(|| black_box(s_bc01.format_as(black_box(&bc01), &vector).unwrap()))
    });
    g.bench_function("vector_to_conv_bc01", |b| {
        b.iter(|| black_box(vector.format_as(black_box(&flat), &s_bc01).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
