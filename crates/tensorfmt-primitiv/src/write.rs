//! The writer: primitiv's exact marker forms through `rmp::encode` (uint32 always
//! `ce`, float always `ca`, smallest str/bin/array/map headers), every member a
//! top-level object.

use std::io::Write;
use std::path::Path;

use rmp::encode;

use crate::data::{Model, Parameter, PrimitivData, PrimitivShape, PrimitivTensor};
use crate::error::{PrimitivError, Result};
use crate::key::Key;
use crate::optimizer::Optimizer;

fn werr(e: encode::ValueWriteError<std::io::Error>) -> PrimitivError {
    match e {
        encode::ValueWriteError::InvalidMarkerWrite(e)
        | encode::ValueWriteError::InvalidDataWrite(e) => e.into(),
    }
}

fn len32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n)
        .map_err(|_| PrimitivError::Unwritable(format!("{what} of {n} does not fit in a uint32")))
}

fn u32<W: Write>(w: &mut W, v: u32) -> Result<()> {
    encode::write_u32(w, v).map_err(werr)
}

fn key<W: Write>(w: &mut W, k: &Key) -> Result<()> {
    encode::write_str_len(w, len32(k.as_bytes().len(), "string length")?).map_err(werr)?;
    w.write_all(k.as_bytes())?;
    Ok(())
}

fn shape<W: Write>(w: &mut W, s: &PrimitivShape) -> Result<()> {
    encode::write_array_len(w, s.dims().len() as u32).map_err(werr)?;
    for &d in s.dims() {
        u32(w, d)?;
    }
    u32(w, s.batch())
}

fn tensor<W: Write>(w: &mut W, t: &PrimitivTensor) -> Result<()> {
    shape(w, t.shape())?;
    encode::write_bin_len(w, len32(t.data().len(), "tensor data length")?).map_err(werr)?;
    w.write_all(t.data())?;
    Ok(())
}

fn parameter<W: Write>(w: &mut W, p: &Parameter) -> Result<()> {
    tensor(w, p.value())?;
    u32(w, len32(p.stats().len(), "stat count")?)?;
    for (k, t) in p.stats() {
        key(w, k)?;
        tensor(w, t)?;
    }
    Ok(())
}

fn model<W: Write>(w: &mut W, m: &Model) -> Result<()> {
    m.check_namespace()?;
    u32(w, len32(m.len(), "parameter count")?)?;
    for (path, p) in m.entries() {
        encode::write_array_len(w, len32(path.len(), "key path length")?).map_err(werr)?;
        for k in path {
            key(w, k)?;
        }
        parameter(w, p)?;
    }
    Ok(())
}

fn optimizer<W: Write>(w: &mut W, o: &Optimizer) -> Result<()> {
    encode::write_map_len(w, len32(o.uint_configs.len(), "uint config count")?).map_err(werr)?;
    for (k, v) in &o.uint_configs {
        key(w, k)?;
        u32(w, *v)?;
    }
    encode::write_map_len(w, len32(o.float_configs.len(), "float config count")?).map_err(werr)?;
    for (k, v) in &o.float_configs {
        key(w, k)?;
        encode::write_f32(w, *v).map_err(werr)?;
    }
    Ok(())
}

/// Writes a whole file (header and data) to any writer.
///
/// Stats and optimizer configs are written in the order they are held (file order for
/// data that was read, so read-then-write reproduces primitiv's files byte for byte);
/// model entries in key-path order, as primitiv does.
///
/// ```
/// use tensorfmt_primitiv::{encode, PrimitivData, PrimitivShape};
/// let mut out = Vec::new();
/// encode(&mut out, &PrimitivData::Shape(PrimitivShape::new([3], 4)?))?;
/// assert_eq!(out, [0xce, 0, 0, 0, 0, 0xce, 0, 0, 0, 1, 0xce, 0, 0, 0, 0,
///                  0x91, 0xce, 0, 0, 0, 3, 0xce, 0, 0, 0, 4]);
/// # Ok::<(), tensorfmt_primitiv::PrimitivError>(())
/// ```
pub fn encode<W: Write>(w: &mut W, data: &PrimitivData) -> Result<()> {
    u32(w, 0)?;
    u32(w, 1)?;
    u32(w, data.data_type().code())?;
    match data {
        PrimitivData::Shape(s) => shape(w, s),
        PrimitivData::Tensor(t) => tensor(w, t),
        PrimitivData::Parameter(p) => parameter(w, p),
        PrimitivData::Model(m) => model(w, m),
        PrimitivData::Optimizer(o) => optimizer(w, o),
    }
}

/// The bytes of a whole file.
///
/// ```
/// use tensorfmt_primitiv::{to_bytes, PrimitivData, PrimitivShape};
/// assert_eq!(to_bytes(&PrimitivData::Shape(PrimitivShape::scalar()))?.len(), 21);
/// # Ok::<(), tensorfmt_primitiv::PrimitivError>(())
/// ```
pub fn to_bytes(data: &PrimitivData) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(estimate(data));
    encode(&mut out, data)?;
    Ok(out)
}

fn estimate(data: &PrimitivData) -> usize {
    let t = |t: &PrimitivTensor| t.data().len() + 64;
    let p = |p: &Parameter| {
        t(p.value())
            + p.stats()
                .iter()
                .map(|(k, x)| k.as_bytes().len() + t(x))
                .sum::<usize>()
    };
    15 + match data {
        PrimitivData::Shape(_) => 64,
        PrimitivData::Tensor(x) => t(x),
        PrimitivData::Parameter(x) => p(x),
        PrimitivData::Model(m) => m.entries().map(|(_, x)| p(x) + 64).sum(),
        PrimitivData::Optimizer(o) => 64 * (o.uint_configs.len() + o.float_configs.len() + 2),
    }
}

/// Writes a file atomically (temporary file, then rename): a failure leaves any
/// existing file untouched, unlike primitiv's own save.
///
/// ```
/// use tensorfmt_primitiv::{write_file, read_file, PrimitivData, PrimitivShape, ReaderOptions};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("s.data");
/// let data = PrimitivData::Shape(PrimitivShape::new([2, 3], 1)?);
/// write_file(&path, &data)?;
/// let back = read_file(tensorfmt_core::io::read_file(&path)?, &ReaderOptions::default())?;
/// assert_eq!(back.data, data);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_file(path: impl AsRef<Path>, data: &PrimitivData) -> Result<()> {
    tensorfmt_core::io::write_atomic(path, |f| encode(f, data))
}

#[cfg(test)]
mod tests {
    //! primitiv's generic MessagePack writer vectors (spec §10, from upstream's
    //! `test/msgpack_writer_test.cc`) through this writer's encoders, and path-level
    //! writes failing part-way.
    use super::*;
    use tensorfmt_core::testing::PassThenFail;

    /// `write_file` is `write_atomic` around `encode`: the same pair failing after any
    /// number of bytes keeps the old file and leaves no temporary file; with no old
    /// file, none appears.
    #[test]
    fn failing_path_writes_keep_the_old_file() {
        let t =
            PrimitivTensor::from_f32(PrimitivShape::new([3, 2], 1).unwrap(), &[1.0; 6]).unwrap();
        let mut p = Parameter::new(t.clone()).unwrap();
        p.set_stat("Adam.m1", t);
        let data = PrimitivData::Parameter(p);
        let full = to_bytes(&data).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("p.data");
        let fresh = dir.path().join("new.data");
        std::fs::write(&target, b"old contents").unwrap();
        for n in 0..full.len() {
            for path in [&target, &fresh] {
                let r = tensorfmt_core::io::write_atomic(path, |f| {
                    encode(&mut PassThenFail::new(f, n), &data)
                });
                assert!(r.is_err(), "{n}");
            }
            assert_eq!(std::fs::read(&target).unwrap(), b"old contents", "{n}");
            assert!(!fresh.exists(), "{n}");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "{n}");
        }
        write_file(&target, &data).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), full);
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn key_bytes(len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        key(&mut out, &Key::new(vec![b'x'; len])).unwrap();
        out
    }

    #[test]
    fn uint32_and_float_have_fixed_markers() {
        let mut out = Vec::new();
        for v in [0x12345678, 0xdeadbeef, 0, 1] {
            u32(&mut out, v).unwrap();
        }
        assert_eq!(hex(&out), "ce12345678cedeadbeefce00000000ce00000001");
        let o = Optimizer {
            uint_configs: vec![],
            float_configs: vec![(Key::from("a"), 1.0), (Key::from("b"), -3.0)],
        };
        let mut out = Vec::new();
        optimizer(&mut out, &o).unwrap();
        assert_eq!(hex(&out), "8082a161ca3f800000a162cac0400000");
    }

    #[test]
    fn str_headers_are_smallest() {
        assert_eq!(hex(&key_bytes(0)), "a0");
        assert_eq!(hex(&key_bytes(31)[..1]), "bf");
        assert_eq!(hex(&key_bytes(32)[..2]), "d920");
        assert_eq!(hex(&key_bytes(0x100)[..3]), "da0100");
        assert_eq!(hex(&key_bytes(0x10000)[..5]), "db00010000");
    }

    fn bin_header(len: usize) -> String {
        let t = PrimitivTensor::from_f32(
            PrimitivShape::new([len as u32 / 4], 1).unwrap(),
            &vec![0.0; len / 4],
        )
        .unwrap();
        let mut out = Vec::new();
        tensor(&mut out, &t).unwrap();
        // dims array (1 + 5 bytes or 1 byte for a scalar) + batch (5 bytes)
        let skip = if len == 4 { 6 } else { 11 };
        hex(&out[skip..skip + 5])
    }

    #[test]
    fn bin_headers_are_smallest() {
        let mut out = Vec::new();
        encode::write_bin_len(&mut out, 0).unwrap();
        assert_eq!(hex(&out), "c400");
        assert!(bin_header(4).starts_with("c404"));
        assert!(bin_header(0xfc).starts_with("c4fc"));
        assert!(bin_header(0x100).starts_with("c50100"));
        assert!(bin_header(0x10000).starts_with("c600010000"));
    }

    #[test]
    fn array_and_map_headers_are_smallest() {
        let mut m = Model::new();
        let p = Parameter::new(PrimitivTensor::from_f32(PrimitivShape::scalar(), &[0.0]).unwrap())
            .unwrap();
        for n in [15usize, 16] {
            m.insert(
                (0..n).map(|i| Key::from(format!("k{i}"))).collect(),
                p.clone(),
            );
        }
        let mut out = Vec::new();
        model(&mut out, &m).unwrap_err(); // k0..k14 is a prefix of k0..k15: a namespace clash
        let mut m = Model::new();
        m.insert((0..15).map(|_| Key::from("a")).collect(), p.clone());
        m.insert((0..16).map(|_| Key::from("b")).collect(), p.clone());
        let mut out = Vec::new();
        model(&mut out, &m).unwrap();
        assert_eq!(hex(&out[5..6]), "9f");
        assert_eq!(hex(&out[6..8]), "a161");
        let second = 5 + 1 + 15 * 2 + 17; // count, key array, scalar parameter
        assert_eq!(hex(&out[second..second + 3]), "dc0010");
        let mut out = Vec::new();
        encode::write_array_len(&mut out, 0x10000).unwrap();
        encode::write_map_len(&mut out, 15).unwrap();
        encode::write_map_len(&mut out, 16).unwrap();
        encode::write_map_len(&mut out, 0x10000).unwrap();
        assert_eq!(hex(&out), "dd000100008fde0010df00010000");
        let mut out = Vec::new();
        encode::write_array_len(&mut out, 2).unwrap();
        key(&mut out, &Key::from("foo")).unwrap();
        key(&mut out, &Key::from("bar")).unwrap();
        assert_eq!(hex(&out), "92a3666f6fa3626172");
    }
}
