"""Caffe → ONNX on the largest net of issue 30 (item 6): py-faster-rcnn's VGG16 Faster
R-CNN test net with seeded random weights (~550 MB caffemodel, written at bench time by
tensorfmt's own writer through `gen_caffe`, never committed). `tensorfmt convert
MODEL.caffemodel OUT.onnx --prototxt DEPLOY.prototxt` against `cp` of the same
caffemodel, both as child processes, interleaved in one run: time and peak RSS (and,
for context, `cp` followed by `sync` of the copy: the converter syncs its output before
renaming it into place, which `cp` does not).

    bash benches/caffe_large.sh [RUNS]          # builds the binaries, then runs this
    target/py-venv/bin/python benches/python/bench_caffe_large.py \\
        --tensorfmt target/release/tensorfmt --gen target/release/gen_caffe [--runs 5]

Targets: convert time <= 2 × cp time; convert peak RSS <= caffemodel size + 64 MiB.
Before each timed run the outputs are removed (the convert refuses an existing file; cp
gets the same fresh file) and `sync` runs (untimed), so no run pays for the previous
one's writeback. Peak RSS is the child's ru_maxrss, taken by a small launcher
process (a child forked from this process would inherit its high-water mark). Then a
one-off check: onnx.checker and an onnxruntime run of the model on one input.
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
NET = ROOT / "testdata/nets/py_faster_rcnn_vgg16_test.prototxt"
MIB = 1 << 20

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
    p = subprocess.run([sys.executable, "-S", "-c", LAUNCH, *map(str, cmd)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stderr}")
    dt, rss = p.stdout.split()
    return float(dt), int(rss)


def validate(out, proto):
    import numpy as np
    import onnx
    import onnxruntime as ort

    onnx.checker.check_model(str(out))
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    shapes = {i.name: i.shape for i in sess.get_inputs()}
    data = shapes["data"]
    feeds = {
        "data": np.random.default_rng(0).standard_normal(data).astype(np.float32),
        "im_info": np.array([[data[2], data[3], 1.0]], np.float32),
    }
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    return ", ".join(f"{k} {list(v.shape)}" for k, v in outs.items()), all(np.isfinite(v).all() for v in outs.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tensorfmt", default=str(ROOT / "target/release/tensorfmt"))
    ap.add_argument("--gen", default=str(ROOT / "target/release/gen_caffe"))
    ap.add_argument("--prototxt", default=str(NET))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", help="directory for the temporary files (default: $TMPDIR)")
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory(dir=args.dir)
    work = pathlib.Path(tmp.name)
    model, copy, out = work / "model.caffemodel", work / "copy.caffemodel", work / "model.onnx"
    proto = pathlib.Path(args.prototxt)
    gen = subprocess.run([args.gen, proto, model], check=True, capture_output=True, text=True)
    print(gen.stdout.strip().replace(str(work), "$TMP"))
    size = model.stat().st_size
    cp = ["cp", model, copy]
    # For context: cp with the durability the converter gives (fsync before it is done).
    cp_sync = ["sh", "-c", f"cp '{model}' '{copy}' && sync '{copy}'"]
    convert = [args.tensorfmt, "convert", model, out, "--prototxt", proto]

    def fresh():
        # Each timed command starts with nothing of the others left to write back.
        copy.unlink(missing_ok=True)
        out.unlink(missing_ok=True)
        os.sync()

    # Warm-up of both (page cache), then interleaved runs.
    fresh()
    run_child(cp)
    run_child(convert)
    load0 = os.getloadavg()
    cp_t, cp_rss, conv_t, conv_rss, sync_t = [], [], [], [], []
    for _ in range(args.runs):
        fresh()
        dt, rss = run_child(cp)
        cp_t.append(dt)
        cp_rss.append(rss)
        fresh()
        sync_t.append(run_child(cp_sync)[0])
        fresh()
        dt, rss = run_child(convert)
        conv_t.append(dt)
        conv_rss.append(rss)
    load1 = os.getloadavg()
    onnx_size = out.stat().st_size
    copy.unlink(missing_ok=True)
    shapes, finite = validate(out, proto)

    cmin, cmed = min(conv_t), statistics.median(conv_t)
    pmin, pmed = min(cp_t), statistics.median(cp_t)
    rss = max(conv_rss)
    bound = size + 64 * MIB
    print(f"model: {proto.name} random weights, caffemodel {size / MIB:.1f} MiB, onnx {onnx_size / MIB:.1f} MiB")
    print(f"runs: {args.runs} interleaved after one warm-up; load average {load0[0]:.1f} before, {load1[0]:.1f} after ({os.cpu_count()} CPUs)")
    print()
    print("| path | min s | median s | peak RSS MiB |")
    print("|---|---|---|---|")
    print(f"| `tensorfmt convert --prototxt` (child process) | {cmin:.3f} | {cmed:.3f} | {rss / MIB:.0f} |")
    print(f"| `cp MODEL.caffemodel COPY` (child process) | {pmin:.3f} | {pmed:.3f} | {max(cp_rss) / MIB:.0f} |")
    print(f"| `cp MODEL.caffemodel COPY && sync COPY` (context: durable like the converter) | {min(sync_t):.3f} | {statistics.median(sync_t):.3f} | - |")
    print()
    print(f"time ratio convert / cp: min {cmin / pmin:.2f}, median {cmed / pmed:.2f} (target <= 2)")
    print(f"peak RSS: {rss / MIB:.0f} MiB, caffemodel {size / MIB:.0f} MiB: {(rss - size) / MIB:+.0f} MiB (target <= +64 MiB)")
    print(f"onnx.checker: ok; onnxruntime at the declared input: {shapes}; finite: {finite}")
    met = cmin <= 2 * pmin and cmed <= 2 * pmed and rss <= bound and finite
    print("targets met" if met else "TARGET MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
