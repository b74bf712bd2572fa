//! Truncation sweep through the facade view: every corpus file and every fixture, cut at
//! every MessagePack object start (header, dims, bin, keys, maps ...), their neighbours
//! and a spread of other lengths (`tensorfmt_core::testing::prefix_lengths`), opened in
//! the default (lenient) and strict modes, listed, read tensor by tensor and validated.
//! A primitiv file has no valid shorter form (every count is declared up front), so a
//! prefix either fails or, when the cut only drops ignored trailing bytes, gives exactly
//! the whole file's tensors. Never a panic.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use tensorfmt_core::testing::{corpus_dir, prefix_lengths};
use tensorfmt_core::{ReadOptions, Tensor, TensorFile};
use tensorfmt_primitiv::open_tensor_file;

/// Start offsets of every MessagePack object, containers' elements included (they
/// follow their header in the stream, so a flat walk finds them). Stops at the first
/// byte that cannot start an object or at a length running past the end.
fn object_starts(b: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let be = |at: usize, n: usize| -> Option<usize> {
        let s = b.get(at..at + n)?;
        Some(s.iter().fold(0usize, |a, &x| (a << 8) | usize::from(x)))
    };
    while pos < b.len() {
        out.push(pos);
        let m = b[pos];
        let (header, payload) = match m {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (1, 0),
            0x80..=0x9f => (1, 0),
            0xa0..=0xbf => (1, usize::from(m & 0x1f)),
            0xc4 | 0xd9 => (2, be(pos + 1, 1).unwrap_or(usize::MAX)),
            0xc5 | 0xda => (3, be(pos + 1, 2).unwrap_or(usize::MAX)),
            0xc6 | 0xdb => (5, be(pos + 1, 4).unwrap_or(usize::MAX)),
            0xcc | 0xd0 => (2, 0),
            0xcd | 0xd1 | 0xdc | 0xde => (3, 0),
            0xca | 0xce | 0xd2 | 0xdd | 0xdf => (5, 0),
            0xcb | 0xcf | 0xd3 => (9, 0),
            _ => break, // ext types: not used by the format
        };
        match pos.checked_add(header).and_then(|p| p.checked_add(payload)) {
            Some(next) if next <= b.len() => pos = next,
            _ => break,
        }
    }
    out
}

fn tensors(f: &dyn TensorFile) -> Vec<(String, Tensor)> {
    f.tensors()
        .into_iter()
        .map(|i| {
            let t = f.read_tensor(&i.name).unwrap();
            assert_eq!(t.dims(), i.shape.dims(), "{}", i.name);
            (i.name, t)
        })
        .collect()
}

/// Returns (prefixes tried, prefixes opened) over both modes.
fn sweep(name: &str, data: &Bytes) -> (usize, usize) {
    let lengths = prefix_lengths(data.len(), &object_starts(data));
    let mut opened = 0;
    for strict in [false, true] {
        let opts = ReadOptions {
            strict,
            ..ReadOptions::default()
        };
        let full = open_tensor_file(data.clone(), &opts).ok();
        let full_tensors = full.as_deref().map(tensors);
        for &n in &lengths {
            let r = std::panic::catch_unwind(|| {
                let Ok(f) = open_tensor_file(data.slice(..n), &opts) else {
                    return false;
                };
                let _ = f.header();
                f.validate().unwrap();
                let got = tensors(f.as_ref());
                let full = full_tensors
                    .as_ref()
                    .unwrap_or_else(|| panic!("a prefix opened but the whole file does not"));
                assert_eq!(&got, full, "prefix content differs from the whole file's");
                assert_eq!(f.kind(), full_kind(data, &opts));
                true
            });
            match r {
                Ok(ok) => opened += usize::from(ok),
                Err(_) => panic!("{name}: prefix of {n} bytes (strict: {strict}) failed"),
            }
        }
    }
    (lengths.len() * 2, opened)
}

fn full_kind(data: &Bytes, opts: &ReadOptions) -> String {
    open_tensor_file(data.clone(), opts).unwrap().kind()
}

fn files_in(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    v
}

#[test]
fn every_fixture_prefix_errors_or_is_the_whole_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/primitiv");
    let t = Instant::now();
    let (mut files, mut tried, mut opened) = (0, 0, 0);
    for p in files_in(&dir, "data") {
        let data: Bytes = std::fs::read(&p).unwrap().into();
        let (a, b) = sweep(&p.display().to_string(), &data);
        files += 1;
        tried += a;
        opened += b;
    }
    assert!(files >= 6);
    eprintln!(
        "primitiv fixtures: {files} files, {tried} opens of prefixes ({opened} opened) in {:?}",
        t.elapsed()
    );
}

#[test]
fn every_corpus_prefix_errors_or_is_the_whole_file() {
    let Some(dir) = corpus_dir(env!("CARGO_MANIFEST_DIR"), "primitiv") else {
        return;
    };
    let t = Instant::now();
    let (mut files, mut tried, mut opened) = (0, 0, 0);
    for sub in ["golden", "synthesized", "edge"] {
        for p in files_in(&dir.join(sub), "data") {
            let data = tensorfmt_core::io::map_file(&p).unwrap();
            let (a, b) = sweep(&p.display().to_string(), &data);
            files += 1;
            tried += a;
            opened += b;
        }
    }
    assert_eq!(files, 41);
    // Only cuts inside ok_trailing_garbage's ignored tail open.
    assert!(opened > 0);
    eprintln!(
        "primitiv corpus: {files} files, {tried} opens of prefixes ({opened} opened) in {:?}",
        t.elapsed()
    );
}
