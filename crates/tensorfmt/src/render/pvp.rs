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
use super::tableau::{enlarge, tableau, Block, PANEL_GAP};
use super::{Image, RenderOptions};
use crate::{Error, Result};

/// Renders a whole PVP file held in `data` (see the module docs).
pub fn render_pvp(data: Bytes, options: &RenderOptions) -> Result<Image> {
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
        "frame {k} is out of range: the {what} file has {count} frame{} (0..{count})",
        if count == 1 { "" } else { "s" }
    ))
}

/// The dictionary tableau of weight frame `frame`: all arbors side by side, or `arbor`
/// alone.
pub fn weights_picture(r: &WeightReader, frame: usize, arbor: Option<usize>) -> Result<Image> {
    if frame >= r.len() {
        return Err(frame_out_of_range(frame, r.len(), "weight"));
    }
    let l = *r.layout();
    let arbors: Vec<usize> = match arbor {
        Some(a) if a < l.arbors => vec![a],
        Some(a) => {
            return Err(Error::Invalid(format!(
                "arbor {a} is out of range: the weight file has {} arbor{} (0..{})",
                l.arbors,
                if l.arbors == 1 { "" } else { "s" },
                l.arbors
            )))
        }
        None => (0..l.arbors).collect(),
    };
    let f = r.frame(frame)?;
    let values = f.weights.cast(DType::F32)?.to_vec::<f32>()?;
    let per = l.patch_values();
    let mut panels = Vec::with_capacity(arbors.len());
    for a in arbors {
        let blocks = (0..l.numpatches)
            .map(|p| Block::hwc(&values, (a * l.numpatches + p) * per, l.nyp, l.nxp, l.nfp))
            .collect::<Result<Vec<_>>>()?;
        panels.push(tableau(&blocks, Colormap::Viridis)?);
    }
    enlarge(Image::side_by_side(&panels, PANEL_GAP)?, l.nxp.min(l.nyp))
}

/// An `ny x nx x nf` activity frame (HWC values): RGB for `nf = 3`, viridis for
/// `nf = 1`, a grid of per-feature maps otherwise.
pub fn activity_picture(values: &[f32], ny: usize, nx: usize, nf: usize) -> Result<Image> {
    let whole = Block::hwc(values, 0, ny, nx, nf)?;
    let blocks = if nf == 1 || nf == 3 {
        vec![whole]
    } else {
        (0..nf)
            .map(|f| whole.channel(f))
            .collect::<Result<Vec<_>>>()?
    };
    enlarge(tableau(&blocks, Colormap::Viridis)?, nx.min(ny))
}

fn dense_picture(r: &DenseReader, k: usize) -> Result<Image> {
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
    activity_picture(&r.frame_f32(k)?, ny, nx, nf)
}

fn sparse_picture(r: &SparseReader, k: usize) -> Result<Image> {
    let n = r.len()?;
    if k >= n {
        return Err(frame_out_of_range(k, n, "sparse activity"));
    }
    let l = r.layout();
    let (ny, nx, nf) = (l.ny, l.nx, l.nf);
    let values = r.frame_dense(k)?.cast(DType::F32)?.to_vec::<f32>()?;
    activity_picture(&values, ny, nx, nf)
}
