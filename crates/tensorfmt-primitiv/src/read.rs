//! The reader: a streaming decoder of top-level MessagePack objects with primitiv's
//! marker rules (via `rmp::decode`), zero copy for tensor data.

use std::io;

use bytes::Bytes;
use rmp::decode::{self, ValueReadError};
use rmp::Marker;
use tensorfmt_core::Limits;

use crate::data::{
    DataType, Model, Parameter, PrimitivData, PrimitivShape, PrimitivTensor, MAX_DEPTH,
};
use crate::error::{PrimitivError, Result};
use crate::key::Key;
use crate::optimizer::Optimizer;

/// How strictly the reader follows primitiv.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Accept exactly what primitiv accepts (trailing bytes, duplicate keys and
    /// non-UTF-8 keys become warnings). The default.
    #[default]
    Primitiv,
    /// Also reject trailing bytes, duplicate keys and non-UTF-8 keys.
    Pedantic,
    /// Also accept any unsigned integer marker for uint32 values (fixint, `cc`, `cd`,
    /// `cf` up to 2^32 - 1) and `cb` floats exactly representable as f32: files written
    /// by generic MessagePack libraries with default settings.
    Lenient,
}

/// Reader settings.
///
/// ```
/// use tensorfmt_primitiv::{Mode, ReaderOptions};
/// let o = ReaderOptions { mode: Mode::Pedantic, ..ReaderOptions::default() };
/// assert_eq!(o.limits.max_items, 1 << 28);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ReaderOptions {
    /// Strictness.
    pub mode: Mode,
    /// Caps: `max_items` bounds every declared count (model entries, stats, map sizes,
    /// key path length), each alone and all together, before any allocation;
    /// `max_rank` lowers primitiv's 8-dim cap; `max_alloc` bounds every key copied and
    /// (in [`crate::PrimitivFile`]) the row-major copy of a tensor. Tensor data itself is
    /// never copied on read.
    pub limits: Limits,
}

/// A decoded file: its data and the warnings found while reading.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// What the file holds.
    pub data: PrimitivData,
    /// Things primitiv accepts silently that deserve a mention (trailing bytes,
    /// duplicate keys, non-UTF-8 keys, pre-release key names), each with its offset.
    pub warnings: Vec<String>,
}

/// Reads a file of any data type.
///
/// ```
/// use tensorfmt_primitiv::{read_file, PrimitivData, ReaderOptions};
/// let hex = "ce00000000ce00000001ce0000020090ce00000001c404d00f4940ce00000000";
/// let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
/// let d = read_file(bytes.into(), &ReaderOptions::default())?;
/// let PrimitivData::Parameter(p) = d.data else { panic!() };
/// assert_eq!(p.value().to_f32_vec(), vec![3.14159]);
/// # Ok::<(), tensorfmt_primitiv::PrimitivError>(())
/// ```
pub fn read_file(data: Bytes, options: &ReaderOptions) -> Result<Decoded> {
    read_inner(data, None, options)
}

/// Reads a file that must have data type `expected` (primitiv's `load` functions):
/// any other type is [`PrimitivError::DataTypeMismatch`].
///
/// ```
/// use tensorfmt_primitiv::{read_as, DataType, PrimitivError, ReaderOptions};
/// let shape = [0xce, 0, 0, 0, 0, 0xce, 0, 0, 0, 1, 0xce, 0, 0, 0, 0, 0x90, 0xce, 0, 0, 0, 1];
/// let e = read_as(bytes::Bytes::copy_from_slice(&shape), DataType::Parameter, &ReaderOptions::default());
/// assert!(matches!(e, Err(PrimitivError::DataTypeMismatch { required: 0x200, observed: 0, .. })));
/// ```
pub fn read_as(data: Bytes, expected: DataType, options: &ReaderOptions) -> Result<Decoded> {
    read_inner(data, Some(expected), options)
}

fn read_inner(data: Bytes, expected: Option<DataType>, options: &ReaderOptions) -> Result<Decoded> {
    let mut r = Reader {
        data: &data,
        pos: 0,
        options,
        warnings: Vec::new(),
        items: 0,
        lenient: 0,
        lenient_first: 0,
    };
    let major = r.u32("ver_major")?;
    let minor = r.u32("ver_minor")?;
    if (major, minor) != (0, 1) {
        return Err(PrimitivError::Version {
            offset: 0,
            major,
            minor,
        });
    }
    let dt_offset = r.pos as u64;
    let code = r.u32("data_type")?;
    if let Some(exp) = expected {
        if code != exp.code() {
            return Err(PrimitivError::DataTypeMismatch {
                offset: dt_offset,
                required: exp.code(),
                observed: code,
            });
        }
    }
    let dt = DataType::from_code(code).ok_or(PrimitivError::UnknownDataType {
        offset: dt_offset,
        observed: code,
    })?;
    let content = match dt {
        DataType::Shape => PrimitivData::Shape(r.shape("shape")?),
        DataType::Tensor => PrimitivData::Tensor(r.tensor("tensor")?),
        DataType::Parameter => PrimitivData::Parameter(r.parameter()?),
        DataType::Model => PrimitivData::Model(r.model()?),
        DataType::Optimizer => PrimitivData::Optimizer(r.optimizer()?),
    };
    if r.lenient > 0 {
        let (n, first) = (r.lenient, r.lenient_first);
        r.warn(
            first,
            format!(
                "{n} value(s) in a generic MessagePack encoding (not `ce` uint32 / `ca` float); \
                 primitiv refuses this file (strict mode would too)"
            ),
        );
    }
    let rest = data.len() - r.pos;
    if rest > 0 {
        if options.mode == Mode::Pedantic {
            return Err(PrimitivError::TrailingBytes {
                offset: r.pos as u64,
                count: rest as u64,
            });
        }
        r.warn(
            r.pos,
            format!("{rest} trailing bytes after the data (ignored, as primitiv does)"),
        );
    }
    Ok(Decoded {
        data: content,
        warnings: r.warnings,
    })
}

/// Smallest byte counts of composite objects, to bound declared counts by the bytes left.
const MIN_TENSOR: usize = 1 + 5 + 2; // empty dims, batch, bin8
const MIN_PARAMETER: usize = MIN_TENSOR + 5; // + stat count
const MIN_STAT: usize = 1 + MIN_TENSOR; // fixstr + tensor
const MIN_ENTRY: usize = 1 + 1 + MIN_PARAMETER; // key array of one fixstr + parameter
const MIN_CONFIG: usize = 1 + 5; // fixstr + uint32 or float

/// Extra bytes after the marker byte for the markers the format uses.
fn marker_extra(b: u8) -> u64 {
    match b {
        0xc4 | 0xcc | 0xd9 => 1,
        0xc5 | 0xcd | 0xda | 0xdc | 0xde => 2,
        0xc6 | 0xca | 0xce | 0xdb | 0xdd | 0xdf => 4,
        0xcb | 0xcf => 8,
        _ => 0,
    }
}

struct Reader<'a> {
    data: &'a Bytes,
    pos: usize,
    options: &'a ReaderOptions,
    warnings: Vec<String>,
    /// Declared counts so far (entries, stats, configs, key parts), against `max_items`.
    items: u64,
    /// Values accepted only by [`Mode::Lenient`], and the offset of the first one.
    lenient: u64,
    lenient_first: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn warn(&mut self, offset: usize, msg: String) {
        self.warnings.push(format!("offset {offset}: {msg}"));
    }

    fn eof(&self, offset: usize, field: &'static str, needed: u64) -> PrimitivError {
        PrimitivError::Eof {
            offset: offset as u64,
            field,
            needed,
            available: (self.data.len() - offset) as u64,
        }
    }

    /// Runs an `rmp::decode` function on the rest of the data, mapping its errors.
    fn decode<T>(
        &mut self,
        field: &'static str,
        expected: &'static str,
        f: impl FnOnce(&mut &'a [u8]) -> std::result::Result<T, ValueReadError<io::Error>>,
    ) -> Result<T> {
        let start = self.pos;
        let data: &'a Bytes = self.data;
        let mut rd: &'a [u8] = &data[start..];
        let before = rd.len();
        match f(&mut rd) {
            Ok(v) => {
                self.pos += before - rd.len();
                Ok(v)
            }
            Err(ValueReadError::TypeMismatch(m)) => Err(PrimitivError::Marker {
                offset: start as u64,
                field,
                expected,
                observed: m.to_u8(),
            }),
            Err(_) => {
                let needed = match self.data.get(start) {
                    Some(&b) => 1 + marker_extra(b),
                    None => 1,
                };
                Err(self.eof(start, field, needed))
            }
        }
    }

    /// Takes `n` bytes (zero copy) after checking they are present.
    fn take(&mut self, n: u64, obj_start: usize, field: &'static str) -> Result<Bytes> {
        let header = (self.pos - obj_start) as u64;
        if n > self.left() as u64 {
            return Err(self.eof(obj_start, field, header + n));
        }
        let n = n as usize;
        let b = self.data.slice(self.pos..self.pos + n);
        self.pos += n;
        Ok(b)
    }

    fn u32(&mut self, field: &'static str) -> Result<u32> {
        if self.options.mode == Mode::Lenient {
            return self.u32_lenient(field);
        }
        self.decode(field, "ce", decode::read_u32)
    }

    fn note_lenient(&mut self, offset: usize) {
        if self.lenient == 0 {
            self.lenient_first = offset;
        }
        self.lenient += 1;
    }

    fn u32_lenient(&mut self, field: &'static str) -> Result<u32> {
        let start = self.pos;
        if self.data.get(start).is_some_and(|&b| b != 0xce) {
            self.note_lenient(start);
        }
        let v: u64 = self.decode(field, "ce", |rd| {
            let m = decode::read_marker(rd).map_err(|e| ValueReadError::InvalidMarkerRead(e.0))?;
            let mut fixed = |n: usize| -> std::result::Result<u64, ValueReadError<io::Error>> {
                let mut buf = [0u8; 8];
                io::Read::read_exact(rd, &mut buf[8 - n..])
                    .map_err(ValueReadError::InvalidDataRead)?;
                Ok(u64::from_be_bytes(buf))
            };
            match m {
                Marker::FixPos(v) => Ok(u64::from(v)),
                Marker::U8 => fixed(1),
                Marker::U16 => fixed(2),
                Marker::U32 => fixed(4),
                Marker::U64 => fixed(8),
                other => Err(ValueReadError::TypeMismatch(other)),
            }
        })?;
        u32::try_from(v).map_err(|_| PrimitivError::Overflow {
            offset: start as u64,
            field,
        })
    }

    fn f32(&mut self, field: &'static str) -> Result<f32> {
        if self.options.mode == Mode::Lenient && self.data.get(self.pos) == Some(&0xcb) {
            let start = self.pos;
            self.note_lenient(start);
            let v = self.decode(field, "ca", decode::read_f64)?;
            let f = v as f32;
            if f64::from(f) == v || v.is_nan() {
                return Ok(f);
            }
            return Err(PrimitivError::Marker {
                offset: start as u64,
                field,
                expected: "ca",
                observed: 0xcb,
            });
        }
        self.decode(field, "ca", decode::read_f32)
    }

    fn key(&mut self, field: &'static str) -> Result<Key> {
        let start = self.pos;
        let len = self.decode(field, "str", decode::read_str_len)?;
        let bytes = self.take(u64::from(len), start, field)?;
        let limit = self.options.limits.max_alloc;
        if u64::from(len) > limit {
            return Err(PrimitivError::Limit {
                offset: start as u64,
                field,
                value: u64::from(len),
                limit,
            });
        }
        let key = Key::new(bytes.to_vec());
        if key.as_str().is_none() {
            if self.options.mode == Mode::Pedantic {
                return Err(PrimitivError::NonUtf8Key {
                    offset: start as u64,
                    field,
                    key: key.to_string(),
                });
            }
            self.warn(start, format!("{field} {key} is not UTF-8 (kept as bytes)"));
        }
        Ok(key)
    }

    /// The capacity to reserve for a declared count: the count is checked against the
    /// limits, and the reservation is bounded by what the bytes left can hold (the
    /// loop that follows fails on the first missing object, as primitiv does).
    fn capacity(
        &mut self,
        n: u32,
        min_each: usize,
        offset: usize,
        field: &'static str,
    ) -> Result<usize> {
        let limit = self.options.limits.max_items;
        // Each declared count alone, and all of them together, within `max_items`.
        self.items = self.items.saturating_add(u64::from(n));
        if self.items > limit {
            return Err(PrimitivError::Limit {
                offset: offset as u64,
                field,
                value: self.items,
                limit,
            });
        }
        Ok((n as usize).min(self.left() / min_each))
    }

    fn shape(&mut self, field: &'static str) -> Result<PrimitivShape> {
        let start = self.pos;
        let n = self.decode("dims", "array", decode::read_array_len)?;
        // Read every element (as primitiv does, so marker errors and EOF come first),
        // but keep at most MAX_DEPTH + 1 of them: no allocation sized by `n`.
        let mut dims = Vec::with_capacity(MAX_DEPTH + 1);
        for _ in 0..n {
            let d = self.u32("dims")?;
            if dims.len() <= MAX_DEPTH {
                dims.push(d);
            }
        }
        let batch = self.u32("batch")?;
        // primitiv's own cap (8 dims) first; `max_rank` can only lower it.
        let max_rank = self.options.limits.max_rank as u64;
        if n as usize <= MAX_DEPTH && u64::from(n) > max_rank {
            return Err(PrimitivError::Limit {
                offset: start as u64,
                field,
                value: u64::from(n),
                limit: max_rank,
            });
        }
        if n as usize > MAX_DEPTH {
            return Err(PrimitivError::TooManyDims {
                offset: start as u64,
                field,
                depth: u64::from(n),
            });
        }
        PrimitivShape::checked(dims, batch, start as u64, field)
    }

    fn tensor(&mut self, field: &'static str) -> Result<PrimitivTensor> {
        let shape = self.shape(field)?;
        let bin_start = self.pos;
        let len = self.decode(field, "bin", decode::read_bin_len)?;
        let data = self.take(u64::from(len), bin_start, field)?;
        let expected =
            shape
                .size()
                .and_then(|s| s.checked_mul(4))
                .ok_or(PrimitivError::Overflow {
                    offset: bin_start as u64,
                    field,
                })?;
        if expected != u64::from(len) {
            return Err(PrimitivError::LengthMismatch {
                offset: bin_start as u64,
                field,
                expected,
                actual: u64::from(len),
            });
        }
        Ok(PrimitivTensor::from_parts(shape, data))
    }

    fn parameter(&mut self) -> Result<Parameter> {
        let start = self.pos;
        let value = self.tensor("value")?;
        let n_off = self.pos;
        let n = self.u32("stat count")?;
        let cap = self.capacity(n, MIN_STAT, n_off, "stat count")?;
        let mut stats: Vec<(Key, PrimitivTensor)> = Vec::with_capacity(cap);
        // The keys seen so far: a duplicate check in O(1), not a scan of `stats`.
        let mut seen = std::collections::HashSet::with_capacity(cap);
        for _ in 0..n {
            let key_off = self.pos;
            let key = self.key("stat_key")?;
            let t = self.tensor("stat_value")?;
            if !seen.insert(key.clone()) {
                // primitiv emplaces into an unordered_map: the first one stays.
                self.duplicate(
                    key_off,
                    "stat_key",
                    &key.to_string(),
                    "the first one is kept",
                )?;
                continue;
            }
            if let Some(s) = key.as_str() {
                if LEGACY_STATS.contains(&s) {
                    self.warn(
                        key_off,
                        format!("stat {s} uses a pre-release name (before v0.3.0)"),
                    );
                }
            }
            stats.push((key, t));
        }
        Parameter::checked(value, stats, start as u64)
    }

    fn duplicate(
        &mut self,
        offset: usize,
        field: &'static str,
        key: &str,
        kept: &str,
    ) -> Result<()> {
        if self.options.mode == Mode::Pedantic {
            return Err(PrimitivError::DuplicateKey {
                offset: offset as u64,
                field,
                key: key.to_string(),
            });
        }
        self.warn(
            offset,
            format!("duplicate {field} {key} ({kept}, as primitiv does)"),
        );
        Ok(())
    }

    fn model(&mut self) -> Result<Model> {
        let n_off = self.pos;
        let n = self.u32("entry count")?;
        self.capacity(n, MIN_ENTRY, n_off, "entry count")?;
        let mut model = Model::new();
        for _ in 0..n {
            let key_off = self.pos;
            let m = self.decode("param_key", "array", decode::read_array_len)?;
            let cap = self.capacity(m, 1, key_off, "param_key")?;
            if m == 0 {
                return Err(PrimitivError::EmptyKey {
                    offset: key_off as u64,
                });
            }
            let mut path = Vec::with_capacity(cap);
            for _ in 0..m {
                path.push(self.key("param_key")?);
            }
            let p = self.parameter()?;
            let shown = Model::join(&path);
            if model.insert(path, p).is_some() {
                self.duplicate(key_off, "param_key", &shown, "the last one wins")?;
            }
        }
        Ok(model)
    }

    fn optimizer(&mut self) -> Result<Optimizer> {
        let mut o = Optimizer::default();
        let off = self.pos;
        let n = self.decode("uint_configs", "map", decode::read_map_len)?;
        let cap = self.capacity(n, MIN_CONFIG, off, "uint_configs")?;
        o.uint_configs.reserve(cap);
        let mut seen = std::collections::HashSet::with_capacity(cap);
        for _ in 0..n {
            let key_off = self.pos;
            let k = self.key("uint_configs")?;
            let v = self.u32("uint_configs")?;
            self.config(
                &mut o.uint_configs,
                &mut seen,
                key_off,
                "uint_configs",
                k,
                v,
            )?;
        }
        let off = self.pos;
        let n = self.decode("float_configs", "map", decode::read_map_len)?;
        let cap = self.capacity(n, MIN_CONFIG, off, "float_configs")?;
        o.float_configs.reserve(cap);
        let mut seen = std::collections::HashSet::with_capacity(cap);
        for _ in 0..n {
            let key_off = self.pos;
            let k = self.key("float_configs")?;
            let v = self.f32("float_configs")?;
            self.config(
                &mut o.float_configs,
                &mut seen,
                key_off,
                "float_configs",
                k,
                v,
            )?;
        }
        Ok(o)
    }

    fn config<T>(
        &mut self,
        map: &mut Vec<(Key, T)>,
        seen: &mut std::collections::HashSet<Key>,
        offset: usize,
        field: &'static str,
        key: Key,
        value: T,
    ) -> Result<()> {
        if !seen.insert(key.clone()) {
            return self.duplicate(offset, field, &key.to_string(), "the first one is kept");
        }
        if key.as_bytes().starts_with(b"Trainer.") {
            self.warn(
                offset,
                format!("{field} key {key} uses a pre-release name (before v0.3.0)"),
            );
        }
        map.push((key, value));
        Ok(())
    }
}

/// Stat names of development builds from November 2017, renamed before v0.3.0.
const LEGACY_STATS: [&str; 7] = [
    "adam-m1",
    "adam-m2",
    "momentumsgd-m",
    "adagrad-m",
    "rmsprop-m",
    "adadelta-m1",
    "adadelta-m2",
];
