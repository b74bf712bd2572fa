#!/usr/bin/env bash
# Collections benchmark (issue 14): converting a generated collection with
#   - a shell loop of single-file `tensorfmt convert` runs,
#   - GNU parallel running the same single-file command on every core,
#   - `tensorfmt convert -r -j 1` and `-j <cores>`,
# on SMALL small files and on LARGE files of LARGE_MIB MiB, with peak RSS; the ratios
# (parallel's time / ours) come from one run. Not part of CI (it writes GBs).
#
#   bash benches/collections.sh [SMALL=2000] [LARGE=20] [LARGE_MIB=100]
#
# Installs GNU parallel and GNU time from Debian's packages when they are missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SMALL=${1:-2000}
LARGE=${2:-20}
LARGE_MIB=${3:-100}
CORES=$(nproc)

need() { command -v "$1" >/dev/null 2>&1 || { echo "installing $2" >&2; apt-get install -y -q "$2" >/dev/null; }; }
need parallel parallel
[ -x /usr/bin/time ] || { echo "installing time" >&2; apt-get install -y -q time >/dev/null; }

cargo build --release -q -p tensorfmt-cli -p tensorfmt-benches --bin tensorfmt --bin gen_pvp
TF=$PWD/target/release/tensorfmt
GEN=$PWD/target/release/gen_pvp
WORK=$(mktemp -d /tmp/tensorfmt-collections.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

mkdir -p "$WORK/small" "$WORK/large"
samples=(testdata/pvp/dense_f32.pvp testdata/pvp/sparse_values_dt4.pvp testdata/pvp/kernel_f32.pvp \
         testdata/som/data_f32_2x3.bin testdata/caffe/v2_tiny.caffemodel testdata/primitiv/parameter_2x3_stats.data)
for i in $(seq 1 "$SMALL"); do
    s=${samples[$((i % ${#samples[@]}))]}
    d="$WORK/small/d$((i % 20))"
    mkdir -p "$d"
    cp "$s" "$d/f$i.${s##*.}"
done
for i in $(seq 1 "$LARGE"); do
    "$GEN" "$WORK/large/movie$i.pvp" "$LARGE_MIB" >/dev/null
done

# seconds and peak RSS (KiB) of a command, as "SECONDS RSS".
measure() {
    local log="$WORK/time.log"
    local start end
    start=$(date +%s.%N)
    /usr/bin/time -f "%M" -o "$log" "$@" >/dev/null 2>&1 || true
    end=$(date +%s.%N)
    echo "$(echo "$end - $start" | bc) $(tail -1 "$log")"
}

run_set() {
    local name=$1 dir=$2
    local files
    mapfile -t files < <(find "$dir" -type f | sort)
    rm -rf "$WORK/out"; mkdir -p "$WORK/out"
    read -r loop_s loop_rss < <(measure bash -c 'for f in "$@"; do b=${f##*/}; "'"$TF"'" convert --quiet --force "$f" "'"$WORK/out"'/${b%.*}.npz"; done' _ "${files[@]}")
    rm -rf "$WORK/out"; mkdir -p "$WORK/out"
    read -r par_s par_rss < <(measure parallel -j "$CORES" "$TF" convert --quiet --force {} "$WORK/out/{/.}.npz" ::: "${files[@]}")
    rm -rf "$WORK/out"
    read -r j1_s j1_rss < <(measure "$TF" convert -r -j 1 --quiet --to npz "$dir" "$WORK/out")
    rm -rf "$WORK/out"
    read -r jn_s jn_rss < <(measure "$TF" convert -r -j "$CORES" --quiet --to npz "$dir" "$WORK/out")
    rm -rf "$WORK/out"
    echo
    echo "## $name (${#files[@]} files, $(du -sh "$dir" | cut -f1)), $CORES cores"
    echo "| command | seconds | peak RSS MiB | ratio (parallel / this) |"
    echo "|---|---|---|---|"
    for row in "shell loop:$loop_s:$loop_rss" "GNU parallel -j $CORES:$par_s:$par_rss" \
               "tensorfmt convert -r -j 1:$j1_s:$j1_rss" "tensorfmt convert -r -j $CORES:$jn_s:$jn_rss"; do
        IFS=: read -r label s rss <<<"$row"
        printf '| %s | %.2f | %.1f | %.2f |\n' "$label" "$s" "$(echo "$rss / 1024" | bc -l)" "$(echo "$par_s / $s" | bc -l)"
    done
}

run_set "small files" "$WORK/small"
run_set "large files ($LARGE_MIB MiB each)" "$WORK/large"
