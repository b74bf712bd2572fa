#!/usr/bin/env python3
"""PINK's mapping step: ``tensorfmt som-map`` against ``Pink --cuda-off --map`` (issue 32).

    PINK_BIN=/path/to/Pink python3 benches/python/bench_pink_mapping.py \
        [--entries 1000] [--image 64] [--som 10] [--neuron 44] [--edd 44] [--numrot 360]
        [--threads 2] [--tensorfmt target/release/tensorfmt]

Makes seeded radio-source-like images and a SOM (neurons cut from other such images),
then maps the images once with each tool on the same threads (PINK's ``--numthreads``,
tensorfmt's ``--numthreads``), one after the other, recording wall time, CPU time and
peak resident memory (GNU time's maximum resident set size), and checks that the two
mapping files and the two rotation/flip files are byte for byte equal. One run each:
PINK takes minutes. Not part of CI; PINK_BIN is a CPU build of HITS-AIN/PINK tag 2.5.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def images(rng: np.random.Generator, count: int, n: int) -> np.ndarray:
    """A core and two lobes at random angles, noise; each image scaled to max 1."""
    x, y = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    c = (n - 1) / 2
    out = np.empty((count, n, n), np.float32)
    for k in range(count):
        theta, r = rng.uniform(0, 2 * np.pi), rng.uniform(3, n / 3)
        img = np.exp(-0.5 * ((x - c) ** 2 + (y - c) ** 2) / 2.0)
        for sign in (1, -1):
            cx, cy = c + sign * r * np.cos(theta), c + sign * r * np.sin(theta)
            w = rng.uniform(1.5, 4)
            img += rng.uniform(0.3, 1) * np.exp(-0.5 * ((x - cx) ** 2 + (y - cy) ** 2) / w**2)
        img += rng.normal(0, 0.03, (n, n))
        out[k] = img / img.max()
    return out


def run(cmd: list[str], tmp: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS MiB of one child, by GNU
    time (``wait4``'s ``ru_maxrss`` would count the forked Python's pages too)."""
    report = tmp / "time.txt"
    start = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", str(report), *cmd],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    user, system, kib = report.read_text().split()[-3:]
    return wall, float(user) + float(system), int(kib) / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--image", type=int, default=64)
    ap.add_argument("--som", type=int, default=10)
    ap.add_argument("--neuron", type=int, default=44)
    ap.add_argument("--edd", type=int, default=44)
    ap.add_argument("--numrot", type=int, default=360)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pink", default=os.environ.get("PINK_BIN"))
    ap.add_argument("--tensorfmt", default="target/release/tensorfmt")
    a = ap.parse_args()
    if not a.pink:
        sys.exit("set PINK_BIN (or --pink) to a CPU build of PINK 2.5")
    rng = np.random.default_rng(32)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        data = images(rng, a.entries, a.image)
        (t / "data.bin").write_bytes(struct.pack("<8i", 2, 0, 0, a.entries, 0, 2, a.image, a.image) + data.tobytes())
        m = (a.image - a.neuron) // 2
        neurons = images(rng, a.som * a.som, a.image)[:, m : m + a.neuron, m : m + a.neuron] if m >= 0 else None
        if neurons is None:
            sys.exit("--neuron must not exceed --image here")
        head = struct.pack("<11i", 2, 1, 0, 0, 2, a.som, a.som, 0, 2, a.neuron, a.neuron)
        (t / "som.bin").write_bytes(head + np.ascontiguousarray(neurons).tobytes())
        common = ["-n", str(a.numrot)]
        pink = [a.pink, "--cuda-off", "--numthreads", str(a.threads), "--map", str(t / "data.bin"),
                str(t / "pink.map"), str(t / "som.bin"), "--store-rot-flip", str(t / "pink.rf"),
                "--som-width", str(a.som), "--som-height", str(a.som), "-d", str(a.neuron),
                "--euclidean-distance-dimension", str(a.edd), *common]
        ours = [a.tensorfmt, "som-map", str(t / "data.bin"), str(t / "som.bin"), str(t / "ours.map"),
                "--rot-flip", str(t / "ours.rf"), "--numthreads", str(a.threads), "-e", str(a.edd), "-q", *common]
        load = os.getloadavg()
        print(f"case: {a.entries} images {a.image}x{a.image} onto a {a.som}x{a.som} SOM of {a.neuron}x{a.neuron} "
              f"neurons, {a.numrot} rotations, flips, distance region {a.edd}x{a.edd}, {a.threads} threads "
              f"({os.cpu_count()} CPUs), one run each")
        print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        rows = [("`Pink --cuda-off --map`", run(pink, t)), ("`tensorfmt som-map`", run(ours, t))]
        load = os.getloadavg()
        print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n")
        print("| tool | wall s | CPU s | peak RSS MiB |")
        print("|---|---|---|---|")
        for name, (wall, cpu, rss) in rows:
            print(f"| {name} | {wall:.1f} | {cpu:.1f} | {rss:.1f} |")
        (pw, pc, pr), (ow, oc, orss) = rows[0][1], rows[1][1]
        print(f"\ntensorfmt / PINK: wall {ow / pw:.3f}, CPU {oc / pc:.3f}, peak RSS {orss / pr:.2f} (targets: < 1)")
        same = all((t / f"pink.{x}").read_bytes() == (t / f"ours.{x}").read_bytes() for x in ("map", "rf"))
        print(f"mapping and rotation/flip files byte for byte equal: {'yes' if same else 'NO'}")
        if not (same and ow < pw and orss < pr):
            sys.exit(1)


if __name__ == "__main__":
    main()
