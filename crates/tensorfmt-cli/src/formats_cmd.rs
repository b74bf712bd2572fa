//! `tensorfmt formats`: every format, what is read and written, its file kinds and
//! extensions.

use std::fmt::Write as _;

use serde_json::{json, Value};
use tensorfmt::Format;

use crate::output::{emit, emit_json};
use crate::Failure;

/// One file kind: its name, what it holds, and (for written kinds) the `--to` value
/// that selects it.
struct Kind {
    name: &'static str,
    what: &'static str,
    to: &'static str,
}

const fn kind(name: &'static str, what: &'static str, to: &'static str) -> Kind {
    Kind { name, what, to }
}

/// What tensorfmt does with one format.
struct Row {
    format: Format,
    title: &'static str,
    reads: &'static [Kind],
    writes: &'static [Kind],
}

/// The table, in [`Format::ALL`] order.
const TABLE: [Row; 8] = [
    Row {
        format: Format::Npy,
        title: "numpy array",
        reads: &[kind(
            "array",
            "one array: any dtype, C or Fortran order, either byte order",
            "",
        )],
        writes: &[kind("array", "one array, numpy >= 1.24 header", "npy")],
    },
    Row {
        format: Format::Npz,
        title: "numpy archive",
        reads: &[kind(
            "archive",
            "named arrays, stored or deflated members",
            "",
        )],
        writes: &[kind(
            "archive",
            "named arrays, stored members (numpy.savez)",
            "npz",
        )],
    },
    Row {
        format: Format::Safetensors,
        title: "Hugging Face safetensors",
        reads: &[kind("tensors", "named tensors and __metadata__", "")],
        writes: &[kind("tensors", "named tensors", "safetensors")],
    },
    Row {
        format: Format::Pvp,
        title: "PetaVision PVP",
        reads: &[
            kind(
                "dense",
                "dense activity (filetype 4; obsolete filetype 1)",
                "",
            ),
            kind(
                "sparse",
                "sparse activity, binary (2) or with values (6)",
                "",
            ),
            kind("weights", "shared (5) and non-shared (3) weights", ""),
        ],
        writes: &[
            kind("dense", "dense activity from `values`", "pvp:dense"),
            kind(
                "sparse",
                "sparse activity from CSR `indptr`/`indices`(/`data`)",
                "pvp:sparse",
            ),
            kind("weights", "shared weights from `weights`", "pvp:weights"),
        ],
    },
    Row {
        format: Format::Som,
        title: "PINK SOM binary",
        reads: &[
            kind("som-data", "training data (images), v2 and legacy", ""),
            kind("som", "a trained SOM, cartesian or hexagonal", ""),
            kind("mapping", "distances of each entry to every neuron", ""),
            kind("rotflip", "best rotation/flip per entry and neuron", ""),
        ],
        writes: &[
            kind("som-data", "training data from `data`", "som-data"),
            kind("som", "a SOM from `som` (--hex: hexagonal)", "som:som"),
            kind("som-mapping", "a mapping from `distances`", "som-mapping"),
            kind("som-rotflip", "rotations/flips", "som-rotflip"),
        ],
    },
    Row {
        format: Format::Primitiv,
        title: "primitiv MessagePack",
        reads: &[
            kind("shape", "a Shape", ""),
            kind("tensor", "a Tensor", ""),
            kind("parameter", "a Parameter (value and stats)", ""),
            kind("model", "a Model (named parameters)", ""),
            kind("optimizer", "an Optimizer (configs and counters)", ""),
        ],
        writes: &[
            kind(
                "model",
                "a Model from `<key>.<key>` names",
                "primitiv:model",
            ),
            kind(
                "parameter",
                "a Parameter from `value` and stats",
                "primitiv:parameter",
            ),
            kind("tensor", "a Tensor from one tensor", "primitiv:tensor"),
        ],
    },
    Row {
        format: Format::Onnx,
        title: "ONNX",
        reads: &[
            kind("model", "a model's initializers", ""),
            kind("weights", "a graph of initializers only", ""),
        ],
        writes: &[kind("weights", "every tensor as an initializer", "onnx")],
    },
    Row {
        format: Format::Caffe,
        title: "Caffe protobuf",
        reads: &[
            kind(
                "caffemodel",
                "a net's weights (V0, V1 and V2 NetParameter)",
                "",
            ),
            kind("binaryproto", "a mean file (BlobProto)", ""),
            kind("blobprotovector", "a BlobProtoVector", ""),
            kind("solverstate", "a solver state (history blobs)", ""),
        ],
        writes: &[
            kind(
                "caffemodel",
                "a V2 net from `<layer>/<i>` names",
                "caffemodel",
            ),
            kind("binaryproto", "a mean file from one tensor", "binaryproto"),
            kind(
                "blobprotovector",
                "every tensor as a BlobProtoVector",
                "blobprotovector",
            ),
            kind(
                "solverstate",
                "a solver state from `history/<i>`",
                "solverstate",
            ),
        ],
    },
];

/// Every `--to` value of the table, in its order (what `formats --json` lists as `to`).
pub fn to_values() -> Vec<&'static str> {
    TABLE
        .iter()
        .flat_map(|r| r.writes.iter().map(|k| k.to))
        .collect()
}

/// The help of `convert --to`, from the table: the format names, then every other value.
pub fn to_help() -> String {
    let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
    let kinds: Vec<&str> = to_values()
        .into_iter()
        .filter(|t| !names.contains(t))
        .collect();
    format!(
        "Output format (default: from the output extension): {}; or a file kind: {} \
         (`tensorfmt formats` describes each)",
        names.join(", "),
        kinds.join(", ")
    )
}

fn kinds_json(kinds: &[Kind], written: bool) -> Value {
    Value::Array(
        kinds
            .iter()
            .map(|k| {
                let mut v = json!({ "name": k.name, "description": k.what });
                if written {
                    v["to"] = json!(k.to);
                }
                v
            })
            .collect(),
    )
}

/// The JSON document of `formats --json` (documented in `docs/cli.md`).
fn table_json() -> Value {
    let formats: Vec<Value> = TABLE
        .iter()
        .map(|r| {
            json!({
                "name": r.format.name(),
                "description": r.title,
                "extensions": r.format.extensions(),
                "enabled": r.format.is_enabled(),
                "reads": !r.reads.is_empty(),
                "writes": !r.writes.is_empty(),
                "read_kinds": kinds_json(r.reads, false),
                "write_kinds": kinds_json(r.writes, true),
                "settings": r
                    .format
                    .settings_described()
                    .into_iter()
                    .map(|(s, kinds)| json!({ "setting": s, "kinds": kinds }))
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "formats": formats })
}

fn table_text() -> String {
    let mut out = String::new();
    for r in &TABLE {
        let exts: Vec<String> = r
            .format
            .extensions()
            .iter()
            .map(|e| format!(".{e}"))
            .collect();
        let off = if r.format.is_enabled() {
            ""
        } else {
            "  (not compiled in)"
        };
        let _ = writeln!(
            out,
            "{:12} {} ({}){off}",
            r.format.name(),
            r.title,
            exts.join(", ")
        );
        for k in r.reads {
            let _ = writeln!(out, "  reads   {:16} {}", k.name, k.what);
        }
        for k in r.writes {
            let _ = writeln!(out, "  writes  {:16} {}  [--to {}]", k.name, k.what, k.to);
        }
        if !r.writes.is_empty() {
            for (setting, kinds) in r.format.settings_described() {
                let kinds = if kinds.is_empty() {
                    String::new()
                } else {
                    format!("  ({})", kinds.join(", "))
                };
                let _ = writeln!(out, "  --set   {setting}{kinds}");
            }
        }
    }
    out.push_str(
        "\nThe input format is detected from the content, then the extension (--from overrides).\n",
    );
    out
}

/// `tensorfmt formats [--json]`.
pub fn formats(as_json: bool) -> Result<(), Failure> {
    if as_json {
        emit_json(&table_json());
    } else {
        emit(&table_text());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfmt::Target;

    #[test]
    fn table_follows_format_all() {
        let names: Vec<Format> = TABLE.iter().map(|r| r.format).collect();
        assert_eq!(names, Format::ALL);
    }

    #[test]
    fn every_written_kind_is_a_valid_to_value() {
        for r in &TABLE {
            for k in r.writes {
                let t: Target = k.to.parse().unwrap_or_else(|e| panic!("{}: {e}", k.to));
                assert_eq!(t.format, r.format, "{}", k.to);
                if r.format.write_kinds().is_empty() {
                    assert_eq!(t.kind, None);
                } else {
                    assert_eq!(t.kind.as_deref(), Some(k.name), "{}", k.to);
                }
            }
            // The facade's list of kinds, in the same order.
            let ours: Vec<&str> = r.writes.iter().map(|k| k.name).collect();
            if !r.format.write_kinds().is_empty() {
                assert_eq!(ours, r.format.write_kinds(), "{}", r.format);
            }
        }
    }
}
