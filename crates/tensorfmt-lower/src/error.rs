//! [`LowerError`]: everything that stops a Caffe net from becoming an ONNX model.

/// Why a net could not be lowered.
///
/// ```
/// let e = tensorfmt_lower::LowerError::Unsupported { layers: vec![("roi".into(), "ROIPooling".into())] };
/// assert!(e.to_string().contains("roi (ROIPooling)"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LowerError {
    /// Layers whose type has no lowering, every one of them (name, type).
    #[error("{} unsupported layer(s): {}", layers.len(), layers.iter().map(|(n, k)| format!("{n} ({k})")).collect::<Vec<_>>().join(", "))]
    Unsupported {
        /// (layer name, layer type) of every unsupported layer, in net order.
        layers: Vec<(String, String)>,
    },
    /// One layer could not be lowered: bad parameters, missing or mis-shaped blobs,
    /// shapes Caffe refuses, or ONNX's shape rule disagreeing with Caffe's.
    #[error("layer {layer:?} ({kind}{}): {reason}", if *line > 0 { format!(", line {line}") } else { String::new() })]
    Layer {
        /// Layer name.
        layer: String,
        /// Layer type.
        kind: String,
        /// 1-based prototxt line (0 when unknown).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A problem with the net as a whole or the options (unknown input or output name,
    /// a bottom nothing produces).
    #[error("{0}")]
    Net(String),
    /// Reading the prototxt, schema or caffemodel failed.
    #[error(transparent)]
    Caffe(#[from] tensorfmt_caffe::CaffeError),
    /// Writing the ONNX model failed.
    #[error(transparent)]
    Onnx(#[from] tensorfmt_onnx::OnnxError),
    /// I/O or tensor errors.
    #[error(transparent)]
    Core(#[from] tensorfmt_core::Error),
}

impl From<LowerError> for tensorfmt_core::Error {
    fn from(e: LowerError) -> Self {
        match e {
            LowerError::Core(c) => c,
            e => tensorfmt_core::Error::format("caffe-to-onnx", e),
        }
    }
}

/// A layer-level failure (wrapped into [`LowerError::Layer`] by the driver).
#[derive(Debug)]
pub(crate) struct Fail(pub String);

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail(s)
    }
}
impl From<&str> for Fail {
    fn from(s: &str) -> Fail {
        Fail(s.to_string())
    }
}
impl From<tensorfmt_core::Error> for Fail {
    fn from(e: tensorfmt_core::Error) -> Fail {
        Fail(e.to_string())
    }
}
impl From<tensorfmt_caffe::CaffeError> for Fail {
    fn from(e: tensorfmt_caffe::CaffeError) -> Fail {
        Fail(e.to_string())
    }
}

/// Result of a layer lowering.
pub(crate) type LResult<T> = Result<T, Fail>;
