"""Writes the real-Caffe fixtures of testdata/lower/ (MVN, LSTM, RNN): for each case a
deploy ``net.prototxt``, the ``net.caffemodel`` pycaffe saves after filling the layer's
parameter blobs with seeded random values, and ``io.npz`` with the inputs fed and every
top of the net after one forward (a fresh net: recurrent state starts at zero).

Run by hand with a pycaffe built from BVLC/caffe (../shared/oracles/build_caffe.sh):

    CAFFE_ROOT=/tmp/caffebuild $CAFFE_ROOT/venv/bin/python testdata/lower/gen_caffe_fixtures.py [CASE ...]

(no case names: every case; the npz files then differ in their zip timestamps only).

``CAFFE_ROOT`` is the build directory (``$CAFFE_ROOT/bvlc/python`` holds pycaffe); this
script does not build Caffe. CI never runs it: the tests read the committed files.
"""

import os
import pathlib
import subprocess
import sys

import numpy as np

ROOT = os.environ.get("CAFFE_ROOT")
if not ROOT:
    sys.exit("set CAFFE_ROOT to a BVLC Caffe build (see ../shared/oracles/README.md)")
sys.path.insert(0, str(pathlib.Path(ROOT) / "bvlc" / "python"))
os.environ.setdefault("GLOG_minloglevel", "2")
import caffe  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


def shape(*dims):
    return "input_shape { " + " ".join(f"dim: {d}" for d in dims) + " }"


def inputs(**blobs):
    return "".join(f'input: "{k}"\n{shape(*v)}\n' for k, v in blobs.items())


T, N, D, H, S = 5, 3, 4, 3, 2
# cont: 0 starts a sequence; stream 1 restarts at t=2, stream 2 at t=3; stream 2 has a
# non-binary value (Caffe multiplies by cont, it does not test it against 1).
CONT = np.array([[0, 0, 0], [1, 1, 1], [1, 0, 1], [1, 1, 0], [1, 1, 0.5]], np.float32)

CASES = {
    "mvn_default": (inputs(data=(2, 3, 4, 5)) + 'layer { name: "mvn" type: "MVN" bottom: "data" top: "mvn" }\n', {}),
    "mvn_across_channels_eps": (
        inputs(data=(2, 3, 4, 5)) + 'layer { name: "mvn" type: "MVN" bottom: "data" top: "mvn" mvn_param { across_channels: true eps: 0.5 } }\n', {}),
    "mvn_mean_only": (
        inputs(data=(2, 3, 4, 5)) + 'layer { name: "mvn" type: "MVN" bottom: "data" top: "mvn" mvn_param { normalize_variance: false } }\n', {}),
    "lstm_cont": (
        inputs(x=(T, N, 2, 2), cont=(T, N))
        + f'layer {{ name: "lstm" type: "LSTM" bottom: "x" bottom: "cont" top: "h" recurrent_param {{ num_output: {H} }} }}\n',
        {"cont": CONT}),
    "lstm_expose_hidden_static": (
        inputs(x=(T, N, D), cont=(T, N), x_static=(N, S), h0=(1, N, H), c0=(1, N, H))
        + 'layer { name: "lstm" type: "LSTM" bottom: "x" bottom: "cont" bottom: "x_static" bottom: "h0" bottom: "c0"\n'
        + f'  top: "h" top: "hT" top: "cT" recurrent_param {{ num_output: {H} expose_hidden: true }} }}\n',
        {"cont": CONT}),
    "rnn_cont": (
        inputs(x=(T, N, D), cont=(T, N))
        + f'layer {{ name: "rnn" type: "RNN" bottom: "x" bottom: "cont" top: "o" recurrent_param {{ num_output: {H} }} }}\n',
        {"cont": CONT}),
    "rnn_expose_hidden_static": (
        inputs(x=(T, N, D), cont=(T, N), x_static=(N, S), h0=(1, N, H))
        + 'layer { name: "rnn" type: "RNN" bottom: "x" bottom: "cont" bottom: "x_static" bottom: "h0"\n'
        + f'  top: "o" top: "hT" recurrent_param {{ num_output: {H} expose_hidden: true }} }}\n',
        {"cont": CONT}),
}


# Added later (issue 30's recurrent lowering), seeded apart so that the cases above keep
# their values: initial states that cont[0] does not flush (1, a non-binary 0.25, and 0),
# a single step, a static input without expose_hidden.
CONT1 = np.array([[1, 0.25, 0], [1, 1, 1], [0.5, 0, 1]], np.float32)
MORE_CASES = {
    "lstm_expose_hidden_cont1": (
        inputs(x=(3, N, D), cont=(3, N), h0=(1, N, H), c0=(1, N, H))
        + 'layer { name: "lstm" type: "LSTM" bottom: "x" bottom: "cont" bottom: "h0" bottom: "c0"\n'
        + f'  top: "h" top: "hT" top: "cT" recurrent_param {{ num_output: {H} expose_hidden: true }} }}\n',
        {"cont": CONT1}),
    "rnn_expose_hidden_cont1": (
        inputs(x=(3, N, D), cont=(3, N), h0=(1, N, H))
        + 'layer { name: "rnn" type: "RNN" bottom: "x" bottom: "cont" bottom: "h0"\n'
        + f'  top: "o" top: "hT" recurrent_param {{ num_output: {H} expose_hidden: true }} }}\n',
        {"cont": CONT1}),
    "lstm_one_step_static": (
        inputs(x=(1, 2, D), cont=(1, 2), x_static=(2, 3, 2))
        + 'layer { name: "lstm" type: "LSTM" bottom: "x" bottom: "cont" bottom: "x_static" top: "h"\n'
        + '  recurrent_param { num_output: 5 } }\n',
        {"cont": np.array([[1, 0.25]], np.float32)}),
}


def caffe_commit():
    src = pathlib.Path(ROOT) / "bvlc"
    try:
        return subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return "9b891540183ddc834a02b2bd81b31afae71b2153 (build_caffe.sh's pinned commit)"


def main():
    caffe.set_mode_cpu()
    only = set(sys.argv[1:])
    cases = list(enumerate(sorted(CASES.items()))) + list(enumerate(sorted(MORE_CASES.items()), start=100))
    for seed, (name, (text, fixed)) in cases:
        if only and name not in only:
            continue
        d = HERE / name
        d.mkdir(exist_ok=True)
        (d / "net.prototxt").write_text(f'name: "{name}"\n' + text)
        net = caffe.Net(str(d / "net.prototxt"), caffe.TEST)
        rng = np.random.default_rng(100 + seed)
        for layer, blobs in net.params.items():
            for b in blobs:
                b.data[...] = rng.uniform(-0.8, 0.8, b.data.shape)
        feeds = {}
        for k in net.inputs:
            v = fixed.get(k)
            if v is None:
                v = rng.standard_normal(net.blobs[k].data.shape).astype(np.float32)
            feeds[k] = v
            net.blobs[k].data[...] = v
        net.forward()
        outs = {f"out_{k}": net.blobs[k].data.copy() for k in net.outputs}
        params = {f"param_{layer}_{i}": b.data.copy() for layer, blobs in net.params.items() for i, b in enumerate(blobs)}
        net.save(str(d / "net.caffemodel"))
        np.savez(d / "io.npz", **{f"in_{k}": v for k, v in feeds.items()}, **outs, **params,
                 caffe_commit=np.array(caffe_commit()))
        print(name, {k: v.shape for k, v in outs.items()}, {k: v.shape for k, v in params.items()})


if __name__ == "__main__":
    main()
