"""The Python tools a user would pick instead, for benches/src/bin/growth.rs.

    python anchors.py OP INPUT OUTPUT

Runs one anchor once and prints its wall time in seconds (CPU time of the process
with GROWTH_CPU=1, as the Rust side then measures):

    npz-open             np.load(INPUT) (lazy) and its .files
    npz-load             np.load(INPUT) and every member read
    npz-to-safetensors   np.load + safetensors.numpy.save_file
    safetensors-open     safe_open(INPUT).keys()
    safetensors-load     safetensors.numpy.load_file
    safetensors-to-npz   safetensors.numpy.load_file + np.savez
    caffemodel-load      NetParameter.ParseFromString + np.array of every blob
    caffemodel-to-safetensors
                         NetParameter.ParseFromString + np.array of every blob + save_file

The caffe_pb2-style message class is built from the FileDescriptorSet compiled from
proto/caffe.proto (crates/tensorfmt-caffe/src/generated/caffe.fds) with the protobuf
package's descriptor_pool, as benches/python/bench_caffe_onnx.py does (no protoc). Its
construction is not timed: a user's caffe_pb2 is imported once.
"""

import os
import pathlib
import sys
import time

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file


FDS = pathlib.Path(__file__).resolve().parents[2] / "crates/tensorfmt-caffe/src/generated/caffe.fds"


def net_parameter_class():
    """caffe.NetParameter, built from the compiled descriptor set (as caffe_pb2 would be)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fds = descriptor_pb2.FileDescriptorSet.FromString(FDS.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("caffe.NetParameter"))


def caffe_arrays(cls, src):
    """Every blob of a caffemodel as a float32 array named LAYER/INDEX (tensorfmt's names)."""
    net = cls()
    with open(src, "rb") as f:
        net.ParseFromString(f.read())
    out = {}
    for layer in list(net.layer) + list(net.layers):
        for j, blob in enumerate(layer.blobs):
            shape = list(blob.shape.dim) or [d for d in (blob.num, blob.channels, blob.height, blob.width)]
            out[f"{layer.name}/{j}"] = np.array(blob.data, dtype=np.float32).reshape(shape)
    return out


def main() -> None:
    op, src, out = sys.argv[1:4]
    cls = net_parameter_class() if op.startswith("caffemodel-") else None
    clock = time.process_time if os.environ.get("GROWTH_CPU") else time.perf_counter
    t = clock()
    if op == "npz-open":
        with np.load(src) as z:
            len(z.files)
    elif op == "npz-load":
        with np.load(src) as z:
            {k: z[k] for k in z.files}
    elif op == "npz-to-safetensors":
        with np.load(src) as z:
            save_file({k: z[k] for k in z.files}, out)
    elif op == "safetensors-open":
        with safe_open(src, framework="numpy") as f:
            len(list(f.keys()))
    elif op == "safetensors-load":
        load_file(src)
    elif op == "safetensors-to-npz":
        np.savez(out, **load_file(src))
    elif op == "caffemodel-load":
        caffe_arrays(cls, src)
    elif op == "caffemodel-to-safetensors":
        save_file(caffe_arrays(cls, src), out)
    else:
        raise SystemExit(f"unknown anchor {op}")
    print(clock() - t)


if __name__ == "__main__":
    main()
