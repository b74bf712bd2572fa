//! Writers for the four file types (spec §4, §9): exact v2 headers, optional comment
//! lines always closed by `# END OF HEADER`, the hexagonal layout code (1, or 0 with
//! `pink_cli_compat`), and a streaming data writer that patches the entry count at the
//! end. Path variants write through [`AtomicFile`]: a failed write leaves no file.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use tensorfmt_core::io::AtomicFile;
use tensorfmt_core::{DType, Order, Tensor};

use crate::header::{DataType, FileKind, END_OF_HEADER};
use crate::layout::MapLayout;
use crate::read::RotFlip;
use crate::{Result, SomError};

/// Header choices shared by every writer.
///
/// ```
/// use tensorfmt_som::WriteConfig;
/// let c = WriteConfig { comments: vec!["made by tensorfmt".into()], ..WriteConfig::default() };
/// assert_eq!(c.data_type, tensorfmt_som::DataType::F32);
/// ```
#[derive(Debug, Clone)]
pub struct WriteConfig {
    /// Comment lines: a line starting with `#` is written as is, any other as
    /// `# <text>`. Lines must be ASCII without line breaks. When any is given, the block
    /// is closed by `# END OF HEADER` (PINK's Python tools need it; pyink cannot read
    /// commented files, so leave this empty for pyink users).
    pub comments: Vec<String>,
    /// Element type code (default f32, the only one PINK reads).
    pub data_type: DataType,
    /// Write SOM layout code 0 for hexagonal maps, exactly as the PINK program does
    /// (default: 1, the spec-correct code).
    pub pink_cli_compat: bool,
    /// Write a lone `# END OF HEADER` line when `comments` is empty, as files that have
    /// a bare one do (so that they re-serialise byte for byte; found by the `som`
    /// fuzz target).
    pub end_line: bool,
}

impl Default for WriteConfig {
    fn default() -> WriteConfig {
        WriteConfig {
            comments: Vec::new(),
            data_type: DataType::F32,
            pink_cli_compat: false,
            end_line: false,
        }
    }
}

/// The comment block a writer emits for `config`: its comment lines closed by
/// `# END OF HEADER`, a lone END line for `end_line`, or nothing.
fn comment_block(config: &WriteConfig) -> Result<Vec<u8>> {
    if config.comments.is_empty() && config.end_line {
        return Ok(format!("{END_OF_HEADER}\n").into_bytes());
    }
    encode_comments(&config.comments)
}

/// A comment as its line is written: with a leading `# ` unless it starts with `#`.
pub(crate) fn comment_line(text: &str) -> std::borrow::Cow<'_, str> {
    if text.starts_with('#') {
        text.into()
    } else {
        format!("# {text}").into()
    }
}

/// The comment block for `lines` (empty when there are none).
///
/// ```
/// let b = tensorfmt_som::encode_comments(&["hello".to_string()])?;
/// assert_eq!(b, b"# hello\n# END OF HEADER\n");
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
pub fn encode_comments(lines: &[String]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    if lines.is_empty() {
        return Ok(out);
    }
    for (i, l) in lines.iter().enumerate() {
        if !l.is_ascii() {
            return Err(SomError::BadComment {
                line: i,
                reason: "not ASCII",
            });
        }
        if l.contains(['\n', '\r']) {
            return Err(SomError::BadComment {
                line: i,
                reason: "contains a line break",
            });
        }
        // Compared as written: `END OF HEADER` gets its `# ` and would end the block.
        let line = comment_line(l);
        if line.trim_end_matches('\r') == END_OF_HEADER {
            return Err(SomError::BadComment {
                line: i,
                reason: "the END line is written automatically",
            });
        }
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(END_OF_HEADER.as_bytes());
    out.push(b'\n');
    Ok(out)
}

fn to_i32(v: u64, what: &str) -> Result<i32> {
    i32::try_from(v)
        .map_err(|_| SomError::InvalidInput(format!("{what} {v} does not fit a header i32")))
}

fn push_ints(out: &mut Vec<u8>, v: &[i32]) {
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

/// The largest layout rank PINK reads (its layouts are `CartesianLayout<1..=3>` and
/// the hexagonal one; `validate` refuses more): tensorfmt reads up to 8 leniently, to
/// recover such files, but writes none.
const MAX_WRITTEN_RANK: usize = 3;

fn push_layout(out: &mut Vec<u8>, code: i32, dims: &[usize], what: &str) -> Result<()> {
    if dims.is_empty() || dims.len() > MAX_WRITTEN_RANK {
        return Err(SomError::InvalidInput(format!(
            "{what} rank {} ({dims:?}) is outside 1..={MAX_WRITTEN_RANK}, the ranks PINK \
             reads; nothing was written",
            dims.len()
        )));
    }
    push_ints(out, &[code, dims.len() as i32]);
    for &d in dims {
        if d == 0 {
            return Err(SomError::InvalidInput(format!(
                "{what} dims {dims:?} contain 0"
            )));
        }
        push_ints(out, &[to_i32(d as u64, what)?]);
    }
    Ok(())
}

fn map_code(map: &MapLayout, config: &WriteConfig) -> i32 {
    match map {
        MapLayout::Hexagonal(_) if !config.pink_cli_compat => 1,
        _ => 0,
    }
}

/// The complete header (comments included) of a file. `n_entries` is ignored for SOM
/// files; `item_dims` are the data dims (data) or neuron dims (SOM).
///
/// ```
/// use tensorfmt_som::{encode_header, FileKind, MapLayout, WriteConfig};
/// let h = encode_header(FileKind::Data, 1000, None, &[128, 128], &WriteConfig::default())?;
/// let ints: Vec<i32> = h.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
/// assert_eq!(ints, vec![2, 0, 0, 1000, 0, 2, 128, 128]);
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
pub fn encode_header(
    kind: FileKind,
    n_entries: u64,
    map: Option<&MapLayout>,
    item_dims: &[usize],
    config: &WriteConfig,
) -> Result<Vec<u8>> {
    let mut out = comment_block(config)?;
    push_ints(&mut out, &[2, kind.code()]);
    if kind != FileKind::RotFlip {
        push_ints(&mut out, &[config.data_type.code()]);
    }
    if n_entries == 0 && matches!(kind, FileKind::Mapping | FileKind::RotFlip) {
        // PINK writes one per entry of a data file, which holds at least one; its
        // readers (and `validate`) refuse 0. (A data file's streaming writer writes 0
        // here until it patches the count; a data file of none is refused there.)
        return Err(SomError::InvalidInput(format!(
            "a {} file of no entries (n_entries 0): PINK writes one per data entry and \
             requires at least one; select at least one entry",
            kind.name()
        )));
    }
    if kind != FileKind::Som {
        push_ints(&mut out, &[to_i32(n_entries, "n_entries")?]);
    }
    let need_map = || {
        map.ok_or_else(|| {
            SomError::InvalidInput(format!("a {} file needs a map layout", kind.name()))
        })
    };
    match kind {
        FileKind::Data => push_layout(&mut out, 0, item_dims, "data layout")?,
        FileKind::Som => {
            let m = need_map()?;
            push_layout(&mut out, map_code(m, config), &m.dims(), "SOM layout")?;
            push_layout(&mut out, 0, item_dims, "neuron layout")?;
        }
        FileKind::Mapping | FileKind::RotFlip => {
            let m = need_map()?;
            push_layout(&mut out, map_code(m, config), &m.dims(), "SOM layout")?;
        }
    }
    Ok(out)
}

fn row_major_bytes(t: &Tensor, dtype: DType, what: &str) -> Result<bytes::Bytes> {
    if t.dtype() != dtype {
        return Err(SomError::InvalidInput(format!(
            "{what} is {}, the header declares {dtype} (cast it first)",
            t.dtype()
        )));
    }
    Ok(t.to_order(Order::RowMajor)?.into_bytes())
}

fn check_numel(t: &Tensor, want: usize, what: &str) -> Result<()> {
    if t.numel() != want {
        return Err(SomError::InvalidInput(format!(
            "{what} has {} elements ({}), the layout needs {want}",
            t.numel(),
            t.shape()
        )));
    }
    Ok(())
}

/// Streams data entries into a data file; the entry count is written when finished.
///
/// ```
/// use tensorfmt_core::{Order, Tensor};
/// use tensorfmt_som::{DataWriter, SomFile, WriteConfig};
/// let mut w = DataWriter::new(std::io::Cursor::new(Vec::new()), &[2, 2], &WriteConfig::default())?;
/// w.append(&Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2], Order::RowMajor)?)?;
/// w.append(&Tensor::from_vec(vec![5f32; 8], [2, 2, 2], Order::RowMajor)?)?;
/// let bytes = w.finish()?.into_inner();
/// let f = SomFile::from_bytes(bytes.into())?;
/// assert_eq!(f.n_entries(), Some(3));
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
#[derive(Debug)]
pub struct DataWriter<W: Write + Seek> {
    w: W,
    entry_dims: Vec<usize>,
    entry_bytes: usize,
    dtype: DType,
    count: u64,
    count_offset: u64,
}

impl<W: Write + Seek> DataWriter<W> {
    /// Writes the header (entry count 0 for now) at the current position of `w`.
    pub fn new(mut w: W, entry_dims: &[usize], config: &WriteConfig) -> Result<DataWriter<W>> {
        let start = w.stream_position()?;
        let header = encode_header(FileKind::Data, 0, None, entry_dims, config)?;
        let comments = comment_block(config)?.len() as u64;
        w.write_all(&header)?;
        let dtype = config.data_type.dtype();
        let entry_bytes = entry_dims
            .iter()
            .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
            .ok_or_else(|| SomError::InvalidInput(format!("entry dims {entry_dims:?} overflow")))?;
        Ok(DataWriter {
            w,
            entry_dims: entry_dims.to_vec(),
            entry_bytes,
            dtype,
            count: 0,
            count_offset: start + comments + 12,
        })
    }

    /// Appends one entry (`[*entry_dims]`) or several (`[k, *entry_dims]`) of the
    /// declared dtype.
    pub fn append(&mut self, t: &Tensor) -> Result<()> {
        let d = t.dims();
        let k = if d == self.entry_dims.as_slice() {
            1
        } else if d.len() == self.entry_dims.len() + 1 && d[1..] == self.entry_dims[..] {
            d[0]
        } else {
            return Err(SomError::InvalidInput(format!(
                "cannot append {} to a data file of {:?} entries",
                t.shape(),
                self.entry_dims
            )));
        };
        let b = row_major_bytes(t, self.dtype, "entry")?;
        self.w.write_all(&b)?;
        self.count += k as u64;
        Ok(())
    }

    /// Appends raw little-endian entries (a whole number of entries).
    pub fn append_bytes(&mut self, raw: &[u8]) -> Result<()> {
        if self.entry_bytes == 0 || !raw.len().is_multiple_of(self.entry_bytes) {
            return Err(SomError::InvalidInput(format!(
                "{} bytes are not a whole number of {}-byte entries",
                raw.len(),
                self.entry_bytes
            )));
        }
        self.w.write_all(raw)?;
        self.count += (raw.len() / self.entry_bytes) as u64;
        Ok(())
    }

    /// Entries written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Patches the entry count and returns the sink. PINK requires at least one entry.
    pub fn finish(mut self) -> Result<W> {
        if self.count == 0 {
            return Err(SomError::InvalidInput(
                "a data file needs at least one entry".into(),
            ));
        }
        let n = to_i32(self.count, "n_entries")?;
        self.w.seek(SeekFrom::Start(self.count_offset))?;
        self.w.write_all(&n.to_le_bytes())?;
        self.w.seek(SeekFrom::End(0))?;
        self.w.flush()?;
        Ok(self.w)
    }
}

impl DataWriter<AtomicFile> {
    /// A data file at `path`, created under a temporary name.
    pub fn create(
        path: impl AsRef<Path>,
        entry_dims: &[usize],
        config: &WriteConfig,
    ) -> Result<DataWriter<AtomicFile>> {
        DataWriter::new(AtomicFile::create(path)?, entry_dims, config)
    }

    /// Patches the count and renames the file into place; returns the entry count.
    pub fn commit(self) -> Result<u64> {
        let n = self.count;
        self.finish()?.commit()?;
        Ok(n)
    }
}

/// Writes a whole data file: `data` is `[entries, *entry_dims]`.
pub fn write_data<W: Write>(mut w: W, data: &Tensor, config: &WriteConfig) -> Result<()> {
    let d = data.dims();
    if d.len() < 2 || d[0] == 0 {
        return Err(SomError::InvalidInput(format!(
            "data must be [entries > 0, *image dims], got {}",
            data.shape()
        )));
    }
    let h = encode_header(FileKind::Data, d[0] as u64, None, &d[1..], config)?;
    w.write_all(&h)?;
    w.write_all(&row_major_bytes(data, config.data_type.dtype(), "data")?)?;
    Ok(())
}

/// Writes a SOM file: `som` holds `neurons x prod(neuron_dims)` elements in storage
/// order (any shape; its row-major element order is written).
pub fn write_som<W: Write>(
    mut w: W,
    map: &MapLayout,
    neuron_dims: &[usize],
    som: &Tensor,
    config: &WriteConfig,
) -> Result<()> {
    let total = neuron_dims
        .iter()
        .try_fold(map.neuron_count(), |a, &d| a.checked_mul(d))
        .ok_or_else(|| SomError::InvalidInput("SOM size overflows".into()))?;
    check_numel(som, total, "SOM")?;
    w.write_all(&encode_header(
        FileKind::Som,
        0,
        Some(map),
        neuron_dims,
        config,
    )?)?;
    w.write_all(&row_major_bytes(som, config.data_type.dtype(), "SOM")?)?;
    Ok(())
}

/// Writes a mapping file: `distances` is `[entries, ...]` with `neurons` values per entry.
pub fn write_mapping<W: Write>(
    mut w: W,
    map: &MapLayout,
    distances: &Tensor,
    config: &WriteConfig,
) -> Result<()> {
    let n = distances.dims().first().copied().unwrap_or(0);
    let total = n
        .checked_mul(map.neuron_count())
        .ok_or_else(|| SomError::InvalidInput("mapping size overflows".into()))?;
    check_numel(distances, total, "distances")?;
    w.write_all(&encode_header(
        FileKind::Mapping,
        n as u64,
        Some(map),
        &[],
        config,
    )?)?;
    w.write_all(&row_major_bytes(
        distances,
        config.data_type.dtype(),
        "distances",
    )?)?;
    Ok(())
}

/// Writes a rotation/flip file from `n_entries x neurons` records (entry-major).
pub fn write_rotflip<W: Write>(
    mut w: W,
    map: &MapLayout,
    n_entries: usize,
    records: &[RotFlip],
    config: &WriteConfig,
) -> Result<()> {
    if Some(records.len()) != n_entries.checked_mul(map.neuron_count()) {
        return Err(SomError::InvalidInput(format!(
            "{} records for {n_entries} entries x {} neurons",
            records.len(),
            map.neuron_count()
        )));
    }
    let mut out = encode_header(FileKind::RotFlip, n_entries as u64, Some(map), &[], config)?;
    out.reserve(records.len() * 5);
    for (i, r) in records.iter().enumerate() {
        if r.flip_byte > 1 {
            return Err(SomError::InvalidInput(format!(
                "record {i}: flip byte {} is not 0 or 1",
                r.flip_byte
            )));
        }
        out.push(r.flip_byte);
        out.extend_from_slice(&r.angle.to_le_bytes());
    }
    w.write_all(&out)?;
    Ok(())
}

/// Runs a writer into an [`AtomicFile`] at `path` (core's `write_atomic` with this
/// crate's error type).
pub fn save_with(
    path: impl AsRef<Path>,
    write: impl FnOnce(&mut AtomicFile) -> Result<()>,
) -> Result<()> {
    tensorfmt_core::io::write_atomic(path, write)
}
