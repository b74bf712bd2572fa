//! Legend tests: the title band and colour bar that `render_path` draws around every
//! picture (size, bar found by pixel statistics, tick and title text present), RGB
//! pictures without a bar (Caffe mean in BGR order), names with control characters,
//! NaN / infinite / huge / constant values, and the pictures under `docs/render/`
//! (regenerated with `TENSORFMT_UPDATE_DOCS=1`, otherwise compared pixel for pixel).

use std::path::{Path, PathBuf};

use tensorfmt_caffe::{encode_weights_model, RawBlob, WeightsLayer};
use tensorfmt_core::{Order, Tensor};
use tensorfmt_pvp::write::{DenseWriter, WeightGeometry, WeightWriter};
use tensorfmt_som::{write_mapping, write_som, HexGrid, MapLayout, WriteConfig};

use super::colormap::{Colormap, BACKGROUND, NAN_COLOR};
use super::font::escape;
use super::legend::{annotate, title_lines, INK};
use super::{render_path, render_picture, write_png, Image, RenderOptions};

/// Height of the title band at text scale `s`: padding, three lines, half a padding.
fn band(s: u32) -> u32 {
    4 * s + 3 * 10 * s + 2 * s
}

fn dense_file(path: &Path, nx: usize, ny: usize, nf: usize, frames: &[Vec<f32>]) {
    let mut w = DenseWriter::new(std::fs::File::create(path).unwrap(), nx, ny, nf).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(2.5 * i as f64, f).unwrap();
    }
    w.finish().unwrap();
}

fn mean_file(path: &Path, c: usize, h: usize, w: usize, values: &[f32]) {
    let blob = RawBlob::from_f32(&[1, c as i64, h as i64, w as i64], values);
    std::fs::write(path, blob.to_bytes()).unwrap();
}

/// Writes `img` to `$TENSORFMT_RENDER_OUT/legend_NAME.png` when that is set, for
/// looking at it.
fn save(img: &Image, name: &str) {
    if let Some(o) = std::env::var_os("TENSORFMT_RENDER_OUT") {
        let o = PathBuf::from(o);
        std::fs::create_dir_all(&o).unwrap();
        write_png(img, &o.join(format!("legend_{name}.png"))).unwrap();
    }
}

/// The index (0..=255) of the viridis colour nearest `c`, if it is within 6 per channel.
fn viridis_index(c: [u8; 3]) -> Option<usize> {
    use std::sync::OnceLock;
    static LUT: OnceLock<Vec<[u8; 3]>> = OnceLock::new();
    let lut = LUT.get_or_init(|| {
        (0..256)
            .map(|i| Colormap::Viridis.color(i as f32 / 255.0))
            .collect()
    });
    if c == BACKGROUND || c == INK {
        return None;
    }
    lut.iter()
        .copied()
        .enumerate()
        .filter(|(_, v)| (0..3).all(|k| (v[k] as i32 - c[k] as i32).abs() <= 6))
        .min_by_key(|(_, v)| {
            (0..3)
                .map(|k| (v[k] as i32 - c[k] as i32).abs())
                .sum::<i32>()
        })
        .map(|(i, _)| i)
}

/// The colour bar right of `x_from`: the column with the longest vertical run of
/// viridis colours, as (x, top, colormap indices from bottom to top).
fn find_bar(img: &Image, x_from: u32) -> Option<(u32, u32, Vec<usize>)> {
    let mut best: Option<(u32, u32, Vec<usize>)> = None;
    for x in x_from..img.width {
        let mut run: Vec<usize> = Vec::new();
        let mut top = 0;
        for y in 0..=img.height {
            match img.pixel(x, y).and_then(viridis_index) {
                Some(i) => {
                    if run.is_empty() {
                        top = y;
                    }
                    run.push(i)
                }
                None => {
                    if run.len() > best.as_ref().map_or(0, |b| b.2.len()) {
                        let mut up = run.clone();
                        up.reverse();
                        best = Some((x, top, up));
                    }
                    run.clear();
                }
            }
        }
    }
    best
}

fn ink_pixels(img: &Image, xs: std::ops::Range<u32>, ys: std::ops::Range<u32>) -> usize {
    ys.flat_map(|y| xs.clone().map(move |x| (x, y)))
        .filter(|&(x, y)| img.pixel(x, y) == Some(INK))
        .count()
}

/// Asserts the bar is there: monotone from the colour map's bottom to its top, at
/// least 60 pixels, with tick label ink to its right.
fn assert_bar(img: &Image, bare: &Image) -> (u32, u32, usize) {
    let (x, top, run) = find_bar(img, bare.width).expect("a colour bar");
    assert!(run.len() >= 60, "bar of {} pixels", run.len());
    assert!(
        run.windows(2).all(|w| w[0] <= w[1]),
        "bar not monotone: {run:?}"
    );
    assert!(run[0] <= 2 && *run.last().unwrap() >= 253, "{run:?}");
    let labels = ink_pixels(img, x + 1..img.width, top..top + run.len() as u32);
    assert!(labels > 30, "tick labels: {labels} ink pixels");
    (x, top, run.len())
}

fn counts_mapping(dir: &Path) -> PathBuf {
    let p = dir.join("map_hex5.bin");
    let grid = MapLayout::Hexagonal(HexGrid::new(5).unwrap());
    let n = grid.neuron_count();
    // 120 entries; entry e best matches neuron n (e / 120)^2: counts fall with k.
    let entries = 120;
    let mut d = Vec::with_capacity(entries * n);
    for e in 0..entries {
        let bmu = ((e as f64 / entries as f64).powi(2) * n as f64) as usize;
        d.extend((0..n).map(|k| if k == bmu { 0.0 } else { 1.0 + k as f32 }));
    }
    let t = Tensor::from_vec(d, [entries, n], Order::RowMajor).unwrap();
    let mut b = Vec::new();
    write_mapping(&mut b, &grid, &t, &WriteConfig::default()).unwrap();
    std::fs::write(&p, b).unwrap();
    p
}

fn counts() -> RenderOptions {
    RenderOptions {
        counts: true,
        ..Default::default()
    }
}

#[test]
fn title_band_and_colour_bar_around_a_heat_map() {
    let dir = tempfile::tempdir().unwrap();
    let p = counts_mapping(dir.path());
    let bare = render_picture(&p, &counts()).unwrap().image;
    let img = render_path(&p, &counts()).unwrap();
    let b = band(1);
    // The picture sits under the title band, at the left edge, unchanged.
    assert!(
        img.width > bare.width + 40,
        "{} vs {}",
        img.width,
        bare.width
    );
    assert_eq!(img.height, bare.height + b);
    for (x, y) in [
        (0, 0),
        (bare.width / 2, bare.height / 2),
        (bare.width - 1, 7),
    ] {
        assert_eq!(img.pixel(x, y + b), bare.pixel(x, y), "({x}, {y})");
    }
    // Title text in the band, none below it outside the picture and bar.
    assert!(ink_pixels(&img, 0..img.width, 0..b) > 200);
    assert_bar(&img, &bare);
    // The title gives the count range.
    let lines = title_lines(
        "map_hex5.bin",
        &render_picture(&p, &counts()).unwrap().legend,
    );
    assert_eq!(lines[0], "map_hex5.bin");
    assert_eq!(lines[1], "best-match counts per neuron");
    assert_eq!(lines[2], "range 3 .. 28");
}

#[test]
fn pvp_frames_name_frame_and_time_and_large_pictures_get_large_text() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a1_V1.pvp");
    let frames: Vec<Vec<f32>> = (0..3)
        .map(|k| {
            (0..96 * 64)
                .map(|i| ((i % 96) as f32 - 40.0) * 1e-4 * (k + 1) as f32)
                .collect()
        })
        .collect();
    dense_file(&p, 96, 64, 1, &frames);
    let o = RenderOptions {
        frame: Some(2),
        ..Default::default()
    };
    let pic = render_picture(&p, &o).unwrap();
    let lines = title_lines("a1_V1.pvp", &pic.legend);
    assert_eq!(lines[0], "a1_V1.pvp");
    assert_eq!(lines[1], "activity 96x64x1 | frame 2 | t = 5");
    assert_eq!(lines[2], "range -0.012 .. 0.0165");
    // 100 x 68 enlarged 4x: 400 wide, text at scale 1.
    assert_eq!(pic.image.width, 400);
    let img = render_path(&p, &o).unwrap();
    assert_eq!(img.height, pic.image.height + band(1));
    assert_bar(&img, &pic.image);
    // A picture at least 720 wide gets text at scale 2.
    let wide = Image::filled(800, 300, [10, 10, 10]).unwrap();
    let big = annotate(
        &super::Picture {
            image: wide.clone(),
            legend: pic.legend.clone(),
        },
        "a1_V1.pvp",
    )
    .unwrap();
    assert_eq!(big.height, 300 + band(2));
    assert_bar(&big, &wide);
}

#[test]
fn rgb_pictures_have_no_bar_and_caffe_means_are_bgr() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("blue.binaryproto");
    // Channel 0 (blue in Caffe's BGR) high, channels 1 and 2 zero, over 8x8.
    let mut v = vec![104.0f32; 64];
    v.extend(vec![0.0; 128]);
    mean_file(&p, 3, 8, 8, &v);
    let pic = render_picture(&p, &Default::default()).unwrap();
    let img = render_path(&p, &Default::default()).unwrap();
    let b = band(1);
    let (cx, cy) = (pic.image.width / 2, pic.image.height / 2);
    assert_eq!(
        img.pixel(cx, cy + b),
        Some([0, 0, 255]),
        "channel 0 drawn blue"
    );
    assert!(find_bar(&img, pic.image.width).is_none_or(|(_, _, r)| r.len() < 10));
    // The canvas only grows for the title, which carries the range.
    assert_eq!(img.height, pic.image.height + b);
    let lines = title_lines("blue.binaryproto", &pic.legend);
    assert_eq!(lines[1], "mean image 3x8x8");
    assert_eq!(lines[2], "range 0 .. 104; RGB from BGR, one scale");
    // Colour filters: the same BGR order, no bar.
    let f = dir.path().join("rgb.caffemodel");
    let mut w = vec![0.0f32; 2 * 3 * 4];
    w[8..12].fill(1.0); // filter 0, channel 2 (red)
    w[12..16].fill(1.0); // filter 1, channel 0 (blue)
    let layer = WeightsLayer {
        name: "conv1".into(),
        type_name: Some("Convolution".into()),
        blobs: vec![RawBlob::from_f32(&[2, 3, 2, 2], &w)],
    };
    std::fs::write(&f, encode_weights_model(Some("n"), &[layer])).unwrap();
    let o = RenderOptions {
        layer: Some("conv1".into()),
        ..Default::default()
    };
    let pic = render_picture(&f, &o).unwrap();
    let img = render_path(&f, &o).unwrap();
    let k = pic.image.width / 10; // 2 cells of 2x2 in a row: 10 x 6, enlarged
    assert_eq!(
        img.pixel(2 * k + k / 2, 2 * k + k / 2 + b),
        Some([255, 0, 0])
    );
    assert_eq!(
        img.pixel(6 * k + k / 2, 2 * k + k / 2 + b),
        Some([0, 0, 255])
    );
    assert!(find_bar(&img, pic.image.width).is_none_or(|(_, _, r)| r.len() < 10));
}

#[test]
fn names_with_control_characters_render_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let raw = "evil\u{1b}[31m\nname\t\u{202e}x.binaryproto";
    let p = dir.path().join(raw);
    mean_file(&p, 1, 4, 4, &(0..16).map(|i| i as f32).collect::<Vec<_>>());
    let img = render_path(&p, &Default::default()).unwrap();
    save(&img, "control_name");
    let pic = render_picture(&p, &Default::default()).unwrap();
    let escaped = escape(raw);
    assert_eq!(escaped, "evil\\u{1b}[31m\\nname\\t\\u{202e}x.binaryproto");
    // The raw name draws exactly as its escaped text does.
    assert_eq!(img, annotate(&pic, &escaped).unwrap());
    assert_ne!(img, annotate(&pic, "evil.binaryproto").unwrap());
    // A long name is cut to the canvas, which does not grow past the title limit.
    let long = "n".repeat(5000);
    let cut = annotate(&pic, &long).unwrap();
    let limit = super::legend::TITLE_CHARS as u32 * 6 + 8;
    assert!(cut.width <= img.width.max(limit), "{}", cut.width);
    // Non-ASCII text draws as '?', never a panic.
    annotate(&pic, "名前\u{0}.bin").unwrap();
    // Names inside the file (a Caffe layer) are escaped too.
    let m = dir.path().join("net.caffemodel");
    let layer = WeightsLayer {
        name: "conv\u{1b}[2J\r1".into(),
        type_name: Some("Convolution".into()),
        blobs: vec![RawBlob::from_f32(
            &[2, 1, 2, 2],
            &[0.0, 1.0, 2.0, 3.0, 3.0, 2.0, 1.0, 0.0],
        )],
    };
    std::fs::write(&m, encode_weights_model(Some("n"), &[layer])).unwrap();
    let o = RenderOptions {
        layer: Some("conv\u{1b}[2J\r1".into()),
        ..Default::default()
    };
    let pic = render_picture(&m, &o).unwrap();
    assert_eq!(
        title_lines("net.caffemodel", &pic.legend)[1],
        "layer conv\\u{1b}[2J\\r1 (Convolution), 2 filters 1x2x2"
    );
    render_path(&m, &o).unwrap();
}

#[test]
fn nan_infinite_huge_and_constant_values_get_a_sane_bar() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("odd.pvp");
    let n = 20 * 20;
    let ramp = |lo: f32, hi: f32| -> Vec<f32> {
        (0..n)
            .map(|i| (lo as f64 + (hi as f64 - lo as f64) * (i as f64 / (n - 1) as f64)) as f32)
            .collect()
    };
    let mut odd = ramp(-1.0, 1.0);
    odd[0] = f32::NAN;
    odd[1] = f32::INFINITY;
    odd[2] = f32::NEG_INFINITY;
    let huge = ramp(-3.0e38, 3.0e38);
    let constant = vec![5.0f32; n];
    let all_nan = vec![f32::NAN; n];
    dense_file(&p, 20, 20, 1, &[odd, huge, constant, all_nan]);
    let frame = |k| RenderOptions {
        frame: Some(k),
        ..Default::default()
    };
    // NaN and infinities: the bar spans the finite range; a NaN swatch is labelled.
    let pic = render_picture(&p, &frame(0)).unwrap();
    let img = render_path(&p, &frame(0)).unwrap();
    save(&img, "nan_inf");
    assert_bar(&img, &pic.image);
    let lines = title_lines("odd.pvp", &pic.legend);
    assert!(lines[2].ends_with("(1 NaN, 1 +inf, 1 -inf)"), "{lines:?}");
    let swatch = (pic.image.width..img.width)
        .flat_map(|x| (0..img.height).map(move |y| (x, y)))
        .filter(|&(x, y)| img.pixel(x, y) == Some(NAN_COLOR))
        .count();
    assert!(swatch > 50, "NaN swatch: {swatch}");
    // +inf draws as the top colour, -inf as the bottom (pixels 1 and 2 of row 0).
    let k = pic.image.width / 24; // 20 + 2 * 2 gap, enlarged
    let at = |i: u32| pic.image.pixel((2 + i) * k + k / 2, 2 * k + k / 2);
    assert_eq!(at(1), Some(Colormap::Viridis.color(1.0)));
    assert_eq!(at(2), Some(Colormap::Viridis.color(0.0)));
    // A range as wide as f32 allows: still a full ramp, ticks in exponent form.
    let pic = render_picture(&p, &frame(1)).unwrap();
    let img = render_path(&p, &frame(1)).unwrap();
    save(&img, "huge");
    assert_bar(&img, &pic.image);
    assert_eq!(
        title_lines("odd.pvp", &pic.legend)[2],
        "range -3.00e+38 .. 3.00e+38"
    );
    let (lo, hi) = (
        pic.image.pixel(2 * k, 2 * k),
        pic.image.pixel(21 * k, 21 * k),
    );
    assert_ne!(lo, hi, "the huge ramp is not one colour");
    // Constant: one colour, one labelled tick.
    let pic = render_picture(&p, &frame(2)).unwrap();
    let img = render_path(&p, &frame(2)).unwrap();
    save(&img, "constant");
    let (x, top, run) = find_bar(&img, pic.image.width).expect("bar");
    assert!(run.len() >= 60 && run.iter().all(|&i| i == 0), "{run:?}");
    assert!(ink_pixels(&img, x + 1..img.width, top..top + run.len() as u32) > 5);
    assert_eq!(title_lines("odd.pvp", &pic.legend)[2], "constant 5");
    // No finite values at all: no ramp, the NaN swatch, and a title that says so.
    let pic = render_picture(&p, &frame(3)).unwrap();
    let img = render_path(&p, &frame(3)).unwrap();
    save(&img, "all_nan");
    assert!(find_bar(&img, pic.image.width).is_none_or(|(_, _, r)| r.len() < 10));
    assert!(img.rgb.chunks(3).skip(1).any(|c| c == NAN_COLOR));
    assert_eq!(
        title_lines("odd.pvp", &pic.legend)[2],
        format!("no finite values ({n} NaN)")
    );
}

#[test]
fn small_pictures_grow_to_fit_their_title() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("tiny.binaryproto");
    mean_file(&p, 1, 1, 1, &[7.0]);
    let pic = render_picture(&p, &Default::default()).unwrap();
    let img = render_path(&p, &Default::default()).unwrap();
    save(&img, "tiny");
    let lines = title_lines("tiny.binaryproto", &pic.legend);
    let need = lines.iter().map(|l| l.len()).max().unwrap() as u32 * 6 + 8;
    assert!(img.width >= need, "{} < {need}", img.width);
    assert!(img.height >= band(1) + 64, "room for the bar");
    let _ = BACKGROUND;
}

// ---- the pictures under docs/render ----

fn docs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/render")
}

/// Writes one file of each kind the docs show into `dir`.
fn docs_inputs(dir: &Path) -> Vec<(&'static str, PathBuf, RenderOptions)> {
    let opts = |frame: Option<usize>, layer: Option<&str>, counts: bool| RenderOptions {
        counts,
        frame,
        layer: layer.map(String::from),
    };
    // PVP activity: 64 x 48, 3 frames of moving waves; frame 2 is drawn.
    let act = dir.join("activity.pvp");
    let frames: Vec<Vec<f32>> = (0..3)
        .map(|k| {
            (0..48 * 64)
                .map(|i| {
                    let (x, y) = ((i % 64) as f32, (i / 64) as f32);
                    ((x / 6.0 + k as f32).sin() * (y / 5.0).cos()).max(0.0) * 0.8
                })
                .collect()
        })
        .collect();
    dense_file(&act, 64, 48, 1, &frames);
    // PVP weights: 16 oriented Gabor-like kernels of 9x9.
    let wts = dir.join("weights.pvp");
    let g = WeightGeometry::kernel(4, 4, 1, 9, 9, 1, 1);
    let mut values = Vec::new();
    for p in 0..16 {
        let th = p as f32 * std::f32::consts::PI / 8.0;
        for y in 0..9 {
            for x in 0..9 {
                let (dx, dy) = (x as f32 - 4.0, y as f32 - 4.0);
                let u = dx * th.cos() + dy * th.sin();
                let env = (-(dx * dx + dy * dy) / 10.0).exp();
                values.push(0.05 * env * (1.2 * u + p as f32 * 0.4).cos());
            }
        }
    }
    let mut w = WeightWriter::new(std::fs::File::create(&wts).unwrap(), g, false).unwrap();
    w.write_frame(1000.0, &values).unwrap();
    w.finish().unwrap();
    // Hexagonal SOM: side 5 (19 neurons) of 12x12 blobs at moving centres.
    let som = dir.join("som_hex5.bin");
    let grid = MapLayout::Hexagonal(HexGrid::new(5).unwrap());
    let n = grid.neuron_count();
    let mut v = Vec::new();
    for k in 0..n {
        let (cx, cy) = (3.0 + (k % 5) as f32 * 1.5, 3.0 + (k / 5) as f32 * 1.5);
        for y in 0..12 {
            for x in 0..12 {
                let r2 = (x as f32 - cx).powi(2) + (y as f32 - cy).powi(2);
                v.push((-r2 / 8.0).exp());
            }
        }
    }
    let t = Tensor::from_vec(v, [n, 12, 12], Order::RowMajor).unwrap();
    let mut b = Vec::new();
    write_som(&mut b, &grid, &[12, 12], &t, &WriteConfig::default()).unwrap();
    std::fs::write(&som, b).unwrap();
    let map = counts_mapping(dir);
    // Caffe: 16 colour filters 3x7x7 (BGR), and a 3x32x32 mean (blue ramps in x,
    // green in y, red constant).
    let model = dir.join("net.caffemodel");
    let mut f = Vec::new();
    for i in 0..16 {
        let th = i as f32 * std::f32::consts::PI / 8.0;
        for c in 0..3 {
            for y in 0..7 {
                for x in 0..7 {
                    let (dx, dy) = (x as f32 - 3.0, y as f32 - 3.0);
                    let u = dx * th.cos() + dy * th.sin();
                    let phase = c as f32 * (i % 4) as f32 * 0.9;
                    f.push((-(dx * dx + dy * dy) / 8.0).exp() * (1.3 * u + phase).cos());
                }
            }
        }
    }
    let layer = WeightsLayer {
        name: "conv1".into(),
        type_name: Some("Convolution".into()),
        blobs: vec![RawBlob::from_f32(&[16, 3, 7, 7], &f)],
    };
    std::fs::write(&model, encode_weights_model(Some("net"), &[layer])).unwrap();
    let mean = dir.join("mean.binaryproto");
    let mut m = Vec::new();
    for c in 0..3 {
        for y in 0..32 {
            for x in 0..32 {
                m.push(match c {
                    0 => 60.0 + 5.0 * x as f32,
                    1 => 60.0 + 4.0 * y as f32,
                    _ => 90.0,
                });
            }
        }
    }
    mean_file(&mean, 3, 32, 32, &m);
    vec![
        ("pvp_activity", act, opts(Some(2), None, false)),
        ("pvp_weights", wts, opts(None, None, false)),
        ("som_hex", som, opts(None, None, false)),
        ("bmu_counts", map, opts(None, None, true)),
        ("caffe_filters", model, opts(None, Some("conv1"), false)),
        ("caffe_mean", mean, opts(None, None, false)),
    ]
}

fn decode(path: &Path) -> Option<Image> {
    let bytes = std::fs::read(path).ok()?;
    let mut r = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .ok()?;
    let mut buf = vec![0; r.output_buffer_size()?];
    let info = r.next_frame(&mut buf).ok()?;
    buf.truncate(info.buffer_size());
    Some(Image {
        width: info.width,
        height: info.height,
        rgb: buf,
    })
}

#[test]
fn docs_pictures_are_current() {
    let dir = tempfile::tempdir().unwrap();
    let update = std::env::var_os("TENSORFMT_UPDATE_DOCS").is_some();
    let mut stale = Vec::new();
    for (name, path, o) in docs_inputs(dir.path()) {
        let img = render_path(&path, &o).unwrap_or_else(|e| panic!("{name}: {e}"));
        let out = docs_dir().join(format!("{name}.png"));
        if update {
            std::fs::create_dir_all(docs_dir()).unwrap();
            write_png(&img, &out).unwrap();
        } else if decode(&out).as_ref() != Some(&img) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "docs/render pictures out of date: {stale:?}; run \
         TENSORFMT_UPDATE_DOCS=1 cargo test -p tensorfmt docs_pictures_are_current"
    );
}
