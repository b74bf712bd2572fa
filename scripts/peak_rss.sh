#!/usr/bin/env bash
# Peak memory of a streaming conversion: a 2 GiB dense PVP activity file to npz with
# the release CLI, under /usr/bin/time -v. Not run in CI (it writes 4 GiB of files).
#
#   scripts/peak_rss.sh [MIB]        (default 2048; files go to ${TMPDIR:-/tmp})
#
# Prints the maximum resident set reported by /usr/bin/time and, from /proc sampled
# every 50 ms, the peak of its two parts: RssAnon (memory the program allocates) and
# RssFile (pages of the mmapped input file that have been read, which the kernel counts
# as resident until it needs the memory back; they are clean page-cache pages, shared,
# dropped without any write-back; the streaming writer hands them back to the kernel
# piece by piece with `tensorfmt_core::io::release_pages`). Exits 1 when the maximum
# resident set reaches 256 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-2048}
LIMIT_KIB=$((256 * 1024))
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tensorfmt-peak-rss.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

cargo build --release -q -p tensorfmt-cli -p tensorfmt-benches --bin tensorfmt --bin gen_pvp
target/release/gen_pvp "$WORK/big.pvp" "$MIB"
ls -l "$WORK/big.pvp"

/usr/bin/time -v -o "$WORK/time.log" \
    target/release/tensorfmt convert "$WORK/big.pvp" "$WORK/big.npz" &
TIME_PID=$!
anon=0
file=0
while kill -0 "$TIME_PID" 2>/dev/null; do
    pid=$(pgrep -P "$TIME_PID" -x tensorfmt || true)
    if [ -n "$pid" ] && [ -r "/proc/$pid/status" ]; then
        a=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
        f=$(awk '/^RssFile:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
        [ "${a:-0}" -gt "$anon" ] && anon=$a
        [ "${f:-0}" -gt "$file" ] && file=$f
    fi
    sleep 0.05
done
wait "$TIME_PID"
ls -l "$WORK/big.npz"
elapsed=$(awk -F': ' '/Elapsed/ {print $2}' "$WORK/time.log")
max=$(awk -F': ' '/Maximum resident/ {print $2}' "$WORK/time.log")
echo "input ${MIB} MiB, elapsed ${elapsed}"
echo "maximum resident set (time -v): ${max} KiB = $((max / 1024)) MiB"
echo "peak RssAnon (sampled):         ${anon} KiB = $((anon / 1024)) MiB"
echo "peak RssFile (sampled):         ${file} KiB = $((file / 1024)) MiB"
if [ "$max" -ge "$LIMIT_KIB" ]; then
    echo "FAIL: the resident set reached 256 MiB"
    exit 1
fi
echo "OK: the resident set stays under 256 MiB"
