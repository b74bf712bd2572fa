//! Faster R-CNN and R-FCN layers: the RPN proposal layer in its two forms (OpenCV's C++
//! `Proposal` with `proposal_param`, and py-faster-rcnn's Python `ProposalLayer`, whose
//! `param_str` is parsed here), `ROIPooling` (rbgirshick/caffe-fast-rcnn) and
//! `PSROIPooling` (daijifeng001/caffe-rfcn): their parameters and Caffe's shape rules.
//!
//! The number of RoIs a proposal layer outputs depends on the data (boxes under the
//! minimum size are dropped, NMS removes overlaps); its top's inferred shape is the
//! bound `[R, 5]`, R = min(post-NMS top N, pre-NMS top N, anchors × cells), and every
//! shape computed from it holds that R (see `docs/caffe-layers.md`).

use crate::net::LayerDef;

/// py-faster-rcnn's test-time RPN constants (`lib/fast_rcnn/config.py:157-164`,
/// `__C.TEST.RPN_*`), which its Python `ProposalLayer` reads from the global config:
/// pre-NMS top N, post-NMS top N, NMS threshold, minimum box size (pixels of the input
/// image, times `im_info[2]`).
///
/// ```
/// use tensorfmt_caffe::RPN_TEST;
/// assert_eq!((RPN_TEST.pre_nms_top_n, RPN_TEST.post_nms_top_n), (6000, 300));
/// assert_eq!((RPN_TEST.nms_thresh, RPN_TEST.min_size), (0.7, 16.0));
/// ```
pub const RPN_TEST: RpnConstants = RpnConstants {
    pre_nms_top_n: 6000,
    post_nms_top_n: 300,
    nms_thresh: 0.7,
    min_size: 16.0,
};

/// The test-time constants of a region proposal layer (see [`RPN_TEST`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RpnConstants {
    /// Proposals kept (best scores first) before NMS; 0 or less keeps all.
    pub pre_nms_top_n: i64,
    /// Proposals kept after NMS; 0 or less keeps all.
    pub post_nms_top_n: i64,
    /// NMS IoU threshold (a box overlapping a kept one by more is suppressed).
    pub nms_thresh: f32,
    /// Boxes narrower or shorter than `min_size × im_info[2]` pixels are dropped.
    pub min_size: f32,
}

/// Which implementation a proposal layer names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProposalKind {
    /// OpenCV's C++ `Proposal` (`proposal_param` of `opencv-caffe.proto`).
    Cpp,
    /// py-faster-rcnn's `type: "Python"` layer `rpn.proposal_layer.ProposalLayer`.
    Python,
}

/// A region proposal layer's parameters, from `proposal_param` (C++) or from
/// `python_param.param_str` and [`RPN_TEST`] (Python).
///
/// ```
/// use tensorfmt_caffe::{parse_net, ProposalParams, Schema};
/// let net = parse_net("input: 'c' input_shape { dim: 1 dim: 18 dim: 4 dim: 4 } \
///     input: 'b' input_shape { dim: 1 dim: 36 dim: 4 dim: 4 } input: 'i' input_shape { dim: 1 dim: 3 } \
///     layer { name: 'p' type: 'Python' bottom: 'c' bottom: 'b' bottom: 'i' top: 'rois' \
///       python_param { module: 'rpn.proposal_layer' layer: 'ProposalLayer' param_str: \"'feat_stride': 16\" } }",
///     Schema::builtin(), &Default::default())?;
/// let p = ProposalParams::from_layer(&net.layers[0]).unwrap().unwrap();
/// assert_eq!((p.feat_stride, p.scales.as_slice(), p.rpn.post_nms_top_n), (16, &[8.0, 16.0, 32.0][..], 300));
/// # Ok::<(), tensorfmt_caffe::CaffeError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ProposalParams {
    /// C++ or Python.
    pub kind: ProposalKind,
    /// Pixels of the input image per feature-map cell.
    pub feat_stride: u32,
    /// Side of the reference anchor window (16 for the Python layer).
    pub base_size: u32,
    /// Anchor scales (py-faster-rcnn's default 8, 16, 32).
    pub scales: Vec<f64>,
    /// Anchor aspect ratios h/w (default 0.5, 1, 2).
    pub ratios: Vec<f64>,
    /// Pre/post-NMS top N, NMS threshold, minimum size.
    pub rpn: RpnConstants,
}

/// py-faster-rcnn's default anchor scales and ratios (`generate_anchors.py`).
const DEFAULT_SCALES: [f64; 3] = [8.0, 16.0, 32.0];
const DEFAULT_RATIOS: [f64; 3] = [0.5, 1.0, 2.0];

/// Whether a `type: "Python"` layer is py-faster-rcnn's proposal layer: `layer:
/// "ProposalLayer"` in a module whose last component is `proposal_layer`
/// (`rpn.proposal_layer` in py-faster-rcnn and py-R-FCN).
pub fn is_python_proposal(l: &LayerDef) -> bool {
    let Some(p) = &l.param.python_param else {
        return false;
    };
    p.layer() == "ProposalLayer" && p.module().rsplit('.').next() == Some("proposal_layer")
}

/// `module.layer` of a Python layer, for messages.
pub fn python_layer_name(l: &LayerDef) -> String {
    match &l.param.python_param {
        Some(p) => format!("{}.{}", p.module(), p.layer()),
        None => "(no python_param)".into(),
    }
}

impl ProposalParams {
    /// The parameters of a `Proposal` layer or of py-faster-rcnn's Python proposal
    /// layer; `Ok(None)` for any other layer. Errors name the bad value.
    pub fn from_layer(l: &LayerDef) -> Result<Option<ProposalParams>, String> {
        let params = match l.kind.as_str() {
            "Proposal" => {
                let p = l.param.proposal_param.clone().unwrap_or_default();
                ProposalParams {
                    kind: ProposalKind::Cpp,
                    feat_stride: p.feat_stride(),
                    base_size: p.base_size(),
                    scales: if p.scale.is_empty() {
                        DEFAULT_SCALES.to_vec()
                    } else {
                        p.scale.iter().map(|&v| f64::from(v)).collect()
                    },
                    ratios: if p.ratio.is_empty() {
                        DEFAULT_RATIOS.to_vec()
                    } else {
                        p.ratio.iter().map(|&v| f64::from(v)).collect()
                    },
                    rpn: RpnConstants {
                        pre_nms_top_n: i64::from(p.pre_nms_topn()),
                        post_nms_top_n: i64::from(p.post_nms_topn()),
                        nms_thresh: p.nms_thresh(),
                        min_size: p.min_size() as f32,
                    },
                }
            }
            "Python" if is_python_proposal(l) => {
                let s = l
                    .param
                    .python_param
                    .as_ref()
                    .map(|p| p.param_str())
                    .unwrap_or_default();
                python_proposal(s)?
            }
            _ => return Ok(None),
        };
        params.check()?;
        Ok(Some(params))
    }

    /// Anchors per feature-map cell (`ratios × scales`).
    pub fn num_anchors(&self) -> usize {
        self.ratios.len() * self.scales.len()
    }

    /// The most rows the layer can output for `cells` feature-map cells: the bound its
    /// top's inferred shape holds.
    pub fn max_rows(&self, cells: usize) -> usize {
        let mut r = cells.saturating_mul(self.num_anchors());
        for n in [self.rpn.pre_nms_top_n, self.rpn.post_nms_top_n] {
            if n > 0 {
                r = r.min(usize::try_from(n).unwrap_or(usize::MAX));
            }
        }
        r
    }

    /// Checks values the lowering and the original cannot use.
    pub fn check(&self) -> Result<(), String> {
        if self.feat_stride == 0 {
            return Err("feat_stride must be positive".into());
        }
        if self.base_size == 0 {
            return Err("base_size must be positive".into());
        }
        for (what, v) in [("scale", &self.scales), ("ratio", &self.ratios)] {
            if v.is_empty() {
                return Err(format!("no {what}s"));
            }
            if let Some(x) = v.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
                return Err(format!("{what} {x} must be a positive number"));
            }
        }
        let r = &self.rpn;
        if !(0.0..=1.0).contains(&r.nms_thresh) {
            return Err(format!("nms_thresh {} must lie in [0, 1]", r.nms_thresh));
        }
        if !(r.min_size.is_finite() && r.min_size >= 0.0) {
            return Err(format!("min_size {} must be a number >= 0", r.min_size));
        }
        Ok(())
    }
}

/// The Python layer's parameters: `param_str` (feat_stride, scales and, as an
/// extension, ratios) and [`RPN_TEST`].
fn python_proposal(param_str: &str) -> Result<ProposalParams, String> {
    let entries = parse_param_str(param_str)?;
    let mut feat_stride = None;
    let mut scales = DEFAULT_SCALES.to_vec();
    let mut ratios = DEFAULT_RATIOS.to_vec();
    for (k, v) in entries {
        match k.as_str() {
            "feat_stride" => {
                let s = match v {
                    Literal::Int(i) if i > 0 && i <= i64::from(u32::MAX) => i as u32,
                    // `16.0`: the original multiplies with it (proposal_layer.py:
                    // shift_x = np.arange(0, width) * self._feat_stride), so an integral
                    // float strides as its integer does.
                    Literal::Float(f) if f >= 1.0 && f.fract() == 0.0 && f <= f64::from(u32::MAX) => {
                        f as u32
                    }
                    v => {
                        return Err(format!(
                            "param_str: 'feat_stride' must be a positive whole number, got {v}"
                        ))
                    }
                };
                feat_stride = Some(s);
            }
            "scales" | "ratios" => {
                let Literal::Seq(items) = v else {
                    return Err(format!(
                        "param_str: {k:?} must be a list or tuple of numbers, got {v}"
                    ));
                };
                let nums = items
                    .iter()
                    .map(|x| match x {
                        Literal::Int(i) => Ok(*i as f64),
                        Literal::Float(f) => Ok(*f),
                        x => Err(format!("param_str: {k:?} holds {x}, not a number")),
                    })
                    .collect::<Result<Vec<f64>, String>>()?;
                if k == "scales" {
                    scales = nums;
                } else {
                    ratios = nums;
                }
            }
            other => {
                return Err(format!(
                    "param_str key {other:?} is not a ProposalLayer parameter (feat_stride, scales, ratios; \
                     the RPN constants are options: --rpn / rpn=)"
                ))
            }
        }
    }
    let feat_stride =
        feat_stride.ok_or("param_str has no 'feat_stride' (ProposalLayer requires it)")?;
    Ok(ProposalParams {
        kind: ProposalKind::Python,
        feat_stride,
        base_size: 16,
        scales,
        ratios,
        rpn: RPN_TEST,
    })
}

/// A Python literal value of a `param_str`.
#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    None,
    Seq(Vec<Literal>),
}

impl std::fmt::Display for Literal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Literal::Int(i) => write!(f, "{i}"),
            // As Python prints it: 16.0, not 16.
            Literal::Float(x) => write!(f, "{x:?}"),
            Literal::Str(s) => write!(f, "{s:?}"),
            Literal::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            Literal::None => write!(f, "None"),
            Literal::Seq(v) => {
                write!(f, "[")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
        }
    }
}

/// Deepest nesting of lists a `param_str` may use.
const MAX_DEPTH: usize = 16;

/// Parses a `param_str` as py-faster-rcnn writes it: a Python dict literal whose braces
/// may be left out (`"'feat_stride': 16"`), string keys, values numbers, strings,
/// `True`/`False`/`None` or lists/tuples of them. The original reads it with
/// `yaml.load`, so entries may also be separated by newlines and a list may carry
/// YAML's `!!python/tuple` tag, as py-faster-rcnn's COCO nets write it
/// (`"'feat_stride': 16 \n'scales': !!python/tuple [4, 8, 16, 32]"`) and keys may be
/// YAML's unquoted names (`"feat_stride: 16"`). Anything else is an error saying where.
fn parse_param_str(s: &str) -> Result<Vec<(String, Literal)>, String> {
    let mut p = Parser {
        s: s.as_bytes(),
        pos: 0,
        text: s,
    };
    p.skip_ws(true);
    let braced = p.eat(b'{');
    let mut out = Vec::new();
    loop {
        p.skip_ws(true);
        match p.peek() {
            None if !braced => break,
            Some(b'}') if braced => {
                p.pos += 1;
                p.skip_ws(true);
                if p.peek().is_some() {
                    return Err(p.err("text after the closing brace"));
                }
                break;
            }
            None => return Err(p.err("no closing brace")),
            _ => {}
        }
        let key = match p.peek() {
            // YAML's plain scalar key (`feat_stride: 16`), which yaml.load reads as a
            // string: the original accepts it.
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => p.name().to_string(),
            _ => match p.value(0)? {
                Literal::Str(k) => k,
                v => return Err(p.err(&format!("dict keys must be strings, got {v}"))),
            },
        };
        p.skip_ws(false);
        if !p.eat(b':') {
            return Err(p.err("expected ':' after a key"));
        }
        p.skip_ws(false);
        let value = p.value(0)?;
        // Python keeps the last value of a repeated key.
        out.retain(|(k, _): &(String, Literal)| k != &key);
        out.push((key, value));
        p.skip_ws(false);
        match p.peek() {
            Some(b',') | Some(b'\n') => p.pos += 1,
            Some(b'}') if braced => {}
            None if !braced => {}
            None => return Err(p.err("no closing brace")),
            _ => return Err(p.err("expected ',' between entries")),
        }
    }
    Ok(out)
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    text: &'a str,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Skips spaces and tabs (and newlines when `newlines`: between entries a newline
    /// separates them, as a comma does).
    fn skip_ws(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            if c == b' ' || c == b'\t' || c == b'\r' || (newlines && c == b'\n') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    /// A name (`[A-Za-z_][A-Za-z0-9_]*`) from here: `True`/`None` as a value, a YAML
    /// plain key.
    fn name(&mut self) -> &'a str {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            self.pos += 1;
        }
        &self.text[start..self.pos]
    }

    fn err(&self, what: &str) -> String {
        format!(
            "param_str {:?} is not a Python dict literal: {what} at character {}",
            self.text, self.pos
        )
    }

    fn value(&mut self, depth: usize) -> Result<Literal, String> {
        if depth > MAX_DEPTH {
            return Err(self.err("lists nested too deeply"));
        }
        match self.peek() {
            Some(q @ (b'\'' | b'"')) => self.string(q),
            Some(b'[') | Some(b'(') => self.seq(depth),
            Some(b'!') => {
                let tag = b"!!python/tuple";
                if self.s[self.pos..].starts_with(tag) {
                    self.pos += tag.len();
                    self.skip_ws(false);
                    if self.peek() == Some(b'[') {
                        return self.seq(depth);
                    }
                }
                Err(self.err("unknown tag (only !!python/tuple [...] is read)"))
            }
            Some(c) if c.is_ascii_digit() || c == b'-' || c == b'+' || c == b'.' => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let start = self.pos;
                match self.name() {
                    "True" => Ok(Literal::Bool(true)),
                    "False" => Ok(Literal::Bool(false)),
                    "None" => Ok(Literal::None),
                    name => {
                        self.pos = start;
                        Err(self.err(&format!("{name:?} is a name, not a literal")))
                    }
                }
            }
            _ => Err(self.err("expected a value")),
        }
    }

    fn string(&mut self, quote: u8) -> Result<Literal, String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.err("unterminated string"));
            };
            self.pos += 1;
            match c {
                c if c == quote => return Ok(Literal::Str(out)),
                b'\\' => {
                    let e = self.peek().ok_or_else(|| self.err("unterminated string"))?;
                    self.pos += 1;
                    out.push(match e {
                        b'n' => '\n',
                        b't' => '\t',
                        b'\\' | b'\'' | b'"' => e as char,
                        _ => return Err(self.err("unknown escape in a string")),
                    });
                }
                b'\n' => return Err(self.err("newline in a string")),
                _ => {
                    // Copy the whole UTF-8 character.
                    let start = self.pos - 1;
                    let len = self.text[start..].chars().next().map_or(1, char::len_utf8);
                    out.push_str(&self.text[start..start + len]);
                    self.pos = start + len;
                }
            }
        }
    }

    fn seq(&mut self, depth: usize) -> Result<Literal, String> {
        let close = if self.peek() == Some(b'[') {
            b']'
        } else {
            b')'
        };
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws(true);
            if self.eat(close) {
                return Ok(Literal::Seq(items));
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws(true);
            if self.eat(b',') {
                continue;
            }
            if self.eat(close) {
                return Ok(Literal::Seq(items));
            }
            return Err(self.err("expected ',' or the end of the list"));
        }
    }

    fn number(&mut self) -> Result<Literal, String> {
        let start = self.pos;
        if matches!(self.peek(), Some(b'-' | b'+')) {
            self.pos += 1;
        }
        let mut float = false;
        while let Some(c) = self.peek() {
            match c {
                b'0'..=b'9' => {}
                b'.' => float = true,
                b'e' | b'E' => {
                    float = true;
                    if matches!(self.s.get(self.pos + 1), Some(b'-' | b'+')) {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
            self.pos += 1;
        }
        let t = &self.text[start..self.pos];
        let bad = |p: &mut Self| {
            p.pos = start;
            Err(p.err(&format!("{t:?} is not a number")))
        };
        if float {
            match t.parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(Literal::Float(f)),
                _ => bad(self),
            }
        } else {
            match t.parse::<i64>() {
                Ok(i) => Ok(Literal::Int(i)),
                Err(_) => bad(self),
            }
        }
    }
}

type Shapes = (Vec<Vec<usize>>, Vec<Vec<usize>>);

fn per_image(shape: &[usize]) -> usize {
    shape.iter().skip(1).product()
}

/// Caffe's shape rule of a proposal layer (C++ or Python): bottoms scores `[1, 2A, H,
/// W]`, deltas `[1, 4A, H, W]`, im_info (3 values: H, W, scale); tops rois `[R, 5]`
/// and optionally scores `[R, 1]`, R the bound of [`ProposalParams::max_rows`].
pub(crate) fn proposal_shapes(
    p: &ProposalParams,
    bottoms: &[Vec<usize>],
    n_tops: usize,
) -> Result<Shapes, String> {
    if bottoms.len() != 3 {
        return Err(format!(
            "takes 3 bottoms (scores, box deltas, im_info), got {}",
            bottoms.len()
        ));
    }
    if !(1..=2).contains(&n_tops) {
        return Err(format!("takes 1 or 2 tops (rois, scores), got {n_tops}"));
    }
    let (cls, deltas, info) = (&bottoms[0], &bottoms[1], &bottoms[2]);
    let a = p.num_anchors();
    if cls.len() != 4 || deltas.len() != 4 {
        return Err(format!(
            "scores {cls:?} and box deltas {deltas:?} must have 4 axes"
        ));
    }
    if cls[0] != 1 || deltas[0] != 1 || info.first() != Some(&1) {
        return Err(format!(
            "takes a batch of 1 image (py-faster-rcnn: \"Only single item batches are supported\"), got scores {cls:?}, deltas {deltas:?}, im_info {info:?}"
        ));
    }
    if cls[1] != 2 * a {
        return Err(format!(
            "scores have {} channels, {} anchors ({} ratios × {} scales) need {} (background and foreground per anchor)",
            cls[1],
            a,
            p.ratios.len(),
            p.scales.len(),
            2 * a
        ));
    }
    if deltas[1] != 4 * a {
        return Err(format!(
            "box deltas have {} channels, {a} anchors need {} (scores have {})",
            deltas[1],
            4 * a,
            cls[1]
        ));
    }
    if deltas[2..] != cls[2..] {
        return Err(format!(
            "box deltas are {}x{}, scores {}x{}",
            deltas[2], deltas[3], cls[2], cls[3]
        ));
    }
    if per_image(info) < 3 {
        return Err(format!(
            "im_info {info:?} has {} values, needs 3 (image height, width, scale)",
            per_image(info)
        ));
    }
    let r = p.max_rows(cls[2] * cls[3]).max(1);
    let mut tops = vec![vec![r, 5]];
    if n_tops == 2 {
        tops.push(vec![r, 1]);
    }
    Ok((tops, vec![]))
}

/// The RoIs bottom `[R, 5]` (or `[R, 5, 1, 1]`): R, or an error naming the width.
fn rois_rows(rois: &[usize], layer: &str) -> Result<usize, String> {
    let width = per_image(rois);
    if rois.len() < 2 || width != 5 {
        return Err(format!(
            "the RoIs bottom {rois:?} has {width} values per RoI, {layer} needs 5 (batch index, x1, y1, x2, y2)"
        ));
    }
    Ok(rois[0])
}

/// caffe-fast-rcnn `ROIPoolingLayer::LayerSetUp`/`Reshape`: `[R, C, pooled_h,
/// pooled_w]`.
pub(crate) fn roi_pooling_shapes(l: &LayerDef, bottoms: &[Vec<usize>]) -> Result<Shapes, String> {
    if bottoms.len() != 2 {
        return Err(format!(
            "takes 2 bottoms (features, rois), got {}",
            bottoms.len()
        ));
    }
    let p = l.param.roi_pooling_param.unwrap_or_default();
    if p.pooled_h() == 0 || p.pooled_w() == 0 {
        return Err(format!(
            "pooled_h {} and pooled_w {} must be > 0",
            p.pooled_h(),
            p.pooled_w()
        ));
    }
    if !(p.spatial_scale().is_finite() && p.spatial_scale() > 0.0) {
        return Err(format!(
            "spatial_scale {} must be positive",
            p.spatial_scale()
        ));
    }
    let x = &bottoms[0];
    if x.len() != 4 {
        return Err(format!("features {x:?} must have 4 axes"));
    }
    let r = rois_rows(&bottoms[1], "ROIPooling")?;
    Ok((
        vec![vec![r, x[1], p.pooled_h() as usize, p.pooled_w() as usize]],
        vec![],
    ))
}

/// caffe-rfcn `PSROIPoolingLayer::LayerSetUp`/`Reshape`: `[R, output_dim, G, G]`, the
/// input holding `output_dim × G²` channels.
pub(crate) fn psroi_pooling_shapes(l: &LayerDef, bottoms: &[Vec<usize>]) -> Result<Shapes, String> {
    if bottoms.len() != 2 {
        return Err(format!(
            "takes 2 bottoms (score maps, rois), got {}",
            bottoms.len()
        ));
    }
    let p = l.param.psroi_pooling_param.unwrap_or_default();
    let (Some(d), Some(g), Some(s)) = (p.output_dim, p.group_size, p.spatial_scale) else {
        return Err(
            "output_dim, group_size and spatial_scale are required (caffe-rfcn declares them required)"
                .into(),
        );
    };
    if d <= 0 || g <= 0 {
        return Err(format!("output_dim {d} and group_size {g} must be > 0"));
    }
    if !(s.is_finite() && s > 0.0) {
        return Err(format!("spatial_scale {s} must be positive"));
    }
    let (d, g) = (d as usize, g as usize);
    let x = &bottoms[0];
    if x.len() != 4 {
        return Err(format!("score maps {x:?} must have 4 axes"));
    }
    let need = d.checked_mul(g).and_then(|v| v.checked_mul(g));
    if need != Some(x[1]) {
        return Err(format!(
            "input channels {} != output_dim {d} × group_size² {}",
            x[1],
            g.saturating_mul(g)
        ));
    }
    let r = rois_rows(&bottoms[1], "PSROIPooling")?;
    Ok((vec![vec![r, d, g, g]], vec![]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(s: &str) -> Vec<(String, Literal)> {
        parse_param_str(s).unwrap()
    }

    #[test]
    fn param_str_forms_of_the_published_nets() {
        assert_eq!(
            entries("'feat_stride': 16"),
            [("feat_stride".to_string(), Literal::Int(16))]
        );
        assert_eq!(
            entries("{'feat_stride': 16, 'scales': (4, 8, 16, 32)}")[1].1,
            Literal::Seq(vec![
                Literal::Int(4),
                Literal::Int(8),
                Literal::Int(16),
                Literal::Int(32)
            ])
        );
        // py-faster-rcnn's COCO nets: YAML, a newline and a tuple tag.
        let coco = entries("'feat_stride': 16 \n'scales': !!python/tuple [4, 8, 16, 32]");
        assert_eq!(coco.len(), 2);
        assert_eq!(
            entries("\"ratios\": [0.5, 1.0, 2e0,],")[0].1.to_string(),
            "[0.5, 1.0, 2.0]"
        );
        // YAML's unquoted keys, which yaml.load (the original's reader) takes.
        assert_eq!(
            entries("feat_stride: 4\nscales: [8]"),
            [
                ("feat_stride".to_string(), Literal::Int(4)),
                ("scales".to_string(), Literal::Seq(vec![Literal::Int(8)]))
            ]
        );
        assert_eq!(entries("").len(), 0);
        assert_eq!(entries("{}").len(), 0);
        // The last value of a repeated key wins, as in Python.
        assert_eq!(
            entries("'a': 1, 'a': 2"),
            [("a".to_string(), Literal::Int(2))]
        );
    }

    #[test]
    fn param_str_that_is_no_dict_literal_says_where() {
        for (bad, why) in [
            ("feat_stride: scales", "is a name"),
            ("[16]", "dict keys must be strings"),
            ("'feat_stride': open('x')", "is a name"),
            ("'feat_stride' 16", "expected ':'"),
            ("{'feat_stride': 16", "no closing brace"),
            ("{'a': 1} x", "after the closing brace"),
            ("'a': [1, 2", "expected ',' or the end"),
            ("'a': 'x", "unterminated"),
            ("'a': 1 'b': 2", "expected ','"),
            ("'a': !!python/list [1]", "unknown tag"),
            ("'a': 1.2.3", "not a number"),
        ] {
            let e = parse_param_str(bad).unwrap_err();
            assert!(
                e.contains("is not a Python dict literal") && e.contains(why),
                "{bad}: {e}"
            );
        }
        let deep = format!("'a': {}{}", "[".repeat(100), "]".repeat(100));
        assert!(parse_param_str(&deep)
            .unwrap_err()
            .contains("nested too deeply"));
    }

    #[test]
    fn python_proposal_params() {
        let p = python_proposal("'feat_stride': 8, 'scales': [2, 4], 'ratios': (1,)").unwrap();
        assert_eq!((p.feat_stride, p.num_anchors()), (8, 2));
        // yaml.load gives 16.0 for `16.0`; the original strides with it as with 16.
        assert_eq!(
            python_proposal("'feat_stride': 16.0").unwrap().feat_stride,
            16
        );
        assert_eq!(p.rpn, RPN_TEST);
        for (bad, why) in [
            ("'scales': [8]", "no 'feat_stride'"),
            ("'feat_stride': 16.5", "positive whole number, got 16.5"),
            ("'feat_stride': 0.0", "positive whole number, got 0.0"),
            ("'feat_stride': 16, 'scales': 8", "list or tuple"),
            ("'feat_stride': 16, 'scales': ['a']", "not a number"),
            (
                "'feat_stride': 16, 'pre_nms_topN': 100",
                "not a ProposalLayer parameter",
            ),
        ] {
            let e = python_proposal(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let mut p = python_proposal("'feat_stride': 16, 'scales': [0]").unwrap();
        assert!(p.check().unwrap_err().contains("scale 0"));
        p.scales = vec![8.0];
        p.rpn.nms_thresh = 1.5;
        assert!(p.check().unwrap_err().contains("nms_thresh 1.5"));
    }

    #[test]
    fn rows_bound() {
        let mut p = python_proposal("'feat_stride': 16").unwrap();
        assert_eq!(p.max_rows(14 * 14), 300);
        assert_eq!(p.max_rows(4), 36);
        p.rpn.post_nms_top_n = 0;
        assert_eq!(p.max_rows(1000), 6000);
        p.rpn.pre_nms_top_n = -1;
        assert_eq!(p.max_rows(1000), 9000);
    }
}
