#![no_main]
//! Fuzz the PINK reader: any bytes give Ok or an error; v2 files rewrite byte for byte.
//! Body: `tensorfmt_fuzzing::som` (crates/tensorfmt-fuzzing), compiled and run
//! by `cargo test` over the fixtures, mutants of them and random bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tensorfmt_fuzzing::som(data);
});
