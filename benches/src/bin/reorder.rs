//! `Tensor::to_order` / `Tensor::permute` beside a plain copy of the same bytes, for the
//! shapes the formats and spaces use (min / median of N alternated runs of the copy and
//! the operation, GB/s, % of the copy).
//!
//! `cargo run --release -p tensorfmt-benches --bin reorder -- [REPS]`

use std::hint::black_box;

use bytes::Bytes;
use tensorfmt_core::{DType, Order, Tensor};

fn tensor(dims: &[usize], order: Order, shift: usize) -> Tensor {
    let n: usize = dims.iter().product();
    let mut raw = vec![0u8; shift];
    for i in 0..n {
        raw.extend_from_slice(&((i % 1000) as f32 * 0.25).to_le_bytes());
    }
    Tensor::from_bytes(
        DType::F32,
        dims.to_vec(),
        order,
        Bytes::from(raw).slice(shift..),
    )
    .unwrap()
}

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(9);
    type Case = (&'static str, Vec<usize>, Order, usize, Option<Vec<usize>>);
    let cases: Vec<Case> = vec![
        (
            "col->row [1024, 1024] (primitiv matrix)",
            vec![1024, 1024],
            Order::ColumnMajor,
            0,
            None,
        ),
        (
            "col->row [1024, 1024], unaligned",
            vec![1024, 1024],
            Order::ColumnMajor,
            1,
            None,
        ),
        (
            "col->row [4096, 4096]",
            vec![4096, 4096],
            Order::ColumnMajor,
            0,
            None,
        ),
        (
            "col->row [100, 3, 50000]",
            vec![100, 3, 50000],
            Order::ColumnMajor,
            0,
            None,
        ),
        (
            "permute bc01->c01b [256, 3, 32, 32]",
            vec![256, 3, 32, 32],
            Order::RowMajor,
            0,
            Some(vec![1, 2, 3, 0]),
        ),
        (
            "permute bc01->b01c [256, 3, 32, 32]",
            vec![256, 3, 32, 32],
            Order::RowMajor,
            0,
            Some(vec![0, 2, 3, 1]),
        ),
        (
            "permute b01c->bc01 [256, 32, 32, 3]",
            vec![256, 32, 32, 3],
            Order::RowMajor,
            0,
            Some(vec![0, 3, 1, 2]),
        ),
        (
            "permute c01b->bc01 [3, 32, 32, 256]",
            vec![3, 32, 32, 256],
            Order::RowMajor,
            0,
            Some(vec![3, 0, 1, 2]),
        ),
    ];
    println!("min / median of {reps} alternated runs\n");
    println!("| operation | MiB | copy GB/s | reorder GB/s | % of copy |");
    println!("|---|---|---|---|---|");
    for (label, dims, order, shift, axes) in cases {
        let t = tensor(&dims, order, shift);
        let bytes = t.bytes().len();
        let t2 = tensorfmt_benches::alternate(
            reps,
            &mut [
                &mut || {
                    black_box(t.bytes().to_vec());
                },
                &mut || {
                    black_box(match &axes {
                        Some(a) => t.permute(a).unwrap(),
                        None => t.to_order(Order::RowMajor).unwrap(),
                    });
                },
            ],
        );
        let (copy, op) = (t2[0], t2[1]);
        let gbs = |d: f64| bytes as f64 / 1e9 / d;
        println!(
            "| {label} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.0} / {:.0} % |",
            bytes >> 20,
            gbs(copy.0),
            gbs(copy.1),
            gbs(op.0),
            gbs(op.1),
            100.0 * copy.0 / op.0,
            100.0 * copy.1 / op.1
        );
    }
}
