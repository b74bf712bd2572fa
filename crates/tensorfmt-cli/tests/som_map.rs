//! `tensorfmt som-map DATA SOM OUT.map [--rot-flip OUT]` against PINK 2.5's own files
//! (`testdata/som/mapping/`): byte-for-byte outputs, ids, JSON (every key documented in
//! docs/cli.md), and refusals that name the value and leave nothing behind.

mod common;

use std::path::{Path, PathBuf};

use common::{json, tf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/som/mapping")
        .join(name)
}

fn run(args: &[&str]) -> (i32, String, String) {
    tf(args)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn som_map_writes_pinks_files() {
    let dir = tempfile::tempdir().unwrap();
    let (m, r) = (dir.path().join("o.map"), dir.path().join("o.rf"));
    // PINK: --map data_15.bin ... --som-width 4 --som-height 2 -d 22 -n 28 (flips on).
    let (data, som) = (fixture("data_15.bin"), fixture("som_cart4x2_d15.bin"));
    let (code, out, err) = run(&[
        "som-map",
        s(&data),
        s(&som),
        s(&m),
        "--rot-flip",
        s(&r),
        "-n",
        "28",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("mapped 12 entries onto a cartesian 4x2 SOM (8 neurons 22x22), 28 rotations and flips, quadratic distance 10"), "{out}");
    assert_eq!(
        std::fs::read(&m).unwrap(),
        std::fs::read(fixture("map_d15_28_flip.bin")).unwrap()
    );
    assert_eq!(
        std::fs::read(&r).unwrap(),
        std::fs::read(fixture("rotflip_d15_28_flip.bin")).unwrap()
    );
    // A hexagonal SOM, PINK's option spellings: the headers say layout 0, as PINK's do.
    let (data, som) = (fixture("data_16.bin"), fixture("som_hex5.bin"));
    let (code, _, err) = run(&[
        "som-map",
        s(&data),
        s(&som),
        s(&m),
        "--store-rot-flip",
        s(&r),
        "--numrot",
        "12",
        "--flip-off",
        "--euclidean-distance-shape",
        "circular",
        "--euclidean-distance-dimension",
        "13",
        "--no-ids",
        "--force",
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(&m).unwrap(),
        std::fs::read(fixture("map_hex5_12_circular_odd.bin")).unwrap()
    );
    assert_eq!(
        std::fs::read(&r).unwrap(),
        std::fs::read(fixture("rotflip_hex5_12_circular_odd.bin")).unwrap()
    );
}

#[test]
fn som_map_carries_ids_and_reports_json() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("o.map");
    let (data, som) = (fixture("data_16.bin"), fixture("som_cart3x3.bin"));
    let (code, out, err) = run(&[
        "som-map",
        s(&data),
        s(&som),
        s(&m),
        "-n",
        "4",
        "--flip-off",
        "--json",
        "-t",
        "1",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(
        (
            v["entries"].as_u64(),
            v["neurons"].as_u64(),
            v["ids"].as_u64()
        ),
        (Some(20), Some(9), Some(20))
    );
    assert_eq!(v["euclidean_distance_dim"].as_u64(), Some(11));
    assert_eq!(v["layout"], "cartesian");
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md")).unwrap();
    for k in v.as_object().unwrap().keys() {
        assert!(
            doc.contains(&format!("`{k}`")),
            "docs/cli.md does not describe {k:?}"
        );
    }
    let text = std::fs::read(&m).unwrap();
    assert!(text.starts_with(b"# id J1000+0000\n# id J1037+7919\n"));
    let pink = std::fs::read(fixture("map_cart_4_noflip.bin")).unwrap();
    assert!(
        text.ends_with(&pink),
        "after the comment block, PINK's bytes"
    );
    // --ids FILE replaces them.
    let ids = dir.path().join("ids.txt");
    std::fs::write(
        &ids,
        (0..20).map(|i| format!("src{i}\n")).collect::<String>(),
    )
    .unwrap();
    let (code, _, err) = run(&[
        "som-map",
        s(&data),
        s(&som),
        s(&m),
        "-n",
        "4",
        "--ids",
        s(&ids),
        "--force",
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(&m).unwrap().starts_with(b"# id src0\n"));
}

#[test]
fn som_map_refusals_name_the_value_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("o.map");
    let r = dir.path().join("o.rf");
    let data = fixture("data_16.bin");
    let data2 = fixture("data_16_2ch.bin");
    let som = fixture("som_cart3x3.bin");
    for (args, code, message) in [
        (
            vec![s(&data), s(&som), s(&m), "-n", "6"],
            2,
            "num_rot 6: must be 1 or a multiple of 4",
        ),
        (
            vec![
                s(&data),
                s(&som),
                s(&m),
                "-n",
                "8",
                "--interpolation",
                "nearest_neighbor",
            ],
            2,
            "nearest_neighbor with num_rot 8",
        ),
        (
            vec![s(&data), s(&som), s(&m), "-e", "30"],
            2,
            "euclidean_distance_dim 30: must be 1..=23",
        ),
        (
            vec![s(&data), s(&som), s(&m), "-d", "46"],
            2,
            "neuron_dim 46: the SOM's neurons are 23x23",
        ),
        (
            vec![s(&data2), s(&som), s(&m), "--rot-flip", s(&r)],
            2,
            "channels 2: the data has 2 channel(s)",
        ),
        (
            vec![s(&data), s(&data), s(&m)],
            2,
            "som is a data file: expected a SOM file",
        ),
        (
            vec![
                s(&data),
                s(&som),
                s(&m),
                "--euclidean-distance-shape",
                "round",
            ],
            2,
            "euclidean_distance_shape round",
        ),
        (
            vec![
                s(&data),
                s(&som),
                s(&m),
                "-n",
                "4",
                "-e",
                "1",
                "--euclidean-distance-shape",
                "circular",
            ],
            2,
            "euclidean_distance_dim 1: the circular region of side 1 holds no pixel",
        ),
        (vec![s(&data), s(&som), s(&data)], 2, "is the input"),
    ] {
        let mut a = vec!["som-map"];
        a.extend(args);
        let (c, _, err) = run(&a);
        assert_eq!(c, code, "{a:?}: {err}");
        assert!(err.contains(message), "{a:?}: {err}");
        assert!(!m.exists() && !r.exists(), "{a:?} left a file");
    }
    let missing = dir.path().join("missing.bin");
    let (c, _, err) = run(&["som-map", s(&missing), s(&som), s(&m)]);
    assert_eq!(c, 1, "{err}");
    // An existing output is kept without --force.
    std::fs::write(&m, b"keep").unwrap();
    let (c, _, err) = run(&["som-map", s(&data), s(&som), s(&m), "-n", "4"]);
    assert_eq!(c, 2, "{err}");
    assert_eq!(std::fs::read(&m).unwrap(), b"keep");
}

/// The pictures of a mapping PINK wrote for a hexagonal SOM (its header says cartesian):
/// counts and one entry's distances on the hexagonal grid, with the common legend.
#[test]
fn render_draws_pinks_hexagonal_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let map = fixture("map_hex5_36_flip.bin");
    for extra in [&["--counts"][..], &["--frame", "3"][..]] {
        let png = dir.path().join("m.png");
        let mut a = vec!["render", s(&map), s(&png), "--force", "--json"];
        a.extend_from_slice(extra);
        let (code, out, err) = run(&a);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        assert!(v["width"].as_u64().unwrap() > 100, "{out}");
        assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    }
}
