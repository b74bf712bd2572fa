"""Caffe → ONNX benchmark row (issue 22): `tensorfmt convert MODEL.caffemodel OUT.onnx
--prototxt DEPLOY.prototxt` on a ResNet-50-size model with random weights, time and peak
RSS, against reading the same caffemodel with python protobuf (`caffe_pb2`-style
`NetParameter.ParseFromString`), interleaved in one run; plus a one-off validation that
the ONNX file passes `onnx.checker` (full_check) and gives OpenCV 4's outputs in
onnxruntime on one input.

    bash benches/caffe_onnx.sh [RUNS]          # builds the binaries, then runs this
    target/py-venv/bin/python benches/python/bench_caffe_onnx.py \
        --tensorfmt target/release/tensorfmt --gen target/release/gen_caffe [--runs 7]

The python message classes are built at run time from the FileDescriptorSet that xtask
compiles from proto/caffe.proto (crates/tensorfmt-caffe/src/generated/caffe.fds) with
google.protobuf's descriptor_pool: no protoc, no grpcio-tools. The anchor is timed in
this process (file read + parse, no interpreter start-up), the conversion as a child
process (start-up included): both choices favour the anchor. Peak RSS is the child's
ru_maxrss (VmHWM), taken by a small launcher process (see LAUNCH).

Targets: convert time < python parse time; convert peak RSS < 2 × model file size.
"""

import argparse
import os
import pathlib
import resource  # noqa: F401  (documents that ru_maxrss is in KiB on Linux)
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
FDS = ROOT / "crates/tensorfmt-caffe/src/generated/caffe.fds"
NET = ROOT.parent / "shared/corpus/caffe/nets/resnet50.prototxt"


def net_parameter_class():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fds = descriptor_pb2.FileDescriptorSet.FromString(FDS.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    desc = pool.FindMessageTypeByName("caffe.NetParameter")
    return message_factory.GetMessageClass(desc)


# Linux keeps a process' RSS high-water mark across fork and exec, so a child forked
# straight from this (large) process would report this process' RSS. A small launcher
# (this file's size in memory, ~10 MB) forks the measured command and reports its
# ru_maxrss and wall time.
LAUNCH = """
import resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
dt = time.perf_counter() - t
if p.returncode:
    sys.exit(p.stderr.decode(errors="replace"))
print(dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def run_child(cmd):
    """Runs cmd from a small launcher; returns (seconds, peak RSS in bytes)."""
    p = subprocess.run(
        [sys.executable, "-S", "-c", LAUNCH, *map(str, cmd)], capture_output=True, text=True
    )
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stderr}")
    dt, rss = p.stdout.split()
    return float(dt), int(rss)


def python_parse(cls, path):
    m = cls()
    with open(path, "rb") as f:
        m.ParseFromString(f.read())
    n = len(m.layer) + len(m.layers)
    del m
    return n


PY_RSS = """
import sys
sys.path.insert(0, {here!r})
import bench_caffe_onnx as b
print(b.python_parse(b.net_parameter_class(), {path!r}))
"""


def validate(model, proto, onnx_path):
    import cv2
    import numpy as np
    import onnx
    import onnxruntime as ort

    onnx.checker.check_model(str(onnx_path), full_check=True)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    outs = [o.name for o in sess.get_outputs()]
    got = sess.run(outs, {inp.name: x})
    net = cv2.dnn.readNetFromCaffe(str(proto), str(model))
    net.setInput(x, inp.name)
    ref = net.forward(outs)
    lines = []
    ok = True
    for name, g, r in zip(outs, got, ref):
        g = np.asarray(g, np.float64).reshape(-1)
        r = np.asarray(r, np.float64).reshape(-1)
        diff = float(np.max(np.abs(g - r)))
        bound = 1e-4 * max(1.0, float(np.max(np.abs(r))))
        cos = float(g @ r / (np.linalg.norm(g) * np.linalg.norm(r)))
        good = g.shape == r.shape and diff <= bound and cos >= 0.99999
        ok &= good
        lines.append(
            f"output {name} {list(got[0].shape)}: max|diff| {diff:.3g} (bound {bound:.3g}), "
            f"cosine {cos:.7f} -> {'ok' if good else 'FAIL'}"
        )
    return ok, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tensorfmt", default=str(ROOT / "target/release/tensorfmt"))
    ap.add_argument("--gen", default=str(ROOT / "target/release/gen_caffe"))
    ap.add_argument("--prototxt", default=str(NET))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--keep", help="directory for the caffemodel/onnx (default: a temp dir)")
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory(dir=args.keep)
    work = pathlib.Path(tmp.name)
    model = work / "model.caffemodel"
    out = work / "model.onnx"
    proto = pathlib.Path(args.prototxt)
    subprocess.run([args.gen, proto, model], check=True)
    size = model.stat().st_size
    cls = net_parameter_class()
    convert = [args.tensorfmt, "convert", model, out, "--prototxt", proto]

    # Warm-up of both (page cache, lazy imports), then interleaved runs.
    run_child(convert)
    python_parse(cls, model)
    load0 = os.getloadavg()
    conv_t, conv_rss, py_t = [], [], []
    for _ in range(args.runs):
        out.unlink(missing_ok=True)
        dt, rss = run_child(convert)
        conv_t.append(dt)
        conv_rss.append(rss)
        t = time.perf_counter()
        python_parse(cls, model)
        py_t.append(time.perf_counter() - t)
    load1 = os.getloadavg()
    _, py_rss = run_child(
        [sys.executable, "-c", PY_RSS.format(here=str(pathlib.Path(__file__).parent), path=str(model))]
    )

    ok, vlines = validate(model, proto, out)

    cmin, cmed = min(conv_t), statistics.median(conv_t)
    pmin, pmed = min(py_t), statistics.median(py_t)
    rss = max(conv_rss)
    mb = 1e6
    print(f"model: {proto.name} random weights, caffemodel {size / mb:.1f} MB, onnx {out.stat().st_size / mb:.1f} MB")
    print(f"runs: {args.runs} interleaved after one warm-up; load average {load0[0]:.1f} before, {load1[0]:.1f} after ({os.cpu_count()} CPUs)")
    print()
    print("| path | min s | median s | peak RSS MB | RSS / model size |")
    print("|---|---|---|---|---|")
    print(f"| `tensorfmt convert --prototxt` (child process) | {cmin:.3f} | {cmed:.3f} | {rss / mb:.0f} | {rss / size:.2f} |")
    print(f"| python protobuf `NetParameter.ParseFromString` (in-process) | {pmin:.3f} | {pmed:.3f} | {py_rss / mb:.0f} (own process) | {py_rss / size:.2f} |")
    print()
    print(f"time ratio convert / python parse: min {cmin / pmin:.2f}, median {cmed / pmed:.2f} (target < 1)")
    print(f"peak RSS / model size: {rss / size:.2f} (target < 2)")
    for line in vlines:
        print(line)
    print(f"onnx.checker full_check: ok; onnxruntime vs OpenCV {cv2_version()}: {'ok' if ok else 'FAIL'}")
    met = cmin < pmin and cmed < pmed and rss < 2 * size and ok
    print("targets met" if met else "TARGET MISSED")
    return 0 if ok else 1


def cv2_version():
    import cv2

    return cv2.__version__


if __name__ == "__main__":
    sys.exit(main())
