//! The `caffe_roundtrip` fuzz target's body, a structured round trip for Caffe: a
//! random valid description (file kind, layers, blob shapes, f32/f64 values, names) ->
//! our writers -> our readers -> the same blobs; a model rewritten with replaced blobs
//! reads back with them and keeps every other byte; named tensors -> `write_tensors`
//! -> `open_tensor_file` -> the same tensors.
use arbitrary::{Arbitrary, Unstructured};
use tensorfmt_caffe::*;
use tensorfmt_core::{DType, Order, ReadOptions, Tensor, WriteOptions};

#[derive(Arbitrary, Debug)]
struct BlobDesc {
    dims: Vec<u8>,
    double: bool,
    seed: u64,
}

#[derive(Arbitrary, Debug)]
struct LayerDesc {
    name: String,
    type_name: Option<String>,
    blobs: Vec<BlobDesc>,
}

#[derive(Arbitrary, Debug)]
enum Desc {
    Model(Option<String>, Vec<LayerDesc>, Vec<BlobDesc>),
    Mean(BlobDesc),
    Vector(Vec<BlobDesc>),
    Solver(i32, Option<String>, Vec<BlobDesc>, i32),
    Named(Vec<(String, BlobDesc)>, u8),
}

fn dims(d: &BlobDesc) -> Vec<usize> {
    // At most 5 axes of 0..=7: counts stay small, zero-sized blobs included.
    d.dims.iter().take(5).map(|&x| usize::from(x % 8)).collect()
}

fn bits(n: usize, seed: u64) -> impl Iterator<Item = u64> {
    let mut x = seed | 1;
    (0..n).map(move |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    })
}

fn tensor(d: &BlobDesc) -> Tensor {
    let shape = dims(d);
    let n: usize = shape.iter().product();
    if d.double {
        let v: Vec<f64> = bits(n, d.seed).map(f64::from_bits).collect();
        Tensor::from_vec(v, shape, Order::RowMajor).unwrap()
    } else {
        let v: Vec<f32> = bits(n, d.seed).map(|b| f32::from_bits(b as u32)).collect();
        Tensor::from_vec(v, shape, Order::RowMajor).unwrap()
    }
}

fn blob(d: &BlobDesc) -> RawBlob {
    blob_from_tensor(&tensor(d)).unwrap()
}

fn written(t: &Tensor) -> Tensor {
    if t.dtype() == DType::F64 {
        t.cast(DType::F32).unwrap()
    } else {
        t.clone()
    }
}

fn same_tensor(a: &Tensor, b: &Tensor) {
    // An empty f64 blob has no `double_data` on the wire: it reads as f32.
    if a.numel() > 0 {
        assert_eq!(a.dtype(), b.dtype());
    }
    assert_eq!(a.dims(), b.dims());
    assert_eq!(a.bytes(), b.bytes());
}

/// Builds a description from `raw`, writes it, reads it back and compares; returns
/// the kind of file written (none when `raw` is no description).
///
/// ```
/// assert_eq!(tensorfmt_fuzzing::caffe_roundtrip(&[0; 8]), Some("model"));
/// ```
pub fn caffe_roundtrip(raw: &[u8]) -> Option<&'static str> {
    let mut u = Unstructured::new(raw);
    let desc = Desc::arbitrary(&mut u).ok()?;
    Some(match desc {
        Desc::Model(name, layers, replacement) => {
            let layers: Vec<WeightsLayer> = layers
                .iter()
                .take(6)
                .map(|l| WeightsLayer {
                    name: l.name.clone(),
                    type_name: l.type_name.clone(),
                    blobs: l.blobs.iter().take(3).map(blob).collect(),
                })
                .collect();
            let bytes = encode_weights_model(name.as_deref(), &layers);
            let m = read_model(bytes.clone().into()).expect("written model reads");
            assert_eq!(m.name, name);
            assert_eq!(m.layers.len(), layers.len());
            for (got, want) in m.layers.iter().zip(&layers) {
                assert_eq!(got.name, want.name);
                assert_eq!(got.type_name, want.type_name.clone().unwrap_or_default());
                assert_eq!(got.blobs, want.blobs);
            }
            m.validate().expect("written blobs are valid");
            assert_eq!(
                m.to_bytes(),
                bytes,
                "unchanged model rewrites byte for byte"
            );
            // Replace the first layer's blobs: they read back, every other layer is
            // unchanged.
            if !m.layers.is_empty() {
                let mut m2 = m.clone();
                let new: Vec<RawBlob> = replacement.iter().take(3).map(blob).collect();
                m2.layers[0].blobs = new.clone();
                let back = read_model(m2.to_bytes().into()).unwrap();
                assert_eq!(back.layers[0].blobs, new);
                assert_eq!(back.layers[0].name, m.layers[0].name);
                for (a, b) in back.layers.iter().zip(&m.layers).skip(1) {
                    assert_eq!(a.blobs, b.blobs);
                }
            }
            let f = open_tensor_file(
                bytes.into(),
                &ReadOptions {
                    kind: Some("caffemodel".into()),
                    ..ReadOptions::default()
                },
            )
            .unwrap();
            f.validate().unwrap();
            "model"
        }
        Desc::Mean(d) => {
            let b = blob(&d);
            let back = read_blob_proto(b.to_bytes().into()).unwrap();
            assert_eq!(back, b);
            let f = open_tensor_file(
                b.to_bytes().into(),
                &ReadOptions {
                    kind: Some("binaryproto".into()),
                    ..ReadOptions::default()
                },
            )
            .unwrap();
            let got = f.read_tensor("mean").unwrap();
            same_tensor(&got, &tensor(&d));
            "mean"
        }
        Desc::Vector(v) => {
            let blobs: Vec<RawBlob> = v
                .iter()
                .take(6)
                .map(|d| blob_from_tensor(&written(&tensor(d))).unwrap())
                .collect();
            let mut bytes = Vec::new();
            let named: Vec<(String, Tensor)> = v
                .iter()
                .take(6)
                .enumerate()
                .map(|(i, d)| (format!("blobs/{i}"), tensor(d)))
                .collect();
            let opts = WriteOptions {
                kind: Some("blobprotovector".into()),
                ..WriteOptions::default()
            };
            write_tensors(&mut bytes, &named, &opts).unwrap();
            assert_eq!(read_blob_vector(bytes.clone().into()).unwrap(), blobs);
            let f = open_tensor_file(
                bytes.into(),
                &ReadOptions {
                    kind: Some("blobprotovector".into()),
                    ..ReadOptions::default()
                },
            )
            .unwrap();
            for (n, t) in &named {
                same_tensor(&f.read_tensor(n).unwrap(), &written(t));
            }
            "blobprotovector"
        }
        Desc::Solver(iter, learned, history, step) => {
            let s = RawSolverState {
                iter: Some(iter),
                learned_net: learned,
                history: history.iter().take(6).map(blob).collect(),
                current_step: Some(step),
            };
            assert_eq!(read_solver_state(s.to_bytes().into()).unwrap(), s);
            "solverstate"
        }
        Desc::Named(named, kind) => {
            // A weights-only caffemodel from `<layer>/<i>` names (unique, non-empty
            // layers), or a BlobProtoVector from `blobs/<i>` (blob i is the tensor
            // so named, whatever the order the tensors come in).
            let kind = ["caffemodel", "blobprotovector"][usize::from(kind % 2)];
            let mut tensors = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for (layer, d) in named.iter().take(6) {
                if layer.is_empty() || !seen.insert(layer.clone()) {
                    continue;
                }
                tensors.push((format!("{layer}/0"), tensor(d)));
            }
            let mut order = tensors.clone();
            if kind == "blobprotovector" {
                for (i, (name, _)) in tensors.iter_mut().enumerate() {
                    *name = format!("blobs/{i}");
                }
                order = tensors.iter().rev().cloned().collect();
            }
            let opts = WriteOptions {
                kind: Some(kind.into()),
                ..WriteOptions::default()
            };
            let mut bytes = Vec::new();
            write_tensors(&mut bytes, &order, &opts).unwrap();
            let f = open_tensor_file(
                bytes.into(),
                &ReadOptions {
                    kind: Some(kind.into()),
                    ..ReadOptions::default()
                },
            )
            .unwrap();
            let infos = f.tensors();
            assert_eq!(infos.len(), tensors.len());
            for ((_, t), info) in tensors.iter().zip(&infos) {
                let got = f.read_tensor(&info.name).unwrap();
                assert!(matches!(got.dtype(), DType::F32 | DType::F64));
                same_tensor(&got, &written(t));
            }
            if kind == "caffemodel" {
                "named caffemodel"
            } else {
                "named blobprotovector"
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use crate::inputs::{descriptions, kinds};

    #[test]
    fn every_kind_round_trips() {
        let reached = kinds(
            "caffe_roundtrip",
            &descriptions(3000, 13),
            super::caffe_roundtrip,
        );
        let all = [
            "model",
            "mean",
            "blobprotovector",
            "solverstate",
            "named caffemodel",
            "named blobprotovector",
        ];
        for kind in all {
            assert!(
                reached.get(kind).is_some_and(|&n| n >= 20),
                "{kind}: {reached:?}"
            );
        }
    }
}
