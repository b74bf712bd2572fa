#!/usr/bin/env bash
# Peak memory of inspect / validate / convert / diff / render over small hostile files
# (issue 24, item 6): a ~1 MB npz whose deflated member inflates to 1 GiB of zeros
# (legal), the same member under an npy header declaring 16 bytes, a 2 GiB sparse PINK
# SOM whose picture would be too large. Each command runs as a child process and its
# own peak resident set (`ru_maxrss` from `wait4`) must stay under 64 MiB; what is
# written (the 1 GiB conversion) goes to disk through the page cache and is not counted
# by the kernel as the writer's resident memory.
#
#   scripts/hostile_rss.sh          (release build; the cheap cases also run in
#                                    `cargo test -p tensorfmt-cli --test memory`)
#
# Exits non-zero when any case passes the bound. Prints each case's peak.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release -p tensorfmt-cli --test memory -- --include-ignored --nocapture 2>&1 \
    | grep -E "peak|^test |test result"
exit "${PIPESTATUS[0]}"
