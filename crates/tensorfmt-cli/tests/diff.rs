//! `tensorfmt diff`: exit codes (0 equal, 1 different, 2 trouble), text and JSON
//! output, tolerances, dtype and shape differences, missing names.

mod common;

use common::{json, testdata, tf};
use tensorfmt::{Format, Order, ReadOptions, Tensor};

/// The tensors of a file, all of them.
fn tensors(path: &std::path::Path) -> Vec<(String, Tensor)> {
    let f = tensorfmt::open(path, &ReadOptions::default()).unwrap();
    f.tensors()
        .into_iter()
        .map(|i| {
            let t = f.read_tensor(&i.name).unwrap();
            (i.name, t)
        })
        .collect()
}

/// `mixed.npz` with the element `index` of `weights` replaced by `value`.
fn changed_mixed(dir: &std::path::Path, index: usize, value: f32) -> std::path::PathBuf {
    let mut ts = tensors(&testdata("core", "mixed.npz"));
    let w = &mut ts[0];
    assert_eq!(w.0, "weights");
    let mut v = w.1.to_vec::<f32>().unwrap();
    v[index] = value;
    w.1 = Tensor::from_vec(v, w.1.dims().to_vec(), Order::RowMajor).unwrap();
    let out = dir.join(format!("changed_{index}.npz"));
    tensorfmt::save(&out, Format::Npz, &ts, &Default::default()).unwrap();
    out
}

#[test]
fn equal_files_exit_0() {
    let mixed = testdata("core", "mixed.npz");
    let (code, out, err) = tf(args!["diff", mixed, mixed]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "equal: 3 tensor(s), exact\n");
    // Quiet: nothing at all.
    let (code, out, err) = tf(args!["diff", "-q", mixed, mixed]);
    assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));
}

#[test]
fn a_changed_value_exits_1_and_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let mixed = testdata("core", "mixed.npz");
    let changed = changed_mixed(dir.path(), 4, 2.0);
    let (code, out, err) = tf(args!["diff", mixed, changed]);
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("weights: 1 of 6 values differ"), "{out}");
    assert!(out.contains("[1, 1] (flat 4): a = "), "{out}");
    assert!(out.contains(", b = 2\n"), "{out}");
    assert!(
        out.contains("different: 1 of 3 common tensor(s) differ"),
        "{out}"
    );
    let (code, out, _) = tf(args!["diff", "--quiet", mixed, changed]);
    assert_eq!((code, out.as_str()), (1, ""));

    // JSON: the whole report.
    let (code, out, _) = tf(args!["diff", "--json", mixed, changed]);
    assert_eq!(code, 1);
    let v = json(&out);
    assert_eq!(v["equal"], false);
    assert_eq!(v["rtol"], 0.0);
    assert_eq!(v["atol"], 0.0);
    assert_eq!(v["allow_dtype"], false);
    assert_eq!(v["only_in_a"], serde_json::json!([]));
    let w = &v["tensors"][0];
    assert_eq!(w["name"], "weights");
    assert_eq!(w["name_b"], "weights");
    assert_eq!(w["equal"], false);
    assert_eq!(w["dtype_a"], "f32");
    assert_eq!(w["shape_a"], serde_json::json!([2, 3]));
    assert_eq!(w["values_compared"], true);
    assert_eq!(w["count"], 6);
    assert_eq!(w["mismatched"], 1);
    assert_eq!(w["diffs"][0]["index"], 4);
    assert_eq!(w["diffs"][0]["multi_index"], serde_json::json!([1, 1]));
    assert_eq!(w["diffs"][0]["b"], 2.0);
    let a = w["diffs"][0]["a"].as_f64().unwrap();
    assert_eq!(w["max_abs_error"].as_f64().unwrap(), (a - 2.0).abs());
    assert_eq!(v["tensors"][1]["equal"], true);
    assert_eq!(v["tensors"][2]["equal"], true);
}

#[test]
fn tolerances_decide() {
    let dir = tempfile::tempdir().unwrap();
    let mixed = testdata("core", "mixed.npz");
    let a = tensors(&mixed)[0].1.to_vec::<f32>().unwrap()[4];
    let changed = changed_mixed(dir.path(), 4, a + 0.5);
    let (code, _, _) = tf(args!["diff", mixed, changed, "--atol", "0.4"]);
    assert_eq!(code, 1);
    let (code, out, err) = tf(args!["diff", mixed, changed, "--atol", "0.5"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("weights: equal within tolerance (max abs error 0.5"),
        "{out}"
    );
    assert!(
        out.contains("equal: 3 tensor(s), rtol 0, atol 0.5"),
        "{out}"
    );
    // rtol against |b| = |a + 0.5|.
    let rtol = format!("{}", 0.5 / (a + 0.5).abs() as f64 * 1.001);
    let (code, _, err) = tf(args!["diff", mixed, changed, "--rtol", &rtol]);
    assert_eq!(code, 0, "{err}");
    // Bad tolerances are usage errors: 2.
    for bad in ["-1", "nan", "x"] {
        let (code, _, _) = tf(args!["diff", mixed, changed, "--rtol", bad]);
        assert_eq!(code, 2, "{bad}");
    }
}

#[test]
fn dtype_shape_and_names() {
    let dir = tempfile::tempdir().unwrap();
    let mixed = testdata("core", "mixed.npz");
    // weights as f64, bias reshaped, flags dropped, extra added.
    let mut ts = tensors(&mixed);
    ts[0].1 = ts[0].1.cast(tensorfmt::DType::F64).unwrap();
    ts[1].1 = ts[1].1.reshape([3, 1]).unwrap();
    ts.pop();
    ts.push((
        "extra".into(),
        Tensor::from_vec(vec![1u8], [1], Order::RowMajor).unwrap(),
    ));
    let other = dir.path().join("other.safetensors");
    tensorfmt::save(&other, Format::Safetensors, &ts, &Default::default()).unwrap();
    let (code, out, _) = tf(args!["diff", mixed, other]);
    assert_eq!(code, 1);
    assert!(out.contains("only in A: flags (bool [4])"), "{out}");
    assert!(out.contains("only in B: extra (u8 [1])"), "{out}");
    assert!(out.contains("weights: dtype f32 vs f64"), "{out}");
    assert!(
        out.contains("bias: shape [3] vs [3, 1] (values not compared)"),
        "{out}"
    );
    let (code, out, _) = tf(args!["diff", "--json", mixed, other]);
    assert_eq!(code, 1);
    let v = json(&out);
    assert_eq!(v["only_in_a"][0]["name"], "flags");
    assert_eq!(v["only_in_a"][0]["dtype"], "bool");
    assert_eq!(v["only_in_b"][0]["shape"], serde_json::json!([1]));
    assert_eq!(v["tensors"][0]["dtype_b"], "f64");
    assert_eq!(v["tensors"][0]["mismatched"], 0);
    assert_eq!(v["tensors"][1]["values_compared"], false);
    assert_eq!(v["tensors"][1]["count"], 0);

    // --allow-dtype: the weights are equal; the file still differs (names, shape).
    let (code, out, _) = tf(args!["diff", "--json", "--allow-dtype", mixed, other]);
    assert_eq!(code, 1);
    assert_eq!(json(&out)["tensors"][0]["equal"], true);
    // Only the dtype differs: --allow-dtype makes the files equal.
    let w64 = dir.path().join("w64.npy");
    let w32 = dir.path().join("w32.npy");
    tensorfmt::save(&w64, Format::Npy, &ts[..1], &Default::default()).unwrap();
    let t32 = tensors(&mixed).swap_remove(0);
    tensorfmt::save(&w32, Format::Npy, &[t32], &Default::default()).unwrap();
    assert_eq!(tf(args!["diff", w32, w64]).0, 1);
    assert_eq!(tf(args!["diff", w32, w64, "--allow-dtype"]).0, 0);
}

#[test]
fn nan_equals_nan_and_max_diffs() {
    let dir = tempfile::tempdir().unwrap();
    let v = vec![f32::NAN, f32::INFINITY, 1.0, 2.0, 3.0, 4.0];
    let mut w = v.clone();
    for x in &mut w[2..] {
        *x += 1.0;
    }
    let save = |name: &str, v: Vec<f32>| {
        let p = dir.path().join(name);
        let t = Tensor::from_vec(v, [6], Order::RowMajor).unwrap();
        tensorfmt::save(
            &p,
            Format::Safetensors,
            &[("x".into(), t)],
            &Default::default(),
        )
        .unwrap();
        p
    };
    let a = save("a.safetensors", v.clone());
    let a2 = save("a2.safetensors", v);
    let b = save("b.safetensors", w);
    assert_eq!(tf(args!["diff", a, a2]).0, 0);
    let (code, out, _) = tf(args!["diff", a, b, "--max-diffs", "2"]);
    assert_eq!(code, 1);
    assert!(out.contains("x: 4 of 6 values differ"), "{out}");
    assert!(out.contains("  ... and 2 more"), "{out}");
    // Non-finite values in JSON are strings.
    let inf = save("inf.safetensors", vec![f32::NEG_INFINITY; 6]);
    let (code, out, _) = tf(args!["diff", "--json", a, inf]);
    assert_eq!(code, 1);
    let v = json(&out);
    assert_eq!(v["tensors"][0]["diffs"][0]["a"], "NaN");
    assert_eq!(v["tensors"][0]["diffs"][0]["b"], "-inf");
    assert_eq!(v["tensors"][0]["diffs"][1]["a"], "inf");
    assert_eq!(v["tensors"][0]["max_abs_error"], "inf");
}

#[test]
fn single_npy_arrays_compare_whatever_their_file_names() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.npy");
    std::fs::copy(testdata("core", "f32_2x3.npy"), &copy).unwrap();
    let (code, out, err) = tf(args!["diff", testdata("core", "f32_2x3.npy"), copy]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "equal: 1 tensor(s), exact\n");
    let (_, out, _) = tf(args![
        "diff",
        "--json",
        testdata("core", "f32_2x3.npy"),
        copy
    ]);
    assert_eq!(json(&out)["tensors"][0]["name_b"], "copy");
}

#[test]
fn trouble_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let good = testdata("core", "f32_2x3.npy");
    // Missing file.
    let (code, out, err) = tf(args!["diff", good, dir.path().join("missing.npy")]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.starts_with("tensorfmt: error: ") && err.contains("missing.npy"),
        "{err}"
    );
    // Unknown format.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"just some text").unwrap();
    let (code, _, err) = tf(args!["diff", junk, good]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot tell the file format"), "{err}");
    // Truncated file: its header is fine, its data ends early.
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.npy");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let (code, _, err) = tf(args!["diff", good, cut]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("npy"), "{err}");
    // Quiet still reports trouble on stderr.
    let (code, _, err) = tf(args!["diff", "-q", good, cut]);
    assert_eq!(code, 2);
    assert!(!err.is_empty());
    // Usage errors.
    for args in [
        args!["diff", good],
        args!["diff", good, good, "--max-diffs", "x"],
        args!["diff", good, good, "--json", "--quiet"],
        args!["diff", good, good, "--frobnicate"],
    ] {
        let (code, _, _) = tf(&args);
        assert_eq!(code, 2, "{args:?}");
    }
}

#[test]
fn kind_and_strict_reach_the_readers() {
    // A kind that the Caffe reader does not know is an error naming it: trouble, 2.
    let model = testdata("caffe", "v2_tiny.caffemodel");
    let (code, _, err) = tf(args!["diff", model, model, "--kind", "nonsense"]);
    assert_eq!(code, 2);
    assert!(err.contains("nonsense"), "{err}");
    let (code, _, err) = tf(args![
        "diff",
        model,
        model,
        "--kind",
        "caffemodel",
        "--strict"
    ]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn caffe_models_differing_in_topology_are_not_equal() {
    // A caffemodel rewritten from its tensors alone (--dtype) keeps the blobs and loses
    // the bottoms, tops, phase and layer parameters: diff said "equal".
    let dir = tempfile::tempdir().unwrap();
    let src = testdata("caffe", "v2_tiny.caffemodel");
    let out = dir.path().join("weights_only.caffemodel");
    let (code, _, err) = tf(args!["convert", &src, &out, "--dtype", "f32"]);
    assert_eq!(code, 0, "{err}");
    let (code, stdout, _) = tf(args!["diff", &src, &out]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("header structure:"), "{stdout}");
    // The same structure (a copy through safetensors carrying the original) is equal.
    let mid = dir.path().join("mid.safetensors");
    let back = dir.path().join("back.caffemodel");
    assert_eq!(tf(args!["convert", &src, &mid]).0, 0);
    assert_eq!(tf(args!["convert", &mid, &back]).0, 0);
    let (code, stdout, _) = tf(args!["diff", &src, &back]);
    assert_eq!(code, 0, "{stdout}");
}

/// An ONNX model (ir 8, opset 17) with a graph `Identity(w)` and two initializers: `w`
/// = [1, 2] (float_data) and `labels` = ["cat"] (STRING, which tensorfmt leaves out):
/// the prost encoding of `model_with_a_left_out_tensor` in the facade's tests/onnx.rs.
const MODEL_WITH_A_STRING: &[u8] = &[
    8, 8, 58, 61, 10, 16, 10, 1, 119, 18, 1, 121, 34, 8, 73, 100, 101, 110, 116, 105, 116, 121, 18,
    1, 103, 42, 18, 10, 1, 2, 16, 1, 34, 8, 0, 0, 128, 63, 0, 0, 0, 64, 66, 1, 119, 42, 18, 10, 1,
    1, 16, 8, 50, 3, 99, 97, 116, 66, 6, 108, 97, 98, 101, 108, 115, 66, 2, 16, 17,
];

/// What a reader leaves out of its tensors is not compared: diff says so (on stderr, and
/// as `warnings_a` / `warnings_b` in JSON), where it used to say nothing.
#[test]
fn what_the_readers_left_out_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.onnx");
    std::fs::write(&a, MODEL_WITH_A_STRING).unwrap();
    let (code, out, err) = tf(args!["diff", a, a]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("equal"), "{out}");
    assert_eq!(err.matches("labels").count(), 2, "{err}");
    assert!(err.contains("warning"), "{err}");
    let (code, out, _) = tf(args!["diff", "--json", a, a]);
    assert_eq!(code, 0);
    let v = json(&out);
    assert_eq!(v["warnings_a"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["warnings_b"].as_array().unwrap().len(), 1, "{v}");
}
