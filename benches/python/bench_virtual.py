"""The xarray engine and the VirtualiZarr parser measured (issue 31, "Measured"):

    target/py-venv/bin/python benches/python/bench_virtual.py [--repeat 5] [--size-mib 1024]
        [--files 200]

1. Bytes a parse of a 10,000-frame dense PVP fetches over HTTP (a range-counting server
   on 127.0.0.1, obstore's HTTP store), against the budget 64 KiB + 16 bytes per frame.
2. Bytes served to read 10 frames through zarr (the ManifestStore), against 1.05 x their
   bytes.
3. ``xr.open_dataset(p, engine="tensorfmt", chunks={"frame": ...})["values"].mean("frame")``
   on a SIZE_MIB dense PVP against ``tensorfmt.open(p)["values"].mean(0)`` (each run in a
   fresh process, warm page cache; the peak RSS of each process (VmHWM), and its peak
   after the imports); targets: time within 1.3 x, peak RSS < 256 MiB. Also with ``chunks={}``
   (the engine's preferred chunks), and against the dask floor: ``dask.array.from_array``
   over slices of the same mapped view with the same chunks (what dask's reduction costs
   with no reader at all). The RSS after the imports is split into what the third-party imports
   take alone (the same child with ``tensorfmt`` unimportable) and ours. The children
   may write bytecode for tensorfmt's modules (an installed wheel has it; a checkout run
   with PYTHONDONTWRITEBYTECODE would compile them in every child).
4. A dask LocalCluster (2 worker processes) computing the mean over ``frame`` of FILES
   PVP files: through one virtual dataset (each file parsed over HTTP, combined along
   ``frame``, saved as kerchunk references read over HTTP by the workers) against
   ``tensorfmt.dask.from_file`` of the same files on the same cluster. Kerchunk
   references are opened with the chunks given to the inner ``open_zarr``
   (``open_dataset_options={"chunks": ...}``): kerchunk's engine returns dask arrays of
   one zarr chunk (one frame) each, which ``chunks=`` on ``xr.open_dataset`` wraps in a
   second dask layer (a nested compute per chunk, one zarr call per frame); that way is
   measured too, on the local files.

Times are min / median of REPEAT alternated runs after a warm-up.
"""

import argparse
import importlib.util
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import tensorfmt

# Icechunk's log goes to stdout: only errors (its local-store warning is for writers
# that commit concurrently, which this benchmark does not).
os.environ.setdefault("ICECHUNK_LOG", "error")

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "crates" / "tensorfmt-py" / "tests"))
from rangeserver import RangeServer  # noqa: E402


def movie(path, frames, frame_shape, seed=0):
    rng = np.random.default_rng(seed)
    with tensorfmt.pvp.DenseWriter(path, nx=frame_shape[1], ny=frame_shape[0], nf=frame_shape[2], overwrite=True) as w:
        for k in range(frames):
            w.write_frame(float(k), rng.random(frame_shape, dtype=np.float32))


# Peak RSS of the child itself: VmHWM of its own address space (mapped file pages
# included). Not ru_maxrss: Linux carries the parent's peak over fork and exec into the
# child's ru_maxrss, so every child would report at least this script's peak.
PEAK = r"""
def peak_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")
"""

CHILD = PEAK + r"""
import json, sys, time, warnings
which, path, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3])
if which == "baseline-3p":  # the same imports without tensorfmt (its xarray entry point fails to load)
    sys.modules["tensorfmt"] = None
    warnings.simplefilter("ignore", RuntimeWarning)
import numpy as np
if which != "baseline-3p":
    import tensorfmt
import xarray as xr, dask, dask.array
dask.config.set(scheduler="threads")
# xarray's lazy imports (dask, distributed, every installed engine's module), outside the timing.
xr.Dataset({"a": ("x", np.zeros(2))}).chunk({"x": 1}).a.mean().values
xr.backends.list_engines()
base = peak_rss()
t = time.perf_counter()
if which == "engine":
    m = xr.open_dataset(path, engine="tensorfmt", chunks={"frame": chunk})["values"].mean("frame", skipna=False).values
elif which == "engine-preferred":
    m = xr.open_dataset(path, engine="tensorfmt", chunks={})["values"].mean("frame", skipna=False).values
elif which == "dask-floor":
    class Sliced:  # the mapped view as dask sees it: slices are views (from_array copies an ndarray whole)
        def __init__(self, a):
            self.a, self.shape, self.dtype, self.ndim = a, a.shape, a.dtype, a.ndim
        def __getitem__(self, key):
            return self.a[key]
    view = tensorfmt.open(path)["values"]
    m = dask.array.from_array(Sliced(view), chunks=(chunk,) + view.shape[1:], name=False).mean(0).compute()
elif which == "engine-skipna":
    m = xr.open_dataset(path, engine="tensorfmt", chunks={"frame": chunk})["values"].mean("frame").values
elif which == "open":
    m = tensorfmt.open(path)["values"].mean(0)
elif which == "open-nan":
    m = np.nanmean(tensorfmt.open(path)["values"], axis=0)
else:
    m = np.zeros(1)
dt = time.perf_counter() - t
print(json.dumps({"t": dt, "rss": peak_rss(), "base": base, "sum": float(m.sum())}))
"""

BARE = PEAK + r"""
import xarray, dask.array
print(peak_rss())
"""


def child_env():
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def child(which, path, chunk):
    out = subprocess.run([sys.executable, "-c", CHILD, which, str(path), str(chunk)], capture_output=True, text=True, check=True, env=child_env())
    return json.loads(out.stdout.strip().splitlines()[-1])


def stats(xs):
    return min(xs), statistics.median(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--sections", default="1234", help="which numbered measurements to run")
    a = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="tensorfmt-bench-virtual-"))
    try:
        run(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(a, tmp):
    """Section 3 needs only xarray and dask (so that it runs in an environment of
    ``tensorfmt[xarray]`` and dask alone, where the imports weigh what a user's do);
    the others need the ``[virtual]`` extra and distributed."""
    import dask
    import xarray as xr

    virtual = any(s in a.sections for s in "124")
    if virtual:
        import distributed
        import virtualizarr
        from obspec_utils.registry import ObjectStoreRegistry
        from obstore.store import HTTPStore

        import tensorfmt.virtual as tv

    import tensorfmt.dask  # noqa: F401

    installed = sorted(
        m for m in ("sparse", "numba", "scipy", "distributed", "kerchunk", "zarr", "virtualizarr")
        if importlib.util.find_spec(m) is not None
    )
    print(
        f"tensorfmt {tensorfmt.__version__}, xarray {xr.__version__}, dask {dask.__version__}, "
        f"numpy {np.__version__}; also installed: {', '.join(installed) or 'none of the optional packages'}; "
        f"{os.cpu_count()} CPUs; files in {tmp}"
    )
    print()

    if "1" in a.sections or "2" in a.sections:
        http_bytes(a, tmp, xr, tv, ObjectStoreRegistry, HTTPStore)
    if "3" in a.sections:
        engine_rows(a, tmp)
    if "4" in a.sections:
        cluster_rows(a, tmp, xr, tv, ObjectStoreRegistry, HTTPStore, distributed)


def http_bytes(a, tmp, xr, tv, ObjectStoreRegistry, HTTPStore):
    """Rows 1 and 2."""
    frames = 10_000
    movie(tmp / "movie.pvp", frames, (16, 16, 1))
    frame_bytes = 16 * 16 * 4
    with RangeServer(str(tmp)) as srv:
        reg = ObjectStoreRegistry({srv.base: HTTPStore.from_url(srv.base, client_options={"allow_http": True})})
        srv.reset()
        store = tv.Parser()(srv.url("movie.pvp"), reg)
        parse_bytes, parse_requests = srv.served("movie.pvp"), srv.requests("movie.pvp")
        budget = (64 << 10) + 16 * frames
        srv.reset()
        ds = xr.open_zarr(store, consolidated=False, zarr_format=3)
        ten = ds["values"].isel(frame=slice(4000, 4010)).values
        read_bytes = srv.served("movie.pvp")
    print("| measurement | bytes | requests | budget | within |")
    print("|---|---|---|---|---|")
    print(f"| parse a {frames}-frame dense PVP over HTTP | {parse_bytes} | {parse_requests} (2 HEAD + GET) | {budget} (64 KiB + 16 B/frame) | {parse_bytes <= budget} |")
    print(f"| read 10 frames ({ten.nbytes} B) through zarr | {read_bytes} | 10 | {int(1.05 * ten.nbytes)} (1.05 x) | {read_bytes <= 1.05 * ten.nbytes} |")
    print()



def engine_rows(a, tmp):
    """Row 3: the engine on a SIZE_MIB movie against tensorfmt.open's mapped view."""
    shape = (512, 512, 1)
    big_frames = a.size_mib * (1 << 20) // (4 * int(np.prod(shape)))
    big = tmp / "big.pvp"
    movie(big, big_frames, shape)
    chunk = max(1, (32 << 20) // (4 * int(np.prod(shape))))  # 32 MiB chunks
    mib = 1 << 20
    child("open", big, chunk)  # bytecode for tensorfmt's modules, as an installed wheel has
    bare = [int(subprocess.run([sys.executable, "-c", BARE], capture_output=True, text=True, check=True, env=child_env()).stdout) for _ in range(3)]
    third = [child("baseline-3p", big, chunk)["base"] for _ in range(3)]
    print("| row | ours min / median s | anchor min / median s | time ours / anchor (min / median) | peak RSS ours / anchor MiB (after imports) | target |")
    print("|---|---|---|---|---|---|")
    bases = []
    for ours_kind, anchor_kind, what, anchor_what in [
        ("engine", "open", f"chunks={{'frame': {chunk}}})['values'].mean('frame', skipna=False)", "tensorfmt.open(p)['values'].mean(0)"),
        ("engine-preferred", "open", "chunks={})['values'].mean('frame', skipna=False) (the engine's preferred chunks)", "tensorfmt.open(p)['values'].mean(0)"),
        ("engine", "dask-floor", f"chunks={{'frame': {chunk}}})['values'].mean('frame', skipna=False)",
         f"the dask floor: dask.array.from_array over slices of tensorfmt.open(p)['values'], chunks=({chunk}, ...), .mean(0)"),
        ("engine-skipna", "open-nan", f"chunks={{'frame': {chunk}}})['values'].mean('frame') (xarray's default skipna=True)", "np.nanmean(tensorfmt.open(p)['values'], axis=0)"),
    ]:
        ours, anchor = [], []
        for k in range(a.repeat + 1):
            o, f = child(ours_kind, big, chunk), child(anchor_kind, big, chunk)
            assert abs(o["sum"] - f["sum"]) <= 1e-3 * abs(f["sum"]) + 1e-3, (o, f)
            if k:
                ours.append(o)
                anchor.append(f)
        bases += [r["base"] for r in ours]
        ot, at = stats([r["t"] for r in ours]), stats([r["t"] for r in anchor])
        grow = max(r["rss"] - r["base"] for r in ours) / mib
        print(
            f"| xr.open_dataset(p, engine='tensorfmt', {what}, {a.size_mib} MiB dense PVP "
            f"(anchor: {anchor_what}) | {ot[0]:.3f} / {ot[1]:.3f} | {at[0]:.3f} / {at[1]:.3f} "
            f"| {ot[0] / at[0]:.2f} / {ot[1] / at[1]:.2f} | {max(r['rss'] for r in ours) / mib:.0f} "
            f"({max(r['base'] for r in ours) / mib:.0f}; +{grow:.0f} reading) / {max(r['rss'] for r in anchor) / mib:.0f} "
            f"({max(r['base'] for r in anchor) / mib:.0f}) | time <= 1.3 x, RSS < 256 MiB |"
        )
    big.unlink()
    print()
    print(
        f"RSS after the imports (median of the runs above, MiB): `import xarray, dask.array` alone {statistics.median(bare) / mib:.1f}; "
        f"the children's imports and warm-up without tensorfmt (dask.array imports sparse, numba, scipy when installed; "
        f"the first compute imports distributed; xarray's engine list imports kerchunk's zarr and fsspec) {statistics.median(third) / mib:.1f}; "
        f"with tensorfmt and its engine {statistics.median(bases) / mib:.1f} (+{(statistics.median(bases) - statistics.median(third)) / mib:.1f} ours)"
    )
    print()



def cluster_rows(a, tmp, xr, tv, ObjectStoreRegistry, HTTPStore, distributed):
    """Row 4: a cluster over FILES files, a virtual dataset (over HTTP, and over the
    local files) against tensorfmt.dask."""
    import tensorfmt.dask
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset

    files_dir = tmp / "runs"
    files_dir.mkdir()
    paths = []
    for i in range(a.files):
        p = files_dir / f"run{i:03d}.pvp"
        movie(p, 16, (128, 128, 1), seed=i)
        paths.append(p)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    mib = 1 << 20
    total = sum(p.stat().st_size for p in paths)
    try:
        import dask.array as da

        def native():
            arr = da.concatenate([tensorfmt.dask.from_file(p, chunk_frames=16) for p in paths])
            return arr.mean(0).compute()

        def virtual(refs, nested=False):
            if isinstance(refs, pathlib.Path) and nested:
                ds = xr.open_dataset(str(refs), engine="kerchunk", chunks={"frame": 16})
            elif isinstance(refs, pathlib.Path):
                ds = xr.open_dataset(str(refs), engine="kerchunk", open_dataset_options={"chunks": {"frame": 16}})
            else:  # an Icechunk repository
                ds = xr.open_zarr(refs.readonly_session("main").store, consolidated=False, zarr_format=3, chunks={"frame": 16})
            return ds["values"].mean("frame").compute()

        def icechunk_repo(urls, reg):
            import icechunk

            t = time.perf_counter()
            config = icechunk.RepositoryConfig.default()
            prefix = "file://" + str(files_dir) + "/"
            config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(files_dir))))
            repo = icechunk.Repository.create(
                icechunk.local_filesystem_storage(str(tmp / "repo")), config, authorize_virtual_chunk_access={prefix: None}
            )
            vdss = [open_virtual_dataset(u, registry=reg, parser=tv.Parser()) for u in urls]
            combined = xr.concat(vdss, dim="frame", coords="minimal", compat="override", combine_attrs=tv.combine_attrs)
            session = repo.writable_session("main")
            combined.vz.to_icechunk(session.store, last_updated_at=tv.last_updated_at(combined))
            session.commit("runs")
            return repo, time.perf_counter() - t

        def refs_for(urls, reg, name):
            t = time.perf_counter()
            vdss = [open_virtual_dataset(u, registry=reg, parser=tv.Parser()) for u in urls]
            combined = xr.concat(vdss, dim="frame", coords="minimal", compat="override", combine_attrs=tv.combine_attrs)
            refs = tmp / name
            tv.to_kerchunk(combined, str(refs), format="json")
            return refs, time.perf_counter() - t

        print("| row | virtual min / median s | tensorfmt.dask min / median s | ratio dask / virtual (min / median) | notes |")
        print("|---|---|---|---|---|")
        with RangeServer(str(files_dir)) as srv:
            reg = ObjectStoreRegistry({srv.base: HTTPStore.from_url(srv.base, client_options={"allow_http": True})})
            srv.reset()
            refs, parse_t = refs_for([srv.url(p.name) for p in paths], reg, "runs_http.json")
            parse_bytes = srv.served()
            local_reg = ObjectStoreRegistry({"file://": LocalStore()})
            local_urls = ["file://" + str(p) for p in paths]
            local_refs, local_t = refs_for(local_urls, local_reg, "runs_local.json")
            repo, ice_t = icechunk_repo(local_urls, local_reg)
            kopen = "xr.open_dataset(refs, engine='kerchunk', open_dataset_options={'chunks': {'frame': 16}})"
            for label, r, note, nested, repeat in [
                ("(kerchunk) over HTTP (tests/rangeserver.py, one Python process)", refs,
                 f"{kopen}; parse of {a.files} files over HTTP + kerchunk write: {parse_t:.2f} s, {parse_bytes} B ({parse_bytes / a.files:.0f} B/file)", False, a.repeat),
                ("(kerchunk) over the local files", local_refs, f"{kopen}; parse of {a.files} local files + kerchunk write: {local_t:.2f} s", False, a.repeat),
                ("(kerchunk, nested chunks) over the local files", local_refs,
                 f"xr.open_dataset(refs, engine='kerchunk', chunks={{'frame': 16}}): a dask layer over kerchunk's own (one task and one zarr call per frame); {min(a.repeat, 2)} runs", True, min(a.repeat, 2)),
                ("(Icechunk) over the local files", repo, f"parse of {a.files} local files + Icechunk commit: {ice_t:.2f} s", False, a.repeat),
            ]:
                vt, nt, check = [], [], None
                for k in range(repeat + 1):
                    srv.reset()
                    t = time.perf_counter()
                    m1 = virtual(r, nested)
                    d1 = time.perf_counter() - t
                    served = srv.served()
                    t = time.perf_counter()
                    m2 = native()
                    d2 = time.perf_counter() - t
                    if check is None:
                        check = float(np.abs(np.asarray(m1) - np.asarray(m2)).max())
                    if k:
                        vt.append(d1)
                        nt.append(d2)
                v, n = stats(vt), stats(nt)
                print(
                    f"| mean over frame of {a.files} PVP files ({total / mib:.0f} MiB, 16 frames each) on a 2-worker LocalCluster, "
                    f"virtual dataset {label} | {v[0]:.3f} / {v[1]:.3f} | {n[0]:.3f} / {n[1]:.3f} "
                    f"| {n[0] / v[0]:.2f} / {n[1] / v[1]:.2f} | {note}; a read serves {served} B; max difference {check:g} |"
                )
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
