//! The `tensorfmt` command-line tool: `inspect`, `convert`, `validate`, `render`.
//!
//! Exit codes: 0 success, 1 invalid or unreadable input, 2 usage error (including
//! clap's own). Errors go to stderr as one sentence, `tensorfmt: error: ...`. Long
//! operations show a progress bar when stderr is a terminal and nothing otherwise.

mod commands;
mod progress;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tensorfmt::{DType, Format, Target};

/// Read, check and convert legacy ML tensor files (PVP, PINK SOM, primitiv, Caffe)
/// and npy / npz / safetensors.
#[derive(Debug, Parser)]
#[command(name = "tensorfmt", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show a file's format, kind, header fields and tensors.
    Inspect {
        /// The file.
        file: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Add min, max, mean, sum and non-zero counts per tensor (reads all data).
        #[arg(long)]
        stats: bool,
    },
    /// Convert a file to another format (formats from the extensions or the flags).
    Convert {
        /// Input file.
        input: PathBuf,
        /// Output file (written through a temporary file and renamed).
        output: PathBuf,
        /// Input format (default: detected from content, then extension).
        #[arg(long, value_name = "FORMAT")]
        from: Option<Format>,
        /// Output format: npy, npz, safetensors, pvp, som, som-data, primitiv, caffe,
        /// caffemodel, binaryproto (default: from the output extension).
        #[arg(long, value_name = "FORMAT")]
        to: Option<Target>,
        /// Convert only this tensor (for .npy output: which one; default the first).
        #[arg(long, value_name = "NAME")]
        tensor: Option<String>,
        /// Overwrite the output if it exists.
        #[arg(long)]
        force: bool,
        /// Export sparse data as CSR arrays instead of dense.
        #[arg(long)]
        sparse: bool,
        /// Only frames / entries A..B (`A:B`, `A:` or `:B`).
        #[arg(long, value_name = "A:B", value_parser = parse_frames)]
        frames: Option<(usize, Option<usize>)>,
        /// Hexagonal layout (SOM output).
        #[arg(long)]
        hex: bool,
        /// Element type to store (f16, bf16, f32, f64, i8 ... u64, bool).
        #[arg(long, value_name = "DTYPE")]
        dtype: Option<DType>,
        /// A format-specific setting, `key=value` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
        settings: Vec<(String, String)>,
    },
    /// Check files fully; prints `FILE: ok` or `FILE: error: ...` per file.
    Validate {
        /// The files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Draw a file (SOM grid, mapping heat map, frame) as a PNG image.
    Render {
        /// The file.
        file: PathBuf,
        /// The PNG to write.
        output: PathBuf,
        /// For mapping files: a heat map of best-match counts per neuron.
        #[arg(long)]
        counts: bool,
        /// For frame files: which frame.
        #[arg(long, value_name = "K")]
        frame: Option<usize>,
        /// For models: which layer.
        #[arg(long, value_name = "NAME")]
        layer: Option<String>,
    },
}

fn parse_frames(s: &str) -> Result<(usize, Option<usize>), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("expected A:B, A: or :B, got {s:?}"))?;
    let num = |x: &str| {
        x.parse::<usize>()
            .map_err(|_| format!("{x:?} is not a frame number"))
    };
    let start = if a.is_empty() { 0 } else { num(a)? };
    let end = if b.is_empty() { None } else { Some(num(b)?) };
    if end.is_some_and(|e| e < start) {
        return Err(format!("the range {s} ends before it starts"));
    }
    Ok((start, end))
}

fn parse_setting(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

/// Why a command failed, which decides the exit code.
#[derive(Debug)]
pub enum Failure {
    /// Invalid or unreadable input (exit 1).
    Input(String),
    /// The command line asks for something impossible (exit 2).
    Usage(String),
    /// Already reported (e.g. validate's per-file lines); exit 1.
    Reported,
}

impl From<tensorfmt::Error> for Failure {
    fn from(e: tensorfmt::Error) -> Failure {
        Failure::Input(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect { file, json, stats } => commands::inspect(&file, json, stats),
        Command::Convert {
            input,
            output,
            from,
            to,
            tensor,
            force,
            sparse,
            frames,
            hex,
            dtype,
            settings,
        } => commands::convert(commands::ConvertArgs {
            input,
            output,
            from,
            to,
            tensor,
            force,
            sparse,
            frames,
            hex,
            dtype,
            settings,
        }),
        Command::Validate { files } => commands::validate(&files),
        Command::Render {
            file,
            output,
            counts,
            frame,
            layer,
        } => commands::render(&file, &output, counts, frame, layer),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Reported) => ExitCode::from(1),
        Err(Failure::Input(msg)) => {
            eprintln!("tensorfmt: error: {msg}");
            ExitCode::from(1)
        }
        Err(Failure::Usage(msg)) => {
            eprintln!("tensorfmt: error: {msg}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_ranges() {
        assert_eq!(parse_frames("2:5"), Ok((2, Some(5))));
        assert_eq!(parse_frames("3:"), Ok((3, None)));
        assert_eq!(parse_frames(":4"), Ok((0, Some(4))));
        assert!(parse_frames("5:2").is_err());
        assert!(parse_frames("7").is_err());
        assert!(parse_frames("a:b").is_err());
    }

    #[test]
    fn settings() {
        assert_eq!(parse_setting("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_setting("=x").is_err());
        assert!(parse_setting("novalue").is_err());
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
