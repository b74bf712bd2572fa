//! Load a primitiv model (or parameter/tensor file) into `ndarray` arrays and print
//! each array's shape and sum. In your own project, enable the `ndarray` feature:
//! `tensorfmt = { ..., features = ["ndarray"] }` (this crate's examples have it on).
//!
//! ```sh
//! cargo run -p tensorfmt --example primitiv_to_ndarray -- [MODEL.data]
//! ```
//!
//! Default: `testdata/primitiv/model_nested_adam.data`. Names are the model's key
//! paths joined by dots (`enc.w`), optimizer statistics after a slash
//! (`enc.w/Adam.m1`). primitiv stores column-major matrices; the facade hands them
//! over in row-major (numpy) order with the logical shape, so `a[[i, j]]` is row i,
//! column j as in primitiv.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::{Path, PathBuf};

use tensorfmt::ndarray::{ArrayD, Axis, Ix2};
use tensorfmt::{Document, Format};

/// Every tensor of the file as an `f32` array, by name.
pub fn run(path: &Path) -> Result<BTreeMap<String, ArrayD<f32>>, Box<dyn Error>> {
    let doc = Document::open(path)?;
    if doc.file_format() != Format::Primitiv {
        return Err(format!(
            "{} is a {} file, not primitiv",
            path.display(),
            doc.file_format()
        )
        .into());
    }
    println!("{}: primitiv {}", path.display(), doc.kind());
    let mut arrays = BTreeMap::new();
    for entry in &doc {
        let a: ArrayD<f32> = entry.to_ndarray::<f32>()?;
        println!(
            "  {:<52} {:<10} sum {:>10.4}",
            entry.name(),
            format!("{:?}", a.shape()),
            a.sum()
        );
        if let Ok(m) = a.view().into_dimensionality::<Ix2>() {
            println!("  {:<52} row sums {}", "", m.sum_axis(Axis(1)));
        }
        arrays.insert(entry.name().to_string(), a);
    }
    Ok(arrays)
}

fn main() -> Result<(), Box<dyn Error>> {
    let path = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../testdata/primitiv/model_nested_adam.data")
        });
    let arrays = run(&path)?;
    let total: usize = arrays.values().map(|a| a.len()).sum();
    println!("{} arrays, {total} values", arrays.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfmt::ndarray::{arr1, arr2};

    fn testdata(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/primitiv")
            .join(name)
    }

    #[test]
    fn model_arrays_have_primitiv_shapes_and_values() {
        let a = run(&testdata("model_nested_adam.data")).unwrap();
        // enc.w is 3 x 2, stored column-major as 10..15.
        assert_eq!(
            a["enc.w"],
            arr2(&[[10f32, 13.0], [11.0, 14.0], [12.0, 15.0]]).into_dyn()
        );
        assert_eq!(a["dec.w"], arr2(&[[20f32, 22.0], [21.0, 23.0]]).into_dyn());
        assert_eq!(a["b"], arr1(&[0.5f32, -0.5]).into_dyn());
        assert_eq!(a["b/Adam.m1"], arr1(&[0.05f32, -0.05]).into_dyn());
        assert_eq!(a["dec.w/Adam.m1"].shape(), &[2, 2]);
        assert_eq!(
            a["dec.attn.a_parameter_name_that_is_exactly_40_char"].sum(),
            7.0
        );
    }

    #[test]
    fn parameter_files_and_wrong_formats() {
        let a = run(&testdata("parameter_2x3_stats.data")).unwrap();
        assert_eq!(a["value"].shape(), &[2, 3]);
        let e =
            run(&Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../testdata/core/model.safetensors"));
        assert!(e.unwrap_err().to_string().contains("not primitiv"));
    }
}
