//! Named tensors to PVP files ([`crate::save_tensors`]): the reverse direction of
//! the [`TensorFile`](tensorfmt_core::TensorFile) view.

use std::path::Path;

use tensorfmt_core::settings::{Setting, SettingValue};
use tensorfmt_core::{io::AtomicFile, DType, Order, Tensor, WriteOptions};

use crate::error::{PvpError, Result};
use crate::write::{DenseWriter, SparseWriter, WeightGeometry, WeightWriter};

fn find<'a>(tensors: &'a [(String, Tensor)], name: &str) -> Option<&'a Tensor> {
    tensors.iter().find(|(n, _)| n == name).map(|(_, t)| t)
}

fn need<'a>(tensors: &'a [(String, Tensor)], name: &str, kind: &str) -> Result<&'a Tensor> {
    find(tensors, name).ok_or_else(|| {
        PvpError::Invalid(format!("a {kind} PVP file needs a tensor named {name:?}"))
    })
}

fn typed<T: tensorfmt_core::Element>(t: &Tensor, dtype: DType) -> Result<Vec<T>> {
    Ok(t.cast(dtype)?.to_order(Order::RowMajor)?.to_vec::<T>()?)
}

/// Whether every value of `t`, as f32, passes `keep` (no copy of an f32 tensor).
fn all_f32(t: &Tensor, keep: impl Fn(f32) -> bool) -> Result<bool> {
    let t = t.cast(DType::F32)?.to_order(Order::RowMajor)?;
    Ok(t.typed::<f32>()?.iter().all(|&x| keep(x)))
}

fn times(tensors: &[(String, Tensor)], frames: usize) -> Result<Vec<f64>> {
    match find(tensors, "time") {
        None => Ok((0..frames).map(|k| k as f64).collect()),
        Some(t) => {
            let v = typed::<f64>(t, DType::F64)?;
            if v.len() != frames {
                return Err(PvpError::Invalid(format!(
                    "`time` has {} entries for {frames} frames",
                    v.len()
                )));
            }
            Ok(v)
        }
    }
}

/// The `--set` settings [`save_tensors`](crate::save_tensors) reads (`WriteOptions::extra`), with their
/// values and kinds; the facade and [`save_tensors`](crate::save_tensors) refuse any other key, value or
/// kind, so a setting is never silently ignored. A dense file's geometry is its
/// `values`' shape, so `nx`, `ny` and `nf` are the sparse and weight files' (a weight
/// file's unit cell).
///
/// ```
/// use tensorfmt_core::settings::check;
/// use tensorfmt_core::WriteOptions;
/// let mut o = WriteOptions::default();
/// o.set("nx", "8")?;
/// assert!(check("pvp", tensorfmt_pvp::SETTINGS, Some("sparse"), &o).is_ok());
/// assert!(check("pvp", tensorfmt_pvp::SETTINGS, Some("dense"), &o).is_err());
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
pub const SETTINGS: &[Setting] = &[
    Setting::new("nx", SettingValue::Count).for_kinds(&["sparse", "weights"]),
    Setting::new("ny", SettingValue::Count).for_kinds(&["sparse", "weights"]),
    Setting::new("nf", SettingValue::Count).for_kinds(&["sparse", "weights"]),
    Setting::new("datatype", SettingValue::Choice(&["3", "4"])).for_kinds(&["sparse"]),
    Setting::new("sparse", SettingValue::Choice(&["binary", "values"])).for_kinds(&["sparse"]),
    // Non-shared weights (filetype 3): nx, ny, nf are then the pre layer's, with
    // margins (patches = (nx + 2 margin_x) * (ny + 2 margin_y) * nf).
    Setting::new("shared", SettingValue::Flag).for_kinds(&["weights"]),
    Setting::new("margin_x", SettingValue::Int32).for_kinds(&["weights"]),
    Setting::new("margin_y", SettingValue::Int32).for_kinds(&["weights"]),
    // A kernel file's header nx, ny, nf when they are not its unit cell (OpenPV's
    // writers before 2017 gave the pre layer's size there).
    Setting::new("header_dims", SettingValue::Counts).for_kinds(&["weights"]),
];

/// The file kind chosen from `options.kind` or from the tensor names.
fn choose_kind(tensors: &[(String, Tensor)], options: &WriteOptions) -> Result<String> {
    if let Some(k) = &options.kind {
        return match k.as_str() {
            "dense" | "sparse" | "weights" => Ok(k.clone()),
            other => Err(PvpError::Invalid(format!(
                "unknown PVP kind {other:?} (dense, sparse, weights)"
            ))),
        };
    }
    let has = |n| find(tensors, n).is_some();
    if has("weights") {
        Ok("weights".into())
    } else if has("indptr") {
        Ok("sparse".into())
    } else if has("values") {
        Ok("dense".into())
    } else {
        Err(PvpError::Invalid(
            "no `values`, `indptr` or `weights` tensor to write as PVP".into(),
        ))
    }
}

/// Splits `values` into (frames, ny, nx, nf).
fn dense_dims(t: &Tensor) -> Result<(usize, usize, usize, usize)> {
    match *t.dims() {
        [f, y, x, c] => Ok((f, y, x, c)),
        [y, x, c] => Ok((1, y, x, c)),
        ref d => Err(PvpError::Invalid(format!(
            "`values` must be [frames, ny, nx, nf] or [ny, nx, nf], got {d:?}"
        ))),
    }
}

/// Geometry (nx, ny, nf) of `width` neurons from `--set nx= ny= nf=` (default `width x 1 x 1`).
fn sparse_geometry(options: &WriteOptions, width: usize) -> Result<(usize, usize, usize)> {
    let nx = options.count("nx")?;
    let ny = options.count("ny")?.unwrap_or(1);
    let nf = options.count("nf")?.unwrap_or(1);
    let nx = nx.unwrap_or(width / ny.saturating_mul(nf).max(1));
    if nx.checked_mul(ny).and_then(|v| v.checked_mul(nf)) != Some(width) {
        return Err(PvpError::Invalid(format!(
            "nx*ny*nf = {nx}*{ny}*{nf} does not match the {width} columns"
        )));
    }
    Ok((nx, ny, nf))
}

fn sparse_writer<'a>(
    f: &'a mut AtomicFile,
    options: &WriteOptions,
    values: bool,
    (nx, ny, nf): (usize, usize, usize),
) -> Result<SparseWriter<&'a mut AtomicFile>> {
    if !values {
        if let Some(d) = options.text("datatype") {
            return Err(PvpError::Invalid(format!(
                "--set datatype={d} is for sparse values files; this one is binary (no values)"
            )));
        }
        SparseWriter::binary(f, nx, ny, nf)
    } else if options.text_or_layout("datatype") == Some("4") {
        SparseWriter::values_datatype4(f, nx, ny, nf)
    } else {
        SparseWriter::values(f, nx, ny, nf)
    }
}

fn write_sparse(
    f: &mut AtomicFile,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
) -> Result<()> {
    // A sparse PVP file's own kind (binary) goes with its entries (source layout)
    // where they are all 1 (a binary file's entries read back as 1); what the user
    // sets wins.
    let binary_layout = options.text("sparse").is_none()
        && options.source_layout.get("sparse").map(String::as_str) == Some("binary");
    let binary_wanted = match options.text("sparse") {
        Some(s) => s == "binary",
        None if binary_layout => match (find(tensors, "indptr"), find(tensors, "data")) {
            (Some(_), Some(d)) => all_f32(d, |x| x == 1.0)?,
            (Some(_), None) => true,
            (None, _) => match find(tensors, "values") {
                Some(v) => all_f32(v, |x| x == 0.0 || x == 1.0)?,
                None => true,
            },
        },
        None => false,
    };
    // Asked for: a binary file reads every entry back as 1, so other values would come
    // back changed (a dense input's zeros are not entries).
    if options.text("sparse") == Some("binary") {
        let ok = match (
            find(tensors, "indptr"),
            find(tensors, "data"),
            find(tensors, "values"),
        ) {
            (Some(_), Some(d), _) => all_f32(d, |x| x == 1.0)?,
            (Some(_), None, _) => true,
            (None, _, Some(v)) => all_f32(v, |x| x == 0.0 || x == 1.0)?,
            (None, _, None) => true,
        };
        if !ok {
            return Err(PvpError::Invalid(
                "--set sparse=binary stores each entry as 1, and some values are neither 0 \
                 nor 1 (they would read back as 1); leave sparse=values"
                    .into(),
            ));
        }
    }
    if options.text("sparse") == Some("values")
        && find(tensors, "indptr").is_some()
        && find(tensors, "data").is_none()
    {
        return Err(PvpError::Invalid(
            "--set sparse=values needs a `data` tensor beside `indptr` and `indices`".into(),
        ));
    }
    if find(tensors, "indptr").is_none() {
        // Dense input: keep the non-zero entries.
        let t = need(tensors, "values", "sparse")?;
        let (frames, ny, nx, nf) = dense_dims(t)?;
        // The geometry is the values' shape; --set may only repeat it.
        for (key, is) in [("nx", nx), ("ny", ny), ("nf", nf)] {
            if let Some(set) = options.count(key)? {
                if set != is {
                    return Err(PvpError::Invalid(format!(
                        "--set {key}={set} does not match the values' shape {:?} \
                         ([frames, ny, nx, nf]), which gives {key}={is}",
                        t.dims()
                    )));
                }
            }
        }
        let vals = typed::<f32>(t, DType::F32)?;
        let time = times(tensors, frames)?;
        let mut w = sparse_writer(f, options, !binary_wanted, (nx, ny, nf))?;
        let width = nx * ny * nf;
        let (mut idx, mut v) = (Vec::new(), Vec::new());
        for (k, frame) in vals.chunks_exact(width.max(1)).enumerate().take(frames) {
            idx.clear();
            v.clear();
            for (i, &x) in frame.iter().enumerate() {
                if x != 0.0 {
                    idx.push(i as u32);
                    v.push(x);
                }
            }
            w.write_frame(time[k], &idx, if binary_wanted { &[] } else { &v })?;
        }
        w.finish()?;
        return Ok(());
    }
    let indptr = typed::<i64>(need(tensors, "indptr", "sparse")?, DType::I64)?;
    let indices = typed::<u32>(need(tensors, "indices", "sparse")?, DType::U32)?;
    let data = find(tensors, "data")
        .map(|t| typed::<f32>(t, DType::F32))
        .transpose()?;
    let frames = indptr
        .len()
        .checked_sub(1)
        .ok_or_else(|| PvpError::Invalid("empty `indptr`".into()))?;
    let width = match find(tensors, "shape") {
        Some(s) => {
            let s = typed::<i64>(s, DType::I64)?;
            match s[..] {
                [rows, cols] if rows as usize == frames && cols > 0 => cols as usize,
                _ => {
                    return Err(PvpError::Invalid(format!(
                        "`shape` {s:?} does not match {frames} frames"
                    )))
                }
            }
        }
        None => {
            let (x, y, c) = (
                options.count("nx")?,
                options.count("ny")?,
                options.count("nf")?,
            );
            match (x, y, c) {
                (Some(x), y, c) => x
                    .checked_mul(y.unwrap_or(1))
                    .and_then(|v| v.checked_mul(c.unwrap_or(1)))
                    .ok_or_else(|| PvpError::Invalid("nx*ny*nf overflows".into()))?,
                _ => {
                    return Err(PvpError::Invalid(
                        "CSR input needs `shape` or --set nx=..".into(),
                    ))
                }
            }
        }
    };
    let geom = match find(tensors, "frame_shape") {
        // The geometry a sparse npz / safetensors written by tensorfmt (or a sparse PVP
        // file's entries) carries beside its CSR arrays: --set may only repeat it, as
        // for a dense input (it re-shaped the layer, silently).
        Some(fs) => {
            let geom = match typed::<i64>(fs, DType::I64)?[..] {
                [ny, nx, nf]
                    if ny > 0
                        && nx > 0
                        && nf > 0
                        && (ny as u64)
                            .checked_mul(nx as u64)
                            .and_then(|v| v.checked_mul(nf as u64))
                            == Some(width as u64) =>
                {
                    (nx as usize, ny as usize, nf as usize)
                }
                ref other => {
                    return Err(PvpError::Invalid(format!(
                        "`frame_shape` {other:?} is not [ny, nx, nf] of {width} neurons"
                    )))
                }
            };
            for (key, is) in [("nx", geom.0), ("ny", geom.1), ("nf", geom.2)] {
                if let Some(set) = options.count(key)? {
                    if set != is {
                        return Err(PvpError::Invalid(format!(
                            "--set {key}={set} does not match the frame shape {:?} \
                             ([ny, nx, nf]) of the sparse input, which gives {key}={is}",
                            [geom.1, geom.0, geom.2]
                        )));
                    }
                }
            }
            geom
        }
        None => sparse_geometry(options, width)?,
    };
    let values = data.is_some() && !binary_wanted;
    if let Some(d) = &data {
        if d.len() != indices.len() {
            return Err(PvpError::Invalid(
                "`data` and `indices` differ in length".into(),
            ));
        }
    }
    let time = times(tensors, frames)?;
    let mut w = sparse_writer(f, options, values, geom)?;
    for k in 0..frames {
        let (a, b) = (indptr[k], indptr[k + 1]);
        if a < 0 || b < a || b as usize > indices.len() {
            return Err(PvpError::Invalid(format!(
                "`indptr` is not monotonic within 0..={} at row {k}",
                indices.len()
            )));
        }
        let (a, b) = (a as usize, b as usize);
        let v: &[f32] = match (&data, values) {
            (Some(d), true) => &d[a..b],
            _ => &[],
        };
        w.write_frame(time[k], &indices[a..b], v)?;
    }
    w.finish()?;
    Ok(())
}

fn write_dense(f: &mut AtomicFile, tensors: &[(String, Tensor)]) -> Result<()> {
    let t = need(tensors, "values", "dense")?;
    let (frames, ny, nx, nf) = dense_dims(t)?;
    let time = times(tensors, frames)?;
    // Borrowed when the tensor already is aligned row-major f32 (no whole-tensor copy).
    let t = t.cast(DType::F32)?.to_order(Order::RowMajor)?;
    let vals = t.typed::<f32>()?;
    let n = nx * ny * nf;
    // The header, then per frame its time and values (see AtomicFile::reserve).
    let frame_bytes = (n as u64).saturating_mul(4).saturating_add(8);
    f.reserve(
        (frames as u64)
            .saturating_mul(frame_bytes)
            .saturating_add(crate::header::HEADER_SIZE as u64),
    )?;
    let mut w = DenseWriter::new(f, nx, ny, nf)?;
    for (k, frame) in vals.chunks_exact(n).enumerate() {
        w.write_frame(time[k], frame)?;
    }
    w.finish()?;
    Ok(())
}

fn write_weights(
    f: &mut AtomicFile,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
) -> Result<()> {
    let t = need(tensors, "weights", "weights")?;
    let (frames, arbors, patches, nyp, nxp, nfp) = match *t.dims() {
        [fr, a, p, y, x, c] => (fr, a, p, y, x, c),
        [a, p, y, x, c] => (1, a, p, y, x, c),
        ref d => {
            return Err(PvpError::Invalid(format!(
                "`weights` must be [frames, arbors, patches, nyp, nxp, nfp] (or without frames), got {d:?}"
            )))
        }
    };
    if frames == 0 {
        // Each frame of a weight file carries its own header: a file of none would be
        // 0 bytes, which no reader opens (an activity file keeps its header).
        return Err(PvpError::Invalid(
            "`weights` has no frames: a weight PVP file's header is its frames', so a file \
             of none would be empty, which no reader opens; select at least one frame"
                .into(),
        ));
    }
    let bytes = match options.dtype {
        None | Some(DType::F32) => false,
        Some(DType::U8) => true,
        Some(d) => {
            return Err(PvpError::Invalid(format!(
                "PVP weights are stored as f32 or u8, not {d}"
            )))
        }
    };
    // What the user sets, else the source file's own geometry (a conversion from a
    // PVP weight file), else a kernel of `patches` features.
    let own = |key: &str| options.count_or_layout(key);
    let shared = options.flag_or_layout("shared")?.unwrap_or(true);
    let g = if shared {
        for key in ["margin_x", "margin_y"] {
            if options.extra.contains_key(key) {
                return Err(PvpError::Invalid(format!(
                    "--set {key} is a non-shared weight file's (--set shared=false)"
                )));
            }
        }
        let header_dims = match options.counts_or_layout("header_dims")?.as_deref() {
            None => None,
            Some(&[x, y, f]) => Some([x, y, f]),
            Some(other) => {
                return Err(PvpError::Invalid(format!(
                    "--set header_dims takes nx,ny,nf (3 numbers), got {other:?}"
                )))
            }
        };
        let npx = own("nx")?.unwrap_or(1);
        let npy = own("ny")?.unwrap_or(1);
        let npf = own("nf")?.unwrap_or(patches / npx.saturating_mul(npy).max(1));
        if npx.checked_mul(npy).and_then(|v| v.checked_mul(npf)) != Some(patches) {
            return Err(PvpError::Invalid(format!(
                "kernel unit cell {npx}x{npy}x{npf} does not hold {patches} patches"
            )));
        }
        let g = WeightGeometry::kernel(npx, npy, npf, nxp, nyp, nfp, arbors);
        match header_dims {
            Some(d) => g.with_header_dims(d),
            None => g,
        }
    } else {
        if options.extra.contains_key("header_dims") {
            return Err(PvpError::Invalid(
                "--set header_dims is a kernel file's (a non-shared file's nx, ny, nf are its pre layer)"
                    .into(),
            ));
        }
        let margin = |key: &str| -> Result<usize> {
            Ok(options.int32_or_layout(key)?.map_or(0, |m| m as usize))
        };
        let (mx, my) = (margin("margin_x")?, margin("margin_y")?);
        let (Some(nx), Some(ny), Some(nf)) = (own("nx")?, own("ny")?, own("nf")?) else {
            return Err(PvpError::Invalid(
                "a non-shared weight file needs its pre layer's --set nx, ny and nf".into(),
            ));
        };
        let held = nx
            .checked_add(mx.saturating_mul(2))
            .and_then(|x| {
                ny.checked_add(my.saturating_mul(2))
                    .and_then(|y| x.checked_mul(y))
            })
            .and_then(|v| v.checked_mul(nf));
        if held != Some(patches) {
            return Err(PvpError::Invalid(format!(
                "a non-shared pre layer {nx}x{ny}x{nf} with margins {mx}, {my} does not hold \
                 {patches} patches ((nx+2*margin_x)*(ny+2*margin_y)*nf)"
            )));
        }
        WeightGeometry::non_shared(nx, ny, nf, mx, my, nxp, nyp, nfp, arbors)
    };
    let time = times(tensors, frames)?;
    let vals = typed::<f32>(t, DType::F32)?;
    let per = g.frame_values()?;
    // A byte weight file converted to its own kind stays bytes when every frame's
    // values come back exactly from its bytes (they do when they were bytes of this
    // frame's range); else float, which holds them exactly.
    let bytes = bytes
        || (options.dtype.is_none()
            && options.text_or_layout("datatype") == Some("1")
            && vals.chunks_exact(per.max(1)).all(bytes_are_exact));
    let mut w = WeightWriter::new(f, g, bytes)?;
    for (k, frame) in vals.chunks_exact(per).enumerate() {
        w.write_frame(time[k], frame)?;
    }
    w.finish()?;
    Ok(())
}

/// Whether a frame of weights survives byte compression exactly: each value decodes
/// back from its byte in the frame's own range (what [`WeightWriter`] writes).
fn bytes_are_exact(frame: &[f32]) -> bool {
    byte_weight_changes(frame) == 0
}

/// How many values of one frame of weights byte compression changes: OpenPV's byte
/// weights keep 256 levels between the frame's min and max ([`WeightWriter`] with
/// bytes), so a value off those levels, or not finite, does not come back.
///
/// ```
/// use tensorfmt_pvp::byte_weight_changes;
/// assert_eq!(byte_weight_changes(&[0.0, 0.5, 1.0]), 1); // 0.5 is between levels 127 and 128
/// assert_eq!(byte_weight_changes(&[-1.0, 1.0]), 0);
/// ```
pub fn byte_weight_changes(frame: &[f32]) -> usize {
    let lo = frame.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = frame.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    frame
        .iter()
        .filter(|&&v| {
            !v.is_finite()
                || crate::read::decode_byte(crate::write::encode_byte(v, lo, hi), lo, hi - lo) != v
        })
        .count()
}

/// See [`crate::save_tensors`].
pub(crate) fn save(
    path: &Path,
    tensors: &[(String, Tensor)],
    options: &WriteOptions,
) -> Result<()> {
    let kind = choose_kind(tensors, options)?;
    tensorfmt_core::settings::check("pvp", SETTINGS, Some(&kind), options)?;
    match options.dtype {
        None | Some(DType::F32) => {}
        Some(d) if kind != "weights" => {
            return Err(PvpError::Invalid(format!(
                "PVP {kind} activity is stored as f32, not {d}"
            )))
        }
        _ => {} // weights: f32 or u8, checked by their writer
    }
    tensorfmt_core::io::write_atomic_with(path, options, |f| -> Result<()> {
        match kind.as_str() {
            "weights" => write_weights(f, tensors, options),
            "sparse" => write_sparse(f, tensors, options),
            _ => write_dense(f, tensors),
        }
    })
}

#[cfg(test)]
mod tests {
    /// Bytes are kept only where every value decodes back exactly.
    #[test]
    fn byte_weights_are_kept_only_when_exact() {
        let bytes: Vec<f32> = [0u8, 3, 128, 255]
            .iter()
            .map(|&b| crate::read::decode_byte(b, -1.0, 4.0))
            .collect();
        assert!(super::bytes_are_exact(&bytes));
        assert!(super::bytes_are_exact(&[0.25; 5]));
        assert!(!super::bytes_are_exact(&[0.0, 0.1234567, 1.0]));
        assert!(!super::bytes_are_exact(&[0.0, f32::NAN]));
    }
}
