//! Truncation sweep: every corpus file and every fixture, cut at protobuf field starts
//! (every nesting level: net, layer, blob, shape), their neighbours and a spread of other
//! lengths (`tensorfmt_core::testing::prefix_lengths`). Each prefix must open to an
//! error or to a consistent shorter file (protobuf can end at any field boundary: a
//! model cut between layers is a model with fewer layers), and never panic.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use tensorfmt_caffe::open_tensor_file;
use tensorfmt_core::testing::{corpus_dir, prefix_lengths};
use tensorfmt_core::{ReadOptions, Tensor, TensorFile};

/// Field starts of the message in `buf[start..end]` and, recursively, of every
/// length-delimited field whose contents parse as a message. `None` if the range is not
/// a well-formed message (a string or a packed array).
fn field_starts(buf: &[u8], start: usize, end: usize, depth: u32, out: &mut Vec<usize>) -> bool {
    fn varint(buf: &[u8], pos: &mut usize, end: usize) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = *buf[..end].get(*pos)?;
            *pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    let mut mine = Vec::new();
    let mut pos = start;
    while pos < end {
        mine.push(pos);
        let Some(key) = varint(buf, &mut pos, end) else {
            return false;
        };
        if key >> 3 == 0 {
            return false;
        }
        match key & 7 {
            0 => {
                if varint(buf, &mut pos, end).is_none() {
                    return false;
                }
            }
            1 => pos += 8,
            5 => pos += 4,
            2 => {
                let Some(len) = varint(buf, &mut pos, end) else {
                    return false;
                };
                let Some(inner_end) = pos.checked_add(len as usize).filter(|&e| e <= end) else {
                    return false;
                };
                if depth < 4 {
                    let mut inner = Vec::new();
                    if field_starts(buf, pos, inner_end, depth + 1, &mut inner) {
                        mine.extend(inner);
                    }
                }
                pos = inner_end;
            }
            _ => return false,
        }
        if pos > end {
            return false;
        }
    }
    out.extend(mine);
    true
}

/// Same bytes: O(1) when both are slices of the same file at the same place.
fn same(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == b.dtype()
        && a.dims() == b.dims()
        && ((a.bytes().as_ptr() == b.bytes().as_ptr() && a.bytes().len() == b.bytes().len())
            || a.bytes() == b.bytes())
}

struct Outcome {
    prefixes: usize,
    opened: usize,
}

fn sweep(name: &str, data: Bytes, max_boundaries: usize) -> Outcome {
    let opts = ReadOptions::default();
    let full = open_tensor_file(data.clone(), &opts).ok();
    let full_tensors: HashMap<String, Tensor> = full
        .as_ref()
        .map(|f| {
            f.tensors()
                .into_iter()
                .map(|i| (i.name.clone(), f.read_tensor(&i.name).unwrap()))
                .collect()
        })
        .unwrap_or_default();
    let mut bounds = Vec::new();
    field_starts(&data, 0, data.len(), 0, &mut bounds);
    bounds.sort_unstable();
    bounds.dedup();
    if bounds.len() > max_boundaries {
        // Sample evenly; the top-level starts (layers) come first in importance but an
        // even spread over all levels keeps every kind of cut represented.
        let step = bounds.len().div_ceil(max_boundaries);
        bounds = bounds.into_iter().step_by(step).collect();
    }
    let lengths = prefix_lengths(data.len(), &bounds);
    let mut opened = 0;
    for &n in &lengths {
        let prefix = data.slice(..n);
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                match open_tensor_file(prefix.clone(), &opts) {
                    Err(_) => false,
                    Ok(f) => {
                        check_opened(
                            f.as_ref(),
                            &prefix,
                            data.len(),
                            full.as_deref(),
                            &full_tensors,
                        );
                        true
                    }
                }
            }));
        match result {
            Ok(ok) => opened += usize::from(ok),
            Err(_) => panic!("{name}: prefix of {n} bytes panicked"),
        }
    }
    Outcome {
        prefixes: lengths.len(),
        opened,
    }
}

/// A prefix that opens must list, read and validate every tensor, each a view of the
/// prefix's own bytes (nothing read past the cut) or an owned copy (unpacked values). When it is read as the same kind as
/// the whole file and that kind is a list (model layers, vector or history blobs), each
/// of its tensors equals the whole file's tensor of that name: a cut between layers
/// gives fewer layers, not different weights. (A mean file *is* one BlobProto, so a cut
/// between its fields is a different valid blob: e.g. `data` without the `double_data`
/// that wins over it; only the view check applies there.)
fn check_opened(
    f: &dyn TensorFile,
    prefix: &Bytes,
    file_len: usize,
    full: Option<&dyn TensorFile>,
    full_tensors: &HashMap<String, Tensor>,
) {
    let _ = f.header();
    f.validate().unwrap();
    let same_kind =
        full.is_some_and(|g| g.kind() == f.kind()) && !f.kind().starts_with("mean file");
    let range = prefix.as_ptr() as usize..prefix.as_ptr() as usize + prefix.len();
    let file = range.start..range.start + file_len;
    for info in f.tensors() {
        let t = f.read_tensor(&info.name).unwrap();
        assert_eq!(t.dims(), info.shape.dims());
        let p = t.bytes().as_ptr() as usize;
        assert!(
            t.bytes().is_empty()
                || !file.contains(&p)
                || (range.contains(&p) && p + t.bytes().len() <= range.end),
            "tensor {} is not a view of the prefix",
            info.name
        );
        if same_kind {
            if let Some(want) = full_tensors.get(&info.name) {
                assert!(
                    same(&t, want),
                    "tensor {} differs from the whole file's",
                    info.name
                );
            }
        }
    }
    if same_kind {
        assert!(f.tensors().len() <= full_tensors.len());
    }
}

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/caffe");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x != "dump"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_fixture_prefix_errors_or_is_consistent() {
    let t = Instant::now();
    let (mut files, mut prefixes, mut opened) = (0, 0, 0);
    for p in fixtures() {
        let data: Bytes = std::fs::read(&p).unwrap().into();
        let o = sweep(&p.display().to_string(), data, usize::MAX);
        files += 1;
        prefixes += o.prefixes;
        opened += o.opened;
    }
    assert!(files >= 12);
    eprintln!(
        "caffe fixtures: {files} files, {prefixes} prefixes ({opened} opened as shorter files) in {:?}",
        t.elapsed()
    );
}

#[test]
fn every_corpus_prefix_errors_or_is_consistent() {
    let Some(dir) = corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe") else {
        return;
    };
    let t = Instant::now();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x != "md"))
        .collect();
    names.sort();
    let mut total = 0;
    for p in &names {
        let data = tensorfmt_core::io::map_file(p).unwrap();
        let len = data.len();
        let one = Instant::now();
        // Every field start (each with its ±1, ±4 neighbours) plus prefix_lengths' 512
        // first/last lengths and ~512 spread: a few thousand prefixes per file.
        let o = sweep(&p.display().to_string(), data, usize::MAX);
        total += o.prefixes;
        eprintln!(
            "{}: {len} bytes, {} prefixes, {} opened as shorter files, {:?}",
            p.file_name().unwrap().to_string_lossy(),
            o.prefixes,
            o.opened,
            one.elapsed()
        );
    }
    assert_eq!(names.len(), 9);
    eprintln!("caffe corpus: {total} prefixes in {:?}", t.elapsed());
}
