//! `format_as`: converting a batch from one space into another (the legality matrix of
//! spec §9, with the upstream quirks of §11 rejected).

use super::axes::Axes;
use super::batch::{cast_to, concat_columns, split_columns, Batch};
use super::error::{Result, SpaceError};
use super::index::labels;
use super::{CompositeSpace, Conv2DSpace, IndexSpace, OneHot, Space, VectorSpace, DEFAULT_FLOAT};
use tensorfmt_core::{Order, Tensor};

impl Space {
    /// Converts `batch`, a valid batch of `self`, into a batch of `target`.
    ///
    /// Legal conversions (everything else is [`SpaceError::Unsupported`], naming both
    /// spaces):
    ///
    /// | from \ to | Vector | Conv2D | Index | Composite | Null |
    /// |---|---|---|---|---|---|
    /// | Vector | equal dim; cast | reshape to `b 0 1 c`, transpose | – | column split, recursive | – |
    /// | Conv2D | transpose to `b 0 1 c`, flatten | transpose (same geometry) | – | – | – |
    /// | Index | one-hot: merge (dim `max_labels`) or concatenate (dim `dim * max_labels`) | – (Incompatible) | same dim and max_labels; cast | – (Incompatible) | – (Incompatible) |
    /// | Composite | depth-first concatenation | – | – | same tree, leaf-wise | – |
    /// | Null | – | – | – | – | no-op |
    ///
    /// Steps: validate the batch against `self`; check total dimensions (a
    /// [`SpaceError::DimMismatch`] comes before `Unsupported`, as upstream); convert; cast
    /// to the target dtype (a dtype-agnostic target keeps the batch dtype; casts are
    /// [`Tensor::cast`]'s: float -> int saturates rather than wrapping). In debug builds
    /// the result is validated against `target`.
    ///
    /// Every vector form of an image uses one canonical element order: per example,
    /// `index = (row * cols + col) * channels + ch`, whatever the source axes. A
    /// composite formatted into a vector gives each component the width of its total
    /// dimension, as Pylearn2 does: an [`IndexSpace`] component has `dim` columns, its
    /// one-hots merged when `dim == max_labels`, concatenated when `max_labels == 1`,
    /// else [`SpaceError::OneHotWidth`]. Width-0 components take part (a dtype-agnostic
    /// target takes their dtype too); a composite without any non-null component has no
    /// batch size and is [`SpaceError::Incompatible`] (Pylearn2: a ValueError). Composite
    /// -> composite checks the total dimensions first, then converts leaf by leaf.
    ///
    /// ```
    /// use tensorfmt_core::{Order, Tensor};
    /// use tensorfmt_spaces::{Axes, Batch, Conv2DSpace, Space};
    /// // Conv2D((3, 2), 2 channels, axes c 0 1 b): a batch of shape (2, 3, 2, n).
    /// let conv = Space::from(Conv2DSpace::new(3, 2, 2)?.with_axes(Axes::C01B));
    /// // Value = 100 * ch + 10 * row + col, one example.
    /// let v: Vec<f32> = (0..2).flat_map(|ch| (0..3).flat_map(move |r| (0..2)
    ///     .map(move |c| (100 * ch + 10 * r + c) as f32))).collect();
    /// let batch = Batch::from(Tensor::from_vec(v, [2, 3, 2, 1], Order::RowMajor)?);
    /// let flat = conv.format_as(&batch, &Space::vector(12))?;
    /// assert_eq!(&flat.as_tensor().unwrap().to_vec::<f32>()?[..6], &[0.0, 100.0, 1.0, 101.0, 10.0, 110.0]);
    /// // And back: the identity.
    /// assert_eq!(Space::vector(12).format_as(&flat, &conv)?, batch);
    /// # Ok::<(), tensorfmt_spaces::SpaceError>(())
    /// ```
    pub fn format_as(&self, batch: &Batch, target: &Space) -> Result<Batch> {
        self.validate(batch)?;
        let out = convert(self, batch, target)?;
        if cfg!(debug_assertions) {
            target.validate(&out)?;
        }
        Ok(out)
    }

    /// The inverse direction: `batch` is a batch of `formatted` (obtained by
    /// `self.format_as(_, formatted)`); returns it formatted back into `self`.
    pub fn undo_format_as(&self, batch: &Batch, formatted: &Space) -> Result<Batch> {
        formatted.format_as(batch, self)
    }
}

fn unsupported(from: &Space, to: &Space) -> SpaceError {
    SpaceError::Unsupported {
        from: from.to_string(),
        to: to.to_string(),
    }
}

fn incompatible(from: &Space, to: &Space, reason: String) -> SpaceError {
    SpaceError::Incompatible {
        from: from.to_string(),
        to: to.to_string(),
        reason,
    }
}

/// The upstream size check: equal total dimensions (a null space has none: unsupported).
fn check_totals(from: &Space, to: &Space) -> Result<()> {
    let (Ok(a), Ok(b)) = (from.total_dimension(), to.total_dimension()) else {
        return Err(unsupported(from, to));
    };
    if a != b {
        return Err(SpaceError::DimMismatch {
            from: from.to_string(),
            to: to.to_string(),
            from_dim: a,
            to_dim: b,
        });
    }
    Ok(())
}

fn is_identity(perm: &[usize]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| i == p)
}

/// `(n, rows*cols*ch)` row-major -> 4-D in `dst` axes.
fn vector_to_conv(t: &Tensor, dst: &Conv2DSpace) -> Result<Tensor> {
    let t = t.to_order(Order::RowMajor)?;
    let n = t.dims()[0];
    let canonical = t.reshape([n, dst.rows(), dst.cols(), dst.channels()])?;
    let perm = Axes::B01C.permutation_to(&dst.axes());
    let out = if is_identity(&perm) {
        canonical
    } else {
        canonical.permute(&perm)?
    };
    cast_to(out, dst.dtype())
}

/// 4-D in `src` axes -> `(n, rows*cols*ch)` in the canonical `b 0 1 c` order.
fn conv_to_vector(t: &Tensor, src: &Conv2DSpace, dst: &VectorSpace) -> Result<Tensor> {
    let perm = src.axes().permutation_to(&Axes::B01C);
    let t = t.to_order(Order::RowMajor)?;
    let canonical = if is_identity(&perm) {
        t
    } else {
        t.permute(&perm)?
    };
    let n = canonical.dims()[0];
    cast_to(canonical.reshape([n, src.total_dimension()])?, dst.dtype())
}

/// Converts a batch already validated against `src`.
fn convert(src: &Space, batch: &Batch, dst: &Space) -> Result<Batch> {
    use Space::*;
    match (src, dst) {
        (Null(_), Null(_)) => Ok(Batch::None),
        (Null(_), _) | (Vector(_) | Conv2D(_) | Composite(_), Null(_)) => {
            Err(unsupported(src, dst))
        }
        (Vector(_), Vector(d)) => {
            check_totals(src, dst)?;
            let t = src.tensor(batch)?.to_order(Order::RowMajor)?;
            Ok(cast_to(t, d.dtype())?.into())
        }
        (Vector(_), Conv2D(d)) => {
            check_totals(src, dst)?;
            Ok(vector_to_conv(src.tensor(batch)?, d)?.into())
        }
        (Vector(s), Composite(d)) => {
            check_totals(src, dst)?;
            vector_to_composite(s, src.tensor(batch)?, d)
        }
        (Conv2D(s), Vector(d)) => {
            check_totals(src, dst)?;
            Ok(conv_to_vector(src.tensor(batch)?, s, d)?.into())
        }
        (Conv2D(s), Conv2D(d)) => {
            check_totals(src, dst)?;
            if (s.rows(), s.cols(), s.channels()) != (d.rows(), d.cols(), d.channels()) {
                return Err(incompatible(
                    src,
                    dst,
                    "the image geometry differs; only the axes order may change".into(),
                ));
            }
            let perm = s.axes().permutation_to(&d.axes());
            let t = src.tensor(batch)?.to_order(Order::RowMajor)?;
            let t = if is_identity(&perm) {
                t
            } else {
                t.permute(&perm)?
            };
            Ok(cast_to(t, d.dtype())?.into())
        }
        (Vector(_) | Conv2D(_) | Composite(_), Index(_))
        | (Conv2D(_), Composite(_))
        | (Composite(_), Conv2D(_)) => {
            check_totals(src, dst)?;
            Err(unsupported(src, dst))
        }
        (Index(s), Vector(d)) => {
            let mode = if d.dim() == s.one_hot_width(OneHot::Merge) {
                OneHot::Merge
            } else if d.dim() == s.one_hot_width(OneHot::Concatenate) {
                OneHot::Concatenate
            } else {
                return Err(SpaceError::OneHotWidth {
                    from: src.to_string(),
                    to: dst.to_string(),
                    merge: s.one_hot_width(OneHot::Merge),
                    concatenate: s.one_hot_width(OneHot::Concatenate),
                });
            };
            let dtype = d.dtype().unwrap_or(DEFAULT_FLOAT);
            Ok(s.one_hot(src.tensor(batch)?, mode, Some(dtype))?.into())
        }
        (Index(s), Index(d)) => index_to_index(src, s, src.tensor(batch)?, dst, d),
        // Pylearn2's IndexSpace size check: ValueError "Can't convert to <class>".
        (Index(_), _) => Err(incompatible(
            src,
            dst,
            "an IndexSpace formats only into a VectorSpace (one-hots) or an IndexSpace".into(),
        )),
        (Composite(s), Vector(d)) => composite_to_vector(src, s, batch, dst, d),
        (Composite(s), Composite(d)) => {
            // The total dimensions first, as upstream's `Space._format_as`; nested
            // composites are then walked without a size check of their own.
            check_totals(src, dst)?;
            composite_tree(src, s, batch, dst, d)
        }
    }
}

/// Composite -> composite, leaf by leaf (same tree; no size check of the composites).
fn composite_tree(
    src: &Space,
    s: &CompositeSpace,
    batch: &Batch,
    dst: &Space,
    d: &CompositeSpace,
) -> Result<Batch> {
    let items = batch.children().unwrap_or(&[]);
    if s.len() != d.len() {
        return Err(SpaceError::StructureMismatch(format!(
            "cannot format {src} into {dst}: {} components vs {}",
            s.len(),
            d.len()
        )));
    }
    let mut out = Vec::with_capacity(d.len());
    for ((a, b), item) in s.components().iter().zip(d.components()).zip(items) {
        out.push(match (a, b) {
            (Space::Composite(ac), Space::Composite(bc)) => composite_tree(a, ac, item, b, bc)?,
            (Space::Composite(_), _) | (_, Space::Composite(_)) => {
                return Err(SpaceError::StructureMismatch(format!(
                    "cannot format {src} into {dst}: different tree structures ({a} vs {b})"
                )))
            }
            _ => convert(a, item, b)?,
        });
    }
    Ok(Batch::Tuple(out))
}

fn index_to_index(
    src: &Space,
    s: &IndexSpace,
    t: &Tensor,
    dst: &Space,
    d: &IndexSpace,
) -> Result<Batch> {
    if (s.dim(), s.max_labels()) != (d.dim(), d.max_labels()) {
        return Err(incompatible(
            src,
            dst,
            format!(
                "the target has dim {} and max_labels {}, the source dim {} and max_labels {}",
                d.dim(),
                d.max_labels(),
                s.dim(),
                s.max_labels()
            ),
        ));
    }
    let t = t.to_order(Order::RowMajor)?;
    let out = cast_to(t.clone(), d.dtype())?;
    if out.dtype() != t.dtype() {
        // A narrowing integer cast must not change any label.
        let (before, after) = (labels(&t)?, labels(&out)?);
        if let Some(i) = before.iter().zip(&after).position(|(a, b)| a != b) {
            return Err(incompatible(
                src,
                dst,
                format!("label {} does not fit in {}", before[i], out.dtype()),
            ));
        }
    }
    Ok(out.into())
}

fn vector_to_composite(s: &VectorSpace, t: &Tensor, d: &CompositeSpace) -> Result<Batch> {
    let comps = d.components();
    let widths: Vec<usize> = comps
        .iter()
        .map(|c| match c {
            Space::Null(_) => Ok(0),
            c => c.total_dimension(),
        })
        .collect::<Result<_>>()?;
    let pieces = split_columns(t, &widths)?;
    let mut out = Vec::with_capacity(comps.len());
    for ((c, piece), w) in comps.iter().zip(pieces).zip(widths) {
        if let Space::Null(_) = c {
            out.push(Batch::None);
            continue;
        }
        let tmp = Space::Vector(VectorSpace::new(w).with_dtype(s.dtype())?);
        out.push(convert(&tmp, &Batch::Tensor(piece), c)?);
    }
    Ok(Batch::Tuple(out))
}

fn composite_to_vector(
    src: &Space,
    s: &CompositeSpace,
    batch: &Batch,
    dst: &Space,
    d: &VectorSpace,
) -> Result<Batch> {
    check_totals(src, dst)?;
    let n = src.batch_size_unchecked(batch)?;
    let items = batch.children().unwrap_or(&[]);
    let mut pieces = Vec::new();
    for (c, item) in s.components().iter().zip(items) {
        // A null component has no columns; a width-0 one takes part (its dtype counts,
        // as upstream's).
        if let Space::Null(_) = c {
            continue;
        }
        let tmp = Space::Vector(VectorSpace::new(c.total_dimension()?).with_dtype(d.dtype())?);
        if let Some(t) = convert(c, item, &tmp)?.into_tensor() {
            pieces.push(t);
        }
    }
    let Some(first) = pieces.first() else {
        // Pylearn2 concatenates an empty list (ValueError): no component, no batch size.
        return Err(incompatible(
            src,
            dst,
            "it has no component with data, so its batch has no batch size".into(),
        ));
    };
    let n = n.unwrap_or(first.dims()[0]);
    let dtype = d.dtype().unwrap_or(first.dtype());
    if pieces.iter().any(|p| p.dtype() != dtype) {
        let names: Vec<&str> = pieces.iter().map(|p| p.dtype().name()).collect();
        return Err(incompatible(
            src,
            dst,
            format!(
                "the components have differing dtypes ({}) and the target has no dtype of its own",
                names.join(", ")
            ),
        ));
    }
    Ok(concat_columns(&pieces, n, dtype)?.into())
}
