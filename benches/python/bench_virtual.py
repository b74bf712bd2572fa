"""The xarray engine and the VirtualiZarr parser measured (issue 31, "Measured"):

    target/py-venv/bin/python benches/python/bench_virtual.py [--repeat 5] [--size-mib 1024]
        [--files 200]

1. Bytes a parse of a 10,000-frame dense PVP fetches over HTTP (a range-counting server
   on 127.0.0.1, obstore's HTTP store), against the budget 64 KiB + 16 bytes per frame.
2. Bytes served to read 10 frames through zarr (the ManifestStore), against 1.05 x their
   bytes.
3. ``xr.open_dataset(p, engine="tensorfmt", chunks={"frame": ...})["values"].mean("frame")``
   on a SIZE_MIB dense PVP against ``tensorfmt.open(p)["values"].mean(0)`` (each run in a
   fresh process, warm page cache; the peak RSS of each process, and its RSS after the
   imports); targets: time within 1.3 x, peak RSS < 256 MiB.
4. A dask LocalCluster (2 worker processes) computing the mean over ``frame`` of FILES
   PVP files: through one virtual dataset (each file parsed over HTTP, combined along
   ``frame``, saved as kerchunk references read over HTTP by the workers) against
   ``tensorfmt.dask.from_file`` of the same files on the same cluster.

Times are min / median of REPEAT alternated runs after a warm-up.
"""

import argparse
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


CHILD = r"""
import json, resource, sys, time
import numpy as np
import tensorfmt
which, path, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3])
import xarray as xr, dask, dask.array
dask.config.set(scheduler="threads")
# xarray's lazy imports (dask, every installed engine's module), outside the timing.
xr.Dataset({"a": ("x", np.zeros(2))}).chunk({"x": 1}).a.mean().values
xr.backends.list_engines()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
if which == "engine":
    m = xr.open_dataset(path, engine="tensorfmt", chunks={"frame": chunk})["values"].mean("frame", skipna=False).values
elif which == "engine-skipna":
    m = xr.open_dataset(path, engine="tensorfmt", chunks={"frame": chunk})["values"].mean("frame").values
elif which == "open":
    m = tensorfmt.open(path)["values"].mean(0)
else:
    m = np.nanmean(tensorfmt.open(path)["values"], axis=0)
dt = time.perf_counter() - t
print(json.dumps({"t": dt, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "base": base * 1024, "sum": float(m.sum())}))
"""


def child(which, path, chunk):
    out = subprocess.run([sys.executable, "-c", CHILD, which, str(path), str(chunk)], capture_output=True, text=True, check=True)
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
    import dask
    import distributed
    import virtualizarr
    import xarray as xr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import HTTPStore

    import tensorfmt.dask
    import tensorfmt.virtual as tv

    print(
        f"tensorfmt {tensorfmt.__version__}, xarray {xr.__version__}, virtualizarr {virtualizarr.__version__}, "
        f"dask {dask.__version__}, numpy {np.__version__}; {os.cpu_count()} CPUs; files in {tmp}"
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
    print("| row | ours min / median s | anchor min / median s | time ours / anchor (min / median) | peak RSS ours / anchor MiB (after imports) | target |")
    print("|---|---|---|---|---|---|")
    for ours_kind, anchor_kind, what, anchor_what in [
        ("engine", "open", "mean('frame', skipna=False)", "tensorfmt.open(p)['values'].mean(0)"),
        ("engine-skipna", "open-nan", "mean('frame') (xarray's default skipna=True)", "np.nanmean(tensorfmt.open(p)['values'], axis=0)"),
    ]:
        ours, anchor = [], []
        for k in range(a.repeat + 1):
            o, f = child(ours_kind, big, chunk), child(anchor_kind, big, chunk)
            assert abs(o["sum"] - f["sum"]) <= 1e-3 * abs(f["sum"]) + 1e-3, (o, f)
            if k:
                ours.append(o)
                anchor.append(f)
        ot, at = stats([r["t"] for r in ours]), stats([r["t"] for r in anchor])
        grow = max(r["rss"] - r["base"] for r in ours) / mib
        print(
            f"| xr.open_dataset(p, engine='tensorfmt', chunks={{'frame': {chunk}}})['values'].{what}, {a.size_mib} MiB dense PVP "
            f"(anchor: {anchor_what}) | {ot[0]:.3f} / {ot[1]:.3f} | {at[0]:.3f} / {at[1]:.3f} "
            f"| {ot[0] / at[0]:.2f} / {ot[1] / at[1]:.2f} | {max(r['rss'] for r in ours) / mib:.0f} "
            f"({max(r['base'] for r in ours) / mib:.0f}; +{grow:.0f} reading) / {max(r['rss'] for r in anchor) / mib:.0f} "
            f"({max(r['base'] for r in anchor) / mib:.0f}) | time <= 1.3 x, RSS < 256 MiB |"
        )
    big.unlink()
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

        def virtual(refs):
            if isinstance(refs, pathlib.Path):
                ds = xr.open_dataset(str(refs), engine="kerchunk", chunks={"frame": 16})
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
            combined = xr.concat(vdss, dim="frame", coords="minimal", compat="override", combine_attrs="override")
            session = repo.writable_session("main")
            combined.vz.to_icechunk(session.store, last_updated_at=tv.last_updated_at(combined))
            session.commit("runs")
            return repo, time.perf_counter() - t

        def refs_for(urls, reg, name):
            t = time.perf_counter()
            vdss = [open_virtual_dataset(u, registry=reg, parser=tv.Parser()) for u in urls]
            combined = xr.concat(vdss, dim="frame", coords="minimal", compat="override", combine_attrs="override")
            refs = tmp / name
            combined.vz.to_kerchunk(str(refs), format="json")
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
            for label, r, note in [
                ("(kerchunk) over HTTP (tests/rangeserver.py, one Python process)", refs,
                 f"parse of {a.files} files over HTTP + kerchunk write: {parse_t:.2f} s, {parse_bytes} B ({parse_bytes / a.files:.0f} B/file)"),
                ("(kerchunk) over the local files", local_refs, f"parse of {a.files} local files + kerchunk write: {local_t:.2f} s"),
                ("(Icechunk) over the local files", repo, f"parse of {a.files} local files + Icechunk commit: {ice_t:.2f} s"),
            ]:
                vt, nt, check = [], [], None
                for k in range(a.repeat + 1):
                    srv.reset()
                    t = time.perf_counter()
                    m1 = virtual(r)
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
