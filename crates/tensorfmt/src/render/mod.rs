//! Pictures of tensors: SOM grids, weight tableaus, activity frames (PNG).
//!
//! PLACEHOLDER signatures; the SOM work fills this module in.

use std::path::Path;

use crate::{Error, Result};

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
pub fn render_path(path: &Path, _options: &RenderOptions) -> Result<Image> {
    Err(Error::Invalid(format!("cannot render {} yet", path.display())))
}

/// Writes an image as PNG (atomically).
pub fn write_png(_image: &Image, path: &Path) -> Result<()> {
    Err(Error::Invalid(format!("cannot write {} yet", path.display())))
}
