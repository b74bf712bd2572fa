"""Every file we write opens in the reader that owns its format (issue 34 item 1).

Each fixture of ``testdata/`` and each file of the shared corpus that tensorfmt opens is
converted to npz, safetensors and ONNX (and npy when it holds one tensor), and each
npz and safetensors result back to the source's legacy format (the carried skeleton
restored). Each written file is then opened by the owner's reader, not ours:

* npz: ``np.load(allow_pickle=False)`` (which decides by the first bytes) reading every
  member, and ``zipfile.testzip``; npy: ``np.load``;
* safetensors: the ``safetensors`` package; ONNX: ``onnx.checker``;
* PVP: OpenPV's reading rules (``BufferUtilsPvp``): a legal (filetype, datatype,
  datasize), frames that tile the file exactly;
* PINK: PINK 2.5's header rules (comment block, version 2 header, payload size);
* Caffe: Google's protobuf parser with Caffe's schema (``caffe.fds``), every blob's
  values matching its shape as ``Blob::FromProto`` requires;
* primitiv: a streaming MessagePack decoder reading the whole file.

A legacy file written back is held to what its source passes: a source the owner's
reader refuses (the corpus keeps crash-truncated and legacy files) may come back as
the same bytes.
"""

import os
import struct
import zipfile

import numpy as np
import pytest

import tensorfmt

from conftest import REPO, TESTDATA, corpus_dir, require_corpus, require_module

onnx = require_module("onnx")
st_numpy = require_module("safetensors.numpy")
msgpack = require_module("msgpack")
descriptor_pb2 = require_module("google.protobuf.descriptor_pb2")
descriptor_pool = require_module("google.protobuf.descriptor_pool")
message_factory = require_module("google.protobuf.message_factory")

LEGACY = ("pvp", "som", "primitiv", "caffe")
SKIP_SUFFIXES = {".dump", ".md", ".txt", ".py", ".json", ".prototxt"}


def _sources():
    roots = [TESTDATA / d for d in ("core",) + LEGACY]
    roots += [corpus_dir() / d for d in LEGACY if (corpus_dir() / d).is_dir()]
    out = []
    for root in roots:
        for p in sorted(root.rglob("*")):
            if not p.is_file() or p.suffix in SKIP_SUFFIXES:
                continue
            try:
                with tensorfmt.open(p) as doc:
                    doc.format  # noqa: B018 - opens, or is not a source
            except tensorfmt.TensorfmtError:
                continue
            out.append(p)
    return out


SOURCES = _sources()


def _id(p):
    for base in (TESTDATA, corpus_dir()):
        try:
            return str(p.relative_to(base))
        except ValueError:
            pass
    return p.name


# --- the owners' readers ---------------------------------------------------------------


def check_npz(p):
    with open(p, "rb") as f:
        assert f.read(4) in (b"PK\x03\x04", b"PK\x05\x06"), "not a zip archive at byte 0"
    with np.load(p, allow_pickle=False) as z:
        for k in z.files:
            z[k]
    with zipfile.ZipFile(p) as z:
        assert z.testzip() is None


def check_npy(p):
    np.load(p, allow_pickle=False)


def check_safetensors(p):
    st_numpy.load_file(p)


def check_onnx(p):
    onnx.checker.check_model(onnx.load(p))


def check_pvp(p):
    """OpenPV's BufferUtilsPvp: the header, a legal type triple, frames tiling the file."""
    data = p.read_bytes()
    assert len(data) >= 80, "shorter than a header"
    (headersize, numparams, filetype, nx, ny, nf, _numrecords, _recordsize, datasize, datatype) = struct.unpack_from(
        "<10i", data, 0
    )
    nbands = struct.unpack_from("<i", data, 68)[0]
    assert headersize == 4 * numparams and numparams in (20, 26), (headersize, numparams)
    legal = {
        (1, 3, 4),
        (2, 2, 4),
        (3, 3, 4),
        (3, 1, 1),
        (5, 3, 4),
        (5, 1, 1),
        (4, 3, 4),
        (4, 5, 16),
        (6, 3, 8),
        (6, 4, 8),
    }
    assert (filetype, datatype, datasize) in legal, (filetype, datatype, datasize)
    size = len(data)
    if filetype == 4:
        frame = 8 + nx * ny * nf * datasize
        assert (size - 80) % frame == 0 and (size - 80) // frame == nbands, "dense frames do not tile the file"
    elif filetype in (2, 6):
        at, frames = 80, 0
        while at < size:
            assert at + 12 <= size, "a truncated sparse frame"
            count = struct.unpack_from("<i", data, at + 8)[0]
            assert count >= 0
            at += 12 + count * datasize
            for k in range(count):
                index = struct.unpack_from("<I", data, at - count * datasize + k * datasize)[0]
                assert index < nx * ny * nf, f"index {index} outside the layer"
            frames += 1
        assert at == size and frames == nbands, "sparse frames do not end at the end of the file"
    elif filetype in (3, 5):
        nxp, nyp, nfp = struct.unpack_from("<3i", data, 80)
        numpatches = struct.unpack_from("<i", data, 100)[0]
        arbors = nbands
        frame = 104 + arbors * numpatches * (8 + nxp * nyp * nfp * datasize)
        assert size % frame == 0 and size >= frame, "weight frames do not tile the file"
    else:
        raise AssertionError(f"filetype {filetype}: not one OpenPV reads")


def _pink_layout(data, at):
    code, rank = struct.unpack_from("<2i", data, at)
    assert code in (0, 1) and 1 <= rank <= 3, (code, rank)
    dims = struct.unpack_from(f"<{rank}i", data, at + 8)
    assert all(d > 0 for d in dims), dims
    count = int(np.prod(dims))
    if rank == 2 and dims[0] == dims[1] and dims[0] % 2 == 1:
        r = (dims[0] - 1) // 2
        return at + 8 + 4 * rank, (count, dims[0] * dims[0] - r * (r + 1))
    return at + 8 + 4 * rank, (count,)


def check_som(p):
    """PINK 2.5: the `#` comment block, a version-2 header, the payload filling the rest."""
    data = p.read_bytes()
    at = 0
    while at < len(data) and data[at : at + 1] == b"#":
        end = data.index(b"\n", at) + 1
        line, at = data[at:end], end
        if line.rstrip(b"\r\n") == b"# END OF HEADER":
            break
    version, file_type = struct.unpack_from("<2i", data, at)
    assert version == 2, f"version {version}"
    if file_type == 3:  # rotation / flip: no data type
        (entries,) = struct.unpack_from("<i", data, at + 8)
        at, neurons = _pink_layout(data, at + 12)
        assert len(data) - at in {entries * n * 5 for n in neurons}
        return
    data_type = struct.unpack_from("<i", data, at + 8)[0]
    width = {0: 4, 1: 8, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 2, 8: 4, 9: 8}[data_type]
    if file_type == 0:
        (entries,) = struct.unpack_from("<i", data, at + 12)
        at, values = _pink_layout(data, at + 16)
        assert len(data) - at == entries * values[0] * width
    elif file_type == 1:
        at, neurons = _pink_layout(data, at + 12)
        at, per_neuron = _pink_layout(data, at)
        assert len(data) - at in {n * per_neuron[0] * width for n in neurons}
    elif file_type == 2:
        (entries,) = struct.unpack_from("<i", data, at + 12)
        at, neurons = _pink_layout(data, at + 16)
        assert len(data) - at in {entries * n * width for n in neurons}
    else:
        raise AssertionError(f"file type {file_type}")


_CAFFE = {}


def _caffe_class(name):
    if not _CAFFE:
        fds = descriptor_pb2.FileDescriptorSet()
        fds.ParseFromString((REPO / "crates/tensorfmt-caffe/src/generated/caffe.fds").read_bytes())
        pool = descriptor_pool.DescriptorPool()
        for f in fds.file:
            pool.Add(f)
        _CAFFE["pool"] = pool
    return message_factory.GetMessageClass(_CAFFE["pool"].FindMessageTypeByName(f"caffe.{name}"))


def _check_blob(blob, where):
    if blob.HasField("shape"):
        count = int(np.prod(list(blob.shape.dim), dtype=np.int64))
    else:
        count = blob.num * blob.channels * blob.height * blob.width
    stored = max(len(blob.data), len(blob.double_data))
    # Caffe's Blob::FromProto: the values must fill the shape (OpenCV's raw_data aside).
    if stored or not blob.raw_data:
        assert stored == count, f"{where}: {stored} values for {count}"


def check_caffe(p, kind):
    message = {
        "caffemodel": "NetParameter",
        "binaryproto": "BlobProto",
        "blobprotovector": "BlobProtoVector",
        "solverstate": "SolverState",
    }[kind]
    m = _caffe_class(message)()
    m.ParseFromString(p.read_bytes())
    if message == "NetParameter":
        for i, layer in enumerate(list(m.layer) + list(m.layers)):
            for k, b in enumerate(layer.blobs):
                _check_blob(b, f"layer {i} ({layer.name}) blob {k}")
    elif message == "BlobProto":
        _check_blob(m, "blob")
    elif message == "BlobProtoVector":
        for k, b in enumerate(m.blobs):
            _check_blob(b, f"blob {k}")
    else:
        for k, b in enumerate(m.history):
            _check_blob(b, f"history {k}")


def check_primitiv(p):
    """A streaming decoder reads the whole file (primitiv files are a series of
    top-level MessagePack values) and it starts with primitiv's version header."""
    values = list(msgpack.Unpacker(open(p, "rb"), raw=True, strict_map_key=False))
    assert values[:2] == [0, 1], values[:2]


def owner_opens(p, fmt, kind):
    try:
        {
            "npz": check_npz,
            "npy": check_npy,
            "safetensors": check_safetensors,
            "onnx": check_onnx,
            "pvp": check_pvp,
            "som": check_som,
            "primitiv": check_primitiv,
            "caffe": lambda q: check_caffe(q, kind),
        }[fmt](p)
    except Exception as e:  # noqa: BLE001 - any refusal of the owner's reader
        return f"{type(e).__name__}: {e}"
    return None


# --- the test -------------------------------------------------------------------------


def test_the_corpus_is_there():
    for sub in LEGACY:
        require_corpus(sub)


@pytest.mark.parametrize("src", SOURCES, ids=_id)
def test_every_file_we_write_opens_in_its_owners_reader(tmp_path, src):
    with tensorfmt.open(src) as doc:
        fmt, kind, count = doc.format, doc.kind, len(doc)
    targets = ["npz", "safetensors", "onnx"] + (["npy"] if count == 1 else [])
    written = []
    for to in targets:
        if to == fmt:
            continue
        out = tmp_path / f"out.{to}"
        try:
            tensorfmt.convert(src, out)
        except tensorfmt.TensorfmtError:
            assert not out.exists(), f"{to}: refused, but a file is left"
            continue
        written.append((out, to, to))
        if fmt in LEGACY and to in ("npz", "safetensors"):
            back = tmp_path / f"back_{to}{src.suffix}"
            try:
                tensorfmt.convert(out, back, to=fmt)
            except tensorfmt.TensorfmtError:
                assert not back.exists()
                continue
            written.append((back, fmt, kind))
    source_opens = owner_opens(src, fmt, kind) is None if fmt in LEGACY else True
    failures = []
    for out, ofmt, okind in written:
        why = owner_opens(out, ofmt, okind)
        if why is None:
            continue
        if ofmt == fmt and not source_opens and out.read_bytes() == src.read_bytes():
            continue  # the source itself is one the owner refuses, given back as it was
        failures.append(f"{out.name}: {why}")
    assert not failures, failures
    for out, _, _ in written:
        os.unlink(out)
