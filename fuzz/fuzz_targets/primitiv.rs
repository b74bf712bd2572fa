#![no_main]
//! Fuzz the primitiv reader: any bytes must give Ok or an error, never a panic, in every
//! mode; whatever is accepted must be written back and read again to the same data, and
//! the TensorFile view must decode every tensor.
use libfuzzer_sys::fuzz_target;
use tensorfmt_primitiv::{read_file, to_bytes, Mode, PrimitivError, ReaderOptions};

fuzz_target!(|data: &[u8]| {
    let bytes = bytes::Bytes::copy_from_slice(data);
    for mode in [Mode::Primitiv, Mode::Pedantic, Mode::Lenient] {
        let opts = ReaderOptions {
            mode,
            ..ReaderOptions::default()
        };
        if let Ok(d) = read_file(bytes.clone(), &opts) {
            // The one refusal: a model whose key paths clash (`a` and `a.b`), which
            // primitiv reads but can never write.
            let out = match to_bytes(&d.data) {
                Ok(out) => out,
                Err(PrimitivError::Unwritable(_)) => continue,
                Err(e) => panic!("accepted data must be writable: {e}"),
            };
            let back = read_file(out.clone().into(), &ReaderOptions::default())
                .expect("written data must read");
            // Compared as bytes: NaN configs are not equal to themselves as floats.
            assert_eq!(to_bytes(&back.data).unwrap(), out);
        }
    }
    let opts = tensorfmt_core::ReadOptions::default();
    if let Ok(file) = tensorfmt_primitiv::open_tensor_file(bytes, &opts) {
        let _ = file.header();
        file.validate().expect("every listed tensor decodes");
    }
});
