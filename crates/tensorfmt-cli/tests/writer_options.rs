//! Conversions with options into the legacy writers (the audit of conversions with
//! options, F1-F11): what a writer cannot store as asked is refused before anything is
//! written, what it stores is what was asked, and every warning is true.

mod common;

use common::{testdata, tf};
use std::path::Path;

use tensorfmt::{Format, Order, Tensor};

/// `tensorfmt convert INPUT OUT FLAGS...`.
fn convert(input: &Path, out: &Path, flags: &[&str]) -> (i32, String, String) {
    let mut args: Vec<&std::ffi::OsStr> =
        vec!["convert".as_ref(), input.as_os_str(), out.as_os_str()];
    args.extend(flags.iter().map(std::ffi::OsStr::new));
    tf(args)
}

fn open(p: &Path) -> tensorfmt::Document {
    tensorfmt::Document::open(p).unwrap()
}

fn dims_of(p: &Path, name: &str) -> Vec<usize> {
    open(p).entry(name).unwrap().shape().dims().to_vec()
}

/// F1: a mean file asked for f64 stores `double_data` (it stored float32 `data`:
/// -1e300 became -inf, 1 + 2^-40 became 1, with no warning), from a mean file, an npz
/// and an f64 .npy alike.
#[test]
fn a_mean_file_asked_for_f64_keeps_float64() {
    let dir = tempfile::tempdir().unwrap();
    let src = testdata("caffe", "double_wins.binaryproto");
    let want = open(&src).entry("mean").unwrap().read().unwrap();
    assert_eq!(want.dtype(), tensorfmt::DType::F64);
    let npz = dir.path().join("m.npz");
    let npy = dir.path().join("m.npy");
    tensorfmt::save(
        &npz,
        Format::Npz,
        &[("mean".into(), want.clone())],
        &Default::default(),
    )
    .unwrap();
    tensorfmt::save(
        &npy,
        Format::Npy,
        &[("mean".into(), want.clone())],
        &Default::default(),
    )
    .unwrap();
    for (i, input) in [&src, &npz, &npy].into_iter().enumerate() {
        let out = dir.path().join(format!("f1_{i}.binaryproto"));
        let (code, _, err) = convert(input, &out, &["--dtype", "f64"]);
        assert_eq!(code, 0, "{err}");
        let got = open(&out).entry("mean").unwrap().read().unwrap();
        assert_eq!(got.dtype(), tensorfmt::DType::F64, "{}", input.display());
        assert_eq!(
            got.to_vec::<f64>().unwrap(),
            want.to_vec::<f64>().unwrap(),
            "{}",
            input.display()
        );
    }
}

/// F3: `--set ny=`/`nf=` on a sparse PVP input to sparse PVP re-shaped the layer
/// ([3, 8, 8, 3] became [3, 2, 96, 1]); now refused as for a dense input, directly
/// and through a sparse npz; repeating the geometry is fine.
#[test]
fn sparse_geometry_settings_must_repeat_the_layer() {
    let dir = tempfile::tempdir().unwrap();
    let src = testdata("pvp", "sparse_values_dt4.pvp");
    let geometry = dims_of(&src, "values");
    let npz = dir.path().join("s.npz");
    assert_eq!(convert(&src, &npz, &[]).0, 0);
    for (input, set) in [(&src, "ny=1"), (&npz, "nf=3")] {
        let out = dir.path().join("f3.pvp");
        let (code, _, err) = convert(input, &out, &["--to", "pvp:sparse", "--set", set]);
        assert_eq!(code, 1, "{set}: {err}");
        assert!(err.contains(&format!("--set {set}")), "{err}");
        assert!(!out.exists());
    }
    let same = format!("ny={}", geometry[1]);
    let out = dir.path().join("same.pvp");
    let (code, _, err) = convert(&src, &out, &["--to", "pvp:sparse", "--set", &same]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(dims_of(&out, "values"), geometry);
}

/// F4: PINK files of a layout rank above 3 were written with exit 0 (PINK and
/// `validate` refuse them); now refused, naming the layout and its rank.
#[test]
fn pink_layouts_above_rank_three_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let som = testdata("som", "som_cart_2x2x2.bin");
    let cases: [(&[&str], &str); 2] = [
        (&["--to", "som-mapping"], "SOM layout rank 4"),
        (
            &["--to", "som:som", "--set", "som_rank=1"],
            "neuron layout rank 4",
        ),
    ];
    for (flags, says) in cases {
        let out = dir.path().join("f4.bin");
        let (code, _, err) = convert(&som, &out, flags);
        assert_eq!(code, 1, "{flags:?}: {err}");
        assert!(err.contains(says), "{err}");
        assert!(!out.exists());
    }
    let npy = dir.path().join("r5.npy");
    let t = Tensor::from_vec(vec![0.5f32; 32], [1, 2, 2, 2, 2, 2], Order::RowMajor).unwrap();
    tensorfmt::save(&npy, Format::Npy, &[("x".into(), t)], &Default::default()).unwrap();
    let out = dir.path().join("r5.bin");
    let (code, _, err) = convert(&npy, &out, &["--to", "som-mapping"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("SOM layout rank 5"), "{err}");
    assert!(!out.exists());
}

/// F5, F11: an empty `--frames` selection gives a file the owner reads (PVP activity:
/// its header; npz) or a refusal before anything is written, never an internal error
/// ("... was written but cannot be read back ..., please report this") nor a file its
/// owner refuses (a PINK mapping of n_entries 0).
#[test]
fn an_empty_frame_selection_is_a_valid_file_or_a_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str], Option<&str>); 9] = [
        ("pvp", "dense_f32.pvp", &[], None),
        ("pvp", "sparse_binary.pvp", &[], None),
        ("pvp", "sparse_values_dt4.pvp", &[], None),
        ("pvp", "kernel_byte.pvp", &[], Some("no frames")),
        ("pvp", "nonshared_f32.pvp", &[], Some("no frames")),
        ("som", "map_cart_2x3.bin", &[], Some("no entries")),
        ("som", "rotflip_cart_2x2.bin", &[], Some("no entries")),
        ("som", "data_f32_2x3.bin", &[], Some("entries > 0")),
        (
            "pvp",
            "dense_f32.pvp",
            &["--tensor", "values", "--to", "binaryproto"],
            Some("at least one value"),
        ),
    ];
    for (i, (sub, file, flags, refusal)) in cases.into_iter().enumerate() {
        let src = testdata(sub, file);
        let ext = src.extension().unwrap().to_str().unwrap();
        let out = dir.path().join(format!("f{i}.{ext}"));
        let mut all = vec!["--frames", "2:1"];
        all.extend(flags);
        let (code, _, err) = convert(&src, &out, &all);
        assert!(!err.contains("please report"), "{file}: {err}");
        match refusal {
            None => {
                assert_eq!(code, 0, "{file}: {err}");
                let (code, _, verdict) = tf(["validate".as_ref(), out.as_os_str()]);
                assert_eq!(code, 0, "{file}: {verdict}");
            }
            Some(says) => {
                assert_eq!(code, 1, "{file}: {err}");
                assert!(err.contains(says), "{file}: {err}");
                assert!(!out.exists(), "{file}");
            }
        }
    }
}

/// F8: a rotation/flip file has no data type field: `--dtype` was ignored (the file
/// byte-identical to the source) while a warning claimed the file stored it. Now a
/// type it cannot store is refused; f32 (its angles') is what it stores, no warning;
/// and through a carried npz the map dims survive.
#[test]
fn a_rotflip_file_refuses_a_dtype_it_cannot_store() {
    let dir = tempfile::tempdir().unwrap();
    let src = testdata("som", "rotflip_cart_2x2.bin");
    let npz = dir.path().join("r.npz");
    assert_eq!(convert(&src, &npz, &[]).0, 0);
    for (input, flags) in [
        (&src, &["--dtype", "i8"][..]),
        (&npz, &["--to", "som-rotflip", "--dtype", "u64"][..]),
    ] {
        let out = dir.path().join("f8.bin");
        let (code, _, err) = convert(input, &out, flags);
        assert_eq!(code, 1, "{flags:?}: {err}");
        assert!(err.contains("no data type"), "{err}");
        assert!(!err.contains("PINK 2.5"), "{err}");
        assert!(!out.exists());
    }
    let kind = |p: &Path| open(p).file().kind();
    for (input, flags) in [
        (&src, &["--dtype", "f32"][..]),
        (&npz, &["--to", "som-rotflip", "--dtype", "f32"][..]),
    ] {
        let out = dir.path().join("f8.bin");
        let (code, _, err) = convert(input, &out, flags);
        assert_eq!(code, 0, "{flags:?}: {err}");
        assert!(!err.contains("PINK 2.5"), "{err}");
        assert_eq!(kind(&out), kind(&src), "{flags:?}");
        std::fs::remove_file(&out).unwrap();
    }
}

/// The PINK data-type warning is said of the kinds PINK reads (data, SOM), where it is
/// true; a mapping file, which PINK writes and pyink reads, of another type is not
/// refused by anyone.
#[test]
fn the_pink_dtype_warning_is_said_only_where_pink_reads_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for (file, warns) in [("som_cart_2x2x2.bin", true), ("map_cart_2x3.bin", false)] {
        let out = dir.path().join(file);
        let (code, _, err) = convert(&testdata("som", file), &out, &["--dtype", "f64"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(err.contains("PINK program refuses"), warns, "{file}: {err}");
        let (code, _, verdict) = tf(["validate".as_ref(), out.as_os_str()]);
        assert_eq!(code == 0, !warns, "{file}: {verdict}");
    }
}

/// F9: `--dtype f64` to Caffe stores `double_data`, which OpenCV 4's readNetFromCaffe
/// refuses: said on stderr (it was said in docs/cli.md only).
#[test]
fn caffe_double_data_is_said_to_be_refused_by_opencv() {
    let dir = tempfile::tempdir().unwrap();
    let src = testdata("caffe", "v2_tiny.caffemodel");
    let out = dir.path().join("f9.caffemodel");
    let (code, _, err) = convert(&src, &out, &["--dtype", "f64"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("double_data") && err.contains("OpenCV"),
        "{err}"
    );
    let out = dir.path().join("f9.binaryproto");
    let (code, _, err) = convert(
        &testdata("caffe", "mean_legacy.binaryproto"),
        &out,
        &["--dtype", "f64"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("blobproto_to_array"), "{err}");
    // Without it, nothing of the kind.
    let out = dir.path().join("f9b.caffemodel");
    let (code, _, err) = convert(&src, &out, &["--dtype", "f32"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("double_data"), "{err}");
}

/// The neighbours of F8's lost map dims: an original carried in npz and not restored
/// because the write asks for something (a dtype) lost every layout its tensors do not
/// tell: a 2x2x2 SOM could not be split ("set som_rank"), a non-shared weight file
/// became a shared one. Its layout now goes with the tensors, as a file's own does.
#[test]
fn a_carried_original_written_anew_for_a_dtype_keeps_its_layout() {
    let dir = tempfile::tempdir().unwrap();
    let kind = |p: &Path| open(p).file().kind();
    for (sub, file, to, dtype) in [
        ("som", "som_cart_2x2x2.bin", "som", "f64"),
        ("som", "rotflip_cart_2x2.bin", "som-rotflip", "f32"),
        ("pvp", "nonshared_f32.pvp", "pvp:weights", "f32"),
        ("pvp", "kernel_f32.pvp", "pvp:weights", "f32"),
    ] {
        let src = testdata(sub, file);
        let npz = dir.path().join(format!("{file}.npz"));
        assert_eq!(convert(&src, &npz, &[]).0, 0);
        let out = dir.path().join(file);
        let (code, _, err) = convert(&npz, &out, &["--to", to, "--dtype", dtype]);
        assert_eq!(code, 0, "{file}: {err}");
        assert!(err.contains("not restored"), "{file}: {err}");
        assert_eq!(kind(&out), kind(&src), "{file}");
    }
}
