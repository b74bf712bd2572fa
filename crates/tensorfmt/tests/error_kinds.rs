//! Every format crate's error says what kind of problem it is, and which byte offset
//! and field it names, through `tensorfmt::Classify` (kept by the core `Error`): the
//! Python exception classes are chosen from that, never from an error's text.

use tensorfmt::{caffe::CaffeError, pvp::PvpError, som::SomError, Error, ErrorKind};

#[test]
fn limits_are_limits_whatever_the_variant_is_called() {
    let caffe: Error = CaffeError::Limit {
        path: "layer[0]".into(),
        offset: 3,
        what: "allocation",
        value: 10,
        limit: 5,
    }
    .into();
    assert_eq!((caffe.kind(), caffe.offset()), (ErrorKind::Limit, Some(3)));
    let pvp: Error = PvpError::LimitExceeded {
        what: "frames",
        value: 9,
        limit: 1,
    }
    .into();
    assert_eq!(pvp.kind(), ErrorKind::Limit);
    // A core limit inside a format crate's error.
    let som: Error = SomError::Core(Error::LimitExceeded {
        what: "allocation",
        value: 9,
        limit: 1,
    })
    .into();
    assert_eq!(som.kind(), ErrorKind::Limit);
}

#[test]
fn offsets_fields_io_and_unsupported_come_from_the_error() {
    let pvp: Error = PvpError::BadField {
        offset: 12,
        field: "nx",
        value: -1,
        reason: "must be positive".into(),
    }
    .into();
    assert_eq!(
        (pvp.kind(), pvp.offset(), pvp.field()),
        (ErrorKind::Format, Some(12), Some("nx"))
    );
    let io: Error = PvpError::Io(std::io::Error::other("disk")).into();
    assert_eq!((io.kind(), io.offset()), (ErrorKind::Io, None));
    let npy = tensorfmt::interop::npy::open(
        bytes::Bytes::from_static(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<c8',"),
        "x",
        &Default::default(),
    )
    .unwrap_err();
    assert!(
        matches!(npy.kind(), ErrorKind::Format | ErrorKind::Unsupported),
        "{npy}"
    );
    let count: Error = CaffeError::Count {
        path: "layer[0].blobs[0]".into(),
        field: "data",
        actual: 1,
        shape: "[2]".into(),
        expected: 2,
    }
    .into();
    assert_eq!(count.field(), Some("data"));
    // Errors from outside the format crates are format errors with nothing named.
    let other = Error::format("png", std::io::Error::other("x"));
    assert_eq!(
        (other.kind(), other.offset(), other.field()),
        (ErrorKind::Format, None, None)
    );
}

/// A big-endian or Fortran-order npy whose copy the limit refuses was a format error
/// (the limit's message folded into a "malformed" one); it is a limit error, at the
/// data's offset. A rank over the limit likewise.
#[test]
fn npy_copies_and_ranks_over_the_limit_are_limit_errors() {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/core"));
    let tight = tensorfmt::ReadOptions {
        limits: tensorfmt::Limits {
            max_alloc: 8,
            ..Default::default()
        },
        ..Default::default()
    };
    let e = tensorfmt::open(&root.join("f64_be_3.npy"), &tight)
        .and_then(|d| d.read_tensor("f64_be_3"))
        .unwrap_err();
    assert_eq!(
        (e.kind(), e.field()),
        (ErrorKind::Limit, Some("data")),
        "{e}"
    );
    let low_rank = tensorfmt::ReadOptions {
        limits: tensorfmt::Limits {
            max_rank: 1,
            ..Default::default()
        },
        ..Default::default()
    };
    let e = tensorfmt::open(&root.join("f32_2x3.npy"), &low_rank).unwrap_err();
    assert_eq!(
        (e.kind(), e.field()),
        (ErrorKind::Limit, Some("shape")),
        "{e}"
    );
}
