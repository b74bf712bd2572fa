//! Truncation sweep through the facade: every corpus file and every golden fixture,
//! cut at the comment block end, every header field, the payload start and entry /
//! neuron starts (and their neighbours) plus an even sample of other lengths. A PINK
//! header states its entry count, so a cut file is an error; the only shorter
//! readings are the ones the format defines by size (a legacy interpretation, a
//! hexagonal map inferred from the payload size), and those carry a warning. Never a
//! panic.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use tensorfmt_core::testing::{prefix_lengths_within, read_fully};
use tensorfmt_core::{ReadOptions, TensorFile};
use tensorfmt_som::{ReadConfig, SomFile};

fn files() -> Vec<PathBuf> {
    let mut v = Vec::new();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/som");
    walk(&fixtures, &mut v);
    if let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "som") {
        walk(&dir, &mut v);
    }
    v.sort();
    v
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let skip = p
            .extension()
            .is_some_and(|x| x == "md" || x == "dump" || x == "npy");
        if p.is_dir() {
            walk(&p, out);
        } else if !skip {
            out.push(p);
        }
    }
}

fn full_read(b: &Bytes, o: &ReadOptions) -> Result<Box<dyn TensorFile>, tensorfmt_core::Error> {
    let f = tensorfmt_som::open_tensor_file(b.clone(), o)?;
    read_fully(f.as_ref())?;
    Ok(f)
}

/// Structure starts of a file that opens (with its kind hint for legacy files).
fn boundaries(f: &SomFile) -> Vec<usize> {
    let p = f.payload_offset();
    let mut v: Vec<usize> = (0..=p).step_by(4).collect();
    v.push(f.comments().len);
    v.push(p);
    let units = f
        .n_entries()
        .map(|n| n as usize)
        .or(f.neuron_count())
        .unwrap_or(0);
    if let Some(unit) = f.payload_len().checked_div(units) {
        v.extend((0..units.min(64)).map(|k| p + k * unit));
        v.extend((units.saturating_sub(4)..=units).map(|k| p + k * unit));
    }
    v
}

#[test]
fn every_prefix_of_every_file() {
    let start = Instant::now();
    let (mut n_files, mut n_cuts, mut shorter_ok) = (0, 0, 0);
    let mut failures = Vec::new();
    let strict = ReadOptions {
        strict: true,
        ..ReadOptions::default()
    };
    for path in files() {
        let name = path.display().to_string();
        let whole = Bytes::from(std::fs::read(&path).unwrap());
        // Ambiguous legacy files open with any of their kinds; the sweep only needs
        // their structure.
        let opened = [
            None,
            Some(tensorfmt_som::FileKind::Data),
            Some(tensorfmt_som::FileKind::Mapping),
        ]
        .into_iter()
        .find_map(|k| {
            let c = ReadConfig {
                legacy_kind: k,
                ..ReadConfig::default()
            };
            SomFile::from_bytes_with(whole.clone(), &c).ok()
        });
        let legacy = opened.as_ref().is_none_or(|f| f.legacy_format().is_some());
        let bounds = opened.as_ref().map(boundaries).unwrap_or_default();
        // About 1 GB of reading per file (most reads are zero-copy).
        let budget = ((1usize << 30) / whole.len().max(1)).clamp(64, 4096);
        let cs = prefix_lengths_within(whole.len(), &bounds, budget);
        n_files += 1;
        n_cuts += cs.len();
        for cut in cs {
            let b = whole.slice(..cut);
            let r = catch_unwind(AssertUnwindSafe(|| {
                let lenient = full_read(&b, &ReadOptions::default()).map(|f| f.warnings());
                let strict = full_read(&b, &strict).map(|f| f.warnings());
                (lenient, strict)
            }));
            let Ok((lenient, strict_r)) = r else {
                failures.push(format!("{name}: PANIC at cut {cut}"));
                continue;
            };
            for (mode, r) in [("lenient", lenient), ("strict", strict_r)] {
                let Ok(warnings) = r else { continue };
                shorter_ok += 1;
                let explained = warnings.iter().any(|w| {
                    w.contains("hexagonal layout inferred") || (legacy && w.contains("legacy"))
                });
                if !explained {
                    failures.push(format!(
                        "{name}: {mode} read of cut {cut} succeeded: {warnings:?}"
                    ));
                }
            }
        }
    }
    eprintln!(
        "truncation sweep: {n_files} files, {n_cuts} prefixes ({shorter_ok} readings by size) in {:?}",
        start.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
