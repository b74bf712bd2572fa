//! Read a Caffe model and export its weights to safetensors, then read the export back
//! and check that every tensor matches, and go back to a weights-only caffemodel.
//!
//! ```sh
//! cargo run -p tensorfmt --example caffe_to_safetensors -- [IN.caffemodel] [OUT.safetensors]
//! ```
//!
//! Defaults: `testdata/caffe/v2_tiny.caffemodel`, written to the system temp directory.
//! Tensor names are `<layer>/<blob index>` (`conv1/0` weights, `conv1/1` bias), with
//! Caffe's shapes (`[out, in, kh, kw]` for convolutions) in row-major order.

use std::error::Error;
use std::path::{Path, PathBuf};

use tensorfmt::{Document, Format, Target};

/// What [`run`] did: how many tensors went through each step.
#[derive(Debug)]
pub struct Outcome {
    /// Tensors in the caffemodel.
    pub tensors: usize,
    /// Bytes of tensor data exported.
    pub bytes: usize,
}

/// Exports `input` to `output` (safetensors), checks the export, and writes the
/// safetensors file back as a weights-only caffemodel next to `output`, checked too.
pub fn run(input: &Path, output: &Path) -> Result<Outcome, Box<dyn Error>> {
    let model = Document::open(input)?;
    if model.file_format() != Format::Caffe {
        return Err(format!(
            "{} is a {} file, not Caffe",
            input.display(),
            model.file_format()
        )
        .into());
    }
    println!(
        "{}: {} ({} tensors)",
        input.display(),
        model.kind(),
        model.entries().len()
    );
    for w in model.warnings() {
        println!("  warning: {w}");
    }
    let mut bytes = 0;
    for e in &model {
        println!("  {:<24} {:<4} {}", e.name(), e.dtype(), e.shape());
        bytes += e.byte_len()?;
    }

    // The export streams blob by blob: no need to hold the whole model in memory.
    model.convert_to(output, Format::Safetensors)?;
    let export = Document::open(output)?;
    check_same(&model, &export)?;
    println!(
        "{}: {} tensors, {bytes} bytes of data, identical",
        output.display(),
        export.entries().len()
    );

    // And back: safetensors -> weights-only caffemodel (topology is not in safetensors).
    let again = output.with_extension("caffemodel");
    export.convert_to(&again, Target::new(Format::Caffe).with_kind("caffemodel"))?;
    check_same(&model, &Document::open(&again)?)?;
    println!("{}: round trip back to Caffe, identical", again.display());

    Ok(Outcome {
        tensors: model.entries().len(),
        bytes,
    })
}

/// Same names (as sets), dtypes, shapes and bytes.
fn check_same(a: &Document, b: &Document) -> Result<(), Box<dyn Error>> {
    let (mut na, mut nb) = (a.names(), b.names());
    na.sort();
    nb.sort();
    if na != nb {
        return Err(format!("tensor names differ: {na:?} vs {nb:?}").into());
    }
    for e in a {
        let (x, y) = (e.read()?, b.entry(e.name())?.read()?);
        if x != y {
            return Err(format!("tensor {} differs after the conversion", e.name()).into());
        }
    }
    Ok(())
}

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel)
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args_os().skip(1);
    let input = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| testdata("caffe/v2_tiny.caffemodel"));
    let output = args.next().map(PathBuf::from).unwrap_or_else(|| {
        let stem = input
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        std::env::temp_dir().join(format!("{stem}.safetensors"))
    });
    run(&input, &output)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_model_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("tiny.safetensors");
        let o = run(&testdata("caffe/v2_tiny.caffemodel"), &out).unwrap();
        assert_eq!((o.tensors, o.bytes), (3, (8 + 2 + 6) * 4));
        let st = Document::open(&out).unwrap();
        assert_eq!(st.entry("conv1/0").unwrap().shape().dims(), &[2, 1, 2, 2]);
        assert_eq!(
            st.entry("conv1/1")
                .unwrap()
                .read()
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
            vec![0.5, -0.5]
        );
    }

    #[test]
    fn rejects_a_file_that_is_not_caffe() {
        let dir = tempfile::tempdir().unwrap();
        let e = run(
            &testdata("core/model.safetensors"),
            &dir.path().join("x.safetensors"),
        );
        assert!(e.unwrap_err().to_string().contains("not Caffe"));
    }

    /// The real models of the shared corpus (V1 and V2), when it is present.
    #[test]
    fn corpus_models_round_trip() {
        let Some(dir) = tensorfmt::testing::corpus_dir(env!("CARGO_MANIFEST_DIR"), "caffe") else {
            return;
        };
        let tmp = tempfile::tempdir().unwrap();
        for name in [
            "v2_lenet_iter_10000.caffemodel",
            "v1_cifar10_quick_iter_4000.caffemodel",
        ] {
            let out = tmp.path().join(name).with_extension("safetensors");
            let o = run(&dir.join(name), &out).unwrap();
            assert!(o.tensors >= 4, "{name}");
        }
    }
}
