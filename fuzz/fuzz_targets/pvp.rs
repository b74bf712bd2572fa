#![no_main]
//! Fuzz the pvp reader: any bytes must give Ok or an error, never a panic, through the
//! TensorFile view (dense and CSR exports) and the typed readers.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Small caps so that hostile headers cannot make the fuzzer run out of memory.
    let limits = tensorfmt_core::Limits {
        max_alloc: 64 << 20,
        max_items: 1 << 16,
        ..Default::default()
    };
    for sparse_csr in [false, true] {
        let opts = tensorfmt_core::ReadOptions {
            limits,
            sparse_csr,
            ..Default::default()
        };
        if let Ok(file) =
            tensorfmt_pvp::open_tensor_file(bytes::Bytes::copy_from_slice(data), &opts)
        {
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
});
