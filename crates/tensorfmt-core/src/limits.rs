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
    /// Largest number of layers a net definition may have, and a quarter of the blob
    /// references (bottoms and tops, in all) it may have (default 20,000: the largest
    /// published Caffe nets have about 1,000 layers; converting a net of 20,000 layers
    /// to ONNX takes about 160 MiB). The layers are counted before they are parsed, so
    /// a net of a million layers costs no more than its text.
    pub max_layers: u64,
    /// Largest total in bytes of the values a conversion computes itself rather than
    /// reads from a file (default 128 MiB): a Caffe → ONNX lowering's constants (SSD's
    /// prior boxes, folded statistics, shapes). SSD512's prior boxes are 786 kB.
    pub max_computed: u64,
    /// Largest number of ONNX nodes and initializers a conversion builds, in all
    /// (default 30,000: the published Caffe nets lower to at most a few thousand; what a
    /// layer lowers to varies from one node to a few dozen, so `max_layers` alone does
    /// not bound the graph). Checked as the graph grows.
    pub max_nodes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_alloc: 16 << 30,
            max_items: 1 << 28,
            max_rank: 64,
            max_layers: 20_000,
            max_computed: 128 << 20,
            max_nodes: 30_000,
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
            max_layers: u64::MAX,
            max_computed: u64::MAX,
            max_nodes: u64::MAX,
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

    /// Errors when a net's `layers` exceed [`Limits::max_layers`].
    ///
    /// ```
    /// let l = tensorfmt_core::Limits { max_layers: 2, ..Default::default() };
    /// assert!(l.check_layers(2).is_ok());
    /// assert_eq!(l.check_layers(3).unwrap_err().to_string(), "layer count of 3 exceeds the limit of 2");
    /// ```
    pub fn check_layers(&self, layers: u64) -> Result<()> {
        check("layer count", layers, self.max_layers)
    }

    /// Errors when `bytes` of computed values (in all, so far) exceed
    /// [`Limits::max_computed`].
    pub fn check_computed(&self, bytes: u64) -> Result<()> {
        check(
            "total of constants computed at conversion (bytes)",
            bytes,
            self.max_computed,
        )
    }

    /// Errors when a conversion's `n` ONNX nodes and initializers exceed
    /// [`Limits::max_nodes`].
    ///
    /// ```
    /// let l = tensorfmt_core::Limits { max_nodes: 2, ..Default::default() };
    /// assert!(l.check_nodes(2).is_ok());
    /// assert_eq!(
    ///     l.check_nodes(3).unwrap_err().to_string(),
    ///     "count of ONNX nodes and initializers of 3 exceeds the limit of 2"
    /// );
    /// ```
    pub fn check_nodes(&self, n: u64) -> Result<()> {
        check("count of ONNX nodes and initializers", n, self.max_nodes)
    }
}

fn check(what: &'static str, value: u64, limit: u64) -> Result<()> {
    if value > limit {
        Err(Error::LimitExceeded { what, value, limit })
    } else {
        Ok(())
    }
}
