//! [`CaffeFile`]: any Caffe protobuf file as named tensors for the facade
//! (`<layer>/<i>` for models, `mean` for a mean file, `history/<i>` for a solver state,
//! `blobs/<i>` for a BlobProtoVector).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::OnceLock;

use bytes::Bytes;
use tensorfmt_core::{DType, FieldValue, Order, SourceLayout, Tensor, TensorFile, TensorInfo};

use crate::error::{CaffeError, Result};
use crate::raw::{
    self, shape_string, walk_net, Budget, Model, NetItem, NetVersion, RawBlob, RawLayer,
    RawSolverState, StructureDigest,
};
use crate::read::{layer_path, precheck, CaffeReadOptions, FileKind};
use crate::write::ShapeFields;

/// The parsed contents of a Caffe file.
#[derive(Debug, Clone)]
pub enum Content {
    /// A `.caffemodel`.
    Model(Model),
    /// A `.binaryproto` mean file.
    Mean(RawBlob),
    /// A BlobProtoVector.
    BlobVector(Vec<RawBlob>),
    /// A `.solverstate`.
    SolverState(RawSolverState),
}

/// One exported blob: a few words, not a parsed layer.
#[derive(Debug, Clone)]
struct BlobEntry {
    /// The export name, a range of [`CaffeFile::names`].
    name: Range<usize>,
    /// The exported shape, a range of [`CaffeFile::dims`].
    dims: Range<usize>,
    dtype: DType,
    /// The values: a slice of the file (one packed run) or a gathered buffer.
    values: Bytes,
}

/// A Caffe file opened as named tensors. Every blob is checked on open (shape rules and
/// exact counts, as Caffe's FromProto); the tensors share the file's bytes (zero copy).
///
/// Opened from bytes ([`CaffeFile::open`], [`CaffeFile::open_as`]), the file is walked
/// once and only a small record per blob is kept (its export name in one string, its
/// shape in one list of dims, its values as a slice of the file), plus the header,
/// which describes the first 32 layers: a net of 300,000 blob-less layers costs a few
/// bytes a layer while it is read and nothing after. The typed contents
/// ([`CaffeFile::content`]) are parsed again from the bytes when first asked for.
///
/// Legacy 4-D blobs are exported with the shape modern Caffe gives them
/// ([`RawBlob::legacy_squeezed_shape`]: `(1,1,M,N)` as `[M, N]`, `(1,1,1,N)` as `[N]`);
/// `inspect` marks them `legacy`.
#[derive(Debug, Clone)]
pub struct CaffeFile {
    kind: FileKind,
    /// The net version, for a model.
    version: NetVersion,
    /// The typed contents: given to [`CaffeFile::new`], or parsed on first use.
    content: OnceLock<Content>,
    /// The options the file was opened with (for parsing the contents later).
    opts: CaffeReadOptions,
    /// Every export name, one after the other.
    names: String,
    /// Every exported shape's dims, one after the other.
    dims: Vec<usize>,
    blobs: Vec<BlobEntry>,
    /// Blob positions sorted by export name (lookups by name are O(log n), without a
    /// second copy of every name).
    by_name: Vec<u32>,
    /// How many blobs have the legacy 4-D shape fields (the rest have `shape`).
    legacy_blobs: usize,
    header: Vec<(String, FieldValue)>,
    warnings: Vec<String>,
    /// The bytes the file was parsed from (set by [`CaffeFile::open_as`]).
    source: Option<Bytes>,
}

fn blob_summary(b: &RawBlob, path: &str) -> Result<FieldValue> {
    let dims = b.shape_dims(path)?;
    let mut s = shape_string(&dims);
    if b.has_legacy() {
        s.push_str(" legacy");
    }
    s.push(' ');
    s.push_str(b.value_source().map_or("raw_data", |v| v.field()));
    Ok(FieldValue::Text(s))
}

/// How many layers the header describes one by one (`layer`); `layers` counts them
/// all and the tensors list every blob, so a net of 300,000 layers does not make a
/// header of 300,000 entries.
const HEADER_LAYERS_MAX: usize = 32;

/// What an open collects: the blob records, the header's layer list, and the first
/// error of a blob check (reported after the walk, so a file's wire errors come first,
/// as when the whole file was parsed before any blob was checked).
struct Builder<'a> {
    names: String,
    dims: Vec<usize>,
    blobs: Vec<BlobEntry>,
    legacy_blobs: usize,
    layer_list: Vec<FieldValue>,
    layers: usize,
    /// Layer names in use as export bases, borrowed from the file or the contents.
    used: HashSet<&'a str>,
    /// The layers whose base is made up, with their name: `layer<i>` for an unnamed
    /// layer `i`, `<name>@<i>` for a repeated name (no string per layer).
    made: HashMap<usize, &'a str>,
    failed: Option<CaffeError>,
}

impl<'a> Builder<'a> {
    fn new() -> Builder<'a> {
        Builder {
            names: String::new(),
            dims: Vec::new(),
            blobs: Vec::new(),
            legacy_blobs: 0,
            layer_list: Vec::new(),
            layers: 0,
            used: HashSet::new(),
            made: HashMap::new(),
            failed: None,
        }
    }

    /// Records one blob exported as `name` (`<base>/<j>` when `index` is given).
    fn blob(&mut self, base: &str, index: Option<usize>, b: &RawBlob, path: &str) -> Result<()> {
        let shape = b.legacy_squeezed_shape(path)?;
        // The count checks of the values and the diff (the tensor itself is not kept),
        // and of a raw payload's type.
        let dtype = b.tensor_with_shape(shape.clone(), path)?.dtype();
        b.diff_tensor(path)?;
        let start = self.names.len();
        self.names.push_str(base);
        if let Some(j) = index {
            use std::fmt::Write;
            let _ = write!(self.names, "/{j}");
        }
        let d = self.dims.len();
        self.dims.extend_from_slice(&shape);
        self.legacy_blobs += usize::from(b.has_legacy());
        self.blobs.push(BlobEntry {
            name: start..self.names.len(),
            dims: d..self.dims.len(),
            dtype,
            values: b.value_bytes()?.clone(),
        });
        Ok(())
    }

    /// Records layer `i` (its blobs, and its header entry among the first layers).
    /// `name` is the layer's name borrowed from where it lives for as long as the
    /// builder (the file's bytes or the parsed contents).
    fn layer(&mut self, l: &RawLayer, name: &'a str) {
        let i = self.layers;
        self.layers += 1;
        let base: Cow<'a, str> = if name.is_empty() {
            Cow::Owned(format!("layer{i}"))
        } else if self.taken(name) {
            Cow::Owned(format!("{name}@{i}"))
        } else {
            Cow::Borrowed(name)
        };
        let mut summaries = Vec::new();
        if self.failed.is_none() {
            for (j, b) in l.blobs.iter().enumerate() {
                let path = format!("{}.blobs[{j}]", layer_path(l, i));
                let checked = self.blob(&base, Some(j), b, &path).and_then(|()| {
                    if i < HEADER_LAYERS_MAX {
                        summaries.push(blob_summary(b, &path)?);
                    }
                    Ok(())
                });
                if let Err(e) = checked {
                    self.failed = Some(e);
                    break;
                }
            }
        }
        match base {
            Cow::Borrowed(n) => {
                self.used.insert(n);
            }
            Cow::Owned(_) => {
                self.made.insert(i, name);
            }
        }
        if i < HEADER_LAYERS_MAX {
            self.layer_list.push(FieldValue::Map(vec![
                ("name".into(), l.name.clone().into()),
                ("type".into(), l.type_name.clone().into()),
                ("blobs".into(), FieldValue::List(summaries)),
            ]));
        }
    }

    /// Whether `n` is the base of an earlier layer.
    fn taken(&self, n: &str) -> bool {
        /// The value of a decimal written as `format!("{i}")` writes it.
        fn index(s: &str) -> Option<usize> {
            let canonical = !s.is_empty()
                && s.bytes().all(|c| c.is_ascii_digit())
                && (s.len() == 1 || !s.starts_with('0'));
            canonical.then(|| s.parse().ok()).flatten()
        }
        if self.used.contains(n) {
            return true;
        }
        let unnamed = n
            .strip_prefix("layer")
            .and_then(index)
            .is_some_and(|i| self.made.get(&i) == Some(&""));
        let repeated = n.rsplit_once('@').is_some_and(|(name, i)| {
            !name.is_empty() && index(i).is_some_and(|i| self.made.get(&i) == Some(&name))
        });
        unnamed || repeated
    }

    /// Records one blob of a list (`<prefix>/<i>`, checked under `<field>[<i>]`).
    fn listed(&mut self, prefix: &str, field: &str, b: &RawBlob) {
        if self.failed.is_some() {
            return;
        }
        let i = self.blobs.len();
        if let Err(e) = self.blob(prefix, Some(i), b, &format!("{field}[{i}]")) {
            self.failed = Some(e);
        }
    }

    fn finish(
        self,
        kind: FileKind,
        version: NetVersion,
        opts: CaffeReadOptions,
        header: Vec<(String, FieldValue)>,
        warnings: Vec<String>,
    ) -> Result<CaffeFile> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let names = self.names;
        let blobs = self.blobs;
        let mut by_name: Vec<u32> = (0..blobs.len() as u32).collect();
        // Stable: of two equal names the first stays first (and is the one found).
        by_name.sort_by(|&a, &b| {
            names[blobs[a as usize].name.clone()].cmp(&names[blobs[b as usize].name.clone()])
        });
        Ok(CaffeFile {
            kind,
            version,
            content: OnceLock::new(),
            opts,
            names,
            dims: self.dims,
            blobs,
            by_name,
            legacy_blobs: self.legacy_blobs,
            header,
            warnings,
            source: None,
        })
    }
}

fn model_header(
    name: Option<&str>,
    version: NetVersion,
    layers: usize,
    list: Vec<FieldValue>,
    structure: String,
) -> Vec<(String, FieldValue)> {
    let mut header: Vec<(String, FieldValue)> = vec![
        ("message".into(), "NetParameter".into()),
        ("version".into(), version.to_string().into()),
    ];
    if let Some(n) = name {
        header.push(("name".into(), n.to_string().into()));
    }
    header.push(("layers".into(), layers.into()));
    header.push(("layer".into(), FieldValue::List(list)));
    // What Caffe runs beyond the blobs, so that `diff` sees a changed topology.
    header.push(("structure".into(), structure.into()));
    header
}

fn solver_header(s: &RawSolverState, history: usize) -> Vec<(String, FieldValue)> {
    let mut header: Vec<(String, FieldValue)> = vec![("message".into(), "SolverState".into())];
    if let Some(v) = s.iter {
        header.push(("iter".into(), v.into()));
    }
    if let Some(v) = &s.learned_net {
        header.push(("learned_net".into(), v.clone().into()));
    }
    if let Some(v) = s.current_step {
        header.push(("current_step".into(), v.into()));
    }
    header.push(("history".into(), history.into()));
    header
}

fn mean_header(b: &RawBlob) -> Result<Vec<(String, FieldValue)>> {
    Ok(vec![
        ("message".into(), "BlobProto".into()),
        ("blob".into(), blob_summary(b, "BlobProto")?),
    ])
}

fn vector_header(n: usize) -> Vec<(String, FieldValue)> {
    vec![
        ("message".into(), "BlobProtoVector".into()),
        ("blobs".into(), n.into()),
    ]
}

impl CaffeFile {
    /// Opens parsed contents: checks every blob and builds the tensor list.
    pub fn new(content: Content) -> Result<CaffeFile> {
        let opts = CaffeReadOptions::default();
        let mut file = match &content {
            Content::Model(m) => {
                let mut b = Builder::new();
                for l in &m.layers {
                    b.layer(l, &l.name);
                }
                let header = model_header(
                    m.name.as_deref(),
                    m.version,
                    m.layers.len(),
                    std::mem::take(&mut b.layer_list),
                    m.structure(),
                );
                b.finish(
                    FileKind::Model,
                    m.version,
                    opts,
                    header,
                    m.warnings().to_vec(),
                )?
            }
            Content::Mean(blob) => {
                let mut b = Builder::new();
                b.blob("mean", None, blob, "BlobProto")?;
                b.finish(
                    FileKind::Mean,
                    NetVersion::V2,
                    opts,
                    mean_header(blob)?,
                    Vec::new(),
                )?
            }
            Content::BlobVector(v) => {
                let mut b = Builder::new();
                for blob in v {
                    b.listed("blobs", "blobs", blob);
                }
                let header = vector_header(v.len());
                b.finish(
                    FileKind::BlobVector,
                    NetVersion::V2,
                    opts,
                    header,
                    Vec::new(),
                )?
            }
            Content::SolverState(s) => {
                let mut b = Builder::new();
                for blob in &s.history {
                    b.listed("history", "history", blob);
                }
                let header = solver_header(s, s.history.len());
                b.finish(
                    FileKind::SolverState,
                    NetVersion::V2,
                    opts,
                    header,
                    Vec::new(),
                )?
            }
        };
        file.content = OnceLock::from(content);
        Ok(file)
    }

    /// Detects the kind of `data` and opens it.
    pub fn open(data: Bytes, opts: &CaffeReadOptions) -> Result<CaffeFile> {
        if data.starts_with(&crate::read::HDF5_SIGNATURE) {
            return Err(CaffeError::Hdf5);
        }
        if data.len() as u64 > opts.max_file_bytes {
            return Err(CaffeError::TooLarge {
                size: data.len() as u64,
                limit: opts.max_file_bytes,
            });
        }
        let kind = crate::read::detect_kind(&data).ok_or_else(|| {
            CaffeError::NotCaffe(if data.is_empty() {
                "empty file".into()
            } else {
                "no NetParameter, BlobProto, BlobProtoVector or SolverState structure".into()
            })
        })?;
        CaffeFile::open_as(data, kind, opts)
    }

    /// Opens `data` as the given kind, walking it once and keeping a record per blob
    /// (see [`CaffeFile`]).
    pub fn open_as(data: Bytes, kind: FileKind, opts: &CaffeReadOptions) -> Result<CaffeFile> {
        precheck(&data, opts)?;
        let mut budget = Budget::new(opts.limits);
        let file = &data;
        let mut b = Builder::new();
        let mut file_out = match kind {
            FileKind::Model => {
                let mut digest = StructureDigest::new();
                let head = walk_net(file, opts.mixed_layers, &mut budget, &mut |item| {
                    match &item {
                        NetItem::Name(r) | NetItem::Raw(r) => digest.raw(file, r.clone()),
                        NetItem::Layer(l) => digest.layer(file, l),
                    }
                    if let NetItem::Layer(l) = item {
                        // The name borrowed from the file (the builder outlives the
                        // parsed layer): the set of names in use costs no copies.
                        let name = match &l.name_range {
                            Some(r) => std::str::from_utf8(&file[r.clone()]).unwrap_or_default(),
                            None => "",
                        };
                        b.layer(&l, name);
                    }
                    Ok(())
                })?;
                let header = model_header(
                    head.name.as_deref(),
                    head.version,
                    b.layers,
                    std::mem::take(&mut b.layer_list),
                    digest.hex(),
                );
                b.finish(kind, head.version, *opts, header, head.warnings)?
            }
            FileKind::Mean => {
                let blob = raw::parse_blob(file, 0..file.len(), "BlobProto", &mut budget)?;
                b.blob("mean", None, &blob, "BlobProto")?;
                b.finish(kind, NetVersion::V2, *opts, mean_header(&blob)?, Vec::new())?
            }
            FileKind::BlobVector => {
                let mut n = 0;
                raw::walk_blob_vector(file, &mut budget, &mut |blob| {
                    n += 1;
                    b.listed("blobs", "blobs", &blob);
                    Ok(())
                })?;
                b.finish(kind, NetVersion::V2, *opts, vector_header(n), Vec::new())?
            }
            FileKind::SolverState => {
                let mut n = 0;
                let s = raw::walk_solver_state(file, &mut budget, &mut |blob| {
                    n += 1;
                    b.listed("history", "history", &blob);
                    Ok(())
                })?;
                b.finish(
                    kind,
                    NetVersion::V2,
                    *opts,
                    solver_header(&s, n),
                    Vec::new(),
                )?
            }
        };
        file_out.source = Some(data);
        Ok(file_out)
    }

    /// The parsed contents: every layer with its name, type, blobs and the bytes kept
    /// for rewriting. A file opened from bytes is parsed again on the first call (the
    /// open keeps only the tensors' records); that parse cannot fail unless the bytes
    /// changed since the open (see [`CaffeFile::try_content`]).
    ///
    /// # Panics
    ///
    /// When the contents no longer parse: the mapped file was rewritten by another
    /// process since the open. [`CaffeFile::try_content`] returns that error instead.
    pub fn content(&self) -> &Content {
        match self.try_content() {
            Ok(c) => c,
            Err(e) => panic!("the Caffe file changed since it was opened: {e}"),
        }
    }

    /// The parsed contents ([`CaffeFile::content`]), or the error of parsing them
    /// again.
    ///
    /// ```
    /// use tensorfmt_caffe::{encode_weights_model, CaffeFile, Content, RawBlob, WeightsLayer};
    /// let bytes = encode_weights_model(None, &[WeightsLayer {
    ///     name: "ip".into(), type_name: None, blobs: vec![RawBlob::from_f32(&[1], &[1.0])] }]);
    /// let f = CaffeFile::open(bytes.into(), &Default::default())?;
    /// let Content::Model(m) = f.try_content()? else { panic!("a model") };
    /// assert_eq!(m.layers[0].name, "ip");
    /// # Ok::<(), tensorfmt_caffe::CaffeError>(())
    /// ```
    pub fn try_content(&self) -> Result<&Content> {
        if let Some(c) = self.content.get() {
            return Ok(c);
        }
        let data = self
            .source
            .clone()
            .expect("a file without contents was opened from bytes");
        let opts = &self.opts;
        let content = match self.kind {
            FileKind::Model => Content::Model(crate::read::read_model_with(data, opts)?),
            FileKind::Mean => Content::Mean(crate::read::read_blob_proto_with(data, opts)?),
            FileKind::BlobVector => {
                Content::BlobVector(crate::read::read_blob_vector_with(data, opts)?)
            }
            FileKind::SolverState => {
                Content::SolverState(crate::read::read_solver_state_with(data, opts)?)
            }
        };
        Ok(self.content.get_or_init(|| content))
    }

    /// Where a blob's values lie in the source, when they are a slice of it.
    fn layout_of(&self, values: &Bytes) -> Option<SourceLayout> {
        let file = self.source.as_ref()?;
        let offset = (values.as_ptr() as usize).checked_sub(file.as_ptr() as usize)?;
        if values.is_empty() || offset.checked_add(values.len())? > file.len() {
            return None;
        }
        Some(SourceLayout::contiguous(offset as u64, values.len() as u64))
    }

    /// The file kind.
    pub fn file_kind(&self) -> FileKind {
        self.kind
    }

    fn name_of(&self, b: &BlobEntry) -> &str {
        &self.names[b.name.clone()]
    }

    /// The blob exported as `name`.
    fn find(&self, name: &str) -> Option<&BlobEntry> {
        let at = self
            .by_name
            .partition_point(|&i| self.name_of(&self.blobs[i as usize]) < name);
        let &i = self.by_name.get(at)?;
        let b = &self.blobs[i as usize];
        (self.name_of(b) == name).then_some(b)
    }

    fn info(&self, b: &BlobEntry) -> TensorInfo {
        TensorInfo::new(self.name_of(b), b.dtype, self.dims[b.dims.clone()].to_vec())
    }
}

impl TensorFile for CaffeFile {
    fn format(&self) -> &'static str {
        "caffe"
    }

    fn kind(&self) -> String {
        match self.kind {
            FileKind::Model => format!("model ({} NetParameter)", self.version),
            FileKind::Mean => "mean file (BlobProto)".into(),
            FileKind::BlobVector => "BlobProtoVector".into(),
            FileKind::SolverState => "solver state".into(),
        }
    }

    fn kind_id(&self) -> &'static str {
        match self.kind {
            FileKind::Model => "caffemodel",
            FileKind::Mean => "binaryproto",
            FileKind::BlobVector => "blobprotovector",
            FileKind::SolverState => "solverstate",
        }
    }

    fn header(&self) -> Vec<(String, FieldValue)> {
        self.header.clone()
    }

    /// What a weights-only write would lose: a model's net name and layer types
    /// (`name`, `type.<layer>`), a solver state's `iter`, `learned_net` and
    /// `current_step`, and how the blobs' shapes are written (`blob_shape`) where
    /// every blob is written one way and the writer's default for the kind is the
    /// other (a mean file with `shape`, a net of legacy blobs).
    fn layout_settings(&self) -> Vec<(String, String)> {
        let text = |v: &FieldValue| match v {
            FieldValue::Text(t) => Some(t.clone()),
            FieldValue::Int(i) => Some(i.to_string()),
            FieldValue::UInt(u) => Some(u.to_string()),
            _ => None,
        };
        let mut out = Vec::new();
        match self.kind {
            FileKind::Model => {
                for (key, value) in &self.header {
                    match (key.as_str(), value) {
                        ("name", v) => out.extend(text(v).map(|t| ("name".to_string(), t))),
                        ("layer", FieldValue::List(layers)) => {
                            for l in layers {
                                let FieldValue::Map(fields) = l else { continue };
                                let get = |k: &str| {
                                    fields
                                        .iter()
                                        .find(|(n, _)| n == k)
                                        .and_then(|(_, v)| text(v))
                                };
                                if let (Some(name), Some(ty)) = (get("name"), get("type")) {
                                    if !ty.is_empty() {
                                        out.push((format!("type.{name}"), ty));
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            FileKind::SolverState => {
                for (key, value) in &self.header {
                    if matches!(key.as_str(), "iter" | "learned_net" | "current_step") {
                        out.extend(text(value).map(|t| (key.clone(), t)));
                    }
                }
            }
            _ => {}
        }
        let fields = match self.legacy_blobs {
            _ if self.blobs.is_empty() => None,
            0 => Some(ShapeFields::Shape),
            n if n == self.blobs.len() => Some(ShapeFields::Legacy),
            _ => None, // mixed: the writer's default for the kind
        };
        let default = match self.kind {
            FileKind::Mean => ShapeFields::Legacy,
            _ => ShapeFields::Shape,
        };
        if let Some(f) = fields.filter(|&f| f != default) {
            out.push(("blob_shape".to_string(), f.name().to_string()));
        }
        out
    }

    fn tensors(&self) -> Vec<TensorInfo> {
        self.blobs.iter().map(|b| self.info(b)).collect()
    }

    fn read_tensor(&self, name: &str) -> tensorfmt_core::Result<Tensor> {
        let b = self
            .find(name)
            .ok_or_else(|| tensorfmt_core::Error::NoSuchTensor(name.to_string()))?;
        Tensor::from_bytes(
            b.dtype,
            self.dims[b.dims.clone()].to_vec(),
            Order::RowMajor,
            b.values.clone(),
        )
    }

    /// A blob whose values are one packed run is the reader's slice of the file, so
    /// its offset is where that slice starts; values gathered from several runs or
    /// unpacked fields have none.
    fn source_layout(&self, name: &str) -> Option<SourceLayout> {
        self.layout_of(&self.find(name)?.values)
    }

    fn source_layouts(&self) -> Vec<Option<SourceLayout>> {
        self.blobs
            .iter()
            .map(|b| self.layout_of(&b.values))
            .collect()
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write::{encode_weights_model, WeightsLayer};

    /// The export names as the reader gave them when it kept every parsed layer: one
    /// set of every base so far.
    fn reference_names(names: &[&str]) -> Vec<String> {
        let mut used = HashSet::new();
        let mut out = Vec::new();
        for (i, n) in names.iter().enumerate() {
            let base = if n.is_empty() {
                format!("layer{i}")
            } else if used.contains(*n) {
                format!("{n}@{i}")
            } else {
                n.to_string()
            };
            used.insert(base.clone());
            out.push(format!("{base}/0"));
        }
        out
    }

    #[test]
    fn export_names_match_one_set_of_every_base() {
        // Repeated names, unnamed layers, and literal names that look like made-up
        // ones (`layer2`, `a@1`, `a@01`, `@3`), before and after those are made.
        let names = [
            "a", "a", "", "layer2", "a@1", "a@1", "", "layer6", "a@01", "@3", "@3", "b@10", "b",
            "b", "b@13", "layer", "layer0", "", "layer17", "x", "x@19", "x", "x@21",
        ];
        let layers: Vec<WeightsLayer> = names
            .iter()
            .map(|n| WeightsLayer {
                name: n.to_string(),
                type_name: None,
                blobs: vec![RawBlob::from_f32(&[1], &[1.0])],
            })
            .collect();
        let bytes = Bytes::from(encode_weights_model(None, &layers));
        let want = reference_names(&names);
        let opened = CaffeFile::open(bytes.clone(), &CaffeReadOptions::default()).unwrap();
        let got: Vec<String> = opened.tensors().into_iter().map(|t| t.name).collect();
        assert_eq!(got, want);
        let model = crate::read::read_model(bytes).unwrap();
        let from_content = CaffeFile::new(Content::Model(model)).unwrap();
        let got: Vec<String> = from_content.tensors().into_iter().map(|t| t.name).collect();
        assert_eq!(got, want);
        for n in &want {
            assert!(opened.read_tensor(n).is_ok(), "{n}");
        }
        assert!(opened.read_tensor("a").is_err());
        assert!(opened.read_tensor("zzz/0").is_err());
    }

    #[test]
    fn contents_are_parsed_on_first_use() {
        let layers = [WeightsLayer {
            name: "ip".into(),
            type_name: Some("InnerProduct".into()),
            blobs: vec![RawBlob::from_f32(&[2], &[1.0, 2.0])],
        }];
        let bytes = Bytes::from(encode_weights_model(Some("net"), &layers));
        let f = CaffeFile::open(bytes, &CaffeReadOptions::default()).unwrap();
        assert!(f.content.get().is_none());
        let Content::Model(m) = f.content() else {
            panic!("a model")
        };
        assert_eq!(m.layers[0].type_name, "InnerProduct");
        assert_eq!(m.name.as_deref(), Some("net"));
    }
}
