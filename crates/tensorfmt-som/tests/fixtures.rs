//! Golden fixtures (`testdata/som/`, built byte by byte by `cargo xtask fixtures`
//! without our writers): the reader must see exactly what each `.dump` says, and the
//! writers must reproduce every fixture byte for byte.

use std::path::PathBuf;

use tensorfmt_core::DType;
use tensorfmt_som::{
    write_data, write_mapping, write_rotflip, write_som, DataType, FileKind, SomFile, WriteConfig,
};

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/som")
}

fn fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(testdata())
        .expect("testdata/som exists (cargo xtask fixtures)")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    v.sort();
    v
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

/// The dump (without its first, descriptive line) as our reader sees the file.
fn dump(f: &SomFile) -> String {
    let quoted: Vec<String> = f
        .comments()
        .lines
        .iter()
        .map(|l| format!("{l:?}"))
        .collect();
    let som = f
        .map_layout()
        .map(|m| format!("{} {:?}", f.som_layout_code().unwrap(), m.dims()));
    let item = f.entry_dims().or(f.neuron_dims()).map(|d| format!("{d:?}"));
    let mut s = format!(
        "comments: [{}] end={}\nkind={} data_type={} n_entries={} som_layout={} item_dims={} hexagonal={} payload_offset={}\n",
        quoted.join(", "),
        f.comments().end_line,
        f.kind().code(),
        opt(f.data_type().map(DataType::code)),
        opt(f.n_entries()),
        opt(som),
        opt(item),
        f.map_layout().is_some_and(|m| m.is_hexagonal()),
        f.payload_offset(),
    );
    let n = f.n_entries().unwrap_or(0) as usize;
    let units = match f.kind() {
        FileKind::Data => f.entries(0..n).unwrap(),
        FileKind::Som => f.som_tensor().unwrap(),
        FileKind::Mapping => f.distances(0..n).unwrap(),
        FileKind::RotFlip => {
            let (fl, an) = f.rotflip_tensors(0..n).unwrap();
            let per = f.neuron_count().unwrap();
            let fl = fl.to_vec::<u8>().unwrap();
            let an = an.cast(DType::F64).unwrap().to_vec::<f64>().unwrap();
            for e in 0..n {
                s += &format!(
                    "unit {e}: flip={:?} angle={:?}\n",
                    &fl[e * per..(e + 1) * per],
                    &an[e * per..(e + 1) * per]
                );
            }
            return s;
        }
    };
    let count = if f.kind() == FileKind::Som {
        f.neuron_count().unwrap()
    } else {
        n
    };
    let v = units.cast(DType::F64).unwrap().to_vec::<f64>().unwrap();
    for (i, u) in v.chunks(v.len() / count).enumerate() {
        s += &format!("unit {i}: {u:?}\n");
    }
    s
}

fn rewrite(f: &SomFile) -> Vec<u8> {
    let config = WriteConfig {
        comments: f.comments().lines.clone(),
        data_type: f.data_type().unwrap_or(DataType::F32),
        pink_cli_compat: f.hex_inferred(),
        end_line: f.comments().end_line,
    };
    let mut out = Vec::new();
    let n = f.n_entries().unwrap_or(0) as usize;
    let map = f.map_layout();
    match f.kind() {
        FileKind::Data => write_data(&mut out, &f.entries(0..n).unwrap(), &config),
        FileKind::Som => write_som(
            &mut out,
            map.unwrap(),
            f.neuron_dims().unwrap(),
            &f.som_tensor().unwrap(),
            &config,
        ),
        FileKind::Mapping => {
            write_mapping(&mut out, map.unwrap(), &f.distances(0..n).unwrap(), &config)
        }
        FileKind::RotFlip => {
            let per = f.neuron_count().unwrap();
            let recs: Vec<_> = (0..n * per)
                .map(|i| f.rotflip(i / per, i % per).unwrap())
                .collect();
            write_rotflip(&mut out, map.unwrap(), n, &recs, &config)
        }
    }
    .unwrap();
    out
}

#[test]
fn reader_matches_every_dump() {
    let all = fixtures();
    assert!(all.len() >= 15, "run `cargo xtask fixtures`");
    for p in all {
        let f = SomFile::open(&p).unwrap();
        let want = std::fs::read_to_string(p.with_extension("bin.dump")).unwrap();
        let want = want.split_once('\n').unwrap().1;
        assert_eq!(dump(&f), want, "{}", p.display());
    }
}

#[test]
fn writers_reproduce_every_fixture() {
    for p in fixtures() {
        let bytes = std::fs::read(&p).unwrap();
        let f = SomFile::from_bytes(bytes.clone().into()).unwrap();
        assert!(rewrite(&f) == bytes, "{}", p.display());
    }
}

#[test]
fn every_fixture_sniffs_and_opens_through_the_facade() {
    for p in fixtures() {
        let b = std::fs::read(&p).unwrap();
        assert!(tensorfmt_som::sniff(&b, b.len() as u64), "{}", p.display());
        let t = tensorfmt_som::open_tensor_file(b.into(), &Default::default()).unwrap();
        t.validate().unwrap();
    }
}

#[test]
fn sniff_rejects_the_other_formats_fixtures() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let mut checked = 0;
    for fmt in ["core", "pvp", "primitiv", "caffe"] {
        let Ok(dir) = std::fs::read_dir(root.join(fmt)) else {
            continue;
        };
        for e in dir {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "dump") || !p.is_file() {
                continue;
            }
            let b = std::fs::read(&p).unwrap();
            let head = &b[..b.len().min(4096)];
            assert!(
                !tensorfmt_som::sniff(head, b.len() as u64),
                "{}",
                p.display()
            );
            checked += 1;
        }
    }
    eprintln!("sniff checked against {checked} foreign fixtures");
}

/// The `som` fuzz target's find: a comment block that is a bare `# END OF HEADER` line
/// must survive a re-serialisation (it was dropped).
#[test]
fn a_bare_end_of_header_line_is_rewritten() {
    let plain = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/som/data_f32_2x3.bin"),
    )
    .unwrap();
    let start = tensorfmt_som::SomFile::from_bytes(plain.clone().into())
        .unwrap()
        .comments()
        .len;
    let mut bytes = b"# END OF HEADER\n".to_vec();
    bytes.extend_from_slice(&plain[start..]);
    let f = SomFile::from_bytes(bytes.clone().into()).unwrap();
    assert!(f.comments().end_line && f.comments().lines.is_empty());
    assert_eq!(rewrite(&f), bytes);
}
