//! The `som_roundtrip` fuzz target's body, a structured round trip for PINK files: a
//! random valid description (kind, element type, dims, map layout, comments, values)
//! is written with our writers, read back (typed reader and the TensorFile view,
//! strict) and must be equal, bit for bit.
use arbitrary::Arbitrary;
use bytes::Bytes;
use tensorfmt_core::{Order, ReadOptions, Tensor};
use tensorfmt_som::{
    write_data, write_mapping, write_rotflip, write_som, DataType, DataWriter, FileKind, HexGrid,
    MapLayout, RotFlip, SomFile, WriteConfig,
};

#[derive(Arbitrary, Debug)]
enum Kind {
    Data { streamed: bool },
    Som,
    Mapping,
    RotFlip,
}

#[derive(Arbitrary, Debug)]
struct Desc {
    kind: Kind,
    data_type: u8,
    /// Entry (data) or neuron (SOM) dims, each 1..=6, rank 1..=3.
    item_dims: Vec<u8>,
    /// Cartesian map dims (rank 1..=3, each 1..=4), or a hexagonal side.
    hex: Option<u8>,
    map_dims: Vec<u8>,
    pink_cli_compat: bool,
    entries: u8,
    comments: Vec<Vec<u8>>,
    values: Vec<u8>,
}

fn dims(raw: &[u8], max_rank: usize, max: u8) -> Vec<usize> {
    let mut d: Vec<usize> = raw
        .iter()
        .take(max_rank)
        .map(|&x| (x % max) as usize + 1)
        .collect();
    if d.is_empty() {
        d.push(1);
    }
    d
}

/// `n` elements of `dtype` from the fuzzer's bytes (repeated as needed).
fn tensor(dtype: tensorfmt_core::DType, shape: Vec<usize>, src: &[u8]) -> Tensor {
    let n: usize = shape.iter().product::<usize>() * dtype.size();
    let bytes: Vec<u8> = if src.is_empty() {
        vec![0; n]
    } else {
        src.iter().copied().cycle().take(n).collect()
    };
    Tensor::from_bytes(dtype, shape, Order::RowMajor, bytes).unwrap()
}

/// Builds a description from `data` (as `fuzz_target!(|d: Desc| ..)` would), writes
/// it, reads it back and compares; returns the kind of file written (none when `data`
/// is too short for a description).
///
/// ```
/// assert_eq!(tensorfmt_fuzzing::som_roundtrip(&[0; 64]), Some("data"));
/// ```
pub fn som_roundtrip(data: &[u8]) -> Option<&'static str> {
    let d: Desc = crate::take_rest(data)?;
    let data_type = DataType::from_code((d.data_type % 10) as i32).unwrap();
    let comments: Vec<String> = d
        .comments
        .iter()
        .take(3)
        .map(|l| {
            l.iter()
                .take(40)
                .map(|&b| (0x20 + b % 0x5f) as char)
                .collect()
        })
        .collect();
    let config = WriteConfig {
        comments: comments.clone(),
        data_type,
        pink_cli_compat: d.pink_cli_compat,
        end_line: false,
    };
    let item = dims(&d.item_dims, 3, 6);
    let map = match d.hex {
        // Side >= 3: a side-1 map is one neuron either way.
        Some(h) => MapLayout::Hexagonal(HexGrid::new(3 + 2 * (h % 4) as usize).unwrap()),
        None => MapLayout::Cartesian(dims(&d.map_dims, 3, 4)),
    };
    let neurons = map.neuron_count();
    let entries = (d.entries % 4) as usize + 1;
    let dtype = data_type.dtype();
    let mut out = Vec::new();
    let expect: Tensor;
    let mut records = Vec::new();
    match d.kind {
        Kind::Data { streamed } => {
            let mut shape = vec![entries];
            shape.extend(&item);
            expect = tensor(dtype, shape, &d.values);
            if streamed {
                let mut w =
                    DataWriter::new(std::io::Cursor::new(Vec::new()), &item, &config).unwrap();
                for k in 0..entries {
                    w.append(&expect.slice_outer(k, k + 1).unwrap()).unwrap();
                }
                out = w.finish().unwrap().into_inner();
            } else {
                write_data(&mut out, &expect, &config).unwrap();
            }
        }
        Kind::Som => {
            let mut shape = map.export_dims();
            shape.extend(&item);
            expect = tensor(dtype, shape, &d.values);
            write_som(&mut out, &map, &item, &expect, &config).unwrap();
        }
        Kind::Mapping => {
            let mut shape = vec![entries];
            shape.extend(map.export_dims());
            expect = tensor(dtype, shape, &d.values);
            write_mapping(&mut out, &map, &expect, &config).unwrap();
        }
        Kind::RotFlip => {
            expect = tensor(tensorfmt_core::DType::U8, vec![entries, neurons], &[]);
            let src: Vec<u8> = if d.values.is_empty() {
                vec![0]
            } else {
                d.values.clone()
            };
            records = (0..entries * neurons)
                .map(|i| {
                    let b = |j: usize| src[(i * 5 + j) % src.len()];
                    RotFlip {
                        flip_byte: b(0) & 1,
                        angle: f32::from_le_bytes([b(1), b(2), b(3), b(4)]),
                    }
                })
                .collect();
            write_rotflip(&mut out, &map, entries, &records, &config).unwrap();
        }
    }

    let pink_ok = data_type == DataType::F32 || matches!(d.kind, Kind::Mapping | Kind::RotFlip);
    let strict = tensorfmt_som::ReadConfig {
        strict: pink_ok,
        ..Default::default()
    };
    let f = SomFile::from_bytes_with(Bytes::from(out.clone()), &strict).unwrap();
    let texts: Vec<String> = f
        .comments()
        .lines
        .iter()
        .map(|l| l.trim_start_matches('#').trim_start().to_string())
        .collect();
    let given: Vec<String> = comments
        .iter()
        .map(|l| l.trim_start_matches('#').trim_start().to_string())
        .collect();
    assert_eq!(texts, given);
    assert_eq!(
        f.map_layout().map(|m| m.neuron_count()).unwrap_or(neurons),
        neurons
    );
    if !matches!(d.kind, Kind::Data { .. }) {
        assert_eq!(f.map_layout(), Some(&map));
        assert_eq!(f.hex_inferred(), map.is_hexagonal() && d.pink_cli_compat);
    }
    let got = match d.kind {
        Kind::Data { .. } => {
            assert_eq!(f.kind(), FileKind::Data);
            assert_eq!(f.entry_dims(), Some(&item[..]));
            f.entries(0..entries).unwrap()
        }
        Kind::Som => {
            assert_eq!(f.kind(), FileKind::Som);
            f.som_tensor().unwrap()
        }
        Kind::Mapping => f.distances(0..entries).unwrap(),
        Kind::RotFlip => {
            for e in 0..entries {
                for n in 0..neurons {
                    let r = f.rotflip(e, n).unwrap();
                    let want = records[e * neurons + n];
                    assert_eq!(r.flip_byte, want.flip_byte);
                    assert_eq!(r.angle.to_bits(), want.angle.to_bits());
                }
            }
            expect.clone()
        }
    };
    assert_eq!(got.dtype(), expect.dtype());
    assert_eq!(got.dims(), expect.dims());
    assert_eq!(
        got.to_order(Order::RowMajor).unwrap().bytes(),
        expect.bytes(),
        "values differ"
    );

    // The TensorFile view agrees on names and shapes.
    let opts = ReadOptions {
        strict: pink_ok,
        ..Default::default()
    };
    let tf = tensorfmt_som::open_tensor_file(Bytes::from(out), &opts).unwrap();
    for info in tf.tensors() {
        let t = tf.read_tensor(&info.name).unwrap();
        assert_eq!(t.dims(), info.shape.dims());
    }
    Some(match d.kind {
        Kind::Data { streamed: false } => "data",
        Kind::Data { streamed: true } => "data streamed",
        Kind::Som if map.is_hexagonal() => "som hexagonal",
        Kind::Som => "som cartesian",
        Kind::Mapping => "mapping",
        Kind::RotFlip => "rotflip",
    })
}

#[cfg(test)]
mod tests {
    use crate::inputs::{descriptions, kinds};

    #[test]
    fn every_kind_round_trips() {
        let reached = kinds(
            "som_roundtrip",
            &descriptions(3000, 16),
            super::som_roundtrip,
        );
        let all = [
            "data",
            "data streamed",
            "som hexagonal",
            "som cartesian",
            "mapping",
            "rotflip",
        ];
        for kind in all {
            assert!(
                reached.get(kind).is_some_and(|&n| n >= 20),
                "{kind}: {reached:?}"
            );
        }
    }
}
