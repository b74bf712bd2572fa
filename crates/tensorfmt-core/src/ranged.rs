//! Reading a file's structure through ranged reads (an object store, an HTTP server)
//! instead of a mapping, and turning the tensor layouts the readers declare into zarr
//! chunk references.
//!
//! The readers already know where every tensor lies in its file
//! ([`TensorFile::source_layout`](crate::TensorFile::source_layout)). To keep them the
//! one source of that knowledge, a remote file is read into a [`SparseImage`]: a
//! zero-filled buffer of the file's length (an anonymous mapping that costs nothing
//! until written) into which a format's *structure walker* fetches only the bytes that
//! describe the file (headers, per-frame / per-patch / per-blob indexes), never the
//! tensor values. The format's ordinary reader then opens the image as it would open
//! the mapped file and declares the layouts. Each format crate tests that what it
//! declares from an image equals what it declares from the real file, with the
//! unfetched bytes zero and filled with garbage, so no answer depends on bytes that
//! were not fetched.
//!
//! [`chunk_grid`] then cuts a declared [`SourceLayout`] into a regular zarr chunk grid:
//! one chunk per frame (or entry) where the tensor has a frame axis, pieces of about a
//! target size elsewhere.
//!
//! ```
//! use tensorfmt_core::ranged::{chunk_grid, SparseImage};
//! use tensorfmt_core::{Order, SourceLayout, SourceRun};
//! // A 1000-byte object read through a closure that counts what it serves.
//! let object: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
//! let mut served = 0u64;
//! let mut source = |offset: u64, len: u64| {
//!     served += len;
//!     Ok(bytes::Bytes::copy_from_slice(&object[offset as usize..(offset + len) as usize]))
//! };
//! let mut image = SparseImage::new(&mut source, 1000, 256, u64::MAX)?;
//! assert_eq!(image.get(10, 4)?, &[10, 11, 12, 13]); // fetches bytes 0..256
//! assert_eq!(image.get(300, 2)?, &[44, 45]);        // fetches 256..512
//! assert_eq!((image.fetched(), image.requests()), (512, 2));
//! let bytes = image.into_bytes();
//! assert_eq!((bytes.len(), bytes[700]), (1000, 0)); // never fetched: zero
//! assert_eq!(served, 512);
//!
//! // Three frames of 2x2 f32 values, each behind an 8-byte time.
//! let layout = SourceLayout {
//!     order: Order::RowMajor,
//!     runs: vec![SourceRun { offset: 88, len: 16, repeat: vec![(3, 24)] }],
//! };
//! let grid = chunk_grid(&[3, 2, 2], 4, &layout, true, 1 << 20).map_err(tensorfmt_core::Error::Invalid)?;
//! assert_eq!((grid.chunk_shape.clone(), grid.offsets.clone()), (vec![1, 2, 2], vec![88, 112, 136]));
//! assert_eq!(grid.chunk_len, 16);
//! # Ok::<(), tensorfmt_core::Error>(())
//! ```

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::{DType, Error, FieldValue, Order, Result, SourceLayout, TensorInfo};

/// Where byte ranges of one object come from: an object store, an HTTP server, a file.
///
/// A closure `FnMut(offset, len) -> Result<Bytes>` is one.
pub trait RangeSource {
    /// Exactly the `len` bytes at `offset` (the caller keeps the range inside the
    /// object; fewer bytes mean the object changed and are an error).
    fn read_range(&mut self, offset: u64, len: u64) -> Result<Bytes>;

    /// Several ranges at once (sources that can fetch them concurrently override it).
    fn read_ranges(&mut self, ranges: &[(u64, u64)]) -> Result<Vec<Bytes>> {
        ranges
            .iter()
            .map(|&(offset, len)| self.read_range(offset, len))
            .collect()
    }
}

impl<F: FnMut(u64, u64) -> Result<Bytes>> RangeSource for F {
    fn read_range(&mut self, offset: u64, len: u64) -> Result<Bytes> {
        self(offset, len)
    }
}

/// A local file read with positioned reads (for tests and for local paths).
///
/// ```
/// use tensorfmt_core::ranged::{FileSource, RangeSource};
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("x.bin");
/// std::fs::write(&p, b"hello world")?;
/// let mut f = FileSource::open(&p)?;
/// assert_eq!(f.len(), 11);
/// assert_eq!(&f.read_range(6, 5)?[..], b"world");
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
#[derive(Debug)]
pub struct FileSource {
    file: std::fs::File,
    path: std::path::PathBuf,
    len: u64,
}

impl FileSource {
    /// Opens a regular file (see [`crate::io::open_regular`]).
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<FileSource> {
        let path = path.as_ref();
        let file = crate::io::open_regular(path)?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(FileSource {
            file,
            path: path.to_path_buf(),
            len,
        })
    }

    /// The file's length when it was opened.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl RangeSource for FileSource {
    fn read_range(&mut self, offset: u64, len: u64) -> Result<Bytes> {
        let n = usize::try_from(len).map_err(|_| Error::Overflow { what: "range" })?;
        let mut buf = vec![0u8; n];
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt;
            self.file
                .read_exact_at(&mut buf, offset)
                .map_err(|e| Error::io(&self.path, e))?;
        }
        #[cfg(not(unix))]
        {
            use std::io::{Read, Seek, SeekFrom};
            self.file
                .seek(SeekFrom::Start(offset))
                .and_then(|_| self.file.read_exact(&mut buf))
                .map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(Bytes::from(buf))
    }
}

/// The default read-ahead block of [`SparseImage::get`] (64 KiB): the first one holds
/// every header the formats have, so a dense PVP movie of any length is described by
/// one request.
pub const DEFAULT_BLOCK: u64 = 64 << 10;

/// A zero-filled image of a remote file of known length, into which byte ranges are
/// fetched on demand; what was never fetched stays zero (see the [module](self) docs).
///
/// Memory: an anonymous mapping without swap reservation, so only the fetched pages
/// are ever resident, whatever the file's length.
pub struct SparseImage<'a> {
    source: &'a mut dyn RangeSource,
    map: Option<memmap2::MmapMut>,
    len: u64,
    block: u64,
    /// Fetched byte ranges, `start -> end`, disjoint and not touching.
    have: BTreeMap<u64, u64>,
    fetched: u64,
    requests: u64,
    max_fetch: u64,
}

impl std::fmt::Debug for SparseImage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseImage")
            .field("len", &self.len)
            .field("fetched", &self.fetched)
            .field("requests", &self.requests)
            .finish()
    }
}

impl<'a> SparseImage<'a> {
    /// An image of an object of `len` bytes read from `source`: [`get`](Self::get)
    /// fetches whole `block`s (at least 1 byte), and fetching more than `max_fetch`
    /// bytes in all is an error (a hostile index cannot make the walk read the file).
    pub fn new(
        source: &'a mut dyn RangeSource,
        len: u64,
        block: u64,
        max_fetch: u64,
    ) -> Result<SparseImage<'a>> {
        let map = if len == 0 {
            None
        } else {
            let n = usize::try_from(len).map_err(|_| Error::Overflow {
                what: "file length",
            })?;
            Some(
                memmap2::MmapOptions::new()
                    .len(n)
                    .no_reserve_swap()
                    .map_anon()
                    .map_err(|e| {
                        Error::Invalid(format!(
                            "cannot reserve an image of the file's {len} bytes: {e}"
                        ))
                    })?,
            )
        };
        Ok(SparseImage {
            source,
            map,
            len,
            block: block.max(1),
            have: BTreeMap::new(),
            fetched: 0,
            requests: 0,
            max_fetch,
        })
    }

    /// The object's length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty object.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The read-ahead block of [`get`](Self::get).
    pub fn block(&self) -> u64 {
        self.block
    }

    /// Bytes fetched so far.
    pub fn fetched(&self) -> u64 {
        self.fetched
    }

    /// Requests made so far (one per [`RangeSource`] call of one range).
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// The missing parts of `start..end` (already clamped to the object).
    fn missing(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = start;
        // The range that starts at or before `start` may cover its beginning.
        if let Some((_, &e)) = self.have.range(..=start).next_back() {
            at = at.max(e);
        }
        for (&s, &e) in self.have.range(start..end) {
            if s > at {
                out.push((at, s));
            }
            at = at.max(e);
        }
        if at < end {
            out.push((at, end));
        }
        out
    }

    fn mark(&mut self, start: u64, end: u64) {
        let (mut s, mut e) = (start, end);
        // Merge with every range that touches or overlaps.
        if let Some((&ps, &pe)) = self.have.range(..=s).next_back() {
            if pe >= s {
                s = ps;
                e = e.max(pe);
            }
        }
        let touching: Vec<u64> = self.have.range(s..=e).map(|(&k, _)| k).collect();
        for k in touching {
            if let Some(v) = self.have.remove(&k) {
                e = e.max(v);
            }
        }
        self.have.insert(s, e);
    }

    fn store(&mut self, start: u64, data: &Bytes, want: u64) -> Result<()> {
        if data.len() as u64 != want {
            return Err(Error::Invalid(format!(
                "the source returned {} of the {want} bytes asked for at offset {start} \
                 (the object is shorter than its listed {} bytes: did it change?)",
                data.len(),
                self.len
            )));
        }
        if let Some(map) = self.map.as_mut() {
            map[start as usize..(start + want) as usize].copy_from_slice(data);
        }
        self.mark(start, start + want);
        Ok(())
    }

    fn account(&mut self, bytes: u64) -> Result<()> {
        self.fetched += bytes;
        if self.fetched > self.max_fetch {
            return Err(Error::LimitExceeded {
                what: "bytes fetched to read the file's structure",
                value: self.fetched,
                limit: self.max_fetch,
            });
        }
        Ok(())
    }

    fn fill(&mut self, start: u64, end: u64, ahead: bool) -> Result<()> {
        let (start, end) = if ahead {
            (
                start / self.block * self.block,
                end.div_ceil(self.block)
                    .saturating_mul(self.block)
                    .min(self.len),
            )
        } else {
            (start, end)
        };
        for (s, e) in self.missing(start, end) {
            self.account(e - s)?;
            self.requests += 1;
            let data = self.source.read_range(s, e - s)?;
            self.store(s, &data, e - s)?;
        }
        Ok(())
    }

    fn slice(&self, start: u64, end: u64) -> &[u8] {
        match &self.map {
            Some(m) => &m[start as usize..end as usize],
            None => &[],
        }
    }

    fn clamp(&self, offset: u64, len: u64) -> (u64, u64) {
        let start = offset.min(self.len);
        (start, offset.saturating_add(len).min(self.len))
    }

    /// The bytes `offset .. offset + len` (fewer at the end of the object), fetching
    /// what is missing in whole blocks (read-ahead for walks through a structure).
    pub fn get(&mut self, offset: u64, len: u64) -> Result<&[u8]> {
        let (start, end) = self.clamp(offset, len);
        if start < end {
            self.fill(start, end, true)?;
        }
        Ok(self.slice(start, end))
    }

    /// Like [`get`](Self::get), fetching exactly the missing bytes (no read-ahead: a
    /// per-frame index of small records far apart).
    pub fn get_exact(&mut self, offset: u64, len: u64) -> Result<&[u8]> {
        let (start, end) = self.clamp(offset, len);
        if start < end {
            self.fill(start, end, false)?;
        }
        Ok(self.slice(start, end))
    }

    /// Fetches the missing parts of many ranges in one [`RangeSource::read_ranges`]
    /// call (exact, no read-ahead); ranges are clamped to the object.
    pub fn get_many(&mut self, ranges: &[(u64, u64)]) -> Result<()> {
        let mut gaps = Vec::new();
        for &(offset, len) in ranges {
            let (start, end) = self.clamp(offset, len);
            gaps.extend(self.missing(start, end));
        }
        // Requested ranges may overlap or touch: ask for their union, once.
        gaps.sort_unstable();
        let mut want: Vec<(u64, u64)> = Vec::new();
        for (s, e) in gaps {
            match want.last_mut() {
                Some((ps, pl)) if s <= *ps + *pl => *pl = (*pl).max(e - *ps),
                _ => want.push((s, e - s)),
            }
        }
        if want.is_empty() {
            return Ok(());
        }
        let total = want.iter().map(|&(_, l)| l).sum();
        self.account(total)?;
        self.requests += want.len() as u64;
        let got = self.source.read_ranges(&want)?;
        if got.len() != want.len() {
            return Err(Error::Invalid(format!(
                "the source answered {} of {} ranges",
                got.len(),
                want.len()
            )));
        }
        for (&(s, l), data) in want.iter().zip(&got) {
            self.store(s, data, l)?;
        }
        Ok(())
    }

    /// Whether `offset .. offset + len` has been fetched.
    pub fn has(&self, offset: u64, len: u64) -> bool {
        let (start, end) = self.clamp(offset, len);
        start >= end || self.missing(start, end).is_empty()
    }

    /// The fetched byte ranges, in order.
    pub fn fetched_ranges(&self) -> Vec<(u64, u64)> {
        self.have.iter().map(|(&s, &e)| (s, e)).collect()
    }

    /// Writes `byte` over everything not fetched (tests: a reader's answer must not
    /// depend on the bytes a walker skipped).
    #[doc(hidden)]
    pub fn fill_unfetched(&mut self, byte: u8) {
        let gaps = self.missing(0, self.len);
        if let Some(map) = self.map.as_mut() {
            for (s, e) in gaps {
                map[s as usize..e as usize].fill(byte);
            }
        }
    }

    /// The image as the bytes a reader opens (read-only from here on).
    pub fn into_bytes(self) -> Bytes {
        match self.map {
            None => Bytes::new(),
            Some(m) => match m.make_read_only() {
                Ok(ro) => Bytes::from_owner(ro),
                // Could not change the protection: the writable map is never written again.
                Err(_) => Bytes::new(),
            },
        }
    }
}

/// What a protobuf structure walk does with one length-delimited field (see
/// [`walk_protobuf`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtoField<M> {
    /// A sub-message of schema type `M`: walked field by field.
    Message(M),
    /// Tensor values (packed floats, raw bytes): not fetched when at least the walk's
    /// `skip_min` bytes long.
    Payload,
    /// Anything else (names, parameters): fetched whole.
    Fetch,
}

/// Nesting limit of [`walk_protobuf`] (prost's recursion limit).
const MAX_PROTO_DEPTH: usize = 100;

/// Fetches the structure of the protobuf message `start..end` of `image` whose schema
/// type is `root`: every key and length, every field `schema(type, field number)` says
/// to fetch, recursively into sub-messages, and no payload of `skip_min` bytes or more.
/// Malformed wire data ends the walk of that message quietly: the reader that later
/// opens the image finds the same bytes and names the problem.
///
/// ```
/// use tensorfmt_core::ranged::{walk_protobuf, ProtoField, SparseImage};
/// // message { bytes payload = 1; string name = 2; }: a 5000-byte payload, then a name.
/// let mut file = vec![0x0a, 0x88, 0x27];
/// file.extend(vec![7u8; 5000]);
/// file.extend([0x12, 2, b'h', b'i']);
/// let mut src = |o: u64, l: u64| Ok(bytes::Bytes::copy_from_slice(&file[o as usize..(o + l) as usize]));
/// let mut image = SparseImage::new(&mut src, 5007, 64, u64::MAX)?;
/// let schema = |_: (), field: u32| if field == 1 { ProtoField::Payload } else { ProtoField::Fetch };
/// walk_protobuf(&mut image, 0, 5007, (), &schema, 1024)?;
/// assert!(image.has(5003, 4) && !image.has(1000, 1));
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
pub fn walk_protobuf<M: Copy>(
    image: &mut SparseImage<'_>,
    start: u64,
    end: u64,
    root: M,
    schema: &dyn Fn(M, u32) -> ProtoField<M>,
    skip_min: u64,
) -> Result<()> {
    let end = end.min(image.len());
    walk_message(image, start, end, Some(root), schema, skip_min, 0, None)?;
    Ok(())
}

/// A varint at `pos` (before `end`): its value and the position after it.
fn proto_varint(image: &mut SparseImage<'_>, pos: u64, end: u64) -> Result<Option<(u64, u64)>> {
    let b = image.get(pos, 10.min(end.saturating_sub(pos)))?;
    let mut v = 0u64;
    for (i, &x) in b.iter().enumerate() {
        if i == 9 && x > 1 {
            return Ok(None);
        }
        v |= u64::from(x & 0x7f) << (7 * i);
        if x & 0x80 == 0 {
            return Ok(Some((v, pos + i as u64 + 1)));
        }
    }
    Ok(None)
}

/// Walks `pos..end` as message `msg` (`None`: a group, every field fetched); returns
/// where the walk stopped (after the closing END_GROUP of `group`).
#[allow(clippy::too_many_arguments)]
fn walk_message<M: Copy>(
    image: &mut SparseImage<'_>,
    mut pos: u64,
    end: u64,
    msg: Option<M>,
    schema: &dyn Fn(M, u32) -> ProtoField<M>,
    skip_min: u64,
    depth: usize,
    group: Option<u64>,
) -> Result<u64> {
    if depth > MAX_PROTO_DEPTH {
        return Ok(end);
    }
    while pos < end {
        let Some((key, at)) = proto_varint(image, pos, end)? else {
            return Ok(end);
        };
        let (field, wire) = (key >> 3, key & 7);
        if field == 0 || field > u64::from(u32::MAX >> 3) {
            return Ok(end);
        }
        pos = match wire {
            0 => match proto_varint(image, at, end)? {
                Some((_, next)) => next,
                None => return Ok(end),
            },
            1 => at + 8,
            5 => at + 4,
            2 => {
                let Some((len, body)) = proto_varint(image, at, end)? else {
                    return Ok(end);
                };
                let Some(stop) = body.checked_add(len).filter(|&s| s <= end) else {
                    return Ok(end);
                };
                let what = msg.map_or(ProtoField::Fetch, |m| schema(m, field as u32));
                match what {
                    ProtoField::Message(m) => {
                        walk_message(
                            image,
                            body,
                            stop,
                            Some(m),
                            schema,
                            skip_min,
                            depth + 1,
                            None,
                        )?;
                    }
                    ProtoField::Payload if len >= skip_min => {}
                    ProtoField::Payload | ProtoField::Fetch => {
                        image.get(body, len)?;
                    }
                }
                stop
            }
            3 => walk_message(
                image,
                at,
                end,
                None,
                schema,
                skip_min,
                depth + 1,
                Some(field),
            )?,
            4 if group == Some(field) => return Ok(at),
            _ => return Ok(end),
        };
    }
    Ok(pos.min(end))
}

/// How a tensor's bytes are stored, as a virtual (reference-only) dataset sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Verbatim in the file where the layout says (little-endian unless `big_endian`).
    Bytes {
        /// The runs, as the reader declares them.
        layout: SourceLayout,
        /// Elements stored big-endian (npy `>` dtypes); little-endian otherwise.
        big_endian: bool,
    },
    /// Verbatim, little-endian, in another file beside this one (an ONNX model's
    /// external data), where the layout says.
    Beside {
        /// The other file.
        file: BesideFile,
        /// The runs, in that file.
        layout: SourceLayout,
    },
    /// Not a byte range of the file (decoded, computed or gathered): why.
    NotVirtual(String),
}

/// The file a [`Placement::Beside`] tensor lies in: a relative location the format's
/// reader checked lexically (no `..`, not absolute), to be resolved against the
/// directory of the described file and checked against its size by the caller.
///
/// ```
/// use tensorfmt_core::ranged::{BesideFile, Placement};
/// use tensorfmt_core::SourceLayout;
/// let p = Placement::Beside {
///     file: BesideFile { location: "model.onnx.data".into(), to_end: false },
///     layout: SourceLayout::contiguous(4096, 24), // 6 floats at 4096 in that file
/// };
/// assert!(matches!(p, Placement::Beside { ref file, .. } if file.location.ends_with(".data")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BesideFile {
    /// Relative location, `/`-separated.
    pub location: String,
    /// True when the tensor's bytes must end where the file ends (ONNX external data
    /// without a `length` runs to the end of its file).
    pub to_end: bool,
}

/// One tensor of a [`VirtualFile`].
#[derive(Debug, Clone, PartialEq)]
pub struct VirtualTensor {
    /// Name, dtype and shape, as the reader lists them.
    pub info: TensorInfo,
    /// Where its bytes are.
    pub placement: Placement,
    /// Whether axis 0 counts frames or entries (one chunk each), rather than being an
    /// ordinary axis chunked by size.
    pub frame_axis: bool,
}

/// What a file holds, described from its structure alone (no tensor values read).
#[derive(Debug, Clone, PartialEq)]
pub struct VirtualFile {
    /// Format name (`pvp`, `som`, ...).
    pub format: String,
    /// File kind within the format: its identifier (`TensorFile::kind_id`), as `to=` takes it.
    pub kind: String,
    /// The reader's description of the kind.
    pub description: String,
    /// Header fields.
    pub header: Vec<(String, FieldValue)>,
    /// What the lenient reader accepted.
    pub warnings: Vec<String>,
    /// Every tensor, in the reader's order.
    pub tensors: Vec<VirtualTensor>,
    /// The file's length.
    pub file_len: u64,
    /// Bytes fetched to describe it.
    pub fetched: u64,
    /// Requests made.
    pub requests: u64,
}

/// A regular zarr chunk grid over a tensor's stored bytes: every chunk is `chunk_len`
/// contiguous bytes at its offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkGrid {
    /// Shape of one chunk, in the tensor's (logical, row-major) axis order.
    pub chunk_shape: Vec<usize>,
    /// Chunks along each axis.
    pub grid_shape: Vec<usize>,
    /// Element order inside a chunk's bytes (column-major: zarr's transpose codec).
    pub order: Order,
    /// Bytes per chunk.
    pub chunk_len: u64,
    /// Offset of every chunk, in row-major order of `grid_shape`.
    pub offsets: Vec<u64>,
}

fn product(v: &[usize]) -> Option<u64> {
    v.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64))
}

/// Cuts a contiguous block of shape `block` into chunks of at most `target` bytes,
/// each contiguous: leading axes 1, then a divisor of one axis, then whole axes.
fn split_block(block: &[usize], itemsize: u64, target: u64) -> Vec<usize> {
    let mut c = block.to_vec();
    for i in 0..c.len() {
        let inner = product(&block[i + 1..])
            .and_then(|p| p.checked_mul(itemsize))
            .unwrap_or(u64::MAX);
        if block[i] <= 1 {
            continue;
        }
        if inner.saturating_mul(block[i] as u64) <= target {
            return c; // fits from here on
        }
        // The largest divisor of block[i] whose slab fits; none: one, and go deeper.
        let d = (1..=block[i])
            .rev()
            .filter(|d| block[i].is_multiple_of(*d))
            .find(|&d| inner.saturating_mul(d as u64) <= target)
            .unwrap_or(1);
        c[i] = d;
        if d > 1 || inner <= target {
            return c;
        }
    }
    c
}

/// The zarr chunk grid of a tensor of `shape` (elements of `itemsize` bytes) whose
/// bytes lie as `layout` says: each stored piece (a frame, a patch, a blob) becomes one
/// chunk or is cut into equal contiguous chunks, one per index of axis 0 when
/// `frame_axis`, else of at most `target` bytes where the piece is larger. An error
/// (a sentence) when the pieces do not tile the shape regularly.
pub fn chunk_grid(
    shape: &[usize],
    itemsize: usize,
    layout: &SourceLayout,
    frame_axis: bool,
    target: u64,
) -> std::result::Result<ChunkGrid, String> {
    let itemsize = itemsize as u64;
    // Storage axes: the bytes are row-major over these.
    let dims: Vec<usize> = match layout.order {
        Order::RowMajor => shape.to_vec(),
        Order::ColumnMajor => shape.iter().rev().copied().collect(),
    };
    let numel = product(&dims).ok_or("the element count overflows")?;
    let piece_len = layout
        .runs
        .iter()
        .find(|r| r.byte_len() != Some(0))
        .map(|r| r.len);
    let mut pieces: Vec<u64> = Vec::new();
    for r in &layout.runs {
        if !r.is_regular() {
            return Err("a run overlaps itself or overflows".into());
        }
        if r.byte_len() == Some(0) {
            continue;
        }
        if Some(r.len) != piece_len {
            return Err("the stored pieces differ in length".into());
        }
        let n = r.piece_count().ok_or("the piece count overflows")?;
        if n > (1 << 32) {
            return Err(format!("{n} stored pieces are too many chunks"));
        }
        pieces.extend(r.pieces());
    }
    if numel == 0 {
        // Nothing stored: chunks of the shape (at least 1 per axis), none present.
        return Ok(ChunkGrid {
            chunk_shape: shape.iter().map(|&d| d.max(1)).collect(),
            grid_shape: shape.iter().map(|&d| usize::from(d > 0)).collect(),
            order: layout.order,
            chunk_len: 0,
            offsets: Vec::new(),
        });
    }
    let piece_len = piece_len.ok_or("no stored bytes")?;
    if piece_len % itemsize != 0 {
        return Err(format!(
            "pieces of {piece_len} bytes are not whole {itemsize}-byte elements"
        ));
    }
    let elems = piece_len / itemsize;
    if (pieces.len() as u64).checked_mul(elems) != Some(numel) {
        return Err(format!(
            "{} pieces of {elems} elements do not hold the {numel} elements of {shape:?}",
            pieces.len()
        ));
    }
    // The chunk of one piece: leading 1s, a divisor of one axis, then whole axes.
    let mut c = dims.clone();
    if !dims.is_empty() {
        let mut found = false;
        for j in (0..dims.len()).rev() {
            let suffix = product(&dims[j + 1..]).ok_or("the element count overflows")?;
            if elems.is_multiple_of(suffix) {
                let d = elems / suffix;
                if d >= 1 && d <= dims[j] as u64 && (dims[j] as u64).is_multiple_of(d) {
                    for (t, x) in c.iter_mut().enumerate() {
                        if t < j {
                            *x = 1;
                        } else if t == j {
                            *x = d as usize;
                        }
                    }
                    found = true;
                    break;
                }
            }
            if suffix > elems {
                break;
            }
        }
        if !found {
            return Err(format!(
                "pieces of {elems} elements do not tile {shape:?} regularly"
            ));
        }
    }
    // Cut each piece further where wanted.
    let cc = if frame_axis && layout.order == Order::RowMajor && !c.is_empty() && c[0] > 1 {
        let mut cc = c.clone();
        cc[0] = 1;
        cc
    } else if !frame_axis && piece_len > target {
        split_block(&c, itemsize, target)
    } else {
        c.clone()
    };
    let per_piece = c
        .iter()
        .zip(&cc)
        .map(|(&a, &b)| (a / b) as u64)
        .product::<u64>();
    let chunk_len = product(&cc).ok_or("overflow")? * itemsize;
    let total = (pieces.len() as u64)
        .checked_mul(per_piece)
        .filter(|&n| n <= (1 << 32))
        .ok_or("too many chunks")?;
    let mut offsets = Vec::with_capacity(total as usize);
    for p in pieces {
        for k in 0..per_piece {
            offsets.push(p + k * chunk_len);
        }
    }
    let grid: Vec<usize> = dims.iter().zip(&cc).map(|(&d, &x)| d / x).collect();
    let (chunk_shape, grid_shape, offsets) = match layout.order {
        Order::RowMajor => (cc, grid, offsets),
        Order::ColumnMajor => {
            // Storage grid is the reversed logical grid: transpose the offsets.
            let logical: Vec<usize> = grid.iter().rev().copied().collect();
            let n = logical.len();
            let mut out = vec![0u64; offsets.len()];
            let mut idx = vec![0usize; n];
            for slot in out.iter_mut() {
                // Storage index of logical index `idx` is `idx` reversed.
                let mut s = 0usize;
                for (t, &g) in grid.iter().enumerate() {
                    s = s * g + idx[n - 1 - t];
                }
                *slot = offsets[s];
                for t in (0..n).rev() {
                    idx[t] += 1;
                    if idx[t] < logical[t] {
                        break;
                    }
                    idx[t] = 0;
                }
            }
            (cc.into_iter().rev().collect(), logical, out)
        }
    };
    Ok(ChunkGrid {
        chunk_shape,
        grid_shape,
        order: layout.order,
        chunk_len,
        offsets,
    })
}

/// The zarr v3 `data_type` of a dtype (`None`: zarr has none, as for bfloat16).
///
/// ```
/// use tensorfmt_core::{ranged::zarr_data_type, DType};
/// assert_eq!(zarr_data_type(DType::F32), Some("float32"));
/// assert_eq!(zarr_data_type(DType::BF16), None);
/// ```
pub fn zarr_data_type(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F16 => "float16",
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::I8 => "int8",
        DType::I16 => "int16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::U8 => "uint8",
        DType::U16 => "uint16",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
        DType::Bool => "bool",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SourceRun;

    fn counting(data: Vec<u8>) -> impl FnMut(u64, u64) -> Result<Bytes> {
        move |o, l| Ok(Bytes::copy_from_slice(&data[o as usize..(o + l) as usize]))
    }

    #[test]
    fn image_fetches_blocks_once_and_exact_ranges_exactly() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let mut src = counting(data.clone());
        let mut img = SparseImage::new(&mut src, 10_000, 1000, u64::MAX).unwrap();
        assert_eq!(img.get(999, 2).unwrap(), &data[999..1001]);
        assert_eq!((img.fetched(), img.requests()), (2000, 1));
        assert_eq!(img.get(500, 1000).unwrap(), &data[500..1500]);
        assert_eq!(img.requests(), 1);
        assert_eq!(img.get_exact(5000, 3).unwrap(), &data[5000..5003]);
        assert_eq!(img.fetched(), 2003);
        img.get_many(&[(5001, 10), (7000, 5), (7002, 5)]).unwrap();
        assert_eq!(img.fetched(), 2003 + 8 + 7);
        assert!(img.has(5000, 11) && !img.has(4999, 2));
        // The end of the object: shorter answers, no fetch past it.
        assert_eq!(img.get(9990, 100).unwrap(), &data[9990..]);
        assert_eq!(img.get(20_000, 5).unwrap(), &[] as &[u8]);
        img.fill_unfetched(0xee);
        let b = img.into_bytes();
        assert_eq!(&b[..2000], &data[..2000]);
        assert_eq!(b[2500], 0xee);
        assert_eq!(&b[7000..7007], &data[7000..7007]);
    }

    #[test]
    fn image_refuses_short_answers_and_caps_fetching() {
        let mut short = |_o: u64, l: u64| Ok(Bytes::from(vec![0u8; l as usize - 1]));
        let mut img = SparseImage::new(&mut short, 100, 10, u64::MAX).unwrap();
        assert!(img
            .get(0, 4)
            .unwrap_err()
            .to_string()
            .contains("did it change"));
        let mut src = counting(vec![1u8; 100]);
        let mut img = SparseImage::new(&mut src, 100, 10, 25).unwrap();
        img.get(0, 20).unwrap();
        assert!(matches!(img.get(50, 20), Err(Error::LimitExceeded { .. })));
        let mut src = counting(Vec::new());
        let img = SparseImage::new(&mut src, 0, 10, 25).unwrap();
        assert!(img.into_bytes().is_empty());
    }

    fn grid(shape: &[usize], item: usize, l: SourceLayout, frames: bool, t: u64) -> ChunkGrid {
        chunk_grid(shape, item, &l, frames, t).unwrap()
    }

    #[test]
    fn pieces_become_chunks() {
        // Weights: frames x patches pieces of one patch each.
        let l = SourceLayout {
            order: Order::RowMajor,
            runs: vec![SourceRun {
                offset: 112,
                len: 36,
                repeat: vec![(2, 1000), (4, 44)],
            }],
        };
        let g = grid(&[2, 1, 4, 3, 3, 1], 4, l, true, 1 << 20);
        assert_eq!(g.chunk_shape, [1, 1, 1, 3, 3, 1]);
        assert_eq!(g.grid_shape, [2, 1, 4, 1, 1, 1]);
        assert_eq!(g.offsets, [112, 156, 200, 244, 1112, 1156, 1200, 1244]);
        // One contiguous block of entries: one chunk per entry along the frame axis.
        let g = grid(
            &[3, 2, 2],
            4,
            SourceLayout::contiguous(40, 48),
            true,
            1 << 20,
        );
        assert_eq!(
            (g.chunk_shape, g.offsets),
            (vec![1, 2, 2], vec![40, 56, 72])
        );
        // ... or by size otherwise.
        let g = grid(&[6, 4], 4, SourceLayout::contiguous(0, 96), false, 32);
        assert_eq!((g.chunk_shape, g.grid_shape), (vec![2, 4], vec![3, 1]));
        assert_eq!(g.offsets, [0, 32, 64]);
        // A row over the target: rows cut too.
        let g = grid(&[2, 10], 1, SourceLayout::contiguous(0, 20), false, 4);
        assert_eq!((g.chunk_shape, g.grid_shape), (vec![1, 2], vec![2, 5]));
        assert_eq!(g.offsets, [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
        // A scalar.
        let g = grid(&[], 8, SourceLayout::contiguous(8, 8), false, 4);
        assert_eq!((g.chunk_shape.len(), g.offsets), (0, vec![8]));
    }

    #[test]
    fn column_major_grids_are_transposed() {
        // A 4x6 column-major tensor (storage [6][4]), cut in chunks of two columns.
        let mut l = SourceLayout::contiguous(100, 96);
        l.order = Order::ColumnMajor;
        let g = grid(&[4, 6], 4, l, false, 32);
        assert_eq!((g.chunk_shape, g.grid_shape), (vec![4, 2], vec![1, 3]));
        assert_eq!(g.offsets, [100, 132, 164]);
        let mut l = SourceLayout::contiguous(0, 24);
        l.order = Order::ColumnMajor;
        let g = grid(&[2, 3, 4], 1, l, false, 2);
        // Storage [4][3][2], chunks [1][1][2] -> logical chunk [2, 1, 1], grid [1, 3, 4].
        assert_eq!(
            (g.chunk_shape, g.grid_shape),
            (vec![2, 1, 1], vec![1, 3, 4])
        );
        // Logical chunk (0, j, k) is storage chunk (k, j, 0): offset (k*3 + j) * 2.
        let want: Vec<u64> = (0..3)
            .flat_map(|j| (0..4).map(move |k| (k * 3 + j) * 2))
            .collect();
        assert_eq!(g.offsets, want);
    }

    #[test]
    fn irregular_layouts_are_refused() {
        let l = SourceLayout {
            order: Order::RowMajor,
            runs: vec![SourceRun::contiguous(0, 12), SourceRun::contiguous(20, 8)],
        };
        assert!(chunk_grid(&[5], 4, &l, false, 1 << 20).is_err());
        assert!(chunk_grid(&[3, 2], 4, &SourceLayout::contiguous(0, 20), false, 64).is_err());
        let l = SourceLayout {
            order: Order::RowMajor,
            runs: vec![SourceRun {
                offset: 0,
                len: 12,
                repeat: vec![(2, 12)],
            }],
        };
        // Two pieces of 3 elements hold 6, not the 8 of [2, 2, 2]; they tile [2, 3]
        // but not [3, 2].
        assert!(chunk_grid(&[2, 2, 2], 4, &l, false, 64).is_err());
        assert!(chunk_grid(&[3, 2], 4, &l, false, 64).is_err());
        assert!(chunk_grid(&[2, 3], 4, &l, false, 64).is_ok());
    }
}
