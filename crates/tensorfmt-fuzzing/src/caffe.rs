//! The `caffe` fuzz target's body: the Caffe binary readers on any bytes give Ok or an
//! error, never a panic; a model that parses re-serialises and parses again, a blob to
//! itself.

/// Runs the Caffe binary readers over `data`; returns whether it parsed as a model.
///
/// ```
/// // Protobuf has no magic: the empty message is a model without layers.
/// assert!(tensorfmt_fuzzing::caffe(b""));
/// ```
pub fn caffe(data: &[u8]) -> bool {
    let bytes = bytes::Bytes::copy_from_slice(data);
    let _ = tensorfmt_caffe::sniff(data, data.len() as u64);
    let opts = tensorfmt_core::ReadOptions::default();
    if let Ok(file) = tensorfmt_caffe::open_tensor_file(bytes.clone(), &opts) {
        let _ = file.validate();
        let _ = file.header();
    }
    let mut parsed = false;
    if let Ok(model) = tensorfmt_caffe::read_model(bytes.clone()) {
        parsed = true;
        let out = model.to_bytes();
        let again = tensorfmt_caffe::read_model(out.into()).expect("rewritten model parses");
        assert_eq!(again.layers.len(), model.layers.len());
        let _ = model.validate();
    }
    if let Ok(blob) = tensorfmt_caffe::read_blob_proto(bytes.clone()) {
        let again = tensorfmt_caffe::read_blob_proto(blob.to_bytes().into())
            .expect("rewritten blob parses");
        assert_eq!(again, blob);
        let _ = tensorfmt_caffe::Blob::<f32>::from_raw(&blob);
    }
    let _ = tensorfmt_caffe::read_solver_state(bytes.clone());
    let _ = tensorfmt_caffe::read_blob_vector(bytes);
    parsed
}

#[cfg(test)]
mod tests {
    use crate::inputs::{check, files, mutants, random};

    #[test]
    fn testdata_and_mutants() {
        let seeds = files(
            "testdata/caffe",
            &[
                "caffemodel",
                "binaryproto",
                "blobprotovector",
                "solverstate",
            ],
        );
        assert!(seeds.len() >= 12, "{}", seeds.len());
        check("caffe", &seeds, super::caffe);
        let parsed = check("caffe", &mutants(&seeds, 80, 7), super::caffe);
        assert!(parsed > 0);
        check("caffe", &random(1000, 256, 8), super::caffe);
    }
}
