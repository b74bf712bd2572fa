#![no_main]
//! Fuzz the primitiv reader: any bytes give Ok or an error; what reads, writes back.
//! Body: `tensorfmt_fuzzing::primitiv` (crates/tensorfmt-fuzzing), compiled and run
//! by `cargo test` over the fixtures, mutants of them and random bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tensorfmt_fuzzing::primitiv(data);
});
