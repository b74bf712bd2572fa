//! `inspect`, `convert`, `validate` and `render` (text on stdout goes through
//! `output.rs`). Each returns `Err(Failure)` with one sentence; `main` prints it and picks the
//! exit code.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tensorfmt::provenance::field_json;
use tensorfmt::render::RenderOptions;
use tensorfmt::{
    DType, FieldValue, Format, ReadOptions, SparseOutput, Stats, Target, TensorFile, TensorInfo,
    WriteOptions,
};

use crate::failure::without_path;
use crate::output::sayln;
use crate::output::{emit, emit_json};
use crate::pool::ordered_pool;
use crate::progress::{bar_hook, bar_progress, bytes_bar, files_bar};
use crate::text;
use crate::Failure;
use tensorfmt::progress::Tracked;

/// Lists longer than this are shortened in text output (JSON gets them whole).
const TEXT_LIST_MAX: usize = 16;

/// Maps with more entries than this are shortened in text output (JSON gets them whole).
const TEXT_MAP_MAX: usize = 32;

pub(crate) fn byte_len(info: &TensorInfo) -> u64 {
    info.shape.byte_len(info.dtype.size()).unwrap_or(0) as u64
}

/// Statistics of every listed tensor: streamed piece by piece, or from the entries of
/// a sparse tensor (`TensorFile::stats`).
fn all_stats(
    path: &Path,
    file: &dyn TensorFile,
    infos: &[TensorInfo],
) -> Result<Vec<Stats>, Failure> {
    let bar = bytes_bar(infos.iter().map(byte_len).sum(), "reading", false);
    let progress = bar_progress(&bar);
    let tracked = Tracked::new(file, &progress);
    let mut out = Vec::new();
    for info in infos {
        out.push(
            tracked
                .stats(&info.name)
                .map_err(|e| Failure::in_file(path, e))?,
        );
    }
    bar.finish_and_clear();
    Ok(out)
}

fn stats_json(s: &Stats) -> Value {
    json!({
        "count": s.count,
        "min": s.min,
        "max": s.max,
        "mean": s.mean,
        "sum": s.sum,
        "nonzero": s.nonzero,
        "nan": s.nan,
    })
}

/// Header lists that readers cut short, each with the key that counts all its
/// entries: a caffemodel's `layer` (first 32 of `layers`), a PINK file's `comments`
/// (first 16 of `comment_lines`), an npz archive's `members` (first 32 of
/// `member_count`), a primitiv model's `entries` (first 32 of `parameters`).
const COUNTED_LISTS: [(&str, &str); 4] = [
    ("layer", "layers"),
    ("comments", "comment_lines"),
    ("members", "member_count"),
    ("entries", "parameters"),
];

/// The number of entries the list or map under `key` of `header` stands for: the
/// count key of [`COUNTED_LISTS`] when the header has one.
fn listed_total(header: &[(String, FieldValue)], key: &str) -> Option<usize> {
    let (_, count) = COUNTED_LISTS.iter().find(|(k, _)| *k == key)?;
    header.iter().find_map(|(k, v)| match v {
        FieldValue::UInt(n) if k == count => usize::try_from(*n).ok(),
        FieldValue::Int(n) if k == count => usize::try_from(*n).ok(),
        _ => None,
    })
}

/// Prints one header field. `total`: how many entries a list or map stands for, when
/// the reader gave only the first ones. Lists beyond [`TEXT_LIST_MAX`] and maps beyond
/// [`TEXT_MAP_MAX`] entries (or cut short by the reader) end with `... (N more)`, so a
/// header's text stays small however many entries a file has.
fn field_text(out: &mut String, indent: usize, key: &str, v: &FieldValue, total: Option<usize>) {
    let pad = " ".repeat(indent);
    match v {
        FieldValue::Map(m) => {
            let _ = writeln!(out, "{pad}{}:", text::name(key));
            let shown = m.len().min(TEXT_MAP_MAX);
            for (k, v) in &m[..shown] {
                field_text(out, indent + 2, k, v, None);
            }
            let more = total.unwrap_or(0).max(m.len()) - shown;
            if more > 0 {
                let _ = writeln!(out, "{pad}  ... ({more} more)");
            }
        }
        FieldValue::List(l) if l.len() > TEXT_LIST_MAX || total.is_some_and(|t| t > l.len()) => {
            let shown = if l.len() > TEXT_LIST_MAX {
                TEXT_LIST_MAX / 2
            } else {
                l.len()
            };
            let head: Vec<String> = l[..shown].iter().map(|x| x.to_string()).collect();
            let _ = writeln!(
                out,
                "{pad}{}: [{}, ... ({} more)]",
                text::name(key),
                text::value(&head.join(", ")),
                total.unwrap_or(0).max(l.len()) - shown
            );
        }
        FieldValue::Text(t) if t.len() > TEXT_STRING_MAX => {
            // A carried skeleton (`tensorfmt.source`) is long JSON; `--json` has it whole.
            let cut = (0..=TEXT_STRING_MAX)
                .rev()
                .find(|&i| t.is_char_boundary(i))
                .unwrap_or(0);
            let _ = writeln!(
                out,
                "{pad}{}: {}... ({} bytes; --json shows all)",
                text::name(key),
                text::esc(&t[..cut]),
                t.len()
            );
        }
        other => {
            let _ = writeln!(
                out,
                "{pad}{}: {}",
                text::name(key),
                text::value(&other.to_string())
            );
        }
    }
}

/// Longest text value `inspect` prints whole.
const TEXT_STRING_MAX: usize = 160;

fn fmt_opt(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v}"))
}

/// The JSON of a tensor listing: `{"name", "dtype", "shape"}`.
pub(crate) fn info_json(info: &TensorInfo) -> Value {
    json!({
        "name": info.name,
        "dtype": info.dtype.name(),
        "shape": info.shape.dims(),
    })
}

/// The JSON description `inspect --json` prints for one file.
fn inspect_json(
    path: &Path,
    file: &dyn TensorFile,
    header: &[(String, FieldValue)],
    infos: &[TensorInfo],
    stats: Option<&[Stats]>,
) -> Value {
    let tensors: Vec<Value> = infos
        .iter()
        .enumerate()
        .map(|(i, info)| {
            let mut t = info_json(info);
            if let Some(s) = stats {
                t["stats"] = stats_json(&s[i]);
            }
            t
        })
        .collect();
    let header: serde_json::Map<String, Value> = header
        .iter()
        .map(|(k, v)| (k.clone(), field_json(v)))
        .collect();
    json!({
        "file": path.display().to_string(),
        "format": file.format(),
        "kind": file.kind(),
        "kind_id": file.kind_id(),
        "header": header,
        "tensors": tensors,
        "warnings": file.warnings(),
    })
}

/// [`inspect_json`] as the text `emit_json` would print, without building the whole
/// document as a JSON tree first: the `tensors` are formatted one at a time, so the
/// memory is the printed text (a tree of 300,000 tensor objects took 400 MiB).
fn inspect_json_text(
    path: &Path,
    file: &dyn TensorFile,
    header: &[(String, FieldValue)],
    infos: &[TensorInfo],
    stats: Option<&[Stats]>,
) -> String {
    // A value pretty-printed as a member at depth `depth` (2 spaces per level).
    let nested = |v: &Value, depth: usize| {
        let pad = format!("\n{}", "  ".repeat(depth));
        serde_json::to_string_pretty(v)
            .unwrap_or_default()
            .replace('\n', &pad)
    };
    let mut head = inspect_json(path, file, header, &[], None);
    let warnings = head
        .as_object_mut()
        .and_then(|o| o.remove("warnings"))
        .unwrap_or_default();
    let mut out = String::from("{\n");
    if let Some(o) = head.as_object() {
        for (k, v) in o.iter().filter(|(k, _)| *k != "tensors") {
            let _ = writeln!(out, "  {}: {},", Value::from(k.as_str()), nested(v, 1));
        }
    }
    if infos.is_empty() {
        out.push_str("  \"tensors\": [],\n");
    } else {
        out.push_str("  \"tensors\": [\n");
        for (i, info) in infos.iter().enumerate() {
            let mut t = info_json(info);
            if let Some(s) = stats {
                t["stats"] = stats_json(&s[i]);
            }
            let sep = if i + 1 < infos.len() { "," } else { "" };
            let _ = writeln!(out, "    {}{sep}", nested(&t, 2));
        }
        out.push_str("  ],\n");
    }
    let _ = writeln!(out, "  \"warnings\": {}\n}}", nested(&warnings, 1));
    out
}

/// Refuses what is not a regular file (a FIFO, socket or device would block or never
/// end) before anything opens it; symbolic links are followed. A missing file is left
/// to the opener, whose error names it.
pub(crate) fn regular_file(path: &Path) -> Result<(), tensorfmt::Error> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    match tensorfmt::io::not_regular(path, &meta.file_type()) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// `tensorfmt::open` (or `open_as`) of an input that must be a regular file.
pub(crate) fn open_input(
    path: &Path,
    format: Option<Format>,
    read: &ReadOptions,
) -> Result<tensorfmt::Document, tensorfmt::Error> {
    regular_file(path)?;
    match format {
        Some(f) => tensorfmt::open_as(path, f, read),
        None => tensorfmt::open(path, read),
    }
}

/// Refuses `-` as an output name: tensorfmt writes files (atomically, read back), never
/// stdout, and a file literally named `-` is never what was meant (`./-` names one).
pub(crate) fn refuse_dash(output: &Path) -> Result<(), Failure> {
    if output.as_os_str() == "-" {
        return Err(Failure::Usage(
            "the output \"-\": tensorfmt writes files, not stdout; name a file (./- for a file named -)"
                .into(),
        ));
    }
    Ok(())
}

/// Refuses an output that is an input (same device and inode, whatever the path
/// text or links say), a directory (never replaced, `--force` or not), and, without
/// `force`, any other existing entry at the output path, a dangling symbolic link
/// included.
pub(crate) fn check_output(input: &Path, output: &Path, force: bool) -> Result<(), Failure> {
    refuse_dash(output)?;
    if tensorfmt::io::same_file(input, output) {
        return Err(Failure::Usage(format!(
            "the output {} is the input {}; an input is never overwritten",
            output.display(),
            input.display()
        )));
    }
    if std::fs::symlink_metadata(output).is_ok_and(|m| m.is_dir()) {
        return Err(directory_output(output));
    }
    // A FIFO, socket or device (or a link to one) is never replaced, --force or not.
    if let Ok(m) = std::fs::metadata(output) {
        if !m.is_file() && !m.is_dir() {
            return Err(Failure::Usage(format!(
                "the output {} is not a regular file (a special file is never replaced)",
                output.display()
            )));
        }
    }
    if !force && std::fs::symlink_metadata(output).is_ok() {
        return Err(Failure::Usage(format!(
            "{} exists; use --force to overwrite it",
            output.display()
        )));
    }
    Ok(())
}

/// The refusal of an output path that is a directory (not a link to one, which a
/// rename replaces): a file is never renamed over a directory, so `--force` cannot
/// help and is not suggested.
pub(crate) fn directory_output(output: &Path) -> Failure {
    Failure::Usage(format!(
        "the output {} is a directory; name a file to write (a directory is never replaced)",
        output.display()
    ))
}

/// `inspect --json`'s description of one file, for the catalogue of a collection
/// (statistics without a progress bar).
pub fn inspect_value(path: &Path, read: &ReadOptions, with_stats: bool) -> Result<Value, Failure> {
    let file = open_input(path, None, read).map_err(|e| Failure::in_file(path, e))?;
    let file: &dyn TensorFile = &*file;
    let infos = file.tensors();
    let stats = if with_stats {
        let mut v = Vec::new();
        for info in &infos {
            v.push(
                file.stats(&info.name)
                    .map_err(|e| Failure::in_file(path, e))?,
            );
        }
        Some(v)
    } else {
        None
    };
    Ok(inspect_json(
        path,
        file,
        &file.header(),
        &infos,
        stats.as_deref(),
    ))
}

/// `tensorfmt inspect FILE [--json] [--stats] [--kind K] [--strict]`.
pub fn inspect(
    path: &Path,
    read: &ReadOptions,
    as_json: bool,
    with_stats: bool,
) -> Result<(), Failure> {
    let file = open_input(path, None, read).map_err(|e| Failure::in_file(path, e))?;
    let file: &dyn TensorFile = &*file;
    let infos = file.tensors();
    let stats = if with_stats {
        Some(all_stats(path, file, &infos)?)
    } else {
        None
    };
    let header = file.header();
    let warnings = file.warnings();
    if as_json {
        emit(&inspect_json_text(
            path,
            file,
            &header,
            &infos,
            stats.as_deref(),
        ));
        return Ok(());
    }
    let mut out = String::new();
    let _ = writeln!(out, "file:    {}", text::path(path));
    let _ = writeln!(out, "format:  {}", file.format());
    let _ = writeln!(out, "kind:    {}", text::esc(&file.kind()));
    let _ = writeln!(out, "header:");
    for (k, v) in &header {
        field_text(&mut out, 2, k, v, listed_total(&header, k));
    }
    let _ = writeln!(out, "tensors: {}", infos.len());
    // Names are escaped and cut to `text::NAME_MAX` characters, so the column is bounded.
    // (Escaped once for the width and again when printed: not a second list of names.)
    let wn = infos
        .iter()
        .map(|i| text::name(&i.name).chars().count())
        .max()
        .unwrap_or(0);
    let wd = infos
        .iter()
        .map(|i| i.dtype.name().len())
        .max()
        .unwrap_or(0);
    for (i, info) in infos.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {}  {}  {}",
            text::pad(&text::name(&info.name), wn),
            text::pad(info.dtype.name(), wd),
            info.shape
        );
        if let Some(s) = &stats {
            let s = &s[i];
            let _ = write!(
                out,
                "  {}  min {}  max {}  mean {}  sum {}  nonzero {}",
                text::pad("", wn),
                fmt_opt(s.min),
                fmt_opt(s.max),
                fmt_opt(s.mean),
                s.sum,
                s.nonzero
            );
            if s.nan > 0 {
                let _ = write!(out, "  nan {}", s.nan);
            }
            out.push('\n');
        }
    }
    if !warnings.is_empty() {
        let _ = writeln!(out, "warnings:");
        for w in &warnings {
            let _ = writeln!(out, "  - {}", text::message(w));
        }
    }
    emit(&out);
    Ok(())
}

/// The arguments of `tensorfmt convert`.
#[derive(Debug, Clone)]
pub struct ConvertArgs {
    pub input: PathBuf,
    pub output: PathBuf,
    pub from: Option<Format>,
    pub to: Option<Target>,
    pub tensor: Option<String>,
    pub force: bool,
    pub sparse: bool,
    pub frames: Option<FrameSlice>,
    pub hex: bool,
    pub dtype: Option<DType>,
    pub settings: Vec<(String, String)>,
    /// `--like ORIGINAL`: the tensors into the structure of that file.
    pub like: Option<PathBuf>,
    /// `--dense`: sparse tensors written dense.
    pub dense: bool,
    pub read: ReadOptions,
    pub quiet: bool,
    pub json: bool,
}

/// `--frames A:B` as given: the bounds of a Python slice, a negative one counting
/// from the end of the file's frames (or a PINK file's entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSlice {
    pub start: Option<i64>,
    pub stop: Option<i64>,
}

impl FrameSlice {
    /// Whether a bound counts from the end, so that the file's frame count is needed.
    pub fn counts_from_end(&self) -> bool {
        self.start.is_some_and(|a| a < 0) || self.stop.is_some_and(|b| b < 0)
    }

    /// The range over `count` frames, as Python's `slice.indices(count)` gives it
    /// (both ends clamped into `0..=count`, negative ones from the end), with an end
    /// before the start raised to it (empty).
    pub fn resolve(&self, count: usize) -> (usize, Option<usize>) {
        let n = i64::try_from(count).unwrap_or(i64::MAX);
        let fix = |x: i64| if x < 0 { (x + n).max(0) } else { x.min(n) };
        let start = self.start.map_or(0, fix);
        let stop = self.stop.map_or(n, fix).max(start);
        // Both lie in 0..=count.
        (start as usize, Some(stop as usize))
    }

    /// The range of [`ReadOptions::frames`] without the frame count (no bound from the
    /// end; the readers clamp the ends as [`FrameSlice::resolve`] does).
    fn as_given(&self) -> (usize, Option<usize>) {
        let start = self.start.map_or(0, |a| a.max(0) as usize);
        let stop = self.stop.map(|b| (b.max(0) as usize).max(start));
        (start, stop)
    }
}

/// The frame range `frames` selects from `input`: a bound from the end needs the
/// file's frame count (PVP: its times; PINK data, mapping and rotation/flip files:
/// their entries), read from a first open. Files without frames get a range anyway,
/// so that the reader refuses it with its own message.
fn frame_range(
    frames: FrameSlice,
    input: &Path,
    from: Option<Format>,
    read: &ReadOptions,
) -> Result<(usize, Option<usize>), Failure> {
    if !frames.counts_from_end() {
        return Ok(frames.as_given());
    }
    let doc = open_input(input, from, read).map_err(|e| Failure::in_file(input, e))?;
    let infos = doc.tensors();
    let count = match doc.format() {
        "pvp" => infos.iter().find(|i| i.name == "time"),
        "som" => infos.first(),
        _ => return Ok((0, None)),
    }
    .and_then(|i| i.shape.dims().first().copied())
    .unwrap_or(0);
    Ok(frames.resolve(count))
}

/// What one conversion wrote.
pub struct Converted {
    pub target: Target,
    pub names: Vec<String>,
    pub report: tensorfmt::WriteReport,
    /// Decoded bytes of the tensors given to the writer.
    pub bytes: u64,
    pub format: String,
    pub kind: String,
}

/// `tensorfmt convert IN OUT [...]`. The output goes through a temporary file renamed
/// into place, so the output name is never a half-written file.
pub fn convert(a: ConvertArgs) -> Result<(), Failure> {
    let out = a.output.display().to_string();
    let c = convert_file(&a, !(a.quiet || a.json))?;
    let (target, names, report, total) = (c.target, c.names, c.report, c.bytes);
    if !a.json {
        for w in &report.warnings {
            eprintln!(
                "tensorfmt: warning: {}: {}",
                text::esc(&out),
                text::message(w)
            );
        }
    }
    if a.json {
        emit_json(&json!({
            "input": a.input.display().to_string(),
            "output": out,
            "format": target.format.name(),
            "kind": target.kind,
            "tensors": names,
            "written": report.written,
            "warnings": report.warnings,
            "bytes": total,
        }));
    } else if !a.quiet {
        let kind = target.kind.map(|k| format!(" ({k})")).unwrap_or_default();
        // Fewer than given, or more (a PVP file's `time`): which ones.
        let held = if report.written.len() != report.offered {
            format!(" (the file holds: {})", report.written.join(", "))
        } else {
            String::new()
        };
        sayln!(
            "{}: {} as {}{}",
            text::esc(&out),
            text::message(&report.summary()),
            target.format,
            text::esc(&format!("{kind}{held}"))
        );
    }
    Ok(())
}

/// One conversion without printing its result (`show_progress`: a byte bar on a
/// terminal). Shared by `convert IN OUT` and the collection mode.
pub fn convert_file(a: &ConvertArgs, show_progress: bool) -> Result<Converted, Failure> {
    let a = a.clone();
    let out = a.output.display().to_string();
    refuse_dash(&a.output)?;
    let target_given = a.to.is_some();
    let target = match a.to {
        Some(t) => t,
        None => Target::from_path(&a.output).ok_or_else(|| {
            Failure::Usage(format!(
                "cannot tell the output format from {out:?}; name it with --to"
            ))
        })?,
    };
    if !target.format.is_enabled() {
        return Err(Failure::Usage(format!(
            "this build has no {} support",
            target.format
        )));
    }
    check_output(&a.input, &a.output, a.force)?;
    if target.format == Format::Onnx {
        // The data file beside the model is an output too: never an input, and an
        // existing one is replaced only with --force when it will be written.
        let external = a
            .settings
            .iter()
            .rev()
            .find(|(k, _)| k == tensorfmt::onnx::ExternalData::SETTING)
            .map(|(_, v)| v.as_str());
        let forced = tensorfmt::onnx::ExternalData::parse(external)
            .map_err(|e| Failure::Usage(e.to_string()))?
            == tensorfmt::onnx::ExternalData::Always;
        let data = tensorfmt::onnx::external_data_path(&a.output);
        check_output(&a.input, &data, a.force || !forced)?;
    }
    let frames = match a.frames {
        Some(f) => Some(frame_range(f, &a.input, a.from, &a.read)?),
        None => None,
    };
    let read_options = ReadOptions {
        frames,
        // npz, safetensors and PVP keep sparse frames sparse anyway, from the file's
        // own sparse view (scipy's save_npz layout / the CSR triple with frame_shape /
        // a sparse PVP file of the same geometry); the reader's bare CSR arrays (with
        // `shape`, `frame_shape` and `time`, so a PVP comes back) are for the others.
        sparse_csr: a.sparse
            && !matches!(
                target.format,
                Format::Npz | Format::Safetensors | Format::Pvp
            ),
        ..a.read.clone()
    };
    let doc =
        open_input(&a.input, a.from, &read_options).map_err(|e| Failure::in_file(&a.input, e))?;
    let src: &dyn TensorFile = &*doc;
    let infos = src.tensors();
    let all: Vec<String> = infos.iter().map(|i| i.name.clone()).collect();
    let mut write_options = WriteOptions {
        hex: a.hex,
        dtype: a.dtype,
        like: a.like.clone(),
        sparse: if a.dense {
            SparseOutput::Dense
        } else {
            SparseOutput::Keep
        },
        ..WriteOptions::default()
    };
    for (key, value) in &a.settings {
        // `--set`: a typed choice (`compress`, `threads`) or the writer's own setting.
        // A value the setting does not take is a usage error (exit 2), as any flag's.
        write_options
            .set(key, value)
            .map_err(|e| Failure::Usage(format!("--set {key}={value}: {e}")))?;
    }
    // A setting the writer does not read, a value it does not take, or one of another
    // kind than --to names: usage errors, before the input is opened. (A kind the
    // tensors decide is checked by the writer.)
    target
        .format
        .check_settings(&WriteOptions {
            kind: target.kind.clone(),
            ..write_options.clone()
        })
        .map_err(|e| Failure::Usage(e.to_string()))?;
    if a.like.is_some() {
        // The tensors into the structure of ORIGINAL (the Document conversion's
        // `like`, as Python's `like=`).
        let target = if target_given {
            target
        } else {
            Target::new(target.format)
        };
        let total = tensorfmt::progress::total_bytes(src, &all);
        let bar = bytes_bar(total, "converting", !show_progress);
        let report = doc
            .convert_with_progress(
                &a.output,
                target.clone(),
                None,
                &write_options,
                &bar_hook(&bar),
            )
            .map_err(|e| Failure::in_conversion(&a.input, &a.output, e))?;
        bar.finish_and_clear();
        return Ok(Converted {
            format: src.format().to_string(),
            kind: src.kind(),
            target,
            names: report.written.clone(),
            report,
            bytes: infos.iter().map(byte_len).sum(),
        });
    }
    // One selected tensor, or all: to npy, the only one (or the first, with a note).
    let selection = if let Some(t) = a.tensor {
        if !all.contains(&t) {
            return Err(Failure::Usage(format!(
                "{} has no tensor named {t:?} (it has: {})",
                a.input.display(),
                all.join(", ")
            )));
        }
        Some(vec![t])
    } else if target.format == Format::Npy {
        match all.as_slice() {
            [] => {
                return Err(Failure::Input(format!(
                    "{} holds no tensors",
                    a.input.display()
                )))
            }
            [_] => None,
            [first, ..] => {
                if !a.quiet {
                    eprintln!(
                        "tensorfmt: note: {} gets tensor {}, the first of {}; choose another with --tensor",
                        text::esc(&out),
                        text::name(&format!("{first:?}")),
                        all.len()
                    );
                }
                Some(vec![first.clone()])
            }
        }
    } else {
        None
    };
    // The conversion of `Document`, Python's too: the same file when nothing changes,
    // a legacy file's skeleton carried in safetensors / npz metadata and restored from
    // it, else the tensors converted; the bar is its progress hook.
    let names = selection.clone().unwrap_or_else(|| all.clone());
    let total = tensorfmt::progress::total_bytes(src, &names);
    let bar = bytes_bar(total, "converting", !show_progress);
    let hook = bar_hook(&bar);
    let report = doc
        .convert_with_progress(
            &a.output,
            target.clone(),
            selection.as_deref(),
            &write_options,
            &hook,
        )
        .map_err(|e| Failure::in_conversion(&a.input, &a.output, e))?;
    bar.finish_and_clear();
    Ok(Converted {
        format: src.format().to_string(),
        kind: src.kind(),
        target,
        names,
        report,
        bytes: total,
    })
}

/// What `validate` found a file to be, once read.
struct Found {
    format: String,
    kind: String,
    kind_id: &'static str,
    warnings: Vec<String>,
    /// How many tensors it holds (none: a conversion has nothing to recover).
    tensors: usize,
}

/// `tensorfmt validate FILE... [--lenient] [--quiet | --json] [--kind K] [--strict]`.
///
/// By default the question is "will the original program load this file?": the file
/// is checked as the original reads it (`ReadOptions::strict`), and a file that only
/// our lenient reader accepts fails with the original's reason and a note that
/// `convert` can still recover its data. `lenient` asks only whether tensorfmt reads it.
pub fn validate(
    files: &[PathBuf],
    read: &ReadOptions,
    lenient: bool,
    quiet: bool,
    as_json: bool,
    jobs: usize,
) -> Result<(), Failure> {
    let sizes: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .collect();
    let bar = files_bar(
        sizes.iter().sum(),
        files.len(),
        "validating",
        quiet || as_json,
    );
    // What a file is (format, kind, kind id) and its warnings, once it is read.
    let check = |f: &Path, options: &ReadOptions| {
        open_input(f, None, options).and_then(|file| {
            file.validate()?;
            Ok(Found {
                format: file.format().to_string(),
                kind: file.kind(),
                kind_id: file.kind_id(),
                warnings: file.warnings(),
                tensors: file.tensors().len(),
            })
        })
    };
    let strict = ReadOptions {
        strict: true,
        ..read.clone()
    };
    // (the verdict, what the lenient reader found when the original program refuses
    // the file: a file tensorfmt reads is described whether or not it passes)
    let evaluate = |f: &PathBuf| -> (Result<Found, tensorfmt::Error>, Option<Found>) {
        let result = check(f, if lenient { read } else { &strict });
        match result {
            Err(e) if !lenient => match check(f, read) {
                Ok(found) => {
                    let recovers = if found.tensors > 0 {
                        "so `tensorfmt convert` recovers the data"
                    } else {
                        // An optimizer's state: nothing a conversion would carry out.
                        "but it holds no tensors, so there is no data for `tensorfmt convert` to recover"
                    };
                    (
                        Err(tensorfmt::Error::Invalid(format!(
                            "the original program refuses this file ({e}); tensorfmt reads it leniently, {recovers} (`validate --lenient` checks only that)"
                        ))),
                        Some(found),
                    )
                }
                Err(_) => (Err(e), None),
            },
            other => (other, None),
        }
    };
    let mut failed = false;
    let mut results = Vec::new();
    // Checked on `jobs` threads, reported in the order given.
    ordered_pool(files, jobs, evaluate, |k, (result, lenient_read)| {
        let (f, size) = (&files[k], sizes[k]);
        bar.inc(size);
        failed |= result.is_err();
        if as_json {
            let (found, error) = match &result {
                Ok(found) => (Some(found), None),
                // The whole message, which stands alone in JSON.
                Err(e) => (lenient_read.as_ref(), Some(e.to_string())),
            };
            results.push(json!({
                "file": f.display().to_string(),
                "ok": result.is_ok(),
                "readable": found.is_some(),
                "format": found.map(|x| x.format.clone()),
                "kind": found.map(|x| x.kind.clone()),
                "kind_id": found.map(|x| x.kind_id),
                "error": error,
                "warnings": found.map_or_else(Vec::new, |x| x.warnings.clone()),
            }));
            return;
        }
        bar.suspend(|| match result {
            Ok(Found { warnings, .. }) => {
                if !quiet {
                    sayln!("{}: ok", text::path(f));
                }
                for w in warnings {
                    eprintln!("{}: warning: {}", text::path(f), text::message(&w));
                }
            }
            Err(e) => sayln!(
                "{}: error: {}",
                text::path(f),
                text::message(&without_path(e.to_string(), f))
            ),
        });
    });
    bar.finish_and_clear();
    if as_json {
        emit_json(&json!({ "ok": !failed, "files": results }));
    }
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

/// What `render` draws from its file: the options of [`RenderOptions`] as given on
/// the command line (a negative frame counts from the end; `--arbor` or `--layer`),
/// and `--kind` for files whose kind their bytes do not tell.
#[derive(Debug, Clone, Default)]
pub struct RenderArgs {
    pub counts: bool,
    pub frame: Option<i64>,
    pub arbor: Option<usize>,
    pub layer: Option<String>,
    pub kind: Option<String>,
}

/// The kinds of file (`TensorFile::kind_id`) each `render` option applies to, and what
/// it does there (for the refusal of the others).
const RENDER_OPTIONS: [(&str, &[&str], &str); 4] = [
    (
        "--counts",
        &["som-mapping"],
        "it draws a SOM mapping's best-match counts",
    ),
    (
        "--frame",
        &["dense", "sparse", "weights", "som-data", "som-mapping"],
        "it picks a frame of a PVP file or an entry of a PINK data or mapping file",
    ),
    (
        "--arbor",
        &["weights"],
        "it picks an arbor of a PVP weight file",
    ),
    (
        "--layer",
        &["caffemodel", "weights"],
        "it picks a Caffe model's conv layer (or a PVP weight file's arbor)",
    ),
];

/// The valid positions among `count` items, both ends inclusive, for an out-of-range
/// message: ` (0 to 2, or -3 to -1 from the end)`; nothing when there are none.
fn positions(count: usize, from_end: bool) -> String {
    match (count, from_end) {
        (0, _) => String::new(),
        (1, true) => " (0, or -1 from the end)".into(),
        (1, false) => " (0)".into(),
        (n, true) => format!(" (0 to {}, or -{n} to -1 from the end)", n - 1),
        (n, false) => format!(" (0 to {})", n - 1),
    }
}

/// Checks `render`'s options against the file they are for, before anything is drawn:
/// an option that does not apply to its kind is refused (exit 2) naming it, a frame is
/// resolved (negative: from the end) and bounds-checked, and an arbor too. The file is
/// opened as `inspect` opens it (`--kind`, else the kind its name suggests); returns
/// the options and the file's kind (`TensorFile::kind_id`).
fn render_options(
    file: &Path,
    picture: &RenderArgs,
) -> Result<(RenderOptions, &'static str), Failure> {
    let read = ReadOptions {
        kind: picture.kind.clone(),
        ..ReadOptions::default()
    };
    let doc = open_input(file, None, &read).map_err(|e| Failure::in_file(file, e))?;
    let kind_id = doc.kind_id();
    let given = [
        picture.counts,
        picture.frame.is_some(),
        picture.arbor.is_some(),
        picture.layer.is_some(),
    ];
    for ((option, kinds, what), given) in RENDER_OPTIONS.iter().zip(given) {
        if given && !kinds.contains(&kind_id) {
            return Err(Failure::Usage(format!(
                "{option} does not apply to {} ({}, {}): {what}",
                file.display(),
                doc.format(),
                doc.kind()
            )));
        }
    }
    if picture.counts && picture.frame.is_some() {
        return Err(Failure::Usage(
            "--frame does not apply with --counts: the counts cover every entry of the \
             mapping (without --counts, --frame K draws entry K's distances)"
                .into(),
        ));
    }
    let frame = match picture.frame {
        None => None,
        Some(k) => {
            // PVP files: `time` counts the frames; PINK files: the entries (axis 0).
            let infos = doc.tensors();
            let count = infos
                .iter()
                .find(|i| i.name == "time")
                .or(infos.first())
                .and_then(|i| i.shape.dims().first().copied())
                .unwrap_or(0);
            let what = if doc.format() == "pvp" {
                "frame"
            } else {
                "entry"
            };
            let plural = match (what, count) {
                (_, 1) => what.to_string(),
                ("entry", _) => "entries".into(),
                _ => format!("{what}s"),
            };
            let n = i64::try_from(count).unwrap_or(i64::MAX);
            let index = if k < 0 { n + k } else { k };
            if !(0..n).contains(&index) {
                return Err(Failure::Usage(format!(
                    "--frame {k} is out of range: {} has {count} {plural}{}",
                    file.display(),
                    positions(count, true)
                )));
            }
            usize::try_from(index).ok()
        }
    };
    if kind_id == "weights" {
        // `--arbor N`, or its older spelling `--layer N`: one the file has.
        let given = match (picture.arbor, &picture.layer) {
            (Some(a), _) => Some(("--arbor", a.to_string(), a)),
            (None, Some(l)) => {
                let a = tensorfmt::render::pvp::parse_arbor(l)
                    .map_err(|e| Failure::Usage(format!("--layer {l}: {e}")))?;
                Some(("--layer", l.clone(), a))
            }
            (None, None) => None,
        };
        let arbors = doc.header().iter().find_map(|(k, v)| match v {
            FieldValue::UInt(n) if k == "arbors" => usize::try_from(*n).ok(),
            FieldValue::Int(n) if k == "arbors" => usize::try_from(*n).ok(),
            _ => None,
        });
        if let (Some((option, text, a)), Some(n)) = (given, arbors) {
            if a >= n {
                return Err(Failure::Usage(format!(
                    "{option} {text}: arbor {a} is out of range: {} has {n} arbor{}{}",
                    file.display(),
                    if n == 1 { "" } else { "s" },
                    positions(n, false)
                )));
            }
        }
    }
    let options = RenderOptions {
        counts: picture.counts,
        frame,
        layer: picture
            .arbor
            .map(|a| a.to_string())
            .or_else(|| picture.layer.clone()),
    };
    Ok((options, kind_id))
}

/// Draws `file` (with its legend) as `render_options` found it. PINK files are opened
/// as the kind found there (what `--kind` or the name settled, which the renderer's own
/// detection by content alone cannot); a Caffe model's layer choice is checked first,
/// so that a missing or wrong `--layer` is a usage error (exit 2) listing the layers
/// with filters.
fn draw(
    file: &Path,
    options: &RenderOptions,
    kind_id: &str,
) -> Result<tensorfmt::render::Image, Failure> {
    use tensorfmt::render::{legend, render_picture};
    let fail = |e: tensorfmt::Error| Failure::in_file(file, e);
    let picture = match kind_id {
        "som" | "som-data" | "som-mapping" | "som-rotflip" => {
            let config = tensorfmt::som::ReadConfig {
                legacy_kind: Some(
                    tensorfmt::som::parse_kind_hint(kind_id).map_err(|e| fail(e.into()))?,
                ),
                ..tensorfmt::som::ReadConfig::default()
            };
            let som = tensorfmt::SomFile::open_with(file, &config).map_err(|e| fail(e.into()))?;
            tensorfmt::render::som::render_som_file(&som, options).map_err(fail)?
        }
        "caffemodel" => {
            use tensorfmt::render::caffe::{filter_dims, filters_picture};
            let data = tensorfmt::io::map_file(file).map_err(fail)?;
            let model = tensorfmt::caffe::read_model(data).map_err(|e| fail(e.into()))?;
            let layer = options.layer.as_deref();
            let drawable = layer
                .and_then(|l| model.layer(l))
                .is_some_and(|l| filter_dims(l).is_some());
            let any = model.layers.iter().any(|l| filter_dims(l).is_some());
            match filters_picture(&model, layer) {
                // No --layer, or one without filters, where the model has some: the
                // choice is wrong, not the file.
                Err(e) if !drawable && any => {
                    return Err(Failure::Usage(format!("{}: {e}", file.display())))
                }
                other => other.map_err(fail)?,
            }
        }
        _ => render_picture(file, options).map_err(fail)?,
    };
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.to_string_lossy().into_owned());
    legend::annotate(&picture, &name).map_err(fail)
}

/// `tensorfmt render FILE OUT.png [--counts] [--frame K] [--arbor N | --layer NAME]
/// [--kind K] [--quiet | --json]`.
pub fn render(
    file: &Path,
    output: &Path,
    picture: &RenderArgs,
    force: bool,
    quiet: bool,
    as_json: bool,
) -> Result<(), Failure> {
    refuse_dash(output)?;
    let png = output
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    if !png {
        return Err(Failure::Usage(format!(
            "{}: render writes PNG images only; name the output OUT.png",
            output.display()
        )));
    }
    check_output(file, output, force)?;
    regular_file(file)?;
    let (options, kind_id) = render_options(file, picture)?;
    let image = draw(file, &options, kind_id)?;
    tensorfmt::render::write_png(&image, output)?;
    if as_json {
        emit_json(&json!({
            "file": file.display().to_string(),
            "output": output.display().to_string(),
            "width": image.width,
            "height": image.height,
        }));
    } else if !quiet {
        sayln!(
            "{}: {}x{} PNG",
            text::path(output),
            image.width,
            image.height
        );
    }
    Ok(())
}
