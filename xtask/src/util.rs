//! Helpers shared by the generators: the workspace root and `ensure_file_contents`.

use std::path::{Path, PathBuf};

/// The workspace root (the parent of `xtask/`).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

/// Makes `path` hold exactly `contents`. In check mode nothing is written and a
/// difference is an error naming the command that fixes it.
pub fn ensure_file_contents(
    path: &Path,
    contents: &[u8],
    check: bool,
    command: &str,
) -> Result<(), String> {
    if let Ok(old) = std::fs::read(path) {
        if old == contents {
            return Ok(());
        }
    }
    let shown = path
        .strip_prefix(project_root())
        .unwrap_or(path)
        .display()
        .to_string();
    if check {
        return Err(format!(
            "{shown} is stale or missing: run `cargo xtask {command}`"
        ));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, contents).map_err(|e| format!("{shown}: {e}"))?;
    eprintln!("updated {shown}");
    Ok(())
}
