//! Spaces and data specs, with Pylearn2's numeric semantics and a Rust-native API.
//!
//! Its own crate over `tensorfmt-core` (tensors, dtypes): what the Python package's
//! `tensorfmt.spaces` checks itself against, and what any Rust user of spaces depends
//! on; the format crates and the facade know nothing of it.
//!
//! A **space** says how one mini-batch is formatted: [`VectorSpace`] (an `(n, dim)`
//! matrix), [`Conv2DSpace`] (a 4-D image batch whose axes `b`, `c`, `0`, `1` come in a
//! chosen [`Axes`] order), [`IndexSpace`] (integer labels), [`CompositeSpace`] (a tuple
//! of sub-batches, nestable) and [`NullSpace`] (no data), all wrapped in [`Space`]. A
//! **source** ([`Source`]) names which data is meant, and a **data spec** is a
//! `(space, source)` pair of identical structure. A [`Batch`] is a tensor, a tuple of
//! batches or nothing.
//!
//! Every space validates batches ([`Space::validate`]: kind, rank, sizes per axis, the
//! dtype rule, label range), reports batch sizes, total dimensions and zero "origin"
//! batches, and converts batches into other spaces ([`Space::format_as`]) without the
//! caller thinking about transposes. Illegal conversions are typed [`SpaceError`]s that
//! name both spaces. [`DataSpecsMapping`] flattens a nested spec into unique leaves and
//! nests flat data back. [`Rearrange`] / [`rearrange`] apply an einops-like pattern
//! (`"b c 0 1 -> b 0 1 c"`) to any tensor.
//!
//! Differences from Pylearn2 (spec §11): axes must be a permutation; conv2d -> conv2d
//! needs equal image geometry; labels are range-checked; merged one-hots cap duplicates
//! at 1; null -> null is a no-op and composite totals skip null components; origins of
//! every space are in the space dtype and `n = 0` is allowed; a string never matches a
//! composite source; results are validated against the target in debug builds. Not
//! ported: sparse batches, complex dtypes, sequence spaces, the symbolic (Theano) API.
//!
//! # Example: features and targets
//!
//! The seed document's spaces and data specs, a dataset batch served once per unique
//! request, and the features reformatted for a convolutional model:
//!
//! ```
//! use tensorfmt_core::{DType, Order, Tensor};
//! use tensorfmt_spaces::{Axes, Batch, Conv2DSpace, DataSpecsMapping, Nested, Source, Space};
//!
//! let input_vecspace = Space::vector(32 * 32 * 3);
//! let input_convspace = Space::from(Conv2DSpace::new(32, 32, 3)?.with_axes(Axes::BC01));
//! let target_space = Space::vector(10);
//!
//! // (CompositeSpace((input_vecspace, CompositeSpace((input_convspace, target_space)))),
//! //  ("features", ("features", "targets")))
//! let space = Space::composite([
//!     input_vecspace.clone(),
//!     Space::composite([input_convspace.clone(), target_space.clone()]),
//! ]);
//! let source = Source::tuple(["features".into(), Source::tuple(["features".into(), "targets".into()])]);
//! let mapping = DataSpecsMapping::new(&space, &source)?;
//!
//! let flat_source = mapping.flatten(&source)?;
//! assert_eq!(flat_source, vec!["features".into(), "features".into(), "targets".into()]);
//! let flat_space = mapping.flatten(&space)?;
//! assert_eq!(flat_space, vec![input_vecspace.clone(), input_convspace.clone(), target_space.clone()]);
//! assert_eq!(mapping.nest(&flat_source)?, source);
//! assert_eq!(mapping.nest(&flat_space)?, space);
//! let leaf = |i| Nested::Leaf(i);
//! assert_eq!(mapping.nest(&[leaf(1), leaf(2), leaf(3)])?,
//!            Nested::Tuple(vec![leaf(1), Nested::Tuple(vec![leaf(2), leaf(3)])]));
//!
//! // A dataset stores features as a matrix and targets as one-hot rows; serve the
//! // flat request, then nest it for the model and its cost.
//! let n = 4;
//! let features = Tensor::from_vec((0..n * 3072).map(|i| i as f32).collect(), [n, 3072], Order::RowMajor)?;
//! let targets = Tensor::zeros(DType::F32, [n, 10], Order::RowMajor)?;
//! let stored = [(input_vecspace.clone(), Batch::from(features)), (target_space.clone(), Batch::from(targets))];
//! let flat_batches = mapping
//!     .flat_specs()
//!     .iter()
//!     .map(|(want, name)| {
//!         let (have, data) = if name == "features" { &stored[0] } else { &stored[1] };
//!         have.format_as(data, want)
//!     })
//!     .collect::<Result<Vec<Batch>, _>>()?;
//! let nested = mapping.nest(&flat_batches)?;
//! space.validate(&nested)?;
//! assert_eq!(space.batch_size(&nested)?, n);
//! let conv = nested.children().unwrap()[1].children().unwrap()[0].as_tensor().unwrap();
//! assert_eq!(conv.dims(), &[4, 3, 32, 32]);
//! // Vector element (row 0, col 1, channel 2) of example 0 is at index (0*32 + 1)*3 + 2.
//! assert_eq!(conv.get::<f32>(&[0, 2, 0, 1])?, 5.0);
//!
//! // A duplicate (same space AND same source) is requested once.
//! let twice = Space::composite([
//!     Space::composite([input_vecspace.clone(), target_space.clone()]),
//!     Space::composite([input_vecspace.clone(), target_space.clone()]),
//! ]);
//! let pair = Source::tuple(["features".into(), "targets".into()]);
//! let m2 = DataSpecsMapping::new(&twice, &Source::tuple([pair.clone(), pair.clone()]))?;
//! assert_eq!(m2.flatten(&twice)?, vec![input_vecspace.clone(), target_space.clone()]);
//! assert_eq!(m2.nest(&[leaf(1), leaf(2)])?,
//!            Nested::Tuple(vec![Nested::Tuple(vec![leaf(1), leaf(2)]), Nested::Tuple(vec![leaf(1), leaf(2)])]));
//!
//! // Structure mismatches are errors.
//! let two = Space::composite([input_vecspace.clone(), input_convspace.clone()]);
//! assert!(DataSpecsMapping::new(&two, &"features".into()).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod axes;
mod batch;
mod conv2d;
mod convert;
mod data_specs;
mod display;
mod dtype_rule;
mod error;
mod index;
mod rearrange;
mod spaces;
mod vector;

#[cfg(test)]
mod tests;

pub use axes::{Axes, Axis};
pub use batch::Batch;
pub use conv2d::Conv2DSpace;
pub use data_specs::{DataSpecsMapping, Nestable, Nested, Source};
pub use dtype_rule::DEFAULT_FLOAT;
pub use error::{Result, SpaceError};
pub use index::{IndexSpace, OneHot};
pub use rearrange::{rearrange, Rearrange};
pub use spaces::{CompositeSpace, NullSpace, Space};
pub use vector::VectorSpace;
