//! [`LowerOptions::stop_before`](crate::LowerOptions::stop_before): the net cut before
//! the layers named (by layer name or type) and everything that reads what they
//! compute; the graph outputs the blobs the cut part reads from the kept part.

use std::collections::{HashMap, HashSet};

use tensorfmt_caffe::NetDef;

use crate::LowerError;

/// The kept part of a net and what the cut leaves behind.
pub(crate) struct Cut {
    /// The net without the cut layers.
    pub kept: NetDef,
    /// Every cut layer, `(name, type)`, in net order.
    pub stopped: Vec<(String, String)>,
    /// The default graph outputs: the net's own outputs the kept part still computes
    /// (blobs consumed only by Silence count), then the blobs the cut layers read from
    /// the kept part, in the order they read them.
    pub outputs: Vec<String>,
    /// Names of cut layers that appear once in the net (their caffemodel blobs are
    /// dropped without a warning).
    pub unique_cut_names: Vec<String>,
}

/// Cuts `net` before every layer whose name or type is in `stop_before` (each entry
/// must match at least one layer), and before every layer reading a blob a cut layer
/// wrote (until a kept layer writes that blob again).
pub(crate) fn cut(net: &NetDef, stop_before: &[String]) -> Result<Cut, LowerError> {
    for s in stop_before {
        if !net.layers.iter().any(|l| &l.name == s || &l.kind == s) {
            return Err(LowerError::Net(format!(
                "stop before {s:?}: no layer of the net has that name or type"
            )));
        }
    }
    let mut cut_blobs: HashSet<&str> = HashSet::new();
    let mut is_cut = vec![false; net.layers.len()];
    let mut reads: Vec<String> = Vec::new();
    for (i, l) in net.layers.iter().enumerate() {
        let named = stop_before.iter().any(|s| s == &l.name || s == &l.kind);
        if named || l.bottoms.iter().any(|b| cut_blobs.contains(b.as_str())) {
            is_cut[i] = true;
            for b in &l.bottoms {
                if !cut_blobs.contains(b.as_str()) && !reads.contains(b) {
                    reads.push(b.clone());
                }
            }
            cut_blobs.extend(l.tops.iter().map(String::as_str));
        } else {
            for t in &l.tops {
                cut_blobs.remove(t.as_str());
            }
        }
    }
    let mut kept = net.clone();
    kept.layers = net
        .layers
        .iter()
        .zip(&is_cut)
        .filter(|(_, &c)| !c)
        .map(|(l, _)| l.clone())
        .collect();
    // A blob consumed only by Silence layers is an output too (Caffe silences the blobs
    // it should not print, e.g. colorization's class8_ab).
    let mut unsilenced = net.clone();
    unsilenced.layers.retain(|l| l.kind != "Silence");
    let mut outputs: Vec<String> = unsilenced
        .output_blobs()
        .into_iter()
        .filter(|b| !cut_blobs.contains(b.as_str()))
        .collect();
    for b in reads {
        if !outputs.contains(&b) {
            outputs.push(b);
        }
    }
    let mut name_count: HashMap<&str, usize> = HashMap::new();
    for l in &net.layers {
        *name_count.entry(l.name.as_str()).or_default() += 1;
    }
    let stopped: Vec<(String, String)> = net
        .layers
        .iter()
        .zip(&is_cut)
        .filter(|(_, &c)| c)
        .map(|(l, _)| (l.name.clone(), l.kind.clone()))
        .collect();
    let unique_cut_names = stopped
        .iter()
        .filter(|(n, _)| name_count.get(n.as_str()) == Some(&1))
        .map(|(n, _)| n.clone())
        .collect();
    Ok(Cut {
        kept,
        stopped,
        outputs,
        unique_cut_names,
    })
}
