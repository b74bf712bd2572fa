//! The reader: [`SomFile`] opens any PINK file (v2, or legacy when recognisable),
//! checks every declared size against the bytes present, and gives typed, zero-copy
//! access to entries, neurons, distances and rotation/flip records.

use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use bytes::Bytes;
use tensorfmt_core::{DType, FieldValue, Limits, Order, Shape, Tensor};

use crate::header::{
    block_lines, parse_v2, CommentBlock, CommentSpan, DataType, FileKind, ParseRules, RawHeader,
};
use crate::hex::{hex_count, HexGrid};
// Re-exported: `crate::read::MapLayout` is where it was defined before `layout.rs`.
pub use crate::layout::MapLayout;
use crate::legacy;
use crate::{Result, SomError};

/// Size of one rotation/flip record: `u8 flip` then an unaligned LE `f32 angle`.
pub const ROTFLIP_RECORD: usize = 5;

/// How a file is read.
///
/// ```
/// use tensorfmt_som::{FileKind, ReadConfig};
/// let c = ReadConfig { legacy_kind: Some(FileKind::Mapping), ..ReadConfig::default() };
/// assert!(c.legacy && !c.strict);
/// ```
#[derive(Debug, Clone)]
pub struct ReadConfig {
    /// Caps on entry counts, ranks and copies.
    pub limits: Limits,
    /// Strict mode: ranks 1..=3 only, no empty mapping/rotation-flip files, no trailing
    /// bytes, flip bytes 0 or 1 only. Lenient (default): ranks up to 8, the rest warned.
    pub strict: bool,
    /// Recognise pre-version-2 files by size arithmetic (default true). Ambiguous
    /// files are rejected unless [`ReadConfig::legacy_kind`] names the kind.
    pub legacy: bool,
    /// The kind a legacy file is expected to be.
    pub legacy_kind: Option<FileKind>,
    /// The kind its name suggests (`.map`: a mapping): chooses among several legacy
    /// readings that fit, with a warning, where [`ReadConfig::legacy_kind`] is not given.
    pub legacy_guess: Option<(FileKind, String)>,
}

impl Default for ReadConfig {
    fn default() -> ReadConfig {
        ReadConfig {
            limits: Limits::default(),
            strict: false,
            legacy: true,
            legacy_kind: None,
            legacy_guess: None,
        }
    }
}

/// Best rotation and flip of one entry for one neuron.
///
/// ```
/// use tensorfmt_som::RotFlip;
/// let r = RotFlip { flip_byte: 1, angle: std::f32::consts::FRAC_PI_2 };
/// assert!(r.flipped());
/// assert_eq!(r.transform_index(4), 5); // rotation 1 of 4, then flipped
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RotFlip {
    /// The raw flip byte (0 or 1; any non-zero value means flipped).
    pub flip_byte: u8,
    /// Rotation angle in radians.
    pub angle: f32,
}

impl RotFlip {
    /// True when the image was flipped (row order reversed) after rotating.
    pub fn flipped(&self) -> bool {
        self.flip_byte != 0
    }

    /// PINK's transform index `k = round(angle * numrot / 2pi) + flip * numrot`
    /// (files from PINK >= 2.5 and 1.x).
    pub fn transform_index(&self, numrot: u32) -> u64 {
        let n = numrot.max(1) as f64;
        let k = (self.angle as f64 * n / std::f64::consts::TAU).round();
        let k = (k.max(0.0) as u64) % n as u64;
        k + if self.flipped() { n as u64 } else { 0 }
    }

    /// The transform index for files of PINK 2.0 to 2.4.1, which wrote
    /// `angle = k * pi / (8 * numrot)` (upstream issue #52).
    pub fn legacy_transform_index(&self, numrot: u32) -> u64 {
        let n = numrot.max(1) as f64;
        let k = (self.angle as f64 * 8.0 * n / std::f64::consts::PI).round();
        let k = (k.max(0.0) as u64) % n as u64;
        k + if self.flipped() { n as u64 } else { 0 }
    }
}

/// A PINK file opened for reading.
///
/// ```
/// use tensorfmt_som::{FileKind, SomFile};
/// let mut b = Vec::new();
/// for v in [2i32, 0, 0, 2, 0, 2, 1, 3] { b.extend_from_slice(&v.to_le_bytes()); }
/// for v in [1f32, 2., 3., 4., 5., 6.] { b.extend_from_slice(&v.to_le_bytes()); }
/// let f = SomFile::from_bytes(b.into())?;
/// assert_eq!(f.kind(), FileKind::Data);
/// assert_eq!(f.entry(1)?.to_vec::<f32>()?, vec![4., 5., 6.]);
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
#[derive(Debug, Clone)]
pub struct SomFile {
    data: Bytes,
    /// The comment block's extent (its lines stay in `data`).
    comment_span: CommentSpan,
    /// Every comment line, decoded on first use ([`SomFile::comments`]).
    comments: OnceLock<CommentBlock>,
    version: i32,
    legacy: Option<&'static str>,
    kind: FileKind,
    data_type: Option<DataType>,
    n_entries: Option<u64>,
    n_entries_offset: Option<u64>,
    map: Option<MapLayout>,
    som_layout_code: Option<i32>,
    hex_inferred: bool,
    item_dims: Vec<usize>,
    fields: Vec<(String, FieldValue)>,
    payload_offset: usize,
    /// Bytes of one unit: an entry (data, mapping, rotation/flip) or a neuron (SOM).
    unit_bytes: usize,
    /// Units in the payload.
    units: usize,
    warnings: Vec<String>,
    limits: Limits,
}

fn checked_product(v: &[usize], what: &'static str, offset: u64) -> Result<usize> {
    v.iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .ok_or(SomError::Overflow { what, offset })
}

fn layout_field(code: i32, dims: &[usize]) -> FieldValue {
    FieldValue::Map(vec![
        ("code".into(), code.into()),
        ("dims".into(), dims.to_vec().into()),
    ])
}

impl SomFile {
    /// Maps a file and opens it with the default [`ReadConfig`].
    pub fn open(path: impl AsRef<Path>) -> Result<SomFile> {
        SomFile::open_with(path, &ReadConfig::default())
    }

    /// Maps a file and opens it.
    pub fn open_with(path: impl AsRef<Path>, config: &ReadConfig) -> Result<SomFile> {
        let data = tensorfmt_core::io::map_file(path)?;
        SomFile::from_bytes_with(data, config)
    }

    /// Opens a whole file held in memory with the default [`ReadConfig`].
    pub fn from_bytes(data: Bytes) -> Result<SomFile> {
        SomFile::from_bytes_with(data, &ReadConfig::default())
    }

    /// Opens a whole file held in memory.
    pub fn from_bytes_with(data: Bytes, config: &ReadConfig) -> Result<SomFile> {
        let rules = ParseRules {
            max_rank: if config.strict { 3 } else { 8 }.min(config.limits.max_rank.max(1)),
            max_entries: config.limits.max_items,
            strict: config.strict,
        };
        let v2 = match parse_v2(&data, &rules) {
            Ok(raw) => {
                let len = data.len() as u64;
                return SomFile::resolve_v2(data, len, raw, config);
            }
            Err(e) => e,
        };
        if matches!(v2, SomError::UnterminatedComment { .. }) || !config.legacy {
            return Err(v2);
        }
        let comments = CommentSpan::scan(&data)?;
        let mut cands = legacy::candidates(&data, &comments, data.len() as u64);
        if let Some(k) = config.legacy_kind {
            cands.retain(|c| c.kind == k);
        }
        let not_v2 = matches!(v2, SomError::NotPink { .. });
        // Several readings fit: the one of the kind the name suggests, if just one is.
        if let (true, Some((g, why))) = (not_v2 && cands.len() > 1, &config.legacy_guess) {
            if let [c] = &cands.iter().filter(|c| c.kind == *g).collect::<Vec<_>>()[..] {
                let others: Vec<String> = cands
                    .iter()
                    .filter(|o| o.kind != *g)
                    .map(|o| o.describe())
                    .collect();
                let mut file = SomFile::from_legacy(data, comments, (*c).clone(), config)?;
                file.warnings.push(format!(
                    "ambiguous legacy file read as {} because {why}; it also fits {} \
                     (name the kind to read it otherwise)",
                    g.name(),
                    others.join(", ")
                ));
                return Ok(file);
            }
        }
        match cands.len() {
            1 => {
                let c = cands.pop().expect("one candidate");
                SomFile::from_legacy(data, comments, c, config)
            }
            0 if not_v2 => {
                let SomError::NotPink { offset, value, .. } = v2 else {
                    return Err(v2);
                };
                let detail = if comments.count > 0 && !comments.end_line {
                    "comment lines without `# END OF HEADER` followed by a non-v2 header \
                     (legacy files need the END line; this may be the unreleased 2018 development format)"
                        .to_string()
                } else {
                    format!(
                        "no legacy (pre-v2) interpretation fits the {} bytes",
                        data.len()
                    )
                };
                Err(SomError::NotPink {
                    offset,
                    value,
                    detail,
                })
            }
            0 => Err(v2),
            _ if not_v2 => Err(SomError::LegacyAmbiguous {
                candidates: cands.iter().map(|c| c.describe()).collect(),
                len: data.len() as u64,
            }),
            _ => Err(v2),
        }
    }

    /// Resolves the geometry of a parsed v2 header for a file of `len` bytes (`data`
    /// may be empty when only the header is known, as when sniffing).
    pub(crate) fn resolve_v2(
        data: Bytes,
        len: u64,
        raw: RawHeader,
        config: &ReadConfig,
    ) -> Result<SomFile> {
        let off = raw.payload_offset as u64;
        let present = len.checked_sub(off).ok_or(SomError::HeaderTruncated {
            field: "payload".into(),
            offset: off,
            len,
        })?;
        let hdr_off = raw.comments.len as u64;
        let data_type = raw.data_type;
        let elem = data_type.map_or(ROTFLIP_RECORD, |d| d.dtype().size());
        let mut fields: Vec<(String, FieldValue)> = vec![
            ("comments".into(), raw.comments.first.clone().into()),
            ("comment_lines".into(), raw.comments.count.into()),
            ("end_of_header".into(), raw.comments.end_line.into()),
            ("version".into(), raw.version.into()),
            ("file_type".into(), raw.kind.code().into()),
        ];
        if let Some(d) = data_type {
            fields.push(("data_type".into(), d.code().into()));
        }
        if let Some(n) = raw.n_entries {
            fields.push(("n_entries".into(), n.into()));
        }
        let n_entries = raw.n_entries.unwrap_or(1);

        // Map geometry with hexagonal inference (spec §7).
        let mut hex_inferred = false;
        let map = match &raw.som_layout {
            None => None,
            Some(l) => {
                fields.push(("som_layout".into(), layout_field(l.code, &l.dims)));
                let cart = checked_product(&l.dims, "SOM neuron count", l.offset)?;
                let per_neuron = match (&raw.item_layout, raw.kind) {
                    (Some(n), FileKind::Som) => checked_product(&n.dims, "neuron size", n.offset)?,
                    _ => 1,
                } as u64;
                let unit = per_neuron
                    .checked_mul(elem as u64)
                    .and_then(|u| {
                        u.checked_mul(if raw.kind == FileKind::Som {
                            1
                        } else {
                            n_entries
                        })
                    })
                    .ok_or(SomError::Overflow {
                        what: "payload size",
                        offset: hdr_off,
                    })?;
                if l.code == 1 {
                    // Check the count before building the grid (its row table has d + 1
                    // entries and an empty mapping does not back d with bytes).
                    let n = hex_count(l.dims[0]).unwrap_or(usize::MAX) as u64;
                    if n > config.limits.max_items {
                        return Err(SomError::LimitExceeded {
                            what: "neuron count",
                            value: n,
                            limit: config.limits.max_items,
                        });
                    }
                    Some(MapLayout::Hexagonal(HexGrid::new(l.dims[0])?))
                } else {
                    let d = l.dims[0];
                    let hex = (l.dims.len() == 2 && l.dims[1] == d && d > 1)
                        .then(|| hex_count(d))
                        .flatten();
                    let cart_bytes = (cart as u64).checked_mul(unit);
                    match (hex, cart_bytes) {
                        (Some(h), Some(cb))
                            if unit > 0 && present == h as u64 * unit && present != cb =>
                        {
                            hex_inferred = true;
                            Some(MapLayout::Hexagonal(HexGrid::new(d)?))
                        }
                        (Some(h), Some(cb))
                            if unit > 0 && present > h as u64 * unit && present < cb =>
                        {
                            return Err(SomError::MapSizeMismatch {
                                offset: off,
                                dims: l.dims.clone(),
                                cartesian: cb,
                                hexagonal: h as u64 * unit,
                                actual: present,
                            });
                        }
                        _ => Some(MapLayout::Cartesian(l.dims.clone())),
                    }
                }
            }
        };
        if let Some(l) = &raw.item_layout {
            let name = if raw.kind == FileKind::Data {
                "data_layout"
            } else {
                "neuron_layout"
            };
            fields.push((name.into(), layout_field(l.code, &l.dims)));
        }
        let item_dims = raw
            .item_layout
            .as_ref()
            .map(|l| l.dims.clone())
            .unwrap_or_default();
        let item_elems = checked_product(&item_dims, "image size", hdr_off)?;
        let neurons = map.as_ref().map_or(1, |m| m.neuron_count());
        // Mapping and rotation/flip files with zero entries do not back the map size
        // with bytes, so the neuron count is capped like any other item count.
        if neurons as u64 > config.limits.max_items {
            return Err(SomError::LimitExceeded {
                what: "neuron count",
                value: neurons as u64,
                limit: config.limits.max_items,
            });
        }
        let (unit_elems, units) = match raw.kind {
            FileKind::Data => (item_elems, n_entries),
            FileKind::Som => (item_elems, neurons as u64),
            FileKind::Mapping | FileKind::RotFlip => (neurons, n_entries),
        };
        let unit_bytes = unit_elems.checked_mul(elem).ok_or(SomError::Overflow {
            what: "entry size",
            offset: hdr_off,
        })?;
        let expected = (unit_bytes as u64)
            .checked_mul(units)
            .ok_or(SomError::Overflow {
                what: "payload size",
                offset: hdr_off,
            })?;
        fields.push(("header_bytes".into(), off.into()));
        fields.push(("payload_bytes".into(), expected.into()));
        let what = match raw.kind {
            FileKind::Data => "data entries",
            FileKind::Som => "neurons",
            FileKind::Mapping => "mapping entries",
            FileKind::RotFlip => "rotation/flip entries",
        };
        let mut warnings = Vec::new();
        check_payload(
            what,
            off,
            expected,
            present,
            unit_bytes as u64,
            config,
            &mut warnings,
        )?;
        if hex_inferred {
            warnings.push(format!(
                "hexagonal layout inferred from the payload size (the header says cartesian {:?}, as the PINK program writes)",
                map.as_ref().map(|m| m.dims()).unwrap_or_default()
            ));
        }
        let file = SomFile {
            data,
            comment_span: raw.comments,
            comments: OnceLock::new(),
            version: raw.version,
            legacy: None,
            kind: raw.kind,
            data_type,
            n_entries: raw.n_entries,
            n_entries_offset: raw.n_entries_offset,
            som_layout_code: raw.som_layout.as_ref().map(|l| l.code),
            map,
            hex_inferred,
            item_dims,
            fields,
            payload_offset: raw.payload_offset,
            unit_bytes,
            units: usize::try_from(units).map_err(|_| SomError::Overflow {
                what: "entry count",
                offset: hdr_off,
            })?,
            warnings,
            limits: config.limits,
        };
        file.check_flips(config)?;
        Ok(file)
    }

    fn from_legacy(
        data: Bytes,
        comments: CommentSpan,
        c: legacy::Candidate,
        config: &ReadConfig,
    ) -> Result<SomFile> {
        let mut fields: Vec<(String, FieldValue)> = vec![
            ("comments".into(), comments.first.clone().into()),
            ("comment_lines".into(), comments.count.into()),
            ("end_of_header".into(), comments.end_line.into()),
            ("legacy_format".into(), c.format.into()),
            ("file_type".into(), c.kind.code().into()),
        ];
        for (k, v) in &c.fields {
            fields.push(((*k).into(), (*v).into()));
        }
        if c.hex {
            fields.push(("hexagonal".into(), true.into()));
        }
        fields.push(("header_bytes".into(), c.payload_offset.into()));
        fields.push(("payload_bytes".into(), c.payload_len.into()));
        let neurons = c.map.as_ref().map_or(1, |m| m.neuron_count());
        let item: usize = c.item_dims.iter().product();
        let (unit_bytes, units) = match c.kind {
            FileKind::Data => (item * 4, c.n_entries.unwrap_or(0)),
            FileKind::Som => (item * 4, neurons as u64),
            FileKind::Mapping => (neurons * 4, c.n_entries.unwrap_or(0)),
            FileKind::RotFlip => (neurons * ROTFLIP_RECORD, c.n_entries.unwrap_or(0)),
        };
        let mut warnings = vec![format!("legacy file read as {}", c.describe())];
        if c.trailing > 0 {
            if config.strict {
                return Err(SomError::TrailingBytes {
                    offset: c.payload_offset as u64 + c.payload_len,
                    count: c.trailing,
                });
            }
            warnings.push(format!("{} unexpected bytes after the payload", c.trailing));
        }
        let file = SomFile {
            data,
            comment_span: comments,
            comments: OnceLock::new(),
            version: c.version,
            legacy: Some(c.format),
            kind: c.kind,
            data_type: (c.kind != FileKind::RotFlip).then_some(DataType::F32),
            n_entries: c.n_entries,
            n_entries_offset: None,
            som_layout_code: None,
            hex_inferred: c.hex,
            map: c.map,
            item_dims: c.item_dims,
            fields,
            payload_offset: c.payload_offset,
            unit_bytes,
            units: units as usize,
            warnings,
            limits: config.limits,
        };
        file.check_flips(config)?;
        Ok(file)
    }

    fn check_flips(&self, config: &ReadConfig) -> Result<()> {
        if self.kind != FileKind::RotFlip || !config.strict {
            return Ok(());
        }
        let p = &self.data[self.payload_offset..self.payload_offset + self.payload_len()];
        for (i, rec) in p.chunks_exact(ROTFLIP_RECORD).enumerate() {
            if rec[0] > 1 {
                return Err(SomError::BadFlip {
                    offset: (self.payload_offset + i * ROTFLIP_RECORD) as u64,
                    value: rec[0],
                });
            }
        }
        Ok(())
    }

    // ---- general information ----

    /// The file type.
    pub fn kind(&self) -> FileKind {
        self.kind
    }

    /// The comment block, every line decoded from the file on the first call (the
    /// file keeps only its extent: [`SomFile::comment_count`], [`SomFile::comment_lines`]).
    pub fn comments(&self) -> &CommentBlock {
        self.comments
            .get_or_init(|| CommentBlock::from_block(&self.data, &self.comment_span))
    }

    /// The number of comment lines (without the `# END OF HEADER` line).
    pub fn comment_count(&self) -> usize {
        self.comment_span.count
    }

    /// The comment lines in file order, each decoded when reached (as
    /// [`CommentBlock::lines`] has them: with the leading `#`, without line endings).
    ///
    /// ```
    /// let mut b = b"# one\n# two\n# END OF HEADER\n".to_vec();
    /// for v in [2i32, 0, 0, 1, 0, 1, 1] { b.extend_from_slice(&v.to_le_bytes()); }
    /// b.extend_from_slice(&1f32.to_le_bytes());
    /// let f = tensorfmt_som::SomFile::from_bytes(b.into())?;
    /// assert_eq!(f.comment_count(), 2);
    /// assert_eq!(f.comment_lines().nth(1).as_deref(), Some("# two"));
    /// # Ok::<(), tensorfmt_som::SomError>(())
    /// ```
    pub fn comment_lines(&self) -> impl Iterator<Item = std::borrow::Cow<'_, str>> + '_ {
        let block = self.data.get(..self.comment_span.len).unwrap_or(&self.data);
        block_lines(block)
    }

    /// Format version: 2, or 1 / 0 for legacy files.
    pub fn version(&self) -> i32 {
        self.version
    }

    /// For legacy files, the recognised format (`v1`, `pre-1.0 (5-int header)`, ...).
    pub fn legacy_format(&self) -> Option<&'static str> {
        self.legacy
    }

    /// Element type code (none for rotation/flip files).
    pub fn data_type(&self) -> Option<DataType> {
        self.data_type
    }

    /// Element type of data, SOM and mapping payloads (`u8`/`f32` pairs for
    /// rotation/flip files are reported as `None`).
    pub fn dtype(&self) -> Option<DType> {
        self.data_type.map(DataType::dtype)
    }

    /// Entry count (data, mapping and rotation/flip files).
    pub fn n_entries(&self) -> Option<u64> {
        self.n_entries
    }

    /// Absolute offset of the n_entries field (v2 files).
    pub fn n_entries_offset(&self) -> Option<u64> {
        self.n_entries_offset
    }

    /// The map layout (SOM, mapping and rotation/flip files).
    pub fn map_layout(&self) -> Option<&MapLayout> {
        self.map.as_ref()
    }

    /// The SOM layout code as written (PINK writes 0 even for hexagonal maps).
    pub fn som_layout_code(&self) -> Option<i32> {
        self.som_layout_code
    }

    /// True when the map is hexagonal although the header says cartesian.
    pub fn hex_inferred(&self) -> bool {
        self.hex_inferred
    }

    /// Dims of one data entry (data files).
    pub fn entry_dims(&self) -> Option<&[usize]> {
        (self.kind == FileKind::Data).then_some(&self.item_dims[..])
    }

    /// Dims of one neuron (SOM files): `[n, n]` or `[channels, n, n]`.
    pub fn neuron_dims(&self) -> Option<&[usize]> {
        (self.kind == FileKind::Som).then_some(&self.item_dims[..])
    }

    /// Header fields in file order (for `inspect`). The comment block is bounded:
    /// `comments` holds its first [`SHOWN_COMMENT_LINES`](crate::SHOWN_COMMENT_LINES)
    /// lines and `comment_lines` counts them all ([`SomFile::comments`] has every line).
    pub fn header_fields(&self) -> &[(String, FieldValue)] {
        &self.fields
    }

    /// Absolute offset of the payload.
    pub fn payload_offset(&self) -> usize {
        self.payload_offset
    }

    /// Length of the payload in bytes (trailing bytes excluded).
    pub fn payload_len(&self) -> usize {
        self.unit_bytes * self.units
    }

    /// Warnings found while opening (inferred layouts, trailing bytes, legacy).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The whole file.
    pub fn bytes(&self) -> &Bytes {
        &self.data
    }

    fn need(&self, op: &'static str, kind: FileKind) -> Result<()> {
        if self.kind == kind {
            Ok(())
        } else {
            Err(SomError::WrongKind {
                operation: op,
                expected: kind.name(),
                actual: self.kind.name(),
            })
        }
    }

    /// Units `range` (entries or neurons) as a tensor of `dtype` with dims
    /// `[range.len(), rest...]`: a zero-copy slice when aligned, one copy otherwise.
    fn units_tensor(&self, range: Range<usize>, rest: &[usize]) -> Result<Tensor> {
        let dtype = self.dtype().unwrap_or(DType::U8);
        let start = self.payload_offset + range.start * self.unit_bytes;
        let end = self.payload_offset + range.end * self.unit_bytes;
        let bytes = self.data.slice(start..end);
        let mut dims = Vec::with_capacity(rest.len() + 1);
        dims.push(range.len());
        dims.extend_from_slice(rest);
        let t = Tensor::from_bytes(dtype, Shape::new(dims.clone()), Order::RowMajor, bytes)?;
        if t.is_aligned() {
            return Ok(t);
        }
        self.limits.check_alloc((end - start) as u64)?;
        Ok(tensorfmt_core::with_element!(dtype, T => {
            Tensor::from_vec(t.to_vec::<T>()?, dims, Order::RowMajor)?
        }))
    }

    fn check_range(&self, what: &'static str, r: &Range<usize>) -> Result<()> {
        if r.start > r.end || r.end > self.units {
            return Err(SomError::OutOfRange {
                what,
                index: format!("{}..{}", r.start, r.end),
                len: format!("0..{}", self.units),
            });
        }
        Ok(())
    }

    // ---- data files ----

    /// Entry `k` of a data file, `[*entry_dims]`, zero-copy when aligned. O(1).
    pub fn entry(&self, k: usize) -> Result<Tensor> {
        self.need("entry", FileKind::Data)?;
        if k >= self.units {
            return Err(SomError::OutOfRange {
                what: "entry",
                index: k.to_string(),
                len: format!("0..{}", self.units),
            });
        }
        Ok(self
            .units_tensor(k..k + 1, &self.item_dims)?
            .reshape(self.item_dims.clone())?)
    }

    /// Entries `range` of a data file, `[len, *entry_dims]`.
    pub fn entries(&self, range: Range<usize>) -> Result<Tensor> {
        self.need("entries", FileKind::Data)?;
        self.check_range("entries", &range)?;
        self.units_tensor(range, &self.item_dims)
    }

    /// Streams entries (data, mapping) or neurons (SOM) in pieces of at most about
    /// `max_bytes` (at least one entry): memory stays bounded by one piece.
    pub fn entry_chunks(
        &self,
        range: Range<usize>,
        max_bytes: usize,
    ) -> Result<impl Iterator<Item = Result<Tensor>> + '_> {
        if self.kind == FileKind::RotFlip {
            return Err(SomError::WrongKind {
                operation: "entry_chunks",
                expected: "data, SOM or mapping",
                actual: self.kind.name(),
            });
        }
        self.check_range("entries", &range)?;
        let step = (max_bytes / self.unit_bytes.max(1)).max(1);
        let rest = self.item_rest();
        let mut pos = range.start;
        Ok(std::iter::from_fn(move || {
            if pos >= range.end {
                return None;
            }
            let end = (pos + step).min(range.end);
            let r = pos..end;
            pos = end;
            Some(self.chunk(r, &rest))
        }))
    }

    fn item_rest(&self) -> Vec<usize> {
        match self.kind {
            FileKind::Data => self.item_dims.clone(),
            FileKind::Som => self.item_dims.clone(),
            FileKind::Mapping => self
                .map
                .as_ref()
                .map(|m| m.export_dims())
                .unwrap_or_default(),
            FileKind::RotFlip => vec![self.map.as_ref().map_or(0, |m| m.neuron_count())],
        }
    }

    fn chunk(&self, r: Range<usize>, rest: &[usize]) -> Result<Tensor> {
        self.units_tensor(r, rest)
    }

    // ---- SOM files ----

    /// Number of neurons (SOM, mapping, rotation/flip files).
    pub fn neuron_count(&self) -> Option<usize> {
        self.map.as_ref().map(|m| m.neuron_count())
    }

    /// Neuron `i` (storage order), `[*neuron_dims]`, zero-copy when aligned.
    pub fn neuron(&self, i: usize) -> Result<Tensor> {
        self.need("neuron", FileKind::Som)?;
        if i >= self.units {
            return Err(SomError::OutOfRange {
                what: "neuron",
                index: i.to_string(),
                len: format!("0..{}", self.units),
            });
        }
        Ok(self
            .units_tensor(i..i + 1, &self.item_dims)?
            .reshape(self.item_dims.clone())?)
    }

    /// The neuron at a cartesian position (C order over the header dims; PINK writes
    /// width first), or at axial `[q, row]` on a hexagonal map.
    pub fn neuron_at(&self, pos: &[usize]) -> Result<Tensor> {
        self.need("neuron_at", FileKind::Som)?;
        let map = self.map.as_ref().expect("SOM files have a map");
        let i = map.index(pos).ok_or_else(|| SomError::OutOfRange {
            what: "neuron position",
            index: format!("{pos:?}"),
            len: format!("{:?}", map.dims()),
        })?;
        self.neuron(i)
    }

    /// The whole SOM: `[*som_dims, *neuron_dims]` (cartesian) or `[neurons, *neuron_dims]`
    /// (hexagonal), zero-copy when aligned.
    pub fn som_tensor(&self) -> Result<Tensor> {
        self.need("som_tensor", FileKind::Som)?;
        let t = self.units_tensor(0..self.units, &self.item_dims)?;
        let mut dims = self.map.as_ref().expect("map").export_dims();
        dims.extend_from_slice(&self.item_dims);
        Ok(t.reshape(dims)?)
    }

    /// Axial coordinates `[neurons, 2]` (i32 `(q, row)`) of a hexagonal map.
    pub fn hex_axial(&self) -> Result<Tensor> {
        let Some(MapLayout::Hexagonal(g)) = &self.map else {
            return Err(SomError::WrongKind {
                operation: "hex_axial",
                expected: "hexagonal map",
                actual: "cartesian or map-less",
            });
        };
        self.limits.check_alloc(g.len() as u64 * 8)?;
        let v: Vec<i32> = (0..g.len())
            .flat_map(|i| {
                let (q, r) = g.axial(i).expect("in range");
                [q as i32, r as i32]
            })
            .collect();
        Ok(Tensor::from_vec(v, [g.len(), 2], Order::RowMajor)?)
    }

    // ---- mapping files ----

    /// Distances `[len, *som export dims]` of entries `range` of a mapping file.
    pub fn distances(&self, range: Range<usize>) -> Result<Tensor> {
        self.need("distances", FileKind::Mapping)?;
        self.check_range("entries", &range)?;
        self.units_tensor(range, &self.item_rest())
    }

    /// Best-matching neuron (argmin of the distances, NaNs ignored; `None` when all
    /// are NaN) of every entry of a mapping file, streamed with bounded memory.
    pub fn best_matches(&self) -> Result<Vec<Option<usize>>> {
        self.need("best_matches", FileKind::Mapping)?;
        let neurons = self.neuron_count().unwrap_or(0);
        self.limits.check_alloc(self.units as u64 * 16)?;
        let mut out = Vec::with_capacity(self.units.min(1 << 20));
        for chunk in self.entry_chunks(0..self.units, 1 << 22)? {
            let v = chunk?.cast(DType::F64)?.to_vec::<f64>()?;
            for row in v.chunks(neurons.max(1)) {
                let mut best: Option<(usize, f64)> = None;
                for (i, &x) in row.iter().enumerate() {
                    if !x.is_nan() && best.is_none_or(|(_, b)| x < b) {
                        best = Some((i, x));
                    }
                }
                out.push(best.map(|b| b.0));
            }
        }
        Ok(out)
    }

    /// Best-match counts per neuron (storage order).
    pub fn bmu_counts(&self) -> Result<Vec<u64>> {
        let neurons = self.neuron_count().unwrap_or(0);
        self.limits.check_alloc(neurons as u64 * 8)?;
        let mut counts = vec![0u64; neurons];
        for i in self.best_matches()?.into_iter().flatten() {
            counts[i] += 1;
        }
        Ok(counts)
    }

    // ---- rotation/flip files ----

    /// The record of entry `e` for neuron `n`.
    pub fn rotflip(&self, e: usize, n: usize) -> Result<RotFlip> {
        self.need("rotflip", FileKind::RotFlip)?;
        let neurons = self.neuron_count().unwrap_or(0);
        if e >= self.units || n >= neurons {
            return Err(SomError::OutOfRange {
                what: "record",
                index: format!("({e}, {n})"),
                len: format!("({}, {neurons})", self.units),
            });
        }
        let at = self.payload_offset + (e * neurons + n) * ROTFLIP_RECORD;
        let r = &self.data[at..at + ROTFLIP_RECORD];
        Ok(RotFlip {
            flip_byte: r[0],
            angle: f32::from_le_bytes([r[1], r[2], r[3], r[4]]),
        })
    }

    /// Flip bytes (u8) and angles (f32), each `[len, neurons]`, of entries `range`.
    pub fn rotflip_tensors(&self, range: Range<usize>) -> Result<(Tensor, Tensor)> {
        self.need("rotflip_tensors", FileKind::RotFlip)?;
        self.check_range("entries", &range)?;
        let neurons = self.neuron_count().unwrap_or(0);
        let start = self.payload_offset + range.start * self.unit_bytes;
        let end = self.payload_offset + range.end * self.unit_bytes;
        self.limits
            .check_alloc(((end - start) / ROTFLIP_RECORD * 4) as u64)?;
        let recs = &self.data[start..end];
        let n = recs.len() / ROTFLIP_RECORD;
        let mut flips = Vec::with_capacity(n);
        let mut angles = Vec::with_capacity(n);
        for r in recs.chunks_exact(ROTFLIP_RECORD) {
            flips.push(r[0]);
            angles.push(f32::from_le_bytes([r[1], r[2], r[3], r[4]]));
        }
        let dims = [range.len(), neurons];
        Ok((
            Tensor::from_vec(flips, dims, Order::RowMajor)?,
            Tensor::from_vec(angles, dims, Order::RowMajor)?,
        ))
    }

    /// Units (entries, or neurons for SOM files) in the payload.
    pub(crate) fn units(&self) -> usize {
        self.units
    }
}

fn check_payload(
    what: &'static str,
    offset: u64,
    expected: u64,
    present: u64,
    unit: u64,
    config: &ReadConfig,
    warnings: &mut Vec<String>,
) -> Result<()> {
    if present < expected {
        return Err(SomError::Truncated {
            what,
            offset,
            expected,
            actual: present,
            complete_entries: present.checked_div(unit).unwrap_or(0),
        });
    }
    if present > expected {
        let count = present - expected;
        if config.strict {
            return Err(SomError::TrailingBytes {
                offset: offset + expected,
                count,
            });
        }
        warnings.push(format!(
            "{count} unexpected bytes after the payload at byte {}",
            offset + expected
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_file(comments: &[u8]) -> Bytes {
        let mut b = comments.to_vec();
        for v in [2i32, 0, 0, 1, 0, 1, 1] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&1f32.to_le_bytes());
        b.into()
    }

    /// The lines decoded on demand are the lines a whole parse gives, for every shape
    /// of block: none, CRLF endings, an END line, no END line, invalid UTF-8, more lines
    /// than the header shows.
    #[test]
    fn comments_decoded_on_demand_match_a_whole_parse() {
        let many: Vec<u8> = (0..40)
            .flat_map(|i| format!("# {i}\n").into_bytes())
            .collect();
        let mut with_end = many.clone();
        with_end.extend_from_slice(b"# END OF HEADER\n");
        for block in [
            &b""[..],
            b"# END OF HEADER\n",
            b"# a\r\n#b\n# END OF HEADER\r\n",
            b"# a\n# \xff\xfe bad\n",
            b"# END OF HEADER \n# x\n# END OF HEADER\n",
            &many,
            &with_end,
        ] {
            let bytes = data_file(block);
            let f = SomFile::from_bytes(bytes.clone()).unwrap();
            let want = CommentBlock::parse(&bytes).unwrap();
            let got: Vec<String> = f.comment_lines().map(|l| l.into_owned()).collect();
            assert_eq!(got, want.lines);
            assert_eq!(f.comment_count(), want.lines.len());
            assert_eq!(f.comments(), &want);
            let shown = f
                .header_fields()
                .iter()
                .find(|(k, _)| k == "comments")
                .map(|(_, v)| v.clone());
            let first: Vec<String> = want.lines.iter().take(16).cloned().collect();
            assert_eq!(shown, Some(first.into()));
        }
    }
}
