//! # tensorfmt-fuzzing
//!
//! The bodies of the fuzz targets in `fuzz/` (a cargo-fuzz workspace of its own, built
//! only by `cargo +nightly fuzz`). Each target there is a few lines calling one function
//! here, so the bodies are compiled by `cargo build`/`cargo test` of this workspace and
//! run by this crate's tests over the repository's fixtures (`testdata/`, the fuzz
//! seeds), deterministic mutations of them and a few thousand fixed-seed pseudo-random
//! byte strings: an API change breaks the build, a writer or reader policy change
//! breaks a test, instead of either waiting for the next fuzzing campaign.
//!
//! Readers (any bytes: Ok or an error, never a panic; what opens is read whole):
//! [`pvp()`], [`som()`], [`primitiv()`], [`caffe()`], [`caffe_prototxt()`], [`interop()`].
//! Structured round trips (an [`arbitrary`] description from the bytes -> our writer
//! -> our reader -> equal): [`pvp_roundtrip()`], [`som_roundtrip()`],
//! [`primitiv_roundtrip()`], [`caffe_roundtrip()`], and [`provenance()`] (mutated
//! carried metadata through `provenance::restore`). The `caffe_to_onnx` body lives
//! beside the lowering it exercises (`tensorfmt_lower::fuzzing`), tested there over
//! mutated corpus nets.
//!
//! Not published; only `fuzz/` and tests may depend on it (a tidy rule).
//!
//! ```
//! // Any bytes: an error, not a panic.
//! assert!(!tensorfmt_fuzzing::caffe_prototxt(b"layer { type: "));
//! // The round trips say which kind of description they wrote and read back.
//! let _kind: Option<&'static str> = tensorfmt_fuzzing::pvp_roundtrip(&[7; 64]);
//! ```

mod caffe;
mod caffe_prototxt;
mod caffe_roundtrip;
mod interop;
mod primitiv;
mod primitiv_roundtrip;
mod provenance;
mod pvp;
mod pvp_roundtrip;
mod som;
mod som_roundtrip;

pub use caffe::caffe;
pub use caffe_prototxt::caffe_prototxt;
pub use caffe_roundtrip::caffe_roundtrip;
pub use interop::interop;
pub use primitiv::primitiv;
pub use primitiv_roundtrip::primitiv_roundtrip;
pub use provenance::provenance;
pub use pvp::pvp;
pub use pvp_roundtrip::pvp_roundtrip;
pub use som::som;
pub use som_roundtrip::som_roundtrip;

/// `T` from the whole of `data` the way `libfuzzer_sys::fuzz_target!(|t: T| ...)`
/// builds a typed input (too short for `T`: none), so corpora stay valid.
fn take_rest<'a, T: arbitrary::Arbitrary<'a>>(data: &'a [u8]) -> Option<T> {
    if data.len() < T::size_hint(0).0 {
        return None;
    }
    T::arbitrary_take_rest(arbitrary::Unstructured::new(data)).ok()
}

#[cfg(test)]
mod inputs {
    //! The inputs the tests run each body over: repository files, deterministic
    //! mutations of them, and fixed-seed pseudo-random byte strings.

    use std::collections::BTreeMap;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::path::{Path, PathBuf};

    /// One input and where it came from (printed when a body panics on it).
    pub struct Input {
        pub label: String,
        pub bytes: Vec<u8>,
    }

    /// The repository root.
    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// Every file under `dir` (relative to the repository root, recursively) whose
    /// name ends with one of `exts` (all files when `exts` is empty), sorted.
    pub fn files(dir: &str, exts: &[&str]) -> Vec<Input> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else {
                    out.push(p);
                }
            }
        }
        let mut paths = Vec::new();
        walk(&root().join(dir), &mut paths);
        paths.sort();
        paths
            .into_iter()
            .filter(|p| {
                exts.is_empty() || p.extension().is_some_and(|e| exts.iter().any(|x| e == *x))
            })
            .map(|p| Input {
                label: p.strip_prefix(root()).unwrap_or(&p).display().to_string(),
                bytes: std::fs::read(&p).unwrap(),
            })
            .collect()
    }

    /// splitmix64: a fixed seed gives the same inputs on every machine and run.
    pub struct Rng(u64);

    impl Rng {
        pub fn new(seed: u64) -> Rng {
            Rng(seed)
        }
        pub fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        /// Uniform in `0..n` (`n > 0`).
        pub fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// `count` byte strings of lengths `0..=max_len` from `seed`.
    pub fn random(count: usize, max_len: usize, seed: u64) -> Vec<Input> {
        let mut rng = Rng::new(seed);
        (0..count)
            .map(|i| {
                let len = rng.below(max_len + 1);
                Input {
                    label: format!("random #{i} (seed {seed})"),
                    bytes: (0..len).map(|_| rng.next() as u8).collect(),
                }
            })
            .collect()
    }

    /// `per_seed` mutants of each seed (one to three edits each: a bit flipped, a
    /// byte or a 32-bit word set to a boundary value, a cut, a span repeated or
    /// removed), the kind of damage that reaches a reader's size and count checks.
    pub fn mutants(seeds: &[Input], per_seed: usize, seed: u64) -> Vec<Input> {
        const WORDS: [u32; 8] = [0, 1, 2, 0x7f, 0xff, 0x7fff_ffff, 0x8000_0000, u32::MAX];
        let mut rng = Rng::new(seed);
        let mut out = Vec::new();
        for s in seeds {
            for k in 0..per_seed {
                let mut b = s.bytes.clone();
                for _ in 0..1 + rng.below(3) {
                    let len = b.len();
                    if len == 0 {
                        b.push(rng.next() as u8);
                        continue;
                    }
                    let at = rng.below(len);
                    match rng.below(6) {
                        0 => b[at] ^= 1 << rng.below(8),
                        1 => b[at] = WORDS[rng.below(WORDS.len())] as u8,
                        2 => {
                            let w = WORDS[rng.below(WORDS.len())].to_le_bytes();
                            let n = w.len().min(len - at);
                            b[at..at + n].copy_from_slice(&w[..n]);
                        }
                        3 => b.truncate(at),
                        4 => {
                            let end = (at + 1 + rng.below(16)).min(len);
                            let span = b[at..end].to_vec();
                            b.splice(at..at, span);
                        }
                        _ => {
                            let end = (at + 1 + rng.below(16)).min(len);
                            b.drain(at..end);
                        }
                    }
                }
                out.push(Input {
                    label: format!("{} mutant #{k} (seed {seed})", s.label),
                    bytes: b,
                });
            }
        }
        out
    }

    /// The inputs of a structured round trip: the repository's small fixtures and fuzz
    /// seeds taken as raw bytes (any bytes are a description), then `count` random
    /// strings of up to 512 bytes from `seed`.
    pub fn descriptions(count: usize, seed: u64) -> Vec<Input> {
        let mut out: Vec<Input> = files("testdata", &[])
            .into_iter()
            .chain(files("fuzz/seeds", &[]))
            .filter(|f| f.bytes.len() <= 4096)
            .collect();
        out.extend(random(count, 512, seed));
        out
    }

    /// Runs `body` on every input; a panic names the input (label and bytes) before
    /// it fails the test. Returns how many inputs gave `true`.
    pub fn check(name: &str, inputs: &[Input], body: impl Fn(&[u8]) -> bool) -> usize {
        let n = results(name, inputs, body)
            .into_iter()
            .filter(|&r| r)
            .count();
        println!("{name}: {n} of {} inputs", inputs.len());
        n
    }

    /// Runs a round-trip `body` on every input (as [`check`]); returns how many
    /// inputs reached each kind of description.
    pub fn kinds(
        name: &str,
        inputs: &[Input],
        body: impl Fn(&[u8]) -> Option<&'static str>,
    ) -> BTreeMap<&'static str, usize> {
        let mut out = BTreeMap::new();
        for kind in results(name, inputs, body).into_iter().flatten() {
            *out.entry(kind).or_default() += 1;
        }
        println!("{name}: {} inputs: {out:?}", inputs.len());
        out
    }

    fn results<R>(name: &str, inputs: &[Input], body: impl Fn(&[u8]) -> R) -> Vec<R> {
        inputs
            .iter()
            .map(|input| {
                catch_unwind(AssertUnwindSafe(|| body(&input.bytes))).unwrap_or_else(|e| {
                    eprintln!(
                        "{name} panicked on {} ({} bytes): {:02x?}\n\
                         (to replay under the fuzzer: write these bytes to a file and run \
                         `cargo +nightly fuzz run {name} <file>` in fuzz/)",
                        input.label,
                        input.bytes.len(),
                        input.bytes
                    );
                    std::panic::resume_unwind(e)
                })
            })
            .collect()
    }
}
