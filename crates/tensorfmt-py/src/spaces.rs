//! The Rust spaces (`tensorfmt-spaces`) for Python. `tensorfmt.spaces` moves
//! batches with numpy itself (views for axes permutations) and uses these functions as
//! its reference: the property tests run random space pairs through both and compare
//! results, error classes and printed forms.
//!
//! Python describes a space as a nested tuple (`("vector", dim, dtype)`, `("conv2d",
//! rows, cols, channels, axes, dtype)`, `("index", max_labels, dim, dtype)`,
//! `("composite", [specs])`, `("null",)`) and a batch as `None`, a list (a tuple
//! batch) or a dict `{"data": bytes, "dtype": descr, "shape": [...]}` (one array).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use tensorfmt::{DType, Order, Tensor};
use tensorfmt_spaces::{
    Axes, Axis, Batch, Conv2DSpace, DataSpecsMapping, IndexSpace, Nested, Source, Space,
    VectorSpace,
};

use crate::array::Array;
use crate::errors::run;

fn dtype_of(v: &Bound<'_, PyAny>) -> PyResult<Option<DType>> {
    let s: Option<String> = v.extract()?;
    s.map(|s| s.parse::<DType>().map_err(|e| bad(e.to_string())))
        .transpose()
}

fn bad(msg: impl Into<String>) -> PyErr {
    let msg = msg.into();
    Python::attach(|py| crate::errors::raise(py, "InvalidArgumentError", &msg, None, None))
}

/// A space from its Python description.
pub fn space_of(spec: &Bound<'_, PyAny>) -> PyResult<Space> {
    let t = spec
        .cast::<PyTuple>()
        .map_err(|_| bad("a space spec is a tuple"))?;
    let tag: String = t.get_item(0)?.extract()?;
    let to_py = |e: tensorfmt_spaces::SpaceError| space_to_py(spec.py(), e);
    Ok(match tag.as_str() {
        "vector" => Space::from(
            VectorSpace::new(t.get_item(1)?.extract()?)
                .with_dtype(dtype_of(&t.get_item(2)?)?)
                .map_err(to_py)?,
        ),
        "conv2d" => {
            let labels: Vec<String> = t.get_item(4)?.extract()?;
            let axes: Vec<Axis> = labels
                .iter()
                .map(|l| Axis::from_label(l).ok_or_else(|| bad(format!("unknown axis {l:?}"))))
                .collect::<PyResult<_>>()?;
            let axes: [Axis; 4] = axes
                .try_into()
                .map_err(|_| bad("axes name exactly four axes"))?;
            Space::from(
                Conv2DSpace::new(
                    t.get_item(1)?.extract()?,
                    t.get_item(2)?.extract()?,
                    t.get_item(3)?.extract()?,
                )
                .map_err(to_py)?
                .with_axes(Axes::new(axes).map_err(to_py)?)
                .with_dtype(dtype_of(&t.get_item(5)?)?)
                .map_err(to_py)?,
            )
        }
        "index" => Space::from(
            IndexSpace::new(t.get_item(1)?.extract()?, t.get_item(2)?.extract()?)
                .map_err(to_py)?
                .with_dtype(dtype_of(&t.get_item(3)?)?)
                .map_err(to_py)?,
        ),
        "composite" => {
            let items = t.get_item(1)?;
            let mut parts = Vec::new();
            for item in items.try_iter()? {
                parts.push(space_of(&item?)?);
            }
            Space::composite(parts)
        }
        "null" => Space::null(),
        other => return Err(bad(format!("unknown space kind {other:?}"))),
    })
}

/// A batch from its Python description (arrays are copied once into tensors).
fn batch_of(b: &Bound<'_, PyAny>) -> PyResult<Batch> {
    if b.is_none() {
        return Ok(Batch::None);
    }
    if let Ok(list) = b.cast::<PyList>() {
        let mut items = Vec::new();
        for item in list.iter() {
            items.push(batch_of(&item)?);
        }
        return Ok(Batch::Tuple(items));
    }
    let d = b
        .cast::<PyDict>()
        .map_err(|_| bad("a batch is None, a list or an array"))?;
    let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(k)?
            .ok_or_else(|| bad(format!("array description without {k}")))
    };
    let data = get("data")?;
    let bytes = data
        .cast::<PyBytes>()
        .map_err(|_| bad("array data are bytes"))?;
    let dtype: String = get("dtype")?.extract()?;
    let dtype = dtype.parse::<DType>().map_err(|e| bad(e.to_string()))?;
    let shape: Vec<usize> = get("shape")?.extract()?;
    let t = Tensor::from_bytes(dtype, shape, Order::RowMajor, bytes.as_bytes().to_vec())
        .map_err(|e| bad(e.to_string()))?;
    Ok(Batch::Tensor(t))
}

/// A batch as Python objects: arrays, tuples and None.
fn batch_to_py<'py>(py: Python<'py>, b: Batch) -> PyResult<Bound<'py, PyAny>> {
    Ok(match b {
        Batch::None => py.None().into_bound(py),
        Batch::Tensor(t) => {
            let t = if t.order() == Order::RowMajor {
                t
            } else {
                t.to_order(Order::RowMajor)
                    .map_err(|e| crate::errors::to_py(py, &e))?
            };
            Bound::new(
                py,
                Array::from_tensor(t).map_err(|e| crate::errors::to_py(py, &e))?,
            )?
            .into_any()
        }
        Batch::Tuple(items) => {
            let mut out = Vec::with_capacity(items.len());
            for i in items {
                out.push(batch_to_py(py, i)?);
            }
            PyTuple::new(py, out)?.into_any()
        }
    })
}

/// A space error as the `tensorfmt._errors` class deriving from the builtin Pylearn2
/// raised in that case (`TypeError` for a wrong batch kind or dtype, `NotImplementedError`
/// for a conversion that does not exist, `IndexError` for a label out of range,
/// `ValueError` for sizes and structure).
fn space_to_py(py: Python<'_>, e: tensorfmt_spaces::SpaceError) -> PyErr {
    use tensorfmt_spaces::SpaceError as E;
    let class = match &e {
        E::DtypeUnsafe { .. } | E::WrongKind { .. } => "SpaceTypeError",
        E::Unsupported { .. } | E::NoTotalDimension(_) => "SpaceNotImplementedError",
        E::LabelOutOfRange { .. } => "SpaceIndexError",
        E::Core(core) => return crate::errors::to_py(py, core),
        _ => "InvalidArgumentError",
    };
    crate::errors::raise(py, class, &e.to_string(), None, None)
}

/// Runs a space operation without the GIL (panics caught), mapping its error by kind.
fn run_space<T: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> Result<T, tensorfmt_spaces::SpaceError> + Send,
) -> PyResult<T> {
    run(py, move || Ok(work()))?.map_err(|e| space_to_py(py, e))
}

/// Checks a batch against a space (kind, rank, sizes, dtype rule, label range).
#[pyfunction]
pub fn space_validate(
    py: Python<'_>,
    spec: &Bound<'_, PyAny>,
    batch: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let space = space_of(spec)?;
    let batch = batch_of(batch)?;
    run_space(py, move || space.validate(&batch))
}

/// `batch` (a batch of `spec`) formatted as a batch of `target`.
#[pyfunction]
pub fn space_format_as<'py>(
    py: Python<'py>,
    spec: &Bound<'py, PyAny>,
    batch: &Bound<'py, PyAny>,
    target: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let space = space_of(spec)?;
    let target = space_of(target)?;
    let batch = batch_of(batch)?;
    let out = run_space(py, move || space.format_as(&batch, &target))?;
    batch_to_py(py, out)
}

/// The number of scalars in one example.
#[pyfunction]
pub fn space_total_dimension(py: Python<'_>, spec: &Bound<'_, PyAny>) -> PyResult<usize> {
    let space = space_of(spec)?;
    run_space(py, move || space.total_dimension())
}

/// The number of examples in a batch.
#[pyfunction]
pub fn space_batch_size(
    py: Python<'_>,
    spec: &Bound<'_, PyAny>,
    batch: &Bound<'_, PyAny>,
) -> PyResult<usize> {
    let space = space_of(spec)?;
    let batch = batch_of(batch)?;
    run_space(py, move || space.batch_size(&batch))
}

/// A batch of `n` zero examples.
#[pyfunction]
pub fn space_origin_batch<'py>(
    py: Python<'py>,
    spec: &Bound<'py, PyAny>,
    n: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let space = space_of(spec)?;
    let out = run_space(py, move || space.origin_batch(n))?;
    batch_to_py(py, out)
}

/// Pylearn2's printed form of a space.
#[pyfunction]
pub fn space_str(spec: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(space_of(spec)?.to_string())
}

fn source_of(s: &Bound<'_, PyAny>) -> PyResult<Source> {
    if s.is_none() {
        return Ok(Source::none());
    }
    if let Ok(name) = s.extract::<String>() {
        return Ok(Source::Name(name));
    }
    let mut items = Vec::new();
    for item in s.try_iter()? {
        items.push(source_of(&item?)?);
    }
    Ok(Source::tuple(items))
}

/// Python nested tuples as `Nested<usize>`: leaves become indices into `leaves`.
fn nested_of<'py>(
    v: &Bound<'py, PyAny>,
    leaves: &mut Vec<Bound<'py, PyAny>>,
) -> PyResult<Nested<usize>> {
    if v.is_none() {
        return Ok(Nested::Null);
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        let mut items = Vec::new();
        for item in t.iter() {
            items.push(nested_of(&item, leaves)?);
        }
        return Ok(Nested::Tuple(items));
    }
    // Equal leaves (the same source name twice) must get the same index; values whose
    // `==` is not a plain truth value (numpy arrays) are equal only to themselves.
    if let Some(i) = leaves
        .iter()
        .position(|l| l.is(v) || l.eq(v).unwrap_or(false))
    {
        return Ok(Nested::Leaf(i));
    }
    leaves.push(v.clone());
    Ok(Nested::Leaf(leaves.len() - 1))
}

fn nested_to_py<'py>(
    py: Python<'py>,
    n: &Nested<usize>,
    leaves: &[Bound<'py, PyAny>],
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match n {
        Nested::Null => py.None().into_bound(py),
        Nested::Leaf(i) => leaves[*i].clone(),
        Nested::Tuple(items) => {
            let mut out = Vec::with_capacity(items.len());
            for i in items {
                out.push(nested_to_py(py, i, leaves)?);
            }
            PyTuple::new(py, out)?.into_any()
        }
    })
}

fn mapping(
    py: Python<'_>,
    space: &Bound<'_, PyAny>,
    source: &Bound<'_, PyAny>,
) -> PyResult<DataSpecsMapping> {
    let space = space_of(space)?;
    let source = source_of(source)?;
    run_space(py, move || DataSpecsMapping::new(&space, &source))
}

/// Flattens `nested` (structured like the data specs) into the unique leaves.
#[pyfunction]
pub fn specs_flatten<'py>(
    py: Python<'py>,
    space: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    nested: &Bound<'py, PyAny>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let m = mapping(py, space, source)?;
    let mut leaves = Vec::new();
    let n = nested_of(nested, &mut leaves)?;
    let flat = m.flatten(&n).map_err(|e| space_to_py(py, e))?;
    flat.iter().map(|f| nested_to_py(py, f, &leaves)).collect()
}

/// Nests `flat` (one item per unique leaf) back into the structure of the data specs.
#[pyfunction]
pub fn specs_nest<'py>(
    py: Python<'py>,
    space: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    flat: Vec<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let m = mapping(py, space, source)?;
    let items: Vec<Nested<usize>> = (0..flat.len())
        .map(|i| {
            if flat[i].is_none() {
                Nested::Null
            } else {
                Nested::Leaf(i)
            }
        })
        .collect();
    let nested = m.nest(&items).map_err(|e| space_to_py(py, e))?;
    nested_to_py(py, &nested, &flat)
}

/// The number of unique `(space, source)` leaves.
#[pyfunction]
pub fn specs_n_unique(
    py: Python<'_>,
    space: &Bound<'_, PyAny>,
    source: &Bound<'_, PyAny>,
) -> PyResult<usize> {
    Ok(mapping(py, space, source)?.n_unique_specs())
}
