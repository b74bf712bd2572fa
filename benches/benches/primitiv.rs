//! primitiv benchmarks (PLACEHOLDER: written with the primitiv work).
fn main() {}
