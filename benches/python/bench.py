"""Python benchmarks of tensorfmt, each printed as a ratio against a floor measured in the
same run (quote the ratios, not the times: machines are noisy).

    target/py-venv/bin/python benches/python/bench.py [--size-mib 512] [--repeat 5]

(after `cargo xtask test`, or any environment with tensorfmt, numpy, safetensors and
protobuf; the Caffe rows build caffe_pb2's NetParameter from the descriptor set compiled
from proto/caffe.proto, as benches/python/anchors.py does.)

Every row runs ours and its floor alternately, REPEAT times each (after one warm-up
run of each), and prints min and median of both; ratio = floor time / our time, of the
minima and of the medians.

Rows and targets (issue 13):
1. open + first array of a dense PVP file: constant time, target <= 1 ms
   (floor: np.load(mmap_mode="r") of the same bytes as .npy).
2. .sum() over the whole movie vs np.load(mmap_mode="r").sum() (target >= 90 %).
3. sparse PVP: open + frame k (target <= 1 ms).
4. a 200 MB caffemodel to a dict of arrays vs python protobuf + np.array(blob.data)
   (target >= 3x faster).
5. save to safetensors vs safetensors.numpy.save_file (target >= 100 %).
"""

import argparse
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

import tensorfmt
import tensorfmt.pvp

ROOT = pathlib.Path(__file__).resolve().parents[2]


def best_pair(ours, floor, repeat, outputs=(None, None)):
    """(min, median) times of two functions run alternately, so both meet the same
    page-cache and disk state. Where `outputs` names the file (or directory) each one
    writes, it is removed before each run, outside the timing (so every run writes
    anew)."""
    times = ([], [])
    for k in range(repeat + 1):  # run 0: warm-up, not counted
        for fn, out, ts in zip((ours, floor), outputs, times):
            if out is not None and out.exists():
                shutil.rmtree(out) if out.is_dir() else out.unlink()
            t = time.perf_counter()
            fn()
            if k:
                ts.append(time.perf_counter() - t)
    return tuple((min(ts), statistics.median(ts)) for ts in times)


def drop_cache(path):
    """Evicts a file's pages where the OS lets us (so a 'cold' row is cold)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    except (AttributeError, OSError):
        pass


def row(name, ours, floor, target):
    """One output row: ours and the floor as (min, median) seconds."""
    ratio = [f / o if o > 0 else float("inf") for o, f in zip(ours, floor)]
    print(
        f"| {name} | {ours[0] * 1e3:.3f} / {ours[1] * 1e3:.3f} ms | {floor[0] * 1e3:.3f} / {floor[1] * 1e3:.3f} ms "
        f"| {ratio[0]:.2f} / {ratio[1]:.2f} | {target} |"
    )
    return ratio


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=512)
    ap.add_argument("--caffe-mib", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="tensorfmt-bench-"))
    print(f"tensorfmt {tensorfmt.__version__}, numpy {np.__version__}, python {sys.version.split()[0]}; files in {tmp}")
    print(f"{args.repeat} alternated runs of ours and the floor; ratio = floor time / our time (> 1: faster than the floor)\n")
    print("| row | ours min / median | floor min / median | ratio of min / of median | target |")
    print("|---|---|---|---|---|")

    # 1, 2: a dense PVP movie and the same values as .npy.
    ny, nx, nf = 256, 256, 8
    frame_bytes = ny * nx * nf * 4
    frames = max(1, args.size_mib * (1 << 20) // frame_bytes)
    movie = np.random.default_rng(0).standard_normal((frames, ny, nx, nf), dtype=np.float32)
    pvp = tmp / "movie.pvp"
    npy = tmp / "movie.npy"
    tensorfmt.save(pvp, {"values": movie})
    np.save(npy, movie)
    del movie

    def ours_open():
        with tensorfmt.open(pvp) as doc:
            doc["values"][0, 0, 0, 0]

    def floor_open():
        np.load(npy, mmap_mode="r")[0, 0, 0, 0]

    ours_open(), floor_open()
    t_ours, t_floor = best_pair(ours_open, floor_open, args.repeat)
    row(f"open + first array, {args.size_mib} MiB dense PVP (floor: np.load(mmap_mode='r') of the same npy)", t_ours, t_floor, "ours <= 1 ms")

    doc = tensorfmt.open(pvp)
    values = doc["values"]
    mm = np.load(npy, mmap_mode="r")
    values.sum(dtype=np.float64), mm.sum(dtype=np.float64)  # warm the page cache
    t_ours, t_floor = best_pair(lambda: values.sum(dtype=np.float64), lambda: mm.sum(dtype=np.float64), args.repeat)
    row(".sum() over the whole movie (floor: the same bytes as mapped npy)", t_ours, t_floor, "ratio >= 0.90")
    doc.close()
    del values, mm

    # 3: sparse frame k after open.
    rng = np.random.default_rng(1)
    sp_frames, sp_side = 400, 128
    dense = np.zeros((sp_frames, sp_side, sp_side, 4), dtype=np.float32)
    mask = rng.random(dense.shape) < 0.02
    dense[mask] = rng.random(int(mask.sum()), dtype=np.float32) + 0.5
    sparse = tmp / "sparse.pvp"
    tensorfmt.save(sparse, {"values": dense}, to="pvp:sparse")
    k = sp_frames * 3 // 4
    expected = int(mask[k].sum())
    del dense, mask

    def ours_sparse():
        f = tensorfmt.pvp.open(sparse)
        assert len(f[k].indices) == expected

    def floor_sparse():
        np.load(npy, mmap_mode="r")[k % frames]

    ours_sparse()
    t_ours, t_floor = best_pair(ours_sparse, floor_sparse, args.repeat)
    row(f"sparse PVP: open + frame {k} of {sp_frames} (floor: a dense npy frame)", t_ours, t_floor, "ours <= 1 ms")

    # 4: a large caffemodel to a dict of arrays vs python protobuf.
    try:
        net_parameter = net_parameter_class()
    except ImportError:
        net_parameter = None
    if net_parameter is None:
        print("| caffemodel rows | | | | SKIPPED (no protobuf package) |")
    else:
        layers = {}
        per = args.caffe_mib * (1 << 20) // 4 // 8
        for i in range(8):
            layers[f"fc{i}/0"] = rng.standard_normal((per // 1024, 1024), dtype=np.float32)
        model = tmp / "big.caffemodel"
        tensorfmt.save(model, layers, to="caffe:caffemodel")
        raw = model.read_bytes()

        def ours_caffe():
            arrays = tensorfmt.load(model)
            assert len(arrays) == 8

        def floor_caffe():
            net = net_parameter()
            net.ParseFromString(model.read_bytes())
            out = {}
            for layer in list(net.layer) + list(net.layers):
                for j, blob in enumerate(layer.blobs):
                    out[f"{layer.name}/{j}"] = np.array(blob.data, dtype=np.float32)
            assert len(out) == 8

        def ours_caffe_touched():
            arrays = tensorfmt.load(model)
            assert sum(float(a.sum(dtype=np.float64)) for a in arrays.values()) != 0

        def floor_caffe_touched():
            net = net_parameter()
            net.ParseFromString(model.read_bytes())
            total = 0.0
            for layer in list(net.layer) + list(net.layers):
                for blob in layer.blobs:
                    total += float(np.array(blob.data, dtype=np.float32).sum(dtype=np.float64))
            assert total != 0

        t_ours, t_floor = best_pair(ours_caffe, floor_caffe, args.repeat)
        row(f"{len(raw) >> 20} MB caffemodel -> dict of arrays (floor: caffe_pb2 ParseFromString + np.array(blob.data))", t_ours, t_floor, "ratio >= 3 (ours: views)")
        t_ours, t_floor = best_pair(ours_caffe_touched, floor_caffe_touched, args.repeat)
        row(f"{len(raw) >> 20} MB caffemodel -> arrays, every value summed (same floor, summed)", t_ours, t_floor, "ratio >= 3")
        del layers

    # 5: save to safetensors.
    try:
        from safetensors.numpy import save_file
    except ImportError:
        print("safetensors row: SKIPPED (pip install safetensors)")
    else:
        arrays = {f"w{i}": np.random.default_rng(i).standard_normal((1024, 4096), dtype=np.float32) for i in range(16)}
        out_ours = tmp / "ours.safetensors"
        out_floor = tmp / "theirs.safetensors"

        # Both writers send the arrays' own memory to the kernel (safetensors >= 0.4 passes
        # data pointers), so the kernel's copy into the page cache is the floor.
        reps = args.repeat
        new_files = (out_ours, out_floor)
        floor = lambda: save_file(arrays, str(out_floor))  # noqa: E731
        t_fast, t_floor = best_pair(lambda: tensorfmt.save(out_ours, arrays, fsync=False), floor, reps, new_files)
        row("save 256 MiB to a new safetensors file, fsync=False (floor: safetensors.numpy.save_file)", t_fast, t_floor, "ratio >= 1.00")
        t_ours, t_floor = best_pair(lambda: tensorfmt.save(out_ours, arrays), floor, reps, new_files)
        row("save 256 MiB to a new file, default fsync before the rename (same floor, no fsync)", t_ours, t_floor, "durability costs")
        t_over, t_over_floor = best_pair(
            lambda: tensorfmt.save(out_ours, arrays, overwrite=True, fsync=False),
            floor,
            reps,
        )
        row("save 256 MiB over an existing file, fsync=False (safetensors truncates it in place)", t_over, t_over_floor, "old file kept until the rename")
        same = out_ours.read_bytes() == out_floor.read_bytes()
        print(f"\n(our safetensors file is byte-identical to safetensors' own: {same})")
    import shutil

    shutil.rmtree(tmp)


def net_parameter_class():
    """caffe_pb2.NetParameter, built from the descriptor set compiled from caffe.proto."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from anchors import net_parameter_class as build

    return build()


if __name__ == "__main__":
    main()
