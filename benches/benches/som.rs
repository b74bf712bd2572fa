//! som benchmarks (PLACEHOLDER: written with the som work).
fn main() {}
