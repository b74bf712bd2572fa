//! Pictures of tensors as PNG: SOM montages and heat maps (PINK files, [`som`]), PVP
//! weight tableaus and activity frames ([`pvp`]), Caffe conv filters and mean images
//! ([`caffe`]), built from shared pieces: [`colormap`] (viridis and grayscale lookup
//! tables), [`canvas`] (tiles, hexagon masks, panels, enlargement), [`tableau`]
//! (near-square grids of per-tile-scaled, multi-channel cells), [`legend`] (the title
//! band and colour bar drawn around every picture, in the bitmap [`font`]) and PNG
//! output through an atomic file.
//!
//! ```no_run
//! use tensorfmt::render::{render_path, write_png, RenderOptions};
//! let img = render_path("som.bin".as_ref(), &RenderOptions::default())?;
//! write_png(&img, "som.png".as_ref())?;
//! # Ok::<(), tensorfmt::Error>(())
//! ```

use std::path::Path;

use crate::{Error, Result};

#[cfg(feature = "caffe")]
pub mod caffe;
pub mod canvas;
pub mod colormap;
pub mod font;
mod image;
pub mod legend;
mod options;
mod png_out;
#[cfg(feature = "pvp")]
pub mod pvp;
#[cfg(feature = "som")]
pub mod som;
pub mod tableau;
#[cfg(all(test, feature = "som"))]
mod tests;
#[cfg(all(test, feature = "caffe"))]
mod tests_caffe;
#[cfg(all(test, feature = "som", feature = "pvp", feature = "caffe"))]
mod tests_legend;
#[cfg(all(test, feature = "pvp"))]
mod tests_pvp;

pub use image::Image;
pub use legend::Picture;
pub use options::RenderOptions;
pub use png_out::encode_png;

/// Renders a file to an image with its legend: [`render_picture`], then
/// [`legend::annotate`] draws a title band on top (file name, tensor, frame and PVP
/// time, value range) and, for colour-mapped pictures, a colour bar with values on
/// the right.
pub fn render_path(path: &Path, options: &RenderOptions) -> Result<Image> {
    let picture = render_picture(path, options)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string_lossy().into_owned());
    legend::annotate(&picture, &name)
}

/// Renders a file to a bare picture and the facts of its legend; the format is
/// detected as [`crate::detect`] does (content first, extension second).
///
/// - PINK files: a SOM as a grid of neuron images (each neuron scaled to its own
///   min-max, 2-pixel gaps, viridis, one panel per channel; square grid for cartesian
///   maps, offset rows of hexagons for hexagonal ones); a mapping as a heat map of
///   best-match counts per neuron (or of entry `frame`'s distances when `frame` is
///   given without `counts`); a data file's entry `frame` (default 0).
/// - PVP weights: a dictionary tableau of weight frame `frame` (default 0), one tile per
///   patch, RGB when `nfp = 3`, one panel per arbor (`layer = "N"` picks arbor N).
///   PVP activity (dense or sparse): frame `frame` (default 0) as an image. See [`pvp`].
/// - Caffe models: the filters of conv layer `layer` (required; the error lists the
///   candidates); mean files: the mean image. See [`caffe`].
///
/// Small pictures are enlarged by an integer factor up to 8 ([`canvas::auto_scale`];
/// PVP and Caffe tableaus also enlarge tiny tiles, [`tableau::tableau_scale`]).
/// Other files, and options that do not apply (`counts` outside SOM mappings, `frame`
/// on Caffe files, `layer` on activity files), are errors.
pub fn render_picture(path: &Path, options: &RenderOptions) -> Result<Picture> {
    let data = tensorfmt_core::io::map_file(path)?;
    let head = &data[..data.len().min(crate::format::SNIFF_LEN)];
    let format = crate::format::detect_bytes(head, data.len() as u64, Some(path));
    match format {
        #[cfg(feature = "som")]
        Some(crate::Format::Som) => {
            let file = tensorfmt_som::SomFile::from_bytes(data)?;
            som::render_som_file(&file, options)
        }
        #[cfg(feature = "pvp")]
        Some(crate::Format::Pvp) => pvp::render_pvp(data, options),
        #[cfg(feature = "caffe")]
        Some(crate::Format::Caffe) => caffe::render_caffe(data, options),
        Some(f) => Err(Error::Invalid(format!(
            "cannot render {}: {f} files have no picture (pictures exist for PINK SOM, \
             PVP and Caffe files)",
            path.display()
        ))),
        None => Err(Error::Invalid(format!(
            "cannot render {}: unrecognised file format",
            path.display()
        ))),
    }
}

/// Writes an image as PNG (atomically).
pub fn write_png(image: &Image, path: &Path) -> Result<()> {
    png_out::write_png_file(image, path)
}
