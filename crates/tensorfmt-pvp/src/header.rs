//! The raw on-disk headers: the 80-byte base header and the 24-byte weight extension,
//! parsed with nom and kept exactly as stored (no interpretation here; see
//! [`crate::layout`] for what the fields really mean).

use nom::number::complete::{le_f32, le_f64, le_i32};
use nom::{IResult, Parser};

use crate::error::{PvpError, Result};

/// Size of the base header in bytes.
pub const HEADER_SIZE: usize = 80;
/// Size of a weight frame header in bytes (base header + 24-byte extension).
pub const WEIGHT_HEADER_SIZE: usize = 104;

/// File type codes (`filetype`, header field 2).
pub mod filetype {
    /// Obsolete activity / `_last` files, read only.
    pub const LEGACY: i32 = 1;
    /// Sparse binary activity.
    pub const SPARSE_BINARY: i32 = 2;
    /// Non-shared ("local patch") weights.
    pub const NONSHARED_WEIGHTS: i32 = 3;
    /// Dense activity (also checkpoints).
    pub const DENSE: i32 = 4;
    /// Shared weights (kernels).
    pub const SHARED_WEIGHTS: i32 = 5;
    /// Sparse activity with values.
    pub const SPARSE_VALUES: i32 = 6;
}

/// Data type codes (`datatype`, header field 9).
pub mod datatype {
    /// One unsigned byte (compressed weights).
    pub const BYTE: i32 = 1;
    /// 32-bit integer (sparse binary indices).
    pub const INT: i32 = 2;
    /// 32-bit float (8-byte entries in sparse-values files).
    pub const FLOAT: i32 = 3;
    /// Obsolete sparse-values code.
    pub const SPARSEVALUES: i32 = 4;
    /// 16-byte random-number state (`taus_uint4`).
    pub const TAUS_UINT4: i32 = 5;
}

/// The 80-byte base header, every field as stored.
///
/// ```
/// use tensorfmt_pvp::Header;
/// let h = Header::activity(4, 8, 4, 2, 3, 4);
/// let bytes = h.to_bytes();
/// assert_eq!(bytes.len(), 80);
/// assert_eq!(Header::parse(&bytes)?, h);
/// # Ok::<(), tensorfmt_pvp::PvpError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Header {
    /// 80 (activity) or 104 (weights).
    pub headersize: i32,
    /// 20 (activity) or 26 (weights).
    pub numparams: i32,
    /// File type code ([`filetype`]).
    pub filetype: i32,
    /// Width of the stored data.
    pub nx: i32,
    /// Height of the stored data.
    pub ny: i32,
    /// Features.
    pub nf: i32,
    /// 1 (activity), arbors (weights), or a legacy process count.
    pub numrecords: i32,
    /// Unreliable; metadata only.
    pub recordsize: i32,
    /// Bytes per element.
    pub datasize: i32,
    /// Data type code ([`datatype`]).
    pub datatype: i32,
    /// MPI process columns (legacy).
    pub nxprocs: i32,
    /// MPI process rows (legacy).
    pub nyprocs: i32,
    /// `nxExtended` (formerly `nxGlobal`).
    pub nx_extended: i32,
    /// `nyExtended`.
    pub ny_extended: i32,
    /// Process x offset (metadata).
    pub kx0: i32,
    /// Process y offset (metadata).
    pub ky0: i32,
    /// Informational only (formerly NPAD / border width).
    pub nbatch: i32,
    /// Frame count (activity) or arbors (weights).
    pub nbands: i32,
    /// Header time.
    pub time: f64,
}

/// The 24-byte extension of a weight frame header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WeightExtra {
    /// Patch width.
    pub nxp: i32,
    /// Patch height.
    pub nyp: i32,
    /// Patch features.
    pub nfp: i32,
    /// Minimum weight of the frame.
    pub wmin: f32,
    /// Maximum weight of the frame.
    pub wmax: f32,
    /// Patches per arbor.
    pub numpatches: i32,
}

/// A full 104-byte weight frame header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WeightHeader {
    /// The base fields.
    pub base: Header,
    /// The weight fields.
    pub extra: WeightExtra,
}

fn base(i: &[u8]) -> IResult<&[u8], Header> {
    let (i, f) = nom::multi::count(le_i32, 18).parse(i)?;
    let (i, time) = le_f64(i)?;
    Ok((
        i,
        Header {
            headersize: f[0],
            numparams: f[1],
            filetype: f[2],
            nx: f[3],
            ny: f[4],
            nf: f[5],
            numrecords: f[6],
            recordsize: f[7],
            datasize: f[8],
            datatype: f[9],
            nxprocs: f[10],
            nyprocs: f[11],
            nx_extended: f[12],
            ny_extended: f[13],
            kx0: f[14],
            ky0: f[15],
            nbatch: f[16],
            nbands: f[17],
            time,
        },
    ))
}

fn extra(i: &[u8]) -> IResult<&[u8], WeightExtra> {
    let (i, (nxp, nyp, nfp, wmin, wmax, numpatches)) =
        (le_i32, le_i32, le_i32, le_f32, le_f32, le_i32).parse(i)?;
    Ok((
        i,
        WeightExtra {
            nxp,
            nyp,
            nfp,
            wmin,
            wmax,
            numpatches,
        },
    ))
}

fn truncated(offset: u64, what: &str, needed: usize, available: usize) -> PvpError {
    PvpError::Truncated {
        offset,
        what: what.into(),
        needed: needed as u64,
        available: available as u64,
    }
}

impl Header {
    /// Parses the 80-byte base header at the start of `bytes` (no validation).
    pub fn parse(bytes: &[u8]) -> Result<Header> {
        match base(bytes) {
            Ok((_, h)) => Ok(h),
            Err(_) => Err(truncated(0, "header", HEADER_SIZE, bytes.len())),
        }
    }

    /// A modern activity header (§12 of the spec): `filetype` is 4 (dense), 2 or 6.
    /// `nbands` and `time` start at 0 and are patched by the writers.
    pub fn activity(
        filetype: i32,
        nx: i32,
        ny: i32,
        nf: i32,
        datatype: i32,
        datasize: i32,
    ) -> Header {
        let recordsize = if filetype == filetype::DENSE {
            nx.wrapping_mul(ny).wrapping_mul(nf)
        } else {
            0
        };
        Header {
            headersize: HEADER_SIZE as i32,
            numparams: 20,
            filetype,
            nx,
            ny,
            nf,
            numrecords: 1,
            recordsize,
            datasize,
            datatype,
            nxprocs: 1,
            nyprocs: 1,
            nx_extended: nx,
            ny_extended: ny,
            kx0: 0,
            ky0: 0,
            nbatch: 1,
            nbands: 0,
            time: 0.0,
        }
    }

    /// The 18 integer fields in file order, with their names.
    pub fn int_fields(&self) -> [(&'static str, i32); 18] {
        [
            ("headersize", self.headersize),
            ("numparams", self.numparams),
            ("filetype", self.filetype),
            ("nx", self.nx),
            ("ny", self.ny),
            ("nf", self.nf),
            ("numrecords", self.numrecords),
            ("recordsize", self.recordsize),
            ("datasize", self.datasize),
            ("datatype", self.datatype),
            ("nxprocs", self.nxprocs),
            ("nyprocs", self.nyprocs),
            ("nxExtended", self.nx_extended),
            ("nyExtended", self.ny_extended),
            ("kx0", self.kx0),
            ("ky0", self.ky0),
            ("nbatch", self.nbatch),
            ("nbands", self.nbands),
        ]
    }

    /// The 80 bytes of this header, little-endian.
    pub fn to_bytes(&self) -> [u8; HEADER_SIZE] {
        let mut out = [0u8; HEADER_SIZE];
        for (i, (_, v)) in self.int_fields().iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        out[72..80].copy_from_slice(&self.time.to_le_bytes());
        out
    }
}

impl WeightHeader {
    /// Parses a 104-byte weight frame header at `offset` in `file` (no validation).
    pub fn parse_at(file: &[u8], offset: u64) -> Result<WeightHeader> {
        let avail = file.len().saturating_sub(offset as usize);
        let bytes = usize::try_from(offset)
            .ok()
            .and_then(|o| file.get(o..))
            .unwrap_or(&[]);
        match (base, extra).parse(bytes) {
            Ok((_, (base, extra))) => Ok(WeightHeader { base, extra }),
            Err(_) => Err(truncated(
                offset,
                "weight header",
                WEIGHT_HEADER_SIZE,
                avail,
            )),
        }
    }

    /// The 104 bytes of this header, little-endian.
    pub fn to_bytes(&self) -> [u8; WEIGHT_HEADER_SIZE] {
        let mut out = [0u8; WEIGHT_HEADER_SIZE];
        out[..HEADER_SIZE].copy_from_slice(&self.base.to_bytes());
        let e = &self.extra;
        out[80..84].copy_from_slice(&e.nxp.to_le_bytes());
        out[84..88].copy_from_slice(&e.nyp.to_le_bytes());
        out[88..92].copy_from_slice(&e.nfp.to_le_bytes());
        out[92..96].copy_from_slice(&e.wmin.to_le_bytes());
        out[96..100].copy_from_slice(&e.wmax.to_le_bytes());
        out[100..104].copy_from_slice(&e.numpatches.to_le_bytes());
        out
    }
}

/// Byte offset of an integer header field by index (for error messages).
pub(crate) const fn field_offset(index: usize) -> u64 {
    (index * 4) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_header_round_trips() {
        let h = WeightHeader {
            base: Header {
                headersize: 104,
                numparams: 26,
                ..Header::activity(5, 1, 1, 3, 3, 4)
            },
            extra: WeightExtra {
                nxp: 3,
                nyp: 2,
                nfp: 1,
                wmin: -1.5,
                wmax: 2.25,
                numpatches: 3,
            },
        };
        let b = h.to_bytes();
        assert_eq!(WeightHeader::parse_at(&b, 0).unwrap(), h);
        assert!(matches!(
            WeightHeader::parse_at(&b[..103], 0),
            Err(PvpError::Truncated {
                needed: 104,
                available: 103,
                ..
            })
        ));
        assert!(matches!(
            WeightHeader::parse_at(&b, 1000),
            Err(PvpError::Truncated {
                offset: 1000,
                available: 0,
                ..
            })
        ));
    }

    #[test]
    fn base_fields_are_little_endian_in_order() {
        let mut b = [0u8; 80];
        for i in 0..18 {
            b[i * 4..i * 4 + 4].copy_from_slice(&(i as i32 + 100).to_le_bytes());
        }
        b[72..].copy_from_slice(&7.5f64.to_le_bytes());
        let h = Header::parse(&b).unwrap();
        assert_eq!(h.headersize, 100);
        assert_eq!(h.nbatch, 116);
        // Fields 18/19 overlap time: nbands is field 17.
        assert_eq!(h.nbands, 117);
        assert_eq!(h.time, 7.5);
    }
}
