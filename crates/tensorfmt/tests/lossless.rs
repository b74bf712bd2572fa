//! Lossless round trips over every corpus file and fixture of the legacy formats:
//! `X -> safetensors -> X`, `X -> npz -> X` (the skeleton carried in metadata, see
//! `tensorfmt::provenance`) and `X -> X` (same format, nothing asked) give back the
//! file byte for byte. The few files that come back with the same content but other
//! bytes are listed in `CONTENT_ONLY` with the reason; the test checks the list stays
//! true in both directions.

mod common;

use common::legacy_files;
use std::path::{Path, PathBuf};

use tensorfmt::{provenance, Document, Format, Target, WriteOptions};

/// Files that come back content-equal rather than byte-identical, and why.
const CONTENT_ONLY: &[(&str, &str)] = &[];

/// How a file came back.
#[derive(Debug, PartialEq)]
enum Outcome {
    Identical,
    ContentOnly(String),
}

fn round_trip(src: &Path, doc: &Document, via: Target, dir: &Path) -> Outcome {
    let ext = src.extension().and_then(|e| e.to_str()).unwrap_or("bin");
    let format = doc.file_format();
    let mid = dir.join(format!("mid.{}", via.format.extensions()[0]));
    let back = dir.join(format!("back.{ext}"));
    let _ = std::fs::remove_file(&back);
    let report = doc
        .convert_to(&mid, via.clone())
        .unwrap_or_else(|e| panic!("{} -> {via}: {e}", src.display()));
    let mid_doc = Document::open(&mid).unwrap();
    // A sparse source is written in the sparse layout; seen as the original, it holds
    // the same tensors (issue 23 item 5).
    let mid_view = tensorfmt::interop::sparse::as_original(&mid_doc).unwrap();
    let mid_tensors = mid_view.as_ref().unwrap_or(&mid_doc);
    // The modern file holds the same tensors; the skeleton rides along unseen.
    for entry in doc.entries() {
        assert_eq!(
            mid_tensors.entry(entry.name()).unwrap().read().unwrap(),
            entry.read().unwrap(),
            "{} -> {via}: {}",
            src.display(),
            entry.name()
        );
    }
    if via.format == format {
        // Same format: nothing to carry.
        assert!(report.warnings.is_empty(), "{report:?}");
    } else {
        assert!(
            provenance::carried(mid_doc.file()).is_some(),
            "{} -> {via}: no skeleton recorded ({:?})",
            src.display(),
            report.warnings
        );
        if via.format == Format::Safetensors {
            let v: serde_json::Value =
                serde_json::from_str(&provenance::carried(mid_doc.file()).unwrap()).unwrap();
            let skeleton = v["skeleton"].as_str().unwrap().len() / 4 * 3;
            let covered = v["tensors"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t.get("layout").is_some())
                .count();
            eprintln!(
                "{}: {} bytes, {skeleton} outside the cuts, {covered}/{} tensors cut",
                src.display(),
                v["size"],
                v["tensors"].as_array().unwrap().len()
            );
        }
        let back_report = mid_doc
            .convert_to(&back, Target::new(format))
            .unwrap_or_else(|e| panic!("{} -> {via} -> {format}: {e}", src.display()));
        assert!(
            back_report.warnings.iter().all(|w| !w.contains("not kept")),
            "{back_report:?}"
        );
        // Asking for the original's own kind asks for nothing new: the carried
        // original comes back too (it used to be dropped without a word, a primitiv
        // batch of two folded into one tensor).
        let kind = doc.file().kind_id();
        let back_kind = dir.join(format!("back_kind.{ext}"));
        let _ = std::fs::remove_file(&back_kind);
        mid_doc
            .convert_to(&back_kind, Target::new(format).with_kind(kind))
            .unwrap_or_else(|e| panic!("{} -> {via} -> {format}:{kind}: {e}", src.display()));
        assert!(
            std::fs::read(&back_kind).unwrap() == std::fs::read(&back).unwrap(),
            "{} -> {via} -> {format}:{kind} is not what {format} gives",
            src.display()
        );
    }
    let out = if via.format == format { &mid } else { &back };
    if std::fs::read(out).unwrap() == std::fs::read(src).unwrap() {
        return Outcome::Identical;
    }
    let again = Document::open(out).unwrap();
    for entry in doc.entries() {
        assert_eq!(
            again.entry(entry.name()).unwrap().read().unwrap(),
            entry.read().unwrap(),
            "{}: {} differs after {via}",
            src.display(),
            entry.name()
        );
    }
    Outcome::ContentOnly(format!("via {via}"))
}

#[test]
fn every_legacy_file_comes_back_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut content_only = Vec::new();
    let mut checked = 0;
    for src in legacy_files() {
        let Ok(format) = tensorfmt::detect(&src) else {
            continue;
        };
        if !matches!(
            format,
            Format::Pvp | Format::Som | Format::Primitiv | Format::Caffe
        ) {
            continue;
        }
        let doc = match Document::open(&src) {
            Ok(d) => d,
            // Broken on purpose (the readers' tests cover these).
            Err(_) => continue,
        };
        // A file read leniently is rewritten, not copied, by a same-format conversion
        // (repairing it is the point); round trips through the modern formats still
        // give back its very bytes.
        let lenient = doc.file().lenient();
        let own_kind = Target::new(format).with_kind(doc.file().kind_id());
        for via in [
            Target::new(Format::Safetensors),
            Target::new(Format::Npz),
            Target::new(format),
            own_kind,
        ] {
            if via.format == format && lenient {
                continue;
            }
            if let Outcome::ContentOnly(why) = round_trip(&src, &doc, via, dir.path()) {
                content_only.push((src.file_name().unwrap().to_string_lossy().into_owned(), why));
            }
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} legacy files found");
    let listed: Vec<&str> = CONTENT_ONLY.iter().map(|(f, _)| *f).collect();
    for (file, why) in &content_only {
        assert!(
            listed.contains(&file.as_str()),
            "{file} came back with other bytes ({why}); list it in CONTENT_ONLY with the reason"
        );
    }
    for file in listed {
        assert!(
            content_only.iter().any(|(f, _)| f == file),
            "{file} is listed in CONTENT_ONLY but now comes back byte for byte"
        );
    }
    eprintln!(
        "{checked} legacy files checked, {} content-only",
        content_only.len()
    );
}

fn fixture(dir: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(dir)
        .join(name)
}

type Named = Vec<(String, tensorfmt::Tensor)>;

/// `src` converted to npz and read back as a numpy user would: its tensors, and write
/// options that carry its recorded layout into the next save.
fn carried(dir: &Path, src: &Path) -> (Named, WriteOptions) {
    let npz = dir.join("carried.npz");
    Document::open(src)
        .unwrap()
        .convert_to(&npz, Format::Npz)
        .unwrap();
    let mid = Document::open(&npz).unwrap();
    let options = WriteOptions {
        carried: provenance::carried(mid.file()),
        ..WriteOptions::default()
    };
    // A sparse source is in the sparse layout: its tensors seen as the original's.
    let view = tensorfmt::interop::sparse::as_original(&mid).unwrap();
    (view.as_ref().unwrap_or(&mid).read_all().unwrap(), options)
}

/// Applies `f` to every element of tensor `name` (same shape); returns the new values.
fn edit<T: tensorfmt::Element>(tensors: &mut Named, name: &str, f: impl Fn(T) -> T) -> Vec<T> {
    let (_, t) = tensors.iter_mut().find(|(n, _)| n == name).unwrap();
    let edited: Vec<T> = t.to_vec::<T>().unwrap().into_iter().map(f).collect();
    *t = tensorfmt::Tensor::from_vec(
        edited.clone(),
        t.dims().to_vec(),
        tensorfmt::Order::RowMajor,
    )
    .unwrap();
    edited
}

/// Saves `tensors` as safetensors with `options`, converts that to `back` (a PVP file)
/// and returns the report and the result.
fn back_to_pvp(
    dir: &Path,
    tensors: &Named,
    options: &WriteOptions,
    back: &Path,
) -> (tensorfmt::WriteReport, Document) {
    let edited = dir.join("edited.safetensors");
    tensorfmt::save(&edited, Format::Safetensors, tensors, options).unwrap();
    let report = Document::open(&edited)
        .unwrap()
        .convert_to(back, Format::Pvp)
        .unwrap();
    (report, Document::open(back).unwrap())
}

#[test]
fn edited_values_keep_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("pvp", "dense_f32.pvp");
    let doc = Document::open(&src).unwrap();
    let back = dir.path().join("back.pvp");
    // Edit the values (same shape), keep the metadata, as a numpy user would.
    let (mut tensors, options) = carried(dir.path(), &src);
    let doubled = edit(&mut tensors, "values", |v: f32| v * 2.0);
    let (report, got) = back_to_pvp(dir.path(), &tensors, &options, &back);
    assert!(report.warnings.is_empty(), "{report:?}");
    assert_eq!(got.header(), doc.header());
    assert_eq!(
        got.read_tensor("time").unwrap(),
        doc.read_tensor("time").unwrap()
    );
    assert_eq!(
        got.read_tensor("values").unwrap().to_vec::<f32>().unwrap(),
        doubled
    );
    let original = std::fs::read(&src).unwrap();
    let rebuilt = std::fs::read(&back).unwrap();
    assert_eq!(original.len(), rebuilt.len());
    assert_ne!(original, rebuilt);

    // An edited `time`: the reader gathers it from the frame headers, and the recording
    // found it there (in the bytes the zero-copy `values` left), so it goes back in place
    // and the file keeps its header.
    let later = edit(&mut tensors, "time", |t: f64| t + 100.0);
    let (report, got) = back_to_pvp(dir.path(), &tensors, &options, &back);
    assert!(report.warnings.is_empty(), "{report:?}");
    assert_eq!(got.header(), doc.header());
    assert_eq!(
        got.read_tensor("time").unwrap().to_vec::<f64>().unwrap(),
        later
    );
    assert_eq!(std::fs::read(&back).unwrap().len(), original.len());

    // A sparse file's times are cut too (each frame's leading f64): edited, they go
    // back in place and the file keeps its header. Its entries are not cut: edited,
    // the file is written anew from the tensors in the original's layout (the obsolete
    // datatype 4 kept), saying so.
    let sparse_src = fixture("pvp", "sparse_values_dt4.pvp");
    let (mut sparse, sparse_options) = carried(dir.path(), &sparse_src);
    let sparse_later = edit(&mut sparse, "time", |t: f64| t + 100.0);
    let sparse_back = dir.path().join("sparse_back.pvp");
    let (report, got) = back_to_pvp(dir.path(), &sparse, &sparse_options, &sparse_back);
    assert!(report.warnings.is_empty(), "{report:?}");
    let sparse_doc = Document::open(&sparse_src).unwrap();
    assert_eq!(got.header(), sparse_doc.header());
    assert_eq!(
        got.read_tensor("time").unwrap().to_vec::<f64>().unwrap(),
        sparse_later
    );
    let _ = edit(&mut sparse, "values", |v: f32| v * 2.0);
    let (report, got) = back_to_pvp(dir.path(), &sparse, &sparse_options, &sparse_back);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("\"values\" changed")
                && w.contains("written anew")
                && w.contains("datatype=4")),
        "{report:?}"
    );
    assert_eq!(got.kind(), sparse_doc.kind());
    assert!(got
        .header()
        .contains(&("datatype".to_string(), tensorfmt::FieldValue::Int(4))));
    assert_eq!(
        got.read_tensor("time").unwrap().to_vec::<f64>().unwrap(),
        sparse_later
    );

    // A shape that no longer fits: a clear note, and the tensors written alone.
    let (_, values) = tensors.iter_mut().find(|(n, _)| n == "values").unwrap();
    let first = values.slice_outer(0, 1).unwrap();
    *values = first;
    tensors.retain(|(n, _)| n != "time");
    let (report, _) = back_to_pvp(dir.path(), &tensors, &options, &back);
    assert!(
        report.warnings.iter().any(|w| w.contains("were not kept")),
        "{report:?}"
    );
}

#[test]
fn partial_reads_and_other_targets_carry_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("pvp", "dense_f32.pvp");
    // A frame range is not the file: nothing recorded, and the report says why.
    let part = tensorfmt::open(
        &src,
        &tensorfmt::ReadOptions {
            frames: Some((0, Some(1))),
            ..Default::default()
        },
    )
    .unwrap();
    let st = dir.path().join("part.safetensors");
    let report = part.convert_to(&st, Format::Safetensors).unwrap();
    assert!(provenance::carried(Document::open(&st).unwrap().file()).is_none());
    assert!(
        report.warnings.iter().any(|w| w.contains("only part")),
        "{report:?}"
    );
    // A skeleton is for its own format only: to another legacy format it is ignored.
    let whole = dir.path().join("whole.npz");
    Document::open(&src)
        .unwrap()
        .convert_to(&whole, Format::Npz)
        .unwrap();
    let doc = Document::open(&whole).unwrap();
    assert_eq!(doc.names(), ["values", "time"].map(String::from));
    let reopen = |b: bytes::Bytes| tensorfmt::open_bytes(b, Format::Pvp, None, &Default::default());
    let out = dir.path().join("x.data");
    let r = provenance::restore(&*doc, &out, "primitiv", &Default::default(), &reopen).unwrap();
    assert_eq!(r, provenance::Restored::NotRecorded);
    // Asking for a dtype is a real conversion, not a restore, and says so (the
    // original's header is not in the output).
    let opts = WriteOptions {
        dtype: Some(tensorfmt::DType::F64),
        ..Default::default()
    };
    let r = provenance::restore(&*doc, &dir.path().join("y.pvp"), "pvp", &opts, &reopen).unwrap();
    assert!(
        matches!(&r, provenance::Restored::Refused(why) if why.contains("was not restored")),
        "{r:?}"
    );
}

/// Doubles every float tensor of a document, keeping names, dtypes and shapes.
fn doubled(doc: &Document) -> Vec<(String, tensorfmt::Tensor)> {
    doc.read_all()
        .unwrap()
        .into_iter()
        .map(|(n, t)| {
            if t.dtype() != tensorfmt::DType::F32 {
                return (n, t);
            }
            let v: Vec<f32> = t
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|x| x * 2.0 + 1.0)
                .collect();
            (
                n,
                tensorfmt::Tensor::from_vec(v, t.dims().to_vec(), tensorfmt::Order::RowMajor)
                    .unwrap(),
            )
        })
        .collect()
}

#[test]
fn edited_copies_are_spliced_and_checked() {
    // Tensors their readers copy (primitiv's column-major data, PVP weights between
    // patch headers, PINK data behind a comment block, a Caffe blob) are found in the
    // file by content; edited, they are spliced back and read back to be sure.
    let dir = tempfile::tempdir().unwrap();
    for (sub, name) in [
        ("primitiv", "parameter_2x3_stats.data"),
        ("pvp", "kernel_f32.pvp"),
        ("pvp", "nonshared_f32.pvp"),
        ("som", "data_f32_2ch_comments.bin"),
        ("caffe", "v2_tiny.caffemodel"),
    ] {
        let src = fixture(sub, name);
        let doc = Document::open(&src).unwrap();
        let st = dir.path().join("x.safetensors");
        doc.convert_to(&st, Format::Safetensors).unwrap();
        let json = provenance::carried(Document::open(&st).unwrap().file()).unwrap();
        let edited = doubled(&doc);
        let options = WriteOptions {
            carried: Some(json),
            ..WriteOptions::default()
        };
        tensorfmt::save(&st, Format::Safetensors, &edited, &options).unwrap();
        let back = dir.path().join(format!(
            "back.{}",
            src.extension().unwrap().to_str().unwrap()
        ));
        let report = Document::open(&st)
            .unwrap()
            .convert_to(&back, doc.file_format())
            .unwrap();
        assert!(report.warnings.is_empty(), "{name}: {report:?}");
        let got = Document::open(&back).unwrap();
        assert_eq!(got.header().len(), doc.header().len(), "{name}");
        assert_eq!(got.kind(), doc.kind(), "{name}");
        for (n, t) in &edited {
            assert_eq!(&got.read_tensor(n).unwrap(), t, "{name}: {n}");
        }
        assert_eq!(
            std::fs::metadata(&back).unwrap().len(),
            std::fs::metadata(&src).unwrap().len(),
            "{name}"
        );
    }
}

/// Recording a dense movie's layout reads its header and frame times, not its values:
/// an 8 GiB movie (a sparse file: only the headers are on disk) is recorded at once,
/// where a search of its pages for the times would take many seconds.
#[test]
fn recording_a_huge_dense_movie_reads_only_its_headers() {
    use std::io::{Seek, SeekFrom, Write};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.pvp");
    let (nx, ny, nf, frames) = (4096usize, 4096usize, 1usize, 128u64);
    let frame = 8 + 4 * (nx * ny * nf) as u64;
    let mut f = std::fs::File::create(&path).unwrap();
    tensorfmt::pvp::write::DenseWriter::new(&mut f, nx, ny, nf)
        .unwrap()
        .finish()
        .unwrap();
    f.seek(SeekFrom::Start(68)).unwrap();
    f.write_all(&(frames as i32).to_le_bytes()).unwrap();
    // Distinct times, so that no run of zeros in the values can pass for them.
    for k in 0..frames {
        f.seek(SeekFrom::Start(80 + k * frame)).unwrap();
        f.write_all(&(k as f64 + 0.5).to_le_bytes()).unwrap();
    }
    f.set_len(80 + frames * frame).unwrap();
    drop(f);
    let doc = Document::open(&path).unwrap();
    let recording = tensorfmt_core::testing::assert_fast("recording an 8 GiB movie", || {
        doc.record_source().unwrap()
    });
    let json = recording.json.expect("a dense movie's layout is carried");
    // The skeleton is the header and nothing else: values and times are both cut.
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t.get("layout").is_some()));
    assert!(json.len() < 4096, "{json}");
}

/// Issue 23 item 3: a 15.6 MB PVP of 1.3 M one-neuron frames made 68 MB of metadata
/// (two cuts per frame) and could not be written. Described by stride, its layout is
/// two runs whatever the frame count; both targets convert and come back byte for byte.
/// (50 k frames here to stay quick in debug builds; 1.3 M pass the same way, in 85 s.)
#[test]
fn many_frames_carry_a_few_hundred_bytes_of_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("frames.pvp");
    let frames = 50_000usize;
    let mut f = std::io::Cursor::new(Vec::new());
    tensorfmt::pvp::write::DenseWriter::new(&mut f, 1, 1, 1)
        .unwrap()
        .finish()
        .unwrap();
    let mut bytes = f.into_inner();
    bytes[68..72].copy_from_slice(&(frames as i32).to_le_bytes());
    bytes.reserve(frames * 12);
    for k in 0..frames {
        bytes.extend_from_slice(&(k as f64 * 0.5).to_le_bytes());
        bytes.extend_from_slice(&(k as f32).to_le_bytes());
    }
    std::fs::write(&src, &bytes).unwrap();
    let doc = Document::open(&src).unwrap();
    for via in [Format::Npz, Format::Safetensors] {
        let mid = dir.path().join(format!("mid.{}", via.extensions()[0]));
        let report = doc.convert_to(&mid, via).unwrap();
        assert!(report.warnings.is_empty(), "{report:?}");
        let mid_doc = Document::open(&mid).unwrap();
        let json = provenance::carried(mid_doc.file()).unwrap();
        assert!(json.len() < 2048, "{} bytes of metadata", json.len());
        let back = dir.path().join("back.pvp");
        let report = mid_doc.convert_to(&back, Format::Pvp).unwrap();
        assert!(report.warnings.is_empty(), "{report:?}");
        assert!(std::fs::read(&back).unwrap() == bytes, "via {via}");
    }
}
