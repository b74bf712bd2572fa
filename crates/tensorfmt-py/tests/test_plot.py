"""tensorfmt.plot: every picture is drawn, titled, has a colour bar where colours stand
for values (found in the pixels), and Caffe's BGR is shown as RGB."""

import numpy as np
import pytest

from conftest import TESTDATA, require_module

matplotlib = require_module("matplotlib", reason="matplotlib is in the test requirements")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import tensorfmt  # noqa: E402
import tensorfmt.plot as tp  # noqa: E402
import tensorfmt.pvp  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def pixels(fig):
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)


def colour_bar_colours(fig):
    """Distinct colours down the middle of the colour bar (the figure's second axes)."""
    img = pixels(fig)
    bar = fig.axes[1].get_window_extent()
    h = img.shape[0]
    x = int((bar.x0 + bar.x1) / 2)
    rows = range(int(h - bar.y1) + 2, int(h - bar.y0) - 2)
    return {tuple(img[r, x]) for r in rows}


PICTURES = [
    ("activity", lambda: tp.activity(TESTDATA / "pvp" / "dense_f32.pvp", frame=-1), "frame 2, t=2.5"),
    ("sparse activity", lambda: tp.activity(TESTDATA / "pvp" / "sparse_values_dt4.pvp"), "frame 0"),
    ("weights", lambda: tp.weights_tableau(TESTDATA / "pvp" / "kernel_f32.pvp"), "2 patches"),
    ("hex som", lambda: tp.som(TESTDATA / "som" / "som_hex3.bin"), "hexagonal"),
    ("cartesian som", lambda: tp.som(TESTDATA / "som" / "som_cart_3x2.bin"), "cartesian"),
    ("hex bmus", lambda: tp.bmu_counts(TESTDATA / "som" / "map_hex3.bin"), "best-matching"),
    ("cartesian bmus", lambda: tp.bmu_counts(TESTDATA / "som" / "map_cart_2x3.bin"), "3 entries"),
    ("hex distances", lambda: tp.distances(TESTDATA / "som" / "mapping" / "map_hex5_36_flip.bin", 4), "entry 4, hexagonal"),
    ("cartesian distances", lambda: tp.distances(TESTDATA / "som" / "mapping" / "map_cart_360_flip.bin", -1), "entry 19"),
    ("filters", lambda: tp.caffe_filters(TESTDATA / "caffe" / "v2_tiny.caffemodel"), "'conv1'"),
]


@pytest.mark.parametrize("name,draw,expect", PICTURES, ids=[p[0] for p in PICTURES])
def test_pictures_have_title_range_and_colour_bar(name, draw, expect, tmp_path):
    fig = draw()
    title = fig.axes[0].get_title()
    assert expect in title and "range [" in title, title
    assert len(fig.axes) == 2, "a colour bar"
    # The colour bar is a gradient: many distinct colours down its middle.
    assert len(colour_bar_colours(fig)) > 20
    out = tmp_path / "p.png"
    fig.savefig(out, dpi=50)
    img = plt.imread(out)
    w, h = fig.get_size_inches() * 50
    assert img.shape[:2] == (round(h), round(w))
    assert img[..., :3].std() > 0.05  # something is drawn


def test_caffe_mean_is_drawn_as_rgb_from_bgr(tmp_path):
    mean = np.zeros((1, 3, 4, 4), np.float32)
    mean[0, 0] = 200.0  # channel 0 is blue in Caffe (OpenCV's BGR)
    p = tmp_path / "blue.binaryproto"
    tensorfmt.save(p, {"mean": mean}, to="caffe:binaryproto")
    fig = tp.caffe_mean(p)
    assert "BGR shown as RGB" in fig.axes[0].get_title()
    img = pixels(fig)
    box = fig.axes[0].get_window_extent()
    y = img.shape[0] - int((box.y0 + box.y1) / 2)
    r, g, b = img[y, int((box.x0 + box.x1) / 2)]
    assert b > 200 and r < 60 and g < 60, (r, g, b)


def test_weights_are_sorted_by_activity(tmp_path):
    w = np.zeros((1, 3, 2, 2, 1), np.float32)
    for i in range(3):
        w[0, i] = i + 1  # patch i is all i+1
    wp = tmp_path / "w.pvp"
    with tensorfmt.pvp.WeightsWriter(wp, nxp=2, nyp=2, nfp=1, nf=3) as out:
        out.write_frame(0.0, w)
    ap = tmp_path / "a.pvp"
    with tensorfmt.pvp.DenseWriter(ap, nx=1, ny=1, nf=3) as out:
        out.write_frame(0.0, np.array([[[0.1, 0.0, 5.0]]], np.float32))  # feature 2 most active
    fig = tp.weights_tableau(wp, activity=ap)
    canvas = fig.axes[0].images[0].get_array()
    # Tiles of 2x2 with a gap, two per row: patch 2, then 0, then 1.
    assert canvas[0, 0] == 3.0 and canvas[0, 3] == 1.0 and canvas[3, 0] == 2.0
    assert "most active first" in fig.axes[0].get_title()
    with pytest.raises(tensorfmt.InvalidArgumentError):
        tp.weights_tableau(TESTDATA / "pvp" / "dense_f32.pvp")


def test_indices_are_checked_naming_the_argument_and_its_range():
    """feature=, channel=, arbor= and entry= out of range said numpy's IndexError text,
    or (channel= of a 1-channel SOM) were ignored; a float was numpy's message too."""
    dense = TESTDATA / "pvp" / "dense_f32.pvp"
    one = TESTDATA / "som" / "som_hex3.bin"
    two = TESTDATA / "som" / "som_cart_2x2_2ch.bin"
    for draw, match in [
        (lambda: tp.activity(dense, feature=2), r"^feature=2 is out of range: dense_f32.pvp has 2 features \(0 to 1, or -2 to -1 from the end\)"),
        (lambda: tp.activity(dense, feature=-3), r"^feature=-3 is out of range"),
        (lambda: tp.som(one, channel=5), r"^channel=5 is out of range: som_hex3.bin has 1 channel \(0, or -1 from the end\)"),
        (lambda: tp.som(two, channel=5), r"^channel=5 is out of range: som_cart_2x2_2ch.bin has 2 channels \(0 to 1"),
        (lambda: tp.weights_tableau(TESTDATA / "pvp" / "kernel_f32.pvp", arbor=9), r"^arbor=9 is out of range: kernel_f32.pvp has \d+ arbors?"),
        (lambda: tp.distances(TESTDATA / "som" / "mapping" / "map_hex5_36_flip.bin", 20), r"^entry=20 is out of range: map_hex5_36_flip.bin has 20 entries \(0 to 19, or -20 to -1 from the end\)"),
    ]:
        with pytest.raises(tensorfmt.InvalidArgumentError, match=match):
            draw()
    for draw in (lambda: tp.activity(dense, feature=1.0), lambda: tp.som(two, channel=True)):
        with pytest.raises(tensorfmt.TensorfmtTypeError, match="takes a whole number"):
            draw()


def test_titles_say_the_index_shown():
    dense = TESTDATA / "pvp" / "dense_f32.pvp"
    assert "feature 1 of 2," in tp.activity(dense, feature=-1).axes[0].get_title()
    two = TESTDATA / "som" / "som_cart_2x2_2ch.bin"
    assert "4 neurons 2x3, channel 1 of 2," in tp.som(two, channel=-1).axes[0].get_title()
    assert "channel" not in tp.som(TESTDATA / "som" / "som_hex3.bin").axes[0].get_title()
