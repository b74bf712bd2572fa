//! primitiv benchmarks: loading a Model file with 100 MiB of parameters, beside a plain
//! memcpy of the same number of bytes into a fresh `Vec` (the baseline), in one run.
//!
//! - `memcpy_100MiB`: `Vec::with_capacity` + `extend_from_slice` of the file bytes.
//! - `open_zero_copy`: parse the whole file; tensors slice the input (no data copied).
//! - `load_column_major_vec`: open, then each tensor as an owned `Vec<f32>` in the
//!   file's order (one copy per tensor).
//! - `load_row_major`: open, then every tensor through `TensorFile::read_tensor`
//!   (numpy order: a transpose for each matrix).
//! - `save`: encode the model back to bytes.
//!
//! Run: `cargo bench -p tensorfmt-benches --bench primitiv`.

use std::hint::black_box;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tensorfmt_core::ReadOptions;
use tensorfmt_primitiv::{
    open_tensor_file, read_file, to_bytes, Key, Model, Parameter, PrimitivData, PrimitivShape,
    PrimitivTensor, ReaderOptions,
};

const MIB: usize = 1 << 20;

/// 25 parameters of [1024, 1024] f32 (4 MiB each): 100 MiB of data.
fn model_bytes() -> Bytes {
    let mut m = Model::new();
    for i in 0..25u32 {
        let values: Vec<f32> = (0..1024 * 1024)
            .map(|j| (i * 7 + j) as f32 * 1e-3)
            .collect();
        let t = PrimitivTensor::from_f32(PrimitivShape::new([1024, 1024], 1).unwrap(), &values)
            .unwrap();
        let path = vec![Key::from(format!("layer{i:02}")), Key::from("w")];
        m.insert(path, Parameter::new(t).unwrap());
    }
    Bytes::from(to_bytes(&PrimitivData::Model(m)).unwrap())
}

fn bench(c: &mut Criterion) {
    let bytes = model_bytes();
    let data_bytes = 100 * MIB as u64;
    let mut g = c.benchmark_group("primitiv_model_100MiB");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(data_bytes));

    g.bench_function("memcpy_100MiB", |b| {
        b.iter(|| {
            let mut v = Vec::with_capacity(bytes.len());
            v.extend_from_slice(black_box(&bytes[..]));
            black_box(v)
        })
    });

    g.bench_function("open_zero_copy", |b| {
        b.iter(|| {
            black_box(read_file(
                black_box(bytes.clone()),
                &ReaderOptions::default(),
            ))
        })
    });

    g.bench_function("load_column_major_vec", |b| {
        b.iter(|| {
            let d = read_file(bytes.clone(), &ReaderOptions::default()).unwrap();
            let PrimitivData::Model(m) = d.data else {
                unreachable!()
            };
            let v: Vec<Vec<f32>> = m
                .entries()
                .map(|(_, p)| p.value().to_core().unwrap().to_vec::<f32>().unwrap())
                .collect();
            black_box(v)
        })
    });

    g.bench_function("load_row_major", |b| {
        b.iter(|| {
            let f = open_tensor_file(bytes.clone(), &ReadOptions::default()).unwrap();
            let v: Vec<_> = f
                .tensors()
                .iter()
                .map(|i| f.read_tensor(&i.name).unwrap())
                .collect();
            black_box(v)
        })
    });

    let decoded = read_file(bytes.clone(), &ReaderOptions::default()).unwrap();
    g.bench_function("save", |b| {
        b.iter(|| black_box(to_bytes(&decoded.data).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
