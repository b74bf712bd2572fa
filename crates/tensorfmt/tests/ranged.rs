//! Remote descriptions ([`tensorfmt::ranged`]) against the mapped readers, on every
//! fixture of testdata/ and every file of the shared corpus:
//!
//! - a file the mapped reader refuses is refused (no references to a file nobody reads);
//! - the tensors (names, dtypes, shapes) and header are the mapped reader's;
//! - every layout a mapped reader declares is the remote one, and every remote byte
//!   range, gathered from the real file, is the tensor `read_tensor` returns;
//! - the answer is the same with the bytes the walk skipped zero or filled with
//!   garbage, so it depends on the fetched bytes alone;
//! - where the remote description refuses a file the mapped reader opens, it is one of
//!   the refusals that protect references (MPI blocks, partial frames, ...).

use std::path::{Path, PathBuf};

use tensorfmt::ranged::{describe_path, describe_remote, FileSource, Placement, RemoteOptions};
use tensorfmt::{Format, Order, SourceLayout, Tensor, TensorFile};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(&p, out);
        } else if !matches!(
            p.extension().and_then(|e| e.to_str()),
            Some("dump" | "md" | "json" | "prototxt" | "txt" | "py" | "sh")
        ) {
            out.push(p);
        }
    }
}

fn all_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    files_under(&root().join("testdata"), &mut out);
    for f in ["pvp", "som", "primitiv", "caffe"] {
        if let Some(d) = tensorfmt::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), f) {
            files_under(&d, &mut out);
        }
    }
    out
}

/// The tensor's bytes gathered from the file as `layout` says, in its order.
fn gather(file: &[u8], layout: &SourceLayout) -> Vec<u8> {
    let mut out = Vec::new();
    for r in &layout.runs {
        for at in r.pieces() {
            out.extend_from_slice(&file[at as usize..(at + r.len) as usize]);
        }
    }
    out
}

const PROTECTIVE: &[&str] = &[
    "MPI-split",
    "border",
    "truncated",
    "not a multiple",
    "partial",
    "differs from frame 0",
    "pre-version-2",
];

#[test]
fn remote_descriptions_agree_with_the_mapped_readers() {
    let files = all_files();
    assert!(files.len() > 40, "{} files", files.len());
    let (mut described, mut refused, mut sparse) = (0, Vec::new(), 0);
    for path in &files {
        let mapped = match tensorfmt::open(path, &Default::default()) {
            Ok(d) => d,
            Err(_) => {
                // What the mapped reader refuses, the remote description refuses.
                let r = describe_path(path, &RemoteOptions::default());
                assert!(
                    r.is_err(),
                    "{}: described, but the mapped reader refuses it",
                    path.display()
                );
                continue;
            }
        };
        let remote = match describe_path(path, &RemoteOptions::default()) {
            Ok(v) => v,
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    PROTECTIVE.iter().any(|p| msg.contains(p)),
                    "{}: refused remotely: {msg}",
                    path.display()
                );
                refused.push(format!("{}: {msg}", path.display()));
                continue;
            }
        };
        described += 1;
        let what = path.display();
        assert_eq!(remote.format, mapped.file_format().name(), "{what}");
        let infos: Vec<_> = remote.tensors.iter().map(|t| t.info.clone()).collect();
        let mut header = mapped.header();
        if remote.kind == "sparse" {
            // Described from the header alone: nothing is referenced, the frame count
            // is nbands, and the scanned `frames` / `entries` are not reported.
            sparse += 1;
            header.retain(|(k, _)| k != "frames" && k != "entries");
            assert!(remote.fetched <= 64 << 10, "{what}");
            assert!(remote
                .tensors
                .iter()
                .all(|t| matches!(t.placement, Placement::NotVirtual(_))));
            let names = |v: &[tensorfmt::TensorInfo]| {
                v.iter()
                    .map(|i| (i.name.clone(), i.dtype, i.shape.dims()[1..].to_vec()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(names(&infos), names(&mapped.tensors()), "{what}");
        } else {
            assert_eq!(infos, mapped.tensors(), "{what}");
        }
        assert_eq!(remote.header, header, "{what}");
        assert_eq!(remote.kind, mapped.kind_id(), "{what}");
        assert_eq!(remote.description, mapped.kind(), "{what}");
        let data = std::fs::read(path).unwrap();
        for t in &remote.tensors {
            let name = &t.info.name;
            let declared = mapped.source_layout(name);
            match &t.placement {
                Placement::Bytes { layout, big_endian } => {
                    if let Some(d) = &declared {
                        assert_eq!(layout, d, "{what} {name}");
                    }
                    let got = gather(&data, layout);
                    let want = mapped.read_tensor(name).unwrap();
                    let want = want.to_order(layout.order).unwrap();
                    let mut want = want.bytes().to_vec();
                    if *big_endian {
                        for e in want.chunks_mut(t.info.dtype.size()) {
                            e.reverse();
                        }
                    }
                    assert!(
                        got == want,
                        "{what} {name}: the referenced bytes are not the tensor"
                    );
                }
                Placement::Beside { file, layout } => {
                    let other = std::fs::read(path.parent().unwrap().join(&file.location)).unwrap();
                    let got = gather(&other, layout);
                    let want = mapped.read_tensor(name).unwrap();
                    assert!(
                        got == want.bytes().as_ref(),
                        "{what} {name}: the referenced bytes are not the tensor"
                    );
                }
                Placement::NotVirtual(reason) => {
                    // A sparse file's frame times lie at offsets only a scan of its
                    // frames finds: declared for splicing, not referenced remotely
                    // (described from the header alone).
                    let sparse_time = remote.kind == "sparse" && name == "time";
                    assert!(
                        declared.is_none() || sparse_time || t.info.dtype == tensorfmt::DType::BF16 || name == "flip" || name == "angle",
                        "{what} {name}: the reader declares a layout, the remote view lists it as not virtual ({reason})"
                    );
                }
            }
        }
        // The same answer whatever the skipped bytes hold.
        for fill in [0xa5u8, 0xff] {
            let opts = RemoteOptions {
                fill_unfetched: Some(fill),
                ..RemoteOptions::default()
            };
            let again = describe_path(path, &opts)
                .unwrap_or_else(|e| panic!("{what}: with fill {fill:#x}: {e}"));
            assert_eq!(
                again.tensors, remote.tensors,
                "{what}: depends on skipped bytes ({fill:#x})"
            );
            assert_eq!(
                again.header, remote.header,
                "{what}: header depends on skipped bytes"
            );
        }
    }
    eprintln!(
        "described {described} files remotely; refused {}:",
        refused.len()
    );
    for r in &refused {
        eprintln!("  {r}");
    }
    assert!(
        described > 30 && sparse >= 3,
        "{described} described, {sparse} sparse"
    );
}

#[test]
fn dense_movies_cost_their_first_block() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.pvp");
    let v =
        tensorfmt::Tensor::from_vec(vec![1f32; 10_000 * 16], [10_000, 4, 4, 1], Order::RowMajor)
            .unwrap();
    tensorfmt::save(
        &p,
        Format::Pvp,
        &[("values".into(), v)],
        &Default::default(),
    )
    .unwrap();
    let mut src = FileSource::open(&p).unwrap();
    let len = src.len();
    let v = describe_remote(&mut src, len, None, None, &RemoteOptions::default()).unwrap();
    assert_eq!((v.fetched, v.requests), (64 << 10, 1));
}

#[test]
fn onnx_external_data_is_referenced_in_its_own_file() {
    use tensorfmt_onnx::proto::{StringStringEntryProto as Entry, TensorProto};
    let dir = tempfile::tempdir().unwrap();
    let floats = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut data = floats(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    data.extend([0u8; 8]);
    data.extend(floats(&[7.0, 8.0]));
    std::fs::write(dir.path().join("m.onnx.data"), &data).unwrap();
    let entry = |k: &str, v: &str| Entry {
        key: k.into(),
        value: v.into(),
    };
    let ext = |name: &str, dims: Vec<i64>, keys: Vec<Entry>| TensorProto {
        name: name.into(),
        dims,
        data_type: 1,
        data_location: 1,
        external_data: keys,
        ..Default::default()
    };
    let inline = Tensor::from_vec(vec![9f32, 10.0], [2], Order::RowMajor).unwrap();
    let mut m = tensorfmt_onnx::weights_model(&[("inline".into(), inline)]).unwrap();
    let g = m.graph.as_mut().unwrap();
    g.initializer.insert(
        0,
        ext(
            "a",
            vec![2, 3],
            vec![entry("location", "m.onnx.data"), entry("length", "24")],
        ),
    );
    g.initializer.push(ext(
        "b",
        vec![2],
        vec![entry("location", "./m.onnx.data"), entry("offset", "32")],
    ));
    let model = dir.path().join("m.onnx");
    let mut buf = Vec::new();
    tensorfmt_onnx::write_model(&mut buf, &m).unwrap();
    std::fs::write(&model, &buf).unwrap();

    let v = describe_path(&model, &RemoteOptions::default()).unwrap();
    let mapped = tensorfmt::open(&model, &Default::default()).unwrap();
    let names: Vec<_> = v.tensors.iter().map(|t| t.info.name.as_str()).collect();
    assert_eq!(names, ["a", "inline", "b"]);
    assert_eq!(
        v.tensors.iter().map(|t| t.info.clone()).collect::<Vec<_>>(),
        mapped.tensors()
    );
    for t in &v.tensors {
        let want = mapped.read_tensor(&t.info.name).unwrap();
        let got = match &t.placement {
            Placement::Beside { file, layout } => {
                assert_eq!(file.to_end, t.info.name == "b");
                gather(&data, layout)
            }
            Placement::Bytes { layout, .. } => gather(&buf, layout),
            other => panic!("{other:?}"),
        };
        assert_eq!(got, want.bytes().as_ref(), "{}", t.info.name);
    }
    // A location outside the model's directory is refused by its text.
    let g = m.graph.as_mut().unwrap();
    g.initializer[0].external_data[0].value = "../m.onnx.data".into();
    let mut bad = Vec::new();
    tensorfmt_onnx::write_model(&mut bad, &m).unwrap();
    std::fs::write(&model, &bad).unwrap();
    let e = describe_path(&model, &RemoteOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("'..'"), "{e}");
}
