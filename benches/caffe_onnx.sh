#!/usr/bin/env bash
# Caffe → ONNX benchmark row (issue 22): ResNet-50 with random weights (~100 MB caffemodel
# written by tensorfmt's own writer), `tensorfmt convert --prototxt` time and peak RSS
# against python protobuf's parse of the same file, interleaved; then a one-off check
# (onnx.checker full_check, onnxruntime vs OpenCV 4 dnn on one input). Not part of CI.
#
#   bash benches/caffe_onnx.sh [RUNS=7] [PROTOTXT=../shared/corpus/caffe/nets/resnet50.prototxt]
#
# Needs target/py-venv (bash /work/pyvenv-setup.sh) with protobuf, numpy, onnx,
# onnxruntime and opencv-python-headless<5.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS=${1:-7}
PROTOTXT=${2:-../shared/corpus/caffe/nets/resnet50.prototxt}
cargo build --release -q -p tensorfmt-cli --bin tensorfmt
# The generator adds only the benches crate on top of the CLI's release dependencies.
cargo build --release -q -p tensorfmt-benches --bin gen_caffe
PY=${PYTHON:-target/py-venv/bin/python}
exec "$PY" benches/python/bench_caffe_onnx.py --tensorfmt target/release/tensorfmt \
    --gen target/release/gen_caffe --prototxt "$PROTOTXT" --runs "$RUNS"
