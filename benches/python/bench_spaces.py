"""Benchmarks of tensorfmt.spaces.np_format_as against the equivalent numpy operation
(issue 26), each printed as a ratio ours / numpy (quote the ratios, not the times).

    target/py-venv/bin/python benches/python/bench_spaces.py [--repeat 20]

Rows and targets (a batch of 256 x 64 x 64 x 3 float32, 12 MiB):
1. Conv2D b01c -> bc01 (a pure axes permutation): a view in constant time
   (floor: ``np.transpose``; ours adds the validation of batch and result, a few
   microseconds whatever the batch size; target: a view, < 100 us).
2. the same permutation with a dtype change to float64 (a copy must be made)
   vs ``np.transpose(x, ...).astype(np.float64)``: target ratio <= 1.1.
3. Conv2D bc01 (stored NCHW) -> VectorSpace (transpose back to b01c + flatten: one copy)
   vs ``np.transpose(x, ...).reshape(n, -1)``: target ratio <= 1.1.
4. VectorSpace -> Conv2D c01b (reshape + transpose: a view) vs numpy's reshape +
   transpose: a view in constant time.
5. IndexSpace -> VectorSpace one-hot (concatenate, 256 x 8 labels of 1000) vs
   ``np.eye(1000)[labels].reshape(n, -1)``: target ratio <= 1.1.
"""

import argparse
import statistics
import time

import numpy as np

from tensorfmt.spaces import Conv2DSpace, IndexSpace, VectorSpace


def once(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def row(name, ours, floor, repeat, view_of=None):
    """Ours and numpy alternated `repeat` times (after a warm-up of each): min / median."""
    once(ours), once(floor)
    t_ours, t_np = [], []
    for _ in range(repeat):
        t_ours.append(once(ours))
        t_np.append(once(floor))
    out = ours()
    view = "" if view_of is None else f"{np.shares_memory(out, view_of)}"
    (o, om), (f, fm) = ((min(t), statistics.median(t)) for t in (t_ours, t_np))
    print(f"| {name} | {o * 1e6:.1f} / {om * 1e6:.1f} us | {f * 1e6:.1f} / {fm * 1e6:.1f} us | {o / f:.2f} / {om / fm:.2f} | {view} |")
    return o / f


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    r = args.repeat
    print(f"ours and numpy alternated, {r} runs (5 for the copies) after a warm-up; ratio = ours / numpy\n")
    print("| row | ours min / median | numpy min / median | ratio of min / of median | view |")
    print("|---|---|---|---|---|")
    n, h, w, c = 256, 64, 64, 3
    x = np.random.default_rng(0).random((n, h, w, c), dtype=np.float32)
    b01c = Conv2DSpace((h, w), num_channels=c)
    bc01 = Conv2DSpace((h, w), num_channels=c, axes=("b", "c", 0, 1))
    c01b = Conv2DSpace((h, w), num_channels=c, axes=("c", 0, 1, "b"))
    bc01_64 = Conv2DSpace((h, w), num_channels=c, axes=("b", "c", 0, 1), dtype="float64")
    vec = VectorSpace(h * w * c)
    nchw = np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2)))  # stored NCHW: flattening must copy
    flat = x.reshape(n, -1)

    row("1. b01c -> bc01 (permutation)", lambda: b01c.np_format_as(x, bc01),
        lambda: np.transpose(x, (0, 3, 1, 2)), r, view_of=x)
    row("2. b01c -> bc01 float64 (copy)", lambda: b01c.np_format_as(x, bc01_64),
        lambda: np.transpose(x, (0, 3, 1, 2)).astype(np.float64), max(5, r // 4))
    row("3. bc01 -> VectorSpace (copy)", lambda: bc01.np_format_as(nchw, vec),
        lambda: np.transpose(nchw, (0, 2, 3, 1)).reshape(n, -1), max(5, r // 4))
    row("4. VectorSpace -> c01b (view)", lambda: vec.np_format_as(flat, c01b),
        lambda: flat.reshape(n, h, w, c).transpose(3, 1, 2, 0), r, view_of=flat)
    labels = np.random.default_rng(1).integers(0, 1000, size=(256, 8))
    idx = IndexSpace(1000, 8)
    onehot = VectorSpace(8000)
    eye = np.eye(1000, dtype=np.float32)
    row("5. IndexSpace -> one-hot VectorSpace", lambda: idx.np_format_as(labels, onehot),
        lambda: eye[labels].reshape(256, -1), max(5, r // 4))


if __name__ == "__main__":
    main()
