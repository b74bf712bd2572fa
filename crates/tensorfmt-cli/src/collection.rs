//! Whole collections: inputs expanded from files, directories (`--recursive`) and glob
//! patterns; a pool of workers (`-j`); one line per file (text, or JSON lines with
//! `--json`); for `convert`, an output tree that mirrors the inputs and skips outputs
//! that are newer than their input (so an interrupted run resumes where it stopped).

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{json, Value};
use tensorfmt::{Format, ReadOptions};

use crate::commands::{convert_file, ConvertArgs};
use crate::paths::{identity, Identity};
use crate::pool::largest_first;
use crate::progress::files_bar;
use crate::text;
use crate::Failure;

/// One input of a collection: its path, its path relative to the argument that named it
/// (what the output tree mirrors), its size, and whether a directory walk or a pattern
/// found it (rather than its own argument).
#[derive(Debug, Clone)]
pub struct Input {
    pub path: PathBuf,
    pub rel: PathBuf,
    pub size: u64,
    pub walked: bool,
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Extensions of the formats we read: what a directory walk picks up.
fn known_extension(p: &Path) -> bool {
    let Some(ext) = p.extension().and_then(|e| e.to_str()) else {
        return false;
    };
    let ext = ext.to_ascii_lowercase();
    Format::ALL
        .iter()
        .any(|f| f.extensions().contains(&ext.as_str()))
}

/// Walks directories following symbolic links, entering each directory (by identity)
/// once: a link loop (`ln -s . loop`) or two links to one directory end there instead
/// of recursing until the path is too long.
#[derive(Default)]
struct Walker {
    dirs: HashSet<Identity>,
}

impl Walker {
    /// Every non-hidden entry below `dir` (up to `depth` levels when given) that is
    /// not a directory and for which `take(path relative to root)` holds. Entries that
    /// are not regular files (FIFOs, sockets, devices, dangling links) are listed too:
    /// the command then refuses each with its reason and goes on.
    fn walk(
        &mut self,
        root: &Path,
        dir: &Path,
        depth: Option<usize>,
        take: &dyn Fn(&Path) -> bool,
        out: &mut Vec<Input>,
    ) -> Result<(), Failure> {
        if let Ok(meta) = std::fs::metadata(dir) {
            if !self.dirs.insert(identity(&meta)) {
                return Ok(()); // already walked: a loop, or a second link to it
            }
        }
        if depth == Some(0) {
            return Ok(());
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| Failure::Input(format!("reading directory {}: {e}", dir.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with('.') {
                continue; // hidden files, and our own temporaries
            }
            // An ONNX model's external data (`m.onnx.data` beside `m.onnx`) is part of
            // that model, not a primitiv file of its own.
            if let Some(model) = name.strip_suffix(".data") {
                if model.to_ascii_lowercase().ends_with(".onnx")
                    && p.with_file_name(model).is_file()
                {
                    continue;
                }
            }
            let meta = std::fs::metadata(&p); // follows links
            if meta.as_ref().is_ok_and(|m| m.is_dir()) {
                self.walk(root, &p, depth.map(|d| d - 1), take, out)?;
                continue;
            }
            let rel = p.strip_prefix(root).unwrap_or(&p).to_path_buf();
            if take(&rel) {
                let size = meta
                    .as_ref()
                    .map_or(0, |m| if m.is_file() { m.len() } else { 0 });
                out.push(Input {
                    path: p,
                    rel,
                    size,
                    walked: true,
                });
            }
        }
        Ok(())
    }
}

/// The literal directory part of a glob pattern (what its matches are relative to),
/// and the pattern below it.
fn glob_root(pattern: &str) -> (PathBuf, String) {
    let mut root = PathBuf::new();
    let mut rest = PathBuf::new();
    for part in Path::new(pattern).components() {
        if rest.as_os_str().is_empty() && !is_glob(&part.as_os_str().to_string_lossy()) {
            root.push(part);
        } else {
            rest.push(part);
        }
    }
    (root, rest.to_string_lossy().into_owned())
}

/// Expands the command-line inputs: files as given, directories (only with
/// `recursive`: every file with a known extension below them) and glob patterns
/// (`'runs/**/*.pvp'`, quoted so that the shell leaves them to us). Directories are
/// walked following symbolic links, each directory once; a file named twice (by two
/// paths, links or hard links) is taken once.
pub fn expand(args: &[PathBuf], recursive: bool) -> Result<Vec<Input>, Failure> {
    expand_around(args, recursive, None)
}

/// [`expand`] for a conversion into `out_dir`: walks and patterns leave out the output
/// directory and everything below it when it lies inside a directory they walk, so a
/// rerun of `convert -r d d/out` does not take its own outputs as inputs. (An
/// `out_dir` that is the walked directory itself is left to the record of outputs.)
pub fn expand_around(
    args: &[PathBuf],
    recursive: bool,
    out_dir: Option<&Path>,
) -> Result<Vec<Input>, Failure> {
    directories_need_recursive(args, recursive)?;
    let out_id = out_dir
        .and_then(|d| std::fs::metadata(d).ok())
        .filter(std::fs::Metadata::is_dir)
        .map(|m| identity(&m));
    // A walker that takes the output directory as already walked, unless it is the
    // root itself.
    let walker = |root: &Path| {
        let mut w = Walker::default();
        let root_id = std::fs::metadata(root).ok().map(|m| identity(&m));
        if let Some(id) = out_id.filter(|&id| Some(id) != root_id) {
            w.dirs.insert(id);
        }
        w
    };
    let mut out = Vec::new();
    for a in args {
        let text = a.to_string_lossy();
        if a.is_dir() {
            walker(a).walk(a, a, None, &known_extension, &mut out)?;
        } else if !a.exists() && is_glob(&text) {
            let (root, rest) = glob_root(&text);
            let pattern = glob::Pattern::new(&rest)
                .map_err(|e| Failure::Usage(format!("bad pattern {text:?}: {e}")))?;
            let options = glob::MatchOptions {
                case_sensitive: true,
                require_literal_separator: true,
                require_literal_leading_dot: true,
            };
            // `**` may go down any number of levels; otherwise one per component.
            let depth = (!rest.contains("**")).then(|| Path::new(&rest).components().count());
            let take = |rel: &Path| pattern.matches_path_with(rel, options);
            let walk_root = if root.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                root.clone()
            };
            let before = out.len();
            walker(&walk_root).walk(&walk_root, &walk_root, depth, &take, &mut out)?;
            if root.as_os_str().is_empty() {
                // `*.pvp` lists `a.pvp`, not `./a.pvp`.
                for i in &mut out[before..] {
                    i.path = i.rel.clone();
                }
            }
            if out.len() == before {
                return Err(Failure::Input(format!("no file matches {text:?}")));
            }
        } else {
            let rel = PathBuf::from(a.file_name().unwrap_or(a.as_os_str()));
            let size = a.metadata().map_or(0, |m| m.len());
            out.push(Input {
                path: a.clone(),
                rel,
                size,
                walked: false,
            });
        }
    }
    // The same file named twice (`x`, `./x`, a link to it) is taken once.
    let mut seen_paths = HashSet::new();
    let mut seen_files = HashSet::new();
    out.retain(|i| match std::fs::metadata(&i.path) {
        Ok(m) if m.is_file() => seen_files.insert(identity(&m)),
        _ => seen_paths.insert(i.path.clone()),
    });
    Ok(out)
}

/// Refuses a directory among the inputs without `recursive`: a usage error (exit 2)
/// with the hint, for the commands that take `-r` (`inspect`, `validate`, `convert`),
/// before any other check.
pub fn directories_need_recursive(args: &[PathBuf], recursive: bool) -> Result<(), Failure> {
    match args.iter().find(|a| a.is_dir()) {
        Some(a) if !recursive => Err(Failure::Usage(format!(
            "{} is a directory; use --recursive (-r) to take the files below it",
            a.display()
        ))),
        _ => Ok(()),
    }
}

/// Whether the inputs name a collection (several files, a directory or a pattern)
/// rather than one file.
pub fn is_collection(args: &[PathBuf]) -> bool {
    args.len() > 1
        || args
            .iter()
            .any(|a| a.is_dir() || (!a.exists() && is_glob(&a.to_string_lossy())))
}

fn print_line(line: &str) {
    crate::output::emit(&format!("{line}\n"));
}

fn json_line(v: &Value) {
    print_line(&serde_json::to_string(v).unwrap_or_default());
}

/// `tensorfmt convert IN... OUT_DIR --to FORMAT [-r] [-j N] [--force] [--json]`.
pub fn convert_many(
    inputs: &[PathBuf],
    out_dir: &Path,
    template: &ConvertArgs,
    recursive: bool,
    jobs: usize,
) -> Result<(), Failure> {
    directories_need_recursive(inputs, recursive)?;
    let Some(target) = template.to.clone() else {
        return Err(Failure::Usage(
            "converting several files needs the output format: add --to FORMAT".into(),
        ));
    };
    if out_dir.exists() && !out_dir.is_dir() {
        return Err(Failure::Usage(format!(
            "{} is not a directory (with several inputs, the output is a directory)",
            out_dir.display()
        )));
    }
    let mut files = expand_around(inputs, recursive, Some(out_dir))?;
    // Where the outputs go beside their inputs (`convert -r d d`), a file the walk
    // found that this directory's record names as our output, unchanged since, is an
    // output of an earlier run, not an input.
    let recorded = Manifest::read(out_dir);
    files.retain(|i| !(i.walked && recorded.is_output(out_dir, &i.path)));
    let created = !out_dir.exists();
    std::fs::create_dir_all(out_dir)
        .map_err(|e| Failure::Input(format!("creating {}: {e}", out_dir.display())))?;
    let ext = target.format.extensions()[0];
    let quiet_output = template.quiet || template.json;
    let bar = files_bar(
        files.iter().map(|f| f.size).sum(),
        files.len(),
        "converting",
        quiet_output,
    );
    let outputs: Vec<PathBuf> = files
        .iter()
        .map(|i| out_dir.join(&i.rel).with_extension(ext))
        .collect();
    // Outputs that collide (`x.pvp` and `x.npy`, or `a/x.npy` and `b/x.npy` named as
    // files, all `OUT/x.npz`) are found before anything is written, and all fail.
    let mut by_output: HashMap<&Path, Vec<usize>> = HashMap::new();
    for (k, o) in outputs.iter().enumerate() {
        by_output.entry(o.as_path()).or_default().push(k);
    }
    let collision = |k: usize| -> Option<String> {
        let others: Vec<String> = by_output[outputs[k].as_path()]
            .iter()
            .filter(|&&j| j != k)
            .map(|&j| files[j].path.display().to_string())
            .collect();
        (!others.is_empty()).then(|| {
            format!(
                "{} would also be the output of {}; outputs never overwrite each other, so none of them is converted (rename one, or convert them separately)",
                outputs[k].display(),
                others.join(", ")
            )
        })
    };
    // An input is never an output, whatever the path text (`./d` vs `d`, links).
    let input_ids: HashMap<Identity, &Path> = files
        .iter()
        .filter_map(|i| {
            Some((
                identity(&std::fs::metadata(&i.path).ok()?),
                i.path.as_path(),
            ))
        })
        .collect();
    let manifest = Manifest::open(out_dir);
    let failed = AtomicUsize::new(0);
    let index_of: HashMap<&Path, usize> = files
        .iter()
        .enumerate()
        .map(|(k, i)| (i.path.as_path(), k))
        .collect();
    let work = |input: &Input| -> (String, Value) {
        let start = Instant::now();
        let k = index_of[input.path.as_path()];
        let output = outputs[k].clone();
        let mut line = json!({
            "path": input.path.display().to_string(),
            "output": output.display().to_string(),
            "status": "ok",
            "format": null,
            "kind": null,
            "tensors": [],
            "bytes": 0,
            "seconds": 0.0,
            "error": null,
        });
        let existing = std::fs::symlink_metadata(&output).ok();
        let output_id = std::fs::metadata(&output).ok().map(|m| identity(&m));
        let decision = if let Some(inp) = output_id.and_then(|id| input_ids.get(&id)) {
            Err(Failure::Usage(format!(
                "the output {} is the input {}; an input is never overwritten (choose another output directory)",
                output.display(),
                inp.display()
            )))
        } else if let Some(why) = collision(k) {
            Err(Failure::Usage(why))
        } else if existing.as_ref().is_some_and(std::fs::Metadata::is_dir) {
            Err(crate::commands::directory_output(&output))
        } else {
            match (&existing, template.force) {
                (None, _) | (Some(_), true) => Ok(true),
                (Some(meta), false) => match manifest.ours(out_dir, &output, meta, &input.path) {
                    Some(true) => Ok(false),
                    Some(false) => Ok(true),
                    None => Err(Failure::Usage(format!(
                        "{} exists and is not tensorfmt's earlier output of {}; use --force to overwrite it",
                        output.display(),
                        input.path.display()
                    ))),
                },
            }
        };
        let result = match decision {
            Err(e) => Err(e),
            Ok(false) => {
                line["status"] = json!("skipped");
                Ok(None)
            }
            Ok(true) => {
                let mut a = template.clone();
                a.input = input.path.clone();
                a.output = output.clone();
                a.force = true;
                a.quiet = true;
                a.json = false;
                output
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .map_err(|e| Failure::Input(format!("creating {}: {e}", output.display())))
                    .and_then(|()| {
                        // Said before the output is committed: a run killed between the
                        // commit and the record leaves an output the next run knows.
                        manifest.intend(out_dir, &output, &input.path);
                        convert_file(&a, false)
                    })
                    .map(|c| {
                        manifest.record(out_dir, &output, &input.path);
                        Some(c)
                    })
            }
        };
        line["seconds"] = json!(start.elapsed().as_secs_f64());
        let text = match result {
            Ok(None) => format!(
                "{}: skipped ({} is up to date)",
                text::path(&input.path),
                text::path(&output)
            ),
            Ok(Some(c)) => {
                line["format"] = json!(c.format);
                line["kind"] = json!(c.kind);
                line["tensors"] = json!(c.report.written);
                line["bytes"] = json!(c.bytes);
                if !c.report.warnings.is_empty() {
                    line["warnings"] = json!(c.report.warnings);
                }
                format!(
                    "{} -> {}: {}",
                    text::path(&input.path),
                    text::path(&output),
                    text::message(&c.report.summary())
                )
            }
            Err(e) => {
                failed.fetch_add(1, Ordering::Relaxed);
                line["status"] = json!("failed");
                line["error"] = json!(e.message());
                format!(
                    "{}: error: {}",
                    text::path(&input.path),
                    text::message(&e.message_about(&input.path))
                )
            }
        };
        (text, line)
    };
    let (mut done, mut skipped) = (0usize, 0usize);
    largest_first(
        &files,
        |i| i.size,
        jobs,
        work,
        |input, (text, line)| {
            bar.inc(input.size);
            if line["status"] == "skipped" {
                skipped += 1;
            } else if line["status"] == "ok" {
                done += 1;
            }
            if template.json {
                json_line(&line);
            } else if line["status"] == "failed" {
                bar.suspend(|| eprintln!("{text}"));
            } else if !template.quiet {
                bar.suspend(|| print_line(&text));
            }
        },
    );
    bar.finish_and_clear();
    let failed = failed.into_inner();
    if !quiet_output {
        eprintln!(
            "tensorfmt: {} file(s): {done} converted, {skipped} up to date, {failed} failed",
            files.len()
        );
    }
    if created && done == 0 && skipped == 0 {
        // Nothing was written: the directory this run made goes again (its record of
        // intents and the empty folders; anything else in it by now is left alone).
        remove_if_only_ours(out_dir);
    }
    if failed > 0 {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

/// Removes `dir` if all it holds is the record and empty folders.
fn remove_if_only_ours(dir: &Path) {
    fn prune(d: &Path) -> bool {
        let Ok(entries) = std::fs::read_dir(d) else {
            return false;
        };
        let mut empty = true;
        for e in entries.flatten() {
            let p = e.path();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            let gone = if is_dir {
                prune(&p)
            } else {
                e.file_name() == MANIFEST && std::fs::remove_file(&p).is_ok()
            };
            empty &= gone;
        }
        empty && std::fs::remove_dir(d).is_ok()
    }
    prune(dir);
}

/// The record of what `convert` wrote into an output directory: the hidden file
/// `OUT/.tensorfmt-outputs`, one JSON line per written output (its path below `OUT`,
/// the canonical path of its input, and the output's device, inode, size and
/// modification time as written). Lines are appended with one `write` each, so
/// concurrent runs into one directory do not mix them; the last line for an output
/// counts. An existing output is tensorfmt's own only when its line names the same
/// input and the file is still the one written (same identity, size and time), or its
/// line says a write of it from that input began and was never recorded (a run killed
/// between the output's commit and its record: written again); any other existing file
/// needs `--force`.
struct Manifest {
    entries: HashMap<String, Value>,
    file: Option<Mutex<std::fs::File>>,
}

/// The name of the record in an output directory (hidden: walks skip it).
pub const MANIFEST: &str = ".tensorfmt-outputs";

fn output_key(out_dir: &Path, output: &Path) -> String {
    output
        .strip_prefix(out_dir)
        .unwrap_or(output)
        .to_string_lossy()
        .into_owned()
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

fn stamp(meta: &std::fs::Metadata) -> Value {
    use std::os::unix::fs::MetadataExt;
    let (dev, ino) = identity(meta);
    json!([dev, ino, meta.len(), meta.mtime(), meta.mtime_nsec()])
}

impl Manifest {
    fn open(out_dir: &Path) -> Manifest {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(out_dir.join(MANIFEST))
            .ok()
            .map(Mutex::new);
        Manifest {
            file,
            ..Manifest::read(out_dir)
        }
    }

    /// The record as it is, for reading only.
    fn read(out_dir: &Path) -> Manifest {
        let path = out_dir.join(MANIFEST);
        let mut entries = HashMap::new();
        // A damaged or foreign record only makes outputs look foreign (--force).
        if let Ok(text) = std::fs::read_to_string(&path) {
            for line in text.lines() {
                if let Ok(v) = serde_json::from_str::<Value>(line) {
                    if let Some(o) = v.get("output").and_then(Value::as_str) {
                        entries.insert(o.to_string(), v);
                    }
                }
            }
        }
        Manifest {
            entries,
            file: None,
        }
    }

    /// Whether `path` (below `out_dir`) is an output this record names, still the file
    /// that was written (same identity, size and time).
    fn is_output(&self, out_dir: &Path, path: &Path) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        // By the paths links resolve to: `./d/x.npz` and `d` are in one directory.
        let (Ok(file), Ok(dir)) = (std::fs::canonicalize(path), std::fs::canonicalize(out_dir))
        else {
            return false;
        };
        let (Ok(rel), Ok(meta)) = (file.strip_prefix(&dir), std::fs::symlink_metadata(path)) else {
            return false;
        };
        self.entries
            .get(rel.to_string_lossy().as_ref())
            .is_some_and(|e| e.get("stamp") == Some(&stamp(&meta)))
    }

    /// For an existing output: `Some(up_to_date)` when it is our earlier output of
    /// `input` (newer than the input: up to date), `None` when it is someone else's.
    fn ours(
        &self,
        out_dir: &Path,
        output: &Path,
        meta: &std::fs::Metadata,
        input: &Path,
    ) -> Option<bool> {
        let e = self.entries.get(&output_key(out_dir, output))?;
        if e.get("stamp") == Some(&Value::Null)
            && !meta.file_type().is_symlink()
            && e.get("input").and_then(Value::as_str) == Some(canonical(input).as_str())
        {
            // An output of `input` whose write began and was not recorded (a killed
            // run): ours, to be written again.
            return Some(false);
        }
        if meta.file_type().is_symlink()
            || e.get("input").and_then(Value::as_str) != Some(canonical(input).as_str())
            || e.get("stamp") != Some(&stamp(meta))
        {
            return None;
        }
        let newer = match (
            meta.modified(),
            std::fs::metadata(input).and_then(|m| m.modified()),
        ) {
            (Ok(o), Ok(i)) => o >= i,
            _ => false,
        };
        Some(newer)
    }

    /// Records that `output` is about to be written from `input` (no stamp yet).
    fn intend(&self, out_dir: &Path, output: &Path, input: &Path) {
        self.append(out_dir, output, input, Value::Null);
    }

    /// Records `output` as just written from `input`.
    fn record(&self, out_dir: &Path, output: &Path, input: &Path) {
        if let Ok(meta) = std::fs::symlink_metadata(output) {
            self.append(out_dir, output, input, stamp(&meta));
        }
    }

    /// Appends one line (one `write`, so concurrent runs do not mix lines).
    fn append(&self, out_dir: &Path, output: &Path, input: &Path, stamp: Value) {
        let Some(file) = &self.file else {
            return;
        };
        let line = json!({
            "output": output_key(out_dir, output),
            "input": canonical(input),
            "stamp": stamp,
        });
        let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

/// `inspect --json` over a collection: a catalogue, one JSON line per file, in the
/// order of the files.
pub fn inspect_many(
    inputs: &[PathBuf],
    read: &ReadOptions,
    recursive: bool,
    jobs: usize,
    with_stats: bool,
) -> Result<(), Failure> {
    let files = expand(inputs, recursive)?;
    let mut failed = false;
    let work = |input: &Input| -> Value {
        match crate::commands::inspect_value(&input.path, read, with_stats) {
            Ok(v) => v,
            Err(e) => json!({
                "file": input.path.display().to_string(),
                "error": e.message(),
            }),
        }
    };
    // In the order of the files (as `validate`'s lines), whatever finishes first: a
    // catalogue that compares equal from run to run.
    crate::pool::ordered_pool(&files, jobs, work, |_, v| {
        failed |= v.get("error").is_some();
        json_line(&v);
    });
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_roots_and_detection() {
        assert_eq!(
            glob_root("runs/**/*.pvp"),
            (PathBuf::from("runs"), "**/*.pvp".to_string())
        );
        assert_eq!(glob_root("*.pvp"), (PathBuf::new(), "*.pvp".to_string()));
        assert_eq!(
            glob_root("/a/b*/c.npy"),
            (PathBuf::from("/a"), "b*/c.npy".to_string())
        );
        assert!(is_glob("a/*.bin") && !is_glob("a/b.bin"));
        assert!(known_extension(Path::new("x.caffemodel")) && !known_extension(Path::new("x.txt")));
    }
}
