//! Every file's kind has an identifier (`TensorFile::kind_id`), one of its format's
//! `Format::kinds`, and every kind a format writes is one it reads back as itself:
//! Python's `Document.kind` shows it and `to=` takes it, without parsing the prose of
//! `TensorFile::kind`.

mod common;

use tensorfmt::{Document, Format};

#[test]
fn every_file_kind_is_one_of_its_formats_kinds() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/core");
    let mut files = common::legacy_files();
    files.extend(std::fs::read_dir(root).unwrap().map(|e| e.unwrap().path()));
    let mut seen = std::collections::HashSet::new();
    for p in files {
        let Ok(doc) = Document::open(&p) else {
            continue; // a hostile or truncated corpus file
        };
        let id = doc.kind_id();
        assert!(
            doc.file_format().kinds().contains(&id),
            "{}: kind {id:?} ({}) is not one of {:?}",
            p.display(),
            doc.kind(),
            doc.file_format().kinds()
        );
        seen.insert((doc.file_format(), id));
    }
    for f in [Format::Pvp, Format::Som, Format::Primitiv, Format::Caffe] {
        for w in f.write_kinds() {
            assert!(f.kinds().contains(w), "{f}: {w}");
        }
        assert!(seen.iter().any(|(g, _)| *g == f), "no {f} file seen");
    }
}
