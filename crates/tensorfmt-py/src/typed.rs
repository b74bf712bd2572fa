//! Typed access for `tensorfmt.caffe` and `tensorfmt.som`: what a dict of arrays cannot
//! say (a Caffe blob's legacy 4-D dims and its diff, a solver state's counters, a PINK
//! map's hexagonal coordinates and best matches). Arrays are zero-copy views of the
//! mapped file wherever the format stores them verbatim, as in `document.rs`.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tensorfmt::caffe::{CaffeFile, CaffeReadOptions, Content, ParamMessage, ParamValue, RawBlob};
use tensorfmt::som::{FileKind, MapLayout, ReadConfig, SomFile};
use tensorfmt::{Error, Order, ReadOptions, Tensor};

use crate::array::Array;
use crate::errors::{run, to_py};

fn array(py: Python<'_>, t: Tensor) -> PyResult<Array> {
    Array::from_tensor(t).map_err(|e| to_py(py, &e))
}

/// One blob as a dict: `shape` (Caffe's full dims), `legacy` (`(num, channels, height,
/// width)` when the file uses the legacy 4-D fields, else `None`), `data` shaped
/// `shape`, `diff` (or `None`), `source` (the field the values came from).
fn blob<'py>(py: Python<'py>, b: &RawBlob, path: &str) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let err = |e: tensorfmt::caffe::CaffeError| to_py(py, &Error::from(e));
    let dims = b.shape_dims(path).map_err(err)?;
    d.set_item("shape", dims.clone())?;
    let legacy = b
        .has_legacy()
        .then(|| [b.num, b.channels, b.height, b.width].map(|v| i64::from(v.unwrap_or(0))));
    d.set_item("legacy", legacy)?;
    d.set_item("source", b.value_source().map_err(err)?.field())?;
    let data = b.tensor_with_shape(dims, path).map_err(err)?;
    d.set_item("data", array(py, data)?)?;
    let diff = match b.diff_tensor(path).map_err(err)? {
        Some(t) => Some(array(py, t)?),
        None => None,
    };
    d.set_item("diff", diff)?;
    Ok(d)
}

fn blobs<'py>(py: Python<'py>, list: &[RawBlob], prefix: &str) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for (i, b) in list.iter().enumerate() {
        out.append(blob(py, b, &format!("{prefix}[{i}]"))?)?;
    }
    Ok(out)
}

/// The contents of a Caffe file as plain Python data (see `tensorfmt.caffe`).
#[pyfunction]
#[pyo3(signature = (path, kind=None, strict=false))]
pub fn caffe_contents<'py>(
    py: Python<'py>,
    path: PathBuf,
    kind: Option<String>,
    strict: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let file = run(py, move || {
        let data = tensorfmt::io::map_file(&path)?;
        let read = ReadOptions {
            strict,
            ..ReadOptions::default()
        };
        let opts = CaffeReadOptions::from(&read);
        // A file the content check cannot place (a truncated `.caffemodel`) is read as
        // the kind its extension names, so the error says what is wrong with it.
        let named = tensorfmt::Target::from_path(&path).and_then(|t| t.kind);
        let file = match kind.as_deref() {
            None => match CaffeFile::open(data.clone(), &opts) {
                Err(tensorfmt::caffe::CaffeError::NotCaffe(why)) => {
                    match named
                        .as_deref()
                        .and_then(tensorfmt::caffe::FileKind::from_name)
                    {
                        Some(k) => CaffeFile::open_as(data, k, &opts),
                        None => Err(tensorfmt::caffe::CaffeError::NotCaffe(why)),
                    }
                }
                other => other,
            },
            Some(name) => {
                let k = tensorfmt::caffe::FileKind::from_name(name).ok_or_else(|| {
                    Error::Invalid(format!(
                        "unknown caffe kind {name:?} (caffemodel, binaryproto, blobprotovector, solverstate)"
                    ))
                })?;
                CaffeFile::open_as(data, k, &opts)
            }
        };
        let file = file.map_err(Error::from)?;
        // The typed contents are parsed here, without the GIL (the open kept only the
        // tensors), and each layer's parameters decoded.
        let params = match file.try_content().map_err(Error::from)? {
            Content::Model(m) => tensorfmt::caffe::layer_params(m),
            _ => Vec::new(),
        };
        Ok((file, params))
    })?;
    let (file, mut params) = file;
    let d = PyDict::new(py);
    match file.content() {
        Content::Model(m) => {
            d.set_item("kind", "caffemodel")?;
            d.set_item("name", m.name.clone())?;
            d.set_item("version", m.version.to_string())?;
            d.set_item("warnings", m.warnings().to_vec())?;
            let layers = PyList::empty(py);
            for (i, l) in m.layers.iter().enumerate() {
                let ld = PyDict::new(py);
                ld.set_item("name", l.name.clone())?;
                ld.set_item("type", l.type_name.clone())?;
                let prefix = format!("layer[{i}] {:?}.blobs", l.name);
                ld.set_item("blobs", blobs(py, &l.blobs, &prefix)?)?;
                // A layer whose parameters do not decode: its exception, raised when
                // `.params` is read (the weights stay readable).
                match params.get_mut(i).and_then(Option::take) {
                    Some(Ok(p)) => ld.set_item("params", message_to_py(py, &p)?)?,
                    Some(Err(e)) => {
                        ld.set_item("params_error", to_py(py, &Error::from(e)).value(py))?
                    }
                    None => ld.set_item("params", py.None())?,
                }
                layers.append(ld)?;
            }
            d.set_item("layers", layers)?;
        }
        Content::Mean(b) => {
            d.set_item("kind", "binaryproto")?;
            d.set_item("blobs", blobs(py, std::slice::from_ref(b), "BlobProto")?)?;
        }
        Content::BlobVector(v) => {
            d.set_item("kind", "blobprotovector")?;
            d.set_item("blobs", blobs(py, v, "blobs")?)?;
        }
        Content::SolverState(s) => {
            d.set_item("kind", "solverstate")?;
            d.set_item("iter", s.iter)?;
            d.set_item("learned_net", s.learned_net.clone())?;
            d.set_item("current_step", s.current_step)?;
            d.set_item("history", blobs(py, &s.history, "history")?)?;
        }
    }
    Ok(d)
}

/// A message of a layer's parameters as `(type name, {field: value})`: nested messages
/// alike, repeated fields as lists, enums as their numbers (as `caffe_pb2` gives them).
fn message_to_py<'py>(py: Python<'py>, m: &ParamMessage) -> PyResult<Bound<'py, PyAny>> {
    let fields = PyDict::new(py);
    for (name, v) in &m.fields {
        fields.set_item(name, param_to_py(py, v)?)?;
    }
    Ok((m.type_name.clone(), fields).into_pyobject(py)?.into_any())
}

fn param_to_py<'py>(py: Python<'py>, v: &ParamValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        ParamValue::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        ParamValue::Int(i) => i.into_pyobject(py)?.into_any(),
        ParamValue::UInt(u) => u.into_pyobject(py)?.into_any(),
        ParamValue::Float(f) => f.into_pyobject(py)?.into_any(),
        ParamValue::Str(s) => s.into_pyobject(py)?.into_any(),
        ParamValue::Bytes(b) => pyo3::types::PyBytes::new(py, b).into_any(),
        ParamValue::Enum(n) => n.into_pyobject(py)?.into_any(),
        ParamValue::Message(m) => message_to_py(py, m)?,
        ParamValue::List(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(param_to_py(py, item)?)?;
            }
            list.into_any()
        }
    })
}

/// One field of [`caffe_message_fields`]: name, repeated, default, message type.
type FieldRow<'py> = (String, bool, Bound<'py, PyAny>, Option<String>);

/// The fields of a Caffe message type from the builtin schema (`caffe.proto`):
/// `[(name, repeated, default, message type or None)]`, defaults as
/// `caffe_contents` gives values (a message field's default is `None`: an empty
/// message of its type).
#[pyfunction]
pub fn caffe_message_fields<'py>(py: Python<'py>, type_name: &str) -> PyResult<Vec<FieldRow<'py>>> {
    let fields = tensorfmt::caffe::message_fields(type_name).ok_or_else(|| {
        crate::errors::raise(
            py,
            "InvalidArgumentError",
            &format!("caffe.proto has no message {type_name:?}"),
            None,
            None,
        )
    })?;
    fields
        .into_iter()
        .map(|f| {
            let default = match &f.default {
                ParamValue::Message(_) => py.None().into_bound(py),
                d => param_to_py(py, d)?,
            };
            Ok((f.name, f.repeated, default, f.message_type))
        })
        .collect()
}

/// Every parameter of a primitiv model or parameter file: (name, value export name,
/// value shape, [(stat key, stat export name, stat shape)]) with shapes as primitiv
/// prints them (`[2, 3]x1`), in key-path order (a parameter file's one parameter is
/// named `value`). The export names are the document's tensor names (a parameter
/// file's stat called `value` is exported as `value~2`), so the value and the stats
/// never share a key. The document's header describes only a model's first entries
/// (it stays small for 100,000-parameter models); `tensorfmt.primitiv` needs them
/// all. `None` for the other file kinds.
#[pyfunction]
#[pyo3(signature = (path, strict=false))]
#[allow(clippy::type_complexity)]
pub fn primitiv_parameters(
    py: Python<'_>,
    path: PathBuf,
    strict: bool,
) -> PyResult<Option<Vec<(String, String, String, Vec<(String, String, String)>)>>> {
    run(py, move || {
        use tensorfmt::primitiv::{read_file, Mode, PrimitivData, PrimitivFile, ReaderOptions};
        let data = tensorfmt::io::map_file(&path)?;
        let limits = ReadOptions::default().limits;
        let options = ReaderOptions {
            mode: if strict {
                Mode::Primitiv
            } else {
                Mode::Lenient
            },
            limits,
        };
        let decoded = read_file(data, &options).map_err(Error::from)?;
        if !matches!(
            decoded.data,
            PrimitivData::Model(_) | PrimitivData::Parameter(_)
        ) {
            return Ok(None);
        }
        let file = PrimitivFile::new(decoded, limits.max_alloc);
        Ok(Some(
            file.parameters()
                .into_iter()
                .map(|p| {
                    let stats = p
                        .stats
                        .iter()
                        .map(|(k, n, s)| (k.to_string(), n.to_string(), s.to_string()))
                        .collect();
                    (
                        p.name,
                        p.value.to_string(),
                        p.value_shape.to_string(),
                        stats,
                    )
                })
                .collect(),
        ))
    })
}

/// An open PINK binary file for `tensorfmt.som`.
#[pyclass(frozen, module = "tensorfmt._native")]
pub struct Som {
    file: Arc<SomFile>,
}

/// Opens a PINK file (`kind`: the reading of an ambiguous pre-version-2 file).
#[pyfunction]
#[pyo3(signature = (path, kind=None, strict=false))]
pub fn open_som(
    py: Python<'_>,
    path: PathBuf,
    kind: Option<String>,
    strict: bool,
) -> PyResult<Som> {
    let file = run(py, move || {
        let data = tensorfmt::io::map_file(&path)?;
        let wrap = Error::from;
        let config = ReadConfig {
            strict,
            legacy_kind: kind
                .as_deref()
                .map(tensorfmt::som::parse_kind_hint)
                .transpose()
                .map_err(wrap)?,
            ..ReadConfig::default()
        };
        SomFile::from_bytes_with(data, &config).map_err(wrap)
    })?;
    Ok(Som {
        file: Arc::new(file),
    })
}

fn u64s(py: Python<'_>, v: Vec<u64>) -> PyResult<Array> {
    let n = v.len();
    array(
        py,
        Tensor::from_vec(v, [n], Order::RowMajor).map_err(|e| to_py(py, &e))?,
    )
}

#[pymethods]
impl Som {
    /// `data`, `som`, `mapping` or `rotflip`.
    #[getter]
    fn kind(&self) -> &'static str {
        match self.file.kind() {
            FileKind::Data => "data",
            FileKind::Som => "som",
            FileKind::Mapping => "mapping",
            FileKind::RotFlip => "rotflip",
        }
    }

    /// The header's version (2, or 1 for files from before PINK 2).
    #[getter]
    fn version(&self) -> i32 {
        self.file.version()
    }

    /// The map's layout: `(name, dims, inferred)` with `name` `cartesian` or
    /// `hexagonal` (`dims` as written: `[d, d]` for a hexagonal map) and `inferred`
    /// true when PINK wrote a cartesian code for a hexagonal map (told by the payload
    /// size); `None` for data files.
    fn layout(&self) -> Option<(&'static str, Vec<usize>, bool)> {
        self.file.map_layout().map(|l| {
            let name = match l {
                MapLayout::Cartesian(_) => "cartesian",
                MapLayout::Hexagonal(_) => "hexagonal",
            };
            (name, l.dims(), self.file.hex_inferred())
        })
    }

    /// Dims of one data entry (data files) or one neuron (SOM files).
    fn item_dims(&self) -> Option<Vec<usize>> {
        self.file
            .entry_dims()
            .or(self.file.neuron_dims())
            .map(|d| d.to_vec())
    }

    /// Entries of a data, mapping or rotation/flip file.
    fn n_entries(&self) -> Option<u64> {
        self.file.n_entries()
    }

    /// Neurons of the map.
    fn neuron_count(&self) -> Option<usize> {
        self.file.neuron_count()
    }

    /// The comment lines of the header block.
    fn comments(&self) -> Vec<String> {
        self.file.comments().lines.clone()
    }

    /// Axial coordinates `[neurons, 2]` (`(q, r)`, i32) of a hexagonal map's neurons in
    /// storage order.
    fn hex_axial(&self, py: Python<'_>) -> PyResult<Array> {
        let f = self.file.clone();
        let t = run(py, move || f.hex_axial().map_err(Error::from))?;
        array(py, t)
    }

    /// Neuron `i` (storage order) of a SOM file, shaped like a neuron.
    fn neuron(&self, py: Python<'_>, i: usize) -> PyResult<Array> {
        let f = self.file.clone();
        let t = run(py, move || f.neuron(i).map_err(Error::from))?;
        array(py, t)
    }

    /// Best-matching neuron of every entry of a mapping file (-1 where every distance
    /// is NaN), streamed with bounded memory.
    fn best_matches(&self, py: Python<'_>) -> PyResult<Array> {
        let f = self.file.clone();
        let v = run(py, move || f.best_matches().map_err(Error::from))?;
        let v: Vec<i64> = v
            .into_iter()
            .map(|b| b.map_or(-1, |i| i64::try_from(i).unwrap_or(i64::MAX)))
            .collect();
        let n = v.len();
        array(
            py,
            Tensor::from_vec(v, [n], Order::RowMajor).map_err(|e| to_py(py, &e))?,
        )
    }

    /// How many entries each neuron best matches (mapping files).
    fn bmu_counts(&self, py: Python<'_>) -> PyResult<Array> {
        let f = self.file.clone();
        let v = run(py, move || f.bmu_counts().map_err(Error::from))?;
        u64s(py, v)
    }

    /// Rotation/flip files: the record of entry `e` for neuron `n` as `(flipped, angle,
    /// transform_index)` for `numrot` rotations.
    fn rotflip(
        &self,
        py: Python<'_>,
        e: usize,
        n: usize,
        numrot: u32,
    ) -> PyResult<(bool, f32, u64)> {
        let f = self.file.clone();
        let r = run(py, move || f.rotflip(e, n).map_err(Error::from))?;
        Ok((r.flipped(), r.angle, r.transform_index(numrot)))
    }
}
