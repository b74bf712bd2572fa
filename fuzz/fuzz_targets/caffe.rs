#![no_main]
//! Fuzz the Caffe binary readers: any bytes give Ok or an error; models re-serialise.
//! Body: `tensorfmt_fuzzing::caffe` (crates/tensorfmt-fuzzing), compiled and run
//! by `cargo test` over the fixtures, mutants of them and random bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tensorfmt_fuzzing::caffe(data);
});
