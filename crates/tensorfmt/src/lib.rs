//! tensorfmt facade (work in progress).
pub use tensorfmt_core::*;
pub mod render;
