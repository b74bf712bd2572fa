//! PINK 2.5's spatial transforms of an image, bit for bit (docs/pink.md §3-§7):
//! the crop/pad to neuron size, the bilinear rotation in PINK's float32 operation
//! order, exact clockwise quarter turns, the up-down mirror, and the transform set
//! `t = flip * num_rot + q * (num_rot / 4) + i` in which angle `k * 2pi / num_rot` is
//! made as `q` exact quarter turns of a bilinear rotation by `i` steps.
//!
//! Images are square, row-major `[channels, d, d]` blocks of f32 (`x` = row, `y` =
//! column); every channel is transformed alike.
//!
//! ```
//! use tensorfmt_som::transform::{transform, Interpolation};
//! // A 3x3 image with one bright pixel at the top centre.
//! let img = [0., 1., 0., 0., 0., 0., 0., 0., 0.];
//! // num_rot 4: transform 1 is a quarter turn clockwise (top -> right).
//! let t = transform(&img, 1, 3, 3, 4, false, 1, Interpolation::Bilinear)?;
//! assert_eq!(t, vec![0., 0., 0., 0., 0., 1., 0., 0., 0.]);
//! // Transform 4 + 1 (with flips): the same, then mirrored upside down.
//! let t = transform(&img, 1, 3, 3, 4, true, 5, Interpolation::Bilinear)?;
//! assert_eq!(t, vec![0., 0., 0., 0., 0., 1., 0., 0., 0.]);
//! # Ok::<(), tensorfmt_som::SomError>(())
//! ```

use crate::{Result, SomError};

/// Interpolation of the rotations (PINK's `--interpolation`).
///
/// PINK 2.5's CPU path rotates bilinearly only: `NearestNeighbor` is accepted where
/// no interpolated rotation happens (1 or 4 rotations: quarter turns are exact) and
/// refused beyond, where PINK aborts (`rotate.h:78-81`).
///
/// ```
/// use tensorfmt_som::transform::Interpolation;
/// assert_eq!("bilinear".parse::<Interpolation>()?, Interpolation::Bilinear);
/// assert_eq!(Interpolation::default(), Interpolation::Bilinear);
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interpolation {
    /// Bilinear (PINK's default and its only CPU rotation).
    #[default]
    Bilinear,
    /// Nearest neighbour (PINK's GPU path; on the CPU only without interpolated angles).
    NearestNeighbor,
}

impl Interpolation {
    /// PINK's name (`bilinear`, `nearest_neighbor`).
    pub fn name(self) -> &'static str {
        match self {
            Interpolation::Bilinear => "bilinear",
            Interpolation::NearestNeighbor => "nearest_neighbor",
        }
    }
}

impl std::str::FromStr for Interpolation {
    type Err = SomError;
    fn from_str(s: &str) -> Result<Interpolation> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "bilinear" => Ok(Interpolation::Bilinear),
            "nearest_neighbor" | "nearest_neighbour" | "nearest" => {
                Ok(Interpolation::NearestNeighbor)
            }
            _ => Err(SomError::MapOption {
                option: "interpolation",
                value: s.to_string(),
                reason: "expected bilinear or nearest_neighbor".into(),
            }),
        }
    }
}

/// PINK's angle step `float32(2pi) / num_rot` (float32 division, `generate_rotated_images.h:69`).
///
/// ```
/// assert_eq!(tensorfmt_som::transform::angle_step(4), std::f32::consts::FRAC_PI_2);
/// ```
pub fn angle_step(num_rot: u32) -> f32 {
    (2.0 * std::f64::consts::PI) as f32 / num_rot as f32
}

/// Copies the centre of a `src_dim` square into a `dst_dim` square: a central crop
/// with margin `(src - dst) / 2`, or zero padding with margin `(dst - src) / 2`
/// (`resize.h:14-40`). `dst` must be zeroed by the caller where it pads.
pub fn resize(src: &[f32], src_dim: usize, dst: &mut [f32], dst_dim: usize) {
    let (sm, dm) = if src_dim >= dst_dim {
        ((src_dim - dst_dim) / 2, 0)
    } else {
        (0, (dst_dim - src_dim) / 2)
    };
    let n = src_dim.min(dst_dim);
    for i in 0..n {
        let s = (i + sm) * src_dim + sm;
        let d = (i + dm) * dst_dim + dm;
        dst[d..d + n].copy_from_slice(&src[s..s + n]);
    }
}

/// PINK's bilinear rotation by `alpha` radians (clockwise on screen) of a `src_dim`
/// square into a `dst_dim` square, centre `(src_dim - 1) / 2` onto `(dst_dim - 1) / 2`,
/// zero outside the source; every operation in PINK's float32 order (`rotate.h:16-67`).
pub fn rotate_bilinear(src: &[f32], src_dim: usize, dst: &mut [f32], dst_dim: usize, alpha: f32) {
    let cos = alpha.cos();
    let sin = alpha.sin();
    let src_c = (src_dim - 1) as f32 * 0.5;
    let dst_c = (dst_dim - 1) as f32 * 0.5;
    let last = (src_dim - 1) as f32;
    for x in 0..dst_dim {
        let px = x as f32 - dst_c;
        let (pxc, pxs) = (px * cos, px * sin);
        let row = &mut dst[x * dst_dim..(x + 1) * dst_dim];
        for (y, out) in row.iter_mut().enumerate() {
            let py = y as f32 - dst_c;
            let sx = pxc - py * sin + src_c;
            let sy = pxs + py * cos + src_c;
            if sx < 0.0 || sx > last || sy < 0.0 || sy > last {
                *out = 0.0;
                continue;
            }
            let ix = sx as usize;
            let iy = sy as usize;
            let rx = sx - ix as f32;
            let ry = sy - iy as f32;
            let cx = 1.0 - rx;
            let cy = 1.0 - ry;
            // At the last row or column the weight of the next one is exactly 0 (PINK
            // reads past the row there, harmlessly): clamp the index.
            let ix1 = (ix + 1).min(src_dim - 1);
            let iy1 = (iy + 1).min(src_dim - 1);
            *out = cx * cy * src[ix * src_dim + iy]
                + cx * ry * src[ix * src_dim + iy1]
                + rx * cy * src[ix1 * src_dim + iy]
                + rx * ry * src[ix1 * src_dim + iy1];
        }
    }
}

/// Clockwise quarter turn of an `n x n` square: `dst[x][y] = src[n-1-y][x]`
/// (`rotate_90_degrees.h:13-26`; `np.rot90(src, -1)`).
pub fn rotate_90<T: Copy>(src: &[T], dst: &mut [T], n: usize) {
    for x in 0..n {
        for y in 0..n {
            dst[x * n + y] = src[(n - 1 - y) * n + x];
        }
    }
}

/// Up-down mirror of an `n x n` square: row `i` becomes row `n-1-i` (`flip.h:13-30`).
pub fn flip<T: Copy>(src: &[T], dst: &mut [T], n: usize) {
    for i in 0..n {
        dst[(n - 1 - i) * n..(n - i) * n].copy_from_slice(&src[i * n..(i + 1) * n]);
    }
}

/// Checks the transform arguments shared by [`transform`] and the mapper.
pub(crate) fn check_num_rot(num_rot: u32, interpolation: Interpolation) -> Result<()> {
    if num_rot == 0 || (num_rot != 1 && !num_rot.is_multiple_of(4)) {
        return Err(SomError::MapOption {
            option: "num_rot",
            value: num_rot.to_string(),
            reason: "must be 1 or a multiple of 4 (as PINK requires)".into(),
        });
    }
    if interpolation == Interpolation::NearestNeighbor && num_rot > 4 {
        return Err(SomError::MapOption {
            option: "interpolation",
            value: format!("nearest_neighbor with num_rot {num_rot}"),
            reason: "PINK 2.5's CPU path has no nearest-neighbour rotation (it aborts beyond 4 rotations); use bilinear, or num_rot 1 or 4".into(),
        });
    }
    Ok(())
}

/// The base image of rotation step `i` (`i * angle_step` radians) at neuron size, one
/// channel: the crop/pad for `i = 0`, the bilinear rotation otherwise. `dst` is
/// overwritten.
pub(crate) fn base_rotation(
    src: &[f32],
    image_dim: usize,
    dst: &mut [f32],
    neuron_dim: usize,
    i: u32,
    step: f32,
) {
    if i == 0 {
        dst.fill(0.0);
        resize(src, image_dim, dst, neuron_dim);
    } else {
        rotate_bilinear(src, image_dim, dst, neuron_dim, i as f32 * step);
    }
}

/// PINK's spatial transform `t` of an image `[channels, image_dim, image_dim]`, at
/// neuron size `[channels, neuron_dim, neuron_dim]`: for `num_rot` rotations (1 or a
/// multiple of 4) and `t = flip * num_rot + k`, the image rotated clockwise by
/// `k * 2pi / num_rot` (exact quarter turns of a bilinear rotation by
/// `(k mod num_rot/4)` steps), then mirrored upside down when `t >= num_rot`.
/// Entry `t` of PINK's `SpatialTransformer` (`generate_rotated_images.h:53-199`).
#[allow(clippy::too_many_arguments)]
pub fn transform(
    image: &[f32],
    channels: usize,
    image_dim: usize,
    neuron_dim: usize,
    num_rot: u32,
    use_flip: bool,
    t: u32,
    interpolation: Interpolation,
) -> Result<Vec<f32>> {
    let Steps { flipped, q, i } = Steps::of(num_rot, use_flip, t, interpolation)?;
    check_image(image, channels, image_dim)?;
    let mut out = vec![0f32; output_len(channels, neuron_dim, "neuron_dim")?];
    let plane = neuron_dim * neuron_dim;
    let step = angle_step(num_rot);
    let mut tmp = vec![0f32; plane];
    for c in 0..channels {
        let src = &image[c * image_dim * image_dim..(c + 1) * image_dim * image_dim];
        let dst = &mut out[c * plane..(c + 1) * plane];
        base_rotation(src, image_dim, dst, neuron_dim, i, step);
        for _ in 0..q {
            rotate_90(dst, &mut tmp, neuron_dim);
            dst.copy_from_slice(&tmp);
        }
        if flipped {
            flip(dst, &mut tmp, neuron_dim);
            dst.copy_from_slice(&tmp);
        }
    }
    Ok(out)
}

/// The transform index of a stored `(flip, angle)` pair for `num_rot` rotations:
/// `k = rint(angle / step)` (PINK stores `angle = float32(k) * step` exactly,
/// `main_generic.h:188-196`), plus `num_rot` when flipped.
///
/// ```
/// use tensorfmt_som::transform::{angle_step, transform_index};
/// assert_eq!(transform_index(true, 3.0 * angle_step(360), 360), 363);
/// ```
pub fn transform_index(flipped: bool, angle: f32, num_rot: u32) -> u32 {
    let k = (angle as f64 / angle_step(num_rot) as f64).round();
    let k = if k.is_finite() && k > 0.0 {
        (k as u64 % num_rot as u64) as u32
    } else {
        0
    };
    k + if flipped { num_rot } else { 0 }
}

/// The inverse of [`transform`]: a neuron `[channels, neuron_dim, neuron_dim]` brought
/// into the frame of the image it best matched under transform `t`, at image size
/// `[channels, image_dim, image_dim]` (mirror undone, quarter turns undone exactly, then
/// the bilinear rotation by minus the small angle, centres matched as PINK matches them).
/// Where the neuron does not cover the image the result is 0.
///
/// ```
/// use tensorfmt_som::transform::{align, transform, Interpolation};
/// let img: Vec<f32> = (0..16).map(|v| v as f32).collect(); // 4x4
/// for t in 0..8 {
///     // Quarter turns and mirrors are exact, so align undoes transform.
///     let n = transform(&img, 1, 4, 4, 4, true, t, Interpolation::Bilinear)?;
///     assert_eq!(align(&n, 1, 4, 4, 4, true, t)?, img);
/// }
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
pub fn align(
    neuron: &[f32],
    channels: usize,
    neuron_dim: usize,
    image_dim: usize,
    num_rot: u32,
    use_flip: bool,
    t: u32,
) -> Result<Vec<f32>> {
    let Steps { flipped, q, i } = Steps::of(num_rot, use_flip, t, Interpolation::Bilinear)?;
    check_image(neuron, channels, neuron_dim)?;
    let plane = neuron_dim * neuron_dim;
    let step = angle_step(num_rot);
    let mut out = vec![0f32; output_len(channels, image_dim, "image_dim")?];
    let mut cur = vec![0f32; plane];
    let mut tmp = vec![0f32; plane];
    for c in 0..channels {
        cur.copy_from_slice(&neuron[c * plane..(c + 1) * plane]);
        if flipped {
            flip(&cur, &mut tmp, neuron_dim);
            cur.copy_from_slice(&tmp);
        }
        // q clockwise quarter turns are undone by 4 - q more.
        for _ in 0..(4 - q) % 4 {
            rotate_90(&cur, &mut tmp, neuron_dim);
            cur.copy_from_slice(&tmp);
        }
        let dst = &mut out[c * image_dim * image_dim..(c + 1) * image_dim * image_dim];
        if i == 0 {
            resize(&cur, neuron_dim, dst, image_dim);
        } else {
            rotate_bilinear(&cur, neuron_dim, dst, image_dim, -(i as f32 * step));
        }
    }
    Ok(out)
}

/// The central `edd x edd` region of every channel of a `[channels, dim, dim]` image,
/// from row and column `(dim - edd) / 2` (floor), as PINK's quadratic distance takes it
/// (`euclidean_distance.h:56-62`).
///
/// ```
/// let img: Vec<f32> = (0..16).map(|v| v as f32).collect(); // 4x4
/// assert_eq!(tensorfmt_som::transform::crop(&img, 1, 4, 2)?, vec![5., 6., 9., 10.]);
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
pub fn crop(image: &[f32], channels: usize, dim: usize, edd: usize) -> Result<Vec<f32>> {
    check_image(image, channels, dim)?;
    if edd == 0 || edd > dim {
        return Err(SomError::MapOption {
            option: "euclidean_distance_dim",
            value: edd.to_string(),
            reason: format!("must be 1..={dim} (the image dim)"),
        });
    }
    let beg = (dim - edd) / 2;
    let mut out = Vec::with_capacity(channels * edd * edd);
    for c in 0..channels {
        for x in beg..beg + edd {
            let row = c * dim * dim + x * dim;
            out.extend_from_slice(&image[row + beg..row + beg + edd]);
        }
    }
    Ok(out)
}

/// Transform `t` as PINK applies it: the bilinear rotation by `i` small steps, `q`
/// clockwise quarter turns, then the mirror when `flipped`.
struct Steps {
    flipped: bool,
    q: u32,
    i: u32,
}

impl Steps {
    /// Checks `num_rot` and `t` (one of `num_rot`, twice that with `use_flip`).
    fn of(num_rot: u32, use_flip: bool, t: u32, interpolation: Interpolation) -> Result<Steps> {
        check_num_rot(num_rot, interpolation)?;
        let count = num_rot * if use_flip { 2 } else { 1 };
        if t >= count {
            return Err(SomError::MapOption {
                option: "transform index",
                value: t.to_string(),
                reason: format!("{count} transforms for num_rot {num_rot}, flip {use_flip}"),
            });
        }
        let (flipped, k) = (t >= num_rot, t % num_rot);
        if num_rot == 1 {
            return Ok(Steps {
                flipped,
                q: 0,
                i: 0,
            });
        }
        let per_quarter = num_rot / 4;
        Ok(Steps {
            flipped,
            q: k / per_quarter,
            i: k % per_quarter,
        })
    }
}

/// The values of a `[channels, dim, dim]` output whose `dim` the caller chose: checked
/// arithmetic and `Limits::max_alloc`, before it is allocated.
fn output_len(channels: usize, dim: usize, option: &'static str) -> Result<usize> {
    let n = channels
        .checked_mul(dim)
        .and_then(|v| v.checked_mul(dim))
        .filter(|_| dim > 0);
    let bytes = n.and_then(|n| (n as u64).checked_mul(4));
    match (n, bytes) {
        (Some(n), Some(b)) if tensorfmt_core::Limits::default().check_alloc(b).is_ok() => Ok(n),
        _ => Err(SomError::MapOption {
            option,
            value: dim.to_string(),
            reason: format!(
                "{channels} channels of {dim}x{dim} f32 values: not a positive size within the \
                 allocation limit (Limits::max_alloc)"
            ),
        }),
    }
}

fn check_image(image: &[f32], channels: usize, dim: usize) -> Result<()> {
    let want = channels.checked_mul(dim).and_then(|v| v.checked_mul(dim));
    if dim == 0 || channels == 0 || want != Some(image.len()) {
        return Err(SomError::MapOption {
            option: "image",
            value: format!("{} values", image.len()),
            reason: format!("expected {channels} channels of {dim}x{dim}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_sizes_the_caller_chose_are_checked_before_allocating() {
        // Overflowing, over the allocation limit, and zero: errors naming the option
        // (they were a multiply-overflow panic and a capacity-overflow panic).
        let img = vec![0f32; 16];
        for nd in [1usize << 33, 1 << 40, usize::MAX, 0] {
            let e = transform(&img, 1, 4, nd, 4, false, 0, Interpolation::Bilinear).unwrap_err();
            assert!(e.to_string().contains("neuron_dim"), "{e}");
            let e = align(&img, 1, 4, nd, 4, false, 0).unwrap_err();
            assert!(e.to_string().contains("image_dim"), "{e}");
        }
    }

    #[test]
    fn quarter_turn_is_clockwise_and_bilinear_agrees() {
        // 5x5 with a feature at the top centre: a quarter turn moves it to the right.
        let mut img = vec![0f32; 25];
        img[2] = 1.0;
        let mut q = vec![0f32; 25];
        rotate_90(&img, &mut q, 5);
        assert_eq!(q[2 * 5 + 4], 1.0);
        let mut b = vec![0f32; 25];
        rotate_bilinear(&img, 5, &mut b, 5, std::f32::consts::FRAC_PI_2);
        let (i, m) = b
            .iter()
            .enumerate()
            .fold((0, 0f32), |a, (i, &v)| if v > a.1 { (i, v) } else { a });
        assert_eq!((i, (m - 1.0).abs() < 1e-5), (2 * 5 + 4, true));
    }

    #[test]
    fn crop_and_pad_margins() {
        let img: Vec<f32> = (0..25).map(|v| v as f32).collect();
        let mut small = vec![0f32; 9];
        resize(&img, 5, &mut small, 3);
        assert_eq!(small, vec![6., 7., 8., 11., 12., 13., 16., 17., 18.]);
        let mut big = vec![0f32; 49];
        resize(&img, 5, &mut big, 7);
        assert_eq!((big[8], big[7 * 5 + 5], big[0]), (0., 24., 0.));
    }

    #[test]
    fn bad_arguments_name_the_value() {
        let e = transform(&[0.; 9], 1, 3, 3, 6, true, 0, Interpolation::Bilinear).unwrap_err();
        assert!(e.to_string().contains("num_rot 6"), "{e}");
        let e = transform(
            &[0.; 9],
            1,
            3,
            3,
            8,
            true,
            0,
            Interpolation::NearestNeighbor,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("nearest_neighbor with num_rot 8"),
            "{e}"
        );
        let e = transform(&[0.; 9], 1, 3, 3, 4, false, 4, Interpolation::Bilinear).unwrap_err();
        assert!(e.to_string().contains("transform index 4"), "{e}");
        assert!(crop(&[0.; 9], 1, 3, 4).is_err());
        assert!("cubic".parse::<Interpolation>().is_err());
    }
}
