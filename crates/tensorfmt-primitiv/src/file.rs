//! The format-neutral view: [`PrimitivFile`] implements
//! [`TensorFile`](tensorfmt_core::TensorFile), and [`save_named`] is the reverse.

use std::collections::BTreeMap;
use std::path::Path;

use tensorfmt_core::{
    DType, Error, FieldValue, Order, SourceLayout, Tensor, TensorFile, TensorInfo, WriteOptions,
};

use crate::data::{Model, Parameter, PrimitivData, PrimitivShape, PrimitivTensor};
use crate::error::{PrimitivError, Result};
use crate::key::Key;
use crate::read::Decoded;

/// A decoded primitiv file as named tensors.
///
/// Export names: a Parameter gives `value` and one tensor per stat (named by its key);
/// a Model gives `<k1>.<k2>...` for each parameter value and `<k1>.<k2>.../<stat>` for
/// each stat, where a key's own `\`, `.` and `/` are escaped as `\\`, `\.` and `\/`
/// ([`Model::export_name`]), so the key `a.b` (`a\.b`) and the path `a`, `b` (`a.b`)
/// stay two tensors and [`save_named`] writes both back; a Tensor file gives `tensor`; Shape and Optimizer files have no tensors
/// (their content is in [`TensorFile::header`]). Tensors come out in row-major (numpy)
/// order with the logical shape `[d0, d1, ...]`, plus a trailing batch axis when the
/// batch is above 1.
pub struct PrimitivFile {
    decoded: Decoded,
    tensors: Vec<(String, PrimitivTensor)>,
    /// Positions in `tensors` sorted by export name (lookups by name are O(log n),
    /// without a second copy of every name).
    index: Vec<u32>,
    warnings: Vec<String>,
    max_alloc: u64,
    /// The bytes the file was decoded from, when known ([`PrimitivFile::with_source`]).
    source: Option<bytes::Bytes>,
}

impl PrimitivFile {
    /// Wraps a decoded file (see [`crate::read_file`]).
    ///
    /// ```
    /// use tensorfmt_core::TensorFile;
    /// use tensorfmt_primitiv::{read_file, PrimitivFile, ReaderOptions};
    /// let hex = "ce00000000ce00000001ce0000010092ce00000002ce00000002ce00000001c4100000803f000000400000404000008040";
    /// let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    /// let f = PrimitivFile::new(read_file(bytes.into(), &ReaderOptions::default())?, u64::MAX);
    /// // column-major [[1, 3], [2, 4]] comes out in numpy order
    /// assert_eq!(f.read_tensor("tensor")?.to_vec::<f32>()?, vec![1., 3., 2., 4.]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(decoded: Decoded, max_alloc: u64) -> PrimitivFile {
        let mut tensors = Vec::new();
        match &decoded.data {
            PrimitivData::Shape(_) | PrimitivData::Optimizer(_) => {}
            PrimitivData::Tensor(t) => tensors.push(("tensor".to_string(), t.clone())),
            PrimitivData::Parameter(p) => {
                tensors.push(("value".to_string(), p.value().clone()));
                for (k, t) in p.stats() {
                    tensors.push((k.to_string(), t.clone()));
                }
            }
            PrimitivData::Model(m) => {
                for (path, p) in m.entries() {
                    let base = Model::export_name(path);
                    tensors.push((base.clone(), p.value().clone()));
                    for (k, t) in p.stats() {
                        tensors.push((format!("{base}/{k}"), t.clone()));
                    }
                }
            }
        }
        // Model names are one-to-one (`Model::export_name` escapes `.` and `/` in keys),
        // but a Parameter's stat called `value` takes the value's name: keep every
        // tensor reachable by suffixing the later ones.
        let mut warnings = decoded.warnings.clone();
        let mut seen = std::collections::HashSet::new();
        for (name, _) in tensors.iter_mut() {
            if !seen.insert(name.clone()) {
                let mut i = 2;
                while seen.contains(&format!("{name}~{i}")) {
                    i += 1;
                }
                let new = format!("{name}~{i}");
                warnings.push(format!(
                    "export name {name} is taken twice; the later tensor is named {new}"
                ));
                seen.insert(new.clone());
                *name = new;
            }
        }
        let mut index: Vec<u32> = (0..tensors.len() as u32).collect();
        index.sort_unstable_by(|&a, &b| tensors[a as usize].0.cmp(&tensors[b as usize].0));
        PrimitivFile {
            decoded,
            tensors,
            index,
            warnings,
            max_alloc,
            source: None,
        }
    }

    /// Remembers the bytes the file was decoded from, so that
    /// [`TensorFile::source_layout`] can say where each tensor's values lie in them.
    ///
    /// ```
    /// use tensorfmt_core::TensorFile;
    /// use tensorfmt_primitiv::{read_file, PrimitivFile, ReaderOptions};
    /// let hex = "ce00000000ce00000001ce0000010092ce00000002ce00000002ce00000001c4100000803f000000400000404000008040";
    /// let bytes: bytes::Bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect::<Vec<u8>>().into();
    /// let f = PrimitivFile::new(read_file(bytes.clone(), &ReaderOptions::default())?, u64::MAX).with_source(bytes.clone());
    /// let l = f.source_layout("tensor").unwrap();
    /// assert_eq!((l.runs[0].offset, l.runs[0].len), (33, 16)); // column-major, as stored
    /// assert_eq!(&bytes[33..37], 1f32.to_le_bytes());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_source(mut self, data: bytes::Bytes) -> PrimitivFile {
        self.source = Some(data);
        self
    }

    /// Where `t`'s values lie in the source, when they are a slice of it
    /// (column-major, as primitiv stores them).
    fn layout_of(&self, t: &PrimitivTensor) -> Option<SourceLayout> {
        let file = self.source.as_ref()?;
        let data = t.data();
        let offset = (data.as_ptr() as usize).checked_sub(file.as_ptr() as usize)?;
        if data.is_empty() || offset.checked_add(data.len())? > file.len() {
            return None;
        }
        let mut l = SourceLayout::contiguous(offset as u64, data.len() as u64);
        l.order = Order::ColumnMajor;
        Some(l)
    }

    /// The decoded data.
    pub fn data(&self) -> &PrimitivData {
        &self.decoded.data
    }

    /// Every parameter (a Model's, in key-path order, or a Parameter file's one,
    /// named `value`) with the export names of its value and of each stat: the names
    /// [`TensorFile::tensors`] gives them, suffixed where two meet (a Parameter
    /// file's stat called `value` is `value~2`). Empty for the other kinds.
    ///
    /// ```
    /// use tensorfmt_primitiv::{read_file, to_bytes, Parameter, PrimitivData, PrimitivFile,
    ///                          PrimitivShape, PrimitivTensor, ReaderOptions};
    /// let t = PrimitivTensor::from_f32(PrimitivShape::new([2], 1)?, &[1.0, 2.0])?;
    /// let mut p = Parameter::new(t.clone())?;
    /// p.set_stat("value", t); // any stat key is allowed, this one too
    /// let bytes = to_bytes(&PrimitivData::Parameter(p))?;
    /// let f = PrimitivFile::new(read_file(bytes.into(), &ReaderOptions::default())?, u64::MAX);
    /// let ps = f.parameters();
    /// assert_eq!(ps[0].value, "value");
    /// assert_eq!((ps[0].stats[0].0.to_string(), ps[0].stats[0].1), ("value".into(), "value~2"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn parameters(&self) -> Vec<ParameterExport<'_>> {
        let mut names = self.tensors.iter().map(|(n, _)| n.as_str());
        // The tensors were listed in this order (value, then stats) by `new`.
        let mut export = |name: String, p: &'_ Parameter| -> Option<ParameterExport<'_>> {
            Some(ParameterExport {
                name,
                value: names.next()?,
                value_shape: p.value().shape().clone(),
                stats: p
                    .stats()
                    .iter()
                    .map(|(k, t)| Some((k.clone(), names.next()?, t.shape().clone())))
                    .collect::<Option<_>>()?,
            })
        };
        let all = match &self.decoded.data {
            PrimitivData::Parameter(p) => vec![export("value".to_string(), p)],
            PrimitivData::Model(m) => m
                .entries()
                .map(|(path, p)| export(Model::export_name(path), p))
                .collect(),
            _ => Vec::new(),
        };
        all.into_iter()
            .map(|e| e.expect("one export name per value and stat"))
            .collect()
    }

    /// One tensor in primitiv's own layout (column-major, batch last), by export name.
    pub fn primitiv_tensor(&self, name: &str) -> Option<&PrimitivTensor> {
        let at = self
            .index
            .partition_point(|&i| self.tensors[i as usize].0.as_str() < name);
        let (found, t) = &self.tensors[*self.index.get(at)? as usize];
        (found == name).then_some(t)
    }
}

/// A parameter as [`PrimitivFile::parameters`] lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParameterExport<'a> {
    /// The parameter's export name (a Model's key path, [`Model::export_name`]), or
    /// `value` in a Parameter file.
    pub name: String,
    /// The export name of its value.
    pub value: &'a str,
    /// The value's primitiv shape.
    pub value_shape: PrimitivShape,
    /// Each stat: its key, its export name, its primitiv shape (file order).
    pub stats: Vec<(Key, &'a str, PrimitivShape)>,
}

fn shape_field(s: &PrimitivShape) -> FieldValue {
    FieldValue::Text(s.to_string())
}

/// A parameter's header entry: `{value: "[2]x1", stats: {"Adam.m1": "[2]x1", ...}}`,
/// the value and the stats apart, since a stat may itself be called `value`.
fn parameter_field(p: &Parameter) -> FieldValue {
    let stats = p
        .stats()
        .iter()
        .map(|(k, t)| (k.to_string(), shape_field(t.shape())))
        .collect();
    FieldValue::Map(vec![
        ("value".to_string(), shape_field(p.value().shape())),
        ("stats".to_string(), FieldValue::Map(stats)),
    ])
}

fn key_map<T: Copy + Into<FieldValue>>(v: &[(Key, T)]) -> FieldValue {
    FieldValue::Map(
        v.iter()
            .map(|(k, x)| (k.to_string(), (*x).into()))
            .collect(),
    )
}

/// How many parameters a model's header describes one by one (`entries`).
const HEADER_ENTRIES_MAX: usize = 32;

impl TensorFile for PrimitivFile {
    fn format(&self) -> &'static str {
        "primitiv"
    }

    fn kind(&self) -> String {
        self.decoded.data.data_type().name().to_string()
    }

    fn kind_id(&self) -> &'static str {
        self.decoded.data.data_type().name()
    }

    fn header(&self) -> Vec<(String, FieldValue)> {
        let dt = self.decoded.data.data_type();
        let mut h = vec![
            ("version".to_string(), FieldValue::Text("0.1".into())),
            (
                "data_type".to_string(),
                FieldValue::Text(format!("{:#x} ({dt})", dt.code())),
            ),
        ];
        match &self.decoded.data {
            PrimitivData::Shape(s) => {
                h.push(("dims".into(), s.dims().to_vec().into()));
                h.push(("batch".into(), s.batch().into()));
            }
            PrimitivData::Tensor(t) => {
                h.push(("dims".into(), t.shape().dims().to_vec().into()));
                h.push(("batch".into(), t.shape().batch().into()));
            }
            PrimitivData::Parameter(p) => {
                h.push(("parameter".into(), parameter_field(p)));
            }
            PrimitivData::Model(m) => {
                h.push(("parameters".into(), m.len().into()));
                // The first entries; `parameters` counts them all (the tensors list
                // every one), so a model of 100,000 parameters has a small header.
                let entries = m
                    .entries()
                    .take(HEADER_ENTRIES_MAX)
                    .map(|(k, p)| (Model::export_name(k), parameter_field(p)))
                    .collect();
                h.push(("entries".into(), FieldValue::Map(entries)));
            }
            PrimitivData::Optimizer(o) => {
                let kind = o.kind().map(|k| k.name()).unwrap_or("unknown");
                h.push(("optimizer".into(), FieldValue::Text(kind.into())));
                h.push(("uint_configs".into(), key_map(&o.uint_configs)));
                h.push(("float_configs".into(), key_map(&o.float_configs)));
                let missing = o.settings().missing;
                if !missing.is_empty() {
                    h.push(("missing_keys".into(), missing.into()));
                }
            }
        }
        h
    }

    fn tensors(&self) -> Vec<TensorInfo> {
        self.tensors
            .iter()
            .map(|(n, t)| TensorInfo::new(n.clone(), DType::F32, t.shape().core_dims()))
            .collect()
    }

    fn read_tensor(&self, name: &str) -> tensorfmt_core::Result<Tensor> {
        let t = self
            .primitiv_tensor(name)
            .ok_or_else(|| Error::NoSuchTensor(name.to_string()))?;
        let core = t.to_core()?;
        if core.dims().len() < 2 {
            return core.to_order(Order::RowMajor); // same bytes, no copy
        }
        // The row-major copy is the one allocation.
        tensorfmt_core::Limits {
            max_alloc: self.max_alloc,
            ..tensorfmt_core::Limits::default()
        }
        .check_alloc(t.data().len() as u64)?;
        // Core's reordering reads the file bytes at their (arbitrary) alignment directly.
        core.to_order(Order::RowMajor)
    }

    /// The tensor's value bytes are the reader's slice of the file (primitiv's own
    /// layout: column-major, batch last); their offset is where that slice starts.
    fn source_layout(&self, name: &str) -> Option<SourceLayout> {
        self.layout_of(self.primitiv_tensor(name)?)
    }

    fn source_layouts(&self) -> Vec<Option<SourceLayout>> {
        self.tensors
            .iter()
            .map(|(_, t)| self.layout_of(t))
            .collect()
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// Reads every tensor, as the default does, without listing them first (a
    /// model of 100,000 parameters has its names here already).
    fn validate(&self) -> tensorfmt_core::Result<()> {
        for (name, _) in &self.tensors {
            for chunk in self.read_chunks(name)? {
                chunk?;
            }
        }
        Ok(())
    }
}

/// Splits a model export name at its first unescaped `/` into the parameter's name
/// and the stat key (kept verbatim).
fn split_stat(name: &str) -> (&str, Option<&str>) {
    let mut escaped = false;
    for (i, c) in name.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '/' => return (&name[..i], Some(&name[i + 1..])),
            _ => {}
        }
    }
    (name, None)
}

/// One tensor as primitiv stores it; an error names the tensor.
fn stored(name: &str, tensor: &Tensor, batch_axis: bool) -> Result<PrimitivTensor> {
    PrimitivTensor::from_core(tensor, batch_axis).map_err(|e| match e {
        PrimitivError::Unwritable(why) => {
            PrimitivError::Unwritable(format!("tensor {name:?}: {why}"))
        }
        other => other,
    })
}

/// Builds primitiv data from named tensors (the reverse of the export names) and
/// writes it atomically.
///
/// The file kind is `options.kind` (`model`, `parameter` or `tensor`); without it, a
/// single tensor named `value` makes a Parameter file and anything else a Model file.
/// Model names are `<k1>.<k2>...` for values and `<k1>.<k2>.../<stat>` for stats
/// (keys escaped as by [`Model::export_name`]; the stat is what follows the first
/// unescaped `/`);
/// Parameter names are `value` and the stat keys. Tensors may be in any order; they
/// are stored column-major. The exported batch axis cannot be told from an ordinary
/// axis: with `options.extra["batch_axis"] = "true"` the last axis of every stat (and
/// of a Tensor file's tensor) is written as the batch, otherwise the batch is 1.
///
/// ```
/// use tensorfmt_core::{Order, Tensor, WriteOptions};
/// use tensorfmt_primitiv::{read_file, save_named, PrimitivData, ReaderOptions};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("m.data");
/// let w = Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], [2, 3], Order::RowMajor)?;
/// save_named(&path, &[("enc.w".to_string(), w.clone()), ("enc.w/Adam.m1".to_string(), w)], &WriteOptions::default())?;
/// let d = read_file(tensorfmt_core::io::read_file(&path)?, &ReaderOptions::default())?;
/// let PrimitivData::Model(m) = d.data else { panic!() };
/// assert_eq!(m.get_dotted("enc.w").unwrap().value().to_f32_vec(), vec![1., 4., 2., 5., 3., 6.]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_named(path: &Path, tensors: &[(String, Tensor)], options: &WriteOptions) -> Result<()> {
    let data = build(tensors, options)?;
    tensorfmt_core::io::write_atomic_with(path, options, |f| crate::write::encode(f, &data))
}

/// [`save_named`] without the file: the primitiv data the tensors describe.
///
/// primitiv stores f32 only: f32 is kept, f16/bf16 are widened exactly, and other
/// dtypes are refused unless `options.dtype = Some(DType::F32)` asks for the (lossy)
/// narrowing of f64 and integer tensors; any other requested dtype is an error.
///
/// ```
/// use tensorfmt_core::{DType, Order, Tensor, WriteOptions};
/// use tensorfmt_primitiv::{build, PrimitivData};
/// let t = Tensor::from_vec(vec![1f64, 2.5], [2], Order::RowMajor)?;
/// let named = [("value".to_string(), t)];
/// assert!(build(&named, &WriteOptions::default()).is_err());
/// let narrow = WriteOptions { dtype: Some(DType::F32), ..WriteOptions::default() };
/// let PrimitivData::Parameter(p) = build(&named, &narrow)? else { panic!() };
/// assert_eq!(p.value().to_f32_vec(), vec![1.0, 2.5]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn build(tensors: &[(String, Tensor)], options: &WriteOptions) -> Result<PrimitivData> {
    let narrowed: Vec<(String, Tensor)>;
    let tensors = match options.dtype {
        None => tensors,
        Some(DType::F32) => {
            narrowed = tensors
                .iter()
                .map(|(n, t)| {
                    let t = match t.dtype() {
                        DType::F32 | DType::F16 | DType::BF16 => t.clone(),
                        _ => t.cast(DType::F32)?,
                    };
                    Ok((n.clone(), t))
                })
                .collect::<Result<_>>()?;
            &narrowed[..]
        }
        Some(other) => {
            return Err(PrimitivError::Unwritable(format!(
                "primitiv stores f32 only; cannot store {other} (use dtype f32 to narrow)"
            )))
        }
    };
    let batch_axis = options.flag("batch_axis")?;
    let kind = match options.kind.as_deref() {
        Some(k) => k,
        None if tensors.len() == 1 && tensors[0].0 == "value" => "parameter",
        None => "model",
    };
    tensorfmt_core::settings::check("primitiv", crate::SETTINGS, Some(kind), options)?;
    let has_stats = match kind {
        "parameter" => tensors.iter().any(|(n, _)| n != "value"),
        "model" => tensors.iter().any(|(n, _)| split_stat(n).1.is_some()),
        _ => true,
    };
    if batch_axis && !has_stats {
        return Err(PrimitivError::BadTensors(format!(
            "batch_axis=true is for the stats' batch axis, and this {kind} has no stats"
        )));
    }
    let mut names = std::collections::HashSet::new();
    for (n, _) in tensors {
        if !names.insert(n.as_str()) {
            return Err(PrimitivError::BadTensors(format!(
                "tensor name {n:?} appears twice"
            )));
        }
    }
    match kind {
        "tensor" => match tensors {
            [(n, t)] => Ok(PrimitivData::Tensor(stored(n, t, batch_axis)?)),
            _ => Err(PrimitivError::BadTensors(format!(
                "a primitiv Tensor file holds exactly one tensor, got {}",
                tensors.len()
            ))),
        },
        "parameter" => {
            let value = tensors.iter().find(|(n, _)| n == "value").ok_or_else(|| {
                PrimitivError::BadTensors(
                    "a primitiv Parameter file needs a tensor named `value`".into(),
                )
            })?;
            let mut p = Parameter::new(stored(&value.0, &value.1, false)?)?;
            for (n, t) in tensors.iter().filter(|(n, _)| n != "value") {
                p.set_stat(n.as_str(), stored(n, t, batch_axis)?);
            }
            Ok(PrimitivData::Parameter(p))
        }
        "model" => {
            type Group<'a> = (
                Option<(&'a str, &'a Tensor)>,
                Vec<(&'a str, &'a str, &'a Tensor)>,
            );
            let mut groups: BTreeMap<Vec<Key>, Group> = BTreeMap::new();
            // Two spellings of one key path (`a\.b`, `a\x2eb`) are one parameter:
            // refused, as primitiv's `Model::add` refuses a name twice, rather than
            // one tensor silently replacing the other.
            let twice = |a: &str, b: &str, what: String| {
                PrimitivError::BadTensors(format!(
                    "tensor names {a:?} and {b:?} are both {what} (escapes spell one key \
                     several ways); a model holds each once"
                ))
            };
            for (n, t) in tensors {
                let (param, stat) = split_stat(n);
                let path = Model::parse_export_name(param).ok_or_else(|| {
                    PrimitivError::BadTensors(format!(
                        "tensor name {n:?} is not a model export name (a `\\` starts \
                         only `\\\\`, `\\.`, `\\/` or `\\xNN`)"
                    ))
                })?;
                // One spelling per key path, the reader's: `\x41b` or `\xFF` would be
                // written under another name (`Ab`, `\xff`) than the one given.
                let canonical = Model::export_name(&path);
                if canonical != param {
                    return Err(PrimitivError::BadTensors(format!(
                        "tensor name {n:?}: {param:?} is written {canonical:?} (escapes only \
                         for `\\`, `.`, `/` and bytes that are not UTF-8 text, as lowercase \
                         `\\xNN`); rename it so, else it would come back under that name"
                    )));
                }
                let what = || format!("parameter {:?}", Model::join(&path));
                let g = groups.entry(path.clone()).or_default();
                match stat {
                    Some(s) => {
                        if let Some((other, _, _)) = g.1.iter().find(|(_, k, _)| *k == s) {
                            return Err(twice(other, n, format!("stat {s:?} of {}", what())));
                        }
                        g.1.push((n, s, t));
                    }
                    None => {
                        if let Some((other, _)) = g.0.replace((n, t)) {
                            return Err(twice(other, n, what()));
                        }
                    }
                }
            }
            let mut model = Model::new();
            for (path, (value, stats)) in groups {
                let param = Model::join(&path);
                let value = value.ok_or_else(|| {
                    // Names from other formats (Caffe's `conv1/0`) meet this rule first.
                    PrimitivError::BadTensors(format!(
                        "tensor {:?} names stat {:?} of parameter {param:?}, and there is \
                         no tensor named {param:?} (in primitiv export names `/` starts a \
                         parameter's stat; write `\\/` for a slash inside a name)",
                        stats[0].0, stats[0].1
                    ))
                })?;
                let mut p = Parameter::new(stored(value.0, value.1, false)?)?;
                for (n, s, t) in stats {
                    p.set_stat(s, stored(n, t, batch_axis)?);
                }
                model.insert(path, p);
            }
            model.check_namespace()?;
            Ok(PrimitivData::Model(model))
        }
        other => Err(PrimitivError::BadTensors(format!(
            "unknown primitiv file kind {other:?} (model, parameter or tensor)"
        ))),
    }
}
