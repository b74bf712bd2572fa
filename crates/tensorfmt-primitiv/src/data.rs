//! The friendly data model: [`PrimitivShape`], [`PrimitivTensor`], [`Parameter`],
//! [`Model`], [`Optimizer`] and the [`PrimitivData`] a file holds.

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;
use tensorfmt_core::{DType, Order, Tensor};

use crate::error::{PrimitivError, Result};
use crate::key::Key;
use crate::optimizer::Optimizer;

/// Most dims a primitiv shape may have (`Shape::MAX_DEPTH`).
pub const MAX_DEPTH: usize = 8;

/// The `data_type` code of a file (the third header value).
///
/// ```
/// use tensorfmt_primitiv::DataType;
/// assert_eq!(DataType::Model.code(), 0x300);
/// assert_eq!(DataType::from_code(0x200), Some(DataType::Parameter));
/// assert_eq!(DataType::from_code(0x500), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `0x000`: a Shape (no upstream loader; reserved).
    Shape,
    /// `0x100`: a Tensor (no upstream loader; reserved).
    Tensor,
    /// `0x200`: a Parameter (`Parameter::save`).
    Parameter,
    /// `0x300`: a Model (`Model::save`).
    Model,
    /// `0x400`: an Optimizer (`Optimizer::save`).
    Optimizer,
}

impl DataType {
    /// The code written in the header.
    pub const fn code(self) -> u32 {
        match self {
            DataType::Shape => 0x000,
            DataType::Tensor => 0x100,
            DataType::Parameter => 0x200,
            DataType::Model => 0x300,
            DataType::Optimizer => 0x400,
        }
    }

    /// The data type of a header code, if known.
    pub const fn from_code(code: u32) -> Option<DataType> {
        Some(match code {
            0x000 => DataType::Shape,
            0x100 => DataType::Tensor,
            0x200 => DataType::Parameter,
            0x300 => DataType::Model,
            0x400 => DataType::Optimizer,
            _ => return None,
        })
    }

    /// Lower-case name (`shape`, `tensor`, `parameter`, `model`, `optimizer`).
    pub const fn name(self) -> &'static str {
        match self {
            DataType::Shape => "shape",
            DataType::Tensor => "tensor",
            DataType::Parameter => "parameter",
            DataType::Model => "model",
            DataType::Optimizer => "optimizer",
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A primitiv shape: up to 8 dims (normalised: trailing 1s dropped) and a batch size,
/// none of them zero.
///
/// ```
/// use tensorfmt_primitiv::PrimitivShape;
/// let s = PrimitivShape::new([2, 3, 1, 1], 1)?;
/// assert_eq!(s.dims(), &[2, 3]);
/// assert_eq!(PrimitivShape::new([1], 1)?, PrimitivShape::scalar());
/// assert_eq!(PrimitivShape::new([3], 4)?.core_dims(), vec![3, 4]);
/// assert!(PrimitivShape::new([2, 0], 1).is_err());
/// assert!(PrimitivShape::new([1; 9], 1).is_err());
/// # Ok::<(), tensorfmt_primitiv::PrimitivError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PrimitivShape {
    dims: Vec<u32>,
    batch: u32,
}

impl PrimitivShape {
    /// A checked, normalised shape (the rules of primitiv's `Shape` constructor: at most
    /// 8 dims before normalisation, no zero dim or batch).
    pub fn new(dims: impl Into<Vec<u32>>, batch: u32) -> Result<PrimitivShape> {
        let dims = dims.into();
        Self::checked(dims, batch, 0, "shape")
    }

    pub(crate) fn checked(
        mut dims: Vec<u32>,
        batch: u32,
        offset: u64,
        field: &'static str,
    ) -> Result<PrimitivShape> {
        if dims.len() > MAX_DEPTH {
            return Err(PrimitivError::TooManyDims {
                offset,
                field,
                depth: dims.len() as u64,
            });
        }
        if batch == 0 || dims.contains(&0) {
            return Err(PrimitivError::InvalidShape {
                offset,
                field,
                dims,
                batch,
            });
        }
        while dims.last() == Some(&1) {
            dims.pop();
        }
        Ok(PrimitivShape { dims, batch })
    }

    /// The rank-0 shape `[]x1`.
    pub fn scalar() -> PrimitivShape {
        PrimitivShape {
            dims: Vec::new(),
            batch: 1,
        }
    }

    /// The normalised dims.
    pub fn dims(&self) -> &[u32] {
        &self.dims
    }

    /// The batch size.
    pub fn batch(&self) -> u32 {
        self.batch
    }

    /// Elements per batch item (1 for a scalar). At most 8 factors below 2^32 can
    /// overflow a u64, hence the `Option`.
    pub fn volume(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(u64::from(d)))
    }

    /// Elements in all batch items.
    pub fn size(&self) -> Option<u64> {
        self.volume()?.checked_mul(u64::from(self.batch))
    }

    /// The logical shape of the exported tensor: the dims, plus a trailing batch axis
    /// when the batch is above 1.
    pub fn core_dims(&self) -> Vec<usize> {
        let mut d: Vec<usize> = self.dims.iter().map(|&x| x as usize).collect();
        if self.batch > 1 {
            d.push(self.batch as usize);
        }
        d
    }
}

impl fmt::Display for PrimitivShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}x{}", self.dims, self.batch)
    }
}

/// A primitiv tensor: a shape and its f32 data as little-endian bytes in
/// column-major order, batch last (the file's own layout; no copy from the file).
///
/// ```
/// use tensorfmt_primitiv::{PrimitivShape, PrimitivTensor};
/// use tensorfmt_core::Order;
/// let t = PrimitivTensor::from_f32(PrimitivShape::new([2, 3], 1)?, &[1., 4., 2., 5., 3., 6.])?;
/// let row = t.to_core()?.to_order(Order::RowMajor)?;
/// assert_eq!(row.to_vec::<f32>()?, vec![1., 2., 3., 4., 5., 6.]);
/// assert_eq!(PrimitivTensor::from_core(&row, false)?, t);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PrimitivTensor {
    shape: PrimitivShape,
    data: Bytes,
}

impl PrimitivTensor {
    /// A tensor over little-endian f32 bytes (no copy); the length must be 4 × size.
    pub fn new(shape: PrimitivShape, data: Bytes) -> Result<PrimitivTensor> {
        let expected =
            shape
                .size()
                .and_then(|s| s.checked_mul(4))
                .ok_or(PrimitivError::Overflow {
                    offset: 0,
                    field: "tensor",
                })?;
        if expected != data.len() as u64 {
            return Err(PrimitivError::LengthMismatch {
                offset: 0,
                field: "tensor",
                expected,
                actual: data.len() as u64,
            });
        }
        Ok(PrimitivTensor { shape, data })
    }

    /// A tensor from f32 values in column-major order, batch last.
    pub fn from_f32(shape: PrimitivShape, values: &[f32]) -> Result<PrimitivTensor> {
        let mut bytes = Vec::with_capacity(values.len() * 4);
        for v in values {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        PrimitivTensor::new(shape, Bytes::from(bytes))
    }

    /// Built by the reader, which has checked the length already.
    pub(crate) fn from_parts(shape: PrimitivShape, data: Bytes) -> PrimitivTensor {
        PrimitivTensor { shape, data }
    }

    /// The shape.
    pub fn shape(&self) -> &PrimitivShape {
        &self.shape
    }

    /// The raw little-endian f32 bytes, column-major, batch last.
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// The values, column-major, batch last (one copy).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        self.data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    /// A core tensor in column-major order with shape [`PrimitivShape::core_dims`], over
    /// the same bytes (no copy). `to_order(Order::RowMajor)` gives numpy order.
    pub fn to_core(&self) -> tensorfmt_core::Result<Tensor> {
        Tensor::from_bytes(
            DType::F32,
            self.shape.core_dims(),
            Order::ColumnMajor,
            self.data.clone(),
        )
    }

    /// A primitiv tensor from a core tensor of any order. `f32` is stored as is,
    /// `f16`/`bf16` are widened exactly; other dtypes are refused (cast them first, as
    /// the conversion would lose information or meaning). With `batch_axis`, the last
    /// axis becomes the batch (rank ≥ 1 required); otherwise the batch is 1.
    pub fn from_core(tensor: &Tensor, batch_axis: bool) -> Result<PrimitivTensor> {
        let t = match tensor.dtype() {
            DType::F32 => tensor.clone(),
            DType::F16 | DType::BF16 => tensor.cast(DType::F32)?,
            other => {
                return Err(PrimitivError::Unwritable(format!(
                    "primitiv stores f32 only; got {other} (ask for dtype f32 to narrow it)"
                )))
            }
        };
        let t = t.to_order(Order::ColumnMajor)?;
        let mut dims = Vec::with_capacity(t.dims().len());
        for &d in t.dims() {
            dims.push(u32::try_from(d).map_err(|_| {
                PrimitivError::Unwritable(format!("dim {d} does not fit in a uint32"))
            })?);
        }
        let batch = if batch_axis {
            dims.pop().ok_or_else(|| {
                PrimitivError::Unwritable("a scalar has no batch axis".to_string())
            })?
        } else {
            1
        };
        let shape = PrimitivShape::checked(dims, batch, 0, "tensor")?;
        PrimitivTensor::new(shape, t.into_bytes())
    }
}

/// A primitiv parameter: a value tensor (batch 1) and named statistics (optimizer
/// moments such as `Adam.m1`), kept in the order they were read or inserted.
///
/// ```
/// use tensorfmt_primitiv::{Parameter, PrimitivShape, PrimitivTensor};
/// let v = PrimitivTensor::from_f32(PrimitivShape::new([2], 1)?, &[1., 2.])?;
/// let mut p = Parameter::new(v.clone())?;
/// p.set_stat("Adam.m2", v.clone());
/// p.set_stat("Adam.m1", v.clone());
/// let names: Vec<String> = p.stats().iter().map(|(k, _)| k.to_string()).collect();
/// assert_eq!(names, ["Adam.m1", "Adam.m2"]); // inserted in sorted position
/// assert!(Parameter::new(PrimitivTensor::from_f32(PrimitivShape::new([2], 2)?, &[0.; 4])?).is_err());
/// # Ok::<(), tensorfmt_primitiv::PrimitivError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    value: PrimitivTensor,
    stats: Vec<(Key, PrimitivTensor)>,
}

impl Parameter {
    /// A parameter without stats. The value's batch must be 1.
    pub fn new(value: PrimitivTensor) -> Result<Parameter> {
        Self::checked(value, Vec::new(), 0)
    }

    pub(crate) fn checked(
        value: PrimitivTensor,
        stats: Vec<(Key, PrimitivTensor)>,
        offset: u64,
    ) -> Result<Parameter> {
        if value.shape.batch != 1 {
            return Err(PrimitivError::ParameterBatch {
                offset,
                dims: value.shape.dims.clone(),
                batch: value.shape.batch,
            });
        }
        Ok(Parameter { value, stats })
    }

    /// The value tensor.
    pub fn value(&self) -> &PrimitivTensor {
        &self.value
    }

    /// The stats, in file (or insertion) order.
    pub fn stats(&self) -> &[(Key, PrimitivTensor)] {
        &self.stats
    }

    /// One stat by name.
    pub fn stat(&self, key: &str) -> Option<&PrimitivTensor> {
        self.stats.iter().find(|(k, _)| k == key).map(|(_, t)| t)
    }

    /// Sets a stat: replaces it in place if present, otherwise inserts it at its sorted
    /// position (so parameters built in code are written deterministically). Stat
    /// shapes are not checked against the value, as in primitiv.
    pub fn set_stat(&mut self, key: impl Into<Key>, tensor: PrimitivTensor) {
        let key = key.into();
        if let Some(slot) = self.stats.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = tensor;
            return;
        }
        let pos = self.stats.partition_point(|(k, _)| *k < key);
        self.stats.insert(pos, (key, tensor));
    }

    /// Removes every stat (what `save(path, false)` writes).
    pub fn clear_stats(&mut self) {
        self.stats.clear();
    }

    /// Sorts the stats by key (the order this crate recommends for new files).
    pub fn sort_stats(&mut self) {
        self.stats.sort_by(|a, b| a.0.cmp(&b.0));
    }
}

/// A key path from the root model: submodel names, then the parameter name.
pub type KeyPath = Vec<Key>;

/// A primitiv model: parameters addressed by key paths, kept sorted by path (the order
/// primitiv writes them in: lexicographic over the key vectors).
///
/// ```
/// use tensorfmt_primitiv::{Key, Model, Parameter, PrimitivShape, PrimitivTensor};
/// let p = Parameter::new(PrimitivTensor::from_f32(PrimitivShape::scalar(), &[1.])?)?;
/// let mut m = Model::new();
/// m.insert(vec![Key::from("w")], p.clone());
/// m.insert(vec![Key::from("enc"), Key::from("w")], p.clone());
/// let order: Vec<String> = m.entries().map(|(k, _)| Model::join(k)).collect();
/// assert_eq!(order, ["enc.w", "w"]);
/// # Ok::<(), tensorfmt_primitiv::PrimitivError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Model {
    entries: BTreeMap<KeyPath, Parameter>,
}

impl Model {
    /// An empty model.
    pub fn new() -> Model {
        Model::default()
    }

    /// Adds or replaces a parameter; returns the one replaced.
    pub fn insert(&mut self, path: KeyPath, parameter: Parameter) -> Option<Parameter> {
        self.entries.insert(path, parameter)
    }

    /// A parameter by key path.
    pub fn get(&self, path: &[Key]) -> Option<&Parameter> {
        self.entries.get(path)
    }

    /// A parameter by dotted name (`enc.w`), as exported ([`Model::export_name`]).
    pub fn get_dotted(&self, name: &str) -> Option<&Parameter> {
        let path = Model::parse_export_name(name)?;
        self.entries.get(&path)
    }

    /// The export name of a key path: its keys joined with `.`, where a key's own
    /// `\`, `.` and `/` are written `\\`, `\.` and `\/`, and bytes that are not UTF-8
    /// `\xNN`. Ordinary names (`enc.w`) are unchanged; the escapes make the mapping
    /// one-to-one, so the key `"a.b"` and the path `["a", "b"]` stay two names
    /// (`a\.b` and `a.b`), and [`Model::parse_export_name`] inverts it.
    ///
    /// ```
    /// use tensorfmt_primitiv::{Key, Model};
    /// let one = vec![Key::from("a.b")];
    /// let two = vec![Key::from("a"), Key::from("b")];
    /// assert_eq!(Model::export_name(&one), r"a\.b");
    /// assert_eq!(Model::export_name(&two), "a.b");
    /// assert_eq!(Model::parse_export_name(r"a\.b"), Some(one));
    /// assert_eq!(Model::parse_export_name("a.b"), Some(two));
    /// ```
    pub fn export_name(path: &[Key]) -> String {
        let mut out = String::new();
        for (i, k) in path.iter().enumerate() {
            if i > 0 {
                out.push('.');
            }
            for chunk in k.as_bytes().utf8_chunks() {
                for c in chunk.valid().chars() {
                    if matches!(c, '\\' | '.' | '/') {
                        out.push('\\');
                    }
                    out.push(c);
                }
                for b in chunk.invalid() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
        }
        out
    }

    /// The key path of an export name ([`Model::export_name`]'s inverse); `None` when
    /// the name has an unknown escape or a `/` that is not escaped.
    pub fn parse_export_name(name: &str) -> Option<KeyPath> {
        let mut path = Vec::new();
        let mut key = Vec::new();
        let mut it = name.chars();
        while let Some(c) = it.next() {
            match c {
                '.' => path.push(Key::new(std::mem::take(&mut key))),
                '/' => return None,
                '\\' => match it.next()? {
                    e @ ('\\' | '.' | '/') => key.push(e as u8),
                    'x' => {
                        let hex: String = it.by_ref().take(2).collect();
                        if hex.len() != 2 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                            return None;
                        }
                        key.push(u8::from_str_radix(&hex, 16).ok()?);
                    }
                    _ => return None,
                },
                c => {
                    let mut buf = [0; 4];
                    key.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        path.push(Key::new(key));
        Some(path)
    }

    /// Entries in key-path order.
    pub fn entries(&self) -> impl Iterator<Item = (&KeyPath, &Parameter)> {
        self.entries.iter()
    }

    /// Mutable entries in key-path order.
    pub fn entries_mut(&mut self) -> impl Iterator<Item = (&KeyPath, &mut Parameter)> {
        self.entries.iter_mut()
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the model has no parameters.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A key path joined with `.` (the export name and primitiv's notation).
    pub fn join(path: &[Key]) -> String {
        path.iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(".")
    }

    /// Loads a model read from a file into this one, the way primitiv's `Model::load`
    /// does but atomically: when the file has a parameter this model lacks, nothing is
    /// changed and [`PrimitivError::UnknownParameters`] lists them all; otherwise every
    /// parameter in the file replaces this model's (shape included, no compatibility
    /// check, as upstream), with its stats when `with_stats` (else with none), and the
    /// paths of this model's parameters that the file did not have are returned.
    ///
    /// ```
    /// use tensorfmt_primitiv::{Key, Model, Parameter, PrimitivError, PrimitivShape, PrimitivTensor};
    /// let p = |v: f32| Parameter::new(PrimitivTensor::from_f32(PrimitivShape::scalar(), &[v]).unwrap()).unwrap();
    /// let mut target = Model::new();
    /// target.insert(vec![Key::from("w")], p(0.0));
    /// target.insert(vec![Key::from("b")], p(0.0));
    /// let mut file = Model::new();
    /// file.insert(vec![Key::from("w")], p(1.0));
    /// let missing = target.load_from(&file, true)?;
    /// assert_eq!(missing, vec![vec![Key::from("b")]]);
    /// file.insert(vec![Key::from("x")], p(2.0));
    /// assert!(matches!(target.load_from(&file, true), Err(PrimitivError::UnknownParameters { .. })));
    /// # Ok::<(), PrimitivError>(())
    /// ```
    pub fn load_from(&mut self, file: &Model, with_stats: bool) -> Result<Vec<KeyPath>> {
        let unknown: Vec<String> = file
            .entries
            .keys()
            .filter(|k| !self.entries.contains_key(*k))
            .map(|k| Model::join(k))
            .collect();
        if !unknown.is_empty() {
            return Err(PrimitivError::UnknownParameters { names: unknown });
        }
        let missing = self
            .entries
            .keys()
            .filter(|k| !file.entries.contains_key(*k))
            .cloned()
            .collect();
        for (k, p) in &file.entries {
            let mut p = p.clone();
            if !with_stats {
                p.clear_stats();
            }
            self.entries.insert(k.clone(), p);
        }
        Ok(missing)
    }

    /// Checks what upstream's `Model` guarantees on construction: no empty path, and
    /// parameter and submodel names share one namespace (no path is a prefix of another).
    pub fn check_namespace(&self) -> Result<()> {
        let mut prev: Option<&KeyPath> = None;
        for path in self.entries.keys() {
            if path.is_empty() {
                return Err(PrimitivError::Unwritable(
                    "a model parameter with an empty key path".into(),
                ));
            }
            // In sorted order, a path that is a prefix of others comes right before them.
            if let Some(p) = prev {
                if path.starts_with(p) {
                    return Err(PrimitivError::Unwritable(format!(
                        "name '{}' is both a parameter and a submodel",
                        Model::join(p)
                    )));
                }
            }
            prev = Some(path);
        }
        Ok(())
    }
}

/// What a file holds, by data type.
#[derive(Debug, Clone, PartialEq)]
pub enum PrimitivData {
    /// A Shape file (`0x000`).
    Shape(PrimitivShape),
    /// A Tensor file (`0x100`).
    Tensor(PrimitivTensor),
    /// A Parameter file (`0x200`).
    Parameter(Parameter),
    /// A Model file (`0x300`).
    Model(Model),
    /// An Optimizer file (`0x400`).
    Optimizer(Optimizer),
}

impl PrimitivData {
    /// The data type code written for this data.
    pub fn data_type(&self) -> DataType {
        match self {
            PrimitivData::Shape(_) => DataType::Shape,
            PrimitivData::Tensor(_) => DataType::Tensor,
            PrimitivData::Parameter(_) => DataType::Parameter,
            PrimitivData::Model(_) => DataType::Model,
            PrimitivData::Optimizer(_) => DataType::Optimizer,
        }
    }
}
