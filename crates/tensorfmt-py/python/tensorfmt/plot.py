"""The pictures people draw by hand from these files, with matplotlib (an optional
extra: ``pip install tensorfmt[plot]``): PVP activity frames, weight tableaus (sorted by
activity, as pvtools' ``weights_tableau``), PINK SOMs and best-match counts on their
hexagonal or cartesian maps, Caffe filters and mean images (BGR shown as RGB).

Every function returns a ``matplotlib.figure.Figure`` whose title names the file, what
is shown (frame and time, layer, tensor) and the value range, with a colour bar where
colours stand for values:

>>> import matplotlib
>>> matplotlib.use("Agg")
>>> import tensorfmt.plot
>>> fig = tensorfmt.plot.activity("testdata/pvp/dense_f32.pvp", frame=-1)
>>> fig.axes[0].get_title().splitlines()[0]
'dense_f32.pvp: frame 2, t=2.5'
>>> len(fig.axes)                        # the picture and its colour bar
2
>>> fig.savefig("activity.png")
"""

from __future__ import annotations

import math
import os
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _args
from . import caffe as _caffe
from . import pvp as _pvp
from . import som as _som
from ._errors import InvalidArgumentError

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["activity", "weights_tableau", "som", "bmu_counts", "distances", "caffe_filters", "caffe_mean"]


def _plt() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("tensorfmt.plot needs matplotlib: pip install matplotlib") from e
    return plt


def _figure(ax: Any, size: Tuple[float, float] = (6.0, 5.0)) -> Tuple[Any, Any]:
    if ax is not None:
        return ax.figure, ax
    fig, ax = _plt().subplots(figsize=size, constrained_layout=True)
    return fig, ax


def _range(values: np.ndarray) -> Tuple[float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (0.0, 1.0)
    lo, hi = float(finite.min()), float(finite.max())
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def _title(ax: Any, head: str, what: str, lo: float, hi: float) -> None:
    ax.set_title(f"{head}\n{what}, range [{lo:.4g}, {hi:.4g}]", fontsize=9)


def _name(path: PathLike) -> str:
    return os.path.basename(os.fsdecode(path))


def _tiles(images: Sequence[np.ndarray], columns: Optional[int] = None, gap: int = 1) -> np.ndarray:
    """``[n, h, w]`` or ``[n, h, w, 3]`` images on one canvas, NaN between them."""
    n = len(images)
    h, w = images[0].shape[:2]
    cols = columns or max(1, math.ceil(math.sqrt(n)))
    rows = math.ceil(n / cols)
    shape = (rows * (h + gap) - gap, cols * (w + gap) - gap) + images[0].shape[2:]
    canvas = np.full(shape, np.nan, dtype=np.float64)
    for i, img in enumerate(images):
        r, c = divmod(i, cols)
        canvas[r * (h + gap) : r * (h + gap) + h, c * (w + gap) : c * (w + gap) + w] = img
    return canvas


_GAP = "#c9a0dc"  # lavender: on none of the colour maps used here
_GAP_RGB = (0.79, 0.63, 0.86)


def _show(fig: Any, ax: Any, image: np.ndarray, cmap: str, lo: float, hi: float, label: str) -> Any:
    """A value image with its colour bar; an RGB image (values scaled to [lo, hi]) without."""
    if image.ndim == 3:
        rgb = np.clip((image - lo) / (hi - lo), 0, 1)
        rgb = np.where(np.isnan(rgb), np.array(_GAP_RGB), rgb)
        ax.imshow(rgb, interpolation="nearest")
    else:
        # The gaps between tiles get a colour the colour map does not use.
        colours = _plt().get_cmap(cmap).with_extremes(bad=_GAP)
        im = ax.imshow(np.ma.masked_invalid(image), cmap=colours, vmin=lo, vmax=hi, interpolation="nearest")
        fig.colorbar(im, ax=ax, label=label)
    ax.set_xticks([])
    ax.set_yticks([])
    return fig


def activity(
    path: PathLike, frame: int = 0, *, feature: Optional[int] = None, cmap: str = "viridis", ax: Any = None
) -> Any:
    """One frame of a PVP activity file (dense or sparse) as a ``[ny, nx]`` image:
    feature ``feature`` (negative counts from the end), or the mean over the features
    when the layer has several."""
    f = _pvp.open(path)
    if isinstance(f, _pvp.WeightsFile):
        raise InvalidArgumentError(f"{path} holds weights; use weights_tableau()")
    nf = int(f.shape[2])
    k = None if feature is None else _args.index("feature", feature, nf, _name(path), "feature")
    fr = f[frame]
    values = fr.to_dense(f.shape).astype(np.float64)
    if k is not None:
        image, what = values[:, :, k], f"feature {k} of {nf}"
    elif nf == 1:
        image, what = values[:, :, 0], "[ny, nx]"
    else:
        image, what = values.mean(axis=2), f"mean over {nf} features"
    lo, hi = _range(image)
    fig, ax = _figure(ax)
    _title(ax, f"{_name(path)}: frame {fr.index}, t={fr.time:g}", what, lo, hi)
    return _show(fig, ax, image, cmap, lo, hi, "activity")


def weights_tableau(
    path: PathLike,
    frame: int = 0,
    *,
    arbor: int = 0,
    activity: Optional[PathLike] = None,
    cmap: str = "gray",
    ax: Any = None,
) -> Any:
    """Every patch of a PVP weight file side by side (``[nyp, nxp]`` tiles; RGB when
    ``nfp`` is 3, else the mean over ``nfp``), on one common scale. With ``activity``
    (the pre-synaptic layer's activity file, one feature per patch) the patches are
    sorted by their mean activity, most active first, as pvtools' ``weights_tableau``."""
    f = _pvp.open(path, kind="weights")
    fr = f[frame]
    arbor = _args.index("arbor", arbor, len(fr.weights), _name(path), "arbor")
    w = fr.weights[arbor].astype(np.float64)  # [patches, nyp, nxp, nfp]
    order = np.arange(w.shape[0])
    what = f"{w.shape[0]} patches {w.shape[1]}x{w.shape[2]}x{w.shape[3]}, arbor {arbor}"
    if activity is not None:
        act = _pvp.open(activity)
        if act.kind == "sparse":
            indptr, indices, data, width = act.csr()
            per_neuron = np.bincount(indices, weights=data, minlength=width).reshape(act.shape)
        else:
            per_neuron = act.movie().astype(np.float64).sum(axis=0)
        per_feature = per_neuron.reshape(-1, act.shape[2]).sum(axis=0) / max(1, len(act))
        if per_feature.size != w.shape[0]:
            raise InvalidArgumentError(
                f"{activity} has {per_feature.size} features, {path} has {w.shape[0]} patches"
            )
        order = np.argsort(-per_feature, kind="stable")
        what += ", most active first"
    tiles = [w[i] if w.shape[3] == 3 else w[i].mean(axis=2) for i in order]
    lo, hi = _range(w)
    fig, ax = _figure(ax)
    _title(ax, f"{_name(path)}: frame {fr.index}, t={fr.time:g}", what, lo, hi)
    return _show(fig, ax, _tiles(tiles), cmap, lo, hi, "weight")


def _hex_centres(axial: np.ndarray) -> np.ndarray:
    """Pixel centres (x, y) of pointy-top hexagons at axial ``(q, r)``, unit radius."""
    q, r = axial[:, 0].astype(np.float64), axial[:, 1].astype(np.float64)
    return np.stack([math.sqrt(3) * (q + r / 2), 1.5 * r], axis=1)


def som(path: PathLike, *, channel: int = 0, cmap: str = "viridis", ax: Any = None) -> Any:
    """The neurons of a PINK SOM, each drawn at its place on the map (hexagons for a
    hexagonal map, a grid for a cartesian one), on one colour scale: channel
    ``channel`` of multi-channel neurons (named in the title; negative counts from the
    end). The title gives the neuron dims as rows x columns, as ``tensorfmt render``."""
    s = _som.open(path)
    if s.kind != "som":
        raise InvalidArgumentError(f"{path} is a {s.kind} file, not a SOM")
    item = tuple(s.item_shape or ())
    channels = item[0] if len(item) == 3 else 1
    k = _args.index("channel", channel, channels, _name(path), "channel")
    neurons = np.asarray(s.neurons, dtype=np.float64)
    neurons = neurons.reshape((-1,) + item)
    if neurons.ndim == 4:  # [neurons, channels, h, w]
        neurons = neurons[:, k]
    elif neurons.ndim == 2:  # [neurons, n]: a row each
        neurons = neurons[:, None, :]
    lo, hi = _range(neurons)
    fig, ax = _figure(ax)
    # Neuron dims as rows x columns (the header's [h, w], as `tensorfmt render` says).
    what = f"{len(neurons)} neurons {neurons.shape[1]}x{neurons.shape[2]}"
    if channels > 1:
        what += f", channel {k} of {channels}"
    _title(ax, f"{_name(path)}: SOM, {s.layout} {s.map_shape}", what, lo, hi)
    if s.hexagonal:
        centres = _hex_centres(s.axial())
        half = 0.75
        im = None
        for (x, y), img in zip(centres, neurons):
            im = ax.imshow(
                img, cmap=cmap, vmin=lo, vmax=hi, extent=(x - half, x + half, -y - half, -y + half),
                interpolation="nearest",
            )
        ax.set_xlim(centres[:, 0].min() - 1, centres[:, 0].max() + 1)
        ax.set_ylim(-centres[:, 1].max() - 1, -centres[:, 1].min() + 1)
        ax.set_aspect("equal")
        fig.colorbar(im, ax=ax, label="weight")
        ax.set_xticks([])
        ax.set_yticks([])
        return fig
    dims = list(s.map_shape or (len(neurons),))
    cols = dims[-1] if len(dims) > 1 else len(neurons)
    return _show(fig, ax, _tiles(list(neurons), columns=cols), cmap, lo, hi, "weight")


def _map_heatmap(
    fig: Any, ax: Any, m: Any, values: np.ndarray, cmap: str, label: str, fmt: Any, lo: float, hi: float,
    mark: Optional[int] = None,
) -> Any:
    """One cell per neuron of the mapping ``m``'s map (hexagons at axial coordinates,
    or a grid), coloured by ``values`` and labelled with ``fmt(value)``; the cell
    ``mark`` (storage order) outlined."""
    plt = _plt()
    norm = plt.Normalize(lo, hi)
    colours = plt.get_cmap(cmap)

    def ink(v: float) -> str:
        return "white" if norm(v) < 0.5 else "black"

    if m.hexagonal:
        from matplotlib.patches import RegularPolygon

        centres = _hex_centres(m.axial())
        for i, ((x, y), v) in enumerate(zip(centres, values)):
            edge, width = ("red", 2.5) if i == mark else ("white", 1.0)
            ax.add_patch(RegularPolygon((x, -y), 6, radius=1.0, facecolor=colours(norm(v)), edgecolor=edge, linewidth=width))
            ax.text(x, -y, fmt(v), ha="center", va="center", fontsize=7, color=ink(v))
        ax.set_xlim(centres[:, 0].min() - 1.2, centres[:, 0].max() + 1.2)
        ax.set_ylim(-centres[:, 1].max() - 1.2, -centres[:, 1].min() + 1.2)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=colours), ax=ax, label=label)
        return fig
    dims = list(m.map_shape or (len(values),))
    grid = values.reshape(dims if len(dims) == 2 else (1, -1))
    for (i, j), v in np.ndenumerate(grid):
        ax.text(j, i, fmt(v), ha="center", va="center", fontsize=7, color=ink(v))
    if mark is not None:
        from matplotlib.patches import Rectangle

        row, col = (int(v) for v in np.unravel_index(mark, grid.shape))
        ax.add_patch(Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5))
    return _show(fig, ax, grid, cmap, lo, hi, label)


def _mapping(path: PathLike) -> Any:
    import warnings

    from ._errors import TensorfmtWarning

    with warnings.catch_warnings():
        # PINK labels hexagonal mappings cartesian; the inference is expected here.
        warnings.simplefilter("ignore", TensorfmtWarning)
        m = _som.open(path)
    if m.kind != "mapping":
        raise InvalidArgumentError(f"{path} is a {m.kind} file, not a mapping")
    return m


def bmu_counts(path: PathLike, *, cmap: str = "magma", ax: Any = None) -> Any:
    """How many entries of a PINK mapping file each neuron best matches, on the map,
    with each count written on its cell."""
    m = _mapping(path)
    counts = np.asarray(m.bmu_counts(), dtype=np.float64)
    lo, hi = float(counts.min()), float(max(counts.max(), counts.min() + 1))
    fig, ax = _figure(ax)
    _title(ax, f"{_name(path)}: best-matching units, {m.layout} {m.map_shape}", f"{int(counts.sum())} entries", lo, hi)
    return _map_heatmap(fig, ax, m, counts, cmap, "entries", lambda c: f"{int(c)}", lo, hi)


def distances(path: PathLike, entry: int = 0, *, cmap: str = "viridis_r", ax: Any = None) -> Any:
    """One entry's distance to every neuron of a PINK mapping file, on the map
    (hexagons for a hexagonal SOM), each value written on its cell and the
    best-matching neuron outlined in red.

    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import tensorfmt.plot
    >>> fig = tensorfmt.plot.distances("testdata/som/mapping/map_hex5_36_flip.bin", entry=3)
    >>> fig.axes[0].get_title().splitlines()[0]
    'map_hex5_36_flip.bin: distances of entry 3, hexagonal (5, 5)'
    """
    m = _mapping(path)
    e = _args.index("entry", entry, len(m), _name(path), "entry", "entries")
    values = np.asarray(m.distances[e], dtype=np.float64).reshape(-1)
    finite = np.where(np.isnan(values), np.inf, values)
    best = int(np.argmin(finite)) if np.isfinite(finite).any() else None
    lo, hi = _range(values)
    fig, ax = _figure(ax)
    what = f"best match neuron {best} (outlined)" if best is not None else "no finite distance"
    _title(ax, f"{_name(path)}: distances of entry {e}, {m.layout} {m.map_shape}", what, lo, hi)
    return _map_heatmap(fig, ax, m, values, cmap, "distance", lambda v: f"{v:.3g}", lo, hi, mark=best)


def _bgr_to_rgb(chw: np.ndarray) -> np.ndarray:
    """A ``[3, h, w]`` Caffe image (channels in OpenCV's BGR order) as ``[h, w, 3]`` RGB."""
    return np.moveaxis(chw[::-1], 0, -1)


def caffe_filters(path: PathLike, layer: Optional[str] = None, *, cmap: str = "gray", ax: Any = None) -> Any:
    """The filters of a Caffe convolution layer (the first 4-D blob unless ``layer``
    names one): RGB tiles when they take 3 input channels (BGR in Caffe, shown as RGB),
    else the mean over their input channels, on one colour scale."""
    net = _caffe.open(path)
    weights = net.weights()
    if layer is None:
        layer = next((name for name, blobs in weights.items() if blobs[0].ndim == 4), None)
        if layer is None:
            raise InvalidArgumentError(f"{path} has no layer with 4-D filters")
    if layer not in weights:
        raise InvalidArgumentError(f"{path} has no layer {layer!r} with blobs (it has: {', '.join(weights)})")
    w = np.asarray(weights[layer][0], dtype=np.float64)
    if w.ndim != 4:
        raise InvalidArgumentError(f"layer {layer!r} holds {w.shape}, not [out, in, h, w] filters")
    tiles: List[np.ndarray] = [_bgr_to_rgb(k) if w.shape[1] == 3 else k.mean(axis=0) for k in w]
    lo, hi = _range(w)
    fig, ax = _figure(ax)
    if w.shape[1] == 3:
        colour = "BGR shown as RGB"
    elif w.shape[1] == 1:
        colour = "1 input channel"
    else:
        colour = f"mean over {w.shape[1]} input channels"
    _title(ax, f"{_name(path)}: layer {layer!r}", f"{w.shape[0]} filters {w.shape[2]}x{w.shape[3]}, {colour}", lo, hi)
    return _show(fig, ax, _tiles(tiles), cmap, lo, hi, "weight")


def caffe_mean(path: PathLike, *, cmap: str = "gray", ax: Any = None) -> Any:
    """A Caffe mean image (``.binaryproto``): 3 channels are BGR, as Caffe and OpenCV
    store them, and drawn as RGB; one channel gets a colour bar; other channel counts
    are drawn side by side."""
    f = _caffe.open(path)
    if not f.blobs:
        raise InvalidArgumentError(f"{path} is a {f.kind} file without a mean blob")
    m = np.asarray(f.blobs[0].data, dtype=np.float64)
    while m.ndim > 3 and m.shape[0] == 1:
        m = m[0]
    if m.ndim == 2:
        m = m[None]
    if m.ndim != 3:
        raise InvalidArgumentError(f"a mean blob of shape {m.shape} is not an image")
    lo, hi = _range(m)
    fig, ax = _figure(ax)
    if m.shape[0] == 3:
        _title(ax, f"{_name(path)}: mean image", f"{m.shape[1]}x{m.shape[2]}, BGR shown as RGB", lo, hi)
        return _show(fig, ax, _bgr_to_rgb(m), cmap, lo, hi, "")
    what = f"{m.shape[1]}x{m.shape[2]}" + (f", {m.shape[0]} channels" if m.shape[0] > 1 else "")
    _title(ax, f"{_name(path)}: mean image", what, lo, hi)
    return _show(fig, ax, _tiles(list(m), columns=m.shape[0]), cmap, lo, hi, "mean")

# Bad arguments Python itself trips over are TensorfmtErrors too.
from ._errors import _guard_public  # noqa: E402

_guard_public(globals())
