//! Pylearn2's printed forms of the spaces (`str(space)` there), and parsing of them.
//!
//! | space | form |
//! |---|---|
//! | vector | `VectorSpace(dim=3072, dtype=float32)` |
//! | conv2d | `Conv2DSpace(shape=(32, 32), num_channels=3, axes=('b', 'c', 0, 1), dtype=float32)` |
//! | index | `IndexSpace(dim=1, max_labels=10, dtype=int64)` |
//! | composite | `CompositeSpace(VectorSpace(dim=3, dtype=float32), NullSpace)` |
//! | null | `NullSpace` |
//!
//! A dtype is a numpy name (`float32`) or `None` (any dtype). Parsing also accepts the
//! other dtype spellings (`f32`, `F32`, `<f4`), keyword arguments in any order, and
//! surrounding whitespace. (The Python package adds `, sparse` to a sparse
//! VectorSpace; the core has no sparse batches.)

use std::fmt;
use std::str::FromStr;

use super::error::{Result, SpaceError};
use super::{Axes, CompositeSpace, Conv2DSpace, IndexSpace, NullSpace, Space, VectorSpace};
use tensorfmt_core::DType;

/// numpy's name of a dtype (`float32`), or `None` for a dtype-agnostic space.
pub(crate) fn numpy_name(dtype: Option<DType>) -> &'static str {
    match dtype {
        None => "None",
        Some(d) => match d {
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::Bool => "bool",
        },
    }
}

fn parse_dtype(s: &str) -> Option<Option<DType>> {
    if s == "None" || s == "any" {
        return Some(None);
    }
    DType::ALL
        .into_iter()
        .find(|&d| numpy_name(Some(d)) == s)
        .or_else(|| s.parse::<DType>().ok())
        .map(Some)
}

impl fmt::Display for VectorSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "VectorSpace(dim={}, dtype={})",
            self.dim(),
            numpy_name(self.dtype())
        )
    }
}

impl fmt::Display for Conv2DSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let axes: Vec<String> = self
            .axes()
            .as_array()
            .iter()
            .map(|a| match a.to_string().as_str() {
                l @ ("0" | "1") => l.to_string(),
                l => format!("'{l}'"),
            })
            .collect();
        write!(
            f,
            "Conv2DSpace(shape=({}, {}), num_channels={}, axes=({}), dtype={})",
            self.rows(),
            self.cols(),
            self.channels(),
            axes.join(", "),
            numpy_name(self.dtype())
        )
    }
}

impl fmt::Display for IndexSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IndexSpace(dim={}, max_labels={}, dtype={})",
            self.dim(),
            self.max_labels(),
            numpy_name(self.dtype())
        )
    }
}

impl fmt::Display for CompositeSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CompositeSpace(")?;
        for (i, c) in self.components().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{c}")?;
        }
        f.write_str(")")
    }
}

impl fmt::Display for NullSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NullSpace")
    }
}

impl fmt::Display for Space {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Space::Vector(s) => s.fmt(f),
            Space::Conv2D(s) => s.fmt(f),
            Space::Index(s) => s.fmt(f),
            Space::Composite(s) => s.fmt(f),
            Space::Null(s) => s.fmt(f),
        }
    }
}

/// Parses the [`Display`](fmt::Display) form of any space.
///
/// ```
/// use tensorfmt_spaces::Space;
/// let s: Space = "CompositeSpace(Conv2DSpace(shape=(32, 32), num_channels=3, \
///     axes=('b', 'c', 0, 1), dtype=float32), VectorSpace(dim=10, dtype=None))".parse()?;
/// assert_eq!(s.to_string().parse::<Space>()?, s);
/// assert!("Conv2DSpace(shape=(32, 32), num_channels=3, axes=('b', 'b', 0, 1), dtype=float32)"
///     .parse::<Space>().is_err());
/// # Ok::<(), tensorfmt_spaces::SpaceError>(())
/// ```
impl FromStr for Space {
    type Err = SpaceError;

    fn from_str(s: &str) -> Result<Space> {
        let mut p = Parser { input: s, rest: s };
        let space = p.space()?;
        if !p.rest.trim().is_empty() {
            return Err(p.err(format!("trailing text {:?}", p.rest.trim())));
        }
        Ok(space)
    }
}

struct Parser<'a> {
    input: &'a str,
    rest: &'a str,
}

impl<'a> Parser<'a> {
    fn err(&self, reason: String) -> SpaceError {
        SpaceError::Parse {
            input: self.input.to_string(),
            reason,
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        let r = self.rest.trim_start();
        match r.strip_prefix(token) {
            Some(after) => {
                self.rest = after;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, token: &str) -> Result<()> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.err(format!(
                "expected {token:?} at {:?}",
                self.rest.trim_start()
            )))
        }
    }

    fn space(&mut self) -> Result<Space> {
        if self.eat("NullSpace") {
            return Ok(Space::Null(NullSpace));
        }
        if self.eat("CompositeSpace") {
            self.expect("(")?;
            let mut comps = Vec::new();
            if !self.eat(")") {
                loop {
                    comps.push(self.space()?);
                    if self.eat(")") {
                        break;
                    }
                    self.expect(",")?;
                }
            }
            return Ok(Space::composite(comps));
        }
        for kind in ["VectorSpace", "Conv2DSpace", "IndexSpace"] {
            if self.eat(kind) {
                self.expect("(")?;
                let args = self.arguments()?;
                return self.elementary(kind, &args);
            }
        }
        Err(self.err(format!("unknown space at {:?}", self.rest.trim_start())))
    }

    /// `key=value, ...)` up to the closing parenthesis, splitting at top-level commas
    /// (a value may be a parenthesised tuple).
    fn arguments(&mut self) -> Result<Vec<(&'a str, &'a str)>> {
        let text = self.rest;
        let mut depth = 0usize;
        let mut pieces = Vec::new();
        let mut start = 0;
        for (i, ch) in text.char_indices() {
            match ch {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    pieces.push(&text[start..i]);
                    self.rest = &text[i + 1..];
                    return pieces
                        .into_iter()
                        .map(|p: &'a str| {
                            let p = p.trim();
                            match p.split_once('=') {
                                Some((k, v)) => Ok((k.trim(), v.trim())),
                                None => Ok((p, "")),
                            }
                        })
                        .collect();
                }
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    pieces.push(&text[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        Err(self.err("missing ')'".into()))
    }

    fn elementary(&self, kind: &str, args: &[(&'a str, &'a str)]) -> Result<Space> {
        let keys: Vec<&str> = args.iter().map(|(k, _)| *k).collect();
        let expected: &[&str] = match kind {
            "VectorSpace" => &["dim", "dtype"],
            "Conv2DSpace" => &["shape", "num_channels", "axes", "dtype"],
            _ => &["dim", "max_labels", "dtype"],
        };
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        let mut want = expected.to_vec();
        want.sort_unstable();
        if sorted != want {
            return Err(self.err(format!(
                "{kind} takes the arguments {}, got {}",
                expected.join(", "),
                keys.join(", ")
            )));
        }
        let get = |key: &str| args.iter().find(|(k, _)| *k == key).map_or("", |(_, v)| v);
        let num = |s: &str, what: &str| -> Result<usize> {
            s.parse::<usize>()
                .map_err(|_| self.err(format!("{kind}: bad {what} {s:?}")))
        };
        let dtype = parse_dtype(get("dtype"))
            .ok_or_else(|| self.err(format!("{kind}: unknown dtype {:?}", get("dtype"))))?;
        let wrap = |e: SpaceError| self.err(e.to_string());
        match kind {
            "VectorSpace" => Ok(VectorSpace::new(num(get("dim"), "dim")?)
                .with_dtype(dtype)
                .map_err(wrap)?
                .into()),
            "Conv2DSpace" => {
                let shape = get("shape");
                let inner = shape
                    .strip_prefix('(')
                    .and_then(|s| s.strip_suffix(')'))
                    .ok_or_else(|| self.err(format!("{kind}: bad shape {shape:?}")))?;
                let g: Vec<&str> = inner.split(',').map(str::trim).collect();
                let [r, c] = g[..] else {
                    return Err(
                        self.err(format!("{kind}: shape must be (rows, cols), got {shape:?}"))
                    );
                };
                let axes: Axes = get("axes").parse().map_err(wrap)?;
                Ok(Conv2DSpace::new(
                    num(r, "rows")?,
                    num(c, "cols")?,
                    num(get("num_channels"), "num_channels")?,
                )
                .map_err(wrap)?
                .with_axes(axes)
                .with_dtype(dtype)
                .map_err(wrap)?
                .into())
            }
            _ => Ok(IndexSpace::new(
                num(get("max_labels"), "max_labels")?,
                num(get("dim"), "dim")?,
            )
            .map_err(wrap)?
            .with_dtype(dtype)
            .map_err(wrap)?
            .into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_forms() {
        let c = Conv2DSpace::new(32, 32, 3).unwrap().with_axes(Axes::BC01);
        assert_eq!(
            c.to_string(),
            "Conv2DSpace(shape=(32, 32), num_channels=3, axes=('b', 'c', 0, 1), dtype=float32)"
        );
        assert_eq!(
            VectorSpace::new(3).to_string(),
            "VectorSpace(dim=3, dtype=float32)"
        );
        let any = VectorSpace::new(10).with_dtype(None).unwrap();
        assert_eq!(any.to_string(), "VectorSpace(dim=10, dtype=None)");
        assert_eq!(
            IndexSpace::new(10, 1).unwrap().to_string(),
            "IndexSpace(dim=1, max_labels=10, dtype=int64)"
        );
        assert_eq!(Space::composite([]).to_string(), "CompositeSpace()");
        assert_eq!(Space::null().to_string(), "NullSpace");
    }

    #[test]
    fn round_trips() {
        let spaces = [
            Space::vector(0),
            Space::from(
                Conv2DSpace::new(3, 4, 5)
                    .unwrap()
                    .with_axes(Axes::C01B)
                    .with_dtype(Some(DType::F16))
                    .unwrap(),
            ),
            Space::from(IndexSpace::new(7, 2).unwrap().with_dtype(None).unwrap()),
            Space::composite([
                Space::null(),
                Space::composite([]),
                Space::composite([
                    Space::vector(3),
                    Space::from(IndexSpace::new(2, 1).unwrap()),
                ]),
            ]),
        ];
        for s in spaces {
            assert_eq!(s.to_string().parse::<Space>().unwrap(), s, "{s}");
        }
        let loose: Space = " CompositeSpace ( VectorSpace( dtype = <f8 , dim=3 ) ,NullSpace ) "
            .parse()
            .unwrap();
        assert_eq!(
            loose,
            Space::composite([
                Space::from(VectorSpace::new(3).with_dtype(Some(DType::F64)).unwrap()),
                Space::null()
            ])
        );
    }

    #[test]
    fn parse_errors() {
        for s in [
            "",
            "Vector(dim=3, dtype=float32)",
            "VectorSpace(dim=3)",
            "VectorSpace(3, float32)",
            "VectorSpace(dim=-3, dtype=float32)",
            "VectorSpace(dim=3, dtype=bool)",
            "VectorSpace(dim=3, dtype=f33)",
            "VectorSpace(dim=3, dtype=float32",
            "VectorSpace(dim=3, dtype=float32) x",
            "VectorSpace(dim=3, dim=3, dtype=float32)",
            "Conv2DSpace(shape=(32,), num_channels=3, axes=('b', 'c', 0, 1), dtype=float32)",
            "Conv2DSpace(shape=(0, 32), num_channels=3, axes=('b', 'c', 0, 1), dtype=float32)",
            "Conv2DSpace(shape=(32, 32), num_channels=3, axes=('b', 'c', 0, 0), dtype=float32)",
            "Conv2DSpace(shape=32, num_channels=3, axes=('b', 'c', 0, 1), dtype=float32)",
            "IndexSpace(dim=1, max_labels=0, dtype=int64)",
            "IndexSpace(dim=1, max_labels=3, dtype=float32)",
            "IndexSpace(dim=1, max_labels=3)",
            "CompositeSpace(NullSpace NullSpace)",
            "CompositeSpace(NullSpace,)",
        ] {
            assert!(
                matches!(s.parse::<Space>(), Err(SpaceError::Parse { .. })),
                "{s}"
            );
        }
    }
}
