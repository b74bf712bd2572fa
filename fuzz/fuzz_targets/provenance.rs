#![no_main]
//! Mutated carried metadata through `provenance::restore`: a true file or none.
//! Body: `tensorfmt_fuzzing::provenance` (crates/tensorfmt-fuzzing), compiled and run
//! by `cargo test` over the fixtures, mutants of them and random bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tensorfmt_fuzzing::provenance(data);
});
