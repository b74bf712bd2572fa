//! PINK 2.5's mapping step (`Pink --cuda-off --map`), bit for bit (docs/pink.md):
//! every entry's distance to every neuron, minimised over the entry's spatial
//! transforms (rotations and flips, [`crate::transform`]), with the index of the best
//! transform (first minimum, as PINK with one thread), stored as
//! `sqrt(min squared distance)` and as PINK's `(flip, angle)` records.
//!
//! PINK's arithmetic is reproduced exactly: each squared difference is added to a
//! float32 sum through double (`ed += std::pow(a - b, 2)` with a float `ed`), in
//! PINK's pixel order, so the distances are PINK's to the last bit and its choice of
//! transform is the same even where two transforms nearly tie. The speed comes from
//! the layout, not from reordering: the distance-region pixels of [`LANES`] transforms
//! (the quarter turns and mirrors of one or two rotation steps) are stored
//! pixel-major side by side, so one pass over a neuron's pixels updates [`LANES`]
//! independent sums (vector lanes; PINK runs one sum at a time, each through a chain
//! of float/double conversions), and entries run in parallel on std threads.
//! Memory: per thread one block of [`LANES`] transforms (PINK holds all of an entry's
//! transforms at neuron size); entries are read and results written in batches.
//!
//! ```
//! use tensorfmt_som::mapping::{Mapper, MapOptions};
//! // One 4x4 neuron and the image it is, turned a quarter clockwise.
//! let neuron: Vec<f32> = (0..16).map(|v| v as f32).collect();
//! let image = tensorfmt_som::transform::align(&neuron, 1, 4, 4, 4, false, 1)?;
//! let options = MapOptions { num_rot: 4, flip: false, euclidean_distance_dim: Some(4), ..MapOptions::default() };
//! let mapper = Mapper::new(&neuron, 1, &[4, 4], &[4, 4], &options)?;
//! let (mut dist, mut best) = (vec![0f32; 1], vec![0u32; 1]);
//! mapper.map_image(&image, &mut mapper.workspace(), &mut dist, &mut best);
//! assert_eq!((dist[0], best[0]), (0.0, 1)); // transform 1: a quarter turn
//! # Ok::<(), tensorfmt_som::SomError>(())
//! ```

use std::borrow::Cow;
use std::io::Write;
use std::ops::Range;
use std::path::Path;
use std::sync::Mutex;

use tensorfmt_core::io::AtomicFile;

use crate::header::FileKind;
use crate::read::{MapLayout, RotFlip, SomFile};
use crate::transform::{angle_step, base_rotation, check_num_rot, flip, rotate_90, Interpolation};
use crate::write::{encode_header, WriteConfig};
use crate::{Result, SomError};

/// Transforms handled side by side by the distance kernel (one entry's transforms are
/// stored in blocks of this many, pixel-major).
pub const LANES: usize = 16;

/// The most rotations a mapping accepts (PINK sets no bound; 360 is its default).
pub const MAX_NUM_ROT: u32 = 1 << 16;

/// Shape of the region over which distances are summed (PINK's
/// `--euclidean-distance-shape`).
///
/// ```
/// use tensorfmt_som::mapping::DistanceShape;
/// assert_eq!("circular".parse::<DistanceShape>()?, DistanceShape::Circular);
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DistanceShape {
    /// The central `edd x edd` square (PINK's default).
    #[default]
    Quadratic,
    /// A disc of diameter about `edd` (`circular_euclidean_distance.h`).
    Circular,
}

impl DistanceShape {
    /// PINK's name (`quadratic`, `circular`).
    pub fn name(self) -> &'static str {
        match self {
            DistanceShape::Quadratic => "quadratic",
            DistanceShape::Circular => "circular",
        }
    }
}

impl std::str::FromStr for DistanceShape {
    type Err = SomError;
    fn from_str(s: &str) -> Result<DistanceShape> {
        match s.trim().to_ascii_lowercase().as_str() {
            "quadratic" => Ok(DistanceShape::Quadratic),
            "circular" => Ok(DistanceShape::Circular),
            _ => Err(SomError::MapOption {
                option: "euclidean_distance_shape",
                value: s.to_string(),
                reason: "expected quadratic or circular".into(),
            }),
        }
    }
}

/// The options of PINK's `--map`, with PINK's defaults.
///
/// ```
/// let o = tensorfmt_som::mapping::MapOptions::default();
/// assert_eq!((o.num_rot, o.flip, o.neuron_dim, o.euclidean_distance_dim), (360, true, None, None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapOptions {
    /// Rotations (`--numrot`): 1 or a multiple of 4; default 360.
    pub num_rot: u32,
    /// Also try every rotation mirrored (default true; `--flip-off` is false).
    pub flip: bool,
    /// Neuron side (`--neuron-dimension`): `None` takes the SOM's; given, it must equal it.
    pub neuron_dim: Option<usize>,
    /// Side of the distance region (`--euclidean-distance-dimension`): `None` is PINK's
    /// default ([`default_euclidean_distance_dim`]).
    pub euclidean_distance_dim: Option<usize>,
    /// Square or disc region (default quadratic).
    pub euclidean_distance_shape: DistanceShape,
    /// Rotation interpolation (default bilinear).
    pub interpolation: Interpolation,
    /// Worker threads (`None`: one per core).
    pub threads: Option<usize>,
}

impl Default for MapOptions {
    fn default() -> MapOptions {
        MapOptions {
            num_rot: 360,
            flip: true,
            neuron_dim: None,
            euclidean_distance_dim: None,
            euclidean_distance_shape: DistanceShape::Quadratic,
            interpolation: Interpolation::Bilinear,
            threads: None,
        }
    }
}

/// PINK's default neuron side for images of side `image_dim`: the image side for one
/// rotation, else `(uint)(2 * image_dim / sqrt(2) + 1)` (`InputData.cpp:454-458`).
///
/// ```
/// use tensorfmt_som::mapping::default_neuron_dim;
/// assert_eq!((default_neuron_dim(32, 360), default_neuron_dim(64, 360), default_neuron_dim(64, 1)), (46, 91, 64));
/// ```
pub fn default_neuron_dim(image_dim: usize, num_rot: u32) -> usize {
    if num_rot == 1 {
        image_dim
    } else {
        ((2 * image_dim) as f64 / 2f64.sqrt() + 1.0) as usize
    }
}

/// PINK's default distance-region side: the image side, times `sqrt(2) / 2` (truncated)
/// when rotating with a quadratic region (`InputData.cpp:472-477`).
///
/// ```
/// use tensorfmt_som::mapping::{default_euclidean_distance_dim, DistanceShape};
/// assert_eq!(default_euclidean_distance_dim(32, 360, DistanceShape::Quadratic), 22);
/// assert_eq!(default_euclidean_distance_dim(32, 360, DistanceShape::Circular), 32);
/// ```
pub fn default_euclidean_distance_dim(
    image_dim: usize,
    num_rot: u32,
    shape: DistanceShape,
) -> usize {
    if num_rot != 1 && shape == DistanceShape::Quadratic {
        (image_dim as f64 * 2f64.sqrt() / 2.0) as usize
    } else {
        image_dim
    }
}

/// Everything a mapping needs to know about its inputs, resolved and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapGeometry {
    /// Channels of images and neurons (1 for 2-D data).
    pub channels: usize,
    /// Image side.
    pub image_dim: usize,
    /// Neuron side.
    pub neuron_dim: usize,
    /// Distance-region side.
    pub euclidean_distance_dim: usize,
    /// Distance-region shape.
    pub shape: DistanceShape,
    /// Rotations.
    pub num_rot: u32,
    /// Mirrored transforms too.
    pub flip: bool,
    /// Rotation interpolation.
    pub interpolation: Interpolation,
}

/// `(channels, side)` of image or neuron dims `[d, d]` or `[c, d, d]`.
fn square(dims: &[usize], what: &'static str) -> Result<(usize, usize)> {
    let (c, h, w) = match dims {
        [h, w] => (1, *h, *w),
        [c, h, w] => (*c, *h, *w),
        _ => {
            return Err(SomError::MapOption {
                option: what,
                value: format!("dims {dims:?}"),
                reason: "PINK maps [d, d] or [channels, d, d] images".into(),
            })
        }
    };
    if h != w || h == 0 || c == 0 {
        return Err(SomError::MapOption {
            option: what,
            value: format!("dims {dims:?}"),
            reason: "must be square and not empty (PINK: \"Images must be quadratic\")".into(),
        });
    }
    Ok((c, h))
}

impl MapGeometry {
    /// Resolves `options` for images of dims `image_dims` and neurons of dims
    /// `neuron_dims` (`[d, d]` or `[channels, d, d]` each), with PINK's defaults and
    /// checks, each refusal naming the value.
    ///
    /// ```
    /// use tensorfmt_som::mapping::{MapGeometry, MapOptions};
    /// let g = MapGeometry::resolve(&[16, 16], &[23, 23], &MapOptions::default())?;
    /// assert_eq!((g.neuron_dim, g.euclidean_distance_dim, g.transforms()), (23, 11, 720));
    /// let e = MapGeometry::resolve(&[2, 16, 16], &[23, 23], &MapOptions::default()).unwrap_err();
    /// assert!(e.to_string().starts_with("channels 2"));
    /// # Ok::<(), tensorfmt_som::SomError>(())
    /// ```
    pub fn resolve(
        image_dims: &[usize],
        neuron_dims: &[usize],
        options: &MapOptions,
    ) -> Result<Self> {
        let (channels, image_dim) = square(image_dims, "image")?;
        let (neuron_channels, neuron_dim) = square(neuron_dims, "neuron")?;
        if channels != neuron_channels {
            return Err(SomError::MapOption {
                option: "channels",
                value: channels.to_string(),
                reason: format!(
                    "the data has {channels} channel(s) (dims {image_dims:?}), the SOM's neurons {neuron_channels} (dims {neuron_dims:?})"
                ),
            });
        }
        if let Some(nd) = options.neuron_dim {
            if nd != neuron_dim {
                return Err(SomError::MapOption {
                    option: "neuron_dim",
                    value: nd.to_string(),
                    reason: format!("the SOM's neurons are {neuron_dim}x{neuron_dim}"),
                });
            }
        }
        check_num_rot(options.num_rot, options.interpolation)?;
        if options.num_rot > MAX_NUM_ROT {
            return Err(SomError::MapOption {
                option: "num_rot",
                value: options.num_rot.to_string(),
                reason: format!("at most {MAX_NUM_ROT} rotations (steps of 0.0055 degrees)"),
            });
        }
        let edd = options.euclidean_distance_dim.unwrap_or_else(|| {
            default_euclidean_distance_dim(
                image_dim,
                options.num_rot,
                options.euclidean_distance_shape,
            )
        });
        // The value as given, or as PINK's default for these images.
        let refuse = |reason: String| {
            let default = if options.euclidean_distance_dim.is_none() {
                format!(" (PINK's default for {image_dim}x{image_dim} images)")
            } else {
                String::new()
            };
            Err(SomError::MapOption {
                option: "euclidean_distance_dim",
                value: format!("{edd}{default}"),
                reason,
            })
        };
        if edd == 0 || edd > neuron_dim {
            return refuse(format!(
                "must be 1..={neuron_dim}, the neuron side (PINK: \"euclidean distance dimension must be equal or smaller than neuron dimension\")"
            ));
        }
        let geometry = MapGeometry {
            channels,
            image_dim,
            neuron_dim,
            euclidean_distance_dim: edd,
            shape: options.euclidean_distance_shape,
            num_rot: options.num_rot,
            flip: options.flip,
            interpolation: options.interpolation,
        };
        // A region without a pixel would make every distance 0 and every best match
        // neuron 0 (PINK 2.5 writes that map for a circular edd 1: radius 1 / 2 = 0).
        if geometry.region().is_empty() {
            return refuse(format!(
                "the {} region of side {edd} holds no pixel (PINK's radius is edd / 2 = {}: every distance would be 0, every best match neuron 0); give a side of 2 or more, or the quadratic shape",
                geometry.shape.name(),
                edd / 2
            ));
        }
        Ok(geometry)
    }

    /// Number of spatial transforms: `num_rot`, twice that with flips.
    pub fn transforms(&self) -> u32 {
        self.num_rot * if self.flip { 2 } else { 1 }
    }

    /// Values in one image.
    pub fn image_len(&self) -> usize {
        self.channels * self.image_dim * self.image_dim
    }

    /// Values in one neuron.
    pub fn neuron_len(&self) -> usize {
        self.channels * self.neuron_dim * self.neuron_dim
    }

    /// Offsets into a `[channels, neuron_dim, neuron_dim]` neuron of the pixels the
    /// distance sums, in PINK's order (channel, row, column).
    ///
    /// Quadratic: rows and columns `[beg, beg + edd)`, `beg = (nd - edd) / 2`.
    /// Circular (`circular_euclidean_distance.h:38-60`): row `(nd - edd) / 2 + i` for
    /// `i < edd`, columns `[round(c - delta), round(c + delta))` with `c = nd / 2`,
    /// `delta = sqrt(2 r (i + 0.5) - (i + 0.5)^2)`, `r = edd / 2` (a row whose root is
    /// NaN is skipped, as in PINK); with channels the same disc in every channel (PINK
    /// 2.5 sums nothing there: a bug not copied, docs/pink.md).
    ///
    /// ```
    /// use tensorfmt_som::mapping::{MapGeometry, MapOptions, DistanceShape};
    /// let o = MapOptions { num_rot: 4, euclidean_distance_dim: Some(2), ..MapOptions::default() };
    /// let g = MapGeometry::resolve(&[4, 4], &[4, 4], &o)?;
    /// assert_eq!(g.region(), vec![5, 6, 9, 10]);
    /// # Ok::<(), tensorfmt_som::SomError>(())
    /// ```
    pub fn region(&self) -> Vec<usize> {
        let nd = self.neuron_dim;
        let edd = self.euclidean_distance_dim;
        let plane = nd * nd;
        let mut rows: Vec<(usize, Range<usize>)> = Vec::with_capacity(edd);
        match self.shape {
            DistanceShape::Quadratic => {
                let beg = (nd - edd) / 2;
                rows.extend((beg..beg + edd).map(|x| (x, beg..beg + edd)));
            }
            DistanceShape::Circular => {
                let center = (nd / 2) as f64;
                let radius = (edd / 2) as f64;
                for i in 0..edd {
                    let h = i as f64 + 0.5;
                    let delta = (2.0 * radius * h - h * h).sqrt();
                    if delta.is_nan() {
                        continue;
                    }
                    let lo = (center - delta).round().max(0.0) as usize;
                    let hi = ((center + delta).round().max(0.0) as usize).min(nd);
                    rows.push((i + (nd - edd) / 2, lo..hi.max(lo)));
                }
            }
        }
        let mut out = Vec::new();
        for c in 0..self.channels {
            for (x, cols) in &rows {
                out.extend(cols.clone().map(|y| c * plane + x * nd + y));
            }
        }
        out
    }
}

/// The `(flip, angle)` record PINK stores for transform `t` (`main_generic.h:188-196`):
/// `flip = t / num_rot`, `angle = float32(t % num_rot) * step` radians.
///
/// ```
/// use tensorfmt_som::mapping::rotflip;
/// let r = rotflip(363, 360);
/// assert_eq!((r.flip_byte, r.angle), (1, 3.0 * tensorfmt_som::transform::angle_step(360)));
/// ```
pub fn rotflip(t: u32, num_rot: u32) -> RotFlip {
    RotFlip {
        flip_byte: (t / num_rot) as u8,
        angle: (t % num_rot) as f32 * angle_step(num_rot),
    }
}

/// Scratch memory of one mapping thread ([`Mapper::workspace`]): one base image and
/// one block of [`LANES`] transforms' region pixels, whatever the number of
/// rotations (PINK holds every transform of an entry at neuron size).
#[derive(Debug)]
pub struct Workspace {
    /// The base image of one rotation step, `[channels, nd, nd]`.
    base: Vec<f32>,
    /// Region pixels of [`LANES`] transforms, pixel-major.
    block: Vec<f32>,
    /// Best squared distance per neuron so far.
    sums: Vec<f32>,
}

/// One lane of a block: which transform it holds and where its pixels come from.
#[derive(Debug, Clone, Copy)]
struct Lane {
    /// Rotation step `i` (the base image).
    step: u32,
    /// Index into [`Mapper::tables`] (quarter turns and mirror).
    table: usize,
    /// PINK's transform index `t`.
    t: u32,
}

/// What PINK's scan leaves when no transform gives a sum below FLT_MAX.
const NO_DISTANCE: f32 = 1.844_674_3e19;

/// A SOM prepared for mapping images of one geometry.
#[derive(Debug)]
pub struct Mapper {
    geometry: MapGeometry,
    neurons: usize,
    /// Region pixels of every neuron, `[neurons, region]`.
    neuron_regions: Vec<f32>,
    /// Per `(quarter turns, mirrored)`: where each region pixel of that transform of a
    /// base image comes from in the base image.
    tables: Vec<Vec<u32>>,
    /// The transforms, [`LANES`] (or fewer) a block, consecutive rotation steps
    /// together so that each block needs its steps' base images only.
    blocks: Vec<Vec<Lane>>,
    region_len: usize,
    threads: usize,
}

impl Mapper {
    /// Prepares `neurons` neurons of dims `neuron_dims` (`som` holds them in storage
    /// order) for images of dims `image_dims`.
    pub fn new(
        som: &[f32],
        neurons: usize,
        neuron_dims: &[usize],
        image_dims: &[usize],
        options: &MapOptions,
    ) -> Result<Mapper> {
        let geometry = MapGeometry::resolve(image_dims, neuron_dims, options)?;
        let nl = geometry.neuron_len();
        if neurons == 0 || neurons.checked_mul(nl) != Some(som.len()) {
            return Err(SomError::MapOption {
                option: "som",
                value: format!("{} values", som.len()),
                reason: format!("expected {neurons} neurons of {neuron_dims:?}"),
            });
        }
        let threads = options
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        let region = geometry.region();
        let region_len = region.len();
        // What the mapping will hold, before holding it: the neurons' regions, and per
        // thread a base image and a block of LANES transforms' regions.
        let per_thread = (nl as u64 + (LANES * region_len) as u64 + neurons as u64) * 4;
        tensorfmt_core::Limits::default().check_alloc(
            (neurons as u64 * region_len as u64 * 4)
                .saturating_add(per_thread.saturating_mul(threads as u64)),
        )?;
        let mut neuron_regions = Vec::with_capacity(neurons * region_len);
        for n in som.chunks_exact(nl) {
            neuron_regions.extend(region.iter().map(|&o| n[o]));
        }
        // PINK would give every entry sqrt(FLT_MAX) for such a neuron (a NaN sum never
        // wins its `<` scan), a number that looks like a distance.
        if let Some(i) = neuron_regions.iter().position(|v| !v.is_finite()) {
            return Err(SomError::MapOption {
                option: "som",
                value: format!("neuron {}", i / region_len.max(1)),
                reason: format!(
                    "it holds {} in the compared region; distances to it would be meaningless",
                    neuron_regions[i]
                ),
            });
        }
        // The quarter turns and the mirror are permutations: apply PINK's own
        // functions to an image of indices to learn where each pixel comes from.
        let nd = geometry.neuron_dim;
        let plane = nd * nd;
        let num_rot = geometry.num_rot;
        let quarters = if num_rot == 1 { 1 } else { 4 };
        let steps = if num_rot == 1 { 1 } else { num_rot / 4 };
        let mut tables = Vec::new();
        let mut kinds = Vec::new();
        let mut cur: Vec<u32> = (0..nl as u32).collect();
        let mut tmp = cur.clone();
        for q in 0..quarters {
            if q > 0 {
                for c in 0..geometry.channels {
                    let r = c * plane..(c + 1) * plane;
                    rotate_90(&cur[r.clone()], &mut tmp[r], nd);
                }
                std::mem::swap(&mut cur, &mut tmp);
            }
            tables.push(region.iter().map(|&o| cur[o]).collect());
            kinds.push((q, false));
            if geometry.flip {
                let mut f = cur.clone();
                for c in 0..geometry.channels {
                    let r = c * plane..(c + 1) * plane;
                    flip(&cur[r.clone()], &mut f[r], nd);
                }
                tables.push(region.iter().map(|&o| f[o]).collect());
                kinds.push((q, true));
            }
        }
        let per_step = tables.len();
        let steps_per_block = (LANES / per_step).max(1) as u32;
        let blocks = (0..steps)
            .step_by(steps_per_block as usize)
            .map(|first| {
                (first..(first + steps_per_block).min(steps))
                    .flat_map(|step| {
                        kinds
                            .iter()
                            .enumerate()
                            .map(move |(table, &(q, mirrored))| {
                                let k = if num_rot == 1 { 0 } else { q * steps + step };
                                let t = k + if mirrored { num_rot } else { 0 };
                                Lane { step, table, t }
                            })
                    })
                    .collect()
            })
            .collect();
        Ok(Mapper {
            geometry,
            neurons,
            neuron_regions,
            tables,
            blocks,
            region_len,
            threads,
        })
    }

    /// The resolved geometry.
    pub fn geometry(&self) -> &MapGeometry {
        &self.geometry
    }

    /// Number of neurons.
    pub fn neurons(&self) -> usize {
        self.neurons
    }

    /// Scratch memory for [`Mapper::map_image`]: one base image, one block of
    /// [`LANES`] transforms' region pixels and a sum per neuron.
    pub fn workspace(&self) -> Workspace {
        Workspace {
            base: vec![0.0; self.geometry.neuron_len()],
            block: vec![0.0; LANES * self.region_len],
            sums: vec![0.0; self.neurons],
        }
    }

    /// Maps one image (`[channels, d, d]` values) on this thread: `dist[n]` = PINK's
    /// distance to neuron `n`, `best[n]` the index of the best transform
    /// (`flip * num_rot + k`).
    ///
    /// # Panics
    /// When the slices' lengths do not match the geometry and neuron count.
    pub fn map_image(&self, image: &[f32], ws: &mut Workspace, dist: &mut [f32], best: &mut [u32]) {
        let g = &self.geometry;
        assert_eq!(image.len(), g.image_len(), "image length");
        assert_eq!((dist.len(), best.len()), (self.neurons, self.neurons));
        best.fill(0);
        let p_len = self.region_len;
        if p_len == 0 {
            // An empty region (a circular one of diameter 1): every distance is 0 and
            // the first transform wins, as in PINK.
            dist.fill(0.0);
            return;
        }
        let (d, nd) = (g.image_dim, g.neuron_dim);
        let step_angle = angle_step(g.num_rot);
        ws.sums.fill(f32::MAX);
        let mut built = None;
        for lanes in &self.blocks {
            for (l, lane) in lanes.iter().enumerate() {
                if built != Some(lane.step) {
                    for c in 0..g.channels {
                        base_rotation(
                            &image[c * d * d..(c + 1) * d * d],
                            d,
                            &mut ws.base[c * nd * nd..(c + 1) * nd * nd],
                            nd,
                            lane.step,
                            step_angle,
                        );
                    }
                    built = Some(lane.step);
                }
                let table = &self.tables[lane.table];
                for (slot, &from) in ws.block[l..].iter_mut().step_by(LANES).zip(table) {
                    *slot = ws.base[from as usize];
                }
            }
            for ((neuron, sum), bt) in self
                .neuron_regions
                .chunks_exact(p_len)
                .zip(ws.sums.iter_mut())
                .zip(best.iter_mut())
            {
                let acc = block_sums(neuron, &ws.block);
                for (lane, &v) in lanes.iter().zip(&acc) {
                    // PINK scans transforms in index order with a strict `<` from
                    // FLT_MAX: the smallest value wins, the smallest index among equal
                    // ones; NaN never does. Blocks come in another order, so ties are
                    // settled by the index.
                    if v < *sum || (v == *sum && lane.t < *bt) {
                        *sum = v;
                        *bt = lane.t;
                    }
                }
            }
        }
        for (d, &v) in dist.iter_mut().zip(&ws.sums) {
            *d = v.sqrt();
        }
    }

    /// Maps `n_entries` entries in order, in batches: `fetch(range)` returns those
    /// entries' values (`[len, channels, d, d]`), `sink(range, distances, transforms)`
    /// receives each batch's results (`[len, neurons]` each), `progress(done, total)`
    /// (in entries) is called at the start and after every batch. The entries of a
    /// batch are shared out among the threads; each thread holds one
    /// [`Workspace`] (a block of transforms, not all of them). Before each entry every
    /// thread checks [`tensorfmt_core::io::check_stop`], so a stop request ends the
    /// call with an error at the next entry.
    pub fn map_entries<'a>(
        &self,
        n_entries: usize,
        mut fetch: impl FnMut(Range<usize>) -> Result<Cow<'a, [f32]>>,
        mut sink: impl FnMut(Range<usize>, &[f32], &[u32]) -> Result<()>,
        progress: &dyn Fn(u64, u64) -> Result<()>,
    ) -> Result<()> {
        let image_len = self.geometry.image_len();
        let threads = self.threads.min(n_entries.max(1));
        // A few entries per thread, at most 1 MiB of input, a batch.
        let per_batch = (threads * 4)
            .min(((1usize << 20) / (4 * image_len).max(1)).max(threads))
            .max(1);
        let n = self.neurons;
        let workspaces: Vec<Mutex<Workspace>> =
            (0..threads).map(|_| Mutex::new(self.workspace())).collect();
        let mut dist = vec![0f32; per_batch * n];
        let mut best = vec![0u32; per_batch * n];
        progress(0, n_entries as u64)?;
        let mut start = 0;
        while start < n_entries {
            tensorfmt_core::io::check_stop()?;
            let end = (start + per_batch).min(n_entries);
            let len = end - start;
            let images = fetch(start..end)?;
            if images.len() != len * image_len {
                return Err(SomError::MapOption {
                    option: "data",
                    value: format!("{} values for entries {start}..{end}", images.len()),
                    reason: format!("expected {image_len} per entry"),
                });
            }
            let (d, b) = (&mut dist[..len * n], &mut best[..len * n]);
            self.run_batch(&images, d, b, &workspaces)?;
            // A sum that never fell below FLT_MAX: NaN or infinite pixels reached the
            // region, or the squares overflowed. PINK writes sqrt(FLT_MAX) there,
            // which best-match tools would take for a distance.
            if let Some(i) = d.iter().position(|&v| v == NO_DISTANCE) {
                return Err(SomError::MapOption {
                    option: "data",
                    value: format!("entry {}", start + i / n),
                    reason: format!(
                        "its distance to neuron {} is not a finite number: a NaN or infinite \
                         pixel in the compared region, or values whose squared differences \
                         overflow float32 (PINK writes sqrt(FLT_MAX) = {NO_DISTANCE:e} there)",
                        i % n
                    ),
                });
            }
            sink(start..end, d, b)?;
            start = end;
            progress(start as u64, n_entries as u64)?;
        }
        Ok(())
    }

    fn run_batch(
        &self,
        images: &[f32],
        dist: &mut [f32],
        best: &mut [u32],
        workspaces: &[Mutex<Workspace>],
    ) -> Result<()> {
        let (n, il) = (self.neurons, self.geometry.image_len());
        let work = Mutex::new(
            images
                .chunks_exact(il)
                .zip(dist.chunks_exact_mut(n).zip(best.chunks_exact_mut(n))),
        );
        let failed: Mutex<Option<SomError>> = Mutex::new(None);
        let worker = |ws: &Mutex<Workspace>| {
            let mut ws = ws.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let item = work.lock().unwrap_or_else(|e| e.into_inner()).next();
                let Some((image, (d, b))) = item else { break };
                if let Err(e) = tensorfmt_core::io::check_stop() {
                    failed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e.into());
                    break;
                }
                self.map_image(image, &mut ws, d, b);
            }
        };
        let busy = workspaces.len().min(images.len() / il.max(1)).max(1);
        if busy == 1 {
            worker(&workspaces[0]);
        } else {
            std::thread::scope(|s| {
                for ws in &workspaces[..busy] {
                    s.spawn(|| worker(ws));
                }
            });
        }
        match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// What [`map_files`] wrote.
#[derive(Debug, Clone)]
pub struct MapSummary {
    /// Entries mapped.
    pub entries: usize,
    /// Neurons of the SOM.
    pub neurons: usize,
    /// The SOM's map (written to both headers with layout code 0, as PINK writes it).
    pub map: MapLayout,
    /// The resolved options.
    pub geometry: MapGeometry,
    /// Catalogue ids carried into the outputs' comment blocks (0 when none).
    pub ids: usize,
}

fn need_kind(f: &SomFile, kind: FileKind, what: &'static str) -> Result<()> {
    if f.kind() == kind {
        Ok(())
    } else {
        Err(SomError::MapOption {
            option: what,
            value: format!("is a {} file", f.kind().name()),
            reason: format!("expected a {} file", kind.name()),
        })
    }
}

/// A [`Mapper`] for the SOM file `som` and the entries of the data file `data`.
pub fn mapper_for(data: &SomFile, som: &SomFile, options: &MapOptions) -> Result<Mapper> {
    need_kind(data, FileKind::Data, "data")?;
    need_kind(som, FileKind::Som, "som")?;
    let raw = som.som_tensor()?;
    let values = if raw.dtype() == tensorfmt_core::DType::F32 {
        raw.typed::<f32>()?
    } else {
        Cow::Owned(raw.cast(tensorfmt_core::DType::F32)?.to_vec::<f32>()?)
    };
    let mapper = Mapper::new(
        &values,
        som.neuron_count().unwrap_or(0),
        som.neuron_dims().unwrap_or(&[]),
        data.entry_dims().unwrap_or(&[]),
        options,
    );
    // The mapper keeps the distance regions it needs; the mapped SOM pages can go.
    tensorfmt_core::io::release_pages(raw.bytes());
    mapper
}

/// The f32 values of entries `r` of a data file (zero-copy when the file is f32 and aligned).
pub fn entry_values(data: &SomFile, r: Range<usize>) -> Result<Cow<'static, [f32]>> {
    let raw = data.entries(r)?;
    let values = raw
        .cast(tensorfmt_core::DType::F32)?
        .typed::<f32>()?
        .into_owned();
    // Done with those pages of the mapped file: resident memory stays one batch.
    tensorfmt_core::io::release_pages(raw.bytes());
    Ok(Cow::Owned(values))
}

/// Reads a data file's entries as f32 for the mapper: with `pread` into a buffer when
/// the file stores little-endian f32 (the file's pages are never mapped, so resident
/// memory is one batch whatever the page cache holds: a mapped file written in large
/// folios stays resident in pieces larger than a batch), else through the mapping
/// ([`entry_values`]).
#[derive(Debug)]
pub struct EntryReader {
    file: Option<std::fs::File>,
    data: SomFile,
    offset: u64,
    entry_len: usize,
}

impl EntryReader {
    /// A reader of `data` (opened from `path`).
    pub fn new(path: &Path, data: &SomFile) -> Result<EntryReader> {
        let f32_le =
            data.dtype() == Some(tensorfmt_core::DType::F32) && cfg!(target_endian = "little");
        let file = if f32_le {
            Some(tensorfmt_core::io::open_regular(path)?)
        } else {
            None
        };
        let entry_len = data.entry_dims().unwrap_or(&[]).iter().product();
        if file.is_some() {
            // The header was read through the mapping; nothing else will be.
            tensorfmt_core::io::release_pages(data.bytes());
        }
        Ok(EntryReader {
            file,
            data: data.clone(),
            offset: data.payload_offset() as u64,
            entry_len,
        })
    }

    /// The values of entries `r`.
    pub fn read(&mut self, r: Range<usize>) -> Result<Cow<'static, [f32]>> {
        let Some(file) = &self.file else {
            return entry_values(&self.data, r);
        };
        use std::os::unix::fs::FileExt;
        let mut v = vec![0f32; r.len() * self.entry_len];
        let mut bytes = vec![0u8; v.len() * 4];
        let at = self.offset + (r.start * self.entry_len * 4) as u64;
        file.read_exact_at(&mut bytes, at)?;
        for (x, c) in v.iter_mut().zip(bytes.chunks_exact(4)) {
            *x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        Ok(Cow::Owned(v))
    }
}

/// `Pink --map DATA MAP SOM [--store-rot-flip ROTFLIP]` with `options`: maps every
/// entry of `data` onto `som` and writes PINK's mapping file to `map_out` and, when
/// given, its rotation/flip file to `rotflip_out`, each through an
/// [`AtomicFile`] (nothing is left behind on error).
/// With `data_path` (the file `data` was opened from) entries are read with `pread`
/// ([`EntryReader`]), else through `data`'s mapping.
/// Headers are byte for byte PINK's (SOM layout code 0, even for hexagonal SOMs);
/// `ids` (one per entry) go into both files' comment blocks as `# id ...` lines
/// ([`crate::ids`]). `progress(done, total)` counts entries.
#[allow(clippy::too_many_arguments)] // PINK's --map: inputs, outputs, ids, options, progress
pub fn map_files(
    data: &SomFile,
    data_path: Option<&Path>,
    som: &SomFile,
    options: &MapOptions,
    map_out: &Path,
    rotflip_out: Option<&Path>,
    ids: Option<&[String]>,
    progress: &dyn Fn(u64, u64) -> Result<()>,
) -> Result<MapSummary> {
    // First the reader: it lets go of the data file's mapped pages.
    let mut reader = data_path.map(|p| EntryReader::new(p, data)).transpose()?;
    let mapper = mapper_for(data, som, options)?;
    let entries = data.n_entries().unwrap_or(0) as usize;
    let map = som.map_layout().cloned().expect("SOM files have a map");
    let comments = match ids {
        Some(ids) => {
            if ids.len() != entries {
                return Err(SomError::MapOption {
                    option: "ids",
                    value: format!("({} given)", ids.len()),
                    reason: format!(
                        "one per entry, and the data file has {entries} entries (leave ids out to write none: ids=False in Python, --no-ids in the CLI)"
                    ),
                });
            }
            crate::ids::id_comments(ids)?
        }
        None => Vec::new(),
    };
    let config = WriteConfig {
        comments,
        pink_cli_compat: true,
        ..WriteConfig::default()
    };
    let mut map_file = AtomicFile::create(map_out)?;
    map_file.write_all(&encode_header(
        FileKind::Mapping,
        entries as u64,
        Some(&map),
        &[],
        &config,
    )?)?;
    let mut rotflip_file = match rotflip_out {
        Some(p) => {
            let mut f = AtomicFile::create(p)?;
            f.write_all(&encode_header(
                FileKind::RotFlip,
                entries as u64,
                Some(&map),
                &[],
                &config,
            )?)?;
            Some(f)
        }
        None => None,
    };
    let num_rot = mapper.geometry().num_rot;
    let mut buf = Vec::new();
    mapper.map_entries(
        entries,
        |r| match reader.as_mut() {
            Some(reader) => reader.read(r),
            None => entry_values(data, r),
        },
        |_, dist, best| {
            buf.clear();
            buf.extend(dist.iter().flat_map(|v| v.to_le_bytes()));
            map_file.write_all(&buf)?;
            if let Some(f) = rotflip_file.as_mut() {
                buf.clear();
                for &t in best {
                    let r = rotflip(t, num_rot);
                    buf.push(r.flip_byte);
                    buf.extend_from_slice(&r.angle.to_le_bytes());
                }
                f.write_all(&buf)?;
            }
            Ok(())
        },
        progress,
    )?;
    if let Some(f) = rotflip_file {
        f.commit()?;
    }
    map_file.commit()?;
    Ok(MapSummary {
        entries,
        neurons: mapper.neurons(),
        map,
        geometry: mapper.geometry().clone(),
        ids: ids.map_or(0, <[String]>::len),
    })
}

/// PINK's squared distances of one neuron's region pixels to [`LANES`] transforms at
/// once (`block` pixel-major, [`LANES`] values per pixel): per lane, each squared
/// difference is added in double to a float32 sum, in pixel order, exactly as
/// `ed += std::pow(a - b, 2)` with a float `ed` (euclidean_distance.h:62).
#[inline]
fn block_sums(neuron: &[f32], block: &[f32]) -> [f32; LANES] {
    let mut acc = [0f32; LANES];
    for (&nv, row) in neuron.iter().zip(block.chunks_exact(LANES)) {
        let row: &[f32; LANES] = row.try_into().expect("LANES values");
        for l in 0..LANES {
            let d = nv - row[l];
            acc[l] = (acc[l] as f64 + d as f64 * d as f64) as f32;
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transform::transform;

    /// The blocked, lane-parallel mapper equals a plain loop over transforms and
    /// pixels (PINK's own structure) bit for bit, for flips, channels and both shapes.
    #[test]
    fn blocked_kernel_equals_the_plain_loop() {
        let mut seed = 1u32;
        let mut rnd = || {
            seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
            (seed >> 8) as f32 / (1u32 << 24) as f32
        };
        for (channels, num_rot, use_flip, shape, edd) in [
            (1, 12, true, DistanceShape::Quadratic, 5),
            (2, 8, false, DistanceShape::Quadratic, 6),
            (1, 20, true, DistanceShape::Circular, 7),
            (2, 1, true, DistanceShape::Circular, 8),
        ] {
            let (d, nd, neurons) = (7, 9, 3);
            let image: Vec<f32> = (0..channels * d * d).map(|_| rnd()).collect();
            let som: Vec<f32> = (0..neurons * channels * nd * nd).map(|_| rnd()).collect();
            let dims = |s| {
                if channels == 1 {
                    vec![s, s]
                } else {
                    vec![channels, s, s]
                }
            };
            let o = MapOptions {
                num_rot,
                flip: use_flip,
                euclidean_distance_dim: Some(edd),
                euclidean_distance_shape: shape,
                ..MapOptions::default()
            };
            let m = Mapper::new(&som, neurons, &dims(nd), &dims(d), &o).unwrap();
            let (mut dist, mut best) = (vec![0f32; neurons], vec![0u32; neurons]);
            m.map_image(&image, &mut m.workspace(), &mut dist, &mut best);
            let region = m.geometry().region();
            for n in 0..neurons {
                let neuron = &som[n * channels * nd * nd..(n + 1) * channels * nd * nd];
                let (mut bd, mut bt) = (f32::MAX, 0);
                for t in 0..m.geometry().transforms() {
                    let tr = transform(
                        &image,
                        channels,
                        d,
                        nd,
                        num_rot,
                        use_flip,
                        t,
                        Interpolation::Bilinear,
                    )
                    .unwrap();
                    let mut ed = 0f32;
                    for &o in &region {
                        ed = (ed as f64 + ((neuron[o] - tr[o]) as f64).powi(2)) as f32;
                    }
                    if ed < bd {
                        (bd, bt) = (ed, t);
                    }
                }
                assert_eq!(
                    (dist[n], best[n]),
                    (bd.sqrt(), bt),
                    "case {channels} {num_rot} {use_flip} {shape:?}, neuron {n}"
                );
            }
        }
    }

    #[test]
    fn circular_region_drops_the_nan_row_of_odd_diameters() {
        let o = |edd| MapOptions {
            num_rot: 4,
            euclidean_distance_dim: Some(edd),
            euclidean_distance_shape: DistanceShape::Circular,
            ..MapOptions::default()
        };
        let rows = |edd| {
            let g = MapGeometry::resolve(&[16, 16], &[23, 23], &o(edd)).unwrap();
            let mut r: Vec<usize> = g.region().iter().map(|p| p / 23).collect();
            r.dedup();
            r
        };
        assert_eq!(rows(12).len(), 12);
        assert_eq!(rows(13).len(), 12); // row 12 of 13 has a negative root
    }

    #[test]
    fn an_empty_comparison_region_is_refused_not_mapped_to_zero_distances() {
        // PINK 2.5 maps a circular edd 1 (radius 1 / 2 = 0: every row's root is NaN)
        // with every distance 0 and every best match neuron 0.
        for image in [[16usize, 16], [1, 1]] {
            let o = MapOptions {
                num_rot: 4,
                euclidean_distance_dim: (image[0] == 16).then_some(1),
                euclidean_distance_shape: DistanceShape::Circular,
                ..MapOptions::default()
            };
            let e = MapGeometry::resolve(&image, &[23, 23], &o)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("euclidean_distance_dim 1") && e.contains("circular"),
                "{e}"
            );
        }
        let o = MapOptions {
            num_rot: 4,
            euclidean_distance_dim: Some(2),
            euclidean_distance_shape: DistanceShape::Circular,
            ..MapOptions::default()
        };
        let g = MapGeometry::resolve(&[16, 16], &[23, 23], &o).unwrap();
        assert_eq!(g.region().len(), 4);
        let o = MapOptions {
            euclidean_distance_shape: DistanceShape::Quadratic,
            euclidean_distance_dim: Some(1),
            ..o
        };
        assert_eq!(
            MapGeometry::resolve(&[16, 16], &[23, 23], &o)
                .unwrap()
                .region()
                .len(),
            1
        );
    }

    #[test]
    fn non_finite_values_are_refused_not_mapped_to_pinks_placeholder() {
        let o = MapOptions {
            num_rot: 4,
            threads: Some(1),
            ..MapOptions::default()
        };
        let som = vec![0.5f32; 2 * 8 * 8];
        let m = Mapper::new(&som, 2, &[8, 8], &[8, 8], &o).unwrap();
        let mut images = vec![0.25f32; 3 * 64];
        let run = |images: &[f32]| {
            m.map_entries(
                3,
                |r| Ok(Cow::Owned(images[r.start * 64..r.end * 64].to_vec())),
                |_, _, _| Ok(()),
                &|_, _| Ok(()),
            )
        };
        run(&images).unwrap();
        images[64 + 27] = f32::NAN; // entry 1, in the compared region
        let e = run(&images).unwrap_err().to_string();
        assert!(
            e.contains("entry 1") && e.contains("not a finite number"),
            "{e}"
        );
        images[64 + 27] = 1e30; // squares overflow
        assert!(run(&images).unwrap_err().to_string().contains("entry 1"));
        let mut bad = som.clone();
        bad[64 + 27] = f32::INFINITY;
        let e = Mapper::new(&bad, 2, &[8, 8], &[8, 8], &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("neuron 1") && e.contains("inf"), "{e}");
    }

    #[test]
    fn refusals_name_the_value() {
        let d = MapOptions::default();
        let e = |image: &[usize], neuron: &[usize], o: &MapOptions| {
            MapGeometry::resolve(image, neuron, o)
                .unwrap_err()
                .to_string()
        };
        assert!(e(&[16, 15], &[23, 23], &d).contains("[16, 15]"));
        assert!(e(&[2, 16, 16], &[3, 23, 23], &d).starts_with("channels 2"));
        assert!(
            e(&[64, 64], &[44, 44], &d).starts_with("euclidean_distance_dim 45 (PINK's default")
        );
        let o = MapOptions {
            euclidean_distance_dim: Some(30),
            ..d.clone()
        };
        assert!(e(&[16, 16], &[23, 23], &o).starts_with("euclidean_distance_dim 30:"));
        let o = MapOptions {
            num_rot: 1 << 20,
            ..d.clone()
        };
        assert!(e(&[16, 16], &[23, 23], &o).starts_with("num_rot 1048576: at most 65536"));
        let o = MapOptions {
            num_rot: 10,
            ..d.clone()
        };
        assert!(e(&[16, 16], &[23, 23], &o).starts_with("num_rot 10:"));
        let o = MapOptions {
            neuron_dim: Some(20),
            ..d
        };
        assert!(e(&[16, 16], &[23, 23], &o).starts_with("neuron_dim 20:"));
    }
}
