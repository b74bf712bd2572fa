//! What a legacy file holds besides its tensors, carried through safetensors and npz.
//!
//! A PVP, PINK, primitiv or Caffe file says more than its tensors: header fields, frame
//! times, comment blocks, layer definitions, solver fields, unknown protobuf fields,
//! even the byte order of MessagePack maps. Converting it to safetensors or npz keeps
//! the tensors as tensors and the rest as the file's **skeleton**: its bytes with the
//! tensors' bytes cut out, plus where each tensor lay. The skeleton travels in the
//! target's metadata (safetensors `__metadata__["tensorfmt.source"]`; in an npz, bytes
//! of the archive outside every member, so `np.load` sees only the tensors), as JSON
//! with a readable copy of the header beside the base64 skeleton.
//!
//! **Where a tensor lay is what its reader declares** ([`TensorFile::source_layout`]):
//! regular runs (offset, piece length, and `(count, stride)` repeats), so a movie of a
//! million frames is two runs, not two million cuts. Nothing is ever found by searching
//! the file for a tensor's bytes. A tensor without a declared layout (computed,
//! decoded, sparse) stays inside the skeleton and is compared after splicing.
//!
//! Converting back to the original format splices the tensors into the skeleton, so
//! `X -> safetensors -> X` and `X -> npz -> X` give back the very same bytes, and an
//! edited value lands in exactly the bytes it came from. The carried metadata is input
//! like any other: bounded ([`MAX_METADATA`], [`MAX_SKELETON`]), every run checked
//! against the file size and its tensor, pieces that overlap refused, and the spliced
//! file opened again before it is committed: its tensors must be the document's (the
//! reader must declare the same layouts for the cut ones, and the others must read back
//! equal). When anything disagrees the file is written from the tensors alone and the
//! report says why. When only tensors that stayed in the skeleton changed (sparse
//! entries, byte weights: they have no declared layout), the file is written anew from
//! the tensors in the original's layout ([`Restored::Anew`]: its kind and
//! [`TensorFile::layout_settings`], read from the spliced file), and the report says so.
//!
//! This module sits below the dispatch: it knows [`TensorFile`] and bytes, not
//! [`Document`](crate::Document) nor the format table, which hand it what it needs.
//!
//! ```
//! use tensorfmt::{Document, Format};
//! let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
//! let dir = tempfile::tempdir()?;
//! let st = dir.path().join("x.safetensors");
//! Document::open(&src)?.convert_to(&st, Format::Safetensors)?;
//! let back = dir.path().join("x.pvp");
//! Document::open(&st)?.convert_to(&back, Format::Pvp)?;
//! assert_eq!(std::fs::read(&back)?, std::fs::read(&src)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use serde_json::{json, Value};
use tensorfmt_core::{
    DType, Error, FieldValue, Order, Result, Shape, SourceLayout, SourceRun, TensorFile,
    WriteOptions,
};

/// The safetensors `__metadata__` key that carries a legacy file's skeleton (also the
/// header field under which npz and safetensors documents show it, and the `--set` /
/// `settings=` key that hands one on): [`WriteOptions::carried`].
pub const KEY: &str = tensorfmt_core::CARRIED_KEY;

/// The npz member name (without `.npy`) that carried the skeleton in files written
/// before it moved outside the archive's members; still read.
pub const NPZ_MEMBER: &str = "__tensorfmt__";

/// The largest skeleton recorded (bytes outside the cut tensors); beyond it, nothing
/// is recorded and the conversion says so.
pub const MAX_SKELETON: usize = 16 << 20;

/// The largest metadata text recorded or read (the skeleton's base64 and the JSON
/// around it), well below what safetensors readers accept in a header (100 MB).
pub const MAX_METADATA: usize = 32 << 20;

/// The most runs one tensor's layout may have in carried metadata.
const MAX_RUNS: usize = 1 << 16;

/// Version of the JSON layout.
const VERSION: u64 = 2;

/// The legacy formats whose files are recorded (their [`TensorFile::format`] names).
const LEGACY: [&str; 4] = ["pvp", "som", "primitiv", "caffe"];

/// What [`record`] found for a file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recording {
    /// The JSON to store under [`KEY`], when the file's format has anything to carry
    /// and it fits.
    pub json: Option<String>,
    /// Why nothing was recorded for a legacy file (too large, a partial read), or what
    /// was not cut from it.
    pub note: Option<String>,
}

/// What [`restore`] did (`W`: what a written file comes with; [`restore`] gives `()`,
/// [`Document::restore_source`](crate::Document::restore_source) the file's
/// [`WriteReport`](crate::WriteReport)).
#[derive(Debug, Clone, PartialEq)]
pub enum Restored<W = ()> {
    /// The original file was rebuilt from the skeleton and the tensors, and committed.
    Written(W),
    /// The document carries no skeleton for this target (or options ask for a change).
    NotRecorded,
    /// The document carries a skeleton that does not fit its tensors; why. Nothing was
    /// written.
    Refused(String),
    /// The tensors keep the original's names, dtypes and shapes, but the values of one
    /// that is not replaced in place (a sparse PVP file's entries or frame times, byte
    /// weights, legacy MPI blocks, an unpacked Caffe blob) changed: the file is to be
    /// written anew from the tensors, in the original's layout. Nothing was written.
    Anew(Anew),
}

/// What [`Restored::Anew`] hands on: which tensors changed, and the original's kind
/// and layout as its reader sees them (read from the spliced file, which is the
/// original but for the tensors replaced in place), for the writer.
///
/// ```
/// let a = tensorfmt::provenance::Anew {
///     why: "tensor \"values\" changed".into(),
///     kind_id: "sparse",
///     kind: "sparse binary activity".into(),
///     layout: vec![("sparse".into(), "binary".into())],
/// };
/// assert_eq!(a.settings(), "sparse=binary");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Anew {
    /// Which tensors changed and why they are not replaced in place (a clause).
    pub why: String,
    /// The original's kind ([`TensorFile::kind_id`]): `sparse`, `weights`, ...
    pub kind_id: &'static str,
    /// The original's kind described ([`TensorFile::kind`]).
    pub kind: String,
    /// The original's [`TensorFile::layout_settings`], for
    /// [`WriteOptions::source_layout`].
    pub layout: Vec<(String, String)>,
}

impl Anew {
    /// The layout settings as `key=value, ...` (empty: none).
    pub fn settings(&self) -> String {
        self.layout
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One tensor of the original file.
#[derive(Debug, Clone, PartialEq)]
struct Listed {
    name: String,
    dtype: DType,
    shape: Shape,
    /// Where its bytes lay; `None`: they are in the skeleton.
    layout: Option<SourceLayout>,
}

impl Listed {
    fn byte_len(&self) -> Option<u64> {
        self.shape
            .byte_len(self.dtype.size())
            .ok()
            .map(|n| n as u64)
    }
}

/// A parsed skeleton.
#[derive(Debug, Clone, PartialEq)]
struct Skeleton {
    format: String,
    kind: String,
    /// The kind's identifier ([`TensorFile::kind_id`]; absent from recordings made
    /// before it was carried).
    kind_id: String,
    /// The original's [`TensorFile::layout_settings`] (absent from recordings made
    /// before they were carried): what its tensors do not tell, handed to the writer
    /// when the original is written anew from them ([`carried_layout`]).
    layout: Vec<(String, String)>,
    size: u64,
    tensors: Vec<Listed>,
    bytes: Vec<u8>,
}

/// A header field as JSON (what `inspect --json` prints).
///
/// ```
/// use tensorfmt::FieldValue;
/// let v = FieldValue::Map(vec![("nx".into(), FieldValue::UInt(4))]);
/// assert_eq!(tensorfmt::provenance::field_json(&v).to_string(), r#"{"nx":4}"#);
/// ```
pub fn field_json(v: &FieldValue) -> Value {
    match v {
        FieldValue::Bool(b) => json!(b),
        FieldValue::Int(i) => json!(i),
        FieldValue::UInt(u) => json!(u),
        FieldValue::Float(f) => json!(f),
        FieldValue::Text(s) => json!(s),
        FieldValue::List(l) => Value::Array(l.iter().map(field_json).collect()),
        FieldValue::Map(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), field_json(v))).collect())
        }
    }
}

/// The pieces of several layouts merged in file order: `(offset, len, tensor)`, each
/// layout's pieces already in file order (regular runs, runs in order).
fn merged<'a>(
    layouts: &[Option<&'a SourceLayout>],
) -> impl Iterator<Item = (u64, u64, usize)> + 'a {
    type Pieces<'a> = Box<dyn Iterator<Item = (u64, u64)> + 'a>;
    let mut iters: Vec<Pieces<'a>> = layouts
        .iter()
        .map(|l| -> Pieces<'a> {
            match l {
                Some(l) => Box::new(
                    l.runs
                        .iter()
                        .filter(|r| r.len > 0)
                        .flat_map(|r| r.pieces().map(move |o| (o, r.len))),
                ),
                None => Box::new(std::iter::empty()),
            }
        })
        .collect();
    let mut heap = BinaryHeap::new();
    for (t, it) in iters.iter_mut().enumerate() {
        if let Some((o, len)) = it.next() {
            heap.push(Reverse((o, len, t)));
        }
    }
    std::iter::from_fn(move || {
        let Reverse((o, len, t)) = heap.pop()?;
        if let Some((o2, len2)) = iters[t].next() {
            heap.push(Reverse((o2, len2, t)));
        }
        Some((o, len, t))
    })
}

/// Which layouts to drop so that no two kept pieces overlap: one sweep over the
/// pieces in file order, dropping the tensor of every piece that starts before the
/// end of what came earlier (a view of a view: the bytes stay with the earlier piece's
/// tensor). One pass however many tensors overlap (a loop that dropped one tensor and
/// swept again was quadratic in them); it may drop more than the fewest possible, never
/// keeps an overlap.
fn overlapping(layouts: &[Option<&SourceLayout>]) -> Vec<bool> {
    let mut dropped = vec![false; layouts.len()];
    let mut end = 0u64;
    for (o, len, t) in merged(layouts) {
        if dropped[t] {
            continue;
        }
        if o < end {
            dropped[t] = true;
        } else {
            end = o + len;
        }
    }
    dropped
}

/// Records the skeleton of a whole legacy file for a conversion to safetensors or
/// npz: `file` is the opened view, `data` the bytes it was opened from (`None` when
/// only part of the file was read), `origin` its path (for notes). The cuts are the
/// layouts its reader declares ([`TensorFile::source_layout`]), each checked against
/// the file and the tensor; no tensor data is read.
///
/// ```
/// let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
/// let doc = tensorfmt::Document::open(&src)?;
/// let rec = tensorfmt::provenance::record(&*doc, doc.source_bytes().map(|b| &b[..]), doc.path())?;
/// assert!(rec.json.unwrap().contains("\"format\":\"pvp\""));
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub fn record(file: &dyn TensorFile, data: Option<&[u8]>, origin: &Path) -> Result<Recording> {
    // The skeleton is read from the mapping before any output exists, so no
    // `AtomicFile` sees a fault here: an input that shrank meanwhile must fail now,
    // or zeros read from it would be published with the output.
    let faults = tensorfmt_core::io::guarded_faults();
    let recording = record_mapped(file, data, origin)?;
    if tensorfmt_core::io::guarded_faults() != faults {
        return Err(Error::InputChanged {
            path: origin.display().to_string(),
        });
    }
    Ok(recording)
}

fn record_mapped(file: &dyn TensorFile, data: Option<&[u8]>, origin: &Path) -> Result<Recording> {
    if !LEGACY.contains(&file.format()) {
        return Ok(Recording::default());
    }
    let Some(data) = data else {
        return Ok(Recording {
            json: None,
            note: Some(format!(
                "{}: only part of the file was read (frames or CSR export), so its header \
                 and layout are not kept in the metadata",
                origin.display()
            )),
        });
    };
    let size = data.len() as u64;
    let infos = file.tensors();
    let mut layouts = file.source_layouts();
    layouts.resize(infos.len(), None);
    let mut tensors: Vec<Listed> = infos
        .into_iter()
        .zip(layouts)
        .map(|(info, layout)| {
            let len = info
                .shape
                .byte_len(info.dtype.size())
                .ok()
                .map(|n| n as u64);
            let layout = layout.filter(|l| len.is_some_and(|n| l.check(size, n).is_ok()));
            Listed {
                name: info.name,
                dtype: info.dtype,
                shape: info.shape,
                layout,
            }
        })
        .collect();
    // Two tensors declaring the same bytes (a view of a view): the first keeps them.
    let dropped = overlapping(
        &tensors
            .iter()
            .map(|t| t.layout.as_ref())
            .collect::<Vec<_>>(),
    );
    for (t, drop) in tensors.iter_mut().zip(dropped) {
        if drop {
            t.layout = None;
        }
    }
    let cut: u64 = tensors
        .iter()
        .filter_map(|t| t.layout.as_ref().and_then(SourceLayout::byte_len))
        .sum();
    let skeleton_len = size - cut;
    if skeleton_len > MAX_SKELETON as u64 {
        return Ok(Recording {
            json: None,
            note: Some(format!(
                "{}: {} MiB of the file lie outside the tensors stored verbatim (more than \
                 the {} MiB that travel in metadata), so converting back gives the same \
                 tensors, not the same file",
                origin.display(),
                skeleton_len >> 20,
                MAX_SKELETON >> 20
            )),
        });
    }
    let mut bytes = Vec::with_capacity(skeleton_len as usize);
    let mut at = 0usize;
    {
        let layouts: Vec<Option<&SourceLayout>> =
            tensors.iter().map(|t| t.layout.as_ref()).collect();
        for (o, len, _) in merged(&layouts) {
            bytes.extend_from_slice(&data[at..o as usize]);
            at = (o + len) as usize;
        }
    }
    bytes.extend_from_slice(&data[at..]);
    let skeleton = Skeleton {
        format: file.format().to_string(),
        kind: file.kind(),
        kind_id: file.kind_id().to_string(),
        layout: file.layout_settings(),
        size,
        tensors,
        bytes,
    };
    let header = Value::Object(
        file.header()
            .iter()
            .map(|(k, v)| (k.clone(), field_json(v)))
            .collect(),
    );
    let text = to_json_text(&skeleton, &header, MAX_METADATA);
    if let Err(len) = text {
        return Ok(Recording {
            json: None,
            note: Some(format!(
                "{}: its header and layout take more than {} MiB, more than the {} MiB that travel \
                 in metadata, so converting back gives the same tensors, not the same file",
                origin.display(),
                len >> 20,
                MAX_METADATA >> 20
            )),
        });
    }
    Ok(Recording {
        json: text.ok(),
        note: None,
    })
}

/// A layout as carried: `{"order": "C"|"F", "runs": [[offset, len, [[count, stride], ...]], ...]}`.
struct LayoutJson<'a>(&'a SourceLayout);

impl serde::Serialize for LayoutJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let l = self.0;
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry(
            "order",
            if l.order == Order::ColumnMajor {
                "F"
            } else {
                "C"
            },
        )?;
        m.serialize_entry("runs", &RunsJson(&l.runs))?;
        m.end()
    }
}

/// A layout's runs, each `[offset, len, [[count, stride], ...]]`.
struct RunsJson<'a>(&'a [SourceRun]);

impl serde::Serialize for RunsJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|r| (r.offset, r.len, &r.repeat)))
    }
}

/// One listed tensor as carried.
struct ListedJson<'a>(&'a Listed);

impl serde::Serialize for ListedJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let t = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("name", &t.name)?;
        m.serialize_entry("dtype", t.dtype.name())?;
        m.serialize_entry("shape", t.shape.dims())?;
        if let Some(l) = &t.layout {
            m.serialize_entry("layout", &LayoutJson(l))?;
        }
        m.end()
    }
}

/// The skeleton as carried, with `header` beside it.
struct SkeletonJson<'a> {
    skeleton: &'a Skeleton,
    header: &'a Value,
}

impl serde::Serialize for SkeletonJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let k = self.skeleton;
        let mut m = s.serialize_map(Some(9))?;
        m.serialize_entry("tensorfmt", &VERSION)?;
        m.serialize_entry("format", &k.format)?;
        m.serialize_entry("kind", &k.kind)?;
        m.serialize_entry("kind_id", &k.kind_id)?;
        if !k.layout.is_empty() {
            let layout: std::collections::BTreeMap<&str, &str> = k
                .layout
                .iter()
                .map(|(key, v)| (key.as_str(), v.as_str()))
                .collect();
            m.serialize_entry("layout", &layout)?;
        }
        m.serialize_entry("size", &k.size)?;
        m.serialize_entry("header", self.header)?;
        m.serialize_entry("tensors", &TensorsJson(&k.tensors))?;
        m.serialize_entry("skeleton", &base64_encode(&k.bytes))?;
        m.end()
    }
}

/// Every listed tensor, serialised one by one (no JSON tree of them is built).
struct TensorsJson<'a>(&'a [Listed]);

impl serde::Serialize for TensorsJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(ListedJson))
    }
}

/// A `String` writer that stops at `cap` bytes (the carried metadata's bound), so a
/// file whose metadata would be too large costs `cap`, not the whole text.
struct Capped {
    text: Vec<u8>,
    cap: usize,
    /// Bytes offered in all (also past the cap).
    offered: usize,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.offered = self.offered.saturating_add(buf.len());
        if self.text.len() + buf.len() > self.cap {
            return Err(std::io::Error::other("metadata over its bound"));
        }
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The skeleton's JSON text, written straight from the listing (a JSON tree of every
/// tensor cost about 3 KB each: 1.2 GB for 300,000 Caffe layers), or `Err(bytes)` when
/// it would exceed `cap` (at least that many bytes).
fn to_json_text(s: &Skeleton, header: &Value, cap: usize) -> std::result::Result<String, usize> {
    let mut w = Capped {
        text: Vec::new(),
        cap,
        offered: 0,
    };
    let json = SkeletonJson {
        skeleton: s,
        header,
    };
    match serde_json::to_writer(&mut w, &json) {
        Ok(()) => Ok(String::from_utf8(w.text).expect("serde_json writes UTF-8")),
        Err(_) => Err(w.offered.max(cap + 1)),
    }
}

/// Carried metadata as read: every field optional, so that what is missing gets our
/// own message; strings borrowed from the text, numbers as numbers. No JSON tree of
/// the whole text is built (one cost about ten times the text).
#[derive(serde::Deserialize)]
struct SkeletonIn<'a> {
    tensorfmt: Option<u64>,
    #[serde(borrow)]
    format: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    kind_id: Option<std::borrow::Cow<'a, str>>,
    layout: Option<std::collections::BTreeMap<String, String>>,
    size: Option<u64>,
    #[serde(borrow)]
    tensors: Option<Vec<ListedIn<'a>>>,
    #[serde(borrow)]
    skeleton: Option<std::borrow::Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct ListedIn<'a> {
    #[serde(borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    dtype: Option<std::borrow::Cow<'a, str>>,
    shape: Option<Vec<u64>>,
    #[serde(borrow)]
    layout: Option<LayoutIn<'a>>,
}

/// A run as carried: offset, piece length, `(count, stride)` repeats.
type RunIn = (u64, u64, Vec<(u64, u64)>);

#[derive(serde::Deserialize)]
struct LayoutIn<'a> {
    #[serde(borrow)]
    order: Option<std::borrow::Cow<'a, str>>,
    /// `[offset, len, [[count, stride], ...]]` each.
    runs: Option<Vec<RunIn>>,
}

fn parse_layout(v: LayoutIn<'_>) -> std::result::Result<SourceLayout, String> {
    let order = match v.order.as_deref() {
        Some("C") => Order::RowMajor,
        Some("F") => Order::ColumnMajor,
        _ => return Err("a layout without order C or F".into()),
    };
    let runs = v.runs.ok_or("a layout without runs")?;
    if runs.len() > MAX_RUNS {
        return Err(format!(
            "a layout of {} runs (at most {MAX_RUNS})",
            runs.len()
        ));
    }
    let mut out = Vec::with_capacity(runs.len());
    for (offset, len, repeat) in runs {
        if repeat.len() > 8 {
            return Err("a run nested more than 8 deep".into());
        }
        out.push(SourceRun {
            offset,
            len,
            repeat,
        });
    }
    Ok(SourceLayout { order, runs: out })
}

/// Parses and checks carried metadata: sizes bounded, every layout inside the file and
/// exactly its tensor's size, and skeleton plus cuts exactly the file.
fn parse(text: &str) -> std::result::Result<Skeleton, String> {
    if text.len() > MAX_METADATA {
        return Err(format!(
            "{} bytes of metadata (at most {MAX_METADATA})",
            text.len()
        ));
    }
    // The version first, alone, so an older or unknown layout is named as such
    // whatever the rest of it looks like.
    #[derive(serde::Deserialize)]
    struct Version {
        tensorfmt: Option<serde_json::Number>,
    }
    let version: Version = serde_json::from_str(text).map_err(|e| e.to_string())?;
    match version
        .tensorfmt
        .as_ref()
        .and_then(serde_json::Number::as_u64)
    {
        Some(VERSION) => {}
        Some(1) => {
            return Err(
                "it was written by an older tensorfmt, whose cuts were found by \
                        searching the file and cannot be trusted"
                    .into(),
            )
        }
        _ => {
            let v = version.tensorfmt.map(|n| n.to_string());
            return Err(format!(
                "unknown layout version {}",
                v.as_deref().unwrap_or("(none)")
            ));
        }
    }
    let v: SkeletonIn = serde_json::from_str(text).map_err(|e| e.to_string())?;
    debug_assert_eq!(v.tensorfmt, Some(VERSION));
    let format = v.format.ok_or("no format")?.into_owned();
    if !LEGACY.contains(&format.as_str()) {
        return Err(format!("{format:?} is not a legacy format"));
    }
    let size = v.size.ok_or("size is not a count")?;
    let listed_in = v.tensors.ok_or("no tensor list")?;
    let mut tensors = Vec::with_capacity(listed_in.len());
    let mut names = std::collections::HashSet::new();
    let mut cut = 0u64;
    for t in listed_in {
        let dims = t
            .shape
            .ok_or("a tensor without a shape")?
            .into_iter()
            .map(|d| usize::try_from(d).map_err(|_| "a dimension is not a count".to_string()))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let listed = Listed {
            name: t.name.ok_or("a tensor without a name")?.into_owned(),
            dtype: DType::from_name(&t.dtype.ok_or("a tensor without a dtype")?)
                .map_err(|e| e.to_string())?,
            shape: Shape::new(dims),
            layout: t.layout.map(parse_layout).transpose()?,
        };
        if let Some(l) = &listed.layout {
            let len = listed
                .byte_len()
                .ok_or_else(|| format!("tensor {:?}: its size overflows", listed.name))?;
            l.check(size, len)
                .map_err(|why| format!("tensor {:?}: {why}", listed.name))?;
            cut = cut.checked_add(len).ok_or("the cuts' size overflows")?;
        }
        if !names.insert(listed.name.clone()) {
            return Err(format!("tensor {:?} is listed twice", listed.name));
        }
        tensors.push(listed);
    }
    let skeleton = v.skeleton.ok_or("no skeleton")?;
    if skeleton.len() / 4 * 3 > MAX_SKELETON + 3 {
        return Err(format!("a skeleton over {MAX_SKELETON} bytes"));
    }
    let bytes = base64_decode(&skeleton)?;
    if cut.checked_add(bytes.len() as u64) != Some(size) {
        return Err(format!(
            "a skeleton of {} bytes and cuts of {cut} do not make the {size} bytes of the file",
            bytes.len()
        ));
    }
    Ok(Skeleton {
        format,
        kind: v.kind.map(|k| k.into_owned()).unwrap_or_default(),
        kind_id: v.kind_id.map(|k| k.into_owned()).unwrap_or_default(),
        layout: v.layout.unwrap_or_default().into_iter().collect(),
        size,
        tensors,
        bytes,
    })
}

/// The skeleton JSON a safetensors or npz file carries, if any.
///
/// ```
/// let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/core/model.safetensors");
/// let doc = tensorfmt::Document::open(&p)?;
/// assert!(tensorfmt::provenance::carried(doc.file()).is_none());
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub fn carried(file: &dyn TensorFile) -> Option<String> {
    fn find(fields: &[(String, FieldValue)]) -> Option<String> {
        fields.iter().find_map(|(k, v)| match v {
            FieldValue::Text(s) if k == KEY => Some(s.clone()),
            FieldValue::Map(m) if k == "__metadata__" => find(m),
            _ => None,
        })
    }
    match file.format() {
        "safetensors" | "npz" => find(&file.header()),
        _ => None,
    }
}

/// The format and kind of the original a safetensors or npz file carries, if any (a
/// conversion that asks for that kind asks for nothing new).
///
/// ```
/// let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
/// let dir = tempfile::tempdir()?;
/// let npz = dir.path().join("x.npz");
/// tensorfmt::Document::open(&src)?.convert_to(&npz, tensorfmt::Format::Npz)?;
/// let doc = tensorfmt::Document::open(&npz)?;
/// assert_eq!(tensorfmt::provenance::carried_kind(doc.file()), Some(("pvp".into(), "dense".into())));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn carried_kind(file: &dyn TensorFile) -> Option<(String, String)> {
    #[derive(serde::Deserialize)]
    struct Head {
        format: String,
        kind_id: String,
    }
    let text = carried(file)?;
    let head: Head = serde_json::from_str(&text).ok()?;
    Some((head.format, head.kind_id))
}

/// The layout settings ([`TensorFile::layout_settings`]: a rotation/flip file's map
/// dims, a SOM's map rank, a weight file's unit cell) of the original a safetensors or
/// npz file carries, when it is of format `format` and of kind `kind` (any kind when
/// `None`): what a writer needs beside the tensors when the original is not restored
/// because the write asks for something of its own (a dtype, a setting). `None` when
/// nothing of the kind is carried, or it was recorded before layouts were.
///
/// ```
/// let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/som/rotflip_cart_2x2.bin");
/// let dir = tempfile::tempdir()?;
/// let npz = dir.path().join("x.npz");
/// tensorfmt::Document::open(&src)?.convert_to(&npz, tensorfmt::Format::Npz)?;
/// let doc = tensorfmt::Document::open(&npz)?;
/// let layout = tensorfmt::provenance::carried_layout(doc.file(), "som", Some("som-rotflip"));
/// assert_eq!(layout, Some(vec![("som_dims".into(), "2,2".into())]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn carried_layout(
    file: &dyn TensorFile,
    format: &str,
    kind: Option<&str>,
) -> Option<Vec<(String, String)>> {
    #[derive(serde::Deserialize)]
    struct Head {
        format: String,
        kind_id: String,
        layout: Option<std::collections::BTreeMap<String, String>>,
    }
    let text = carried(file)?;
    let head: Head = serde_json::from_str(&text).ok()?;
    (head.format == format && kind.is_none_or(|k| k == head.kind_id))
        .then(|| head.layout.map(|l| l.into_iter().collect()))
        .flatten()
}

/// A tensor's bytes in a given order, handed out front to back.
struct Stream<'a> {
    chunks: tensorfmt_core::Chunks<'a>,
    current: Bytes,
    at: usize,
    dtype: DType,
    order: Order,
}

impl<'a> Stream<'a> {
    fn open(file: &'a dyn TensorFile, t: &Listed, order: Order) -> Result<Stream<'a>> {
        let chunks: tensorfmt_core::Chunks<'a> = if order == Order::RowMajor {
            file.read_chunks(&t.name)?
        } else {
            let whole = file.read_tensor(&t.name)?.to_order(order)?;
            Box::new(std::iter::once(Ok(whole)))
        };
        Ok(Stream {
            chunks,
            current: Bytes::new(),
            at: 0,
            dtype: t.dtype,
            order,
        })
    }

    /// Writes the next `len` bytes to `out`; `Ok(false)` when the tensor runs out.
    fn copy(&mut self, mut len: u64, out: &mut dyn Write) -> Result<bool> {
        while len > 0 {
            if self.at == self.current.len() {
                let Some(chunk) = self.chunks.next() else {
                    return Ok(false);
                };
                let chunk = chunk?;
                if chunk.dtype() != self.dtype {
                    return Ok(false);
                }
                let chunk = chunk.to_order(self.order)?;
                self.current = chunk.bytes().clone();
                self.at = 0;
                continue;
            }
            let take = (len as usize).min(self.current.len() - self.at);
            out.write_all(&self.current[self.at..self.at + take])?;
            self.at += take;
            len -= take as u64;
        }
        Ok(true)
    }
}

/// Whether two layouts describe the same bytes (pieces compared after joining
/// adjacent ones), streamed.
fn same_bytes(a: &SourceLayout, b: &SourceLayout) -> bool {
    fn joined(l: &SourceLayout) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut pieces = l
            .runs
            .iter()
            .filter(|r| r.len > 0)
            .flat_map(|r| r.pieces().map(move |o| (o, r.len)))
            .peekable();
        std::iter::from_fn(move || {
            let (o, mut len) = pieces.next()?;
            while let Some(&(o2, l2)) = pieces.peek() {
                if o2 != o + len {
                    break;
                }
                len += l2;
                pieces.next();
            }
            Some((o, len))
        })
    }
    a.order == b.order && joined(a).eq(joined(b))
}

/// Whether tensor `t` holds the same bytes in two files, compared piece by piece.
fn same_values(a: &dyn TensorFile, b: &dyn TensorFile, t: &Listed) -> Result<bool> {
    let mut sa = Stream::open(a, t, Order::RowMajor)?;
    let mut sb = Stream::open(b, t, Order::RowMajor)?;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    loop {
        x.clear();
        y.clear();
        let more_a = sa.copy(1 << 20, &mut x)?;
        let more_b = sb.copy(1 << 20, &mut y)?;
        if x != y || more_a != more_b {
            return Ok(false);
        }
        if !more_a {
            return Ok(true);
        }
    }
}

/// Opens a spliced file again, as the original format's reader: the dispatch hands
/// this in, so that this module needs no format table.
pub type Reopen<'a> = dyn Fn(Bytes) -> Result<Box<dyn TensorFile>> + 'a;

/// Rebuilds the original legacy file at `path` from `file` (a safetensors or npz view
/// carrying its skeleton), when `target` (a format name) is that file's format and
/// `options` ask for nothing else ([`WriteOptions::asks_nothing`]). The tensors must keep their
/// names, dtypes and shapes (values may change). Before committing, the spliced file
/// is opened again with `reopen`: it must list the same tensors, its reader must
/// declare the recorded layout for every cut tensor, and every other tensor must read
/// back equal; otherwise nothing is written and [`Restored::Refused`] says why, or,
/// when only tensors that are not replaced in place changed, [`Restored::Anew`] hands
/// on the original's layout to write them anew with.
///
/// ```
/// use tensorfmt::provenance::{restore, Restored};
/// use tensorfmt::{Document, Format};
/// let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
/// let dir = tempfile::tempdir()?;
/// let npz = dir.path().join("x.npz");
/// Document::open(&src)?.convert_to(&npz, Format::Npz)?;
/// let out = dir.path().join("x.pvp");
/// let reopen = |b: bytes::Bytes| tensorfmt::open_bytes(b, Format::Pvp, None, &Default::default());
/// let done = restore(&*Document::open(&npz)?, &out, "pvp", &Default::default(), &reopen)?;
/// assert_eq!(done, Restored::Written(()));
/// assert_eq!(std::fs::read(&out)?, std::fs::read(&src)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn restore(
    file: &dyn TensorFile,
    path: &Path,
    target: &str,
    options: &WriteOptions,
    reopen: &Reopen<'_>,
) -> Result<Restored> {
    let Some(text) = carried(file) else {
        return Ok(Restored::NotRecorded);
    };
    let skeleton = match parse(&text) {
        Ok(s) => s,
        Err(why) => {
            return Ok(Restored::Refused(format!(
                "the metadata {KEY:?} was not used ({why}); written from the tensors alone"
            )))
        }
    };
    if skeleton.format != target {
        return Ok(Restored::NotRecorded);
    }
    if !options.asks_nothing() {
        // Said, not silent: the user gets a file without the original's header.
        return Ok(Restored::Refused(format!(
            "the original {target} file the metadata {KEY:?} carries was not restored: the \
             write asks for something of its own (a dtype, layout, kind or --set); \
             written from the tensors alone"
        )));
    }
    let refuse = |why: String| {
        Ok(Restored::Refused(format!(
            "the original {} file's header and layout were not kept: {why}; written from \
             the tensors alone",
            skeleton.format
        )))
    };
    let infos = file.tensors();
    let by_name: HashMap<&str, &tensorfmt_core::TensorInfo> =
        infos.iter().map(|i| (i.name.as_str(), i)).collect();
    for t in &skeleton.tensors {
        match by_name.get(t.name.as_str()) {
            None => return refuse(format!("tensor {:?} is missing", t.name)),
            Some(i) if i.dtype != t.dtype || i.shape != t.shape => {
                return refuse(format!(
                    "tensor {:?} is {} {}, the original's was {} {}",
                    t.name, i.dtype, i.shape, t.dtype, t.shape
                ))
            }
            Some(_) => {}
        }
    }
    if infos.len() != skeleton.tensors.len() {
        let listed: std::collections::HashSet<&str> =
            skeleton.tensors.iter().map(|t| t.name.as_str()).collect();
        let extra = infos
            .iter()
            .find(|i| !listed.contains(i.name.as_str()))
            .map_or_else(|| "a name twice".to_string(), |i| format!("{:?}", i.name));
        return refuse(format!(
            "the file holds {extra}, which the original did not"
        ));
    }
    let mut out = tensorfmt_core::io::AtomicFile::create(path)?.sync(!options.skip_fsync);
    let io = |e: std::io::Error| Error::io_op(path, "writing", e);
    let layouts: Vec<Option<&SourceLayout>> =
        skeleton.tensors.iter().map(|t| t.layout.as_ref()).collect();
    let mut streams: Vec<Option<Stream<'_>>> = skeleton.tensors.iter().map(|_| None).collect();
    let (mut written, mut from_skeleton) = (0u64, 0usize);
    for (offset, len, t) in merged(&layouts) {
        if offset < written {
            return refuse(format!(
                "tensor {:?} overlaps other bytes at offset {offset}",
                skeleton.tensors[t].name
            ));
        }
        let gap = (offset - written) as usize;
        let Some(bytes) = skeleton.bytes.get(from_skeleton..from_skeleton + gap) else {
            return refuse("the skeleton is shorter than its layout".into());
        };
        out.write_all(bytes).map_err(io)?;
        from_skeleton += gap;
        let listed = &skeleton.tensors[t];
        let stream = match &mut streams[t] {
            Some(s) => s,
            slot => {
                let order = listed.layout.as_ref().map_or(Order::RowMajor, |l| l.order);
                slot.insert(Stream::open(file, listed, order)?)
            }
        };
        if !stream.copy(len, &mut out)? {
            return refuse(format!(
                "tensor {:?} holds fewer bytes than its shape",
                listed.name
            ));
        }
        written = offset + len;
    }
    drop(streams);
    out.write_all(&skeleton.bytes[from_skeleton..])
        .map_err(io)?;
    // The spliced file, read as its format: it must be the document.
    let data = out.read_back()?;
    if data.len() as u64 != skeleton.size {
        return refuse(format!(
            "the spliced file has {} bytes, not {}",
            data.len(),
            skeleton.size
        ));
    }
    let back = match reopen(data) {
        Ok(b) => b,
        Err(e) => return refuse(format!("the spliced file does not read back ({e})")),
    };
    let back_infos = back.tensors();
    if back_infos.len() != infos.len()
        || back_infos
            .iter()
            .any(|b| by_name.get(b.name.as_str()).is_none_or(|i| *i != b))
    {
        return refuse("the spliced file lists other tensors".into());
    }
    let mut declared: HashMap<String, SourceLayout> = HashMap::new();
    for (info, layout) in back_infos.into_iter().zip(back.source_layouts()) {
        if let Some(l) = layout {
            declared.insert(info.name, l);
        }
    }
    // Tensors the reader declares no byte range for (sparse entries and the frame
    // times between them, byte weights, ...) stayed in the skeleton: the spliced file
    // holds their original values, and an edit of them is written anew.
    let mut changed = Vec::new();
    for t in &skeleton.tensors {
        match &t.layout {
            Some(l) => {
                if !declared.get(&t.name).is_some_and(|b| same_bytes(l, b)) {
                    return refuse(format!(
                        "tensor {:?} does not lie where the metadata says in the spliced file",
                        t.name
                    ));
                }
            }
            None => {
                if !same_values(file, &*back, t).unwrap_or(false) {
                    changed.push(format!("{:?}", t.name));
                }
            }
        }
    }
    if !changed.is_empty() {
        let kind = back.kind();
        let (them, is) = match changed.len() {
            1 => ("it is", "tensor"),
            _ => ("they are", "tensors"),
        };
        return Ok(Restored::Anew(Anew {
            why: format!(
                "{is} {} changed, and in a {kind} {} file {them} not replaced in place \
                 (only tensors stored verbatim at regular offsets are)",
                changed.join(", "),
                skeleton.format
            ),
            kind_id: back.kind_id(),
            kind,
            layout: back.layout_settings(),
        }));
    }
    drop(back);
    out.commit()?;
    Ok(Restored::Written(()))
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(B64[(n >> shift) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> std::result::Result<Vec<u8>, String> {
    let s = text.as_bytes();
    if !s.len().is_multiple_of(4) {
        return Err("base64 length is not a multiple of 4".into());
    }
    let value = |c: u8| -> std::result::Result<u32, String> {
        B64.iter()
            .position(|&b| b == c)
            .map(|p| p as u32)
            .ok_or_else(|| format!("{:?} is not a base64 digit", c as char))
    };
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for (k, q) in s.chunks(4).enumerate() {
        let last = k + 1 == s.len() / 4;
        let pad = q.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return Err("misplaced base64 padding".into());
        }
        let mut n = 0u32;
        for &c in &q[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad as u32;
        let b = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&b[..3 - pad]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_every_length() {
        for n in 0..20usize {
            let data: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            let s = base64_encode(&data);
            assert_eq!(base64_decode(&s).unwrap(), data, "{s}");
        }
        assert_eq!(base64_encode(b"Man"), "TWFu");
        assert_eq!(base64_encode(b"Ma"), "TWE=");
        assert_eq!(base64_encode(b"M"), "TQ==");
        assert!(base64_decode("TQ=").is_err());
        assert!(base64_decode("T===").is_err());
        assert!(base64_decode("TQ==TWFu").is_err());
        assert!(base64_decode("TW!u").is_err());
    }

    fn strided(offset: u64, len: u64, count: u64, stride: u64) -> SourceLayout {
        SourceLayout {
            order: Order::RowMajor,
            runs: vec![SourceRun {
                offset,
                len,
                repeat: vec![(count, stride)],
            }],
        }
    }

    #[test]
    fn interleaved_layouts_merge_in_file_order() {
        // A dense movie: 8-byte times before 16 value bytes, three frames.
        let time = strided(80, 8, 3, 24);
        let values = strided(88, 16, 3, 24);
        let got: Vec<_> = merged(&[Some(&values), Some(&time)]).collect();
        assert_eq!(
            got,
            [
                (80, 8, 1),
                (88, 16, 0),
                (104, 8, 1),
                (112, 16, 0),
                (128, 8, 1),
                (136, 16, 0)
            ]
        );
        assert_eq!(overlapping(&[Some(&values), Some(&time)]), [false, false]);
        let over = strided(84, 8, 1, 8);
        assert_eq!(overlapping(&[Some(&values), Some(&over)]), [true, false]);
    }

    fn good() -> Skeleton {
        Skeleton {
            format: "pvp".into(),
            kind: "k".into(),
            kind_id: "dense".into(),
            layout: vec![("nx".into(), "1".into())],
            size: 12,
            tensors: vec![Listed {
                name: "v".into(),
                dtype: DType::F32,
                shape: Shape::new([1]),
                layout: Some(SourceLayout::contiguous(4, 4)),
            }],
            bytes: vec![0; 8],
        }
    }

    fn text(s: &Skeleton) -> String {
        to_json_text(s, &Value::Null, MAX_METADATA).unwrap()
    }

    #[test]
    fn hostile_metadata_is_refused_not_trusted() {
        assert_eq!(parse(&text(&good())).unwrap(), good());
        let with = |f: &dyn Fn(&mut Skeleton)| {
            let mut s = good();
            f(&mut s);
            parse(&text(&s))
        };
        // Runs past the end of the file.
        assert!(with(&|s| s.tensors[0].layout = Some(SourceLayout::contiguous(10, 4))).is_err());
        // More (or fewer) bytes than the tensor holds.
        assert!(with(&|s| s.tensors[0].layout = Some(strided(0, 4, 2, 4))).is_err());
        // Overflowing counts and strides.
        assert!(with(&|s| s.tensors[0].layout = Some(strided(0, 4, u64::MAX, 4))).is_err());
        assert!(with(&|s| s.tensors[0].layout = Some(strided(0, 4, 2, u64::MAX))).is_err());
        // A run whose pieces overlap each other.
        assert!(with(&|s| {
            s.tensors[0].shape = Shape::new([2]);
            s.size = 16;
            s.tensors[0].layout = Some(strided(4, 4, 2, 2));
        })
        .is_err());
        // A tensor listed twice (another one then never checked).
        assert!(with(&|s| {
            let again = s.tensors[0].clone();
            s.tensors.push(Listed {
                layout: None,
                ..again
            });
        })
        .is_err());
        // Bytes that do not add up to the file.
        assert!(with(&|s| s.size = 13).is_err());
        // A huge file claimed from a small skeleton.
        assert!(with(&|s| s.size = 1 << 40).is_err());
        // Not a legacy format, an old or unknown version, not JSON.
        assert!(with(&|s| s.format = "safetensors".into()).is_err());
        assert!(parse(r#"{"tensorfmt": 1}"#).is_err());
        assert!(parse(r#"{"tensorfmt": 99}"#).is_err());
        assert!(parse("not json").is_err());
        assert!(parse(&" ".repeat(MAX_METADATA + 1)).is_err());
    }
}
