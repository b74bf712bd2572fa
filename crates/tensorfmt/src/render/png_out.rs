//! PNG output: 8-bit RGB through [`AtomicFile`], so a failed write leaves no file.

use std::path::Path;

use tensorfmt_core::io::AtomicFile;

use super::image::Image;
use crate::{Error, Result};

/// Encodes an image as an 8-bit RGB PNG into `w`.
pub fn encode_png<W: std::io::Write>(image: &Image, w: W) -> Result<()> {
    let expected = 3 * image.width as usize * image.height as usize;
    if image.rgb.len() != expected || image.width == 0 || image.height == 0 {
        return Err(Error::Invalid(format!(
            "image of {}x{} needs {expected} RGB bytes and a non-zero size, has {}",
            image.width,
            image.height,
            image.rgb.len()
        )));
    }
    let mut enc = png::Encoder::new(w, image.width, image.height);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().map_err(|e| Error::format("png", e))?;
    writer
        .write_image_data(&image.rgb)
        .map_err(|e| Error::format("png", e))?;
    writer.finish().map_err(|e| Error::format("png", e))?;
    Ok(())
}

/// Writes `image` to `path` as PNG, atomically.
pub fn write_png_file(image: &Image, path: &Path) -> Result<()> {
    let mut f = AtomicFile::create(path)?;
    encode_png(image, &mut f)?;
    f.commit()
}
