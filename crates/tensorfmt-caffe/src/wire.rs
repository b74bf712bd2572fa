//! Protobuf wire-format primitives (varints, keys, length-delimited ranges, skipping),
//! working on absolute byte offsets of one file buffer so errors can name them.
//!
//! The hand-written parsers in [`crate::raw`] use these to decode BlobProto payloads in
//! bulk and to keep every non-blob field of a layer as a raw byte range.

use crate::error::{CaffeError, Result};

/// Wire types.
pub(crate) const VARINT: u8 = 0;
pub(crate) const FIXED64: u8 = 1;
pub(crate) const LEN: u8 = 2;
pub(crate) const START_GROUP: u8 = 3;
pub(crate) const END_GROUP: u8 = 4;
pub(crate) const FIXED32: u8 = 5;

/// Nesting limit for groups and messages (prost's recursion limit).
pub(crate) const MAX_DEPTH: u32 = 100;

/// A position inside `buf[..end]`.
#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
    pub end: usize,
}

/// One field key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key {
    pub field: u32,
    pub wire_type: u8,
    /// Offset of the key's first byte.
    pub at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8], start: usize, end: usize) -> Cursor<'a> {
        Cursor {
            buf,
            pos: start,
            end,
        }
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.end
    }

    fn truncated(&self, path: &str, what: &'static str, needed: u64) -> CaffeError {
        CaffeError::Truncated {
            path: path.to_string(),
            offset: self.pos as u64,
            what,
            needed,
            available: (self.end - self.pos) as u64,
        }
    }

    /// A base-128 varint (at most 10 bytes, the last one at most 1).
    pub fn varint(&mut self, path: &str) -> Result<u64> {
        let start = self.pos;
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&b) = self.buf[..self.end].get(self.pos) else {
                self.pos = start;
                return Err(self.truncated(path, "varint", (i + 1) as u64));
            };
            self.pos += 1;
            if i == 9 && b > 1 {
                return Err(CaffeError::Wire {
                    path: path.to_string(),
                    offset: start as u64,
                    reason: "varint longer than 64 bits".into(),
                });
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        unreachable!("the tenth byte either ends the varint or is rejected")
    }

    /// A field key, or `None` at the end.
    pub fn key(&mut self, path: &str) -> Result<Option<Key>> {
        if self.at_end() {
            return Ok(None);
        }
        let at = self.pos;
        let k = self.varint(path)?;
        let field = k >> 3;
        let wire_type = (k & 7) as u8;
        if field == 0 || field > (1 << 29) - 1 {
            return Err(CaffeError::Wire {
                path: path.to_string(),
                offset: at as u64,
                reason: format!("invalid field number {field}"),
            });
        }
        if wire_type > 5 {
            return Err(CaffeError::Wire {
                path: path.to_string(),
                offset: at as u64,
                reason: format!("invalid wire type {wire_type}"),
            });
        }
        Ok(Some(Key {
            field: field as u32,
            wire_type,
            at,
        }))
    }

    /// `n` raw bytes; returns their start offset.
    pub fn fixed(&mut self, n: usize, path: &str, what: &'static str) -> Result<usize> {
        if self.end - self.pos < n {
            return Err(self.truncated(path, what, n as u64));
        }
        let at = self.pos;
        self.pos += n;
        Ok(at)
    }

    /// The byte range of a length-delimited field's contents, checked against the bytes
    /// present before anything is allocated.
    pub fn len_delimited(&mut self, path: &str) -> Result<std::ops::Range<usize>> {
        let len = self.varint(path)?;
        let available = (self.end - self.pos) as u64;
        if len > available {
            return Err(CaffeError::Truncated {
                path: path.to_string(),
                offset: self.pos as u64,
                what: "length-delimited field",
                needed: len,
                available,
            });
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok(start..self.pos)
    }

    /// Skips the value of an unknown field (groups included, up to [`MAX_DEPTH`]).
    pub fn skip(&mut self, key: Key, path: &str, depth: u32) -> Result<()> {
        match key.wire_type {
            VARINT => self.varint(path).map(drop),
            FIXED64 => self.fixed(8, path, "fixed64").map(drop),
            LEN => self.len_delimited(path).map(drop),
            FIXED32 => self.fixed(4, path, "fixed32").map(drop),
            START_GROUP => {
                if depth >= MAX_DEPTH {
                    return Err(CaffeError::Wire {
                        path: path.to_string(),
                        offset: key.at as u64,
                        reason: "groups nested too deeply".into(),
                    });
                }
                loop {
                    let Some(k) = self.key(path)? else {
                        return Err(self.truncated(path, "group", 1));
                    };
                    if k.wire_type == END_GROUP {
                        if k.field != key.field {
                            return Err(CaffeError::Wire {
                                path: path.to_string(),
                                offset: k.at as u64,
                                reason: format!(
                                    "end of group {} inside group {}",
                                    k.field, key.field
                                ),
                            });
                        }
                        return Ok(());
                    }
                    self.skip(k, path, depth + 1)?;
                }
            }
            _ => Err(CaffeError::Wire {
                path: path.to_string(),
                offset: key.at as u64,
                reason: format!("unexpected end of group {}", key.field),
            }),
        }
    }

    /// A UTF-8 string field's contents.
    pub fn string(&mut self, path: &str) -> Result<String> {
        let r = self.len_delimited(path)?;
        let at = r.start;
        std::str::from_utf8(&self.buf[r])
            .map(str::to_string)
            .map_err(|_| CaffeError::Utf8 {
                path: path.to_string(),
                offset: at as u64,
            })
    }
}

/// Errors when `key` does not have one of the wire types in `allowed`.
pub(crate) fn expect_wire(
    key: Key,
    allowed: &[u8],
    expected: &'static str,
    path: &str,
) -> Result<()> {
    if allowed.contains(&key.wire_type) {
        Ok(())
    } else {
        Err(CaffeError::WireType {
            path: path.to_string(),
            offset: key.at as u64,
            field: key.field,
            wire_type: key.wire_type,
            expected,
        })
    }
}

/// Appends a varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes a varint takes.
pub(crate) fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Appends a key.
pub(crate) fn put_key(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    put_varint(out, (u64::from(field) << 3) | u64::from(wire_type));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_lengths_agree() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX, (-1i64) as u64] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v), "{v}");
            let mut c = Cursor::new(&out, 0, out.len());
            assert_eq!(c.varint("x").unwrap(), v);
            assert!(c.at_end());
        }
    }

    #[test]
    fn bad_varints_are_errors() {
        let long = [0xffu8; 10];
        let mut c = Cursor::new(&long, 0, 10);
        assert!(matches!(
            c.varint("p"),
            Err(CaffeError::Wire { offset: 0, .. })
        ));
        let short = [0x80u8, 0x80];
        let mut c = Cursor::new(&short, 0, 2);
        assert!(matches!(c.varint("p"), Err(CaffeError::Truncated { .. })));
    }

    #[test]
    fn keys_reject_field_zero_and_bad_wire_types() {
        let mut c = Cursor::new(&[0x02], 0, 1);
        assert!(c.key("p").is_err());
        let mut c = Cursor::new(&[0x0e], 0, 1);
        assert!(c.key("p").is_err());
    }

    #[test]
    fn groups_are_skipped_and_checked() {
        // field 1 start group, field 2 varint 5, field 1 end group, then field 3 varint.
        let b = [0x0b, 0x10, 0x05, 0x0c, 0x18, 0x01];
        let mut c = Cursor::new(&b, 0, b.len());
        let k = c.key("p").unwrap().unwrap();
        c.skip(k, "p", 0).unwrap();
        assert_eq!(c.key("p").unwrap().unwrap().field, 3);
        let bad = [0x0b, 0x14];
        let mut c = Cursor::new(&bad, 0, 2);
        let k = c.key("p").unwrap().unwrap();
        assert!(c.skip(k, "p", 0).is_err());
        let mut c = Cursor::new(&[0x0c], 0, 1);
        let k = c.key("p").unwrap().unwrap();
        assert!(c.skip(k, "p", 0).is_err());
    }

    #[test]
    fn length_is_checked_against_the_bytes_present() {
        let b = [0x05, 1, 2];
        let mut c = Cursor::new(&b, 0, 3);
        assert!(matches!(
            c.len_delimited("p"),
            Err(CaffeError::Truncated {
                needed: 5,
                available: 2,
                ..
            })
        ));
    }
}
