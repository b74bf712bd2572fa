//! The `caffe_prototxt` fuzz target's body: the prototxt reader and Caffe's shape rules
//! on any text give a net or an error, never a panic, a hang or a huge allocation.
//! Limits are small so that a finding is about logic, not about the machine's memory.

use tensorfmt_caffe::{infer_shapes, parse_net, random_weights, Schema};
use tensorfmt_core::{Limits, ReadOptions};

/// Parses `data` as a prototxt, infers its shapes and draws weights for small nets;
/// returns whether it parsed as a net.
///
/// ```
/// assert!(tensorfmt_fuzzing::caffe_prototxt(b"name: 'empty'"));
/// assert!(!tensorfmt_fuzzing::caffe_prototxt(b"layer {"));
/// ```
pub fn caffe_prototxt(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
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
        return false;
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
        return true;
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
    true
}

#[cfg(test)]
mod tests {
    use crate::inputs::{check, files, mutants, random, Input, Rng};

    #[test]
    fn nets_seeds_and_mutants() {
        let mut seeds = files("fuzz/seeds/caffe_to_onnx", &[]);
        seeds.extend(files("testdata/lower", &["prototxt"]));
        let nets = files("testdata/nets", &["prototxt"]);
        assert!(seeds.len() >= 20 && nets.len() >= 10);
        let parsed = check("caffe_prototxt", &seeds, super::caffe_prototxt);
        assert!(parsed >= 10, "{parsed}");
        // The big nets whole (each parses), the small ones mutated too.
        assert_eq!(
            check("caffe_prototxt", &nets, super::caffe_prototxt),
            nets.len()
        );
        let small: Vec<Input> = seeds
            .into_iter()
            .chain(nets)
            .filter(|s| s.bytes.len() <= 8192)
            .collect();
        check(
            "caffe_prototxt",
            &mutants(&small, 20, 9),
            super::caffe_prototxt,
        );
        check(
            "caffe_prototxt",
            &random(500, 128, 10),
            super::caffe_prototxt,
        );
    }

    /// Corpus nets with tokens inserted and spans cut or repeated (text-aware
    /// mutations: byte edits rarely get past the tokenizer).
    #[test]
    fn mutated_corpus_nets() {
        let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe")
        else {
            return;
        };
        const TOKENS: [&str; 22] = [
            "{",
            "}",
            "<",
            ">",
            "layer {",
            "layers {",
            "\"",
            "'",
            "#",
            "-1",
            "0",
            "4294967296",
            "99999999999999999999",
            "kernel_size: 0",
            "dim: 0",
            "dim: -1",
            "bottom: \"data\"",
            "top: \"data\"",
            "type: \"Reshape\"",
            "\r\n",
            "é",
            "input_dim: 1",
        ];
        // `at` moved back to a char boundary of `t`.
        fn boundary(t: &str, mut at: usize) -> usize {
            while !t.is_char_boundary(at) {
                at -= 1;
            }
            at
        }
        let mut rng = Rng::new(0x5eed);
        let mut inputs = Vec::new();
        for net in [
            "mnist_lenet",
            "cifar10_quick",
            "bvlc_alexnet",
            "mobilenet_ssd",
            "age_net",
            "fcn8s_voc",
        ] {
            let text =
                std::fs::read_to_string(dir.join("nets").join(format!("{net}.prototxt"))).unwrap();
            for k in 0..150 {
                let mut t = text.clone();
                for _ in 0..1 + rng.below(4) {
                    let at = boundary(&t, rng.below(t.len() + 1));
                    match rng.below(3) {
                        0 => t.insert_str(at, TOKENS[rng.below(TOKENS.len())]),
                        1 => {
                            let end = boundary(&t, (at + rng.below(64)).min(t.len()));
                            t.replace_range(at..end, "");
                        }
                        _ => {
                            let end = boundary(&t, (at + rng.below(200)).min(t.len()));
                            let piece = t[at..end].to_string();
                            t.insert_str(at, &piece);
                        }
                    }
                }
                inputs.push(Input {
                    label: format!("{net} mutant #{k}"),
                    bytes: t.into_bytes(),
                });
            }
            inputs.push(Input {
                label: net.into(),
                bytes: text.into_bytes(),
            });
        }
        let parsed = check("caffe_prototxt", &inputs, super::caffe_prototxt);
        // The six nets and some of their mutants.
        assert!(parsed > 6, "{parsed} of {}", inputs.len());
    }
}
