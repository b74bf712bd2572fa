//! Pictures of tensors as PNG: SOM montages and heat maps (PINK files), built from
//! shared pieces that later renders (PVP weight tableaus, Caffe filters) reuse:
//! [`colormap`] (viridis and grayscale lookup tables), [`canvas`] (tiles, hexagon
//! masks, panels, enlargement) and PNG output through an atomic file.
//!
//! ```no_run
//! use tensorfmt::render::{render_path, write_png, RenderOptions};
//! let img = render_path("som.bin".as_ref(), &RenderOptions::default())?;
//! write_png(&img, "som.png".as_ref())?;
//! # Ok::<(), tensorfmt::Error>(())
//! ```

use std::path::Path;

use crate::{Error, Result};

pub mod canvas;
pub mod colormap;
mod png_out;
#[cfg(feature = "som")]
pub mod som;
#[cfg(all(test, feature = "som"))]
mod tests;

pub use png_out::encode_png;

/// What to render from a file.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// For mapping files: a heat map of best-match counts per neuron.
    pub counts: bool,
    /// For frame files: which frame.
    pub frame: Option<usize>,
    /// For models: which layer.
    pub layer: Option<String>,
}

/// An 8-bit RGB image.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Row-major RGB bytes, `3 * width * height` long.
    pub rgb: Vec<u8>,
}

/// Renders a file to an image.
///
/// PINK files: a SOM as a grid of neuron images (each neuron scaled to its own
/// min-max, 2-pixel gaps, viridis, one panel per channel; square grid for cartesian
/// maps, offset rows of hexagons for hexagonal ones); a mapping as a heat map of
/// best-match counts per neuron (or of entry `frame`'s distances when `frame` is given
/// without `counts`); a data file's entry `frame` (default 0). Small pictures are
/// enlarged by an integer factor up to 8 ([`canvas::auto_scale`]).
pub fn render_path(path: &Path, options: &RenderOptions) -> Result<Image> {
    let data = tensorfmt_core::io::map_file(path)?;
    #[cfg(feature = "som")]
    {
        let head = &data[..data.len().min(4096)];
        if tensorfmt_som::sniff(head, data.len() as u64) {
            let file = tensorfmt_som::SomFile::from_bytes(data)?;
            return som::render_som_file(&file, options);
        }
    }
    let _ = (data, options);
    Err(Error::Invalid(format!(
        "cannot render {}: no picture for this kind of file",
        path.display()
    )))
}

/// Writes an image as PNG (atomically).
pub fn write_png(image: &Image, path: &Path) -> Result<()> {
    png_out::write_png_file(image, path)
}
