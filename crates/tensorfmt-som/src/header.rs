//! Raw on-disk structures: the `#` comment block (spec §2), the code tables (§3) and
//! the version-2 binary header (§4), parsed field by field with byte offsets.

use tensorfmt_core::DType;

use crate::{Result, SomError};

/// The exact text of the line that ends a comment block.
pub const END_OF_HEADER: &str = "# END OF HEADER";

/// The comment block at the start of a file.
///
/// ```
/// use tensorfmt_som::CommentBlock;
/// let c = CommentBlock::parse(b"# hello\n# END OF HEADER\n\x02\0\0\0")?;
/// assert_eq!(c.lines, vec!["# hello".to_string()]);
/// assert!(c.end_line);
/// assert_eq!(c.len, 24);
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommentBlock {
    /// The comment lines in file order, each with its leading `#`, without the line
    /// ending and without the `# END OF HEADER` line.
    pub lines: Vec<String>,
    /// True when the block was closed by an exact `# END OF HEADER` line.
    pub end_line: bool,
    /// Length of the block in bytes (the binary header starts here).
    pub len: usize,
}

/// How many comment lines [`CommentSpan`] decodes (the header shows them).
pub const SHOWN_COMMENT_LINES: usize = 16;

/// The comment block's extent, without its lines: how many there are, where the block
/// ends, and the first [`SHOWN_COMMENT_LINES`] decoded. What a reader keeps (a file of
/// 10 million comment lines costs no more than one of 16); the lines are decoded from
/// the file's bytes when asked for ([`SomFile::comment_lines`](crate::SomFile::comment_lines)).
///
/// ```
/// use tensorfmt_som::CommentSpan;
/// let s = CommentSpan::scan(b"# a\n# b\n# END OF HEADER\n\x02\0\0\0")?;
/// assert_eq!((s.count, s.end_line, s.len), (2, true, 24));
/// assert_eq!(s.first, vec!["# a", "# b"]);
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommentSpan {
    /// Number of comment lines (the `# END OF HEADER` line not counted).
    pub count: usize,
    /// The first [`SHOWN_COMMENT_LINES`] lines, as [`CommentBlock::lines`] has them.
    pub first: Vec<String>,
    /// True when the block was closed by an exact `# END OF HEADER` line.
    pub end_line: bool,
    /// Length of the block in bytes (the binary header starts here).
    pub len: usize,
}

impl CommentSpan {
    /// Scans the comment block with [`CommentBlock::parse`]'s rules, keeping only the
    /// first lines.
    pub fn scan(bytes: &[u8]) -> Result<CommentSpan> {
        let mut first = Vec::new();
        let mut count = 0;
        let (end_line, len) = walk_comments(bytes, &mut |line| {
            if count < SHOWN_COMMENT_LINES {
                first.push(String::from_utf8_lossy(line).into_owned());
            }
            count += 1;
        })?;
        Ok(CommentSpan {
            count,
            first,
            end_line,
            len,
        })
    }
}

/// Walks the comment block (see [`CommentBlock::parse`]), handing each comment line
/// (without its line ending) to `line`; returns whether an END line closed it and the
/// block's length.
fn walk_comments(bytes: &[u8], line: &mut dyn FnMut(&[u8])) -> Result<(bool, usize)> {
    let mut pos = 0usize;
    while bytes.get(pos) == Some(&b'#') {
        let nl = bytes[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .ok_or(SomError::UnterminatedComment { offset: pos as u64 })?;
        let mut text = &bytes[pos..pos + nl];
        pos += nl + 1;
        if let Some(l) = text.strip_suffix(b"\r") {
            text = l;
        }
        if text == END_OF_HEADER.as_bytes() {
            return Ok((true, pos));
        }
        line(text);
    }
    Ok((false, pos))
}

/// The comment lines of a block already scanned (`block`: its bytes, `..len`), each
/// decoded when reached. Infallible: a line the scan would refuse (none, for the bytes
/// it scanned) ends the walk.
pub(crate) fn block_lines(block: &[u8]) -> impl Iterator<Item = std::borrow::Cow<'_, str>> + '_ {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        if block.get(pos) != Some(&b'#') {
            return None;
        }
        let nl = block[pos..].iter().position(|&b| b == b'\n')?;
        let mut text = &block[pos..pos + nl];
        pos += nl + 1;
        if let Some(l) = text.strip_suffix(b"\r") {
            text = l;
        }
        (text != END_OF_HEADER.as_bytes()).then(|| String::from_utf8_lossy(text))
    })
}

impl CommentBlock {
    /// Parses the comment block with PINK's C++ semantics: consume lines starting with
    /// `#`; stop after an exact `# END OF HEADER` line (one trailing `\r` tolerated) or
    /// before the first line not starting with `#`. A line without a newline before
    /// the end of the file is an error.
    pub fn parse(bytes: &[u8]) -> Result<CommentBlock> {
        let mut lines = Vec::new();
        let (end_line, len) = walk_comments(bytes, &mut |line| {
            lines.push(String::from_utf8_lossy(line).into_owned());
        })?;
        Ok(CommentBlock {
            lines,
            end_line,
            len,
        })
    }

    /// The block of `span`, its lines decoded from `bytes` (the file the span was
    /// scanned from).
    pub(crate) fn from_block(bytes: &[u8], span: &CommentSpan) -> CommentBlock {
        let block = bytes.get(..span.len).unwrap_or(bytes);
        CommentBlock {
            lines: block_lines(block).map(|l| l.into_owned()).collect(),
            end_line: span.end_line,
            len: span.len,
        }
    }

    /// The comment texts without the leading `#` and one following space.
    pub fn texts(&self) -> Vec<&str> {
        self.lines
            .iter()
            .map(|l| {
                let t = l.strip_prefix('#').unwrap_or(l);
                t.strip_prefix(' ').unwrap_or(t)
            })
            .collect()
    }
}

/// The four PINK file types (second header integer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// 0: training / mapping input images.
    Data,
    /// 1: a self-organising map.
    Som,
    /// 2: distances of every entry to every neuron.
    Mapping,
    /// 3: best rotation and flip of every entry for every neuron.
    RotFlip,
}

impl FileKind {
    /// The code written in the header.
    pub fn code(self) -> i32 {
        match self {
            FileKind::Data => 0,
            FileKind::Som => 1,
            FileKind::Mapping => 2,
            FileKind::RotFlip => 3,
        }
    }

    /// The kind of a code.
    pub fn from_code(code: i32) -> Option<FileKind> {
        Some(match code {
            0 => FileKind::Data,
            1 => FileKind::Som,
            2 => FileKind::Mapping,
            3 => FileKind::RotFlip,
            _ => return None,
        })
    }

    /// Short name: `data`, `SOM`, `mapping`, `rotation/flip`.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Data => "data",
            FileKind::Som => "SOM",
            FileKind::Mapping => "mapping",
            FileKind::RotFlip => "rotation/flip",
        }
    }
}

/// The element type codes 0..=9 of the spec (§3.2). PINK itself only uses 0 (f32).
///
/// ```
/// use tensorfmt_som::DataType;
/// assert_eq!(DataType::from_code(6).unwrap().dtype(), tensorfmt_core::DType::U8);
/// assert!(DataType::from_code(10).is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataType(DType);

impl DataType {
    /// f32, code 0: the only type PINK reads and writes.
    pub const F32: DataType = DataType(DType::F32);
    const TABLE: [DType; 10] = [
        DType::F32,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// The type of a header code.
    pub fn from_code(code: i32) -> Option<DataType> {
        usize::try_from(code)
            .ok()
            .and_then(|c| Self::TABLE.get(c))
            .map(|&d| DataType(d))
    }

    /// The type storing a dtype, if the format has one (no f16, bf16 or bool).
    pub fn from_dtype(dtype: DType) -> Option<DataType> {
        Self::TABLE.contains(&dtype).then_some(DataType(dtype))
    }

    /// The header code.
    pub fn code(self) -> i32 {
        Self::TABLE.iter().position(|&d| d == self.0).unwrap_or(0) as i32
    }

    /// The element type.
    pub fn dtype(self) -> DType {
        self.0
    }
}

/// A layout block as written: `code, rank, dims`, with the offset of its code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLayout {
    /// Layout code (0 cartesian, 1 hexagonal).
    pub code: i32,
    /// Dims in header order.
    pub dims: Vec<usize>,
    /// Absolute offset of the code field.
    pub offset: u64,
}

/// The version-2 binary header, as read (before the payload size is checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawHeader {
    /// The comment block before the header (its extent; the lines stay in the file).
    pub comments: CommentSpan,
    /// Version field (2).
    pub version: i32,
    /// File type.
    pub kind: FileKind,
    /// Element type (rotation/flip files have none: their records are fixed).
    pub data_type: Option<DataType>,
    /// Entry count for data, mapping and rotation/flip files.
    pub n_entries: Option<u64>,
    /// Offset of the n_entries field (the streaming writer patches it).
    pub n_entries_offset: Option<u64>,
    /// SOM layout (SOM, mapping, rotation/flip).
    pub som_layout: Option<RawLayout>,
    /// Data layout (data files) or neuron layout (SOM files).
    pub item_layout: Option<RawLayout>,
    /// Absolute offset of the payload.
    pub payload_offset: usize,
}

/// Reads little-endian i32 header fields, tracking the absolute offset.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8], pos: usize) -> Cursor<'a> {
        Cursor { buf, pos }
    }

    pub(crate) fn i32(&mut self, field: &str) -> Result<i32> {
        let end = self.pos.checked_add(4);
        match end.and_then(|e| self.buf.get(self.pos..e)) {
            Some(b) => {
                self.pos += 4;
                Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            }
            None => Err(SomError::HeaderTruncated {
                field: field.to_string(),
                offset: self.pos as u64,
                len: self.buf.len() as u64,
            }),
        }
    }
}

/// Options of the header parser.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ParseRules {
    pub max_rank: usize,
    pub max_entries: u64,
    pub strict: bool,
}

fn read_layout(c: &mut Cursor<'_>, field: &'static str, rules: &ParseRules) -> Result<RawLayout> {
    let offset = c.pos as u64;
    let code = c.i32(&format!("{field} code"))?;
    if code != 0 && code != 1 {
        return Err(SomError::BadLayout {
            field,
            offset,
            value: code,
            reason: "expected 0 (cartesian) or 1 (hexagonal)",
        });
    }
    let rank_off = c.pos as u64;
    let rank = c.i32(&format!("{field} rank"))?;
    if rank < 1 || rank as usize > rules.max_rank {
        return Err(SomError::BadRank {
            field,
            offset: rank_off,
            value: rank,
            max: rules.max_rank,
        });
    }
    let mut dims = Vec::with_capacity(rank as usize);
    for index in 0..rank as usize {
        let off = c.pos as u64;
        let v = c.i32(&format!("{field} dim {index}"))?;
        if v <= 0 {
            return Err(SomError::BadDim {
                field,
                index,
                offset: off,
                value: v,
            });
        }
        dims.push(v as usize);
    }
    if code == 1 && (dims.len() != 2 || dims[0] != dims[1] || dims[0] % 2 == 0) {
        return Err(SomError::BadHexagonal {
            field,
            offset,
            dims,
        });
    }
    Ok(RawLayout { code, dims, offset })
}

fn read_entries(c: &mut Cursor<'_>, kind: FileKind, rules: &ParseRules) -> Result<(u64, u64)> {
    let offset = c.pos as u64;
    let v = c.i32("n_entries")?;
    if v < 0 {
        return Err(SomError::BadEntryCount {
            offset,
            value: v.into(),
            reason: "negative",
        });
    }
    if v == 0 && (kind == FileKind::Data || rules.strict) {
        return Err(SomError::BadEntryCount {
            offset,
            value: 0,
            reason: "PINK requires at least one entry",
        });
    }
    if v as u64 > rules.max_entries {
        return Err(SomError::LimitExceeded {
            what: "n_entries",
            value: v as u64,
            limit: rules.max_entries,
        });
    }
    Ok((v as u64, offset))
}

/// Parses the comment block and the version-2 header from the start of a file.
/// Only the header bytes are needed; payload sizes are checked by the caller.
pub(crate) fn parse_v2(buf: &[u8], rules: &ParseRules) -> Result<RawHeader> {
    let comments = CommentSpan::scan(buf)?;
    let mut c = Cursor::new(buf, comments.len);
    let version_off = c.pos as u64;
    let version = c.i32("version")?;
    if version != 2 {
        return Err(SomError::NotPink {
            offset: version_off,
            value: version.into(),
            detail: "expected 2".into(),
        });
    }
    let kind_off = c.pos as u64;
    let code = c.i32("file_type")?;
    let kind = FileKind::from_code(code).ok_or(SomError::BadFileType {
        offset: kind_off,
        value: code,
    })?;
    let data_type = if kind == FileKind::RotFlip {
        None
    } else {
        let off = c.pos as u64;
        let v = c.i32("data_type")?;
        let t = DataType::from_code(v).ok_or(SomError::BadDataType {
            offset: off,
            value: v,
        })?;
        // What PINK reads (data files and SOMs) is f32; its mapping outputs are
        // read by pyink and us only, which take every type.
        if rules.strict && t != DataType::F32 && matches!(kind, FileKind::Data | FileKind::Som) {
            return Err(SomError::NotPinkDataType {
                offset: off,
                value: v,
                dtype: t.dtype(),
                som: kind == FileKind::Som,
            });
        }
        Some(t)
    };
    let (mut n_entries, mut n_entries_offset) = (None, None);
    if kind != FileKind::Som {
        let (n, off) = read_entries(&mut c, kind, rules)?;
        n_entries = Some(n);
        n_entries_offset = Some(off);
    }
    let (som_layout, item_layout) = match kind {
        FileKind::Data => {
            let l = read_layout(&mut c, "data layout", rules)?;
            if l.code != 0 {
                return Err(SomError::BadLayout {
                    field: "data layout",
                    offset: l.offset,
                    value: l.code,
                    reason: "data images must be cartesian",
                });
            }
            (None, Some(l))
        }
        FileKind::Som => {
            let s = read_layout(&mut c, "SOM layout", rules)?;
            let n = read_layout(&mut c, "neuron layout", rules)?;
            if n.code != 0 {
                return Err(SomError::BadLayout {
                    field: "neuron layout",
                    offset: n.offset,
                    value: n.code,
                    reason: "neurons must be cartesian",
                });
            }
            (Some(s), Some(n))
        }
        FileKind::Mapping | FileKind::RotFlip => {
            (Some(read_layout(&mut c, "SOM layout", rules)?), None)
        }
    };
    Ok(RawHeader {
        comments,
        version,
        kind,
        data_type,
        n_entries,
        n_entries_offset,
        som_layout,
        item_layout,
        payload_offset: c.pos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> ParseRules {
        ParseRules {
            max_rank: 8,
            max_entries: u64::MAX,
            strict: false,
        }
    }

    fn ints(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn comment_rules() {
        // No comments.
        let c = CommentBlock::parse(&ints(&[2])).unwrap();
        assert_eq!((c.len, c.end_line, c.lines.len()), (0, false, 0));
        // Stops before the first non-# line without END.
        let c = CommentBlock::parse(b"# a\n#b\n\x02\0\0\0").unwrap();
        assert_eq!(c.lines, vec!["# a", "#b"]);
        assert!(!c.end_line);
        assert_eq!(c.len, 7);
        // CRLF END line tolerated; nothing after END is scanned.
        let c = CommentBlock::parse(b"# a\r\n# END OF HEADER\r\n# not a comment\n").unwrap();
        assert_eq!(c.lines, vec!["# a"]);
        assert!(c.end_line);
        assert_eq!(c.len, 22);
        // END with a trailing space is an ordinary comment line.
        let c = CommentBlock::parse(b"# END OF HEADER \n\x02").unwrap();
        assert!(!c.end_line);
        assert_eq!(c.texts(), vec!["END OF HEADER "]);
        // Unterminated.
        assert!(matches!(
            CommentBlock::parse(b"# a\n# b"),
            Err(SomError::UnterminatedComment { offset: 4 })
        ));
    }

    #[test]
    fn data_header_fields_and_offsets() {
        let b = ints(&[2, 0, 0, 1000, 0, 2, 128, 128]);
        let h = parse_v2(&b, &rules()).unwrap();
        assert_eq!(h.kind, FileKind::Data);
        assert_eq!(h.n_entries, Some(1000));
        assert_eq!(h.n_entries_offset, Some(12));
        assert_eq!(h.item_layout.unwrap().dims, vec![128, 128]);
        assert_eq!(h.payload_offset, 32);
    }

    #[test]
    fn rotflip_has_no_data_type() {
        let b = ints(&[2, 3, 12, 0, 2, 3, 3]);
        let h = parse_v2(&b, &rules()).unwrap();
        assert_eq!(h.data_type, None);
        assert_eq!(h.n_entries_offset, Some(8));
        assert_eq!(h.payload_offset, 28);
    }

    #[test]
    fn header_errors_name_fields_and_offsets() {
        let e = |v: &[i32]| parse_v2(&ints(v), &rules()).unwrap_err();
        assert!(matches!(
            e(&[2, 4]),
            SomError::BadFileType {
                offset: 4,
                value: 4
            }
        ));
        assert!(matches!(
            e(&[2, 0, 10]),
            SomError::BadDataType {
                offset: 8,
                value: 10
            }
        ));
        assert!(matches!(
            e(&[2, 0, 0, -1]),
            SomError::BadEntryCount { offset: 12, .. }
        ));
        assert!(matches!(
            e(&[2, 0, 0, 0]),
            SomError::BadEntryCount {
                offset: 12,
                value: 0,
                ..
            }
        ));
        assert!(matches!(
            e(&[2, 0, 0, 1, 2]),
            SomError::BadLayout {
                offset: 16,
                value: 2,
                ..
            }
        ));
        assert!(matches!(
            e(&[2, 0, 0, 1, 1, 2, 3, 3]),
            SomError::BadLayout {
                field: "data layout",
                ..
            }
        ));
        assert!(matches!(
            e(&[2, 0, 0, 1, 0, 0]),
            SomError::BadRank {
                offset: 20,
                value: 0,
                ..
            }
        ));
        assert!(matches!(
            e(&[2, 0, 0, 1, 0, 9]),
            SomError::BadRank {
                value: 9,
                max: 8,
                ..
            }
        ));
        assert!(matches!(
            e(&[2, 0, 0, 1, 0, 2, 4, 0]),
            SomError::BadDim {
                index: 1,
                offset: 28,
                value: 0,
                ..
            }
        ));
        assert!(matches!(
            e(&[2, 1, 0, 1, 2, 4, 4]),
            SomError::BadHexagonal { offset: 12, .. }
        ));
        assert!(matches!(
            e(&[2, 1, 0, 0, 2, 3, 3, 0, 2, 5]),
            SomError::HeaderTruncated { offset: 40, .. }
        ));
        assert!(matches!(
            e(&[3]),
            SomError::NotPink {
                offset: 0,
                value: 3,
                ..
            }
        ));
        let strict = ParseRules {
            strict: true,
            ..rules()
        };
        assert!(parse_v2(&ints(&[2, 2, 0, 0, 0, 1, 3]), &rules()).is_ok());
        assert!(parse_v2(&ints(&[2, 2, 0, 0, 0, 1, 3]), &strict).is_err());
    }
}
