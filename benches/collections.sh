#!/usr/bin/env bash
# Collections benchmark (issue 14): converting a generated collection with
#   - a shell loop of single-file `tensorfmt convert` runs,
#   - GNU parallel running the same single-file command on every core,
#   - `tensorfmt convert -r -j 1` and `-j <cores>`,
# on SMALL small files and on LARGE files of LARGE_MIB MiB, with peak RSS: REPEAT
# rounds of the four commands one after another, min / median seconds of each and the
# ratios (parallel's time / ours) of the minima and of the medians. Not part of CI (it
# writes GBs).
#
#   bash benches/collections.sh [SMALL=2000] [LARGE=20] [LARGE_MIB=100] [REPEAT=5]
#
# Installs GNU parallel and GNU time from Debian's packages when they are missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SMALL=${1:-2000}
LARGE=${2:-20}
LARGE_MIB=${3:-100}
REPEAT=${4:-5}
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

# min and median of the numbers given as arguments (the upper median for an even count).
min_median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[1], v[int(NR/2)+1]}'; }

run_set() {
    local name=$1 dir=$2
    local files
    mapfile -t files < <(find "$dir" -type f | sort)
    local -a loop_s=() par_s=() j1_s=() jn_s=()
    local loop_rss=0 par_rss=0 j1_rss=0 jn_rss=0 s rss
    for _ in $(seq 1 "$REPEAT"); do
        rm -rf "$WORK/out"; mkdir -p "$WORK/out"
        read -r s rss < <(measure bash -c 'for f in "$@"; do b=${f##*/}; "'"$TF"'" convert --quiet --force "$f" "'"$WORK/out"'/${b%.*}.npz"; done' _ "${files[@]}")
        loop_s+=("$s"); [ "$rss" -gt "$loop_rss" ] && loop_rss=$rss
        rm -rf "$WORK/out"; mkdir -p "$WORK/out"
        read -r s rss < <(measure parallel -j "$CORES" "$TF" convert --quiet --force {} "$WORK/out/{/.}.npz" ::: "${files[@]}")
        par_s+=("$s"); [ "$rss" -gt "$par_rss" ] && par_rss=$rss
        rm -rf "$WORK/out"
        read -r s rss < <(measure "$TF" convert -r -j 1 --quiet --to npz "$dir" "$WORK/out")
        j1_s+=("$s"); [ "$rss" -gt "$j1_rss" ] && j1_rss=$rss
        rm -rf "$WORK/out"
        read -r s rss < <(measure "$TF" convert -r -j "$CORES" --quiet --to npz "$dir" "$WORK/out")
        jn_s+=("$s"); [ "$rss" -gt "$jn_rss" ] && jn_rss=$rss
        rm -rf "$WORK/out"
    done
    local par_min par_med min med
    read -r par_min par_med < <(min_median "${par_s[@]}")
    echo
    echo "$name (${#files[@]} files, $(du -sh "$dir" | cut -f1)), $CORES cores, $REPEAT alternated rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    echo "| command | seconds min / median | peak RSS MiB (max) | ratio (parallel / this) of min / of median |"
    echo "|---|---|---|---|"
    for row in "shell loop of tensorfmt convert:loop" "GNU parallel -j $CORES, same command:par" \
               "tensorfmt convert -r -j 1:j1" "tensorfmt convert -r -j $CORES:jn"; do
        IFS=: read -r label key <<<"$row"
        local -n times="${key}_s"
        local -n peak="${key}_rss"
        read -r min med < <(min_median "${times[@]}")
        printf '| %s | %.2f / %.2f | %.1f | %.2f / %.2f |\n' "$label" "$min" "$med" \
            "$(echo "$peak / 1024" | bc -l)" "$(echo "$par_min / $min" | bc -l)" "$(echo "$par_med / $med" | bc -l)"
        unset -n times peak
    done
}

run_set "small files" "$WORK/small"
run_set "large files ($LARGE_MIB MiB each)" "$WORK/large"
