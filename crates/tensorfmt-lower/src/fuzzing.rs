//! The body of the `caffe_to_onnx` fuzz target, shared with the mutated-corpus test:
//! prototxt text → net → Caffe shapes → zero blobs → ONNX model (with a fixed and with a
//! symbolic batch) → bytes → read back.
//! Any text must give a model or an error, never a panic, a hang or a huge allocation.

use std::collections::HashMap;

use tensorfmt_caffe::{infer_shapes, parse_net, Schema};
use tensorfmt_core::{DType, Limits, Order, ReadOptions, Tensor};

use crate::{lower, LowerOptions};

/// Runs the whole path on `text`; returns whether a model was written and read back.
#[doc(hidden)]
pub fn prototxt_to_onnx(text: &str) -> bool {
    let opts = ReadOptions {
        limits: Limits {
            max_alloc: 256 << 20,
            max_items: 10_000,
            max_rank: 64,
            max_computed: 64 << 20,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let Ok(net) = parse_net(text, Schema::builtin(), &opts) else {
        return false;
    };
    let overrides: Vec<(String, Vec<usize>)> = net
        .inputs
        .iter()
        .filter(|i| i.shape.is_empty())
        .map(|i| (i.name.clone(), vec![1, 3, 8, 8]))
        .collect();
    let Ok(shapes) = infer_shapes(&net, &overrides) else {
        return false;
    };
    // Zero blobs only for nets whose parameters and blobs are small.
    let params: u64 = shapes
        .layers
        .iter()
        .flat_map(|l| &l.params)
        .map(|p| p.iter().map(|&d| d as u64).product::<u64>())
        .sum();
    if params > 1 << 23 {
        return false;
    }
    let mut blobs: HashMap<String, Vec<Tensor>> = HashMap::new();
    for (l, s) in net.layers.iter().zip(&shapes.layers) {
        if s.params.is_empty() {
            continue;
        }
        let Ok(b) = s
            .params
            .iter()
            .map(|p| Tensor::zeros(DType::F32, p.clone(), Order::RowMajor))
            .collect()
        else {
            return false;
        };
        blobs.insert(l.name.clone(), b);
    }
    // With a symbolic batch too (its check re-runs the shape rules at another batch);
    // blobs are taken once per lowering, so the first gets a copy.
    let mut again = blobs.clone();
    // "(a lowering bug)" is for disagreements no input should cause: user input that
    // reaches one is a bug in the rules (issue 34: Concat's axis with concat_dim).
    let no_bug = |r: &Result<crate::Lowered, crate::LowerError>| {
        if let Err(e) = r {
            assert!(!e.to_string().contains("lowering bug"), "{e}");
        }
    };
    let dynamic = lower(
        &net,
        &mut again,
        &LowerOptions {
            input_shapes: overrides.clone(),
            dynamic_batch: true,
            limits: opts.limits,
            ..Default::default()
        },
    );
    no_bug(&dynamic);
    let lowered = lower(
        &net,
        &mut blobs,
        &LowerOptions {
            input_shapes: overrides,
            limits: opts.limits,
            ..Default::default()
        },
    );
    no_bug(&lowered);
    let Ok(lowered) = lowered else {
        return false;
    };
    let mut bytes = Vec::new();
    tensorfmt_onnx::write_model(&mut bytes, &lowered.model).expect("writing to a Vec");
    let back = tensorfmt_onnx::read_model_file(bytes.into(), &ReadOptions::default())
        .expect("our own model reads back");
    assert_eq!(back.outputs, lowered.outputs);
    true
}
