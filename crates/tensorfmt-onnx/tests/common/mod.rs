//! What the integration tests share.

use bytes::Bytes;
use prost::Message;
use tensorfmt_onnx::proto::{GraphProto, ModelProto, TensorProto};

/// An encoded model whose graph holds only `inits`.
pub fn model(inits: Vec<TensorProto>) -> Bytes {
    ModelProto {
        ir_version: 8,
        graph: Some(GraphProto {
            initializer: inits,
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
    .into()
}
