#![no_main]
//! Fuzz the PVP readers: any bytes give Ok or an error, never a panic.
//! Body: `tensorfmt_fuzzing::pvp` (crates/tensorfmt-fuzzing), compiled and run
//! by `cargo test` over the fixtures, mutants of them and random bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tensorfmt_fuzzing::pvp(data);
});
