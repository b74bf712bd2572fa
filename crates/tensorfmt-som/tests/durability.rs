//! Writes that lose nothing: every writer fed a sink that fails after N bytes returns
//! an error (never a panic), and path-level writes that fail part-way leave the old
//! file (or none) under the target name.

use std::path::Path;

use bytes::Bytes;
use tensorfmt_core::testing::{FailAfter, PassThenFail};
use tensorfmt_core::{Order, ReadOptions, Tensor, WriteOptions};
use tensorfmt_som::{
    save_tensors, save_with, write_data, write_mapping, write_rotflip, write_som, DataWriter,
    HexGrid, MapLayout, RotFlip, SomError, WriteConfig,
};

fn cfg() -> WriteConfig {
    WriteConfig {
        comments: vec!["# a comment".into()],
        ..WriteConfig::default()
    }
}

fn images() -> Tensor {
    let v: Vec<f32> = (0..3 * 4 * 5).map(|i| i as f32).collect();
    Tensor::from_vec(v, [3, 4, 5], Order::RowMajor).unwrap()
}

type Writer = fn(&mut FailAfter) -> Result<(), SomError>;

#[test]
fn every_writer_reports_a_failing_sink_at_every_byte() {
    let writers: [(&str, Writer); 6] = [
        ("data", |w| write_data(w, &images(), &cfg())),
        ("data stream", |w| {
            let mut d = DataWriter::new(w, &[4, 5], &cfg())?;
            let t = images();
            d.append(&t)?;
            d.append_bytes(&[0u8; 4 * 4 * 5])?;
            d.finish().map(drop)
        }),
        ("som cartesian", |w| {
            let som = Tensor::from_vec(vec![1f32; 6 * 4], [6, 4], Order::RowMajor).unwrap();
            write_som(w, &MapLayout::Cartesian(vec![3, 2]), &[2, 2], &som, &cfg())
        }),
        ("som hexagonal", |w| {
            let som = Tensor::from_vec(vec![2f32; 7 * 4], [7, 4], Order::RowMajor).unwrap();
            let map = MapLayout::Hexagonal(HexGrid::new(3).unwrap());
            write_som(w, &map, &[2, 2], &som, &cfg())
        }),
        ("mapping", |w| {
            let d = Tensor::from_vec(vec![0.5f32; 5 * 6], [5, 6], Order::RowMajor).unwrap();
            write_mapping(w, &MapLayout::Cartesian(vec![2, 3]), &d, &cfg())
        }),
        ("rotflip", |w| {
            let r = RotFlip {
                flip_byte: 1,
                angle: 0.25,
            };
            write_rotflip(w, &MapLayout::Cartesian(vec![2, 2]), 3, &[r; 12], &cfg())
        }),
    ];
    for (name, write) in writers {
        let mut full = FailAfter::new(usize::MAX);
        write(&mut full).unwrap();
        let len = full.written().len();
        assert!(tensorfmt_som::open_tensor_file(
            Bytes::copy_from_slice(full.written()),
            &ReadOptions::default()
        )
        .is_ok());
        for n in 0..len {
            let mut sink = FailAfter::new(n);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write(&mut sink)))
                .unwrap_or_else(|_| panic!("{name}: panic with a sink failing after {n} bytes"));
            match r {
                Err(SomError::Io(_)) => {}
                other => panic!("{name}: sink failing after {n} of {len} bytes gave {other:?}"),
            }
            // A half-written file never reads as a whole one.
            let got = Bytes::copy_from_slice(sink.written());
            assert!(
                tensorfmt_som::open_tensor_file(got, &ReadOptions::default()).is_err(),
                "{name}: {n} bytes read as a complete file"
            );
        }
    }
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn a_failed_save_leaves_the_old_file_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("data.bin");
    let fail = |left: usize| {
        save_with(&p, |f| {
            write_data(PassThenFail::new(f, left), &images(), &cfg())
        })
    };
    // No old file: none afterwards, whatever the point of failure.
    for left in [0, 10, 40, 100] {
        assert!(matches!(fail(left), Err(SomError::Io(_))));
        assert!(!p.exists());
    }
    assert!(leftovers(dir.path()).is_empty());
    // An old file: unchanged afterwards.
    let o = WriteOptions {
        kind: Some("som-data".into()),
        ..WriteOptions::default()
    };
    save_tensors(&p, &[("data".into(), images())], &o).unwrap();
    let before = std::fs::read(&p).unwrap();
    for left in [0, 10, 40, 100] {
        assert!(fail(left).is_err());
        assert_eq!(std::fs::read(&p).unwrap(), before);
    }
    // A streaming writer dropped before commit leaves the old file.
    let mut w = DataWriter::create(&p, &[4, 5], &cfg()).unwrap();
    w.append(&images()).unwrap();
    drop(w);
    assert_eq!(std::fs::read(&p).unwrap(), before);
    // save_tensors refusing its input part-way (a bad rotation/flip record) too.
    let flip = Tensor::from_vec(vec![0u8, 1, 2, 0], [1, 4], Order::RowMajor).unwrap();
    let angle = Tensor::from_vec(vec![0f32; 4], [1, 4], Order::RowMajor).unwrap();
    let o = WriteOptions {
        kind: Some("som-rotflip".into()),
        extra: [("som_dims".to_string(), "2,2".to_string())].into(),
        ..WriteOptions::default()
    };
    assert!(save_tensors(&p, &[("flip".into(), flip), ("angle".into(), angle)], &o).is_err());
    assert_eq!(std::fs::read(&p).unwrap(), before);
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}
