//! PINK benchmarks, each beside a memcpy of the same bytes in the same run: streaming
//! the entries of a 256 MiB mmapped data file zero-copy (per entry and through the
//! facade's bounded-memory chunks) and decoding them into owned f32, for an aligned
//! file and for one whose comment block leaves the payload unaligned.
//!
//! `cargo bench -p tensorfmt-benches --bench som`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tensorfmt_core::ReadOptions;
use tensorfmt_som::{DataWriter, SomFile, WriteConfig};

/// XOR of all f32 bit patterns: reads every byte, vectorises.
fn touch(v: &[f32]) -> u32 {
    v.iter().fold(0u32, |a, x| a ^ x.to_bits())
}

const SIDE: usize = 128;
const ENTRIES: usize = 4096; // 64 KiB entries, 256 MiB payload

fn make(dir: &tempfile::TempDir, name: &str, comments: Vec<String>) -> std::path::PathBuf {
    let p = dir.path().join(name);
    let config = WriteConfig {
        comments,
        ..WriteConfig::default()
    };
    let mut w = DataWriter::create(&p, &[SIDE, SIDE], &config).unwrap();
    let entry: Vec<u8> = (0..SIDE * SIDE)
        .flat_map(|i| (i as f32 * 1e-3).to_le_bytes())
        .collect();
    for _ in 0..ENTRIES {
        w.append_bytes(&entry).unwrap();
    }
    w.commit().unwrap();
    p
}

fn data_stream(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let aligned = make(&dir, "aligned.bin", Vec::new());
    let unaligned = make(&dir, "unaligned.bin", vec!["odd".into()]);
    let payload = (SIDE * SIDE * 4 * ENTRIES) as u64;

    let data = tensorfmt_core::io::map_file(&aligned).unwrap();
    let f = SomFile::from_bytes(data.clone()).unwrap();
    let tf = tensorfmt_som::open_tensor_file(data.clone(), &ReadOptions::default()).unwrap();
    let udata = tensorfmt_core::io::map_file(&unaligned).unwrap();
    let uf = SomFile::from_bytes(udata).unwrap();
    assert_ne!(uf.payload_offset() % 4, 0);

    let mut g = c.benchmark_group("som_data_256MiB");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(payload));
    let mut dst = vec![0u8; data.len()];
    g.bench_function("memcpy_file", |b| {
        b.iter(|| {
            dst.copy_from_slice(&data);
            black_box(&dst);
        })
    });
    g.bench_function("zero_copy_entry_scan", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for k in 0..ENTRIES {
                acc ^= touch(f.entry(k).unwrap().as_slice::<f32>().unwrap());
            }
            black_box(acc)
        })
    });
    g.bench_function("zero_copy_facade_chunks", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for chunk in tf.read_chunks("data").unwrap() {
                acc ^= touch(chunk.unwrap().as_slice::<f32>().unwrap());
            }
            black_box(acc)
        })
    });
    g.bench_function("decode_entries_owned_f32", |b| {
        b.iter(|| {
            for k in 0..ENTRIES {
                black_box(f.entry(k).unwrap().to_vec::<f32>().unwrap());
            }
        })
    });
    g.bench_function("decode_entries_owned_f32_unaligned_file", |b| {
        b.iter(|| {
            for k in 0..ENTRIES {
                black_box(uf.entry(k).unwrap().to_vec::<f32>().unwrap());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, data_stream);
criterion_main!(benches);
