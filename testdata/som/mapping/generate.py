#!/usr/bin/env python3
"""Regenerates the PINK 2.5 mapping fixtures in this folder (see SOURCES.md).

    PINK_BIN=/path/to/Pink python3 testdata/som/mapping/generate.py

``PINK_BIN`` is a CPU-only build of HITS-AIN/PINK tag 2.5 (commit feac562). This
script builds no oracle: it writes the data files (numpy, seeded), trains the SOMs
with PINK (``--train``), maps the data with PINK (``--map --store-rot-flip``,
``--numthreads 1``) and writes ``cases.json``: every case with its files and the
exact options, which the tests read.

Two PINK 2.5 bugs are worked around, not copied (docs/pink.md):

* PINK's ``--map`` reads a SOM with 3-D neurons (channels) one float late (it skips
  ``9 + som_rank`` header ints, which assumes 2-D neurons). The SOM files here are the
  ones PINK's trainer wrote (correct headers); for mapping, PINK is given a copy whose
  header is one int shorter, so that it reads the SOM as written. That copy is not
  kept.
* Circular distances with channels give zeros in PINK 2.5. The ``circular_2ch`` case
  instead maps each channel on its own (1 rotation, no flip: one transform, so the
  channel distances add up) and the test adds the squares.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def ints(*v: int) -> bytes:
    return struct.pack(f"<{len(v)}i", *v)


def write_data(path: Path, images: np.ndarray, comments: list[str] | None = None) -> None:
    head = b""
    if comments:
        head = "".join(f"{c}\n" for c in comments).encode("ascii") + b"# END OF HEADER\n"
    dims = images.shape[1:]
    path.write_bytes(
        head + ints(2, 0, 0, images.shape[0], 0, len(dims), *dims) + images.astype("<f4").tobytes()
    )


def blob(n: int, cx: float, cy: float, sx: float, sy: float, theta: float) -> np.ndarray:
    """An elliptical Gaussian on an n x n grid (row x, column y)."""
    x, y = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    dx, dy = x - cx, y - cy
    c, s = np.cos(theta), np.sin(theta)
    u, v = c * dx + s * dy, -s * dx + c * dy
    return np.exp(-0.5 * ((u / sx) ** 2 + (v / sy) ** 2))


def radio_images(rng: np.random.Generator, count: int, n: int) -> np.ndarray:
    """Radio-galaxy-like images: a core and two lobes at a random angle, noise."""
    out = np.zeros((count, n, n))
    c = (n - 1) / 2
    for k in range(count):
        theta = rng.uniform(0, 2 * np.pi)
        r = rng.uniform(2.5, n / 3)
        bend = rng.uniform(-0.6, 0.6)
        img = 1.0 * blob(n, c + rng.normal(0, 0.7), c + rng.normal(0, 0.7), 1.2, 1.2, 0)
        for sign, b in ((1, 0.0), (-1, bend)):
            a = theta + b
            img += rng.uniform(0.4, 1.0) * blob(
                n, c + sign * r * np.cos(a), c + sign * r * np.sin(a), rng.uniform(1, 2.2), rng.uniform(0.8, 1.4), a
            )
        img += rng.normal(0, 0.03, (n, n))
        out[k] = img / img.max()
    return out.astype(np.float32)


def optical_images(rng: np.random.Generator, radio: np.ndarray) -> np.ndarray:
    """A second channel: a host galaxy near the centre, of its own shape."""
    count, n, _ = radio.shape
    out = np.zeros_like(radio, dtype=np.float64)
    c = (n - 1) / 2
    for k in range(count):
        img = blob(n, c + rng.normal(0, 1), c + rng.normal(0, 1), rng.uniform(1.5, 3), rng.uniform(1, 2), rng.uniform(0, np.pi))
        img += rng.normal(0, 0.03, (n, n))
        out[k] = img / img.max()
    return out.astype(np.float32)


class Pink:
    def __init__(self, binary: str) -> None:
        self.binary = binary

    def run(self, args: list[str]) -> None:
        cmd = [self.binary, "--cuda-off", "--numthreads", "1", *args]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or "Successfully finished" not in r.stdout:
            sys.exit(f"PINK failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")


def som_args(layout: str, dims: list[int]) -> list[str]:
    a = ["--layout", layout, "--som-width", str(dims[0])]
    a += ["--som-height", str(dims[1] if len(dims) > 1 else 1)]
    a += ["--som-depth", str(dims[2] if len(dims) > 2 else 1)]
    return a


def for_pink25(som: Path, tmp: Path) -> Path:
    """The SOM as PINK 2.5's mapper needs it: with 3-D neurons, a header one int
    shorter (its reader skips 9 + som_rank ints whatever the neuron rank)."""
    raw = som.read_bytes()
    h = struct.unpack_from("<5i", raw, 0)
    som_rank = h[4]
    neuron_rank = struct.unpack_from("<2i", raw, 20 + 4 * som_rank)[1]
    if neuron_rank == 2:
        return som
    header = 4 * (7 + som_rank + neuron_rank)
    out = tmp / (som.name + ".pink25")
    out.write_bytes(raw[: header - 4] + raw[header:])
    return out


def main() -> None:
    binary = os.environ.get("PINK_BIN")
    if not binary:
        sys.exit("set PINK_BIN to a CPU-only build of PINK 2.5 (HITS-AIN/PINK tag 2.5)")
    pink = Pink(binary)
    rng = np.random.default_rng(20261128)

    # ---- data ----
    radio16 = radio_images(rng, 20, 16)
    ids = [f"# id J{1000 + 37 * k:04d}+{(k * 7919) % 10000:04d}" for k in range(len(radio16))]
    write_data(HERE / "data_16.bin", radio16, ["# synthetic radio sources, tensorfmt fixture", *ids])
    radio15 = radio_images(rng, 12, 15)
    write_data(HERE / "data_15.bin", radio15)
    r2 = radio_images(rng, 12, 16)
    two = np.stack([r2, optical_images(rng, r2)], axis=1)
    write_data(HERE / "data_16_2ch.bin", two)

    tmp = Path(tempfile.mkdtemp(prefix="pink-fixtures-"))
    try:
        # ---- SOMs, trained by PINK (file order, fixed seed) ----
        soms = {
            # name: (data, layout, dims, neuron_dim, edd, numrot)
            "som_cart3x3.bin": ("data_16.bin", "cartesian", [3, 3], 23, 11, 8),
            "som_hex5.bin": ("data_16.bin", "hexagonal", [5, 5], 23, 11, 8),
            "som_cart2x2x2.bin": ("data_16.bin", "cartesian", [2, 2, 2], 23, 11, 8),
            "som_cart3x2_crop12.bin": ("data_16.bin", "cartesian", [3, 2], 12, 8, 8),
            "som_cart4x2_d15.bin": ("data_15.bin", "cartesian", [4, 2], 22, 10, 8),
            "som_cart3x3_2ch.bin": ("data_16_2ch.bin", "cartesian", [3, 3], 23, 11, 8),
            "som_hex3_2ch.bin": ("data_16_2ch.bin", "hexagonal", [3, 3], 23, 11, 8),
        }
        for name, (data, layout, dims, nd, edd, numrot) in soms.items():
            pink.run(
                ["--train", str(HERE / data), str(HERE / name), *som_args(layout, dims), "-d", str(nd), "--euclidean-distance-dimension", str(edd),
                 "-n", str(numrot), "--num-iter", "3", "--init", "random", "--seed", "7", "--input-shuffle-off",
                 "--dist-func", "gaussian", "1.1", "0.2", "-p", "1"]
            )

        # ---- mappings ----
        # name, data, som, layout, dims, neuron_dim, options (None = PINK's default)
        cases = [
            ("cart_360_flip", "data_16.bin", "som_cart3x3.bin", {"num_rot": 360, "flip": True}),
            ("cart_4_noflip", "data_16.bin", "som_cart3x3.bin", {"num_rot": 4, "flip": False}),
            ("cart_4_nearest", "data_16.bin", "som_cart3x3.bin", {"num_rot": 4, "interpolation": "nearest_neighbor"}),
            ("cart_1_flip", "data_16.bin", "som_cart3x3.bin", {"num_rot": 1, "flip": True}),
            ("cart_8_circular", "data_16.bin", "som_cart3x3.bin", {"num_rot": 8, "euclidean_distance_shape": "circular"}),
            ("hex5_36_flip", "data_16.bin", "som_hex5.bin", {"num_rot": 36, "euclidean_distance_dim": 15}),
            ("hex5_12_circular_odd", "data_16.bin", "som_hex5.bin",
             {"num_rot": 12, "flip": False, "euclidean_distance_shape": "circular", "euclidean_distance_dim": 13}),
            ("cart2x2x2_16", "data_16.bin", "som_cart2x2x2.bin", {"num_rot": 16}),
            ("crop12_20", "data_16.bin", "som_cart3x2_crop12.bin", {"num_rot": 20, "euclidean_distance_dim": 8}),
            ("d15_28_flip", "data_15.bin", "som_cart4x2_d15.bin", {"num_rot": 28}),
            ("d15_360_circular", "data_15.bin", "som_cart4x2_d15.bin",
             {"num_rot": 360, "flip": False, "euclidean_distance_shape": "circular"}),
            ("cart_2ch_20_flip", "data_16_2ch.bin", "som_cart3x3_2ch.bin", {"num_rot": 20}),
            ("hex3_2ch_360_noflip", "data_16_2ch.bin", "som_hex3_2ch.bin",
             {"num_rot": 360, "flip": False, "euclidean_distance_dim": 16}),
        ]
        out_cases = []
        for name, data, som, opts in cases:
            _, layout, dims, nd, _, _ = soms[som]
            args = ["--map", str(HERE / data), str(HERE / f"map_{name}.bin"), str(for_pink25(HERE / som, tmp)),
                    "--store-rot-flip", str(HERE / f"rotflip_{name}.bin"), *som_args(layout, dims), "-d", str(nd)]
            args += ["-n", str(opts["num_rot"])]
            if not opts.get("flip", True):
                args.append("--flip-off")
            if "interpolation" in opts:
                args += ["--interpolation", opts["interpolation"]]
            if "euclidean_distance_shape" in opts:
                args += ["--euclidean-distance-shape", opts["euclidean_distance_shape"]]
            if "euclidean_distance_dim" in opts:
                args += ["--euclidean-distance-dimension", str(opts["euclidean_distance_dim"])]
            pink.run(args)
            out_cases.append({
                "name": name, "data": data, "som": som, "map": f"map_{name}.bin",
                "rotflip": f"rotflip_{name}.bin", "options": opts,
                "pink_args": ["--cuda-off", "--numthreads", "1"] + [a.replace(str(HERE) + "/", "").replace(str(tmp) + "/", "") for a in args],
            })

        # ---- circular distance with channels: each channel on its own ----
        som2 = HERE / "som_cart3x3_2ch.bin"
        raw = som2.read_bytes()
        neurons = np.frombuffer(raw, "<f4", offset=4 * 12).reshape(9, 2, 23, 23)
        per_channel = []
        for c in range(2):
            write_data(tmp / f"d{c}.bin", two[:, c])
            (tmp / f"s{c}.bin").write_bytes(ints(2, 1, 0, 0, 2, 3, 3, 0, 2, 23, 23) + neurons[:, c].astype("<f4").tobytes())
            out = f"map_circular_2ch_channel{c}.bin"
            pink.run(["--map", str(tmp / f"d{c}.bin"), str(HERE / out), str(tmp / f"s{c}.bin"),
                      *som_args("cartesian", [3, 3]), "-d", "23", "-n", "1", "--flip-off",
                      "--euclidean-distance-shape", "circular"])
            per_channel.append(out)
        out_cases.append({
            "name": "circular_2ch", "data": "data_16_2ch.bin", "som": "som_cart3x3_2ch.bin",
            "channel_maps": per_channel,
            "options": {"num_rot": 1, "flip": False, "euclidean_distance_shape": "circular"},
        })
        (HERE / "cases.json").write_text(json.dumps({"pink": "HITS-AIN/PINK 2.5 (feac562), CPU", "cases": out_cases}, indent=1) + "\n")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
