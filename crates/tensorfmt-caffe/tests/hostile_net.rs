//! Hostile prototxts and fork schemas: clear errors in bounded time and memory.

use std::time::{Duration, Instant};

use tensorfmt_caffe::{parse_net, CaffeError, Schema, MAX_NESTING};
use tensorfmt_core::{Limits, ReadOptions};

fn quick<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "{what} took {:?}",
        t.elapsed()
    );
    out
}

#[test]
fn deep_nesting_is_refused_before_parsing() {
    for (open, close) in [("layer { ", "}"), ("layer < ", ">")] {
        let depth = 200_000;
        let text = format!("{}{}", open.repeat(depth), close.repeat(depth));
        let err = quick("deep", || {
            parse_net(&text, Schema::builtin(), &Default::default())
        })
        .unwrap_err();
        match err {
            CaffeError::Prototxt {
                line: 1,
                column,
                message,
            } => {
                assert_eq!(column, MAX_NESTING * open.len() + 7, "{message}");
                assert!(message.contains("nested deeper than 64"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    // Braces inside strings and comments do not count.
    let text = format!(
        "name: \"{}\" # {}\nlayer {{ name: 'a' type: 'ReLU' }}",
        "{".repeat(100),
        "{".repeat(100)
    );
    parse_net(&text, Schema::builtin(), &Default::default()).unwrap();
}

#[test]
fn size_is_checked_against_limits_before_parsing() {
    let text = "layer { name: 'a' type: 'ReLU' bottom: 'x' top: 'x' }\n".repeat(1000);
    let small = ReadOptions {
        limits: Limits {
            max_alloc: 1 << 20,
            ..Limits::default()
        },
        ..Default::default()
    };
    let err = parse_net(&text, Schema::builtin(), &small).unwrap_err();
    assert!(
        matches!(
            err,
            CaffeError::Limit {
                what: "allocation",
                ..
            }
        ),
        "{err:?}"
    );
    let few = ReadOptions {
        limits: Limits {
            max_items: 10,
            ..Limits::default()
        },
        ..Default::default()
    };
    let err = parse_net(&text, Schema::builtin(), &few).unwrap_err();
    assert!(
        matches!(
            err,
            CaffeError::Limit {
                what: "item count",
                value: 1000,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        parse_net(&text, Schema::builtin(), &Default::default())
            .unwrap()
            .layers
            .len(),
        1000
    );
}

#[test]
fn a_large_net_parses_in_bounded_time() {
    // 5 000 layers (about 400 KB), seven times ResNet-152's layer count (linear: 20 000
    // take 1.4 s in a release build, 4 s in a debug build).
    let mut text = String::from("input: 'x' input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n");
    for i in 0..5_000 {
        text.push_str(&format!(
            "layer {{ name: 'r{i}' type: 'ReLU' bottom: 'x' top: 'x' relu_param {{ negative_slope: 0.1 }} }}\n"
        ));
    }
    let net = quick("5k layers", || {
        parse_net(&text, Schema::builtin(), &Default::default())
    })
    .unwrap();
    assert_eq!(net.layers.len(), 5_000);
    assert_eq!(net.layers[4_999].line, 5_001);
}

#[test]
fn hostile_fork_schemas_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let cases = [
        (
            "deep.proto",
            format!("{}{}", "message A { ".repeat(10_000), "}".repeat(10_000)),
            "nested deeper",
        ),
        (
            "broken.proto",
            "syntax = \"proto2\"; package caffe; message NetParameter { optional Nope x = 1; }"
                .into(),
            "Nope",
        ),
        (
            "nonet.proto",
            "syntax = \"proto2\"; package other; message NetParameter { }".into(),
            "caffe.NetParameter",
        ),
        (
            "clash.snippet",
            "message LayerParameter { optional float name2 = 1; }".into(),
            "already",
        ),
        (
            "junk.snippet",
            "this is not a proto".into(),
            "snippet may only hold",
        ),
        (
            "enum.snippet",
            "enum Phase { A = 0; }".into(),
            "already defined",
        ),
        (
            "import.proto",
            "syntax = \"proto2\"; import \"other.proto\"; package caffe; message NetParameter {}"
                .into(),
            "other.proto",
        ),
    ];
    for (name, text, needle) in cases {
        let p = write(name, &text);
        let err = quick(name, || Schema::compile(&p, &Limits::default())).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, CaffeError::Schema { .. }), "{name}: {err:?}");
        assert!(msg.contains(needle) && msg.contains(name), "{name}: {msg}");
    }
    // Too large: refused from its size, before reading.
    let big = write("big.proto", &"// padding\n".repeat(2_000_000));
    let err = Schema::compile(&big, &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("size limit"), "{err}");
    let small = Limits {
        max_alloc: 64 * 1024,
        ..Limits::default()
    };
    let mid = write("mid.proto", &"// padding\n".repeat(1000));
    let err = Schema::compile(&mid, &small).unwrap_err().to_string();
    assert!(err.contains("size limit"), "{err}");
    // Missing file.
    assert!(Schema::compile(&dir.path().join("none.proto"), &Limits::default()).is_err());
}

#[test]
fn a_recursive_fork_message_cannot_recurse_past_the_bound() {
    // A fork schema may define a recursive message; the text is still depth-bounded.
    let schema = Schema::compile_source(
        "recursive.snippet",
        "message LayerParameter { optional Node node_param = 9000; }\nmessage Node { optional Node child = 1; }",
    )
    .unwrap();
    let ok = "layer { name: 'a' type: 'X' node_param { child { child { } } } }";
    let net = parse_net(ok, &schema, &Default::default()).unwrap();
    assert!(net.layers[0].has_param("node_param"));
    let deep = format!(
        "layer {{ node_param {{ {} {} }} }}",
        "child { ".repeat(5000),
        "}".repeat(5000)
    );
    let err = quick("recursive", || {
        parse_net(&deep, &schema, &Default::default())
    })
    .unwrap_err();
    assert!(err.to_string().contains("nested deeper"), "{err}");
}

/// The body of `fuzz/fuzz_targets/caffe_prototxt.rs`.
fn fuzz_one(text: &str) {
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
    let overrides: Vec<(String, Vec<usize>)> = net
        .inputs
        .iter()
        .filter(|i| i.shape.is_empty())
        .map(|i| (i.name.clone(), vec![1, 3, 8, 8]))
        .collect();
    let Ok(shapes) = tensorfmt_caffe::infer_shapes(&net, &overrides) else {
        return;
    };
    let params: u64 = shapes
        .layers
        .iter()
        .flat_map(|l| &l.params)
        .map(|p| p.iter().map(|&d| d as u64).product::<u64>())
        .sum();
    if params <= 1 << 20 {
        let w = tensorfmt_caffe::random_weights(&net, &shapes, 1);
        assert_eq!(
            w.len(),
            shapes
                .layers
                .iter()
                .filter(|l| !l.params.is_empty())
                .count()
        );
    }
}

#[test]
fn mutated_corpus_nets_never_panic() {
    let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe") else {
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
    let mut seed = 0x5eed_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let start = Instant::now();
    let mut runs = 0;
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
        fuzz_one(&text);
        for _ in 0..150 {
            let mut t = text.clone();
            for _ in 0..(1 + next() % 4) {
                let mut at = (next() as usize) % (t.len() + 1);
                while !t.is_char_boundary(at) {
                    at -= 1;
                }
                match next() % 3 {
                    0 => t.insert_str(at, TOKENS[(next() as usize) % TOKENS.len()]),
                    1 => {
                        let mut end = (at + (next() as usize) % 64).min(t.len());
                        while !t.is_char_boundary(end) {
                            end -= 1;
                        }
                        t.replace_range(at..end, "");
                    }
                    _ => {
                        let mut end = (at + (next() as usize) % 200).min(t.len());
                        while !t.is_char_boundary(end) {
                            end -= 1;
                        }
                        let piece = t[at..end].to_string();
                        t.insert_str(at, &piece);
                    }
                }
            }
            fuzz_one(&t);
            runs += 1;
        }
    }
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{runs} runs took {:?}",
        start.elapsed()
    );
}
