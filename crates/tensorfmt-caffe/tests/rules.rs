//! Every Blob and file rule of the spec on synthetic messages built byte by byte here
//! (an independent protobuf builder, not our writer): shape precedence, counts, double
//! vs float, diff, axis and overflow limits, unpacked payloads, V0 nets, mixed layer
//! lists, FP16 raw data, limits, sniffing, and the writer contract.

use bytes::Bytes;
use proptest::prelude::*;
use tensorfmt_caffe::*;
use tensorfmt_core::{DType, Order, ReadOptions, Tensor, WriteOptions};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
fn key(out: &mut Vec<u8>, field: u64, wt: u64) {
    varint(out, field << 3 | wt);
}
fn vfield(out: &mut Vec<u8>, field: u64, v: i64) {
    key(out, field, 0);
    varint(out, v as u64);
}
fn lfield(out: &mut Vec<u8>, field: u64, body: &[u8]) {
    key(out, field, 2);
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}
fn floats(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn doubles(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn shape(dims: &[i64]) -> Vec<u8> {
    let mut packed = Vec::new();
    for &d in dims {
        varint(&mut packed, d as u64);
    }
    let mut s = Vec::new();
    if !dims.is_empty() {
        lfield(&mut s, 1, &packed);
    }
    s
}
fn blob(b: Vec<u8>) -> Result<RawBlob> {
    read_blob_proto(Bytes::from(b))
}

#[test]
fn legacy_fields_win_over_shape() {
    let mut b = Vec::new();
    vfield(&mut b, 1, 1);
    vfield(&mut b, 2, 1);
    vfield(&mut b, 3, 2);
    vfield(&mut b, 4, 3);
    lfield(&mut b, 5, &floats(&[1., 2., 3., 4., 5., 6.]));
    lfield(&mut b, 7, &shape(&[6]));
    let r = blob(b).unwrap();
    assert_eq!(r.shape_dims("b").unwrap(), vec![1, 1, 2, 3]);
    assert_eq!(r.tensor("b").unwrap().dims(), &[1, 1, 2, 3]);
    let mut bl = Blob::<f32>::new();
    bl.from_proto(&r, true).unwrap();
    assert_eq!(bl.shape(), &[1, 1, 2, 3]);
}

#[test]
fn only_width_gives_zero_count() {
    let mut b = Vec::new();
    vfield(&mut b, 4, 7);
    let r = blob(b.clone()).unwrap();
    assert_eq!(r.shape_dims("b").unwrap(), vec![0, 0, 0, 7]);
    assert_eq!(r.tensor("b").unwrap().numel(), 0);
    lfield(&mut b, 5, &floats(&[1.0]));
    assert!(matches!(
        blob(b).unwrap().tensor("b"),
        Err(CaffeError::Count {
            expected: 0,
            actual: 1,
            ..
        })
    ));
}

#[test]
fn empty_blob_has_count_one_and_needs_one_value() {
    let r = blob(Vec::new()).unwrap();
    assert_eq!(r.shape_dims("b").unwrap(), Vec::<usize>::new());
    let err = r.tensor("layer[0].blobs[0]").unwrap_err();
    assert!(err.to_string().contains("layer[0].blobs[0]"), "{err}");
    assert!(matches!(
        err,
        CaffeError::Count {
            expected: 1,
            actual: 0,
            field: "data",
            ..
        }
    ));
    let mut b = Vec::new();
    lfield(&mut b, 5, &floats(&[0.25]));
    let t = blob(b).unwrap().tensor("b").unwrap();
    assert_eq!(t.dims(), &[] as &[usize]);
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.25]);
    let mut bl = Blob::<f32>::new();
    assert_eq!(bl.count(), 0);
    bl.reshape(&[]).unwrap();
    assert_eq!(bl.count(), 1);
    assert_eq!(bl.shape_string(), "(1)");
    assert_eq!(Blob::<f32>::new().shape_string(), "(0)");
}

#[test]
fn double_data_wins_over_data() {
    let mut b = Vec::new();
    lfield(&mut b, 5, &floats(&[9.0]));
    lfield(&mut b, 7, &shape(&[2]));
    lfield(&mut b, 8, &doubles(&[1.5, 2.5]));
    let r = blob(b).unwrap();
    let t = r.tensor("b").unwrap();
    assert_eq!(t.dtype(), DType::F64);
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.5, 2.5]);
    let mut bl = Blob::<f32>::new();
    bl.from_proto(&r, true).unwrap();
    assert_eq!(bl.data(), &[1.5, 2.5]);
    // An f64 blob writes double_data.
    let bd = Blob::<f64>::from_raw(&r).unwrap();
    let p = bd.to_proto(false);
    assert!(p.data.is_empty());
    assert_eq!(p.double_data_f64(), vec![1.5, 2.5]);
}

#[test]
fn diff_and_double_diff() {
    let mut b = Vec::new();
    lfield(&mut b, 5, &floats(&[1.0, 2.0]));
    lfield(&mut b, 6, &floats(&[0.5, 0.5]));
    lfield(&mut b, 7, &shape(&[2]));
    let r = blob(b.clone()).unwrap();
    let mut bl = Blob::<f32>::from_raw(&r).unwrap();
    assert_eq!(bl.diff(), &[0.5, 0.5]);
    bl.update();
    assert_eq!(bl.data(), &[0.5, 1.5]);
    // Diff written only on request.
    assert!(bl.to_proto(false).diff.is_empty());
    assert_eq!(decode_f32(&bl.to_proto(true).diff), vec![0.5, 0.5]);
    // double_diff wins; a wrong diff count is an error.
    lfield(&mut b, 9, &doubles(&[4.0, 8.0]));
    let r = blob(b).unwrap();
    let d = r.diff_tensor("b").unwrap().unwrap();
    assert_eq!(d.to_vec::<f64>().unwrap(), vec![4.0, 8.0]);
    let mut short = Vec::new();
    lfield(&mut short, 5, &floats(&[1.0, 2.0]));
    lfield(&mut short, 6, &floats(&[1.0]));
    lfield(&mut short, 7, &shape(&[2]));
    let r = blob(short).unwrap();
    assert!(matches!(
        r.diff_tensor("b"),
        Err(CaffeError::Count { field: "diff", .. })
    ));
    assert!(Blob::<f32>::from_raw(&r).is_err());
    // No diff in the proto: the blob's diff is left untouched (Caffe).
    let mut b2 = Blob::<f32>::with_shape(&[2]).unwrap();
    b2.mutable_diff().copy_from_slice(&[7.0, 7.0]);
    b2.from_proto(&RawBlob::from_f32(&[2], &[1.0, 1.0]), false)
        .unwrap();
    assert_eq!(b2.diff(), &[7.0, 7.0]);
}

#[test]
fn at_most_32_axes() {
    let ok = RawBlob {
        shape: Some(vec![1; 32]),
        data: Bytes::from(floats(&[1.0])),
        ..Default::default()
    };
    assert_eq!(ok.shape_dims("b").unwrap().len(), 32);
    let mut b = Vec::new();
    lfield(&mut b, 5, &floats(&[1.0]));
    lfield(&mut b, 7, &shape(&[1; 33]));
    let err = blob(b).unwrap().tensor("b").unwrap_err();
    assert!(matches!(err, CaffeError::Shape { .. }), "{err}");
    assert!(Blob::<f32>::with_shape(&[1; 33]).is_err());
}

#[test]
fn overflowing_and_negative_dims() {
    for dims in [
        vec![1i64 << 31],
        vec![65536, 65536],
        vec![-1],
        vec![(1i64 << 32) + 5],
    ] {
        let r = blob({
            let mut b = Vec::new();
            lfield(&mut b, 7, &shape(&dims));
            b
        })
        .unwrap();
        assert!(
            matches!(r.shape_dims("b"), Err(CaffeError::Shape { .. })),
            "{dims:?}"
        );
        assert!(Blob::<f32>::with_shape(&dims).is_err(), "{dims:?}");
    }
    // i32::MAX itself is fine; a zero dim stops the overflow check.
    assert_eq!(
        Blob::<f32>::with_shape(&[i32::MAX as i64]).unwrap().count(),
        i32::MAX as usize
    );
    assert_eq!(
        Blob::<f32>::with_shape(&[0, i32::MAX as i64, i32::MAX as i64])
            .unwrap()
            .count(),
        0
    );
    // A negative legacy dim.
    let mut b = Vec::new();
    vfield(&mut b, 1, -3);
    assert!(matches!(
        blob(b).unwrap().shape_dims("b"),
        Err(CaffeError::Shape { .. })
    ));
}

#[test]
fn unpacked_data_equals_packed() {
    let vals = [1.0f32, -2.0, 3.5];
    let mut unpacked = Vec::new();
    for v in vals {
        key(&mut unpacked, 5, 5);
        unpacked.extend_from_slice(&v.to_le_bytes());
    }
    lfield(&mut unpacked, 7, &shape(&[3]));
    let a = blob(unpacked).unwrap();
    assert_eq!(a.data_f32(), vals);
    // Two packed runs concatenate too; an odd packed length is an error.
    let mut two = Vec::new();
    lfield(&mut two, 5, &floats(&vals[..1]));
    lfield(&mut two, 5, &floats(&vals[1..]));
    assert_eq!(blob(two).unwrap().data_f32(), vals);
    let mut odd = Vec::new();
    lfield(&mut odd, 5, &[0, 0, 0]);
    assert!(matches!(blob(odd), Err(CaffeError::Wire { .. })));
    // Unpacked dims in BlobShape.
    let mut s = Vec::new();
    vfield(&mut s, 1, 3);
    let mut b = Vec::new();
    lfield(&mut b, 7, &s);
    assert_eq!(blob(b).unwrap().shape, Some(vec![3]));
}

fn v2_layer(name: &str, ty: &str, blobs: &[Vec<u8>]) -> Vec<u8> {
    let mut l = Vec::new();
    lfield(&mut l, 1, name.as_bytes());
    lfield(&mut l, 2, ty.as_bytes());
    for b in blobs {
        lfield(&mut l, 7, b);
    }
    l
}

fn simple_blob(dims: &[i64], vals: &[f32]) -> Vec<u8> {
    let mut b = Vec::new();
    lfield(&mut b, 5, &floats(vals));
    lfield(&mut b, 7, &shape(dims));
    b
}

#[test]
fn v0_net_weights_and_rewrite() {
    let mut v0 = Vec::new();
    lfield(&mut v0, 1, b"conv1");
    lfield(&mut v0, 2, b"conv");
    vfield(&mut v0, 3, 2); // num_output
    lfield(&mut v0, 50, &simple_blob(&[2, 1, 1, 1], &[1.0, 2.0]));
    lfield(&mut v0, 50, &simple_blob(&[2], &[0.0, 0.5]));
    let mut pad = Vec::new();
    lfield(&mut pad, 1, b"pad1");
    lfield(&mut pad, 2, b"padding");
    let mut net = Vec::new();
    lfield(&mut net, 1, b"old");
    for (inner, bottom) in [(&pad, "data"), (&v0, "pad1")] {
        let mut v1 = Vec::new();
        lfield(&mut v1, 1, inner);
        lfield(&mut v1, 2, bottom.as_bytes());
        lfield(&mut net, 2, &v1);
    }
    let bytes = Bytes::from(net.clone());
    let m = read_model(bytes.clone()).unwrap();
    assert_eq!(m.version, NetVersion::V0);
    let conv = m.layer("conv1").unwrap();
    assert_eq!(conv.type_name, "Convolution");
    assert_eq!(conv.v0_type.as_deref(), Some("conv"));
    assert_eq!(conv.blobs.len(), 2);
    assert_eq!(conv.blobs[1].data_f32(), vec![0.0, 0.5]);
    assert_eq!(m.layer("pad1").unwrap().type_name, "");
    assert_eq!(m.to_bytes(), net);
    let f = open_tensor_file(bytes, &ReadOptions::default()).unwrap();
    assert_eq!(
        f.tensors()
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["conv1/0", "conv1/1"]
    );
    // Replacing V0 weights keeps them inside the nested layer (field 50).
    let mut m = m;
    m.set_blobs("conv1", vec![RawBlob::from_f32(&[1], &[9.0])])
        .unwrap();
    let again = read_model(m.to_bytes().into()).unwrap();
    assert_eq!(again.layer("conv1").unwrap().blobs.len(), 1);
    assert_eq!(again.layer("conv1").unwrap().blobs[0].data_f32(), vec![9.0]);
    // Unknown V0 type.
    let mut bad = Vec::new();
    lfield(&mut bad, 2, b"warp");
    let mut v1 = Vec::new();
    lfield(&mut v1, 1, &bad);
    let mut net = Vec::new();
    lfield(&mut net, 2, &v1);
    assert!(matches!(
        read_model(net.into()),
        Err(CaffeError::UnknownV0Type { .. })
    ));
}

#[test]
fn v1_types_and_unknown_enum() {
    let mut v1 = Vec::new();
    lfield(&mut v1, 4, b"ip");
    vfield(&mut v1, 5, 14);
    lfield(&mut v1, 6, &simple_blob(&[1], &[1.0]));
    let mut net = Vec::new();
    lfield(&mut net, 2, &v1);
    let m = read_model(net.into()).unwrap();
    assert_eq!(m.layer("ip").unwrap().type_name, "InnerProduct");
    assert_eq!(v1_type_name(39), Some("Deconvolution"));
    assert_eq!(v1_type_name(21), Some("SoftmaxWithLoss"));
    let mut v1 = Vec::new();
    vfield(&mut v1, 5, 40);
    let mut net = Vec::new();
    lfield(&mut net, 2, &v1);
    assert!(matches!(
        read_model(net.into()),
        Err(CaffeError::UnknownLayerType { value: 40, .. })
    ));
}

#[test]
fn mixed_layer_and_layers_is_refused() {
    let mut v1 = Vec::new();
    lfield(&mut v1, 4, b"old");
    vfield(&mut v1, 5, 18);
    let mut net = Vec::new();
    lfield(&mut net, 2, &v1);
    lfield(&mut net, 100, &v2_layer("new", "ReLU", &[]));
    let err = read_model(Bytes::from(net.clone())).unwrap_err();
    assert!(
        matches!(err, CaffeError::MixedLayers { v1_offset: 0, .. }),
        "{err}"
    );
    let opts = CaffeReadOptions {
        mixed_layers: MixedLayers::PreferV1,
        ..Default::default()
    };
    let m = read_model_with(net.clone().into(), &opts).unwrap();
    assert_eq!(m.layers.len(), 1);
    assert_eq!(m.layers[0].name, "old");
    assert_eq!(m.to_bytes(), net);
}

#[test]
fn v2_with_legacy_dims_and_prost_topology() {
    let mut b = Vec::new();
    for (f, v) in [(1, 1), (2, 1), (3, 2), (4, 3)] {
        vfield(&mut b, f, v);
    }
    lfield(&mut b, 5, &floats(&[1., 2., 3., 4., 5., 6.]));
    let mut l = v2_layer("ip1", "InnerProduct", &[b]);
    lfield(&mut l, 3, b"data"); // bottom after blobs: kept where it was
    let mut net = Vec::new();
    lfield(&mut net, 100, &l);
    let m = read_model(Bytes::from(net.clone())).unwrap();
    assert_eq!(m.to_bytes(), net);
    assert_eq!(
        m.layer_parameter(0).unwrap().bottom,
        vec!["data".to_string()]
    );
    let f = open_tensor_file(net.into(), &ReadOptions::default()).unwrap();
    assert_eq!(f.read_tensor("ip1/0").unwrap().dims(), &[2, 3]);
    let header = format!("{:?}", f.header());
    assert!(header.contains("1 1 2 3 (6) legacy"), "{header}");
}

#[test]
fn fp16_raw_data() {
    let vals = [1.0f32, -0.5, 2.0];
    let halves: Vec<u8> = vals
        .iter()
        .flat_map(|&v| tensorfmt_core::half::f16::from_f32(v).to_le_bytes())
        .collect();
    let mut b = Vec::new();
    lfield(&mut b, 7, &shape(&[3]));
    vfield(&mut b, 10, 2);
    lfield(&mut b, 12, &halves);
    let r = blob(b.clone()).unwrap();
    assert_eq!(r.value_source().unwrap(), ValueSource::RawF16);
    let t = r.tensor("b").unwrap();
    assert_eq!(t.dtype(), DType::F16);
    assert_eq!(t.cast(DType::F32).unwrap().to_vec::<f32>().unwrap(), vals);
    assert_eq!(Blob::<f32>::from_raw(&r).unwrap().data().to_vec(), vals);
    assert_eq!(r.to_bytes(), b);
}

/// Issue 34 §4: `raw_data` whose `raw_data_type` is INT, UINT, a value outside the enum
/// or absent (protobuf's default DOUBLE, which no writer means) was read as f32 bits:
/// [1, 2] became [1.4e-45, 2.8e-45]. No reader defines those payloads' width (OpenCV
/// refuses them: "Unexpected blob data type"): refused, naming the field and value.
#[test]
fn raw_data_of_an_undefined_type_is_refused() {
    let ints: Vec<u8> = [1i32, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
    for (ty, name) in [
        (Some(3), "INT (3)"),
        (Some(4), "UINT (4)"),
        (Some(9), "9"),
        (None, "absent"),
    ] {
        let mut b = Vec::new();
        lfield(&mut b, 7, &shape(&[2]));
        if let Some(t) = ty {
            vfield(&mut b, 10, t);
        }
        lfield(&mut b, 12, &ints);
        let r = blob(b.clone()).unwrap();
        let e = r.tensor("b").unwrap_err().to_string();
        assert!(
            e.contains("raw_data_type") && e.contains(name),
            "{name}: {e}"
        );
        assert!(Blob::<f32>::from_raw(&r).is_err(), "{name}");
        // The same blob in a model: the tensor view and the lowering's blobs refuse it.
        let mut layer = Vec::new();
        lfield(&mut layer, 1, b"ip");
        lfield(&mut layer, 7, &b);
        let mut net = Vec::new();
        lfield(&mut net, 100, &layer);
        let e = match open_tensor_file(net.clone().into(), &ReadOptions::default()) {
            Err(e) => e.to_string(),
            Ok(f) => f.read_tensor("ip/0").unwrap_err().to_string(),
        };
        assert!(e.contains("raw_data_type"), "{name}: {e}");
        let model = tensorfmt_caffe::read_model(net.into()).unwrap();
        let e = tensorfmt_caffe::layer_blobs(&model)
            .unwrap_err()
            .to_string();
        assert!(e.contains("raw_data_type"), "{name}: {e}");
    }
}

#[test]
fn blob_reshape_capacity_and_zero_fill() {
    let mut b = Blob::<f32>::with_shape(&[2, 3]).unwrap();
    assert_eq!(b.data_head(), Some(Head::Uninitialized));
    b.mutable_data().copy_from_slice(&[1., 2., 3., 4., 5., 6.]);
    assert_eq!(b.data_head(), Some(Head::AtCpu));
    b.reshape(&[2]).unwrap(); // shrink: same buffer, leading values kept
    assert_eq!(b.capacity(), 6);
    assert_eq!(b.data(), &[1., 2.]);
    b.reshape(&[3, 2]).unwrap(); // back within capacity: values kept
    assert_eq!(b.data(), &[1., 2., 3., 4., 5., 6.]);
    b.reshape(&[7]).unwrap(); // grow: new zeroed storage
    assert_eq!(b.capacity(), 7);
    assert_eq!(b.data_head(), Some(Head::Uninitialized));
    assert_eq!(b.data(), &[0.0; 7]);
    assert_eq!(b.diff(), &[0.0; 7]);
}

#[test]
fn blob_accessors() {
    let b = Blob::<f32>::with_shape(&[2, 3, 4, 5]).unwrap();
    assert_eq!(b.count_range(1, 3).unwrap(), 12);
    assert_eq!(b.count_range(2, 2).unwrap(), 1);
    assert!(b.count_range(3, 2).is_err());
    assert!(b.count_range(0, 5).is_err());
    assert_eq!(b.count_from(1).unwrap(), 60);
    assert_eq!(b.canonical_axis_index(-4).unwrap(), 0);
    let err = b.canonical_axis_index(4).unwrap_err().to_string();
    assert_eq!(
        err,
        "axis 4 out of range for 4-D Blob with shape 2 3 4 5 (120)"
    );
    assert!(b.canonical_axis_index(-5).is_err());
    assert_eq!(b.shape_at(-1).unwrap(), 5);
    assert_eq!(b.offset_nchw(1, 2, 3, 4).unwrap(), 119);
    assert_eq!(b.offset_nchw(2, 0, 0, 0).unwrap(), 120); // one past the end allowed (Caffe)
    assert!(b.offset_nchw(3, 0, 0, 0).is_err());
    assert_eq!(b.offset(&[1, 2]).unwrap(), 100);
    assert!(b.offset(&[2]).is_err());
    assert!(b.offset(&[0, 0, 0, 0, 0]).is_err());
    // Legacy accessors are left-aligned with 1 padding; > 4 axes refused.
    let bias = Blob::<f32>::with_shape(&[10]).unwrap();
    assert_eq!(
        (
            bias.num().unwrap(),
            bias.channels().unwrap(),
            bias.width().unwrap()
        ),
        (10, 1, 1)
    );
    assert_eq!(bias.legacy_shape(-1).unwrap(), 10);
    assert_eq!(bias.legacy_shape(-4).unwrap(), 1);
    assert!(bias.legacy_shape(4).is_err());
    assert!(Blob::<f32>::with_shape(&[1, 1, 1, 1, 1])
        .unwrap()
        .num()
        .is_err());
    assert_eq!(
        Blob::<f32>::with_shape(&[20, 1, 5, 5])
            .unwrap()
            .shape_string(),
        "20 1 5 5 (500)"
    );
}

#[test]
fn shape_equals_rules() {
    let legacy = |n, c, h, w| RawBlob {
        num: Some(n),
        channels: Some(c),
        height: Some(h),
        width: Some(w),
        ..Default::default()
    };
    let ip = Blob::<f32>::with_shape(&[10, 64]).unwrap();
    assert!(ip.shape_equals(&legacy(1, 1, 10, 64)));
    assert!(!ip.shape_equals(&legacy(0, 1, 10, 64)));
    assert!(!ip.shape_equals(&legacy(2, 1, 10, 64)));
    let bias = Blob::<f32>::with_shape(&[10]).unwrap();
    assert!(bias.shape_equals(&legacy(1, 1, 1, 10)));
    assert!(!Blob::<f32>::with_shape(&[1, 1, 1, 1, 10])
        .unwrap()
        .shape_equals(&legacy(1, 1, 1, 10)));
    assert!(ip.shape_equals(&RawBlob::from_f32(&[10, 64], &[])));
    assert!(!ip.shape_equals(&RawBlob::from_f32(&[1, 10, 64], &[])));
    assert!(Blob::<f32>::with_shape(&[])
        .unwrap()
        .shape_equals(&RawBlob::default()));
    // FromProto without reshape requires ShapeEquals.
    let mut b = Blob::<f32>::with_shape(&[2]).unwrap();
    let err = b
        .from_proto(&RawBlob::from_f32(&[3], &[1., 2., 3.]), false)
        .unwrap_err();
    assert!(err.to_string().contains("shape mismatch"), "{err}");
    let mut w = legacy(1, 1, 1, 2);
    w.data = Bytes::from(floats(&[4.0, 5.0]));
    b.from_proto(&w, false).unwrap();
    assert_eq!(b.data(), &[4.0, 5.0]);
    assert_eq!(w.legacy_squeezed_shape("w").unwrap(), vec![2]);
}

#[test]
fn hdf5_and_size_limit() {
    let mut h = HDF5_SIGNATURE.to_vec();
    h.extend_from_slice(&[0; 32]);
    assert!(matches!(
        open_tensor_file(h.clone().into(), &ReadOptions::default()),
        Err(CaffeError::Hdf5)
    ));
    assert!(!sniff(&h, h.len() as u64));
    // A sparse file just over Caffe's 2 GiB - 1 limit is refused before mapping.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.caffemodel");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(CAFFE_READ_LIMIT + 1).unwrap();
    let err = map_path(&p, &CaffeReadOptions::default()).unwrap_err();
    assert!(matches!(err, CaffeError::TooLarge { size, .. } if size == CAFFE_READ_LIMIT + 1));
    let small = CaffeReadOptions {
        max_file_bytes: 10,
        ..Default::default()
    };
    let mut net = Vec::new();
    lfield(&mut net, 100, &v2_layer("a", "ReLU", &[]));
    assert!(matches!(
        read_model_with(net.into(), &small),
        Err(CaffeError::TooLarge { .. })
    ));
}

#[test]
fn malformed_input_is_a_typed_error() {
    let mut net = Vec::new();
    lfield(
        &mut net,
        100,
        &v2_layer("a", "Convolution", &[simple_blob(&[2], &[1.0, 2.0])]),
    );
    for cut in 1..net.len() {
        assert!(
            read_model(Bytes::copy_from_slice(&net[..cut])).is_err(),
            "cut at {cut}"
        );
    }
    // Wrong wire type on a known field names the field.
    let mut b = Vec::new();
    vfield(&mut b, 7, 3);
    let err = blob(b).unwrap_err();
    assert!(
        matches!(
            err,
            CaffeError::WireType {
                field: 7,
                wire_type: 0,
                ..
            }
        ),
        "{err}"
    );
    // A blob with the wrong count fails open with its path.
    let mut net = Vec::new();
    lfield(
        &mut net,
        100,
        &v2_layer("a", "Convolution", &[simple_blob(&[3], &[1.0, 2.0])]),
    );
    let err = open_tensor_file(net.into(), &ReadOptions::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("layer[0].blobs[0]"), "{err}");
    assert!(matches!(
        open_tensor_file(Bytes::new(), &ReadOptions::default()),
        Err(CaffeError::NotCaffe(_))
    ));
}

#[test]
fn sniff_rejects_other_formats() {
    let mut npy =
        b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }".to_vec();
    npy.resize(140, b' ');
    let others: [&[u8]; 6] = [
        &npy,
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00",
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        b"{\"__metadata__\":{}}",
        b"hello world, this is text",
        &[0u8; 64],
    ];
    for o in others {
        assert!(!sniff(o, o.len() as u64), "{o:?}");
        assert!(
            detect_kind(o).is_none() || o.iter().all(|&b| b == 0),
            "{o:?}"
        );
    }
    // A solverstate head and a vector.
    let mut s = Vec::new();
    vfield(&mut s, 1, 10);
    lfield(&mut s, 2, b"x.caffemodel");
    lfield(&mut s, 3, &simple_blob(&[1], &[1.0]));
    assert!(sniff(&s, s.len() as u64));
    assert_eq!(detect_kind(&s), Some(FileKind::SolverState));
    let mut v = Vec::new();
    lfield(&mut v, 1, &simple_blob(&[1], &[1.0]));
    lfield(&mut v, 1, &simple_blob(&[2], &[1.0, 2.0]));
    assert_eq!(detect_kind(&v), Some(FileKind::BlobVector));
    let f = open_tensor_file(v.into(), &ReadOptions::default()).unwrap();
    assert_eq!(f.read_tensor("blobs/1").unwrap().dims(), &[2]);
    // A net with only a name is a model, not a vector.
    let mut n = Vec::new();
    lfield(&mut n, 1, b"LeNet");
    assert_eq!(detect_kind(&n), Some(FileKind::Model));
}

fn t(v: Vec<f32>, dims: &[usize]) -> Tensor {
    Tensor::from_vec(v, dims.to_vec(), Order::RowMajor).unwrap()
}

#[test]
fn save_tensors_contract() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("w.caffemodel");
    let mut opts = WriteOptions::default();
    opts.extra.insert("name".into(), "tiny".into());
    opts.extra.insert("type.conv1".into(), "Convolution".into());
    let tensors = vec![
        ("conv1/1".to_string(), t(vec![0.5], &[1])),
        (
            "conv1/0".to_string(),
            t(vec![1., 2., 3., 4.], &[1, 1, 2, 2]),
        ),
        (
            "fc/0".to_string(),
            Tensor::from_vec(vec![1.0f64, 2.0], [1, 2], Order::RowMajor).unwrap(),
        ),
    ];
    save_tensors(&p, &tensors, &opts).unwrap();
    let data = Bytes::from(std::fs::read(&p).unwrap());
    // Independent expectation, built by hand.
    let mut l1 = Vec::new();
    lfield(&mut l1, 1, b"conv1");
    lfield(&mut l1, 2, b"Convolution");
    lfield(&mut l1, 7, &simple_blob(&[1, 1, 2, 2], &[1., 2., 3., 4.]));
    lfield(&mut l1, 7, &simple_blob(&[1], &[0.5]));
    let mut l2 = Vec::new();
    lfield(&mut l2, 1, b"fc");
    // float64 is written as float `data`, what Caffe, OpenCV 4 and pycaffe read
    // (issue 23 item 7; `dtype: F64` keeps double_data, tests/compat_writes.rs).
    lfield(&mut l2, 7, &simple_blob(&[1, 2], &[1.0, 2.0]));
    let mut want = Vec::new();
    lfield(&mut want, 1, b"tiny");
    lfield(&mut want, 100, &l1);
    lfield(&mut want, 100, &l2);
    assert_eq!(&data[..], &want[..]);
    let f = open_tensor_file(data, &ReadOptions::default()).unwrap();
    assert_eq!(f.read_tensor("fc/0").unwrap().dtype(), DType::F32);
    // Bad names and gaps are refused; kinds can be forced.
    let bad = [
        ("conv1".to_string(), t(vec![1.0], &[1])),
        ("x/2".to_string(), t(vec![1.0], &[1])),
    ];
    assert!(save_tensors(
        &p,
        &bad,
        &WriteOptions {
            kind: Some("caffemodel".into()),
            ..Default::default()
        }
    )
    .is_err());
    let gap = [("x/1".to_string(), t(vec![1.0], &[1]))];
    assert!(save_tensors(&p, &gap, &WriteOptions::default()).is_err());
    let m = dir.path().join("m.bin");
    save_tensors(
        &m,
        &[("x/0".to_string(), t(vec![1.0, 2.0], &[2]))],
        &WriteOptions {
            kind: Some("binaryproto".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let mut want = Vec::new();
    for (fnum, v) in [(1, 1), (2, 1), (3, 1), (4, 2)] {
        vfield(&mut want, fnum, v);
    }
    lfield(&mut want, 5, &floats(&[1.0, 2.0]));
    assert_eq!(std::fs::read(&m).unwrap(), want);
    assert!(save_tensors(
        &m,
        &[],
        &WriteOptions {
            kind: Some("mean".into()),
            ..Default::default()
        }
    )
    .is_err());
    assert!(save_tensors(
        &m,
        &gap,
        &WriteOptions {
            kind: Some("hdf5".into()),
            ..Default::default()
        }
    )
    .is_err());
    // Solver state round trip.
    let s = dir.path().join("s.solverstate");
    let hist = [("history/0".to_string(), t(vec![1.0], &[1]))];
    save_tensors(
        &s,
        &hist,
        &WriteOptions {
            kind: Some("solverstate".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let st = read_solver_state(std::fs::read(&s).unwrap().into()).unwrap();
    assert_eq!((st.iter, st.history.len()), (Some(0), 1));
}

#[test]
fn core_error_conversion_names_the_format() {
    let e: tensorfmt_core::Error = CaffeError::Hdf5.into();
    assert!(matches!(
        e,
        tensorfmt_core::Error::Format {
            format: "caffe",
            ..
        }
    ));
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        let b = Bytes::from(data.clone());
        if let Ok(f) = open_tensor_file(b.clone(), &ReadOptions::default()) {
            let _ = f.validate();
        }
        let _ = read_model(b.clone()).map(|m| m.to_bytes());
        let _ = read_blob_proto(b.clone());
        let _ = read_solver_state(b.clone());
        let _ = read_blob_vector(b);
        let _ = sniff(&data, data.len() as u64);
    }

    #[test]
    fn blobs_round_trip(dims in proptest::collection::vec(0i64..4, 0..5), seed in any::<u32>()) {
        let n: i64 = dims.iter().product();
        let vals: Vec<f32> = (0..n).map(|i| (i as f32) * 0.5 + seed as f32).collect();
        let b = RawBlob::from_f32(&dims, &vals);
        let again = read_blob_proto(b.to_bytes().into()).unwrap();
        prop_assert_eq!(&again, &b);
        prop_assert_eq!(again.tensor("b").unwrap().to_vec::<f32>().unwrap(), vals);
    }
}

/// A BlobProtoVector's blob `i` is the tensor named `blobs/<i>`, as a solver state's
/// history and a model's blobs follow their index: the writer took the tensors in the
/// order given (`blobs/1` before `blobs/0` swapped them; twelve blobs in name order came
/// out 0, 1, 10, 11, 2, ...; `blobs/0, blobs/5` were renumbered 0, 1). Gaps,
/// duplicates, other names and indices not spelt as the reader writes them are refused.
#[test]
fn blob_vectors_follow_the_index_in_their_names() {
    let vec_opts = WriteOptions {
        kind: Some("blobprotovector".into()),
        ..Default::default()
    };
    let write = |named: &[(String, Tensor)], o: &WriteOptions| {
        let mut out = Vec::new();
        write_tensors(&mut out, named, o).map(|()| out)
    };
    let named = |v: &[(&str, f32)]| -> Vec<(String, Tensor)> {
        v.iter()
            .map(|(n, x)| (n.to_string(), t(vec![*x, *x], &[2])))
            .collect()
    };
    let swapped = write(&named(&[("blobs/1", 1.0), ("blobs/0", 0.0)]), &vec_opts).unwrap();
    // Independent expectation: blob 0 holds the tensor named blobs/0.
    let mut want = Vec::new();
    lfield(&mut want, 1, &simple_blob(&[2], &[0.0, 0.0]));
    lfield(&mut want, 1, &simple_blob(&[2], &[1.0, 1.0]));
    assert_eq!(swapped, want);
    // Twelve in the order of their names.
    let mut twelve: Vec<(String, f32)> =
        (0..12).map(|i| (format!("blobs/{i}"), i as f32)).collect();
    twelve.sort_by(|a, b| a.0.cmp(&b.0));
    let twelve: Vec<(&str, f32)> = twelve.iter().map(|(n, x)| (n.as_str(), *x)).collect();
    let blobs = read_blob_vector(write(&named(&twelve), &vec_opts).unwrap().into()).unwrap();
    let firsts: Vec<f32> = blobs
        .iter()
        .map(|b| b.tensor("b").unwrap().to_vec::<f32>().unwrap()[0])
        .collect();
    assert_eq!(firsts, (0..12).map(|i| i as f32).collect::<Vec<_>>());
    // Refused, naming the tensor.
    for (bad, culprit) in [
        (&[("blobs/0", 0.0), ("blobs/5", 5.0)][..], "blobs/5"),
        (&[("blobs/1", 1.0)][..], "blobs/1"),
        (&[("blobs/0", 0.0), ("blobs/01", 1.0)][..], "blobs/01"),
        (&[("blobs/+0", 0.0)][..], "blobs/+0"),
        (&[("blobs/0", 0.0), ("conv/1", 1.0)][..], "conv/1"),
        (&[("mean", 0.0), ("blobs/1", 1.0)][..], "mean"),
    ] {
        let e = write(&named(bad), &vec_opts).unwrap_err().to_string();
        assert!(e.contains(&format!("{culprit:?}")), "{bad:?}: {e}");
    }
    // The same spelling rule for a solver state's history and a model's blobs: `+1` and
    // `01` are not names the reader gives.
    let state = WriteOptions {
        kind: Some("solverstate".into()),
        ..Default::default()
    };
    for bad in [
        &[("history/+0", 0.0)][..],
        &[("history/0", 0.0), ("history/01", 1.0)],
    ] {
        assert!(write(&named(bad), &state).is_err(), "{bad:?}");
    }
    for bad in [&[("fc/+0", 0.0)][..], &[("fc/0", 0.0), ("fc/01", 1.0)]] {
        assert!(
            write(&named(bad), &WriteOptions::default()).is_err(),
            "{bad:?}"
        );
    }
}

/// A mean file written from a tensor keeps the shape convention it is asked for:
/// `compute_image_mean`'s legacy num/channels/height/width by default, the N-D `shape`
/// with `blob_shape=shape` (the layout of a mean file that has one, so that an edit
/// written anew gives pycaffe's `blobproto_to_array` the same shape as before).
#[test]
fn mean_files_keep_their_shape_convention() {
    let mean = [("mean".to_string(), t(vec![1.0, 2.0, 3.0], &[3]))];
    let mut o = WriteOptions {
        kind: Some("binaryproto".into()),
        ..Default::default()
    };
    let mut legacy = Vec::new();
    write_tensors(&mut legacy, &mean, &o).unwrap();
    let mut want = Vec::new();
    for (fnum, v) in [(1, 1), (2, 1), (3, 1), (4, 3)] {
        vfield(&mut want, fnum, v);
    }
    lfield(&mut want, 5, &floats(&[1.0, 2.0, 3.0]));
    assert_eq!(legacy, want);
    o.source_layout.insert("blob_shape".into(), "shape".into());
    let mut shaped = Vec::new();
    write_tensors(&mut shaped, &mean, &o).unwrap();
    assert_eq!(shaped, simple_blob(&[3], &[1.0, 2.0, 3.0]));
    // What a file says of itself is what the writer is handed.
    let f = open_tensor_file(shaped.into(), &ReadOptions::default()).unwrap();
    assert_eq!(
        f.layout_settings(),
        [("blob_shape".to_string(), "shape".to_string())]
    );
    let f = open_tensor_file(legacy.into(), &ReadOptions::default()).unwrap();
    assert!(f.layout_settings().is_empty(), "{:?}", f.layout_settings());
    // And the other kinds: a vector of legacy blobs stays legacy.
    let mut v = Vec::new();
    lfield(&mut v, 1, &{
        let mut b = Vec::new();
        for (fnum, x) in [(1, 1), (2, 1), (3, 2), (4, 2)] {
            vfield(&mut b, fnum, x);
        }
        lfield(&mut b, 5, &floats(&[1.0, 2.0, 3.0, 4.0]));
        b
    });
    let f = open_tensor_file(v.clone().into(), &ReadOptions::default()).unwrap();
    let layout = f.layout_settings();
    assert_eq!(layout, [("blob_shape".to_string(), "legacy".to_string())]);
    let back = WriteOptions {
        kind: Some("blobprotovector".into()),
        source_layout: layout.into_iter().collect(),
        ..Default::default()
    };
    let named = [("blobs/0".to_string(), f.read_tensor("blobs/0").unwrap())];
    let mut out = Vec::new();
    write_tensors(&mut out, &named, &back).unwrap();
    assert_eq!(out, v);
    // `--set blob_shape=...` is checked like any setting.
    let mut bad = WriteOptions::default();
    bad.set("blob_shape", "4d").unwrap();
    let e = write_tensors(&mut Vec::new(), &mean, &bad).unwrap_err();
    assert!(e.to_string().contains("blob_shape"), "{e}");
    bad.set("blob_shape", "shape").unwrap();
    let mut out = Vec::new();
    write_tensors(&mut out, &mean, &bad).unwrap();
    assert_eq!(out, simple_blob(&[3], &[1.0, 2.0, 3.0]));
}
