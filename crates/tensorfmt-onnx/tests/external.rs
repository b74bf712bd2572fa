//! External data files beside a model: read as ONNX's loader reads them (mapped, zero
//! copy), and refused where ONNX's loader refuses them (a location outside the model's
//! directory, a symlink, a hard link, a range beyond the file), the error naming the
//! tensor and the location, nothing outside the directory ever opened.

mod common;
use common::model;

use std::path::Path;

use tensorfmt_core::ReadOptions;
use tensorfmt_onnx::proto::{StringStringEntryProto, TensorProto};
use tensorfmt_onnx::{read_model_file, read_model_file_at, ModelFile};

fn external(name: &str, dims: &[i64], keys: &[(&str, &str)]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 1,
        data_location: 1,
        external_data: keys
            .iter()
            .map(|(k, v)| StringStringEntryProto {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect(),
        ..Default::default()
    }
}

fn read(dir: &Path, inits: Vec<TensorProto>) -> Result<ModelFile, String> {
    read_model_file_at(model(inits), &ReadOptions::default(), dir).map_err(|e| e.to_string())
}

fn floats(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn tensors_are_slices_of_one_mapped_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = floats(&[1.0, 2.0, 3.0]);
    data.extend([0u8; 4]); // alignment padding, as onnx's writer may leave
    data.extend(floats(&[4.0, 5.0]));
    std::fs::write(dir.path().join("model.onnx.data"), &data).unwrap();
    let m = read(
        dir.path(),
        vec![
            external(
                "a",
                &[3],
                &[
                    ("location", "model.onnx.data"),
                    ("offset", "0"),
                    ("length", "12"),
                ],
            ),
            // No length: the data runs to the end of the file (ONNX's loader).
            external(
                "b",
                &[2],
                &[
                    ("location", "./model.onnx.data"),
                    ("offset", "16"),
                    ("checksum", "x"),
                ],
            ),
        ],
    )
    .unwrap();
    assert_eq!(
        m.initializers[0].1.to_vec::<f32>().unwrap(),
        [1.0, 2.0, 3.0]
    );
    assert_eq!(m.initializers[1].1.to_vec::<f32>().unwrap(), [4.0, 5.0]);
    // Zero copy: both tensors lie in one mapping, 16 bytes apart.
    let (a, b) = (m.initializers[0].1.bytes(), m.initializers[1].1.bytes());
    assert_eq!(b.as_ptr() as usize - a.as_ptr() as usize, 16);
    // A subdirectory of the model's directory is inside it.
    std::fs::create_dir(dir.path().join("weights")).unwrap();
    std::fs::write(dir.path().join("weights/w"), floats(&[7.0])).unwrap();
    let m = read(
        dir.path(),
        vec![external("w", &[1], &[("location", "weights/w")])],
    )
    .unwrap();
    assert_eq!(m.initializers[0].1.to_vec::<f32>().unwrap(), [7.0]);
}

#[test]
fn locations_outside_the_model_directory_are_refused_unread() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("model");
    std::fs::create_dir(&dir).unwrap();
    let secret = root.path().join("secret");
    std::fs::write(&secret, floats(&[9.0])).unwrap();
    std::os::unix::fs::symlink(&secret, dir.join("link")).unwrap();
    std::os::unix::fs::symlink(root.path(), dir.join("up")).unwrap();
    std::fs::hard_link(&secret, dir.join("hard")).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/w"), [0u8; 4]).unwrap();
    std::os::unix::fs::symlink(dir.join("sub"), dir.join("inner")).unwrap();
    let secret_path = secret.to_str().unwrap().to_string();
    for (location, why) in [
        ("../secret", "'..'"),
        ("sub/../../secret", "'..'"),
        (secret_path.as_str(), "absolute"),
        ("link", "symbolic link"),
        ("up/secret", "symbolic link"),
        ("inner/w", "symbolic link"), // a link inside the directory, to a subdirectory of it
        ("hard", "hard link"),
        ("sub", "not a regular file"),
        ("a\0b", "NUL"),
    ] {
        let e = read(&dir, vec![external("w", &[1], &[("location", location)])]).unwrap_err();
        assert!(
            e.contains(why) && e.contains("\"w\"") && e.contains("graph.initializer[0]"),
            "{location:?}: {e}"
        );
    }
    // A missing file is an I/O error (Python's FileNotFoundError), naming both.
    let e = read_model_file_at(
        model(vec![external("w", &[1], &[("location", "missing.bin")])]),
        &ReadOptions::default(),
        &dir,
    )
    .unwrap_err();
    assert_eq!(
        tensorfmt_core::Classify::kind(&e),
        tensorfmt_core::ErrorKind::Io
    );
    let e = e.to_string();
    assert!(e.contains("missing.bin") && e.contains("\"w\""), "{e}");
    let e = read(&dir, vec![external("w", &[1], &[("offset", "0")])]).unwrap_err();
    assert!(e.contains("no 'location'"), "{e}");
}

#[test]
fn ranges_and_sizes_are_checked_against_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d"), floats(&[1.0, 2.0])).unwrap();
    for (keys, want) in [
        (vec![("offset", "9")], "beyond the end"),
        (vec![("offset", "4"), ("length", "8")], "beyond the end"),
        (
            vec![("length", "18446744073709551615"), ("offset", "1")],
            "beyond the end",
        ),
        (vec![("offset", "-1")], "non-negative decimal"),
        (vec![("length", "0x10")], "non-negative decimal"),
        // A range that is not the tensor's size: the raw_data check names both.
        (vec![("length", "4")], "external data in \"d\" has 4 bytes"),
        (vec![], "needs 12"), // to the end of the 8-byte file, for 3 floats
    ] {
        let mut k = vec![("location", "d")];
        k.extend(keys.iter().cloned());
        let dims: &[i64] = if keys.is_empty() { &[3] } else { &[2] };
        let e = read(dir.path(), vec![external("w", dims, &k)]).unwrap_err();
        assert!(e.contains(want), "{keys:?}: {e}");
    }
}

#[test]
fn a_model_given_as_bytes_names_the_file_it_cannot_read() {
    let e = read_model_file(
        model(vec![external("w", &[1], &[("location", "w.bin")])]),
        &ReadOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("w.bin") && e.contains("without a directory"),
        "{e}"
    );
}

/// As ONNX's loader and onnxruntime decide: only `data_location: EXTERNAL` puts a
/// tensor's data in a file (a DEFAULT tensor with stray `external_data` keys keeps its
/// `raw_data`); a `location` given twice, an offset with a sign, a location with a
/// control character, a backslash or a trailing slash are refused.
#[test]
fn external_means_data_location_external_and_keys_are_strict() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d"), floats(&[0.0, 1.0])).unwrap();
    let mut inline = external("w", &[2], &[("location", "d")]);
    inline.data_location = 0;
    inline.raw_data = floats(&[7.0, 7.0]).into();
    let m = read(dir.path(), vec![inline]).unwrap();
    assert!(m.external_files.is_empty());
    assert_eq!(
        m.initializers[0].1.bytes().as_ref(),
        floats(&[7.0, 7.0]).as_slice()
    );
    for (keys, want) in [
        (vec![("location", "d"), ("location", "e")], "twice"),
        (
            vec![("location", "d"), ("offset", "+0")],
            "non-negative decimal",
        ),
        (vec![("location", "..\t/d")], "control character"),
        (vec![("location", "d\n")], "control character"),
        (vec![("location", "sub\\d")], "backslash"),
        (vec![("location", "d/")], "trailing"),
    ] {
        let e = read(dir.path(), vec![external("w", &[2], &keys)]).unwrap_err();
        assert!(e.contains(want), "{keys:?}: {e}");
    }
}
