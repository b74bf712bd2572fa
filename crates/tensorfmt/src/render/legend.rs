//! What a picture means, drawn around it: a title band at the top and, for scalar
//! colour-mapped pictures, a vertical colour bar on the right.
//!
//! **Title band**: three lines in the bitmap [`font`](super::font). Line 1: the file
//! name. Line 2: the tensor (what is drawn) and, where there is one, the frame index
//! and the PVP time (`activity 32x32x1 | frame 3 | t = 12.5`). Line 3: the value range
//! of what is drawn (`range -1.25e-04 .. 4`, `constant 5`, `no finite values`), counts
//! of NaN and infinite values, and how colours map to values. Names from files are
//! escaped ([`escape`]); a line longer than the canvas is cut with `...`.
//!
//! **Colour bar** ([`Scale::Shared`]): the colour map from the range's minimum
//! (bottom) to its maximum (top), with ticks at the minimum, middle and maximum (and
//! the quarters when the bar is tall enough) labelled with [`format_value`]. A constant
//! picture gets a bar of its single colour with one tick, its value. Per-tile scaled
//! pictures ([`Scale::PerTile`], titled `each neuron on its own scale`) get the same bar with its ends labelled `neuron min`,
//! `neuron max` (or `patch`, `filter`, ...), since one number cannot describe every
//! tile. RGB pictures ([`Scale::Rgb`]) get no bar; their range is in the title. When
//! any value is NaN, a swatch of the NaN colour labelled `NaN` sits under the bar.
//!
//! **Layout** (deterministic, in font pixels times the text scale `s`): the title band
//! on top (`4s` padding, `10s` per line), the picture below it at the left edge, the
//! bar `8s` to its right. Text is drawn at `s = 2` when the picture is at least
//! [`LARGE_WIDTH`] pixels wide, else at `s = 1`. The canvas grows to fit the title up
//! to [`TITLE_CHARS`] characters per line (so a small picture still gets a readable
//! title) and to fit a bar of at least [`MIN_BAR`]`s` pixels.

use super::colormap::{Colormap, BACKGROUND, NAN_COLOR};
use super::font::{draw_text, escape, text_width, truncate, CELL_H, CELL_W};
use super::image::Image;
use crate::Result;

/// Text is drawn twice as large on pictures at least this many pixels wide.
pub const LARGE_WIDTH: usize = 720;

/// The canvas grows to show title lines up to this many characters whole.
pub const TITLE_CHARS: usize = 64;

/// Shortest colour bar, in pixels at text scale 1.
pub const MIN_BAR: usize = 64;

/// Colour of text, ticks and the bar's frame.
pub const INK: [u8; 3] = [0, 0, 0];

/// Counts and finite range of a picture's values.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stats {
    /// Min and max of the finite values; `None` when there are none.
    pub range: Option<(f32, f32)>,
    /// Number of NaN values.
    pub nan: usize,
    /// Number of `+inf` values.
    pub pos_inf: usize,
    /// Number of `-inf` values.
    pub neg_inf: usize,
}

impl Stats {
    /// The stats of `values`.
    ///
    /// ```
    /// use tensorfmt::render::legend::Stats;
    /// let s = Stats::of(&[2.0, f32::NAN, -1.0, f32::INFINITY]);
    /// assert_eq!((s.range, s.nan, s.pos_inf, s.neg_inf), (Some((-1.0, 2.0)), 1, 1, 0));
    /// ```
    pub fn of(values: &[f32]) -> Stats {
        let mut s = Stats::default();
        for &v in values {
            if v.is_nan() {
                s.nan += 1;
            } else if v == f32::INFINITY {
                s.pos_inf += 1;
            } else if v == f32::NEG_INFINITY {
                s.neg_inf += 1;
            } else {
                s.range = Some(match s.range {
                    None => (v, v),
                    Some((lo, hi)) => (lo.min(v), hi.max(v)),
                });
            }
        }
        s
    }

    /// Line 3 of the title without the colour note: `range LO .. HI`, `constant V` or
    /// `no finite values`, then the counts of NaN and infinite values.
    ///
    /// ```
    /// use tensorfmt::render::legend::Stats;
    /// assert_eq!(Stats::of(&[0.5, -0.000125]).describe(), "range -1.25e-04 .. 0.5");
    /// assert_eq!(Stats::of(&[3.0, 3.0, f32::NAN]).describe(), "constant 3 (1 NaN)");
    /// assert_eq!(Stats::of(&[f32::NAN]).describe(), "no finite values (1 NaN)");
    /// ```
    pub fn describe(&self) -> String {
        let mut s = match self.range {
            None => "no finite values".to_string(),
            Some((lo, hi)) if lo == hi => format!("constant {}", format_value(lo as f64)),
            Some((lo, hi)) => format!(
                "range {} .. {}",
                format_value(lo as f64),
                format_value(hi as f64)
            ),
        };
        let extra: Vec<String> = [
            (self.nan, "NaN"),
            (self.pos_inf, "+inf"),
            (self.neg_inf, "-inf"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if !extra.is_empty() {
            s.push_str(&format!(" ({})", extra.join(", ")));
        }
        s
    }
}

/// How a picture's colours map to values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// One colour map over the picture's finite range for every pixel: a colour bar
    /// with values.
    Shared(Colormap),
    /// Every tile (named by the `&str`: `neuron`, `patch`, ...) scaled to its own
    /// min..max: a colour bar labelled `neuron min` .. `neuron max`.
    PerTile(Colormap, &'static str),
    /// Red, green and blue from three channels; the note (e.g. `RGB, each patch on its
    /// own scale`) goes into the title. No colour bar.
    Rgb(&'static str),
}

/// The facts a picture's title and colour bar show.
#[derive(Debug, Clone, PartialEq)]
pub struct Legend {
    /// What is drawn, e.g. `activity 32x32x1` or `layer conv1, 20 filters 1x5x5`.
    pub what: String,
    /// The frame index, for files with frames.
    pub frame: Option<usize>,
    /// The frame's time (PVP).
    pub time: Option<f64>,
    /// Range and counts of the values drawn.
    pub stats: Stats,
    /// How colours map to values.
    pub scale: Scale,
}

/// A picture and its legend, before [`annotate`] draws the legend around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Picture {
    /// The picture itself.
    pub image: Image,
    /// What it shows.
    pub legend: Legend,
}

/// A value in at most about 9 characters: magnitudes from `1e-3` up to `1e5` in
/// plain notation with up to 4 significant digits, others as `-1.25e-04`.
///
/// ```
/// use tensorfmt::render::legend::format_value;
/// assert_eq!(format_value(0.0), "0");
/// assert_eq!(format_value(-0.000125), "-1.25e-04");
/// assert_eq!(format_value(12.5), "12.5");
/// assert_eq!(format_value(0.1f32 as f64), "0.1");
/// assert_eq!(format_value(1234.56), "1235");
/// assert_eq!(format_value(3.4e38), "3.40e+38");
/// assert_eq!(format_value(f64::NEG_INFINITY), "-inf");
/// ```
pub fn format_value(v: f64) -> String {
    format_sig(v, 4)
}

/// A colour-bar tick: [`format_value`] with up to 3 significant digits.
///
/// ```
/// use tensorfmt::render::legend::format_tick;
/// assert_eq!(format_tick(0.59985), "0.6");
/// assert_eq!(format_tick(9.75), "9.75");
/// assert_eq!(format_tick(-0.000125), "-1.25e-04");
/// ```
pub fn format_tick(v: f64) -> String {
    format_sig(v, 3)
}

fn format_sig(v: f64, sig: i32) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if (1e-3..1e5).contains(&a) {
        let decimals = (sig - 1 - a.log10().floor() as i32).max(0) as usize;
        let s = format!("{v:.decimals$}");
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        };
        if s != "0" && s != "-0" {
            return s;
        }
    }
    let s = format!("{v:.2e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', e),
            };
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

/// `n word` or `n words`.
///
/// ```
/// use tensorfmt::render::legend::count;
/// assert_eq!(count(1, "patch", "patches"), "1 patch");
/// assert_eq!(count(16, "patch", "patches"), "16 patches");
/// ```
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The text scale for a picture `width` pixels wide: 2 from [`LARGE_WIDTH`] on, else 1.
pub fn text_scale(width: usize) -> usize {
    if width >= LARGE_WIDTH {
        2
    } else {
        1
    }
}

/// The three title lines (escaped, not yet cut to the canvas).
pub fn title_lines(file_name: &str, legend: &Legend) -> [String; 3] {
    let l0 = escape(file_name);
    let mut l1 = escape(&legend.what);
    if let Some(k) = legend.frame {
        l1.push_str(&format!(" | frame {k}"));
    }
    if let Some(t) = legend.time {
        l1.push_str(&format!(" | t = {}", format_value(t)));
    }
    let mut l2 = legend.stats.describe();
    match legend.scale {
        Scale::Shared(_) => {}
        Scale::PerTile(_, unit) => l2.push_str(&format!("; each {unit} on its own scale")),
        Scale::Rgb(note) => l2.push_str(&format!("; {note}")),
    }
    [l0, l1, l2]
}

/// Tick labels and their positions along the bar (0 bottom, 1 top).
fn ticks(legend: &Legend, tall: bool) -> Vec<(f64, String)> {
    match (legend.scale, legend.stats.range) {
        (Scale::Rgb(_), _) => Vec::new(),
        (Scale::PerTile(_, unit), _) => {
            vec![(0.0, format!("{unit} min")), (1.0, format!("{unit} max"))]
        }
        (Scale::Shared(_), None) => Vec::new(),
        (Scale::Shared(_), Some((lo, hi))) if lo == hi => vec![(0.5, format_tick(lo as f64))],
        (Scale::Shared(_), Some((lo, hi))) => {
            let n = if tall { 5 } else { 3 };
            let (lo, hi) = (lo as f64, hi as f64);
            (0..n)
                .map(|i| {
                    let f = i as f64 / (n - 1) as f64;
                    (f, format_tick(lo + (hi - lo) * f))
                })
                .collect()
        }
    }
}

/// Draws `pic`'s legend around it: the title band on top and, for colour-mapped
/// pictures, the colour bar on the right (see the module docs for the layout).
///
/// ```
/// use tensorfmt::render::colormap::Colormap;
/// use tensorfmt::render::legend::{annotate, Legend, Picture, Scale, Stats};
/// use tensorfmt::render::Image;
/// let values = [0.0f32, 1.0];
/// let pic = Picture {
///     image: Image::filled(200, 100, [0, 0, 0])?,
///     legend: Legend {
///         what: "ramp".into(),
///         frame: None,
///         time: None,
///         stats: Stats::of(&values),
///         scale: Scale::Shared(Colormap::Viridis),
///     },
/// };
/// let img = annotate(&pic, "ramp.npy")?;
/// assert!(img.width > 200 && img.height > 100);
/// # Ok::<(), tensorfmt::Error>(())
/// ```
pub fn annotate(pic: &Picture, file_name: &str) -> Result<Image> {
    let legend = &pic.legend;
    let (iw, ih) = (pic.image.width as usize, pic.image.height as usize);
    let s = text_scale(iw);
    let pad = 4 * s;
    let line = 10 * s;
    let lines = title_lines(file_name, legend);
    let band = pad + lines.len() * line + pad / 2;

    let cmap = match legend.scale {
        Scale::Shared(c) | Scale::PerTile(c, _) => Some(c),
        Scale::Rgb(_) => None,
    };
    // Bar geometry: the bar, its ticks and labels right of the picture.
    let (bar_gap, bar_w, tick) = (8 * s, 14 * s, 3 * s);
    let margin = CELL_H * s; // room for half a label above the top tick and below the bottom
    let nan_h = if legend.stats.nan > 0 { 14 * s } else { 0 };
    let bar_h = ih.saturating_sub(2 * margin + nan_h).max(MIN_BAR * s);
    let tall = bar_h >= 8 * line;
    let ticks = ticks(legend, tall);
    let mut label_chars = ticks
        .iter()
        .map(|(_, l)| l.chars().count())
        .max()
        .unwrap_or(0);
    if nan_h > 0 {
        label_chars = label_chars.max(3);
    }
    let bar_area = match cmap {
        Some(_) => bar_gap + bar_w + tick + 2 * s + label_chars * CELL_W * s + pad,
        None => 0,
    };
    let body_h = match cmap {
        Some(_) => ih.max(2 * margin + bar_h + nan_h),
        None => ih,
    };
    let content_w = iw + bar_area;
    let title_w = lines
        .iter()
        .map(|l| text_width(l, s).min(TITLE_CHARS * CELL_W * s))
        .max()
        .unwrap_or(0)
        + 2 * pad;
    let width = content_w.max(title_w);
    let height = band + body_h;
    let mut img = Image::filled(width, height, BACKGROUND)?;
    let max_chars = (width - 2 * pad) / (CELL_W * s);
    for (i, l) in lines.iter().enumerate() {
        draw_text(
            &mut img,
            pad,
            pad + i * line,
            &truncate(l, max_chars),
            s,
            INK,
        );
    }
    img.blit(&pic.image, 0, band);
    let Some(cmap) = cmap else {
        return Ok(img);
    };
    let bx = iw + bar_gap;
    let by = band + margin;
    if legend.stats.range.is_some() || matches!(legend.scale, Scale::PerTile(..)) {
        let constant = matches!(legend.stats.range, Some((lo, hi)) if lo == hi)
            && matches!(legend.scale, Scale::Shared(_));
        for r in 0..bar_h {
            let t = if constant || bar_h < 2 {
                0.0
            } else {
                (bar_h - 1 - r) as f32 / (bar_h - 1) as f32
            };
            let c = cmap.color(t);
            for x in 0..bar_w {
                img.set_pixel(bx + x, by + r, c);
            }
        }
        frame_rect(&mut img, bx, by, bar_w, bar_h);
    }
    let lx = bx + bar_w + tick + 2 * s;
    for (f, label) in &ticks {
        let y = by + ((1.0 - f) * (bar_h - 1) as f64).round() as usize;
        for x in 0..tick {
            for d in 0..s {
                img.set_pixel(bx + bar_w + x, y + d, INK);
            }
        }
        let ty = (y + s / 2).saturating_sub(7 * s / 2);
        draw_text(&mut img, lx, ty, label, s, INK);
    }
    if nan_h > 0 {
        let ny = by + bar_h + 6 * s;
        let sh = 8 * s;
        for y in 0..sh {
            for x in 0..bar_w {
                img.set_pixel(bx + x, ny + y, NAN_COLOR);
            }
        }
        frame_rect(&mut img, bx, ny, bar_w, sh);
        draw_text(&mut img, lx, ny, "NaN", s, INK);
    }
    Ok(img)
}

/// A one-pixel frame just outside the `w x h` rectangle at `(x, y)`.
fn frame_rect(img: &mut Image, x: usize, y: usize, w: usize, h: usize) {
    let (x0, y0) = (x.saturating_sub(1), y.saturating_sub(1));
    for xx in x0..=x + w {
        img.set_pixel(xx, y0, INK);
        img.set_pixel(xx, y + h, INK);
    }
    for yy in y0..=y + h {
        img.set_pixel(x0, yy, INK);
        img.set_pixel(x + w, yy, INK);
    }
}
