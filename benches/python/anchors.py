"""The Python tools a user would pick instead, for benches/src/bin/growth.rs.

    python anchors.py OP INPUT OUTPUT

Runs one anchor once and prints its wall time in seconds (CPU time of the process
with GROWTH_CPU=1, as the Rust side then measures):

    npz-open             np.load(INPUT) (lazy) and its .files
    npz-load             np.load(INPUT) and every member read
    npz-to-safetensors   np.load + safetensors.numpy.save_file
    safetensors-open     safe_open(INPUT).keys()
    safetensors-load     safetensors.numpy.load_file
    safetensors-to-npz   safetensors.numpy.load_file + np.savez
"""

import os
import sys
import time

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file


def main() -> None:
    op, src, out = sys.argv[1:4]
    clock = time.process_time if os.environ.get("GROWTH_CPU") else time.perf_counter
    t = clock()
    if op == "npz-open":
        with np.load(src) as z:
            len(z.files)
    elif op == "npz-load":
        with np.load(src) as z:
            {k: z[k] for k in z.files}
    elif op == "npz-to-safetensors":
        with np.load(src) as z:
            save_file({k: z[k] for k in z.files}, out)
    elif op == "safetensors-open":
        with safe_open(src, framework="numpy") as f:
            len(list(f.keys()))
    elif op == "safetensors-load":
        load_file(src)
    elif op == "safetensors-to-npz":
        np.savez(out, **load_file(src))
    else:
        raise SystemExit(f"unknown anchor {op}")
    print(clock() - t)


if __name__ == "__main__":
    main()
