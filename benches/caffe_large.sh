#!/usr/bin/env bash
# Caffe → ONNX on the largest net of issue 30 (item 6): py-faster-rcnn's VGG16 Faster
# R-CNN test net with seeded random weights (~550 MB caffemodel written at bench time by
# gen_caffe, tensorfmt's own writer; never committed), `tensorfmt convert --prototxt`
# against `cp` of the caffemodel, interleaved: time (target <= 2 x cp) and peak RSS
# (target <= caffemodel + 64 MiB); then onnx.checker and one onnxruntime run. Not part
# of CI. Needs about 1.7 GB free in ${TMPDIR:-/tmp}.
#
#   bash benches/caffe_large.sh [RUNS=5] [PROTOTXT=testdata/nets/py_faster_rcnn_vgg16_test.prototxt]
#
# Needs target/py-venv with numpy, onnx and onnxruntime.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS=${1:-5}
PROTOTXT=${2:-testdata/nets/py_faster_rcnn_vgg16_test.prototxt}
cargo build --release -q -p tensorfmt-cli --bin tensorfmt
cargo build --release -q -p tensorfmt-benches --bin gen_caffe
PY=${PYTHON:-target/py-venv/bin/python}
exec "$PY" benches/python/bench_caffe_large.py --tensorfmt target/release/tensorfmt \
    --gen target/release/gen_caffe --prototxt "$PROTOTXT" --runs "$RUNS"
