#![no_main]
//! Fuzz the prototxt reader and Caffe's shape rules: any text must give a net or an
//! error, never a panic, a hang or a huge allocation. Limits are small so that a
//! finding is about logic, not about the machine's memory.
use libfuzzer_sys::fuzz_target;
use tensorfmt_caffe::{infer_shapes, parse_net, random_weights, Schema};
use tensorfmt_core::{Limits, ReadOptions};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let opts = ReadOptions {
        limits: Limits {
            max_alloc: 256 << 20,
            max_items: 10_000,
            max_rank: 64,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let Ok(net) = parse_net(text, Schema::builtin(), &opts) else {
        return;
    };
    let _ = net.output_blobs();
    for l in &net.layers {
        let _ = l.fork_field("convolution_param", "kernel_size");
        let _ = l.fork_param("pooling_param");
    }
    // Give every input a small shape when it declares none.
    let overrides: Vec<(String, Vec<usize>)> = net
        .inputs
        .iter()
        .filter(|i| i.shape.is_empty())
        .map(|i| (i.name.clone(), vec![1, 3, 8, 8]))
        .collect();
    let Ok(shapes) = infer_shapes(&net, &overrides) else {
        return;
    };
    // Random weights only for nets whose parameters are small.
    let params: u64 = shapes
        .layers
        .iter()
        .flat_map(|l| &l.params)
        .map(|p| p.iter().map(|&d| d as u64).product::<u64>())
        .sum();
    if params <= 1 << 20 {
        let w = random_weights(&net, &shapes, 1);
        assert_eq!(
            w.len(),
            shapes
                .layers
                .iter()
                .filter(|l| !l.params.is_empty())
                .count()
        );
    }
});
