//! Render tests: PNG size and pixel checks for tiny cartesian and hexagonal SOMs and a
//! mapping heat map, PNG round trip, and every corpus SOM/mapping rendered (written to
//! `$TENSORFMT_RENDER_OUT` when set, for looking at them).

use std::path::Path;

use tensorfmt_core::{Order, Tensor};
use tensorfmt_som::{write_mapping, write_som, HexGrid, MapLayout, WriteConfig};

use super::colormap::{Colormap, BACKGROUND};
use super::{render_picture, write_png, Image, RenderOptions};

/// The picture without its legend (title band and colour bar), whose pixel layout
/// these tests check; `tests_legend` checks the legend.
fn render_path(p: &Path, o: &RenderOptions) -> tensorfmt_core::Result<Image> {
    render_picture(p, o).map(|p| p.image)
}

fn write(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut b = Vec::new();
    f(&mut b);
    std::fs::write(path, b).unwrap();
}

fn viridis(t: f32) -> Option<[u8; 3]> {
    Some(Colormap::Viridis.color(t))
}

#[test]
fn som_legend_gives_neuron_dims_as_rows_x_columns() {
    // Neurons of 2 rows and 3 columns ([h, w], PINK's header order, numpy's shape):
    // "2x3", as tensorfmt.plot.som and the data entries' "CxHxW" say (it said 3x2).
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.bin");
    let t = Tensor::from_vec(vec![0.5f32; 2 * 6], [2, 2, 3], Order::RowMajor).unwrap();
    write(&p, |b| {
        write_som(
            b,
            &MapLayout::Cartesian(vec![2]),
            &[2, 3],
            &t,
            &WriteConfig::default(),
        )
        .unwrap()
    });
    let what = render_picture(&p, &RenderOptions::default())
        .unwrap()
        .legend
        .what;
    assert_eq!(what, "SOM cartesian 2, 2 neurons 2x3");
}

#[test]
fn tiny_cartesian_som() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.bin");
    // SOM [2, 3], neurons [2, 2]; neuron n holds n*10 + [0, 1, 2, 3].
    let v: Vec<f32> = (0..6)
        .flat_map(|n| (0..4).map(move |k| (n * 10 + k) as f32))
        .collect();
    let t = Tensor::from_vec(v, [2, 3, 2, 2], Order::RowMajor).unwrap();
    write(&p, |b| {
        write_som(
            b,
            &MapLayout::Cartesian(vec![2, 3]),
            &[2, 2],
            &t,
            &WriteConfig::default(),
        )
        .unwrap()
    });
    let img = render_path(&p, &RenderOptions::default()).unwrap();
    // Canvas 3*(2+2)+2 = 14 by 2*(2+2)+2 = 10, enlarged 400/14 = 28 -> 8 times.
    assert_eq!((img.width, img.height), (14 * 8, 10 * 8));
    let px = |x: u32, y: u32| img.pixel(x * 8 + 4, y * 8 + 4);
    assert_eq!(px(0, 0), Some(BACKGROUND));
    assert_eq!(px(1, 1), Some(BACKGROUND));
    // neuron (0, 0) at (2, 2): per-neuron min-max -> 0, 1/3, 2/3, 1
    assert_eq!(px(2, 2), viridis(0.0));
    assert_eq!(px(3, 2), viridis(1.0 / 3.0));
    assert_eq!(px(3, 3), viridis(1.0));
    // neuron (1, 2) = n 5 at block row 1, column 2: (2 + 2*4, 2 + 4) = (10, 6)
    assert_eq!(px(10, 6), viridis(0.0));
    assert_eq!(px(11, 7), viridis(1.0));
    assert_eq!(px(12, 6), Some(BACKGROUND));
    // PNG round trip.
    let out = dir.path().join("c.png");
    write_png(&img, &out).unwrap();
    let dec = png::Decoder::new(std::io::Cursor::new(std::fs::read(&out).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!(
        (info.width, info.height, info.color_type),
        (112, 80, png::ColorType::Rgb)
    );
    assert_eq!(&buf[..info.buffer_size()], &img.rgb[..]);
}

#[test]
fn tiny_hexagonal_som_and_two_channels() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("h.bin");
    // Hexagonal 3x3 (7 neurons), 2-channel neurons [2, 4, 4]: channel 0 ramps along x,
    // channel 1 is constant.
    let mut v = Vec::new();
    for _ in 0..7 {
        for _row in 0..4 {
            v.extend((0..4).map(|x| x as f32));
        }
        v.extend(std::iter::repeat_n(5.0f32, 16));
    }
    let t = Tensor::from_vec(v, [7, 2, 4, 4], Order::RowMajor).unwrap();
    let compat = WriteConfig {
        pink_cli_compat: true,
        end_line: false,
        ..WriteConfig::default()
    };
    write(&p, |b| {
        write_som(
            b,
            &MapLayout::Hexagonal(HexGrid::new(3).unwrap()),
            &[2, 4, 4],
            &t,
            &compat,
        )
        .unwrap()
    });
    let img = render_path(&p, &RenderOptions::default()).unwrap();
    // One panel: 3*(4+2)+2 = 20 wide, ceil(2*0.75*6) + 4 + 4 = 17 high; two panels 6 apart.
    let (w, h) = (20 + 6 + 20, 17);
    let k = (400 / w).clamp(1, 8) as u32;
    assert_eq!((img.width, img.height), (w as u32 * k, h * k));
    let px = |x: u32, y: u32| img.pixel(x * k + k / 2, y * k + k / 2);
    // Neuron 0 (row 0, k 0) at (5, 2): its top corners are masked, its middle drawn.
    assert_eq!(px(5, 2), Some(BACKGROUND));
    assert_eq!(px(8, 2), Some(BACKGROUND));
    assert_eq!(px(5, 4), viridis(0.0));
    assert_eq!(px(8, 4), viridis(1.0));
    // Neuron 2 (row 1, k 0) at (2, 7); neuron 6 (row 2, k 1) at (11, 11).
    assert_eq!(px(2, 9), viridis(0.0));
    assert_eq!(px(14, 13), viridis(1.0));
    // Row 1 starts one half cell left of row 0: (0..2) is background in row 0's band.
    assert_eq!(px(3, 3), Some(BACKGROUND));
    // Channel 1 panel: constant neurons map to the low end of the colour map.
    assert_eq!(px(26 + 5, 4), viridis(0.0));
    assert_eq!(px(26 + 5, 2), Some(BACKGROUND));
}

#[test]
fn mapping_heatmap_counts() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.bin");
    // 3 entries over a [1, 2] map: entries 0 and 1 match neuron 1, entry 2 neuron 0.
    let d = Tensor::from_vec(vec![5f32, 1., 4., 2., 0., 9.], [3, 1, 2], Order::RowMajor).unwrap();
    write(&p, |b| {
        write_mapping(
            b,
            &MapLayout::Cartesian(vec![1, 2]),
            &d,
            &WriteConfig::default(),
        )
        .unwrap()
    });
    let o = RenderOptions {
        counts: true,
        ..RenderOptions::default()
    };
    let img = render_path(&p, &o).unwrap();
    let (w, h) = (2 * 26 + 2, 26 + 2);
    let k = (400 / w).clamp(1, 8) as u32;
    assert_eq!((img.width, img.height), (w as u32 * k, h as u32 * k));
    assert_eq!(img.pixel(10 * k, 10 * k), viridis(0.0)); // 1 match
    assert_eq!(img.pixel(40 * k, 10 * k), viridis(1.0)); // 2 matches
    assert_eq!(img.pixel(0, 0), Some(BACKGROUND));
    // One entry's distances instead of counts.
    let o = RenderOptions {
        frame: Some(2),
        ..RenderOptions::default()
    };
    let img = render_path(&p, &o).unwrap();
    assert_eq!(img.pixel(10 * k, 10 * k), viridis(0.0));
    assert_eq!(img.pixel(40 * k, 10 * k), viridis(1.0));
}

#[test]
fn unrenderable_inputs_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.bin");
    std::fs::write(&p, b"not a tensor file").unwrap();
    assert!(render_path(&p, &RenderOptions::default()).is_err());
    let bad = Image {
        width: 2,
        height: 2,
        rgb: vec![0; 5],
    };
    assert!(write_png(&bad, &dir.path().join("bad.png")).is_err());
    assert!(!dir.path().join("bad.png").exists());
}

#[test]
fn corpus_soms_and_mappings_render() {
    let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "som") else {
        return;
    };
    let out = std::env::var_os("TENSORFMT_RENDER_OUT").map(std::path::PathBuf::from);
    let files = [
        "upstream_v2/test_m_20_95_95.som",
        "upstream_v2/test_m_20_95_95@d9188e5.map",
        "upstream_v2/test_m_20_95_95.pink",
        "generated_v2/som_cart3x3.bin",
        "generated_v2/som_cart4x2.bin",
        "generated_v2/som_cart5x1.bin",
        "generated_v2/som_cart2x2x2.bin",
        "generated_v2/som_cart3x3_2ch.bin",
        "generated_v2/som_hex3.bin",
        "generated_v2/som_hex5.bin",
        "generated_v2/map_cart3x3.bin",
        "generated_v2/map_hex5.bin",
        "generated_v2/shapes16_2ch.bin",
        "legacy/som_10x10.bin",
    ];
    for f in files {
        let img = render_path(
            &dir.join(f),
            &RenderOptions {
                counts: true,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(
            img.width >= 100 && img.height >= 20,
            "{f}: {}x{}",
            img.width,
            img.height
        );
        assert!(img.rgb.chunks(3).any(|c| c != BACKGROUND), "{f} is blank");
        if let Some(o) = &out {
            std::fs::create_dir_all(o).unwrap();
            let name = f.replace(['/', '@'], "_") + ".png";
            write_png(&img, &o.join(name)).unwrap();
        }
    }
}
