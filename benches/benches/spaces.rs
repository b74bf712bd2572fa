//! spaces benchmarks (PLACEHOLDER: written with the spaces work).
fn main() {}
