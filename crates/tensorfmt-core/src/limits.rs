//! [`Limits`]: caps on what a reader may allocate or scan for one file.

use crate::{Error, Result};

/// Caps a reader applies to sizes that come from a file, checked before allocating.
///
/// Every declared size is *also* checked against the bytes really present; limits
/// protect against files that are large *and* hostile (or mistaken).
///
/// ```
/// use tensorfmt_core::Limits;
/// let l = Limits::default();
/// assert!(l.check_alloc(1 << 20).is_ok());
/// assert!(Limits { max_alloc: 10, ..l }.check_alloc(11).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest single allocation in bytes a reader may make (default 16 GiB; a decoded
    /// tensor larger than this must be streamed).
    pub max_alloc: u64,
    /// Largest number of frames / entries / records a reader scans (default 2^28).
    pub max_items: u64,
    /// Largest tensor rank accepted (default 64).
    pub max_rank: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_alloc: 16 << 30,
            max_items: 1 << 28,
            max_rank: 64,
        }
    }
}

impl Limits {
    /// No caps beyond what the bytes themselves allow.
    pub const fn unlimited() -> Limits {
        Limits {
            max_alloc: u64::MAX,
            max_items: u64::MAX,
            max_rank: usize::MAX,
        }
    }

    /// Errors when `bytes` exceeds [`Limits::max_alloc`].
    pub fn check_alloc(&self, bytes: u64) -> Result<()> {
        check("allocation", bytes, self.max_alloc)
    }

    /// Errors when `n` exceeds [`Limits::max_items`].
    pub fn check_items(&self, n: u64) -> Result<()> {
        check("item count", n, self.max_items)
    }

    /// Errors when `rank` exceeds [`Limits::max_rank`].
    pub fn check_rank(&self, rank: usize) -> Result<()> {
        check("rank", rank as u64, self.max_rank as u64)
    }
}

fn check(what: &'static str, value: u64, limit: u64) -> Result<()> {
    if value > limit {
        Err(Error::LimitExceeded { what, value, limit })
    } else {
        Ok(())
    }
}
