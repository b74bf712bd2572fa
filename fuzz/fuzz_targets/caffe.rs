#![no_main]
//! Fuzz the caffe reader: any bytes must give Ok or an error, never a panic; a model
//! that parses must re-serialize to the same bytes and parse again.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bytes = bytes::Bytes::copy_from_slice(data);
    let _ = tensorfmt_caffe::sniff(data, data.len() as u64);
    let opts = tensorfmt_core::ReadOptions::default();
    if let Ok(file) = tensorfmt_caffe::open_tensor_file(bytes.clone(), &opts) {
        let _ = file.validate();
        let _ = file.header();
    }
    if let Ok(model) = tensorfmt_caffe::read_model(bytes.clone()) {
        let out = model.to_bytes();
        let again = tensorfmt_caffe::read_model(out.into()).expect("rewritten model parses");
        assert_eq!(again.layers.len(), model.layers.len());
        let _ = model.validate();
    }
    if let Ok(blob) = tensorfmt_caffe::read_blob_proto(bytes.clone()) {
        let again = tensorfmt_caffe::read_blob_proto(blob.to_bytes().into()).expect("rewritten blob parses");
        assert_eq!(again, blob);
        let _ = tensorfmt_caffe::Blob::<f32>::from_raw(&blob);
    }
    let _ = tensorfmt_caffe::read_solver_state(bytes.clone());
    let _ = tensorfmt_caffe::read_blob_vector(bytes);
});
