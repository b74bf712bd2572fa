//! Pictures of Caffe files (spec `caffe.md`): a model's convolution filters and a mean
//! image.
//!
//! - **Model** (V2, V1 and V0 nets): the filters of layer `layer`, whose first blob
//!   (the weights) is `N x C x H x W` (a convolution's output filters x input
//!   channels; a deconvolution's first axis is its input channels). One cell per filter
//!   (first axis), in order, near-square ([`super::tableau`]): `C = 3` as one colour tile
//!   (Caffe's channel order is OpenCV's BGR, so channel 0 is drawn blue and channel 2
//!   red; scaled jointly to the filter's min..max), otherwise a
//!   row of `C` tiles, one per input channel, each scaled to its own min..max, in
//!   viridis. Without `layer`, or with a layer that has no 4-d weights, the error lists
//!   the layers that do. V1 inner-product weights stored as legacy `(1, 1, M, N)` are
//!   not filters.
//! - **Mean file** (`.binaryproto`): the mean image, `3 x H x W` as BGR (channel 0
//!   blue, as Caffe and OpenCV store images), one channel
//!   in viridis, other channel counts as a grid of channel maps.
//! - Solver states and blob vectors have no picture.
//!
//! Pictures are enlarged by [`super::tableau::tableau_scale`].

use bytes::Bytes;
use tensorfmt_caffe::{detect_kind, read_blob_proto, read_model, FileKind, Model, RawLayer};
use tensorfmt_core::DType;

use super::colormap::Colormap;
use super::legend::{count, Legend, Picture, Stats};
use super::options::RenderOptions;
use super::tableau::{colour_scale, enlarge, tableau, Block};
use crate::{Error, Result};

/// Renders a whole Caffe file held in `data` (see the module docs).
pub fn render_caffe(data: Bytes, options: &RenderOptions) -> Result<Picture> {
    if options.counts {
        return Err(Error::Invalid(
            "counts applies to SOM mapping files, not to Caffe files".into(),
        ));
    }
    if let Some(k) = options.frame {
        return Err(Error::Invalid(format!(
            "frame {k}: Caffe files have no frames (use layer to pick a conv layer)"
        )));
    }
    match detect_kind(&data) {
        Some(FileKind::Model) => {
            let model = read_model(data)?;
            filters_picture(&model, options.layer.as_deref())
        }
        Some(FileKind::Mean) => {
            if let Some(l) = &options.layer {
                return Err(Error::Invalid(format!(
                    "layer {l:?}: a mean file has no layers"
                )));
            }
            mean_picture(&read_blob_proto(data)?.tensor("BlobProto")?)
        }
        Some(kind) => Err(Error::Invalid(format!(
            "a Caffe {} has no picture; render a .caffemodel's conv layer or a mean file",
            kind.name()
        ))),
        None => Err(Error::Invalid(
            "not a Caffe model, mean file, blob vector or solver state".into(),
        )),
    }
}

/// The `N x C x H x W` weights of a layer, if it has filters: blob 0 is 4-d and either
/// the layer is a (de)convolution or the shape stays 4-d after Caffe's squeezing of
/// legacy `(1, 1, M, N)` shapes.
pub fn filter_dims(layer: &RawLayer) -> Option<[usize; 4]> {
    let blob = layer.blobs.first()?;
    let path = format!("layer {} blob 0", layer.name);
    let dims = blob.shape_dims(&path).ok()?;
    let conv = matches!(layer.type_name.as_str(), "Convolution" | "Deconvolution");
    let squeezed = blob.legacy_squeezed_shape(&path).ok()?;
    match (&dims[..], conv || squeezed.len() == 4) {
        (&[n, c, h, w], true) => Some([n, c, h, w]),
        _ => None,
    }
}

/// `name (N x C x H x W)` of every layer with filters, comma separated.
pub fn filter_layers(model: &Model) -> String {
    let list: Vec<String> = model
        .layers
        .iter()
        .filter_map(|l| filter_dims(l).map(|[n, c, h, w]| format!("{} ({n}x{c}x{h}x{w})", l.name)))
        .collect();
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}

/// Planar `[.., 3, H, W]` images in Caffe's BGR channel order with their channel
/// planes reversed, so that the tableau's RGB tiles show them in their own colours;
/// other channel counts are returned as they are. `plane` is `H * W`.
fn bgr_as_rgb(mut values: Vec<f32>, channels: usize, plane: usize) -> Vec<f32> {
    if channels == 3 && plane > 0 {
        for image in values.chunks_exact_mut(3 * plane) {
            let (blue, rest) = image.split_at_mut(plane);
            blue.swap_with_slice(&mut rest[plane..]);
        }
    }
    values
}

/// The filter tableau of layer `name` (see the module docs).
pub fn filters_picture(model: &Model, name: Option<&str>) -> Result<Picture> {
    let Some(name) = name else {
        return Err(Error::Invalid(format!(
            "choose a conv layer to draw (--layer NAME); layers with 4-d weights: {}",
            filter_layers(model)
        )));
    };
    let layer = model.layer(name).ok_or_else(|| {
        Error::Invalid(format!(
            "no layer {name:?} in this model; layers with 4-d weights: {}",
            filter_layers(model)
        ))
    })?;
    let Some([n, c, h, w]) = filter_dims(layer) else {
        let shape = match layer.blobs.first() {
            None => "no weights".to_string(),
            Some(b) => format!(
                "weights of shape {:?}",
                b.legacy_squeezed_shape(name).unwrap_or_default()
            ),
        };
        return Err(Error::Invalid(format!(
            "layer {name:?} ({}) has {shape}, not 4-d filters; layers with 4-d weights: {}",
            if layer.type_name.is_empty() {
                "untyped"
            } else {
                &layer.type_name
            },
            filter_layers(model)
        )));
    };
    let t = layer.blobs[0].tensor(&format!("layer {name} blob 0"))?;
    let values = bgr_as_rgb(t.cast(DType::F32)?.to_vec::<f32>()?, c, h * w);
    let per = c * h * w;
    let blocks = (0..n)
        .map(|i| Block::chw(&values, i * per, c, h, w))
        .collect::<Result<Vec<_>>>()?;
    let image = enlarge(tableau(&blocks, Colormap::Viridis)?, h.min(w))?;
    let unit = if c == 1 { "filter" } else { "channel tile" };
    Ok(Picture {
        image,
        legend: Legend {
            what: format!(
                "layer {name} ({}), {} {c}x{h}x{w}",
                if layer.type_name.is_empty() {
                    "untyped"
                } else {
                    &layer.type_name
                },
                count(n, "filter", "filters")
            ),
            frame: None,
            time: None,
            stats: Stats::of(&values),
            scale: colour_scale(
                n,
                h,
                w,
                c,
                Colormap::Viridis,
                unit,
                "RGB from BGR, each filter on its own scale",
            ),
        },
    })
}

/// A mean image: leading unit axes dropped, then `[H, W]` or `[C, H, W]`.
pub fn mean_picture(t: &tensorfmt_core::Tensor) -> Result<Picture> {
    let mut dims: &[usize] = t.dims();
    while dims.len() > 3 && dims[0] == 1 {
        dims = &dims[1..];
    }
    let (c, h, w) = match *dims {
        [h, w] => (1, h, w),
        [c, h, w] => (c, h, w),
        _ => {
            return Err(Error::Invalid(format!(
                "a mean blob of shape {:?} is not an image",
                t.dims()
            )))
        }
    };
    let values = bgr_as_rgb(t.cast(DType::F32)?.to_vec::<f32>()?, c, h * w);
    let whole = Block::chw(&values, 0, c, h, w)?;
    let blocks = if c == 1 || c == 3 {
        vec![whole]
    } else {
        (0..c)
            .map(|i| whole.channel(i))
            .collect::<Result<Vec<_>>>()?
    };
    let image = enlarge(tableau(&blocks, Colormap::Viridis)?, h.min(w))?;
    Ok(Picture {
        image,
        legend: Legend {
            what: format!("mean image {c}x{h}x{w}"),
            frame: None,
            time: None,
            stats: Stats::of(&values),
            scale: colour_scale(
                blocks.len(),
                h,
                w,
                blocks[0].channels(),
                Colormap::Viridis,
                "channel",
                "RGB from BGR, one scale",
            ),
        },
    })
}
