//! The `som` fuzz target's body: the PINK reader (header, comment block, legacy
//! detection, payload access) on any bytes gives Ok or a typed error, never a panic.
//! Files that open as v2 without trailing bytes must re-serialise byte for byte
//! through our writers.

use tensorfmt_som::{FileKind, ReadConfig, SomFile, WriteConfig};

/// `f` written again by our writers, when its comments and records are ones our
/// writers can write.
fn rewrite(f: &SomFile) -> Option<Vec<u8>> {
    let c = f.comments();
    let clean = |l: &String| l.is_ascii() && !l.contains('\r');
    if !c.lines.iter().all(clean) || (!c.lines.is_empty() && !c.end_line) {
        return None;
    }
    let config = WriteConfig {
        comments: c.lines.clone(),
        data_type: f.data_type().unwrap_or(tensorfmt_som::DataType::F32),
        pink_cli_compat: f.hex_inferred(),
        end_line: c.end_line,
    };
    let n = f.n_entries().unwrap_or(0) as usize;
    let mut out = Vec::new();
    let ok = match f.kind() {
        FileKind::Data => tensorfmt_som::write_data(&mut out, &f.entries(0..n).ok()?, &config),
        FileKind::Som => tensorfmt_som::write_som(
            &mut out,
            f.map_layout()?,
            f.neuron_dims()?,
            &f.som_tensor().ok()?,
            &config,
        ),
        FileKind::Mapping => tensorfmt_som::write_mapping(
            &mut out,
            f.map_layout()?,
            &f.distances(0..n).ok()?,
            &config,
        ),
        FileKind::RotFlip => {
            let per = f.neuron_count()?;
            let recs: Vec<_> = (0..n * per)
                .map(|i| f.rotflip(i / per, i % per))
                .collect::<Result<_, _>>()
                .ok()?;
            if recs.iter().any(|r| r.flip_byte > 1) {
                return None;
            }
            tensorfmt_som::write_rotflip(&mut out, f.map_layout()?, n, &recs, &config)
        }
    };
    ok.ok().map(|_| out)
}

/// Runs the PINK readers over `data`; returns whether it was rewritten byte for byte
/// (a v2 file without trailing bytes that our writers can write).
///
/// ```
/// assert!(!tensorfmt_fuzzing::som(b"\x02\0\0\0"));
/// ```
pub fn som(data: &[u8]) -> bool {
    let bytes = bytes::Bytes::copy_from_slice(data);
    let _ = tensorfmt_som::sniff(&data[..data.len().min(4096)], data.len() as u64);
    // Realistic caps for hostile input (the fuzzer's memory limit is 2 GiB).
    let limits = tensorfmt_core::Limits {
        max_items: 1 << 20,
        max_alloc: 1 << 28,
        ..Default::default()
    };
    let opts = tensorfmt_core::ReadOptions {
        limits,
        ..Default::default()
    };
    if let Ok(file) = tensorfmt_som::open_tensor_file(bytes.clone(), &opts) {
        let _ = file.validate();
        let _ = file.header();
    }
    let strict = ReadConfig {
        limits,
        strict: true,
        legacy_kind: Some(FileKind::Mapping),
        ..ReadConfig::default()
    };
    let _ = SomFile::from_bytes_with(bytes.clone(), &strict);
    let lenient = ReadConfig {
        limits,
        ..ReadConfig::default()
    };
    let Ok(f) = SomFile::from_bytes_with(bytes, &lenient) else {
        return false;
    };
    let _ = (
        f.entry(0),
        f.neuron(0),
        f.neuron_at(&[0, 0]),
        f.hex_axial(),
        f.rotflip(0, 0),
    );
    if f.kind() == FileKind::Mapping {
        let _ = f.bmu_counts();
    }
    let exact = f.payload_offset() + f.payload_len() == data.len();
    if f.version() == 2 && exact {
        if let Some(out) = rewrite(&f) {
            assert_eq!(out, data, "re-serialisation differs");
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use crate::inputs::{check, files, mutants, random};

    #[test]
    fn testdata_and_mutants() {
        let seeds = files("testdata/som", &["bin"]);
        assert!(seeds.len() >= 50, "{}", seeds.len());
        // Every fixture (ours and those PINK wrote) is v2 and rewrites byte for byte.
        assert_eq!(check("som", &seeds, super::som), seeds.len());
        let small: Vec<_> = seeds
            .into_iter()
            .filter(|s| s.bytes.len() <= 4096)
            .collect();
        check("som", &mutants(&small, 30, 3), super::som);
        check("som", &random(1000, 256, 4), super::som);
    }
}
