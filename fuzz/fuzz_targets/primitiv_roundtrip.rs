#![no_main]
//! Structured round trip for primitiv: a description -> writer -> reader -> equal.
//! Body: `tensorfmt_fuzzing::primitiv_roundtrip` (crates/tensorfmt-fuzzing), compiled and run
//! by `cargo test` over the fixtures, mutants of them and random bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tensorfmt_fuzzing::primitiv_roundtrip(data);
});
