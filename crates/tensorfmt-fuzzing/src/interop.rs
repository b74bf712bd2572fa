//! The `interop` fuzz target's body: the interchange readers (npz with its hidden
//! carried-metadata block, safetensors, npy) on any bytes give Ok or an error, never a
//! panic or an allocation the bytes do not justify; what opens is read whole (every
//! tensor, the carried metadata parsed as the splice would parse it), and a deflated
//! member stops at its npy header's size.

use bytes::Bytes;
use tensorfmt::{Format, ReadOptions};

/// Opens `data` as npz, safetensors and npy; returns whether any of them opened it.
///
/// ```
/// assert!(!tensorfmt_fuzzing::interop(b"\x93NUMPY"));
/// ```
pub fn interop(data: &[u8]) -> bool {
    let options = ReadOptions {
        limits: tensorfmt::Limits {
            max_alloc: 64 << 20,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut opened = false;
    for format in [Format::Npz, Format::Safetensors, Format::Npy] {
        let Ok(file) = tensorfmt::open_bytes(Bytes::copy_from_slice(data), format, None, &options)
        else {
            continue;
        };
        opened = true;
        let _ = file.header();
        for info in file.tensors() {
            let _ = file.read_tensor(&info.name);
            let _ = file.stats(&info.name);
        }
        let _ = file.validate();
        let _ = tensorfmt::provenance::carried(file.as_ref());
    }
    opened
}

#[cfg(test)]
mod tests {
    use crate::inputs::{check, files, mutants, random};

    #[test]
    fn testdata_and_mutants() {
        let seeds = files("testdata/core", &["npy", "npz", "safetensors"]);
        assert!(seeds.len() >= 6, "{}", seeds.len());
        assert_eq!(check("interop", &seeds, super::interop), seeds.len());
        let opened = check("interop", &mutants(&seeds, 150, 11), super::interop);
        assert!(opened > 0);
        check("interop", &random(1000, 256, 12), super::interop);
    }
}
