//! Hostile input: allocation bombs, lengths beyond the file, deep nesting, huge repeated
//! counts. Each must be a typed error naming the place, found before anything is
//! allocated from the declared size, and fast.

// `expect_err` needs `T: Debug`, which `Box<dyn TensorFile>` is not.
#![allow(clippy::err_expect)]

use bytes::Bytes;
use tensorfmt_caffe::{
    open_tensor_file, read_blob_proto_with, read_blob_vector_with, read_model_with,
    read_solver_state_with, CaffeError, CaffeReadOptions, FileKind,
};
use tensorfmt_core::testing::assert_fast as fast;
use tensorfmt_core::{Limits, ReadOptions};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u32, wt: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wt));
}

fn vfield(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, 0);
    varint(out, v);
}

fn lfield(out: &mut Vec<u8>, field: u32, body: &[u8]) {
    key(out, field, 2);
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

fn floats(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn packed_dims(dims: &[u64]) -> Vec<u8> {
    let mut p = Vec::new();
    for &d in dims {
        varint(&mut p, d);
    }
    let mut s = Vec::new();
    lfield(&mut s, 1, &p);
    s
}

/// Options whose allocation cap is far below any bomb: a reader that allocated from
/// the declared size would hit it (or the test's time budget) instead of the real check.
fn tiny() -> CaffeReadOptions {
    CaffeReadOptions {
        limits: Limits {
            max_alloc: 1 << 16,
            ..Limits::default()
        },
        ..CaffeReadOptions::default()
    }
}

fn facade(limits: Limits) -> ReadOptions {
    ReadOptions {
        limits,
        ..ReadOptions::default()
    }
}

#[test]
fn blob_claiming_2_pow_40_values_by_shape() {
    // shape [2^20, 2^20] with one float: a count of 2^40 is refused by the shape rules.
    let mut b = Vec::new();
    lfield(&mut b, 5, &floats(&[1.0]));
    lfield(&mut b, 7, &packed_dims(&[1 << 20, 1 << 20]));
    let opts = facade(Limits {
        max_alloc: 1 << 16,
        ..Limits::default()
    });
    let err = fast("shape bomb", || open_tensor_file(b.clone().into(), &opts))
        .err()
        .expect("an error");
    let e = err.to_string();
    assert!(e.contains("INT_MAX") && e.contains("BlobProto"), "{e}");
    // The same through the legacy 4-D fields.
    let mut l = Vec::new();
    for (f, v) in [(1, 1 << 20), (2, 1 << 20), (3, 1), (4, 1)] {
        vfield(&mut l, f, v);
    }
    lfield(&mut l, 5, &floats(&[1.0]));
    let err = fast("legacy bomb", || open_tensor_file(l.into(), &opts))
        .err()
        .expect("an error");
    assert!(err.to_string().contains("INT_MAX"), "{err}");
}

#[test]
fn packed_length_claiming_2_pow_40_bytes() {
    // data (field 5) declares 2^40 bytes in a 20-byte file.
    let mut b = Vec::new();
    lfield(&mut b, 7, &packed_dims(&[2]));
    key(&mut b, 5, 2);
    varint(&mut b, 1 << 40);
    b.extend_from_slice(&[0; 8]);
    let err = fast("packed bomb", || {
        read_blob_proto_with(b.clone().into(), &tiny())
    })
    .err()
    .expect("an error");
    assert!(
        matches!(
            err,
            CaffeError::Truncated { ref path, offset: 12, needed, available: 8, .. }
                if path == "BlobProto" && needed == 1 << 40
        ),
        "{err}"
    );
}

#[test]
fn length_delimited_field_longer_than_the_file() {
    // A layer (field 100) claiming 1 GiB, then a blob inside a layer claiming more than
    // the layer holds: both name the field's path and offset.
    let mut net = Vec::new();
    lfield(&mut net, 1, b"net");
    key(&mut net, 100, 2);
    varint(&mut net, 1 << 30);
    net.extend_from_slice(b"\x0a\x01a");
    let err = fast("layer bomb", || read_model_with(net.into(), &tiny()))
        .err()
        .expect("an error");
    assert!(
        matches!(err, CaffeError::Truncated { ref path, offset: 12, needed, available: 3, .. } if path == "NetParameter" && needed == 1 << 30),
        "{err}"
    );
    let mut layer = Vec::new();
    lfield(&mut layer, 1, b"ip");
    key(&mut layer, 7, 2);
    varint(&mut layer, 1000);
    layer.extend_from_slice(&[0x2a, 0]);
    let mut net = Vec::new();
    lfield(&mut net, 100, &layer);
    let err = read_model_with(net.into(), &tiny())
        .err()
        .expect("an error");
    assert!(
        matches!(err, CaffeError::Truncated { ref path, offset: 10, needed: 1000, available: 2, .. } if path == "layer[0]"),
        "{err}"
    );
}

#[test]
fn deeply_nested_groups_and_messages() {
    // 100 000 nested start-group keys in an unknown field of a blob: refused at depth 100.
    let mut b = Vec::new();
    for _ in 0..100_000 {
        key(&mut b, 20, 3);
    }
    let err = fast("group nesting", || read_blob_proto_with(b.into(), &tiny()))
        .err()
        .expect("an error");
    assert!(
        matches!(err, CaffeError::Wire { ref reason, .. } if reason.contains("nested too deeply")),
        "{err}"
    );
    // 10 000 nested length-delimited messages in an unknown layer field: skipped as
    // bytes (never recursed into), and the typed prost view has its recursion limit.
    let mut inner = vec![0x08, 0x01];
    for _ in 0..10_000 {
        let mut outer = Vec::new();
        lfield(&mut outer, 1, &inner);
        inner = outer;
    }
    let mut layer = Vec::new();
    lfield(&mut layer, 1, b"deep");
    lfield(&mut layer, 2, b"ReLU");
    lfield(&mut layer, 9999, &inner);
    let mut net = Vec::new();
    lfield(&mut net, 100, &layer);
    let m = fast("message nesting", || read_model_with(net.into(), &tiny())).unwrap();
    assert_eq!(m.layers[0].name, "deep");
    assert!(m.layer_parameter(0).is_ok()); // unknown to prost: skipped, not recursed
                                           // A known recursive-looking path: V1 layer -> nested V0 layer -> blobs -> shape, and
                                           // nested `layer` fields merged (proto2), many times: flat in our parser.
    let mut v0 = Vec::new();
    lfield(&mut v0, 1, b"c");
    lfield(&mut v0, 2, b"conv");
    let mut v1 = Vec::new();
    for _ in 0..10_000 {
        lfield(&mut v1, 1, &v0);
    }
    let mut net = Vec::new();
    lfield(&mut net, 2, &v1);
    let m = fast("merged V0 layers", || read_model_with(net.into(), &tiny())).unwrap();
    assert_eq!(m.layers.len(), 1);
}

#[test]
fn huge_repeated_counts_hit_max_items() {
    let limits = Limits {
        max_items: 1000,
        ..Limits::default()
    };
    let opts = CaffeReadOptions {
        limits,
        ..CaffeReadOptions::default()
    };
    // 100 000 empty blobs in a BlobProtoVector (2 bytes each).
    let v: Vec<u8> = [0x0a, 0x00].repeat(100_000);
    let err = fast("blob vector", || {
        read_blob_vector_with(v.clone().into(), &opts)
    })
    .err()
    .expect("an error");
    assert!(
        matches!(err, CaffeError::Limit { ref path, offset: 2000, what: "item count", value: 1001, limit: 1000 } if path == "blobs[1000]"),
        "{err}"
    );
    // The same through the facade, with the kind forced.
    let f = ReadOptions {
        limits,
        kind: Some("blobprotovector".into()),
        ..ReadOptions::default()
    };
    assert!(matches!(
        open_tensor_file(v.into(), &f),
        Err(CaffeError::Limit { .. })
    ));
    // 100 000 layers.
    let mut net = Vec::new();
    for _ in 0..100_000 {
        lfield(&mut net, 100, b"\x0a\x01x");
    }
    let err = fast("layers", || read_model_with(net.into(), &opts))
        .err()
        .expect("an error");
    assert!(
        matches!(err, CaffeError::Limit { ref path, what: "item count", .. } if path == "layer[1000]"),
        "{err}"
    );
    // Layers and their blobs count together: 600 layers of 1 blob each; layer 500 is
    // the 1001st item.
    let mut net = Vec::new();
    let mut layer = Vec::new();
    lfield(&mut layer, 1, b"x");
    lfield(&mut layer, 7, b"");
    for _ in 0..600 {
        lfield(&mut net, 100, &layer);
    }
    let err = read_model_with(net.into(), &opts).err().expect("an error");
    assert!(
        matches!(err, CaffeError::Limit { ref path, .. } if path == "layer[500]"),
        "{err}"
    );
    // History blobs of a solver state.
    let mut s = Vec::new();
    vfield(&mut s, 1, 7);
    for _ in 0..2000 {
        lfield(&mut s, 3, b"");
    }
    let err = read_solver_state_with(s.into(), &opts)
        .err()
        .expect("an error");
    assert!(
        matches!(err, CaffeError::Limit { ref path, .. } if path == "history[1000]"),
        "{err}"
    );
}

#[test]
fn many_dims_are_counted_not_stored() {
    // 1 000 000 unpacked dims (2 bytes each) and as many packed: Caffe's 32-axis rule.
    let mut shape = Vec::new();
    for _ in 0..1_000_000 {
        vfield(&mut shape, 1, 1);
    }
    let mut b = Vec::new();
    lfield(&mut b, 7, &shape);
    lfield(&mut b, 5, &floats(&[1.0]));
    let err = fast("unpacked dims", || {
        open_tensor_file(b.into(), &facade(Limits::default()))
    })
    .err()
    .expect("an error");
    assert!(
        matches!(err, CaffeError::Shape { ref reason, .. } if reason.contains("33 axes")),
        "{err}"
    );
    let mut b = Vec::new();
    lfield(&mut b, 7, &packed_dims(&vec![1; 1_000_000]));
    lfield(&mut b, 5, &floats(&[1.0]));
    let err = fast("packed dims", || {
        open_tensor_file(b.into(), &facade(Limits::default()))
    })
    .err()
    .expect("an error");
    assert!(matches!(err, CaffeError::Shape { .. }), "{err}");
}

#[test]
fn max_rank_caps_blob_axes() {
    let mut b = Vec::new();
    lfield(&mut b, 5, &floats(&[1.0]));
    lfield(&mut b, 7, &packed_dims(&[1; 8]));
    let opts = CaffeReadOptions {
        limits: Limits {
            max_rank: 4,
            ..Limits::default()
        },
        ..CaffeReadOptions::default()
    };
    let err = read_blob_proto_with(b.clone().into(), &opts)
        .err()
        .expect("an error");
    assert!(
        matches!(
            err,
            CaffeError::Limit {
                what: "rank",
                value: 8,
                limit: 4,
                offset: 0,
                ..
            }
        ),
        "{err}"
    );
    assert!(read_blob_proto_with(b.into(), &CaffeReadOptions::default()).is_ok());
}

#[test]
fn owned_value_buffers_respect_max_alloc() {
    let opts = CaffeReadOptions {
        limits: Limits {
            max_alloc: 1000,
            ..Limits::default()
        },
        ..CaffeReadOptions::default()
    };
    // 1000 unpacked floats (fixed32, 5 bytes each) = 4000 bytes gathered.
    let mut b = Vec::new();
    lfield(&mut b, 7, &packed_dims(&[1000]));
    for i in 0..1000 {
        key(&mut b, 5, 5);
        b.extend_from_slice(&(i as f32).to_le_bytes());
    }
    let err = read_blob_proto_with(b.clone().into(), &opts)
        .err()
        .expect("an error");
    assert!(
        matches!(
            err,
            CaffeError::Limit {
                what: "allocation",
                value: 1004,
                limit: 1000,
                ..
            }
        ),
        "{err}"
    );
    let ok = read_blob_proto_with(b.into(), &CaffeReadOptions::default()).unwrap();
    assert_eq!(ok.data.len(), 4000);
    // Two packed runs of 600 bytes must be joined: 1200 > 1000.
    let mut b = Vec::new();
    lfield(&mut b, 7, &packed_dims(&[300]));
    lfield(&mut b, 5, &[0; 600]);
    lfield(&mut b, 5, &[0; 600]);
    let err = read_blob_proto_with(b.clone().into(), &opts)
        .err()
        .expect("an error");
    assert!(
        matches!(err, CaffeError::Limit { value: 1200, .. }),
        "{err}"
    );
    // One packed run of any size is a zero-copy slice: no allocation, no limit.
    let mut b = Vec::new();
    lfield(&mut b, 7, &packed_dims(&[1000]));
    lfield(&mut b, 5, &[0; 4000]);
    assert!(read_blob_proto_with(b.into(), &opts).is_ok());
}

#[test]
fn kind_hint_and_strict_through_the_facade() {
    // An empty file is not detectable; named as a mean file it is the empty BlobProto
    // (count 1, no values: a count error, as Caffe's FromProto).
    let hinted = |k: &str| ReadOptions {
        kind: Some(k.into()),
        ..ReadOptions::default()
    };
    assert!(matches!(
        open_tensor_file(Bytes::new(), &ReadOptions::default()),
        Err(CaffeError::NotCaffe(_))
    ));
    assert!(matches!(
        open_tensor_file(Bytes::new(), &hinted("binaryproto")),
        Err(CaffeError::Count { .. })
    ));
    let f = open_tensor_file(Bytes::new(), &hinted("caffemodel")).unwrap();
    assert_eq!(f.tensors().len(), 0);
    assert!(f.kind().starts_with("model"));
    // A solver state's varints alone read as the hint says.
    let mut s = Vec::new();
    vfield(&mut s, 1, 4000);
    assert_eq!(
        open_tensor_file(s.clone().into(), &ReadOptions::default())
            .unwrap()
            .kind(),
        "solver state"
    );
    assert!(matches!(
        open_tensor_file(s.into(), &hinted("pvp-dense")),
        Err(CaffeError::NotCaffe(ref m)) if m.contains("unknown caffe kind")
    ));
    assert_eq!(
        FileKind::from_name("solverstate"),
        Some(FileKind::SolverState)
    );
}
