//! PINK's mapping step and transforms for `tensorfmt.som` (`map`, `map_files`,
//! `transform`, `align`, `crop`, `ids`): thin calls into
//! `tensorfmt::som::{mapping, transform, ids}`, run without the GIL and stoppable by
//! Ctrl-C (`errors::run_interruptible`; the mapper checks between entries).

use std::borrow::Cow;
use std::path::PathBuf;

use pyo3::prelude::*;
use tensorfmt::som::mapping::{map_files, rotflip, DistanceShape, EntryReader, MapOptions, Mapper};
use tensorfmt::som::transform::Interpolation;
use tensorfmt::som::{SomError, SomFile};
use tensorfmt::{Error, Order, Tensor};

use crate::array::Array;
use crate::errors::run_interruptible;
use crate::progress::{outcome, PyProgress};

/// A C-contiguous, aligned float32 numpy array handed over by `tensorfmt.som`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct F32Array {
    /// The numpy array: held so that its memory stays allocated during the call.
    #[allow(dead_code)]
    owner: Py<PyAny>,
    address: usize,
    /// Number of f32 values.
    len: usize,
    shape: Vec<usize>,
}

/// The plain-data part of an [`F32Array`], which crosses into the GIL-free closure.
#[derive(Clone)]
struct Borrowed {
    address: usize,
    len: usize,
    shape: Vec<usize>,
}

impl Borrowed {
    fn of(a: &Option<F32Array>) -> Option<Borrowed> {
        a.as_ref().map(|a| Borrowed {
            address: a.address,
            len: a.len,
            shape: a.shape.clone(),
        })
    }

    fn values(&self) -> Result<&[f32], Error> {
        if self.len == 0 {
            return Ok(&[]);
        }
        if self.address == 0 || !self.address.is_multiple_of(std::mem::align_of::<f32>()) {
            return Err(Error::Invalid("array has no aligned data".into()));
        }
        // SAFETY: `address` and `len` are the data pointer and f32 count of a
        // C-contiguous, aligned float32 numpy array (checked on the Python side, from
        // its `__array_interface__`) held by the caller (`F32Array::owner`) until the
        // native call returns; the slice never leaves the call. A concurrent write from
        // another Python thread races as with any numpy C extension.
        Ok(unsafe { std::slice::from_raw_parts(self.address as *const f32, self.len) })
    }
}

fn som_error(e: SomError) -> Error {
    match e {
        // Options and inputs that do not fit: Python's InvalidArgumentError.
        SomError::MapOption { .. } => Error::Invalid(e.to_string()),
        other => Error::from(other),
    }
}

/// PINK's `--map` options as `tensorfmt.som._options` hands them over: one dict with
/// every key (defaults filled in), parsed into [`MapOptions`] once by [`MapArgs::resolve`].
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct MapArgs {
    num_rot: u32,
    flip: bool,
    neuron_dim: Option<usize>,
    euclidean_distance_dim: Option<usize>,
    euclidean_distance_shape: String,
    interpolation: String,
    threads: Option<usize>,
}

impl MapArgs {
    /// The typed options (a bad shape or interpolation name is InvalidArgumentError).
    fn resolve(&self) -> Result<MapOptions, Error> {
        Ok(MapOptions {
            num_rot: self.num_rot,
            flip: self.flip,
            neuron_dim: self.neuron_dim,
            euclidean_distance_dim: self.euclidean_distance_dim,
            euclidean_distance_shape: self
                .euclidean_distance_shape
                .parse::<DistanceShape>()
                .map_err(som_error)?,
            interpolation: self
                .interpolation
                .parse::<Interpolation>()
                .map_err(som_error)?,
            threads: self.threads.filter(|&t| t > 0),
        })
    }
}

fn open(path: &PathBuf) -> Result<SomFile, Error> {
    let data = tensorfmt::io::map_file(path)?;
    Ok(SomFile::from_bytes(data)?)
}

/// The mapping result: distances `[entries, neurons]` (f32), flip bytes and angles
/// (u8, f32, same shape), and the SOM's layout `(name, export dims)` when it came from
/// a file.
type Mapped = (Array, Array, Array, Option<(String, Vec<usize>)>);

/// Maps a data file or array onto a SOM file or array (`tensorfmt.som.map`). Arrays:
/// data `[entries, *image dims]`, SOM `[neurons, *neuron dims]`.
#[pyfunction]
#[pyo3(signature = (data_path, data_array, som_path, som_array, options, progress=None))]
pub fn som_map(
    py: Python<'_>,
    data_path: Option<PathBuf>,
    data_array: Option<F32Array>,
    som_path: Option<PathBuf>,
    som_array: Option<F32Array>,
    options: MapArgs,
    progress: Option<Py<PyAny>>,
) -> PyResult<Mapped> {
    let progress = PyProgress::new(progress);
    let hooked = progress.as_ref();
    let (data_b, som_b) = (Borrowed::of(&data_array), Borrowed::of(&som_array));
    let result = run_interruptible(py, move || {
        let o = options.resolve()?;
        let data_file = data_path.as_ref().map(open).transpose()?;
        let som_file = som_path.as_ref().map(open).transpose()?;
        let (image_dims, entries) = match (&data_file, &data_b) {
            (Some(f), _) => {
                if f.kind() != tensorfmt::som::FileKind::Data {
                    return Err(Error::Invalid(format!(
                        "data: {} is a {} file, not a data file",
                        data_path.as_ref().expect("path").display(),
                        f.kind().name()
                    )));
                }
                (
                    f.entry_dims().unwrap_or(&[]).to_vec(),
                    f.n_entries().unwrap_or(0) as usize,
                )
            }
            (None, Some(b)) => (b.shape[1..].to_vec(), b.shape[0]),
            (None, None) => return Err(Error::Invalid("no data given".into())),
        };
        let (mapper, layout): (Mapper, Option<(String, Vec<usize>)>) = match (&som_file, &som_b) {
            (Some(f), _) => {
                if f.kind() != tensorfmt::som::FileKind::Som {
                    return Err(Error::Invalid(format!(
                        "som: {} is a {} file, not a SOM",
                        som_path.as_ref().expect("path").display(),
                        f.kind().name()
                    )));
                }
                let map = f.map_layout().expect("SOM files have a map");
                let name = if map.is_hexagonal() {
                    "hexagonal"
                } else {
                    "cartesian"
                };
                let layout = Some((name.to_string(), map.export_dims()));
                let values = f.som_tensor()?.cast(tensorfmt::DType::F32)?;
                let values = values.typed::<f32>()?;
                let m = Mapper::new(
                    &values,
                    f.neuron_count().unwrap_or(0),
                    f.neuron_dims().unwrap_or(&[]),
                    &image_dims,
                    &o,
                )
                .map_err(som_error)?;
                (m, layout)
            }
            (None, Some(b)) => {
                let m = Mapper::new(b.values()?, b.shape[0], &b.shape[1..], &image_dims, &o)
                    .map_err(som_error)?;
                (m, None)
            }
            (None, None) => return Err(Error::Invalid("no SOM given".into())),
        };
        let n = mapper.neurons();
        let total = entries
            .checked_mul(n)
            .ok_or_else(|| Error::Invalid("result size overflows".into()))?;
        tensorfmt::Limits::default().check_alloc(total as u64 * 9)?;
        let mut dist = Vec::with_capacity(total);
        let mut flips = Vec::with_capacity(total);
        let mut angles = Vec::with_capacity(total);
        let image_len = mapper.geometry().image_len();
        let data_values = match &data_b {
            Some(b) if data_file.is_none() => Some(b.values()?),
            _ => None,
        };
        let mut reader = match (&data_file, &data_path) {
            (Some(f), Some(p)) => Some(EntryReader::new(p, f).map_err(som_error)?),
            _ => None,
        };
        let fetch = |r: std::ops::Range<usize>| -> Result<Cow<'_, [f32]>, SomError> {
            match (reader.as_mut(), data_values) {
                (Some(reader), _) => reader.read(r),
                (None, Some(v)) => Ok(Cow::Borrowed(&v[r.start * image_len..r.end * image_len])),
                (None, None) => unreachable!("checked above"),
            }
        };
        let hook = |done: u64, total: u64| -> Result<(), SomError> {
            match hooked {
                Some(p) => p.call(done, total).map_err(SomError::Core),
                None => Ok(()),
            }
        };
        let num_rot = mapper.geometry().num_rot;
        mapper
            .map_entries(
                entries,
                fetch,
                |_, d, b| {
                    dist.extend_from_slice(d);
                    for &t in b {
                        let r = rotflip(t, num_rot);
                        flips.push(r.flip_byte);
                        angles.push(r.angle);
                    }
                    Ok(())
                },
                &hook,
            )
            .map_err(som_error)?;
        let shape = [entries, n];
        Ok((
            Array::from_tensor(Tensor::from_vec(dist, shape, Order::RowMajor)?)?,
            Array::from_tensor(Tensor::from_vec(flips, shape, Order::RowMajor)?)?,
            Array::from_tensor(Tensor::from_vec(angles, shape, Order::RowMajor)?)?,
            layout,
        ))
    });
    drop((data_array, som_array));
    outcome(result, progress.as_ref())
}

/// `Pink --map` to files (`tensorfmt.som.map_files`): returns `(entries, neurons, ids
/// written)`. Without `ids`, the data file's are written unless `data_ids` is false.
#[pyfunction]
#[pyo3(signature = (data, som, map_out, rotflip_out, ids, options, progress=None, data_ids=true))]
#[allow(clippy::too_many_arguments)] // Python's positional arguments: paths, ids, options, progress
pub fn som_map_files(
    py: Python<'_>,
    data: PathBuf,
    som: PathBuf,
    map_out: PathBuf,
    rotflip_out: Option<PathBuf>,
    ids: Option<Vec<String>>,
    options: MapArgs,
    progress: Option<Py<PyAny>>,
    data_ids: bool,
) -> PyResult<(usize, usize, usize)> {
    let progress = PyProgress::new(progress);
    let hooked = progress.as_ref();
    let result = run_interruptible(py, move || {
        let o = options.resolve()?;
        let (d, s) = (open(&data)?, open(&som)?);
        // `ids` given replace the data file's; without them, the data file's are
        // copied unless `data_ids` is false (Python's ids=False, the CLI's --no-ids).
        let ids = match ids {
            Some(v) => Some(v),
            None if data_ids => tensorfmt::som::ids::entry_ids(&d).map_err(som_error)?,
            None => None,
        };
        let hook = |done: u64, total: u64| -> Result<(), SomError> {
            match hooked {
                Some(p) => p.call(done, total).map_err(SomError::Core),
                None => Ok(()),
            }
        };
        let summary = map_files(
            &d,
            Some(&data),
            &s,
            &o,
            &map_out,
            rotflip_out.as_deref(),
            ids.as_deref(),
            &hook,
        )
        .map_err(som_error)?;
        Ok((summary.entries, summary.neurons, summary.ids))
    });
    outcome(result, progress.as_ref())
}

/// The geometry PINK would use (`tensorfmt.som.geometry`): a dict-like tuple
/// `(channels, image_dim, neuron_dim, euclidean_distance_dim, transforms)` for image
/// dims and neuron dims.
#[pyfunction]
#[pyo3(signature = (image_dims, neuron_dims, options))]
pub fn som_geometry(
    py: Python<'_>,
    image_dims: Vec<usize>,
    neuron_dims: Vec<usize>,
    options: MapArgs,
) -> PyResult<(usize, usize, usize, usize, u32)> {
    crate::errors::run(py, move || {
        let o = options.resolve()?;
        let g = tensorfmt::som::mapping::MapGeometry::resolve(&image_dims, &neuron_dims, &o)
            .map_err(som_error)?;
        Ok((
            g.channels,
            g.image_dim,
            g.neuron_dim,
            g.euclidean_distance_dim,
            g.transforms(),
        ))
    })
}

/// PINK's spatial transform `t` of one image (`tensorfmt.som.transform`), f32 bytes in
/// and out.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
pub fn som_transform(
    py: Python<'_>,
    image: Vec<u8>,
    channels: usize,
    image_dim: usize,
    neuron_dim: usize,
    num_rot: u32,
    flip: bool,
    t: u32,
    interpolation: String,
) -> PyResult<Vec<u8>> {
    crate::errors::run(py, move || {
        let interpolation = interpolation.parse::<Interpolation>().map_err(som_error)?;
        let v = f32s(&image);
        let out = tensorfmt::som::transform::transform(
            &v,
            channels,
            image_dim,
            neuron_dim,
            num_rot,
            flip,
            t,
            interpolation,
        )
        .map_err(som_error)?;
        Ok(bytes(&out))
    })
}

/// The inverse of [`som_transform`]: a neuron in the frame of the image it matched
/// (`tensorfmt.som.align`).
#[pyfunction]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
pub fn som_align(
    py: Python<'_>,
    neuron: Vec<u8>,
    channels: usize,
    neuron_dim: usize,
    image_dim: usize,
    num_rot: u32,
    flip: bool,
    t: u32,
) -> PyResult<Vec<u8>> {
    crate::errors::run(py, move || {
        let v = f32s(&neuron);
        let out =
            tensorfmt::som::transform::align(&v, channels, neuron_dim, image_dim, num_rot, flip, t)
                .map_err(som_error)?;
        Ok(bytes(&out))
    })
}

/// The ids of a PINK file's `# id` comment lines, or None (`tensorfmt.som.ids`).
#[pyfunction]
pub fn som_ids(py: Python<'_>, path: PathBuf) -> PyResult<Option<Vec<String>>> {
    crate::errors::run(py, move || {
        let f = open(&path)?;
        tensorfmt::som::ids::entry_ids(&f).map_err(som_error)
    })
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Writes a PINK data file from an array `[entries, *image dims]` with optional
/// catalogue ids as `# id` comment lines (`tensorfmt.som.write_data`).
#[pyfunction]
#[pyo3(signature = (path, data, ids=None, comments=None))]
pub fn som_write_data(
    py: Python<'_>,
    path: PathBuf,
    data: F32Array,
    ids: Option<Vec<String>>,
    comments: Option<Vec<String>>,
) -> PyResult<usize> {
    let data = Some(data);
    let b = Borrowed::of(&data).expect("given");
    let result = run_interruptible(py, move || {
        let entries = b.shape.first().copied().unwrap_or(0);
        let mut lines = comments.unwrap_or_default();
        tensorfmt::som::ids::check_free_comments(&lines).map_err(som_error)?;
        if let Some(ids) = &ids {
            if ids.len() != entries {
                return Err(Error::Invalid(format!(
                    "ids: {} ids for {entries} entries",
                    ids.len()
                )));
            }
            lines.extend(tensorfmt::som::ids::id_comments(ids).map_err(som_error)?);
        }
        let config = tensorfmt::som::WriteConfig {
            comments: lines,
            ..Default::default()
        };
        let t = Tensor::from_vec(b.values()?.to_vec(), b.shape.clone(), Order::RowMajor)?;
        let mut w =
            tensorfmt::som::DataWriter::create(&path, &b.shape[1..], &config).map_err(som_error)?;
        w.append(&t).map_err(som_error)?;
        Ok(w.commit().map_err(som_error)? as usize)
    });
    // The array may go only now that the write is done.
    drop(data);
    result
}
