//! Test support shared by the format crates: locating the shared corpus.

use std::path::{Path, PathBuf};

/// The corpus folder for one format (`pvp`, `som`, `primitiv`, `caffe`).
///
/// Looks at `$TENSORFMT_CORPUS/<format>` first, then `../shared/corpus/<format>` beside
/// the workspace (found by walking up from `manifest_dir`). When it is missing this
/// prints a loud message and returns `None` so the caller can skip, except under
/// `CI=true`, where a missing corpus panics: CI must not pass by skipping.
///
/// ```no_run
/// if let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "pvp") {
///     assert!(dir.join("SOURCES.md").exists());
/// }
/// ```
pub fn corpus_dir(manifest_dir: &str, format: &str) -> Option<PathBuf> {
    let candidate = match std::env::var_os("TENSORFMT_CORPUS") {
        Some(root) => Some(PathBuf::from(root).join(format)),
        None => Path::new(manifest_dir)
            .ancestors()
            .map(|a| a.join("../shared/corpus").join(format))
            .find(|p| p.is_dir()),
    };
    match candidate {
        Some(p) if p.is_dir() => Some(p),
        _ => {
            let msg = format!(
                "SKIPPED: the {format} corpus was not found (set TENSORFMT_CORPUS or put it at ../shared/corpus)"
            );
            if std::env::var("CI").map(|v| v == "true").unwrap_or(false) {
                panic!("{msg}; CI=true requires the corpus");
            }
            eprintln!("\n!!!!!!!! {msg} !!!!!!!!\n");
            None
        }
    }
}
