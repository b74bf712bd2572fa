//! The `primitiv` fuzz target's body: the primitiv reader on any bytes gives Ok or an
//! error, never a panic, in every mode; whatever is accepted is written back and read
//! again to the same data, and the TensorFile view decodes every tensor.

use tensorfmt_primitiv::{read_file, to_bytes, Mode, PrimitivError, ReaderOptions};

/// Runs the primitiv reader over `data`; returns whether some mode accepted it.
///
/// ```
/// assert!(!tensorfmt_fuzzing::primitiv(b"\x93"));
/// ```
pub fn primitiv(data: &[u8]) -> bool {
    let bytes = bytes::Bytes::copy_from_slice(data);
    let mut accepted = false;
    for mode in [Mode::Primitiv, Mode::Pedantic, Mode::Lenient] {
        let opts = ReaderOptions {
            mode,
            ..ReaderOptions::default()
        };
        if let Ok(d) = read_file(bytes.clone(), &opts) {
            accepted = true;
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
    accepted
}

#[cfg(test)]
mod tests {
    use crate::inputs::{check, files, mutants, random};

    #[test]
    fn testdata_and_mutants() {
        let seeds = files("testdata/primitiv", &["data"]);
        assert!(seeds.len() >= 6, "{}", seeds.len());
        assert_eq!(check("primitiv", &seeds, super::primitiv), seeds.len());
        let accepted = check("primitiv", &mutants(&seeds, 150, 5), super::primitiv);
        assert!(accepted > 0);
        check("primitiv", &random(1000, 256, 6), super::primitiv);
    }
}
