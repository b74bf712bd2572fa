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

/// `--dtype f64` is honoured by every kind: a mean file too stores `double_data`
/// (it stored float32 `data`, -1e300 becoming -inf and 1 + 2^-40 becoming 1, silently).
#[test]
fn float64_asked_is_double_data_in_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let values = vec![-1e300, 1.0 + 2f64.powi(-40), 0.5];
    let t = f64s(values.clone(), &[1, 1, 3]);
    let f32_in = Tensor::from_vec(vec![1f32, 2.0, 3.0], [3], Order::RowMajor).unwrap();
    let opts = WriteOptions {
        dtype: Some(DType::F64),
        ..WriteOptions::default()
    };
    let first_blob = |file: &str, bytes: Vec<u8>| -> tensorfmt_caffe::RawBlob {
        let bytes: bytes::Bytes = bytes.into();
        match file.rsplit('.').next().unwrap() {
            "binaryproto" => tensorfmt_caffe::read_blob_proto(bytes).unwrap(),
            "blobprotovector" => tensorfmt_caffe::read_blob_vector(bytes).unwrap().remove(0),
            "solverstate" => tensorfmt_caffe::read_solver_state(bytes)
                .unwrap()
                .history
                .remove(0),
            _ => tensorfmt_caffe::read_model(bytes).unwrap().layers[0].blobs[0].clone(),
        }
    };
    for (file, name) in [
        ("m.binaryproto", "mean"),
        ("v.blobprotovector", "blobs/0"),
        ("s.solverstate", "history/0"),
        ("w.caffemodel", "fc/0"),
    ] {
        let p = dir.path().join(file);
        let opts = WriteOptions {
            kind: file.rsplit('.').next().map(String::from),
            ..opts.clone()
        };
        tensorfmt_caffe::save_tensors(&p, &[(name.to_string(), t.clone())], &opts).unwrap();
        let blob = first_blob(file, std::fs::read(&p).unwrap());
        assert!(blob.data.is_empty(), "{file}: float32 data written");
        assert_eq!(blob.double_data_f64(), values, "{file}");
        // A float32 tensor asked as f64 is widened, not kept as `data`.
        tensorfmt_caffe::save_tensors(&p, &[(name.to_string(), f32_in.clone())], &opts).unwrap();
        let blob = first_blob(file, std::fs::read(&p).unwrap());
        assert_eq!(blob.double_data_f64(), [1.0, 2.0, 3.0], "{file} from f32");
    }
    // Without a dtype, a mean file keeps compute_image_mean's float32 `data`.
    let p = dir.path().join("m.binaryproto");
    let named = [("mean".to_string(), t)];
    tensorfmt_caffe::save_tensors(&p, &named, &WriteOptions::default()).unwrap();
    let blob = tensorfmt_caffe::read_blob_proto(std::fs::read(&p).unwrap().into()).unwrap();
    assert!(blob.double_data.is_empty() && blob.data.len() == 12);
}

/// A mean file of no values (an empty `--frames` selection) holds only its shape
/// fields, which no reader tells from other protobuf: refused before writing (it was
/// written, then removed by the read-back with "please report this").
#[test]
fn an_empty_mean_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.binaryproto");
    let t = Tensor::from_vec(Vec::<f32>::new(), [0, 2, 3, 2], Order::RowMajor).unwrap();
    let err = tensorfmt_caffe::save_tensors(&p, &[("mean".into(), t)], &WriteOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("no values"), "{err}");
    assert!(!p.exists());
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
