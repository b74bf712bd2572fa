#!/usr/bin/env bash
# Peak memory of streaming work on a large dense PVP activity file (default 2 GiB),
# with the release CLI: `convert` to npz, safetensors and npy, `inspect --stats` and
# `diff` against itself, each in two cache states of the input:
#
#   fresh   right after the file was written (its pages may be partly cached)
#   cached  after `cat FILE > /dev/null` (every page of the input is in the page cache,
#           as for any file that came from disk; a mapped page that is cached is
#           mapped around a faulting address, so scattered reads show up here)
#
# Not run in CI (it writes about 3 x MIB of files).
#
#   scripts/peak_rss.sh [MIB]        (default 2048; files go to ${TMPDIR:-/tmp})
#
# For each run it prints VmHWM (the peak resident set, mapped file pages included, as
# reported by /usr/bin/time -v) and, from /proc sampled every 50 ms, the peaks of its
# two parts: RssAnon (memory the program allocates) and RssFile (pages of the mapped
# input: clean page-cache pages, dropped without any write-back; the streaming
# writers hand them back piece by piece with `tensorfmt_core::io::release_pages`).
# Exits 1 when any run's peak reaches 100 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-2048}
LIMIT_KIB=$((100 * 1024))
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tensorfmt-peak-rss.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

cargo build --release -q -p tensorfmt-cli -p tensorfmt-benches --bin tensorfmt --bin gen_pvp
BIN=target/release/tensorfmt
target/release/gen_pvp "$WORK/big.pvp" "$MIB"
ls -l "$WORK/big.pvp"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

failed=0
# measure STATE LABEL CMD...: runs CMD under /usr/bin/time -v, sampling /proc.
measure() {
    local state=$1 label=$2
    shift 2
    rm -f "$WORK"/out.*
    if [ "$state" = cached ]; then
        cat "$WORK/big.pvp" > /dev/null
    fi
    /usr/bin/time -v -o "$WORK/time.log" "$@" > /dev/null &
    local time_pid=$! anon=0 file=0 pid a f
    while kill -0 "$time_pid" 2>/dev/null; do
        pid=$(pgrep -P "$time_pid" -x tensorfmt || true)
        if [ -n "$pid" ] && [ -r "/proc/$pid/status" ]; then
            a=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
            f=$(awk '/^RssFile:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
            [ "${a:-0}" -gt "$anon" ] && anon=$a
            [ "${f:-0}" -gt "$file" ] && file=$f
        fi
        sleep 0.05
    done
    # diff exits 1 when the files differ; they do not here.
    wait "$time_pid" || true
    local elapsed max verdict=ok
    elapsed=$(awk -F': ' '/Elapsed/ {print $2}' "$WORK/time.log")
    max=$(awk -F': ' '/Maximum resident/ {print $2}' "$WORK/time.log")
    if [ "$max" -ge "$LIMIT_KIB" ]; then
        verdict=FAIL
        failed=1
    fi
    printf '%-7s %-26s VmHWM %5d MiB  RssAnon %4d MiB  RssFile %5d MiB  %s  %s\n' \
        "$state" "$label" $((max / 1024)) $((anon / 1024)) $((file / 1024)) "$elapsed" "$verdict"
}

for state in fresh cached; do
    if [ "$state" = fresh ]; then
        # Write the input again so that its pages are those a fresh write leaves.
        target/release/gen_pvp "$WORK/big.pvp" "$MIB" > /dev/null
    fi
    for ext in npz safetensors npy; do
        measure "$state" "convert -> $ext" "$BIN" convert -q "$WORK/big.pvp" "$WORK/out.$ext"
    done
    measure "$state" "inspect --stats" "$BIN" inspect --stats "$WORK/big.pvp"
    measure "$state" "diff (itself)" "$BIN" diff -q "$WORK/big.pvp" "$WORK/big.pvp"
done

if [ "$failed" -ne 0 ]; then
    echo "FAIL: a peak resident set reached 100 MiB"
    exit 1
fi
echo "OK: every peak resident set stays under 100 MiB"
