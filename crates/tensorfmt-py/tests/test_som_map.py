"""tensorfmt.som's mapping step, transforms and best-match tools against PINK 2.5's
own outputs (testdata/som/mapping/, made by generate.py there with a CPU build of PINK
2.5; cases.json lists the options of each case)."""

from __future__ import annotations

import contextlib
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import tensorfmt
import tensorfmt.som as som
from tensorfmt import InvalidArgumentError, TensorfmtError

REPO = Path(__file__).resolve().parents[3]
DIR = REPO / "testdata" / "som" / "mapping"
CASES = json.loads((DIR / "cases.json").read_text())["cases"]
MAPPED = [c for c in CASES if "map" in c]


@contextlib.contextmanager
def _quiet():
    """PINK labels hexagonal mappings cartesian; the inferred-layout warning is expected."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tensorfmt.TensorfmtWarning)
        yield


def _load(name: str) -> dict:
    with _quiet():
        return tensorfmt.load(DIR / name)


@pytest.mark.parametrize("case", MAPPED, ids=[c["name"] for c in MAPPED])
def test_map_equals_pink(case):
    dist, rf = som.map(DIR / case["data"], DIR / case["som"], **case["options"])
    want = _load(case["map"])["distances"]
    assert dist.shape == want.shape and dist.dtype == np.float32
    assert np.array_equal(dist, want)  # bit for bit (PINK's float32 arithmetic)
    pink = _load(case["rotflip"])
    assert np.array_equal(rf["flip"], pink["flip"])
    assert np.array_equal(rf["angle"], pink["angle"])


@pytest.mark.parametrize("name", ["cart_2ch_20_flip", "hex5_36_flip"])
def test_arrays_map_as_files_do(name):
    case = next(c for c in MAPPED if c["name"] == name)
    data = _load(case["data"])["data"]
    neurons = _load(case["som"])["som"]
    dist, rf = som.map(data, neurons, **case["options"])
    fdist, frf = som.map(DIR / case["data"], DIR / case["som"], **case["options"])
    assert dist.shape == fdist.shape
    assert np.array_equal(dist, fdist) and np.array_equal(rf["angle"], frf["angle"])
    # A path and an array mixed.
    dist2, _ = som.map(DIR / case["data"], neurons, **case["options"])
    assert np.array_equal(dist2, fdist)


def test_map_files_carry_ids_and_are_pinks_bytes_after_them(tmp_path):
    m, r = tmp_path / "m.map", tmp_path / "r.rf"
    out = som.map_files(DIR / "data_16.bin", DIR / "som_cart3x3.bin", m, r, num_rot=4, flip=False)
    assert out == {"entries": 20, "neurons": 9, "ids": 20}
    assert som.ids(m) == som.ids(DIR / "data_16.bin") == som.ids(r)
    assert np.array_equal(_load("map_cart_4_noflip.bin")["distances"], tensorfmt.load(m)["distances"])
    # Explicit ids replace the data file's.
    m2 = tmp_path / "m2.map"
    som.map_files(DIR / "data_15.bin", DIR / "som_cart4x2_d15.bin", m2, num_rot=4, ids=[f"s{i}" for i in range(12)])
    assert som.ids(m2)[11] == "s11"
    with pytest.raises(InvalidArgumentError, match=r"^ids \(1 given\): one per entry, and the data file has 12 entries"):
        som.map_files(DIR / "data_15.bin", DIR / "som_cart4x2_d15.bin", tmp_path / "x.map", ids=["a"])
    with pytest.raises(InvalidArgumentError, match=r"ids \(0 given\): one per entry, and the data file has 20 entries \(leave ids out to write none: ids=False"):
        som.map_files(DIR / "data_16.bin", DIR / "som_cart3x3.bin", tmp_path / "x.map", ids=[])
    for bad in ("abc", b"abc", True, 3):
        with pytest.raises(TensorfmtError, match="ids="):
            som.map_files(DIR / "data_16.bin", DIR / "som_cart3x3.bin", tmp_path / "x.map", ids=bad)
    assert not (tmp_path / "x.map").exists()


def test_map_files_without_ids_are_pinks_bytes(tmp_path):
    """ids=False (the CLI's --no-ids) leaves the data file's ids out: the files are
    PINK's own, byte for byte (data_16.bin carries ids; PINK skips them)."""
    m, r = tmp_path / "m.map", tmp_path / "r.rf"
    options = dict(num_rot=12, flip=False, euclidean_distance_shape="circular", euclidean_distance_dim=13)
    out = som.map_files(DIR / "data_16.bin", DIR / "som_hex5.bin", m, r, ids=False, **options)
    assert out["ids"] == 0 and som.ids(m) is None
    assert m.read_bytes() == (DIR / "map_hex5_12_circular_odd.bin").read_bytes()
    assert r.read_bytes() == (DIR / "rotflip_hex5_12_circular_odd.bin").read_bytes()


def test_transform_and_align_refuse_non_finite_angles():
    img = np.zeros((4, 4), np.float32)
    for bad in (float("nan"), float("inf"), -float("inf")):
        for f in (som.transform, som.align):
            with pytest.raises(InvalidArgumentError, match=r"^angle (nan|inf|-inf): not a finite number of radians"):
                f(img, 0, bad, num_rot=4)


def test_write_data_with_ids_round_trips(tmp_path):
    p = tmp_path / "d.bin"
    imgs = np.random.default_rng(1).random((3, 2, 8, 8), dtype=np.float32)
    assert som.write_data(p, imgs, ids=["a b", "", "c"], comments=["made here"]) == 3
    assert som.ids(p) == ["a b", "", "c"]
    assert np.array_equal(tensorfmt.load(p)["data"], imgs)
    with pytest.raises(InvalidArgumentError):
        som.write_data(tmp_path / "e.bin", imgs, ids=["é", "b", "c"])
    with pytest.raises(InvalidArgumentError):
        som.write_data(tmp_path / "e.bin", imgs, ids=["a"])
    # Comment lines that would end the block early or read as one more id.
    for bad, why in (("END OF HEADER", "END line"), ("id column = NVSS name", "id line"), ("# id x", "id line")):
        with pytest.raises(TensorfmtError, match=why):
            som.write_data(tmp_path / "e.bin", imgs, ids=["a", "b", "c"], comments=[bad])
        assert not (tmp_path / "e.bin").exists()
    with pytest.raises(TensorfmtError, match="id line"):
        tensorfmt.save(tmp_path / "e.bin", {"data": imgs}, settings={"comment": "id 7"})


def test_non_finite_values_are_refused_not_given_pinks_placeholder_distance():
    """PINK writes sqrt(FLT_MAX) = 1.8e19 for an entry whose sums are all NaN (a NaN
    pixel in the compared region), which best-match tools would take for a distance."""
    rng = np.random.default_rng(3)
    data = rng.random((4, 16, 16), dtype=np.float32)
    neurons = rng.random((3, 11, 11), dtype=np.float32)
    som.map(data, neurons, num_rot=4)
    data[2, 8, 8] = np.nan
    with pytest.raises(InvalidArgumentError, match="entry 2.*not a finite number"):
        som.map(data, neurons, num_rot=4)
    data[2, 8, 8] = 0.5
    neurons[1, 5, 5] = np.inf
    with pytest.raises(InvalidArgumentError, match=r"neuron 1.*inf"):
        som.map(data, neurons, num_rot=4)


def test_transform_reproduces_pinks_distance_at_its_rotation():
    case = next(c for c in MAPPED if c["name"] == "hex3_2ch_360_noflip")
    data = _load(case["data"])["data"]
    neurons = _load(case["som"])["som"]
    dist = _load(case["map"])["distances"]
    rf = _load(case["rotflip"])
    edd = case["options"]["euclidean_distance_dim"]
    for e in range(0, len(data), 4):
        for n in range(neurons.shape[0]):
            img = som.transform(data[e], rf["flip"][e, n], rf["angle"][e, n], num_rot=360, neuron_dim=23)
            diff = (som.crop(neurons[n], edd) - som.crop(img, edd)).astype(np.float64)
            assert np.isclose(np.sqrt((diff**2).sum()), dist[e, n], rtol=1e-5)


def test_align_undoes_transform_where_exact():
    img = np.random.default_rng(2).random((2, 9, 9), dtype=np.float32)
    for flip in (False, True):
        for q in range(4):
            a = q * np.float32(np.pi / 2)
            t = som.transform(img, flip, a, num_rot=4, neuron_dim=9)
            assert np.array_equal(som.align(t, flip, a, num_rot=4), img)
    # A small angle on a smooth image: bilinear both ways, close in the middle.
    x, y = np.meshgrid(np.arange(15), np.arange(15), indexing="ij")
    smooth = np.exp(-((x - 6.0) ** 2 + (y - 8.0) ** 2) / 18).astype(np.float32)
    step = np.float32(2 * np.pi) / np.float32(360)
    t = som.transform(smooth, True, 97 * step, num_rot=360, neuron_dim=15)
    back = som.align(t, True, 97 * step, num_rot=360)
    assert np.abs(back[4:11, 4:11] - smooth[4:11, 4:11]).max() < 0.05  # two bilinear passes; a wrong direction is ~0.5


def test_transform_and_align_sizes_are_checked_before_allocating():
    """A neuron or image size the caller chose is checked (overflow, zero, the allocation
    limit) before the output is allocated: an InvalidArgumentError naming it, where an
    'internal error' (a Rust panic) came back before."""
    img = np.ones((4, 4), np.float32)
    for size in (0, 2**31, 2**40):
        with pytest.raises(InvalidArgumentError, match="neuron_dim"):
            som.transform(img, False, 0.0, num_rot=4, neuron_dim=size)
        with pytest.raises(InvalidArgumentError, match="image_dim"):
            som.align(img, False, 0.0, num_rot=4, image_dim=size)


def test_best_match_tools():
    m = DIR / "map_cart_360_flip.bin"
    with _quiet():
        f = som.open(m)
    d = f.distances
    b = som.best_matches(m)
    assert np.array_equal(b, f.best_matches())
    assert np.array_equal(som.counts(d), f.bmu_counts())
    flat = d.reshape(len(d), -1)
    for n in range(flat.shape[1]):
        e, v = som.neuron_entries(d, n)
        assert (b[e] == n).all() and (np.diff(v) >= 0).all() and len(e) == (b == n).sum()
    e, v = som.worst_matches(d, 5)
    best = flat.min(axis=1)
    assert np.array_equal(v, np.sort(best)[::-1][:5]) and np.array_equal(best[e], v)
    # NaN rows: no best match.
    nan = flat.copy()
    nan[0] = np.nan
    assert som.best_matches(nan)[0] == -1 and som.counts(nan).sum() == len(d) - 1


def test_progress_counts_entries_and_can_stop():
    calls = []
    som.map(DIR / "data_15.bin", DIR / "som_cart4x2_d15.bin", num_rot=4, progress=lambda d, t: calls.append((d, t)))
    assert calls[0] == (0, 12) and calls[-1] == (12, 12)

    class Stop(Exception):
        pass

    def stop(done, total):
        if done > 0:
            raise Stop()

    with pytest.raises(Stop):
        som.map(DIR / "data_16.bin", DIR / "som_cart3x3.bin", num_rot=4, threads=1, progress=stop)


@pytest.mark.parametrize(
    "data,som_file,options,match",
    [
        ("data_16.bin", "som_cart3x3.bin", {"num_rot": 6}, "num_rot 6: must be 1 or a multiple of 4"),
        ("data_16.bin", "som_cart3x3.bin", {"num_rot": 8, "interpolation": "nearest_neighbor"}, "nearest_neighbor with num_rot 8"),
        ("data_16.bin", "som_cart3x3.bin", {"euclidean_distance_dim": 24}, "euclidean_distance_dim 24: must be 1..=23"),
        ("data_16.bin", "som_cart3x3.bin", {"neuron_dim": 22}, "neuron_dim 22: the SOM's neurons are 23x23"),
        ("data_16_2ch.bin", "som_cart3x3.bin", {}, "channels 2"),
        ("data_16.bin", "som_cart3x2_crop12.bin", {"num_rot": 1}, r"euclidean_distance_dim 16 \(PINK's default"),
        ("data_16.bin", "som_cart3x3.bin", {"euclidean_distance_shape": "round"}, "euclidean_distance_shape round"),
        # PINK maps this with every distance 0 (radius 1 / 2 = 0: an empty region).
        (
            "data_16.bin",
            "som_cart3x3.bin",
            {"num_rot": 4, "euclidean_distance_dim": 1, "euclidean_distance_shape": "circular"},
            "euclidean_distance_dim 1: the circular region of side 1 holds no pixel",
        ),
        ("data_16.bin", "som_cart3x3.bin", {"numrot": 4}, "unknown mapping option"),
    ],
)
def test_bad_input_names_the_value(data, som_file, options, match):
    with pytest.raises(InvalidArgumentError, match=match):
        som.map(DIR / data, DIR / som_file, **options)


def test_bad_files_and_arrays(tmp_path):
    # A hexagonal SOM whose sides are even: refused when read, naming the dims.
    bad = tmp_path / "hex4.bin"
    head = np.array([2, 1, 0, 1, 2, 4, 4, 0, 2, 3, 3], "<i4").tobytes()
    bad.write_bytes(head + np.zeros(16 * 9, "<f4").tobytes())
    with pytest.raises(TensorfmtError, match=r"\[4, 4\]"):
        som.map(DIR / "data_16.bin", bad, num_rot=4)
    # A SOM given where the data belongs.
    with pytest.raises(InvalidArgumentError, match="not a data file"):
        som.map(DIR / "som_cart3x3.bin", DIR / "som_cart3x3.bin")
    # Non-square images.
    with pytest.raises(InvalidArgumentError, match=r"\[16, 15\]"):
        som.map(np.zeros((2, 16, 15)), np.zeros((3, 23, 23)), num_rot=4)
    with pytest.raises(InvalidArgumentError):
        som.transform(np.zeros((4, 5)), False, 0.0)


CHILD = """
import sys, time, numpy as np, tensorfmt.som as som
rng = np.random.default_rng(0)
data = rng.random((400, 64, 64), dtype=np.float32)     # minutes of work: 400 x 100 neurons x 720 transforms
neurons = rng.random((10, 10, 44, 44), dtype=np.float32)
started = []
def progress(done, total):
    if not started:
        started.append(1)
        print("started", flush=True)
try:
    som.map(data, neurons, euclidean_distance_dim=44, threads=1, progress=progress)
    print("finished", flush=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt", time.monotonic(), flush=True)
"""


def test_ctrl_c_stops_a_mapping():
    import signal
    import subprocess
    import sys
    import time

    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "started", child.communicate()
    time.sleep(0.3)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert out.startswith("KeyboardInterrupt"), (out, err)
    assert float(out.split()[1]) - sent < 2.0


def test_map_files_never_overwrites_an_input(tmp_path):
    """An output that is the data or SOM file (or both outputs one file) is refused,
    whatever ``overwrite`` says, and nothing is written; ``overwrite=False`` refuses an
    existing output (as tensorfmt.save does)."""
    data = tmp_path / "in.bin"
    data.write_bytes((DIR / "data_16.bin").read_bytes())
    before = data.read_bytes()
    with pytest.raises(InvalidArgumentError, match="is the input"):
        som.map_files(data, DIR / "som_cart3x3.bin", data, num_rot=4)
    with pytest.raises(InvalidArgumentError, match="are one file"):
        som.map_files(data, DIR / "som_cart3x3.bin", tmp_path / "o.map", tmp_path / "o.map", num_rot=4)
    assert data.read_bytes() == before and not (tmp_path / "o.map").exists()
    (tmp_path / "old.map").write_text("precious")
    with pytest.raises(tensorfmt.TensorfmtFileExistsError):
        som.map_files(data, DIR / "som_cart3x3.bin", tmp_path / "old.map", num_rot=4, overwrite=False)
    assert (tmp_path / "old.map").read_text() == "precious"


def test_arguments_no_mapping_produces_are_refused():
    img = np.zeros((16, 16), np.float32)
    with pytest.raises(InvalidArgumentError, match="angle 0.123"):
        som.transform(img, 0, 0.123, num_rot=4, neuron_dim=16)
    with pytest.raises(InvalidArgumentError, match="flip 2"):
        som.transform(img, 2, 0.0, num_rot=4, neuron_dim=16)
    # An angle of a 16-rotation mapping is one of 360's only by chance: 22.5 degrees is not.
    with pytest.raises(InvalidArgumentError, match="num_rot of the mapping"):
        som.transform(img, 0, float(np.float32(2 * np.pi) / np.float32(16)), num_rot=360)
    with pytest.raises(InvalidArgumentError, match="num_rot -4"):
        som.map(DIR / "data_16.bin", DIR / "som_cart3x3.bin", num_rot=-4)
    with pytest.raises(InvalidArgumentError, match="neuron_dim 2.5"):
        som.map(DIR / "data_16.bin", DIR / "som_cart3x3.bin", neuron_dim=2.5)
    with pytest.raises(InvalidArgumentError, match="at least one neuron"):
        som.counts(np.zeros((0, 4))[:, :0])
    assert som.counts(np.zeros((0, 4))).tolist() == [0, 0, 0, 0]


def test_transform_arguments_that_are_not_numbers_raise_tensorfmt_errors():
    # transform(image, "no", 0.0) raised a bare ValueError from int("no").
    image = np.zeros((4, 4), np.float32)
    for flip, angle, num_rot in (("no", 0.0, 4), (0, "abc", 4), (None, 0.0, 4), (2, 0.0, 4)):
        with pytest.raises(tensorfmt.InvalidArgumentError):
            tensorfmt.som.transform(image, flip, angle, num_rot=num_rot)
    with pytest.raises(tensorfmt.TensorfmtTypeError, match="num_rot="):
        tensorfmt.som.transform(image, 0, 0.0, num_rot="x")
    assert tensorfmt.som.transform(image, np.uint8(1), np.float32(0.0), num_rot=4).shape == (6, 6)


def test_bad_numbers_and_names_are_named_not_truncated():
    img = np.ones((8, 8), np.float32)
    neurons = np.ones((2, 11, 11), np.float32)
    d = np.array([[1.0, 2.0], [3.0, 0.5]], np.float32)
    cases = [
        (lambda: som.map(img[None], neurons, num_rot=4, interpolation=None), "interpolation="),
        (lambda: som.map(img[None], neurons, num_rot=4, euclidean_distance_shape=None), "euclidean_distance_shape="),
        (lambda: som.transform(img, 0, 0.0, num_rot=4, neuron_dim=-3), "neuron_dim= must be 1 or more"),
        (lambda: som.align(img, 0, 0.0, num_rot=4, image_dim=-2), "image_dim= must be 1 or more"),
        (lambda: som.geometry((-8, -8), (11, 11)), "image_shape= must be 1 or more"),
        (lambda: som.align(img, 0, 0.0, num_rot=4, image_dim=2.5), "image_dim= takes a whole number"),
        (lambda: som.neuron_entries(d, 1.7), "neuron= takes a whole number"),
        (lambda: som.worst_matches(d, 2.5), "count= takes a whole number"),
    ]
    for call, message in cases:
        with pytest.raises(TensorfmtError, match=message):
            call()
