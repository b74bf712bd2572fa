//! Pictures of PVP files (spec `pvp.md` §4-§6).
//!
//! - **Weights** (shared kernels, filetype 5, and non-shared patches, filetype 3): a
//!   dictionary tableau of weight frame `frame` (default 0), one cell per patch in file
//!   order (kernel or pre-synaptic neuron index: feature fastest, then x, then y),
//!   `nxp` wide and `nyp` high. `nfp = 3`: the patch's features are its red, green and
//!   blue (scaled jointly to the patch's min..max). Otherwise each patch is a row of
//!   `nfp` feature tiles, each scaled to its own min..max, in viridis (1x1 patches:
//!   jointly over the whole frame, or they would all look alike). Cells are laid
//!   out near-square ([`super::tableau`]). **Arbors:** every arbor is drawn as its own
//!   panel, panels side by side from arbor 0 on the left; `layer` set to `N` (or
//!   `arbor N`) draws arbor `N` alone.
//! - **Activity** (dense filetype 4 and legacy filetype 1; sparse filetypes 2 and 6 are
//!   densified, absent neurons 0): frame `frame` (default 0) as an `nx x ny` image:
//!   `nf = 3` as RGB (jointly scaled), `nf = 1` in viridis, other `nf` as a near-square
//!   grid of feature maps, each scaled to its own min..max.
//!
//! Random-number state files (16-byte records) have no picture. Pictures are enlarged
//! by [`super::tableau::tableau_scale`].

use bytes::Bytes;
use tensorfmt_core::DType;
use tensorfmt_pvp::{DenseElement, DenseReader, PvpFile, SparseReader, WeightReader};

use super::colormap::Colormap;
use super::image::Image;
use super::legend::{count, Legend, Picture, Stats};
use super::options::RenderOptions;
use super::tableau::{colour_scale, enlarge, tableau, tableau_size, Block, PANEL_GAP};
use crate::{Error, Result};

/// Renders a whole PVP file held in `data` (see the module docs), with the frame index
/// and time for its legend.
pub fn render_pvp(data: Bytes, options: &RenderOptions) -> Result<Picture> {
    if options.counts {
        return Err(Error::Invalid(
            "counts applies to SOM mapping files, not to PVP files".into(),
        ));
    }
    let frame = options.frame.unwrap_or(0);
    match PvpFile::from_bytes(data)? {
        PvpFile::Weights(r) => {
            let arbor = options.layer.as_deref().map(parse_arbor).transpose()?;
            weights_picture(&r, frame, arbor)
        }
        other => {
            if let Some(l) = &options.layer {
                return Err(Error::Invalid(format!(
                    "layer {l:?}: PVP activity files have no layers (layer selects \
                     a Caffe layer or a PVP weight arbor)"
                )));
            }
            match other {
                PvpFile::Dense(r) => dense_picture(&r, frame),
                PvpFile::Sparse(r) => sparse_picture(&r, frame),
                PvpFile::Weights(_) => unreachable!("handled above"),
            }
        }
    }
}

/// Parses an arbor selection: `3`, `arbor 3` or `arbor3`.
///
/// ```
/// use tensorfmt::render::pvp::parse_arbor;
/// assert_eq!(parse_arbor("2")?, 2);
/// assert_eq!(parse_arbor("arbor 1")?, 1);
/// assert!(parse_arbor("conv1").is_err());
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub fn parse_arbor(s: &str) -> Result<usize> {
    let t = s.trim();
    let t = t.strip_prefix("arbor").unwrap_or(t).trim();
    t.parse().map_err(|_| {
        Error::Invalid(format!(
            "layer {s:?}: for a PVP weight file, layer selects an arbor by number (e.g. 0)"
        ))
    })
}

fn frame_out_of_range(k: usize, count: usize, what: &str) -> Error {
    Error::Invalid(format!(
        "frame {k} is out of range: the {what} file has {count} frame{}{}",
        if count == 1 { "" } else { "s" },
        match count {
            0 => String::new(),
            n => format!(" (0 to {})", n - 1),
        }
    ))
}

/// The dictionary tableau of weight frame `frame`: all arbors side by side, or `arbor`
/// alone.
pub fn weights_picture(r: &WeightReader, frame: usize, arbor: Option<usize>) -> Result<Picture> {
    if frame >= r.len() {
        return Err(frame_out_of_range(frame, r.len(), "weight"));
    }
    let l = *r.layout();
    let arbors: Vec<usize> = match arbor {
        Some(a) if a < l.arbors => vec![a],
        Some(a) => {
            return Err(Error::Invalid(format!(
                "arbor {a} is out of range: the weight file has {} arbor{} (0 to {})",
                l.arbors,
                if l.arbors == 1 { "" } else { "s" },
                l.arbors.saturating_sub(1)
            )))
        }
        None => (0..l.arbors).collect(),
    };
    let f = r.frame(frame)?;
    let values = f.weights.cast(DType::F32)?.to_vec::<f32>()?;
    let per = l.patch_values();
    let mut panels = Vec::with_capacity(arbors.len());
    let mut stats = Vec::with_capacity(arbors.len());
    for &a in &arbors {
        let blocks = (0..l.numpatches)
            .map(|p| Block::hwc(&values, (a * l.numpatches + p) * per, l.nyp, l.nxp, l.nfp))
            .collect::<Result<Vec<_>>>()?;
        panels.push(tableau(&blocks, Colormap::Viridis)?);
        let start = a * l.numpatches * per;
        let arbor_values = values
            .get(start..start + l.numpatches * per)
            .ok_or_else(|| Error::Invalid("weight frame shorter than its patches".into()))?;
        stats.push(Stats::of(arbor_values));
    }
    let image = enlarge(Image::side_by_side(&panels, PANEL_GAP)?, l.nxp.min(l.nyp))?;
    // Panels of 1x1 patches are each scaled jointly over their own arbor: one shared
    // bar only fits when there is one panel.
    let unit = if l.nfp == 1 { "patch" } else { "feature tile" };
    let mut scale = colour_scale(
        l.numpatches,
        l.nyp,
        l.nxp,
        l.nfp,
        Colormap::Viridis,
        unit,
        "RGB, each patch on its own scale",
    );
    if arbors.len() > 1 && matches!(scale, super::legend::Scale::Shared(_)) {
        scale = super::legend::Scale::PerTile(Colormap::Viridis, "arbor");
    }
    let which = match (arbor, l.arbors) {
        (Some(a), _) => format!(", arbor {a}"),
        (None, 1) => String::new(),
        (None, n) => format!(", {n} arbors left to right"),
    };
    Ok(Picture {
        image,
        legend: Legend {
            what: format!(
                "weights, {} {}x{}x{}{which}",
                count(l.numpatches, "patch", "patches"),
                l.nxp,
                l.nyp,
                l.nfp
            ),
            frame: Some(frame),
            time: Some(f.time()),
            stats: merge(&stats),
            scale,
        },
    })
}

/// The stats of several parts together.
fn merge(parts: &[Stats]) -> Stats {
    parts.iter().fold(Stats::default(), |a, b| Stats {
        range: match (a.range, b.range) {
            (Some(x), Some(y)) => Some((x.0.min(y.0), x.1.max(y.1))),
            (x, y) => x.or(y),
        },
        nan: a.nan + b.nan,
        pos_inf: a.pos_inf + b.pos_inf,
        neg_inf: a.neg_inf + b.neg_inf,
    })
}

/// An `ny x nx x nf` activity frame (HWC values): RGB for `nf = 3`, viridis for
/// `nf = 1`, a grid of per-feature maps otherwise. The legend has no frame or time
/// (the caller knows them).
pub fn activity_picture(values: &[f32], ny: usize, nx: usize, nf: usize) -> Result<Picture> {
    activity_size(ny, nx, nf)?;
    let whole = Block::hwc(values, 0, ny, nx, nf)?;
    let blocks = if nf == 1 || nf == 3 {
        vec![whole]
    } else {
        (0..nf)
            .map(|f| whole.channel(f))
            .collect::<Result<Vec<_>>>()?
    };
    let image = enlarge(tableau(&blocks, Colormap::Viridis)?, nx.min(ny))?;
    let scale = colour_scale(
        blocks.len(),
        ny,
        nx,
        blocks[0].channels(),
        Colormap::Viridis,
        "feature map",
        "RGB, one scale",
    );
    Ok(Picture {
        image,
        legend: Legend {
            what: format!("activity {nx}x{ny}x{nf}"),
            frame: None,
            time: None,
            stats: Stats::of(values.get(..ny * nx * nf).unwrap_or(values)),
            scale,
        },
    })
}

/// The size of [`activity_picture`]'s picture of an `ny x nx x nf` frame, checked
/// before the frame is read (a sparse frame is densified to draw it: a tiny file can
/// declare a layer of 15000 x 15000).
fn activity_size(ny: usize, nx: usize, nf: usize) -> Result<(usize, usize)> {
    let (n, c) = if nf == 1 || nf == 3 { (1, nf) } else { (nf, 1) };
    tableau_size(n, ny, nx, c, nx.min(ny))
}

fn dense_picture(r: &DenseReader, k: usize) -> Result<Picture> {
    if r.layout().element != DenseElement::F32 {
        return Err(Error::Invalid(
            "this PVP file holds random-number generator states (16-byte records), \
             which have no picture"
                .into(),
        ));
    }
    if k >= r.len() {
        return Err(frame_out_of_range(k, r.len(), "activity"));
    }
    let [ny, nx, nf] = r.layout().frame_dims();
    activity_size(ny, nx, nf)?;
    let mut pic = activity_picture(&r.frame_f32(k)?, ny, nx, nf)?;
    pic.legend.frame = Some(k);
    pic.legend.time = Some(r.time(k)?);
    Ok(pic)
}

fn sparse_picture(r: &SparseReader, k: usize) -> Result<Picture> {
    let n = r.len()?;
    if k >= n {
        return Err(frame_out_of_range(k, n, "sparse activity"));
    }
    let l = r.layout();
    let (ny, nx, nf) = (l.ny, l.nx, l.nf);
    activity_size(ny, nx, nf)?;
    let values = r.frame_dense(k)?.cast(DType::F32)?.to_vec::<f32>()?;
    let mut pic = activity_picture(&values, ny, nx, nf)?;
    pic.legend.what = format!("sparse {}", pic.legend.what);
    pic.legend.frame = Some(k);
    pic.legend.time = Some(r.time(k)?);
    Ok(pic)
}
