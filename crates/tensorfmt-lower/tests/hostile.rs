//! The fuzz target's body (`fuzzing::prototxt_to_onnx`) over mutated corpus prototxts:
//! every mutation gives a model or an error, never a panic, within bounded time.

mod common;

use std::time::Instant;

use common::{ops, output_dims};
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
        e.to_string().contains("in all (Limits::max_computed)"),
        "{e}"
    );
    assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
}

// ---- Issue 34: hostile nets that hang, balloon or give a wrong model with exit 0 ----

use std::collections::HashMap;
use std::time::Duration;

use tensorfmt_lower::{lower, LowerError, LowerOptions, Lowered};

/// A net input of shape 1x3x2x2.
const DATA: &str = "input: 'data' input_shape { dim: 1 dim: 3 dim: 2 dim: 2 }\n";

fn lower_text(text: &str, opts: &LowerOptions) -> Result<Lowered, LowerError> {
    // SegNet's Upsample parameters are built in, as every field these nets use.
    let net = tensorfmt_caffe::parse_net(
        text,
        tensorfmt_caffe::Schema::builtin(),
        &Default::default(),
    )
    .map_err(LowerError::from)?;
    // Zero blobs of the shapes Caffe gives the layers (none where its rules refuse).
    let mut blobs: HashMap<String, Vec<tensorfmt_core::Tensor>> = HashMap::new();
    if let Ok(shapes) = tensorfmt_caffe::infer_shapes(&net, &opts.input_shapes) {
        for (l, s) in net.layers.iter().zip(&shapes.layers) {
            if !s.params.is_empty() {
                let zeros = s.params.iter().map(|p| {
                    tensorfmt_core::Tensor::zeros(
                        tensorfmt_core::DType::F32,
                        p.clone(),
                        tensorfmt_core::Order::RowMajor,
                    )
                    .unwrap()
                });
                blobs.insert(l.name.clone(), zeros.collect());
            }
        }
    }
    lower(&net, &mut blobs, opts)
}

/// CPU time of this thread (tests run side by side: the process's would count theirs).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Lowers `make(small)` and `make(10 * small)` (best of 3 each) and asserts the larger
/// costs less than 30 times the smaller: 10 for a linear cost, 100 for a quadratic one.
fn assert_linear(what: &str, small: usize, make: impl Fn(usize) -> String) {
    let time = |n: usize| {
        let text = make(n);
        let net = tensorfmt_caffe::parse_net(
            &text,
            tensorfmt_caffe::Schema::builtin(),
            &Default::default(),
        )
        .unwrap();
        (0..3)
            .map(|_| {
                let mut none: HashMap<String, Vec<tensorfmt_core::Tensor>> = HashMap::new();
                let t = thread_cpu();
                lower(&net, &mut none, &Default::default()).unwrap();
                thread_cpu() - t
            })
            .min()
            .unwrap()
    };
    let (s, l) = (time(small), time(10 * small));
    let ratio = l.as_secs_f64() / s.as_secs_f64().max(1e-3);
    println!(
        "{what}: {small} {s:?}, {} {l:?}, ratio {ratio:.1}",
        10 * small
    );
    assert!(
        ratio < 30.0,
        "{what}: cost grows faster than linearly ({s:?} for {small}, {l:?} for 10x)"
    );
}

/// §5: a Split with thousands of tops (every node named `s/Identity`) and thousands of
/// in-place layers all named `r` (every value `x/r`, every node `r/Relu`): each name
/// collision was resolved by counting up from `_1` again, quadratic in the count
/// (20,000 tops: 43 s in release).
#[test]
fn name_collisions_resolve_in_linear_time() {
    assert_linear("Split tops", 2000, |n| {
        let tops: Vec<String> = (0..n).map(|i| format!("top: 't{i}'")).collect();
        format!(
            "{DATA}layer {{ name: 's' type: 'Split' bottom: 'data' {} }}",
            tops.join(" ")
        )
    });
    assert_linear("in-place layers named r", 1500, |n| {
        let mut t = format!("{DATA}layer {{ name: 'a' type: 'ReLU' bottom: 'data' top: 'x' }}\n");
        for _ in 0..n {
            t.push_str("layer { name: 'r' type: 'ReLU' bottom: 'x' top: 'x' }\n");
        }
        t
    });
}

/// `--dynamic-batch` declares every batch from 1: a net that runs only at its declared
/// batch or above (a Crop of axis 0 at offset 1 needs two images) was accepted, since
/// the check tried larger batches only, and onnxruntime failed at batch 1.
#[test]
fn dynamic_batch_is_checked_below_the_declared_batch() {
    let net = "input: 'data' input_shape { dim: 2 dim: 3 dim: 2 dim: 2 }\n\
               input: 'ref' input_shape { dim: 1 dim: 3 dim: 2 dim: 2 }\n\
               layer { name: 'c' type: 'Crop' bottom: 'data' bottom: 'ref' top: 'y' \
               crop_param { axis: 0 offset: 1 offset: 0 offset: 0 offset: 0 } }";
    lower_text(net, &Default::default()).unwrap();
    let e = lower_text(net, &dynamic())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--dynamic-batch") && e.contains("batch of 1"),
        "{e}"
    );
}

/// The graph output `i`'s dims as text: numbers, or the `dim_param` name.
fn dynamic() -> LowerOptions {
    LowerOptions {
        dynamic_batch: true,
        ..Default::default()
    }
}

/// §4: `--dynamic-batch` declared `y[N,3,2,2]` for a Concat on axis 0 of the input
/// (2N at run time) and `y[N]` for `Flatten { axis: 0 }` (12N): the check compared
/// ONNX's shapes with Caffe's at one larger batch (they agree) but never the declared
/// signature. Every output axis must be the batch, or not depend on it.
#[test]
fn dynamic_batch_declares_only_axes_that_are_the_batch() {
    for (what, layer) in [
        (
            "concat on axis 0",
            "layer { name: 'c' type: 'Concat' bottom: 'data' bottom: 'data' top: 'y' concat_param { axis: 0 } }",
        ),
        (
            "flatten from axis 0",
            "layer { name: 'f' type: 'Flatten' bottom: 'data' top: 'y' flatten_param { axis: 0 } }",
        ),
        (
            "reshape folding the batch",
            "layer { name: 'r' type: 'Reshape' bottom: 'data' top: 'y' reshape_param { shape { dim: -1 } } }",
        ),
    ] {
        let e = lower_text(&format!("{DATA}{layer}"), &dynamic()).unwrap_err();
        assert!(
            e.to_string().contains("--dynamic-batch") && e.to_string().contains("\"y\""),
            "{what}: {e}"
        );
        // A fixed batch converts.
        lower_text(&format!("{DATA}{layer}"), &Default::default()).unwrap();
    }
    // The batch moved to axis 1 is declared there.
    let l = lower_text(
        &format!("{DATA}layer {{ name: 'p' type: 'Permute' bottom: 'data' top: 'y' permute_param {{ order: 1 order: 0 order: 2 order: 3 }} }}"),
        &dynamic(),
    )
    .unwrap();
    assert_eq!(output_dims(&l, 0), ["3", "N", "2", "2"]);
    // ... but not onto the channels a Convolution's weights cover (found by the Python
    // twin of this suite: onnxruntime failed at batch 2).
    let e = lower_text(
        &format!("{DATA}layer {{ name: 'p' type: 'Permute' bottom: 'data' top: 'y' permute_param {{ order: 1 }} }}\n\
                  layer {{ name: 'c' type: 'Convolution' bottom: 'y' top: 'z' convolution_param {{ num_output: 2 kernel_size: 1 }} }}"),
        &dynamic(),
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("layer \"c\"") && e.contains("weights' shapes depend on the batch"),
        "{e}"
    );
    // An ordinary net: the batch on axis 0 of input and output.
    let l = lower_text(
        &format!("{DATA}layer {{ name: 'r' type: 'ReLU' bottom: 'data' top: 'y' }}"),
        &dynamic(),
    )
    .unwrap();
    assert_eq!(output_dims(&l, 0), ["N", "3", "2", "2"]);
    // The batch is the first input's first axis: an input of another first size keeps
    // its declared shape (it used to be declared N too).
    let l = lower_text(
        "input: 'a' input_shape { dim: 1 dim: 3 } input: 'b' input_shape { dim: 2 dim: 3 }\n\
         layer { name: 'c' type: 'Concat' bottom: 'a' bottom: 'b' top: 'y' concat_param { axis: 1 } }",
        &dynamic(),
    );
    assert!(
        l.is_err(),
        "a batch of 2 against b's fixed 2 cannot concatenate on axis 1"
    );
    let l = lower_text(
        "input: 'a' input_shape { dim: 1 dim: 3 } input: 'b' input_shape { dim: 2 dim: 3 }\n\
         layer { name: 'r' type: 'ReLU' bottom: 'a' top: 'y' }\n\
         layer { name: 's' type: 'ReLU' bottom: 'b' top: 'z' }",
        &dynamic(),
    )
    .unwrap();
    let g = l.model.graph.as_ref().unwrap();
    assert_eq!(g.input.len(), 2);
    assert_eq!(
        (output_dims(&l, 0), output_dims(&l, 1)),
        (
            vec!["N".to_string(), "3".into()],
            vec!["2".to_string(), "3".into()]
        )
    );
}

/// §5: eight PriorBox layers over a 1440x1440 map, each under the 256 MiB a constant
/// was allowed, took 2.08 GB and wrote a 2.12 GB model. Computed constants have one
/// budget for the whole conversion (`Limits::max_computed`, 128 MiB), checked before
/// each is computed: here the third 66 MB constant is refused.
#[test]
fn computed_constants_have_one_budget_for_the_conversion() {
    let mut text =
        String::from("input: 'data' input_shape { dim: 1 dim: 1 dim: 1440 dim: 1440 }\n");
    for i in 0..8 {
        text.push_str(&format!(
            "layer {{ name: 'p{i}' type: 'PriorBox' bottom: 'data' bottom: 'data' top: 'p{i}' \
             prior_box_param {{ min_size: 30 }} }}\n"
        ));
    }
    let t = Instant::now();
    let e = lower_text(&text, &Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("layer \"p2\"") && e.contains("constants computed at conversion"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // A budget of 1 MiB: the second of two 627 kB constants is refused.
    let small = "input: 'data' input_shape { dim: 1 dim: 1 dim: 70 dim: 70 }\n\
        layer { name: 'a' type: 'PriorBox' bottom: 'data' bottom: 'data' top: 'a' prior_box_param { min_size: 30 max_size: 60 aspect_ratio: 2 } }\n\
        layer { name: 'b' type: 'PriorBox' bottom: 'data' bottom: 'data' top: 'b' prior_box_param { min_size: 30 max_size: 60 aspect_ratio: 2 } }\n";
    let tight = LowerOptions {
        limits: tensorfmt_core::Limits {
            max_computed: 1 << 20,
            ..Default::default()
        },
        ..Default::default()
    };
    let e = lower_text(small, &tight).unwrap_err().to_string();
    assert!(e.contains("layer \"b\"") && e.contains("1048576"), "{e}");
    lower_text(small, &Default::default()).unwrap();
}

/// §5: a net of more layers than `Limits::max_layers` is refused from its text, before
/// the layers are parsed (50,000 ReLU layers took 561 MB).
#[test]
fn the_layer_count_is_bounded_before_parsing() {
    let mut text = String::from(DATA);
    for i in 0..101 {
        text.push_str(&format!(
            "layer {{ name: 'r{i}' type: 'ReLU' bottom: 'data' top: 'data' }}\n"
        ));
    }
    let opts = tensorfmt_core::ReadOptions {
        limits: tensorfmt_core::Limits {
            max_layers: 100,
            ..Default::default()
        },
        ..Default::default()
    };
    let e = tensorfmt_caffe::parse_net(&text, tensorfmt_caffe::Schema::builtin(), &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("layer count of 101 exceeds the limit of 100"),
        "{e}"
    );
    // One layer of many tops costs about as much as many layers: blob references
    // (bottoms and tops) are bounded at four times the layer count.
    let tops: Vec<String> = (0..400).map(|i| format!("top: 't{i}'")).collect();
    let split = format!(
        "{DATA}layer {{ name: 's' type: 'Split' bottom: 'data' {} }}",
        tops.join(" ")
    );
    let e = tensorfmt_caffe::parse_net(&split, tensorfmt_caffe::Schema::builtin(), &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("count of blob references (bottoms and tops) of 402 exceeds the limit of 400"),
        "{e}"
    );
}

/// A 4-D input of 1x3x4x4 and a max pooling 2x2 with its mask `m`.
const POOLED: &str = "input: 'data' input_shape { dim: 1 dim: 3 dim: 4 dim: 4 }\n\
    layer { name: 'p' type: 'Pooling' bottom: 'data' top: 'p' top: 'm' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n";

/// A 4-D input of 1x3x4x4 and a max pooling 2x2.
const POOL: &str = "input: 'data' input_shape { dim: 1 dim: 3 dim: 4 dim: 4 }\n\
    layer { name: 'p' type: 'Pooling' bottom: 'data' top: 'p' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n";

/// §4: models the checker or onnxruntime refuse, from parameters Caffe refuses (or
/// that compute nothing but NaN): each is an error naming the layer and the field,
/// from Caffe's shape rules (`tensorfmt-caffe`), which the lowering goes through.
#[test]
fn parameters_caffe_refuses_are_refused() {
    let cases: &[(&str, String, &str)] = &[
        (
            "empty top name",
            format!("{DATA}layer {{ name: 'r' type: 'ReLU' bottom: 'data' top: '' }}"),
            "empty",
        ),
        (
            "LRN beta NaN",
            format!("{POOL}layer {{ name: 'n' type: 'LRN' bottom: 'p' top: 'n' lrn_param {{ beta: nan }} }}"),
            "beta",
        ),
        (
            "LRN local_size beyond Caffe's int",
            format!("{POOL}layer {{ name: 'n' type: 'LRN' bottom: 'p' top: 'n' lrn_param {{ local_size: 4294967295 }} }}"),
            "local_size",
        ),
        (
            "Upsample to 1x1",
            format!("{POOLED}layer {{ name: 'u' type: 'Upsample' bottom: 'p' bottom: 'm' top: 'u' upsample_param {{ upsample_h: 1 upsample_w: 1 }} }}"),
            "upsample_h",
        ),
        (
            "Upsample scale 1",
            format!("{POOLED}layer {{ name: 'u' type: 'Upsample' bottom: 'p' bottom: 'm' top: 'u' upsample_param {{ scale: 1 }} }}"),
            "scale",
        ),
        (
            "PriorBox min_size NaN",
            format!("{POOL}layer {{ name: 'b' type: 'PriorBox' bottom: 'p' bottom: 'data' top: 'b' prior_box_param {{ min_size: nan }} }}"),
            "min_size",
        ),
        (
            "PriorBox step 0",
            format!("{POOL}layer {{ name: 'b' type: 'PriorBox' bottom: 'p' bottom: 'data' top: 'b' prior_box_param {{ min_size: 2 step: 0 }} }}"),
            "step",
        ),
        (
            "PriorBox variance 0",
            format!("{POOL}layer {{ name: 'b' type: 'PriorBox' bottom: 'p' bottom: 'data' top: 'b' prior_box_param {{ min_size: 2 variance: 0 }} }}"),
            "variance",
        ),
        (
            "PriorBox img_h without img_w",
            format!("{POOL}layer {{ name: 'b' type: 'PriorBox' bottom: 'p' bottom: 'data' top: 'b' prior_box_param {{ min_size: 2 img_h: 4 }} }}"),
            "img_w",
        ),
        (
            "PriorBox aspect_ratio 0",
            format!("{POOL}layer {{ name: 'b' type: 'PriorBox' bottom: 'p' bottom: 'data' top: 'b' prior_box_param {{ min_size: 2 aspect_ratio: 0 }} }}"),
            "aspect_ratio",
        ),
        (
            "Concat axis and concat_dim",
            format!("{DATA}layer {{ name: 'c' type: 'Concat' bottom: 'data' bottom: 'data' top: 'y' concat_param {{ axis: 1 concat_dim: 0 }} }}"),
            "concat_dim",
        ),
        (
            "Slice axis and slice_dim",
            format!("{DATA}layer {{ name: 's' type: 'Slice' bottom: 'data' top: 'a' top: 'b' slice_param {{ axis: 0 slice_dim: 1 }} }}"),
            "slice_dim",
        ),
        (
            "Exp base 0",
            format!("{DATA}layer {{ name: 'e' type: 'Exp' bottom: 'data' top: 'y' exp_param {{ base: 0 }} }}"),
            "base",
        ),
        // A second campaign: each gave a model the checker or onnxruntime refuses, or
        // one Caffe would not build.
        (
            "a top named twice by one layer",
            format!("{DATA}layer {{ name: 's' type: 'Split' bottom: 'data' top: 'a' top: 'a' }}"),
            "multiple sources",
        ),
        (
            "an enum number its enum does not define",
            format!("{DATA}layer {{ name: 'p' type: 'Pooling' bottom: 'data' top: 'p' pooling_param {{ pool: 7 kernel_size: 1 }} }}"),
            "unknown enumeration value 7",
        ),
        (
            "33 axes",
            format!("{DATA}layer {{ name: 'r' type: 'Reshape' bottom: 'data' top: 'r' reshape_param {{ shape {{ dim: 12 {} }} }} }}", "dim: 1 ".repeat(32)),
            "at most 32",
        ),
        (
            "a stride beyond Caffe's int",
            format!("{POOL}layer {{ name: 'c' type: 'Convolution' bottom: 'p' top: 'c' convolution_param {{ num_output: 1 kernel_size: 1 stride: 4294967295 }} }}"),
            "stride 4294967295",
        ),
        (
            "ReLU negative_slope NaN",
            format!("{DATA}layer {{ name: 'r' type: 'ReLU' bottom: 'data' top: 'y' relu_param {{ negative_slope: nan }} }}"),
            "negative_slope",
        ),
        (
            "BatchNorm eps NaN",
            format!("{POOL}layer {{ name: 'b' type: 'BatchNorm' bottom: 'p' top: 'b' batch_norm_param {{ eps: nan }} }}"),
            "eps",
        ),
        (
            "PriorBox of 2000 aspect ratios",
            format!("{POOL}layer {{ name: 'b' type: 'PriorBox' bottom: 'p' bottom: 'data' top: 'b' prior_box_param {{ min_size: 2 {} }} }}", "aspect_ratio: 2 ".repeat(2000)),
            "aspect_ratio values",
        ),
    ];
    for (what, text, field) in cases {
        let e = lower_text(text, &Default::default())
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains(field), "{what}: {e}");
        assert!(!e.contains("lowering bug"), "{what}: {e}");
    }
}

/// §4: LRN with beta or alpha not positive is legal Caffe (nothing checks them) but
/// onnxruntime's LRN refuses the session: such layers are lowered to Caffe's formula
/// in plain ops; a local_size far beyond the channels (Caffe takes any odd int) is
/// lowered as the window that covers them all, with alpha scaled to keep alpha / n.
#[test]
fn lrn_parameters_onnxruntime_refuses_are_lowered_another_way() {
    for beta in ["-1", "0"] {
        let l = lower_text(
            &format!("{POOL}layer {{ name: 'n' type: 'LRN' bottom: 'p' top: 'n' lrn_param {{ beta: {beta} }} }}"),
            &Default::default(),
        )
        .unwrap();
        assert!(!ops(&l).contains(&"LRN".to_string()), "{:?}", ops(&l));
    }
    let l = lower_text(
        &format!("{POOL}layer {{ name: 'n' type: 'LRN' bottom: 'p' top: 'n' lrn_param {{ local_size: 2147483647 alpha: 1 }} }}"),
        &Default::default(),
    )
    .unwrap();
    let g = l.model.graph.as_ref().unwrap();
    let lrn = g.node.iter().find(|n| n.op_type == "LRN").unwrap();
    let attr = |n: &str| lrn.attribute.iter().find(|a| a.name == n).unwrap();
    assert_eq!(attr("size").i(), 5, "2 * 3 channels - 1");
    assert!((attr("alpha").f() - 5.0 / 2147483647.0).abs() < 1e-12);
}

/// §4: Upsample's output must be the input of the pooling whose mask it reads: ONNX's
/// MaxUnpool indices address that input (flattened over N, C, H, W), Caffe's
/// per-plane ones land elsewhere in a larger plane; otherwise it is not lowered.
#[test]
fn upsample_other_than_back_to_the_pooled_size_is_not_lowered() {
    let e = lower_text(
        &format!("{POOLED}layer {{ name: 'u' type: 'Upsample' bottom: 'p' bottom: 'm' top: 'u' upsample_param {{ upsample_h: 6 upsample_w: 4 }} }}"),
        &Default::default(),
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(e.contains("unsupported") && e.contains("4x4"), "{e}");
    lower_text(
        &format!("{POOLED}layer {{ name: 'u' type: 'Upsample' bottom: 'p' bottom: 'm' top: 'u' upsample_param {{ scale: 2 }} }}"),
        &Default::default(),
    )
    .unwrap();
}

/// §6: user input that Caffe's rules and the lowering read differently used to end in
/// "(a lowering bug)": one input given two shapes (Caffe's rules took the last, the
/// lowering the first) is refused naming it.
#[test]
fn an_input_shape_given_twice_is_refused_naming_it() {
    let opts = LowerOptions {
        input_shapes: vec![
            ("data".into(), vec![1, 3, 2, 2]),
            ("data".into(), vec![2, 3, 2, 2]),
        ],
        ..Default::default()
    };
    let e = lower_text(
        &format!("{DATA}layer {{ name: 'r' type: 'ReLU' bottom: 'data' top: 'y' }}"),
        &opts,
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("--input-shape gives input \"data\" twice (1,3,2,2 and 2,3,2,2)"),
        "{e}"
    );
    assert!(!e.contains("lowering bug"), "{e}");
}

/// §6: a ReLU in place on the net input (`bottom: "data" top: "data"`) was refused as
/// "rewritten in place by a later layer that is pruned"; Caffe accepts the net. The
/// graph input keeps the name, the output is the last writer's value.
#[test]
fn a_net_input_rewritten_in_place_is_an_output_under_the_layers_name() {
    let l = lower_text(
        &format!("{DATA}layer {{ name: 'r' type: 'ReLU' bottom: 'data' top: 'data' }}"),
        &Default::default(),
    )
    .unwrap();
    let g = l.model.graph.as_ref().unwrap();
    assert_eq!(g.input[0].name, "data");
    assert_eq!(g.output[0].name, "data/r");
    assert_eq!(l.outputs, ["data/r"]);
    assert_eq!(ops(&l), ["Relu"]);
    // Twice in place, and with a symbolic batch.
    let l = lower_text(
        &format!(
            "{DATA}layer {{ name: 'r' type: 'ReLU' bottom: 'data' top: 'data' }}\n\
                  layer {{ name: 's' type: 'Sigmoid' bottom: 'data' top: 'data' }}"
        ),
        &dynamic(),
    )
    .unwrap();
    assert_eq!(l.outputs, ["data/s"]);
    assert_eq!(output_dims(&l, 0), ["N", "3", "2", "2"]);
}

/// §6: `input: "data"` without dims: Caffe's UpgradeNetInput drops it (then "unknown
/// bottom blob"), and `--input-shape data=...` said there was no such input. It stays
/// an input without a shape, which `--input-shape` gives.
#[test]
fn an_input_without_dims_takes_its_shape_from_input_shape() {
    let text = "input: 'data'\nlayer { name: 'r' type: 'ReLU' bottom: 'data' top: 'y' }";
    let e = lower_text(text, &Default::default())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("--input-shape data="), "{e}");
    let l = lower_text(
        text,
        &LowerOptions {
            input_shapes: vec![("data".into(), vec![1, 3, 2, 2])],
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(l.shapes["y"], vec![1, 3, 2, 2]);
}

/// §6: a prototxt saved with a UTF-8 byte order mark (Windows editors write one) was
/// "line 1:1: invalid token".
#[test]
fn a_byte_order_mark_is_not_text() {
    let l = lower_text(
        &format!("\u{feff}{DATA}layer {{ name: 'r' type: 'ReLU' bottom: 'data' top: 'y' }}"),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(l.outputs, ["y"]);
    // Line numbers still count from the first line.
    let e = lower_text(
        "\u{feff}input: 'data'\nlayer { name: 'r' type: ",
        &Default::default(),
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(e.contains("line 2:"), "{e}");
}

/// Every lowered layer type with random parameters from its message's fields (legal
/// and illegal values), chained on inputs of several ranks, through the fuzz body
/// (fixed and symbolic batch, blobs of Caffe's shapes): a model or an error, never a
/// panic, and never "(a lowering bug)" (issue 34 §6: user input reached it).
#[test]
fn random_layer_parameters_never_reach_a_lowering_bug() {
    const LAYERS: &[(&str, &str, &[&str])] = &[
        (
            "Convolution",
            "convolution_param",
            &[
                "num_output: 2",
                "num_output: 4",
                "kernel_size: 1",
                "kernel_size: 3",
                "stride: 2",
                "pad: 1",
                "dilation: 2",
                "group: 2",
                "kernel_h: 2 kernel_w: 1",
                "bias_term: false",
                "axis: 1",
                "pad_h: 1 pad_w: 0",
                "stride_h: 1 stride_w: 2",
            ],
        ),
        (
            "Deconvolution",
            "convolution_param",
            &[
                "num_output: 2",
                "kernel_size: 2",
                "kernel_size: 3",
                "stride: 2",
                "pad: 1",
                "group: 2",
                "bias_term: false",
                "dilation: 2",
            ],
        ),
        (
            "Pooling",
            "pooling_param",
            &[
                "pool: MAX",
                "pool: AVE",
                "kernel_size: 2",
                "kernel_size: 3",
                "stride: 2",
                "pad: 1",
                "global_pooling: true",
                "round_mode: FLOOR",
                "ceil_mode: false",
                "kernel_h: 1 kernel_w: 2",
            ],
        ),
        (
            "InnerProduct",
            "inner_product_param",
            &[
                "num_output: 3",
                "axis: 1",
                "axis: 2",
                "axis: -1",
                "transpose: true",
                "bias_term: false",
            ],
        ),
        (
            "Concat",
            "concat_param",
            &[
                "axis: 0",
                "axis: 1",
                "axis: -1",
                "concat_dim: 1",
                "concat_dim: 0",
            ],
        ),
        (
            "Slice",
            "slice_param",
            &[
                "axis: 1",
                "axis: 0",
                "slice_point: 1",
                "slice_point: 2",
                "slice_dim: 1",
                "axis: -1",
            ],
        ),
        ("Split", "", &[]),
        (
            "Flatten",
            "flatten_param",
            &[
                "axis: 0",
                "axis: 1",
                "end_axis: 2",
                "end_axis: -2",
                "axis: 2",
            ],
        ),
        (
            "Reshape",
            "reshape_param",
            &[
                "shape { dim: 0 dim: -1 }",
                "shape { dim: -1 }",
                "axis: 1",
                "num_axes: 1",
                "shape { dim: 2 dim: 0 }",
                "axis: -1",
                "num_axes: 0",
                "shape { dim: 1 }",
            ],
        ),
        (
            "Softmax",
            "softmax_param",
            &["axis: 0", "axis: -1", "axis: 2"],
        ),
        (
            "LRN",
            "lrn_param",
            &[
                "local_size: 3",
                "local_size: 1",
                "alpha: 0",
                "beta: -1",
                "k: 0",
                "norm_region: WITHIN_CHANNEL",
                "local_size: 7",
            ],
        ),
        (
            "Scale",
            "scale_param",
            &[
                "axis: 0",
                "num_axes: 0",
                "num_axes: -1",
                "bias_term: true",
                "axis: 2",
                "num_axes: 2",
            ],
        ),
        (
            "Bias",
            "bias_param",
            &["axis: 0", "num_axes: 0", "num_axes: 2", "axis: -1"],
        ),
        (
            "Eltwise",
            "eltwise_param",
            &[
                "operation: PROD",
                "operation: MAX",
                "coeff: 2 coeff: -1",
                "operation: SUM",
            ],
        ),
        (
            "ArgMax",
            "argmax_param",
            &[
                "axis: 1",
                "out_max_val: true",
                "top_k: 2",
                "axis: 0",
                "axis: -1",
            ],
        ),
        (
            "Permute",
            "permute_param",
            &["order: 0", "order: 2", "order: 1", "order: 3"],
        ),
        (
            "Power",
            "power_param",
            &["power: 2", "scale: 0", "shift: 1", "power: 0.5"],
        ),
        (
            "BatchNorm",
            "batch_norm_param",
            &["use_global_stats: true", "eps: 0"],
        ),
        (
            "Normalize",
            "norm_param",
            &["across_spatial: false", "channel_shared: true", "eps: 0"],
        ),
        (
            "ShuffleChannel",
            "shuffle_channel_param",
            &["group: 3", "group: 1", "group: 2"],
        ),
        (
            "Exp",
            "exp_param",
            &["base: 2", "scale: 0", "shift: 1", "base: -1"],
        ),
        ("Log", "log_param", &["base: 10", "scale: 2", "shift: 1"]),
        ("ELU", "elu_param", &["alpha: 0.5"]),
        ("ReLU", "relu_param", &["negative_slope: 0.1"]),
        ("PReLU", "prelu_param", &["channel_shared: true"]),
        ("Threshold", "threshold_param", &["threshold: 0.5"]),
        (
            "Dropout",
            "dropout_param",
            &["dropout_ratio: 0.5", "scale_train: false"],
        ),
        (
            "Crop",
            "crop_param",
            &["axis: 1", "axis: 2", "offset: 1", "offset: 0 offset: 1"],
        ),
        (
            "PriorBox",
            "prior_box_param",
            &[
                "min_size: 2",
                "max_size: 4",
                "aspect_ratio: 2",
                "flip: true",
                "clip: true",
                "step: 2",
                "offset: 0",
                "img_size: 8",
            ],
        ),
        (
            "Interp",
            "interp_param",
            &[
                "zoom_factor: 2",
                "shrink_factor: 2",
                "height: 3 width: 5",
                "pad_beg: -1",
            ],
        ),
        ("Axpy", "", &[]),
        (
            "MVN",
            "mvn_param",
            &[
                "normalize_variance: false",
                "across_channels: true",
                "eps: 0",
            ],
        ),
        (
            "Reorg",
            "reorg_param",
            &["stride: 2", "stride: 3", "reverse: true"],
        ),
        (
            "Region",
            "region_param",
            &[
                "classes: 1",
                "coords: 4",
                "boxes_of_each_grid: 1",
                "softmax: true",
            ],
        ),
        (
            "LSTM",
            "recurrent_param",
            &["num_output: 2", "expose_hidden: true"],
        ),
        ("RNN", "recurrent_param", &["num_output: 2"]),
        ("Sigmoid", "", &[]),
        ("TanH", "", &[]),
        ("AbsVal", "", &[]),
        ("BNLL", "", &[]),
        ("Silence", "", &[]),
    ];
    const INPUTS: &[&str] = &[
        "dim: 1 dim: 4 dim: 6 dim: 6",
        "dim: 2 dim: 6 dim: 5 dim: 5",
        "dim: 1 dim: 4",
        "dim: 2 dim: 3 dim: 4",
        "dim: 1 dim: 4 dim: 1 dim: 1",
    ];
    // HOSTILE_SEED and HOSTILE_RUNS widen the search by hand (200,000 nets: 5 s in
    // release).
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let mut seed = env("HOSTILE_SEED").unwrap_or(0x3434_5eed_u64);
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut runs, mut models) = (0, 0);
    let start = Instant::now();
    for _ in 0..env("HOSTILE_RUNS").unwrap_or(1500) {
        let input = INPUTS[(next() as usize) % INPUTS.len()];
        let mut text = format!("input: 'data' input_shape {{ {input} }}\n");
        let mut last = "data".to_string();
        for li in 0..(1 + next() % 3) {
            let (kind, param, fields) = LAYERS[(next() as usize) % LAYERS.len()];
            let mut params = String::new();
            if !fields.is_empty() {
                for _ in 0..(next() % 4) {
                    params.push_str(fields[(next() as usize) % fields.len()]);
                    params.push(' ');
                }
            }
            let extra_bottoms = match kind {
                "Concat" | "Eltwise" | "Crop" | "PriorBox" | "LSTM" | "RNN" => {
                    format!("bottom: '{last}'")
                }
                "Axpy" => format!("bottom: '{last}' bottom: '{last}'"),
                _ => String::new(),
            };
            let tops = match kind {
                "Slice" | "Split" => format!("top: 'l{li}' top: 'l{li}b'"),
                "Silence" => String::new(),
                _ => format!("top: 'l{li}'"),
            };
            let body = if param.is_empty() {
                String::new()
            } else {
                format!("{param} {{ {params}}}")
            };
            text.push_str(&format!(
                "layer {{ name: 'l{li}' type: '{kind}' bottom: '{last}' {extra_bottoms} {tops} {body} }}\n"
            ));
            last = format!("l{li}");
        }
        models += usize::from(tensorfmt_lower::fuzzing::prototxt_to_onnx(&text));
        runs += 1;
    }
    println!(
        "{runs} random nets, {models} converted, {:?}",
        start.elapsed()
    );
    assert!(models > runs / 5, "{models} of {runs}");
}

/// The `caffe_to_onnx` fuzz target's seeds (`fuzz/seeds/caffe_to_onnx/`, issue 34's
/// hostile nets) and mutations of them with its dictionary's tokens
/// (`fuzz/dicts/caffe_to_onnx.dict`), through the target's body: a model or an error,
/// never a panic or "(a lowering bug)", each in bounded time.
#[test]
fn fuzz_seeds_and_dictionary_mutations_never_panic() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let dict = std::fs::read_to_string(root.join("dicts/caffe_to_onnx.dict")).unwrap();
    let tokens: Vec<String> = dict
        .lines()
        .filter(|l| l.starts_with('"'))
        .map(|l| {
            l.trim_matches('"')
                .replace("\\\"", "\"")
                .replace("\\xef\\xbb\\xbf", "\u{feff}")
        })
        .collect();
    assert!(tokens.len() > 40, "{} tokens", tokens.len());
    let mut seeds: Vec<_> = std::fs::read_dir(root.join("seeds/caffe_to_onnx"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 19, "{} seeds", seeds.len());
    let mut seed = 0x34_d1c7_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for path in &seeds {
        let text = std::fs::read_to_string(path).unwrap();
        let t = Instant::now();
        tensorfmt_lower::fuzzing::prototxt_to_onnx(&text);
        for _ in 0..20 {
            let mut m = text.clone();
            let mut at = (next() as usize) % (m.len() + 1);
            while !m.is_char_boundary(at) {
                at -= 1;
            }
            m.insert_str(at, &tokens[(next() as usize) % tokens.len()]);
            tensorfmt_lower::fuzzing::prototxt_to_onnx(&m);
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{}: {:?}",
            path.display(),
            t.elapsed()
        );
    }
}

/// OpenPose-style deploy nets declare a 1 x 1 input "defined at run time": the shape
/// error of the first pooling says where the real size goes; with it, the net lowers.
#[test]
fn a_placeholder_input_size_is_named_with_the_way_out() {
    let text = "input: 'image' input_dim: 1 input_dim: 3 input_dim: 1 input_dim: 1\n\
                layer { name: 'p' type: 'Pooling' bottom: 'image' top: 'p' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n";
    let e = lower_text(text, &LowerOptions::default())
        .expect_err("a 2x2 pooling of a 1x1 input is refused")
        .to_string();
    assert!(
        e.contains("kernel 2 larger than the padded input 1")
            && e.contains("image [1, 3, 1, 1]")
            && e.contains("--input-shape"),
        "{e}"
    );
    let given = LowerOptions {
        input_shapes: vec![("image".into(), vec![1, 3, 8, 8])],
        ..Default::default()
    };
    lower_text(text, &given).unwrap_or_else(|e| panic!("{e}"));
}

/// A comment in another encoding (GBK from a Windows editor) is skipped as Caffe's
/// parser skips it; bytes that are not UTF-8 outside a comment are refused with
/// their line (review: "the prototxt is not UTF-8", no line).
#[test]
fn comments_in_other_encodings_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("net.prototxt");
    let mut text = b"# \xbc\xec\xb2\xe2\xb2\xe3 (GBK)\r\n".to_vec();
    text.extend_from_slice(DATA.as_bytes());
    text.extend_from_slice(
        b"layer { name: 'r' # caf\xe9\n type: 'ReLU' bottom: 'data' top: 'y' }\n",
    );
    std::fs::write(&p, &text).unwrap();
    let net = tensorfmt_lower::load_net(&p, None, &Default::default()).unwrap();
    assert_eq!(net.layers.len(), 1);
    text.extend_from_slice(b"layer { name: 'r\xe92' type: 'ReLU' bottom: 'y' top: 'z' }\n");
    std::fs::write(&p, &text).unwrap();
    let e = tensorfmt_lower::load_net(&p, None, &Default::default())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("net.prototxt") && e.contains("column 17") && e.contains("not UTF-8"),
        "{e}"
    );
}

/// A ceil-mode pooling whose last window lies wholly past the input (kernel 1, stride
/// 2, an even size, no pad) is not lowered; the message said "end padding 1 would reach
/// a whole kernel 1" for a layer with no padding at all.
#[test]
fn a_last_pooling_window_past_the_input_is_named_as_such() {
    let net = "input: 'data' input_shape { dim: 1 dim: 1 dim: 4 dim: 4 }\n\
               layer { name: 'p' type: 'Pooling' bottom: 'data' top: 'y' \
               pooling_param { pool: MAX kernel_size: 1 stride: 2 } }";
    let e = lower_text(net, &Default::default())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lies wholly past the input") && e.contains("round_mode: FLOOR"),
        "{e}"
    );
    let floor = net.replace("stride: 2 }", "stride: 2 round_mode: FLOOR }");
    lower_text(&floor, &Default::default()).unwrap();
}

/// `--outputs` naming a blob that `--stop-before` cut: the message said only that the
/// graph does not compute it.
#[test]
fn an_output_the_cut_removed_says_so() {
    let net = format!("{DATA}layer {{ name: 'r' type: 'ReLU' bottom: 'data' top: 'y' }}");
    let opts = LowerOptions {
        outputs: vec!["y".into()],
        stop_before: vec!["r".into()],
        ..Default::default()
    };
    let e = lower_text(&net, &opts).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("--stop-before") && e.contains("\"r\""), "{e}");
}
