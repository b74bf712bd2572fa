#!/usr/bin/env bash
# The xarray engine's rows (bench_virtual.py section 3) in an environment of what
# `tensorfmt[xarray]` installs and nothing more: xarray, dask[array], numpy and the
# package. The test environment also holds sparse, numba, scipy, distributed and
# kerchunk, which dask.array and xarray's engine list import whenever installed
# (187 MiB of imports there, 90 here); a user of the extra pays only these.
#
#   bash benches/xarray_extra_env.sh [REPEAT]      (default 15)
#
# Creates target/xr-venv once (the package built from this checkout, release).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${1:-15}
VENV=target/xr-venv
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "./crates/tensorfmt-py[xarray]"
fi
"$VENV/bin/python" benches/python/bench_virtual.py --repeat "$REPEAT" --size-mib 1024 --sections 3
