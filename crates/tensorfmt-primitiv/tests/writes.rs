//! Writes that lose nothing: the writer, fed a sink that fails after N bytes, returns an
//! error (never a panic) with exactly the first N bytes of the right output written;
//! a writer process killed part-way leaves the old file under the target name.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use tensorfmt_core::testing::{corpus_dir, prefix_lengths, FailAfter};
use tensorfmt_core::{Order, Tensor, WriteOptions};
use tensorfmt_primitiv::{encode, read_file, PrimitivData, ReaderOptions};

fn data_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "data"))
        .collect();
    v.sort();
    v
}

/// Every failure point below the output's length (a sample above 4 KiB).
fn sweep(what: &str, data: &PrimitivData, full: &[u8]) -> usize {
    let ns = prefix_lengths(full.len(), &[]);
    for &n in &ns {
        let mut w = FailAfter::new(n);
        assert!(
            encode(&mut w, data).is_err(),
            "{what}: failing after {n} bytes succeeded"
        );
        assert_eq!(
            w.written(),
            &full[..n],
            "{what}: bytes before the failure at {n}"
        );
    }
    let mut w = FailAfter::new(full.len());
    encode(&mut w, data).unwrap();
    assert_eq!(w.written(), full, "{what}");
    ns.len()
}

#[test]
fn writer_fails_cleanly_at_every_point() {
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/primitiv")];
    if let Some(c) = corpus_dir(env!("CARGO_MANIFEST_DIR"), "primitiv") {
        dirs.push(c.join("golden"));
        dirs.push(c.join("synthesized"));
    }
    let (mut files, mut runs) = (0, 0);
    let t = Instant::now();
    for dir in dirs {
        for p in data_files(&dir) {
            let bytes: Bytes = std::fs::read(&p).unwrap().into();
            let d = read_file(bytes.clone(), &ReaderOptions::default()).unwrap();
            // Files written by primitiv (and our fixtures) re-encode byte for byte.
            runs += sweep(&p.display().to_string(), &d.data, &bytes);
            files += 1;
        }
    }
    assert!(files >= 6);
    eprintln!(
        "primitiv writer: {files} files, {runs} failing writes in {:?}",
        t.elapsed()
    );
}

/// The child side of `killed_writer_leaves_the_old_file`: rewrites a big parameter
/// over and over until killed. Does nothing unless the parent set the variable.
#[test]
fn child_writer_loop() {
    let Ok(target) = std::env::var("TENSORFMT_PRIMITIV_KILL_TARGET") else {
        return;
    };
    let big = Tensor::from_vec(vec![0.25f32; 16 << 20], [4096, 4096], Order::ColumnMajor).unwrap();
    let named = [("value".to_string(), big)];
    loop {
        tensorfmt_primitiv::save_tensors(Path::new(&target), &named, &WriteOptions::default())
            .unwrap();
    }
}

#[test]
fn killed_writer_leaves_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("p.data");
    let small = Tensor::from_vec(vec![1f32, 2.0], [2], Order::ColumnMajor).unwrap();
    tensorfmt_primitiv::save_tensors(
        &target,
        &[("value".into(), small)],
        &WriteOptions::default(),
    )
    .unwrap();
    let old = std::fs::read(&target).unwrap();
    // Either the old file or a complete new one, never a half file.
    tensorfmt_core::testing::kill_rewriting_child(
        "child_writer_loop",
        "TENSORFMT_PRIMITIV_KILL_TARGET",
        &target,
        &old,
        &[0, 30, 120],
        |now| {
            let d = read_file(now.to_vec().into(), &ReaderOptions::default()).unwrap();
            let PrimitivData::Parameter(p) = d.data else {
                panic!("not a parameter")
            };
            assert_eq!(p.value().data().len(), 64 << 20);
        },
    );
}

#[test]
fn save_tensors_narrows_to_f32_only_when_asked() {
    use tensorfmt_core::{DType, ReadOptions};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.data");
    let ints = Tensor::from_vec(vec![1i32, -2, 3, 1 << 24], [2, 2], Order::RowMajor).unwrap();
    let wide = Tensor::from_vec(vec![0.1f64, 1e300], [2], Order::RowMajor).unwrap();
    let named = [("enc.w".to_string(), ints), ("enc.b".to_string(), wide)];
    // Refused by default, and for any other requested dtype; nothing is written.
    assert!(tensorfmt_primitiv::save_tensors(&p, &named, &WriteOptions::default()).is_err());
    let f64_opts = WriteOptions {
        dtype: Some(DType::F64),
        ..WriteOptions::default()
    };
    assert!(tensorfmt_primitiv::save_tensors(&p, &named, &f64_opts).is_err());
    assert!(!p.exists());
    let opts = WriteOptions {
        dtype: Some(DType::F32),
        ..WriteOptions::default()
    };
    tensorfmt_primitiv::save_tensors(&p, &named, &opts).unwrap();
    let f = tensorfmt_primitiv::open_tensor_file(
        tensorfmt_core::io::read_file(&p).unwrap(),
        &ReadOptions::default(),
    )
    .unwrap();
    let w = f.read_tensor("enc.w").unwrap();
    assert_eq!((w.dtype(), w.dims()), (DType::F32, &[2usize, 2][..]));
    assert_eq!(w.to_vec::<f32>().unwrap(), [1.0, -2.0, 3.0, 16777216.0]);
    let b = f.read_tensor("enc.b").unwrap().to_vec::<f32>().unwrap();
    assert_eq!(b, [0.1f32, f32::INFINITY]); // f64 -> f32 rounding, as a cast does
}
