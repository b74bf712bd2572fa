//! The `provenance` fuzz target's body, the carried-metadata path (`tensorfmt.source`,
//! issue 23 item 2): an honest recording of a small dense PVP movie is mutated (numbers
//! anywhere in its JSON, bytes of its skeleton, or the whole text replaced) and handed,
//! with arbitrary tensor values, to `provenance::restore`. Whatever the metadata says:
//! no panic; when a file is written, it reads back as exactly the tensors offered and
//! is no larger than the metadata plus the tensors; when nothing is restored, no file
//! is left behind.
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use arbitrary::Arbitrary;
use bytes::Bytes;
use serde_json::Value;
use tensorfmt::provenance::{self, Restored};
use tensorfmt::{FieldValue, Format, Order, Tensor, TensorFile, TensorInfo};

#[derive(Arbitrary, Debug)]
enum Mutation {
    /// Sets the `n`-th number of the JSON (in walk order) to `value`.
    Number { n: u16, value: u64 },
    /// Removes the `n`-th object key.
    Remove { n: u16 },
    /// Sets a skeleton byte.
    Skeleton { at: u16, value: u8 },
}

#[derive(Arbitrary, Debug)]
struct Input {
    frames: u8,
    nx: u8,
    values: Vec<f32>,
    times: Vec<f64>,
    mutations: Vec<Mutation>,
    /// Replaces the whole text when present.
    raw: Option<String>,
}

struct Carrier {
    meta: String,
    tensors: Vec<(String, Tensor)>,
}

impl TensorFile for Carrier {
    fn format(&self) -> &'static str {
        "safetensors"
    }
    fn kind(&self) -> String {
        String::new()
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        vec![(
            "__metadata__".into(),
            FieldValue::Map(vec![(provenance::KEY.into(), self.meta.clone().into())]),
        )]
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        self.tensors
            .iter()
            .map(|(n, t)| TensorInfo::new(n.clone(), t.dtype(), t.shape().clone()))
            .collect()
    }
    fn read_tensor(&self, name: &str) -> tensorfmt::Result<Tensor> {
        self.tensors
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| tensorfmt::Error::NoSuchTensor(name.into()))
    }
}

/// Sets the `n`-th number (walk order) to `value`; false when there are fewer.
fn set_number(v: &mut Value, n: &mut usize, value: u64) -> bool {
    match v {
        Value::Number(_) if *n == 0 => {
            *v = value.into();
            true
        }
        Value::Number(_) => {
            *n -= 1;
            false
        }
        Value::Array(a) => a.iter_mut().any(|x| set_number(x, n, value)),
        Value::Object(o) => o.values_mut().any(|x| set_number(x, n, value)),
        _ => false,
    }
}

/// Removes one key of the `n`-th object (walk order).
fn remove_key(v: &mut Value, n: &mut usize, which: usize) -> bool {
    match v {
        Value::Array(a) => a.iter_mut().any(|x| remove_key(x, n, which)),
        Value::Object(o) if *n == 0 => {
            let key = o.keys().nth(which % o.len().max(1)).cloned();
            if let Some(k) = key {
                o.remove(&k);
            }
            true
        }
        Value::Object(o) => {
            *n -= 1;
            o.values_mut().any(|x| remove_key(x, n, which))
        }
        _ => false,
    }
}

/// What one run did with the metadata it was given.
fn outcome(done: &tensorfmt::Result<Restored<()>>) -> &'static str {
    match done {
        Ok(Restored::Written(())) => "written",
        Ok(Restored::NotRecorded) => "not recorded",
        Ok(Restored::Refused(_)) => "refused",
        Ok(Restored::Anew(_)) => "anew",
        Err(_) => "error",
    }
}

/// Builds an input from `data` (as `fuzz_target!(|input: Input| ..)` would): mutates
/// an honest recording, restores through it and checks what is written; returns
/// what `restore` did ("written", "not recorded", "refused", "anew" or "error"; none
/// when `data` is too short for an input).
///
/// ```
/// assert_eq!(tensorfmt_fuzzing::provenance(&[0; 64]), Some("written"));
/// ```
pub fn provenance(data: &[u8]) -> Option<&'static str> {
    let input: Input = crate::take_rest(data)?;
    let (frames, nx) = (usize::from(input.frames % 5), usize::from(input.nx % 4) + 1);
    // The honest original: a dense movie of `frames` frames of nx x 2 x 1.
    let mut w = tensorfmt::pvp::write::DenseWriter::new(std::io::Cursor::new(Vec::new()), nx, 2, 1)
        .unwrap();
    for k in 0..frames {
        let v: Vec<f32> = (0..nx * 2).map(|i| (k * 10 + i) as f32).collect();
        w.write_frame(k as f64, &v).unwrap();
    }
    let original = Bytes::from(w.finish().unwrap().into_inner());
    let file =
        tensorfmt::open_bytes(original.clone(), Format::Pvp, None, &Default::default()).unwrap();
    let rec = provenance::record(&*file, Some(&original), Path::new("x.pvp")).unwrap();
    let mut meta: Value = serde_json::from_str(&rec.json.unwrap()).unwrap();
    for m in &input.mutations {
        match *m {
            Mutation::Number { n, value } => {
                set_number(&mut meta, &mut usize::from(n), value);
            }
            Mutation::Remove { n } => {
                remove_key(&mut meta, &mut usize::from(n % 16), usize::from(n >> 4));
            }
            Mutation::Skeleton { at, value } => {
                if let Some(Value::String(s)) = meta.get_mut("skeleton") {
                    let mut b = std::mem::take(s).into_bytes();
                    if !b.is_empty() {
                        let i = usize::from(at) % b.len();
                        b[i] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
                            [usize::from(value) % 65];
                    }
                    *s = String::from_utf8(b).unwrap();
                }
            }
        }
    }
    let text = input.raw.clone().unwrap_or_else(|| meta.to_string());
    // The tensors offered: the file's shapes, the fuzzer's values.
    let values: Vec<f32> = (0..frames * nx * 2)
        .map(|i| input.values.get(i).copied().unwrap_or(0.5))
        .collect();
    let times: Vec<f64> = (0..frames)
        .map(|i| input.times.get(i).copied().unwrap_or(1.5))
        .collect();
    let tensors = vec![
        (
            "values".to_string(),
            Tensor::from_vec(values, [frames, 2, nx, 1], Order::RowMajor).unwrap(),
        ),
        (
            "time".to_string(),
            Tensor::from_vec(times, [frames], Order::RowMajor).unwrap(),
        ),
    ];
    let carrier = Carrier {
        meta: text.clone(),
        tensors: tensors.clone(),
    };
    // One directory per run: the tests run bodies on several threads of one process.
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tensorfmt-fuzz-prov-{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out.pvp");
    let _ = std::fs::remove_file(&out);
    let reopen = |b: Bytes| tensorfmt::open_bytes(b, Format::Pvp, None, &Default::default());
    let done = provenance::restore(&carrier, &out, "pvp", &Default::default(), &reopen);
    match &done {
        Ok(Restored::Written(())) => {
            let len = std::fs::metadata(&out).unwrap().len();
            assert!(len <= (text.len() + original.len()) as u64);
            let back = tensorfmt::open_bytes(
                Bytes::from(std::fs::read(&out).unwrap()),
                Format::Pvp,
                None,
                &Default::default(),
            )
            .unwrap();
            assert_eq!(back.tensors().len(), 2);
            for (n, t) in &tensors {
                let got = back.read_tensor(n).unwrap();
                assert_eq!(got.dtype(), t.dtype());
                assert_eq!(got.dims(), t.dims());
                assert_eq!(got.bytes(), t.bytes(), "{n}: values not offered");
            }
        }
        Ok(_) | Err(_) => assert!(!out.exists(), "a file left behind"),
    }
    // Nothing left in the temporary directory after the run (a fork-mode campaign
    // starts a process per job).
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_dir(&dir);
    Some(outcome(&done))
}

#[cfg(test)]
mod tests {
    use crate::inputs::{descriptions, kinds};

    #[test]
    fn restores_or_refuses() {
        let reached = kinds("provenance", &descriptions(2000, 17), super::provenance);
        for what in ["written", "refused"] {
            assert!(
                reached.get(what).is_some_and(|&n| n >= 20),
                "{what}: {reached:?}"
            );
        }
    }
}
