//! Pictures of PINK files: a SOM as a montage of its neurons (square grid for
//! cartesian maps, offset rows of hexagons for hexagonal ones, one panel per channel),
//! a mapping as a heat map of best-match counts (or of one entry's distances), and a
//! data entry with its channels side by side (spec §12).

use tensorfmt_core::DType;
use tensorfmt_som::{FileKind, MapLayout, SomFile};

use super::canvas::{auto_scale, min_max, normalize, CellShape, Tile};
use super::colormap::{Colormap, BACKGROUND};
use super::font::{draw_text, text_width};
use super::image::Image;
use super::legend::{count, format_value, Legend, Picture, Scale, Stats};
use super::options::RenderOptions;
use crate::{Error, Result};

/// Background pixels around and between cells.
pub const GAP: usize = 2;

/// Side of one heat-map cell in pixels.
pub const HEAT_CELL: usize = 24;

/// Top-left corners of every neuron's cell (storage order) and the canvas size, for
/// cells of `w x h` pixels separated by `gap`.
///
/// Cartesian `[D0]`: one row. `[D0, D1]`: neuron `(i0, i1)` at block row `i0`, block
/// column `i1` (C order, pyink's convention). `[D0, D1, D2]`: depth slices side by side,
/// one extra gap apart. Hexagonal: cell `k` of storage row `row` at
/// `x = (|r - row| / 2 + k) (w + gap) + gap`, `y = 0.75 row (h + gap) + gap`, rounded.
///
/// ```
/// use tensorfmt::render::som::cell_positions;
/// use tensorfmt_som::{HexGrid, MapLayout};
/// let (pos, w, h) = cell_positions(&MapLayout::Cartesian(vec![2, 3]), 4, 4, 2);
/// assert_eq!((w, h), (20, 14));
/// assert_eq!(pos[4], (8, 8)); // neuron (1, 1)
/// let (pos, w, h) = cell_positions(&MapLayout::Hexagonal(HexGrid::new(3).unwrap()), 4, 4, 2);
/// assert_eq!((w, h, pos[0], pos[2]), (20, 17, (5, 2), (2, 7)));
/// ```
pub fn cell_positions(
    map: &MapLayout,
    w: usize,
    h: usize,
    gap: usize,
) -> (Vec<(usize, usize)>, usize, usize) {
    match map {
        MapLayout::Hexagonal(g) => {
            let d = g.side();
            let pos = (0..g.len())
                .map(|i| {
                    let (x, y) = g.display_position(i).expect("index in range");
                    let px = (x * (w + gap) as f64).round() as usize + gap;
                    let py = (y * (h + gap) as f64).round() as usize + gap;
                    (px, py)
                })
                .collect();
            let height = ((d - 1) as f64 * 0.75 * (h + gap) as f64).ceil() as usize + h + 2 * gap;
            (pos, d * (w + gap) + gap, height)
        }
        MapLayout::Cartesian(dims) => {
            let n = map.neuron_count();
            let mut pos = Vec::with_capacity(n);
            let (mut max_x, mut max_y) = (0, 0);
            for i in 0..n {
                let p = map.position(i).expect("index in range");
                let (row, col, slice) = match p.as_slice() {
                    [a] => (0, *a, 0),
                    [a, b] => (*a, *b, 0),
                    [a, b, c, ..] => (*a, c * dims[1] + b, *c),
                    [] => (0, 0, 0),
                };
                let x = gap + col * (w + gap) + slice * gap;
                let y = gap + row * (h + gap);
                max_x = max_x.max(x);
                max_y = max_y.max(y);
                pos.push((x, y));
            }
            (pos, max_x + w + gap, max_y + h + gap)
        }
    }
}

/// `(channels, height, width)` of an image or neuron with dims `[n]`, `[h, w]` or
/// `[c, h, w]`.
fn chw(dims: &[usize]) -> Result<(usize, usize, usize)> {
    match dims {
        [n] => Ok((1, 1, *n)),
        [h, w] => Ok((1, *h, *w)),
        [c, h, w] => Ok((*c, *h, *w)),
        _ => Err(Error::Invalid(format!(
            "cannot draw images of dims {dims:?}"
        ))),
    }
}

fn values_f32(t: &tensorfmt_core::Tensor) -> Result<Vec<f32>> {
    t.cast(DType::F32)?.to_vec::<f32>()
}

/// The SOM montage: one panel per channel, each neuron scaled to its own min-max.
pub fn som_montage(file: &SomFile, cmap: Colormap) -> Result<Picture> {
    let map = file
        .map_layout()
        .ok_or_else(|| Error::Invalid("not a SOM file".into()))?;
    let (c, h, w) = chw(file.neuron_dims().unwrap_or(&[]))?;
    // The picture's size follows from the header: every neuron gets its own w x h
    // tile per channel, so a picture smaller than that cannot be; refuse it before
    // laying out cells or reading any data (a 2 GiB SOM is refused at once).
    let n = map.neuron_count();
    Image::check_size(n.saturating_mul(c).saturating_mul(w), h)?;
    let (pos, cw, ch) = cell_positions(map, w, h, GAP);
    Image::check_size(cw.saturating_mul(c).saturating_add(6 * GAP * c), ch)?;
    let values = values_f32(&file.som_tensor()?)?;
    let shape = if map.is_hexagonal() {
        CellShape::Hexagon
    } else {
        CellShape::Square
    };
    let per = c * h * w;
    let mut panels = Vec::with_capacity(c);
    for channel in 0..c {
        let mut img = Image::filled(cw, ch, BACKGROUND)?;
        for (i, &(x, y)) in pos.iter().enumerate() {
            let start = i * per + channel * h * w;
            let v = &values[start..start + h * w];
            let range = min_max(v).unwrap_or((0.0, 0.0));
            img.draw_tile(
                x,
                y,
                Tile {
                    width: w,
                    height: h,
                    values: v,
                },
                range,
                cmap,
                shape,
            );
        }
        panels.push(img);
    }
    let img = Image::side_by_side(&panels, 3 * GAP)?;
    let image = img.upscale(auto_scale(img.width as usize, img.height as usize))?;
    let grid = map
        .dims()
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x");
    let channels = if c > 1 {
        format!(", {c} channels left to right")
    } else {
        String::new()
    };
    Ok(Picture {
        image,
        legend: Legend {
            what: format!(
                "SOM {} {grid}, {} {h}x{w}{channels}",
                if map.is_hexagonal() {
                    "hexagonal"
                } else {
                    "cartesian"
                },
                count(n, "neuron", "neurons")
            ),
            frame: None,
            time: None,
            stats: Stats::of(&values),
            scale: Scale::PerTile(cmap, "neuron"),
        },
    })
}

/// A heat map with one cell per neuron, coloured by `values` (global min-max), each
/// cell labelled with its value where the text fits; the legend says `what`.
pub fn heatmap(map: &MapLayout, values: &[f32], cmap: Colormap, what: String) -> Result<Picture> {
    let (pos, cw, ch) = cell_positions(map, HEAT_CELL, HEAT_CELL, GAP);
    let shape = if map.is_hexagonal() {
        CellShape::Hexagon
    } else {
        CellShape::Square
    };
    let range = min_max(values).unwrap_or((0.0, 0.0));
    let mut img = Image::filled(cw, ch, BACKGROUND)?;
    for (&(x, y), &v) in pos.iter().zip(values) {
        img.fill_cell(
            x,
            y,
            HEAT_CELL,
            HEAT_CELL,
            cmap.color(normalize(v, range)),
            shape,
        );
    }
    let k = auto_scale(img.width as usize, img.height as usize);
    let mut image = img.upscale(k)?;
    label_cells(&mut image, &pos, k, values, cmap, range);
    Ok(Picture {
        image,
        legend: Legend {
            what,
            frame: None,
            time: None,
            stats: Stats::of(values),
            scale: Scale::Shared(cmap),
        },
    })
}

/// Writes each heat-map cell's value (as [`format_value`]) in its centre, white on
/// dark colours and black on light ones, where the text fits (text scale 2 on cells
/// of at least 120 pixels).
fn label_cells(
    img: &mut Image,
    pos: &[(usize, usize)],
    k: usize,
    values: &[f32],
    cmap: Colormap,
    range: (f32, f32),
) {
    let cell = HEAT_CELL * k;
    let s = if cell >= 120 { 2 } else { 1 };
    for (&(x, y), &v) in pos.iter().zip(values) {
        let label = format_value(v as f64);
        let w = text_width(&label, s);
        if w + 4 * s > cell {
            continue;
        }
        let c = cmap.color(normalize(v, range));
        let lum = 0.2126 * c[0] as f32 + 0.7152 * c[1] as f32 + 0.0722 * c[2] as f32;
        let ink = if lum < 128.0 { [255; 3] } else { [0; 3] };
        let (cx, cy) = ((x * k) + cell / 2, (y * k) + cell / 2);
        draw_text(img, cx - w / 2, cy - 7 * s / 2, &label, s, ink);
    }
}

/// Renders any PINK file: SOM -> montage; mapping -> best-match counts (or, with
/// `frame` and without `counts`, that entry's distances); data -> entry `frame`
/// (default 0), channels side by side.
pub fn render_som_file(file: &SomFile, options: &RenderOptions) -> Result<Picture> {
    let cmap = Colormap::Viridis;
    match file.kind() {
        FileKind::Som => som_montage(file, cmap),
        FileKind::Mapping => {
            let map = file.map_layout().expect("mapping files have a map");
            let (values, what): (Vec<f32>, String) = match options.frame {
                Some(e) if !options.counts => (
                    values_f32(&file.distances(e..e + 1)?)?,
                    format!("distances of entry {e} to each neuron"),
                ),
                _ => (
                    file.bmu_counts()?.into_iter().map(|c| c as f32).collect(),
                    "best-match counts per neuron".into(),
                ),
            };
            heatmap(map, &values, cmap, what)
        }
        FileKind::Data => {
            let k = options.frame.unwrap_or(0);
            let (c, h, w) = chw(file.entry_dims().unwrap_or(&[]))?;
            let v = values_f32(&file.entry(k)?)?;
            let mut img = Image::filled(c * (w + GAP) + GAP, h + 2 * GAP, BACKGROUND)?;
            for (channel, plane) in v.chunks(h * w).enumerate() {
                let range = min_max(plane).unwrap_or((0.0, 0.0));
                let tile = Tile {
                    width: w,
                    height: h,
                    values: plane,
                };
                img.draw_tile(
                    GAP + channel * (w + GAP),
                    GAP,
                    tile,
                    range,
                    cmap,
                    CellShape::Square,
                );
            }
            let scale = if c == 1 {
                Scale::Shared(cmap)
            } else {
                Scale::PerTile(cmap, "channel")
            };
            Ok(Picture {
                image: img.upscale(auto_scale(img.width as usize, img.height as usize))?,
                legend: Legend {
                    what: format!("data entry {k}, {c}x{h}x{w}"),
                    frame: None,
                    time: None,
                    stats: Stats::of(&v),
                    scale,
                },
            })
        }
        FileKind::RotFlip => Err(Error::Invalid(
            "rotation/flip files have no picture; render the mapping or the SOM".into(),
        )),
    }
}
