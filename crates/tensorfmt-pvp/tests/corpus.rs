//! Data-driven corpus tests: every file of `corpus/pvp/` is read with the typed
//! readers and through the `TensorFile` view, and checked against the header fields
//! and expected values written in the corpus's `SOURCES.md`.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use serde_json::Value;
use tensorfmt_core::{ReadOptions, TensorFile};
use tensorfmt_pvp::{PvpFile, WeightReader};

/// The `header:` and `expected:` entries of one file's section in SOURCES.md.
struct Entry {
    header: BTreeMap<String, String>,
    expected: BTreeMap<String, Value>,
}

fn corpus() -> Option<PathBuf> {
    tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "pvp")
}

fn entry(dir: &std::path::Path, file: &str) -> Entry {
    let text = std::fs::read_to_string(dir.join("SOURCES.md")).expect("SOURCES.md");
    let start = text
        .find(&format!("### `{file}`"))
        .unwrap_or_else(|| panic!("{file} not in SOURCES.md"));
    let section = &text[start..];
    let section = &section[..section[4..]
        .find("### ")
        .map(|e| e + 4)
        .unwrap_or(section.len())];
    let line = |tag: &str| {
        section
            .lines()
            .find_map(|l| l.strip_prefix(tag))
            .unwrap_or_else(|| panic!("{file}: no {tag}"))
            .to_string()
    };
    let header = line("* header: ")
        .split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    let expected = line("* expected: ")
        .split("; ")
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (
                k.to_string(),
                serde_json::from_str(v).unwrap_or_else(|e| panic!("{file}: {k}={v}: {e}")),
            )
        })
        .collect();
    Entry { header, expected }
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// Expected stored f32 values (SOURCES.md prints them as f64, sometimes one f64 ulp off).
fn f32s(v: &Value) -> Vec<f32> {
    f64s(v).into_iter().map(|x| x as f32).collect()
}

fn close(a: f64, b: f64, what: &str, file: &str) {
    let tol = 1e-9 * a.abs().max(b.abs()).max(1.0) * 1000.0;
    assert!(
        (a - b).abs() <= tol,
        "{file}: {what}: got {a}, expected {b}"
    );
}

fn check_header(file: &str, e: &Entry, tf: &dyn TensorFile) {
    let fields: BTreeMap<String, String> = tf
        .header()
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect();
    for (k, v) in &e.header {
        let got = fields
            .get(k)
            .unwrap_or_else(|| panic!("{file}: header field {k} missing"));
        let (a, b): (f64, f64) = (got.parse().unwrap(), v.parse().unwrap());
        // wMin/wMax are f32 in the file and printed from f64 in SOURCES.md.
        close(a, b, k, file);
    }
}

fn check(file: &str) {
    let Some(dir) = corpus() else { return };
    let e = entry(&dir, file);
    let path = dir.join(file);
    let x = &e.expected;
    let typed = PvpFile::open(&path).unwrap_or_else(|err| panic!("{file}: {err}"));
    let nframes = x["nframes"].as_u64().unwrap() as usize;
    assert_eq!(typed.frame_count().unwrap(), nframes, "{file}: frames");
    if x["exact"] == Value::Bool(true) {
        assert!(
            !typed.warnings().iter().any(|w| w.contains("partial")),
            "{file}: {:?}",
            typed.warnings()
        );
    }

    let mut sum = 0f64;
    let mut times = Vec::new();
    match &typed {
        PvpFile::Dense(r) => {
            let first = x.get("frame0_first8").or(x.get("first8")).unwrap();
            let raw = r.raw_frame_bytes(0).unwrap();
            let got: Vec<f32> = raw
                .chunks_exact(4)
                .take(8)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            assert_eq!(
                got,
                f32s(first)[..got.len().min(8)].to_vec(),
                "{file}: first values (file order)"
            );
            if let Some(b) = x.get("mpi_blocks_per_frame") {
                assert_eq!(
                    (r.layout().procs.0 * r.layout().procs.1) as u64,
                    b.as_u64().unwrap(),
                    "{file}: MPI blocks"
                );
            }
            for f in r.frames() {
                let f = f.unwrap();
                times.push(f.time);
                sum += f
                    .values
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|&v| v as f64)
                    .sum::<f64>();
            }
        }
        PvpFile::Sparse(r) => {
            let counts: Vec<u64> = r
                .table()
                .unwrap()
                .counts
                .iter()
                .map(|&c| c as u64)
                .collect();
            let want: Vec<u64> = x["numActive"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(counts[..want.len()], want[..], "{file}: numActive");
            let f0 = r.frame(0).unwrap();
            for (i, pair) in x["frame0_first6"].as_array().unwrap().iter().enumerate() {
                let p = f64s(pair);
                assert_eq!(
                    (f0.indices[i] as f64, f0.values[i]),
                    (p[0], p[1] as f32),
                    "{file}: frame 0 entry {i}"
                );
            }
            for f in r.frames() {
                let f = f.unwrap();
                times.push(f.time);
                sum += f.values.iter().map(|&v| v as f64).sum::<f64>();
            }
            // Dense and CSR conversions agree with the frames.
            let csr = r.to_csr(0..nframes).unwrap();
            assert_eq!(csr.width, r.layout().neurons());
            assert_eq!(
                *csr.indptr.last().unwrap() as u64,
                r.table().unwrap().total_entries()
            );
            let dense = r.to_dense(0..nframes).unwrap().to_vec::<f32>().unwrap();
            close(
                dense.iter().map(|&v| v as f64).sum(),
                sum,
                "dense sum",
                file,
            );
        }
        PvpFile::Weights(r) => check_weights(file, &e, r, &mut sum, &mut times),
    }
    close(sum, x["sum"].as_f64().unwrap(), "sum", file);
    if let Some(t) = x.get("times") {
        let t = f64s(t);
        assert_eq!(times[..t.len()], t[..], "{file}: times");
    }

    // The TensorFile view: header, shapes, streamed sum, validate.
    let data = tensorfmt_core::io::map_file(&path).unwrap();
    let tf = tensorfmt_pvp::open_tensor_file(data.clone(), &ReadOptions::default()).unwrap();
    check_header(file, &e, tf.as_ref());
    tf.validate().unwrap();
    let main = if matches!(typed, PvpFile::Weights(_)) {
        "weights"
    } else {
        "values"
    };
    let info = tf.tensors().into_iter().find(|i| i.name == main).unwrap();
    assert_eq!(info.shape.dims()[0], nframes);
    let mut streamed = 0f64;
    let mut frames = 0;
    for c in tf.read_chunks(main).unwrap() {
        let c = c.unwrap();
        assert_eq!(c.dims()[1..], info.shape.dims()[1..], "{file}: chunk shape");
        frames += c.dims()[0];
        streamed += c.stats().sum;
    }
    assert_eq!(frames, nframes);
    if info.dtype == tensorfmt_core::DType::F32 {
        close(streamed, x["sum"].as_f64().unwrap(), "streamed sum", file);
        let whole = tf.read_tensor(main).unwrap();
        assert_eq!(whole.shape(), &info.shape);
        close(
            whole.stats().sum,
            x["sum"].as_f64().unwrap(),
            "whole-tensor sum",
            file,
        );
    }
    let time = tf.read_tensor("time").unwrap().to_vec::<f64>().unwrap();
    assert_eq!(time, times, "{file}: time tensor");
    if matches!(typed, PvpFile::Sparse(_)) {
        let csr = tensorfmt_pvp::open_tensor_file(
            data,
            &ReadOptions {
                sparse_csr: true,
                ..ReadOptions::default()
            },
        )
        .unwrap();
        let shape = csr.read_tensor("shape").unwrap().to_vec::<i64>().unwrap();
        assert_eq!(shape[0] as usize, nframes);
        close(
            csr.read_tensor("data").unwrap().stats().sum,
            x["sum"].as_f64().unwrap(),
            "csr sum",
            file,
        );
        for i in csr.tensors() {
            assert_eq!(
                csr.read_tensor(&i.name).unwrap().shape(),
                &i.shape,
                "{file}: {}",
                i.name
            );
        }
    }
}

fn check_weights(file: &str, e: &Entry, r: &WeightReader, sum: &mut f64, times: &mut Vec<f64>) {
    let x = &e.expected;
    let l = r.layout();
    assert_eq!(
        l.patch_header_bytes as u64,
        x["patch_header_bytes"].as_u64().unwrap(),
        "{file}: patch header"
    );
    assert_eq!(
        l.arbors as u64,
        x["arbors"].as_u64().unwrap(),
        "{file}: arbors"
    );
    let mut distinct = HashSet::new();
    let wminmax = x["wminmax"].as_array().unwrap();
    for (k, f) in r.frames().enumerate() {
        let f = f.unwrap();
        times.push(f.time());
        let mm = f32s(&wminmax[k]);
        assert_eq!(
            (f.wmin(), f.wmax()),
            (mm[0], mm[1]),
            "{file}: wMin/wMax of frame {k}"
        );
        let v = f.weights.to_vec::<f32>().unwrap();
        if k == 0 {
            let first = f32s(&x["first8"]);
            let got: Vec<f32> = v.iter().take(first.len()).copied().collect();
            assert_eq!(got, first, "{file}: first weights");
        }
        *sum += v.iter().map(|&w| w as f64).sum::<f64>();
        distinct.extend(f.patches.iter().copied());
    }
    assert_eq!(
        distinct.len() as u64,
        x["patch_headers_distinct"].as_u64().unwrap(),
        "{file}: distinct patch headers"
    );
    for s in x["patch_headers_sample"].as_array().unwrap() {
        let s = s.as_array().unwrap();
        let p = tensorfmt_pvp::PatchHeader {
            nx: s[0].as_u64().unwrap() as u16,
            ny: s[1].as_u64().unwrap() as u16,
            offset: s[2].as_u64().map(|o| o as u32),
        };
        assert!(
            distinct.contains(&p),
            "{file}: patch header {p:?} not found"
        );
    }
}

macro_rules! corpus_tests {
    ($($name:ident => $file:literal,)*) => {$(
        #[test]
        fn $name() {
            check($file);
        }
    )*};
}

corpus_tests! {
    buffer_utils_dense => "BufferUtilsPvpTest/input_8x4x2_x3.pvp",
    blink => "ResetStateOnTriggerTest/blink.pvp",
    adjust_arbors_input => "AdjustAxonalArborsTest/input.pvp",
    border_image => "InputBCflagTest/BorderImage.pvp",
    sample_sparse_image => "SparseIdentTest/samplesparseimage.pvp",
    mask_layer_input => "MaskLayerTest/input.pvp",
    import_params_a0 => "ImportParamsTest/a0.pvp",
    stochastic_release_input => "StochasticReleaseTest/input.pvp",
    lif_input_image => "LIFTest/inputimage.pvp",
    gpulca_correct => "GPULCATest/correct.pvp",
    buffer_utils_binary => "BufferUtilsPvpTest/binary_3x2x1_x3.pvp",
    write_activity_sparse_movie => "WriteActivitySparseTest/inputmovie.pvp",
    buffer_utils_sparse => "BufferUtilsPvpTest/sparse_5x5x1_x5.pvp",
    image_system_sparse => "ImageSystemTest/PvpFileIOSparse_input.pvp",
    input_system_dot => "InputSystemTest/dot.pvp",
    input_system_out => "InputSystemTest/out.pvp",
    write_sparse_correct => "WriteSparseFileTest/correct.pvp",
    adjust_arbors_weights => "AdjustAxonalArborsTest/weights.pvp",
    connection_restart_weights => "ConnectionRestartTest/initializeFromCheckpoint_W.pvp",
    negative_frame_weights => "NegativeConnFrameNumberTest/weights.pvp",
    gpulca_weights => "GPULCATest/weights.pvp",
    gpusystem_weights => "GPUSystemTest/weights.pvp",
    init_weights_file => "InitWeightsFileTest/weights.pvp",
    develop_convolution_weights => "develop/ConvolutionTest/TestWeights_W.pvp",
    develop_momentum_weights => "develop/MomentumDecayTest/InitialWeights.pvp",
    develop_broadcast_to_output => "develop/BroadcastPreLayerTest/BroadcastLayerToOutput.pvp",
    develop_broadcast_weights => "develop/BroadcastPreLayerTest/weights.pvp",
    develop_cuda_pre => "develop/CudaRecvPostTest/pre.pvp",
    develop_shared_to_local => "develop/SharedToLocalPatchWeightsTest/sharedWeights.pvp",
    legacy_arbor_concat => "legacy/ReadArborFileTest/concat.pvp",
    legacy_arbor_part1 => "legacy/ReadArborFileTest/part1.pvp",
    legacy_bids_w0 => "legacy/BIDS/w0_last.pvp",
    legacy_filetype1_2 => "legacy/GPUSystemTest/Lx1_2_A_last.pvp",
    legacy_filetype1_4 => "legacy/GPUSystemTest/Lx1_4_A_last.pvp",
    legacy_sparse_a7 => "legacy/GPUSystemTest/a7.pvp",
    legacy_byte_kernel_w10 => "legacy/GPUSystemTest/w10_last.pvp",
    legacy_clone_w0 => "legacy/CloneKernelConnTest/w0_last.pvp",
    legacy_clone_w2 => "legacy/CloneKernelConnTest/w2_last.pvp",
    legacy_mpi_a6 => "legacy/GPUSystemTest/a6.pvp",
}

/// Spec §4: element order is `[y][x][f]`, nf fastest.
#[test]
fn mask_layer_element_order() {
    let Some(dir) = corpus() else { return };
    let PvpFile::Dense(r) = PvpFile::open(dir.join("MaskLayerTest/input.pvp")).unwrap() else {
        panic!()
    };
    let f = r.frame(0).unwrap();
    assert_eq!(f.values.dims(), &[8, 8, 3]);
    let px = |x: usize| {
        (0..3)
            .map(|c| f.values.get::<f32>(&[0, x, c]).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(px(0), vec![0.0, 64.0, 128.0]);
    assert_eq!(px(1), vec![1.0, 65.0, 129.0]);
}

/// Spec §8: the MPI-split file is reassembled (sum 352, not the 3.875 of a naive read)
/// and block (px, py) covers x in [px*nx, ...), y in [py*ny, ...).
#[test]
fn legacy_mpi_blocks_are_reassembled() {
    let Some(dir) = corpus() else { return };
    let PvpFile::Dense(r) = PvpFile::open(dir.join("legacy/GPUSystemTest/a6.pvp")).unwrap() else {
        panic!()
    };
    assert_eq!(r.frame(0).unwrap().values.dims(), &[8, 8, 1]);
    for k in 0..r.len() {
        let raw = r.raw_frame_bytes(k).unwrap();
        let raw: Vec<f32> = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let v = r.frame(k).unwrap().values;
        for (b, block) in raw.chunks_exact(16).enumerate() {
            let (px, py) = (b % 2, b / 2);
            for (i, &val) in block.iter().enumerate() {
                assert_eq!(
                    v.get::<f32>(&[py * 4 + i / 4, px * 4 + i % 4, 0]).unwrap(),
                    val
                );
            }
        }
    }
}

/// Negative frame numbers count from the end (NegativeConnFrameNumberTest).
#[test]
fn weights_counted_from_the_end() {
    let Some(dir) = corpus() else { return };
    let PvpFile::Weights(r) =
        PvpFile::open(dir.join("NegativeConnFrameNumberTest/weights.pvp")).unwrap()
    else {
        panic!()
    };
    assert_eq!(
        r.frame_at(-1).unwrap().weights.to_vec::<f32>().unwrap(),
        vec![4.0]
    );
    assert_eq!(
        r.frame_at(-4).unwrap().weights.to_vec::<f32>().unwrap(),
        vec![1.0]
    );
    assert!(r.frame_at(-5).is_err());
    assert!(r.frame(4).is_err());
    assert_eq!(r.frame_wrapped(5).unwrap().index, 1);
}
