//! Caffe writes the originals accept (issue 23 item 7): float64 arrays become float
//! `data` (OpenCV 4's readNetFromCaffe and pycaffe's blobproto_to_array read only that)
//! unless f64 is asked for, and a file over Caffe's 2 GiB limit is refused before
//! anything is written.

use tensorfmt_core::{DType, Order, Tensor, WriteOptions};

fn f64s(v: Vec<f64>, dims: &[usize]) -> Tensor {
    Tensor::from_vec(v, dims.to_vec(), Order::RowMajor).unwrap()
}

#[test]
fn float64_arrays_are_written_as_float_data() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.caffemodel");
    let w = f64s((0..6).map(|i| i as f64 * 0.5 + 1e-12).collect(), &[2, 3]);
    let b = f64s(vec![0.25, -1.0], &[2]);
    let named = [("fc/0".to_string(), w.clone()), ("fc/1".to_string(), b)];
    tensorfmt_caffe::save_tensors(&p, &named, &WriteOptions::default()).unwrap();
    let m = tensorfmt_caffe::read_model(std::fs::read(&p).unwrap().into()).unwrap();
    let blob = &m.layers[0].blobs[0];
    assert!(blob.double_data.is_empty(), "double_data written");
    assert_eq!(blob.data.len(), 6 * 4);
    let got: Vec<f32> = blob
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, w.cast(DType::F32).unwrap().to_vec::<f32>().unwrap());

    // Asked for f64: double_data, as Caffe's double nets write.
    let opts = WriteOptions {
        dtype: Some(DType::F64),
        ..WriteOptions::default()
    };
    tensorfmt_caffe::save_tensors(&p, &named, &opts).unwrap();
    let m = tensorfmt_caffe::read_model(std::fs::read(&p).unwrap().into()).unwrap();
    assert_eq!(m.layers[0].blobs[0].double_data.len(), 6 * 8);
    assert!(m.layers[0].blobs[0].data.is_empty());
}

#[test]
fn files_over_two_gib_are_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    // A sparse 2 GiB input, mapped: no memory, no disk.
    let big = dir.path().join("zeros.bin");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(1 << 31).unwrap();
    let bytes = tensorfmt_core::io::map_file(&big).unwrap();
    let t = Tensor::from_bytes(DType::F32, [1usize << 29], Order::RowMajor, bytes).unwrap();
    let out = dir.path().join("big.caffemodel");
    let err = tensorfmt_caffe::save_tensors(&out, &[("fc/0".into(), t)], &WriteOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("2 GiB"), "{err}");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "only the input is left");
}
