#![no_main]
//! The interchange readers (npz with its hidden carried-metadata block, safetensors,
//! npy) on any bytes: Ok or an error, never a panic or an allocation the bytes do not
//! justify; what opens is read whole (every tensor, the carried metadata parsed as the
//! splice would parse it), and a deflated member stops at its npy header's size.
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tensorfmt::{Format, ReadOptions};

fuzz_target!(|data: &[u8]| {
    let options = ReadOptions {
        limits: tensorfmt::Limits {
            max_alloc: 64 << 20,
            ..Default::default()
        },
        ..Default::default()
    };
    for format in [Format::Npz, Format::Safetensors, Format::Npy] {
        let Ok(file) = tensorfmt::open_bytes(Bytes::copy_from_slice(data), format, None, &options) else {
            continue;
        };
        let _ = file.header();
        for info in file.tensors() {
            let _ = file.read_tensor(&info.name);
            let _ = file.stats(&info.name);
        }
        let _ = file.validate();
        let _ = tensorfmt::provenance::carried(file.as_ref());
    }
});
