//! The mapping step against PINK 2.5's own outputs (`testdata/som/mapping/`, made by
//! `generate.py` there with a CPU build of PINK 2.5, `--numthreads 1`): every case's
//! mapping and rotation/flip files are reproduced byte for byte, the transforms give
//! PINK's distance at the transform PINK recorded, and the best-match tools agree.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tensorfmt_som::mapping::{map_files, mapper_for, DistanceShape, MapOptions};
use tensorfmt_som::transform::{transform, transform_index, Interpolation};
use tensorfmt_som::{ids, SomFile};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/som/mapping")
}

fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(dir().join("cases.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().clone()
}

fn options(o: &Value) -> MapOptions {
    let d = MapOptions::default();
    MapOptions {
        num_rot: o["num_rot"].as_u64().map_or(d.num_rot, |v| v as u32),
        flip: o["flip"].as_bool().unwrap_or(d.flip),
        euclidean_distance_dim: o["euclidean_distance_dim"].as_u64().map(|v| v as usize),
        euclidean_distance_shape: o["euclidean_distance_shape"]
            .as_str()
            .map_or(d.euclidean_distance_shape, |s| s.parse().unwrap()),
        interpolation: o["interpolation"]
            .as_str()
            .map_or(d.interpolation, |s| s.parse().unwrap()),
        threads: Some(2),
        ..d
    }
}

fn open(name: &str) -> SomFile {
    SomFile::open(dir().join(name)).unwrap()
}

/// The payload after a file's comment block and header.
fn payload(f: &SomFile) -> &[u8] {
    &f.bytes()[f.payload_offset()..]
}

#[test]
fn map_and_rotflip_files_equal_pink_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for case in cases() {
        let Some(map_name) = case["map"].as_str() else {
            continue;
        };
        let name = case["name"].as_str().unwrap();
        let data = open(case["data"].as_str().unwrap());
        let som = open(case["som"].as_str().unwrap());
        let o = options(&case["options"]);
        let (m, r) = (tmp.path().join("m.bin"), tmp.path().join("r.bin"));
        let data_path = dir().join(case["data"].as_str().unwrap());
        map_files(
            &data,
            Some(&data_path),
            &som,
            &o,
            &m,
            Some(&r),
            None,
            &|_, _| Ok(()),
        )
        .unwrap();
        let pink_map = std::fs::read(dir().join(map_name)).unwrap();
        let pink_rf = std::fs::read(dir().join(case["rotflip"].as_str().unwrap())).unwrap();
        let ours_map = std::fs::read(&m).unwrap();
        let ours_rf = std::fs::read(&r).unwrap();
        if ours_map != pink_map {
            let a = SomFile::from_bytes(ours_map.into()).unwrap();
            let b = SomFile::from_bytes(pink_map.into()).unwrap();
            let x = a
                .distances(0..a.n_entries().unwrap() as usize)
                .unwrap()
                .to_vec::<f32>()
                .unwrap();
            let y = b
                .distances(0..b.n_entries().unwrap() as usize)
                .unwrap()
                .to_vec::<f32>()
                .unwrap();
            let worst = x
                .iter()
                .zip(&y)
                .map(|(p, q)| ((p - q) / q).abs())
                .fold(0f32, f32::max);
            panic!("{name}: mapping differs from PINK's (worst relative {worst:e})");
        }
        if ours_rf != pink_rf {
            let a = SomFile::from_bytes(ours_rf.into()).unwrap();
            let b = SomFile::from_bytes(pink_rf.into()).unwrap();
            let n = a.n_entries().unwrap() as usize;
            let (fa, aa) = a.rotflip_tensors(0..n).unwrap();
            let (fb, ab) = b.rotflip_tensors(0..n).unwrap();
            let differ = fa
                .to_vec::<u8>()
                .unwrap()
                .iter()
                .zip(fb.to_vec::<u8>().unwrap())
                .zip(
                    aa.to_vec::<f32>()
                        .unwrap()
                        .iter()
                        .zip(ab.to_vec::<f32>().unwrap()),
                )
                .filter(|((p, q), (s, t))| *p != q || **s != *t)
                .count();
            panic!("{name}: {differ} rotation/flip records differ from PINK's");
        }
        checked += 1;
    }
    assert_eq!(checked, 13);
}

/// PINK skips the `# id` comment block of a data file: its maps of `data_16.bin` are
/// those of the images alone, and `map_files` carries the ids into both outputs.
#[test]
fn ids_travel_through_the_mapping() {
    let data = open("data_16.bin");
    let id_list = ids::entry_ids(&data).unwrap().unwrap();
    assert_eq!((id_list.len(), id_list[1].as_str()), (20, "J1037+7919"));
    let som = open("som_cart3x3.bin");
    let tmp = tempfile::tempdir().unwrap();
    let (m, r) = (tmp.path().join("m.bin"), tmp.path().join("r.bin"));
    let o = MapOptions {
        num_rot: 4,
        flip: false,
        ..MapOptions::default()
    };
    map_files(
        &data,
        None,
        &som,
        &o,
        &m,
        Some(&r),
        Some(&id_list),
        &|_, _| Ok(()),
    )
    .unwrap();
    for (ours, pink) in [
        (m, "map_cart_4_noflip.bin"),
        (r, "rotflip_cart_4_noflip.bin"),
    ] {
        let ours = SomFile::open(ours).unwrap();
        let pink = open(pink);
        assert_eq!(
            ids::entry_ids(&ours).unwrap().as_deref(),
            Some(&id_list[..])
        );
        assert_eq!(payload(&ours), payload(&pink));
        // The binary header after the comment block is PINK's too.
        let h = ours.comments().len;
        assert_eq!(
            &ours.bytes()[h..ours.payload_offset()],
            &pink.bytes()[..pink.payload_offset()]
        );
    }
}

/// PINK 2.5 sums nothing for circular distances with channels (all zeros); ours sums
/// the disc over the channels, which with one transform is the sum of PINK's
/// per-channel squared distances.
#[test]
fn circular_distance_with_channels_sums_the_channels() {
    let case = cases()
        .into_iter()
        .find(|c| c["name"] == "circular_2ch")
        .unwrap();
    let data = open(case["data"].as_str().unwrap());
    let som = open(case["som"].as_str().unwrap());
    let o = options(&case["options"]);
    assert_eq!(o.euclidean_distance_shape, DistanceShape::Circular);
    let mapper = mapper_for(&data, &som, &o).unwrap();
    let n = data.n_entries().unwrap() as usize;
    let mut ours = Vec::new();
    mapper
        .map_entries(
            n,
            |r| tensorfmt_som::mapping::entry_values(&data, r),
            |_, d, _| {
                ours.extend_from_slice(d);
                Ok(())
            },
            &|_, _| Ok(()),
        )
        .unwrap();
    let channel = |k: usize| {
        let f = open(case["channel_maps"][k].as_str().unwrap());
        f.distances(0..n).unwrap().to_vec::<f32>().unwrap()
    };
    let (c0, c1) = (channel(0), channel(1));
    for (i, &v) in ours.iter().enumerate() {
        let want = ((c0[i] as f64).powi(2) + (c1[i] as f64).powi(2)).sqrt();
        assert!(
            ((v as f64 - want) / want).abs() < 1e-6,
            "{i}: {v} vs {want}"
        );
    }
}

/// `transform` at the (flip, angle) PINK recorded gives PINK's distance: the images
/// PINK compared are ours, pixel for pixel in the distance region.
#[test]
fn transforms_reproduce_pinks_distance_at_its_recorded_rotation() {
    for case in cases() {
        let Some(map_name) = case["map"].as_str() else {
            continue;
        };
        let data = open(case["data"].as_str().unwrap());
        let som = open(case["som"].as_str().unwrap());
        let map = open(map_name);
        let rf = open(case["rotflip"].as_str().unwrap());
        let o = options(&case["options"]);
        let g = mapper_for(&data, &som, &o).unwrap().geometry().clone();
        let region = g.region();
        for e in (0..data.n_entries().unwrap() as usize).step_by(3) {
            let image = data.entry(e).unwrap().to_vec::<f32>().unwrap();
            let dist = map.distances(e..e + 1).unwrap().to_vec::<f32>().unwrap();
            for (n, &pink_distance) in dist.iter().enumerate() {
                let r = rf.rotflip(e, n).unwrap();
                let t = transform_index(r.flipped(), r.angle, g.num_rot);
                let img = transform(
                    &image,
                    g.channels,
                    g.image_dim,
                    g.neuron_dim,
                    g.num_rot,
                    g.flip,
                    t,
                    Interpolation::Bilinear,
                )
                .unwrap();
                let neuron = som.neuron(n).unwrap().to_vec::<f32>().unwrap();
                let mut ed = 0f32;
                for &p in &region {
                    ed = (ed as f64 + ((neuron[p] - img[p]) as f64).powi(2)) as f32;
                }
                assert_eq!(
                    ed.sqrt(),
                    pink_distance,
                    "{} entry {e} neuron {n}",
                    case["name"]
                );
            }
        }
    }
}
