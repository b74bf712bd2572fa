//! Pre-version-2 files (spec §11): no version field, so the kind is recognised by
//! size arithmetic alone. Every interpretation whose header values are plausible and
//! whose payload size matches the file is a candidate; exactly one must remain (or the
//! caller names the kind), otherwise the error lists them all.

use crate::header::{CommentSpan, FileKind};
use crate::hex::hex_count;
use crate::layout::MapLayout;
use crate::HexGrid;

/// Header integers larger than this are not plausible sizes (float bit patterns read
/// as integers are far larger).
const MAX_FIELD: i32 = 1 << 24;

/// One way of reading a legacy file.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    /// `v1`, `pre-1.0 (5-int SOM header)`, ...
    pub format: &'static str,
    /// Version number reported (1 for v1, 0 for pre-1.0).
    pub version: i32,
    pub kind: FileKind,
    /// Header integers with their names, in file order.
    pub fields: Vec<(&'static str, i32)>,
    /// Entries (data, mapping, rotation/flip).
    pub n_entries: Option<u64>,
    pub map: Option<MapLayout>,
    pub hex: bool,
    /// Data image dims or neuron dims.
    pub item_dims: Vec<usize>,
    pub payload_offset: usize,
    pub payload_len: u64,
    /// Bytes after the payload.
    pub trailing: u64,
}

impl Candidate {
    pub fn describe(&self) -> String {
        let ints: Vec<String> = self
            .fields
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let layout = match (&self.map, self.hex) {
            (Some(m), true) => format!(", hexagonal {}x{}", m.dims()[0], m.dims()[0]),
            _ => String::new(),
        };
        format!(
            "{} {} ({}{layout})",
            self.format,
            self.kind.name(),
            ints.join(", ")
        )
    }
}

fn ints_at(bytes: &[u8], offset: usize, n: usize) -> Option<Vec<i32>> {
    let end = offset.checked_add(n.checked_mul(4)?)?;
    let b = bytes.get(offset..end)?;
    Some(
        b.chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

fn plausible(v: &[i32]) -> bool {
    v.iter().all(|&x| (1..=MAX_FIELD).contains(&x))
}

fn product(v: &[u64]) -> Option<u64> {
    v.iter().try_fold(1u64, |a, &b| a.checked_mul(b))
}

/// v1 SOM dims in PINK v2 style: `[w]`, `[w, h]` or `[w, h, depth]`.
fn v1_som_dims(w: i32, h: i32, d: i32) -> Vec<usize> {
    if d > 1 {
        vec![w as usize, h as usize, d as usize]
    } else if h > 1 {
        vec![w as usize, h as usize]
    } else {
        vec![w as usize]
    }
}

/// Cartesian and (when w = h odd, depth 1) hexagonal readings of a v1 SOM geometry.
fn v1_maps(w: i32, h: i32, d: i32, len: u64) -> Vec<(MapLayout, bool, u64)> {
    let mut out = Vec::new();
    let cart = product(&[w as u64, h as u64, d as u64]);
    if let Some(n) = cart {
        out.push((MapLayout::Cartesian(v1_som_dims(w, h, d)), false, n));
    }
    // Every neuron takes at least 4 bytes, so larger hexagonal maps cannot fit (and
    // their row tables are not built).
    let fits = |n: usize| (n as u64).saturating_mul(4) <= len;
    if w == h && d == 1 && w > 1 && hex_count(w as usize).is_some_and(fits) {
        if let (Some(n), Ok(g)) = (hex_count(w as usize), HexGrid::new(w as usize)) {
            out.push((MapLayout::Hexagonal(g), true, n as u64));
        }
    }
    out
}

fn channel_dims(c: i32, a: i32, b: i32) -> Vec<usize> {
    if c == 1 {
        vec![a as usize, b as usize]
    } else {
        vec![c as usize, a as usize, b as usize]
    }
}

/// Every interpretation that fits `len` bytes, reading integers after the comment
/// block. A comment block counts only when closed by `# END OF HEADER` (the 1.x
/// reader skipped comments only then); otherwise integers are read from byte 0.
pub(crate) fn candidates(head: &[u8], comments: &CommentSpan, len: u64) -> Vec<Candidate> {
    let base = if comments.end_line { comments.len } else { 0 };
    let mut out = Vec::new();
    let mut push = |format: &'static str,
                    version: i32,
                    kind: FileKind,
                    names: &[&'static str],
                    ints: &[i32],
                    n_entries: Option<u64>,
                    map: Option<(MapLayout, bool)>,
                    item_dims: Vec<usize>,
                    payload: Option<u64>| {
        let Some(payload) = payload else { return };
        let offset = base + 4 * ints.len();
        let Some(total) = payload.checked_add(offset as u64) else {
            return;
        };
        if total > len {
            return;
        }
        let (map, hex) = match map {
            Some((m, h)) => (Some(m), h),
            None => (None, false),
        };
        out.push(Candidate {
            format,
            version,
            kind,
            fields: names.iter().copied().zip(ints.iter().copied()).collect(),
            n_entries,
            map,
            hex,
            item_dims,
            payload_offset: offset,
            payload_len: payload,
            trailing: len - total,
        });
    };

    // v1 images: n, channels, a, b -> f32[n][channels][a][b].
    if let Some(v) = ints_at(head, base, 4).filter(|v| plausible(v)) {
        let (n, c, a, b) = (v[0], v[1], v[2], v[3]);
        let p = product(&[n as u64, c as u64, a as u64, b as u64, 4]);
        push(
            "v1",
            1,
            FileKind::Data,
            &["n_images", "channels", "height", "width"],
            &v,
            Some(n as u64),
            None,
            channel_dims(c, a, b),
            p,
        );
        // v1 mapping and rotation/flip: n, som_w, som_h, som_depth.
        for (map, hex, neurons) in v1_maps(v[1], v[2], v[3], len) {
            let names = ["n_images", "som_width", "som_height", "som_depth"];
            let m = product(&[n as u64, neurons, 4]);
            push(
                "v1",
                1,
                FileKind::Mapping,
                &names,
                &v,
                Some(n as u64),
                Some((map.clone(), hex)),
                vec![],
                m,
            );
            let r = product(&[n as u64, neurons, 5]);
            push(
                "v1",
                1,
                FileKind::RotFlip,
                &names,
                &v,
                Some(n as u64),
                Some((map, hex)),
                vec![],
                r,
            );
        }
    }
    // v1 SOM: channels, som_w, som_h, som_depth, neuron_w, neuron_h.
    if let Some(v) = ints_at(head, base, 6).filter(|v| plausible(v)) {
        let (c, nw, nh) = (v[0], v[4], v[5]);
        for (map, hex, neurons) in v1_maps(v[1], v[2], v[3], len) {
            let p = product(&[neurons, c as u64, nw as u64, nh as u64, 4]);
            push(
                "v1",
                1,
                FileKind::Som,
                &[
                    "channels",
                    "som_width",
                    "som_height",
                    "som_depth",
                    "neuron_width",
                    "neuron_height",
                ],
                &v,
                None,
                Some((map, hex)),
                channel_dims(c, nh, nw),
                p,
            );
        }
    }
    // pre-1.0 SOM, Dec 2014: channels, som_dim, som_dim, neuron_dim, neuron_dim.
    if let Some(v) = ints_at(head, base, 5).filter(|v| plausible(v) && v[1] == v[2] && v[3] == v[4])
    {
        let (c, s, nd) = (v[0], v[1] as usize, v[3]);
        let p = product(&[(s * s) as u64, c as u64, nd as u64, nd as u64, 4]);
        push(
            "pre-1.0 (5-int header)",
            0,
            FileKind::Som,
            &["channels", "som_dim", "som_dim", "neuron_dim", "neuron_dim"],
            &v,
            None,
            Some((MapLayout::Cartesian(vec![s, s]), false)),
            channel_dims(c, nd, nd),
            p,
        );
    }
    if let Some(v) = ints_at(head, base, 3).filter(|v| plausible(v)) {
        // pre-1.0 SOM, up to Dec 2014: channels, som_dim, neuron_dim.
        let (c, s, nd) = (v[0], v[1] as usize, v[2]);
        let p = product(&[s as u64, s as u64, c as u64, nd as u64, nd as u64, 4]);
        push(
            "pre-1.0 (3-int header)",
            0,
            FileKind::Som,
            &["channels", "som_dim", "neuron_dim"],
            &v,
            None,
            Some((MapLayout::Cartesian(vec![s, s]), false)),
            channel_dims(c, nd, nd),
            p,
        );
        // pre-1.0 images: n, w, h.
        let p = product(&[v[0] as u64, v[1] as u64, v[2] as u64, 4]);
        push(
            "pre-1.0 (3-int header)",
            0,
            FileKind::Data,
            &["n_images", "width", "height"],
            &v,
            Some(v[0] as u64),
            None,
            vec![v[1] as usize, v[2] as usize],
            p,
        );
        // pre-1.0 mapping: n, som_dim, som_dim.
        if v[1] == v[2] {
            let p = product(&[v[0] as u64, v[1] as u64, v[2] as u64, 4]);
            push(
                "pre-1.0 (3-int header)",
                0,
                FileKind::Mapping,
                &["n_images", "som_dim", "som_dim"],
                &v,
                Some(v[0] as u64),
                Some((MapLayout::Cartesian(vec![s, s]), false)),
                vec![],
                p,
            );
        }
    }
    // Exact fits win; otherwise fits with fewer than 4 stray bytes at the end.
    if out.iter().any(|c| c.trailing == 0) {
        out.retain(|c| c.trailing == 0);
    } else {
        out.retain(|c| c.trailing < 4);
    }
    out
}
