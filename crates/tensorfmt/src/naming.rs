//! One array is enough: the one naming rule of the facade's writers.
//!
//! A lone array (an `.npy`, a single-tensor file, one numpy array from Python) becomes
//! the main tensor of whatever writable kind it is written as, without renaming:
//! `values` of a dense or sparse PVP file (an `[ny, nx, nf]` image gains a frame axis),
//! `weights` of a PVP weight file, `value` of a primitiv Parameter, blob 0 of a
//! one-layer caffemodel named after the array, the first history blob of a solver
//! state, the first blob of a blob vector. A PINK rotation/flip file has two main
//! tensors (`flip`, `angle`): one array does not make one. Where several tensors compete, names decide, and the format's error lists
//! the names it accepts.

use std::borrow::Cow;

use tensorfmt_core::{Result, Tensor, WriteOptions};

use crate::format::Format;

/// `tensors`, with a lone array renamed (and for PVP reshaped) to the main tensor of
/// the kind `options.kind` of `format`; several tensors are returned unchanged.
pub(crate) fn lone_array<'a>(
    format: Format,
    options: &WriteOptions,
    tensors: &'a [(String, Tensor)],
) -> Result<Cow<'a, [(String, Tensor)]>> {
    let [(name, t)] = tensors else {
        return Ok(Cow::Borrowed(tensors));
    };
    let kind = options.kind.as_deref();
    let main = match (format, kind) {
        (Format::Pvp, None | Some("dense" | "sparse"))
            if !matches!(name.as_str(), "weights" | "indptr") =>
        {
            "values".to_string()
        }
        (Format::Pvp, Some("weights")) => "weights".to_string(),
        (Format::Primitiv, Some("parameter")) => "value".to_string(),
        (Format::Caffe, Some("caffemodel")) if !name.contains('/') => format!("{name}/0"),
        (Format::Caffe, Some("solverstate")) if !name.contains('/') => "history/0".to_string(),
        (Format::Caffe, Some("blobprotovector")) if !name.contains('/') => "blobs/0".to_string(),
        _ => return Ok(Cow::Borrowed(tensors)),
    };
    let t = if format == Format::Pvp && t.dims().len() == 3 {
        // [ny, nx, nf]: one frame.
        let d = t.dims();
        t.reshape([1, d[0], d[1], d[2]])?
    } else {
        t.clone()
    };
    if *name == main && t.dims() == tensors[0].1.dims() {
        return Ok(Cow::Borrowed(tensors));
    }
    Ok(Cow::Owned(vec![(main, t)]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfmt_core::Order;

    fn one(name: &str, dims: &[usize]) -> Vec<(String, Tensor)> {
        let n: usize = dims.iter().product();
        vec![(
            name.into(),
            Tensor::from_vec(vec![0f32; n], dims.to_vec(), Order::RowMajor).unwrap(),
        )]
    }

    fn with_kind(kind: Option<&str>) -> WriteOptions {
        WriteOptions {
            kind: kind.map(str::to_string),
            ..WriteOptions::default()
        }
    }

    #[test]
    fn a_lone_array_becomes_the_main_tensor() {
        let t = one("movie", &[3, 4, 5, 2]);
        let r = lone_array(Format::Pvp, &with_kind(None), &t).unwrap();
        assert_eq!(r[0].0, "values");
        let img = one("img", &[4, 5, 2]);
        let r = lone_array(Format::Pvp, &with_kind(Some("sparse")), &img).unwrap();
        assert_eq!(
            (r[0].0.as_str(), r[0].1.dims()),
            ("values", &[1, 4, 5, 2][..])
        );
        let r = lone_array(Format::Primitiv, &with_kind(Some("parameter")), &t).unwrap();
        assert_eq!(r[0].0, "value");
        let r = lone_array(Format::Caffe, &with_kind(Some("caffemodel")), &t).unwrap();
        assert_eq!(r[0].0, "movie/0");
        // Names that already say what they are, other kinds and several tensors stay.
        let w = one("weights", &[1, 2]);
        assert!(matches!(
            lone_array(Format::Pvp, &with_kind(None), &w).unwrap(),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            lone_array(Format::Som, &with_kind(None), &t).unwrap(),
            Cow::Borrowed(_)
        ));
        let mut two = one("a", &[2]);
        two.extend(one("b", &[2]));
        assert!(matches!(
            lone_array(Format::Pvp, &with_kind(None), &two).unwrap(),
            Cow::Borrowed(_)
        ));
    }
}
