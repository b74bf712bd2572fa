//! Shared helpers for the tensorfmt benchmarks.
