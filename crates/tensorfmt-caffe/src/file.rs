//! [`CaffeFile`]: any Caffe protobuf file as named tensors for the facade
//! (`<layer>/<i>` for models, `mean` for a mean file, `history/<i>` for a solver state,
//! `blobs/<i>` for a BlobProtoVector).

use std::collections::HashMap;

use bytes::Bytes;
use tensorfmt_core::{FieldValue, SourceLayout, Tensor, TensorFile, TensorInfo};

use crate::error::{CaffeError, Result};
use crate::raw::{shape_string, Model, RawBlob, RawSolverState};
use crate::read::{layer_path, CaffeReadOptions, FileKind};

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

/// A Caffe file opened as named tensors. Every blob is checked on open (shape rules and
/// exact counts, as Caffe's FromProto); the tensors share the file's bytes (zero copy).
///
/// Legacy 4-D blobs are exported with the shape modern Caffe gives them
/// ([`RawBlob::legacy_squeezed_shape`]: `(1,1,M,N)` as `[M, N]`, `(1,1,1,N)` as `[N]`);
/// `inspect` marks them `legacy`.
#[derive(Debug, Clone)]
pub struct CaffeFile {
    content: Content,
    entries: Vec<(TensorInfo, Tensor)>,
    /// Position of each export name in `entries` (lookups by name are O(1)).
    index: HashMap<String, usize>,
    header: Vec<(String, FieldValue)>,
    warnings: Vec<String>,
    /// The bytes the file was parsed from (set by [`CaffeFile::open_as`]).
    source: Option<Bytes>,
}

fn blob_entry(name: String, b: &RawBlob, path: &str) -> Result<(TensorInfo, Tensor)> {
    let shape = b.legacy_squeezed_shape(path)?;
    let t = b.tensor_with_shape(shape, path)?;
    b.diff_tensor(path)?;
    Ok((TensorInfo::new(name, t.dtype(), t.shape().clone()), t))
}

fn blob_summary(b: &RawBlob, path: &str) -> Result<FieldValue> {
    let dims = b.shape_dims(path)?;
    let mut s = shape_string(&dims);
    if b.has_legacy() {
        s.push_str(" legacy");
    }
    s.push(' ');
    s.push_str(b.value_source().field());
    Ok(FieldValue::Text(s))
}

/// How many layers the header describes one by one (`layer`); `layers` counts them
/// all and the tensors list every blob, so a net of 300,000 layers does not make a
/// header of 300,000 entries.
const HEADER_LAYERS_MAX: usize = 32;

impl CaffeFile {
    /// Opens parsed contents: checks every blob and builds the tensor list.
    pub fn new(content: Content) -> Result<CaffeFile> {
        let mut entries = Vec::new();
        let mut header: Vec<(String, FieldValue)> = Vec::new();
        let mut warnings = Vec::new();
        match &content {
            Content::Model(m) => {
                warnings.extend(m.warnings().iter().cloned());
                header.push(("message".into(), "NetParameter".into()));
                header.push(("version".into(), m.version.to_string().into()));
                if let Some(n) = &m.name {
                    header.push(("name".into(), n.clone().into()));
                }
                header.push(("layers".into(), m.layers.len().into()));
                let mut used = std::collections::HashSet::new();
                let mut list = Vec::new();
                for (i, l) in m.layers.iter().enumerate() {
                    let base = if l.name.is_empty() {
                        format!("layer{i}")
                    } else if used.contains(&l.name) {
                        format!("{}@{i}", l.name)
                    } else {
                        l.name.clone()
                    };
                    used.insert(base.clone());
                    let mut blobs = Vec::new();
                    for (j, b) in l.blobs.iter().enumerate() {
                        let path = format!("{}.blobs[{j}]", layer_path(l, i));
                        entries.push(blob_entry(format!("{base}/{j}"), b, &path)?);
                        let summary = blob_summary(b, &path)?;
                        if i < HEADER_LAYERS_MAX {
                            blobs.push(summary);
                        }
                    }
                    if i < HEADER_LAYERS_MAX {
                        list.push(FieldValue::Map(vec![
                            ("name".into(), l.name.clone().into()),
                            ("type".into(), l.type_name.clone().into()),
                            ("blobs".into(), FieldValue::List(blobs)),
                        ]));
                    }
                }
                header.push(("layer".into(), FieldValue::List(list)));
            }
            Content::Mean(b) => {
                header.push(("message".into(), "BlobProto".into()));
                header.push(("blob".into(), blob_summary(b, "BlobProto")?));
                entries.push(blob_entry("mean".into(), b, "BlobProto")?);
            }
            Content::BlobVector(v) => {
                header.push(("message".into(), "BlobProtoVector".into()));
                header.push(("blobs".into(), v.len().into()));
                for (i, b) in v.iter().enumerate() {
                    entries.push(blob_entry(format!("blobs/{i}"), b, &format!("blobs[{i}]"))?);
                }
            }
            Content::SolverState(s) => {
                header.push(("message".into(), "SolverState".into()));
                if let Some(v) = s.iter {
                    header.push(("iter".into(), v.into()));
                }
                if let Some(v) = &s.learned_net {
                    header.push(("learned_net".into(), v.clone().into()));
                }
                if let Some(v) = s.current_step {
                    header.push(("current_step".into(), v.into()));
                }
                header.push(("history".into(), s.history.len().into()));
                for (i, b) in s.history.iter().enumerate() {
                    entries.push(blob_entry(
                        format!("history/{i}"),
                        b,
                        &format!("history[{i}]"),
                    )?);
                }
            }
        }
        let mut index = HashMap::with_capacity(entries.len());
        for (i, (info, _)) in entries.iter().enumerate() {
            index.entry(info.name.clone()).or_insert(i);
        }
        Ok(CaffeFile {
            content,
            entries,
            index,
            header,
            warnings,
            source: None,
        })
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

    /// Opens `data` as the given kind.
    pub fn open_as(data: Bytes, kind: FileKind, opts: &CaffeReadOptions) -> Result<CaffeFile> {
        let content = match kind {
            FileKind::Model => Content::Model(crate::read::read_model_with(data.clone(), opts)?),
            FileKind::Mean => Content::Mean(crate::read::read_blob_proto_with(data.clone(), opts)?),
            FileKind::BlobVector => {
                Content::BlobVector(crate::read::read_blob_vector_with(data.clone(), opts)?)
            }
            FileKind::SolverState => {
                Content::SolverState(crate::read::read_solver_state_with(data.clone(), opts)?)
            }
        };
        let mut file = CaffeFile::new(content)?;
        file.source = Some(data);
        Ok(file)
    }

    /// The parsed contents.
    pub fn content(&self) -> &Content {
        &self.content
    }

    /// Where `t`'s bytes lie in the source, when they are a slice of it.
    fn layout_of(&self, t: &Tensor) -> Option<SourceLayout> {
        let file = self.source.as_ref()?;
        let data = t.bytes();
        let offset = (data.as_ptr() as usize).checked_sub(file.as_ptr() as usize)?;
        if data.is_empty() || offset.checked_add(data.len())? > file.len() {
            return None;
        }
        Some(SourceLayout::contiguous(offset as u64, data.len() as u64))
    }

    /// The file kind.
    pub fn file_kind(&self) -> FileKind {
        match self.content {
            Content::Model(_) => FileKind::Model,
            Content::Mean(_) => FileKind::Mean,
            Content::BlobVector(_) => FileKind::BlobVector,
            Content::SolverState(_) => FileKind::SolverState,
        }
    }
}

impl TensorFile for CaffeFile {
    fn format(&self) -> &'static str {
        "caffe"
    }

    fn kind(&self) -> String {
        match &self.content {
            Content::Model(m) => format!("model ({} NetParameter)", m.version),
            Content::Mean(_) => "mean file (BlobProto)".into(),
            Content::BlobVector(_) => "BlobProtoVector".into(),
            Content::SolverState(_) => "solver state".into(),
        }
    }

    fn header(&self) -> Vec<(String, FieldValue)> {
        self.header.clone()
    }

    fn tensors(&self) -> Vec<TensorInfo> {
        self.entries.iter().map(|(i, _)| i.clone()).collect()
    }

    fn read_tensor(&self, name: &str) -> tensorfmt_core::Result<Tensor> {
        self.index
            .get(name)
            .map(|&i| self.entries[i].1.clone())
            .ok_or_else(|| tensorfmt_core::Error::NoSuchTensor(name.to_string()))
    }

    /// A blob whose values are one packed run is the reader's slice of the file, so
    /// its offset is where that slice starts; values gathered from several runs or
    /// unpacked fields have none.
    fn source_layout(&self, name: &str) -> Option<SourceLayout> {
        let (_, t) = self.entries.iter().find(|(i, _)| i.name == name)?;
        self.layout_of(t)
    }

    fn source_layouts(&self) -> Vec<Option<SourceLayout>> {
        self.entries
            .iter()
            .map(|(_, t)| self.layout_of(t))
            .collect()
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}
