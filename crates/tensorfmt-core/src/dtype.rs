//! Element types ([`DType`]) and the Rust types that carry them ([`Element`]).

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// The element type of a tensor. All multi-byte types are stored little-endian.
///
/// Each dtype has three spellings, all parseable: a short name (`f32`), the numpy
/// descr (`<f4`) and the safetensors name (`F32`).
///
/// ```
/// use tensorfmt_core::DType;
/// assert_eq!(DType::F16.size(), 2);
/// assert_eq!(DType::F32.numpy_descr(), "<f4");
/// assert_eq!("<f4".parse::<DType>().unwrap(), DType::F32);
/// assert_eq!(DType::from_safetensors_name("BF16").unwrap(), DType::BF16);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE 754 half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE 754 single precision.
    F32,
    /// IEEE 754 double precision.
    F64,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// Boolean, one byte, 0 or 1.
    Bool,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 13] = [
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::Bool,
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// Short name: `f16`, `bf16`, `f32`, ..., `bool`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::Bool => "bool",
        }
    }

    /// The numpy array-protocol descr, little-endian where it matters (`<f4`, `|u1`).
    ///
    /// numpy has no bfloat16; `bf16` is spelled `<V2` (raw two-byte void), which is what
    /// numpy itself writes for ml_dtypes' bfloat16.
    pub const fn numpy_descr(self) -> &'static str {
        match self {
            DType::F16 => "<f2",
            DType::BF16 => "<V2",
            DType::F32 => "<f4",
            DType::F64 => "<f8",
            DType::I8 => "|i1",
            DType::I16 => "<i2",
            DType::I32 => "<i4",
            DType::I64 => "<i8",
            DType::U8 => "|u1",
            DType::U16 => "<u2",
            DType::U32 => "<u4",
            DType::U64 => "<u8",
            DType::Bool => "|b1",
        }
    }

    /// The safetensors dtype name (`F32`, `BF16`, `BOOL`, ...).
    pub const fn safetensors_name(self) -> &'static str {
        match self {
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::F32 => "F32",
            DType::F64 => "F64",
            DType::I8 => "I8",
            DType::I16 => "I16",
            DType::I32 => "I32",
            DType::I64 => "I64",
            DType::U8 => "U8",
            DType::U16 => "U16",
            DType::U32 => "U32",
            DType::U64 => "U64",
            DType::Bool => "BOOL",
        }
    }

    /// Parses a short name (`f32`).
    pub fn from_name(s: &str) -> Result<DType> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| Error::UnknownDType(s.to_string()))
    }

    /// Parses a numpy descr. Accepts `<`, `|` and `=` byte-order marks for
    /// single-byte types and `<` (or `=` on little-endian hosts) for the others;
    /// big-endian descrs are not little-endian data and are rejected.
    pub fn from_numpy_descr(s: &str) -> Result<DType> {
        let unknown = || Error::UnknownDType(s.to_string());
        let (order, body) = match s.chars().next() {
            Some(c @ ('<' | '>' | '|' | '=')) => (c, &s[1..]),
            _ => ('|', s),
        };
        let d = DType::ALL
            .into_iter()
            .find(|d| &d.numpy_descr()[1..] == body)
            .ok_or_else(unknown)?;
        let ok = match order {
            '<' => true,
            '|' => d.size() == 1,
            '=' => cfg!(target_endian = "little") || d.size() == 1,
            _ => d.size() == 1,
        };
        if ok {
            Ok(d)
        } else {
            Err(unknown())
        }
    }

    /// Parses a safetensors dtype name (`F32`).
    pub fn from_safetensors_name(s: &str) -> Result<DType> {
        DType::ALL
            .into_iter()
            .find(|d| d.safetensors_name() == s)
            .ok_or_else(|| Error::UnknownDType(s.to_string()))
    }

    /// True for f16, bf16, f32 and f64.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// True for the signed and unsigned integer types (not bool).
    pub const fn is_int(self) -> bool {
        matches!(
            self,
            DType::I8
                | DType::I16
                | DType::I32
                | DType::I64
                | DType::U8
                | DType::U16
                | DType::U32
                | DType::U64
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;
    /// Parses any of the three spellings.
    fn from_str(s: &str) -> Result<DType> {
        DType::from_name(s)
            .or_else(|_| DType::from_safetensors_name(s))
            .or_else(|_| DType::from_numpy_descr(s))
            .map_err(|_| Error::UnknownDType(s.to_string()))
    }
}

/// A Rust type that is the in-memory form of a [`DType`].
///
/// `bool` is not an `Element` (not every byte is a valid `bool`); read bool tensors
/// as `u8`.
///
/// ```
/// use tensorfmt_core::{DType, Element};
/// assert_eq!(<half::bf16 as Element>::DTYPE, DType::BF16);
/// assert_eq!(<f32 as Element>::DTYPE, DType::F32);
/// ```
pub trait Element: bytemuck::Pod + Send + Sync + PartialEq + fmt::Debug + 'static {
    /// The dtype this type represents.
    const DTYPE: DType;
    /// Lossy conversion to f64 (used by statistics and comparisons).
    fn to_f64(self) -> f64;
    /// Conversion from f64 with Rust's `as` semantics (saturating, NaN -> 0 for ints).
    fn from_f64(v: f64) -> Self;
    /// Conversion to i128 (exact for integers; saturating for floats).
    fn to_i128(self) -> i128;
    /// Conversion from i128, wrapping like numpy's integer `astype`.
    fn from_i128_wrapping(v: i128) -> Self;
}

macro_rules! prim_element {
    ($($t:ty => $d:ident),*) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn to_f64(self) -> f64 { self as f64 }
            #[inline]
            fn from_f64(v: f64) -> Self { v as $t }
            #[inline]
            fn to_i128(self) -> i128 { self as i128 }
            #[inline]
            fn from_i128_wrapping(v: i128) -> Self { v as $t }
        }
    )*};
}
prim_element!(f32 => F32, f64 => F64, i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64);

impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        half::f16::from_f64(v)
    }
    fn to_i128(self) -> i128 {
        self.to_f64() as i128
    }
    fn from_i128_wrapping(v: i128) -> Self {
        half::f16::from_f64(v as f64)
    }
}

impl Element for half::bf16 {
    const DTYPE: DType = DType::BF16;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        half::bf16::from_f64(v)
    }
    fn to_i128(self) -> i128 {
        self.to_f64() as i128
    }
    fn from_i128_wrapping(v: i128) -> Self {
        half::bf16::from_f64(v as f64)
    }
}

/// Runs `$body` with `$t` bound to the Rust element type of a [`DType`]
/// (`bool` is handled as `u8`).
#[macro_export]
#[doc(hidden)]
macro_rules! with_element {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            $crate::DType::F16 => {
                type $t = $crate::half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $t = $crate::half::bf16;
                $body
            }
            $crate::DType::F32 => {
                type $t = f32;
                $body
            }
            $crate::DType::F64 => {
                type $t = f64;
                $body
            }
            $crate::DType::I8 => {
                type $t = i8;
                $body
            }
            $crate::DType::I16 => {
                type $t = i16;
                $body
            }
            $crate::DType::I32 => {
                type $t = i32;
                $body
            }
            $crate::DType::I64 => {
                type $t = i64;
                $body
            }
            $crate::DType::U8 | $crate::DType::Bool => {
                type $t = u8;
                $body
            }
            $crate::DType::U16 => {
                type $t = u16;
                $body
            }
            $crate::DType::U32 => {
                type $t = u32;
                $body
            }
            $crate::DType::U64 => {
                type $t = u64;
                $body
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()).unwrap(), d);
            assert_eq!(DType::from_numpy_descr(d.numpy_descr()).unwrap(), d);
            assert_eq!(
                DType::from_safetensors_name(d.safetensors_name()).unwrap(),
                d
            );
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            assert_eq!(d.safetensors_name().parse::<DType>().unwrap(), d);
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(DType::Bool.size(), 1);
        assert_eq!(DType::BF16.size(), 2);
        assert_eq!(DType::U32.size(), 4);
        assert_eq!(DType::I64.size(), 8);
    }

    #[test]
    fn numpy_byte_orders() {
        assert_eq!(DType::from_numpy_descr("|u1").unwrap(), DType::U8);
        assert_eq!(DType::from_numpy_descr("<u1").unwrap(), DType::U8);
        assert!(DType::from_numpy_descr(">f4").is_err());
        assert_eq!(DType::from_numpy_descr(">u1").unwrap(), DType::U8);
        assert!(DType::from_numpy_descr("<c8").is_err());
        assert!("nope".parse::<DType>().is_err());
    }
}
