//! Readable `Display` forms of the spaces, and parsing of exactly those forms.
//!
//! | space | form |
//! |---|---|
//! | vector | `VectorSpace(3072, f32)` |
//! | conv2d | `Conv2DSpace(32x32x3, axes=b c 0 1, f32)` |
//! | index | `IndexSpace(max_labels=10, dim=1, i64)` |
//! | composite | `CompositeSpace(VectorSpace(3, f32), NullSpace)` |
//! | null | `NullSpace` |
//!
//! A dtype is a short name (`f32`) or `any`; parsing also accepts the other dtype
//! spellings (`F32`, `<f4`) and surrounding whitespace.

use std::fmt;
use std::str::FromStr;

use super::dtype_rule::dtype_name;
use super::error::{Result, SpaceError};
use super::{Axes, CompositeSpace, Conv2DSpace, IndexSpace, NullSpace, Space, VectorSpace};
use crate::DType;

impl fmt::Display for VectorSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "VectorSpace({}, {})",
            self.dim(),
            dtype_name(self.dtype())
        )
    }
}

impl fmt::Display for Conv2DSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Conv2DSpace({}x{}x{}, axes={}, {})",
            self.rows(),
            self.cols(),
            self.channels(),
            self.axes(),
            dtype_name(self.dtype())
        )
    }
}

impl fmt::Display for IndexSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IndexSpace(max_labels={}, dim={}, {})",
            self.max_labels(),
            self.dim(),
            dtype_name(self.dtype())
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
/// use tensorfmt_core::space::Space;
/// let s: Space = "CompositeSpace(Conv2DSpace(32x32x3, axes=b c 0 1, f32), VectorSpace(10, any))".parse()?;
/// assert_eq!(s.to_string().parse::<Space>()?, s);
/// assert!("Conv2DSpace(32x32x3, axes=b b 0 1, f32)".parse::<Space>().is_err());
/// # Ok::<(), tensorfmt_core::space::SpaceError>(())
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
                let close = self
                    .rest
                    .find(')')
                    .ok_or_else(|| self.err("missing ')'".into()))?;
                let args: Vec<&'a str> = self.rest[..close].split(',').map(str::trim).collect();
                self.rest = &self.rest[close + 1..];
                return self.elementary(kind, &args);
            }
        }
        Err(self.err(format!("unknown space at {:?}", self.rest.trim_start())))
    }

    fn elementary(&self, kind: &str, args: &[&'a str]) -> Result<Space> {
        let num = |s: &str, what: &str| -> Result<usize> {
            s.parse::<usize>()
                .map_err(|_| self.err(format!("{kind}: bad {what} {s:?}")))
        };
        let keyed = |s: &'a str, key: &str| -> Result<&'a str> {
            s.strip_prefix(key)
                .and_then(|r| r.trim_start().strip_prefix('='))
                .map(str::trim)
                .ok_or_else(|| self.err(format!("{kind}: expected {key}=..., got {s:?}")))
        };
        let dtype = |s: &str| -> Result<Option<DType>> {
            if s == "any" {
                Ok(None)
            } else {
                s.parse::<DType>()
                    .map(Some)
                    .map_err(|_| self.err(format!("{kind}: unknown dtype {s:?}")))
            }
        };
        let wrap = |e: SpaceError| self.err(e.to_string());
        match (kind, args) {
            ("VectorSpace", [dim, dt]) => Ok(VectorSpace::new(num(dim, "dim")?)
                .with_dtype(dtype(dt)?)
                .map_err(wrap)?
                .into()),
            ("Conv2DSpace", [geom, axes, dt]) => {
                let g: Vec<&str> = geom.split('x').map(str::trim).collect();
                let [r, c, k] = g[..] else {
                    return Err(self.err(format!("{kind}: expected RxCxK, got {geom:?}")));
                };
                let axes: Axes = keyed(axes, "axes")?.parse().map_err(wrap)?;
                Ok(
                    Conv2DSpace::new(num(r, "rows")?, num(c, "cols")?, num(k, "channels")?)
                        .map_err(wrap)?
                        .with_axes(axes)
                        .with_dtype(dtype(dt)?)
                        .map_err(wrap)?
                        .into(),
                )
            }
            ("IndexSpace", [m, d, dt]) => Ok(IndexSpace::new(
                num(keyed(m, "max_labels")?, "max_labels")?,
                num(keyed(d, "dim")?, "dim")?,
            )
            .map_err(wrap)?
            .with_dtype(dtype(dt)?)
            .map_err(wrap)?
            .into()),
            _ => Err(self.err(format!(
                "{kind}: wrong number of arguments ({})",
                args.len()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_forms() {
        let c = Conv2DSpace::new(32, 32, 3).unwrap().with_axes(Axes::BC01);
        assert_eq!(c.to_string(), "Conv2DSpace(32x32x3, axes=b c 0 1, f32)");
        let any = VectorSpace::new(10).with_dtype(None).unwrap();
        assert_eq!(any.to_string(), "VectorSpace(10, any)");
        assert_eq!(
            IndexSpace::new(10, 1).unwrap().to_string(),
            "IndexSpace(max_labels=10, dim=1, i64)"
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
        let loose: Space = " CompositeSpace ( VectorSpace( 3 , <f8 ) ,NullSpace ) "
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
            "Vector(3, f32)",
            "VectorSpace(3)",
            "VectorSpace(-3, f32)",
            "VectorSpace(3, bool)",
            "VectorSpace(3, f33)",
            "VectorSpace(3, f32",
            "VectorSpace(3, f32) x",
            "Conv2DSpace(32x32, axes=b c 0 1, f32)",
            "Conv2DSpace(0x32x3, axes=b c 0 1, f32)",
            "Conv2DSpace(32x32x3, axes=b c 0 0, f32)",
            "Conv2DSpace(32x32x3, b c 0 1, f32)",
            "IndexSpace(max_labels=0, dim=1, i64)",
            "IndexSpace(max_labels=3, dim=1, f32)",
            "IndexSpace(dim=1, max_labels=3, i64)",
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
