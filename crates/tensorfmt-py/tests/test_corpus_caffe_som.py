"""Every Caffe and PINK corpus file through tensorfmt.open, checked against the facts
SOURCES.md states for it (net names, layer counts, blob shapes, float totals, first
values; PINK kinds, layouts and shapes; files that must be refused), and every file's
size and sha256 from the SOURCES.md table."""

import hashlib
import re

import numpy as np
import pytest

import tensorfmt
from conftest import corpus_dir, require_corpus


def squeeze_front(shape):
    """Legacy 4-D Caffe dims without their leading 1s (how they are exported)."""
    shape = list(shape)
    while len(shape) > 1 and shape[0] == 1:
        shape.pop(0)
    return tuple(shape)


# file -> (kind prefix, net name, layer count, {blob: shape}, total floats)
CAFFE = {
    "v1_cifar10_quick_iter_4000.caffemodel": (
        "model (V1",
        "CIFAR10_quick",
        13,
        {"conv1/0": (32, 3, 5, 5), "conv1/1": (32,), "conv2/0": (32, 32, 5, 5), "conv3/0": (64, 32, 5, 5),
         "ip1/0": (64, 1024), "ip1/1": (64,), "ip2/0": (10, 64), "ip2/1": (10,)},
        145_578,
    ),
    "v1_cifar10_full_iter_70000.caffemodel": (
        "model (V1", "CIFAR10_full", 14, {"conv1/0": (32, 3, 5, 5), "ip1/0": (10, 1024), "ip1/1": (10,)}, None,
    ),
    "v2_lenet_iter_10000.caffemodel": (
        "model (V2",
        "LeNet",
        9,
        {"conv1/0": (20, 1, 5, 5), "conv1/1": (20,), "conv2/0": (50, 20, 5, 5), "conv2/1": (50,),
         "ip1/0": (500, 800), "ip1/1": (500,), "ip2/0": (10, 500), "ip2/1": (10,)},
        431_080,
    ),
    "mtcnn_det1.caffemodel": ("model (V2", "12Net", 18, {"conv1/0": (10, 3, 3, 3), "conv1/1": (10,), "PReLU1/0": (10,), "conv4-2/0": (4, 32, 1, 1)}, None),
    "mtcnn_det2.caffemodel": ("model (V2", "24Net", 22, {"conv4/0": (128, 576)}, None),
    "mtcnn_det3.caffemodel": ("model (V2", "48Net", 25, {"conv5/0": (256, 1152)}, None),
    "mtcnn_det4.caffemodel": ("model (V2", "24Net", 67, {"fc4/0": (256, 2880)}, 948_102),
}


def sha_table(fmt):
    p = corpus_dir() / fmt / "SOURCES.md"
    if not p.exists():
        return {}
    rows = re.findall(r"^\| `([^`]+)` \| ([\d,]+) \| `([0-9a-f]{64})` \|", p.read_text(), re.M)
    return {name: (int(size.replace(",", "")), sha) for name, size, sha in rows}


@pytest.mark.parametrize("name", sorted(CAFFE))
def test_caffe_model(name):
    d = require_corpus("caffe")
    kind, net, layers, blobs, total = CAFFE[name]
    with tensorfmt.open(d / name) as doc:
        assert doc.format == "caffe" and doc.description.startswith(kind), doc.description
        assert doc.header["name"] == net
        assert doc.header["layers"] == layers
        for blob, shape in blobs.items():
            assert squeeze_front(doc.info(blob).shape) == shape, blob
            assert doc[blob].shape == doc.info(blob).shape
        if total is not None:
            assert sum(int(np.prod(i.shape)) for i in doc.tensors) == total
        # Payloads start at any offset mod 4: arrays must still read right.
        for n in doc:
            assert np.isfinite(doc[n]).all(), n


def test_caffe_solverstate():
    d = require_corpus("caffe")
    with tensorfmt.open(d / "v1_cifar10_quick_iter_4000.solverstate") as doc:
        assert doc.description.startswith("solver state")
        assert doc.header["iter"] == 4000
        assert doc.header["learned_net"] == "examples/cifar10/cifar10_quick_iter_4000.caffemodel"
        assert len(doc) == 10
        with tensorfmt.open(d / "v1_cifar10_quick_iter_4000.caffemodel") as model:
            shapes = [squeeze_front(i.shape) for i in model.tensors]
        assert [squeeze_front(i.shape) for i in doc.tensors] == shapes


def test_caffe_mean_file():
    d = require_corpus("caffe")
    with tensorfmt.open(d / "mean_227.binaryproto") as doc:
        (mean,) = doc.values()
        assert squeeze_front(mean.shape) == (3, 227, 227)
        np.testing.assert_allclose(mean.reshape(-1)[:3], [125.42, 127.91, 128.20], atol=0.005)
        assert mean.size == 154_587


# file -> (kind prefix, {tensor: shape}) or an exception class for files PINK refuses.
SOM = {
    "upstream_v2/test_m_20_95_95.som": ("SOM (cartesian 2x2", {"som": (2, 2, 135, 135)}),
    "upstream_v2/test_m_20_95_95.map": ("mapping (cartesian 2x2", {"distances": (20, 2, 2)}),
    "upstream_v2/test_m_20_95_95@d9188e5.map": ("mapping (cartesian 10x10", {"distances": (20, 10, 10)}),
    "upstream_v2/test_m_20_95_95.pink": ("data", {"data": (20, 95, 95)}),
    "upstream_v2/my_map_file.map": ("mapping (cartesian 10x10", {"distances": (5, 10, 10)}),
    "upstream_v2/my_pink_file_radio.pink": ("data", {"data": (5, 95, 95)}),
    "upstream_v2/my_pink_file_optical.pink": ("data", {"data": (5, 95, 95)}),
    "upstream_v2/data.bin": ("data", {"data": (1, 64, 64)}),
    "generated_v2/shapes16.bin": ("data", {"data": (12, 16, 16)}),
    "generated_v2/shapes16_noheader.bin": ("data", {"data": (12, 16, 16)}),
    "generated_v2/shapes16_2ch.bin": ("data", {"data": (12, 2, 16, 16)}),
    "generated_v2/som_cart3x3.bin": ("SOM (cartesian 3x3", {"som": (3, 3, 23, 23)}),
    "generated_v2/som_cart4x2.bin": ("SOM (cartesian 4x2", {"som": (4, 2, 23, 23)}),
    "generated_v2/som_cart5x1.bin": ("SOM (cartesian 5", {"som": (5, 23, 23)}),
    "generated_v2/som_cart2x2x2.bin": ("SOM (cartesian 2x2x2", {"som": (2, 2, 2, 23, 23)}),
    "generated_v2/som_cart3x3_2ch.bin": ("SOM (cartesian 3x3", {"som": (3, 3, 2, 23, 23)}),
    "generated_v2/som_cart3x3_reinit.bin": ("SOM (cartesian 3x3", {"som": (3, 3, 23, 23)}),
    "generated_v2/som_cart3x3_2ch_reinit.bin": ("SOM (cartesian 3x3", {"som": (3, 3, 2, 23, 23)}),
    "generated_v2/som_hex3.bin": ("SOM (hexagonal 3x3", {"som": (7, 23, 23), "hex_axial": (7, 2)}),
    "generated_v2/som_hex5.bin": ("SOM (hexagonal 5x5", {"som": (19, 23, 23), "hex_axial": (19, 2)}),
    "generated_v2/map_cart3x3.bin": ("mapping (cartesian 3x3", {"distances": (12, 3, 3)}),
    "generated_v2/map_cart4x2.bin": ("mapping (cartesian 4x2", {"distances": (12, 4, 2)}),
    "generated_v2/map_cart2x2x2.bin": ("mapping (cartesian 2x2x2", {"distances": (12, 2, 2, 2)}),
    "generated_v2/map_hex3.bin": ("mapping (hexagonal 3x3", {"distances": (12, 7)}),
    "generated_v2/map_hex5.bin": ("mapping (hexagonal 5x5", {"distances": (12, 19)}),
    "generated_v2/rotflip_cart3x3.bin": ("rotation/flip (cartesian 3x3", {"flip": (12, 9), "angle": (12, 9)}),
    "generated_v2/rotflip_cart4x2_noflip.bin": ("rotation/flip (cartesian 4x2", {"flip": (12, 8), "angle": (12, 8)}),
    "generated_v2/rotflip_hex3.bin": ("rotation/flip (hexagonal 3x3", {"flip": (12, 7), "angle": (12, 7)}),
    "generated_v2/rotflip_hex5.bin": ("rotation/flip (hexagonal 5x5", {"flip": (12, 19), "angle": (12, 19)}),
    "legacy/som_10x10.bin": ("legacy v1 SOM (cartesian 10x10", {"som": (10, 10, 44, 44)}),
    "legacy/som_5x5x5.bin": ("legacy v1 SOM (cartesian 5x5x5", {"som": (5, 5, 5, 44, 44)}),
    "legacy/som_4x3x2.bin": ("legacy v1 SOM (cartesian 4x3x2", {"som": (4, 3, 2, 44, 44)}),
    "legacy/som_5x3x1.bin": ("legacy v1 SOM (cartesian 5x3", {"som": (5, 3, 44, 44)}),
    "legacy/som_20.bin": ("legacy v1 SOM (cartesian 20", {"som": (20, 44, 44)}),
    "legacy/som.bin": ("legacy pre-1.0 (5-int header) SOM (cartesian 10x10", {"som": (10, 10, 44, 44)}),
    "legacy/som_shapes_shuffled.bin": ("legacy pre-1.0 (3-int header) SOM (cartesian 10x10", {"som": (10, 10, 44, 44)}),
    "legacy/test.bin": ("legacy pre-1.0 (3-int header) data", {"data": (2, 2, 3)}),
    # v1 files that fit several readings: refused without a kind, read with one.
    "legacy/image.bin": ("ambiguous", "som-data", {"data": (1, 2, 3)}),
    "legacy/image_with_header.bin": ("ambiguous", "som-data", {"data": (1, 2, 3)}),
    "legacy/map_5x5x5.bin": ("ambiguous", "mapping", {"distances": (4000, 5, 5, 5)}),
    # Refused, as PINK refuses them.
    "legacy/som@5db20d9.bin": tensorfmt.FormatError,
    "invalid/test_pink_header@d15bfd3.bin": tensorfmt.FormatError,
    "invalid/test_pink_header@615e2ab.bin": tensorfmt.FormatError,
    "invalid/test_pink_data.bin": tensorfmt.FormatError,
}


@pytest.mark.parametrize("name", sorted(SOM))
def test_som_file(name):
    d = require_corpus("som")
    want = SOM[name]
    path = d / name
    if isinstance(want, type):
        with pytest.raises(want):
            tensorfmt.load(path)
        return
    if want[0] == "ambiguous":
        _, kind, shapes = want
        with pytest.raises(tensorfmt.FormatError, match="ambiguous"):
            tensorfmt.load(path)
        with tensorfmt.open(path, kind=kind) as doc:
            assert {n: doc.info(n).shape for n in doc} == shapes
        return
    kind, shapes = want
    with tensorfmt.open(path) as doc:
        assert doc.format == "som" and doc.description.startswith(kind), doc.description
        assert {n: doc.info(n).shape for n in doc} == shapes
        for n in doc:
            assert doc[n].shape == shapes[n]
        assert doc.validate().ok


@pytest.mark.parametrize("fmt", ["som"])
def test_sizes_and_hashes(fmt):
    d = require_corpus(fmt)
    table = sha_table(fmt)
    if not table:
        pytest.skip(f"{fmt}/SOURCES.md has no sha256 table")
    for name, (size, sha) in table.items():
        data = (d / name).read_bytes()
        assert len(data) == size and hashlib.sha256(data).hexdigest() == sha, name
