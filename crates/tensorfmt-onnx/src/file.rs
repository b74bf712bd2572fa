//! [`OnnxFile`]: an ONNX model as named tensors (its initializers) for the facade.

use tensorfmt_core::{Error, FieldValue, Tensor, TensorFile, TensorInfo};

use crate::read::{ModelFile, Slot};

/// The header field that lists a model's external data files (present only when it has
/// some). It says where the payloads are stored, not what they hold, so `diff` leaves
/// it out.
///
/// ```
/// assert_eq!(tensorfmt_onnx::EXTERNAL_DATA_FIELD, "external_data");
/// ```
pub const EXTERNAL_DATA_FIELD: &str = "external_data";

/// The header field holding [`ModelFile::structure`](crate::ModelFile::structure): a
/// digest of everything in the model but the exported tensors, which `diff` compares.
///
/// ```
/// assert_eq!(tensorfmt_onnx::STRUCTURE_FIELD, "structure");
/// ```
pub const STRUCTURE_FIELD: &str = "structure";

/// An ONNX model opened as its initializers. Tensors share the file's bytes when stored
/// as `raw_data` (zero copy).
#[derive(Debug, Clone)]
pub struct OnnxFile {
    model: ModelFile,
    /// Name to position: in `initializers`, or in `sparse` (`Err`).
    index: std::collections::HashMap<String, Result<usize, usize>>,
    /// Every initializer in graph order, the unread ones (external data described, not
    /// read) included.
    infos: Vec<TensorInfo>,
}

impl OnnxFile {
    /// Wraps a read model.
    pub fn new(model: ModelFile) -> OnnxFile {
        let dense = model.initializers.iter().enumerate();
        let sparse = model.sparse.iter().enumerate();
        let index = dense
            .map(|(i, (n, _))| (n.clone(), Ok(i)))
            .chain(sparse.map(|(i, s)| (s.name.clone(), Err(i))))
            .collect();
        let infos = model
            .slots()
            .into_iter()
            .map(|slot| match slot {
                Slot::Read(n, t) => TensorInfo::new(n, t.dtype(), t.shape().clone()),
                Slot::Unread(u) => u.info.clone(),
                Slot::Sparse(s) => s.info(),
            })
            .collect();
        OnnxFile {
            model,
            index,
            infos,
        }
    }

    /// The model as read.
    pub fn model(&self) -> &ModelFile {
        &self.model
    }
}

fn list(v: &[String]) -> FieldValue {
    FieldValue::List(v.iter().map(|s| s.clone().into()).collect())
}

impl TensorFile for OnnxFile {
    fn format(&self) -> &'static str {
        "onnx"
    }

    fn kind(&self) -> String {
        if self.model.nodes == 0 {
            "weights".into()
        } else {
            "model".into()
        }
    }

    fn header(&self) -> Vec<(String, FieldValue)> {
        let m = &self.model;
        let mut h: Vec<(String, FieldValue)> = vec![
            ("ir_version".into(), m.ir_version.into()),
            (
                "producer".into(),
                format!("{} {}", m.producer_name, m.producer_version)
                    .trim()
                    .to_string()
                    .into(),
            ),
            (
                "opset_import".into(),
                FieldValue::List(
                    m.opsets
                        .iter()
                        .map(|(d, v)| {
                            let d = if d.is_empty() { "ai.onnx" } else { d };
                            format!("{d} {v}").into()
                        })
                        .collect(),
                ),
            ),
            ("graph".into(), m.graph_name.clone().into()),
            ("nodes".into(), m.nodes.into()),
            ("inputs".into(), list(&m.inputs)),
            ("outputs".into(), list(&m.outputs)),
            (
                // Every graph initializer, those left out (a type without a dtype) too.
                "initializers".into(),
                (m.initializers.len() + m.unread.len() + m.sparse.len() + m.left_out).into(),
            ),
        ];
        if !m.sparse.is_empty() {
            // Counted in `initializers` and read dense.
            h.push(("sparse_initializers".into(), m.sparse.len().into()));
        }
        if let Some(s) = &m.structure {
            h.push((STRUCTURE_FIELD.into(), s.clone().into()));
        }
        if !m.external_files.is_empty() {
            h.push((EXTERNAL_DATA_FIELD.into(), list(&m.external_files)));
        }
        if !m.metadata.is_empty() {
            h.push((
                "metadata_props".into(),
                FieldValue::Map(
                    m.metadata
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone().into()))
                        .collect(),
                ),
            ));
        }
        h
    }

    fn tensors(&self) -> Vec<TensorInfo> {
        self.infos.clone()
    }

    fn warnings(&self) -> Vec<String> {
        self.model.warnings.clone()
    }

    /// Never: every warning says what the tensor view leaves out (a type numpy lacks,
    /// subgraph initializers), nothing repaired, so a copy keeps the whole model.
    fn lenient(&self) -> bool {
        false
    }

    fn external_files(&self) -> Vec<String> {
        self.model.external_files.clone()
    }

    fn read_tensor(&self, name: &str) -> tensorfmt_core::Result<Tensor> {
        if let Some(u) = self.model.unread.iter().find(|u| u.info.name == name) {
            return Err(Error::Invalid(format!(
                "tensor {name:?} lies in the external data file {:?}, which was not read",
                u.location
            )));
        }
        match self.index.get(name) {
            Some(&Ok(i)) => Ok(self.model.initializers[i].1.clone()),
            Some(&Err(i)) => Ok(self.model.sparse[i].to_dense()?),
            None => Err(Error::NoSuchTensor(name.to_string())),
        }
    }
}
