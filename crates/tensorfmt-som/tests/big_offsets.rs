//! Offsets are u64 end to end: a sparse PINK data file (holes, nothing written in
//! between) larger than 4 GiB, with entries written only near the end, reads entry k
//! past 4 GiB through the typed reader and through the facade.

use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;

use tensorfmt_core::ReadOptions;
use tensorfmt_som::SomFile;

/// 512 x 512 f32 per entry.
const SIDE: usize = 512;
const ENTRY: u64 = (SIDE * SIDE * 4) as u64;

#[test]
fn data_entry_past_4_gib_in_a_sparse_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.bin");
    let entries: u64 = 4200; // 4.1 GiB
    let header: Vec<u8> = [2i32, 0, 0, entries as i32, 0, 2, SIDE as i32, SIDE as i32]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let hl = header.len() as u64;
    let mut f = std::fs::File::create(&p).unwrap();
    f.write_all(&header).unwrap();
    let len = hl + entries * ENTRY;
    f.set_len(len).unwrap();
    let past = (4u64 << 30).div_ceil(ENTRY);
    assert!(hl + past * ENTRY >= 1 << 32 && past < entries);
    for k in [past, entries - 1] {
        f.seek(SeekFrom::Start(hl + k * ENTRY)).unwrap();
        let b: Vec<u8> = (0..SIDE * SIDE)
            .flat_map(|i| ((k as usize + i) as f32).to_le_bytes())
            .collect();
        f.write_all(&b).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    let m = std::fs::metadata(&p).unwrap();
    if m.blocks() * 512 > 64 << 20 {
        eprintln!(
            "SKIPPED: the filesystem does not keep holes ({} bytes allocated)",
            m.blocks() * 512
        );
        return;
    }
    assert_eq!(m.len(), len);

    let s = SomFile::open(&p).unwrap();
    assert_eq!(s.n_entries(), Some(entries));
    for k in [past, entries - 1] {
        let v = s.entry(k as usize).unwrap();
        assert_eq!(v.dims(), &[SIDE, SIDE]);
        let v = v.to_vec::<f32>().unwrap();
        assert_eq!(
            (v[0], v[SIDE * SIDE - 1]),
            (k as f32, (k as usize + SIDE * SIDE - 1) as f32)
        );
    }
    assert!(s
        .entry(1)
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .all(|&x| x == 0.0));

    let data = tensorfmt_core::io::map_file(&p).unwrap();
    let o = ReadOptions {
        frames: Some((past as usize, Some(past as usize + 2))),
        ..ReadOptions::default()
    };
    let t = tensorfmt_som::open_tensor_file(data, &o).unwrap();
    let d = t.read_tensor("data").unwrap();
    assert_eq!(d.dims(), &[2, SIDE, SIDE]);
    assert_eq!(d.to_vec::<f32>().unwrap()[3], (past + 3) as f32);
    let c = t.read_chunks("data").unwrap().next().unwrap().unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap()[0], past as f32);
}
