//! Conversions between [`Tensor`] and `ndarray::ArrayD` (feature `ndarray`).

use ndarray::{ArrayD, IxDyn, ShapeBuilder};

use crate::{Element, Error, Order, Result, Tensor};

impl Tensor {
    /// Copies the tensor into an owned `ArrayD<T>` with the same logical shape and the
    /// tensor's memory order (so no transpose happens).
    ///
    /// ```
    /// use tensorfmt_core::{Order, Tensor};
    /// let t = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], [2, 3], Order::ColumnMajor)?;
    /// let a = t.to_ndarray::<i32>()?;
    /// assert_eq!(a[[1, 0]], 2);
    /// assert_eq!(Tensor::from_ndarray(a)?.get::<i32>(&[0, 2])?, 5);
    /// # Ok::<(), tensorfmt_core::Error>(())
    /// ```
    pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>> {
        let v = self.to_vec::<T>()?;
        let dims = IxDyn(self.dims());
        let shape = match self.order() {
            Order::RowMajor => dims.into_shape_with_order(),
            Order::ColumnMajor => dims.f(),
        };
        ArrayD::from_shape_vec(shape, v).map_err(|e| Error::Invalid(e.to_string()))
    }

    /// A borrowed `ArrayViewD<T>` over the tensor's bytes (zero copy; needs aligned bytes).
    pub fn view_ndarray<T: Element>(&self) -> Result<ndarray::ArrayViewD<'_, T>> {
        let s = self.as_slice::<T>()?;
        let dims = IxDyn(self.dims());
        let shape = match self.order() {
            Order::RowMajor => dims.into_shape_with_order(),
            Order::ColumnMajor => dims.f(),
        };
        ndarray::ArrayViewD::from_shape(shape, s).map_err(|e| Error::Invalid(e.to_string()))
    }

    /// Takes an `ArrayD<T>`; standard (C) or Fortran layouts become row- or column-major
    /// tensors without copying, any other layout is copied into row-major order.
    pub fn from_ndarray<T: Element>(a: ArrayD<T>) -> Result<Tensor> {
        let dims = a.shape().to_vec();
        if a.is_standard_layout() {
            let (v, _) = a.into_raw_vec_and_offset();
            return Tensor::from_vec(v, dims, Order::RowMajor);
        }
        if a.t().is_standard_layout() {
            let (v, _) = a.into_raw_vec_and_offset();
            return Tensor::from_vec(v, dims, Order::ColumnMajor);
        }
        let v: Vec<T> = a.iter().copied().collect();
        Tensor::from_vec(v, dims, Order::RowMajor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_views() {
        let t =
            Tensor::from_vec((0..24).collect::<Vec<u32>>(), [2, 3, 4], Order::RowMajor).unwrap();
        let a = t.to_ndarray::<u32>().unwrap();
        assert_eq!(a[[1, 2, 3]], 23);
        assert_eq!(Tensor::from_ndarray(a.clone()).unwrap(), t);
        let v = t.view_ndarray::<u32>().unwrap();
        assert_eq!(v[[0, 1, 2]], 6);
        let permuted = a.permuted_axes(vec![2, 0, 1]);
        let p = Tensor::from_ndarray(permuted.to_owned()).unwrap();
        assert_eq!(p.get::<u32>(&[3, 1, 2]).unwrap(), 23);
        assert!(t.to_ndarray::<f32>().is_err());
    }
}
