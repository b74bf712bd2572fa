//! `WriteOptions::skip_fsync` reaches every format's writer: without it each save syncs
//! its output once before the rename, with it none does. (One test in its own binary:
//! the sync counter is process-wide.)

use tensorfmt::{Order, Target, Tensor, WriteOptions};

#[test]
fn every_writer_syncs_by_default_and_none_with_skip_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let movie = Tensor::from_vec(values.clone(), [2, 3, 4, 1], Order::RowMajor).unwrap();
    let images = Tensor::from_vec(values, [2, 3, 4], Order::RowMajor).unwrap();
    let cases: &[(&str, &str, &Tensor)] = &[
        ("npy", "a.npy", &movie),
        ("npz", "a.npz", &movie),
        ("safetensors", "a.safetensors", &movie),
        ("pvp:dense", "a.pvp", &movie),
        ("pvp:sparse", "s.pvp", &movie),
        ("som:som-data", "a.bin", &images),
        ("primitiv:tensor", "a.data", &images),
        ("caffe:binaryproto", "a.binaryproto", &movie),
    ];
    for (to, name, tensor) in cases {
        let target: Target = to.parse().unwrap();
        let tensors = [("values".to_string(), (*tensor).clone())];
        for skip in [true, false] {
            let options = WriteOptions {
                skip_fsync: skip,
                ..WriteOptions::default()
            };
            let before = tensorfmt::io::synced_outputs();
            tensorfmt::save_to(&dir.path().join(name), &target, &tensors, &options)
                .unwrap_or_else(|e| panic!("{to}: {e}"));
            let synced = tensorfmt::io::synced_outputs() - before;
            assert_eq!(synced, u64::from(!skip), "{to}, skip_fsync={skip}");
        }
    }
}
