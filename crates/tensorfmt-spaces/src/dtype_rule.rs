//! The dtype rules shared by the elementary spaces (spec §2).

use std::fmt::Display;

use super::error::{Result, SpaceError};
use tensorfmt_core::DType;

/// The float type a space gets when none is given (Pylearn2's `floatX`, resolved when
/// the space is built). Use `with_dtype` on a space to choose another one.
pub const DEFAULT_FLOAT: DType = DType::F32;

/// A space dtype may be any numeric dtype, or `None` ("any"); `bool` is not allowed.
pub(crate) fn check_space_dtype(dtype: Option<DType>) -> Result<()> {
    if dtype == Some(DType::Bool) {
        return Err(SpaceError::InvalidArgument(
            "bool is not an allowed space dtype".into(),
        ));
    }
    Ok(())
}

/// The validation cast rule: only an information-destroying cast is refused, i.e. a
/// non-integer (float or bool) batch given to an integer space. Everything else (float
/// narrowing, int -> float, wide -> narrow ints) is allowed on purpose.
pub(crate) fn check_cast(space: &dyn Display, batch: DType, to: Option<DType>) -> Result<()> {
    match to {
        Some(to) if to.is_int() && !batch.is_int() => Err(SpaceError::DtypeUnsafe {
            space: space.to_string(),
            from: batch,
            to,
        }),
        _ => Ok(()),
    }
}

/// A dtype argument, falling back to the space's, for methods that create data.
pub(crate) fn resolve(
    space: &dyn Display,
    given: Option<DType>,
    own: Option<DType>,
) -> Result<DType> {
    given.or(own).ok_or_else(|| {
        SpaceError::InvalidArgument(format!(
            "{space} has no dtype of its own, so a dtype must be given"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_two_kinds_of_cast_are_refused() {
        let s = "S";
        for b in DType::ALL {
            for t in DType::ALL {
                if t == DType::Bool {
                    continue;
                }
                let refused = check_cast(&s, b, Some(t)).is_err();
                assert_eq!(refused, t.is_int() && !b.is_int(), "{b} -> {t}");
            }
            assert!(check_cast(&s, b, None).is_ok());
        }
        assert!(matches!(
            check_cast(&s, DType::F32, Some(DType::I64)),
            Err(SpaceError::DtypeUnsafe {
                from: DType::F32,
                to: DType::I64,
                ..
            })
        ));
        assert!(check_space_dtype(Some(DType::Bool)).is_err());
        assert!(check_space_dtype(None).is_ok());
        assert!(resolve(&s, None, None).is_err());
        assert_eq!(resolve(&s, None, Some(DType::F64)).unwrap(), DType::F64);
        assert_eq!(
            resolve(&s, Some(DType::I8), Some(DType::F64)).unwrap(),
            DType::I8
        );
    }
}
