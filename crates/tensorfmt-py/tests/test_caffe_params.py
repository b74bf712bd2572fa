"""Typed Caffe layers carry their parameters (``net["conv1"].params``) as caffe_pb2
shows them, for V2, V1 and V0 nets; ``net.weights()`` and ``load()`` agree on shapes."""

import numpy as np
import pytest

from conftest import REPO, TESTDATA, require_corpus, require_module

import tensorfmt
import tensorfmt.caffe

FDS = REPO / "crates" / "tensorfmt-caffe" / "src" / "generated" / "caffe.fds"


@pytest.fixture(scope="module")
def caffe_pb2():
    """caffe_pb2's NetParameter, built from the schema's descriptor set with the
    protobuf package (an independent reader)."""
    require_module("google.protobuf")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fds = descriptor_pb2.FileDescriptorSet.FromString(FDS.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    return lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"caffe.{name}"))


def _same(ours, theirs, where, skip=("blobs",)):
    """Every field of ``theirs`` (a protobuf message) reads the same in ``ours``."""
    for fd in theirs.DESCRIPTOR.fields:
        if fd.name in skip:
            continue
        a, b = getattr(ours, fd.name), getattr(theirs, fd.name)
        at = f"{where}.{fd.name}"
        assert ours.HasField(fd.name) == (len(b) > 0 if _repeated(fd) else theirs.HasField(fd.name)), at
        if fd.message_type is not None:
            if _repeated(fd):
                assert len(a) == len(b), at
                for i, (x, y) in enumerate(zip(a, b)):
                    _same(x, y, f"{at}[{i}]", skip=())
            else:
                _same(a, b, at, skip=())
        elif _repeated(fd):
            assert list(a) == list(b), at
        else:
            assert a == b and type(a) is type(b) or (isinstance(a, int) and isinstance(b, int) and a == b), (at, a, b)


def _repeated(fd):
    return getattr(fd, "is_repeated", None) if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED


def test_lenet_v2_layers_as_caffe_pb2(caffe_pb2):
    path = require_corpus("caffe") / "v2_lenet_iter_10000.caffemodel"
    net = tensorfmt.caffe.open(path)
    pb = caffe_pb2("NetParameter").FromString(path.read_bytes())
    assert [l.name for l in net.layers] == [l.name for l in pb.layer]
    for ours, theirs in zip(net.layers, pb.layer):
        _same(ours.params, theirs, ours.name)
    conv1 = net["conv1"].params.convolution_param
    assert conv1.num_output == 20 and conv1.kernel_size == [5] and conv1.stride == [1]
    assert conv1.group == 1 and conv1.bias_term is True and conv1.pad == [] and conv1.dilation == []
    assert net["pool1"].params.pooling_param.pool == 0  # MAX
    ip1 = net["ip1"].params.inner_product_param
    assert ip1.num_output == 500 and ip1.transpose is False and ip1.axis == 1
    # Absent messages read as their defaults, as in caffe_pb2.
    assert net["conv1"].params.batch_norm_param.eps == pb.layer[1].batch_norm_param.eps == np.float32(1e-5)
    assert net["conv1"].params.batch_norm_param.use_global_stats is False


@pytest.mark.parametrize(
    "name", ["v1_cifar10_quick_iter_4000.caffemodel", "v1_cifar10_full_iter_70000.caffemodel"]
)
def test_v1_layers_read_as_v2_with_caffe_pb2s_values(caffe_pb2, name):
    path = require_corpus("caffe") / name
    net = tensorfmt.caffe.open(path)
    pb = caffe_pb2("NetParameter").FromString(path.read_bytes())
    assert len(pb.layer) == 0 and len(pb.layers) == len(net.layers)
    v2 = caffe_pb2("LayerParameter")
    for ours, theirs in zip(net.layers, pb.layers):
        p = ours.params
        assert p.type_name == "caffe.LayerParameter"
        assert (p.name, p.type, p.bottom, p.top) == (theirs.name, ours.type, list(theirs.bottom), list(theirs.top))
        # The V1 *_param messages are V2's messages: compare them field for field.
        for fd in theirs.DESCRIPTOR.fields:
            if fd.name.endswith("_param") and fd.name in v2.DESCRIPTOR.fields_by_name and fd.name != "transform_param":
                _same(getattr(p, fd.name), getattr(theirs, fd.name), f"{ours.name}.{fd.name}", skip=())
        # blobs_lr / weight_decay became ParamSpecs.
        assert [s.lr_mult for s in p.param] == list(theirs.blobs_lr)
    convs = [l for l in net.layers if l.type == "Convolution"]
    assert convs and all(l.params.convolution_param.num_output == l.blobs[0].shape[0] for l in convs)


def test_v1_weights_have_the_shapes_of_load():
    path = require_corpus("caffe") / "v1_cifar10_quick_iter_4000.caffemodel"
    net = tensorfmt.caffe.open(path)
    flat = tensorfmt.load(path)
    weights = net.weights()
    assert weights
    for layer, blobs in weights.items():
        for i, w in enumerate(blobs):
            assert w.shape == flat[f"{layer}/{i}"].shape, (layer, i)
            np.testing.assert_array_equal(w, flat[f"{layer}/{i}"])
    assert weights["conv1"][1].shape == (32,)  # a legacy (1, 1, 1, 32) bias
    assert net["conv1"].blobs[1].legacy == (1, 1, 1, 32)


def test_testdata_nets_of_every_version():
    v2 = tensorfmt.caffe.open(TESTDATA / "caffe" / "v2_tiny.caffemodel")
    assert v2["conv1"].params.name == "conv1" and v2["conv1"].params.type == "Convolution"
    v0 = tensorfmt.caffe.open(TESTDATA / "caffe" / "v0_net.caffemodel")
    for layer in v0.layers:
        if layer.params is not None:
            assert layer.params.name == layer.name
    v1 = tensorfmt.caffe.open(TESTDATA / "caffe" / "v1_legacy.caffemodel")
    assert all(l.params.name == l.name for l in v1.layers)


def test_message_behaves_like_caffe_pb2():
    p = tensorfmt.caffe.open(TESTDATA / "caffe" / "v2_tiny.caffemodel")["conv1"].params
    assert p.HasField("name") and p.HasField("convolution_param") and not p.HasField("pooling_param")
    assert p.convolution_param.num_output == 2
    assert p.convolution_param.group == 1 and p.convolution_param.stride == []
    assert not p.convolution_param.HasField("group")
    assert p.pooling_param.pool == 0 and p.pooling_param.stride == 1
    assert p.convolution_param.weight_filler.type == "constant"  # FillerParameter's default
    assert ("name", "conv1") in p.ListFields()
    with pytest.raises(AttributeError):
        p.no_such_field
    with pytest.raises(ValueError):
        p.HasField("no_such_field")
    with pytest.raises(AttributeError):
        p.name = "x"  # type: ignore[misc]
    assert "convolution_param" in dir(p)
    assert p.to_dict()["name"] == "conv1"


def test_set_parameters_of_every_common_layer_as_caffe_pb2_wrote_them(caffe_pb2, tmp_path):
    """A net written by caffe_pb2 with non-default parameters, as V2 and as V1."""
    net = caffe_pb2("NetParameter")(name="params")
    conv = net.layer.add(name="conv1", type="Convolution", bottom=["data"], top=["conv1"])
    c = conv.convolution_param
    c.num_output, c.group, c.bias_term = 8, 2, False
    c.kernel_size.extend([3]), c.stride.extend([2]), c.pad.extend([1]), c.dilation.extend([2])
    c.weight_filler.type, c.weight_filler.std = "gaussian", 0.01
    ip = net.layer.add(name="ip", type="InnerProduct", bottom=["conv1"], top=["ip"])
    ip.inner_product_param.num_output, ip.inner_product_param.transpose, ip.inner_product_param.axis = 10, True, 2
    bn = net.layer.add(name="bn", type="BatchNorm", bottom=["ip"], top=["ip"])
    bn.batch_norm_param.use_global_stats, bn.batch_norm_param.eps = True, 1e-3
    bn.batch_norm_param.moving_average_fraction = 0.9
    for _ in range(3):
        bn.param.add(lr_mult=0)
    pool = net.layer.add(name="pool", type="Pooling", bottom=["ip"], top=["pool"])
    pool.pooling_param.pool, pool.pooling_param.kernel_size, pool.pooling_param.stride = 1, 3, 2  # AVE
    pool.include.add(phase=1)
    path = tmp_path / "params.caffemodel"
    path.write_bytes(net.SerializeToString())
    ours = tensorfmt.caffe.open(path)
    for a, b in zip(ours.layers, net.layer):
        _same(a.params, b, a.name)
    p = {l.name: l.params for l in ours.layers}
    assert p["conv1"].convolution_param.dilation == [2] and p["conv1"].convolution_param.bias_term is False
    assert p["ip"].inner_product_param.transpose is True and p["ip"].inner_product_param.axis == 2
    assert p["bn"].batch_norm_param.eps == np.float32(1e-3) and p["bn"].batch_norm_param.use_global_stats
    assert p["bn"].batch_norm_param.moving_average_fraction == np.float32(0.9)
    assert [s.lr_mult for s in p["bn"].param] == [0.0, 0.0, 0.0]  # as stored: no upgrade of V2 layers
    assert p["pool"].pooling_param.pool == 1 and p["pool"].include[0].phase == 1

    # The same net in V1 form (enum types): read as the same V2 parameters.
    v1 = caffe_pb2("NetParameter")(name="params")
    V1 = caffe_pb2("V1LayerParameter")
    types = {"Convolution": V1.CONVOLUTION, "InnerProduct": V1.INNER_PRODUCT, "Pooling": V1.POOLING}
    for layer in net.layer:
        if layer.type not in types:
            continue
        l1 = v1.layers.add(name=layer.name, type=types[layer.type], bottom=layer.bottom, top=layer.top)
        for field in ("convolution_param", "inner_product_param", "pooling_param"):
            if layer.HasField(field):
                getattr(l1, field).CopyFrom(getattr(layer, field))
        l1.include.extend(layer.include)
        l1.blobs_lr.extend([1.0, 2.0])
    path1 = tmp_path / "params_v1.caffemodel"
    path1.write_bytes(v1.SerializeToString())
    ours1 = tensorfmt.caffe.open(path1)
    assert [l.type for l in ours1.layers] == ["Convolution", "InnerProduct", "Pooling"]
    fields = ("name", "type", "bottom", "top", "convolution_param", "inner_product_param", "pooling_param", "include")
    for a in ours1.layers:
        for field in fields:
            assert getattr(a.params, field) == getattr(ours[a.name].params, field), (a.name, field)
        assert [s.lr_mult for s in a.params.param] == [1.0, 2.0]


def test_parameters_beyond_the_bound_raise_for_that_layer_only(caffe_pb2, tmp_path):
    net = caffe_pb2("NetParameter")()
    for name in ("a", "b"):
        layer = net.layer.add(name=name, type="ReLU", bottom=["x" * (9 << 20)])
        layer.blobs.add(data=[1.0, 2.0]).shape.dim.extend([2])
    path = tmp_path / "big_params.caffemodel"
    path.write_bytes(net.SerializeToString())
    f = tensorfmt.caffe.open(path)
    assert f["a"].params.type == "ReLU"
    with pytest.raises(tensorfmt.LimitError, match="parameter bytes"):
        f["b"].params
    np.testing.assert_array_equal(f["b"].blobs[0].data, [1.0, 2.0])
