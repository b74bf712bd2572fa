//! What several of the facade's integration tests share: the legacy files (every
//! fixture of `testdata/` and, when present, every file of the shared corpus in the
//! PVP, PINK, primitiv and Caffe formats).

use std::path::{Path, PathBuf};

/// Every legacy corpus file and fixture (descriptions, dumps and prototxts aside),
/// sorted. An absent corpus says so loudly, and fails under `CI=true`.
pub fn legacy_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let formats = ["pvp", "som", "primitiv", "caffe"];
    let mut dirs: Vec<PathBuf> = formats
        .iter()
        .map(|d| root.join("testdata").join(d))
        .collect();
    for format in formats {
        if let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), format) {
            dirs.push(dir);
        }
    }
    let mut files = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if !matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("dump" | "md" | "txt" | "py" | "json" | "prototxt")
            ) {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}
