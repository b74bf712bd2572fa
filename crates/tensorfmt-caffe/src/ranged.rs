//! A Caffe file described from ranged reads (see [`tensorfmt_core::ranged`]): the
//! structure walker fetches every key, length and non-blob field of the NetParameter
//! (its layers' names, types and parameters, each blob's shape), BlobProto,
//! BlobProtoVector or SolverState, and skips the packed blob values; the reader then
//! opens the image and declares each packed blob's byte run.
//!
//! ```
//! use tensorfmt_caffe::{encode_weights_model, RawBlob, WeightsLayer};
//! use tensorfmt_core::{ranged::SparseImage, TensorFile};
//! let file = encode_weights_model(Some("net"), &[WeightsLayer {
//!     name: "fc".into(),
//!     type_name: Some("InnerProduct".into()),
//!     blobs: vec![RawBlob::from_f32(&[64, 64], &[0.5; 4096])],
//! }]);
//! let mut src = |o: u64, l: u64| Ok(bytes::Bytes::copy_from_slice(&file[o as usize..(o + l) as usize]));
//! let mut image = SparseImage::new(&mut src, file.len() as u64, 1024, u64::MAX)?;
//! tensorfmt_caffe::ranged::fetch_structure(&mut image, &Default::default())?;
//! assert!(image.fetched() <= 5 << 10); // of 16 KiB: the values stay unread
//! let f = tensorfmt_caffe::open_tensor_file(image.into_bytes(), &Default::default())?;
//! assert_eq!(f.tensors()[0].name, "fc/0");
//! assert!(f.source_layout("fc/0").is_some());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use tensorfmt_core::ranged::{walk_protobuf, ProtoField, SparseImage};
use tensorfmt_core::ReadOptions;

use crate::error::Result;
use crate::read::{classify, FileKind};

/// Blob payloads shorter than this are fetched with their neighbours anyway.
const SKIP_MIN: u64 = 1024;

/// The message types the walk descends into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Msg {
    Net,
    /// `LayerParameter` (field 100 of a net).
    Layer,
    /// `V1LayerParameter` (field 2 of a net).
    V1Layer,
    /// `V0LayerParameter` (field 1 of a V1 layer).
    V0Layer,
    Blob,
    BlobVector,
    SolverState,
}

/// What each field of each message is (caffe.proto, with OpenCV's raw_data).
fn schema(msg: Msg, field: u32) -> ProtoField<Msg> {
    use ProtoField::{Fetch, Message, Payload};
    match (msg, field) {
        (Msg::Net, 100) => Message(Msg::Layer),
        (Msg::Net, 2) => Message(Msg::V1Layer),
        (Msg::Layer, 7) | (Msg::V1Layer, 6) | (Msg::V0Layer, 50) => Message(Msg::Blob),
        (Msg::V1Layer, 1) => Message(Msg::V0Layer),
        (Msg::BlobVector, 1) | (Msg::SolverState, 3) => Message(Msg::Blob),
        // data, diff, double_data, double_diff, raw_data
        (Msg::Blob, 5 | 6 | 8 | 9 | 12) => Payload,
        _ => Fetch,
    }
}

/// Fetches into `image` what the Caffe reader looks at to open the file and declare
/// where its blobs lie: everything but the packed blob values. The file kind comes
/// from `options.kind` or from the first block, as the reader decides it.
pub fn fetch_structure(image: &mut SparseImage<'_>, options: &ReadOptions) -> Result<()> {
    let len = image.len();
    let kind = match options.kind.as_deref().and_then(FileKind::from_name) {
        Some(k) => Some(k),
        None => {
            let head = image.get(0, 4096)?.to_vec();
            classify(&head, len, false)
        }
    };
    let root = match kind {
        Some(FileKind::Mean) => Msg::Blob,
        Some(FileKind::BlobVector) => Msg::BlobVector,
        Some(FileKind::SolverState) => Msg::SolverState,
        Some(FileKind::Model) | None => Msg::Net,
    };
    walk_protobuf(image, 0, len, root, &schema, SKIP_MIN)?;
    Ok(())
}

/// Opens an image filled by [`fetch_structure`] (or the whole file) and says where each
/// blob's values lie: a blob stored as one packed run is that run; values the reader
/// decodes (unpacked fields, OpenCV's half-precision `raw_data`, several packed runs)
/// are listed as not virtual.
pub fn describe(
    image: bytes::Bytes,
    options: &ReadOptions,
) -> Result<Vec<tensorfmt_core::ranged::VirtualTensor>> {
    use tensorfmt_core::ranged::{Placement, VirtualTensor};
    let file = crate::open_tensor_file(image, options)?;
    let layouts = file.source_layouts();
    Ok(file
        .tensors()
        .into_iter()
        .zip(layouts)
        .map(|(info, layout)| VirtualTensor {
            info,
            placement: match layout {
                Some(layout) => Placement::Bytes {
                    layout,
                    big_endian: false,
                },
                None => Placement::NotVirtual(
                    "values decoded by the reader (unpacked fields, half-precision raw_data or \
                     several packed runs), not one stored run"
                        .into(),
                ),
            },
            frame_axis: false,
        })
        .collect())
}
