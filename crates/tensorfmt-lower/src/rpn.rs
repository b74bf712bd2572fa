//! The test-time RPN constants of the proposal layers a user may override
//! ([`RpnOptions`]: the CLI's `--rpn`, Python's `rpn=`), apart from the lowering that
//! reads them (`layers/rcnn.rs`) so that the options and the lowering context both
//! import it without a circle.

use tensorfmt_caffe::ProposalParams;

/// Overrides of the test-time RPN constants of every proposal layer of a net (the
/// CLI's `--rpn KEY=VALUE`, Python's `rpn={...}`). Unset fields keep the layer's own
/// values: `proposal_param` for OpenCV's C++ `Proposal`, py-faster-rcnn's
/// `config.py` (`TEST.RPN_*`, [`tensorfmt_caffe::RPN_TEST`]) for its Python layer.
///
/// ```
/// let mut rpn = tensorfmt_lower::RpnOptions::default();
/// rpn.set("post_nms_top_n", "100")?;
/// rpn.set("TEST.RPN_NMS_THRESH", "0.6")?;   // py-faster-rcnn's config name works too
/// assert_eq!((rpn.post_nms_top_n, rpn.nms_thresh), (Some(100), Some(0.6)));
/// assert!(rpn.set("scales", "4").is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RpnOptions {
    /// Proposals kept before NMS (0 or less: all). py-faster-rcnn: 6000.
    pub pre_nms_top_n: Option<i64>,
    /// Proposals kept after NMS (0 or less: all). py-faster-rcnn: 300.
    pub post_nms_top_n: Option<i64>,
    /// NMS IoU threshold in [0, 1]. py-faster-rcnn: 0.7.
    pub nms_thresh: Option<f32>,
    /// Minimum box side in input-image pixels, times `im_info[2]` (0: no minimum).
    /// py-faster-rcnn: 16.
    pub min_size: Option<f32>,
}

impl RpnOptions {
    /// The accepted keys, as written in messages.
    pub const KEYS: &'static str = "pre_nms_top_n, post_nms_top_n, nms_thresh, min_size";

    /// Sets one constant by name: `pre_nms_top_n`, `post_nms_top_n`, `nms_thresh`,
    /// `min_size`, case-insensitive, with or without py-faster-rcnn's `TEST.RPN_`
    /// prefix and underscores (OpenCV's `post_nms_topn` works too).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let k = key.trim().to_ascii_lowercase();
        let k = k.strip_prefix("test.").unwrap_or(&k);
        let k = k.strip_prefix("rpn_").unwrap_or(k).replace('_', "");
        let v = value.trim();
        let int = || {
            v.parse::<i64>()
                .map_err(|_| format!("RPN constant {key}: {v:?} is not an integer"))
        };
        let float = |lo: f32, hi: Option<f32>| {
            v.parse::<f32>()
                .ok()
                .filter(|x| x.is_finite() && *x >= lo && hi.is_none_or(|hi| *x <= hi))
                .ok_or_else(|| match hi {
                    Some(hi) => {
                        format!("RPN constant {key}: {v:?} is not a number in [{lo}, {hi}]")
                    }
                    None => format!("RPN constant {key}: {v:?} is not a finite number >= {lo}"),
                })
        };
        match k.as_str() {
            "prenmstopn" => self.pre_nms_top_n = Some(int()?),
            "postnmstopn" => self.post_nms_top_n = Some(int()?),
            "nmsthresh" => self.nms_thresh = Some(float(0.0, Some(1.0))?),
            "minsize" => self.min_size = Some(float(0.0, None)?),
            _ => {
                return Err(format!(
                    "unknown RPN constant {key:?} (expected {})",
                    Self::KEYS
                ))
            }
        }
        Ok(())
    }

    /// Parses `KEY=VALUE` and sets it (the CLI's `--rpn`).
    pub fn parse_setting(&mut self, kv: &str) -> Result<(), String> {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("{kv:?}: expected KEY=VALUE (keys: {})", Self::KEYS))?;
        self.set(k, v)
    }

    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        *self == RpnOptions::default()
    }

    pub(crate) fn apply(&self, p: &mut ProposalParams) {
        let r = &mut p.rpn;
        r.pre_nms_top_n = self.pre_nms_top_n.unwrap_or(r.pre_nms_top_n);
        r.post_nms_top_n = self.post_nms_top_n.unwrap_or(r.post_nms_top_n);
        r.nms_thresh = self.nms_thresh.unwrap_or(r.nms_thresh);
        r.min_size = self.min_size.unwrap_or(r.min_size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpn_options() {
        let mut o = RpnOptions::default();
        assert!(o.is_empty());
        o.parse_setting("TEST.RPN_PRE_NMS_TOP_N=1000").unwrap();
        o.parse_setting("post_nms_topn = -1").unwrap();
        o.parse_setting("min_size=0").unwrap();
        assert_eq!(
            (o.pre_nms_top_n, o.post_nms_top_n, o.min_size),
            (Some(1000), Some(-1), Some(0.0))
        );
        for bad in [
            "nms_thresh=1.5",
            "nms_thresh=x",
            "min_size=-1",
            "pre_nms_top_n=1.5",
            "feat_stride=8",
            "x",
        ] {
            assert!(o.parse_setting(bad).is_err(), "{bad}");
        }
    }
}
