//! The `tensorfmt` command-line tool: `inspect`, `convert`, `validate`, `diff`, `som-map`,
//! `render`, `formats` and `completions`. `docs/cli.md` describes every command and
//! the JSON shape of each `--json` output.
//!
//! # Exit codes
//!
//! | command | 0 | 1 | 2 |
//! |---|---|---|---|
//! | `diff` | the files hold the same tensors, equal within tolerance | they differ | trouble: a file is missing, unreadable or invalid, or the command line is wrong |
//! | every other command | success | invalid or unreadable input (for `validate`: at least one file failed) | usage error (including clap's own, an existing output without `--force`, an unknown tensor) |
//!
//! `diff` follows GNU `diff` and `cmp` (0 same, 1 different, 2 trouble), so scripts can
//! tell "the conversion changed something" from "the check could not run".
//!
//! Errors go to stderr as one sentence, `tensorfmt: error: ...`. Long operations
//! (conversion, validation, `inspect --stats`, `diff`) show a progress bar when stderr
//! is a terminal and the work is large, and nothing otherwise; `--quiet` and `--json`
//! turn the bars off too.

mod caffe_onnx;
mod collection;
mod commands;
mod diff_cmd;
mod failure;
mod formats_cmd;
mod output;
mod paths;
mod pool;
mod progress;
mod signals;
mod som_map;
mod text;

pub(crate) use failure::Failure;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};
use tensorfmt::{DType, Format, ReadOptions, Target};

const EXIT_CODES: &str = "\
Exit codes: 0 success; 1 invalid or unreadable input; 2 usage error.
`tensorfmt diff` exits 0 when the files are equal within tolerance, 1 when they differ,
2 on trouble (missing or unreadable file, bad command line), as GNU diff does.";

/// Read, check, compare and convert legacy ML tensor files (PVP, PINK SOM, primitiv,
/// Caffe) and npy / npz / safetensors.
#[derive(Debug, Parser)]
#[command(name = "tensorfmt", version, about, long_about = None, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `--kind` and `--strict`, for the commands that read files.
#[derive(Debug, Clone, Default, Args)]
struct ReadArgs {
    /// File kind, for files whose kind cannot be told from their bytes alone
    /// (legacy PINK: som-data, som, mapping, rotflip; Caffe: caffemodel, binaryproto,
    /// blobprotovector, solverstate); any kind `tensorfmt formats` lists. A kind of the
    /// file's own format that the file contradicts is an error (--kind sparse on a dense
    /// PVP); another format's kind is left to files of that format.
    #[arg(long, value_name = "KIND", value_parser = parse_kind)]
    kind: Option<String>,
    /// Refuse what the original program refused (e.g. crash-truncated PVP frame counts,
    /// lenient primitiv markers) instead of reading it with a warning.
    #[arg(long)]
    strict: bool,
    /// Largest single allocation a reader may make for one file (bytes, or with a
    /// suffix: 512K, 64M, 2G, 1T; powers of 1024). A file that needs more is refused
    /// with an error instead of being read; streamed work is unaffected (default 16G,
    /// as Python's `max_alloc=`).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_alloc: Option<u64>,
}

impl ReadArgs {
    fn options(&self) -> ReadOptions {
        let mut o = ReadOptions {
            kind: self.kind.clone(),
            strict: self.strict,
            ..ReadOptions::default()
        };
        if let Some(m) = self.max_alloc {
            o.limits.max_alloc = m;
        }
        o
    }
}

/// The kinds `--kind` names: every file kind of every format (`Format::kinds`) and the
/// readers' own spellings (PINK's `data`, `mapping`, `rotflip`; Caffe's `model`,
/// `mean`). An unknown kind is a usage error listing them, before any file is read.
fn parse_kind(s: &str) -> Result<String, String> {
    let known = Format::ALL.iter().any(|f| f.kinds().contains(&s))
        || tensorfmt::som::parse_kind_hint(s).is_ok()
        || tensorfmt::caffe::FileKind::from_name(s).is_some();
    if known {
        return Ok(s.to_string());
    }
    Err(format!(
        "unknown kind {s:?}: --kind names a file kind `tensorfmt formats` lists (the \
         ambiguous ones: a legacy PINK file's som-data, som, mapping, rotflip; a Caffe \
         file's caffemodel, binaryproto, blobprotovector, solverstate)"
    ))
}

/// `123`, `512K`, `64M`, `2G`, `1T` (also `64MiB`, `64MB`: powers of 1024).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("expected a size such as 64M, got {s:?}"))?;
    let unit = unit.trim().to_ascii_uppercase();
    let unit = unit.trim_end_matches('B').trim_end_matches('I');
    let shift = match unit {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("unknown size unit in {s:?} (use K, M, G or T)")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))
}

// Parsed once per run: the size of the largest variant (`convert`, with its network
// options) costs nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Show a file's format, kind, header fields and tensors.
    #[command(after_help = "\
Example:
  $ tensorfmt inspect testdata/core/f32_2x3.npy
  file:    testdata/core/f32_2x3.npy
  format:  npy
  kind:    array
  ...
  tensors: 1
    f32_2x3  f32  [2, 3]
  $ tensorfmt inspect --stats --json model.safetensors | jq '.tensors[].stats.max'
  $ tensorfmt inspect --json -r runs/ > catalogue.jsonl      # one line per file")]
    Inspect {
        /// The files: paths, directories (with --recursive) or quoted glob patterns.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print JSON instead of text (one object; for several files one line per file).
        #[arg(long)]
        json: bool,
        /// Take the files below directories (those with a known extension).
        #[arg(long, short)]
        recursive: bool,
        /// Worker threads for several files (default: one per core).
        #[arg(long, short, value_name = "N")]
        jobs: Option<usize>,
        /// Add min, max, mean, sum and non-zero counts per tensor (reads all data).
        #[arg(long)]
        stats: bool,
        #[command(flatten)]
        read: ReadArgs,
    },
    /// Convert a file to another format (formats from the extensions or the flags).
    #[command(after_help = "\
Example:
  $ tensorfmt convert net.caffemodel net.safetensors
  net.safetensors: wrote 4 tensors as safetensors
  $ tensorfmt convert net.safetensors back.caffemodel
  $ tensorfmt diff net.caffemodel back.caffemodel && echo lossless
  lossless
  $ tensorfmt convert lenet.caffemodel lenet.onnx --prototxt lenet.prototxt
  lenet.onnx: wrote an ONNX model (opset 17, 9 nodes, 8 initializers); inputs data[64,1,28,28]; outputs prob[64,10]")]
    Convert {
        /// Input file and output file (written through a temporary file and renamed:
        /// never half written); or several inputs (files, directories with --recursive,
        /// quoted glob patterns) and an output directory that mirrors them.
        #[arg(required = true, num_args = 2.., value_name = "IN... OUT")]
        paths: Vec<PathBuf>,
        /// Take the files below input directories (those with a known extension).
        #[arg(long, short)]
        recursive: bool,
        /// Worker threads for several inputs (default: one per core).
        #[arg(long, short, value_name = "N")]
        jobs: Option<usize>,
        /// Input format (default: detected from content, then extension).
        #[arg(long, value_name = "FORMAT")]
        from: Option<Format>,
        #[arg(long, value_name = "FORMAT", help = formats_cmd::to_help())]
        to: Option<Target>,
        /// Convert only this tensor (for .npy output: which one; default the first).
        #[arg(long, value_name = "NAME")]
        tensor: Option<String>,
        /// Overwrite the output if it exists.
        #[arg(long)]
        force: bool,
        /// Read sparse PVP frames as CSR arrays (indptr, indices, data, with shape,
        /// frame_shape and time) instead of dense; npz and safetensors outputs get
        /// their sparse layout with or without it.
        #[arg(long, conflicts_with = "dense")]
        sparse: bool,
        /// Write sparse tensors (sparse PVP) dense; by default npz and safetensors keep
        /// them sparse (scipy's save_npz layout / the CSR triple). Refused beyond 1 GiB.
        #[arg(long)]
        dense: bool,
        /// Write the tensors into the structure of ORIGINAL, an existing file of the
        /// output's legacy format (net name, layer types, headers...; PVP, PINK,
        /// primitiv, Caffe). Refused, writing nothing, when they do not fit.
        #[arg(long, value_name = "ORIGINAL")]
        like: Option<PathBuf>,
        /// Only frames / entries A..B (`A:B`, `A:` or `:B`), read as a Python slice:
        /// negative positions count from the end (`-1:` the last), an end before the
        /// start selects none (PVP files and PINK entry files only).
        #[arg(long, value_name = "A:B", value_parser = parse_frames, allow_hyphen_values = true)]
        frames: Option<commands::FrameSlice>,
        /// Hexagonal layout (SOM output).
        #[arg(long)]
        hex: bool,
        /// Element type to store (f16, bf16, f32, f64, i8 ... u64, bool).
        #[arg(long, value_name = "DTYPE")]
        dtype: Option<DType>,
        /// A format-specific setting, `key=value` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
        settings: Vec<(String, String)>,
        #[command(flatten)]
        read: ReadArgs,
        #[command(flatten)]
        net: caffe_onnx::NetArgs,
        /// Print nothing on success (errors still go to stderr).
        #[arg(long, short, conflicts_with = "json")]
        quiet: bool,
        /// Print one JSON object describing what was written.
        #[arg(long)]
        json: bool,
    },
    /// Check files fully; prints `FILE: ok` or `FILE: error: ...` per file.
    #[command(after_help = "\
Example:
  $ tensorfmt validate a.pvp cut.npy
  a.pvp: ok
  cut.npy: error: npy: at byte 128: data ...
  $ echo $?
  1")]
    Validate {
        /// The files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        read: ReadArgs,
        /// Print only the files that fail (like `sha256sum --check --quiet`).
        #[arg(long, short, conflicts_with = "json")]
        quiet: bool,
        /// Print one JSON object with a result per file.
        #[arg(long)]
        json: bool,
        /// Take the files below directories (those with a known extension).
        #[arg(long, short)]
        recursive: bool,
        /// Only ask whether tensorfmt reads the file (default: whether the original
        /// program would load it; files only our lenient reader accepts fail).
        #[arg(long)]
        lenient: bool,
        /// Worker threads for several files (default: one per core); results are
        /// printed in the order of the files.
        #[arg(long, short, value_name = "N")]
        jobs: Option<usize>,
    },
    /// Compare two files tensor by tensor (exit 0 equal, 1 different, 2 trouble).
    ///
    /// Tensors are paired by name; a tensor only in one file, a dtype or shape
    /// difference, or a value outside the tolerance is a difference. Values follow
    /// numpy's allclose rule |a - b| <= atol + rtol * |b| (B is the reference), with NaN
    /// equal to NaN and an infinity equal only to itself. The default tolerance is
    /// exact (rtol = atol = 0), what checking a lossless conversion needs; numpy's own
    /// defaults are --rtol 1e-5 --atol 1e-8. Both files are streamed piece by piece.
    #[command(after_help = "\
Example:
  $ tensorfmt convert net.caffemodel net.safetensors
  $ tensorfmt convert net.safetensors back.caffemodel
  $ tensorfmt diff net.caffemodel back.caffemodel
  equal: 4 tensor(s), exact
  $ tensorfmt diff --rtol 1e-3 model.npz model_f16.safetensors --allow-dtype

Exit codes: 0 equal within tolerance, 1 different, 2 trouble (missing or unreadable
file, bad command line), as GNU diff does.")]
    Diff {
        /// File A.
        a: PathBuf,
        /// File B (the reference for the relative tolerance).
        b: PathBuf,
        /// Relative tolerance (times |b|).
        #[arg(long, value_name = "R", default_value_t = 0.0, value_parser = parse_tolerance)]
        rtol: f64,
        /// Absolute tolerance.
        #[arg(long, value_name = "T", default_value_t = 0.0, value_parser = parse_tolerance)]
        atol: f64,
        /// Differing elements to show per tensor (all are counted).
        #[arg(long, value_name = "N", default_value_t = 10)]
        max_diffs: usize,
        /// Tensors whose values agree but whose dtypes differ count as equal.
        #[arg(long)]
        allow_dtype: bool,
        /// Compare only the tensors (for two files of the same format, skip their kind
        /// and header fields, which otherwise must match too).
        #[arg(long)]
        tensors_only: bool,
        #[command(flatten)]
        read: ReadArgs,
        /// Print nothing; the exit code says it all (like `cmp -s`).
        #[arg(long, short, conflicts_with = "json")]
        quiet: bool,
        /// Print the whole comparison as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Draw a file (SOM grid, mapping heat map, frame) as a PNG image with a title and colour bar.
    #[command(after_help = "\
Example:
  $ tensorfmt render trained_som.bin som.png
  som.png: 412x412 PNG
  $ tensorfmt render mapping.bin counts.png --counts")]
    Render {
        /// The file.
        file: PathBuf,
        /// The PNG to write.
        output: PathBuf,
        /// For mapping files: a heat map of best-match counts per neuron.
        #[arg(long)]
        counts: bool,
        /// For PVP files and PINK data and mapping files: which frame (entry); negative
        /// counts from the end (-1: the last).
        #[arg(long, value_name = "K", allow_negative_numbers = true)]
        frame: Option<i64>,
        /// For PVP weight files: which arbor (default: all, side by side).
        #[arg(long, value_name = "N", conflicts_with = "layer")]
        arbor: Option<usize>,
        /// For Caffe models: which conv layer (for PVP weights, the arbor number, as --arbor).
        #[arg(long, value_name = "NAME")]
        layer: Option<String>,
        /// File kind, for files whose kind cannot be told from their bytes alone
        /// (legacy PINK: som-data, som, mapping, rotflip; Caffe: caffemodel,
        /// binaryproto, ...), as for inspect; by default the name's extension decides
        /// between readings that fit (`.map`: a mapping).
        #[arg(long, value_name = "KIND", value_parser = parse_kind)]
        kind: Option<String>,
        /// Overwrite the PNG if it exists.
        #[arg(long)]
        force: bool,
        /// Print nothing on success.
        #[arg(long, short, conflicts_with = "json")]
        quiet: bool,
        /// Print one JSON object describing the image.
        #[arg(long)]
        json: bool,
    },
    /// Map PINK data onto a SOM as `Pink --cuda-off --map` does: PINK's mapping and rotation/flip files.
    #[command(after_help = "\
Example:
  $ tensorfmt som-map images.bin som.bin images.map --rot-flip images.rotflip
  images.map and images.rotflip: mapped 1000 entries onto a cartesian 10x10 SOM (100 neurons 91x91), 360 rotations and flips, quadratic distance 45
  $ tensorfmt som-map images.bin som.bin out.map -n 8 --flip-off --euclidean-distance-shape circular")]
    SomMap(som_map::SomMapArgs),
    /// List every format: what is read and written, its file kinds and extensions.
    #[command(after_help = "\
Example:
  $ tensorfmt formats
  $ tensorfmt formats --json | jq -r '.formats[] | select(.writes) | .name'")]
    Formats {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish).
    #[command(after_help = "\
Example:
  $ tensorfmt completions bash > ~/.local/share/bash-completion/completions/tensorfmt
  $ tensorfmt completions zsh > ~/.zfunc/_tensorfmt
  $ tensorfmt completions fish > ~/.config/fish/completions/tensorfmt.fish")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `A:B`, `A:`, `:B` or `:` with integer bounds, negative ones counting from the end
/// (resolved against the file's frame count as Python's `slice.indices` does).
fn parse_frames(s: &str) -> Result<commands::FrameSlice, String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("expected A:B, A: or :B, got {s:?}"))?;
    let num = |x: &str| -> Result<Option<i64>, String> {
        if x.is_empty() {
            return Ok(None);
        }
        x.parse::<i64>()
            .map(Some)
            .map_err(|_| format!("{x:?} is not a frame number"))
    };
    Ok(commands::FrameSlice {
        start: num(a)?,
        stop: num(b)?,
    })
}

fn parse_setting(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

fn parse_tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("expected a finite number >= 0, got {s:?}")),
    }
}

fn report(result: Result<(), Failure>) -> ExitCode {
    // Whatever the command concluded, it read zeros where an input vanished.
    let result = match result {
        Ok(()) | Err(Failure::Reported) if tensorfmt::io::guarded_faults() > 0 => {
            let path = tensorfmt::io::last_faulted_path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "an input file".into());
            Err(Failure::from(tensorfmt::Error::InputChanged { path }))
        }
        other => other,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Reported) => ExitCode::from(1),
        Err(Failure::Input(msg)) => {
            eprintln!("tensorfmt: error: {}", text::message(&msg));
            ExitCode::from(1)
        }
        Err(Failure::Usage(msg)) => {
            eprintln!("tensorfmt: error: {}", text::message(&msg));
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    // An input truncated by another process while mapped is an error (exit 1), not a
    // bus error; outputs written meanwhile are not committed (see io::install_fault_guard).
    tensorfmt::io::install_fault_guard();
    // Ctrl-C, SIGTERM, SIGHUP: remove our temporary files, then die of the signal.
    signals::install();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect {
            files,
            json,
            recursive,
            jobs,
            stats,
            read,
        } => {
            let jobs = jobs.unwrap_or_else(pool::default_jobs);
            if !collection::is_collection(&files) {
                commands::inspect(&files[0], &read.options(), json, stats)
            } else if json {
                collection::inspect_many(&files, &read.options(), recursive, jobs, stats)
            } else {
                collection::expand(&files, recursive).and_then(|inputs| {
                    let mut result = Ok(());
                    for (k, i) in inputs.iter().enumerate() {
                        if k > 0 {
                            output::emit("\n");
                        }
                        if let Err(e) = commands::inspect(&i.path, &read.options(), false, stats) {
                            eprintln!(
                                "tensorfmt: error: {}: {}",
                                text::path(&i.path),
                                text::message(&e.message_about(&i.path))
                            );
                            result = Err(Failure::Reported);
                        }
                    }
                    result
                })
            }
        }
        Command::Convert {
            mut paths,
            recursive,
            jobs,
            from,
            to,
            tensor,
            force,
            sparse,
            dense,
            like,
            frames,
            hex,
            dtype,
            settings,
            read,
            net,
            quiet,
            json,
        } => {
            if net.prototxt.is_some() {
                // What a net conversion would ignore is refused, not dropped.
                let given = [
                    ("--recursive", recursive),
                    ("--jobs", jobs.is_some()),
                    ("--tensor", tensor.is_some()),
                    ("--sparse", sparse),
                    ("--dense", dense),
                    ("--like", like.is_some()),
                    ("--frames", frames.is_some()),
                    ("--hex", hex),
                    ("--dtype", dtype.is_some()),
                    ("--from", from.is_some_and(|f| f != Format::Caffe)),
                    // The input is a caffemodel; another kind asks for something else.
                    (
                        "--kind",
                        read.kind
                            .as_deref()
                            .is_some_and(|k| Format::Caffe.kind_named(k) != Some("caffemodel")),
                    ),
                    (
                        "--to",
                        to.as_ref().is_some_and(|t| t.format != Format::Onnx),
                    ),
                ];
                caffe_onnx::net_settings(&given, &settings).and_then(|external| {
                    caffe_onnx::convert(&paths, &net, external, force, &read.options(), quiet, json)
                })
            } else {
                let output = paths.pop().unwrap_or_default();
                let many = collection::is_collection(&paths);
                let args = commands::ConvertArgs {
                    input: paths.first().cloned().unwrap_or_default(),
                    output: output.clone(),
                    from,
                    to,
                    tensor,
                    force,
                    sparse,
                    frames,
                    hex,
                    dtype,
                    settings,
                    like,
                    dense,
                    read: read.options(),
                    quiet,
                    json,
                };
                if many {
                    let jobs = jobs.unwrap_or_else(pool::default_jobs);
                    collection::convert_many(&paths, &output, &args, recursive, jobs)
                } else {
                    commands::convert(args)
                }
            }
        }
        Command::Validate {
            files,
            read,
            quiet,
            json,
            recursive,
            lenient,
            jobs,
        } => collection::expand(&files, recursive).and_then(|inputs| {
            let paths: Vec<PathBuf> = inputs.into_iter().map(|i| i.path).collect();
            let jobs = jobs.unwrap_or_else(pool::default_jobs);
            commands::validate(&paths, &read.options(), lenient, quiet, json, jobs)
        }),
        Command::Diff {
            a,
            b,
            rtol,
            atol,
            max_diffs,
            allow_dtype,
            tensors_only,
            read,
            quiet,
            json,
        } => {
            let options = tensorfmt::diff::DiffOptions {
                tolerance: tensorfmt::diff::Tolerance { rtol, atol },
                max_diffs,
                allow_dtype,
                tensors_only,
            };
            // GNU diff: 0 same, 1 different, 2 trouble (whatever the trouble).
            return match diff_cmd::diff(&a, &b, &read.options(), &options, quiet, json) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(1),
                Err(Failure::Input(msg) | Failure::Usage(msg)) => {
                    eprintln!("tensorfmt: error: {}", text::message(&msg));
                    ExitCode::from(2)
                }
                Err(Failure::Reported) => ExitCode::from(2),
            };
        }
        Command::Render {
            file,
            output,
            counts,
            frame,
            arbor,
            layer,
            kind,
            force,
            quiet,
            json,
        } => {
            let picture = commands::RenderArgs {
                counts,
                frame,
                arbor,
                layer,
                kind,
            };
            commands::render(&file, &output, &picture, force, quiet, json)
        }
        Command::SomMap(args) => som_map::som_map(&args),
        Command::Formats { json } => formats_cmd::formats(json),
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "tensorfmt", &mut out);
            output::emit(&String::from_utf8_lossy(&out));
            Ok(())
        }
    };
    report(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_ranges() {
        let f = |s| parse_frames(s).map(|f| (f.start, f.stop));
        assert_eq!(f("2:5"), Ok((Some(2), Some(5))));
        assert_eq!(f("3:"), Ok((Some(3), None)));
        assert_eq!(f(":4"), Ok((None, Some(4))));
        assert_eq!(f("-1:"), Ok((Some(-1), None)));
        assert_eq!(f(":-2"), Ok((None, Some(-2))));
        assert_eq!(f("5:2"), Ok((Some(5), Some(2))));
        assert!(f("7").is_err());
        assert!(f("a:b").is_err());
        assert!(f("1.5:").is_err());
    }

    #[test]
    fn frame_slices_resolve_as_python_slices() {
        // Python: slice(a, b).indices(3), stop raised to start.
        let r = |a, b, n| commands::FrameSlice { start: a, stop: b }.resolve(n);
        assert_eq!(r(Some(-1), None, 3), (2, Some(3)));
        assert_eq!(r(None, Some(-1), 3), (0, Some(2)));
        assert_eq!(r(Some(-9), None, 3), (0, Some(3)));
        assert_eq!(r(Some(2), Some(1), 3), (2, Some(2)));
        assert_eq!(r(Some(5), Some(9), 3), (3, Some(3)));
        assert_eq!(r(Some(1), Some(-9), 3), (1, Some(1)));
        assert_eq!(r(None, None, 0), (0, Some(0)));
        assert!(commands::FrameSlice {
            start: Some(-1),
            stop: None
        }
        .counts_from_end());
        assert!(!commands::FrameSlice {
            start: Some(2),
            stop: Some(1)
        }
        .counts_from_end());
    }

    #[test]
    fn settings() {
        assert_eq!(parse_setting("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_setting("=x").is_err());
        assert!(parse_setting("novalue").is_err());
    }

    #[test]
    fn tolerances() {
        assert_eq!(parse_tolerance("1e-5"), Ok(1e-5));
        assert_eq!(parse_tolerance("0"), Ok(0.0));
        for bad in ["-1", "nan", "inf", "x", ""] {
            assert!(parse_tolerance(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_subcommand_has_an_example() {
        for sub in Cli::command().get_subcommands() {
            let help = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(
                help.contains("Example:") && help.contains("$ tensorfmt"),
                "{} has no example",
                sub.get_name()
            );
        }
    }

    #[test]
    fn read_args_map_to_read_options() {
        let r = ReadArgs {
            kind: Some("som".into()),
            strict: true,
            max_alloc: Some(1 << 20),
        };
        let o = r.options();
        assert_eq!((o.kind.as_deref(), o.strict), (Some("som"), true));
        assert_eq!(o.limits.max_alloc, 1 << 20);
    }

    #[test]
    fn kinds() {
        for k in [
            "som-data",
            "data",
            "mapping",
            "caffemodel",
            "model",
            "mean",
            "dense",
            "npy",
        ] {
            assert_eq!(parse_kind(k).as_deref(), Ok(k));
        }
        let e = parse_kind("bogus").unwrap_err();
        assert!(
            e.contains("unknown kind \"bogus\"") && e.contains("solverstate"),
            "{e}"
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("123"), Ok(123));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        for bad in ["", "x", "12Q", "-1", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
