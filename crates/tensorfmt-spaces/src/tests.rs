//! Conversion legality matrix, seed-document data spec examples and round-trip
//! properties.

use proptest::prelude::*;

use super::*;
use tensorfmt_core::{DType, Order, Tensor};

fn vec_batch(n: usize, dim: usize) -> Batch {
    let v: Vec<f32> = (0..n * dim).map(|i| i as f32).collect();
    Tensor::from_vec(v, [n, dim], Order::RowMajor)
        .unwrap()
        .into()
}

fn conv(rows: usize, cols: usize, ch: usize, axes: Axes) -> Space {
    Conv2DSpace::new(rows, cols, ch)
        .unwrap()
        .with_axes(axes)
        .into()
}

fn index(max_labels: usize, dim: usize) -> Space {
    IndexSpace::new(max_labels, dim).unwrap().into()
}

fn labels(v: Vec<i64>, n: usize, dim: usize) -> Batch {
    Tensor::from_vec(v, [n, dim], Order::RowMajor)
        .unwrap()
        .into()
}

fn tensor(b: &Batch) -> &Tensor {
    b.as_tensor().unwrap()
}

fn f32s(b: &Batch) -> Vec<f32> {
    tensor(b).to_vec::<f32>().unwrap()
}

const ALL_AXES: [Axes; 3] = [Axes::B01C, Axes::BC01, Axes::C01B];

// ---- Vector row ----

#[test]
fn vector_to_vector_casts_and_checks_dim() {
    let b = vec_batch(2, 3);
    let f64s = Space::from(VectorSpace::new(3).with_dtype(Some(DType::F64)).unwrap());
    let out = Space::vector(3).format_as(&b, &f64s).unwrap();
    assert_eq!(
        tensor(&out).to_vec::<f64>().unwrap(),
        vec![0., 1., 2., 3., 4., 5.]
    );
    let any = Space::from(VectorSpace::new(3).with_dtype(None).unwrap());
    assert_eq!(Space::vector(3).format_as(&b, &any).unwrap(), b);
    assert!(matches!(
        Space::vector(3).format_as(&b, &Space::vector(4)),
        Err(SpaceError::DimMismatch {
            from_dim: 3,
            to_dim: 4,
            ..
        })
    ));
    // The source batch is validated first.
    assert!(matches!(
        Space::vector(4).format_as(&b, &Space::vector(4)),
        Err(SpaceError::ShapeMismatch { .. })
    ));
}

#[test]
fn vector_to_conv2d_in_every_axes_order() {
    let (rows, cols, ch, n) = (3, 2, 4, 2);
    let b = vec_batch(n, rows * cols * ch);
    for axes in ALL_AXES {
        let dst = conv(rows, cols, ch, axes);
        let out = Space::vector(24).format_as(&b, &dst).unwrap();
        let t = tensor(&out);
        let Space::Conv2D(c) = &dst else {
            unreachable!()
        };
        assert_eq!(t.dims(), &c.batch_shape(n));
        for e in 0..n {
            for r in 0..rows {
                for col in 0..cols {
                    for k in 0..ch {
                        let mut idx = [0usize; 4];
                        for (i, a) in axes.as_array().into_iter().enumerate() {
                            idx[i] = match a {
                                Axis::Batch => e,
                                Axis::Row => r,
                                Axis::Col => col,
                                Axis::Channel => k,
                            };
                        }
                        let expected = (e * 24 + (r * cols + col) * ch + k) as f32;
                        assert_eq!(t.get::<f32>(&idx).unwrap(), expected, "{axes}");
                    }
                }
            }
        }
    }
    assert!(matches!(
        Space::vector(24).format_as(&b, &conv(3, 2, 3, Axes::B01C)),
        Err(SpaceError::DimMismatch { .. })
    ));
}

#[test]
fn vector_to_index_and_null_are_unsupported() {
    let b = vec_batch(2, 3);
    assert!(matches!(
        Space::vector(3).format_as(&b, &index(5, 3)),
        Err(SpaceError::Unsupported { .. })
    ));
    assert!(matches!(
        Space::vector(3).format_as(&b, &index(5, 2)),
        Err(SpaceError::DimMismatch { .. })
    ));
    let err = Space::vector(3).format_as(&b, &Space::null()).unwrap_err();
    assert!(matches!(err, SpaceError::Unsupported { .. }));
    assert_eq!(
        err.to_string(),
        "VectorSpace(dim=3, dtype=float32) does not know how to format a batch as NullSpace"
    );
}

#[test]
fn vector_to_composite_splits_columns_depth_first() {
    // Spec §13: Composite[Vector(3), Conv2D((1, 3), 1)] <-> VectorSpace(6).
    let c = Space::composite([Space::vector(3), conv(1, 3, 1, Axes::B01C)]);
    let b = vec_batch(2, 6);
    let out = Space::vector(6).format_as(&b, &c).unwrap();
    let items = out.children().unwrap();
    assert_eq!(f32s(&items[0]), vec![0., 1., 2., 6., 7., 8.]);
    assert_eq!(tensor(&items[1]).dims(), &[2, 1, 3, 1]);
    assert_eq!(f32s(&items[1]), vec![3., 4., 5., 9., 10., 11.]);
    assert_eq!(c.format_as(&out, &Space::vector(6)).unwrap(), b);

    let nested = Space::composite([
        Space::vector(1),
        Space::null(),
        Space::composite([Space::vector(2), Space::composite([])]),
        Space::vector(1),
    ]);
    let out = Space::vector(4)
        .format_as(&vec_batch(1, 4), &nested)
        .unwrap();
    assert_eq!(
        out,
        Batch::tuple([
            Tensor::from_vec(vec![0f32], [1, 1], Order::RowMajor)
                .unwrap()
                .into(),
            Batch::None,
            Batch::tuple([
                Tensor::from_vec(vec![1f32, 2.], [1, 2], Order::RowMajor)
                    .unwrap()
                    .into(),
                Batch::tuple([]),
            ]),
            Tensor::from_vec(vec![3f32], [1, 1], Order::RowMajor)
                .unwrap()
                .into(),
        ])
    );
    // Back into a vector: the empty composite inside has no batch size (Pylearn2:
    // ValueError, concatenating nothing).
    assert!(matches!(
        nested.format_as(&out, &Space::vector(4)),
        Err(SpaceError::Incompatible { .. })
    ));
    assert!(matches!(
        Space::vector(5).format_as(&vec_batch(1, 5), &nested),
        Err(SpaceError::DimMismatch {
            from_dim: 5,
            to_dim: 4,
            ..
        })
    ));
    // An index component cannot be decoded from a vector.
    let with_index = Space::composite([Space::vector(1), index(3, 1)]);
    assert!(matches!(
        Space::vector(2).format_as(&vec_batch(1, 2), &with_index),
        Err(SpaceError::Unsupported { .. })
    ));
}

// ---- Conv2D row ----

#[test]
fn conv2d_to_vector_spec_example() {
    // Spec §13: Conv2D((3, 2), 2 channels, axes c 0 1 b), batch shape (2, 3, 2, n).
    let src = conv(3, 2, 2, Axes::C01B);
    let n = 2;
    let mut v = vec![0f32; 2 * 3 * 2 * n];
    for k in 0..2 {
        for r in 0..3 {
            for c in 0..2 {
                for e in 0..n {
                    v[((k * 3 + r) * 2 + c) * n + e] = (1000 * e + 100 * k + 10 * r + c) as f32;
                }
            }
        }
    }
    let b: Batch = Tensor::from_vec(v, [2, 3, 2, n], Order::RowMajor)
        .unwrap()
        .into();
    let out = src.format_as(&b, &Space::vector(12)).unwrap();
    let flat = f32s(&out);
    for e in 0..n {
        for r in 0..3 {
            for c in 0..2 {
                for k in 0..2 {
                    let i = e * 12 + (r * 2 + c) * 2 + k;
                    assert_eq!(flat[i], (1000 * e + 100 * k + 10 * r + c) as f32);
                }
            }
        }
    }
    let i32s = Space::from(VectorSpace::new(12).with_dtype(Some(DType::I32)).unwrap());
    let cast = src.format_as(&b, &i32s).unwrap();
    assert_eq!(tensor(&cast).get::<i32>(&[1, 1]).unwrap(), 1100);
    assert!(matches!(
        src.format_as(&b, &Space::vector(13)),
        Err(SpaceError::DimMismatch { .. })
    ));
}

#[test]
fn conv2d_to_conv2d_is_a_transpose_with_same_geometry() {
    let v = vec_batch(3, 2 * 4 * 5);
    for a in ALL_AXES {
        let sa = conv(2, 4, 5, a);
        let ba = Space::vector(40).format_as(&v, &sa).unwrap();
        for b in ALL_AXES {
            let sb = conv(2, 4, 5, b);
            let direct = sa.format_as(&ba, &sb).unwrap();
            let via_vector = Space::vector(40).format_as(&v, &sb).unwrap();
            assert_eq!(direct, via_vector, "{a} -> {b}");
        }
    }
    // Same total, different geometry: refused (upstream returns an invalid batch).
    let src = conv(2, 4, 5, Axes::B01C);
    let b = src.origin_batch(1).unwrap();
    let err = src.format_as(&b, &conv(4, 2, 5, Axes::B01C)).unwrap_err();
    assert!(matches!(err, SpaceError::Incompatible { .. }));
    assert!(
        err.to_string()
            .contains("Conv2DSpace(shape=(2, 4), num_channels=5")
            && err
                .to_string()
                .contains("Conv2DSpace(shape=(4, 2), num_channels=5")
    );
    assert!(matches!(
        src.format_as(&b, &conv(2, 4, 4, Axes::B01C)),
        Err(SpaceError::DimMismatch { .. })
    ));
    let f16 = Space::from(
        Conv2DSpace::new(2, 4, 5)
            .unwrap()
            .with_axes(Axes::BC01)
            .with_dtype(Some(DType::F16))
            .unwrap(),
    );
    assert_eq!(
        tensor(&src.format_as(&b, &f16).unwrap()).dtype(),
        DType::F16
    );
}

#[test]
fn conv2d_to_index_composite_null_are_unsupported() {
    let src = conv(1, 2, 1, Axes::B01C);
    let b = src.origin_batch(2).unwrap();
    for dst in [
        index(4, 2),
        Space::composite([Space::vector(2)]),
        Space::composite([Space::vector(1), Space::vector(1)]),
        Space::null(),
    ] {
        assert!(
            matches!(src.format_as(&b, &dst), Err(SpaceError::Unsupported { .. })),
            "{dst}"
        );
    }
    assert!(matches!(
        src.format_as(&b, &index(4, 3)),
        Err(SpaceError::DimMismatch { .. })
    ));
}

// ---- Index row ----

#[test]
fn index_to_vector_one_hot_modes() {
    // Spec §13: IndexSpace(5, 3), row [4, 0, 2].
    let src = index(5, 3);
    let b = labels(vec![4, 0, 2, 1, 1, 1], 2, 3);
    let merged = src.format_as(&b, &Space::vector(5)).unwrap();
    assert_eq!(f32s(&merged), vec![1., 0., 1., 0., 1., 0., 1., 0., 0., 0.]);
    let concat = src.format_as(&b, &Space::vector(15)).unwrap();
    let ones: Vec<usize> = f32s(&concat)[..15]
        .iter()
        .enumerate()
        .filter(|(_, &x)| x == 1.0)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(ones, vec![4, 5, 12]);
    let err = src.format_as(&b, &Space::vector(10)).unwrap_err();
    assert!(matches!(
        err,
        SpaceError::OneHotWidth {
            merge: 5,
            concatenate: 15,
            ..
        }
    ));
    // dim = 1: both widths coincide; merge is used (same result either way).
    let one = index(3, 1);
    let out = one
        .format_as(&labels(vec![2, 0], 2, 1), &Space::vector(3))
        .unwrap();
    assert_eq!(f32s(&out), vec![0., 0., 1., 1., 0., 0.]);
    // Target dtypes: explicit, or the default float for a dtype-agnostic target.
    let i16s = Space::from(VectorSpace::new(5).with_dtype(Some(DType::I16)).unwrap());
    assert_eq!(
        tensor(&src.format_as(&b, &i16s).unwrap()).dtype(),
        DType::I16
    );
    let any = Space::from(VectorSpace::new(5).with_dtype(None).unwrap());
    assert_eq!(
        tensor(&src.format_as(&b, &any).unwrap()).dtype(),
        DEFAULT_FLOAT
    );
    // Out-of-range and negative labels are errors, not index errors or wraps.
    for bad in [vec![5, 0, 0], vec![-1, 0, 0]] {
        assert!(matches!(
            src.format_as(&labels(bad, 1, 3), &Space::vector(5)),
            Err(SpaceError::LabelOutOfRange { .. })
        ));
    }
}

#[test]
fn index_to_index_casts_without_losing_labels() {
    let src = index(300, 2);
    let b = labels(vec![299, 0, 5, 7], 2, 2);
    let u16s = Space::from(
        IndexSpace::new(300, 2)
            .unwrap()
            .with_dtype(Some(DType::U16))
            .unwrap(),
    );
    let out = src.format_as(&b, &u16s).unwrap();
    assert_eq!(tensor(&out).to_vec::<u16>().unwrap(), vec![299, 0, 5, 7]);
    let u8s = Space::from(
        IndexSpace::new(300, 2)
            .unwrap()
            .with_dtype(Some(DType::U8))
            .unwrap(),
    );
    assert!(matches!(
        src.format_as(&b, &u8s),
        Err(SpaceError::Incompatible { .. })
    ));
    let fits = labels(vec![255, 0, 5, 7], 2, 2);
    assert_eq!(
        tensor(&src.format_as(&fits, &u8s).unwrap())
            .to_vec::<u8>()
            .unwrap(),
        vec![255, 0, 5, 7]
    );
    let err = src.format_as(&b, &index(301, 2)).unwrap_err();
    assert!(matches!(err, SpaceError::Incompatible { .. }));
    // The message prints the target's max_labels (upstream printed the source's).
    assert!(err.to_string().contains("max_labels 301"));
    assert!(src.format_as(&b, &index(300, 1)).is_err());
}

/// Pylearn2's IndexSpace size check raises ValueError "Can't convert to <class>" for
/// these targets (not NotImplementedError): `Incompatible`, a ValueError in Python.
#[test]
fn index_to_conv2d_composite_null_are_incompatible() {
    let src = index(4, 2);
    let b = labels(vec![0, 1], 1, 2);
    for dst in [
        conv(1, 2, 1, Axes::B01C),
        Space::composite([index(4, 2)]),
        Space::null(),
    ] {
        assert!(
            matches!(
                src.format_as(&b, &dst),
                Err(SpaceError::Incompatible { .. })
            ),
            "{dst}"
        );
    }
}

// ---- Composite row ----

#[test]
fn composite_to_vector_concatenates_depth_first() {
    let c = Space::composite([
        conv(1, 2, 2, Axes::BC01),
        Space::null(),
        Space::composite([Space::vector(1), index(2, 2)]),
    ]);
    // conv batch (n=1, c=2, 0=1, 1=2): values ch*10 + col.
    let conv_b: Batch = Tensor::from_vec(vec![0f32, 1., 10., 11.], [1, 2, 1, 2], Order::RowMajor)
        .unwrap()
        .into();
    let b = Batch::tuple([
        conv_b,
        Batch::None,
        Batch::tuple([
            Tensor::from_vec(vec![7f32], [1, 1], Order::RowMajor)
                .unwrap()
                .into(),
            labels(vec![1, 0], 1, 2),
        ]),
    ]);
    // 4 conv values + 1 + the index space's dim (2: its merged one-hots, as
    // dim == max_labels).
    let out = c.format_as(&b, &Space::vector(7)).unwrap();
    assert_eq!(f32s(&out), vec![0., 10., 1., 11., 7., 1., 1.]);
    assert!(matches!(
        c.format_as(&b, &Space::vector(9)),
        Err(SpaceError::DimMismatch {
            from_dim: 7,
            to_dim: 9,
            ..
        })
    ));
    // A dtype-agnostic target keeps the pieces' dtype, which must agree.
    let any = Space::from(VectorSpace::new(3).with_dtype(None).unwrap());
    let mixed = Space::composite([
        Space::vector(1),
        Space::from(VectorSpace::new(2).with_dtype(Some(DType::F64)).unwrap()),
    ]);
    let mb = Batch::tuple([
        Tensor::from_vec(vec![1f32], [1, 1], Order::RowMajor)
            .unwrap()
            .into(),
        Tensor::from_vec(vec![2f64, 3.], [1, 2], Order::RowMajor)
            .unwrap()
            .into(),
    ]);
    assert!(matches!(
        mixed.format_as(&mb, &any),
        Err(SpaceError::Incompatible { .. })
    ));
    let out = mixed.format_as(&mb, &Space::vector(3)).unwrap();
    assert_eq!(f32s(&out), vec![1., 2., 3.]);
    // Batch sizes must agree.
    let two = Space::composite([Space::vector(1), Space::vector(1)]);
    let uneven = Batch::tuple([vec_batch(1, 1), vec_batch(2, 1)]);
    assert!(matches!(
        two.format_as(&uneven, &Space::vector(2)),
        Err(SpaceError::BatchSizeMismatch { .. })
    ));
    // Empty and data-less composites have no batch size: an error, as Pylearn2's
    // concatenation of no pieces (ValueError), at any depth.
    for (c, b) in [
        (Space::composite([]), Batch::tuple([])),
        (
            Space::composite([Space::null()]),
            Batch::tuple([Batch::None]),
        ),
        (
            Space::composite([Space::composite([]), Space::vector(1)]),
            Batch::tuple([Batch::tuple([]), vec_batch(2, 1)]),
        ),
    ] {
        let to = Space::vector(c.total_dimension().unwrap());
        assert!(
            matches!(c.format_as(&b, &to), Err(SpaceError::Incompatible { .. })),
            "{c}"
        );
    }
    // A width-0 component takes part: its rows and, for a dtype-agnostic target, its
    // dtype (Pylearn2: int8 here, not floatX).
    let zero = Space::composite([Space::from(
        VectorSpace::new(0).with_dtype(Some(DType::I8)).unwrap(),
    )]);
    let zb = Batch::tuple([Tensor::from_vec(Vec::<i8>::new(), [2, 0], Order::RowMajor)
        .unwrap()
        .into()]);
    let any0 = Space::from(VectorSpace::new(0).with_dtype(None).unwrap());
    let out = zero.format_as(&zb, &any0).unwrap();
    assert_eq!(
        (tensor(&out).dims(), tensor(&out).dtype()),
        (&[2, 0][..], DType::I8)
    );
    let with_float = Space::composite([zero.clone(), Space::vector(1)]);
    let wb = Batch::tuple([zb.clone(), vec_batch(2, 1)]);
    let any1 = Space::from(VectorSpace::new(1).with_dtype(None).unwrap());
    assert!(matches!(
        with_float.format_as(&wb, &any1),
        Err(SpaceError::Incompatible { .. })
    ));
}

#[test]
fn composite_to_composite_checks_the_totals_first() {
    // The audit's case: Pylearn2 raises ValueError (total 2 vs 6) before any leaf
    // converts, though IndexSpace(3, 2) -> VectorSpace(6) alone is a valid one-hot.
    let src = Space::composite([index(3, 2)]);
    let dst = Space::composite([Space::vector(6)]);
    assert!(matches!(
        src.format_as(&Batch::tuple([labels(vec![0, 2], 1, 2)]), &dst),
        Err(SpaceError::DimMismatch {
            from_dim: 2,
            to_dim: 6,
            ..
        })
    ));
    // Only the top level is checked: nested composites of different totals convert when
    // their leaves do (here 3 -> 1 merged and 1 -> 3 one-hots), as upstream.
    let src = Space::composite([
        Space::composite([index(1, 3)]),
        Space::composite([index(3, 1)]),
    ]);
    let dst = Space::composite([
        Space::composite([Space::vector(1)]),
        Space::composite([Space::vector(3)]),
    ]);
    let b = Batch::tuple([
        Batch::tuple([labels(vec![0, 0, 0], 1, 3)]),
        Batch::tuple([labels(vec![2], 1, 1)]),
    ]);
    let out = src.format_as(&b, &dst).unwrap();
    let items = out.children().unwrap();
    assert_eq!(f32s(&items[0].children().unwrap()[0]), vec![1.]);
    assert_eq!(f32s(&items[1].children().unwrap()[0]), vec![0., 0., 1.]);
}

#[test]
fn composite_to_composite_walks_the_same_tree() {
    let src = Space::composite([
        Space::vector(2),
        Space::composite([conv(1, 1, 2, Axes::B01C)]),
    ]);
    let dst = Space::composite([
        Space::from(VectorSpace::new(2).with_dtype(Some(DType::F64)).unwrap()),
        Space::composite([conv(1, 1, 2, Axes::C01B)]),
    ]);
    let b = Space::vector(4).format_as(&vec_batch(3, 4), &src).unwrap();
    let out = src.format_as(&b, &dst).unwrap();
    let items = out.children().unwrap();
    assert_eq!(tensor(&items[0]).dtype(), DType::F64);
    let c = tensor(&items[1].children().unwrap()[0]);
    assert_eq!(c.dims(), &[2, 1, 1, 3]);
    assert_eq!(
        dst.format_as(&out, &Space::vector(4)).unwrap(),
        vec_batch(3, 4)
    );
    // A composite where the other tree has a leaf, and differing child counts.
    let flat = Space::composite([Space::vector(2), conv(1, 1, 2, Axes::B01C)]);
    assert!(matches!(
        src.format_as(&b, &flat),
        Err(SpaceError::StructureMismatch(_))
    ));
    let longer = Space::composite([
        Space::vector(2),
        Space::composite([conv(1, 1, 2, Axes::B01C)]),
        Space::null(),
    ]);
    assert!(matches!(
        src.format_as(&b, &longer),
        Err(SpaceError::StructureMismatch(_))
    ));
    // Leaves keep their own rules.
    let bad_leaf = Space::composite([Space::vector(2), Space::composite([Space::vector(3)])]);
    assert!(matches!(
        src.format_as(&b, &bad_leaf),
        Err(SpaceError::DimMismatch { .. })
    ));
}

#[test]
fn composite_to_conv2d_index_null_are_unsupported() {
    let src = Space::composite([Space::vector(2)]);
    let b = Batch::tuple([vec_batch(1, 2)]);
    for dst in [conv(1, 2, 1, Axes::B01C), index(5, 2), Space::null()] {
        assert!(
            matches!(src.format_as(&b, &dst), Err(SpaceError::Unsupported { .. })),
            "{dst}"
        );
    }
    assert!(matches!(
        src.format_as(&b, &conv(1, 3, 1, Axes::B01C)),
        Err(SpaceError::DimMismatch { .. })
    ));
}

// ---- Null row ----

#[test]
fn null_formats_only_into_null() {
    assert_eq!(
        Space::null()
            .format_as(&Batch::None, &Space::null())
            .unwrap(),
        Batch::None
    );
    for dst in [
        Space::vector(0),
        conv(1, 1, 1, Axes::B01C),
        index(1, 1),
        Space::composite([]),
    ] {
        assert!(
            matches!(
                Space::null().format_as(&Batch::None, &dst),
                Err(SpaceError::Unsupported { .. })
            ),
            "{dst}"
        );
    }
    assert!(matches!(
        Space::null().format_as(&vec_batch(1, 1), &Space::null()),
        Err(SpaceError::WrongKind { .. })
    ));
}

#[test]
fn column_major_batches_are_converted_by_logical_index() {
    let b = vec_batch(2, 6);
    let cm: Batch = tensor(&b).to_order(Order::ColumnMajor).unwrap().into();
    let dst = conv(1, 3, 2, Axes::BC01);
    assert_eq!(
        Space::vector(6).format_as(&cm, &dst).unwrap(),
        Space::vector(6).format_as(&b, &dst).unwrap()
    );
    let out = Space::vector(6).format_as(&cm, &Space::vector(6)).unwrap();
    assert_eq!(out, b);
}

#[test]
fn undo_format_as_inverts() {
    let s = Space::vector(12);
    let c = conv(2, 3, 2, Axes::C01B);
    let b = vec_batch(2, 12);
    let formatted = s.format_as(&b, &c).unwrap();
    assert_eq!(s.undo_format_as(&formatted, &c).unwrap(), b);
}

// ---- Data specs (seed document) ----

fn seed_spaces() -> (Space, Space, Space) {
    (
        Space::vector(32 * 32 * 3),
        conv(32, 32, 3, Axes::BC01),
        Space::vector(10),
    )
}

fn src(names: &[&str]) -> Source {
    Source::tuple(names.iter().map(|&n| Source::from(n)))
}

#[test]
fn seed_correct_specs_are_accepted() {
    let (v, c, t) = seed_spaces();
    let specs = [
        (v.clone(), Source::from("features")),
        (c.clone(), "features".into()),
        (t.clone(), "targets".into()),
        (
            Space::composite([v.clone(), t.clone()]),
            src(&["features", "targets"]),
        ),
        (
            Space::composite([t.clone(), c.clone()]),
            src(&["targets", "features"]),
        ),
        (
            Space::composite([v.clone(), v.clone(), v.clone(), t.clone()]),
            src(&["features", "features", "features", "targets"]),
        ),
        (
            Space::composite([
                Space::composite([v.clone(), v.clone(), v.clone()]),
                t.clone(),
            ]),
            Source::tuple([src(&["features", "features", "features"]), "targets".into()]),
        ),
        (Space::null(), Source::none()),
    ];
    let expected_unique = [1, 1, 1, 2, 2, 2, 2, 0];
    for ((space, source), n) in specs.iter().zip(expected_unique) {
        let m = DataSpecsMapping::new(space, source).unwrap();
        assert_eq!(m.n_unique_specs(), n, "{space}");
        assert_eq!(&m.nest(&m.flatten(source).unwrap()).unwrap(), source);
        assert_eq!(&m.nest(&m.flatten(space).unwrap()).unwrap(), space);
    }
}

#[test]
fn seed_incorrect_specs_are_rejected() {
    let (v, c, t) = seed_spaces();
    // (target_space, "features"): accepted structurally, fails on the data width.
    let m = DataSpecsMapping::new(&t, &"features".into()).unwrap();
    assert_eq!(m.n_unique_specs(), 1);
    assert!(matches!(
        t.validate(&vec_batch(2, 3072)),
        Err(SpaceError::ShapeMismatch { .. })
    ));
    let bad = [
        (
            Space::composite([v.clone(), c.clone()]),
            Source::from("features"),
        ),
        (Space::composite([v.clone()]), Source::from("features")),
        (
            Space::composite([v.clone(), v.clone(), v.clone(), t.clone()]),
            Source::tuple([src(&["features", "features", "features"]), "targets".into()]),
        ),
        (
            Space::composite([
                Space::composite([v.clone(), v.clone(), v.clone()]),
                t.clone(),
            ]),
            src(&["features", "features", "features", "targets"]),
        ),
        // Ours: a one-item tuple does not stand for a name, nor a string for a tuple.
        (v.clone(), src(&["features"])),
        (Space::composite([v.clone(), v.clone()]), Source::from("xy")),
        (Space::null(), Source::from("features")),
        (Space::null(), src(&[])),
    ];
    for (space, source) in bad {
        assert!(
            matches!(
                DataSpecsMapping::new(&space, &source),
                Err(SpaceError::StructureMismatch(_))
            ),
            "{space} / {source}"
        );
    }
}

#[test]
fn seed_flatten_nest_nested_example() {
    let (v, c, t) = seed_spaces();
    let source = Source::tuple(["features".into(), src(&["features", "targets"])]);
    let space = Space::composite([v.clone(), Space::composite([c.clone(), t.clone()])]);
    let m = DataSpecsMapping::new(&space, &source).unwrap();
    let flat_source = m.flatten(&source).unwrap();
    assert_eq!(
        flat_source,
        vec!["features".into(), "features".into(), "targets".into()]
    );
    let flat_space = m.flatten(&space).unwrap();
    assert_eq!(flat_space, vec![v.clone(), c.clone(), t.clone()]);
    assert_eq!(m.nest(&flat_source).unwrap(), source);
    assert_eq!(m.nest(&flat_space).unwrap(), space);
    let l = Nested::Leaf;
    assert_eq!(
        m.nest(&[l(1), l(2), l(3)]).unwrap(),
        Nested::Tuple(vec![l(1), Nested::Tuple(vec![l(2), l(3)])])
    );
    let (fs, fsrc) = m.flat_spec();
    assert_eq!(fs, Space::composite([v, c, t]));
    assert_eq!(fsrc, src(&["features", "features", "targets"]));
    assert!(fs.is_flat() && fsrc.is_flat() && !space.is_flat() && !source.is_flat());
}

#[test]
fn seed_flatten_nest_duplicate_example() {
    let (v, _, t) = seed_spaces();
    let pair = src(&["features", "targets"]);
    let source = Source::tuple([pair.clone(), pair]);
    let inner = Space::composite([v.clone(), t.clone()]);
    let space = Space::composite([inner.clone(), inner]);
    let m = DataSpecsMapping::new(&space, &source).unwrap();
    assert_eq!(
        m.flatten(&source).unwrap(),
        vec!["features".into(), "targets".into()]
    );
    assert_eq!(m.flatten(&space).unwrap(), vec![v.clone(), t.clone()]);
    assert_eq!(m.nest(&m.flatten(&source).unwrap()).unwrap(), source);
    assert_eq!(m.nest(&m.flatten(&space).unwrap()).unwrap(), space);
    let l = Nested::Leaf;
    let p = Nested::Tuple(vec![l(1), l(2)]);
    assert_eq!(
        m.nest(&[l(1), l(2)]).unwrap(),
        Nested::Tuple(vec![p.clone(), p])
    );
}

#[test]
fn duplicates_need_same_space_and_source() {
    // Spec §13: (Composite[Va, Composite[Va, Vb]], ("x", ("x", "y"))) -> (0, (0, 1)).
    let (a, b) = (Space::vector(3), Space::vector(4));
    let space = Space::composite([a.clone(), Space::composite([a.clone(), b.clone()])]);
    let m = DataSpecsMapping::new(&space, &Source::tuple(["x".into(), src(&["x", "y"])])).unwrap();
    assert_eq!(
        m.flat_specs(),
        &[(a.clone(), "x".to_string()), (b.clone(), "y".to_string())]
    );
    // Same space, another source; same source, another dtype or axes: distinct.
    let other =
        DataSpecsMapping::new(&space, &Source::tuple(["x".into(), src(&["z", "y"])])).unwrap();
    assert_eq!(other.n_unique_specs(), 3);
    let a64 = a.with_dtype(Some(DType::F64)).unwrap();
    let dtyped = Space::composite([a.clone(), a64]);
    assert_eq!(
        DataSpecsMapping::new(&dtyped, &src(&["x", "x"]))
            .unwrap()
            .n_unique_specs(),
        2
    );
    let axes = Space::composite([conv(2, 2, 1, Axes::B01C), conv(2, 2, 1, Axes::BC01)]);
    assert_eq!(
        DataSpecsMapping::new(&axes, &src(&["x", "x"]))
            .unwrap()
            .n_unique_specs(),
        2
    );
}

#[test]
fn batches_flatten_and_nest() {
    let (a, t) = (Space::vector(2), Space::vector(1));
    let space = Space::composite([
        Space::composite([a.clone(), t.clone()]),
        Space::null(),
        Space::composite([a.clone(), t.clone()]),
    ]);
    let pair = src(&["f", "t"]);
    let source = Source::tuple([pair.clone(), Source::none(), pair]);
    let m = DataSpecsMapping::new(&space, &source).unwrap();
    let (fb, tb) = (vec_batch(3, 2), vec_batch(3, 1));
    let nested = m.nest(&[fb.clone(), tb.clone()]).unwrap();
    space.validate(&nested).unwrap();
    assert_eq!(nested.children().unwrap()[1], Batch::None);
    assert_eq!(m.flatten(&nested).unwrap(), vec![fb.clone(), tb.clone()]);
    // A duplicate position with different data.
    let inconsistent = Batch::tuple([
        Batch::tuple([fb.clone(), tb.clone()]),
        Batch::None,
        Batch::tuple([vec_batch(4, 2), tb.clone()]),
    ]);
    assert!(matches!(
        m.flatten(&inconsistent),
        Err(SpaceError::StructureMismatch(_))
    ));
    // Data at a null position, a tuple at a leaf, wrong lengths.
    let at_null = Batch::tuple([
        Batch::tuple([fb.clone(), tb.clone()]),
        tb.clone(),
        Batch::tuple([fb.clone(), tb.clone()]),
    ]);
    assert!(matches!(
        m.flatten(&at_null),
        Err(SpaceError::StructureMismatch(_))
    ));
    let tuple_leaf = Batch::tuple([
        Batch::tuple([Batch::tuple([fb.clone()]), tb.clone()]),
        Batch::None,
        Batch::tuple([fb.clone(), tb.clone()]),
    ]);
    assert!(matches!(
        m.flatten(&tuple_leaf),
        Err(SpaceError::StructureMismatch(_))
    ));
    assert!(matches!(
        m.flatten(&fb),
        Err(SpaceError::StructureMismatch(_))
    ));
    assert!(matches!(
        m.nest(std::slice::from_ref(&fb)),
        Err(SpaceError::StructureMismatch(_))
    ));
    // The null spec: nothing to request, nests to none.
    let null = DataSpecsMapping::new(&Space::null(), &Source::none()).unwrap();
    assert_eq!(null.flatten(&Batch::None).unwrap(), Vec::<Batch>::new());
    assert_eq!(null.nest::<Batch>(&[]).unwrap(), Batch::None);
    assert_eq!(null.nest::<Space>(&[]).unwrap(), Space::null());
}

// ---- Properties ----

fn arb_axes() -> impl Strategy<Value = Axes> {
    let labels = [Axis::Batch, Axis::Channel, Axis::Row, Axis::Col];
    Just(labels)
        .prop_shuffle()
        .prop_map(|a| Axes::new(a).unwrap())
}

fn arb_dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(vec![
        DType::F32,
        DType::F64,
        DType::I16,
        DType::U8,
        DType::F16,
    ])
}

proptest! {
    #[test]
    fn vector_conv2d_vector_is_identity(
        n in 0usize..4, rows in 1usize..5, cols in 1usize..5, ch in 1usize..5,
        axes in arb_axes(), dtype in arb_dtype(), seed in any::<u64>(),
    ) {
        let total = rows * cols * ch;
        let vals: Vec<f64> = (0..n * total).map(|i| ((i as u64 ^ seed) % 97) as f64).collect();
        let t = Tensor::from_vec(vals, [n, total], Order::RowMajor).unwrap().cast(dtype).unwrap();
        let vs = Space::from(VectorSpace::new(total).with_dtype(Some(dtype)).unwrap());
        let cs = Space::from(Conv2DSpace::new(rows, cols, ch).unwrap().with_axes(axes).with_dtype(Some(dtype)).unwrap());
        let b = Batch::from(t);
        let c = vs.format_as(&b, &cs).unwrap();
        prop_assert_eq!(cs.batch_size(&c).unwrap(), n);
        let back = cs.format_as(&c, &vs).unwrap();
        prop_assert_eq!(back, b);
    }

    #[test]
    fn conv2d_via_vector_equals_direct_transpose(
        n in 0usize..3, rows in 1usize..4, cols in 1usize..4, ch in 1usize..4,
        a in arb_axes(), bx in arb_axes(),
    ) {
        let total = rows * cols * ch;
        let v: Batch = Tensor::from_vec((0..(n * total) as u32).collect::<Vec<u32>>(), [n, total], Order::RowMajor).unwrap().into();
        let vs = Space::from(VectorSpace::new(total).with_dtype(None).unwrap());
        let sa = Space::from(Conv2DSpace::new(rows, cols, ch).unwrap().with_axes(a).with_dtype(None).unwrap());
        let sb = Space::from(Conv2DSpace::new(rows, cols, ch).unwrap().with_axes(bx).with_dtype(None).unwrap());
        let ba = vs.format_as(&v, &sa).unwrap();
        let direct = sa.format_as(&ba, &sb).unwrap();
        let via = vs.format_as(&sa.format_as(&ba, &vs).unwrap(), &sb).unwrap();
        prop_assert_eq!(&direct, &via);
        // The einops pattern gives the same transpose.
        let pattern = format!("{a} -> {bx}");
        prop_assert_eq!(rearrange(tensor(&ba), &pattern).unwrap(), tensor(&direct).clone());
    }

    #[test]
    fn vector_composite_vector_is_identity(widths in prop::collection::vec(0usize..4, 0..5), n in 0usize..4) {
        let comps: Vec<Space> = widths.iter().map(|&w| Space::vector(w)).collect();
        let c = Space::composite(comps);
        let total: usize = widths.iter().sum();
        let b = vec_batch(n, total);
        let split = Space::vector(total).format_as(&b, &c).unwrap();
        let back = c.format_as(&split, &Space::vector(total));
        // With no component the batch has no batch size to carry back.
        if widths.is_empty() {
            prop_assert!(back.is_err());
        } else {
            prop_assert_eq!(back.unwrap(), b);
        }
    }
}

#[test]
fn space_errors_convert_into_core_errors() {
    let e: tensorfmt_core::Error = SpaceError::NoTotalDimension("NullSpace".into()).into();
    assert!(
        matches!(e, tensorfmt_core::Error::Invalid(ref m) if m == "NullSpace has no total dimension")
    );
    let core = tensorfmt_core::Error::Overflow { what: "x" };
    let e: tensorfmt_core::Error = SpaceError::from(core).into();
    assert!(matches!(e, tensorfmt_core::Error::Overflow { what: "x" }));
}

/// Issue 34 item 3: an IndexSpace inside a composite counts its `dim` (its total
/// dimension) and is formatted into a vector of that width, as Pylearn2's
/// `CompositeSpace._format_as_impl` does: merged one-hots when `dim == max_labels`,
/// concatenated when `max_labels == 1`, else the IndexSpace's own size error.
#[test]
fn an_index_space_in_a_composite_follows_pylearn2s_arithmetic() {
    let lbl = labels(vec![2, 0, 2, 1, 1, 0], 2, 3);
    let merged = index(3, 3).format_as(&lbl, &Space::vector(3)).unwrap();
    let c = Space::composite([index(3, 3)]);
    assert_eq!(c.total_dimension().unwrap(), 3);
    let out = c
        .format_as(&Batch::tuple([lbl.clone()]), &Space::vector(3))
        .unwrap();
    assert_eq!(f32s(&out), f32s(&merged));
    let ones = Space::composite([index(1, 4)]);
    let out = ones
        .format_as(&Batch::tuple([labels(vec![0; 8], 2, 4)]), &Space::vector(4))
        .unwrap();
    assert_eq!(f32s(&out), vec![1.0; 8]);
    let lone = Space::composite([index(5, 1)]);
    let b = Batch::tuple([labels(vec![4], 1, 1)]);
    assert!(matches!(
        lone.format_as(&b, &Space::vector(5)),
        Err(SpaceError::DimMismatch {
            from_dim: 1,
            to_dim: 5,
            ..
        })
    ));
    assert!(matches!(
        lone.format_as(&b, &Space::vector(1)),
        Err(SpaceError::OneHotWidth {
            merge: 5,
            concatenate: 5,
            ..
        })
    ));
}
