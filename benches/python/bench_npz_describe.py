"""What describing an npz archive costs the VirtualiZarr parser: bytes fetched and
requests for `np.savez` of MEMBERS float32 arrays of 10 MiB each (one run, local store).

    target/py-venv/bin/python benches/python/bench_npz_describe.py [MEMBERS]
"""

import os
import sys
import tempfile
import time

import numpy as np
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

import tensorfmt.virtual as tv

members = int(sys.argv[1]) if len(sys.argv) > 1 else 20
rng = np.random.default_rng(0)
with tempfile.TemporaryDirectory() as d:
    p = os.path.join(d, "big.npz")
    np.savez(p, **{f"layer{i}": rng.random((1024, 2560), dtype=np.float32) for i in range(members)})
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    parser = tv.Parser()
    t = time.perf_counter()
    parser("file://" + p, registry)
    dt = time.perf_counter() - t
    size = os.path.getsize(p)
    f = parser.last_fetch
    print(f"npz of {members} members, {size} bytes: fetched {f['fetched']} bytes in {f['requests']} requests "
          f"({f['fetched'] / size:.5f} of the file), {dt * 1000:.1f} ms")
