//! Tidy checks run by `cargo test`: repository rules that are cheaper to check than
//! to remember (rust-analyzer style). Each rule is one `#[test]`.

#![cfg(test)]

use std::path::{Path, PathBuf};

use crate::util::project_root;

fn rust_files() -> Vec<PathBuf> {
    let root = project_root();
    let mut out = Vec::new();
    for dir in ["crates", "xtask", "benches", "fuzz/fuzz_targets"] {
        walk(&root.join(dir), &mut out);
    }
    out.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn rel(p: &Path) -> String {
    p.strip_prefix(project_root())
        .unwrap_or(p)
        .display()
        .to_string()
}

fn is_generated(text: &str) -> bool {
    text.lines().take(3).any(|l| l.contains("generated"))
}

/// Every Rust file says what it is for in a `//!` comment at its top.
#[test]
fn every_file_has_module_docs() {
    let mut missing = Vec::new();
    for p in rust_files() {
        let text = std::fs::read_to_string(&p).unwrap();
        if is_generated(&text) {
            continue;
        }
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("#!["));
        if !first.is_some_and(|l| l.starts_with("//!")) {
            missing.push(rel(&p));
        }
    }
    assert!(missing.is_empty(), "files without `//!` docs: {missing:#?}");
}

/// Tests assert on errors; they do not expect panics.
#[test]
fn no_should_panic() {
    let needle = ["#[should", "_panic"].concat();
    let offenders: Vec<String> = rust_files()
        .into_iter()
        .filter(|p| std::fs::read_to_string(p).unwrap().contains(&needle))
        .map(|p| rel(&p))
        .collect();
    assert!(offenders.is_empty(), "{needle} found in {offenders:#?}");
}

/// Every `unsafe` block carries a `// SAFETY:` comment just above it.
#[test]
fn unsafe_has_safety_comment() {
    let needle = ["uns", "afe {"].concat();
    let mut offenders = Vec::new();
    for p in rust_files() {
        let text = std::fs::read_to_string(&p).unwrap();
        if is_generated(&text) {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if l.contains(&needle) && !l.trim_start().starts_with("//") {
                let from = i.saturating_sub(8);
                if !lines[from..i].iter().any(|l| l.contains("SAFETY:")) {
                    offenders.push(format!("{}:{}", rel(&p), i + 1));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "unsafe without SAFETY comment: {offenders:#?}"
    );
}

/// No trailing whitespace in sources and docs.
#[test]
fn no_trailing_whitespace() {
    let mut files = rust_files();
    files.push(project_root().join("README.md"));
    files.push(project_root().join("ARCHITECTURE.md"));
    let mut offenders = Vec::new();
    for p in files {
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        if is_generated(&text) {
            continue;
        }
        for (i, l) in text.lines().enumerate() {
            if l.ends_with(' ') || l.ends_with('\t') {
                offenders.push(format!("{}:{}", rel(&p), i + 1));
            }
        }
    }
    assert!(offenders.is_empty(), "trailing whitespace: {offenders:#?}");
}

/// Architecture invariant: format crates depend on tensorfmt-core only, never on
/// another format crate or the facade.
#[test]
fn format_crates_depend_on_core_only() {
    let formats = ["pvp", "som", "primitiv", "caffe", "onnx"];
    let mut offenders = Vec::new();
    for f in formats {
        let manifest = project_root().join(format!("crates/tensorfmt-{f}/Cargo.toml"));
        let text = std::fs::read_to_string(&manifest).unwrap();
        for line in text.lines() {
            let dep = line.split(['=', '.']).next().unwrap_or("").trim();
            let bad = dep == "tensorfmt"
                || formats
                    .iter()
                    .any(|o| *o != f && dep == format!("tensorfmt-{o}"));
            if bad {
                offenders.push(format!("tensorfmt-{f} depends on {dep}"));
            }
        }
    }
    assert!(offenders.is_empty(), "{offenders:#?}");
}

/// Architecture invariant: tensorfmt-fuzzing (the fuzz targets' bodies, with
/// `arbitrary`) is a leaf: unpublished, and no crate of this workspace depends on it
/// but for tests (`[dev-dependencies]`); the fuzz workspace is its user.
#[test]
fn fuzzing_crate_is_a_leaf() {
    let root = project_root();
    let own = std::fs::read_to_string(root.join("crates/tensorfmt-fuzzing/Cargo.toml")).unwrap();
    assert!(
        own.lines().any(|l| l.replace(' ', "") == "publish=false"),
        "tensorfmt-fuzzing must say publish = false"
    );
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("Cargo.toml"))
        .filter(|p| p.is_file())
        .collect();
    manifests.extend([
        root.join("xtask/Cargo.toml"),
        root.join("benches/Cargo.toml"),
    ]);
    let mut offenders = Vec::new();
    for manifest in &manifests {
        let text = std::fs::read_to_string(manifest).unwrap();
        // The table a line is in: `dependencies`, `target.'cfg(..)'.build-dependencies`,
        // `dependencies.tensorfmt-fuzzing`...
        let mut table = String::new();
        for line in text.lines().map(str::trim) {
            if let Some(t) = line.strip_prefix('[') {
                table = t.trim_end_matches(']').to_string();
                if table.ends_with(".tensorfmt-fuzzing") && !table.contains("dev-dependencies") {
                    offenders.push(format!("{}: [{table}]", rel(manifest)));
                }
                continue;
            }
            let in_deps = table.ends_with("dependencies") && !table.ends_with("dev-dependencies");
            let dep = line.split(['=', '.']).next().unwrap_or("").trim();
            if in_deps && dep == "tensorfmt-fuzzing" {
                offenders.push(format!("{}: [{table}] {line}", rel(manifest)));
            }
        }
    }
    assert!(manifests.len() > 10, "{manifests:?}");
    assert!(
        offenders.is_empty(),
        "only tests may use tensorfmt-fuzzing: {offenders:#?}"
    );
}

/// The `impl TensorFile` block starting at line `start` of `text` (to its closing brace).
fn impl_block(text: &str, start: usize) -> String {
    let mut depth = 0i32;
    let mut opened = false;
    let mut out = String::new();
    for line in text.lines().skip(start) {
        out.push_str(line);
        out.push('\n');
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        if opened && depth <= 0 {
            break;
        }
    }
    out
}

/// A `TensorFile` that wraps another (`Document`, the poisoning `Watched`, the CLI's
/// `Tracked`, ...) overrides every provided method of the trait: a forgotten one falls
/// back to the default and silently hides what the wrapped reader knows (a missing
/// `source_layout` forwarding once made every edited round trip drop its header).
#[test]
fn tensor_file_wrappers_forward_every_provided_method() {
    let core =
        std::fs::read_to_string(project_root().join("crates/tensorfmt-core/src/file.rs")).unwrap();
    let start = core
        .lines()
        .position(|l| l.starts_with("pub trait TensorFile"))
        .expect("the TensorFile trait");
    let provided: Vec<String> = impl_block(&core, start)
        .lines()
        .filter(|l| l.starts_with("    fn ") && l.trim_end().ends_with('{'))
        .filter_map(|l| l.trim().strip_prefix("fn ")?.split(['(', '<']).next())
        .map(str::to_string)
        .collect();
    assert!(
        provided.iter().any(|m| m == "source_layout"),
        "{provided:?}"
    );
    let mut offenders = Vec::new();
    for p in rust_files() {
        let text = std::fs::read_to_string(&p).unwrap();
        for (i, line) in text.lines().enumerate() {
            if !(line.contains("impl") && line.contains("TensorFile for")) {
                continue;
            }
            let block = impl_block(&text, i);
            let wraps = [
                "self.file.format()",
                "self.inner.format()",
                "self.0.format()",
            ]
            .iter()
            .any(|w| block.contains(w));
            if !wraps {
                continue;
            }
            for m in &provided {
                if !block.contains(&format!("fn {m}(")) && !block.contains(&format!("fn {m}<")) {
                    offenders.push(format!("{}:{}: no {m}", rel(&p), i + 1));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "wrappers that drop methods: {offenders:#?}"
    );
}

/// Circles of imports that ARCHITECTURE.md justifies ("Import circles"), as the test
/// prints them (`crate dir: module <-> module`); each must appear there verbatim.
const ALLOWED_CIRCLES: &[&str] = &["crates/tensorfmt-core: dtype <-> error"];

/// No crate's modules import each other in a circle (issue 33): a circle is a knot a
/// newcomer cannot read from one end, and it hides layers (a dispatch table that
/// calls back into the policy above it). Checked per crate (`module_graph.rs` says
/// what counts as an import), and for the Python package.
#[test]
fn no_import_circles_inside_a_crate() {
    use crate::module_graph::{circles, python_package, rust_crate};
    let root = project_root();
    let mut graphs = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.push(root.join("xtask/src"));
    dirs.sort();
    for src in dirs {
        let name = rel(src.parent().unwrap());
        graphs.push((name, rust_crate(&src)));
    }
    graphs.push((
        "crates/tensorfmt-py/python/tensorfmt".into(),
        python_package(
            &root.join("crates/tensorfmt-py/python/tensorfmt"),
            "tensorfmt",
        ),
    ));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut offenders = Vec::new();
    for (name, graph) in &graphs {
        assert!(graph.len() > 1 || name.contains("py"), "{name}: {graph:?}");
        for circle in circles(graph) {
            let found = format!("{name}: {}", circle.join(" <-> "));
            if !ALLOWED_CIRCLES.contains(&found.as_str()) {
                offenders.push(found);
            }
        }
    }
    for allowed in ALLOWED_CIRCLES {
        assert!(
            architecture.contains(allowed),
            "ARCHITECTURE.md does not say why this circle may stay: {allowed}"
        );
    }
    assert!(offenders.is_empty(), "import circles: {offenders:#?}");
}

/// A `1.88` / `1.88.0` version as numbers.
fn version(v: &str) -> [u64; 3] {
    let mut out = [0; 3];
    for (o, p) in out.iter_mut().zip(v.split('.')) {
        *o = p.parse().unwrap_or(0);
    }
    out
}

/// The workspace's `rust-version` (and README's "Rust 1.NN+") is at least what every
/// package in Cargo.lock declares it needs: the workspace said 1.86 while zip 7.4
/// needed 1.88, so a user on 1.86 met cargo's refusal, not the README's promise.
#[test]
fn rust_version_covers_every_dependency() {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .current_dir(project_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let resolved: std::collections::HashSet<&str> = m["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["id"].as_str())
        .collect();
    let packages = m["packages"].as_array().unwrap();
    let ours = packages
        .iter()
        .find(|p| p["name"] == "tensorfmt")
        .and_then(|p| p["rust_version"].as_str())
        .expect("the workspace declares a rust-version")
        .to_string();
    let needs: Vec<String> = packages
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| resolved.contains(id)))
        .filter_map(|p| {
            let v = p["rust_version"].as_str()?;
            (version(v) > version(&ours))
                .then(|| format!("{} {} needs {v}", p["name"], p["version"]))
        })
        .collect();
    assert!(needs.is_empty(), "rust-version {ours} is below: {needs:#?}");
    let readme = std::fs::read_to_string(project_root().join("README.md")).unwrap();
    let short = ours.trim_end_matches(".0");
    for (i, line) in readme.lines().enumerate() {
        if let Some(at) = line.find("Rust 1.") {
            let said: String = line[at + 5..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            assert_eq!(
                said.trim_end_matches('.'),
                short,
                "README.md line {}: says Rust {said}, the workspace's rust-version is {ours}",
                i + 1
            );
        }
    }
}
