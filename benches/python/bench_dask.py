"""tensorfmt.dask against what it competes with, measured in the same run (issue 27,
item 5: a cluster should only add value, never cost).

    target/py-venv/bin/python benches/python/bench_dask.py [--repeat 5] [--size-mib 256]
        [--files 200] [--tensorfmt target/release/tensorfmt]

Rows, each ours and its anchor alternated after a warm-up, min and median of REPEAT runs;
ratio = anchor time / our time (above 1: faster than the anchor):

1. ``tensorfmt.dask.from_file(pvp).sum().compute()`` (threaded scheduler, chunks of
   CHUNK_BYTES) against ``np.load(npy, mmap_mode="r").sum()`` over the same bytes.
2. ``convert_many`` of FILES small PVP files to npz on a 2-worker LocalCluster (cluster
   start excluded) against ``tensorfmt convert -r -j 2`` of the same tree.
3. The same with 8 files of 32 MiB.
"""

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import tensorfmt
import tensorfmt.dask

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench import best_pair, row  # noqa: E402  (the same alternation and rows as bench.py)


def movie(path, frames, frame_shape):
    data = np.random.default_rng(0).random((frames,) + frame_shape, dtype=np.float32)
    tensorfmt.save(path, {"values": data}, fsync=False)
    return data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--tensorfmt", default="target/release/tensorfmt")
    a = ap.parse_args()
    cli = os.path.abspath(a.tensorfmt)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="tensorfmt-bench-dask-"))
    try:
        import dask
        import distributed

        print(f"tensorfmt {tensorfmt.__version__}, dask {dask.__version__}, distributed {distributed.__version__}, "
              f"numpy {np.__version__}; {os.cpu_count()} CPUs; files in {tmp}")
        print(f"{a.repeat} alternated runs after a warm-up; ratio = anchor time / our time (> 1: faster than the anchor)")
        print()
        print("| row | ours min / median | anchor min / median | ratio of min / of median | target |")
        print("|---|---|---|---|---|")

        # 1. A lazy sum over a mapped movie.
        frame = (64, 64, 16)
        frames = a.size_mib * (1 << 20) // (4 * int(np.prod(frame)))
        pvp = tmp / "movie.pvp"
        data = movie(pvp, frames, frame)
        npy = tmp / "movie.npy"
        np.save(npy, data)
        del data
        lazy = tensorfmt.dask.from_file(pvp)
        ours, anchor = best_pair(
            lambda: lazy.sum(dtype=np.float64).compute(scheduler="threads"),
            lambda: np.load(npy, mmap_mode="r").sum(dtype=np.float64),
            a.repeat,
        )
        row(f"from_file({a.size_mib} MiB dense PVP).sum().compute() (anchor: np.load(mmap_mode='r').sum())",
            ours, anchor, "ratio >= 0.9 (the cluster costs nothing)")

        # 2, 3. Collections on a 2-worker cluster against the CLI's own pool.
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        client = distributed.Client(cluster)
        try:
            for label, count, shape in (
                (f"{a.files} small files", a.files, (4, 16, 16, 4)),
                ("8 files of 32 MiB", 8, (128, 128, 128, 4)),
            ):
                src = tmp / f"src-{count}"
                src.mkdir()
                paths = []
                for i in range(count):
                    p = src / f"m{i:04d}.pvp"
                    movie(p, shape[0], shape[1:])
                    paths.append(p)
                out_ours, out_cli = tmp / f"out-ours-{count}", tmp / f"out-cli-{count}"

                def ours_run():
                    r = tensorfmt.dask.convert_many(paths, out_ours, to="npz", client=client, overwrite=True)
                    assert all(x["status"] == "ok" for x in r), r[:3]

                def cli_run():
                    subprocess.run([cli, "convert", "-r", "-j", "2", "--quiet", "--to", "npz", str(src), str(out_cli)],
                                   check=True)

                ours, anchor = best_pair(ours_run, cli_run, a.repeat, outputs=(out_ours, out_cli))
                row(f"convert_many, 2-worker LocalCluster, {label} -> npz (anchor: tensorfmt convert -r -j 2)",
                    ours, anchor, "ratio >= 0.9 (the cluster costs nothing)")
        finally:
            client.close()
            cluster.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
