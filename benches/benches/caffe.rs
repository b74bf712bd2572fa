//! caffe benchmarks (PLACEHOLDER: written with the caffe work).
fn main() {}
