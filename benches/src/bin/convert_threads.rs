//! Times `Document::convert_to_with` of a multi-frame PVP activity file with the two-stage
//! pipeline (default) against one thread (`threads=1`), alternating the two in one run,
//! for npz stored, npz deflated, safetensors and npz with an f16 cast. Prints a markdown
//! table of the best of N runs and the ratio.
//!
//! `cargo run --release -p tensorfmt-benches --bin convert_threads -- [INPUT.pvp|-] [RUNS]`
//! (without an input or with `-`, a 512 MiB file of 2 MiB frames is generated in a temporary
//! directory, which also holds the outputs).

use std::time::Instant;

use tensorfmt::{Format, ReadOptions, TensorFile, WriteOptions};

/// Label, output format, `--set` settings, `--dtype`.
type Case = (
    &'static str,
    Format,
    &'static [(&'static str, &'static str)],
    Option<tensorfmt::DType>,
);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = tempfile::tempdir_in(std::env::var("TMPDIR").unwrap_or("/tmp".into()))?;
    let input = match args.first() {
        Some(p) if p != "-" => std::path::PathBuf::from(p),
        _ => {
            let p = dir.path().join("activity.pvp");
            let status =
                std::process::Command::new(std::env::current_exe()?.with_file_name("gen_pvp"))
                    .arg(&p)
                    .arg("512")
                    .status()?;
            if !status.success() {
                return Err("gen_pvp failed (build it with the same profile)".into());
            }
            p
        }
    };
    let runs: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(5);
    let src = tensorfmt::open(&input, &ReadOptions::default())?;
    let names: Vec<String> = src.tensors().into_iter().map(|i| i.name).collect();
    let bytes: usize = src
        .tensors()
        .iter()
        .map(|i| i.shape.byte_len(i.dtype.size()).unwrap_or(0))
        .sum();
    let cases: [Case; 4] = [
        ("npz stored", Format::Npz, &[], None),
        (
            "npz deflated",
            Format::Npz,
            &[("compress", "deflate")],
            None,
        ),
        ("safetensors", Format::Safetensors, &[], None),
        (
            "npz stored, --dtype f16",
            Format::Npz,
            &[],
            Some(tensorfmt::DType::F16),
        ),
    ];
    println!(
        "input: {} ({} MiB of tensors, {names:?}), min / median of {runs} alternated runs, {} cores",
        input.display(),
        bytes >> 20,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!();
    println!("| output | threads=1 min / median | pipeline (default) min / median | speed-up of min / of median |");
    println!("|---|---|---|---|");
    for (label, format, extra, dtype) in cases {
        let out = dir.path().join("out");
        let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let mut outputs: [Option<Vec<u8>>; 2] = [None, None];
        for run in 0..runs {
            for (slot, threads) in [(0, Some("1")), (1, None)] {
                let mut o = WriteOptions {
                    dtype,
                    ..WriteOptions::default()
                };
                for (k, v) in extra {
                    o.set(k, v)?;
                }
                if let Some(t) = threads {
                    o.set("threads", t)?;
                }
                let t0 = Instant::now();
                src.convert_to_with(&out, format, Some(&names), &o)?;
                times[slot].push(t0.elapsed().as_secs_f64());
                if run == 0 && bytes <= 1 << 30 {
                    outputs[slot] = Some(std::fs::read(&out)?);
                }
                std::fs::remove_file(&out)?;
            }
        }
        if outputs[0] != outputs[1] {
            return Err(format!("{label}: outputs differ between thread counts").into());
        }
        let [one, two] = times.map(tensorfmt_benches::min_median);
        let mibs = |d: f64| bytes as f64 / (1 << 20) as f64 / d;
        println!(
            "| {label} | {:.3} / {:.3} s ({:.0} MiB/s) | {:.3} / {:.3} s ({:.0} MiB/s) | {:.2}x / {:.2}x |",
            one.0,
            one.1,
            mibs(one.0),
            two.0,
            two.1,
            mibs(two.0),
            one.0 / two.0,
            one.1 / two.1
        );
    }
    Ok(())
}
