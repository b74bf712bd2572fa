//! Whole collections: inputs expanded from files, directories (`--recursive`) and glob
//! patterns; a pool of workers (`-j`); one line per file (text, or JSON lines with
//! `--json`); for `convert`, an output tree that mirrors the inputs and skips outputs
//! that are newer than their input (so an interrupted run resumes where it stopped).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{json, Value};
use tensorfmt::{Format, ReadOptions};

use crate::commands::{convert_file, ConvertArgs};
use crate::progress::files_bar;
use crate::Failure;

/// One input of a collection: its path, its path relative to the argument that named it
/// (what the output tree mirrors) and its size.
#[derive(Debug, Clone)]
pub struct Input {
    pub path: PathBuf,
    pub rel: PathBuf,
    pub size: u64,
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

fn walk(root: &Path, dir: &Path, out: &mut Vec<Input>) -> Result<(), Failure> {
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
        if p.is_dir() {
            walk(root, &p, out)?;
        } else if known_extension(&p) {
            let rel = p.strip_prefix(root).unwrap_or(&p).to_path_buf();
            let size = p.metadata().map_or(0, |m| m.len());
            out.push(Input { path: p, rel, size });
        }
    }
    Ok(())
}

/// The literal directory part of a glob pattern (what its matches are relative to).
fn glob_root(pattern: &str) -> PathBuf {
    let mut root = PathBuf::new();
    for part in Path::new(pattern).components() {
        if is_glob(&part.as_os_str().to_string_lossy()) {
            break;
        }
        root.push(part);
    }
    if root.as_os_str().is_empty() || root.to_string_lossy() == pattern {
        PathBuf::from(".")
    } else {
        root
    }
}

/// Expands the command-line inputs: files as given, directories (only with
/// `recursive`: every file with a known extension below them) and glob patterns
/// (`'runs/**/*.pvp'`, quoted so that the shell leaves them to us).
pub fn expand(args: &[PathBuf], recursive: bool) -> Result<Vec<Input>, Failure> {
    let mut out = Vec::new();
    for a in args {
        let text = a.to_string_lossy();
        if a.is_dir() {
            if !recursive {
                return Err(Failure::Usage(format!(
                    "{} is a directory; use --recursive (-r) to take the files below it",
                    a.display()
                )));
            }
            walk(a, a, &mut out)?;
        } else if !a.exists() && is_glob(&text) {
            let root = glob_root(&text);
            let paths = glob::glob(&text)
                .map_err(|e| Failure::Usage(format!("bad pattern {text:?}: {e}")))?;
            let before = out.len();
            for p in paths.flatten() {
                if p.is_file() {
                    let rel = p.strip_prefix(&root).unwrap_or(&p).to_path_buf();
                    let size = p.metadata().map_or(0, |m| m.len());
                    out.push(Input { path: p, rel, size });
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
            });
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|i| seen.insert(i.path.clone()));
    Ok(out)
}

/// Whether the inputs name a collection (several files, a directory or a pattern)
/// rather than one file.
pub fn is_collection(args: &[PathBuf]) -> bool {
    args.len() > 1
        || args
            .iter()
            .any(|a| a.is_dir() || (!a.exists() && is_glob(&a.to_string_lossy())))
}

/// The default number of workers: one per core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `work` over the inputs on `jobs` threads, largest files first, and hands each
/// result to `report` (one at a time, in completion order).
fn pool<T: Send>(
    inputs: &[Input],
    jobs: usize,
    work: impl Fn(&Input) -> T + Sync,
    report: impl FnMut(&Input, T) + Send,
) {
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(inputs[i].size));
    let next = AtomicUsize::new(0);
    let report = Mutex::new(report);
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, inputs.len().max(1)) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = order.get(k) else { break };
                let r = work(&inputs[i]);
                let mut report = report.lock().unwrap_or_else(|p| p.into_inner());
                (*report)(&inputs[i], r);
            });
        }
    });
}

/// Runs `work` over `items` on `jobs` threads and hands each result to `report` on the
/// calling thread in the order of `items`, as soon as it and all before it are done:
/// output stays deterministic and streams while the workers go on.
pub fn ordered_pool<I: Sync, T: Send>(
    items: &[I],
    jobs: usize,
    work: impl Fn(&I) -> T + Sync,
    mut report: impl FnMut(usize, T),
) {
    let next = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            let tx = tx.clone();
            let (next, work) = (&next, &work);
            s.spawn(move || loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(k) else { break };
                if tx.send((k, work(item))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut waiting = std::collections::BTreeMap::new();
        let mut want = 0;
        for (k, r) in rx {
            waiting.insert(k, r);
            while let Some(r) = waiting.remove(&want) {
                report(want, r);
                want += 1;
            }
        }
    });
}

fn print_line(line: &str) {
    crate::commands::emit(&format!("{line}\n"));
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
    let files = expand(inputs, recursive)?;
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
    let failed = AtomicUsize::new(0);
    let work = |input: &Input| -> (String, Value) {
        let start = Instant::now();
        let output = out_dir.join(&input.rel).with_extension(ext);
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
        let up_to_date = !template.force
            && match (output.metadata(), input.path.metadata()) {
                (Ok(o), Ok(i)) => match (o.modified(), i.modified()) {
                    (Ok(o), Ok(i)) => o >= i,
                    _ => false,
                },
                _ => false,
            };
        let result = if output == input.path {
            Err(Failure::Usage(
                "the output would overwrite the input".into(),
            ))
        } else if up_to_date {
            line["status"] = json!("skipped");
            Ok(None)
        } else {
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
                .and_then(|()| convert_file(&a, false))
                .map(Some)
        };
        line["seconds"] = json!(start.elapsed().as_secs_f64());
        let text = match result {
            Ok(None) => format!(
                "{}: skipped ({} is up to date)",
                input.path.display(),
                output.display()
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
                    input.path.display(),
                    output.display(),
                    c.report.summary()
                )
            }
            Err(e) => {
                failed.fetch_add(1, Ordering::Relaxed);
                let msg = e.message();
                line["status"] = json!("failed");
                line["error"] = json!(msg);
                format!("{}: error: {msg}", input.path.display())
            }
        };
        (text, line)
    };
    let (mut done, mut skipped) = (0usize, 0usize);
    pool(&files, jobs, work, |input, (text, line)| {
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
    });
    bar.finish_and_clear();
    let failed = failed.into_inner();
    if !quiet_output {
        eprintln!(
            "tensorfmt: {} file(s): {done} converted, {skipped} up to date, {failed} failed",
            files.len()
        );
    }
    if failed > 0 {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

/// `inspect --json` over a collection: a catalogue, one JSON line per file.
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
    pool(&files, jobs, work, |_, v| {
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
        assert_eq!(glob_root("runs/**/*.pvp"), PathBuf::from("runs"));
        assert_eq!(glob_root("*.pvp"), PathBuf::from("."));
        assert!(is_glob("a/*.bin") && !is_glob("a/b.bin"));
        assert!(known_extension(Path::new("x.caffemodel")) && !known_extension(Path::new("x.txt")));
    }
}
