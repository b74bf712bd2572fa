//! The import graph of a crate's modules (and of the Python package's), for the tidy
//! rule that no crate's modules import each other in a circle.
//!
//! A module is a source file (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; the crate
//! root is `crate`). Module A imports module B when A's code names B through a path:
//! `crate::b::...`, `super::...`, `self::...`, a child module by its bare name, or a
//! name the crate root or a `mod.rs` re-exports from B (`pub use b::Item`). Comments,
//! `mod` declarations and test code (`#[cfg(test)]` modules, inline or in their own
//! files) are not imports. Python: `from . import b`, `from .b import x`,
//! `import tensorfmt.b` and `from tensorfmt.b import x`, at any depth of a file
//! (a lazy import is still an import); the package's `__init__.py` is its table of
//! contents, not a module that others' circles pass through.

#![cfg(test)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module name -> the modules it imports.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// `text` without comments (`//` to the end of a line, outside string literals) and
/// without the items under `#[cfg(test)]` (an inline `mod tests { ... }`, a test-only
/// function).
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut cut = line.len();
        for (i, c) in line.char_indices() {
            match c {
                '"' if prev != '\\' && prev != '\'' => in_str = !in_str,
                '/' if !in_str && prev == '/' => {
                    cut = i - 1;
                    break;
                }
                _ => {}
            }
            prev = if prev == '\\' && c == '\\' { ' ' } else { c };
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    strip_cfg_test(&out)
}

/// Removes every item preceded by `#[cfg(test)]` (to its closing brace or `;`).
fn strip_cfg_test(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let (mut depth, mut end) = (0i32, item.len());
        for (i, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The module path of a file below `src` (`a::b`), or `crate` for the root.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] || parts.is_empty() {
        return "crate".into();
    }
    parts.join("::")
}

fn parent(module: &str) -> String {
    match module.rsplit_once("::") {
        Some((p, _)) => p.to_string(),
        None => "crate".into(),
    }
}

fn child(module: &str, name: &str) -> String {
    if module == "crate" {
        name.to_string()
    } else {
        format!("{module}::{name}")
    }
}

/// Every `use` tree of `code`, expanded to full paths (`a::{b, c::d}` -> `a::b`,
/// `a::c::d`); `pub use` trees are marked.
fn use_paths(code: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let before = rest[..at].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')');
        let tail = &rest[at + 3..];
        let Some(end) = tail.find(';') else { break };
        let tree: String = tail[..end].chars().filter(|c| !c.is_whitespace()).collect();
        // Prose such as "...; use --recursive" in a string is not a use tree.
        if is_use_tree(&tree) {
            for p in expand(&tree) {
                out.push((public, p));
            }
        }
        rest = &tail[end..];
    }
    out
}

/// Whether `tree` (whitespace removed) can be a `use` tree: paths, braces, commas,
/// globs and `as` renames only.
fn is_use_tree(tree: &str) -> bool {
    !tree.is_empty()
        && tree
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '{' | '}' | ',' | '*'))
}

/// `code` without its `pub use` / `pub(crate) use` statements.
fn without_reexports(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let before = rest[..at].trim_end();
        let Some(end) = rest[at..].find(';').map(|e| at + e + 1) else {
            break;
        };
        let start = if before.ends_with("pub") {
            before.len() - 3
        } else if before.ends_with(')') {
            before.rfind("pub").unwrap_or(at)
        } else {
            out.push_str(&rest[..end]);
            rest = &rest[end..];
            continue;
        };
        out.push_str(&rest[..start]);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The position of `word` as a whole word at the start of a statement.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(word) {
        let at = from + i;
        let before = s[..at].chars().next_back();
        let after = s[at + word.len()..].chars().next();
        let starts =
            before.is_none_or(|c| c == '\n' || c == ' ' || c == ';' || c == '{' || c == '}');
        if starts && after == Some(' ') {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `a::{b,c::{d,e}}` -> `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap_or(tree).to_string()];
    };
    let prefix = &tree[..open];
    let close = tree.rfind('}').filter(|&c| c > open).unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand(p).into_iter().map(move |e| format!("{prefix}{e}")))
        .collect()
}

/// The paths `crate::...`, `super::...`, `self::...` and `<child>::...` written in `code`.
fn written_paths(code: &str, children: &BTreeSet<String>) -> Vec<String> {
    let bytes = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if ident(bytes[i]) && (i == 0 || !(ident(bytes[i - 1]) || bytes[i - 1] == b':')) {
            let mut j = i;
            while j < bytes.len()
                && (ident(bytes[j]) || (bytes[j] == b':' && bytes.get(j + 1) == Some(&b':')))
            {
                j += if bytes[j] == b':' { 2 } else { 1 };
            }
            let path = &code[i..j];
            let first = path.split("::").next().unwrap_or("");
            if path.contains("::")
                && (matches!(first, "crate" | "super" | "self") || children.contains(first))
            {
                out.push(path.trim_end_matches(':').to_string());
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// The import graph of the Rust crate whose sources are in `src`.
pub fn rust_crate(src: &Path) -> Graph {
    let mut files = Vec::new();
    collect(src, "rs", &mut files);
    let texts: BTreeMap<String, String> = files
        .iter()
        .map(|f| (module_of(src, f), std::fs::read_to_string(f).unwrap()))
        .collect();
    // Declared modules, and which of them are test-only (`#[cfg(test)] mod x;`).
    let mut modules: BTreeSet<String> = texts.keys().cloned().collect();
    let mut test_only = BTreeSet::new();
    let mut children: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in &texts {
        let mut cfg_test = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with("#[cfg(test)]") {
                cfg_test = true;
                continue;
            }
            let decl = line
                .strip_prefix("pub(crate) mod ")
                .or_else(|| line.strip_prefix("pub mod "))
                .or_else(|| line.strip_prefix("mod "));
            if let Some(name) = decl.and_then(|d| d.strip_suffix(';')) {
                let c = child(m, name);
                children
                    .entry(m.clone())
                    .or_default()
                    .insert(name.to_string());
                if cfg_test {
                    test_only.insert(c);
                }
            }
            if !line.starts_with("#[") {
                cfg_test = false;
            }
        }
    }
    // A test-only module's own children are test code too.
    let mut changed = true;
    while changed {
        changed = false;
        for m in modules.clone() {
            if !test_only.contains(&m) && test_only.iter().any(|t| m.starts_with(&format!("{t}::")))
            {
                test_only.insert(m);
                changed = true;
            }
        }
    }
    modules.retain(|m| !test_only.contains(m));
    let code: BTreeMap<&String, String> = texts
        .iter()
        .filter(|(m, _)| modules.contains(*m))
        .map(|(m, t)| (m, code_of(t)))
        .collect();
    // Names re-exported by a module (`pub use b::Item` in the root or a mod.rs), so a
    // path through the re-export counts as an import of the module that defines it.
    let mut reexports: BTreeMap<(String, String), String> = BTreeMap::new();
    for (m, c) in &code {
        for (public, p) in use_paths(c) {
            if public {
                if let Some(target) = resolve(m, &p, &modules, &BTreeMap::new()) {
                    let name = p.rsplit("::").next().unwrap_or("").to_string();
                    reexports.insert(((*m).clone(), name), target);
                }
            }
        }
    }
    let mut graph = Graph::new();
    for (m, c) in &code {
        let kids = children.get(*m).cloned().unwrap_or_default();
        let mut targets = BTreeSet::new();
        // A re-export (`pub use`) publishes another module's item; it does not use it.
        let c = without_reexports(c);
        let paths = use_paths(&c)
            .into_iter()
            .map(|(_, p)| p)
            .chain(written_paths(&c, &kids));
        for p in paths {
            if let Some(t) = resolve(m, &p, &modules, &reexports) {
                if &t != *m && !test_only.contains(&t) {
                    targets.insert(t);
                }
            }
        }
        graph.insert((*m).clone(), targets);
    }
    graph
}

/// The module a path written in module `from` names (its longest module prefix,
/// through re-exports), if it is one of `modules`.
fn resolve(
    from: &str,
    path: &str,
    modules: &BTreeSet<String>,
    reexports: &BTreeMap<(String, String), String>,
) -> Option<String> {
    let mut parts = path.split("::").filter(|p| !p.is_empty()).peekable();
    let mut at = match parts.peek().copied() {
        Some("crate") => {
            parts.next();
            "crate".to_string()
        }
        Some("self") => {
            parts.next();
            from.to_string()
        }
        Some("super") => {
            let mut m = from.to_string();
            while parts.peek() == Some(&"super") {
                parts.next();
                m = parent(&m);
            }
            m
        }
        Some(_) => from.to_string(),
        None => return None,
    };
    for part in parts {
        let next = child(&at, part);
        if modules.contains(&next) {
            at = next;
            continue;
        }
        if let Some(t) = reexports.get(&(at.clone(), part.to_string())) {
            return Some(t.clone());
        }
        break;
    }
    modules.contains(&at).then_some(at)
}

/// The import graph of the Python package in `package` (a directory of `.py` files).
pub fn python_package(package: &Path, name: &str) -> Graph {
    let mut files = Vec::new();
    collect(package, "py", &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .map(|f| f.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|m| m != "__init__")
        .collect();
    let mut graph = Graph::new();
    for f in &files {
        let m = f.file_stem().unwrap().to_string_lossy().into_owned();
        if m == "__init__" {
            continue;
        }
        let mut targets = BTreeSet::new();
        for line in std::fs::read_to_string(f).unwrap().lines().map(str::trim) {
            let mut names: Vec<String> = Vec::new();
            if let Some(rest) = line.strip_prefix("from ") {
                let (source, imported) = rest.split_once(" import ").unwrap_or((rest, ""));
                let source = source.trim();
                let within = source
                    .strip_prefix(&format!("{name}."))
                    .or_else(|| source.strip_prefix('.'))
                    .map(str::to_string);
                match within.as_deref() {
                    Some("") => names.extend(
                        imported
                            .trim_matches(|c| c == '(' || c == ')')
                            .split(',')
                            .map(|n| n.split(" as ").next().unwrap_or("").trim().to_string()),
                    ),
                    Some(sub) => names.push(sub.split('.').next().unwrap_or("").to_string()),
                    None if source == name => names.extend(
                        imported
                            .split(',')
                            .map(|n| n.split(" as ").next().unwrap_or("").trim().to_string()),
                    ),
                    None => {}
                }
            } else if let Some(rest) = line.strip_prefix("import ") {
                for item in rest.split(',') {
                    if let Some(sub) = item.trim().strip_prefix(&format!("{name}.")) {
                        names.push(sub.split(['.', ' ']).next().unwrap_or("").to_string());
                    }
                }
            }
            targets.extend(names.into_iter().filter(|n| modules.contains(n) && *n != m));
        }
        graph.insert(m, targets);
    }
    graph
}

fn collect(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, ext, out);
        } else if p.extension().is_some_and(|e| e == ext) {
            out.push(p);
        }
    }
}

/// The circles of a graph: its strongly connected components of more than one module
/// (Tarjan), each sorted, in sorted order.
pub fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(targets) = s.graph.get(v) {
            for w in targets {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if s.on_stack.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.out.push(scc);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_trees_expand_and_comments_and_tests_are_not_imports() {
        assert_eq!(
            expand("crate::a::{b,c::{d,e}}"),
            ["crate::a::b", "crate::a::c::d", "crate::a::c::e"]
        );
        let code = code_of(
            "use crate::a; // crate::b\n/// [`x`](crate::c)\nlet s = \"//\"; crate::d::f();\n#[cfg(test)]\nmod tests { use crate::e; }\n",
        );
        let paths = written_paths(&code, &BTreeSet::new());
        assert_eq!(paths, ["crate::a", "crate::d::f"]);
        // "...; use --recursive" in a message is prose, not an import (it panicked).
        let prose =
            code_of("let m = \"a dir; use --recursive (-r)\"; fn f() { g(&format!(\"{x}\")); }\n");
        assert!(use_paths(&prose).is_empty());
    }

    #[test]
    fn circles_are_found() {
        let mut g = Graph::new();
        for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")] {
            g.entry(a.into()).or_default().insert(b.into());
            g.entry(b.into()).or_default();
        }
        assert_eq!(circles(&g), [vec!["a", "b", "c"]]);
    }
}
