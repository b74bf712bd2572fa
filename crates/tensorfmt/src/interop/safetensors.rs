//! `.safetensors` files: an 8-byte header length, a JSON header, then the tensors'
//! little-endian C-order bytes back to back.
//!
//! Reading: the header is parsed and validated as the `safetensors` crate does (100 MB
//! cap, offsets tiling the data exactly, checked size arithmetic, its errors), straight
//! into one record per tensor: the crate's own parse buffers the whole JSON document
//! first (600 bytes a tensor at its peak). Tensors are zero-copy slices of the file. 4-, 6- and 8-bit floats and complex numbers are rejected as unsupported.
//! The `__metadata__` strings are shown as header fields.
//!
//! Writing: the header is the `safetensors` crate's own `Metadata` serialisation, in its
//! order (descending dtype alignment, then name), so the output is byte-identical to
//! `safetensors::serialize`; the data is then streamed tensor by tensor.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use ::safetensors::tensor::{Metadata, TensorInfo as StInfo};
use ::safetensors::{Dtype, SafeTensorError};
use bytes::Bytes;
use tensorfmt_core::io::AtomicFile;
use tensorfmt_core::{
    Chunks, DType, Error, FieldValue, Order, ReadOptions, Result, Shape, Tensor, TensorFile,
    TensorInfo, WriteOptions, CARRIED_KEY,
};

use super::{
    check_unique, row_chunks, stored_dtype, threads, threads_for, write_chunks, InteropError,
    Listing, MemoryFile,
};

fn err(e: InteropError) -> Error {
    Error::classified("safetensors", e)
}

/// A cheap content check: a little-endian header length that fits in the file,
/// followed by `{`.
///
/// ```
/// let mut f = 2u64.to_le_bytes().to_vec();
/// f.extend(b"{}");
/// assert!(tensorfmt::interop::safetensors::sniff(&f, 10));
/// assert!(!tensorfmt::interop::safetensors::sniff(&f, 9));
/// ```
pub fn sniff(head: &[u8], file_len: u64) -> bool {
    crate::format::Format::Safetensors.sniff(head, file_len)
}

/// Our dtype for a safetensors dtype (`None` for those tensorfmt does not handle).
pub fn dtype_from_st(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::BOOL => DType::Bool,
        Dtype::U8 => DType::U8,
        Dtype::I8 => DType::I8,
        Dtype::I16 => DType::I16,
        Dtype::U16 => DType::U16,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::I32 => DType::I32,
        Dtype::U32 => DType::U32,
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        Dtype::I64 => DType::I64,
        Dtype::U64 => DType::U64,
        _ => return None,
    })
}

/// The safetensors dtype of one of ours.
pub fn dtype_to_st(d: DType) -> Dtype {
    match d {
        DType::Bool => Dtype::BOOL,
        DType::U8 => Dtype::U8,
        DType::I8 => Dtype::I8,
        DType::I16 => Dtype::I16,
        DType::U16 => Dtype::U16,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::I32 => Dtype::I32,
        DType::U32 => Dtype::U32,
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::I64 => Dtype::I64,
        DType::U64 => Dtype::U64,
    }
}

#[derive(Debug, Clone)]
struct Entry {
    info: TensorInfo,
    range: (usize, usize),
}

/// An opened safetensors file.
///
/// ```
/// use tensorfmt::interop::safetensors as st;
/// use tensorfmt::{Order, Tensor, TensorFile};
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("m.safetensors");
/// let w = Tensor::from_vec(vec![1f32, 2.0], [2], Order::RowMajor)?;
/// st::save(&p, &[("w".to_string(), w.clone())], &Default::default())?;
/// let f = st::open(tensorfmt::io::map_file(&p)?, &Default::default())?;
/// assert_eq!(f.read_tensor("w")?, w);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct SafetensorsFile {
    data: Bytes,
    header_len: usize,
    entries: Vec<Entry>,
    /// Positions in `entries` sorted by name (lookups by name are O(log n), without a
    /// second copy of every name).
    index: Vec<u32>,
    metadata: Vec<(String, String)>,
}

/// One tensor of the header, as the `safetensors` crate describes it.
#[derive(serde::Deserialize)]
struct RawInfo {
    dtype: Dtype,
    shape: Vec<usize>,
    data_offsets: (usize, usize),
}

/// The header: its tensors in data order, and `__metadata__`.
struct RawHeader {
    tensors: Vec<(String, RawInfo)>,
    metadata: Option<HashMap<String, String>>,
}

impl<'de> serde::Deserialize<'de> for RawHeader {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = RawHeader;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of tensor names to tensor infos")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<RawHeader, A::Error> {
                let mut h = RawHeader {
                    tensors: Vec::new(),
                    metadata: None,
                };
                while let Some(key) = map.next_key::<String>()? {
                    if key == "__metadata__" {
                        if h.metadata.is_some() {
                            return Err(serde::de::Error::duplicate_field("__metadata__"));
                        }
                        h.metadata = Some(map.next_value()?);
                    } else {
                        let info: RawInfo = map.next_value()?;
                        h.tensors.push((key, info));
                    }
                }
                Ok(h)
            }
        }
        d.deserialize_map(Fields)
    }
}

/// The largest JSON header the safetensors library (and so every reader built on it,
/// ours included) opens. The writer refuses to exceed it: a file nobody can open is a
/// wrong file.
pub const MAX_HEADER_SIZE: usize = 100_000_000;

/// `SafeTensors::read_metadata` without its intermediate documents: the same checks
/// and errors, the tensors straight into one list sorted by data offset.
fn read_header(buffer: &[u8]) -> std::result::Result<(usize, RawHeader), SafeTensorError> {
    let arr: [u8; 8] = buffer
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or(SafeTensorError::HeaderTooSmall)?;
    let n =
        usize::try_from(u64::from_le_bytes(arr)).map_err(|_| SafeTensorError::HeaderTooLarge)?;
    if n > MAX_HEADER_SIZE {
        return Err(SafeTensorError::HeaderTooLarge);
    }
    let stop = n
        .checked_add(8)
        .ok_or(SafeTensorError::InvalidHeaderLength)?;
    let header_bytes = buffer
        .get(8..stop)
        .ok_or(SafeTensorError::InvalidHeaderLength)?;
    let text = std::str::from_utf8(header_bytes).map_err(SafeTensorError::InvalidHeader)?;
    let mut header: RawHeader =
        serde_json::from_str(text).map_err(SafeTensorError::InvalidHeaderDeserialization)?;
    // A repeated name keeps its last value (the crate reads the header into a map).
    let t = &mut header.tensors;
    let mut seen = std::collections::HashSet::with_capacity(t.len());
    if t.iter().all(|(name, _)| seen.insert(name.as_str())) {
        drop(seen);
        return finish_header(n, stop, buffer.len(), header);
    }
    drop(seen);
    let mut order: Vec<u32> = (0..t.len() as u32).collect();
    order.sort_by(|&a, &b| t[a as usize].0.cmp(&t[b as usize].0));
    let mut dropped = vec![false; t.len()];
    for w in order.windows(2) {
        if t[w[0] as usize].0 == t[w[1] as usize].0 {
            dropped[w[0].min(w[1]) as usize] = true;
        }
    }
    drop(order);
    if dropped.iter().any(|&d| d) {
        let mut i = 0;
        t.retain(|_| {
            i += 1;
            !dropped[i - 1]
        });
    }
    drop(dropped);
    finish_header(n, stop, buffer.len(), header)
}

/// Sorts the tensors by data offset and checks them as the crate's
/// `Metadata::validate` does: offsets tile the data, sizes match the shapes.
fn finish_header(
    n: usize,
    stop: usize,
    buffer_len: usize,
    mut header: RawHeader,
) -> std::result::Result<(usize, RawHeader), SafeTensorError> {
    let t = &mut header.tensors;
    t.sort_by(|a, b| (a.1.data_offsets, &a.0).cmp(&(b.1.data_offsets, &b.0)));
    // The crate's `Metadata::validate`: offsets tile the data, sizes match the shapes.
    let mut start = 0;
    for (name, info) in t.iter() {
        let (s, e) = info.data_offsets;
        if s != start || e < s {
            return Err(SafeTensorError::InvalidOffset(name.clone()));
        }
        start = e;
        let nelements = info
            .shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or(SafeTensorError::ValidationOverflow)?;
        let nbits = nelements
            .checked_mul(info.dtype.bitsize())
            .ok_or(SafeTensorError::ValidationOverflow)?;
        if nbits % 8 != 0 {
            return Err(SafeTensorError::MisalignedSlice);
        }
        if e - s != nbits / 8 {
            return Err(SafeTensorError::TensorInvalidInfo);
        }
    }
    if start.checked_add(stop) != Some(buffer_len) {
        return Err(SafeTensorError::MetadataIncompleteBuffer);
    }
    Ok((n, header))
}

/// Opens safetensors bytes as a [`TensorFile`] (header parsed, nothing decoded).
pub fn open(data: Bytes, options: &ReadOptions) -> Result<SafetensorsFile> {
    // The header length, checked against the bytes present and the limits before the
    // crate parses (and allocates for) the header.
    let declared = match data.get(..8) {
        Some(b) => u64::from_le_bytes(<[u8; 8]>::try_from(b).unwrap_or([0xff; 8])),
        None => {
            return Err(err(InteropError::malformed(
                0,
                "header length",
                format!("file has {} bytes, the length field needs 8", data.len()),
            )))
        }
    };
    let present = data.len() as u64 - 8;
    if declared > present {
        return Err(err(InteropError::malformed(
            0,
            "header length",
            format!("declares {declared} bytes of header, {present} present"),
        )));
    }
    options.limits.check_alloc(declared)?;
    let (n, header) = read_header(&data).map_err(|e| err(e.into()))?;
    let data_start = 8 + n;
    options.limits.check_items(header.tensors.len() as u64)?;
    let mut entries = Vec::with_capacity(header.tensors.len());
    for (name, i) in header.tensors {
        let dtype = dtype_from_st(i.dtype).ok_or_else(|| {
            err(InteropError::Unsupported(format!(
                "tensor {name:?} has dtype {:?}",
                i.dtype
            )))
        })?;
        options.limits.check_rank(i.shape.len())?;
        let (a, b) = i.data_offsets;
        entries.push(Entry {
            info: TensorInfo::new(name, dtype, Shape::new(i.shape)),
            range: (data_start + a, data_start + b),
        });
    }
    let mut metadata: Vec<(String, String)> =
        header.metadata.unwrap_or_default().into_iter().collect();
    metadata.sort();
    // Names are unique (a repeated key keeps its last value, as in the crate's map).
    let mut index: Vec<u32> = (0..entries.len() as u32).collect();
    index.sort_unstable_by(|&a, &b| {
        entries[a as usize]
            .info
            .name
            .cmp(&entries[b as usize].info.name)
    });
    Ok(SafetensorsFile {
        data,
        header_len: n,
        entries,
        index,
        metadata,
    })
}

impl SafetensorsFile {
    /// The entry named `name`.
    fn entry(&self, name: &str) -> Option<&Entry> {
        let at = self
            .index
            .partition_point(|&i| self.entries[i as usize].info.name.as_str() < name);
        let e = &self.entries[*self.index.get(at)? as usize];
        (e.info.name == name).then_some(e)
    }

    /// The `__metadata__` strings, sorted by key.
    pub fn metadata(&self) -> &[(String, String)] {
        &self.metadata
    }
}

impl TensorFile for SafetensorsFile {
    fn format(&self) -> &'static str {
        "safetensors"
    }
    fn kind(&self) -> String {
        "tensors".into()
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        let mut h = vec![
            ("header_len".to_string(), self.header_len.into()),
            ("tensor_count".to_string(), self.entries.len().into()),
        ];
        if !self.metadata.is_empty() {
            let m = self
                .metadata
                .iter()
                .map(|(k, v)| (k.clone(), FieldValue::from(v.as_str())))
                .collect();
            h.push(("__metadata__".to_string(), FieldValue::Map(m)));
        }
        h
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        self.entries.iter().map(|e| e.info.clone()).collect()
    }
    fn read_tensor(&self, name: &str) -> Result<Tensor> {
        let e = self
            .entry(name)
            .ok_or_else(|| Error::NoSuchTensor(name.to_string()))?;
        let bytes = self.data.slice(e.range.0..e.range.1);
        Tensor::from_bytes(e.info.dtype, e.info.shape.clone(), Order::RowMajor, bytes)
    }
    fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
        row_chunks(self.read_tensor(name)?)
    }
}

/// Writes the named tensors of `file` as a safetensors file (streamed; atomically
/// replaced). `options.dtype` converts every tensor; `options.extra` becomes
/// `__metadata__`, with `options.carried` under [`CARRIED_KEY`]; `options.threads =
/// Some(1)` decodes and writes on one thread instead of pipelining them on two (the
/// output is the same).
pub fn write_from(
    path: &Path,
    file: &dyn TensorFile,
    names: &[String],
    options: &WriteOptions,
) -> Result<()> {
    write_with_metadata(path, file, names, options, &[])
}

/// [`write_from`] with more `__metadata__` entries of the writer's own (the sparse
/// layout's `format = csr`).
pub(crate) fn write_with_metadata(
    path: &Path,
    file: &dyn TensorFile,
    names: &[String],
    options: &WriteOptions,
    more: &[(&str, &str)],
) -> Result<()> {
    check_unique(names)?;
    let listing = Listing::of(file);
    let mut list = Vec::with_capacity(names.len());
    for name in names {
        let info = listing.get(name)?.clone();
        let dtype = stored_dtype(&info, options);
        list.push((name.clone(), info, dtype));
    }
    // The order of safetensors::serialize: descending alignment, then name.
    list.sort_by(|(ln, _, ld), (rn, _, rd)| {
        dtype_to_st(*rd).cmp(&dtype_to_st(*ld)).then(ln.cmp(rn))
    });
    let mut header = Vec::new();
    let mut offset = 0usize;
    for (name, info, dtype) in &list {
        let n = info.shape.byte_len(dtype.size())?;
        let end = offset.checked_add(n).ok_or(Error::Overflow {
            what: "safetensors data size",
        })?;
        header.push((
            name.clone(),
            StInfo {
                dtype: dtype_to_st(*dtype),
                shape: info.shape.dims().to_vec(),
                data_offsets: (offset, end),
            },
        ));
        offset = end;
    }
    let n_threads = threads(options);
    let mut meta: HashMap<String, String> = options
        .extra
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(text) = &options.carried {
        meta.insert(CARRIED_KEY.to_string(), text.clone());
    }
    meta.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let meta = (!meta.is_empty()).then_some(meta);
    let meta = Metadata::new(meta, header).map_err(|e| err(e.into()))?;
    let mut text = serde_json::to_vec(&meta)
        .map_err(|e| Error::Invalid(format!("safetensors header: {e}")))?;
    text.resize(text.len().next_multiple_of(8), b' ');
    if text.len() > MAX_HEADER_SIZE {
        // Many tensors with long names, or large metadata: say so before writing.
        return Err(Error::LimitExceeded {
            what: "safetensors header bytes (tensor names, shapes and __metadata__; safetensors readers open at most 100,000,000)",
            value: text.len() as u64,
            limit: MAX_HEADER_SIZE as u64,
        });
    }
    let mut out = AtomicFile::create(path)?.sync(!options.skip_fsync);
    out.reserve((8 + text.len() + offset) as u64)?;
    out.write_all(&(text.len() as u64).to_le_bytes())?;
    out.write_all(&text)?;
    for (_, info, dtype) in &list {
        write_chunks(
            &mut out,
            file,
            info,
            *dtype,
            threads_for(info, *dtype, n_threads),
        )?;
    }
    out.commit()
}

/// Saves named tensors as a safetensors file (atomically).
pub fn save(path: &Path, tensors: &[(String, Tensor)], options: &WriteOptions) -> Result<()> {
    save_with_metadata(path, tensors, options, &[])
}

/// [`save`] with more `__metadata__` entries of the writer's own.
pub(crate) fn save_with_metadata(
    path: &Path,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
    more: &[(&str, &str)],
) -> Result<()> {
    let names: Vec<String> = tensors.iter().map(|(n, _)| n.clone()).collect();
    write_with_metadata(
        path,
        &MemoryFile::new(tensors.to_vec()),
        &names,
        &super::in_memory_options(options),
        more,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Our header parse accepts and refuses what `SafeTensors::read_metadata` does, with
    /// the same error kind, and lists the same tensors in the same order.
    #[test]
    fn header_parse_matches_the_crate() {
        let file = |h: &str, data: usize| {
            let mut b = (h.len() as u64).to_le_bytes().to_vec();
            b.extend_from_slice(h.as_bytes());
            b.resize(b.len() + data, 0);
            b
        };
        let cases = [
            (r#"{}"#, 0),
            (
                r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
                8,
            ),
            (
                r#"{"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#,
                8,
            ),
            (
                r#"{"__metadata__":{"k":"v","j":"w"},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}"#,
                4,
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
                8,
            ),
            (
                r#"{"z":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"y":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
                1,
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}}"#,
                4,
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#,
                4,
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
                8,
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
                8,
            ),
            (r#"{"a":{"dtype":"F32","shape":[1]}}"#, 4),
            (
                r#"{"a":{"dtype":"X9","shape":[1],"data_offsets":[0,4]}}"#,
                4,
            ),
            (r#"{"a":3}"#, 0),
            (r#"[1, 2]"#, 0),
            (r#"{"__metadata__":{"k":1}}"#, 0),
            (
                r#"{"a":{"dtype":"F32","shape":[4611686018427387904, 8],"data_offsets":[0,4]}}"#,
                4,
            ),
            (
                r#"{"a":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}}"#,
                3,
            ),
            (r#"{"#, 0),
        ];
        for (h, data) in cases {
            let b = file(h, data);
            let ours = read_header(&b);
            let theirs = ::safetensors::SafeTensors::read_metadata(&b);
            match (ours, theirs) {
                (Ok((n, ours)), Ok((m, theirs))) => {
                    assert_eq!(n, m, "{h}");
                    let names: Vec<String> = ours.tensors.iter().map(|(k, _)| k.clone()).collect();
                    // The crate leaves ties of equal offsets in hash order.
                    let mut want = theirs.offset_keys();
                    let mut got = names.clone();
                    if ours
                        .tensors
                        .windows(2)
                        .any(|w| w[0].1.data_offsets == w[1].1.data_offsets)
                    {
                        want.sort();
                        got.sort();
                    }
                    assert_eq!(got, want, "{h}");
                    for (k, i) in &ours.tensors {
                        let t = theirs.info(k).unwrap();
                        assert_eq!(
                            (&i.shape, i.data_offsets, i.dtype),
                            (&t.shape, t.data_offsets, t.dtype),
                            "{h}"
                        );
                    }
                    assert_eq!(&ours.metadata, theirs.metadata(), "{h}");
                }
                (Err(a), Err(b)) => assert_eq!(
                    std::mem::discriminant(&a),
                    std::mem::discriminant(&b),
                    "{h}: {a:?} / {b:?}"
                ),
                (a, b) => panic!(
                    "{h}: ours {:?}, theirs {:?}",
                    a.map(|x| x.0),
                    b.map(|x| x.0)
                ),
            }
        }
    }
    use std::borrow::Cow;

    struct V<'a>(&'a Tensor);
    impl ::safetensors::View for V<'_> {
        fn dtype(&self) -> Dtype {
            dtype_to_st(self.0.dtype())
        }
        fn shape(&self) -> &[usize] {
            self.0.dims()
        }
        fn data(&self) -> Cow<'_, [u8]> {
            Cow::Borrowed(self.0.bytes())
        }
        fn data_len(&self) -> usize {
            self.0.bytes().len()
        }
    }

    fn sample() -> Vec<(String, Tensor)> {
        vec![
            (
                "b".into(),
                Tensor::from_vec(vec![1u8, 2, 3], [3], Order::RowMajor).unwrap(),
            ),
            (
                "a".into(),
                Tensor::from_vec(vec![1.5f64, -2.0], [2, 1], Order::RowMajor).unwrap(),
            ),
            (
                "c".into(),
                Tensor::from_vec(
                    vec![tensorfmt_core::half::bf16::from_f32(0.5)],
                    Shape::scalar(),
                    Order::RowMajor,
                )
                .unwrap(),
            ),
            (
                "z".into(),
                Tensor::from_vec(vec![7i32; 6], [2, 3], Order::ColumnMajor).unwrap(),
            ),
        ]
    }

    #[test]
    fn writer_is_byte_identical_to_the_safetensors_crate() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.safetensors");
        let tensors = sample();
        save(&p, &tensors, &WriteOptions::default()).unwrap();
        let expected =
            ::safetensors::serialize(tensors.iter().map(|(n, t)| (n.as_str(), V(t))), None)
                .unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), expected);
        let f = open(
            tensorfmt_core::io::map_file(&p).unwrap(),
            &ReadOptions::default(),
        )
        .unwrap();
        for (n, t) in &tensors {
            assert_eq!(
                &f.read_tensor(n).unwrap(),
                &t.to_order(Order::RowMajor).unwrap()
            );
        }
        assert_eq!(f.tensors().len(), 4);
    }

    #[test]
    fn metadata_and_dtype_option() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.safetensors");
        let mut o = WriteOptions {
            dtype: Some(DType::F16),
            ..Default::default()
        };
        o.extra.insert("source".into(), "test".into());
        save(&p, &sample()[1..2], &o).unwrap();
        let f = open(
            tensorfmt_core::io::map_file(&p).unwrap(),
            &ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(f.metadata(), &[("source".to_string(), "test".to_string())]);
        let t = f.read_tensor("a").unwrap();
        assert_eq!(t.dtype(), DType::F16);
        assert_eq!(
            t.cast(DType::F64).unwrap().to_vec::<f64>().unwrap(),
            vec![1.5, -2.0]
        );
        assert!(matches!(f.header().last(), Some((k, FieldValue::Map(_))) if k == "__metadata__"));
    }

    /// A header no safetensors reader opens is refused before anything is written
    /// (it used to be written, exit 0, and then neither we nor the library read it).
    #[test]
    fn a_header_over_the_readers_limit_is_refused_before_writing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.safetensors");
        let mut o = WriteOptions::default();
        o.extra
            .insert("big".into(), "x".repeat(MAX_HEADER_SIZE + 1));
        let e = save(&p, &sample()[1..2], &o).unwrap_err();
        assert!(
            matches!(e, Error::LimitExceeded { limit, .. } if limit == MAX_HEADER_SIZE as u64),
            "{e}"
        );
        assert!(e.to_string().contains("safetensors header"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // Just under the limit still writes a file that reads back.
        o.extra
            .insert("big".into(), "x".repeat(MAX_HEADER_SIZE - 4096));
        save(&p, &sample()[1..2], &o).unwrap();
        let f = open(
            tensorfmt_core::io::map_file(&p).unwrap(),
            &ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(f.metadata()[0].1.len(), MAX_HEADER_SIZE - 4096);
    }

    #[test]
    fn rejects_broken_files() {
        let good = ::safetensors::serialize(sample().iter().map(|(n, t)| (n.clone(), V(t))), None)
            .unwrap();
        for n in 0..good.len() {
            assert!(
                open(Bytes::from(good[..n].to_vec()), &ReadOptions::default()).is_err(),
                "prefix {n}"
            );
        }
        let mut f8 = Vec::new();
        let h = br#"{"x":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}"#;
        f8.extend((h.len() as u64).to_le_bytes());
        f8.extend(h);
        f8.push(0);
        let e = open(Bytes::from(f8), &ReadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("unsupported") && e.contains("F8_E4M3"), "{e}");
        let dup = vec![sample()[0].clone(), sample()[0].clone()];
        let dir = tempfile::tempdir().unwrap();
        assert!(save(
            &dir.path().join("d.safetensors"),
            &dup,
            &WriteOptions::default()
        )
        .is_err());
    }
}
