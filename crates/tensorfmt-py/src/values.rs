//! Plain Python values from header fields and tensor infos, and the option mapping
//! shared by every function that opens or writes a file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tensorfmt::{
    DType, Error, FieldValue, Format, ReadOptions, SparseOutput, Target, WriteOptions,
};

/// A header field as a plain Python value (dicts keep file order).
pub fn field_to_py<'py>(py: Python<'py>, v: &FieldValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        FieldValue::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        FieldValue::Int(i) => i.into_pyobject(py)?.into_any(),
        FieldValue::UInt(u) => u.into_pyobject(py)?.into_any(),
        FieldValue::Float(f) => f.into_pyobject(py)?.into_any(),
        FieldValue::Text(s) => s.into_pyobject(py)?.into_any(),
        FieldValue::List(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(field_to_py(py, item)?)?;
            }
            list.into_any()
        }
        FieldValue::Map(items) => fields_to_dict(py, items)?.into_any(),
    })
}

/// Named fields as a dict.
pub fn fields_to_dict<'py>(
    py: Python<'py>,
    fields: &[(String, FieldValue)],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in fields {
        d.set_item(k, field_to_py(py, v)?)?;
    }
    Ok(d)
}

/// Parses a format name (`pvp`, `npz`, ...).
pub fn parse_format(name: &str) -> Result<Format, Error> {
    name.parse::<Format>()
}

/// Read options from the keyword arguments of `open`.
pub fn read_options(
    kind: Option<String>,
    strict: bool,
    frames: Option<(usize, Option<usize>)>,
    sparse: bool,
) -> ReadOptions {
    ReadOptions {
        frames,
        sparse_csr: sparse,
        kind,
        strict,
        ..ReadOptions::default()
    }
}

/// The target of a write: `to` (`"pvp:sparse"`, `"safetensors"`, ...) or the path's
/// extension.
pub fn target(path: &std::path::Path, to: Option<&str>) -> Result<Target, Error> {
    match to {
        Some(t) => t.parse::<Target>(),
        None => Target::from_path(path).ok_or_else(|| {
            Error::Invalid(format!(
                "cannot tell the output format from {:?}; name it with to=",
                path.display().to_string()
            ))
        }),
    }
}

/// Write options from the keyword arguments of `save` / `convert`: `settings` are
/// sorted into their typed fields (`compress`, `threads`, `tensorfmt.source`) or passed
/// to the writer ([`WriteOptions::set`]).
pub fn write_options(
    target: &Target,
    dtype: Option<&str>,
    hex: bool,
    settings: BTreeMap<String, String>,
    like: Option<PathBuf>,
    dense: bool,
    fsync: bool,
) -> Result<WriteOptions, Error> {
    let mut options = WriteOptions {
        kind: target.kind.clone(),
        hex,
        dtype: dtype.map(|d| d.parse::<DType>()).transpose()?,
        like,
        sparse: if dense {
            SparseOutput::Dense
        } else {
            SparseOutput::Keep
        },
        skip_fsync: !fsync,
        ..WriteOptions::default()
    };
    for (key, value) in &settings {
        options.set(key, value)?;
    }
    Ok(options)
}
