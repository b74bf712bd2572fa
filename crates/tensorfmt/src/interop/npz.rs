//! numpy `.npz` files: a zip archive of `.npy` members (`numpy.savez`, stored, or
//! `numpy.savez_compressed`, deflated).
//!
//! Reading: the `zip` crate reads the central directory; stored members are parsed
//! in place (zero copy: the npy data is a slice of the mapped archive), deflated members
//! have only their npy header inflated at open and are inflated whole on read (size
//! checked against the limits first). Tensor names are member names without `.npy`.
//! Every member's CRC-32 is checked: a stored one on its first whole read (one pass of
//! crc32fast over the mapped bytes), a deflated one as it is inflated; `validate` reads
//! every member whole.
//!
//! Writing: stored members (as `numpy.savez`; `--set compress=deflate` deflates),
//! each an npy header followed by the tensor streamed chunk by chunk, so a large input
//! converts in bounded memory. Members over 4 GiB use zip64. A legacy file's carried
//! metadata ([`provenance`]) goes between the last member and the
//! central directory, outside every member, so `np.load` lists the tensors only.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::{Cursor, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::rc::Rc;
use std::sync::Mutex;

use bytes::Bytes;
use tensorfmt_core::io::AtomicFile;
use tensorfmt_core::ranged::{Placement, SparseImage, VirtualTensor};
use tensorfmt_core::{
    Chunks, Compression, Error, FieldValue, Limits, ReadOptions, Result, SourceLayout, Tensor,
    TensorFile, TensorInfo, WriteOptions,
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
    Error::classified("npz", e)
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
    crate::format::Format::Npz.sniff(head, head.len() as u64)
}

#[derive(Debug, Clone)]
struct Member {
    name: String,
    index: usize,
    header: NpyHeader,
    /// The member's npy bytes when stored uncompressed (a slice of the archive).
    stored: Option<Bytes>,
    /// The CRC-32 the archive gives for the member's bytes, and whether a whole read
    /// has checked the stored bytes against it (once per opened archive: the
    /// zero-copy path does not read through zip, which would check it).
    crc: u32,
    crc_checked: std::sync::OnceLock<()>,
    /// Declared uncompressed size.
    size: u64,
    /// For a deflated member: where its deflate stream lies in the archive, and the
    /// CRC-32 of its inflated bytes (`(start, length, crc)`), for streaming reads.
    deflated: Option<(usize, usize, u32)>,
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
    /// The whole archive (deflated members are streamed from it).
    data: Bytes,
    members: Vec<Member>,
    /// Position of each member in `members` by tensor name (lookups by name are O(1)).
    index: HashMap<String, usize>,
    limits: Limits,
    /// A legacy file's skeleton, from the bytes outside the members (or the older
    /// member `__tensorfmt__.npy`; see
    /// [`provenance`](crate::provenance)), shown as header field `tensorfmt.source`.
    carried: Option<String>,
    /// Member `format` of an npz in scipy's `save_npz` layout (`csr`), shown as header
    /// field `format`.
    sparse_format: Option<String>,
    /// Members whose dtype is not a tensor's (numpy strings, objects, records): listed
    /// as warnings and left out, so the archive's arrays still read (`np.load` reads
    /// every member; a file of arrays and one label string was unreadable).
    skipped: Vec<String>,
}

/// An archive read through a [`SparseImage`] as `Read + Seek`: what the zip reader
/// asks for is fetched (in blocks) as it asks.
struct Fetching<'i, 'a> {
    image: &'i mut SparseImage<'a>,
    at: u64,
}

/// What one small read of the zip reader fetches at least: a local header, its name
/// and the npy header after it, in one request (a whole read-ahead block per member
/// would fetch 64 KiB for each).
const MEMBER_AHEAD: u64 = 4096;

impl Read for Fetching<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let got = self
            .image
            .get_exact(self.at, (buf.len() as u64).max(MEMBER_AHEAD))
            .map_err(std::io::Error::other)?;
        let n = got.len().min(buf.len());
        buf[..n].copy_from_slice(&got[..n]);
        self.at += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for Fetching<'_, '_> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        use std::io::SeekFrom;
        let at = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.image.len().checked_add_signed(d),
            SeekFrom::Current(d) => self.at.checked_add_signed(d),
        };
        self.at = at.ok_or_else(|| std::io::Error::other("seek before the archive's start"))?;
        Ok(self.at)
    }
}

/// Fetches into `image` what [`open`] reads of an archive described from ranged reads
/// ([`crate::ranged`]): the end records and central directory, each member's local
/// header and npy header (the first block of a deflated member's stream), the small
/// members that are header fields (`format`, the carried metadata) and the metadata
/// block before the directory; never a member's values.
pub(crate) fn fetch_structure(image: &mut SparseImage<'_>, limits: &Limits) -> Result<()> {
    let (mut members, directory) = {
        let mut archive = ZipArchive::new(Fetching { image, at: 0 }).map_err(zip_err)?;
        limits.check_items(archive.len() as u64)?;
        let mut members = Vec::with_capacity(archive.len());
        for index in 0..archive.len() {
            let f = archive.by_index_raw(index).map_err(zip_err)?;
            let Some(start) = f.data_start() else {
                continue;
            };
            let whole = matches!(f.name(), "format.npy" | "format")
                || f.name().strip_suffix(".npy").unwrap_or(f.name()) == NPZ_MEMBER;
            members.push((start, f.compressed_size(), f.compression(), whole));
        }
        (members, archive.central_directory_start())
    };
    let mut members_end = 0u64;
    for (start, packed, method, whole) in members.drain(..) {
        members_end = members_end.max(start.saturating_add(packed));
        if whole && packed <= MAX_CARRIED {
            image.get(start, packed)?;
        } else if method == CompressionMethod::Stored {
            let pre = image.get_exact(start, packed.min(12))?.to_vec();
            if let Ok(n) = npy::header_len(&pre) {
                image.get_exact(start, packed.min(n as u64))?;
            }
        } else {
            // The header is in the stream's first block (deflate does not shrink a
            // header by much, and a header of 64 KiB is already absurd).
            image.get(start, packed.min(image.block()))?;
        }
    }
    if directory > members_end {
        let gap = directory - members_end;
        let pre = image.get(members_end, gap.min(64))?.to_vec();
        let pre = pre.strip_prefix(&EMPTY_ARCHIVE[..]).unwrap_or(&pre);
        if pre.starts_with(&HIDDEN_MAGIC[..]) {
            image.get(members_end, gap.min(MAX_CARRIED + 64))?;
        }
    }
    Ok(())
}

impl NpzFile {
    /// Where each tensor's bytes lie in the archive ([`crate::ranged`]): a stored
    /// member's values after its npy header; a deflated member is not a byte range.
    pub(crate) fn placements(&self) -> Vec<VirtualTensor> {
        self.members
            .iter()
            .map(|m| {
                let info = TensorInfo::new(m.name.clone(), m.header.dtype, m.header.shape.clone());
                let placement = match &m.stored {
                    Some(b) => {
                        let at = b.as_ptr() as usize - self.data.as_ptr() as usize;
                        let nbytes =
                            m.header.shape.byte_len(m.header.dtype.size()).unwrap_or(0) as u64;
                        let mut layout =
                            SourceLayout::contiguous((at + m.header.data_offset) as u64, nbytes);
                        if m.header.fortran_order {
                            layout.order = tensorfmt_core::Order::ColumnMajor;
                        }
                        Placement::Bytes {
                            layout,
                            big_endian: m.header.big_endian,
                        }
                    }
                    None => Placement::NotVirtual(
                        "a deflated zip member (numpy.savez_compressed): zarr has no codec \
                         for a raw deflate stream"
                            .into(),
                    ),
                };
                VirtualTensor {
                    info,
                    placement,
                    frame_axis: false,
                }
            })
            .collect()
    }
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
    // The zip reader keeps one entry per name: a directory listing a name twice loses
    // one silently (numpy's zipfile lists both). The end record's count says.
    let tail = &data[data.len().saturating_sub(65_557)..];
    if let Some(at) = tail.windows(4).rposition(|w| w == b"PK\x05\x06") {
        let listed = tail
            .get(at + 10..at + 12)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
        if let Some(n) = listed.filter(|&n| n != 0xFFFF && n != archive.len()) {
            return Err(err(InteropError::malformed(
                (data.len() - tail.len() + at) as u64,
                "central directory",
                format!(
                    "{n} entries listed, {} distinct names: a name appears twice",
                    archive.len()
                ),
            )));
        }
    }
    let mut members: Vec<Member> = Vec::new();
    let mut index_of: HashMap<String, usize> = HashMap::new();
    let mut carried = None;
    // Where the members' bytes end: the metadata, if any, lies between there and the
    // central directory.
    let mut members_end = 0u64;
    let mut sparse_format = None;
    let mut skipped = Vec::new();
    for index in 0..archive.len() {
        let mut f = archive.by_index(index).map_err(zip_err)?;
        if let Some(start) = f.data_start() {
            members_end = members_end.max(start.saturating_add(f.compressed_size()));
        }
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
        if name == "format" && sparse_format.is_none() {
            // scipy.sparse.save_npz's matrix format (a 0-d byte string, `b"csr"`):
            // a header field, not a tensor (see `interop::sparse`).
            if let Some(text) = read_carried(&mut f, &options.limits)? {
                sparse_format = Some(text);
                continue;
            }
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
        // What the zip reader takes from the central directory without checking it
        // against the member's own local header (as Python's zipfile checks it): the
        // name, and for a stored member its one size.
        let hs = f.header_start() as usize;
        let local_name = data
            .get(hs + 26..hs + 28)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
            .and_then(|n| data.get(hs + 30..hs + 30 + n));
        if local_name != Some(f.name_raw()) {
            return Err(bad(InteropError::malformed(
                at,
                "member name",
                format!("the central directory names {zip_name:?}, the member's local header another name"),
            )));
        }
        if f.compression() == CompressionMethod::Stored && f.compressed_size() != size {
            return Err(bad(InteropError::malformed(
                at,
                "zip entry",
                format!(
                    "a stored member of {size} bytes whose compressed size is {}",
                    f.compressed_size()
                ),
            )));
        }
        let mut deflated = None;
        let crc = f.crc32();
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
                let header = match npy::parse_header(&bytes, &options.limits) {
                    Err(InteropError::Unsupported(what)) => {
                        skipped.push(format!(
                            "member {zip_name:?} ({what}) is not a tensor: left out"
                        ));
                        continue;
                    }
                    h => h.map_err(bad)?,
                };
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
                let start = f.data_start().unwrap_or(u64::MAX);
                deflated = start
                    .checked_add(packed)
                    .filter(|&e| e <= data.len() as u64)
                    .map(|_| (start as usize, packed as usize, f.crc32()));
                if deflated.is_none() {
                    return Err(bad(InteropError::malformed(
                        0,
                        "zip entry",
                        format!("{packed} compressed bytes at {start} run past the archive"),
                    )));
                }
                let mut head = read_up_to(&mut f, 12)
                    .map_err(|e| bad(InteropError::malformed(0, "npy header", e.to_string())))?;
                let len = npy::header_len(&head).map_err(bad)?;
                let more = read_up_to(&mut f, len.saturating_sub(head.len()))
                    .map_err(|e| bad(InteropError::malformed(0, "npy header", e.to_string())))?;
                head.extend(more);
                match npy::parse_header(&head, &options.limits) {
                    Err(InteropError::Unsupported(what)) => {
                        skipped.push(format!(
                            "member {zip_name:?} ({what}) is not a tensor: left out"
                        ));
                        continue;
                    }
                    h => (h.map_err(bad)?, None),
                }
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
            crc,
            crc_checked: std::sync::OnceLock::new(),
            size,
            deflated,
        });
    }
    if carried.is_none() {
        let directory = archive.central_directory_start();
        carried = read_hidden(&data, members_end, directory)?;
    }
    Ok(NpzFile {
        archive: Mutex::new(archive),
        data,
        members,
        index: index_of,
        limits: options.limits,
        carried,
        sparse_format,
        skipped,
    })
}

/// About how many bytes a piece of a streamed deflated member holds.
const STREAM_BYTES: usize = 4 << 20;

/// A deflate stream being inflated, with the CRC-32 of what came out so far.
struct Inflating {
    decoder: flate2::read::DeflateDecoder<bytes::buf::Reader<Bytes>>,
    crc: crc32fast::Hasher,
}

impl Read for Inflating {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.decoder.read(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }
}

fn inflated_size_message(m: &Member, got: u64, want: u64) -> String {
    if got > want {
        format!(
            "{:?} inflates past the {want} bytes its npy header declares",
            m.name
        )
    } else {
        format!(
            "{:?} inflates to {got} bytes, its npy header declares {want}",
            m.name
        )
    }
}

/// The largest metadata read (a skeleton's JSON with its base64), in a member or not.
const MAX_CARRIED: u64 = 64 << 20;

/// What starts the metadata tensorfmt keeps in an npz outside its members.
pub const HIDDEN_MAGIC: &[u8; 16] = b"TENSORFMT.SOURCE";

/// The metadata tensorfmt writes between the last member and the central directory
/// (bytes that belong to no member, so `np.load` and `zipfile` never see them):
/// [`HIDDEN_MAGIC`], a little-endian u64 length, then that many bytes of UTF-8 JSON.
/// `None` when the gap is empty or holds something else (another tool's bytes).
fn read_hidden(data: &[u8], members_end: u64, directory: u64) -> Result<Option<String>> {
    let Some(gap) = usize::try_from(members_end)
        .ok()
        .zip(usize::try_from(directory).ok())
        .filter(|(a, b)| a < b && *b <= data.len())
        .map(|(a, b)| &data[a..b])
    else {
        return Ok(None);
    };
    // An archive without members starts with an empty end record (see `hidden_block`).
    let gap = match gap.strip_prefix(&EMPTY_ARCHIVE[..]) {
        Some(rest) if members_end == 0 => rest,
        _ => gap,
    };
    let Some(rest) = gap.strip_prefix(&HIDDEN_MAGIC[..]) else {
        return Ok(None);
    };
    let bad = |why: String| {
        err(InteropError::malformed(
            members_end,
            "tensorfmt metadata",
            why,
        ))
    };
    let Some(len) = rest
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    else {
        return Err(bad("no length".into()));
    };
    if len > MAX_CARRIED || len > (rest.len() - 8) as u64 {
        return Err(bad(format!(
            "{len} bytes declared, {} present (at most {MAX_CARRIED})",
            rest.len() - 8
        )));
    }
    let text = std::str::from_utf8(&rest[8..8 + len as usize])
        .map_err(|e| bad(format!("not UTF-8 ({e})")))?;
    Ok(Some(text.to_string()))
}

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

    /// Reads a member through the zip reader (inflating, checking the CRC): exactly
    /// the npy header plus the data it declares; a member that inflates to more is an
    /// error found without inflating the rest (a 16-byte array whose stream inflates to
    /// 1 GiB costs 16 bytes and one more).
    fn inflate(&self, m: &Member) -> Result<Bytes> {
        let want = self.array_end(m)?;
        self.limits.check_alloc(want)?;
        let mut archive = self
            .archive
            .lock()
            .map_err(|_| Error::Invalid("npz archive lock poisoned".into()))?;
        let f = archive.by_index(m.index).map_err(zip_err)?;
        let mut v = Vec::new();
        v.try_reserve_exact(want as usize)
            .map_err(|_| Error::LimitExceeded {
                what: "allocation",
                value: want,
                limit: self.limits.max_alloc,
            })?;
        f.take(want.saturating_add(1))
            .read_to_end(&mut v)
            .map_err(|e| {
                err(InteropError::malformed(
                    0,
                    "member data",
                    format!("{:?}: {e}", m.name),
                ))
            })?;
        if v.len() as u64 != want {
            return Err(err(InteropError::malformed(
                0,
                "member data",
                inflated_size_message(m, v.len() as u64, want),
            )));
        }
        Ok(Bytes::from(v))
    }

    /// Bytes of a member up to the end of its array (npy header + data); the
    /// directory's size must agree.
    fn array_end(&self, m: &Member) -> Result<u64> {
        let need = m.header.shape.byte_len(m.header.dtype.size())? as u64;
        let end = (m.header.data_offset as u64).saturating_add(need);
        if end != m.size {
            return Err(err(InteropError::malformed(
                0,
                "member data",
                format!(
                    "{:?}: its npy header declares {end} bytes, the zip directory {}",
                    m.name, m.size
                ),
            )));
        }
        Ok(end)
    }

    /// The pieces of a deflated member, inflated from the mapped archive as they are
    /// asked for (about [`STREAM_BYTES`] each, whole rows), so memory stays bounded
    /// whatever the array's size. Inflating stops at the size the npy header declares:
    /// more (or less) is an error, and so is a CRC mismatch, found before the last
    /// piece is handed out. Fortran-order arrays (whose rows are not contiguous) and
    /// small ones are inflated whole.
    fn deflated_chunks<'a>(&'a self, m: &'a Member) -> Result<Chunks<'a>> {
        let end = self.array_end(m)?;
        let h = &m.header;
        let need = end - h.data_offset as u64;
        let rows = h.shape.dims().first().copied().unwrap_or(0);
        // Pieces stay under the allocation limit too, when it is smaller.
        let piece_bytes = (STREAM_BYTES as u64).min(self.limits.max_alloc);
        let (Some((start, len, crc)), false, true) = (
            m.deflated,
            h.fortran_order && h.shape.rank() > 1,
            need > piece_bytes && rows > 0,
        ) else {
            return row_chunks(self.decode(m)?);
        };
        let row_bytes = need / rows as u64;
        let step = (piece_bytes / row_bytes.max(1)).max(1) as usize;
        self.limits
            .check_alloc(row_bytes.saturating_mul(step as u64))?;
        let raw = self.data.slice(start..start + len);
        let mut stream = Inflating {
            decoder: flate2::read::DeflateDecoder::new(bytes::Buf::reader(raw)),
            crc: crc32fast::Hasher::new(),
        };
        let fail = |what: String| err(InteropError::malformed(0, "member data", what));
        let mut head = vec![0u8; h.data_offset];
        stream
            .read_exact(&mut head)
            .map_err(|e| fail(format!("{:?}: {e}", m.name)))?;
        let mut next_row = 0usize;
        let mut done = false;
        Ok(Box::new(std::iter::from_fn(move || {
            if done || next_row >= rows {
                return None;
            }
            let k = step.min(rows - next_row);
            let result = (|| {
                let mut buf = Vec::new();
                let n = (row_bytes as usize).saturating_mul(k);
                buf.try_reserve_exact(n).map_err(|_| Error::LimitExceeded {
                    what: "allocation",
                    value: n as u64,
                    limit: self.limits.max_alloc,
                })?;
                buf.resize(n, 0);
                stream.read_exact(&mut buf).map_err(|e| {
                    fail(format!(
                        "{:?}: {e} (it inflates to fewer bytes than its npy header declares)",
                        m.name
                    ))
                })?;
                if next_row + k == rows {
                    // The end: nothing more may come, and the CRC must match.
                    let mut one = [0u8; 1];
                    let more = stream
                        .read(&mut one)
                        .map_err(|e| fail(format!("{:?}: {e}", m.name)))?;
                    if more > 0 {
                        return Err(fail(format!(
                            "{:?} inflates past the {end} bytes its npy header declares",
                            m.name
                        )));
                    }
                    let got = stream.crc.clone().finalize();
                    if got != crc {
                        return Err(fail(format!(
                            "{:?}: CRC-32 {got:08x}, the archive says {crc:08x}",
                            m.name
                        )));
                    }
                }
                let mut piece = h.clone();
                let mut dims = h.shape.dims().to_vec();
                dims[0] = k;
                piece.shape = tensorfmt_core::Shape::new(dims);
                piece.data_offset = 0;
                npy::decode(&piece, &Bytes::from(buf), &self.limits).map_err(err)
            })();
            next_row += k;
            done = result.is_err();
            Some(result)
        })))
    }

    fn decode(&self, m: &Member) -> Result<Tensor> {
        let bytes = match &m.stored {
            Some(b) => {
                check_stored_crc(m, b)?;
                b.clone()
            }
            None => self.inflate(m)?,
        };
        npy::decode(&m.header, &bytes, &self.limits).map_err(err)
    }
}

/// A stored member's bytes against the archive's CRC-32 (numpy's zipfile refuses a
/// member whose CRC does not match: "Bad CRC-32"), checked on the first whole read.
fn check_stored_crc(m: &Member, bytes: &[u8]) -> Result<()> {
    if m.crc_checked.get().is_some() {
        return Ok(());
    }
    let got = crc32fast::hash(bytes);
    if got != m.crc {
        return Err(err(InteropError::malformed(
            0,
            "member data",
            format!(
                "{:?}: CRC-32 checksum {got:08x}, the archive says {:08x} (the member is damaged)",
                m.name, m.crc
            ),
        )));
    }
    let _ = m.crc_checked.set(());
    Ok(())
}

/// How many members an archive's header describes one by one.
const HEADER_MEMBERS_MAX: usize = 32;

impl TensorFile for NpzFile {
    fn warnings(&self) -> Vec<String> {
        self.skipped.clone()
    }
    /// Never: the warnings name members left out (strings, objects), nothing repaired.
    fn lenient(&self) -> bool {
        false
    }
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
    /// `members` describes the first 32 tensor members; `member_count`
    /// counts them all (the tensors list every one), so an archive of 100,000 members
    /// does not make a header of 100,000 maps; `other_members` counts the members left
    /// out (strings, objects), each named in a warning.
    fn header(&self) -> Vec<(String, FieldValue)> {
        let members = self
            .members
            .iter()
            .take(HEADER_MEMBERS_MAX)
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
        if !self.skipped.is_empty() {
            // Members that are not tensors (strings, objects): counted, so that an
            // archive of strings alone does not read as an empty one.
            fields.push(("other_members".into(), self.skipped.len().into()));
        }
        if let Some(text) = &self.carried {
            fields.push((provenance::KEY.into(), text.clone().into()));
        }
        if let Some(text) = &self.sparse_format {
            fields.push(("format".into(), text.clone().into()));
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
        let m = self.member(name)?;
        if m.stored.is_some() {
            return row_chunks(self.decode(m)?);
        }
        self.deflated_chunks(m)
    }
    fn validate(&self) -> Result<()> {
        for m in &self.members {
            if m.stored.is_some() {
                // The whole read checks the CRC (`check_stored_crc`).
                self.decode(m)?;
            } else {
                // Streamed: checks sizes and the CRC without holding the array.
                for piece in self.deflated_chunks(m)? {
                    piece?;
                }
            }
        }
        Ok(())
    }
}

/// Writes the named tensors of `file` as an npz archive (streamed; atomically
/// replaced). `options.dtype` converts every tensor; `options.compress` deflates the
/// members; `options.carried` is kept outside every member; `options.threads =
/// Some(1)` decodes and writes on one thread instead of pipelining them on two (the
/// output is the same).
pub fn write_from(
    path: &Path,
    file: &dyn TensorFile,
    names: &[String],
    options: &WriteOptions,
) -> Result<()> {
    let method = zip_method(options.compress);
    // Zip stores a member name's length in 16 bits: refuse a longer name before any
    // file exists (the zip crate would fail half-way and complain while dropping).
    if let Some(long) = names
        .iter()
        .find(|n| n.len() + ".npy".len() > u16::MAX as usize)
    {
        return Err(Error::Invalid(format!(
            "npz member names are at most 65,535 bytes (a zip limit); tensor {:?}... is {} bytes",
            long.chars().take(40).collect::<String>(),
            long.len()
        )));
    }
    // Python's zipfile cuts a member name at its first NUL: `a\0b` and `a\0c` would both
    // be numpy's `a`.
    if let Some(nul) = names.iter().find(|n| n.contains('\0')) {
        return Err(Error::Invalid(format!(
            "tensor name {nul:?} holds a NUL character, where numpy (Python's zipfile) cuts \
             an npz member's name; rename it"
        )));
    }
    let n_threads = threads(options);
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
    let capture: Capture = Rc::new(std::cell::RefCell::new(None));
    let position = Rc::new(Cell::new(0u64));
    let out = Abandonable {
        file: output,
        abandoned: abandoned.clone(),
        pos: 0,
        capture: capture.clone(),
        end: position.clone(),
    };
    let mut zip = ZipWriter::new(out);
    let result = write_members(&mut zip, file, names, options, method, n_threads);
    if let Err(e) = result {
        // Dropping the writer finalizes the archive; make that a silent no-op (zip would
        // print its own failure to stderr) and let the temporary file be removed.
        abandoned.set(true);
        drop(zip);
        return Err(e);
    }
    let Some(text) = &options.carried else {
        return zip.finish().map_err(zip_err)?.file.commit();
    };
    // The metadata goes between the last member and the central directory, where no
    // member (and so neither `np.load` nor `zipfile`) sees it: zip finishes the
    // archive, a copy of what it wrote last gives the central directory and end
    // records, and those are written again after the metadata, their offset moved.
    let from = position.get();
    let hidden = hidden_block(text, from);
    *capture.borrow_mut() = Some((from, Vec::new()));
    if from.saturating_add(hidden.len() as u64) >= 0xFFFF_0000 {
        // The moved directory offset must fit: zip64 end records carry 64 bits.
        zip.set_zip64_comment(Some(""));
    }
    let mut out = zip.finish().map_err(zip_err)?;
    let (from, written) = capture.borrow_mut().take().unwrap_or_default();
    let (at, tail) = directory_of(&written, from)
        .and_then(|(at, tail)| Ok((at, move_directory(tail.to_vec(), at, hidden.len() as u64)?)))
        .map_err(|why| {
            Error::Invalid(format!(
                "writing the npz end records: {why}; please report this"
            ))
        })?;
    out.file.seek(SeekFrom::Start(at))?;
    out.file.write_all(&hidden)?;
    out.file.write_all(&tail)?;
    out.file.commit()
}

/// The zip method of a compression choice.
pub(crate) fn zip_method(compress: Compression) -> CompressionMethod {
    match compress {
        Compression::Stored => CompressionMethod::Stored,
        Compression::Deflate => CompressionMethod::Deflated,
    }
}

/// A whole archive built in memory with `text` placed as [`write_from`] places it:
/// between the last member and the central directory, the directory's offset moved
/// (`interop::sparse` builds its scipy-layout archives this way).
pub(crate) fn hide_in_archive(archive: Vec<u8>, text: &str) -> Result<Vec<u8>> {
    let (at, tail) = directory_of(&archive, 0)
        .map_err(|why| Error::Invalid(format!("npz end records: {why}; please report this")))?;
    let hidden = hidden_block(text, at);
    let tail = move_directory(tail.to_vec(), at, hidden.len() as u64)
        .map_err(|why| Error::Invalid(format!("npz end records: {why}; please report this")))?;
    let at = usize::try_from(at).map_err(|_| Error::Invalid("npz too large".into()))?;
    let mut out = Vec::with_capacity(archive.len() + hidden.len());
    out.extend_from_slice(&archive[..at]);
    out.extend_from_slice(&hidden);
    out.extend_from_slice(&tail);
    Ok(out)
}

/// An empty zip archive: its end record alone (no entries, a directory of 0 bytes at
/// offset 0).
const EMPTY_ARCHIVE: [u8; 22] = [
    b'P', b'K', 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
];

/// The metadata as it lies between the members and the central directory (read back by
/// [`read_hidden`]): [`HIDDEN_MAGIC`], a little-endian u64 length, the UTF-8 text.
///
/// Placed at offset `at` 0 (an archive without members), it is preceded by
/// [`EMPTY_ARCHIVE`], so that the file still starts like a zip archive: `np.load`
/// decides by the first bytes (`PK\x03\x04`, or `PK\x05\x06` for an empty
/// archive), and a reader that reads from the front sees an empty archive there, as
/// the end record at the back says.
fn hidden_block(text: &str, at: u64) -> Vec<u8> {
    let mut hidden = Vec::with_capacity(EMPTY_ARCHIVE.len() + HIDDEN_MAGIC.len() + 8 + text.len());
    if at == 0 {
        hidden.extend_from_slice(&EMPTY_ARCHIVE);
    }
    hidden.extend_from_slice(HIDDEN_MAGIC);
    hidden.extend_from_slice(&(text.len() as u64).to_le_bytes());
    hidden.extend_from_slice(text.as_bytes());
    hidden
}

/// The central directory's offset and the bytes from there to the end, out of a copy
/// of the archive's last `written` bytes (from offset `from` on).
fn directory_of(written: &[u8], from: u64) -> std::result::Result<(u64, &[u8]), String> {
    let e = written.len().checked_sub(22).ok_or("no end record")?;
    let u32_at = |i: usize| u32::from_le_bytes(written[i..i + 4].try_into().expect("4"));
    if u32_at(e) != 0x0605_4b50 {
        return Err("the end record is not where expected".into());
    }
    let at = match u32_at(e + 16) {
        u32::MAX => {
            let l = e.checked_sub(20).ok_or("no zip64 locator")?;
            let record = u64::from_le_bytes(written[l + 8..l + 16].try_into().expect("8"));
            let r = record
                .checked_sub(from)
                .map(|r| r as usize)
                .filter(|&r| r + 56 <= l)
                .ok_or("no zip64 end record")?;
            u64::from_le_bytes(written[r + 48..r + 56].try_into().expect("8"))
        }
        n => u64::from(n),
    };
    let start = at
        .checked_sub(from)
        .map(|a| a as usize)
        .filter(|&a| a <= e)
        .ok_or("the central directory is not in the copy")?;
    Ok((at, &written[start..]))
}

/// Adds `shift` to the central-directory offset in the end records of `tail` (the
/// central directory, the zip64 end record and locator if present, the end record).
fn move_directory(mut tail: Vec<u8>, at: u64, shift: u64) -> std::result::Result<Vec<u8>, String> {
    const EOCD: u32 = 0x0605_4b50;
    const LOCATOR: u32 = 0x0706_4b50;
    const ZIP64: u32 = 0x0606_4b50;
    let u32_at = |t: &[u8], i: usize| u32::from_le_bytes(t[i..i + 4].try_into().expect("4"));
    let u64_at = |t: &[u8], i: usize| u64::from_le_bytes(t[i..i + 8].try_into().expect("8"));
    let e = tail.len().checked_sub(22).ok_or("no end record")?;
    if u32_at(&tail, e) != EOCD || tail[e + 20..e + 22] != [0, 0] {
        return Err("the end record is not where expected".into());
    }
    let old = u32_at(&tail, e + 16);
    if old != u32::MAX {
        let new = u64::from(old) + shift;
        let new = u32::try_from(new).ok().filter(|&n| n != u32::MAX);
        let zip64 = e >= 20 && u32_at(&tail, e - 20) == LOCATOR;
        match (new, zip64) {
            (Some(n), _) => tail[e + 16..e + 20].copy_from_slice(&n.to_le_bytes()),
            (None, true) => tail[e + 16..e + 20].copy_from_slice(&u32::MAX.to_le_bytes()),
            (None, false) => return Err("the directory offset outgrows 32 bits".into()),
        }
    }
    if e >= 20 && u32_at(&tail, e - 20) == LOCATOR {
        let l = e - 20;
        let record = u64_at(&tail, l + 8);
        let r = record
            .checked_sub(at)
            .map(|r| r as usize)
            .filter(|&r| r + 56 <= l && u32_at(&tail, r) == ZIP64)
            .ok_or("the zip64 end record is not where expected")?;
        tail[l + 8..l + 16].copy_from_slice(&(record + shift).to_le_bytes());
        let cd = u64_at(&tail, r + 48);
        tail[r + 48..r + 56].copy_from_slice(&(cd + shift).to_le_bytes());
    }
    Ok(tail)
}

/// A copy of what is written from an offset on (shared with the writer's owner).
type Capture = Rc<std::cell::RefCell<Option<(u64, Vec<u8>)>>>;

/// The archive's output. Once abandoned (after an error), writes and seeks are
/// discarded, so the `ZipWriter`'s drop-time finalize neither fails nor prints; the
/// uncommitted `AtomicFile` removes its temporary file when it drops.
struct Abandonable {
    file: AtomicFile,
    abandoned: Rc<Cell<bool>>,
    /// The position a discarded stream would have (finalize asks for it).
    pos: u64,
    /// When armed, a copy of everything written from its start position on (the
    /// central directory and end records zip writes last).
    capture: Capture,
    /// The end of what was written so far.
    end: Rc<Cell<u64>>,
}

impl Write for Abandonable {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.abandoned.get() {
            self.pos += buf.len() as u64;
            return Ok(buf.len());
        }
        let n = self.file.write(buf)?;
        if let Some((from, copy)) = &mut *self.capture.borrow_mut() {
            if self.pos >= *from {
                let at = (self.pos - *from) as usize;
                if copy.len() < at + n {
                    copy.resize(at + n, 0);
                }
                copy[at..at + n].copy_from_slice(&buf[..n]);
            }
        }
        self.pos += n as u64;
        self.end.set(self.end.get().max(self.pos));
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

    /// An archive of one deflated member holding exactly `npy` (bytes as given).
    fn deflated_archive(name: &str, npy: &[u8]) -> Bytes {
        let mut z = ZipWriter::new(Cursor::new(Vec::new()));
        let o = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
        z.start_file(name, o).unwrap();
        z.write_all(npy).unwrap();
        Bytes::from(z.finish().unwrap().into_inner())
    }

    fn npy_header(descr: &str, shape: &str) -> Vec<u8> {
        let text = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        let total = 10 + text.len() + 1;
        let padded = text + &" ".repeat(total.next_multiple_of(64) - total) + "\n";
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        v.extend_from_slice(&(padded.len() as u16).to_le_bytes());
        v.extend_from_slice(padded.as_bytes());
        v
    }

    #[test]
    fn deflated_members_stream_in_bounded_pieces_and_check_the_crc() {
        let rows = 3000usize;
        let mut npy = npy_header("<u2", &format!("({rows}, 1024)"));
        let values: Vec<u16> = (0..rows * 1024).map(|i| (i % 65_521) as u16).collect();
        for v in &values {
            npy.extend_from_slice(&v.to_le_bytes());
        }
        let data = deflated_archive("big.npy", &npy);
        let f = open(data.clone(), &ReadOptions::default()).unwrap();
        let pieces: Vec<Tensor> = f.read_chunks("big").unwrap().map(|p| p.unwrap()).collect();
        assert!(pieces.len() >= 2, "{} pieces", pieces.len());
        let mut back = Vec::new();
        for p in &pieces {
            assert!(p.bytes().len() <= STREAM_BYTES, "{}", p.bytes().len());
            back.extend(p.to_vec::<u16>().unwrap());
        }
        assert_eq!(back, values);
        f.validate().unwrap();
        assert_eq!(f.stats("big").unwrap().count, rows * 1024);
        // A flipped bit in the deflate stream: an error, never a wrong last piece.
        let (start, len, _) = f.members[0].deflated.unwrap();
        let mut bad = data.to_vec();
        bad[start + len / 2] ^= 0x10;
        if let Ok(f) = open(Bytes::from(bad), &ReadOptions::default()) {
            let all: Result<Vec<Tensor>> = f.read_chunks("big").and_then(|c| c.collect());
            assert!(all.is_err());
            assert!(f.validate().is_err());
        }
    }

    #[test]
    fn a_name_with_a_nul_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let t = Tensor::from_vec(vec![1.0f32], [1], tensorfmt_core::Order::RowMajor).unwrap();
        let out = dir.path().join("x.npz");
        let e = crate::save(
            &out,
            crate::Format::Npz,
            &[("a\0b".to_string(), t.clone()), ("a\0c".to_string(), t)],
            &WriteOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("NUL"), "{e}");
        assert!(!out.exists());
    }

    /// A flipped bit in a stored member: numpy's zipfile says "Bad CRC-32"; the
    /// zero-copy path read it as a value (28.0 where 7.0 was stored), and convert and
    /// diff carried it on. Every whole read of a stored member checks its CRC, once.
    #[test]
    fn stored_members_check_the_crc() {
        let mut npy = npy_header("<f4", "(4,)");
        for v in [7.0f32, 8.0, 9.0, 10.0] {
            npy.extend_from_slice(&v.to_le_bytes());
        }
        let mut z = ZipWriter::new(Cursor::new(Vec::new()));
        let o = SimpleFileOptions::default().compression_method(CompressionMethod::Stored);
        z.start_file("x.npy", o).unwrap();
        z.write_all(&npy).unwrap();
        let data = z.finish().unwrap().into_inner();
        let f = open(Bytes::from(data.clone()), &ReadOptions::default()).unwrap();
        assert_eq!(
            f.read_tensor("x").unwrap().to_vec::<f32>().unwrap(),
            [7.0, 8.0, 9.0, 10.0]
        );
        // The exponent bit of the first value: 7.0 becomes 28.0.
        let at = data
            .windows(4)
            .position(|w| w == 7.0f32.to_le_bytes())
            .unwrap();
        let mut bad = data;
        bad[at + 3] ^= 0x01;
        let f = open(Bytes::from(bad), &ReadOptions::default()).unwrap();
        let e = f.read_tensor("x").unwrap_err().to_string();
        assert!(e.contains("CRC-32"), "{e}");
        assert!(f.read_chunks("x").is_err());
        assert!(f.stats("x").is_err());
        assert!(f.validate().is_err());
    }

    #[test]
    fn a_member_that_inflates_past_its_npy_header_is_an_error_without_inflating_it() {
        // The header declares 16 bytes; the member holds 8 MiB more zeros.
        let mut npy = npy_header("<f4", "(4,)");
        npy.extend_from_slice(&[0u8; 16]);
        npy.extend(std::iter::repeat_n(0u8, 8 << 20));
        let f = open(deflated_archive("x.npy", &npy), &ReadOptions::default()).unwrap();
        let e = f.read_tensor("x").unwrap_err().to_string();
        assert!(e.contains("declares"), "{e}");
        assert!(f.read_chunks("x").is_err());
        assert!(f.validate().is_err());
        // A small limit refuses what the header declares, before inflating.
        let mut npy = npy_header("<f4", "(2097152,)");
        npy.extend(std::iter::repeat_n(0u8, 8 << 20));
        let opts = ReadOptions {
            limits: Limits {
                max_alloc: 1 << 20,
                ..Limits::default()
            },
            ..ReadOptions::default()
        };
        let f = open(deflated_archive("y.npy", &npy), &opts).unwrap();
        assert!(f.read_tensor("y").is_err());
        // Streaming still works under the limit: pieces are smaller than it.
        let n: usize = f
            .read_chunks("y")
            .unwrap()
            .map(|p| p.unwrap().bytes().len() / 4)
            .sum();
        assert_eq!(n, 2 << 20);
    }

    /// Issue 23 item 4: the metadata lies outside every member (so zip readers list
    /// the tensors only), in stored and deflated archives, and comes back intact.
    #[test]
    fn metadata_travels_outside_the_members() {
        let text = "{\"tensorfmt\":2, \"x\": \"\u{e9}\"}".repeat(100);
        for compress in ["none", "deflate"] {
            let mut o = WriteOptions::default();
            o.set("compress", compress).unwrap();
            o.carried = Some(text.clone());
            let f = roundtrip(&o);
            assert_eq!(f.carried.as_deref(), Some(text.as_str()));
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("x.npz");
            save(&p, &sample(), &o).unwrap();
            let data = std::fs::read(&p).unwrap();
            let mut z = ZipArchive::new(Cursor::new(data.clone())).unwrap();
            let names: Vec<&str> = z.file_names().collect();
            assert_eq!(names.len(), 3, "{names:?}");
            for i in 0..z.len() {
                let mut m = z.by_index(i).unwrap();
                std::io::copy(&mut m, &mut std::io::sink()).unwrap(); // CRC checked
            }
            // A gap that lies about its length is an error, not an allocation.
            let at = data
                .windows(HIDDEN_MAGIC.len())
                .position(|w| w == HIDDEN_MAGIC)
                .unwrap();
            let mut bad = data.clone();
            bad[at + 16..at + 24].copy_from_slice(&u64::MAX.to_le_bytes());
            assert!(open(Bytes::from(bad), &ReadOptions::default()).is_err());
            // Another tool's bytes there are not ours: ignored.
            let mut other = data.clone();
            other[at] ^= 0xff;
            let f = open(Bytes::from(other), &ReadOptions::default()).unwrap();
            assert!(f.carried.is_none());
        }
    }

    /// Issue 34 item 1: an archive without members (a primitiv optimizer state, a net
    /// without weights) still starts like a zip archive, so `np.load` (which decides by
    /// the first bytes: `PK\x03\x04`, or `PK\x05\x06` for an empty archive) opens it,
    /// and zip readers list no member; the metadata still comes back.
    #[test]
    fn an_archive_without_members_starts_like_one_and_keeps_its_metadata() {
        let text = "{\"tensorfmt\":2}".repeat(5000); // past zipfile's 64 KiB search
        for compress in ["none", "deflate"] {
            let mut o = WriteOptions::default();
            o.set("compress", compress).unwrap();
            o.carried = Some(text.clone());
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("empty.npz");
            save(&p, &[], &o).unwrap();
            let data = std::fs::read(&p).unwrap();
            assert!(
                data.starts_with(b"PK\x05\x06") || data.starts_with(b"PK\x03\x04"),
                "{:?}",
                &data[..16]
            );
            assert!(sniff(&data));
            // The end record a reader finds from the back names no member and a
            // directory that lies where it says.
            let z = ZipArchive::new(Cursor::new(data.clone())).unwrap();
            assert_eq!(z.len(), 0);
            let f = open(Bytes::from(data), &ReadOptions::default()).unwrap();
            assert!(f.tensors().is_empty());
            assert_eq!(f.carried.as_deref(), Some(text.as_str()));
        }
    }

    /// Archives with zip64 end records (over 65,535 members) carry the metadata too:
    /// the zip64 end record's directory offset and the locator's pointer to it move
    /// with the metadata, and zip readers still list and check every member.
    #[test]
    fn metadata_travels_in_zip64_archives_of_many_members() {
        let n = 70_000usize;
        let tensors: Vec<(String, Tensor)> = (0..n)
            .map(|i| {
                let t = Tensor::from_vec(vec![i as u8], [1], Order::RowMajor).unwrap();
                (format!("t{i}"), t)
            })
            .collect();
        let text = "{\"tensorfmt\":2}".repeat(50);
        let mut o = WriteOptions {
            skip_fsync: true,
            ..WriteOptions::default()
        };
        o.carried = Some(text.clone());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("many.npz");
        save(&p, &tensors, &o).unwrap();
        let data = std::fs::read(&p).unwrap();
        // The end record defers to a zip64 record (65,535 members or more).
        let e = data.len() - 22;
        assert_eq!(data[e + 10..e + 12], [0xff, 0xff]);
        assert_eq!(data[e - 20..e - 16], 0x0706_4b50u32.to_le_bytes());
        let f = open(Bytes::from(data.clone()), &ReadOptions::default()).unwrap();
        assert_eq!(f.carried.as_deref(), Some(text.as_str()));
        assert_eq!(f.tensors().len(), n);
        assert_eq!(
            f.read_tensor("t69999").unwrap().bytes()[..],
            [69_999u32 as u8]
        );
        let mut z = ZipArchive::new(Cursor::new(data)).unwrap();
        assert_eq!(z.len(), n);
        let mut m = z.by_name("t69999.npy").unwrap();
        std::io::copy(&mut m, &mut std::io::sink()).unwrap(); // CRC checked
    }

    /// An archive whose 32-bit directory offset is 0xFFFFFFFF (as archives over 4 GiB
    /// have it) takes the offset from its zip64 end record, and moving it for the
    /// metadata updates the zip64 record, not the 32-bit field.
    #[test]
    fn metadata_moves_a_directory_found_through_the_zip64_record() {
        let mut z = ZipWriter::new(Cursor::new(Vec::new()));
        z.set_zip64_comment(Some(""));
        let o = SimpleFileOptions::default().compression_method(CompressionMethod::Stored);
        let mut h = Vec::new();
        let w = Tensor::from_vec(vec![1f32, 2.0], [2], Order::RowMajor).unwrap();
        npy::write_header(&mut h, DType::F32, w.shape()).unwrap();
        z.start_file("w.npy", o).unwrap();
        z.write_all(&h).unwrap();
        z.write_all(w.bytes()).unwrap();
        let mut archive = z.finish().unwrap().into_inner();
        let e = archive.len() - 22;
        assert_eq!(
            archive[e - 20..e - 16],
            0x0706_4b50u32.to_le_bytes(),
            "no zip64 locator"
        );
        archive[e + 16..e + 20].copy_from_slice(&u32::MAX.to_le_bytes());
        // Still a valid archive for a zip reader before the metadata goes in.
        ZipArchive::new(Cursor::new(archive.clone())).unwrap();
        let text = "x".repeat(1000);
        let with = hide_in_archive(archive, &text).unwrap();
        let e = with.len() - 22;
        assert_eq!(with[e + 16..e + 20], u32::MAX.to_le_bytes());
        let f = open(Bytes::from(with.clone()), &ReadOptions::default()).unwrap();
        assert_eq!(f.carried.as_deref(), Some(text.as_str()));
        assert_eq!(f.read_tensor("w").unwrap(), w);
        let mut z = ZipArchive::new(Cursor::new(with)).unwrap();
        let mut m = z.by_name("w.npy").unwrap();
        std::io::copy(&mut m, &mut std::io::sink()).unwrap();
    }

    /// Files written before the metadata moved carry it as member `__tensorfmt__.npy`.
    #[test]
    fn the_older_metadata_member_is_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.npz");
        let mut z = ZipWriter::new(std::fs::File::create(&p).unwrap());
        let opts = SimpleFileOptions::default().compression_method(CompressionMethod::Stored);
        z.start_file("w.npy", opts).unwrap();
        let w = Tensor::from_vec(vec![1f32, 2.0], [2], Order::RowMajor).unwrap();
        let mut h = Vec::new();
        npy::write_header(&mut h, DType::F32, w.shape()).unwrap();
        z.write_all(&h).unwrap();
        z.write_all(w.bytes()).unwrap();
        z.start_file(format!("{NPZ_MEMBER}.npy"), opts).unwrap();
        z.write_all(&npy::header_bytes_for("|S5", &[])).unwrap();
        z.write_all(b"hello").unwrap();
        z.finish().unwrap();
        let f = open(
            Bytes::from(std::fs::read(&p).unwrap()),
            &ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(f.carried.as_deref(), Some("hello"));
        assert_eq!(f.tensors().len(), 1);
    }

    #[test]
    fn names_over_the_zip_limit_are_a_clean_error_and_leave_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("long.npz");
        let t = Tensor::from_vec(vec![1f32, 2.0], [2], Order::RowMajor).unwrap();
        let e = save(&p, &[("n".repeat(70_000), t)], &WriteOptions::default()).unwrap_err();
        assert!(e.to_string().contains("65,535"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn stored_and_deflated_round_trips() {
        let f = roundtrip(&WriteOptions::default());
        assert_eq!(f.kind(), "archive (stored)");
        let mut o = WriteOptions::default();
        o.set("compress", "deflate").unwrap();
        let f = roundtrip(&o);
        assert_eq!(f.kind(), "archive (deflated)");
        let e = o.set("compress", "lzma").unwrap_err().to_string();
        assert!(e.contains("use none or deflate"), "{e}");
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
        // Flip a data byte: the CRC check of the whole read (validate's too) fails.
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
