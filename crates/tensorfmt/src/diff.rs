//! Tensor-by-tensor comparison of two files (what `tensorfmt diff` prints).
//!
//! [`compare`] pairs the tensors of two [`TensorFile`]s **by name** and reports, in a
//! typed [`DiffReport`]:
//!
//! - tensors only in A and only in B ([`DiffReport::only_in_a`], [`DiffReport::only_in_b`]);
//! - per common tensor ([`TensorDiff`]): dtype and shape of each side, and, when the
//!   shapes agree, the element count, the number of elements outside the tolerance,
//!   the largest absolute and relative errors and the first differences (flat index,
//!   multi-index, both values).
//!
//! # Rules
//!
//! - **Values** are compared with numpy's `allclose` rule `|a - b| <= atol + rtol * |b|`
//!   (asymmetric: B is the reference), except that NaN equals NaN and an infinity equals
//!   only the same infinity (numpy's `equal_nan=True`). Floats are compared as `f64`;
//!   when both sides are integers (or bool) the difference is computed exactly, so two
//!   `u64` values that round to the same `f64` still differ.
//! - **The default tolerance is exact** ([`Tolerance::EXACT`], `rtol = atol = 0`): what a
//!   user checking a lossless conversion (caffemodel -> safetensors -> caffemodel)
//!   expects. `-0.0` equals `0.0`. numpy's own defaults are [`Tolerance::NUMPY`]
//!   (`rtol = 1e-5`, `atol = 1e-8`).
//! - **A dtype difference is a difference** (an `f32` tensor that came back as `f64`
//!   was not converted losslessly), unless [`DiffOptions::allow_dtype`] is set; the
//!   values are compared either way.
//! - **A shape difference is a difference**, and the values of such a pair are not
//!   compared (no broadcasting, no flat comparison of `[6]` against `[2, 3]`).
//! - **An `.npy` file's array has no name** (readers name it after the file stem): when
//!   either file is an npy file and both hold exactly one tensor, the two tensors are
//!   paired whatever their names ([`TensorDiff::name_b`] keeps B's), so
//!   `diff weights.npy back.npy` compares the arrays.
//!
//! # Memory
//!
//! Both sides are streamed through [`TensorFile::read_chunks`]. The pieces of A and B
//! need not align (a PVP file yields frames, an npz member one piece): the comparison
//! holds the current piece of each side, converted to `f64` (or exact integers), and
//! walks the overlap, so memory stays bounded by one piece per side. Two tensors that
//! both files store sparsely ([`TensorFile::sparse_rows`], sparse PVP movies) are
//! compared from their entries instead, row by row, in the time of the entries.
//!
//! ```
//! use tensorfmt::diff::{compare, DiffOptions, Tolerance};
//! use tensorfmt::{interop::MemoryFile, Order, Tensor};
//!
//! let t = |v: Vec<f32>| Tensor::from_vec(v, [2, 2], Order::RowMajor).unwrap();
//! let a = MemoryFile::new(vec![("w".into(), t(vec![1.0, 2.0, 3.0, f32::NAN]))]);
//! let b = MemoryFile::new(vec![("w".into(), t(vec![1.0, 2.0, 3.0001, f32::NAN]))]);
//!
//! // Exact by default: one element differs.
//! let report = compare(&a, &b, &DiffOptions::default())?;
//! assert!(!report.is_equal());
//! let w = &report.tensors[0];
//! assert_eq!(w.mismatched, 1);
//! assert_eq!(w.first_diffs[0].multi_index, vec![1, 0]);
//!
//! // Within a tolerance: equal.
//! let close = DiffOptions { tolerance: Tolerance { rtol: 1e-4, atol: 0.0 }, ..Default::default() };
//! assert!(compare(&a, &b, &close)?.is_equal());
//! # Ok::<(), tensorfmt::Error>(())
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt;

use tensorfmt_core::{
    with_element, DType, Element, Error, Order, Result, Shape, SparseRows, Tensor, TensorFile,
    TensorInfo,
};

/// The allowed difference between two values: `|a - b| <= atol + rtol * |b|`.
///
/// ```
/// use tensorfmt::diff::Tolerance;
/// assert_eq!(Tolerance::default(), Tolerance::EXACT);
/// assert!(Tolerance::EXACT.close(0.5, 0.5));
/// assert!(Tolerance::EXACT.close(-0.0, 0.0));
/// assert!(!Tolerance::EXACT.close(1.0, 1.0 + f64::EPSILON));
/// assert!(Tolerance::NUMPY.close(1.0, 1.0 + 1e-6));
/// assert!(Tolerance::EXACT.close(f64::NAN, f64::NAN));
/// assert!(!Tolerance::NUMPY.close(f64::INFINITY, f64::NEG_INFINITY));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// Relative tolerance (times `|b|`).
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

impl Tolerance {
    /// Exact equality (NaN equals NaN): the default, for lossless conversions.
    pub const EXACT: Tolerance = Tolerance {
        rtol: 0.0,
        atol: 0.0,
    };

    /// numpy's `allclose` defaults, `rtol = 1e-5`, `atol = 1e-8`.
    pub const NUMPY: Tolerance = Tolerance {
        rtol: 1e-5,
        atol: 1e-8,
    };

    /// True when `a` is within the tolerance of the reference `b`.
    pub fn close(self, a: f64, b: f64) -> bool {
        if a.is_nan() || b.is_nan() {
            return a.is_nan() && b.is_nan();
        }
        if a.is_infinite() || b.is_infinite() {
            return a == b;
        }
        (a - b).abs() <= self.atol + self.rtol * b.abs()
    }

    fn check(self) -> Result<()> {
        let ok = |x: f64| x.is_finite() && x >= 0.0;
        if ok(self.rtol) && ok(self.atol) {
            Ok(())
        } else {
            Err(Error::Invalid(format!(
                "tolerances must be finite and not negative, got rtol {} and atol {}",
                self.rtol, self.atol
            )))
        }
    }
}

impl Default for Tolerance {
    fn default() -> Tolerance {
        Tolerance::EXACT
    }
}

/// How [`compare`] compares.
///
/// ```
/// use tensorfmt::diff::{DiffOptions, Tolerance};
/// let o = DiffOptions::default();
/// assert_eq!((o.tolerance, o.max_diffs, o.allow_dtype), (Tolerance::EXACT, 10, false));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiffOptions {
    /// Value tolerance (default [`Tolerance::EXACT`]).
    pub tolerance: Tolerance,
    /// How many differing elements to record per tensor (default 10); all are counted.
    pub max_diffs: usize,
    /// Treat tensors whose values agree but whose dtypes differ as equal.
    pub allow_dtype: bool,
    /// Compare only the tensors: skip the kind and header fields of two files of the
    /// same format (which the format distinguishes: a primitiv batch of 3 `[2]` vectors
    /// is not a `[2, 3]` matrix, though both export as `[2, 3]`).
    pub tensors_only: bool,
}

impl Default for DiffOptions {
    fn default() -> DiffOptions {
        DiffOptions {
            tolerance: Tolerance::EXACT,
            max_diffs: 10,
            allow_dtype: false,
            tensors_only: false,
        }
    }
}

/// One element value as read: integers exactly, floats as `f64`.
///
/// ```
/// use tensorfmt::diff::Scalar;
/// assert_eq!(Scalar::Int(u64::MAX as i128).to_string(), "18446744073709551615");
/// assert_eq!(Scalar::Float(0.5).to_string(), "0.5");
/// assert_eq!(Scalar::Int(3).to_f64(), 3.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// A floating-point element (f16, bf16, f32 and f64 widen exactly to f64).
    Float(f64),
    /// An integer or bool element.
    Int(i128),
}

impl Scalar {
    /// The value as `f64` (rounded for integers beyond 2^53).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Float(v) => v,
            Scalar::Int(v) => v as f64,
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Float(v) => write!(f, "{v}"),
            Scalar::Int(v) => write!(f, "{v}"),
        }
    }
}

/// One element outside the tolerance.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueDiff {
    /// Row-major flat index.
    pub index: u64,
    /// The same position as a multi-index into the shape.
    pub multi_index: Vec<usize>,
    /// The value in A.
    pub a: Scalar,
    /// The value in B.
    pub b: Scalar,
}

/// The comparison of one tensor present in both files.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorDiff {
    /// The tensor's name (in A).
    pub name: String,
    /// Its name in B: the same, except for single arrays paired with an npy file.
    pub name_b: String,
    /// Its dtype in A.
    pub dtype_a: DType,
    /// Its dtype in B.
    pub dtype_b: DType,
    /// Its shape in A.
    pub shape_a: Shape,
    /// Its shape in B.
    pub shape_b: Shape,
    /// False when the shapes differ (values are then not compared).
    pub values_compared: bool,
    /// Elements compared (0 when the shapes differ).
    pub count: u64,
    /// Elements outside the tolerance.
    pub mismatched: u64,
    /// Largest `|a - b|` over all compared elements; infinite when a non-finite value
    /// meets a different one (NaN against a number, +inf against -inf or a number).
    pub max_abs_error: f64,
    /// Largest `|a - b| / |b|`; infinite when `b = 0` and `a != 0`.
    pub max_rel_error: f64,
    /// The first [`DiffOptions::max_diffs`] elements outside the tolerance, in order.
    pub first_diffs: Vec<ValueDiff>,
    /// The verdict: same shape, values within tolerance, same dtype (unless allowed).
    pub equal: bool,
}

impl TensorDiff {
    /// True when the dtypes differ (whether or not that counts, see [`DiffOptions::allow_dtype`]).
    pub fn dtype_differs(&self) -> bool {
        self.dtype_a != self.dtype_b
    }

    /// True when the shapes differ.
    pub fn shape_differs(&self) -> bool {
        self.shape_a.dims() != self.shape_b.dims()
    }
}

/// The comparison of two files: see the [module docs](self) for the rules.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffReport {
    /// Tensors present in both files, in A's order.
    pub tensors: Vec<TensorDiff>,
    /// Tensors only in A, in A's order.
    pub only_in_a: Vec<TensorInfo>,
    /// Tensors only in B, in B's order.
    pub only_in_b: Vec<TensorInfo>,
    /// For two files of the same format: the kind and header fields that differ, as
    /// `(field, value in A, value in B)` (empty with `tensors_only`).
    pub header: Vec<(String, String, String)>,
    /// The options used.
    pub options: DiffOptions,
}

impl DiffReport {
    /// True when both files hold the same names and every tensor is equal.
    pub fn is_equal(&self) -> bool {
        self.only_in_a.is_empty()
            && self.only_in_b.is_empty()
            && self.header.is_empty()
            && self.tensors.iter().all(|t| t.equal)
    }

    /// How many common tensors differ.
    pub fn differing(&self) -> usize {
        self.tensors.iter().filter(|t| !t.equal).count()
    }
}

/// Compares two files tensor by tensor, by name (see the [module docs](self)).
///
/// Errors only when a file cannot be read (a piece fails to decode, or a tensor yields
/// more or fewer elements than its listed shape) or the tolerance is negative or not
/// finite; differences are reported in the [`DiffReport`], not as errors.
///
/// ```
/// use tensorfmt::diff::{compare, DiffOptions};
/// use tensorfmt::{interop::MemoryFile, Order, Tensor};
///
/// let a = MemoryFile::new(vec![
///     ("x".into(), Tensor::from_vec(vec![1i32, 2, 3], [3], Order::RowMajor)?),
///     ("only_a".into(), Tensor::from_vec(vec![0u8], [1], Order::RowMajor)?),
/// ]);
/// let b = MemoryFile::new(vec![("x".into(), Tensor::from_vec(vec![1i64, 2, 3], [3], Order::RowMajor)?)]);
/// let r = compare(&a, &b, &DiffOptions::default())?;
/// assert_eq!(r.only_in_a[0].name, "only_a");
/// let x = &r.tensors[0];
/// assert!(x.dtype_differs() && x.mismatched == 0 && !x.equal);
/// let lenient = compare(&a, &b, &DiffOptions { allow_dtype: true, ..Default::default() })?;
/// assert!(lenient.tensors[0].equal && !lenient.is_equal()); // `only_a` still differs
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub fn compare(
    a: &dyn TensorFile,
    b: &dyn TensorFile,
    options: &DiffOptions,
) -> Result<DiffReport> {
    options.tolerance.check()?;
    // A sparse layout (npz / safetensors) against the file it came from: its `values`.
    let view_a = crate::interop::sparse::diff_view(a, b)?;
    let view_b = crate::interop::sparse::diff_view(b, a)?;
    let a: &dyn TensorFile = view_a.as_deref().unwrap_or(a);
    let b: &dyn TensorFile = view_b.as_deref().unwrap_or(b);
    let infos_a = unique(a.tensors());
    let infos_b = unique(b.tensors());
    let names_a: HashSet<&str> = infos_a.iter().map(|i| i.name.as_str()).collect();
    // B's listing by name: matching each of A's tensors is O(1), not a scan of B.
    let by_name_b: HashMap<&str, &TensorInfo> =
        infos_b.iter().map(|i| (i.name.as_str(), i)).collect();
    if (a.format() == "npy" || b.format() == "npy") && infos_a.len() == 1 && infos_b.len() == 1 {
        return Ok(DiffReport {
            tensors: vec![compare_infos(a, b, &infos_a[0], &infos_b[0], options)?],
            only_in_a: Vec::new(),
            only_in_b: Vec::new(),
            header: header_diffs(a, b, options),
            options: *options,
        });
    }
    let mut tensors = Vec::new();
    let mut only_in_a = Vec::new();
    for ia in &infos_a {
        match by_name_b.get(ia.name.as_str()) {
            Some(ib) => tensors.push(compare_infos(a, b, ia, ib, options)?),
            None => only_in_a.push(ia.clone()),
        }
    }
    let only_in_b = infos_b
        .iter()
        .filter(|ib| !names_a.contains(ib.name.as_str()))
        .cloned()
        .collect();
    debug_assert!(tensors
        .iter()
        .all(|t| by_name_b.contains_key(t.name.as_str())));
    Ok(DiffReport {
        tensors,
        only_in_a,
        only_in_b,
        header: header_diffs(a, b, options),
        options: *options,
    })
}

/// The kind and header fields that differ between two files of the same legacy format
/// (the things that format distinguishes beyond the exported tensors); nothing across
/// formats, whose headers are not comparable.
fn header_diffs(
    a: &dyn TensorFile,
    b: &dyn TensorFile,
    options: &DiffOptions,
) -> Vec<(String, String, String)> {
    // npy, npz and safetensors headers only describe the tensors (compared already,
    // with `allow_dtype` and tolerances applying); the legacy formats' headers hold
    // what their tensors do not say.
    let interop = matches!(a.format(), "npy" | "npz" | "safetensors");
    if options.tensors_only || interop || a.format() != b.format() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if a.kind() != b.kind() {
        out.push(("kind".to_string(), a.kind(), b.kind()));
    }
    // Where a model keeps its payloads (inside, or in files beside it) is storage, not
    // content: the tensors read from either are compared already.
    let content = |(k, _): &(String, tensorfmt_core::FieldValue)| !is_storage_field(a.format(), k);
    let ha: Vec<_> = a.header().into_iter().filter(content).collect();
    let hb: Vec<_> = b.header().into_iter().filter(content).collect();
    for (k, va) in &ha {
        match hb.iter().find(|(kb, _)| kb == k) {
            Some((_, vb)) if same_field(va, vb) => {}
            Some((_, vb)) => out.push((k.clone(), va.to_string(), vb.to_string())),
            None => out.push((k.clone(), va.to_string(), "(absent)".into())),
        }
    }
    for (k, vb) in &hb {
        if !ha.iter().any(|(ka, _)| ka == k) {
            out.push((k.clone(), "(absent)".into(), vb.to_string()));
        }
    }
    out
}

/// A header field that says where a file stores its bytes rather than what they hold.
fn is_storage_field(format: &str, key: &str) -> bool {
    #[cfg(feature = "onnx")]
    if format == "onnx" && key == tensorfmt_onnx::EXTERNAL_DATA_FIELD {
        return true;
    }
    let _ = (format, key);
    false
}

/// Header field equality with NaN equal to NaN (numpy's `equal_nan`), so a file whose
/// `time` or `wMin` is NaN equals itself; lists and maps compare element by element.
fn same_field(a: &tensorfmt_core::FieldValue, b: &tensorfmt_core::FieldValue) -> bool {
    use tensorfmt_core::FieldValue;
    match (a, b) {
        (FieldValue::Float(x), FieldValue::Float(y)) => x == y || (x.is_nan() && y.is_nan()),
        (FieldValue::List(x), FieldValue::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_field(x, y))
        }
        (FieldValue::Map(x), FieldValue::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kx, x), (ky, y))| kx == ky && same_field(x, y))
        }
        _ => a == b,
    }
}

/// Compares the tensor `name` of two files.
///
/// ```
/// use tensorfmt::diff::{compare_tensor, DiffOptions};
/// use tensorfmt::{interop::MemoryFile, Order, Tensor};
/// let a = MemoryFile::new(vec![("t".into(), Tensor::from_vec(vec![0f32, 1.0], [2], Order::RowMajor)?)]);
/// let b = MemoryFile::new(vec![("t".into(), Tensor::from_vec(vec![0f32, 2.0], [2], Order::RowMajor)?)]);
/// let d = compare_tensor(&a, &b, "t", &DiffOptions::default())?;
/// assert_eq!((d.count, d.mismatched, d.max_abs_error, d.max_rel_error), (2, 1, 1.0, 0.5));
/// assert!(compare_tensor(&a, &b, "nope", &DiffOptions::default()).is_err());
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub fn compare_tensor(
    a: &dyn TensorFile,
    b: &dyn TensorFile,
    name: &str,
    options: &DiffOptions,
) -> Result<TensorDiff> {
    options.tolerance.check()?;
    let find = |f: &dyn TensorFile| {
        f.tensors()
            .into_iter()
            .find(|i| i.name == name)
            .ok_or_else(|| Error::NoSuchTensor(name.to_string()))
    };
    compare_infos(a, b, &find(a)?, &find(b)?, options)
}

/// The first listing of each name (a file listing a name twice is compared once).
fn unique(infos: Vec<TensorInfo>) -> Vec<TensorInfo> {
    let mut seen = HashSet::new();
    infos
        .into_iter()
        .filter(|i| seen.insert(i.name.clone()))
        .collect()
}

fn compare_infos(
    a: &dyn TensorFile,
    b: &dyn TensorFile,
    ia: &TensorInfo,
    ib: &TensorInfo,
    options: &DiffOptions,
) -> Result<TensorDiff> {
    let mut d = TensorDiff {
        name: ia.name.clone(),
        name_b: ib.name.clone(),
        dtype_a: ia.dtype,
        dtype_b: ib.dtype,
        shape_a: ia.shape.clone(),
        shape_b: ib.shape.clone(),
        values_compared: false,
        count: 0,
        mismatched: 0,
        max_abs_error: 0.0,
        max_rel_error: 0.0,
        first_diffs: Vec::new(),
        equal: false,
    };
    if d.shape_differs() {
        return Ok(d);
    }
    d.values_compared = true;
    let numel = ia.shape.numel()? as u64;
    let mut acc = Acc {
        tol: options.tolerance,
        max_diffs: options.max_diffs,
        dims: ia.shape.dims(),
        d: &mut d,
    };
    // Both stored sparsely: compared from the entries, never densified.
    if ia.dtype == DType::F32 && ib.dtype == DType::F32 && !ia.shape.dims().is_empty() {
        if let (Some(ra), Some(rb)) = (a.sparse_rows(&ia.name), b.sparse_rows(&ib.name)) {
            compare_sparse(ra?, rb?, &ia.name, numel, &mut acc)?;
            d.count = numel;
            d.equal = d.mismatched == 0;
            return Ok(d);
        }
    }
    let mut sa = Side::new(a, &ia.name, "A")?;
    let mut sb = Side::new(b, &ib.name, "B")?;
    let mut index: u64 = 0;
    loop {
        let more_a = sa.fill()?;
        let more_b = sb.fill()?;
        if !more_a || !more_b {
            // A side that ended early is the culprit; failing that, one that goes on.
            let sides = [(&sa, more_a), (&sb, more_b)];
            let ended_wrong = sides.iter().find(|(s, more)| !more && s.seen != numel);
            if let Some((s, more)) = ended_wrong.or_else(|| sides.iter().find(|(_, more)| *more)) {
                return Err(Error::Invalid(format!(
                    "tensor {:?} of {} yields {}{} elements, its shape {} holds {numel}",
                    ia.name,
                    s.label,
                    if *more { "at least " } else { "" },
                    s.seen,
                    ia.shape
                )));
            }
            break;
        }
        let n = sa.remaining().min(sb.remaining());
        acc.run(index, &sa.vals, sa.pos, &sb.vals, sb.pos, n);
        sa.pos += n;
        sb.pos += n;
        index += n as u64;
        if index > numel {
            return Err(Error::Invalid(format!(
                "tensor {:?} yields more elements than its shape {} holds ({numel})",
                ia.name, ia.shape
            )));
        }
    }
    d.count = index;
    d.equal = d.mismatched == 0 && (options.allow_dtype || !d.dtype_differs());
    Ok(d)
}

/// Two sparsely stored tensors compared row by row from their entries: a position
/// absent from both rows is an equal zero and costs nothing, so a sparse movie of 4e8
/// neurons per frame compares in the time of its entries.
fn compare_sparse(
    mut ra: SparseRows<'_>,
    mut rb: SparseRows<'_>,
    name: &str,
    numel: u64,
    acc: &mut Acc<'_>,
) -> Result<()> {
    let rows = acc.dims[0] as u64;
    let row_len = numel.checked_div(rows).unwrap_or(0);
    let bad = |what: String| Error::Invalid(format!("tensor {name:?}: {what}"));
    for row in 0..rows {
        let (Some(x), Some(y)) = (ra.next(), rb.next()) else {
            return Err(bad(format!("yields fewer rows than its {rows}")));
        };
        let (x, y) = (x?.normalized(), y?.normalized());
        for r in [&x, &y] {
            if r.indices.len() != r.values.len()
                || r.indices.last().is_some_and(|&i| u64::from(i) >= row_len)
            {
                return Err(bad(format!(
                    "row {row} has an entry outside its {row_len} positions"
                )));
            }
        }
        let base = row * row_len;
        let (mut i, mut j) = (0, 0);
        loop {
            let (pos, va, vb) = match (x.indices.get(i), y.indices.get(j)) {
                (None, None) => break,
                (Some(&p), Some(&q)) if p == q => {
                    i += 1;
                    j += 1;
                    (p, x.values[i - 1], y.values[j - 1])
                }
                (Some(&p), Some(&q)) if p < q => {
                    i += 1;
                    (p, x.values[i - 1], 0.0)
                }
                (Some(&p), None) => {
                    i += 1;
                    (p, x.values[i - 1], 0.0)
                }
                (_, Some(&q)) => {
                    j += 1;
                    (q, 0.0, y.values[j - 1])
                }
            };
            acc.float(
                base + u64::from(pos),
                Scalar::Float(f64::from(va)),
                Scalar::Float(f64::from(vb)),
            );
        }
    }
    if ra.next().is_some() || rb.next().is_some() {
        return Err(bad(format!("yields more rows than its {rows}")));
    }
    Ok(())
}

/// One piece's elements: floats as f64, integers exactly.
enum Vals {
    F(Vec<f64>),
    I(Vec<i128>),
}

impl Vals {
    fn len(&self) -> usize {
        match self {
            Vals::F(v) => v.len(),
            Vals::I(v) => v.len(),
        }
    }

    fn of(t: &Tensor) -> Result<Vals> {
        let t = if t.order() == Order::RowMajor || t.shape().rank() < 2 {
            t.clone()
        } else {
            t.to_order(Order::RowMajor)?
        };
        let float = t.dtype().is_float();
        Ok(with_element!(t.dtype(), T => {
            let v = t.typed::<T>()?;
            if float {
                Vals::F(v.iter().map(|x| x.to_f64()).collect())
            } else {
                Vals::I(v.iter().map(|x| x.to_i128()).collect())
            }
        }))
    }
}

/// Elements widened to `Vals` at a time: a piece is compared window by window, so
/// the widened copy (16 bytes per element) stays small whatever the piece's size.
const WINDOW: usize = 1 << 16;

/// One side's stream of pieces and the position in the current one.
struct Side<'a> {
    chunks: tensorfmt_core::Chunks<'a>,
    /// The current piece (row-major) and how many of its elements were widened.
    piece: Option<(Tensor, usize)>,
    vals: Vals,
    pos: usize,
    /// Elements yielded so far, over all pieces.
    seen: u64,
    label: &'static str,
    /// Compared pieces' pages, handed back in batches (one `madvise` per small frame
    /// cost more than the comparison).
    released: tensorfmt_core::io::PageReleaser,
}

impl<'a> Side<'a> {
    fn new(f: &'a dyn TensorFile, name: &str, label: &'static str) -> Result<Side<'a>> {
        Ok(Side {
            chunks: f.read_chunks(name)?,
            piece: None,
            vals: Vals::F(Vec::new()),
            pos: 0,
            seen: 0,
            label,
            released: tensorfmt_core::io::PageReleaser::new(),
        })
    }

    fn remaining(&self) -> usize {
        self.vals.len() - self.pos
    }

    /// Makes sure the current piece has elements left; false at the end of the stream.
    fn fill(&mut self) -> Result<bool> {
        while self.remaining() == 0 {
            if let Some((t, done)) = &mut self.piece {
                let n = t.numel();
                if *done < n {
                    let k = WINDOW.min(n - *done);
                    let size = t.dtype().size();
                    let bytes = t.bytes().slice(*done * size..(*done + k) * size);
                    let window = Tensor::from_bytes(t.dtype(), [k], Order::RowMajor, bytes)?;
                    *done += k;
                    self.vals = Vals::of(&window)?;
                    self.pos = 0;
                    self.seen += k as u64;
                    continue;
                }
            }
            match self.chunks.next() {
                None => return Ok(false),
                Some(chunk) => {
                    let chunk = chunk?;
                    // Pieces are widened window by window (below); a piece that is a
                    // slice of a mapped input gives its pages back once compared.
                    if let Some((done, _)) = self.piece.take() {
                        self.released.release(done.bytes());
                    }
                    let t = if chunk.order() == Order::RowMajor || chunk.shape().rank() < 2 {
                        chunk
                    } else {
                        chunk.to_order(Order::RowMajor)?
                    };
                    self.piece = Some((t, 0));
                }
            }
        }
        Ok(true)
    }
}

/// Accumulates one tensor's comparison.
struct Acc<'d> {
    tol: Tolerance,
    max_diffs: usize,
    dims: &'d [usize],
    d: &'d mut TensorDiff,
}

impl Acc<'_> {
    /// Compares `n` elements of `a` from `pa` with `b` from `pb`; `index` is the flat
    /// index of the first.
    fn run(&mut self, index: u64, a: &Vals, pa: usize, b: &Vals, pb: usize, n: usize) {
        match (a, b) {
            (Vals::I(a), Vals::I(b)) => {
                for (k, (&x, &y)) in a[pa..pa + n].iter().zip(&b[pb..pb + n]).enumerate() {
                    if x != y {
                        let abs = x.abs_diff(y) as f64;
                        let bmag = y.unsigned_abs() as f64;
                        let close = abs <= self.tol.atol + self.tol.rtol * bmag;
                        self.record(
                            index + k as u64,
                            Scalar::Int(x),
                            Scalar::Int(y),
                            abs,
                            bmag,
                            close,
                        );
                    }
                }
            }
            (Vals::F(a), Vals::F(b)) => {
                for (k, (&x, &y)) in a[pa..pa + n].iter().zip(&b[pb..pb + n]).enumerate() {
                    self.float(index + k as u64, Scalar::Float(x), Scalar::Float(y));
                }
            }
            (Vals::F(a), Vals::I(b)) => {
                for (k, (&x, &y)) in a[pa..pa + n].iter().zip(&b[pb..pb + n]).enumerate() {
                    self.float(index + k as u64, Scalar::Float(x), Scalar::Int(y));
                }
            }
            (Vals::I(a), Vals::F(b)) => {
                for (k, (&x, &y)) in a[pa..pa + n].iter().zip(&b[pb..pb + n]).enumerate() {
                    self.float(index + k as u64, Scalar::Int(x), Scalar::Float(y));
                }
            }
        }
    }

    fn float(&mut self, index: u64, sa: Scalar, sb: Scalar) {
        let (x, y) = (sa.to_f64(), sb.to_f64());
        // Equal, the same infinity, or both NaN: nothing to record.
        if x == y || (x.is_nan() && y.is_nan()) {
            return;
        }
        let abs = if x.is_finite() && y.is_finite() {
            (x - y).abs()
        } else {
            f64::INFINITY
        };
        let close = self.tol.close(x, y);
        self.record(index, sa, sb, abs, y.abs(), close);
    }

    /// Records a pair that is not identical: errors always, the difference if not close.
    fn record(&mut self, index: u64, a: Scalar, b: Scalar, abs: f64, bmag: f64, close: bool) {
        let d = &mut *self.d;
        let rel = if abs == 0.0 {
            0.0
        } else if bmag == 0.0 || !bmag.is_finite() {
            f64::INFINITY
        } else {
            abs / bmag
        };
        d.max_abs_error = d.max_abs_error.max(abs);
        d.max_rel_error = d.max_rel_error.max(rel);
        if close {
            return;
        }
        d.mismatched += 1;
        if d.first_diffs.len() < self.max_diffs {
            d.first_diffs.push(ValueDiff {
                index,
                multi_index: unravel(index, self.dims),
                a,
                b,
            });
        }
    }
}

/// The row-major multi-index of a flat index.
fn unravel(mut index: u64, dims: &[usize]) -> Vec<usize> {
    let mut out = vec![0; dims.len()];
    for (o, &d) in out.iter_mut().zip(dims).rev() {
        if d > 0 {
            *o = (index % d as u64) as usize;
            index /= d as u64;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfmt_core::{Chunks, FieldValue};

    /// Named tensors served in pieces of `rows` rows along axis 0.
    struct Chunked {
        tensors: Vec<(String, Tensor)>,
        rows: usize,
        /// Listed shape overrides, to fake a lying reader.
        listed: Option<Shape>,
    }

    impl Chunked {
        fn new(tensors: Vec<(&str, Tensor)>, rows: usize) -> Chunked {
            Chunked {
                tensors: tensors
                    .into_iter()
                    .map(|(n, t)| (n.to_string(), t))
                    .collect(),
                rows,
                listed: None,
            }
        }
    }

    impl TensorFile for Chunked {
        fn format(&self) -> &'static str {
            "test"
        }
        fn kind(&self) -> String {
            "chunked".into()
        }
        fn header(&self) -> Vec<(String, FieldValue)> {
            Vec::new()
        }
        fn tensors(&self) -> Vec<TensorInfo> {
            self.tensors
                .iter()
                .map(|(n, t)| {
                    let shape = self.listed.clone().unwrap_or_else(|| t.shape().clone());
                    TensorInfo::new(n.clone(), t.dtype(), shape)
                })
                .collect()
        }
        fn read_tensor(&self, name: &str) -> Result<Tensor> {
            self.tensors
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t.clone())
                .ok_or_else(|| Error::NoSuchTensor(name.into()))
        }
        fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
            let t = self.read_tensor(name)?;
            let n = t.dims()[0];
            let rows = self.rows;
            Ok(Box::new((0..n.div_ceil(rows)).map(move |i| {
                t.slice_outer(i * rows, ((i + 1) * rows).min(n))
            })))
        }
    }

    fn f32s(v: Vec<f32>, dims: &[usize]) -> Tensor {
        Tensor::from_vec(v, dims.to_vec(), Order::RowMajor).unwrap()
    }

    fn run(a: &Chunked, b: &Chunked, o: DiffOptions) -> DiffReport {
        compare(a, b, &o).unwrap()
    }

    #[test]
    fn misaligned_chunk_boundaries() {
        // 7 x 3 elements: A in pieces of 2 rows, B of 3 rows; differences straddle
        // the boundaries of both sides.
        let base: Vec<f32> = (0..21).map(|i| i as f32 * 0.5).collect();
        let mut changed = base.clone();
        for i in [5, 6, 8, 9, 20] {
            changed[i] += 1.0;
        }
        for (ra, rb) in [(2, 3), (3, 2), (1, 7), (7, 1), (4, 4), (5, 2)] {
            let a = Chunked::new(vec![("t", f32s(base.clone(), &[7, 3]))], ra);
            let b = Chunked::new(vec![("t", f32s(changed.clone(), &[7, 3]))], rb);
            let r = run(&a, &b, DiffOptions::default());
            let t = &r.tensors[0];
            assert_eq!((t.count, t.mismatched), (21, 5), "{ra}/{rb}");
            let idx: Vec<u64> = t.first_diffs.iter().map(|d| d.index).collect();
            assert_eq!(idx, [5, 6, 8, 9, 20]);
            assert_eq!(t.first_diffs[1].multi_index, [2, 0]);
            assert_eq!(t.first_diffs[4].multi_index, [6, 2]);
            assert_eq!(t.first_diffs[0].a, Scalar::Float(2.5));
            assert_eq!(t.first_diffs[0].b, Scalar::Float(3.5));
            assert_eq!(t.max_abs_error, 1.0);
            assert!(!r.is_equal());
            let same = Chunked::new(vec![("t", f32s(base.clone(), &[7, 3]))], rb);
            assert!(run(&a, &same, DiffOptions::default()).is_equal());
        }
    }

    #[test]
    fn max_diffs_limits_records_not_counts() {
        let a = Chunked::new(vec![("t", f32s(vec![0.0; 8], &[8]))], 3);
        let b = Chunked::new(vec![("t", f32s(vec![1.0; 8], &[8]))], 5);
        let o = DiffOptions {
            max_diffs: 2,
            ..DiffOptions::default()
        };
        let t = &run(&a, &b, o).tensors[0];
        assert_eq!((t.mismatched, t.first_diffs.len()), (8, 2));
        // b = 1, a = 0: relative error 1.
        assert_eq!(t.max_rel_error, 1.0);
    }

    #[test]
    fn nan_and_infinities() {
        let inf = f32::INFINITY;
        let a = Chunked::new(
            vec![(
                "t",
                f32s(vec![f32::NAN, inf, -inf, f32::NAN, inf, 1.0, 0.0], &[7]),
            )],
            2,
        );
        let b = Chunked::new(
            vec![(
                "t",
                f32s(vec![f32::NAN, inf, -inf, 1.0, -inf, inf, -0.0], &[7]),
            )],
            3,
        );
        let t = &run(&a, &b, DiffOptions::default()).tensors[0];
        let idx: Vec<u64> = t.first_diffs.iter().map(|d| d.index).collect();
        assert_eq!(idx, [3, 4, 5]);
        assert_eq!(t.max_abs_error, f64::INFINITY);
        // Even the loosest tolerance does not make NaN equal a number or inf equal -inf.
        let loose = DiffOptions {
            tolerance: Tolerance {
                rtol: 1e300,
                atol: 1e300,
            },
            ..DiffOptions::default()
        };
        assert_eq!(run(&a, &b, loose).tensors[0].mismatched, 3);
        // All special values equal to themselves.
        assert!(run(&a, &a, DiffOptions::default()).is_equal());
    }

    #[test]
    fn allclose_rule_is_asymmetric_in_b() {
        // |a-b| = 1; with rtol 0.1: fine against b = 10, not against b = 9 (0.9 < 1).
        let a = Chunked::new(vec![("t", f32s(vec![9.0], &[1]))], 1);
        let b = Chunked::new(vec![("t", f32s(vec![10.0], &[1]))], 1);
        let o = DiffOptions {
            tolerance: Tolerance {
                rtol: 0.1,
                atol: 0.0,
            },
            ..DiffOptions::default()
        };
        assert!(run(&a, &b, o).is_equal());
        assert!(!run(&b, &a, o).is_equal());
        let atol = DiffOptions {
            tolerance: Tolerance {
                rtol: 0.0,
                atol: 1.0,
            },
            ..DiffOptions::default()
        };
        assert!(run(&b, &a, atol).is_equal());
    }

    #[test]
    fn integers_compare_exactly() {
        let big = (1u64 << 60) + 1;
        let a = Chunked::new(
            vec![(
                "t",
                Tensor::from_vec(vec![big, 7], [2], Order::RowMajor).unwrap(),
            )],
            1,
        );
        let b = Chunked::new(
            vec![(
                "t",
                Tensor::from_vec(vec![big - 1, 7], [2], Order::RowMajor).unwrap(),
            )],
            2,
        );
        // As f64 these are the same number; exactly they are not.
        assert_eq!(big as f64, (big - 1) as f64);
        let t = &run(&a, &b, DiffOptions::default()).tensors[0];
        assert_eq!(t.mismatched, 1);
        assert_eq!(t.first_diffs[0].a, Scalar::Int(big as i128));
        assert_eq!(t.max_abs_error, 1.0);
        // Integers against floats: compared as f64.
        let c = Chunked::new(
            vec![(
                "t",
                Tensor::from_vec(vec![7i32, 8], [2], Order::RowMajor).unwrap(),
            )],
            1,
        );
        let d = Chunked::new(vec![("t", f32s(vec![7.0, 8.0], &[2]))], 1);
        let r = run(&c, &d, DiffOptions::default());
        assert_eq!(r.tensors[0].mismatched, 0);
        assert!(!r.tensors[0].equal, "i32 vs f32 is a dtype difference");
        let allow = DiffOptions {
            allow_dtype: true,
            ..DiffOptions::default()
        };
        assert!(run(&c, &d, allow).is_equal());
    }

    #[test]
    fn shapes_and_missing_names() {
        let a = Chunked::new(
            vec![
                ("same", f32s(vec![1.0; 6], &[2, 3])),
                ("reshaped", f32s(vec![1.0; 6], &[2, 3])),
                ("a_only", f32s(vec![1.0], &[1])),
            ],
            1,
        );
        let b = Chunked::new(
            vec![
                ("b_only", f32s(vec![1.0], &[1])),
                ("reshaped", f32s(vec![1.0; 6], &[6])),
                ("same", f32s(vec![1.0; 6], &[2, 3])),
            ],
            2,
        );
        let r = run(&a, &b, DiffOptions::default());
        let names: Vec<&str> = r.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["same", "reshaped"]);
        assert!(r.tensors[0].equal);
        let re = &r.tensors[1];
        assert!(re.shape_differs() && !re.values_compared && !re.equal && re.count == 0);
        assert_eq!(r.only_in_a[0].name, "a_only");
        assert_eq!(r.only_in_b[0].name, "b_only");
        assert_eq!(r.differing(), 1);
        assert!(!r.is_equal());
    }

    /// A [`Chunked`] file that claims to be npy.
    struct Npy(Chunked);

    impl TensorFile for Npy {
        fn format(&self) -> &'static str {
            "npy"
        }
        fn kind(&self) -> String {
            self.0.kind()
        }
        fn header(&self) -> Vec<(String, FieldValue)> {
            self.0.header()
        }
        fn tensors(&self) -> Vec<TensorInfo> {
            self.0.tensors()
        }
        fn read_tensor(&self, name: &str) -> Result<Tensor> {
            self.0.read_tensor(name)
        }
        fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
            self.0.read_chunks(name)
        }
    }

    #[test]
    fn single_npy_arrays_pair_whatever_their_names() {
        let x = Npy(Chunked::new(
            vec![("weights", f32s(vec![1.0, 2.0], &[2]))],
            1,
        ));
        let y = Chunked::new(vec![("back", f32s(vec![1.0, 3.0], &[2]))], 2);
        let r = compare(&x, &y, &DiffOptions::default()).unwrap();
        assert!(r.only_in_a.is_empty() && r.only_in_b.is_empty());
        let t = &r.tensors[0];
        assert_eq!((t.name.as_str(), t.name_b.as_str()), ("weights", "back"));
        assert_eq!(t.mismatched, 1);
        let r = compare(&y, &x, &DiffOptions::default()).unwrap();
        assert_eq!(r.tensors[0].name, "back");
        // Without an npy side, names must match.
        let z = Chunked::new(vec![("weights", f32s(vec![1.0, 2.0], &[2]))], 1);
        let r = compare(&z, &y, &DiffOptions::default()).unwrap();
        assert!(r.tensors.is_empty() && r.only_in_a.len() == 1 && r.only_in_b.len() == 1);
        // Nor with more than one tensor on a side.
        let two = Chunked::new(
            vec![
                ("back", f32s(vec![1.0], &[1])),
                ("c", f32s(vec![1.0], &[1])),
            ],
            1,
        );
        let r = compare(&x, &two, &DiffOptions::default()).unwrap();
        assert_eq!(r.only_in_a.len(), 1);
    }

    #[test]
    fn empty_and_scalar_tensors() {
        let e = Tensor::from_vec(Vec::<f32>::new(), [0, 4], Order::RowMajor).unwrap();
        let a = Chunked::new(vec![("e", e.clone())], 1);
        let r = run(&a, &a, DiffOptions::default());
        assert!(r.is_equal());
        assert_eq!(r.tensors[0].count, 0);
        assert_eq!(unravel(5, &[]), Vec::<usize>::new());
        assert_eq!(unravel(7, &[2, 2, 2]), vec![1, 1, 1]);
    }

    #[test]
    fn a_reader_yielding_the_wrong_count_is_an_error() {
        let a = Chunked::new(vec![("t", f32s(vec![1.0; 4], &[4]))], 3);
        let mut b = Chunked::new(vec![("t", f32s(vec![1.0; 4], &[4]))], 2);
        b.listed = Some(Shape::new([5]));
        let mut a5 = Chunked::new(vec![("t", f32s(vec![1.0; 4], &[4]))], 3);
        a5.listed = Some(Shape::new([5]));
        // Both list 5 elements, both yield 4.
        let e = compare(&a5, &b, &DiffOptions::default()).unwrap_err();
        assert!(e.to_string().contains("yields 4 elements"), "{e}");
        // A yields 6 for a listed 4 (B yields 4).
        let mut a6 = Chunked::new(vec![("t", f32s(vec![1.0; 6], &[6]))], 4);
        a6.listed = Some(Shape::new([4]));
        let e = compare(&a6, &a, &DiffOptions::default()).unwrap_err();
        assert!(e.to_string().contains("of A yields at least"), "{e}");
    }

    #[test]
    fn bad_tolerances_are_refused() {
        let a = Chunked::new(vec![("t", f32s(vec![1.0], &[1]))], 1);
        for (rtol, atol) in [(-1.0, 0.0), (0.0, f64::NAN), (f64::INFINITY, 0.0)] {
            let o = DiffOptions {
                tolerance: Tolerance { rtol, atol },
                ..DiffOptions::default()
            };
            assert!(compare(&a, &a, &o).is_err());
        }
    }

    #[test]
    fn half_precision_and_bool() {
        let h = |v: &[f32]| f32s(v.to_vec(), &[v.len()]).cast(DType::F16).unwrap();
        let a = Chunked::new(
            vec![
                ("h", h(&[1.0, 0.5])),
                ("b", Tensor::from_bools(&[true, false])),
            ],
            1,
        );
        let b = Chunked::new(
            vec![
                ("h", h(&[1.0, 0.25])),
                ("b", Tensor::from_bools(&[true, true])),
            ],
            2,
        );
        let r = run(&a, &b, DiffOptions::default());
        assert_eq!(r.tensors[0].mismatched, 1);
        assert_eq!(r.tensors[0].first_diffs[0].a, Scalar::Float(0.5));
        assert_eq!(r.tensors[1].mismatched, 1);
        assert_eq!(r.tensors[1].first_diffs[0].b, Scalar::Int(1));
    }
}
