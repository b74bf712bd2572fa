#![no_main]
//! Fuzz the npz, safetensors and npy readers: any bytes read whole or an error.
//! Body: `tensorfmt_fuzzing::interop` (crates/tensorfmt-fuzzing), compiled and run
//! by `cargo test` over the fixtures, mutants of them and random bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tensorfmt_fuzzing::interop(data);
});
