//! Writes a caffemodel with seeded random weights for a deploy prototxt, shaped by
//! tensorfmt's own shape inference (`tensorfmt_caffe::random_weights`) and written by its
//! caffemodel writer (`write_weights_model`), for the Caffe → ONNX benchmark
//! (`benches/caffe_onnx.sh`).
//!
//! `gen_caffe DEPLOY.prototxt OUT.caffemodel [SEED]`
//!
//! `cargo run --release -p tensorfmt-benches --bin gen_caffe -- resnet50.prototxt /tmp/r50.caffemodel`

use std::io::BufWriter;

use tensorfmt_caffe::{
    blob_from_tensor, infer_shapes, parse_net, random_weights, write_weights_model, Schema,
    WeightsLayer,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: gen_caffe DEPLOY.prototxt OUT.caffemodel [SEED]";
    let proto = args.first().ok_or(usage)?;
    let out = args.get(1).ok_or(usage)?;
    let seed: u64 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(1);
    let text = std::fs::read_to_string(proto)?;
    let net = parse_net(&text, Schema::builtin(), &Default::default())?;
    let shapes = infer_shapes(&net, &[])?;
    let types: std::collections::HashMap<&str, &str> = net
        .layers
        .iter()
        .map(|l| (l.name.as_str(), l.kind.as_str()))
        .collect();
    let mut layers = Vec::new();
    let mut params = 0usize;
    for (name, blobs) in random_weights(&net, &shapes, seed) {
        params += blobs
            .iter()
            .map(|t| t.dims().iter().product::<usize>())
            .sum::<usize>();
        layers.push(WeightsLayer {
            type_name: types.get(name.as_str()).map(|s| s.to_string()),
            blobs: blobs
                .iter()
                .map(blob_from_tensor)
                .collect::<Result<_, _>>()?,
            name,
        });
    }
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(out)?);
    write_weights_model(
        &mut w,
        Some(net.name.as_str()).filter(|n| !n.is_empty()),
        &layers,
    )?;
    std::io::Write::flush(&mut w)?;
    println!(
        "{out}: {} layers with weights, {params} parameters ({:.1} MB)",
        layers.len(),
        std::fs::metadata(out)?.len() as f64 / 1e6
    );
    Ok(())
}
