//! What we write, the original reads — or we say so (issue 16, item 6): `convert` counts
//! the tensors the written file holds, warns where the original program will refuse the
//! file, and `render` refuses to overwrite without `--force`, like `convert`.

mod common;

use common::{json, testdata, tf};
use std::path::Path;

use tensorfmt::{Format, Order, Tensor};

fn npz_with(dir: &std::path::Path, tensors: &[(&str, Tensor)]) -> std::path::PathBuf {
    let p = dir.join("in.npz");
    let list: Vec<(String, Tensor)> = tensors
        .iter()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect();
    tensorfmt::save(&p, Format::Npz, &list, &Default::default()).unwrap();
    p
}

/// `tensorfmt convert INPUT OUT FLAGS...`.
fn convert(input: &Path, out: &Path, flags: &[&str]) -> (i32, String, String) {
    let mut args: Vec<&std::ffi::OsStr> =
        vec!["convert".as_ref(), input.as_os_str(), out.as_os_str()];
    args.extend(flags.iter().map(std::ffi::OsStr::new));
    tf(args)
}

fn images() -> Tensor {
    Tensor::from_vec(vec![0.5f32; 2 * 3 * 3], [2, 3, 3], Order::RowMajor).unwrap()
}

#[test]
fn convert_counts_what_the_file_holds() {
    let dir = tempfile::tempdir().unwrap();
    let extra = Tensor::from_vec(vec![1f32, 2.0], [2], Order::RowMajor).unwrap();
    let input = npz_with(dir.path(), &[("data", images()), ("labels", extra)]);
    let out = dir.path().join("data.bin");
    let (code, stdout, err) = tf(args!["convert", &input, &out, "--to", "som-data"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("wrote 1 of 2 tensors as som (som-data) (the file holds: data)"),
        "{stdout}"
    );
    let out2 = dir.path().join("all.safetensors");
    let (code, stdout, _) = tf(args!["convert", &input, &out2]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains(": wrote 2 tensors as safetensors"),
        "{stdout}"
    );
    let out3 = dir.path().join("j.safetensors");
    let (code, stdout, _) = tf(args!["convert", &input, &out3, "--json"]);
    assert_eq!(code, 0);
    let v = json(&stdout);
    assert_eq!(v["written"], serde_json::json!(["data", "labels"]));
    assert_eq!(v["warnings"], serde_json::json!([]));
}

#[test]
fn pink_data_other_than_f32_is_written_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let input = npz_with(dir.path(), &[("data", images())]);
    let out = dir.path().join("u8.bin");
    let (code, stdout, err) = tf(args!["convert", &input, &out, "--dtype", "u8"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning")
            && err.contains("PINK 2.5 reads f32 payloads only")
            && err.contains("u8"),
        "{err}"
    );
    assert!(stdout.contains("wrote 1 tensor as som"), "{stdout}");
    // The file is what was asked for (u8), and f32 output has no warning.
    let doc = tensorfmt::Document::open(&out).unwrap();
    assert_eq!(doc.entry("data").unwrap().dtype(), tensorfmt::DType::U8);
    let f32_out = dir.path().join("f32.bin");
    let (code, _, err) = tf(args!["convert", &input, &f32_out]);
    assert_eq!(code, 0);
    assert!(!err.contains("warning"), "{err}");
    // --json carries the warning instead of printing it.
    let j = dir.path().join("u8j.bin");
    let (code, stdout, err) = tf(args!["convert", &input, &j, "--dtype", "u8", "--json"]);
    assert_eq!(code, 0);
    assert!(!err.contains("warning"), "{err}");
    let w = json(&stdout)["warnings"][0].as_str().unwrap().to_string();
    assert!(w.contains("PINK 2.5"), "{w}");
}

#[test]
fn render_refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("som.png");
    std::fs::write(&png, b"precious").unwrap();
    let som = testdata("som", "som_cart_3x2.bin");
    let (code, _, err) = tf(args!["render", &som, &png]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("exists; use --force"), "{err}");
    assert_eq!(std::fs::read(&png).unwrap(), b"precious");
    let (code, _, err) = tf(args!["render", &som, &png, "--force"]);
    assert_eq!(code, 0, "{err}");
    assert_ne!(std::fs::read(&png).unwrap(), b"precious");
}

/// A sparse values PVP movie of 4e8 neurons per frame (20000 x 20000 x 1).
fn huge_sparse(p: &Path, frames: &[(&[u32], &[f32])]) {
    let f = std::fs::File::create(p).unwrap();
    let mut w = tensorfmt::pvp::write::SparseWriter::values(f, 20_000, 20_000, 1).unwrap();
    for (k, (idx, vals)) in frames.iter().enumerate() {
        w.write_frame(k as f64, idx, vals).unwrap();
    }
    w.finish().unwrap();
}

const HUGE_FRAMES: [(&[u32], &[f32]); 5] = [
    (&[0, 7, 399_999_999], &[1.5, -2.0, 4.0]),
    (&[], &[]),
    (&[12], &[0.25]),
    (&[3, 4], &[1.0, 1.0]),
    (&[100_000_000], &[-8.0]),
];

/// Sparse stays sparse (item 7): statistics of a sparse PVP movie come from its entries.
#[test]
fn inspect_stats_of_a_huge_sparse_movie_is_computed_from_the_entries() {
    use std::time::Instant;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("huge.pvp");
    huge_sparse(&p, &HUGE_FRAMES);
    let start = Instant::now();
    let (code, out, err) = tf(args!["inspect", &p, "--stats", "--json"]);
    let elapsed = start.elapsed();
    assert_eq!(code, 0, "{err}");
    assert!(
        elapsed.as_secs_f64() < 1.0,
        "inspect --stats took {elapsed:?}"
    );
    let v = json(&out);
    let values = v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "values")
        .unwrap();
    let s = &values["stats"];
    assert_eq!(s["count"], serde_json::json!(5u64 * 400_000_000));
    assert_eq!(s["nonzero"], serde_json::json!(7));
    assert_eq!(
        s["sum"].as_f64().unwrap(),
        1.5 - 2.0 + 4.0 + 0.25 + 2.0 - 8.0
    );
    assert_eq!(s["min"].as_f64().unwrap(), -8.0);
    assert_eq!(s["max"].as_f64().unwrap(), 4.0);
    // The same numbers as a dense pass over a small sparse file.
    let small = dir.path().join("small.pvp");
    let dense = Tensor::from_vec(
        vec![0f32, 1.0, 0.0, -3.0, 0.0, 0.0, 2.5, 0.0],
        [2, 2, 2, 1],
        Order::RowMajor,
    )
    .unwrap();
    tensorfmt::save_to(
        &small,
        &"pvp:sparse".parse().unwrap(),
        &[("values".into(), dense.clone())],
        &Default::default(),
    )
    .unwrap();
    let doc = tensorfmt::Document::open(&small).unwrap();
    assert_eq!(doc.entry("values").unwrap().stats().unwrap(), dense.stats());
}

/// One array is enough (item 3): a lone array becomes the main tensor of any writable
/// kind, without renaming; with several tensors the error lists the accepted names.
#[test]
fn a_lone_array_converts_to_every_writable_kind() {
    let dir = tempfile::tempdir().unwrap();
    let movie = Tensor::from_vec(
        (0..3 * 4 * 5 * 2).map(|i| i as f32).collect::<Vec<_>>(),
        [3, 4, 5, 2],
        Order::RowMajor,
    )
    .unwrap();
    let npy = dir.path().join("movie.npy");
    tensorfmt::save(
        &npy,
        Format::Npy,
        &[("anything".into(), movie.clone())],
        &Default::default(),
    )
    .unwrap();
    for (to, main) in [
        ("pvp", "values"),
        ("pvp:sparse", "values"),
        ("som-data", "data"),
        ("primitiv:parameter", "value"),
        ("primitiv:tensor", "tensor"),
        ("caffemodel", "movie/0"),
        ("binaryproto", "mean"),
    ] {
        let out = dir.path().join(format!("out_{}", to.replace(':', "_")));
        let (code, _, err) = tf(args!["convert", &npy, &out, "--to", to]);
        assert_eq!(code, 0, "{to}: {err}");
        let doc = tensorfmt::Document::open(&out).unwrap();
        let name = doc
            .names()
            .into_iter()
            .find(|n| n == main || (main == "tensor" && doc.names().len() == 1))
            .unwrap_or_else(|| panic!("{to}: {:?}", doc.names()));
        let back = doc.entry(&name).unwrap().read().unwrap();
        assert_eq!(back.numel(), movie.numel(), "{to}");
        assert_eq!(back.stats().sum, movie.stats().sum, "{to}");
    }
    // An [ny, nx, nf] image is one frame of a dense PVP file.
    let img = Tensor::from_vec(vec![1f32; 4 * 5 * 2], [4, 5, 2], Order::RowMajor).unwrap();
    let p = dir.path().join("img.npy");
    tensorfmt::save(&p, Format::Npy, &[("img".into(), img)], &Default::default()).unwrap();
    let out = dir.path().join("img.pvp");
    let (code, _, err) = tf(args!["convert", &p, &out]);
    assert_eq!(code, 0, "{err}");
    let doc = tensorfmt::Document::open(&out).unwrap();
    assert_eq!(doc.entry("values").unwrap().shape().dims(), &[1, 4, 5, 2]);
    // Several competing tensors: the error names what PVP accepts.
    let two = npz_with(dir.path(), &[("a", images()), ("b", images())]);
    let (code, _, err) = tf(args!["convert", &two, dir.path().join("two.pvp")]);
    assert_eq!(code, 1);
    assert!(err.contains("values") && err.contains("weights"), "{err}");
}

/// `validate` answers "will the original program load this file?" (item 4).
#[test]
fn validate_asks_what_the_original_program_accepts() {
    let dir = tempfile::tempdir().unwrap();
    // A crash-truncated PVP file: whole frames plus half of one.
    let dense = std::fs::read(testdata("pvp", "dense_f32.pvp")).unwrap();
    let cut = dir.path().join("crashed.pvp");
    std::fs::write(&cut, &dense[..dense.len() - 20]).unwrap();
    let mixed = testdata("caffe", "mixed_layers.caffemodel");
    // PINK data and a SOM of f64 (which pyink and tensorfmt read): PINK 2.5 refuses
    // the data file and reads the SOM's payload as f32; `validate` said ok to both.
    let f64_data = dir.path().join("f64_data.bin");
    let f64_som = dir.path().join("f64_som.bin");
    for (path, name, kind, dims) in [
        (&f64_data, "data", "som-data", vec![2, 3, 3]),
        (&f64_som, "som", "som", vec![2, 2, 3, 3]),
    ] {
        let n = dims.iter().product();
        let t = Tensor::from_vec(vec![0.5f64; n], dims, Order::RowMajor).unwrap();
        let o = tensorfmt::WriteOptions {
            kind: Some(kind.into()),
            dtype: Some(tensorfmt::DType::F64),
            ..Default::default()
        };
        tensorfmt::save(path, Format::Som, &[(name.into(), t)], &o).unwrap();
    }
    for file in [&cut, &mixed, &f64_data, &f64_som] {
        let (code, out, _) = tf(args!["validate", file]);
        assert_eq!(code, 1, "{out}");
        assert!(
            out.contains("the original program refuses this file")
                && out.contains("tensorfmt convert"),
            "{out}"
        );
        let (code, out, _) = tf(args!["validate", "--lenient", file]);
        assert_eq!(code, 0, "{out}");
        let (code, out, _) = tf(args!["validate", "--json", file]);
        assert_eq!(code, 1);
        let v = json(&out);
        assert_eq!(v["files"][0]["ok"], false);
        assert_eq!(v["files"][0]["readable"], true);
        // inspect stays lenient, with the warning where the file is damaged (a
        // well-formed f64 PINK file is what the user wrote, warned of then).
        let (code, out, err) = tf(args!["inspect", file]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("warning")
                || err.contains("warning")
                || file.ends_with("f64_data.bin")
                || file.ends_with("f64_som.bin"),
            "{out}{err}"
        );
    }
    // convert recovers the data of the crashed file (the whole frames).
    let out = dir.path().join("recovered.npz");
    let (code, _, err) = tf(args!["convert", &cut, &out]);
    assert_eq!(code, 0, "{err}");
    // A file nobody reads is not readable; a good file is ok both ways.
    let junk = dir.path().join("junk.pvp");
    std::fs::write(&junk, &dense[..40]).unwrap();
    let (code, out, _) = tf(args!["validate", "--json", &junk]);
    assert_eq!(code, 1);
    assert_eq!(json(&out)["files"][0]["readable"], false);
    let (code, _, _) = tf(args!["validate", testdata("pvp", "dense_f32.pvp")]);
    assert_eq!(code, 0);
}

/// Converting to the same format with no flags keeps the file (issue 16, item 2): kind
/// and everything in it, byte for byte, even where no tensors are exported.
#[test]
fn same_format_conversion_keeps_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for (sub, file) in [
        ("primitiv", "optimizer_adam.data"),
        ("primitiv", "shape_4x3_batch2.data"),
        ("primitiv", "tensor_3x2_batch2.data"),
        ("primitiv", "parameter_2x3_stats.data"),
        ("caffe", "tiny.solverstate"),
        ("caffe", "v1_legacy.caffemodel"),
        ("som", "data_f32_2ch_comments.bin"),
        ("pvp", "sparse_values_dt4.pvp"),
    ] {
        let src = testdata(sub, file);
        let out = dir.path().join(file);
        let (code, _, err) = tf(args!["convert", &src, &out]);
        assert_eq!(code, 0, "{file}: {err}");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(&src).unwrap(),
            "{file}"
        );
        let (code, out_text, _) = tf(args!["diff", &src, &out]);
        assert_eq!(code, 0, "{file}: {out_text}");
    }
    // Asking for a change (here a dtype) converts for real.
    let src = testdata("som", "data_f32_2ch_comments.bin");
    let out = dir.path().join("f64.bin");
    let (code, _, err) = tf(args!["convert", &src, &out, "--dtype", "f64"]);
    assert_eq!(code, 0, "{err}");
    assert_ne!(std::fs::read(&out).unwrap(), std::fs::read(&src).unwrap());
}

#[test]
fn round_trips_through_modern_formats_give_back_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for (sub, file) in [
        ("primitiv", "model_nested_adam.data"),
        ("caffe", "v1_legacy.caffemodel"),
        ("caffe", "tiny.solverstate"),
        ("som", "data_f32_2ch_comments.bin"),
        ("pvp", "kernel_f32.pvp"),
        ("pvp", "sparse_values_dt4.pvp"),
    ] {
        let src = testdata(sub, file);
        for via in ["safetensors", "npz"] {
            let mid = dir.path().join(format!("mid.{via}"));
            let (code, _, err) = tf(args!["convert", &src, &mid, "--force"]);
            assert_eq!(code, 0, "{file}: {err}");
            let back = dir.path().join(file);
            let (code, _, err) = tf(args!["convert", &mid, &back, "--force"]);
            assert_eq!(code, 0, "{file}: {err}");
            assert!(err.is_empty(), "{file} via {via}: {err}");
            assert_eq!(
                std::fs::read(&back).unwrap(),
                std::fs::read(&src).unwrap(),
                "{file} via {via}"
            );
        }
    }
    // The metadata is visible (shortened in text, whole in JSON).
    let mid = dir.path().join("mid.safetensors");
    let (_, text, _) = tf(args!["inspect", &mid]);
    assert!(
        text.contains("tensorfmt.source: {\"tensorfmt\":2,\"format\":\"pvp\""),
        "{text}"
    );
    assert!(text.contains("--json shows all"), "{text}");
    let (_, text, _) = tf(args!["inspect", &mid, "--json"]);
    let meta = &json(&text)["header"]["__metadata__"]["tensorfmt.source"];
    assert!(meta.as_str().unwrap().contains("\"skeleton\""));
    // A partial conversion carries nothing and says why.
    let src = testdata("pvp", "dense_f32.pvp");
    let part = dir.path().join("part.safetensors");
    let (code, _, err) = tf(args!["convert", &src, &part, "--frames", "0:1"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("only part of the file was read"), "{err}");
}

#[test]
fn metadata_that_no_longer_fits_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let src = testdata("pvp", "dense_f32.pvp");
    let mid = dir.path().join("mid.safetensors");
    let (code, _, _) = tf(args!["convert", &src, &mid]);
    assert_eq!(code, 0);
    // Keep the metadata, drop a frame: the header no longer fits the values.
    let doc = tensorfmt::open(&mid, &Default::default()).unwrap();
    let meta = tensorfmt::provenance::carried(doc.file()).unwrap();
    let values = doc
        .read_tensor("values")
        .unwrap()
        .slice_outer(0, 1)
        .unwrap();
    let mut options = tensorfmt::WriteOptions::default();
    options
        .extra
        .insert(tensorfmt::provenance::KEY.into(), meta);
    let edited = dir.path().join("edited.safetensors");
    tensorfmt::save(
        &edited,
        Format::Safetensors,
        &[("values".into(), values)],
        &options,
    )
    .unwrap();
    let back = dir.path().join("back.pvp");
    let (code, _, err) = tf(args!["convert", &edited, &back]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("tensor \"values\" is f32 [1, 2, 3, 2], the original's was f32 [3, 2, 3, 2]")
            && err.contains("tensors alone"),
        "{err}"
    );
}

/// Sparse stays sparse (item 7): `diff` of two sparse PVP movies walks their entries. A
/// densified frame of this movie would be 1.6 GB, above the default allocation limit.
#[test]
fn diff_of_huge_sparse_movies_is_computed_from_the_entries() {
    use std::time::Instant;
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.pvp");
    let same = dir.path().join("same.pvp");
    let b = dir.path().join("b.pvp");
    huge_sparse(&a, &HUGE_FRAMES);
    huge_sparse(&same, &HUGE_FRAMES);
    let mut changed = HUGE_FRAMES;
    changed[1] = (&[5], &[1.0]); // an entry only B has
    changed[2] = (&[12], &[0.5]); // a value that differs
    changed[4] = (&[], &[]); // an entry only A has
    huge_sparse(&b, &changed);
    let start = Instant::now();
    let (code, out, err) = tf(args!["diff", &a, &same]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    let (code, out, err) = tf(args!["diff", &a, &b, "--json"]);
    let elapsed = start.elapsed();
    assert_eq!(code, 1, "{out}{err}");
    assert!(elapsed.as_secs_f64() < 2.0, "diff took {elapsed:?}");
    let v = json(&out);
    let t = v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "values")
        .unwrap();
    assert_eq!(t["count"], serde_json::json!(5u64 * 400_000_000), "{t}");
    assert_eq!(t["mismatched"], serde_json::json!(3), "{t}");
    assert_eq!(t["max_abs_error"].as_f64().unwrap(), 8.0, "{t}");
    let first: Vec<u64> = t["diffs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["index"].as_u64().unwrap())
        .collect();
    assert_eq!(first, [400_000_005, 800_000_012, 1_700_000_000]);
}

/// The entry-wise comparison gives the numbers of the dense one (a sparse file against
/// its dense copy takes the streamed path).
#[test]
fn sparse_diff_agrees_with_the_dense_diff() {
    let dir = tempfile::tempdir().unwrap();
    let write = |p: &Path, frames: &[(&[u32], &[f32])]| {
        let f = std::fs::File::create(p).unwrap();
        let mut w = tensorfmt::pvp::write::SparseWriter::values(f, 3, 2, 2).unwrap();
        for (k, (idx, vals)) in frames.iter().enumerate() {
            w.write_frame(k as f64, idx, vals).unwrap();
        }
        w.finish().unwrap();
    };
    let a = dir.path().join("a.pvp");
    let b = dir.path().join("b.pvp");
    let fa: [(&[u32], &[f32]); 2] = [(&[0, 5, 11], &[1.0, f32::NAN, 3.0]), (&[2], &[-1.0])];
    let fb: [(&[u32], &[f32]); 2] = [(&[5, 7], &[f32::NAN, 0.5]), (&[2, 3], &[-1.25, 2.0])];
    write(&a, &fa);
    write(&b, &fb);
    let dense_b = dir.path().join("b.npz");
    // A dense copy: asked for (sparse stays sparse by default, issue 23 item 5).
    assert_eq!(tf(args!["convert", &b, &dense_b, "--dense"]).0, 0);
    let report = |other: &Path| {
        let (code, out, err) = tf(args!["diff", &a, other, "--json", "--tensors-only"]);
        assert_eq!(code, 1, "{out}{err}");
        let v = json(&out);
        let t = v["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "values")
            .unwrap()
            .clone();
        (
            t["count"].clone(),
            t["mismatched"].clone(),
            t["max_abs_error"].clone(),
            t["max_rel_error"].clone(),
            t["diffs"].clone(),
        )
    };
    let sparse = report(&b);
    assert_eq!(sparse, report(&dense_b));
    assert_eq!(sparse.1, serde_json::json!(5)); // NaN against NaN is equal
}

/// Tensors alone converted to a caffemodel or a solver state: the file is what Caffe
/// reads, and the warning says what it lacks (layer types, net name, iter) and how to
/// keep them; a mean file is whole and gets no such warning.
#[test]
fn a_caffe_file_from_tensors_alone_says_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let w = Tensor::from_vec(vec![1f32; 6], [2, 3], Order::RowMajor).unwrap();
    for (names, out, lacks) in [
        (
            ["ip/0", "ip/1"],
            "m.caffemodel",
            "no layer types (--set type.LAYER=TYPE), net name (--set name=NAME) and topology",
        ),
        (
            ["history/0", "history/1"],
            "s.solverstate",
            "iter 0 (--set iter=N)",
        ),
    ] {
        let sub = dir.path().join(out.replace('.', "_"));
        std::fs::create_dir(&sub).unwrap();
        let input = npz_with(&sub, &[(names[0], w.clone()), (names[1], w.clone())]);
        let out = sub.join(out);
        let (code, _, err) = tf(["convert".as_ref(), input.as_os_str(), out.as_os_str()]);
        assert_eq!(code, 0, "{err}");
        assert!(
            err.contains(lacks) && err.contains("--like ORIGINAL"),
            "{err}"
        );
    }
    // What the settings give is no longer said to be missing.
    let input = dir.path().join("m_caffemodel").join("in.npz");
    let out = dir.path().join("named.caffemodel");
    let (code, _, err) = tf([
        "convert".as_ref(),
        input.as_os_str(),
        out.as_os_str(),
        "--set".as_ref(),
        "name=net".as_ref(),
        "--set".as_ref(),
        "type.ip=InnerProduct".as_ref(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("layer names and blobs, no topology;"), "{err}");
    let input = dir.path().join("s_solverstate").join("in.npz");
    let out = dir.path().join("whole.solverstate");
    let (code, _, err) = convert(
        &input,
        &out,
        &[
            "--set",
            "iter=7",
            "--set",
            "learned_net=net.caffemodel",
            "--set",
            "current_step=2",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let mean = npz_with(dir.path(), &[("mean", images())]);
    let out = dir.path().join("mean.binaryproto");
    let (code, _, err) = tf(["convert".as_ref(), mean.as_os_str(), out.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
}

/// A `--set` value the writer would not understand, or a setting of another kind, was
/// written over with exit 0 (`nx=7` for a dense PVP file, `sparse=maybe`, `som_rank=7`,
/// `iter=5` for a caffemodel, `type.nosuch`, `batch_axis` without stats): now refused,
/// as a usage error (exit 2) when the command line alone says so, exit 1 when the
/// tensors decide the kind; nothing written either way.
#[test]
fn every_setting_value_is_used_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let values = Tensor::from_vec(vec![1f32; 24], [1, 2, 3, 4], Order::RowMajor).unwrap();
    let pvp_in = npz_with(dir.path(), &[("values", values.clone())]);
    let sub = dir.path().join("b");
    std::fs::create_dir(&sub).unwrap();
    let three = Tensor::from_vec(vec![1f32; 24], [2, 3, 4], Order::RowMajor).unwrap();
    let som_in = npz_with(&sub, &[("data", three)]);
    let sub = dir.path().join("c");
    std::fs::create_dir(&sub).unwrap();
    let w = Tensor::from_vec(vec![1f32; 6], [2, 3], Order::RowMajor).unwrap();
    let caffe_in = npz_with(&sub, &[("ip/0", w.clone()), ("ip/1", w)]);
    let cases: &[(&Path, &str, &[&str], i32, &str)] = &[
        (&pvp_in, "a.pvp", &["--set", "nx=7"], 1, "pvp dense file"),
        (
            &pvp_in,
            "b.pvp",
            &["--to", "pvp:dense", "--set", "nx=7"],
            2,
            "pvp dense file",
        ),
        (
            &pvp_in,
            "c.pvp",
            &["--to", "pvp:sparse", "--set", "nx=abc"],
            2,
            "positive whole",
        ),
        (
            &pvp_in,
            "d.pvp",
            &["--to", "pvp:sparse", "--set", "datatype=9"],
            2,
            "one of 3, 4",
        ),
        (
            &pvp_in,
            "e.pvp",
            &["--to", "pvp:sparse", "--set", "sparse=maybe"],
            2,
            "binary, values",
        ),
        (
            &pvp_in,
            "f.pvp",
            &[
                "--to",
                "pvp:sparse",
                "--set",
                "sparse=binary",
                "--set",
                "datatype=4",
            ],
            1,
            "binary (no values)",
        ),
        (
            &pvp_in,
            "g.pvp",
            &["--to", "pvp:sparse", "--set", "nx=4", "--set", "ny=4"],
            1,
            "values' shape [1, 2, 3, 4]",
        ),
        (
            &som_in,
            "a.bin",
            &["--to", "som", "--set", "som_rank=7"],
            2,
            "one of 1, 2, 3",
        ),
        (
            &som_in,
            "b.bin",
            &["--to", "som-data", "--set", "som_dims=3,3"],
            2,
            "som-rotflip",
        ),
        (
            &som_in,
            "c.bin",
            &["--to", "som-data", "--set", "pink_cli_compat=maybe"],
            2,
            "true or false",
        ),
        (
            &som_in,
            "a.data",
            &["--to", "primitiv", "--set", "batch_axis=true"],
            1,
            "no stats",
        ),
        (
            &caffe_in,
            "a.caffemodel",
            &["--set", "type.nosuch=Convolution"],
            1,
            "no layer \"nosuch\"",
        ),
        (
            &caffe_in,
            "b.caffemodel",
            &["--set", "iter=5"],
            2,
            "solverstate",
        ),
        (
            &caffe_in,
            "c.solverstate",
            &["--to", "solverstate", "--set", "iter=-1"],
            2,
            "0 to 2147483647",
        ),
        (
            &caffe_in,
            "a.onnx",
            &["--set", "external_data=maybe"],
            2,
            "true or false",
        ),
        // --hex means something to PINK SOM, mapping and rotation/flip files only.
        (&pvp_in, "h.npz", &["--hex"], 2, "hexagonal layout"),
        (
            &som_in,
            "h.bin",
            &["--to", "som-data", "--hex"],
            2,
            "som som-data file",
        ),
        (&som_in, "h2.bin", &["--hex"], 1, "data file"),
    ];
    for (input, out, flags, code, says) in cases {
        let out = dir.path().join(out);
        let (got, _, err) = convert(input, &out, flags);
        assert_eq!((got, err.contains(says)), (*code, true), "{flags:?}: {err}");
        assert!(!out.exists(), "{flags:?}");
    }
    // The values the settings take are used: a sparse file of 3x2x4 neurons (the
    // values' shape, which --set may repeat).
    let out = dir.path().join("ok.pvp");
    let (code, _, err) = tf([
        "convert".as_ref(),
        pvp_in.as_os_str(),
        out.as_os_str(),
        "--to".as_ref(),
        "pvp:sparse".as_ref(),
        "--set".as_ref(),
        "nx=3".as_ref(),
        "--set".as_ref(),
        "ny=2".as_ref(),
    ]);
    assert_eq!(code, 0, "{err}");
    let doc = tensorfmt::open(&out, &Default::default()).unwrap();
    let header = format!("{:?}", doc.header());
    assert!(
        header.contains("\"nx\", Int(3)")
            && header.contains("\"ny\", Int(2)")
            && header.contains("\"nf\", Int(4)"),
        "{header}"
    );
}

/// Sparse stays sparse: some frames of a sparse PVP file converted to PVP were written
/// as a dense file (and with `--sparse` as a sparse one of the wrong geometry,
/// `nx = ny*nx*nf`); now a sparse file of the same geometry, kind and datatype, from
/// the entries; `--dense` or `--to pvp:dense` still asks for a dense one.
#[test]
fn some_frames_of_a_sparse_pvp_file_stay_sparse() {
    let dir = tempfile::tempdir().unwrap();
    let header = |p: &Path| {
        let doc = tensorfmt::open(p, &Default::default()).unwrap();
        let h = doc.header();
        let get = |k: &str| {
            h.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| format!("{v:?}"))
                .unwrap_or_default()
        };
        ["filetype", "nx", "ny", "nf", "datatype"].map(get)
    };
    for src in [
        "sparse_values_dt3.pvp",
        "sparse_values_dt4.pvp",
        "sparse_binary.pvp",
    ] {
        let input = testdata("pvp", src);
        for flags in [&[][..], &["--sparse"][..]] {
            let out = dir.path().join(format!("{src}{}.pvp", flags.len()));
            let (code, _, err) = convert(&input, &out, &[&["--frames", "0:1"][..], flags].concat());
            assert_eq!(code, 0, "{err}");
            assert_eq!(header(&out), header(&input), "{src} {flags:?}");
            let first = tensorfmt::ReadOptions {
                frames: Some((0, Some(1))),
                ..Default::default()
            };
            let want = tensorfmt::open(&input, &first)
                .unwrap()
                .read_tensor("values")
                .unwrap();
            let got = tensorfmt::open(&out, &Default::default())
                .unwrap()
                .read_tensor("values")
                .unwrap();
            assert_eq!(
                got.to_vec::<f32>().unwrap(),
                want.to_vec::<f32>().unwrap(),
                "{src}"
            );
            assert_eq!(got.dims(), want.dims());
        }
        for flags in [&["--dense"][..], &["--to", "pvp:dense"][..]] {
            let out = dir.path().join(format!("{src}dense{}.pvp", flags.len()));
            let (code, _, err) = convert(&input, &out, &[&["--frames", "0:1"][..], flags].concat());
            assert_eq!(code, 0, "{err}");
            assert_eq!(header(&out)[0], "Int(4)", "{src} {flags:?}");
        }
    }
}

/// A file converted to its own format and kind keeps the layout its tensors do not
/// tell: a 2x2x2 SOM of 2x2 neurons (`[2, 2, 2, 2, 2]`) with `--dtype f64` failed
/// ("cannot split SOM shape ... set som_rank"; PINK's legacy 3-D maps too), and some
/// entries of a 2x2 rotation/flip file became a 4-neuron line; a frame of a non-shared
/// PVP weight file became a shared one (and byte weights float ones); some blobs of a caffemodel lost the net name
/// and layer types, some history of a solver state its iter.
#[test]
fn a_conversion_to_its_own_format_keeps_the_layout() {
    let dir = tempfile::tempdir().unwrap();
    let kind_of = |p: &Path| {
        tensorfmt::open(p, &Default::default())
            .unwrap()
            .file()
            .kind()
    };
    for (src, flags) in [
        ("som_cart_2x2x2.bin", &["--dtype", "f64"][..]),
        ("rotflip_cart_2x2.bin", &["--frames", "0:1"][..]),
    ] {
        let input = testdata("som", src);
        let out = dir.path().join(src);
        let (code, _, err) = convert(&input, &out, flags);
        assert_eq!(code, 0, "{src}: {err}");
        assert_eq!(kind_of(&out), kind_of(&input), "{src}");
    }
    // The first frame of a non-shared weight file was written as a shared (kernel)
    // file of nx=1, ny=1, nf=16: now the same geometry and values.
    let first = tensorfmt::ReadOptions {
        frames: Some((0, Some(1))),
        ..Default::default()
    };
    for src in [
        "nonshared_f32.pvp",
        "kernel_f32.pvp",
        "kernel_byte.pvp",
        "nonshared_byte.pvp",
    ] {
        let input = testdata("pvp", src);
        let out = dir.path().join(src);
        let (code, _, err) = tf(args!["convert", &input, &out, "--frames", "0:1"]);
        assert_eq!(code, 0, "{src}: {err}");
        assert_eq!(kind_of(&out), kind_of(&input), "{src}");
        let fields = |p: &Path| {
            let h = tensorfmt::open(p, &Default::default()).unwrap().header();
            [
                "filetype",
                "datatype",
                "nx",
                "ny",
                "nf",
                "nxExtended",
                "nyExtended",
                "nxp",
                "numpatches",
            ]
            .map(|k| format!("{:?}", h.iter().find(|(n, _)| n == k).map(|(_, v)| v)))
        };
        assert_eq!(fields(&out), fields(&input), "{src}");
        let want = tensorfmt::open(&input, &first)
            .unwrap()
            .read_tensor("weights")
            .unwrap();
        let got = tensorfmt::open(&out, &Default::default())
            .unwrap()
            .read_tensor("weights")
            .unwrap();
        assert_eq!(
            got.to_vec::<f32>().unwrap(),
            want.to_vec::<f32>().unwrap(),
            "{src}"
        );
    }
    // A non-shared geometry that does not hold the patches is refused.
    let input = testdata("pvp", "kernel_f32.pvp");
    let out = dir.path().join("bad.pvp");
    let (code, _, err) = tf(args![
        "convert",
        &input,
        &out,
        "--to",
        "pvp:weights",
        "--set",
        "shared=false",
        "--set",
        "nx=3",
        "--set",
        "ny=3",
        "--set",
        "nf=1"
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("does not hold") && !out.exists(), "{err}");
    // Some blobs of a caffemodel kept the layer names only (no net name, no types);
    // some history of a solver state reset iter to 0.
    let text = |p: &Path| {
        tensorfmt::open(p, &Default::default())
            .unwrap()
            .header()
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for (src, tensor, keeps) in [
        (
            "v2_tiny.caffemodel",
            "ip/0",
            &["name: tiny", "type: InnerProduct"][..],
        ),
        (
            "tiny.solverstate",
            "history/0",
            &[
                "iter: 100",
                "learned_net: tiny_iter_100.caffemodel",
                "current_step: 1",
            ][..],
        ),
    ] {
        let input = testdata("caffe", src);
        let out = dir.path().join(src);
        let (code, _, err) = tf(args!["convert", &input, &out, "--tensor", tensor]);
        assert_eq!(code, 0, "{src}: {err}");
        let h = text(&out);
        for k in keeps {
            assert!(h.contains(k), "{src}: {k} not in {h}");
        }
        assert!(
            !err.contains("no layer types") && !err.contains("no learned_net"),
            "{err}"
        );
    }
    // What the user sets wins over the source's layout.
    let (code, _, err) = tf(args![
        "convert",
        testdata("caffe", "v2_tiny.caffemodel"),
        dir.path().join("renamed.caffemodel"),
        "--tensor",
        "ip/0",
        "--set",
        "name=other",
        "--set",
        "type.ip=Scale"
    ]);
    assert_eq!(code, 0, "{err}");
    let h = text(&dir.path().join("renamed.caffemodel"));
    assert!(
        h.contains("name: other") && h.contains("type: Scale"),
        "{h}"
    );
    let input = testdata("som", "som_cart_2x2x2.bin");
    // (som_rank=1 would leave rank-4 neurons, which PINK does not read: refused.)
    let out = dir.path().join("rank2.bin");
    let (code, _, err) = tf(args![
        "convert",
        &input,
        &out,
        "--dtype",
        "f64",
        "--set",
        "som_rank=2"
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        kind_of(&out).contains("cartesian 2x2)"),
        "{}",
        kind_of(&out)
    );
    // The source's layout is a default, never refused: --hex on a cartesian
    // rotation/flip file of 7 neurons makes a hexagonal one (the source's som_dims
    // were taken as the user's and refused with --hex).
    let flip = Tensor::from_vec(vec![0u8; 2 * 7], [2, 7], Order::RowMajor).unwrap();
    let angle = Tensor::from_vec(vec![0f32; 2 * 7], [2, 7], Order::RowMajor).unwrap();
    let cart = dir.path().join("line7.bin");
    let o = tensorfmt::WriteOptions {
        kind: Some("som-rotflip".into()),
        ..Default::default()
    };
    tensorfmt::save(
        &cart,
        Format::Som,
        &[("flip".into(), flip), ("angle".into(), angle)],
        &o,
    )
    .unwrap();
    let out = dir.path().join("hex7.bin");
    let (code, _, err) = convert(&cart, &out, &["--hex"]);
    assert_eq!(code, 0, "{err}");
    assert!(kind_of(&out).contains("hexagonal"), "{}", kind_of(&out));
}

/// `--dtype` was ignored by three writers (exit 0, another type written): ONNX wrote
/// float32 for `--dtype f16`, Caffe float32 `data` for `--dtype f64`, PVP activity
/// float32 for `--dtype f64`. Now ONNX and Caffe store the type asked (Caffe's
/// `double_data`), and what a format cannot store is refused, nothing written.
#[test]
fn dtype_is_used_or_refused_by_every_writer() {
    let dir = tempfile::tempdir().unwrap();
    let w = Tensor::from_vec(vec![0.5f32; 6], [2, 3], Order::RowMajor).unwrap();
    let input = npz_with(dir.path(), &[("ip/0", w)]);
    let dtype_of = |p: &Path| {
        let doc = tensorfmt::open(p, &Default::default()).unwrap();
        doc.file().tensors()[0].dtype
    };
    for (out, dtype, want) in [
        ("a.onnx", "f16", tensorfmt::DType::F16),
        ("a.caffemodel", "f64", tensorfmt::DType::F64),
    ] {
        let out = dir.path().join(out);
        let (code, _, err) = tf(args!["convert", &input, &out, "--dtype", dtype]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(dtype_of(&out), want, "{}", out.display());
    }
    let values = Tensor::from_vec(vec![1f32; 24], [1, 2, 3, 4], Order::RowMajor).unwrap();
    let sub = dir.path().join("v");
    std::fs::create_dir(&sub).unwrap();
    let activity = npz_with(&sub, &[("values", values)]);
    for (input, out, dtype, says) in [
        (&activity, "b.pvp", "f64", "stored as f32"),
        (&input, "b.caffemodel", "f16", "double_data"),
    ] {
        let out = dir.path().join(out);
        let (code, _, err) = tf(args!["convert", input, &out, "--dtype", dtype]);
        assert_eq!((code, err.contains(says)), (1, true), "{err}");
        assert!(!out.exists());
    }
}

/// The layout a weight file hands a same-format write is computed from header fields
/// a hostile file sets: nx = ny = nf = 2^31 - 1 (which the reader accepts, the patch
/// count being its own field) overflowed the unit-cell product (a panic in a debug
/// build); now such a header is no unit cell and the conversion goes on.
#[test]
fn a_hostile_weight_header_does_not_overflow_the_layout() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(testdata("pvp", "kernel_f32.pvp")).unwrap();
    for off in [12, 16, 20] {
        bytes[off..off + 4].copy_from_slice(&i32::MAX.to_le_bytes());
    }
    let input = dir.path().join("huge.pvp");
    std::fs::write(&input, bytes).unwrap();
    let out = dir.path().join("out.pvp");
    let (code, _, err) = convert(&input, &out, &["--frames", "0:1"]);
    assert!(code == 0 || code == 1, "{code}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_primitiv_refusal_names_the_tensor_and_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.data");
    // A Caffe blob name reads as a parameter's stat in primitiv's export names.
    let net = testdata("caffe", "v2_tiny.caffemodel");
    let (code, _, err) = convert(&net, &out, &["--to", "primitiv"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("tensor \"conv1/0\" names stat \"0\" of parameter \"conv1\"")
            && err.contains("write `\\/` for a slash"),
        "{err}"
    );
    // A float64 tensor among float32 ones: which one, and how to narrow it.
    let time = Tensor::from_vec(vec![1f64], [1], Order::RowMajor).unwrap();
    let input = npz_with(dir.path(), &[("w", images()), ("time", time)]);
    let (code, _, err) = convert(&input, &out, &["--to", "primitiv"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("tensor \"time\": primitiv stores f32 only; got f64"),
        "{err}"
    );
    assert!(!out.exists());
    let (code, _, err) = convert(&input, &out, &["--to", "primitiv", "--dtype", "f32"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn an_older_kernel_header_convention_is_kept() {
    // OpenPV's writers before 2017 gave a kernel file's pre layer (here 64x32x24) as
    // nx, ny, nf and a recordsize of one arbor's patches; selecting frames of such a
    // file rewrote them as the unit cell (1x1x24, recordsize 0).
    let dir = tempfile::tempdir().unwrap();
    let w = Tensor::from_vec(
        (0..2 * 24 * 9).map(|v| v as f32).collect::<Vec<_>>(),
        [2, 1, 24, 3, 3, 1],
        Order::RowMajor,
    )
    .unwrap();
    let input = npz_with(dir.path(), &[("weights", w)]);
    let older = dir.path().join("older.pvp");
    let (code, _, err) = convert(&input, &older, &["--set", "header_dims=64,32,24"]);
    assert_eq!(code, 0, "{err}");
    let field = |p: &Path, k: &str| {
        let h = tensorfmt::open(p, &Default::default()).unwrap().header();
        format!("{:?}", h.iter().find(|(n, _)| n == k).map(|(_, v)| v))
    };
    let keys = ["nx", "ny", "nf", "recordsize", "nxExtended", "numpatches"];
    let expect = ["64", "32", "24", "1056", "64", "24"];
    for (k, v) in keys.iter().zip(expect) {
        assert!(field(&older, k).contains(v), "{k}: {}", field(&older, k));
    }
    let first = dir.path().join("first.pvp");
    let (code, _, err) = convert(&older, &first, &["--frames", "0:1"]);
    assert_eq!(code, 0, "{err}");
    for k in keys {
        assert_eq!(field(&first, k), field(&older, k), "{k}");
    }
    let (code, _, err) = tf(args!["diff", &older, &first]);
    assert_eq!(code, 1, "{err}"); // one frame of two: the values differ, not the header
                                  // A non-shared file's nx, ny, nf are its pre layer already.
    let (code, _, err) = convert(
        &input,
        &dir.path().join("bad.pvp"),
        &["--set", "header_dims=64,32,24", "--set", "shared=false"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("header_dims is a kernel file's"), "{err}");
}

#[test]
fn a_lone_array_makes_one_main_tensor_and_not_two() {
    let dir = tempfile::tempdir().unwrap();
    let w = Tensor::from_vec(
        (0..24).map(|v| v as f32).collect::<Vec<_>>(),
        [1, 1, 2, 3, 4, 1],
        Order::RowMajor,
    )
    .unwrap();
    let npy = dir.path().join("w.npy");
    tensorfmt::save(
        &npy,
        Format::Npy,
        &[("anything".into(), w.clone())],
        &Default::default(),
    )
    .unwrap();
    for (to, main) in [
        ("pvp:weights", "weights"),
        ("solverstate", "history/0"),
        ("blobprotovector", "blobs/0"),
    ] {
        let out = dir.path().join(format!("out_{}", to.replace(':', "_")));
        let (code, _, err) = tf(args!["convert", &npy, &out, "--to", to]);
        assert_eq!(code, 0, "{to}: {err}");
        let doc = tensorfmt::Document::open(&out).unwrap();
        let back = doc.entry(main).unwrap().read().unwrap();
        assert_eq!(back.stats().sum, w.stats().sum, "{to}");
    }
    // A rotation/flip file has two main tensors: one array was written as the angles
    // and, cast to bytes, as made-up flips.
    let out = dir.path().join("rf.bin");
    let (code, _, err) = tf(args!["convert", &npy, &out, "--to", "som-rotflip"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("needs tensors named \"flip\" and \"angle\""),
        "{err}"
    );
    let flips = Tensor::from_vec(vec![0f32, 0.9, 1.0, 0.0], [2, 2], Order::RowMajor).unwrap();
    let angles = Tensor::from_vec(vec![0f32; 4], [2, 2], Order::RowMajor).unwrap();
    let both = npz_with(dir.path(), &[("flip", flips), ("angle", angles)]);
    let (code, _, err) = tf(args!["convert", &both, &out, "--to", "som-rotflip"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("flip values must be 0 or 1"), "{err}");
    assert!(!out.exists());
}

#[test]
fn values_a_writer_stores_as_float32_warn_when_they_change() {
    // PVP and PINK store float32: 1e300 became inf, 1e-50 became 0 and 2^40 + 1 was
    // rounded without a word (the Caffe writer already said so).
    let dir = tempfile::tempdir().unwrap();
    let wild =
        Tensor::from_vec(vec![1e300f64, 1e-50, 0.5, 2.0], [1, 2, 2], Order::RowMajor).unwrap();
    let big =
        Tensor::from_vec(vec![(1i64 << 40) + 1, 3, 5, 7], [1, 2, 2], Order::RowMajor).unwrap();
    let tame = Tensor::from_vec(vec![0.5f64, 1.0, -2.0, 0.0], [1, 2, 2], Order::RowMajor).unwrap();
    for to in ["pvp", "som-data", "som-mapping", "caffemodel"] {
        for (name, t, want) in [
            (
                "wild",
                &wild,
                Some("2 value(s) of f64 stored as f32: beyond its range"),
            ),
            (
                "big",
                &big,
                Some("1 value(s) of i64 stored as f32: integers beyond"),
            ),
            ("tame", &tame, None),
        ] {
            let sub = dir.path().join(format!("{to}_{name}"));
            std::fs::create_dir(&sub).unwrap();
            let input = npz_with(&sub, &[(name, t.clone())]);
            let out = sub.join("out.x");
            let (code, _, err) = convert(&input, &out, &["--to", to]);
            assert_eq!(code, 0, "{to} {name}: {err}");
            match want {
                Some(w) => assert!(err.contains(w), "{to} {name}: {err}"),
                None => assert!(!err.contains("stored as f32:"), "{to} {name}: {err}"),
            }
        }
    }
    // --dtype narrowing a float: 1e40 as float32 is infinite.
    let huge = Tensor::from_vec(vec![1e40f64, 1.0], [2], Order::RowMajor).unwrap();
    let input = npz_with(dir.path(), &[("huge", huge)]);
    let (code, _, err) = convert(&input, &dir.path().join("h.npy"), &["--dtype", "f32"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("huge: 1 value(s) of f64 stored as f32"),
        "{err}"
    );
}

#[test]
fn tensors_a_pvp_file_has_no_place_for_are_named() {
    // values + labels in, values + time out: the count hid that labels was dropped.
    let dir = tempfile::tempdir().unwrap();
    let values = Tensor::from_vec(vec![1f32; 2 * 3 * 4], [2, 3, 4, 1], Order::RowMajor).unwrap();
    let labels = Tensor::from_vec(vec![0f64, 1.0], [2], Order::RowMajor).unwrap();
    let input = npz_with(dir.path(), &[("values", values), ("labels", labels)]);
    let (code, _, err) = convert(&input, &dir.path().join("out.pvp"), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("not written (a pvp file has no place for them): labels"),
        "{err}"
    );
}

#[test]
fn a_caffe_blob_of_no_values_round_trips() {
    // A BlobProto with shape [0, 3] and no data (count 0, which Caffe allows): every
    // write of it was removed as "written but cannot be read back".
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("zero.binaryproto");
    std::fs::write(&src, [0x3a, 4, 0x0a, 2, 0, 3]).unwrap();
    let mid = dir.path().join("zero.npz");
    let back = dir.path().join("back.binaryproto");
    let copy = dir.path().join("copy.binaryproto");
    for (input, out) in [(&src, &mid), (&mid, &back), (&src, &copy)] {
        let (code, _, err) = convert(input, out, &[]);
        assert_eq!(code, 0, "{}: {err}", out.display());
    }
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&src).unwrap());
    assert_eq!(tf(args!["diff", &src, &copy]).0, 0);
    // Content sniffing (no extension to go by) still asks a blob for values.
    assert!(!tensorfmt::caffe::sniff(&[0x3a, 4, 0x0a, 2, 0, 3], 6));
}

#[test]
fn a_pink_file_keeps_its_data_type_through_its_own_format() {
    // Entries of an f64 PINK data file were written as PINK's default f32 (1/3 became
    // 0.3333333432674408) without a word.
    let dir = tempfile::tempdir().unwrap();
    let data = Tensor::from_vec(vec![1.0f64 / 3.0; 3 * 2 * 2], [3, 2, 2], Order::RowMajor).unwrap();
    let src = dir.path().join("d64.bin");
    let o = tensorfmt::WriteOptions {
        dtype: Some(tensorfmt::DType::F64),
        kind: Some("data".into()),
        ..Default::default()
    };
    tensorfmt::save(&src, Format::Som, &[("data".into(), data)], &o).unwrap();
    let out = dir.path().join("two.bin");
    let (code, _, err) = convert(&src, &out, &["--frames", "0:2"]);
    assert_eq!(code, 0, "{err}");
    let back = tensorfmt::open(&out, &Default::default())
        .unwrap()
        .read_tensor("data")
        .unwrap();
    assert_eq!(back.dtype(), tensorfmt::DType::F64);
    assert_eq!(back.to_vec::<f64>().unwrap()[0], 1.0 / 3.0);
}

#[test]
fn sparse_binary_is_refused_for_values_it_would_change() {
    let dir = tempfile::tempdir().unwrap();
    let half = Tensor::from_vec(vec![0.5f32, 1.0], [1, 1, 2, 1], Order::RowMajor).unwrap();
    let input = npz_with(dir.path(), &[("values", half)]);
    let out = dir.path().join("b.pvp");
    let (code, _, err) = convert(
        &input,
        &out,
        &["--to", "pvp:sparse", "--set", "sparse=binary"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("neither 0 nor 1"), "{err}");
    assert!(!out.exists());
}

#[test]
fn validate_promises_a_recovery_only_where_there_is_data() {
    let Some(dir) = tensorfmt::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "primitiv") else {
        return;
    };
    // A lenient optimizer state: no tensors, so `convert` has nothing to recover.
    let f = dir.join("edge/bad_float_as_f64.data");
    let (code, out, err) = tf(args!["validate", &f]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("holds no tensors, so there is no data"),
        "{out}"
    );
}

#[cfg(unix)]
#[test]
fn a_special_file_as_output_is_refused_even_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("out.npz");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let input = npz_with(dir.path(), &[("x", images())]);
    let (code, _, err) = convert(&input, &fifo, &["--force"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a regular file"), "{err}");
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}
