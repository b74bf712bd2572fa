//! The `primitiv_roundtrip` fuzz target's body, a structured round trip for primitiv:
//! a random valid description (data type, shapes, batches, values, keys) -> our writer
//! -> our reader -> the same data, written again to the same bytes; and named tensors
//! -> `build` -> bytes -> `open_tensor_file` -> the same tensors in numpy order.
use arbitrary::{Arbitrary, Unstructured};
use tensorfmt_core::{Order, ReadOptions, Tensor, WriteOptions};
use tensorfmt_primitiv::*;

#[derive(Arbitrary, Debug)]
struct TensorDesc {
    dims: Vec<u8>,
    batch: u8,
    seed: u32,
}

#[derive(Arbitrary, Debug)]
struct ParamDesc {
    value: TensorDesc,
    stats: Vec<(String, TensorDesc)>,
}

#[derive(Arbitrary, Debug)]
enum Desc {
    Shape(TensorDesc),
    Tensor(TensorDesc),
    Parameter(ParamDesc),
    Model(Vec<(Vec<String>, ParamDesc)>),
    Optimizer(Vec<(String, u32)>, Vec<(String, f32)>),
    Named(Vec<(String, TensorDesc)>),
}

fn shape(d: &TensorDesc, batch_one: bool) -> Option<PrimitivShape> {
    // At most 8 dims of 1..=8 and a batch of 1..=4: sizes stay small.
    let dims: Vec<u32> = d
        .dims
        .iter()
        .take(8)
        .map(|&x| u32::from(x % 8) + 1)
        .collect();
    let batch = if batch_one {
        1
    } else {
        u32::from(d.batch % 4) + 1
    };
    PrimitivShape::new(dims, batch).ok()
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    // Arbitrary bit patterns (NaNs included) from a cheap generator.
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            f32::from_bits(x)
        })
        .collect()
}

fn tensor(d: &TensorDesc, batch_one: bool) -> Option<PrimitivTensor> {
    let s = shape(d, batch_one)?;
    let n = usize::try_from(s.size()?).ok()?;
    if n > 1 << 14 {
        return None;
    }
    PrimitivTensor::from_f32(s, &values(n, d.seed)).ok()
}

fn parameter(p: &ParamDesc) -> Option<Parameter> {
    let mut param = Parameter::new(tensor(&p.value, true)?).ok()?;
    let mut seen = std::collections::HashSet::new();
    for (k, t) in p.stats.iter().take(4) {
        if seen.insert(k.clone()) {
            param.set_stat(k.as_str(), tensor(t, false)?);
        }
    }
    Some(param)
}

fn dedup<T: Copy>(v: &[(String, T)]) -> Vec<(Key, T)> {
    let mut seen = std::collections::HashSet::new();
    v.iter()
        .filter(|(k, _)| seen.insert(k.clone()))
        .map(|(k, x)| (Key::from(k.as_str()), *x))
        .collect()
}

fn typed_round_trip(data: PrimitivData) {
    let bytes = to_bytes(&data).expect("valid data writes");
    let back =
        read_file(bytes.clone().into(), &ReaderOptions::default()).expect("written data reads");
    // The one warning valid data can give: keys using pre-release (2017) names.
    assert!(
        back.warnings.iter().all(|w| w.contains("pre-release name")),
        "{:?}",
        back.warnings
    );
    // Compared as bytes (NaN values are not equal to themselves), then structurally.
    assert_eq!(to_bytes(&back.data).unwrap(), bytes);
    assert_eq!(back.data.data_type(), data.data_type());
    let strict = ReadOptions {
        strict: true,
        ..ReadOptions::default()
    };
    let f = open_tensor_file(bytes.into(), &strict).expect("written data opens strictly");
    f.validate().expect("every tensor decodes");
}

/// Returns whether the names and tensors made a model that was written and read back.
fn named_round_trip(named: &[(String, TensorDesc)]) -> bool {
    // Model export names: `a.b` for values (batch 1); no `/`, unique, non-empty parts.
    let mut tensors = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (name, d) in named.iter().take(6) {
        let name: String = name
            .chars()
            .filter(|c| *c != '/' && *c != '.' && *c != '~')
            .collect();
        if name.is_empty() || !seen.insert(name.clone()) {
            continue;
        }
        let Some(t) = tensor(d, true) else {
            return false;
        };
        let core = t.to_core().unwrap().to_order(Order::RowMajor).unwrap();
        tensors.push((name, core));
    }
    let opts = WriteOptions {
        kind: Some("model".into()),
        ..WriteOptions::default()
    };
    let Ok(data) = build(&tensors, &opts) else {
        return false;
    };
    let bytes = to_bytes(&data).unwrap();
    let f = open_tensor_file(bytes.into(), &ReadOptions::default()).unwrap();
    assert_eq!(f.tensors().len(), tensors.len());
    for (name, t) in &tensors {
        let got: Tensor = f.read_tensor(name).unwrap();
        assert_eq!(got.dims(), t.dims(), "{name}");
        assert_eq!(
            got.to_order(Order::RowMajor).unwrap().bytes(),
            t.bytes(),
            "{name}"
        );
    }
    true
}

/// Builds a description from `raw`, writes it, reads it back and compares; returns
/// the kind of data written (none when `raw` is no description, or one our writers
/// refuse: a shape or model out of the description's bounds, clashing names).
///
/// ```
/// assert_eq!(tensorfmt_fuzzing::primitiv_roundtrip(&[0; 8]), Some("shape"));
/// ```
pub fn primitiv_roundtrip(raw: &[u8]) -> Option<&'static str> {
    let mut u = Unstructured::new(raw);
    let desc = Desc::arbitrary(&mut u).ok()?;
    let data = match &desc {
        Desc::Shape(d) => PrimitivData::Shape(shape(d, false)?),
        Desc::Tensor(d) => PrimitivData::Tensor(tensor(d, false)?),
        Desc::Parameter(p) => PrimitivData::Parameter(parameter(p)?),
        Desc::Model(entries) => {
            let mut m = Model::new();
            for (path, p) in entries.iter().take(6) {
                if path.is_empty() {
                    continue;
                }
                let Some(param) = parameter(p) else { continue };
                m.insert(
                    path.iter().take(3).map(|k| Key::from(k.as_str())).collect(),
                    param,
                );
            }
            m.check_namespace().ok()?;
            PrimitivData::Model(m)
        }
        Desc::Optimizer(u, f) => PrimitivData::Optimizer(Optimizer {
            uint_configs: dedup(u),
            float_configs: dedup(f),
        }),
        Desc::Named(named) => return named_round_trip(named).then_some("named"),
    };
    let kind = match &data {
        PrimitivData::Shape(_) => "shape",
        PrimitivData::Tensor(_) => "tensor",
        PrimitivData::Parameter(_) => "parameter",
        PrimitivData::Model(_) => "model",
        PrimitivData::Optimizer(_) => "optimizer",
    };
    typed_round_trip(data);
    Some(kind)
}

#[cfg(test)]
mod tests {
    use crate::inputs::{descriptions, kinds};

    #[test]
    fn every_kind_round_trips() {
        let reached = kinds(
            "primitiv_roundtrip",
            &descriptions(3000, 14),
            super::primitiv_roundtrip,
        );
        for kind in [
            "shape",
            "tensor",
            "parameter",
            "model",
            "optimizer",
            "named",
        ] {
            assert!(
                reached.get(kind).is_some_and(|&n| n >= 20),
                "{kind}: {reached:?}"
            );
        }
    }
}
