#![no_main]
//! Fuzz the prototxt reader and Caffe's shape rules: a net or an error, never a panic.
//! Body: `tensorfmt_fuzzing::caffe_prototxt` (crates/tensorfmt-fuzzing), compiled and run
//! by `cargo test` over the fixtures, mutants of them and random bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tensorfmt_fuzzing::caffe_prototxt(data);
});
