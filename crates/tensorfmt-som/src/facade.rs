//! The format-crate contract (ARCHITECTURE.md): [`sniff`], [`open_tensor_file`] with
//! the export names of issue #5, and [`save_tensors`] for `convert --to som-data|som`.

use std::ops::Range;
use std::path::Path;

use bytes::Bytes;
use tensorfmt_core::settings::{Setting, SettingValue};
use tensorfmt_core::{
    Chunks, DType, FieldValue, Order, ReadOptions, SourceLayout, SourceRun, Tensor, TensorFile,
    TensorInfo, WriteOptions,
};

use crate::header::{parse_v2, CommentSpan, DataType, FileKind, ParseRules};
use crate::hex::hex_side;
use crate::layout::MapLayout;
use crate::read::{ReadConfig, RotFlip, SomFile};
use crate::write::{write_data, write_mapping, write_rotflip, write_som, WriteConfig};
use crate::{legacy, HexGrid, Result, SomError};

/// Largest piece [`TensorFile::read_chunks`] yields (at least one entry).
const CHUNK_BYTES: usize = 4 << 20;

/// Cheap check on the first bytes of a file: a plausible v2 header whose payload fits
/// `file_len`, or a legacy file that exactly one interpretation fits exactly.
///
/// ```
/// let mut b = Vec::new();
/// for v in [2i32, 0, 0, 1, 0, 2, 1, 1] { b.extend_from_slice(&v.to_le_bytes()); }
/// b.extend_from_slice(&1f32.to_le_bytes());
/// assert!(tensorfmt_som::sniff(&b, b.len() as u64));
/// assert!(!tensorfmt_som::sniff(&b, 35)); // truncated
/// assert!(!tensorfmt_som::sniff(b"\x93NUMPY\x01\x00", 128));
/// ```
pub fn sniff(head: &[u8], file_len: u64) -> bool {
    let rules = ParseRules {
        max_rank: 8,
        max_entries: u64::MAX,
        strict: false,
    };
    let config = ReadConfig::default();
    if let Ok(raw) = parse_v2(head, &rules) {
        // Sizes must fit; stray bytes after the payload are tolerated as when reading.
        return SomFile::resolve_v2(Bytes::new(), file_len, raw, &config).is_ok();
    }
    let Ok(comments) = CommentSpan::scan(head) else {
        return false;
    };
    let c = legacy::candidates(head, &comments, file_len);
    c.len() == 1 && (c[0].trailing == 0 || comments.end_line)
}

/// Opens a whole file (usually a map of it) as named tensors:
///
/// | file | tensors |
/// |---|---|
/// | data | `data` `[entries, *image_dims]` |
/// | SOM, cartesian | `som` `[*som_dims, *neuron_dims]` |
/// | SOM, hexagonal | `som` `[neurons, *neuron_dims]`, `hex_axial` `[neurons, 2]` i32 `(q, row)` |
/// | mapping | `distances` `[entries, *som_dims]` (`[entries, neurons]` when hexagonal) |
/// | rotation/flip | `flip` u8 and `angle` f32, each `[entries, neurons]` |
///
/// `options.frames` selects an entry range of data, mapping and rotation/flip files;
/// `options.kind` names the kind of an ambiguous legacy file ([`parse_kind_hint`]);
/// `options.strict` is [`ReadConfig::strict`]; `options.limits` caps entry and neuron
/// counts, ranks and copies.
///
/// ```
/// let mut b = Vec::new();
/// for v in [2i32, 0, 0, 3, 0, 2, 1, 2] { b.extend_from_slice(&v.to_le_bytes()); }
/// for v in 0..6 { b.extend_from_slice(&(v as f32).to_le_bytes()); }
/// let o = tensorfmt_core::ReadOptions { frames: Some((1, None)), ..Default::default() };
/// let f = tensorfmt_som::open_tensor_file(b.into(), &o)?;
/// let t = f.read_tensor("data")?;
/// assert_eq!(t.dims(), &[2, 1, 2]);
/// assert_eq!(t.to_vec::<f32>()?, vec![2., 3., 4., 5.]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_tensor_file(data: Bytes, options: &ReadOptions) -> Result<Box<dyn TensorFile>> {
    let config = ReadConfig {
        limits: options.limits,
        strict: options.strict,
        legacy_kind: options.kind.as_deref().map(parse_kind_hint).transpose()?,
        legacy_guess: options
            .name_kind
            .as_deref()
            .and_then(|k| Some((parse_kind_hint(k).ok()?, format!("its name suggests {k}")))),
        ..ReadConfig::default()
    };
    let file = SomFile::from_bytes_with(data, &config)?;
    Ok(Box::new(SomTensors::new(file, options)?))
}

/// Parses the kind hint of [`ReadOptions::kind`] for legacy files that fit several
/// readings: `data` (or `som-data`), `som`, `mapping` (or `som-mapping`), `rotflip`
/// (or `som-rotflip`, `rotation/flip`); case-insensitive.
///
/// ```
/// use tensorfmt_som::{parse_kind_hint, FileKind};
/// assert_eq!(parse_kind_hint("som-data")?, FileKind::Data);
/// assert_eq!(parse_kind_hint("RotFlip")?, FileKind::RotFlip);
/// assert!(parse_kind_hint("dense").is_err());
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
pub fn parse_kind_hint(kind: &str) -> Result<FileKind> {
    Ok(match kind.trim().to_ascii_lowercase().as_str() {
        "data" | "som-data" => FileKind::Data,
        "som" => FileKind::Som,
        "mapping" | "som-mapping" | "map" => FileKind::Mapping,
        "rotflip" | "som-rotflip" | "rotation/flip" => FileKind::RotFlip,
        other => {
            return Err(SomError::InvalidInput(format!(
                "unknown PINK file kind {other:?}: use data, som, mapping or rotflip"
            )))
        }
    })
}

/// A [`SomFile`] seen through the [`TensorFile`] interface.
#[derive(Debug, Clone)]
pub struct SomTensors {
    file: SomFile,
    range: Range<usize>,
    warnings: Vec<String>,
}

impl SomTensors {
    /// Wraps a file, selecting the entries of `options.frames`.
    pub fn new(file: SomFile, options: &ReadOptions) -> Result<SomTensors> {
        let warnings = file.warnings().to_vec();
        let n = file.units();
        let range = if file.kind() == FileKind::Som {
            if options.frames.is_some() {
                // As Python's frames= refuses it: a SOM has neurons, not entries.
                return Err(SomError::WrongKind {
                    operation: "an entry range",
                    expected: "data, mapping or rotation/flip",
                    actual: "SOM",
                });
            }
            0..n
        } else {
            options.frame_range(n)
        };
        Ok(SomTensors {
            file,
            range,
            warnings,
        })
    }

    /// The underlying file.
    pub fn file(&self) -> &SomFile {
        &self.file
    }

    fn neurons(&self) -> usize {
        self.file.neuron_count().unwrap_or(0)
    }

    fn chunked<'a>(
        &'a self,
        f: impl Fn(Range<usize>) -> tensorfmt_core::Result<Tensor> + 'a,
        unit_bytes: usize,
    ) -> Chunks<'a> {
        let step = (CHUNK_BYTES / unit_bytes.max(1)).max(1);
        let r = self.range.clone();
        let mut pos = r.start;
        Box::new(std::iter::from_fn(move || {
            if pos >= r.end {
                return None;
            }
            let end = (pos + step).min(r.end);
            let piece = pos..end;
            pos = end;
            Some(f(piece))
        }))
    }
}

impl TensorFile for SomTensors {
    fn format(&self) -> &'static str {
        "som"
    }

    /// A cartesian SOM's map rank (`som_rank`: its tensor `[*map, *neuron]` does not
    /// say where the map ends) and a cartesian rotation/flip file's map dims
    /// (`som_dims`: its tensors are `[entries, neurons]`).
    fn layout_settings(&self) -> Vec<(String, String)> {
        let f = &self.file;
        // The one data type of the payload, where it is not PINK's f32 default (a
        // layout key only: `--dtype` is how a user asks for one).
        let stored: Vec<(String, String)> = f
            .dtype()
            .filter(|&d| d != DType::F32)
            .map(|d| ("data_type".to_string(), d.to_string()))
            .into_iter()
            .collect();
        let Some(MapLayout::Cartesian(dims)) = f.map_layout() else {
            return stored;
        };
        let list = || {
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut out = match f.kind() {
            FileKind::Som => vec![("som_rank".into(), dims.len().to_string())],
            FileKind::RotFlip => vec![("som_dims".into(), list())],
            _ => Vec::new(),
        };
        out.extend(stored);
        out
    }

    fn kind(&self) -> String {
        let f = &self.file;
        let mut s = match f.legacy_format() {
            Some(l) => format!("legacy {l} "),
            None => String::new(),
        };
        s.push_str(f.kind().name());
        if let Some(m) = f.map_layout() {
            let dims: Vec<String> = m.dims().iter().map(|d| d.to_string()).collect();
            let shape = if m.is_hexagonal() {
                "hexagonal"
            } else {
                "cartesian"
            };
            s.push_str(&format!(" ({shape} {}", dims.join("x")));
            if f.hex_inferred() {
                s.push_str(", inferred from the payload size");
            }
            s.push(')');
        }
        s
    }

    fn kind_id(&self) -> &'static str {
        kind_id(self.file.kind())
    }

    /// The header fields, with the comment block bounded: `comments` holds its first
    /// 16 lines and `comment_lines` counts them all (a file of 10 million `#` lines
    /// does not become a header of 10 million entries, nor a reader holding them;
    /// [`SomFile::comments`](SomFile::comments) decodes every line when asked).
    fn header(&self) -> Vec<(String, FieldValue)> {
        self.file.header_fields().to_vec()
    }

    fn tensors(&self) -> Vec<TensorInfo> {
        let f = &self.file;
        let n = self.range.len();
        let with = |lead: usize, rest: &[usize]| {
            let mut d = vec![lead];
            d.extend_from_slice(rest);
            d
        };
        let dtype = f.dtype().unwrap_or(DType::F32);
        match f.kind() {
            FileKind::Data => vec![TensorInfo::new(
                "data",
                dtype,
                with(n, f.entry_dims().unwrap_or(&[])),
            )],
            FileKind::Som => {
                let map = f.map_layout().expect("SOM files have a map");
                let mut dims = map.export_dims();
                dims.extend_from_slice(f.neuron_dims().unwrap_or(&[]));
                let mut v = vec![TensorInfo::new("som", dtype, dims)];
                if map.is_hexagonal() {
                    v.push(TensorInfo::new(
                        "hex_axial",
                        DType::I32,
                        [map.neuron_count(), 2],
                    ));
                }
                v
            }
            FileKind::Mapping => {
                let map = f.map_layout().expect("mapping files have a map");
                vec![TensorInfo::new(
                    "distances",
                    dtype,
                    with(n, &map.export_dims()),
                )]
            }
            FileKind::RotFlip => vec![
                TensorInfo::new("flip", DType::U8, [n, self.neurons()]),
                TensorInfo::new("angle", DType::F32, [n, self.neurons()]),
            ],
        }
    }

    fn read_tensor(&self, name: &str) -> tensorfmt_core::Result<Tensor> {
        let f = &self.file;
        let r = self.range.clone();
        let t = match (f.kind(), name) {
            (FileKind::Data, "data") => f.entries(r)?,
            (FileKind::Som, "som") => f.som_tensor()?,
            (FileKind::Som, "hex_axial") if f.map_layout().is_some_and(MapLayout::is_hexagonal) => {
                f.hex_axial()?
            }
            (FileKind::Mapping, "distances") => f.distances(r)?,
            (FileKind::RotFlip, "flip") => f.rotflip_tensors(r)?.0,
            (FileKind::RotFlip, "angle") => f.rotflip_tensors(r)?.1,
            _ => return Err(tensorfmt_core::Error::NoSuchTensor(name.into())),
        };
        Ok(t)
    }

    fn read_chunks<'a>(&'a self, name: &str) -> tensorfmt_core::Result<Chunks<'a>> {
        let f = &self.file;
        let entry = f.payload_len() / f.units().max(1);
        Ok(match (f.kind(), name) {
            (FileKind::Data, "data") => self.chunked(move |r| Ok(f.entries(r)?), entry),
            (FileKind::Mapping, "distances") => self.chunked(move |r| Ok(f.distances(r)?), entry),
            // Decoded pieces are 4 bytes per record (u8 or f32), so size by that.
            (FileKind::RotFlip, "flip") => {
                self.chunked(move |r| Ok(f.rotflip_tensors(r)?.0), self.neurons() * 4)
            }
            (FileKind::RotFlip, "angle") => {
                self.chunked(move |r| Ok(f.rotflip_tensors(r)?.1), self.neurons() * 4)
            }
            _ => {
                let t = self.read_tensor(name)?;
                Box::new(std::iter::once(Ok(t)))
            }
        })
    }

    /// Data, SOM and mapping payloads are one contiguous block (the selected entries);
    /// rotation/flip records interleave a flip byte and an f32 angle, 5 bytes apart.
    /// Hexagonal axial coordinates are computed: none.
    fn source_layout(&self, name: &str) -> Option<SourceLayout> {
        let f = &self.file;
        let unit = (f.payload_len() / f.units().max(1)) as u64;
        let start =
            (f.payload_offset() as u64).checked_add(unit.checked_mul(self.range.start as u64)?)?;
        let len = unit.checked_mul(self.range.len() as u64)?;
        let records = |skip: u64, len: u64| {
            let n = (self.range.len() as u64).checked_mul(self.neurons() as u64)?;
            Some(SourceLayout {
                order: Order::RowMajor,
                runs: vec![SourceRun {
                    offset: start.checked_add(skip)?,
                    len,
                    repeat: vec![(n, crate::read::ROTFLIP_RECORD as u64)],
                }],
            })
        };
        match (f.kind(), name) {
            (FileKind::Data, "data")
            | (FileKind::Som, "som")
            | (FileKind::Mapping, "distances") => Some(SourceLayout::contiguous(start, len)),
            (FileKind::RotFlip, "flip") => records(0, 1),
            (FileKind::RotFlip, "angle") => records(1, 4),
            _ => None,
        }
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

fn pick<'a>(tensors: &'a [(String, Tensor)], name: &str, kind: &str) -> Result<&'a Tensor> {
    if let Some((_, t)) = tensors.iter().find(|(n, _)| n == name) {
        return Ok(t);
    }
    let rest: Vec<&(String, Tensor)> = tensors.iter().filter(|(n, _)| n != "hex_axial").collect();
    match rest.as_slice() {
        [(_, t)] => Ok(t),
        _ => Err(SomError::InvalidInput(format!(
            "{kind}: expected a tensor named {name:?} or exactly one tensor, got {:?}",
            tensors.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()
        ))),
    }
}

fn hex_grid_for(neurons: usize) -> Result<HexGrid> {
    let d = hex_side(neurons).ok_or_else(|| {
        SomError::InvalidInput(format!(
            "{neurons} neurons is not a hexagonal count (7, 19, 37, 61, 91, ...)"
        ))
    })?;
    HexGrid::new(d)
}

/// What PINK 2.5 will refuse in a file of kind `kind` (`som-data`, `som`, ...; the
/// written file's [`TensorFile::kind_id`]) written with `options`: it reads data files
/// and SOMs of data type 0 (f32) only, so any other `dtype` gives one that pyink and
/// tensorfmt read but the PINK program does not. (Mapping files PINK only writes, and
/// a rotation/flip file has no data type.)
///
/// ```
/// use tensorfmt_core::{DType, WriteOptions};
/// assert!(tensorfmt_som::write_warnings(&WriteOptions::default(), "som").is_empty());
/// let u8s = WriteOptions { dtype: Some(DType::U8), ..WriteOptions::default() };
/// assert!(tensorfmt_som::write_warnings(&u8s, "som-data")[0].contains("PINK 2.5"));
/// assert!(tensorfmt_som::write_warnings(&u8s, "som-mapping").is_empty());
/// ```
pub fn write_warnings(options: &WriteOptions, kind: &str) -> Vec<String> {
    if !matches!(kind, "som-data" | "som") {
        return Vec::new();
    }
    match options.dtype {
        Some(d) if d != tensorfmt_core::DType::F32 => vec![format!(
            "PINK 2.5 reads f32 payloads only (data type 0); this file stores {d} (data type {}), which pyink and tensorfmt read but the PINK program refuses",
            DataType::from_dtype(d).map_or(-1, DataType::code)
        )],
        _ => Vec::new(),
    }
}

/// The `--set` settings [`save_tensors`] reads (`WriteOptions::extra`), with their
/// values and kinds; the facade and [`save_tensors`] refuse any other key, value or
/// kind, so a setting is never silently ignored.
///
/// ```
/// assert!(tensorfmt_som::SETTINGS.iter().any(|s| s.key == "comment"));
/// ```
pub const SETTINGS: &[Setting] = &[
    Setting::new("comment", SettingValue::Text),
    // The hexagonal layout code (PINK's CLI writes 0): layouts are the SOM's,
    // mapping's and rotation/flip's.
    Setting::new("pink_cli_compat", SettingValue::Flag).for_kinds(&[
        "som",
        "som-mapping",
        "som-rotflip",
    ]),
    Setting::new("channels", SettingValue::Choice(&["first", "last"])).for_kinds(&["som-data"]),
    Setting::new("som_rank", SettingValue::Choice(&["1", "2", "3"])).for_kinds(&["som"]),
    Setting::new("som_dims", SettingValue::Counts).for_kinds(&["som-rotflip"]),
];

/// Saves named tensors as a PINK file (`convert --to som-data|som`).
///
/// `options.kind`: `som-data` (one tensor `[entries, *image_dims]`, named `data` or
/// the only one), `som` (tensor `som`: `[*som_dims, *neuron_dims]`, or with
/// `options.hex` / a `hex_axial` tensor present `[neurons, *neuron_dims]`),
/// `som-mapping` (`distances`) or `som-rotflip` (`flip` and `angle`); `None` chooses
/// from the names. Inputs are cast to `options.dtype` (default f32, the only type PINK
/// reads). `options.extra`: `comment=<text>`; `pink_cli_compat=true` (hexagonal layout
/// code 0 as PINK writes); `channels=last` (data given as `[n, h, w, c]`);
/// `som_rank=1|2|3` (split of a cartesian SOM's dims, default: rank 4 -> 2+2, rank 3 ->
/// 1+2, rank 6 -> 3+3; rank 5 needs it); `som_dims=3,3` (rotation/flip files).
///
/// ```
/// use tensorfmt_core::{Order, Tensor, WriteOptions};
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().join("data.bin");
/// let images = Tensor::from_vec(vec![0u8; 2 * 4 * 4], [2, 4, 4], Order::RowMajor)?;
/// let o = WriteOptions { kind: Some("som-data".into()), ..Default::default() };
/// tensorfmt_som::save_tensors(&p, &[("images".into(), images)], &o)?;
/// let f = tensorfmt_som::SomFile::open(&p)?;
/// assert_eq!((f.n_entries(), f.dtype()), (Some(2), Some(tensorfmt_core::DType::F32)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_tensors(
    path: &Path,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
) -> Result<()> {
    let has = |n: &str| tensors.iter().any(|(k, _)| k == n);
    let kind = match options.kind.as_deref() {
        Some(k) => parse_kind_hint(k)?,
        None if has("som") => FileKind::Som,
        None if has("distances") => FileKind::Mapping,
        None if has("flip") && has("angle") => FileKind::RotFlip,
        None => FileKind::Data,
    };
    tensorfmt_core::settings::check("som", SETTINGS, Some(kind_id(kind)), options)?;
    if options.hex && kind == FileKind::Data {
        return Err(SomError::InvalidInput(
            "hex means nothing to a data file: its images are cartesian (a hexagonal \
             layout is a SOM's, mapping's or rotation/flip file's)"
                .into(),
        ));
    }
    if kind == FileKind::RotFlip {
        // No data type field: flips are bytes, angles f32 (a warning said the file
        // stored the type asked while it wrote these).
        if let Some(d) = options.dtype.filter(|&d| d != DType::F32) {
            return Err(SomError::InvalidInput(format!(
                "a rotation/flip file has no data type: it stores flips as u8 and angles \
                 as f32, not {d}; leave out --dtype / dtype="
            )));
        }
    }
    let data_type = match options.dtype {
        // A PINK file converted to its own format keeps its data type.
        None => options
            .source_layout
            .get("data_type")
            .and_then(|d| d.parse::<DType>().ok())
            .and_then(DataType::from_dtype)
            .unwrap_or(DataType::F32),
        Some(d) => DataType::from_dtype(d).ok_or_else(|| {
            SomError::InvalidInput(format!(
                "PINK files cannot store {d} (data types: f32, f64, i8..u64)"
            ))
        })?,
    };
    let extra = |k: &str| options.extra.get(k).map(String::as_str);
    let comments: Vec<String> = extra("comment")
        .map(|c| vec![c.to_string()])
        .unwrap_or_default();
    crate::ids::check_free_comments(&comments)?;
    let config = WriteConfig {
        comments,
        data_type,
        pink_cli_compat: options.flag("pink_cli_compat")?,
        end_line: false,
    };
    let cast = |t: &Tensor| -> Result<Tensor> {
        if t.dtype() == data_type.dtype() {
            Ok(t.clone())
        } else {
            Ok(t.cast(data_type.dtype())?)
        }
    };
    match kind {
        FileKind::Data => {
            let mut t = cast(pick(tensors, "data", "som-data")?)?;
            if options.text("channels") == Some("last") {
                if t.dims().len() != 4 {
                    return Err(SomError::InvalidInput(format!(
                        "channels=last needs [n, h, w, c], got {}",
                        t.shape()
                    )));
                }
                t = t.permute(&[0, 3, 1, 2])?;
            }
            let r = t.dims().len();
            if !(2..=4).contains(&r) {
                return Err(SomError::InvalidInput(format!(
                    "som-data needs [entries, h, w] or [entries, channels, h, w], got {}",
                    t.shape()
                )));
            }
            tensorfmt_core::io::write_atomic_with(path, options, |w| write_data(w, &t, &config))
        }
        FileKind::Som => {
            let t = cast(pick(tensors, "som", "som")?)?;
            let d = t.dims().to_vec();
            let (map, neuron_dims) = if options.hex || has("hex_axial") {
                if options.extra.contains_key("som_rank") {
                    return Err(SomError::InvalidInput(
                        "som_rank splits a cartesian SOM's shape; a hexagonal SOM is \
                         [neurons, *neuron_dims]"
                            .into(),
                    ));
                }
                if !(2..=4).contains(&d.len()) {
                    return Err(SomError::InvalidInput(format!(
                        "a hexagonal SOM needs [neurons, *neuron_dims], got {}",
                        t.shape()
                    )));
                }
                (MapLayout::Hexagonal(hex_grid_for(d[0])?), d[1..].to_vec())
            } else {
                let som_rank = match options.count("som_rank")? {
                    Some(r) if r < d.len() => r,
                    Some(r) => {
                        return Err(SomError::InvalidInput(format!(
                            "som_rank={r} leaves no neuron dims of SOM shape {}",
                            t.shape()
                        )))
                    }
                    // The source SOM's own split when it fits this shape, else by rank.
                    None => match options
                        .count_or_layout("som_rank")?
                        .filter(|r| *r < d.len())
                    {
                        Some(r) => r,
                        None => match d.len() {
                            3 => 1,
                            4 => 2,
                            6 => 3,
                            _ => {
                                return Err(SomError::InvalidInput(format!(
                                    "cannot split SOM shape {} into map and neuron dims: set \
                                     som_rank",
                                    t.shape()
                                )))
                            }
                        },
                    },
                };
                (
                    MapLayout::Cartesian(d[..som_rank].to_vec()),
                    d[som_rank..].to_vec(),
                )
            };
            tensorfmt_core::io::write_atomic_with(path, options, |w| {
                write_som(w, &map, &neuron_dims, &t, &config)
            })
        }
        FileKind::Mapping => {
            let t = cast(pick(tensors, "distances", "som-mapping")?)?;
            let d = t.dims();
            if d.len() < 2 {
                return Err(SomError::InvalidInput(format!(
                    "distances must be [entries, *som_dims], got {}",
                    t.shape()
                )));
            }
            let map = if options.hex {
                MapLayout::Hexagonal(hex_grid_for(d[1..].iter().product())?)
            } else {
                MapLayout::Cartesian(d[1..].to_vec())
            };
            tensorfmt_core::io::write_atomic_with(path, options, |w| {
                write_mapping(w, &map, &t, &config)
            })
        }
        FileKind::RotFlip => {
            // Two main tensors: a lone array is not both (it was written as the angles
            // and, cast to bytes, as made-up flips).
            let named = |name: &str| {
                tensors
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, t)| t)
                    .ok_or_else(|| {
                        SomError::InvalidInput(format!(
                            "som-rotflip: a rotation/flip file needs tensors named \"flip\" \
                             and \"angle\" ([entries, neurons] each), got {:?}",
                            tensors.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()
                        ))
                    })
            };
            let flip = named("flip")?;
            // PINK's flip byte is 0 or 1: any other value is not a flip to round.
            if flip
                .cast(DType::F64)?
                .to_vec::<f64>()?
                .iter()
                .any(|&v| v != 0.0 && v != 1.0)
            {
                return Err(SomError::InvalidInput(
                    "som-rotflip: flip values must be 0 or 1".into(),
                ));
            }
            let flip = flip.cast(DType::U8)?;
            let angle = named("angle")?.cast(DType::F32)?;
            let d = flip.dims().to_vec();
            if d.len() != 2 || angle.dims() != d.as_slice() {
                return Err(SomError::InvalidInput(format!(
                    "flip and angle must both be [entries, neurons], got {} and {}",
                    flip.shape(),
                    angle.shape()
                )));
            }
            let holds = |dims: &Vec<usize>| {
                dims.iter().try_fold(1usize, |a, &b| a.checked_mul(b)) == Some(d[1])
            };
            let map = match options.counts("som_dims")? {
                Some(_) if options.hex => {
                    return Err(SomError::InvalidInput(
                        "som_dims is a cartesian SOM's shape; a hexagonal one has its \
                         neuron count only"
                            .into(),
                    ))
                }
                Some(dims) if !holds(&dims) => {
                    return Err(SomError::InvalidInput(format!(
                        "som_dims={} does not hold the {} neurons of flip and angle",
                        options.text("som_dims").unwrap_or_default(),
                        d[1]
                    )))
                }
                Some(dims) => MapLayout::Cartesian(dims),
                None if options.hex => MapLayout::Hexagonal(hex_grid_for(d[1])?),
                // The source's map dims when they hold these neurons, else a line.
                None => MapLayout::Cartesian(
                    options
                        .counts_or_layout("som_dims")?
                        .filter(holds)
                        .unwrap_or_else(|| vec![d[1]]),
                ),
            };
            let fl = flip.to_vec::<u8>()?;
            let an = angle.to_vec::<f32>()?;
            let recs: Vec<RotFlip> = fl
                .into_iter()
                .zip(an)
                .map(|(flip_byte, angle)| RotFlip { flip_byte, angle })
                .collect();
            let rot_config = WriteConfig {
                data_type: DataType::F32,
                ..config
            };
            tensorfmt_core::io::write_atomic_with(path, options, |w| {
                write_rotflip(w, &map, d[0], &recs, &rot_config)
            })
        }
    }
}

/// The kind identifier of a PINK file kind (`TensorFile::kind_id`, the `--to` kinds).
fn kind_id(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Data => "som-data",
        FileKind::Som => "som",
        FileKind::Mapping => "som-mapping",
        FileKind::RotFlip => "som-rotflip",
    }
}
