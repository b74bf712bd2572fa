//! An ONNX model described from ranged reads (see [`tensorfmt_core::ranged`]): the
//! structure walker fetches the model's header fields, the graph's name, inputs and
//! outputs, and every initializer but its values (`raw_data`, `float_data`,
//! `double_data`); nodes are only counted, so they are skipped too. The reader then
//! opens the image, and an initializer stored as `raw_data` is a zero-copy slice of it
//! whose offset is where its bytes lie.
//!
//! ```
//! use tensorfmt_core::{ranged::SparseImage, Order, Tensor, TensorFile};
//! let w = Tensor::from_vec(vec![0.25f32; 4096], [64, 64], Order::RowMajor)?;
//! let mut file = Vec::new();
//! tensorfmt_onnx::write_tensors(&mut file, &[("fc.weight".into(), w)])?;
//! let mut src = |o: u64, l: u64| Ok(bytes::Bytes::copy_from_slice(&file[o as usize..(o + l) as usize]));
//! let mut image = SparseImage::new(&mut src, file.len() as u64, 1024, u64::MAX)?;
//! tensorfmt_onnx::ranged::fetch_structure(&mut image)?;
//! assert!(image.fetched() <= 2048); // of 16 KiB: the values stay unread
//! let m = tensorfmt_onnx::read_model_file(image.into_bytes(), &Default::default())?;
//! assert_eq!(m.initializers[0].1.dims(), &[64, 64]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use tensorfmt_core::ranged::{walk_protobuf, ProtoField, SparseImage};

use crate::error::Result;

/// Payloads shorter than this are fetched with their neighbours anyway.
const SKIP_MIN: u64 = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Msg {
    Model,
    Graph,
    Tensor,
    Node,
    Attribute,
    Sparse,
    Function,
    Training,
}

/// What the reader ([`crate::read_model_file`]) decodes of each message: the rest is
/// skipped (payloads), or fetched where it is small structure.
fn schema(msg: Msg, field: u32) -> ProtoField<Msg> {
    use ProtoField::{Fetch, Message, Payload};
    match (msg, field) {
        (Msg::Model, 7) => Message(Msg::Graph),
        // ir_version, producer name and version, opset imports, metadata_props
        (Msg::Model, 1 | 2 | 3 | 8 | 14) => Fetch,
        (Msg::Graph, 5) => Message(Msg::Tensor),
        (Msg::Graph, 15) => Message(Msg::Sparse),
        // name, inputs, outputs
        (Msg::Graph, 2 | 11 | 12) => Fetch,
        // raw_data, float_data, double_data (fixed-width, so their count is their length)
        (Msg::Tensor, 9 | 4 | 10) => Payload,
        (Msg::Tensor, _) => Fetch,
        (Msg::Sparse, 1 | 2) => Message(Msg::Tensor),
        (Msg::Sparse, 3) => Fetch,
        // The reader walks nodes, functions and training graphs for tensors with
        // external data (attributes t, tensors, sparse tensors, subgraphs), and names
        // nodes and attributes in its errors.
        (Msg::Model, 20) => Message(Msg::Training),
        (Msg::Model, 25) => Message(Msg::Function),
        (Msg::Training, 1 | 2) => Message(Msg::Graph),
        (Msg::Function, 7) => Message(Msg::Node),
        (Msg::Function, 11) => Message(Msg::Attribute),
        (Msg::Function, 1) => Fetch,
        (Msg::Graph, 1) => Message(Msg::Node),
        (Msg::Node, 5) => Message(Msg::Attribute),
        (Msg::Node, 3) => Fetch,
        (Msg::Attribute, 5 | 10) => Message(Msg::Tensor),
        (Msg::Attribute, 6 | 11) => Message(Msg::Graph),
        (Msg::Attribute, 22 | 23) => Message(Msg::Sparse),
        (Msg::Attribute, 1) => Fetch,
        // The rest is not read: keys and lengths suffice.
        _ => Payload,
    }
}

/// Fetches into `image` what [`crate::read_model_file`] looks at to open the model.
pub fn fetch_structure(image: &mut SparseImage<'_>) -> Result<()> {
    let len = image.len();
    walk_protobuf(image, 0, len, Msg::Model, &schema, SKIP_MIN)?;
    Ok(())
}

/// Opens an image filled by [`fetch_structure`] (or the whole file) and says where each
/// initializer's values lie: `raw_data` is a zero-copy slice of the image, so its
/// offset is exact; external data is a range of the file it names
/// ([`Placement::Beside`](tensorfmt_core::ranged::Placement::Beside), its location checked by its text, its range by the caller
/// against that file's size); values decoded from typed fields (`float_data`,
/// `int64_data`...) are listed as not virtual.
pub fn describe(
    image: bytes::Bytes,
    options: &tensorfmt_core::ReadOptions,
) -> Result<Vec<tensorfmt_core::ranged::VirtualTensor>> {
    use crate::read::Slot;
    use tensorfmt_core::ranged::{BesideFile, Placement, VirtualTensor};
    use tensorfmt_core::{SourceLayout, TensorInfo};
    let model = crate::read_model_file_described(image.clone(), options)?;
    let (base, end) = (
        image.as_ptr() as usize,
        image.as_ptr() as usize + image.len(),
    );
    let tensor = |slot| {
        let (info, placement) = match slot {
            Slot::Read(name, t) => {
                let at = t.bytes().as_ptr() as usize;
                let inside = !t.bytes().is_empty() && at >= base && at + t.bytes().len() <= end;
                let placement = if inside {
                    Placement::Bytes {
                        layout: SourceLayout::contiguous(
                            (at - base) as u64,
                            t.bytes().len() as u64,
                        ),
                        big_endian: false,
                    }
                } else if t.bytes().is_empty() {
                    Placement::NotVirtual("an empty tensor".into())
                } else {
                    Placement::NotVirtual(
                        "stored in a typed field (float_data, int64_data...), decoded by the \
                         reader; only raw_data is a byte range"
                            .into(),
                    )
                };
                (
                    TensorInfo::new(name, t.dtype(), t.shape().clone()),
                    placement,
                )
            }
            Slot::Sparse(s) => (
                s.info(),
                Placement::NotVirtual("a sparse initializer, densified by the reader".into()),
            ),
            Slot::Unread(u) => {
                let placement = if u.nbytes == 0 {
                    Placement::NotVirtual("an empty tensor".into())
                } else {
                    Placement::Beside {
                        file: BesideFile {
                            location: u.location.clone(),
                            to_end: u.length.is_none(),
                        },
                        layout: SourceLayout::contiguous(u.offset, u.nbytes),
                    }
                };
                (u.info.clone(), placement)
            }
        };
        VirtualTensor {
            info,
            placement,
            frame_axis: false,
        }
    };
    Ok(model.slots().into_iter().map(tensor).collect())
}
