#![no_main]
//! Fuzz the som reader: any bytes must give Ok or an error, never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = tensorfmt_core::ReadOptions::default();
    if let Ok(file) = tensorfmt_som::open_tensor_file(bytes::Bytes::copy_from_slice(data), &opts) {
        let _ = file.validate();
    }
});
