//! `tensorfmt som-map DATA SOM OUT.map [--rot-flip OUT]`: PINK 2.5's mapping step
//! (`Pink --cuda-off --map`), with PINK's option names and defaults, writing PINK's
//! mapping and rotation/flip files (`tensorfmt::som::mapping::map_files`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use tensorfmt::som::mapping::{map_files, DistanceShape, MapOptions};
use tensorfmt::som::transform::Interpolation;
use tensorfmt::som::{ids, FileKind, ReadConfig, SomFile};

use crate::commands::{check_output, regular_file};
use crate::failure::Failure;
use crate::output::{emit, emit_json};
use crate::text;

/// The options of `som-map`, named after PINK's.
#[derive(Debug, Clone, Args)]
pub struct SomMapArgs {
    /// The data file (PINK type 0): `[entries, d, d]` or `[entries, channels, d, d]`.
    pub data: PathBuf,
    /// The SOM file (PINK type 1); its layout (cartesian or hexagonal) and neuron size
    /// are read from it (PINK takes them from its command line instead).
    pub som: PathBuf,
    /// The mapping file to write (PINK type 2: each entry's distance to each neuron).
    pub output: PathBuf,
    /// Also write the best rotation and flip of each entry for each neuron (PINK type 3).
    #[arg(long, visible_alias = "store-rot-flip", value_name = "OUT")]
    pub rot_flip: Option<PathBuf>,
    /// Number of rotations: 1 or a multiple of 4.
    #[arg(long, short = 'n', visible_alias = "num-rot", default_value_t = 360)]
    pub numrot: u32,
    /// Do not try mirrored images.
    #[arg(long)]
    pub flip_off: bool,
    /// Neuron side; must equal the SOM's (default: the SOM's).
    #[arg(long, short = 'd', value_name = "N")]
    pub neuron_dimension: Option<usize>,
    /// Side of the distance region (default: image side x sqrt(2)/2 when rotating with
    /// a quadratic region, else the image side).
    #[arg(long, short = 'e', value_name = "N")]
    pub euclidean_distance_dimension: Option<usize>,
    /// Shape of the distance region: quadratic or circular.
    #[arg(long, value_name = "SHAPE", default_value = "quadratic")]
    pub euclidean_distance_shape: String,
    /// Rotation interpolation: bilinear, or nearest_neighbor (only with 1 or 4
    /// rotations, as on PINK's CPU path).
    #[arg(long, value_name = "KIND", default_value = "bilinear")]
    pub interpolation: String,
    /// Worker threads (default: one per core).
    #[arg(long, short = 't', value_name = "N")]
    pub numthreads: Option<usize>,
    /// Catalogue ids, one per line and entry, written into both outputs' comment
    /// blocks (default: the data file's `# id` lines, if any).
    #[arg(long, value_name = "FILE", conflicts_with = "no_ids")]
    pub ids: Option<PathBuf>,
    /// Do not carry the data file's ids into the outputs (byte for byte PINK's files).
    #[arg(long)]
    pub no_ids: bool,
    /// Overwrite existing outputs.
    #[arg(long)]
    pub force: bool,
    /// Print nothing on success.
    #[arg(long, short, conflicts_with = "json")]
    pub quiet: bool,
    /// Print one JSON object describing what was written.
    #[arg(long)]
    pub json: bool,
}

fn usage(e: tensorfmt::som::SomError) -> Failure {
    match e {
        tensorfmt::som::SomError::MapOption { .. } => Failure::Usage(e.to_string()),
        other => Failure::Input(tensorfmt::Error::from(other).to_string()),
    }
}

fn read_ids(path: &Path) -> Result<Vec<String>, Failure> {
    regular_file(path)?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Input(format!("{}: {e}", path.display())))?;
    Ok(text
        .lines()
        .map(|l| l.trim_end_matches('\r').to_string())
        .collect())
}

/// Runs `som-map`.
pub fn som_map(a: &SomMapArgs) -> Result<(), Failure> {
    for input in [&a.data, &a.som] {
        check_output(input, &a.output, a.force)?;
        if let Some(r) = &a.rot_flip {
            check_output(input, r, a.force)?;
        }
    }
    if a.rot_flip.as_deref() == Some(a.output.as_path()) {
        return Err(Failure::Usage(
            "the mapping and the rotation/flip file must be two files".into(),
        ));
    }
    let options = MapOptions {
        num_rot: a.numrot,
        flip: !a.flip_off,
        neuron_dim: a.neuron_dimension,
        euclidean_distance_dim: a.euclidean_distance_dimension,
        euclidean_distance_shape: a
            .euclidean_distance_shape
            .parse::<DistanceShape>()
            .map_err(usage)?,
        interpolation: a.interpolation.parse::<Interpolation>().map_err(usage)?,
        threads: a.numthreads.filter(|&t| t > 0),
    };
    regular_file(&a.data)?;
    regular_file(&a.som)?;
    // Each argument's role names its kind, which settles a legacy file that fits
    // several readings (a v1 data file is also a v1 mapping's size).
    let open = |p: &Path, kind: FileKind| {
        let config = ReadConfig {
            legacy_kind: Some(kind),
            ..ReadConfig::default()
        };
        SomFile::open_with(p, &config).map_err(|e| Failure::in_file(p, tensorfmt::Error::from(e)))
    };
    let data = open(&a.data, FileKind::Data)?;
    let som = open(&a.som, FileKind::Som)?;
    let id_list = match (&a.ids, a.no_ids) {
        (Some(p), _) => Some(read_ids(p)?),
        (None, true) => None,
        (None, false) => ids::entry_ids(&data).map_err(usage)?,
    };
    let entries = data.n_entries().unwrap_or(0);
    let bar = entries_bar(entries, a.quiet || a.json);
    let hook = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
        Ok(())
    };
    let summary = map_files(
        &data,
        Some(&a.data),
        &som,
        &options,
        &a.output,
        a.rot_flip.as_deref(),
        id_list.as_deref(),
        &hook,
    )
    .map_err(usage)?;
    bar.finish_and_clear();
    let g = &summary.geometry;
    let layout = if summary.map.is_hexagonal() {
        "hexagonal"
    } else {
        "cartesian"
    };
    let dims: Vec<String> = summary.map.dims().iter().map(|d| d.to_string()).collect();
    if a.json {
        emit_json(&json!({
            "data": a.data.display().to_string(),
            "som": a.som.display().to_string(),
            "output": a.output.display().to_string(),
            "rot_flip": a.rot_flip.as_ref().map(|p| p.display().to_string()),
            "entries": summary.entries,
            "neurons": summary.neurons,
            "layout": layout,
            "som_dims": summary.map.dims(),
            "channels": g.channels,
            "image_dim": g.image_dim,
            "neuron_dim": g.neuron_dim,
            "num_rot": g.num_rot,
            "flip": g.flip,
            "euclidean_distance_dim": g.euclidean_distance_dim,
            "euclidean_distance_shape": g.shape.name(),
            "interpolation": g.interpolation.name(),
            "ids": summary.ids,
        }));
    } else if !a.quiet {
        let rf = a
            .rot_flip
            .as_ref()
            .map(|p| format!(" and {}", text::path(p)))
            .unwrap_or_default();
        emit(&format!(
            "{}{rf}: mapped {} entries onto a {layout} {} SOM ({} neurons {}x{}), {} rotations{}, {} distance {}\n",
            text::path(&a.output),
            summary.entries,
            dims.join("x"),
            summary.neurons,
            g.neuron_dim,
            g.neuron_dim,
            g.num_rot,
            if g.flip { " and flips" } else { "" },
            g.shape.name(),
            g.euclidean_distance_dim,
        ));
    }
    Ok(())
}

/// A bar over entries, drawn only on a terminal for more than a handful of entries.
fn entries_bar(total: u64, quiet: bool) -> ProgressBar {
    if quiet || total < 64 || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("mapping [{bar:40}] {pos}/{len} entries ({eta})")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}
