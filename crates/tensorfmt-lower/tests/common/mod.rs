//! Readers of a lowered model shared by the integration tests (each test file is its
//! own crate and uses some of them).
#![allow(dead_code)]

use tensorfmt_lower::Lowered;
use tensorfmt_onnx::proto::{
    tensor_shape_proto::dimension::Value as Dim, type_proto, ValueInfoProto,
};

/// The op types of the graph's nodes, in order.
pub fn ops(l: &Lowered) -> Vec<String> {
    let g = l.model.graph.as_ref().unwrap();
    g.node.iter().map(|n| n.op_type.clone()).collect()
}

/// The dims of a value as text: a size, a `dim_param` name, or `?` (unknown).
pub fn dims(v: &ValueInfoProto) -> Vec<String> {
    let Some(type_proto::Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        panic!("{}: no tensor type", v.name)
    };
    t.shape
        .iter()
        .flat_map(|s| &s.dim)
        .map(|d| match &d.value {
            Some(Dim::DimValue(n)) => n.to_string(),
            Some(Dim::DimParam(p)) => p.clone(),
            None => "?".into(),
        })
        .collect()
}

/// [`dims`] of graph output `i`.
pub fn output_dims(l: &Lowered, i: usize) -> Vec<String> {
    dims(&l.model.graph.as_ref().unwrap().output[i])
}
