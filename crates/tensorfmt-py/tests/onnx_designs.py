"""The planned ONNX lowerings of issue 30's layers, built with ``onnx.helper`` in standard
ONNX opset 17 (no custom domain), so that the Rust lowering can transcribe graphs already
known to give the references' numbers (``test_caffe_refs.py`` runs each one in
onnxruntime against ``caffe_refs.py``). ``docs/caffe-layers.md`` ("References and designs")
describes each graph in words; the function here is the exact node sequence.

Each builder returns a ``ModelProto`` whose inputs and outputs carry the Caffe blob names
used in the tests. Shapes known at conversion time (Caffe's) are constants; the batch and,
for Faster R-CNN, the feature map size stay dynamic (read with ``Shape``).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
FLT_MAX = float(np.finfo(np.float32).max)


class Graph:
    """A tiny builder: ``g.op("Add", a, b)`` appends a node and returns its output name;
    ``g.const(array)`` adds an initializer."""

    def __init__(self, prefix: str = "n"):
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []
        self.prefix = prefix
        self.count = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{self.prefix}_{hint}_{self.count}"

    def const(self, value, dtype=None, hint: str = "c") -> str:
        """An initializer; float64 values become float32 unless ``dtype`` says float64."""
        arr = np.asarray(value, dtype=dtype)
        if arr.dtype == np.float64 and dtype is not np.float64:
            arr = arr.astype(np.float32)
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def i64(self, *values) -> str:
        return self.const(np.array(values, np.int64), hint="i")

    def op(self, op_type: str, *inputs: str, outputs: int = 1, out: Optional[Sequence[str]] = None, **attrs):
        names = list(out) if out else [self.name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=self.name(op_type), **attrs))
        return names[0] if outputs == 1 else names

    def graph(self, inputs, outputs, name="design") -> onnx.GraphProto:
        return helper.make_graph(self.nodes, name, inputs, outputs, self.inits)

    def model(self, inputs: Dict[str, Tuple[int, Sequence]], outputs: Dict[str, Sequence]) -> onnx.ModelProto:
        """``inputs``/``outputs``: name -> (element type, dims) / name -> dims (float)."""
        ins = [helper.make_tensor_value_info(k, t, list(s)) for k, (t, s) in inputs.items()]
        outs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(s)) for k, s in outputs.items()]
        m = helper.make_model(self.graph(ins, outs), opset_imports=[helper.make_opsetid("", OPSET)], producer_name="onnx_designs")
        m.ir_version = 8
        onnx.checker.check_model(m, full_check=True)
        return m

    # small helpers used by several designs
    def col(self, x: str, k: int, axis: int = -1) -> str:
        """``x[..., k:k+1]``."""
        return self.op("Slice", x, self.i64(k), self.i64(k + 1), self.i64(axis))

    def c_round(self, x: str) -> str:
        """C's ``round`` (halves away from zero); ONNX ``Round`` rounds halves to even."""
        return self.op("Mul", self.op("Sign", x), self.op("Floor", self.op("Add", self.op("Abs", x), self.const(np.float32(0.5)))))

    def dim(self, x: str, axis: int) -> str:
        """``Shape(x)[axis]`` as a 1-element int64 tensor."""
        return self.op("Shape", x, start=axis, end=axis + 1)


F = TensorProto.FLOAT
I64 = TensorProto.INT64


# --------------------------------------------------------------------------------------
# DetectionOutput
# --------------------------------------------------------------------------------------

def detection_output(num_priors: Optional[int], num_classes: int, *, share_location=True, background_label_id=0, code_type="CORNER",
                     variance_encoded_in_target=False, keep_top_k=-1, confidence_threshold=None, nms_threshold=0.3,
                     top_k=None, clip=False, normalized_bbox=True, prior_channels=2, plus_one=False) -> onnx.ModelProto:
    """SSD DetectionOutput. Inputs ``loc [N, P*L*4]``, ``conf [N, P*C]``, ``prior [1, V,
    P*4]`` (N dynamic; P dynamic too with ``num_priors=None``, as in OpenCV's Faster R-CNN
    post-processing where the priors are the RoIs); output ``det [1, 1, n, 7]`` with n
    dynamic, rows in Caffe's order (image, label ascending, score descending), Caffe's
    ``[i, -1, ...]`` rows when nothing is detected. ``plus_one``: OpenCV's
    ``normalized_bbox: false`` arithmetic (CENTER_SIZE prior sizes + 1, NMS on boxes whose
    max corners are one pixel further). ``eta < 1`` is not expressible with
    NonMaxSuppression (see the docs)."""
    C = num_classes
    L = 1 if share_location else C
    g = Graph("det")
    f32 = lambda v: g.const(np.float32(v))  # noqa: E731
    Pd = g.op("Div", g.dim("prior", 2), g.i64(4))                          # [1]: P, read at run time

    def shape(*parts):
        return g.op("Concat", *[p if isinstance(p, str) else g.i64(p) for p in parts], axis=0)

    loc = g.op("Reshape", "loc", shape(0, Pd, L, 4))                       # [N, P, L, 4]
    pri = g.op("Reshape", "prior", shape(prior_channels, Pd, 1, 4))        # [V, P, 1, 4]
    pbox = g.op("Gather", pri, g.i64(0), axis=0)                            # [1, P, 1, 4] -> broadcast
    pbox = g.op("Squeeze", pbox, g.i64(0))                                  # [P, 1, 4]
    if variance_encoded_in_target:
        d = loc
    else:
        var = g.op("Squeeze", g.op("Gather", pri, g.i64(1), axis=0), g.i64(0))
        d = g.op("Mul", loc, var)
    px0, py0, px1, py1 = (g.col(pbox, k) for k in range(4))                 # [P, 1, 1]
    d0, d1, d2, d3 = (g.col(d, k) for k in range(4))                        # [N, P, L, 1]
    if code_type == "CORNER":
        box = g.op("Add", d, pbox)
    elif code_type == "CORNER_SIZE":
        pw, ph = g.op("Sub", px1, px0), g.op("Sub", py1, py0)
        size = g.op("Concat", pw, ph, pw, ph, axis=-1)
        box = g.op("Add", pbox, g.op("Mul", d, size))
    elif code_type == "CENTER_SIZE":
        pw, ph = g.op("Sub", px1, px0), g.op("Sub", py1, py0)
        half = f32(0.5)
        if plus_one:
            pw, ph = g.op("Add", pw, f32(1)), g.op("Add", ph, f32(1))
            pcx = g.op("Add", px0, g.op("Mul", pw, half))
            pcy = g.op("Add", py0, g.op("Mul", ph, half))
        else:
            pcx = g.op("Mul", g.op("Add", px0, px1), half)
            pcy = g.op("Mul", g.op("Add", py0, py1), half)
        cx = g.op("Add", g.op("Mul", d0, pw), pcx)
        cy = g.op("Add", g.op("Mul", d1, ph), pcy)
        hw = g.op("Mul", g.op("Mul", g.op("Exp", d2), pw), half)
        hh = g.op("Mul", g.op("Mul", g.op("Exp", d3), ph), half)
        box = g.op("Concat", g.op("Sub", cx, hw), g.op("Sub", cy, hh), g.op("Add", cx, hw), g.op("Add", cy, hh), axis=-1)
    else:
        raise ValueError(code_type)
    if clip and normalized_bbox:
        box = g.op("Clip", box, f32(0), f32(1))
    elif clip:
        # OpenCV's pixel clip: x to [0, W - 1], y to [0, H - 1] of the 4th bottom (the image).
        wmax = g.op("Sub", g.op("Cast", g.dim("image", 3), to=F), f32(1))
        hmax = g.op("Sub", g.op("Cast", g.dim("image", 2), to=F), f32(1))
        lim = g.op("Concat", wmax, hmax, wmax, hmax, axis=0)                    # [4]
        box = g.op("Max", g.op("Min", box, lim), f32(0))
    # NMS layout: a "batch" per image (shared boxes) or per (image, class).
    conf = g.op("Transpose", g.op("Reshape", "conf", shape(0, Pd, C)), perm=[0, 2, 1])  # [N, C, P]
    masked = conf
    if 0 <= background_label_id < C:
        bg = np.zeros((1, C, 1), bool)
        bg[0, background_label_id, 0] = True
        masked = g.op("Where", g.const(bg), f32(-np.inf), masked)
    if top_k is not None and top_k > -1 and (num_priors is None or top_k < num_priors):
        _, idx = g.op("TopK", masked, g.op("Min", g.i64(top_k), Pd), axis=-1, largest=1, sorted=1, outputs=2)
        keep = g.op("ScatterElements", g.op("Mul", masked, f32(0)), idx,
                    g.op("Expand", f32(1), g.op("Shape", idx)), axis=-1)
        masked = g.op("Where", g.op("Cast", keep, to=TensorProto.BOOL), masked, f32(-np.inf))
    # Caffe gives an inverted box (xmax < xmin or ymax < ymin) size 0 and overlap 0 with
    # everything; NonMaxSuppression reorders corners. Such boxes go to NMS as a point.
    bx0, by0, bx1, by1 = (g.col(box, k) for k in range(4))
    inv = g.op("Or", g.op("Less", bx1, bx0), g.op("Less", by1, by0))
    point = g.op("Concat", bx0, by0, bx0, by0, axis=-1)
    grown = g.op("Add", box, g.const(np.array([0, 0, 1, 1], np.float32))) if plus_one else box
    nms_box = g.op("Where", inv, point, grown)                               # [N, P, L, 4]
    if share_location:
        nb = g.op("Reshape", nms_box, shape(0, Pd, 4))                       # [N, P, 4]
        ns = masked                                                          # [N, C, P]
    else:
        nb = g.op("Reshape", g.op("Transpose", nms_box, perm=[0, 2, 1, 3]), shape(-1, Pd, 4))  # [N*C, P, 4]
        ns = g.op("Reshape", masked, shape(-1, 1, Pd))                       # [N*C, 1, P]
    thr = -FLT_MAX if confidence_threshold is None else confidence_threshold
    sel = g.op("NonMaxSuppression", nb, ns, Pd, f32(nms_threshold), f32(thr), center_point_box=0)  # [K, 3]
    b, c, p = (g.op("Squeeze", g.col(sel, k), g.i64(1)) for k in range(3))
    if share_location:
        n, cls = b, c
        boxes_src = g.op("Reshape", box, shape(0, Pd, 4))                    # [N, P, 4]
        box_idx = g.op("Concat", g.op("Unsqueeze", n, g.i64(1)), g.op("Unsqueeze", p, g.i64(1)), axis=1)
    else:
        cC = g.i64(C)
        n = g.op("Div", b, cC)
        cls = g.op("Mod", b, cC)
        boxes_src = g.op("Reshape", g.op("Transpose", box, perm=[0, 2, 1, 3]), shape(-1, Pd, 4))
        box_idx = g.op("Concat", g.op("Unsqueeze", b, g.i64(1)), g.op("Unsqueeze", p, g.i64(1)), axis=1)
    un = lambda t: g.op("Unsqueeze", t, g.i64(1))  # noqa: E731
    score = g.op("GatherND", conf, g.op("Concat", un(n), un(cls), un(p), axis=1))   # [K]
    boxes = g.op("GatherND", boxes_src, box_idx)                                     # [K, 4]
    rows = g.op("Concat", un(g.op("Cast", n, to=F)), un(g.op("Cast", cls, to=F)), un(score), boxes, axis=1)
    if keep_top_k > -1:
        # Per image: the keep_top_k best selected scores over all classes (TopK: equal
        # scores keep the lower class, then the lower prior), rows kept in NMS order.
        flat = g.op("Add", g.op("Mul", cls, Pd), p)
        nf = g.op("Concat", un(n), un(flat), axis=1)
        nimg = g.dim("loc", 0)
        cp = g.op("Mul", g.i64(C), Pd)
        dense = g.op("ScatterND", g.op("Expand", f32(-np.inf), g.op("Concat", nimg, cp, axis=0)), nf, score)
        vals, idx = g.op("TopK", dense, g.op("Min", g.i64(keep_top_k), cp), axis=1, largest=1, sorted=1, outputs=2)
        real = g.op("Cast", g.op("Greater", vals, f32(-np.inf)), to=F)
        mark = g.op("ScatterElements", g.op("Expand", f32(0), g.op("Shape", dense)), idx, real, axis=1)
        keep = g.op("Cast", g.op("GatherND", mark, nf), to=TensorProto.BOOL)
        rows = g.op("Compress", rows, keep, axis=0)
    # Nothing detected in the whole batch: Caffe's one [i, -1, -1, -1, -1, -1, -1] per image.
    nimg = g.dim("loc", 0)
    ids = g.op("Cast", g.op("Range", g.i64(0), g.op("Squeeze", nimg, g.i64(0)), g.i64(1)), to=F)
    fallback = g.op("Concat", un(ids), g.op("Expand", f32(-1), g.op("Concat", nimg, g.i64(6), axis=0)), axis=1)
    count = g.dim(rows, 0)
    empty = g.op("Equal", count, g.i64(0))
    mask = g.op("Concat", g.op("Expand", g.const(np.array([True])), count), g.op("Expand", empty, nimg), axis=0)
    out = g.op("Compress", g.op("Concat", rows, fallback, axis=0), mask, axis=0)
    g.op("Reshape", out, g.i64(1, 1, -1, 7), out=["det"])
    P = num_priors
    ins = {"loc": (F, ["N", P * L * 4 if P else "PL4"]), "conf": (F, ["N", P * C if P else "PC"]), "prior": (F, [1, prior_channels, P * 4 if P else "P4"])}
    if clip and not normalized_bbox:
        ins["image"] = (F, ["N", 3, "H", "W"])
    return g.model(ins, {"det": [1, 1, "n", 7]})


# --------------------------------------------------------------------------------------
# Faster R-CNN: ProposalLayer (py-faster-rcnn and C++), ROIPooling; R-FCN PSROIPooling
# --------------------------------------------------------------------------------------

def proposal(anchors: np.ndarray, *, feat_stride=16, pre_nms_topN=6000, post_nms_topN=300, nms_thresh=0.7,
             min_size=16.0) -> onnx.ModelProto:
    """py-faster-rcnn's ProposalLayer (test phase). Inputs ``rpn_cls_prob_reshape [1, 2A,
    H, W]``, ``rpn_bbox_pred [1, 4A, H, W]``, ``im_info [1, 3]`` with H, W dynamic;
    outputs ``rois [R, 5]`` and ``scores [R, 1]`` with R <= post_nms_topN dynamic.
    ``anchors`` ``[A, 4]`` are computed at conversion (``generate_anchors``)."""
    A = anchors.shape[0]
    g = Graph("prop")
    f32 = lambda v: g.const(np.float32(v))  # noqa: E731
    cls, bbox, info = "rpn_cls_prob_reshape", "rpn_bbox_pred", "im_info"
    fg = g.op("Slice", cls, g.i64(A), g.i64(2 * A), g.i64(1))                    # [1, A, H, W]
    scores = g.op("Reshape", g.op("Transpose", fg, perm=[0, 2, 3, 1]), g.i64(-1))  # [H*W*A]
    deltas = g.op("Reshape", g.op("Transpose", bbox, perm=[0, 2, 3, 1]), g.i64(-1, 4))
    # Shifted anchors [H, W, A, 4] in (h, w, a) order, from the map's runtime size.
    h = g.op("Squeeze", g.dim(cls, 2), g.i64(0))
    w = g.op("Squeeze", g.dim(cls, 3), g.i64(0))
    stride = f32(feat_stride)
    sx = g.op("Reshape", g.op("Mul", g.op("Cast", g.op("Range", g.i64(0), w, g.i64(1)), to=F), stride), g.i64(1, -1, 1))  # [1, W, 1]
    sy = g.op("Reshape", g.op("Mul", g.op("Cast", g.op("Range", g.i64(0), h, g.i64(1)), to=F), stride), g.i64(-1, 1, 1))  # [H, 1, 1]
    zero = g.op("Add", g.op("Mul", sx, f32(0)), g.op("Mul", sy, f32(0)))          # [H, W, 1]
    coords = []
    for k in range(4):
        a = g.const(anchors[:, k].astype(np.float32).reshape(1, 1, A))
        shift = sx if k % 2 == 0 else sy
        coords.append(g.op("Unsqueeze", g.op("Add", g.op("Add", a, shift), zero), g.i64(3)))
    anc = g.op("Reshape", g.op("Concat", *coords, axis=3), g.i64(-1, 4))          # [K*A, 4]
    ax0, ay0, ax1, ay1 = (g.col(anc, k) for k in range(4))
    one, half = f32(1), f32(0.5)
    widths = g.op("Add", g.op("Sub", ax1, ax0), one)
    heights = g.op("Add", g.op("Sub", ay1, ay0), one)
    ctr_x = g.op("Add", ax0, g.op("Mul", half, widths))
    ctr_y = g.op("Add", ay0, g.op("Mul", half, heights))
    dx, dy, dw, dh = (g.col(deltas, k) for k in range(4))
    pcx = g.op("Add", g.op("Mul", dx, widths), ctr_x)
    pcy = g.op("Add", g.op("Mul", dy, heights), ctr_y)
    pw = g.op("Mul", g.op("Exp", dw), widths)
    ph = g.op("Mul", g.op("Exp", dh), heights)
    x0 = g.op("Sub", pcx, g.op("Mul", half, pw))
    y0 = g.op("Sub", pcy, g.op("Mul", half, ph))
    x1 = g.op("Add", pcx, g.op("Mul", half, pw))
    y1 = g.op("Add", pcy, g.op("Mul", half, ph))
    # clip_boxes: x to [0, im_w - 1], y to [0, im_h - 1] (im_info = [h, w, scale]).
    ih = g.op("Sub", g.op("Slice", info, g.i64(0), g.i64(1), g.i64(1)), one)     # [1, 1]
    iw = g.op("Sub", g.op("Slice", info, g.i64(1), g.i64(2), g.i64(1)), one)
    zero1 = f32(0)
    cx = lambda v: g.op("Max", g.op("Min", v, iw), zero1)  # noqa: E731
    cy = lambda v: g.op("Max", g.op("Min", v, ih), zero1)  # noqa: E731
    props = g.op("Concat", cx(x0), cy(y0), cx(x1), cy(y1), axis=1)                # [K*A, 4]
    if min_size > 0:
        scale = g.op("Slice", info, g.i64(2), g.i64(3), g.i64(1))
        ms = g.op("Squeeze", g.op("Mul", scale, f32(min_size)), g.i64(0, 1))
        bw = g.op("Add", g.op("Sub", g.col(props, 2), g.col(props, 0)), one)
        bh = g.op("Add", g.op("Sub", g.col(props, 3), g.col(props, 1)), one)
        ok = g.op("Squeeze", g.op("And", g.op("GreaterOrEqual", bw, ms), g.op("GreaterOrEqual", bh, ms)), g.i64(1))
        props = g.op("Compress", props, ok, axis=0)
        scores = g.op("Compress", scores, ok, axis=0)
    count = g.dim(scores, 0)
    k = g.op("Min", count, g.i64(pre_nms_topN)) if pre_nms_topN > 0 else count
    top, order = g.op("TopK", scores, k, axis=0, largest=1, sorted=1, outputs=2)
    props = g.op("Gather", props, order, axis=0)
    # +1 pixel areas: NMS on boxes whose max corners are one pixel further.
    nb = g.op("Unsqueeze", g.op("Add", props, g.const(np.array([0, 0, 1, 1], np.float32))), g.i64(0))
    ns = g.op("Unsqueeze", top, g.i64(0, 1))
    maxout = g.i64(post_nms_topN if post_nms_topN > 0 else 2 ** 31 - 1)
    sel = g.op("NonMaxSuppression", nb, ns, maxout, f32(nms_thresh))
    keep = g.op("Squeeze", g.col(sel, 2), g.i64(1))
    boxes = g.op("Gather", props, keep, axis=0)
    kept = g.op("Unsqueeze", g.op("Gather", top, keep, axis=0), g.i64(1))
    rows = g.op("Concat", g.op("Mul", g.col(boxes, 0), f32(0)), boxes, axis=1)
    g.op("Identity", rows, out=["rois"])
    g.op("Identity", kept, out=["scores"])
    return g.model({cls: (F, [1, 2 * A, "H", "W"]), bbox: (F, [1, 4 * A, "H", "W"]), info: (F, [1, 3])}, {"rois": ["R", 5], "scores": ["R", 1]})


def roi_pooling(pooled_h: int, pooled_w: int, spatial_scale: float) -> onnx.ModelProto:
    """caffe-fast-rcnn ROIPooling = ONNX MaxRoiPool (onnxruntime's kernel is Caffe's code:
    C ``round`` of the scaled corners, +1 sizes, floor/ceil bins, empty bins 0)."""
    g = Graph("roi")
    g.op("MaxRoiPool", "x", "rois", pooled_shape=[pooled_h, pooled_w], spatial_scale=float(spatial_scale), out=["y"])
    return g.model({"x": (F, ["N", "C", "H", "W"]), "rois": (F, ["R", 5])}, {"y": ["R", "C", pooled_h, pooled_w]})


def psroi_pooling(output_dim: int, group_size: int, spatial_scale: float) -> onnx.ModelProto:
    """R-FCN PSROIPooling with an integral image: in float64, ``S = CumSum_w(CumSum_h(
    Pad(x, 1 leading row and column)))``; each bin's sum is ``S[he, we] - S[hs, we] -
    S[he, ws] + S[hs, ws]`` gathered (GatherND) at the bin's position-sensitive channel
    ``(ctop * G + ph) * G + pw``; divided by the bin area, 0 for an empty bin. Bin bounds
    follow psroi_pooling_layer.cu:39-66 with C ``round``."""
    D, G = output_dim, group_size
    g = Graph("psroi")
    f32 = lambda v: g.const(np.float32(v))  # noqa: E731
    x64 = g.op("Cast", "x", to=TensorProto.DOUBLE)
    padded = g.op("Pad", x64, g.i64(0, 0, 1, 1, 0, 0, 0, 0))
    S = g.op("CumSum", g.op("CumSum", padded, g.i64(2)), g.i64(3))        # [N, C, H+1, W+1]
    H = g.op("Sub", g.dim(S, 2), g.i64(1))
    W = g.op("Sub", g.dim(S, 3), g.i64(1))
    rois = "rois"
    ss = f32(spatial_scale)
    b = g.op("Cast", g.col(rois, 0), to=I64)                                  # [R, 1]
    x0 = g.op("Mul", g.c_round(g.col(rois, 1)), ss)
    y0 = g.op("Mul", g.c_round(g.col(rois, 2)), ss)
    x1 = g.op("Mul", g.op("Add", g.c_round(g.col(rois, 3)), f32(1)), ss)
    y1 = g.op("Mul", g.op("Add", g.c_round(g.col(rois, 4)), f32(1)), ss)
    bw = g.op("Div", g.op("Max", g.op("Sub", x1, x0), f32(0.1)), f32(G))
    bh = g.op("Div", g.op("Max", g.op("Sub", y1, y0), f32(0.1)), f32(G))
    grid = g.const(np.arange(G, dtype=np.float32).reshape(1, G))
    grid1 = g.const(np.arange(1, G + 1, dtype=np.float32).reshape(1, G))

    def bounds(start, size, limit):
        lo = g.op("Cast", g.op("Floor", g.op("Add", g.op("Mul", grid, size), start)), to=I64)
        hi = g.op("Cast", g.op("Ceil", g.op("Add", g.op("Mul", grid1, size), start)), to=I64)
        zero = g.i64(0)
        return g.op("Min", g.op("Max", lo, zero), limit), g.op("Min", g.op("Max", hi, zero), limit)  # [R, G]

    hs, he = bounds(y0, bh, H)
    ws, we = bounds(x0, bw, W)
    chan = g.const(((np.arange(D)[:, None, None] * G + np.arange(G)[None, :, None]) * G + np.arange(G)[None, None, :]).astype(np.int64))
    shape = g.op("Concat", g.dim(rois, 0), g.i64(D, G, G), axis=0)           # [R, D, G, G]
    ex = lambda t, s: g.op("Unsqueeze", g.op("Expand", g.op("Reshape", t, g.i64(*s)), shape), g.i64(4))  # noqa: E731
    bi = ex(b, (-1, 1, 1, 1))
    ci = g.op("Unsqueeze", g.op("Expand", g.op("Unsqueeze", chan, g.i64(0)), shape), g.i64(4))

    def corner(hh, ww):
        idx = g.op("Concat", bi, ci, ex(hh, (-1, 1, G, 1)), ex(ww, (-1, 1, 1, G)), axis=4)
        return g.op("GatherND", S, idx)                                       # [R, D, G, G]

    total = g.op("Add", g.op("Sub", g.op("Sub", corner(he, we), corner(hs, we)), corner(he, ws)), corner(hs, ws))
    dh = g.op("Reshape", g.op("Sub", he, hs), g.i64(-1, 1, G, 1))
    dw = g.op("Reshape", g.op("Sub", we, ws), g.i64(-1, 1, 1, G))
    area = g.op("Cast", g.op("Mul", dh, dw), to=TensorProto.DOUBLE)
    empty = g.op("Or", g.op("LessOrEqual", dh, g.i64(0)), g.op("LessOrEqual", dw, g.i64(0)))
    avg = g.op("Div", total, g.op("Where", empty, g.const(1.0, np.float64), area))
    g.op("Cast", g.op("Where", empty, g.const(0.0, np.float64), avg), to=F, out=["y"])
    return g.model({"x": (F, ["N", D * G * G, "H", "W"]), "rois": (F, ["R", 5])}, {"y": ["R", D, G, G]})


# --------------------------------------------------------------------------------------
# YOLOv2 Reorg and Region
# --------------------------------------------------------------------------------------

def reorg(channels: int, height: int, width: int, stride: int) -> onnx.ModelProto:
    """Darknet's reorg as the ports run it: Reshape [N, C/s^2, H, s, W, s], Transpose
    [0, 3, 5, 1, 2, 4], Reshape [N, C*s^2, H/s, W/s] (batch copied with 0)."""
    s, C, H, W = stride, channels, height, width
    g = Graph("reorg")
    t = g.op("Transpose", g.op("Reshape", "x", g.i64(0, C // (s * s), H, s, W, s)), perm=[0, 3, 5, 1, 2, 4])
    g.op("Reshape", t, g.i64(0, C * s * s, H // s, W // s), out=["y"])
    return g.model({"x": (F, ["N", C, H, W])}, {"y": ["N", C * s * s, H // s, W // s]})


def region_darknet(num: int, classes: int, height: int, width: int, coords: int = 4) -> onnx.ModelProto:
    """The Intel port's RegionYolo (Darknet's activations in Darknet's layout): Reshape
    [N, A, 5+C, H, W]; Sigmoid on entries 0-1 and ``coords``; Softmax over the classes
    (axis 2); entries 2-3 unchanged; Concat; Reshape back to [N, A*(5+C), H, W]."""
    size = coords + 1 + classes
    g = Graph("region")
    r = g.op("Reshape", "x", g.i64(0, num, size, height, width))
    part = lambda a, b: g.op("Slice", r, g.i64(a), g.i64(b), g.i64(2))  # noqa: E731
    y = g.op("Concat", g.op("Sigmoid", part(0, 2)), part(2, coords), g.op("Sigmoid", part(coords, coords + 1)),
             g.op("Softmax", part(coords + 1, size), axis=2), axis=2)
    g.op("Reshape", y, g.i64(0, num * size, height, width), out=["y"])
    return g.model({"x": (F, ["N", num * size, height, width])}, {"y": ["N", num * size, height, width]})


def region_opencv(anchors: Sequence[float], classes: int, height: int, width: int, thresh=0.2, nms_threshold=0.4,
                  coords: int = 4) -> onnx.ModelProto:
    """Darknet's region layer with box decoding, in OpenCV 4's output layout (from an
    NCHW conv output): Transpose to NHWC, Reshape [N, H, W, A, 5+C]; x = (col +
    sigmoid) / W, y = (row + sigmoid) / H, w = exp * anchor_w / W, h = exp * anchor_h /
    H, obj = sigmoid, class = obj * softmax kept where > thresh; then a per-class
    NonMaxSuppression (score > thresh, IoU > nms_threshold suppresses) whose unselected
    class scores become 0; Reshape [N*H*W*A, 5+C]."""
    A = len(anchors) // 2
    size = coords + 1 + classes
    g = Graph("regiondec")
    f32 = lambda v: g.const(np.float32(v))  # noqa: E731
    r = g.op("Reshape", g.op("Transpose", "x", perm=[0, 2, 3, 1]), g.i64(0, height, width, A, size))
    e = lambda k: g.col(r, k)  # noqa: E731
    colg = g.const(np.arange(width, dtype=np.float32).reshape(1, 1, width, 1, 1))
    rowg = g.const(np.arange(height, dtype=np.float32).reshape(1, height, 1, 1, 1))
    aw = g.const(np.asarray(anchors[0::2], np.float32).reshape(1, 1, 1, A, 1))
    ah = g.const(np.asarray(anchors[1::2], np.float32).reshape(1, 1, 1, A, 1))
    bx = g.op("Div", g.op("Add", colg, g.op("Sigmoid", e(0))), f32(width))
    by = g.op("Div", g.op("Add", rowg, g.op("Sigmoid", e(1))), f32(height))
    bw = g.op("Div", g.op("Mul", g.op("Exp", e(2)), aw), f32(width))
    bh = g.op("Div", g.op("Mul", g.op("Exp", e(3)), ah), f32(height))
    obj = g.op("Sigmoid", e(coords))
    probs = g.op("Mul", obj, g.op("Softmax", g.op("Slice", r, g.i64(coords + 1), g.i64(size), g.i64(4)), axis=4))
    probs = g.op("Where", g.op("Greater", probs, f32(thresh)), probs, f32(0))
    flat = lambda t, k: g.op("Reshape", t, g.i64(0, -1, k))  # noqa: E731
    probs = flat(probs, classes)                                                   # [N, HWA, C]
    if nms_threshold > 0:
        half_w, half_h = g.op("Mul", bw, f32(0.5)), g.op("Mul", bh, f32(0.5))
        corners = g.op("Concat", g.op("Sub", bx, half_w), g.op("Sub", by, half_h), g.op("Add", bx, half_w), g.op("Add", by, half_h), axis=4)
        scores = g.op("Transpose", probs, perm=[0, 2, 1])                          # [N, C, HWA]
        sel = g.op("NonMaxSuppression", flat(corners, 4), scores, g.i64(height * width * A), f32(nms_threshold), f32(thresh))
        mark = g.op("ScatterND", g.op("Mul", scores, f32(0)), sel, g.op("Expand", f32(1), g.op("Slice", g.op("Shape", sel), g.i64(0), g.i64(1))))
        probs = g.op("Mul", probs, g.op("Transpose", mark, perm=[0, 2, 1]))
    out = g.op("Concat", flat(bx, 1), flat(by, 1), flat(bw, 1), flat(bh, 1), flat(obj, 1), probs, axis=2)
    g.op("Reshape", out, g.i64(-1, size), out=["y"])
    return g.model({"x": (F, ["N", A * size, height, width])}, {"y": ["M", size]})


# --------------------------------------------------------------------------------------
# MVN, Interp with pads
# --------------------------------------------------------------------------------------

def mvn(normalize_variance=True, across_channels=False, eps=1e-9) -> onnx.ModelProto:
    """BVLC MVN: ``d = x - ReduceMean(x)``; with normalize_variance ``d / (Sqrt(ReduceMean(
    d*d)) + eps)``, over axes [2, 3] or [1, 2, 3] (ONNX MeanVarianceNormalization has a
    fixed epsilon and is not used)."""
    g = Graph("mvn")
    axes = [1, 2, 3] if across_channels else [2, 3]
    d = g.op("Sub", "x", g.op("ReduceMean", "x", axes=axes, keepdims=1))
    if normalize_variance:
        std = g.op("Sqrt", g.op("ReduceMean", g.op("Mul", d, d), axes=axes, keepdims=1))
        d = g.op("Div", d, g.op("Add", std, g.const(np.float32(eps))))
    g.op("Identity", d, out=["y"])
    return g.model({"x": (F, ["N", "C", "H", "W"])}, {"y": ["N", "C", "H", "W"]})


def interp(height_in: int, width_in: int, out_hw: Tuple[int, int], pad_beg: int = 0, pad_end: int = 0) -> onnx.ModelProto:
    """PSPNet Interp with negative pads: ``Slice`` the crop (``-pad_beg`` from the start,
    ``-pad_end`` from the end of H and W), then the existing lowering's ``Resize(linear,
    align_corners, scales = (out + 0.5) / in)``."""
    g = Graph("interp")
    hi, wi = height_in + pad_beg + pad_end, width_in + pad_beg + pad_end
    x = "x"
    if pad_beg or pad_end:
        x = g.op("Slice", x, g.i64(-pad_beg, -pad_beg), g.i64(-pad_beg + hi, -pad_beg + wi), g.i64(2, 3))
    ho, wo = out_hw
    scales = g.const(np.array([1, 1, (ho + 0.5) / hi, (wo + 0.5) / wi], np.float32))
    g.op("Resize", x, "", scales, mode="linear", coordinate_transformation_mode="align_corners", out=["y"])
    return g.model({"x": (F, ["N", "C", height_in, width_in])}, {"y": ["N", "C", ho, wo]})


# --------------------------------------------------------------------------------------
# LSTM and RNN
# --------------------------------------------------------------------------------------

def _ifog_to_iofc(w: np.ndarray) -> np.ndarray:
    """Caffe's gate blocks i, f, o, g (rows) to ONNX's i, o, f, c."""
    H = w.shape[0] // 4
    i, f, o, c = (w[k * H : (k + 1) * H] for k in range(4))
    return np.concatenate([i, o, f, c])


def lstm_op(W_xc, b_c, W_hc, *, W_xc_static=None, expose_hidden=False, x_axes=None) -> onnx.ModelProto:
    """The ONNX LSTM op: ``W = [reorder(W_xc) | reorder(W_xc_static)]``, ``R =
    reorder(W_hc)``, ``B = [reorder(b_c), 0]``; the static input joins X as extra
    features repeated over T; ``initial_h/c`` = h0/c0 with expose_hidden. Equals Caffe
    when every ``cont[t]`` is 1 for t >= 1 (and for t = 0 too when h0/c0 are exposed);
    ``cont`` is not read. Outputs ``h`` (Squeeze of Y), ``hT``, ``cT``."""
    H = W_hc.shape[1]
    g = Graph("lstm")
    Wx = W_xc if W_xc_static is None else np.concatenate([W_xc, W_xc_static], axis=1)
    D = W_xc.shape[1]
    x = g.op("Reshape", "x", g.i64(0, 0, D))
    inputs = {"x": (F, ["T", "N", *(x_axes or [D])]), "cont": (F, ["T", "N"])}
    if W_xc_static is not None:
        st = g.op("Expand", g.op("Unsqueeze", "x_static", g.i64(0)), g.op("Concat", g.dim(x, 0), g.dim(x, 1), g.i64(W_xc_static.shape[1]), axis=0))
        x = g.op("Concat", x, st, axis=2)
        inputs["x_static"] = (F, ["N", W_xc_static.shape[1]])
    W = g.const(_ifog_to_iofc(Wx)[None])
    R = g.const(_ifog_to_iofc(W_hc)[None])
    B = g.const(np.concatenate([_ifog_to_iofc(b_c), np.zeros(4 * H, np.float32)])[None])
    ins = [x, W, R, B, ""]
    if expose_hidden:
        ins += ["h0", "c0"]
        inputs.update(h0=(F, [1, "N", H]), c0=(F, [1, "N", H]))
    y, yh, yc = g.op("LSTM", *ins, hidden_size=H, outputs=3)
    g.op("Squeeze", y, g.i64(1), out=["h"])
    g.op("Identity", yh, out=["hT"])
    g.op("Identity", yc, out=["cT"])
    return g.model(inputs, {"h": ["T", "N", H], "hT": [1, "N", H], "cT": [1, "N", H]})


def lstm_scan(W_xc, b_c, W_hc, *, W_xc_static=None, expose_hidden=False, x_axes=None) -> onnx.ModelProto:
    """Caffe's LSTM exactly, for any ``cont``: the input projection ``X W_xc^T + b_c [+
    x_static W_xc_static^T]`` for all steps outside the loop, then a ``Scan`` over (xw_t,
    cont_t) with state (h, c): ``g = xw_t + (cont_t * h) W_hc^T``, gates in Caffe's
    order i, f, o, g (no reorder), ``f = cont_t * sigmoid``, ``c = f c + i g``, ``h = o
    tanh(c)``. Initial state zeros ``[N, H]`` or h0/c0."""
    H = W_hc.shape[1]
    D = W_xc.shape[1]
    g = Graph("lstmscan")
    x = g.op("Reshape", "x", g.i64(0, 0, D))
    xw = g.op("Add", g.op("MatMul", x, g.const(W_xc.T.copy())), g.const(b_c))                  # [T, N, 4H]
    inputs = {"x": (F, ["T", "N", *(x_axes or [D])]), "cont": (F, ["T", "N"])}
    if W_xc_static is not None:
        xw = g.op("Add", xw, g.op("Unsqueeze", g.op("MatMul", "x_static", g.const(W_xc_static.T.copy())), g.i64(0)))
        inputs["x_static"] = (F, ["N", W_xc_static.shape[1]])
    if expose_hidden:
        h0 = g.op("Squeeze", "h0", g.i64(0))
        c0 = g.op("Squeeze", "c0", g.i64(0))
        inputs.update(h0=(F, [1, "N", H]), c0=(F, [1, "N", H]))
    else:
        h0 = g.op("Expand", g.const(np.float32(0)), g.op("Concat", g.dim(x, 1), g.i64(H), axis=0))
        c0 = h0
    # Scan body: (h, c, xw_t, cont_t) -> (h', c', h')
    b = Graph("body")
    ct = b.op("Unsqueeze", "cont_t", b.i64(1))
    gates = b.op("Add", "xw_t", b.op("MatMul", b.op("Mul", "h_in", ct), b.const(W_hc.T.copy())))
    i, f, o, gg = b.op("Split", gates, b.i64(H, H, H, H), axis=1, outputs=4)
    i = b.op("Sigmoid", i)
    f = b.op("Mul", ct, b.op("Sigmoid", f))
    o = b.op("Sigmoid", o)
    gg = b.op("Tanh", gg)
    c = b.op("Add", b.op("Mul", f, "c_in"), b.op("Mul", i, gg), out=["c_out"])
    b.op("Mul", o, b.op("Tanh", c), out=["h_out"])
    b.op("Identity", "h_out", out=["h_scan"])
    vi = lambda n, s: helper.make_tensor_value_info(n, F, s)  # noqa: E731
    body = b.graph([vi("h_in", ["N", H]), vi("c_in", ["N", H]), vi("xw_t", ["N", 4 * H]), vi("cont_t", ["N"])],
                   [vi("h_out", ["N", H]), vi("c_out", ["N", H]), vi("h_scan", ["N", H])], name="lstm_step")
    hT, cT, hs = g.op("Scan", h0, c0, xw, "cont", body=body, num_scan_inputs=2, outputs=3)
    g.op("Identity", hs, out=["h"])
    g.op("Unsqueeze", hT, g.i64(0), out=["hT"])
    g.op("Unsqueeze", cT, g.i64(0), out=["cT"])
    return g.model(inputs, {"h": ["T", "N", H], "hT": [1, "N", H], "cT": [1, "N", H]})


def rnn_op(W_xh, b_h, W_hh, W_ho, b_o, *, W_xh_static=None, expose_hidden=False, x_axes=None) -> onnx.ModelProto:
    """The ONNX RNN op (tanh): ``W = [W_xh | W_xh_static]``, ``R = W_hh``, ``B = [b_h, 0]``,
    then ``o = Tanh(Y W_ho^T + b_o)``; valid under the same cont condition as lstm_op."""
    H = W_hh.shape[0]
    D = W_xh.shape[1]
    g = Graph("rnn")
    x = g.op("Reshape", "x", g.i64(0, 0, D))
    inputs = {"x": (F, ["T", "N", *(x_axes or [D])]), "cont": (F, ["T", "N"])}
    Wx = W_xh
    if W_xh_static is not None:
        st = g.op("Expand", g.op("Unsqueeze", "x_static", g.i64(0)), g.op("Concat", g.dim(x, 0), g.dim(x, 1), g.i64(W_xh_static.shape[1]), axis=0))
        x = g.op("Concat", x, st, axis=2)
        Wx = np.concatenate([W_xh, W_xh_static], axis=1)
        inputs["x_static"] = (F, ["N", W_xh_static.shape[1]])
    ins = [x, g.const(Wx[None]), g.const(W_hh[None]), g.const(np.concatenate([b_h, np.zeros_like(b_h)])[None]), ""]
    if expose_hidden:
        ins.append("h0")
        inputs["h0"] = (F, [1, "N", H])
    y, yh = g.op("RNN", *ins, hidden_size=H, activations=["Tanh"], outputs=2)
    h = g.op("Squeeze", y, g.i64(1))
    g.op("Tanh", g.op("Add", g.op("MatMul", h, g.const(W_ho.T.copy())), g.const(b_o)), out=["o"])
    g.op("Identity", yh, out=["hT"])
    return g.model(inputs, {"o": ["T", "N", H], "hT": [1, "N", H]})


def rnn_scan(W_xh, b_h, W_hh, W_ho, b_o, *, W_xh_static=None, expose_hidden=False, x_axes=None) -> onnx.ModelProto:
    """Caffe's RNN exactly for any cont: ``Scan`` with ``h = tanh(xw_t + (cont_t * h)
    W_hh^T)``, then ``o = Tanh(h W_ho^T + b_o)`` on the stacked h outside the loop."""
    H = W_hh.shape[0]
    D = W_xh.shape[1]
    g = Graph("rnnscan")
    x = g.op("Reshape", "x", g.i64(0, 0, D))
    xw = g.op("Add", g.op("MatMul", x, g.const(W_xh.T.copy())), g.const(b_h))
    inputs = {"x": (F, ["T", "N", *(x_axes or [D])]), "cont": (F, ["T", "N"])}
    if W_xh_static is not None:
        xw = g.op("Add", xw, g.op("Unsqueeze", g.op("MatMul", "x_static", g.const(W_xh_static.T.copy())), g.i64(0)))
        inputs["x_static"] = (F, ["N", W_xh_static.shape[1]])
    if expose_hidden:
        h0 = g.op("Squeeze", "h0", g.i64(0))
        inputs["h0"] = (F, [1, "N", H])
    else:
        h0 = g.op("Expand", g.const(np.float32(0)), g.op("Concat", g.dim(x, 1), g.i64(H), axis=0))
    b = Graph("body")
    ct = b.op("Unsqueeze", "cont_t", b.i64(1))
    b.op("Tanh", b.op("Add", "xw_t", b.op("MatMul", b.op("Mul", "h_in", ct), b.const(W_hh.T.copy()))), out=["h_out"])
    b.op("Identity", "h_out", out=["h_scan"])
    vi = lambda n, s: helper.make_tensor_value_info(n, F, s)  # noqa: E731
    body = b.graph([vi("h_in", ["N", H]), vi("xw_t", ["N", H]), vi("cont_t", ["N"])], [vi("h_out", ["N", H]), vi("h_scan", ["N", H])], name="rnn_step")
    hT, hs = g.op("Scan", h0, xw, "cont", body=body, num_scan_inputs=2, outputs=2)
    g.op("Tanh", g.op("Add", g.op("MatMul", hs, g.const(W_ho.T.copy())), g.const(b_o)), out=["o"])
    g.op("Unsqueeze", hT, g.i64(0), out=["hT"])
    return g.model(inputs, {"o": ["T", "N", H], "hT": [1, "N", H]})
