//! numpy `.npy` files: one array behind a Python-literal header.
//!
//! Reading: the 10- or 12-byte preamble is checked by hand (magic, version, header
//! length against the bytes present, a 1 MiB cap) before the header text is parsed
//! with `py_literal`; the shape product is computed with checked arithmetic; the data is
//! then a zero-copy slice of the file. Big-endian data is byte-swapped and Fortran-order
//! data transposed to row-major, one bulk copy each. Object (pickled), structured,
//! string and complex dtypes are rejected as unsupported. bf16 is the raw `<V2`.
//!
//! Writing: the header numpy >= 1.24 writes, byte for byte (see [`header_bytes`]); the
//! data is streamed in row-major order after it.

use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use py_literal::Value;
use tensorfmt_core::io::AtomicFile;
use tensorfmt_core::{
    Chunks, DType, Error, FieldValue, Limits, Order, ReadOptions, Result, Shape, Tensor,
    TensorFile, TensorInfo, WriteOptions,
};

use super::{info_of, row_chunks, stored_dtype, threads, write_chunks, InteropError, MemoryFile};

/// The six magic bytes every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = crate::format::NPY_MAGIC;

/// Largest header text accepted (numpy's own default cap is 10 000 bytes).
pub const MAX_HEADER_LEN: usize = 1 << 20;

/// Deepest bracket nesting accepted in the header (a plain array needs 2).
const MAX_NESTING: usize = 8;

fn err(e: InteropError) -> Error {
    Error::classified("npy", e)
}

/// True when `head` starts with the npy magic.
///
/// ```
/// assert!(tensorfmt::interop::npy::sniff(b"\x93NUMPY\x01\x00"));
/// assert!(!tensorfmt::interop::npy::sniff(b"PK\x03\x04"));
/// ```
pub fn sniff(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// The parsed header of an npy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// Format version (major, minor): 1.0, 2.0 or 3.0.
    pub version: (u8, u8),
    /// The dtype descr as written (`<f4`, `>i2`, `<V2`).
    pub descr: String,
    /// Element type of the decoded tensor.
    pub dtype: DType,
    /// True when the data is big-endian and must be byte-swapped.
    pub big_endian: bool,
    /// True for column-major (Fortran-order) data.
    pub fortran_order: bool,
    /// The array shape.
    pub shape: Shape,
    /// Offset of the first data byte (preamble + header text).
    pub data_offset: usize,
}

/// Length of preamble + header text, from the first 12 bytes (or fewer, for an
/// error). Checks magic, version and the [`MAX_HEADER_LEN`] cap.
pub fn header_len(prefix: &[u8]) -> Result<usize, InteropError> {
    if prefix.len() < 6 || &prefix[..6] != MAGIC {
        return Err(InteropError::malformed(
            0,
            "magic",
            "not an npy file (no \\x93NUMPY magic)",
        ));
    }
    let version = match prefix.get(6..8) {
        Some(v) => (v[0], v[1]),
        None => {
            return Err(InteropError::malformed(
                6,
                "version",
                "file ends inside the preamble",
            ))
        }
    };
    let (len, pre) = match version {
        (1, 0) => match prefix.get(8..10) {
            Some(b) => (u16::from_le_bytes([b[0], b[1]]) as usize, 10),
            None => {
                return Err(InteropError::malformed(
                    8,
                    "header length",
                    "file ends inside the preamble",
                ))
            }
        },
        (2, 0) | (3, 0) => match prefix.get(8..12) {
            Some(b) => (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12),
            None => {
                return Err(InteropError::malformed(
                    8,
                    "header length",
                    "file ends inside the preamble",
                ))
            }
        },
        (a, b) => {
            return Err(InteropError::malformed(
                6,
                "version",
                format!("unknown npy version {a}.{b}"),
            ))
        }
    };
    if len > MAX_HEADER_LEN {
        return Err(InteropError::malformed(
            8,
            "header length",
            format!("{len} bytes exceeds the cap of {MAX_HEADER_LEN}"),
        ));
    }
    Ok(pre + len)
}

/// Parses the preamble and header of an npy file. `bytes` needs to hold at least the
/// header (the data may follow or not).
///
/// ```
/// use tensorfmt::interop::npy;
/// let mut f = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
/// let text = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
/// f.extend(format!("{text:<117}\n").bytes());
/// let h = npy::parse_header(&f, &Default::default())?;
/// assert_eq!((h.dtype, h.shape.dims(), h.data_offset), (tensorfmt::DType::F32, &[2, 3][..], 128));
/// # Ok::<(), tensorfmt::interop::InteropError>(())
/// ```
pub fn parse_header(bytes: &[u8], limits: &Limits) -> Result<NpyHeader, InteropError> {
    let end = header_len(bytes)?;
    let pre = if bytes[6] == 1 { 10 } else { 12 };
    let version = (bytes[6], bytes[7]);
    let Some(raw) = bytes.get(pre..end) else {
        return Err(InteropError::malformed(
            8,
            "header length",
            format!(
                "declares {} bytes of header, only {} present",
                end - pre,
                bytes.len().saturating_sub(pre)
            ),
        ));
    };
    let text = std::str::from_utf8(raw).map_err(|e| {
        InteropError::malformed(
            (pre + e.valid_up_to()) as u64,
            "header",
            "not valid UTF-8 text",
        )
    })?;
    check_nesting(text, pre)?;
    let (descr, fortran_order, dims) = match canonical_header(text) {
        Some(parsed) => parsed,
        None => literal_header(text, pre)?,
    };
    limits
        .check_rank(dims.len())
        .map_err(|source| InteropError::Limited {
            offset: pre as u64,
            field: "shape",
            source,
        })?;
    let shape = Shape::new(dims);
    let (dtype, big_endian) = parse_descr(&descr)?;
    shape.byte_len(dtype.size()).map_err(|_| {
        InteropError::malformed(
            pre as u64,
            "shape",
            format!("{shape} x {} bytes overflows", dtype.size()),
        )
    })?;
    Ok(NpyHeader {
        version,
        descr,
        dtype,
        big_endian,
        fortran_order,
        shape,
        data_offset: end,
    })
}

/// The header as numpy writes it, `{'descr': '<f4', 'fortran_order': False, 'shape':
/// (2, 3), }` (then spaces and a newline), parsed directly; `None` for anything else,
/// which the general Python-literal parser then reads (with its error messages). The
/// general parser costs tens of microseconds per header, most of the time of opening
/// an npz of many small members (issue 27).
fn canonical_header(text: &str) -> Option<(String, bool, Vec<usize>)> {
    let rest = text.trim_end_matches(['\n', ' ', '\0']);
    let rest = rest.strip_prefix("{'descr': '")?;
    let (descr, rest) = rest.split_once('\'')?;
    if descr.contains(['"', '\\']) {
        return None;
    }
    let rest = rest.strip_prefix(", 'fortran_order': ")?;
    let (fortran, rest) = if let Some(r) = rest.strip_prefix("False") {
        (false, r)
    } else {
        (true, rest.strip_prefix("True")?)
    };
    let rest = rest.strip_prefix(", 'shape': (")?;
    let (inside, rest) = rest.split_once(')')?;
    if !matches!(rest, "}" | ", }" | ",}") {
        return None;
    }
    // `(3)` is the number 3 in Python, not a shape: only `(3,)` is one dimension.
    if !inside.contains(',') && !inside.trim().is_empty() {
        return None;
    }
    let inside = inside.trim_end_matches([',', ' ']);
    let mut dims = Vec::new();
    if !inside.is_empty() {
        for d in inside.split(',') {
            let d = d.trim();
            if d.is_empty() || !d.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            dims.push(d.parse().ok()?);
        }
    }
    Some((descr.to_string(), fortran, dims))
}

/// Any header that is a Python literal dict with the three keys.
fn literal_header(text: &str, pre: usize) -> Result<(String, bool, Vec<usize>), InteropError> {
    let value: Value = text
        .trim_end_matches(['\n', ' ', '\0'])
        .parse()
        .map_err(|e| {
            InteropError::malformed(pre as u64, "header", format!("not a Python literal: {e}"))
        })?;
    let Value::Dict(entries) = value else {
        return Err(InteropError::malformed(
            pre as u64,
            "header",
            "not a Python dict",
        ));
    };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (k, v) in entries {
        match k {
            Value::String(k) if k == "descr" => descr = Some(v),
            Value::String(k) if k == "fortran_order" => fortran = Some(v),
            Value::String(k) if k == "shape" => shape = Some(v),
            other => {
                return Err(InteropError::malformed(
                    pre as u64,
                    "header",
                    format!("unexpected key {other}"),
                ))
            }
        }
    }
    let missing =
        |f: &'static str| InteropError::malformed(pre as u64, f, "missing from the header");
    let descr = match descr.ok_or_else(|| missing("descr"))? {
        Value::String(s) => s,
        Value::List(_) => {
            return Err(InteropError::Unsupported(
                "structured (record) dtypes".into(),
            ))
        }
        other => {
            return Err(InteropError::malformed(
                pre as u64,
                "descr",
                format!("not a string: {other}"),
            ))
        }
    };
    let fortran_order = match fortran.ok_or_else(|| missing("fortran_order"))? {
        Value::Boolean(b) => b,
        other => {
            return Err(InteropError::malformed(
                pre as u64,
                "fortran_order",
                format!("not a bool: {other}"),
            ))
        }
    };
    let dims = match shape.ok_or_else(|| missing("shape"))? {
        Value::Tuple(v) | Value::List(v) => v,
        other => {
            return Err(InteropError::malformed(
                pre as u64,
                "shape",
                format!("not a tuple: {other}"),
            ))
        }
    };
    let dims = dims
        .iter()
        .map(|d| match d {
            Value::Integer(i) => usize::try_from(i).map_err(|_| {
                InteropError::malformed(
                    pre as u64,
                    "shape",
                    format!("dimension {i} is negative or too large"),
                )
            }),
            other => Err(InteropError::malformed(
                pre as u64,
                "shape",
                format!("dimension {other} is not an integer"),
            )),
        })
        .collect::<Result<Vec<usize>, _>>()?;
    Ok((descr, fortran_order, dims))
}

#[cfg(test)]
mod canonical_tests {
    use super::*;

    /// The direct parser agrees with the literal parser on what numpy writes, and
    /// leaves everything else to it.
    #[test]
    fn canonical_headers_parse_as_the_literal_parser_does() {
        for text in [
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n",
            "{'descr': '|u1', 'fortran_order': True, 'shape': (7,), }\n",
            "{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
            "{'descr': '>i2', 'fortran_order': False, 'shape': (1, 0, 5)}",
        ] {
            let fast = canonical_header(text).unwrap();
            assert_eq!(fast, literal_header(text, 10).unwrap(), "{text}");
        }
        for text in [
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3), }",
            "{'shape': (2,), 'descr': '<f4', 'fortran_order': False}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
            "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }",
        ] {
            assert_eq!(canonical_header(text), None, "{text}");
        }
    }
}

/// Rejects headers nested deeper than [`MAX_NESTING`] before the recursive parser sees them.
fn check_nesting(text: &str, offset: usize) -> Result<(), InteropError> {
    let (mut depth, mut quote) = (0usize, None::<char>);
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(InteropError::malformed(
                        offset as u64,
                        "header",
                        "brackets nested too deeply",
                    ));
                }
            }
            (None, ')' | ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Maps a numpy descr to a dtype and whether the data is big-endian.
fn parse_descr(descr: &str) -> Result<(DType, bool), InteropError> {
    let unsupported = || InteropError::Unsupported(format!("numpy dtype {descr:?}"));
    if let Some(rest) = descr.strip_prefix('>') {
        let d = DType::from_numpy_descr(&format!("<{rest}")).map_err(|_| unsupported())?;
        return Ok((d, d.size() > 1));
    }
    DType::from_numpy_descr(descr)
        .map(|d| (d, false))
        .map_err(|_| unsupported())
}

/// Decodes the array whose header is `h` from `file` (the whole npy bytes, or an npz
/// member): a zero-copy slice when the data is little-endian C order.
pub fn decode(h: &NpyHeader, file: &Bytes, limits: &Limits) -> Result<Tensor, InteropError> {
    let size = h.dtype.size();
    let need = h
        .shape
        .byte_len(size)
        .map_err(|_| InteropError::malformed(h.data_offset as u64, "shape", "size overflows"))?;
    let have = file.len().saturating_sub(h.data_offset);
    if have < need {
        return Err(InteropError::malformed(
            h.data_offset as u64,
            "data",
            format!(
                "shape {} of {} needs {need} bytes, only {have} present",
                h.shape, h.dtype
            ),
        ));
    }
    let mut data = file.slice(h.data_offset..h.data_offset + need);
    let copies = h.fortran_order && h.shape.rank() > 1 || h.big_endian;
    if copies {
        limits
            .check_alloc(need as u64)
            .map_err(|source| InteropError::Limited {
                offset: h.data_offset as u64,
                field: "data",
                source,
            })?;
    }
    if h.big_endian {
        let mut v = data.to_vec();
        for e in v.chunks_exact_mut(size) {
            e.reverse();
        }
        data = Bytes::from(v);
    }
    let order = if h.fortran_order {
        Order::ColumnMajor
    } else {
        Order::RowMajor
    };
    let bad = |e: Error| InteropError::malformed(h.data_offset as u64, "data", e.to_string());
    Tensor::from_bytes(h.dtype, h.shape.clone(), order, data)
        .and_then(|t| t.to_order(Order::RowMajor))
        .map_err(bad)
}

/// Header fields for `inspect`.
pub(crate) fn header_fields(h: &NpyHeader) -> Vec<(String, FieldValue)> {
    vec![
        (
            "version".into(),
            format!("{}.{}", h.version.0, h.version.1).into(),
        ),
        ("descr".into(), h.descr.clone().into()),
        ("fortran_order".into(), h.fortran_order.into()),
        ("shape".into(), h.shape.dims().to_vec().into()),
        ("data_offset".into(), h.data_offset.into()),
    ]
}

/// An opened `.npy` file: one tensor.
///
/// ```
/// use tensorfmt::interop::{npy, MemoryFile};
/// use tensorfmt::{Order, Tensor, TensorFile};
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("a.npy");
/// let t = Tensor::from_vec(vec![1.5f32, 2.5, 3.5, 4.5], [2, 2], Order::RowMajor)?;
/// npy::save(&p, &t, &Default::default())?;
/// let f = npy::open(tensorfmt::io::map_file(&p)?, "a", &Default::default())?;
/// assert_eq!(f.tensors()[0].name, "a");
/// assert_eq!(f.read_tensor("a")?, t);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct NpyFile {
    name: String,
    header: NpyHeader,
    data: Bytes,
    limits: Limits,
}

/// Opens npy bytes as a [`TensorFile`] whose one tensor is called `name`.
pub fn open(data: Bytes, name: &str, options: &ReadOptions) -> Result<NpyFile> {
    let header = parse_header(&data, &options.limits).map_err(err)?;
    let need = header.shape.byte_len(header.dtype.size())?;
    let have = data.len() - header.data_offset;
    if have < need {
        return Err(err(InteropError::malformed(
            header.data_offset as u64,
            "data",
            format!(
                "shape {} of {} needs {need} bytes, only {have} present",
                header.shape, header.dtype
            ),
        )));
    }
    Ok(NpyFile {
        name: name.to_string(),
        header,
        data,
        limits: options.limits,
    })
}

impl NpyFile {
    /// The parsed header.
    pub fn npy_header(&self) -> &NpyHeader {
        &self.header
    }

    fn check(&self, name: &str) -> Result<()> {
        if name == self.name {
            Ok(())
        } else {
            Err(Error::NoSuchTensor(name.to_string()))
        }
    }
}

impl TensorFile for NpyFile {
    fn format(&self) -> &'static str {
        "npy"
    }
    fn kind(&self) -> String {
        if self.header.fortran_order {
            "array (Fortran order)".into()
        } else {
            "array".into()
        }
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        header_fields(&self.header)
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        vec![TensorInfo::new(
            self.name.clone(),
            self.header.dtype,
            self.header.shape.clone(),
        )]
    }
    fn read_tensor(&self, name: &str) -> Result<Tensor> {
        self.check(name)?;
        decode(&self.header, &self.data, &self.limits).map_err(err)
    }
    fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
        row_chunks(self.read_tensor(name)?)
    }
    fn warnings(&self) -> Vec<String> {
        let need = self
            .header
            .shape
            .byte_len(self.header.dtype.size())
            .unwrap_or(0);
        let extra = self.data.len() - self.header.data_offset - need;
        if extra > 0 {
            vec![format!("{extra} bytes after the array data are ignored")]
        } else {
            Vec::new()
        }
    }
    fn validate(&self) -> Result<()> {
        // The data is a slice of the file: decoding checks lengths, order and dtype.
        decode(&self.header, &self.data, &self.limits)
            .map(drop)
            .map_err(err)
    }
}

/// numpy's spare room after the shape so a file can grow along axis 0 in place.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// The npy preamble and header for a C-order array, byte-identical to what
/// `numpy.save` writes (numpy >= 1.24: sorted keys, Python tuple spelling, growth-axis
/// spaces, padded with spaces and `\n` to a multiple of 64 bytes; version 1.0 unless the
/// header needs more than 65535 bytes).
///
/// ```
/// use tensorfmt::{DType, Shape};
/// let h = tensorfmt::interop::npy::header_bytes(DType::F32, &Shape::new([2, 3]));
/// assert_eq!(h.len(), 128);
/// assert!(h.starts_with(b"\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }    "));
/// ```
pub fn header_bytes(dtype: DType, shape: &Shape) -> Vec<u8> {
    header_bytes_for(dtype.numpy_descr(), shape.dims())
}

/// [`header_bytes`] for any numpy descr, such as `|S12` for a byte string.
///
/// ```
/// let h = tensorfmt::interop::npy::header_bytes_for("|S5", &[]);
/// assert!(h.starts_with(b"\x93NUMPY\x01\x00\x76\x00{'descr': '|S5', 'fortran_order': False, 'shape': (), }"));
/// ```
pub fn header_bytes_for(descr: &str, dims: &[usize]) -> Vec<u8> {
    let tuple = match dims {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut text = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple}, }}");
    if let Some(d) = dims.first() {
        let digits = d.to_string().len();
        text.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits)));
    }
    let wrap = |pre: usize| {
        let hlen = text.len() + 1;
        let pad = 64 - (pre + hlen) % 64;
        hlen + pad
    };
    let (version, len) = if wrap(10) <= u16::MAX as usize {
        (1u8, wrap(10))
    } else {
        (2u8, wrap(12))
    };
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(len as u32).to_le_bytes());
    }
    out.extend_from_slice(text.as_bytes());
    out.resize(out.len() + len - text.len() - 1, b' ');
    out.push(b'\n');
    out
}

/// Writes the npy preamble and header of [`header_bytes`].
pub fn write_header(w: &mut dyn Write, dtype: DType, shape: &Shape) -> Result<()> {
    Ok(w.write_all(&header_bytes(dtype, shape))?)
}

/// Writes tensor `name` of `file` as an npy file (streamed; atomically replaced).
/// `options.dtype` converts the elements; `options.threads = Some(1)` decodes and
/// writes on one thread instead of pipelining them on two.
pub fn write_from(
    path: &Path,
    file: &dyn TensorFile,
    name: &str,
    options: &WriteOptions,
) -> Result<()> {
    let info = info_of(file, name)?;
    let dtype = stored_dtype(&info, options);
    let n_threads = threads(options);
    let data_len = info.shape.byte_len(dtype.size())?;
    let mut out = AtomicFile::create(path)?.sync(!options.skip_fsync);
    // The header is at most a few hundred bytes; commit releases what is not used.
    out.reserve(data_len as u64 + 4096)?;
    write_header(&mut out, dtype, &info.shape)?;
    write_chunks(&mut out, file, &info, dtype, n_threads)?;
    out.commit()
}

/// Saves one tensor as an npy file (atomically).
pub fn save(path: &Path, tensor: &Tensor, options: &WriteOptions) -> Result<()> {
    let f = MemoryFile::new(vec![("array".into(), tensor.clone())]);
    write_from(path, &f, "array", &super::in_memory_options(options))
}

/// Serialises one tensor to npy bytes in memory (C order).
///
/// ```
/// use tensorfmt::{Order, Tensor};
/// let t = Tensor::from_vec(vec![7u8], [1], Order::RowMajor)?;
/// let b = tensorfmt::interop::npy::to_bytes(&t)?;
/// assert_eq!(b.len(), 129);
/// assert!(b.starts_with(b"\x93NUMPY\x01\x00"));
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub fn to_bytes(tensor: &Tensor) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write_header(&mut out, tensor.dtype(), tensor.shape())?;
    out.extend_from_slice(tensor.to_order(Order::RowMajor)?.bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str, data: &[u8]) -> Vec<u8> {
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        let total = (10 + header.len() + 1).next_multiple_of(64);
        let text = format!("{header:<w$}\n", w = total - 11);
        f.extend((text.len() as u16).to_le_bytes());
        f.extend(text.bytes());
        f.extend(data);
        f
    }

    fn open_bytes(b: Vec<u8>) -> Result<NpyFile> {
        open(Bytes::from(b), "x", &ReadOptions::default())
    }

    #[test]
    fn writer_matches_numpy_layout_and_reads_back() {
        for dtype in DType::ALL {
            let t = Tensor::zeros(dtype, [2, 3], Order::RowMajor).unwrap();
            let b = to_bytes(&t).unwrap();
            // What numpy.save(np.zeros((2, 3), descr)) writes.
            let dict = format!(
                "{{'descr': '{}', 'fortran_order': False, 'shape': (2, 3), }}",
                dtype.numpy_descr()
            );
            let text = format!("{dict:<117}\n");
            let mut expected = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
            expected.extend(text.bytes());
            expected.extend(t.bytes().iter());
            assert_eq!(b, expected, "{dtype}");
            let f = open_bytes(b).unwrap();
            assert_eq!(f.read_tensor("x").unwrap(), t);
        }
        // Long headers stay 64-byte aligned and switch to version 2.0 past 64 KiB.
        let h = header_bytes(DType::U8, &Shape::new(vec![1; 300]));
        assert_eq!((h.len() % 64, h[6]), (0, 1));
        let h = header_bytes(DType::U8, &Shape::new(vec![1; 30_000]));
        assert_eq!((h.len() % 64, h[6]), (0, 2));
        let parsed = parse_header(&h, &Limits::unlimited()).unwrap();
        assert_eq!(parsed.shape.rank(), 30_000);
    }

    #[test]
    fn scalar_and_1d_shapes() {
        let s = Tensor::from_vec(vec![5i32], Shape::scalar(), Order::RowMajor).unwrap();
        let f = open_bytes(to_bytes(&s).unwrap()).unwrap();
        assert_eq!(f.read_tensor("x").unwrap(), s);
        let v = Tensor::from_vec(vec![1u16, 2, 3], [3], Order::RowMajor).unwrap();
        let b = to_bytes(&v).unwrap();
        assert!(std::str::from_utf8(&b[10..80])
            .unwrap()
            .contains("'shape': (3,)"));
        assert_eq!(open_bytes(b).unwrap().read_tensor("x").unwrap(), v);
    }

    #[test]
    fn fortran_order_and_big_endian_are_converted() {
        let col: Vec<u8> = [1i16, 4, 2, 5, 3, 6]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let f = open_bytes(npy(
            "{'descr': '<i2', 'fortran_order': True, 'shape': (2, 3), }",
            &col,
        ))
        .unwrap();
        assert_eq!(
            f.read_tensor("x").unwrap().to_vec::<i16>().unwrap(),
            vec![1, 2, 3, 4, 5, 6]
        );
        let be: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let f = open_bytes(npy(
            "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
            &be,
        ))
        .unwrap();
        assert_eq!(
            f.read_tensor("x").unwrap().to_vec::<f32>().unwrap(),
            vec![1.5, -2.0]
        );
    }

    #[test]
    fn rejects_bad_headers_with_offsets() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"\x93NUMPX\x01\x00".to_vec(), "magic"),
            (b"\x93NUMPY\x09\x00\x00\x00".to_vec(), "version"),
            (b"\x93NUMPY\x01\x00\xff\x7f{}".to_vec(), "header length"),
            (b"\x93NUMPY\x02\x00\xff\xff\xff\xff".to_vec(), "exceeds the cap"),
            (npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", &[0; 8]), "needs 12 bytes"),
            (npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", &[]), "negative"),
            (npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", &[]), "overflow"),
            (npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", &[0; 8]), "unsupported"),
            (npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", &[0; 4]), "structured"),
            (npy("{'descr': '<f4', 'shape': (1,), }", &[0; 4]), "fortran_order"),
            (npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", &[0; 4]), "unexpected key"),
            (npy("[1, 2]", &[]), "not a Python dict"),
            (npy("{'descr': ", &[]), "Python literal"),
            (npy(&format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {}1{}, }}", "(".repeat(50), ")".repeat(50)), &[]), "nested"),
        ];
        for (bytes, needle) in cases {
            let e = open_bytes(bytes).unwrap_err().to_string();
            assert!(e.contains(needle), "{e:?} lacks {needle:?}");
            assert!(e.starts_with("npy: "), "{e}");
        }
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let t = Tensor::from_vec(vec![1f64, 2.0, 3.0], [3], Order::RowMajor).unwrap();
        let b = to_bytes(&t).unwrap();
        for n in 0..b.len() {
            assert!(open_bytes(b[..n].to_vec()).is_err(), "prefix {n}");
        }
        let mut longer = b.clone();
        longer.push(0);
        let f = open_bytes(longer).unwrap();
        assert_eq!(f.warnings().len(), 1);
    }

    #[test]
    fn wrong_name_is_no_such_tensor() {
        let t = Tensor::from_vec(vec![1u8], [1], Order::RowMajor).unwrap();
        let f = open_bytes(to_bytes(&t).unwrap()).unwrap();
        assert!(matches!(f.read_tensor("y"), Err(Error::NoSuchTensor(_))));
    }
}
