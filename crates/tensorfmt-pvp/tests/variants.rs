//! Variants without a corpus file (random-state elements, filetype 1 with a border)
//! and bounded-memory streaming.

use bytes::Bytes;
use tensorfmt_core::{DType, ReadOptions};
use tensorfmt_pvp::{filetype, Header, PvpFile};

fn header(h: Header) -> Vec<u8> {
    h.to_bytes().to_vec()
}

#[test]
fn taus_uint4_elements_are_four_u32() {
    let mut h = Header::activity(filetype::DENSE, 2, 1, 1, 5, 16);
    h.nbands = 1;
    let mut b = header(h);
    b.extend_from_slice(&3.0f64.to_le_bytes());
    for v in 0u32..8 {
        b.extend_from_slice(&v.to_le_bytes());
    }
    let f = tensorfmt_pvp::open_tensor_file(b.into(), &ReadOptions::default()).unwrap();
    assert!(f.kind().contains("random-number state"));
    let t = f.read_tensor("values").unwrap();
    assert_eq!(
        (t.dtype(), t.dims()),
        (DType::U32, &[1usize, 1, 2, 1, 4][..])
    );
    assert_eq!(t.to_vec::<u32>().unwrap(), (0..8).collect::<Vec<_>>());
}

#[test]
fn filetype1_with_border_keeps_the_interior() {
    // 2x1 processes, each 1x1x1 with a border of 1 (3x3 blocks), no per-frame time.
    let mut h = Header::activity(filetype::DENSE, 1, 1, 1, 3, 4);
    h.filetype = 1;
    (
        h.nxprocs,
        h.numrecords,
        h.nbatch,
        h.recordsize,
        h.nbands,
        h.time,
    ) = (2, 2, 1, 36, 1, 7.0);
    let mut b = header(h);
    for block in 0..2 {
        for i in 0..9 {
            let v = if i == 4 { 10.0 + block as f32 } else { -1.0 };
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    let PvpFile::Dense(r) = PvpFile::from_bytes(b.into()).unwrap() else {
        panic!()
    };
    let f = r.frame(0).unwrap();
    assert_eq!(f.time, 7.0);
    assert_eq!(f.values.dims(), &[1, 2, 1]);
    assert_eq!(f.values.to_vec::<f32>().unwrap(), vec![10.0, 11.0]);
    // recordsize matching neither layout is refused.
    let mut h2 = h;
    h2.recordsize = 40;
    let mut b = header(h2);
    b.extend_from_slice(&[0u8; 80]);
    assert!(PvpFile::from_bytes(b.into()).is_err());
}

#[test]
fn streaming_chunks_are_zero_copy_frames() {
    // 40 frames: the file is 40x one frame; every chunk is one frame sliced from the
    // input buffer, so memory stays at one frame whatever the file size.
    let mut buf = std::io::Cursor::new(Vec::new());
    let mut w = tensorfmt_pvp::write::DenseWriter::new(&mut buf, 16, 8, 2).unwrap();
    for k in 0..40 {
        w.write_frame(k as f64, &vec![k as f32; 256]).unwrap();
    }
    w.finish().unwrap();
    let data = Bytes::from(buf.into_inner());
    let range = data.as_ptr() as usize..data.as_ptr() as usize + data.len();
    let f = tensorfmt_pvp::open_tensor_file(data.clone(), &ReadOptions::default()).unwrap();
    let mut n = 0;
    for (k, c) in f.read_chunks("values").unwrap().enumerate() {
        let c = c.unwrap();
        assert_eq!(c.dims(), &[1, 8, 16, 2]);
        assert!(
            range.contains(&(c.bytes().as_ptr() as usize)),
            "chunk {k} is not a slice of the file"
        );
        assert_eq!(c.get::<f32>(&[0, 7, 15, 1]).unwrap(), k as f32);
        n += 1;
    }
    assert_eq!(n, 40);
}
