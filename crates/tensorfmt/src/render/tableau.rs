//! Tableaus: many small multi-channel pictures (weight patches, conv filters, feature
//! maps) laid out on one canvas. Shared by the PVP and Caffe pictures.
//!
//! A [`Block`] is a strided `height x width x channels` view of `f32` values (so HWC
//! PVP patches and CHW Caffe filters need no copy). [`tableau`] draws each block as a
//! *cell*: a 3-channel block is one RGB tile (the three channels scaled jointly to the
//! tile's min..max, channel 0 red); any other block is a row of single-channel tiles,
//! one per channel, each scaled to its own min..max through a [`Colormap`], separated
//! by [`INNER_GAP`] background pixels (tiles of a single value, e.g. 1x1 weight
//! patches, are instead scaled jointly over the whole tableau, or they would all get
//! one colour). Cells are arranged row by row (reading order) in
//! the number of columns that makes the canvas closest to square ([`grid_columns`]),
//! [`GAP`] background pixels around and between them.

use super::canvas::{auto_scale, normalize};
use super::colormap::{Colormap, BACKGROUND, NAN_COLOR};
use super::image::Image;
use super::legend::Scale;
use crate::{Error, Result};

/// Background pixels around and between cells.
pub const GAP: usize = 2;

/// Background pixels between the channel tiles of one cell.
pub const INNER_GAP: usize = 1;

/// Background pixels between side-by-side panels (e.g. one per PVP arbor).
pub const PANEL_GAP: usize = 6;

/// Enlargement aims to make the shorter side of a tile at least this many pixels.
pub const MIN_TILE_PX: usize = 12;

/// Enlargement never makes the longest side of a picture exceed this (unless
/// [`auto_scale`] alone does).
pub const MAX_SIDE_PX: usize = 2000;

/// The integer enlargement of a tableau of `width x height` pixels whose tiles have
/// `tile` pixels on their shorter side: [`auto_scale`], or more (up to 8) so tiles get
/// [`MIN_TILE_PX`] pixels, as long as the picture stays within [`MAX_SIDE_PX`].
///
/// ```
/// use tensorfmt::render::tableau::tableau_scale;
/// assert_eq!(tableau_scale(244, 177, 5), 3); // 50 rows of 20 lenet conv2 filters
/// assert_eq!(tableau_scale(37, 30, 5), 8); // small pictures: auto_scale wins
/// assert_eq!(tableau_scale(770, 770, 1), 2); // capped by MAX_SIDE_PX
/// assert_eq!(tableau_scale(3000, 10, 1), 1);
/// ```
pub fn tableau_scale(width: usize, height: usize, tile: usize) -> usize {
    let auto = auto_scale(width, height);
    let for_tiles = MIN_TILE_PX.div_ceil(tile.max(1)).min(8);
    let room = (MAX_SIDE_PX / width.max(height).max(1)).max(1);
    auto.max(for_tiles.min(room))
}

/// `img` enlarged by [`tableau_scale`].
pub fn enlarge(img: Image, tile: usize) -> Result<Image> {
    img.upscale(tableau_scale(img.width as usize, img.height as usize, tile))
}

/// A strided `height x width x channels` view: value `(y, x, c)` is
/// `values[offset + y * sy + x * sx + c * sc]`.
///
/// ```
/// use tensorfmt::render::tableau::Block;
/// let v: Vec<f32> = (0..12).map(|i| i as f32).collect();
/// let hwc = Block::hwc(&v, 0, 2, 2, 3)?; // [y][x][c]
/// assert_eq!(hwc.get(1, 0, 2), 8.0);
/// let chw = Block::chw(&v, 0, 3, 2, 2)?; // [c][y][x]
/// assert_eq!(chw.get(1, 0, 2), 10.0);
/// assert_eq!(hwc.channel(1)?.get(0, 1, 0), 4.0);
/// assert!(Block::hwc(&v, 1, 2, 2, 3).is_err()); // runs past the end
/// # Ok::<(), tensorfmt::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Block<'a> {
    values: &'a [f32],
    offset: usize,
    height: usize,
    width: usize,
    channels: usize,
    sy: usize,
    sx: usize,
    sc: usize,
}

impl<'a> Block<'a> {
    /// A view with explicit strides, checked to lie inside `values` and to be non-empty.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        values: &'a [f32],
        offset: usize,
        height: usize,
        width: usize,
        channels: usize,
        sy: usize,
        sx: usize,
        sc: usize,
    ) -> Result<Block<'a>> {
        if height == 0 || width == 0 || channels == 0 {
            return Err(Error::Invalid(format!(
                "cannot draw an empty picture of {height}x{width}x{channels}"
            )));
        }
        let last = [(height - 1, sy), (width - 1, sx), (channels - 1, sc)]
            .iter()
            .try_fold(offset, |acc, &(n, s)| n.checked_mul(s)?.checked_add(acc));
        match last {
            Some(i) if i < values.len() => Ok(Block {
                values,
                offset,
                height,
                width,
                channels,
                sy,
                sx,
                sc,
            }),
            _ => Err(Error::Invalid(format!(
                "picture block {height}x{width}x{channels} at {offset} runs past {} values",
                values.len()
            ))),
        }
    }

    /// Channels fastest, then x, then y (`[h][w][c]`, PVP order), starting at `offset`.
    pub fn hwc(
        values: &'a [f32],
        offset: usize,
        height: usize,
        width: usize,
        channels: usize,
    ) -> Result<Block<'a>> {
        let sy = width.saturating_mul(channels);
        Block::new(values, offset, height, width, channels, sy, channels, 1)
    }

    /// Planar: x fastest, then y, then channel (`[c][h][w]`, Caffe order).
    pub fn chw(
        values: &'a [f32],
        offset: usize,
        channels: usize,
        height: usize,
        width: usize,
    ) -> Result<Block<'a>> {
        let sc = height.saturating_mul(width);
        Block::new(values, offset, height, width, channels, width, 1, sc)
    }

    /// Channel `c` alone, as a 1-channel block.
    pub fn channel(&self, c: usize) -> Result<Block<'a>> {
        if c >= self.channels {
            return Err(Error::Invalid(format!(
                "channel {c} of a {}-channel picture",
                self.channels
            )));
        }
        Ok(Block {
            offset: self.offset + c * self.sc,
            channels: 1,
            ..*self
        })
    }

    /// Height in values.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Width in values.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Number of channels.
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// Value `(y, x, c)`; panics outside the block (callers iterate within it).
    pub fn get(&self, y: usize, x: usize, c: usize) -> f32 {
        self.values[self.offset + y * self.sy + x * self.sx + c * self.sc]
    }

    /// Min and max over the channels `cs` (finite values; `None` when there are none).
    fn range(&self, cs: std::ops::Range<usize>) -> Option<(f32, f32)> {
        let mut acc: Option<(f32, f32)> = None;
        for c in cs {
            for y in 0..self.height {
                for x in 0..self.width {
                    let v = self.get(y, x, c);
                    if v.is_finite() {
                        acc = Some(match acc {
                            None => (v, v),
                            Some((lo, hi)) => (lo.min(v), hi.max(v)),
                        });
                    }
                }
            }
        }
        acc
    }

    /// Pixel size of this block's cell in a tableau.
    fn cell_size(&self) -> (usize, usize) {
        cell_size(self.height, self.width, self.channels)
    }
}

/// The pixels of one cell of `h x w x c` values: the block itself for RGB, else a row
/// of `c` tiles `INNER_GAP` apart.
fn cell_size(h: usize, w: usize, c: usize) -> (usize, usize) {
    if c == 3 {
        (w, h)
    } else {
        (
            c.saturating_mul(w)
                .saturating_add(c.saturating_sub(1).saturating_mul(INNER_GAP)),
            h,
        )
    }
}

/// The size of the [`tableau`] of `n` blocks of `h x w x c` values, enlarged by
/// [`enlarge`] for tiles of side `tile` (width, height), checked against the picture
/// limit before any value is read: a renderer calls it with the sizes a header
/// declares, so a file that would need a huge picture (or a huge frame to draw it
/// from) is refused at once.
///
/// ```
/// use tensorfmt::render::tableau::tableau_size;
/// assert_eq!(tableau_size(1, 2, 2, 1, 2)?, (48, 48));
/// assert!(tableau_size(1, 20_000, 20_000, 1, 20_000).is_err());
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub fn tableau_size(n: usize, h: usize, w: usize, c: usize, tile: usize) -> Result<(usize, usize)> {
    let (_, width, height) = grid_size(n, h, w, c)?;
    Image::check_size(width, height)?;
    let k = tableau_scale(width, height, tile);
    let (width, height) = (width.saturating_mul(k), height.saturating_mul(k));
    Image::check_size(width, height)?;
    Ok((width, height))
}

/// The grid of `n` cells of `h x w x c` values `GAP` apart, unscaled: its columns,
/// width and height.
fn grid_size(n: usize, h: usize, w: usize, c: usize) -> Result<(usize, usize, usize)> {
    let (cw, ch) = cell_size(h, w, c);
    let cols = grid_columns(n, cw, ch, GAP);
    let rows = n.div_ceil(cols.max(1));
    let size = |n: usize, cell: usize| {
        n.checked_mul(cell.saturating_add(GAP))
            .and_then(|v| v.checked_add(GAP))
            .ok_or_else(|| Error::Invalid("picture size overflows".into()))
    };
    Ok((cols, size(cols, cw)?, size(rows, ch)?))
}

/// The number of columns (1..=n) that makes a grid of `n` cells of `w x h` pixels,
/// `gap` apart, closest to square (ties: fewer columns).
///
/// ```
/// use tensorfmt::render::tableau::grid_columns;
/// assert_eq!(grid_columns(20, 5, 5, 2), 5); // 5 x 4, not 4 x 5
/// assert_eq!(grid_columns(2, 4, 4, 2), 2);
/// assert_eq!(grid_columns(64, 18, 18, 2), 8);
/// assert_eq!(grid_columns(3, 100, 1, 2), 1); // wide cells stack
/// assert_eq!(grid_columns(1, 4, 4, 2), 1);
/// ```
pub fn grid_columns(n: usize, w: usize, h: usize, gap: usize) -> usize {
    let (cw, ch) = ((w + gap) as f64, (h + gap) as f64);
    let mut best = (f64::INFINITY, 1);
    for cols in 1..=n.max(1) {
        let rows = n.div_ceil(cols).max(1);
        let (pw, ph) = (cols as f64 * cw, rows as f64 * ch);
        let badness = pw.max(ph) / pw.min(ph);
        if badness <= best.0 + 1e-9 {
            best = (badness, cols);
        }
        if rows == 1 {
            break;
        }
    }
    best.1
}

/// How [`tableau`] maps the values of `n` blocks of `h x w x c` to colours: RGB for 3
/// channels (`rgb_note` says so and how they are scaled); one shared scale when the tiles
/// are single values (scaled jointly) or there is one single-channel block; otherwise
/// each tile (named `unit`) on its own scale.
///
/// ```
/// use tensorfmt::render::colormap::Colormap::Viridis;
/// use tensorfmt::render::legend::Scale;
/// use tensorfmt::render::tableau::colour_scale;
/// assert_eq!(colour_scale(1, 32, 32, 1, Viridis, "map", ""), Scale::Shared(Viridis));
/// assert_eq!(colour_scale(64, 1, 1, 1, Viridis, "patch", ""), Scale::Shared(Viridis));
/// assert_eq!(colour_scale(64, 5, 5, 1, Viridis, "patch", ""), Scale::PerTile(Viridis, "patch"));
/// assert_eq!(colour_scale(64, 5, 5, 3, Viridis, "patch", "x"), Scale::Rgb("x"));
/// ```
pub fn colour_scale(
    n: usize,
    h: usize,
    w: usize,
    c: usize,
    cmap: Colormap,
    unit: &'static str,
    rgb_note: &'static str,
) -> Scale {
    if c == 3 {
        Scale::Rgb(rgb_note)
    } else if h * w == 1 || (n == 1 && c == 1) {
        Scale::Shared(cmap)
    } else {
        Scale::PerTile(cmap, unit)
    }
}

/// Top-left corner of cell `i` in a grid of `cols` columns of `w x h` cells.
///
/// ```
/// use tensorfmt::render::tableau::{cell_origin, GAP};
/// assert_eq!(cell_origin(0, 4, 5, 5), (GAP, GAP));
/// assert_eq!(cell_origin(5, 4, 5, 5), (GAP + 7, GAP + 7));
/// ```
pub fn cell_origin(i: usize, cols: usize, w: usize, h: usize) -> (usize, usize) {
    (GAP + (i % cols) * (w + GAP), GAP + (i / cols) * (h + GAP))
}

/// Draws `blocks` as a tableau (see the module docs). Every block must have the same
/// height, width and channel count. Not enlarged.
pub fn tableau(blocks: &[Block<'_>], cmap: Colormap) -> Result<Image> {
    let first = blocks
        .first()
        .ok_or_else(|| Error::Invalid("nothing to draw: no tiles".into()))?;
    let (h, w, c) = (first.height, first.width, first.channels);
    if blocks
        .iter()
        .any(|b| (b.height, b.width, b.channels) != (h, w, c))
    {
        return Err(Error::Invalid(
            "tableau blocks differ in size or channels".into(),
        ));
    }
    // Single-value tiles would all get one colour under per-tile scaling: scale them
    // jointly over the whole tableau instead.
    let joint = if h * w == 1 && c != 3 {
        Some(
            blocks
                .iter()
                .filter_map(|b| b.range(0..c))
                .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
                .unwrap_or((0.0, 0.0)),
        )
    } else {
        None
    };
    let (cw, ch) = first.cell_size();
    let (cols, width, height) = grid_size(blocks.len(), h, w, c)?;
    let mut img = Image::filled(width, height, BACKGROUND)?;
    for (i, b) in blocks.iter().enumerate() {
        let (x0, y0) = cell_origin(i, cols, cw, ch);
        draw_cell(&mut img, x0, y0, b, cmap, joint);
    }
    Ok(img)
}

/// Draws one block at `(x0, y0)`: RGB when it has 3 channels, else a row of colormapped
/// channel tiles.
/// `joint`: one range for every single-channel tile instead of each tile's own.
fn draw_cell(
    img: &mut Image,
    x0: usize,
    y0: usize,
    b: &Block<'_>,
    cmap: Colormap,
    joint: Option<(f32, f32)>,
) {
    if b.channels == 3 {
        let range = b.range(0..3).unwrap_or((0.0, 0.0));
        for y in 0..b.height {
            for x in 0..b.width {
                let px = rgb_pixel([b.get(y, x, 0), b.get(y, x, 1), b.get(y, x, 2)], range);
                img.set_pixel(x0 + x, y0 + y, px);
            }
        }
        return;
    }
    for c in 0..b.channels {
        let range = joint.or_else(|| b.range(c..c + 1)).unwrap_or((0.0, 0.0));
        let xc = x0 + c * (b.width + INNER_GAP);
        for y in 0..b.height {
            for x in 0..b.width {
                let px = cmap.color(normalize(b.get(y, x, c), range));
                img.set_pixel(xc + x, y0 + y, px);
            }
        }
    }
}

/// An RGB pixel from three values scaled by a joint `range` (NaN anywhere gives
/// [`NAN_COLOR`]).
///
/// ```
/// use tensorfmt::render::tableau::rgb_pixel;
/// assert_eq!(rgb_pixel([0.0, 1.0, 2.0], (0.0, 2.0)), [0, 128, 255]);
/// assert_eq!(rgb_pixel([5.0, 5.0, 5.0], (5.0, 5.0)), [0, 0, 0]);
/// ```
pub fn rgb_pixel(v: [f32; 3], range: (f32, f32)) -> [u8; 3] {
    if v.iter().any(|x| x.is_nan()) {
        return NAN_COLOR;
    }
    v.map(|x| (normalize(x, range).clamp(0.0, 1.0) * 255.0).round() as u8)
}
