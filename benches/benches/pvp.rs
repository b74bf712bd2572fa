//! pvp benchmarks (PLACEHOLDER: written with the pvp work).
fn main() {}
