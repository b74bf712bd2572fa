//! Turn a folder of numpy images into a PINK data file, train a small self-organising
//! map on them in plain Rust, save it as a PINK SOM file and render it to PNG.
//!
//! ```sh
//! cargo run -p tensorfmt --example numpy_to_pink -- [FOLDER_OF_NPY] [OUT_DIR]
//! ```
//!
//! Each `.npy` file holds one 2-D image (`[h, w]`; singleton axes such as `[1, h, w]`
//! are dropped), any numeric dtype; all images have the same shape. Without a folder,
//! 120 images of 16 x 16 blurred bars (random angle and offset) are generated first.
//! Outputs, in OUT_DIR (default: the system temp directory): `images.bin` (PINK data),
//! `som.bin` (PINK SOM, 6 x 6 cartesian) and `som.png`.

use std::error::Error;
use std::path::{Path, PathBuf};

use tensorfmt::render::{render_path, write_png, RenderOptions};
use tensorfmt::som::{DataWriter, WriteConfig};
use tensorfmt::{DType, Document, Format, Order, Target, Tensor};

/// The SOM grid side.
pub const GRID: usize = 6;

/// What [`run`] wrote.
#[derive(Debug)]
pub struct Outcome {
    /// Number of images.
    pub images: usize,
    /// Image shape `[h, w]`.
    pub dims: [usize; 2],
    /// Mean distance of an image to its best-matching neuron before and after training.
    pub quantisation_error: (f32, f32),
    /// The PINK data file, the SOM file and the picture.
    pub data: PathBuf,
    /// The PINK SOM file.
    pub som: PathBuf,
    /// The rendered SOM.
    pub png: PathBuf,
}

/// npy folder -> `images.bin` -> trained SOM -> `som.bin` + `som.png` in `out_dir`.
pub fn run(npy_dir: &Path, out_dir: &Path, epochs: usize) -> Result<Outcome, Box<dyn Error>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(npy_dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy")));
    files.sort();
    if files.is_empty() {
        return Err(format!("no .npy files in {}", npy_dir.display()).into());
    }

    // 1. Stream the images into a PINK data file, one entry at a time.
    std::fs::create_dir_all(out_dir)?;
    let data_path = out_dir.join("images.bin");
    let mut writer: Option<DataWriter<_>> = None;
    let mut dims = [0, 0];
    for f in &files {
        let image = load_image(f)?;
        let d = [image.dims()[0], image.dims()[1]];
        let w = match &mut writer {
            Some(w) if d == dims => w,
            Some(_) => {
                return Err(
                    format!("{}: shape {d:?}, the first image is {dims:?}", f.display()).into(),
                )
            }
            None => {
                dims = d;
                writer.insert(DataWriter::create(&data_path, &d, &WriteConfig::default())?)
            }
        };
        w.append(&image)?;
    }
    let n = writer.map_or(Ok(0), |w| w.commit())? as usize;
    println!(
        "{}: PINK data file, {n} images of {} x {}",
        data_path.display(),
        dims[0],
        dims[1]
    );

    // 2. Read them back through the facade (zero copy) and train the map.
    let data = Document::open(&data_path)?;
    let images = data
        .entries()
        .next()
        .ok_or("empty data file")?
        .read()?
        .to_vec::<f32>()?;
    let dim = dims[0] * dims[1];
    let mut som = initial_som(&images, dim);
    let before = quantisation_error(&som, &images, dim);
    train(&mut som, &images, dim, epochs);
    let after = quantisation_error(&som, &images, dim);
    println!("trained a {GRID} x {GRID} SOM for {epochs} epochs: quantisation error {before:.3} -> {after:.3}");

    // 3. Save it as a PINK SOM file ([som rows, som cols, h, w]) and draw it.
    let som_path = out_dir.join("som.bin");
    let som_tensor = Tensor::from_vec(som, [GRID, GRID, dims[0], dims[1]], Order::RowMajor)?;
    let target = Target::new(Format::Som).with_kind("som");
    tensorfmt::save_to(
        &som_path,
        &target,
        &[("som".into(), som_tensor)],
        &Default::default(),
    )?;
    let png_path = out_dir.join("som.png");
    let image = render_path(&som_path, &RenderOptions::default())?;
    write_png(&image, &png_path)?;
    println!(
        "{}: {} x {} pixels",
        png_path.display(),
        image.width,
        image.height
    );

    Ok(Outcome {
        images: n,
        dims,
        quantisation_error: (before, after),
        data: data_path,
        som: som_path,
        png: png_path,
    })
}

/// One `.npy` image as a 2-D f32 tensor.
fn load_image(path: &Path) -> Result<Tensor, Box<dyn Error>> {
    let doc = Document::open(path)?;
    let entry = doc
        .entries()
        .next()
        .ok_or_else(|| format!("{}: no array", path.display()))?;
    let t = entry.read()?;
    let t = if t.dtype() == DType::F32 {
        t
    } else {
        t.cast(DType::F32)?
    };
    let kept: Vec<usize> = t.dims().iter().copied().filter(|&d| d != 1).collect();
    if kept.len() != 2 {
        return Err(format!("{}: shape {} is not a 2-D image", path.display(), t.shape()).into());
    }
    Ok(Tensor::from_vec(
        t.to_order(Order::RowMajor)?.to_vec::<f32>()?,
        kept,
        Order::RowMajor,
    )?)
}

/// Neurons start as evenly spaced data samples blended with the data mean.
fn initial_som(images: &[f32], dim: usize) -> Vec<f32> {
    let n = images.len() / dim;
    let mut mean = vec![0f32; dim];
    for x in images.chunks(dim) {
        mean.iter_mut().zip(x).for_each(|(m, v)| *m += v / n as f32);
    }
    (0..GRID * GRID)
        .flat_map(|k| {
            let x = &images[(k * n / (GRID * GRID)) * dim..][..dim];
            x.iter()
                .zip(&mean)
                .map(|(v, m)| 0.2 * v + 0.8 * m)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn best_match(som: &[f32], x: &[f32]) -> (usize, f32) {
    som.chunks(x.len())
        .map(|w| w.iter().zip(x).map(|(a, b)| (a - b) * (a - b)).sum::<f32>())
        .enumerate()
        .fold(
            (0, f32::INFINITY),
            |best, (k, d)| if d < best.1 { (k, d) } else { best },
        )
}

/// Kohonen training: for every image, pull the best-matching neuron and its grid
/// neighbours (Gaussian neighbourhood) towards it; radius and rate shrink over time.
fn train(som: &mut [f32], images: &[f32], dim: usize, epochs: usize) {
    let n = images.len() / dim;
    let steps = (epochs * n).max(1) as f32;
    let (sigma0, sigma1, rate0, rate1) = (GRID as f32 / 2.0, 0.6f32, 0.5f32, 0.02f32);
    let mut t = 0.0;
    for epoch in 0..epochs {
        for i in 0..n {
            let x = &images[((i * 37 + epoch * 11) % n) * dim..][..dim]; // a fixed shuffle
            let frac = t / steps;
            let sigma = sigma0 * (sigma1 / sigma0).powf(frac);
            let rate = rate0 * (rate1 / rate0).powf(frac);
            let (bmu, _) = best_match(som, x);
            let (by, bx) = ((bmu / GRID) as f32, (bmu % GRID) as f32);
            for (k, w) in som.chunks_mut(dim).enumerate() {
                let d2 = ((k / GRID) as f32 - by).powi(2) + ((k % GRID) as f32 - bx).powi(2);
                let h = rate * (-d2 / (2.0 * sigma * sigma)).exp();
                w.iter_mut().zip(x).for_each(|(w, v)| *w += h * (v - *w));
            }
            t += 1.0;
        }
    }
}

fn quantisation_error(som: &[f32], images: &[f32], dim: usize) -> f32 {
    let n = images.len() / dim;
    images
        .chunks(dim)
        .map(|x| best_match(som, x).1.sqrt())
        .sum::<f32>()
        / n as f32
}

/// Writes `count` 16 x 16 images of a blurred bar (angle and offset from a fixed
/// pseudo-random sequence) as `img_000.npy`, ... into `dir`.
pub fn generate_images(dir: &Path, count: usize) -> Result<(), Box<dyn Error>> {
    std::fs::create_dir_all(dir)?;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f32 / (1u64 << 53) as f32
    };
    let side = 16;
    for i in 0..count {
        let angle = uniform() * std::f32::consts::PI;
        let offset = (uniform() - 0.5) * 8.0;
        let (s, c) = angle.sin_cos();
        let mut v = Vec::with_capacity(side * side);
        for y in 0..side {
            for x in 0..side {
                let (px, py) = (x as f32 - 7.5, y as f32 - 7.5);
                let d = px * s - py * c - offset; // distance from the bar's centre line
                v.push((-d * d / 4.5).exp());
            }
        }
        let t = Tensor::from_vec(v, [side, side], Order::RowMajor)?;
        let p = dir.join(format!("img_{i:03}.npy"));
        tensorfmt::save(&p, Format::Npy, &[("image".into(), t)], &Default::default())?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args_os().skip(1);
    let out_default = std::env::temp_dir().join("tensorfmt_numpy_to_pink");
    let (npy_dir, out_dir) = match (args.next(), args.next()) {
        (Some(d), out) => (PathBuf::from(d), out.map_or(out_default, PathBuf::from)),
        (None, _) => {
            let d = out_default.join("npy");
            generate_images(&d, 120)?;
            println!("generated 120 images in {}", d.display());
            (d, out_default)
        }
    };
    run(&npy_dir, &out_dir, 20)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_become_a_pink_data_file_and_a_trained_som() {
        let dir = tempfile::tempdir().unwrap();
        let npy = dir.path().join("npy");
        generate_images(&npy, 60).unwrap();
        std::fs::write(npy.join("notes.txt"), "not an image").unwrap();
        let o = run(&npy, dir.path(), 10).unwrap();
        assert_eq!((o.images, o.dims), (60, [16, 16]));

        // The data file holds the images exactly, in file-name order.
        let data = Document::open(&o.data).unwrap();
        assert_eq!(
            (data.file_format(), data.kind().as_str()),
            (Format::Som, "data")
        );
        let first = load_image(&npy.join("img_000.npy")).unwrap();
        let stored = data.entries().next().unwrap().read().unwrap();
        assert_eq!(stored.dims(), &[60, 16, 16]);
        assert_eq!(
            stored.slice_outer(0, 1).unwrap().to_vec::<f32>().unwrap(),
            first.to_vec::<f32>().unwrap()
        );

        // Training helped, and the SOM file reads back with the trained neurons.
        let (before, after) = o.quantisation_error;
        assert!(after < 0.8 * before, "{before} -> {after}");
        let som = Document::open(&o.som).unwrap();
        assert_eq!(som.kind(), "SOM (cartesian 6x6)");
        let entry = som
            .entries()
            .max_by_key(|e| e.shape().numel().unwrap())
            .unwrap();
        let w = entry.read().unwrap().to_vec::<f32>().unwrap();
        assert_eq!(w.len(), GRID * GRID * 256);
        // The map is ordered: grid neighbours are more alike than neurons in general.
        let dist = |a: usize, b: usize| -> f32 {
            let (x, y) = (&w[a * 256..][..256], &w[b * 256..][..256]);
            x.iter()
                .zip(y)
                .map(|(p, q)| (p - q) * (p - q))
                .sum::<f32>()
                .sqrt()
        };
        let mean = |pairs: &[(usize, usize)]| {
            pairs.iter().map(|&(a, b)| dist(a, b)).sum::<f32>() / pairs.len() as f32
        };
        let all: Vec<_> = (0..GRID * GRID)
            .flat_map(|a| (0..a).map(move |b| (a, b)))
            .collect();
        let adjacent: Vec<_> = (0..GRID * GRID)
            .filter(|k| k % GRID + 1 < GRID)
            .map(|k| (k, k + 1))
            .collect();
        assert!(
            mean(&adjacent) < 0.6 * mean(&all),
            "{} vs {}",
            mean(&adjacent),
            mean(&all)
        );

        // A PNG was written: signature and the size the renderer reported.
        let png = std::fs::read(&o.png).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }

    #[test]
    fn bad_folders_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert!(run(dir.path(), dir.path(), 1)
            .unwrap_err()
            .to_string()
            .contains("no .npy"));
        let t = Tensor::from_vec(vec![0f32; 8], [2, 2, 2], Order::RowMajor).unwrap();
        tensorfmt::save(
            &dir.path().join("cube.npy"),
            Format::Npy,
            &[("c".into(), t)],
            &Default::default(),
        )
        .unwrap();
        assert!(run(dir.path(), dir.path(), 1)
            .unwrap_err()
            .to_string()
            .contains("not a 2-D image"));
    }
}
