//! `tensorfmt diff A B`: the report of [`tensorfmt::diff::compare`] as text or JSON.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};
use tensorfmt::diff::{compare, DiffOptions, DiffReport, Scalar, TensorDiff};
use tensorfmt::{ReadOptions, TensorFile, TensorInfo};

use crate::commands::{byte_len, info_json};
use crate::output::{emit, emit_json};
use crate::progress::{bar_progress, bytes_bar};
use crate::text;
use crate::Failure;
use tensorfmt::progress::Tracked;

/// Compares two files; `Ok(true)` when equal within tolerance.
pub fn diff(
    a: &Path,
    b: &Path,
    read: &ReadOptions,
    options: &DiffOptions,
    quiet: bool,
    as_json: bool,
) -> Result<bool, Failure> {
    let open =
        |p: &Path| crate::commands::open_input(p, None, read).map_err(|e| Failure::in_file(p, e));
    let fa = open(a)?;
    let fb = open(b)?;
    let (fa, fb): (&dyn TensorFile, &dyn TensorFile) = (&*fa, &*fb);
    // The bar counts the bytes of both sides of every pair whose values are compared.
    let infos_b = fb.tensors();
    let by_name: HashMap<&str, &TensorInfo> =
        infos_b.iter().map(|i| (i.name.as_str(), i)).collect();
    let total: u64 = fa
        .tensors()
        .iter()
        .filter_map(|ia| {
            let ib = by_name.get(ia.name.as_str())?;
            (ia.shape.dims() == ib.shape.dims()).then(|| byte_len(ia) + byte_len(ib))
        })
        .sum();
    let bar = bytes_bar(total, "comparing", quiet || as_json);
    let progress = bar_progress(&bar);
    let ta = Tracked::new(fa, &progress);
    let tb = Tracked::new(fb, &progress);
    let report = compare(&ta, &tb, options).map_err(|e| failing_side(a, fa, b, fb, e))?;
    bar.finish_and_clear();
    // What each reader left out of its tensors (an ONNX initializer of a type numpy
    // lacks, subgraph initializers) is not compared: said, as `inspect` says it.
    let (wa, wb) = (fa.warnings(), fb.warnings());
    if as_json {
        let mut v = report_json(a, b, &report);
        v["warnings_a"] = json!(wa);
        v["warnings_b"] = json!(wb);
        emit_json(&v);
    } else {
        for (p, ws) in [(a, &wa), (b, &wb)] {
            for w in ws {
                eprintln!(
                    "tensorfmt: warning: {}: {}",
                    text::path(p),
                    text::message(w)
                );
            }
        }
        if !quiet {
            emit(&report_text(&report));
        }
    }
    Ok(report.is_equal())
}

/// An error met while comparing, naming the file it came from: the one the message
/// names, else the one that fails a full check (this is the error path: the extra
/// read costs nothing on success), else both.
fn failing_side(
    a: &Path,
    fa: &dyn TensorFile,
    b: &Path,
    fb: &dyn TensorFile,
    e: tensorfmt::Error,
) -> Failure {
    let m = e.to_string();
    if m.contains(&a.display().to_string()) || m.contains(&b.display().to_string()) {
        Failure::Input(m)
    } else if fa.validate().is_err() {
        Failure::in_file(a, e)
    } else if fb.validate().is_err() {
        Failure::in_file(b, e)
    } else {
        Failure::Input(format!(
            "comparing {} and {}: {m}",
            a.display(),
            b.display()
        ))
    }
}

/// A value as JSON: a number, or `"NaN"`, `"inf"`, `"-inf"`.
fn scalar_json(v: Scalar) -> Value {
    match v {
        Scalar::Float(x) => float_json(x),
        Scalar::Int(i) => {
            if let Ok(x) = i64::try_from(i) {
                json!(x)
            } else if let Ok(x) = u64::try_from(i) {
                json!(x)
            } else {
                json!(i.to_string())
            }
        }
    }
}

fn float_json(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else if x.is_nan() {
        json!("NaN")
    } else if x > 0.0 {
        json!("inf")
    } else {
        json!("-inf")
    }
}

fn tensor_json(t: &TensorDiff) -> Value {
    json!({
        "name": t.name,
        "name_b": t.name_b,
        "equal": t.equal,
        "dtype_a": t.dtype_a.name(),
        "dtype_b": t.dtype_b.name(),
        "shape_a": t.shape_a.dims(),
        "shape_b": t.shape_b.dims(),
        "values_compared": t.values_compared,
        "count": t.count,
        "mismatched": t.mismatched,
        "max_abs_error": float_json(t.max_abs_error),
        "max_rel_error": float_json(t.max_rel_error),
        "diffs": t.first_diffs.iter().map(|d| json!({
            "index": d.index,
            "multi_index": d.multi_index,
            "a": scalar_json(d.a),
            "b": scalar_json(d.b),
        })).collect::<Vec<_>>(),
    })
}

/// The JSON document of `diff --json` (documented in `docs/cli.md`).
fn report_json(a: &Path, b: &Path, r: &DiffReport) -> Value {
    let infos = |v: &[TensorInfo]| v.iter().map(info_json).collect::<Vec<_>>();
    json!({
        "a": a.display().to_string(),
        "b": b.display().to_string(),
        "equal": r.is_equal(),
        "rtol": r.options.tolerance.rtol,
        "atol": r.options.tolerance.atol,
        "allow_dtype": r.options.allow_dtype,
        "only_in_a": infos(&r.only_in_a),
        "only_in_b": infos(&r.only_in_b),
        "header": r.header.iter().map(|(k, a, b)| json!({"field": k, "a": a, "b": b})).collect::<Vec<_>>(),
        "tensors": r.tensors.iter().map(tensor_json).collect::<Vec<_>>(),
    })
}

fn tolerance_text(r: &DiffReport) -> String {
    let t = r.options.tolerance;
    if t.rtol == 0.0 && t.atol == 0.0 {
        "exact".to_string()
    } else {
        format!("rtol {}, atol {}", t.rtol, t.atol)
    }
}

/// The text of `diff`: one block per differing tensor, then a summary line.
fn report_text(r: &DiffReport) -> String {
    let mut out = String::new();
    for (side, list) in [("A", &r.only_in_a), ("B", &r.only_in_b)] {
        for i in list.iter() {
            let _ = writeln!(
                out,
                "only in {side}: {} ({} {})",
                text::name(&i.name),
                i.dtype,
                i.shape
            );
        }
    }
    for t in &r.tensors {
        // Names come from the files: escaped and bounded.
        let label = if t.name == t.name_b {
            text::name(&t.name)
        } else {
            format!("{} (B: {})", text::name(&t.name), text::name(&t.name_b))
        };
        let t = &TensorDiff {
            name: label,
            ..t.clone()
        };
        if t.equal {
            // Equal within a tolerance but not identical: say by how much.
            if t.max_abs_error > 0.0 {
                let _ = writeln!(
                    out,
                    "{}: equal within tolerance (max abs error {}, max rel error {})",
                    t.name, t.max_abs_error, t.max_rel_error
                );
            }
            continue;
        }
        if t.shape_differs() {
            let _ = writeln!(
                out,
                "{}: shape {} vs {} (values not compared)",
                t.name, t.shape_a, t.shape_b
            );
            continue;
        }
        if t.dtype_differs() {
            let _ = writeln!(out, "{}: dtype {} vs {}", t.name, t.dtype_a, t.dtype_b);
        }
        if t.mismatched > 0 {
            let _ = writeln!(
                out,
                "{}: {} of {} values differ (max abs error {}, max rel error {})",
                t.name, t.mismatched, t.count, t.max_abs_error, t.max_rel_error
            );
            for d in &t.first_diffs {
                let _ = writeln!(
                    out,
                    "  {:?} (flat {}): a = {}, b = {}",
                    d.multi_index, d.index, d.a, d.b
                );
            }
            let more = t.mismatched - t.first_diffs.len() as u64;
            if more > 0 {
                let _ = writeln!(out, "  ... and {more} more");
            }
        }
    }
    for (k, a, b) in &r.header {
        let _ = writeln!(
            out,
            "header {}: {} != {}",
            text::name(k),
            text::esc(&a.to_string()),
            text::esc(&b.to_string())
        );
    }
    let tol = tolerance_text(r);
    if r.is_equal() {
        let _ = writeln!(out, "equal: {} tensor(s), {tol}", r.tensors.len());
    } else {
        let _ = writeln!(
            out,
            "different: {} of {} common tensor(s) differ, {} only in A, {} only in B, {} header field(s) differ ({tol})",
            r.differing(),
            r.tensors.len(),
            r.only_in_a.len(),
            r.only_in_b.len(),
            r.header.len()
        );
    }
    out
}
