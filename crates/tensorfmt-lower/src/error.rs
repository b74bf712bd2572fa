//! [`LowerError`]: everything that stops a Caffe net from becoming an ONNX model.

/// Why a net could not be lowered.
///
/// ```
/// use tensorfmt_lower::{LowerError, UnsupportedLayer};
/// let e = LowerError::Unsupported { layers: vec![
///     UnsupportedLayer { name: "roi".into(), kind: "ROIPooling".into(), reason: None },
///     UnsupportedLayer { name: "p".into(), kind: "Pooling".into(), reason: Some("STOCHASTIC pooling is not lowered".into()) },
/// ] };
/// assert_eq!(e.to_string(), "2 unsupported layer(s): roi (ROIPooling), p (Pooling: STOCHASTIC pooling is not lowered)");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LowerError {
    /// Every layer that cannot be lowered: its type has no lowering, or its parameters
    /// ask for something no lowering does (STOCHASTIC pooling, batch statistics, ...).
    #[error("{} unsupported layer(s): {}", layers.len(), layers.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(", "))]
    Unsupported {
        /// Every unsupported layer, in net order.
        layers: Vec<UnsupportedLayer>,
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
    /// A problem found in one input file, named: a caffemodel's defect under the
    /// caffemodel's path, a net's under the prototxt's ([`convert_files`](crate::convert_files)).
    #[error("{path}: {source}")]
    File {
        /// The file, as given.
        path: String,
        /// What is wrong in it.
        #[source]
        source: Box<LowerError>,
    },
}

impl LowerError {
    /// `self` named as a problem of the file at `path`, unless it names that file
    /// already (an I/O error with its path, a fork schema's error).
    ///
    /// ```
    /// use tensorfmt_lower::LowerError;
    /// let e = LowerError::Net("no output blobs".into()).in_file("net.prototxt".as_ref());
    /// assert_eq!(e.to_string(), "net.prototxt: no output blobs");
    /// assert!(matches!(e.inner(), LowerError::Net(_)));
    /// ```
    pub fn in_file(self, path: &std::path::Path) -> LowerError {
        let shown = path.display().to_string();
        if self.to_string().contains(&shown) {
            return self;
        }
        match &self {
            LowerError::File { .. }
            | LowerError::Caffe(tensorfmt_caffe::CaffeError::Schema { .. }) => self,
            LowerError::Core(tensorfmt_core::Error::Io { path, .. }) if !path.is_empty() => self,
            _ => LowerError::File {
                path: shown,
                source: Box::new(self),
            },
        }
    }

    /// The error without the file it is named under ([`LowerError::File`]'s source).
    pub fn inner(&self) -> &LowerError {
        match self {
            LowerError::File { source, .. } => source.inner(),
            e => e,
        }
    }
}

/// A layer [`LowerError::Unsupported`] lists.
///
/// ```
/// let l = tensorfmt_lower::UnsupportedLayer { name: "t".into(), kind: "Tile".into(), reason: None };
/// assert_eq!(l.to_string(), "t (Tile)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedLayer {
    /// Layer name.
    pub name: String,
    /// Layer type.
    pub kind: String,
    /// Why, when the type has a lowering but not for these parameters.
    pub reason: Option<String>,
}

impl std::fmt::Display for UnsupportedLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.reason {
            Some(r) => write!(f, "{} ({}: {r})", self.name, self.kind),
            None => write!(f, "{} ({})", self.name, self.kind),
        }
    }
}

impl From<LowerError> for tensorfmt_core::Error {
    fn from(e: LowerError) -> Self {
        match e {
            LowerError::Core(c) => c,
            e => tensorfmt_core::Error::format("caffe-to-onnx", e),
        }
    }
}

/// A layer-level failure: a broken layer (wrapped into [`LowerError::Layer`] by the
/// driver), or, made by [`Fail::not_lowered`], a layer asking for what no lowering does
/// (listed with the other unsupported layers).
#[derive(Debug)]
pub(crate) struct Fail {
    /// What is wrong.
    pub reason: String,
    /// The layer's parameters are not handled (the net itself may be fine).
    pub not_lowered: bool,
}

impl Fail {
    /// A broken layer: bad parameters, missing or mis-shaped blobs, ...
    pub(crate) fn new(reason: impl Into<String>) -> Fail {
        Fail {
            reason: reason.into(),
            not_lowered: false,
        }
    }

    /// The layer asks for something no lowering does (its parameters, not a broken
    /// net): the driver goes on to find every such layer and lists them all.
    pub(crate) fn not_lowered(reason: impl Into<String>) -> Fail {
        Fail {
            reason: reason.into(),
            not_lowered: true,
        }
    }
}

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail::new(s)
    }
}
impl From<&str> for Fail {
    fn from(s: &str) -> Fail {
        Fail::new(s)
    }
}
impl From<tensorfmt_core::Error> for Fail {
    fn from(e: tensorfmt_core::Error) -> Fail {
        Fail::new(e.to_string())
    }
}
impl From<tensorfmt_caffe::CaffeError> for Fail {
    fn from(e: tensorfmt_caffe::CaffeError) -> Fail {
        Fail::new(e.to_string())
    }
}

/// Result of a layer lowering.
pub(crate) type LResult<T> = Result<T, Fail>;
