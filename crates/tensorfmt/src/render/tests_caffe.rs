//! Caffe render tests: pixel checks on small V2 models written with
//! `tensorfmt_caffe::encode_weights_model` (filter positions, gaps, per-tile scaling of
//! constant and ramp filters, RGB filters scaled jointly, channel rows), the fixtures of
//! `testdata/caffe` (V0/V1 models, mean file, solver state), errors, and corpus models
//! (sizes; written to `$TENSORFMT_RENDER_OUT` when set, for looking at them).

use std::path::{Path, PathBuf};

use tensorfmt_caffe::{encode_weights_model, RawBlob, WeightsLayer};

use super::colormap::{Colormap, BACKGROUND};
use super::tableau::{rgb_pixel, INNER_GAP};
use super::{render_picture, write_png, Image, RenderOptions};

/// The picture without its legend (title band and colour bar), whose pixel layout
/// these tests check; `tests_legend` checks the legend.
fn render_path(p: &Path, o: &RenderOptions) -> tensorfmt_core::Result<Image> {
    render_picture(p, o).map(|p| p.image)
}

fn viridis(t: f32) -> Option<[u8; 3]> {
    Some(Colormap::Viridis.color(t))
}

/// Pixel `(x, y)` of the picture before enlargement by `k`.
fn px(img: &Image, k: u32, x: u32, y: u32) -> Option<[u8; 3]> {
    img.pixel(x * k + k / 2, y * k + k / 2)
}

fn layer(name: &str, ty: &str, shape: &[i64], values: &[f32]) -> WeightsLayer {
    WeightsLayer {
        name: name.into(),
        type_name: Some(ty.into()),
        blobs: vec![RawBlob::from_f32(shape, values)],
    }
}

fn layer_opt(name: &str) -> RenderOptions {
    RenderOptions {
        layer: Some(name.into()),
        ..Default::default()
    }
}

fn err(p: &Path, o: &RenderOptions) -> String {
    render_path(p, o).unwrap_err().to_string()
}

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/caffe")
        .join(name)
}

/// conv1 `[3, 1, 2, 2]` (constant, ramp, negated ramp), rgb `[2, 3, 1, 2]`,
/// conv2 `[1, 2, 2, 1]` (a ramp channel, a constant channel), ip `[3, 2]`.
fn tiny_model(dir: &Path) -> PathBuf {
    let mut conv1 = vec![4.0; 4];
    conv1.extend([0.0, 1.0, 2.0, 3.0]);
    conv1.extend([0.0, -10.0, -20.0, -30.0]);
    let rgb: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let bytes = encode_weights_model(
        Some("tiny"),
        &[
            layer("conv1", "Convolution", &[3, 1, 2, 2], &conv1),
            layer("rgb", "Convolution", &[2, 3, 1, 2], &rgb),
            layer("conv2", "Convolution", &[1, 2, 2, 1], &[0.0, 1.0, 5.0, 5.0]),
            layer("ip", "InnerProduct", &[3, 2], &[0.0; 6]),
        ],
    );
    let p = dir.join("tiny.caffemodel");
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn single_channel_filters_positions_gaps_and_scaling() {
    let dir = tempfile::tempdir().unwrap();
    let p = tiny_model(dir.path());
    let img = render_path(&p, &layer_opt("conv1")).unwrap();
    // 3 cells of 2x2 in 2 columns: 10 x 10, enlarged 8x. Origins (2,2), (6,2), (2,6).
    assert_eq!((img.width, img.height), (80, 80));
    for (x, y) in [(0, 0), (4, 2), (5, 3), (2, 4), (6, 6), (9, 9)] {
        assert_eq!(px(&img, 8, x, y), Some(BACKGROUND), "gap at ({x}, {y})");
    }
    for i in 0..4u32 {
        let (x, y) = (i % 2, i / 2);
        let t = i as f32 / 3.0;
        assert_eq!(px(&img, 8, 2 + x, 2 + y), viridis(0.0), "constant filter");
        assert_eq!(px(&img, 8, 6 + x, 2 + y), viridis(t), "ramp filter");
        assert_eq!(px(&img, 8, 2 + x, 6 + y), viridis(1.0 - t), "negated ramp");
    }
}

#[test]
fn three_channel_filters_are_rgb_and_others_are_channel_rows() {
    let dir = tempfile::tempdir().unwrap();
    let p = tiny_model(dir.path());
    // rgb: 2 filters of 1 high x 2 wide, CHW; filter f channel c pixel x = 6f + 2c + x.
    let img = render_path(&p, &layer_opt("rgb")).unwrap();
    // 2 cells of 2 wide x 1 high, one above the other: 6 x 8, enlarged 8x.
    assert_eq!((img.width, img.height), (48, 64));
    for f in 0..2u32 {
        let base = 6.0 * f as f32;
        for x in 0..2u32 {
            let v = |c: f32| base + 2.0 * c + x as f32;
            // BGR: channel 2 is red, channel 0 blue.
            let want = rgb_pixel([v(2.0), v(1.0), v(0.0)], (base, base + 5.0));
            assert_eq!(
                px(&img, 8, 2 + x, 2 + 3 * f),
                Some(want),
                "filter {f} x {x}"
            );
        }
    }
    assert_eq!(px(&img, 8, 2, 2), Some([204, 102, 0])); // channel 2 (4.0 of 0..5) red
    assert_eq!(px(&img, 8, 3, 2), Some([255, 153, 51]));
    assert_eq!(px(&img, 8, 4, 2), Some(BACKGROUND));
    assert_eq!(px(&img, 8, 2, 3), Some(BACKGROUND));
    // conv2: one filter, 2 channels of 1 wide x 2 high -> a row of 2 tiles, 1 apart.
    let img = render_path(&p, &layer_opt("conv2")).unwrap();
    assert_eq!((img.width, img.height), (7 * 8, 6 * 8));
    assert_eq!(px(&img, 8, 2, 2), viridis(0.0));
    assert_eq!(px(&img, 8, 2, 3), viridis(1.0));
    assert_eq!(px(&img, 8, 3, 2), Some(BACKGROUND), "inner gap");
    let c1 = 2 + 1 + INNER_GAP as u32;
    assert_eq!(px(&img, 8, c1, 2), viridis(0.0), "constant channel");
    assert_eq!(px(&img, 8, c1, 3), viridis(0.0));
}

#[test]
fn layer_errors_list_the_filter_layers() {
    let dir = tempfile::tempdir().unwrap();
    let p = tiny_model(dir.path());
    let listing = "conv1 (3x1x2x2), rgb (2x3x1x2), conv2 (1x2x2x1)";
    let e = err(&p, &RenderOptions::default());
    assert!(
        e.contains("choose a conv layer") && e.contains(listing),
        "{e}"
    );
    let e = err(&p, &layer_opt("conv9"));
    assert!(
        e.contains("no layer \"conv9\"") && e.contains(listing),
        "{e}"
    );
    let e = err(&p, &layer_opt("ip"));
    assert!(
        e.contains("\"ip\" (InnerProduct) has weights of shape [3, 2]") && e.contains(listing),
        "{e}"
    );
    let e = err(
        &p,
        &RenderOptions {
            frame: Some(0),
            layer: Some("conv1".into()),
            ..Default::default()
        },
    );
    assert!(e.contains("no frames"), "{e}");
}

#[test]
fn fixtures_v0_v1_mean_and_pictureless_kinds() {
    // V0: conv1 stored as legacy (1, 1, 2, 2) = [-2, -1, 0, 1]: one 2x2 filter.
    let img = render_path(&testdata("v0_net.caffemodel"), &layer_opt("conv1")).unwrap();
    assert_eq!((img.width, img.height), (48, 48));
    assert_eq!(px(&img, 8, 2, 2), viridis(0.0));
    assert_eq!(px(&img, 8, 3, 3), viridis(1.0));
    // V1: inner-product weights in legacy (1, 1, 3, 2) are not filters.
    let e = err(&testdata("v1_legacy.caffemodel"), &layer_opt("ip1"));
    assert!(
        e.contains("not 4-d filters") && e.contains("4-d weights: none"),
        "{e}"
    );
    // Mean [1, 3, 2, 2] = -20, -10, ..., 90 in BGR order (channel 0 blue, as Caffe
    // and OpenCV store images), jointly scaled over -20..90.
    let img = render_path(&testdata("mean_legacy.binaryproto"), &Default::default()).unwrap();
    assert_eq!((img.width, img.height), (48, 48));
    for i in 0..4u32 {
        let v = |c: u32| -20.0 + 10.0 * (4 * c + i) as f32;
        let want = rgb_pixel([v(2), v(1), v(0)], (-20.0, 90.0));
        assert_eq!(px(&img, 8, 2 + i % 2, 2 + i / 2), Some(want));
    }
    for f in ["tiny.solverstate", "two.blobprotovector"] {
        let e = err(&testdata(f), &Default::default());
        assert!(e.contains("has no picture"), "{f}: {e}");
    }
}

#[test]
fn corpus_models_render() {
    let Some(dir) = tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe") else {
        return;
    };
    let out = std::env::var_os("TENSORFMT_RENDER_OUT").map(PathBuf::from);
    // (file, layer, expected size)
    let cases = [
        // 20 filters 1x5x5: 5 x 4 cells -> 37 x 30 px, enlarged 8x.
        ("v2_lenet_iter_10000.caffemodel", "conv1", (296, 240)),
        // 50 filters of 20 channel tiles (119 px wide): 2 x 25 cells -> 244 x 177 px,
        // enlarged 3x so the 5-pixel tiles get 15.
        ("v2_lenet_iter_10000.caffemodel", "conv2", (732, 531)),
        // 32 filters 3x5x5 as RGB: 6 x 6 cells -> 44 x 44 px, enlarged 8x.
        ("v1_cifar10_quick_iter_4000.caffemodel", "conv1", (352, 352)),
        ("v1_cifar10_full_iter_70000.caffemodel", "conv1", (352, 352)),
        // 10 filters 3x3x3 as RGB: 4 x 3 cells -> 22 x 17 px, enlarged 8x.
        ("mtcnn_det1.caffemodel", "conv1", (176, 136)),
        // 16 filters of 10 channel tiles 3x3 (39 px wide): one column -> 43 x 82, 4x.
        ("mtcnn_det1.caffemodel", "conv2", (172, 328)),
        // 28 filters 3x3x3 as RGB: 6 x 5 cells -> 32 x 27 px, enlarged 8x.
        ("mtcnn_det2.caffemodel", "conv1", (256, 216)),
    ];
    let mut wrong = Vec::new();
    for (f, name, size) in cases {
        let img = render_path(&dir.join(f), &layer_opt(name))
            .unwrap_or_else(|e| panic!("{f} {name}: {e}"));
        if (img.width, img.height) != size {
            wrong.push(format!(
                "{f} {name}: {}x{}, expected {size:?}",
                img.width, img.height
            ));
        }
        assert!(img.rgb.chunks(3).any(|c| c != BACKGROUND), "{f} is blank");
        if let Some(o) = &out {
            std::fs::create_dir_all(o).unwrap();
            write_png(&img, &o.join(format!("caffe_{f}_{name}.png"))).unwrap();
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // The error without a layer lists the conv layers with their shapes.
    let e = err(
        &dir.join("v2_lenet_iter_10000.caffemodel"),
        &Default::default(),
    );
    assert!(
        e.contains("conv1 (20x1x5x5), conv2 (50x20x5x5)") && !e.contains("ip1"),
        "{e}"
    );
    let img = render_path(&dir.join("mean_227.binaryproto"), &Default::default()).unwrap();
    assert!(img.width >= 227 && img.height >= 227);
    if let Some(o) = &out {
        write_png(&img, &o.join("caffe_mean_227.png")).unwrap();
    }
    let e = err(
        &dir.join("v1_cifar10_quick_iter_4000.solverstate"),
        &Default::default(),
    );
    assert!(e.contains("solverstate has no picture"), "{e}");
}
