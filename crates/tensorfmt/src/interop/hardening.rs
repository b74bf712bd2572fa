//! Hostile and truncated input for the npy, npz and safetensors readers: allocation
//! bombs are typed errors raised before anything is allocated, `ReadOptions.limits` is
//! honoured, and every prefix of every `testdata/core` fixture is an error, never a
//! panic.

use std::io::Write;
use std::path::PathBuf;

use bytes::Bytes;
use tensorfmt_core::testing::prefix_lengths;
use tensorfmt_core::{Error, Limits, Order, ReadOptions, Tensor, TensorFile, WriteOptions};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

use super::{npy, npz, safetensors};

fn open_any(
    ext: &str,
    data: Bytes,
    options: &ReadOptions,
) -> tensorfmt_core::Result<Box<dyn TensorFile>> {
    Ok(match ext {
        "npy" => Box::new(npy::open(data, "x", options)?),
        "npz" => Box::new(npz::open(data, options)?),
        "safetensors" => Box::new(safetensors::open(data, options)?),
        other => panic!("no reader for {other}"),
    })
}

/// Everything a caller may do with an opened file; errors are fine, panics are not.
fn exercise(f: &dyn TensorFile) {
    let _ = f.header();
    let _ = f.warnings();
    for info in f.tensors() {
        let _ = f.read_tensor(&info.name);
        if let Ok(chunks) = f.read_chunks(&info.name) {
            for c in chunks {
                let _ = c;
            }
        }
    }
    let _ = f.validate();
}

fn fixtures() -> Vec<(PathBuf, String)> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/core"));
    let mut v: Vec<(PathBuf, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let ext = p.extension()?.to_str()?.to_string();
            ["npy", "npz", "safetensors"]
                .contains(&ext.as_str())
                .then_some((p, ext))
        })
        .collect();
    v.sort();
    v
}

/// Structure boundaries: npy header end, safetensors header end, zip signatures.
fn boundaries(bytes: &[u8]) -> Vec<usize> {
    let mut b = vec![8, 10, 12];
    if let Ok(h) = npy::parse_header(bytes, &Limits::default()) {
        b.push(h.data_offset);
    }
    if let Some(n) = bytes.get(..8) {
        let n = u64::from_le_bytes(n.try_into().unwrap());
        if let Some(end) = usize::try_from(n).ok().and_then(|n| n.checked_add(8)) {
            b.push(end);
        }
    }
    for (i, w) in bytes.windows(2).enumerate() {
        if w == b"PK" {
            b.push(i);
        }
    }
    b
}

#[test]
fn every_prefix_of_every_fixture_is_an_error() {
    let files = fixtures();
    assert!(files.len() >= 6, "fixtures missing: {files:?}");
    for (path, ext) in files {
        let good = std::fs::read(&path).unwrap();
        let full = open_any(&ext, Bytes::from(good.clone()), &ReadOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        exercise(full.as_ref());
        full.validate().unwrap();
        for n in prefix_lengths(good.len(), &boundaries(&good)) {
            let cut = Bytes::from(good[..n].to_vec());
            match open_any(&ext, cut, &ReadOptions::default()) {
                Ok(f) => {
                    exercise(f.as_ref());
                    panic!("{} cut to {n} bytes opened", path.display());
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
    }
}

/// Every fixture opened under tiny limits: an error or a success, never a panic, and
/// never an allocation above the limit (the limit errors are typed).
#[test]
fn fixtures_under_tight_limits() {
    for (path, ext) in fixtures() {
        let good = Bytes::from(std::fs::read(&path).unwrap());
        for limits in [
            Limits {
                max_alloc: 0,
                ..Limits::default()
            },
            Limits {
                max_items: 0,
                ..Limits::default()
            },
            Limits {
                max_rank: 0,
                ..Limits::default()
            },
        ] {
            let o = ReadOptions {
                limits,
                ..ReadOptions::default()
            };
            if let Ok(f) = open_any(&ext, good.clone(), &o) {
                exercise(f.as_ref());
            }
        }
    }
}

fn npy_bytes(header: &str, data: &[u8]) -> Vec<u8> {
    let mut f = b"\x93NUMPY\x01\x00".to_vec();
    let total = (10 + header.len() + 1).next_multiple_of(64);
    let text = format!("{header:<w$}\n", w = total - 11);
    f.extend((text.len() as u16).to_le_bytes());
    f.extend(text.bytes());
    f.extend(data);
    f
}

#[test]
fn npy_allocation_bombs() {
    let o = ReadOptions::default();
    // A shape of 2^62 elements in a 128-byte file.
    let b = npy_bytes(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }",
        &[],
    );
    let e = npy::open(Bytes::from(b), "x", &o).unwrap_err().to_string();
    assert!(e.contains("overflows") || e.contains("needs"), "{e}");
    // A product that overflows usize.
    let b = npy_bytes(
        "{'descr': '<u1', 'fortran_order': False, 'shape': (65536, 65536, 65536, 65536, 2), }",
        &[],
    );
    let e = npy::open(Bytes::from(b), "x", &o).unwrap_err().to_string();
    assert!(e.contains("overflows"), "{e}");
    // A plausible shape, more bytes than present.
    let b = npy_bytes(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000), }",
        &[0; 64],
    );
    let e = npy::open(Bytes::from(b), "x", &o).unwrap_err().to_string();
    assert!(e.contains("needs 4000000000 bytes, only 64 present"), "{e}");
    // A v2 header length of 4 GiB - 1 in a 16-byte file.
    let e = npy::open(
        Bytes::from_static(b"\x93NUMPY\x02\x00\xff\xff\xff\xff{}  "),
        "x",
        &o,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("header length"), "{e}");
    // Rank over the limit.
    let b = npy_bytes(
        "{'descr': '<u1', 'fortran_order': False, 'shape': (1, 1, 1, 1), }",
        &[0],
    );
    let tight = ReadOptions {
        limits: Limits {
            max_rank: 3,
            ..Limits::default()
        },
        ..o.clone()
    };
    assert!(npy::open(Bytes::from(b), "x", &tight).is_err());
    // Data that needs a copy (big-endian / Fortran) is refused over max_alloc.
    let b = npy_bytes(
        "{'descr': '>f4', 'fortran_order': False, 'shape': (256,), }",
        &[0; 1024],
    );
    let tight = ReadOptions {
        limits: Limits {
            max_alloc: 1000,
            ..Limits::default()
        },
        ..o.clone()
    };
    let f = npy::open(Bytes::from(b), "x", &tight).unwrap();
    let e = f.read_tensor("x").unwrap_err().to_string();
    assert!(e.contains("allocation"), "{e}");
}

/// A one-member npz of `n` zero bytes (u8), deflated.
fn deflated_zeros(n: usize) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut zip = ZipWriter::new(&mut out);
    let opts = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .large_file(false);
    zip.start_file("z.npy", opts).unwrap();
    zip.write_all(&npy::header_bytes(
        tensorfmt_core::DType::U8,
        &tensorfmt_core::Shape::new([n]),
    ))
    .unwrap();
    let block = vec![0u8; 1 << 20];
    let mut left = n;
    while left > 0 {
        let k = left.min(block.len());
        zip.write_all(&block[..k]).unwrap();
        left -= k;
    }
    zip.finish().unwrap();
    out.into_inner()
}

/// Rewrites the uncompressed size in the central directory and local header.
fn patch_sizes(mut z: Vec<u8>, size: u32) -> Vec<u8> {
    for sig in [&b"PK\x01\x02"[..], &b"PK\x03\x04"[..]] {
        let at = z.windows(4).position(|w| w == sig).unwrap();
        let off = if sig[2] == 1 { 24 } else { 22 };
        z[at + off..at + off + 4].copy_from_slice(&size.to_le_bytes());
    }
    z
}

#[test]
fn npz_deflate_bombs_and_lying_sizes() {
    // 64 MiB of zeros deflate to ~64 KiB: a bomb under a 1 MiB allocation limit.
    let bomb = deflated_zeros(64 << 20);
    assert!(bomb.len() < 1 << 20);
    let tight = ReadOptions {
        limits: Limits {
            max_alloc: 1 << 20,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    let f = npz::open(Bytes::from(bomb.clone()), &tight).unwrap();
    let e = f.read_tensor("z").unwrap_err();
    assert!(
        matches!(
            e,
            Error::LimitExceeded {
                what: "allocation",
                ..
            }
        ),
        "{e}"
    );
    // Streamed (issue 24): validation and statistics inflate it in pieces under the
    // limit, so a legal bomb is checked without holding it.
    f.validate().unwrap();
    assert_eq!(f.stats("z").unwrap().count, 64 << 20);
    // With default limits the same archive reads back.
    let f = npz::open(Bytes::from(bomb), &ReadOptions::default()).unwrap();
    assert_eq!(f.read_tensor("z").unwrap().numel(), 64 << 20);

    // A directory claiming 4 GiB from a few hundred compressed bytes.
    let small = deflated_zeros(1000);
    let liar = patch_sizes(small.clone(), u32::MAX - 1);
    let e = npz::open(Bytes::from(liar), &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("uncompressed size") && e.contains("1032:1"),
        "{e}"
    );
    // Claiming fewer bytes than the member holds: the shape check refuses it at open.
    let short = patch_sizes(small.clone(), 500);
    assert!(npz::open(Bytes::from(short), &ReadOptions::default()).is_err());
    // Claiming more bytes than it holds (within the ratio): a read error, not a panic.
    let long = patch_sizes(small, 1000 + 128 + 50);
    if let Ok(f) = npz::open(Bytes::from(long), &ReadOptions::default()) {
        assert!(f.read_tensor("z").is_err());
    }
}

#[test]
fn npz_member_limits() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.npz");
    let t = Tensor::from_vec(vec![1u8; 8], [8], Order::RowMajor).unwrap();
    let tensors: Vec<(String, Tensor)> = (0..5).map(|i| (format!("t{i}"), t.clone())).collect();
    npz::save(&p, &tensors, &WriteOptions::default()).unwrap();
    let data = Bytes::from(std::fs::read(&p).unwrap());
    let o = ReadOptions {
        limits: Limits {
            max_items: 4,
            ..Limits::default()
        },
        ..ReadOptions::default()
    };
    assert!(matches!(
        npz::open(data.clone(), &o),
        Err(Error::LimitExceeded {
            what: "item count",
            ..
        })
    ));
    assert!(npz::open(data, &ReadOptions::default()).is_ok());
}

fn st_file(header: &[u8], data_len: usize, declared: Option<u64>) -> Bytes {
    let mut f = declared
        .unwrap_or(header.len() as u64)
        .to_le_bytes()
        .to_vec();
    f.extend(header);
    f.extend(std::iter::repeat_n(0u8, data_len));
    Bytes::from(f)
}

#[test]
fn safetensors_hostile_headers() {
    let o = ReadOptions::default();
    let h = br#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
    assert!(safetensors::open(st_file(h, 8, None), &o).is_ok());
    // Header length 2^63 and u64::MAX.
    for n in [1u64 << 63, u64::MAX, h.len() as u64 + 9] {
        let e = safetensors::open(st_file(h, 8, Some(n)), &o)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("header length") && e.contains("declares"),
            "{n}: {e}"
        );
    }
    // Fewer than 8 bytes.
    let e = safetensors::open(Bytes::from_static(b"\x02\0\0"), &o)
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs 8"), "{e}");
    // Offsets past the end, overlapping, or not matching the shape.
    for bad in [
        &br#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}}"#[..],
        br#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#,
        br#"{"x":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}}"#,
        br#"{"x":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}"#,
        br#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551615,8]}}"#,
    ] {
        assert!(
            safetensors::open(st_file(bad, 8, None), &o).is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    // Limits: header bytes, tensor count, rank.
    let tight = |l: Limits| ReadOptions {
        limits: l,
        ..ReadOptions::default()
    };
    assert!(safetensors::open(
        st_file(h, 8, None),
        &tight(Limits {
            max_alloc: 10,
            ..Limits::default()
        })
    )
    .is_err());
    assert!(safetensors::open(
        st_file(h, 8, None),
        &tight(Limits {
            max_items: 0,
            ..Limits::default()
        })
    )
    .is_err());
    assert!(safetensors::open(
        st_file(h, 8, None),
        &tight(Limits {
            max_rank: 0,
            ..Limits::default()
        })
    )
    .is_err());
}

// ---- carried metadata (`tensorfmt.source`) is input like any other ----

/// `dense_f32.pvp` converted to safetensors: its tensors and its metadata as JSON.
fn carried_dense() -> (Vec<(String, Tensor)>, serde_json::Value, Vec<u8>) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pvp/dense_f32.pvp");
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("x.safetensors");
    let doc = crate::Document::open(&src).unwrap();
    doc.convert_to(&st, crate::Format::Safetensors).unwrap();
    let mid = crate::Document::open(&st).unwrap();
    let json = crate::provenance::carried(mid.file()).unwrap();
    (
        mid.read_all().unwrap(),
        serde_json::from_str(&json).unwrap(),
        std::fs::read(&src).unwrap(),
    )
}

fn zeros_like(tensors: &[(String, Tensor)]) -> Vec<(String, Tensor)> {
    tensors
        .iter()
        .map(|(n, t)| {
            let z = vec![0u8; t.bytes().len()];
            (
                n.clone(),
                Tensor::from_bytes(t.dtype(), t.dims().to_vec(), Order::RowMajor, z).unwrap(),
            )
        })
        .collect()
}

fn b64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            out.push(if i <= c.len() {
                T[(n >> (18 - 6 * i)) as usize & 63] as char
            } else {
                '='
            });
        }
    }
    out
}

/// Saves `tensors` with metadata `meta` in `via`, converts to PVP, and checks the
/// outcome: an error, or a PVP whose tensors are exactly `tensors` (never values that
/// are only in the metadata), no larger than `max_len`, with a note when the metadata
/// was not used. Returns whether the metadata was used.
fn lying(
    tensors: &[(String, Tensor)],
    meta: &serde_json::Value,
    via: crate::Format,
    max_len: u64,
) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let mid = dir.path().join(format!("m.{}", via.extensions()[0]));
    let options = WriteOptions {
        carried: Some(meta.to_string()),
        ..WriteOptions::default()
    };
    crate::save(&mid, via, tensors, &options).unwrap();
    let out = dir.path().join("out.pvp");
    let report =
        match crate::Document::open(&mid).and_then(|d| d.convert_to(&out, crate::Format::Pvp)) {
            Ok(r) => r,
            Err(e) => {
                assert!(!out.exists(), "{e}: output left behind");
                return false;
            }
        };
    assert!(std::fs::metadata(&out).unwrap().len() <= max_len);
    let got = crate::Document::open(&out).unwrap();
    for (n, t) in tensors {
        assert_eq!(&got.read_tensor(n).unwrap(), t, "{n}: {report:?}");
    }
    let used = report.warnings.is_empty();
    if !used {
        assert!(
            report.warnings.iter().any(|w| w.contains("tensors alone")),
            "{report:?}"
        );
    }
    used
}

#[test]
fn carried_metadata_that_lies_is_never_trusted() {
    let (tensors, meta, original) = carried_dense();
    let zeros = zeros_like(&tensors);
    let max = original.len() as u64 * 2;
    for via in [crate::Format::Safetensors, crate::Format::Npz] {
        // The honest metadata with other values: spliced in place.
        assert!(lying(&zeros, &meta, via, max));

        // Issue 23 item 2: "the tensors are already in place": no layouts, the whole
        // file (values 666) as skeleton. The zeros must win, or nothing is written.
        let mut m = meta.clone();
        let mut file = original.clone();
        for v in file[88..].chunks_exact_mut(4) {
            v.copy_from_slice(&666f32.to_le_bytes());
        }
        for t in m["tensors"].as_array_mut().unwrap() {
            t.as_object_mut().unwrap().remove("layout");
        }
        m["skeleton"] = b64(&file).into();
        assert!(!lying(&zeros, &m, via, max));

        // A huge file claimed from a small skeleton (the 1.19 MB -> 2.1 GB case):
        // counts and sizes that do not add up.
        let mut m = meta.clone();
        m["size"] = (1u64 << 31).into();
        assert!(!lying(&zeros, &m, via, max));
        let mut m = meta.clone();
        m["tensors"][0]["layout"]["runs"][0][2][0][0] = (1u64 << 40).into();
        assert!(!lying(&zeros, &m, via, max));
        let mut m = meta.clone();
        m["tensors"][0]["layout"]["runs"][0][2] = serde_json::json!([[u64::MAX, u64::MAX]]);
        assert!(!lying(&zeros, &m, via, max));

        // Layouts inside the file, of the right sizes, tiling it with the skeleton,
        // but elsewhere (each frame's values claimed before its time): the spliced
        // file's reader declares other places, so it is refused.
        let mut m = meta.clone();
        let (offset, len) = (
            m["tensors"][0]["layout"]["runs"][0][0].as_u64().unwrap(),
            m["tensors"][0]["layout"]["runs"][0][1].as_u64().unwrap(),
        );
        assert_eq!(
            m["tensors"][1]["layout"]["runs"][0][0].as_u64(),
            Some(offset - 8)
        );
        m["tensors"][0]["layout"]["runs"][0][0] = (offset - 8).into();
        m["tensors"][1]["layout"]["runs"][0][0] = (offset - 8 + len).into();
        assert!(!lying(&zeros, &m, via, max));
        let dir = tempfile::tempdir().unwrap();
        let mid = dir.path().join("m.safetensors");
        let options = WriteOptions {
            carried: Some(m.to_string()),
            ..WriteOptions::default()
        };
        crate::save(&mid, crate::Format::Safetensors, &zeros, &options).unwrap();
        let report = crate::Document::open(&mid)
            .unwrap()
            .convert_to(dir.path().join("o.pvp"), crate::Format::Pvp)
            .unwrap();
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.contains("does not lie where")),
            "{report:?}"
        );

        // Two tensors claiming the same bytes.
        let mut m = meta.clone();
        let values_runs = m["tensors"][0]["layout"]["runs"][0].clone();
        m["tensors"][1]["layout"]["runs"][0][0] = values_runs[0].clone();
        assert!(!lying(&zeros, &m, via, max));

        // Other tensors than recorded, other dtypes or shapes.
        let mut m = meta.clone();
        m["tensors"][0]["name"] = "other".into();
        assert!(!lying(&zeros, &m, via, max));
        let mut m = meta.clone();
        m["tensors"][1]["dtype"] = "f32".into();
        assert!(!lying(&zeros, &m, via, max));

        // Not a legacy format, an old version, garbage, a skeleton over the cap.
        for (key, value) in [
            ("format", serde_json::json!("npz")),
            ("tensorfmt", serde_json::json!(1)),
            ("skeleton", serde_json::json!("!!!!")),
            ("tensors", serde_json::json!("x")),
        ] {
            let mut m = meta.clone();
            m[key] = value;
            let used = lying(&zeros, &m, via, max);
            assert!(!used || key == "format", "{key}");
        }
        let mut m = meta.clone();
        m["skeleton"] = "A"
            .repeat(crate::provenance::MAX_SKELETON / 3 * 4 + 8)
            .into();
        assert!(!lying(&zeros, &m, via, max));
    }
}
