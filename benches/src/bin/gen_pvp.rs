//! Writes a dense PVP activity file of about a given size, frame by frame (the generator
//! holds one frame in memory), for the conversion and peak-memory measurements.
//!
//! `gen_pvp OUT MIB [NX NY NF]` (defaults: 256 x 256 x 8 neurons, 2 MiB frames).
//!
//! `cargo run --release -p tensorfmt-benches --bin gen_pvp -- /tmp/big.pvp 2048`

use std::io::BufWriter;

use tensorfmt_pvp::write::DenseWriter;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: gen_pvp OUT MIB [NX NY NF]";
    let out = args.first().ok_or(usage)?;
    let mib: u64 = args.get(1).ok_or(usage)?.parse()?;
    let dim = |i: usize, d: usize| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(args.get(i).map(|s| s.parse()).transpose()?.unwrap_or(d))
    };
    let (nx, ny, nf) = (dim(2, 256)?, dim(3, 256)?, dim(4, 8)?);
    let per_frame = (nx * ny * nf * 4) as u64;
    let frames = ((mib << 20) / per_frame).max(1);
    let file = std::fs::File::create(out)?;
    let mut w = DenseWriter::new(BufWriter::with_capacity(1 << 20, file), nx, ny, nf)?;
    let mut frame: Vec<f32> = vec![0.0; nx * ny * nf];
    for k in 0..frames {
        // Values that change per frame and deflate somewhat, like real activities.
        for (i, v) in frame.iter_mut().enumerate() {
            let x = (i as u64).wrapping_mul(2654435761).wrapping_add(k * 97) % 1000;
            *v = if x < 700 { 0.0 } else { x as f32 * 1e-3 };
        }
        w.write_frame(k as f64, &frame)?;
    }
    w.finish()?;
    println!(
        "{out}: {frames} frames of {nx}x{ny}x{nf} f32 ({} MiB)",
        (frames * per_frame) >> 20
    );
    Ok(())
}
