//! Sparse stays sparse: statistics of a sparse PVP movie against one pass over the
//! file's bytes, measured in the same run (issue 16, item 7).
//!
//! `cargo run --release -p tensorfmt-benches --bin sparse_stats -- [REPEAT]`
//!
//! The movie: 200 frames of 1024 x 1024 x 4 neurons (4.2e6 per frame, so a dense pass
//! would touch 3.4 GB of f32) with 1 % active, written with the streaming writer. The
//! floor is a sum over every byte of the mapped file (page cache warm, like ours); the
//! ratio is ours / floor (1.0 = as fast as touching the bytes once). `diff` compares the
//! movie with a copy of itself (two files, every entry walked). The last row times the
//! old way, a dense pass over the frames, on the first 5 frames only.

use std::hint::black_box;
use std::io::BufWriter;

use tensorfmt_pvp::write::SparseWriter;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let repeat: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(5)
        .max(1);
    let (nx, ny, nf, frames) = (1024usize, 1024usize, 4usize, 200usize);
    let neurons = nx * ny * nf;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("sparse.pvp");
    {
        let f = std::fs::File::create(&path)?;
        let mut w = SparseWriter::values(BufWriter::with_capacity(1 << 20, f), nx, ny, nf)?;
        let active = neurons / 100;
        let mut idx = Vec::with_capacity(active);
        let mut vals = Vec::with_capacity(active);
        for k in 0..frames {
            idx.clear();
            vals.clear();
            let mut x = 12345u64 + k as u64;
            let step = (neurons / active) as u64;
            for i in 0..active as u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                idx.push((i * step + (x >> 40) % step) as u32);
                vals.push(((x >> 20) % 1000) as f32 * 1e-3 + 0.001);
            }
            w.write_frame(k as f64, &idx, &vals)?;
        }
        w.finish()?;
    }
    let bytes = std::fs::metadata(&path)?.len();
    let doc = tensorfmt::Document::open(&path)?;
    let entry = doc.entry("values")?;
    let stats = entry.stats()?;
    let map = tensorfmt_core::io::map_file(&path)?;
    let copy = dir.path().join("copy.pvp");
    std::fs::copy(&path, &copy)?;
    let (a, b) = (
        tensorfmt::Document::open(&path)?,
        tensorfmt::Document::open(&copy)?,
    );
    let options = tensorfmt::diff::DiffOptions::default();
    let report = tensorfmt::diff::compare_tensor(&a, &b, "values", &options)?;
    assert!(report.equal && report.mismatched == 0);
    let small = tensorfmt::open(
        &path,
        &tensorfmt::ReadOptions {
            frames: Some((0, Some(5))),
            ..Default::default()
        },
    )?;
    // The floor, our two paths and the old densifying pass, alternated.
    let t = tensorfmt_benches::alternate(
        repeat,
        &mut [
            &mut || {
                black_box(map.iter().fold(0u64, |a, &b| a.wrapping_add(b as u64)));
            },
            &mut || {
                black_box(entry.stats().unwrap());
            },
            &mut || {
                black_box(tensorfmt::diff::compare_tensor(&a, &b, "values", &options).unwrap());
            },
            &mut || {
                let mut s = 0.0;
                for c in small.read_chunks("values").unwrap() {
                    s += c.unwrap().stats().sum;
                }
                black_box(s);
            },
        ],
    );
    let (floor, ours, diff, dense5) = (t[0], t[1], t[2], t[3]);
    println!(
        "sparse PVP {frames} frames x {neurons} neurons, {} entries, file {:.1} MiB; min / median of {repeat} alternated runs",
        stats.nonzero,
        bytes as f64 / (1 << 20) as f64
    );
    let ms = |t: (f64, f64)| format!("{:.2} / {:.2}", t.0 * 1e3, t.1 * 1e3);
    let ratio = |t: (f64, f64)| format!("{:.2} / {:.2}", t.0 / floor.0, t.1 / floor.1);
    println!("| path | ms | ratio to one pass over the bytes |");
    println!("|---|---|---|");
    println!(
        "| one pass over the file's bytes (floor) | {} | 1.00 |",
        ms(floor)
    );
    println!(
        "| `stats` from the entries (count {}) | {} | {} |",
        stats.count,
        ms(ours),
        ratio(ours)
    );
    println!(
        "| `diff` against a copy, from the entries of both (count {}) | {} | {} (two files) |",
        report.count,
        ms(diff),
        ratio(diff)
    );
    println!(
        "| densified pass, first 5 frames only (old way) | {} | {} (x{} for all frames) |",
        ms(dense5),
        ratio(dense5),
        frames / 5
    );
    Ok(())
}
