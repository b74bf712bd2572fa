//! The fuzz target's body (`fuzzing::prototxt_to_onnx`) over mutated corpus prototxts:
//! every mutation gives a model or an error, never a panic, within bounded time.

use std::time::Instant;

use tensorfmt_lower::fuzzing::prototxt_to_onnx;

#[test]
fn mutated_corpus_nets_never_panic() {
    let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe") else {
        return;
    };
    const TOKENS: [&str; 16] = [
        "{",
        "}",
        "\"",
        "-1",
        "0",
        "4294967296",
        "kernel_size: 0",
        "dim: 0",
        "dim: -1",
        "pad: 7",
        "bottom: \"data\"",
        "top: \"data\"",
        "type: \"Reshape\"",
        "type: \"Silence\"",
        "stride: 0",
        "group: 3",
    ];
    let mut seed = 0x0dd_5eed_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let start = Instant::now();
    let (mut runs, mut models) = (0, 0);
    for net in [
        "mnist_lenet",
        "cifar10_full",
        "mobilenet_ssd",
        "mtcnn_det4",
        "squeezenet_v1_1",
    ] {
        let text =
            std::fs::read_to_string(dir.join("nets").join(format!("{net}.prototxt"))).unwrap();
        assert!(prototxt_to_onnx(&text), "{net} converts unmutated");
        for _ in 0..60 {
            let mut t = text.clone();
            for _ in 0..(1 + next() % 3) {
                let mut at = (next() as usize) % (t.len() + 1);
                while !t.is_char_boundary(at) {
                    at -= 1;
                }
                if next() % 2 == 0 {
                    t.insert_str(at, TOKENS[(next() as usize) % TOKENS.len()]);
                } else {
                    let mut end = (at + (next() as usize) % 48).min(t.len());
                    while !t.is_char_boundary(end) {
                        end -= 1;
                    }
                    t.replace_range(at..end, "");
                }
            }
            models += usize::from(prototxt_to_onnx(&t));
            runs += 1;
        }
    }
    println!(
        "{runs} mutated nets, {models} converted, {:?}",
        start.elapsed()
    );
    assert!(models > 0);
}

/// A PriorBox over an absurd feature map (2^30 prior-box values, under Caffe's INT_MAX
/// blob limit) is refused from its shape, at once, instead of computing gigabytes.
#[test]
fn absurd_prior_boxes_are_refused_from_their_shape() {
    let text = "input: 'data' input_shape { dim: 1 dim: 3 dim: 8192 dim: 16384 }\n\
        layer { name: 'pb' type: 'PriorBox' bottom: 'data' bottom: 'data' top: 'pb'\n\
                prior_box_param { min_size: 30 } }\n";
    let net = tensorfmt_caffe::parse_net(
        text,
        tensorfmt_caffe::Schema::builtin(),
        &Default::default(),
    )
    .unwrap();
    let t = Instant::now();
    let mut none = std::collections::HashMap::new();
    let e = tensorfmt_lower::lower(&net, &mut none, &Default::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("limit of constants computed at conversion"),
        "{e}"
    );
    assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
}
