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
