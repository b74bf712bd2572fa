//! PVP render tests: pixel checks on small synthetic weight and activity files written
//! with `tensorfmt_pvp::write` (tile positions, gaps, per-tile scaling of constant and
//! ramp tiles, RGB patches, feature rows, arbors), errors, and corpus files (sizes and
//! pixels; written to `$TENSORFMT_RENDER_OUT` when set, for looking at them).

use std::path::{Path, PathBuf};

use tensorfmt_pvp::write::{DenseWriter, SparseWriter, WeightGeometry, WeightWriter};

use super::colormap::{Colormap, BACKGROUND};
use super::tableau::{GAP, INNER_GAP, PANEL_GAP};
use super::{render_picture, write_png, Image, RenderOptions};

/// The picture without its legend (title band and colour bar), whose pixel layout
/// these tests check; `tests_legend` checks the legend.
fn render_path(p: &Path, o: &RenderOptions) -> tensorfmt_core::Result<Image> {
    render_picture(p, o).map(|p| p.image)
}

fn viridis(t: f32) -> Option<[u8; 3]> {
    Some(Colormap::Viridis.color(t))
}

/// Pixel `(x, y)` of the picture before enlargement by `k` (centre of the block).
fn px(img: &Image, k: u32, x: u32, y: u32) -> Option<[u8; 3]> {
    img.pixel(x * k + k / 2, y * k + k / 2)
}

fn weights_file(dir: &Path, name: &str, g: WeightGeometry, frames: &[Vec<f32>]) -> PathBuf {
    let p = dir.join(name);
    let mut w = WeightWriter::new(std::fs::File::create(&p).unwrap(), g, false).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(i as f64, f).unwrap();
    }
    w.finish().unwrap();
    p
}

fn dense_file(dir: &Path, nx: usize, ny: usize, nf: usize, frames: &[Vec<f32>]) -> PathBuf {
    let p = dir.join(format!("dense_{nx}x{ny}x{nf}.pvp"));
    let mut w = DenseWriter::new(std::fs::File::create(&p).unwrap(), nx, ny, nf).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(i as f64, f).unwrap();
    }
    w.finish().unwrap();
    p
}

fn opts(frame: Option<usize>, layer: Option<&str>) -> RenderOptions {
    RenderOptions {
        counts: false,
        frame,
        layer: layer.map(String::from),
    }
}

fn err(p: &Path, o: &RenderOptions) -> String {
    render_path(p, o).unwrap_err().to_string()
}

#[test]
fn kernel_tiles_positions_gaps_and_per_tile_scaling() {
    let dir = tempfile::tempdir().unwrap();
    // 4 kernels of 3 wide x 2 high, nfp 1: constant 5, ramp 0..5, descending ramp
    // scaled by 100, and a ramp with one NaN.
    let ramp: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let mut v = vec![5.0; 6];
    v.extend(&ramp);
    v.extend(ramp.iter().map(|x| 100.0 * (5.0 - x)));
    v.extend(ramp.iter().map(|&x| if x == 1.0 { f32::NAN } else { x }));
    let g = WeightGeometry::kernel(2, 2, 1, 3, 2, 1, 1);
    let p = weights_file(dir.path(), "k.pvp", g, &[v]);
    let img = render_path(&p, &RenderOptions::default()).unwrap();
    // Near-square: 2 columns of 3x2 cells -> (2 + 2*5) x (2 + 2*4) = 12 x 10, enlarged 8x.
    assert_eq!((img.width, img.height), (96, 80));
    let k = 8;
    // Kernel origins: 0 (2,2), 1 (7,2), 2 (2,6), 3 (7,6).
    for (x, y) in [
        (0, 0),
        (1, 1),
        (5, 2),
        (6, 3),
        (2, 4),
        (2, 5),
        (11, 9),
        (10, 6),
    ] {
        assert_eq!(px(&img, k, x, y), Some(BACKGROUND), "gap at ({x}, {y})");
    }
    for (x, y) in [(2, 2), (4, 2), (3, 3)] {
        assert_eq!(px(&img, k, x, y), viridis(0.0), "constant tile");
    }
    for yy in 0..2 {
        for xx in 0..3 {
            let t = (yy * 3 + xx) as f32 / 5.0;
            assert_eq!(px(&img, k, 7 + xx, 2 + yy), viridis(t), "ramp");
            assert_eq!(px(&img, k, 2 + xx, 6 + yy), viridis(1.0 - t), "scaled ramp");
        }
    }
    assert_eq!(px(&img, k, 8, 6), Some(super::colormap::NAN_COLOR));
    assert_eq!(px(&img, k, 9, 7), viridis(1.0));
    assert_eq!(px(&img, k, 7, 6), viridis(0.0));
}

#[test]
fn rgb_kernels_are_scaled_jointly_over_their_channels() {
    let dir = tempfile::tempdir().unwrap();
    // 2 kernels 2x2x3; value (p, y, x, c) = 10p + 3(2y + x) + c: each patch spans 11.
    let v: Vec<f32> = (0..2)
        .flat_map(|p| (0..12).map(move |i| (10 * p + i) as f32))
        .collect();
    let g = WeightGeometry::kernel(1, 1, 2, 2, 2, 3, 1);
    let p = weights_file(dir.path(), "rgb.pvp", g, &[v]);
    let img = render_path(&p, &RenderOptions::default()).unwrap();
    // One row (the tie between 1x2 and 2x1 goes to more columns): 10 x 6, enlarged 8x.
    assert_eq!((img.width, img.height), (80, 48));
    let rgb = |i: usize| {
        let c = |j: usize| ((3 * i + j) as f32 / 11.0 * 255.0).round() as u8;
        Some([c(0), c(1), c(2)])
    };
    for patch in 0..2u32 {
        for i in 0..4usize {
            let (x, y) = (2 + 4 * patch + (i % 2) as u32, 2 + (i / 2) as u32);
            assert_eq!(px(&img, 8, x, y), rgb(i), "patch {patch} pixel {i}");
        }
    }
    assert_eq!(px(&img, 8, 2, 4), Some(BACKGROUND));
    assert_eq!(px(&img, 8, 4, 2), Some(BACKGROUND));
    assert_eq!(px(&img, 8, 5, 3), Some(BACKGROUND));
}

#[test]
fn feature_rows_for_other_nfp_and_non_shared_weights() {
    let dir = tempfile::tempdir().unwrap();
    // Non-shared over a 3x1x1 pre layer: 3 patches of 2 wide x 1 high x 2 features.
    // Feature 0 is [p, p+1] (ramp), feature 1 constant.
    let v: Vec<f32> = (0..3)
        .flat_map(|p| [p as f32, 7.0, p as f32 + 1.0, 7.0])
        .collect();
    let g = WeightGeometry::non_shared(3, 1, 1, 0, 0, 2, 1, 2, 1);
    let p = weights_file(dir.path(), "ns.pvp", g, &[v]);
    let img = render_path(&p, &RenderOptions::default()).unwrap();
    // Cells 2*2+1 = 5 wide, 1 high: one column of 3 -> 9 x 11, enlarged 8x.
    assert_eq!((img.width, img.height), (72, 88));
    for patch in 0..3 {
        let y = GAP as u32 + 3 * patch;
        assert_eq!(px(&img, 8, 2, y), viridis(0.0));
        assert_eq!(px(&img, 8, 3, y), viridis(1.0));
        assert_eq!(px(&img, 8, 4, y), Some(BACKGROUND), "inner gap");
        let f1 = (GAP + 2 + INNER_GAP) as u32;
        assert_eq!(px(&img, 8, f1, y), viridis(0.0), "constant feature");
        assert_eq!(px(&img, 8, f1 + 1, y), viridis(0.0));
        assert_eq!(px(&img, 8, 2, y + 1), Some(BACKGROUND));
    }
}

#[test]
fn single_value_patches_are_scaled_jointly() {
    let dir = tempfile::tempdir().unwrap();
    // 3 kernels of 1x1x1: per-tile scaling would paint all three alike.
    let g = WeightGeometry::kernel(1, 1, 3, 1, 1, 1, 1);
    let p = weights_file(dir.path(), "one.pvp", g, &[vec![0.0, 5.0, 10.0]]);
    let img = render_path(&p, &RenderOptions::default()).unwrap();
    // 3 cells of 1x1 in 2 columns: 8 x 8, enlarged 8x.
    assert_eq!((img.width, img.height), (64, 64));
    assert_eq!(px(&img, 8, 2, 2), viridis(0.0));
    assert_eq!(px(&img, 8, 5, 2), viridis(0.5));
    assert_eq!(px(&img, 8, 2, 5), viridis(1.0));
    // 1x1x2 patches: a row of two 1x1 feature tiles, all scaled jointly.
    let g = WeightGeometry::kernel(1, 1, 2, 1, 1, 2, 1);
    let p = weights_file(dir.path(), "two.pvp", g, &[vec![0.0, 1.0, 2.0, 4.0]]);
    let img = render_path(&p, &RenderOptions::default()).unwrap();
    assert_eq!(px(&img, 8, 2, 2), viridis(0.0));
    assert_eq!(px(&img, 8, 4, 2), viridis(0.25));
}

#[test]
fn arbors_are_panels_or_selected_and_frames_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    // 2 arbors x 1 kernel of 1x2 (nyp 2); arbor 0 ramps down, arbor 1 up; 2 frames.
    let g = WeightGeometry::kernel(1, 1, 1, 1, 2, 1, 2);
    let f0 = vec![1.0, 0.0, 0.0, 1.0];
    let f1 = vec![0.0, 1.0, 1.0, 0.0];
    let p = weights_file(dir.path(), "arb.pvp", g, &[f0, f1]);
    let img = render_path(&p, &RenderOptions::default()).unwrap();
    // Each panel 5 x 6; side by side with PANEL_GAP: 16 x 6, enlarged 8x.
    let w = 5 + PANEL_GAP as u32 + 5;
    assert_eq!((img.width, img.height), (w * 8, 48));
    let x1 = 5 + PANEL_GAP as u32 + 2;
    assert_eq!(px(&img, 8, 2, 2), viridis(1.0));
    assert_eq!(px(&img, 8, 2, 3), viridis(0.0));
    assert_eq!(px(&img, 8, x1, 2), viridis(0.0));
    assert_eq!(px(&img, 8, x1, 3), viridis(1.0));
    assert_eq!(px(&img, 8, 4, 2), Some(BACKGROUND));
    // Arbor 1 alone, frame 1 (arbor 1 of frame 1 ramps down).
    let one = render_path(&p, &opts(Some(1), Some("arbor 1"))).unwrap();
    assert_eq!((one.width, one.height), (5 * 8, 48));
    assert_eq!(px(&one, 8, 2, 2), viridis(1.0));
    assert_eq!(px(&one, 8, 2, 3), viridis(0.0));
    let e = err(&p, &opts(None, Some("2")));
    assert!(e.contains("arbor 2") && e.contains("2 arbors"), "{e}");
    let e = err(&p, &opts(None, Some("conv1")));
    assert!(e.contains("arbor by number"), "{e}");
    let e = err(&p, &opts(Some(2), None));
    assert!(e.contains("frame 2") && e.contains("2 frames"), "{e}");
}

#[test]
fn dense_activity_frames_gray_rgb_and_feature_grids() {
    let dir = tempfile::tempdir().unwrap();
    // nf 1, 3 wide x 2 high, two frames: frame 1 ramps.
    let p = dense_file(
        dir.path(),
        3,
        2,
        1,
        &[vec![0.0; 6], (0..6).map(|i| i as f32).collect()],
    );
    let img = render_path(&p, &opts(Some(1), None)).unwrap();
    assert_eq!((img.width, img.height), (7 * 8, 6 * 8));
    assert_eq!(px(&img, 8, 1, 1), Some(BACKGROUND));
    for i in 0..6u32 {
        assert_eq!(
            px(&img, 8, 2 + i % 3, 2 + i / 3),
            viridis(i as f32 / 5.0),
            "value {i}"
        );
    }
    let e = err(&p, &opts(Some(2), None));
    assert!(e.contains("frame 2") && e.contains("2 frames"), "{e}");
    let e = err(&p, &opts(None, Some("conv1")));
    assert!(e.contains("no layers"), "{e}");
    let e = err(
        &p,
        &RenderOptions {
            counts: true,
            ..Default::default()
        },
    );
    assert!(e.contains("counts"), "{e}");

    // nf 3, 2x1: RGB, jointly scaled over the whole frame (0..5).
    let p = dense_file(dir.path(), 2, 1, 3, &[(0..6).map(|i| i as f32).collect()]);
    let img = render_path(&p, &RenderOptions::default()).unwrap();
    assert_eq!((img.width, img.height), (6 * 8, 5 * 8));
    assert_eq!(px(&img, 8, 2, 2), Some([0, 51, 102]));
    assert_eq!(px(&img, 8, 3, 2), Some([153, 204, 255]));

    // nf 2, 2x2: one feature map per feature, each scaled to itself, side by side
    // (near-square: 2 columns of 2x2 maps).
    let v: Vec<f32> = (0..4).flat_map(|i| [i as f32, 10.0 - i as f32]).collect();
    let p = dense_file(dir.path(), 2, 2, 2, &[v]);
    let img = render_path(&p, &RenderOptions::default()).unwrap();
    assert_eq!((img.width, img.height), (10 * 8, 6 * 8));
    assert_eq!(px(&img, 8, 2, 2), viridis(0.0));
    assert_eq!(px(&img, 8, 3, 3), viridis(1.0));
    assert_eq!(px(&img, 8, 4, 2), Some(BACKGROUND));
    assert_eq!(px(&img, 8, 6, 2), viridis(1.0));
    assert_eq!(px(&img, 8, 7, 3), viridis(0.0));
}

#[test]
fn sparse_activity_is_densified() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.pvp");
    let mut w = SparseWriter::binary(std::fs::File::create(&p).unwrap(), 4, 2, 1).unwrap();
    w.write_frame(0.0, &[0, 5], &[]).unwrap();
    w.write_frame(1.0, &[3], &[]).unwrap();
    w.finish().unwrap();
    let img = render_path(&p, &opts(Some(1), None)).unwrap();
    assert_eq!((img.width, img.height), (8 * 8, 6 * 8));
    for i in 0..8u32 {
        let t = if i == 3 { 1.0 } else { 0.0 };
        assert_eq!(px(&img, 8, 2 + i % 4, 2 + i / 4), viridis(t), "neuron {i}");
    }
    let e = err(&p, &opts(Some(5), None));
    assert!(e.contains("frame 5") && e.contains("2 frames"), "{e}");
}

#[test]
fn non_pvp_inputs_have_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.npy");
    let t =
        tensorfmt_core::Tensor::from_vec(vec![1f32], [1], tensorfmt_core::Order::RowMajor).unwrap();
    crate::interop::npy::save(&p, &t, &Default::default()).unwrap();
    let e = err(&p, &RenderOptions::default());
    assert!(e.contains("npy files have no picture"), "{e}");
    // A truncated PVP header, recognised by its extension, reports the PVP error.
    let p = dir.path().join("short.pvp");
    std::fs::write(&p, [80u8, 0, 0, 0]).unwrap();
    assert!(render_path(&p, &RenderOptions::default()).is_err());
}

fn out_dir() -> Option<PathBuf> {
    std::env::var_os("TENSORFMT_RENDER_OUT").map(PathBuf::from)
}

fn save(img: &Image, name: &str) {
    if let Some(o) = out_dir() {
        std::fs::create_dir_all(&o).unwrap();
        write_png(img, &o.join(name.replace('/', "_") + ".png")).unwrap();
    }
}

/// (file, frame, layer, expected size)
type Case = (
    &'static str,
    Option<usize>,
    Option<&'static str>,
    (u32, u32),
);

#[test]
fn corpus_pvp_files_render() {
    let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "pvp") else {
        return;
    };
    // (file, frame, layer, expected size)
    let cases: [Case; 14] = [
        // 64 kernels 18x18x3 (RGB): 8x8 cells, 162 px, enlarged 2x.
        ("GPUSystemTest/weights.pvp", None, None, (324, 324)),
        // 24 kernels 18x18x1: 5x5 cells, 102 px, enlarged 3x.
        ("GPULCATest/weights.pvp", None, None, (306, 306)),
        // 3 arbors of one 3x3 kernel: 3 panels of 7x7 px, 6 apart -> 33 x 7, 8x.
        ("legacy/ReadArborFileTest/part1.pvp", None, None, (264, 56)),
        (
            "legacy/ReadArborFileTest/part1.pvp",
            None,
            Some("2"),
            (56, 56),
        ),
        // 400 non-shared 5x5 patches: 20x20 cells, 142 px, enlarged 3x (15-px tiles).
        ("InitWeightsFileTest/weights.pvp", None, None, (426, 426)),
        // 32 non-shared 4x4x3 patches (RGB): 6 x 6 cells -> 38 x 38 px, 8x.
        (
            "develop/BroadcastPreLayerTest/BroadcastLayerToOutput.pvp",
            None,
            None,
            (304, 304),
        ),
        // 12 kernels 7x7x8: rows of 8 feature tiles (63 px), one column -> 67 x 110, 3x.
        (
            "develop/SharedToLocalPatchWeightsTest/sharedWeights.pvp",
            None,
            None,
            (201, 330),
        ),
        // byte weights, 4 kernels 9x9x4: rows of 4 tiles (39 px): 1 x 4 -> 43 x 46, 8x.
        ("legacy/GPUSystemTest/w10_last.pvp", None, None, (344, 368)),
        (
            "NegativeConnFrameNumberTest/weights.pvp",
            Some(3),
            None,
            (40, 40),
        ),
        // 8x8x3 activity: RGB, 12 px, 8x.
        ("MaskLayerTest/input.pvp", Some(3), None, (96, 96)),
        // 128 x 64 x 1: 132 x 68 px, enlarged 3x.
        ("GPULCATest/correct.pvp", Some(39), None, (396, 204)),
        // 8 x 4 x 2: two feature maps, one above the other: 12 x 14 px, 8x.
        (
            "BufferUtilsPvpTest/input_8x4x2_x3.pvp",
            Some(2),
            None,
            (96, 112),
        ),
        // 64 x 64 x 6: 3 x 2 feature maps -> 200 x 134 px, 2x.
        ("StochasticReleaseTest/input.pvp", None, None, (400, 268)),
        // sparse binary 8 x 8 x 3, densified: RGB, 12 px, 8x.
        (
            "WriteActivitySparseTest/inputmovie.pvp",
            Some(4),
            None,
            (96, 96),
        ),
    ];
    let mut wrong = Vec::new();
    for (f, frame, layer, size) in cases {
        let img =
            render_path(&dir.join(f), &opts(frame, layer)).unwrap_or_else(|e| panic!("{f}: {e}"));
        if (img.width, img.height) != size {
            wrong.push(format!(
                "{f}: {}x{}, expected {size:?}",
                img.width, img.height
            ));
        }
        assert!(img.rgb.chunks(3).any(|c| c != BACKGROUND), "{f} is blank");
        let arbor = layer.map(|l| format!("_arbor{l}")).unwrap_or_default();
        save(&img, &format!("pvp_{f}_{}{arbor}", frame.unwrap_or(0)));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // MaskLayerTest: value(y, x, f) = 64 f + 8 y + x over 0..191 in frame 0 (spec §4):
    // pixel (x, y) of the frame is the values scaled jointly over the frame.
    let p = dir.join("MaskLayerTest/input.pvp");
    let tensorfmt_pvp::PvpFile::Dense(r) = tensorfmt_pvp::PvpFile::open(&p).unwrap() else {
        panic!("dense expected")
    };
    let v = r.frame_f32(0).unwrap();
    let (lo, hi) = super::canvas::min_max(&v).unwrap();
    let img = render_path(&p, &RenderOptions::default()).unwrap();
    for (x, y) in [(0usize, 0usize), (1, 0), (7, 7), (3, 5)] {
        let i = 3 * (8 * y + x);
        let want = super::tableau::rgb_pixel([v[i], v[i + 1], v[i + 2]], (lo, hi));
        assert_eq!(px(&img, 8, 2 + x as u32, 2 + y as u32), Some(want));
    }
    let e = err(&dir.join("GPULCATest/correct.pvp"), &opts(Some(40), None));
    assert!(e.contains("frame 40") && e.contains("40 frames"), "{e}");
}

#[test]
fn every_corpus_pvp_file_renders_its_first_frame() {
    let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "pvp") else {
        return;
    };
    let mut stack = vec![dir.clone()];
    let mut n = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "pvp") {
                let pic = render_picture(&p, &RenderOptions::default())
                    .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                let img = &pic.image;
                assert!(img.width >= 40 && img.height >= 40, "{}", p.display());
                assert!(img.width <= 4000 && img.height <= 4000, "{}", p.display());
                // With its legend: the picture under the title band, never smaller.
                let name = p.file_name().unwrap().to_string_lossy();
                let full = super::legend::annotate(&pic, &name).unwrap();
                assert!(full.width >= img.width && full.height > img.height);
                let rel = p.strip_prefix(&dir).unwrap().display().to_string();
                save(&full, &format!("all_{rel}"));
                n += 1;
            }
        }
    }
    assert!(n >= 30, "only {n} corpus PVP files");
}
