"""What a new user of the Python package meets: the CLI's options and guarantees under
their Python names (diff/validate read options, to_onnx's output checks, overwrite
defaults), warnings pointing at the caller's line, bool keywords that refuse non-bools,
messages that name Python keywords instead of CLI flags, netCDF-safe xarray attributes."""

import inspect
import json
import os
import shutil
import warnings

import numpy as np
import pytest

import tensorfmt
import tensorfmt.caffe
import tensorfmt.dask
import tensorfmt.primitiv
import tensorfmt.pvp
import tensorfmt.som
from conftest import TESTDATA, require_corpus, require_module

MIXED = TESTDATA / "core" / "mixed.npz"
DENSE = TESTDATA / "pvp" / "dense_f32.pvp"
LENET = TESTDATA / "nets" / "lenet_tiny.prototxt"
THIS_FILE = os.path.abspath(__file__)


# -- 1. an input is never overwritten ---------------------------------------------------
@pytest.mark.parametrize("how", ["same path", "hard link", "symlink"])
def test_convert_never_overwrites_its_input(tmp_path, how):
    src = tmp_path / "m.npz"
    shutil.copyfile(MIXED, src)
    before = src.read_bytes()
    dst = src
    if how == "hard link":
        dst = tmp_path / "link.npz"
        os.link(src, dst)
    elif how == "symlink":
        dst = tmp_path / "sym.npz"
        dst.symlink_to(src)
    with pytest.raises(tensorfmt.TensorfmtError):
        tensorfmt.convert(src, dst, tensors=["weights"])
    assert src.read_bytes() == before


# -- 2. diff and validate take the CLI's read options -----------------------------------
def test_validate_and_diff_take_kind_strict_and_max_alloc(tmp_path):
    legacy = require_corpus("som/legacy") / "map_5x5x5.bin"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tensorfmt.TensorfmtWarning)  # "legacy file read as ..."
        assert not tensorfmt.validate(legacy).ok  # ambiguous: data or mapping
        report = tensorfmt.validate(legacy, kind="mapping")
        assert report.ok and report.kind == "som-mapping", report
        assert tensorfmt.diff(legacy, legacy, kind="mapping").equal
        with pytest.raises(tensorfmt.FormatError, match="ambiguous"):
            tensorfmt.diff(legacy, legacy)
    # max_alloc: the same limit as open's.
    param = TESTDATA / "primitiv" / "parameter_2x3_stats.data"  # decoded: 24 bytes
    limited = tensorfmt.validate(param, max_alloc=16)
    assert not limited.ok and isinstance(limited.error, tensorfmt.LimitError)
    assert str(limited.error).startswith(f"{param}: "), limited.error  # names the file
    assert tensorfmt.validate(param, max_alloc=1 << 20).ok
    with pytest.raises(tensorfmt.LimitError):
        tensorfmt.diff(param, param, max_alloc=16)
    assert tensorfmt.diff(param, param, max_alloc=1 << 20).equal
    # strict: a crash-truncated PVP file is read leniently unless strict.
    cut = tmp_path / "crashed.pvp"
    cut.write_bytes(DENSE.read_bytes()[:-20])
    with pytest.warns(tensorfmt.TensorfmtWarning):
        lenient = tensorfmt.validate(cut)
    assert not lenient.ok and lenient.readable
    strict = tensorfmt.validate(cut, strict=True)
    assert not strict.ok and not strict.readable
    with pytest.raises(tensorfmt.FormatError):
        tensorfmt.diff(cut, cut, strict=True)


def test_diff_errors_name_the_file_that_failed(tmp_path):
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"not an npy file at all")
    with pytest.raises(tensorfmt.FormatError) as e:
        tensorfmt.diff(MIXED, bad)
    assert str(e.value).startswith(f"{bad}: "), e.value
    with pytest.raises(tensorfmt.FormatError) as e:
        tensorfmt.diff(bad, MIXED)
    assert str(e.value).startswith(f"{bad}: "), e.value
    with pytest.raises(FileNotFoundError, match="nothere.npz"):
        tensorfmt.diff(MIXED, tmp_path / "nothere.npz")


# -- 3. caffe.to_onnx: save's errors, .onnx only, overwrite=, warnings --------------------
def _lenet_weights(tmp_path):
    model = tmp_path / "lenet.caffemodel"
    tensorfmt.caffe.write_random_weights(LENET, model)
    return model


def test_to_onnx_output_errors_are_those_of_save(tmp_path):
    model = _lenet_weights(tmp_path)
    with pytest.raises(tensorfmt.TensorfmtFileNotFoundError):
        tensorfmt.save(tmp_path / "missing" / "o.npz", {"a": np.zeros(2)})
    with pytest.raises(tensorfmt.TensorfmtFileNotFoundError, match="missing"):
        tensorfmt.caffe.to_onnx(model, LENET, tmp_path / "missing" / "o.onnx")
    # An ONNX model is never written under another format's name.
    for name in ("o.npz", "o.onnx.tmp", "o"):
        with pytest.raises(tensorfmt.InvalidArgumentError, match="name it .onnx"):
            tensorfmt.caffe.to_onnx(model, LENET, tmp_path / name)
        assert not (tmp_path / name).exists()
    tensorfmt.caffe.to_onnx(model, LENET, tmp_path / "UPPER.ONNX")


def test_to_onnx_overwrite_and_inputs(tmp_path):
    model = _lenet_weights(tmp_path)
    out = tmp_path / "o.onnx"
    tensorfmt.caffe.to_onnx(model, LENET, out)
    tensorfmt.caffe.to_onnx(model, LENET, out)  # replaced by default, as save does
    with pytest.raises(tensorfmt.TensorfmtFileExistsError):
        tensorfmt.caffe.to_onnx(model, LENET, out, overwrite=False)
    dangling = tmp_path / "dangling.onnx"
    dangling.symlink_to(tmp_path / "nowhere.onnx")
    with pytest.raises(tensorfmt.TensorfmtFileExistsError):
        tensorfmt.caffe.to_onnx(model, LENET, dangling, overwrite=False)
    assert not (tmp_path / "nowhere.onnx").exists()
    # An input is never the output (a symlink named .onnx to the caffemodel).
    link = tmp_path / "model.onnx"
    link.symlink_to(model)
    before = model.read_bytes()
    with pytest.raises(tensorfmt.InvalidArgumentError, match="is the input"):
        tensorfmt.caffe.to_onnx(model, LENET, link)
    assert model.read_bytes() == before


def test_to_onnx_warnings_are_python_warnings_at_the_callers_line(tmp_path):
    model = _lenet_weights(tmp_path)
    arrays = tensorfmt.load(model)
    arrays["extra/0"] = np.ones((2, 2), np.float32)
    more = tmp_path / "more.caffemodel"
    tensorfmt.save(more, arrays)
    with pytest.warns(tensorfmt.TensorfmtWarning, match="not in the net") as caught:
        info = tensorfmt.caffe.to_onnx(more, LENET, tmp_path / "o.onnx")
    assert any("not in the net" in w for w in info["warnings"])
    assert {w.filename for w in caught} == {THIS_FILE}


# -- 4. warnings point at the caller's line --------------------------------------------
def test_warnings_point_at_the_callers_line(tmp_path):
    cut = tmp_path / "crashed.pvp"
    cut.write_bytes(DENSE.read_bytes()[:-20])
    calls = [
        lambda: tensorfmt.open(cut),
        lambda: tensorfmt.load(cut),
        lambda: tensorfmt.convert(cut, tmp_path / "c.npz"),
        lambda: tensorfmt.validate(cut),
        lambda: tensorfmt.diff(cut, cut),
        lambda: tensorfmt.pvp.open(cut),
        lambda: _xarray_open(cut),
    ]
    for call in calls:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        assert caught, call
        for w in caught:
            assert issubclass(w.category, tensorfmt.TensorfmtWarning)
            assert w.filename == THIS_FILE, (w.filename, w.lineno, str(w.message))
    # A write's warning (fewer tensors written than given) too.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tensorfmt.convert(MIXED, tmp_path / "w.npy", tensors=["weights"])
        doc = tensorfmt.open(MIXED)
        doc.convert(tmp_path / "w2.npy", tensors=["weights"])
    for w in caught:
        assert w.filename == THIS_FILE, (w.filename, str(w.message))


# -- 5. bool keywords refuse non-bools -------------------------------------------------
def _bool_calls(tmp):
    """``(name, call(value))`` for every bool keyword of the public functions."""
    cut = str(TESTDATA / "pvp" / "dense_f32.pvp")
    out = lambda name: str(tmp / name)  # noqa: E731
    som = TESTDATA / "som" / "mapping"
    hex_som = str(TESTDATA / "som" / "som_hex3.bin")
    caffemodel = str(tmp / "lenet.caffemodel") if tmp is not None else None
    return {
        ("open", "strict"): lambda v: tensorfmt.open(cut, strict=v),
        ("open", "sparse"): lambda v: tensorfmt.open(cut, sparse=v),
        ("load", "strict"): lambda v: tensorfmt.load(cut, strict=v),
        ("load", "sparse"): lambda v: tensorfmt.load(cut, sparse=v),
        ("save", "overwrite"): lambda v: tensorfmt.save(out("s.npy"), np.zeros(2), overwrite=v),
        ("save", "hex"): lambda v: tensorfmt.save(out("s.bin"), {"som": np.zeros((7, 2, 2), np.float32)}, hex=v),
        ("save", "fsync"): lambda v: tensorfmt.save(out("s.npy"), np.zeros(2), fsync=v),
        ("convert", "overwrite"): lambda v: tensorfmt.convert(cut, out("c.npz"), overwrite=v),
        ("convert", "hex"): lambda v: tensorfmt.convert(hex_som, out("c.bin"), hex=v),
        ("convert", "fsync"): lambda v: tensorfmt.convert(cut, out("c.npz"), fsync=v),
        ("convert", "strict"): lambda v: tensorfmt.convert(cut, out("c.npz"), strict=v),
        ("convert", "sparse"): lambda v: tensorfmt.convert(cut, out("c.npz"), sparse=v),
        ("convert", "dense"): lambda v: tensorfmt.convert(cut, out("c.npz"), dense=v),
        ("diff", "allow_dtype"): lambda v: tensorfmt.diff(cut, cut, allow_dtype=v),
        ("diff", "tensors_only"): lambda v: tensorfmt.diff(cut, cut, tensors_only=v),
        ("diff", "strict"): lambda v: tensorfmt.diff(cut, cut, strict=v),
        ("validate", "lenient"): lambda v: tensorfmt.validate(cut, lenient=v),
        ("validate", "strict"): lambda v: tensorfmt.validate(cut, strict=v),
        ("Document.convert", "overwrite"): lambda v: tensorfmt.open(cut).convert(out("d.npz"), overwrite=v),
        ("Document.convert", "hex"): lambda v: tensorfmt.open(hex_som).convert(out("d.bin"), hex=v),
        ("Document.convert", "fsync"): lambda v: tensorfmt.open(cut).convert(out("d.npz"), fsync=v),
        ("Document.convert", "dense"): lambda v: tensorfmt.open(cut).convert(out("d.npz"), dense=v),
        ("pvp.open", "strict"): lambda v: tensorfmt.pvp.open(cut, strict=v),
        ("pvp.DenseWriter", "overwrite"): lambda v: tensorfmt.pvp.DenseWriter(out("w.pvp"), 1, 1, 1, overwrite=v),
        ("pvp.SparseWriter", "values"): lambda v: tensorfmt.pvp.SparseWriter(out("w.pvp"), 1, 1, 1, values=v),
        ("pvp.SparseWriter", "datatype4"): lambda v: tensorfmt.pvp.SparseWriter(out("w.pvp"), 1, 1, 1, datatype4=v),
        ("pvp.SparseWriter", "overwrite"): lambda v: tensorfmt.pvp.SparseWriter(out("w.pvp"), 1, 1, 1, overwrite=v),
        ("pvp.WeightsWriter", "shared"): lambda v: tensorfmt.pvp.WeightsWriter(out("w.pvp"), nxp=1, nyp=1, nfp=1, nf=1, shared=v),
        ("pvp.WeightsWriter", "compress"): lambda v: tensorfmt.pvp.WeightsWriter(out("w.pvp"), nxp=1, nyp=1, nfp=1, nf=1, compress=v),
        ("pvp.WeightsWriter", "overwrite"): lambda v: tensorfmt.pvp.WeightsWriter(out("w.pvp"), nxp=1, nyp=1, nfp=1, nf=1, overwrite=v),
        ("som.open", "strict"): lambda v: tensorfmt.som.open(som / "som_cart3x3.bin", strict=v),
        ("som.map", "flip"): lambda v: tensorfmt.som.map(som / "data_16.bin", som / "som_cart3x3.bin", num_rot=4, flip=v),
        ("som.map_files", "overwrite"): lambda v: tensorfmt.som.map_files(
            som / "data_16.bin", som / "som_cart3x3.bin", out("m.bin"), num_rot=4, overwrite=v
        ),
        ("caffe.open", "strict"): lambda v: tensorfmt.caffe.open(caffemodel, strict=v),
        ("caffe.to_onnx", "dynamic_batch"): lambda v: tensorfmt.caffe.to_onnx(caffemodel, LENET, out("o.onnx"), dynamic_batch=v),
        ("caffe.to_onnx", "strict"): lambda v: tensorfmt.caffe.to_onnx(caffemodel, LENET, out("o.onnx"), strict=v),
        ("caffe.to_onnx", "external_data"): lambda v: tensorfmt.caffe.to_onnx(caffemodel, LENET, out("o.onnx"), external_data=v),
        ("caffe.to_onnx", "overwrite"): lambda v: tensorfmt.caffe.to_onnx(caffemodel, LENET, out("o.onnx"), overwrite=v),
        ("primitiv.open", "strict"): lambda v: tensorfmt.primitiv.open(TESTDATA / "primitiv" / "model_nested_adam.data", strict=v),
        ("dask.convert_many", "overwrite"): lambda v: tensorfmt.dask.convert_many([cut], out("many"), overwrite=v),
        ("xarray.open_dataset", "strict"): lambda v: _xarray_open(cut, strict=v),
        ("xarray.open_dataset", "dense"): lambda v: _xarray_open(cut, dense=v),
        ("xarray.open_dataset", "safe_names"): lambda v: _xarray_open(cut, safe_names=v),
        ("virtual.Parser", "strict"): lambda v: _virtual_parser(strict=v),
    }


def _xarray_open(path, **kw):
    xr = require_module("xarray")
    return xr.open_dataset(path, engine="tensorfmt", **kw)


def _virtual_parser(**kw):
    require_module("virtualizarr")
    import tensorfmt.virtual

    return tensorfmt.virtual.Parser(**kw)


def _public():
    """The public callables with bool keywords, by the names the table uses."""
    out = dict(PUBLIC)
    try:
        import tensorfmt.xarray_backend
        import tensorfmt.virtual
    except ImportError:
        return out
    out["xarray.open_dataset"] = tensorfmt.xarray_backend.open_tensorfmt_dataset
    out["virtual.Parser"] = tensorfmt.virtual.Parser
    return out


PUBLIC = {
    "open": tensorfmt.open,
    "load": tensorfmt.load,
    "save": tensorfmt.save,
    "convert": tensorfmt.convert,
    "diff": tensorfmt.diff,
    "validate": tensorfmt.validate,
    "Document.convert": tensorfmt.Document.convert,
    "pvp.open": tensorfmt.pvp.open,
    "pvp.DenseWriter": tensorfmt.pvp.DenseWriter,
    "pvp.SparseWriter": tensorfmt.pvp.SparseWriter,
    "pvp.WeightsWriter": tensorfmt.pvp.WeightsWriter,
    "som.open": tensorfmt.som.open,
    "som.map_files": tensorfmt.som.map_files,
    "caffe.open": tensorfmt.caffe.open,
    "caffe.to_onnx": tensorfmt.caffe.to_onnx,
    "primitiv.open": tensorfmt.primitiv.open,
    "dask.convert_many": tensorfmt.dask.convert_many,
}


def test_every_bool_keyword_is_checked():
    """The table below covers every ``bool`` keyword of the public functions (a new
    one needs an entry)."""
    declared = {
        (name, p.name)
        for name, fn in _public().items()
        for p in inspect.signature(fn).parameters.values()
        if p.annotation in (bool, "bool")
    }
    declared.add(("som.map", "flip"))  # one of map's **options
    assert declared == set(_bool_calls(None)), declared ^ set(_bool_calls(None))


@pytest.mark.parametrize("key", sorted(_bool_calls(None)), ids=lambda k: f"{k[0]}-{k[1]}")
def test_bool_keywords_refuse_other_values(key, tmp_path):
    if key[0].startswith("caffe."):
        _lenet_weights(tmp_path)
    if key[0] == "dask.convert_many":
        require_module("dask")
    call = _bool_calls(tmp_path)[key]
    for bad in ("no", "False", 2, None, [True]):
        with pytest.raises(TypeError, match=f"{key[1]}") as e:
            result = call(bad)
            if hasattr(result, "close"):
                result.close()
        assert isinstance(e.value, tensorfmt.TensorfmtError)
    for good in (False, np.bool_(True)):
        result = call(good)
        if hasattr(result, "close"):
            result.close()


# -- 6. writers replace an existing output by default, as save and convert do ----------
def test_writers_overwrite_by_default_and_dangling_links_count_as_existing(tmp_path):
    for make in (
        lambda p, **k: tensorfmt.pvp.DenseWriter(p, 2, 2, 1, **k),
        lambda p, **k: tensorfmt.pvp.SparseWriter(p, 2, 2, 1, **k),
        lambda p, **k: tensorfmt.pvp.WeightsWriter(p, nxp=1, nyp=1, nfp=1, nf=1, **k),
    ):
        out = tmp_path / "out.pvp"
        out.write_bytes(b"an earlier run")  # the README block, run twice
        make(out).close()
        out.write_bytes(b"an earlier run")
        with pytest.raises(tensorfmt.TensorfmtFileExistsError):
            make(out, overwrite=False)
        assert out.read_bytes() == b"an earlier run"
        out.unlink()
        out.symlink_to(tmp_path / "nowhere.pvp")
        with pytest.raises(tensorfmt.TensorfmtFileExistsError):
            make(out, overwrite=False)
        assert not (tmp_path / "nowhere.pvp").exists()
        out.unlink()
    for sig in (tensorfmt.pvp.DenseWriter, tensorfmt.pvp.SparseWriter, tensorfmt.pvp.WeightsWriter):
        assert inspect.signature(sig).parameters["overwrite"].default is True
    dangling = tmp_path / "dangling.npz"
    dangling.symlink_to(tmp_path / "nowhere.npz")
    for write in (
        lambda: tensorfmt.convert(DENSE, dangling, overwrite=False),
        lambda: tensorfmt.save(dangling, {"a": np.zeros(2)}, overwrite=False),
        lambda: tensorfmt.open(DENSE).convert(dangling, overwrite=False),
    ):
        with pytest.raises(tensorfmt.TensorfmtFileExistsError):
            write()
        assert not (tmp_path / "nowhere.npz").exists()


# -- 7. the carried source reads the same from npz and safetensors ------------------------
def test_carried_source_reads_the_same_from_npz_and_safetensors(tmp_path):
    tensorfmt.convert(DENSE, tmp_path / "a.npz")
    tensorfmt.convert(DENSE, tmp_path / "a.safetensors")
    texts = [tensorfmt.open(tmp_path / f).metadata()["tensorfmt.source"] for f in ("a.npz", "a.safetensors")]
    assert texts[0] == texts[1] and json.loads(texts[0])["format"] == "pvp"
    # ... and hands the structure on through numpy (README).
    arrays = dict(np.load(tmp_path / "a.npz"))
    tensorfmt.save(tmp_path / "b.npz", arrays, settings={"tensorfmt.source": texts[1]})
    tensorfmt.convert(tmp_path / "b.npz", tmp_path / "back.pvp")
    assert (tmp_path / "back.pvp").read_bytes() == DENSE.read_bytes()


# -- 9. messages name the Python keywords, not the CLI's flags --------------------------
def test_messages_name_python_keywords_not_cli_flags(tmp_path):
    with pytest.raises(tensorfmt.InvalidArgumentError) as e:
        tensorfmt.convert(MIXED, tmp_path / "x.npy")
    assert "tensors=" in str(e.value) and "--tensor" not in str(e.value)
    tensorfmt.convert(DENSE, tmp_path / "a.npz")
    with pytest.raises(tensorfmt.TensorfmtError) as e:
        tensorfmt.convert(tmp_path / "a.npz", tmp_path / "b.pvp", like=DENSE, dtype="f64")
    assert "dtype=" in str(e.value) and "--" not in str(e.value), e.value
    net = tmp_path / "noshape.prototxt"
    net.write_text('name: "n"\ninput: "data"\nlayer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }\n')
    with pytest.raises(tensorfmt.TensorfmtError) as e:
        tensorfmt.caffe.write_random_weights(net, tmp_path / "w.caffemodel")
    assert "input_shape={'data': (N,C,H,W)}" in str(e.value) and "--" not in str(e.value), e.value


@pytest.mark.parametrize(
    "cli, python",
    [
        ("(choose one with --tensor)", "(choose one with tensors=)"),
        ("drop --dtype, --to kinds and --set", "drop dtype=, to= kinds and settings="),
        ("give one (--input-shape data=N,C,H,W)", "give one (input_shape={'data': (N,C,H,W)})"),
        ("--set nx=3: not a count", "settings={'nx': 3}: not a count"),
        ("name it with --from)", "name it with format=)"),
        ("with --proto FORK.proto", "with proto=FORK.proto"),
        ("convert with a fixed batch (--input-shape) instead", "convert with a fixed batch (input_shape=) instead"),
        # Already said both ways, or no Python keyword: kept.
        ("without --dense / dense=True", "without --dense / dense=True"),
        ("--input-shape NAME=N,C,H,W (Python: input_shape=)", "--input-shape NAME=N,C,H,W (Python: input_shape=)"),
        ("draw (--layer NAME)", "draw (--layer NAME)"),
        ("a--tensor-b", "a--tensor-b"),
    ],
)
def test_cli_flags_become_python_keywords(cli, python):
    from tensorfmt._errors import python_words

    assert python_words(cli) == python


# -- 8. safe_names=True: attributes every netCDF writer takes ---------------------------
def _testdata_files():
    skip = {".md", ".py", ".json", ".prototxt", ".dump", ".txt", ".proto"}
    return sorted(p for p in TESTDATA.rglob("*") if p.is_file() and p.suffix not in skip)


def test_safe_names_datasets_write_to_netcdf(tmp_path):
    xr = require_module("xarray")
    require_module("scipy")
    written = set()
    for path in _testdata_files():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", tensorfmt.TensorfmtWarning)
                ds = xr.open_dataset(path, engine="tensorfmt", safe_names=True, dense=True)
        except (tensorfmt.TensorfmtError, ValueError):
            continue  # a fixture of a refused file
        # NETCDF3 (scipy) has no 16-bit floats: the attributes are what is tested here.
        for name in list(ds.variables):
            if ds[name].dtype.itemsize == 2 and ds[name].dtype.kind in "fV":
                ds[name] = ds[name].astype(np.float32)
        nc = tmp_path / "out.nc"
        ds.to_netcdf(nc, engine="scipy")
        with xr.open_dataset(nc, engine="scipy") as back:
            assert back.attrs["tensorfmt_format"] == ds.attrs["tensorfmt_format"]
            assert set(back.data_vars) == set(ds.data_vars)
        written.add(ds.attrs["tensorfmt_format"] + ":" + ds.attrs["tensorfmt_kind"])
    for kind in ("caffe:caffemodel", "som:som", "som:som-data", "primitiv:model", "primitiv:parameter", "npz", "safetensors", "pvp:sparse", "pvp:weights"):
        assert any(w == kind or w.startswith(kind + ":") for w in written), (kind, sorted(written))


def test_netcdf_attrs_are_plain_values():
    from tensorfmt._dims import netcdf_attrs

    got = netcdf_attrs(
        {"n": 3, "big": 2**40, "f": 0.5, "s": "x", "b": True, "none": None, "dims": [5, 5], "mixed": [1, 2.5], "strs": ["a", "b"], "nested": {"a": [1, {"b": 2}]}, "empty": []}
    )
    assert got["n"] == 3 and got["big"] == str(2**40) and got["f"] == 0.5 and got["s"] == "x"
    assert got["b"] == 1 and got["b"].dtype == np.int8 and "none" not in got
    assert got["dims"].tolist() == [5, 5] and got["mixed"].tolist() == [1.0, 2.5]
    assert json.loads(got["strs"]) == ["a", "b"] and json.loads(got["nested"]) == {"a": [1, {"b": 2}]}
    assert got["empty"] == "[]"


def test_convert_sparse_to_npz_keeps_the_frame_shape(tmp_path):
    """sparse=True into npz / safetensors is their sparse layout, with the frame shape
    (a bare CSR triple lost it, and converting back made a PVP of the wrong geometry)."""
    src = TESTDATA / "pvp" / "sparse_values_dt4.pvp"
    for ext in ("npz", "safetensors"):
        out = tmp_path / f"e.{ext}"
        tensorfmt.convert(src, out, sparse=True)
        assert "frame_shape" in tensorfmt.load(out)
        back = tmp_path / f"back_{ext}.pvp"
        tensorfmt.convert(out, back)
        assert tensorfmt.load(back)["values"].shape == tensorfmt.load(src)["values"].shape


def test_overwrite_false_covers_the_onnx_data_file(tmp_path):
    out = tmp_path / "m.onnx"
    (tmp_path / "m.onnx.data").write_bytes(b"precious")
    arrays = {"w": np.ones(512, np.float32)}
    with pytest.raises(tensorfmt.TensorfmtFileExistsError):
        tensorfmt.save(out, arrays, settings={"external_data": "true"}, overwrite=False)
    assert (tmp_path / "m.onnx.data").read_bytes() == b"precious" and not out.exists()


def test_typed_files_close_in_with_blocks_and_take_bytes_paths(tmp_path):
    p = TESTDATA / "pvp" / "dense_f32.pvp"
    with tensorfmt.pvp.open(os.fsencode(p)) as f:
        assert f.kind == "dense"
    with pytest.raises(tensorfmt.TensorfmtError, match="closed"):
        f.kind
    with tensorfmt.caffe.open(os.fsencode(TESTDATA / "caffe" / "v2_tiny.caffemodel")) as c:
        assert c.kind == "caffemodel"
    assert tensorfmt.som.open(os.fsencode(TESTDATA / "som" / "som_hex3.bin")).kind == "som"
    with tensorfmt.open(p) as doc:
        out = tmp_path / "dense.npz"
        assert doc.convert(out, dense=True) == ["values", "time"]


def test_a_kind_the_file_contradicts_is_refused():
    p = TESTDATA / "pvp" / "dense_f32.pvp"
    assert tensorfmt.open(p, kind="dense").kind == "dense"
    for kind in ("sparse", "bogus"):
        with pytest.raises(tensorfmt.InvalidArgumentError):
            tensorfmt.open(p, kind=kind)


def test_convert_arguments_are_checked(tmp_path):
    src = TESTDATA / "pvp" / "dense_f32.pvp"
    big = {"w": np.ones(512, np.float32)}
    tensorfmt.save(tmp_path / "m.onnx", big, settings={"external_data": True})  # a bool, as the docs pair it
    assert (tmp_path / "m.onnx.data").exists()
    with pytest.raises(TypeError):
        tensorfmt.convert(src, tmp_path / "a.npz", settings=[("a", "b")])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tensorfmt.convert(src, tmp_path / "a.npz", to=5)  # type: ignore[arg-type]
    assert tensorfmt.convert(src, tmp_path / "b.npz", tensors=["values"]) == ["values"]
    assert tensorfmt.convert(TESTDATA / "caffe" / "v2_tiny.caffemodel", tmp_path / "one.npz", tensors="ip/0") == ["ip/0"]
    with tensorfmt.open(src, frames=slice(0, 3, 2)) as doc:
        with pytest.raises(tensorfmt.InvalidArgumentError, match="step"):
            doc.convert(tmp_path / "st.npz")
    with tensorfmt.open(TESTDATA / "pvp" / "sparse_values_dt4.pvp", sparse=True) as doc:
        with pytest.raises(tensorfmt.InvalidArgumentError, match="sparse=True"):
            doc.convert(tmp_path / "s.npz")
    assert tensorfmt.load(src, frames=(5, 6))["values"].shape[0] == 0  # a Python slice


def test_max_alloc_is_a_whole_number_of_bytes():
    # max_alloc=True was read as a limit of 1 byte; a float failed without naming it.
    path = TESTDATA / "pvp" / "dense_f32.pvp"
    for bad in (True, 1.5, "64M"):
        with pytest.raises(tensorfmt.TensorfmtTypeError, match="max_alloc"):
            tensorfmt.open(path, max_alloc=bad)
    with pytest.raises(tensorfmt.InvalidArgumentError, match="max_alloc"):
        tensorfmt.load(path, max_alloc=-1)
    assert tensorfmt.load(path, max_alloc=np.int64(1 << 20))["values"].shape == (3, 2, 3, 2)


_PUBLIC_MODULES = (
    "tensorfmt",
    "tensorfmt.caffe",
    "tensorfmt.som",
    "tensorfmt.pvp",
    "tensorfmt.primitiv",
    "tensorfmt.spaces",
    "tensorfmt.virtual",
    "tensorfmt.dask",
    "tensorfmt.plot",
    "tensorfmt.xarray_backend",
)


def _public_callables():
    import importlib
    import inspect

    out = []
    for m in _PUBLIC_MODULES:
        mod = importlib.import_module(m)
        for name in mod.__all__:
            f = getattr(mod, name)
            if inspect.isclass(f) and issubclass(f, BaseException) or not callable(f):
                continue
            try:
                params = list(inspect.signature(f).parameters.values())
            except (TypeError, ValueError):
                continue
            named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            out.append(pytest.param(f, named, id=f"{m}.{name}"))
    return out


@pytest.fixture
def keep_floatx():
    """``set_floatx(...)`` may succeed with what the test passes: restore it; close the
    figures the plot calls that succeed leave open (matplotlib warns past 20)."""
    import matplotlib.pyplot as plt

    import tensorfmt.spaces

    floatx = tensorfmt.spaces.get_floatx()
    yield
    tensorfmt.spaces.set_floatx(floatx)
    plt.close("all")


@pytest.mark.parametrize("f,params", _public_callables())
def test_a_bad_argument_to_any_public_call_is_a_tensorfmt_error(f, params, tmp_path, keep_floatx):
    """Whatever Python itself trips over in an argument (``os.fspath(None)``,
    ``int("x")``, ``None < 1``, ``ax=-1``) is a TensorfmtError (keeping the builtin
    base), as the native module's argument errors are."""
    import warnings

    # A copy: `save(first, tensors=...)` and the like write where they are told.
    first = tmp_path / "dense_f32.pvp"
    shutil.copyfile(TESTDATA / "pvp" / "dense_f32.pvp", first)
    hostile = (None, "x", -1, 2**70, float("nan"), [], object())
    for i, p in enumerate(params):
        for value in hostile:
            args, kwargs = [], {}
            if i == 0:
                args = [value]
            else:
                args = [first]
                kwargs[p.name] = value
                if len(params) > 1 and params[1].name in ("dst", "out") and i != 1:
                    args.append(tmp_path / "out.npz")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    r = f(*args, **kwargs)
                except tensorfmt.TensorfmtError:
                    continue
                except TypeError as e:  # the call itself does not fit the signature
                    if any(w in str(e) for w in ("unexpected keyword", "missing", "positional argument", "multiple values")):
                        continue
                    raise AssertionError(f"{p.name}={value!r}: {type(e).__name__}: {e}") from e
                except Exception as e:  # noqa: BLE001 - the point of the test
                    if f.__name__ == "is_flat_specs" and isinstance(e, KeyError):
                        continue  # Pylearn2's own behaviour for a mapping
                    raise AssertionError(f"{p.name}={value!r}: {type(e).__name__}: {e}") from e
            close = getattr(r, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:  # noqa: BLE001
                    pass


def test_an_npz_of_strings_alone_does_not_read_as_an_empty_archive(tmp_path):
    p = tmp_path / "names.npz"
    np.savez(p, names=np.array(["a", "b"]), x=np.ones(2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensorfmt.open(p) as doc:
            header = doc.header
    assert (header["member_count"], header["other_members"]) == (1, 1)
    assert any("names.npy" in str(w.message) for w in caught)


def test_numbers_are_not_truncated_or_read_from_strings(tmp_path):
    a = DENSE
    with pytest.raises(tensorfmt.TensorfmtTypeError, match="max_diffs="):
        tensorfmt.diff(a, a, max_diffs=2.5)
    with pytest.raises(tensorfmt.TensorfmtTypeError, match="rtol="):
        tensorfmt.diff(a, a, rtol="0.1")
    with pytest.raises(tensorfmt.InvalidArgumentError):
        tensorfmt.diff(a, a, atol=float("nan"))
    assert tensorfmt.diff(a, a, rtol=np.float32(0.5), max_diffs=np.int64(3)).equal
