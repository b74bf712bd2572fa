//! A minimal protobuf wire walker: field keys, varints and length-delimited ranges with
//! byte offsets, every length checked against the bytes present.

use crate::error::{OnnxError, Result};

/// One field of a message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    /// Field number.
    pub number: u32,
    /// Wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
    pub wire_type: u8,
    /// Offset of the key.
    pub offset: usize,
    /// For varints the value; for fixed values the raw bits.
    pub value: u64,
    /// For length-delimited fields, the contents' range.
    pub start: usize,
    /// End of the contents (exclusive).
    pub end: usize,
    /// End of the whole field, key and value (exclusive).
    pub after: usize,
}

fn varint(buf: &[u8], pos: &mut usize, end: usize, path: &str) -> Result<u64> {
    let start = *pos;
    let mut v = 0u64;
    for i in 0..10 {
        if *pos >= end {
            return Err(OnnxError::Truncated {
                path: path.into(),
                offset: start as u64,
                what: "varint",
                needed: (i + 1) as u64,
                available: (end - start) as u64,
            });
        }
        let b = buf[*pos];
        *pos += 1;
        if i == 9 && b > 1 {
            break;
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(OnnxError::Wire {
        path: path.into(),
        offset: start as u64,
        reason: "varint longer than 10 bytes".into(),
    })
}

/// The fields of the message in `buf[start..end]`, one at a time (nothing collected:
/// a message of a million unpacked values costs no memory to walk).
pub(crate) fn iter<'b>(buf: &'b [u8], start: usize, end: usize, path: &'b str) -> Fields<'b> {
    Fields {
        buf,
        pos: start,
        end,
        path,
        failed: false,
    }
}

/// The iterator of [`iter`]: it stops after its first error.
pub(crate) struct Fields<'b> {
    buf: &'b [u8],
    pos: usize,
    end: usize,
    path: &'b str,
    failed: bool,
}

impl Iterator for Fields<'_> {
    type Item = Result<Field>;

    fn next(&mut self) -> Option<Result<Field>> {
        if self.failed || self.pos >= self.end {
            return None;
        }
        let r = next_field(self.buf, &mut self.pos, self.end, self.path);
        self.failed = r.is_err();
        Some(r)
    }
}

fn next_field(buf: &[u8], pos: &mut usize, end: usize, path: &str) -> Result<Field> {
    let offset = *pos;
    let key = varint(buf, pos, end, path)?;
    let number = key >> 3;
    let wire_type = (key & 7) as u8;
    if number == 0 || number > u64::from(u32::MAX >> 3) {
        return Err(OnnxError::Wire {
            path: path.into(),
            offset: offset as u64,
            reason: format!("invalid field number {number}"),
        });
    }
    let fixed = |pos: &mut usize, n: usize| -> Result<u64> {
        if end - *pos < n {
            return Err(OnnxError::Truncated {
                path: path.into(),
                offset: offset as u64,
                what: "fixed-size value",
                needed: n as u64,
                available: (end - *pos) as u64,
            });
        }
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&buf[*pos..*pos + n]);
        *pos += n;
        Ok(u64::from_le_bytes(b))
    };
    let mut field = Field {
        number: number as u32,
        wire_type,
        offset,
        value: 0,
        start: 0,
        end: 0,
        after: 0,
    };
    match wire_type {
        0 => field.value = varint(buf, pos, end, path)?,
        1 => field.value = fixed(pos, 8)?,
        5 => field.value = fixed(pos, 4)?,
        2 => {
            let len = varint(buf, pos, end, path)?;
            let available = (end - *pos) as u64;
            if len > available {
                return Err(OnnxError::Truncated {
                    path: path.into(),
                    offset: offset as u64,
                    what: "length-delimited field",
                    needed: len,
                    available,
                });
            }
            field.start = *pos;
            *pos += len as usize;
            field.end = *pos;
        }
        t => {
            return Err(OnnxError::Wire {
                path: path.into(),
                offset: offset as u64,
                reason: format!("unsupported wire type {t} (groups are not ONNX)"),
            })
        }
    }
    field.after = *pos;
    Ok(field)
}

/// Errors unless `f` has wire type `want`.
pub(crate) fn expect(f: &Field, want: u8, path: &str) -> Result<()> {
    if f.wire_type == want {
        Ok(())
    } else {
        Err(OnnxError::Wire {
            path: path.into(),
            offset: f.offset as u64,
            reason: format!(
                "field {} has wire type {}, expected {want}",
                f.number, f.wire_type
            ),
        })
    }
}

/// Appends a varint to `out`.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
