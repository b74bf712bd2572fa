//! The `pvp` fuzz target's body: the PVP reader on any bytes gives Ok or an error,
//! never a panic, through the TensorFile view (dense and CSR exports) and the typed
//! readers.

/// Runs the PVP readers over `data`; returns whether the TensorFile view opened it.
///
/// ```
/// assert!(!tensorfmt_fuzzing::pvp(b"not a pvp file"));
/// ```
pub fn pvp(data: &[u8]) -> bool {
    // Small caps so that hostile headers cannot make the fuzzer run out of memory.
    let limits = tensorfmt_core::Limits {
        max_alloc: 64 << 20,
        max_items: 1 << 16,
        ..Default::default()
    };
    let mut opened = false;
    for sparse_csr in [false, true] {
        let opts = tensorfmt_core::ReadOptions {
            limits,
            sparse_csr,
            ..Default::default()
        };
        if let Ok(file) =
            tensorfmt_pvp::open_tensor_file(bytes::Bytes::copy_from_slice(data), &opts)
        {
            opened = true;
            let _ = file.validate();
            let _ = file.header();
            for info in file.tensors() {
                let _ = file.read_tensor(&info.name);
            }
        }
    }
    let strict = tensorfmt_pvp::OpenOptions {
        limits,
        strict: true,
        allow_truncated: true,
    };
    if let Ok(tensorfmt_pvp::PvpFile::Sparse(r)) =
        tensorfmt_pvp::PvpFile::from_bytes_with(bytes::Bytes::copy_from_slice(data), &strict)
    {
        for f in r.frames() {
            let _ = f;
        }
    }
    let _ = tensorfmt_pvp::sniff(data, data.len() as u64);
    opened
}

#[cfg(test)]
mod tests {
    use crate::inputs::{check, files, mutants, random};

    #[test]
    fn testdata_and_mutants() {
        let seeds = files("testdata/pvp", &["pvp"]);
        assert!(seeds.len() >= 9, "{}", seeds.len());
        let opened = check("pvp", &seeds, super::pvp);
        assert_eq!(opened, seeds.len(), "every fixture opens");
        let opened = check("pvp", &mutants(&seeds, 40, 1), super::pvp);
        assert!(opened > 0);
        check("pvp", &random(1000, 256, 2), super::pvp);
    }
}
