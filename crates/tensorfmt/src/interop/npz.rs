//! numpy `.npz` files: a zip archive of `.npy` members (`numpy.savez`, stored, or
//! `numpy.savez_compressed`, deflated).
//!
//! Reading: the `zip` crate reads the central directory; stored members are parsed
//! in place (zero copy: the npy data is a slice of the mapped archive), deflated members
//! have only their npy header inflated at open and are inflated whole on read (size
//! checked against the limits first). Tensor names are member names without `.npy`.
//! `validate` also reads every member through the zip reader, which checks its CRC.
//!
//! Writing: stored members (as `numpy.savez`; `--set compress=deflate` deflates),
//! each an npy header followed by the tensor streamed chunk by chunk, so a large input
//! converts in bounded memory. Members over 4 GiB use zip64.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::{Cursor, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::rc::Rc;
use std::sync::Mutex;

use bytes::Bytes;
use tensorfmt_core::io::AtomicFile;
use tensorfmt_core::{
    Chunks, Error, FieldValue, Limits, ReadOptions, Result, Tensor, TensorFile, TensorInfo,
    WriteOptions,
};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

use super::npy::{self, NpyHeader};
use super::{
    check_unique, row_chunks, stored_dtype, threads, threads_for, write_chunks, InteropError,
    Listing, MemoryFile,
};
use crate::provenance::{self, NPZ_MEMBER};

fn err(e: InteropError) -> Error {
    Error::format("npz", e)
}

fn zip_err(e: zip::result::ZipError) -> Error {
    err(InteropError::Zip(e))
}

/// The largest expansion of a deflate stream (258-byte matches from 2-bit codes).
const MAX_DEFLATE_RATIO: u64 = 1032;

/// True for a zip archive (local file header or empty-archive signature).
///
/// ```
/// assert!(tensorfmt::interop::npz::sniff(b"PK\x03\x04...."));
/// assert!(!tensorfmt::interop::npz::sniff(b"\x93NUMPY"));
/// ```
pub fn sniff(head: &[u8]) -> bool {
    head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06")
}

#[derive(Debug, Clone)]
struct Member {
    name: String,
    index: usize,
    header: NpyHeader,
    /// The member's npy bytes when stored uncompressed (a slice of the archive).
    stored: Option<Bytes>,
    /// Declared uncompressed size.
    size: u64,
}

/// An opened npz archive.
///
/// ```
/// use tensorfmt::interop::npz;
/// use tensorfmt::{Order, Tensor, TensorFile};
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("a.npz");
/// let x = Tensor::from_vec(vec![1i64, 2, 3], [3], Order::RowMajor)?;
/// npz::save(&p, &[("x".to_string(), x.clone())], &Default::default())?;
/// let f = npz::open(tensorfmt::io::map_file(&p)?, &Default::default())?;
/// assert_eq!(f.tensors()[0].name, "x");
/// assert_eq!(f.read_tensor("x")?, x);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct NpzFile {
    archive: Mutex<ZipArchive<Cursor<Bytes>>>,
    members: Vec<Member>,
    /// Position of each member in `members` by tensor name (lookups by name are O(1)).
    index: HashMap<String, usize>,
    limits: Limits,
    /// The member `__tensorfmt__.npy`: a legacy file's skeleton (see
    /// [`provenance`](crate::provenance)), shown as header field `tensorfmt.source`.
    carried: Option<String>,
}

/// Reads up to `n` bytes (fewer only at the end of the stream).
fn read_up_to(r: &mut dyn Read, n: usize) -> std::io::Result<Vec<u8>> {
    let mut v = Vec::new();
    r.take(n as u64).read_to_end(&mut v)?;
    Ok(v)
}

/// Opens npz bytes as a [`TensorFile`]: lists the members and parses their npy headers.
pub fn open(data: Bytes, options: &ReadOptions) -> Result<NpzFile> {
    let mut archive = ZipArchive::new(Cursor::new(data.clone())).map_err(zip_err)?;
    options.limits.check_items(archive.len() as u64)?;
    let mut members: Vec<Member> = Vec::new();
    let mut index_of: HashMap<String, usize> = HashMap::new();
    let mut carried = None;
    for index in 0..archive.len() {
        let mut f = archive.by_index(index).map_err(zip_err)?;
        if f.is_dir() {
            continue;
        }
        let zip_name = f.name().to_string();
        let name = zip_name
            .strip_suffix(".npy")
            .unwrap_or(&zip_name)
            .to_string();
        if name == NPZ_MEMBER && carried.is_none() {
            if let Some(text) = read_carried(&mut f, &options.limits)? {
                carried = Some(text);
                continue;
            }
            // Not ours after all: an ordinary array of that name.
            drop(f);
            f = archive.by_index(index).map_err(zip_err)?;
        }
        if index_of.contains_key(&name) {
            return Err(err(InteropError::malformed(
                f.header_start(),
                "member name",
                format!("{zip_name:?} appears twice"),
            )));
        }
        let at = f.header_start();
        let bad = |e: InteropError| match e {
            InteropError::Malformed {
                offset,
                field,
                message,
            } => err(InteropError::malformed(
                offset,
                field,
                format!("{message} (in member {zip_name:?} at archive byte {at})"),
            )),
            other => err(other),
        };
        let size = f.size();
        let (header, stored) = match f.compression() {
            CompressionMethod::Stored => {
                let start = f.data_start().unwrap_or(u64::MAX);
                let end = start
                    .checked_add(size)
                    .filter(|&e| e <= data.len() as u64)
                    .ok_or_else(|| {
                        bad(InteropError::malformed(
                            0,
                            "zip entry",
                            format!("{size} bytes at {start} run past the archive"),
                        ))
                    })?;
                let bytes = data.slice(start as usize..end as usize);
                let header = npy::parse_header(&bytes, &options.limits).map_err(bad)?;
                (header, Some(bytes))
            }
            CompressionMethod::Deflated => {
                // Deflate expands at most 1032:1, so a directory claiming more is a lie
                // (or a bomb); refuse it before any allocation is sized by it.
                let packed = f.compressed_size();
                if size
                    > packed
                        .saturating_mul(MAX_DEFLATE_RATIO)
                        .saturating_add(1024)
                {
                    return Err(bad(InteropError::malformed(
                        at,
                        "uncompressed size",
                        format!(
                            "{size} bytes declared from {packed} compressed bytes \
                             (deflate expands at most {MAX_DEFLATE_RATIO}:1)"
                        ),
                    )));
                }
                let mut head = read_up_to(&mut f, 12)
                    .map_err(|e| bad(InteropError::malformed(0, "npy header", e.to_string())))?;
                let len = npy::header_len(&head).map_err(bad)?;
                let more = read_up_to(&mut f, len.saturating_sub(head.len()))
                    .map_err(|e| bad(InteropError::malformed(0, "npy header", e.to_string())))?;
                head.extend(more);
                (
                    npy::parse_header(&head, &options.limits).map_err(bad)?,
                    None,
                )
            }
            other => {
                return Err(err(InteropError::Unsupported(format!(
                    "member {zip_name:?} uses compression {other}"
                ))))
            }
        };
        let need = header.shape.byte_len(header.dtype.size())? as u64;
        if (header.data_offset as u64).saturating_add(need) > size {
            return Err(bad(InteropError::malformed(
                header.data_offset as u64,
                "data",
                format!(
                    "shape {} of {} needs {need} bytes, the member has {}",
                    header.shape,
                    header.dtype,
                    size.saturating_sub(header.data_offset as u64)
                ),
            )));
        }
        index_of.insert(name.clone(), members.len());
        members.push(Member {
            name,
            index,
            header,
            stored,
            size,
        });
    }
    Ok(NpzFile {
        archive: Mutex::new(archive),
        members,
        index: index_of,
        limits: options.limits,
        carried,
    })
}

/// The largest `__tensorfmt__` member read (a skeleton's JSON with its base64).
const MAX_CARRIED: u64 = 64 << 20;

/// Reads member `__tensorfmt__.npy` as the UTF-8 text of a 0-d byte-string array
/// (`|S<n>`, as written here and re-saved by `np.savez`; `<U<n>` too). `None` when
/// the member is something else (then it is an ordinary array).
fn read_carried(f: &mut dyn Read, limits: &Limits) -> Result<Option<String>> {
    let mut head = read_up_to(f, 12)
        .map_err(|e| err(InteropError::malformed(0, "npy header", e.to_string())))?;
    let Ok(len) = npy::header_len(&head) else {
        return Ok(None);
    };
    let more = read_up_to(f, len.saturating_sub(head.len()))
        .map_err(|e| err(InteropError::malformed(0, "npy header", e.to_string())))?;
    head.extend(more);
    let text = String::from_utf8_lossy(&head[head.len().min(10)..]).into_owned();
    let descr = text
        .split("'descr': '")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap_or_default()
        .to_string();
    let (wide, width) = if let Some(n) = descr.strip_prefix("|S") {
        (false, n.parse::<u64>().ok())
    } else if let Some(n) = descr.strip_prefix("<U") {
        (true, n.parse::<u64>().ok())
    } else {
        return Ok(None);
    };
    let Some(width) = width else { return Ok(None) };
    if !text.contains("'shape': ()") {
        return Ok(None);
    }
    let size = if wide { width.saturating_mul(4) } else { width };
    if size > MAX_CARRIED {
        return Err(err(InteropError::malformed(
            len as u64,
            "__tensorfmt__",
            format!("{size} bytes of metadata (at most {MAX_CARRIED})"),
        )));
    }
    limits.check_alloc(size)?;
    let data = read_up_to(f, size as usize).map_err(|e| {
        err(InteropError::malformed(
            len as u64,
            "__tensorfmt__",
            e.to_string(),
        ))
    })?;
    let text = if wide {
        data.chunks(4)
            .map(|c| {
                let u = u32::from_le_bytes([
                    c[0],
                    *c.get(1).unwrap_or(&0),
                    *c.get(2).unwrap_or(&0),
                    *c.get(3).unwrap_or(&0),
                ]);
                char::from_u32(u).unwrap_or('\u{fffd}')
            })
            .collect::<String>()
            .trim_end_matches('\0')
            .to_string()
    } else {
        let end = data.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        String::from_utf8_lossy(&data[..end]).into_owned()
    };
    Ok(Some(text))
}

impl NpzFile {
    fn member(&self, name: &str) -> Result<&Member> {
        self.index
            .get(name)
            .map(|&i| &self.members[i])
            .ok_or_else(|| Error::NoSuchTensor(name.to_string()))
    }

    /// Reads a member through the zip reader (inflating, checking the CRC).
    fn inflate(&self, m: &Member) -> Result<Bytes> {
        self.limits.check_alloc(m.size)?;
        let mut archive = self
            .archive
            .lock()
            .map_err(|_| Error::Invalid("npz archive lock poisoned".into()))?;
        let f = archive.by_index(m.index).map_err(zip_err)?;
        let mut v = Vec::new();
        v.try_reserve_exact(m.size as usize)
            .map_err(|_| Error::LimitExceeded {
                what: "allocation",
                value: m.size,
                limit: self.limits.max_alloc,
            })?;
        f.take(m.size.saturating_add(1))
            .read_to_end(&mut v)
            .map_err(|e| {
                err(InteropError::malformed(
                    0,
                    "member data",
                    format!("{:?}: {e}", m.name),
                ))
            })?;
        if v.len() as u64 != m.size {
            return Err(err(InteropError::malformed(
                0,
                "member data",
                format!(
                    "{:?} inflates to {} bytes, the directory says {}",
                    m.name,
                    v.len(),
                    m.size
                ),
            )));
        }
        Ok(Bytes::from(v))
    }

    fn decode(&self, m: &Member) -> Result<Tensor> {
        let bytes = match &m.stored {
            Some(b) => b.clone(),
            None => self.inflate(m)?,
        };
        npy::decode(&m.header, &bytes, &self.limits).map_err(err)
    }
}

impl TensorFile for NpzFile {
    fn format(&self) -> &'static str {
        "npz"
    }
    fn kind(&self) -> String {
        match (
            self.members.iter().any(|m| m.stored.is_some()),
            self.members.iter().any(|m| m.stored.is_none()),
        ) {
            (_, false) => "archive (stored)".into(),
            (false, true) => "archive (deflated)".into(),
            (true, true) => "archive (stored and deflated)".into(),
        }
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        let members = self
            .members
            .iter()
            .map(|m| {
                let mut fields = npy::header_fields(&m.header);
                fields.push(("compressed".into(), m.stored.is_none().into()));
                (m.name.clone(), FieldValue::Map(fields))
            })
            .collect();
        let mut fields = vec![
            ("member_count".into(), self.members.len().into()),
            ("members".into(), FieldValue::Map(members)),
        ];
        if let Some(text) = &self.carried {
            fields.push((provenance::KEY.into(), text.clone().into()));
        }
        fields
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        self.members
            .iter()
            .map(|m| TensorInfo::new(m.name.clone(), m.header.dtype, m.header.shape.clone()))
            .collect()
    }
    fn read_tensor(&self, name: &str) -> Result<Tensor> {
        self.decode(self.member(name)?)
    }
    fn read_chunks<'a>(&'a self, name: &str) -> Result<Chunks<'a>> {
        row_chunks(self.read_tensor(name)?)
    }
    fn validate(&self) -> Result<()> {
        for m in &self.members {
            if m.stored.is_some() {
                // Checks the CRC (the zero-copy path does not read through zip).
                let mut archive = self
                    .archive
                    .lock()
                    .map_err(|_| Error::Invalid("npz archive lock poisoned".into()))?;
                let mut f = archive.by_index(m.index).map_err(zip_err)?;
                std::io::copy(&mut f, &mut std::io::sink()).map_err(|e| {
                    err(InteropError::malformed(
                        0,
                        "member data",
                        format!("{:?}: {e}", m.name),
                    ))
                })?;
            }
            self.decode(m)?;
        }
        Ok(())
    }
}

/// Writes the named tensors of `file` as an npz archive (streamed; atomically
/// replaced). `options.dtype` converts every tensor; `options.extra["compress"] ==
/// "deflate"` deflates the members; `options.extra["threads"] == "1"` decodes and
/// writes on one thread instead of pipelining them on two (the output is the same).
pub fn write_from(
    path: &Path,
    file: &dyn TensorFile,
    names: &[String],
    options: &WriteOptions,
) -> Result<()> {
    let method = match options.extra.get("compress").map(String::as_str) {
        None | Some("none" | "stored" | "false") => CompressionMethod::Stored,
        Some("deflate" | "true") => CompressionMethod::Deflated,
        Some(other) => {
            return Err(Error::Invalid(format!(
                "unknown npz compression {other:?} (use none or deflate)"
            )))
        }
    };
    let n_threads = threads(options)?;
    let mut output = AtomicFile::create(path)?.sync(!options.skip_fsync);
    if method == CompressionMethod::Stored {
        // The members' data plus generous room for the zip and npy headers (commit
        // releases what is not used); deflated sizes are unknown, so nothing is reserved.
        // One listing for all names (a name it lacks is reported by write_members).
        let wanted: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
        let mut len = 65536u64;
        for info in file
            .tensors()
            .iter()
            .filter(|i| wanted.contains(i.name.as_str()))
        {
            let data = info.shape.byte_len(stored_dtype(info, options).size())?;
            len = len.saturating_add(data as u64 + 512 + 2 * info.name.len() as u64);
        }
        output.reserve(len)?;
    }
    let abandoned = Rc::new(Cell::new(false));
    let out = Abandonable {
        file: output,
        abandoned: abandoned.clone(),
        pos: 0,
    };
    let mut zip = ZipWriter::new(out);
    let mut result = write_members(&mut zip, file, names, options, method, n_threads);
    if let (Ok(()), Some(text)) = (&result, options.extra.get(provenance::KEY)) {
        if !names.iter().any(|n| n == NPZ_MEMBER) {
            result = write_carried(&mut zip, text, method);
        }
    }
    if let Err(e) = result {
        // Dropping the writer finalizes the archive; make that a silent no-op (zip would
        // print its own failure to stderr) and let the temporary file be removed.
        abandoned.set(true);
        drop(zip);
        return Err(e);
    }
    zip.finish().map_err(zip_err)?.file.commit()
}

/// The archive's output. Once abandoned (after an error), writes and seeks are
/// discarded, so the `ZipWriter`'s drop-time finalize neither fails nor prints; the
/// uncommitted `AtomicFile` removes its temporary file when it drops.
struct Abandonable {
    file: AtomicFile,
    abandoned: Rc<Cell<bool>>,
    /// The position a discarded stream would have (finalize asks for it).
    pos: u64,
}

impl Write for Abandonable {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.abandoned.get() {
            self.pos += buf.len() as u64;
            return Ok(buf.len());
        }
        let n = self.file.write(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if self.abandoned.get() {
            return Ok(());
        }
        self.file.flush()
    }
}

impl Seek for Abandonable {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        if self.abandoned.get() {
            self.pos = match to {
                SeekFrom::Start(p) => p,
                SeekFrom::Current(d) | SeekFrom::End(d) => self.pos.saturating_add_signed(d),
            };
            return Ok(self.pos);
        }
        self.pos = self.file.seek(to)?;
        Ok(self.pos)
    }
}

/// Writes `text` as member `__tensorfmt__.npy`, a 0-d `|S<n>` array: `np.load` shows
/// it as `bytes`, and `np.savez(**dict(np.load(f)))` keeps it.
fn write_carried(
    zip: &mut ZipWriter<Abandonable>,
    text: &str,
    method: CompressionMethod,
) -> Result<()> {
    let opts = SimpleFileOptions::default().compression_method(method);
    zip.start_file(format!("{NPZ_MEMBER}.npy"), opts)
        .map_err(zip_err)?;
    zip.write_all(&npy::header_bytes_for(
        &format!("|S{}", text.len().max(1)),
        &[],
    ))?;
    zip.write_all(if text.is_empty() {
        b"\0"
    } else {
        text.as_bytes()
    })?;
    Ok(())
}

fn write_members(
    zip: &mut ZipWriter<Abandonable>,
    file: &dyn TensorFile,
    names: &[String],
    options: &WriteOptions,
    method: CompressionMethod,
    n_threads: usize,
) -> Result<()> {
    check_unique(names)?;
    let listing = Listing::of(file);
    for name in names {
        let info = listing.get(name)?;
        let dtype = stored_dtype(info, options);
        let mut header = Vec::new();
        npy::write_header(&mut header, dtype, &info.shape)?;
        let total = (header.len() as u64).saturating_add(info.shape.byte_len(dtype.size())? as u64);
        let opts = SimpleFileOptions::default()
            .compression_method(method)
            .large_file(total >= u32::MAX as u64);
        zip.start_file(format!("{name}.npy"), opts)
            .map_err(zip_err)?;
        zip.write_all(&header)?;
        write_chunks(zip, file, info, dtype, threads_for(info, dtype, n_threads))?;
    }
    Ok(())
}

/// Saves named tensors as an npz archive (atomically).
pub fn save(path: &Path, tensors: &[(String, Tensor)], options: &WriteOptions) -> Result<()> {
    let names: Vec<String> = tensors.iter().map(|(n, _)| n.clone()).collect();
    write_from(
        path,
        &MemoryFile::new(tensors.to_vec()),
        &names,
        &super::in_memory_options(options),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfmt_core::{DType, Order, Shape};

    fn sample() -> Vec<(String, Tensor)> {
        vec![
            (
                "w".into(),
                Tensor::from_vec((0..12).map(|i| i as f32).collect(), [3, 4], Order::RowMajor)
                    .unwrap(),
            ),
            (
                "dir/b".into(),
                Tensor::from_vec(vec![true as u8, 0], [2], Order::RowMajor)
                    .unwrap()
                    .cast(DType::Bool)
                    .unwrap(),
            ),
            (
                "s".into(),
                Tensor::from_vec(vec![9u64], Shape::scalar(), Order::RowMajor).unwrap(),
            ),
        ]
    }

    fn roundtrip(options: &WriteOptions) -> NpzFile {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.npz");
        save(&p, &sample(), options).unwrap();
        let f = open(
            Bytes::from(std::fs::read(&p).unwrap()),
            &ReadOptions::default(),
        )
        .unwrap();
        let names: Vec<String> = f.tensors().into_iter().map(|i| i.name).collect();
        assert_eq!(names, ["w", "dir/b", "s"]);
        for (n, t) in sample() {
            assert_eq!(f.read_tensor(&n).unwrap(), t);
        }
        f.validate().unwrap();
        f
    }

    #[test]
    fn stored_and_deflated_round_trips() {
        let f = roundtrip(&WriteOptions::default());
        assert_eq!(f.kind(), "archive (stored)");
        let mut o = WriteOptions::default();
        o.extra.insert("compress".into(), "deflate".into());
        let f = roundtrip(&o);
        assert_eq!(f.kind(), "archive (deflated)");
        o.extra.insert("compress".into(), "lzma".into());
        let dir = tempfile::tempdir().unwrap();
        assert!(save(&dir.path().join("y.npz"), &sample(), &o).is_err());
    }

    #[test]
    fn corrupted_archives_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.npz");
        save(&p, &sample(), &WriteOptions::default()).unwrap();
        let good = std::fs::read(&p).unwrap();
        for n in (0..good.len()).step_by(7) {
            let r = open(Bytes::from(good[..n].to_vec()), &ReadOptions::default());
            assert!(r.is_err(), "prefix {n}");
        }
        // Flip a data byte: zero-copy reads succeed, validate's CRC check fails.
        let mut bad = good.clone();
        let pos = bad
            .windows(4)
            .position(|w| w == 5f32.to_le_bytes())
            .unwrap();
        bad[pos] ^= 1;
        let f = open(Bytes::from(bad), &ReadOptions::default()).unwrap();
        let e = f.validate().unwrap_err().to_string();
        assert!(
            e.contains("npz") && e.to_lowercase().contains("checksum"),
            "{e}"
        );
    }

    #[test]
    fn rejects_non_npy_members() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.npz");
        let mut zip = ZipWriter::new(std::fs::File::create(&p).unwrap());
        zip.start_file("notes.txt", SimpleFileOptions::default())
            .unwrap();
        zip.write_all(b"hello").unwrap();
        zip.finish().unwrap();
        let e = open(
            Bytes::from(std::fs::read(&p).unwrap()),
            &ReadOptions::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("notes.txt"), "{e}");
    }
}
