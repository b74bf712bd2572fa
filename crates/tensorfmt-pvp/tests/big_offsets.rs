//! Offsets are u64 end to end: a sparse file (holes, nothing written in between)
//! larger than 4 GiB, with frames written only near the end, reads frame k past
//! 4 GiB through the typed reader and through the facade.

use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;

use tensorfmt_core::ReadOptions;
use tensorfmt_pvp::{datatype, filetype, open_tensor_file, Header, PvpFile};

/// 512 x 512 x 1 f32 per frame.
const SIDE: usize = 512;
const FRAME: u64 = 8 + (SIDE * SIDE * 4) as u64;

#[test]
fn dense_frame_past_4_gib_in_a_sparse_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.pvp");
    let frames: u64 = (5 << 30) / FRAME; // about 5 GiB
    let mut f = std::fs::File::create(&p).unwrap();
    let mut h = Header::activity(
        filetype::DENSE,
        SIDE as i32,
        SIDE as i32,
        1,
        datatype::FLOAT,
        4,
    );
    h.nbands = frames as i32;
    f.write_all(&h.to_bytes()).unwrap();
    let len = 80 + frames * FRAME;
    f.set_len(len).unwrap();
    // Only the first frame past 4 GiB and the last frame are written.
    let past = (4u64 << 30).div_ceil(FRAME);
    assert!(80 + past * FRAME > 1 << 32 && past < frames);
    for k in [past, frames - 1] {
        f.seek(SeekFrom::Start(80 + k * FRAME)).unwrap();
        let mut b = (k as f64).to_le_bytes().to_vec();
        for i in 0..SIDE * SIDE {
            b.extend_from_slice(&((k as usize + i) as f32).to_le_bytes());
        }
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

    let PvpFile::Dense(r) = PvpFile::open(&p).unwrap() else {
        panic!("dense expected")
    };
    assert_eq!(r.len() as u64, frames);
    for k in [past, frames - 1] {
        assert!(r.layout().frame_offset(k as usize) > 1 << 32);
        let fr = r.frame(k as usize).unwrap();
        assert_eq!(fr.time, k as f64);
        let v = fr.values.to_vec::<f32>().unwrap();
        assert_eq!(v[0], k as f32);
        assert_eq!(v[SIDE * SIDE - 1], (k as usize + SIDE * SIDE - 1) as f32);
    }
    // A hole reads as zeros (frame 1 was never written).
    assert_eq!(r.time(1).unwrap(), 0.0);

    // The facade, selecting frames past 4 GiB (zero-copy, nothing in between read).
    let data = tensorfmt_core::io::map_file(&p).unwrap();
    let o = ReadOptions {
        frames: Some((past as usize, Some(past as usize + 1))),
        ..ReadOptions::default()
    };
    let t = open_tensor_file(data.clone(), &o).unwrap();
    assert_eq!(
        t.read_tensor("time").unwrap().to_vec::<f64>().unwrap(),
        vec![past as f64]
    );
    let v = t.read_tensor("values").unwrap();
    assert_eq!(v.dims(), &[1, SIDE, SIDE, 1]);
    assert_eq!(v.to_vec::<f32>().unwrap()[1], (past + 1) as f32);
    let last = open_tensor_file(
        data,
        &ReadOptions {
            frames: Some((frames as usize - 1, None)),
            ..ReadOptions::default()
        },
    )
    .unwrap();
    let c = last.read_chunks("values").unwrap().next().unwrap().unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap()[0], (frames - 1) as f32);
}
