//! A pixel canvas and the pieces every picture is made of: scalar tiles drawn with a
//! colour map (each scaled to its own min-max, optionally masked to a pointy-top
//! hexagon), flat cells, side-by-side panels and integer enlargement. Shared by the
//! SOM pictures and, later, PVP weight tableaus and Caffe filters.

use super::colormap::{Colormap, BACKGROUND};
use super::image::Image;
use crate::{Error, Result};

/// Shape of a drawn cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellShape {
    /// The whole rectangle.
    Square,
    /// A pointy-top hexagon inscribed in the rectangle (corners left as background).
    Hexagon,
}

/// A row-major block of scalar values.
#[derive(Debug, Clone, Copy)]
pub struct Tile<'a> {
    /// Width in values.
    pub width: usize,
    /// Height in values.
    pub height: usize,
    /// `width * height` values, row-major.
    pub values: &'a [f32],
}

/// Min and max of the finite values (`None` when there are none): NaN and infinite
/// values do not stretch the colour scale.
///
/// ```
/// use tensorfmt::render::canvas::min_max;
/// assert_eq!(min_max(&[2.0, f32::NAN, -1.0, f32::INFINITY]), Some((-1.0, 2.0)));
/// assert_eq!(min_max(&[f32::NAN, f32::NEG_INFINITY]), None);
/// ```
pub fn min_max(values: &[f32]) -> Option<(f32, f32)> {
    values
        .iter()
        .filter(|v| v.is_finite())
        .fold(None, |acc, &v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

/// Position of `v` in `[lo, hi]`, `0` at `lo` and `1` at `hi` (computed in `f64`, so
/// a range as wide as `f32` allows does not overflow). Values outside the range,
/// infinities included, fall outside `[0, 1]` (colour maps clamp them to the ends).
/// When the range is empty every value at or below `hi` is 0 and above it 1; NaN
/// stays NaN.
///
/// ```
/// use tensorfmt::render::canvas::normalize;
/// assert_eq!(normalize(0.0, (-f32::MAX, f32::MAX)), 0.5);
/// assert_eq!(normalize(f32::INFINITY, (0.0, 1.0)), f32::INFINITY);
/// assert_eq!(normalize(3.0, (3.0, 3.0)), 0.0);
/// ```
pub fn normalize(v: f32, (lo, hi): (f32, f32)) -> f32 {
    if v.is_nan() {
        f32::NAN
    } else if hi > lo {
        ((v as f64 - lo as f64) / (hi as f64 - lo as f64)) as f32
    } else if v > hi {
        1.0
    } else {
        0.0
    }
}

/// True when pixel `(x, y)` of a `w x h` cell lies inside the inscribed pointy-top hexagon.
pub fn in_hexagon(x: usize, y: usize, w: usize, h: usize) -> bool {
    let u = ((x as f64 + 0.5) - w as f64 / 2.0).abs() / (w as f64 / 2.0);
    let v = ((y as f64 + 0.5) - h as f64 / 2.0).abs() / (h as f64 / 2.0);
    u <= 1.0 && v <= 1.0 - u / 2.0
}

impl Image {
    /// A `width x height` image filled with `color`. Fails when the size overflows or
    /// exceeds [`Image::MAX_PIXELS`].
    pub fn filled(width: usize, height: usize, color: [u8; 3]) -> Result<Image> {
        let px = Image::check_size(width, height)?;
        Ok(Image {
            width: width as u32,
            height: height as u32,
            rgb: color.iter().copied().cycle().take(px * 3).collect(),
        })
    }

    /// The largest picture drawn: 2^26 pixels (8192 x 8192, 192 MiB of RGB), more than
    /// any screen shows; it bounds what drawing costs, since a sparse frame or a SOM
    /// can declare a huge picture in a few bytes.
    pub const MAX_PIXELS: usize = 1 << 26;

    /// The pixel count of a `width` x `height` picture, or an error when it is over
    /// [`Image::MAX_PIXELS`]. Renderers call it with the size the header
    /// implies before reading any data, so a huge file is refused at once.
    pub fn check_size(width: usize, height: usize) -> Result<usize> {
        width
            .checked_mul(height)
            .filter(|&p| p <= Image::MAX_PIXELS)
            .ok_or_else(|| {
                Error::Invalid(format!("picture of {width}x{height} pixels is too large"))
            })
    }

    /// The colour at `(x, y)`, `None` outside.
    pub fn pixel(&self, x: u32, y: u32) -> Option<[u8; 3]> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = 3 * (y as usize * self.width as usize + x as usize);
        Some([self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]])
    }

    /// Sets `(x, y)`; pixels outside are ignored.
    pub fn set_pixel(&mut self, x: usize, y: usize, c: [u8; 3]) {
        if x < self.width as usize && y < self.height as usize {
            let i = 3 * (y * self.width as usize + x);
            self.rgb[i..i + 3].copy_from_slice(&c);
        }
    }

    /// Draws a tile with its top-left corner at `(x0, y0)`, each value mapped through
    /// `range` (use [`min_max`] of the tile for per-tile scaling).
    pub fn draw_tile(
        &mut self,
        x0: usize,
        y0: usize,
        tile: Tile<'_>,
        range: (f32, f32),
        cmap: Colormap,
        shape: CellShape,
    ) {
        for y in 0..tile.height {
            for x in 0..tile.width {
                if shape == CellShape::Hexagon && !in_hexagon(x, y, tile.width, tile.height) {
                    continue;
                }
                let v = tile.values[y * tile.width + x];
                self.set_pixel(x0 + x, y0 + y, cmap.color(normalize(v, range)));
            }
        }
    }

    /// Fills a `w x h` cell at `(x0, y0)` with one colour.
    pub fn fill_cell(
        &mut self,
        x0: usize,
        y0: usize,
        w: usize,
        h: usize,
        c: [u8; 3],
        shape: CellShape,
    ) {
        for y in 0..h {
            for x in 0..w {
                if shape == CellShape::Square || in_hexagon(x, y, w, h) {
                    self.set_pixel(x0 + x, y0 + y, c);
                }
            }
        }
    }

    /// Copies `other` with its top-left corner at `(x0, y0)`.
    pub fn blit(&mut self, other: &Image, x0: usize, y0: usize) {
        let (w, h) = (self.width as usize, self.height as usize);
        let (ow, oh) = (other.width as usize, other.height as usize);
        if x0 >= w || y0 >= h {
            return;
        }
        let cols = ow.min(w - x0);
        for y in 0..oh.min(h - y0) {
            let src = 3 * y * ow;
            let dst = 3 * ((y0 + y) * w + x0);
            self.rgb[dst..dst + 3 * cols].copy_from_slice(&other.rgb[src..src + 3 * cols]);
        }
    }

    /// Panels side by side (top-aligned) separated by `gap` background pixels.
    pub fn side_by_side(panels: &[Image], gap: usize) -> Result<Image> {
        let w = panels.iter().map(|p| p.width as usize).sum::<usize>()
            + gap * panels.len().saturating_sub(1);
        let h = panels.iter().map(|p| p.height as usize).max().unwrap_or(0);
        let mut out = Image::filled(w, h, BACKGROUND)?;
        let mut x = 0;
        for p in panels {
            out.blit(p, x, 0);
            x += p.width as usize + gap;
        }
        Ok(out)
    }

    /// Enlarged `k` times with nearest-neighbour sampling.
    pub fn upscale(&self, k: usize) -> Result<Image> {
        if k <= 1 {
            return Ok(self.clone());
        }
        let (w, h) = (self.width as usize, self.height as usize);
        let mut out = Image::filled(w * k, h * k, BACKGROUND)?;
        for y in 0..h * k {
            for x in 0..w * k {
                let i = 3 * ((y / k) * w + x / k);
                let o = 3 * (y * w * k + x);
                out.rgb[o..o + 3].copy_from_slice(&self.rgb[i..i + 3]);
            }
        }
        Ok(out)
    }
}

/// The enlargement applied to a finished picture: an integer factor (1 to 8) that
/// brings its longest side to at least about 400 pixels.
///
/// ```
/// assert_eq!(tensorfmt::render::canvas::auto_scale(10, 10), 8);
/// assert_eq!(tensorfmt::render::canvas::auto_scale(77, 50), 5);
/// assert_eq!(tensorfmt::render::canvas::auto_scale(462, 462), 1);
/// ```
pub fn auto_scale(width: usize, height: usize) -> usize {
    (400 / width.max(height).max(1)).clamp(1, 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hexagon_mask() {
        // 4x4: the corners are outside, the centre inside.
        assert!(!in_hexagon(0, 0, 4, 4));
        assert!(!in_hexagon(3, 3, 4, 4));
        assert!(in_hexagon(1, 0, 4, 4));
        assert!(in_hexagon(0, 1, 4, 4));
        assert!(in_hexagon(2, 2, 4, 4));
        let inside = (0..16).filter(|i| in_hexagon(i % 4, i / 4, 4, 4)).count();
        assert_eq!(inside, 12);
    }

    #[test]
    fn tiles_and_panels() {
        let mut img = Image::filled(4, 3, BACKGROUND).unwrap();
        let v = [0.0, 1.0, 2.0, 3.0];
        let t = Tile {
            width: 2,
            height: 2,
            values: &v,
        };
        img.draw_tile(
            1,
            1,
            t,
            min_max(&v).unwrap(),
            Colormap::Gray,
            CellShape::Square,
        );
        assert_eq!(img.pixel(0, 0), Some(BACKGROUND));
        assert_eq!(img.pixel(1, 1), Some([0, 0, 0]));
        assert_eq!(img.pixel(2, 2), Some([255, 255, 255]));
        assert_eq!(img.pixel(2, 1), Some([85, 85, 85]));
        let two = Image::side_by_side(&[img.clone(), img.clone()], 2).unwrap();
        assert_eq!((two.width, two.height), (10, 3));
        assert_eq!(two.pixel(7, 1), Some([0, 0, 0]));
        let big = img.upscale(3).unwrap();
        assert_eq!((big.width, big.height), (12, 9));
        assert_eq!(big.pixel(5, 5), Some([0, 0, 0]));
        assert!(Image::filled(usize::MAX, 2, BACKGROUND).is_err());
        // Blitting past the right and bottom edges clips.
        let mut small = Image::filled(5, 3, BACKGROUND).unwrap();
        small.blit(&img, 3, 1);
        assert_eq!(small.pixel(4, 2), img.pixel(1, 1));
        assert_eq!(small.pixel(2, 2), Some(BACKGROUND));
        small.blit(&img, 9, 9);
    }
}
