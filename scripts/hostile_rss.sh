#!/usr/bin/env bash
# Peak memory of inspect / validate / convert / diff / render over small hostile files
# (issue 24, item 6): a ~1 MB npz whose deflated member inflates to 1 GiB of zeros
# (legal), the same member under an npy header declaring 16 bytes, a 2 GiB sparse PINK
# SOM whose picture would be too large; and files of many entries: a caffemodel of
# 300,000 layers, a PINK file of 1,000,000 comment lines, a 1 M-frame dense PVP, and
# 100,000 tensors as safetensors, npz and a primitiv model (inspect, inspect --json,
# validate). Each command runs as a child process and its own peak resident set
# (`ru_maxrss` from `wait4`) must stay under 64 MiB plus what it printed (plus 1 KiB
# per member for the npz of 100,000 members, whose zip directory the reader keeps);
# what is written (the 1 GiB conversion) goes to disk through the page cache and is not
# counted by the kernel as the writer's resident memory.
# Caffe -> ONNX conversions of hostile prototxts (issue 34: a Split of 20,000 and of
# 79,998 tops, 15,000 in-place layers all named `r`, 20,000 ReLU layers, eight PriorBox
# constants over a 1440x1440 map, 50,000 layers) convert or fail within 256 MiB.
#
#   scripts/hostile_rss.sh          (release build; the cheap cases also run in
#                                    `cargo test -p tensorfmt-cli --test memory`)
#
# Exits non-zero when any case passes the bound. Prints each case's peak.
set -euo pipefail
cd "$(dirname "$0")/.."
# One test at a time: a child's ru_maxrss starts at the test process's own high-water
# mark, which tests building inputs side by side would raise.
cargo test --release -p tensorfmt-cli --test memory -- --include-ignored --nocapture \
    --test-threads 1 2>&1 \
    | grep -E "peak|^test |test result"
exit "${PIPESTATUS[0]}"
