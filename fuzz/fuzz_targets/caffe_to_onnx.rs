#![no_main]
//! Fuzz the prototxt → ONNX path (parse, Caffe shapes, lowering, ONNX writing and
//! reading back): any text gives a model or an error, never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        tensorfmt_lower::fuzzing::prototxt_to_onnx(text);
    }
});
