//! [`Rearrange`]: an einops-like pattern (`"b c 0 1 -> b 0 1 c"`) that permutes, and
//! optionally merges, the axes of any [`Tensor`].

use std::fmt;
use std::str::FromStr;

use super::error::{Result, SpaceError};
use tensorfmt_core::{Order, Tensor};

/// A parsed axes pattern `"<source labels> -> <target labels>"`.
///
/// Labels are any whitespace-free words without parentheses. Every source label must
/// appear exactly once on the target side. On the target side, labels may be grouped in
/// parentheses to merge axes in C order (last listed fastest), as in einops:
/// `"b c 0 1 -> b (0 1 c)"` flattens an NCHW batch in Pylearn2's canonical vector order.
/// Source-side groups (splitting an axis) are not supported.
///
/// The result of [`Rearrange::apply`] is always row-major.
///
/// ```
/// use tensorfmt_core::{Order, Tensor};
/// use tensorfmt_spaces::{rearrange, Rearrange};
/// let t = Tensor::from_vec((0..24).collect::<Vec<i32>>(), [1, 2, 3, 4], Order::RowMajor)?;
/// let p: Rearrange = "b c 0 1 -> b 0 1 c".parse()?;
/// assert_eq!(p.permutation(), &[0, 2, 3, 1]);
/// let nhwc = p.apply(&t)?;
/// assert_eq!(nhwc.dims(), &[1, 3, 4, 2]);
/// assert_eq!(nhwc.get::<i32>(&[0, 2, 1, 1])?, t.get::<i32>(&[0, 1, 2, 1])?);
/// let flat = rearrange(&t, "b c 0 1 -> b (0 1 c)")?;
/// assert_eq!(flat.dims(), &[1, 24]);
/// assert_eq!(&flat.to_vec::<i32>()?[..4], &[0, 12, 1, 13]);
/// assert!("b c -> b b".parse::<Rearrange>().is_err());
/// # Ok::<(), tensorfmt_spaces::SpaceError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rearrange {
    src: Vec<String>,
    /// Target groups, as indices into `src`; a plain label is a group of one.
    groups: Vec<Vec<usize>>,
    /// Whether each target group was written with parentheses.
    grouped: Vec<bool>,
    perm: Vec<usize>,
}

impl Rearrange {
    /// Parses a pattern (same as `str::parse`).
    pub fn parse(pattern: &str) -> Result<Rearrange> {
        pattern.parse()
    }

    /// Source axis labels.
    pub fn source_labels(&self) -> &[String] {
        &self.src
    }

    /// The axis permutation: axis `i` of the permuted tensor (before merging groups) is
    /// source axis `permutation()[i]`.
    pub fn permutation(&self) -> &[usize] {
        &self.perm
    }

    /// Rank of the result (number of target groups).
    pub fn output_rank(&self) -> usize {
        self.groups.len()
    }

    /// Applies the pattern to a tensor of rank `source_labels().len()`: one strided copy
    /// (a clone when the permutation is the identity and the tensor is row-major), then a
    /// zero-copy reshape when groups merge axes.
    pub fn apply(&self, t: &Tensor) -> Result<Tensor> {
        if t.shape().rank() != self.src.len() {
            return Err(SpaceError::InvalidArgument(format!(
                "pattern {self} needs a tensor of rank {}, got {} {}",
                self.src.len(),
                t.dtype(),
                t.shape()
            )));
        }
        let row = t.to_order(Order::RowMajor)?;
        let identity = self.perm.iter().enumerate().all(|(i, &p)| i == p);
        let permuted = if identity {
            row
        } else {
            row.permute(&self.perm)?
        };
        if self.groups.iter().all(|g| g.len() == 1) {
            return Ok(permuted);
        }
        let dims = t.dims();
        let mut out = Vec::with_capacity(self.groups.len());
        for g in &self.groups {
            let mut n = 1usize;
            for &a in g {
                n = n
                    .checked_mul(dims[a])
                    .ok_or(tensorfmt_core::Error::Overflow {
                        what: "merged axis length",
                    })?;
            }
            out.push(n);
        }
        Ok(permuted.reshape(out)?)
    }
}

/// Applies an einops-like pattern to a tensor; see [`Rearrange`].
///
/// ```
/// use tensorfmt_core::{Order, Tensor};
/// let t = Tensor::from_vec((0..6).collect::<Vec<u8>>(), [2, 3], Order::RowMajor)?;
/// let tt = tensorfmt_spaces::rearrange(&t, "i j -> j i")?;
/// assert_eq!(tt.to_vec::<u8>()?, vec![0, 3, 1, 4, 2, 5]);
/// # Ok::<(), tensorfmt_spaces::SpaceError>(())
/// ```
pub fn rearrange(t: &Tensor, pattern: &str) -> Result<Tensor> {
    pattern.parse::<Rearrange>()?.apply(t)
}

/// Splits one side of a pattern into groups of labels.
fn side(
    s: &str,
    allow_groups: bool,
    err: &dyn Fn(String) -> SpaceError,
) -> Result<Vec<(Vec<String>, bool)>> {
    let mut out: Vec<(Vec<String>, bool)> = Vec::new();
    let mut group: Option<Vec<String>> = None;
    let spaced = s.replace('(', " ( ").replace(')', " ) ");
    for tok in spaced.split_whitespace() {
        match tok {
            "(" => {
                if !allow_groups {
                    return Err(err(
                        "groups on the source side (splitting an axis) are not supported".into(),
                    ));
                }
                if group.is_some() {
                    return Err(err("nested parentheses".into()));
                }
                group = Some(Vec::new());
            }
            ")" => match group.take() {
                Some(g) if g.is_empty() => return Err(err("empty group ()".into())),
                Some(g) => out.push((g, true)),
                None => return Err(err("unbalanced ')'".into())),
            },
            label => match group.as_mut() {
                Some(g) => g.push(label.to_string()),
                None => out.push((vec![label.to_string()], false)),
            },
        }
    }
    if group.is_some() {
        return Err(err("unbalanced '('".into()));
    }
    Ok(out)
}

impl FromStr for Rearrange {
    type Err = SpaceError;

    fn from_str(pattern: &str) -> Result<Rearrange> {
        let err = |reason: String| SpaceError::Parse {
            input: pattern.to_string(),
            reason,
        };
        let mut parts = pattern.split("->");
        let (Some(lhs), Some(rhs), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(err("expected exactly one '->'".into()));
        };
        let src: Vec<String> = side(lhs, false, &err)?
            .into_iter()
            .flat_map(|(g, _)| g)
            .collect();
        for (i, l) in src.iter().enumerate() {
            if src[..i].contains(l) {
                return Err(err(format!("label {l:?} repeated on the source side")));
            }
        }
        let mut used = vec![false; src.len()];
        let mut groups = Vec::new();
        let mut grouped = Vec::new();
        for (g, paren) in side(rhs, true, &err)? {
            let mut idx = Vec::with_capacity(g.len());
            for l in &g {
                let i = src
                    .iter()
                    .position(|s| s == l)
                    .ok_or_else(|| err(format!("label {l:?} is not on the source side")))?;
                if std::mem::replace(&mut used[i], true) {
                    return Err(err(format!("label {l:?} repeated on the target side")));
                }
                idx.push(i);
            }
            groups.push(idx);
            grouped.push(paren);
        }
        if let Some(i) = used.iter().position(|u| !u) {
            return Err(err(format!(
                "label {:?} is missing on the target side",
                src[i]
            )));
        }
        let perm = groups.iter().flatten().copied().collect();
        Ok(Rearrange {
            src,
            groups,
            grouped,
            perm,
        })
    }
}

impl fmt::Display for Rearrange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.src.join(" "))?;
        f.write_str(" ->")?;
        for (g, &paren) in self.groups.iter().zip(&self.grouped) {
            let labels: Vec<&str> = g.iter().map(|&i| self.src[i].as_str()).collect();
            if paren {
                write!(f, " ({})", labels.join(" "))?;
            } else {
                write!(f, " {}", labels[0])?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_patterns() {
        for p in [
            "b c 0 1",
            "b c -> c b -> b c",
            "b c -> b",
            "b c -> b c d",
            "b b -> b b",
            "b c -> b c c",
            "(b c) -> b c",
            "b c -> ((b c))",
            "b c -> (b c",
            "b c -> b c)",
            "b c -> () b c",
        ] {
            assert!(
                matches!(p.parse::<Rearrange>(), Err(SpaceError::Parse { .. })),
                "{p}"
            );
        }
    }

    #[test]
    fn display_round_trips() {
        for p in ["b c 0 1 -> b 0 1 c", "b c 0 1 -> b (0 1 c)", "x -> x"] {
            let r: Rearrange = p.parse().unwrap();
            assert_eq!(r.to_string(), p);
            assert_eq!(r.to_string().parse::<Rearrange>().unwrap(), r);
        }
    }

    #[test]
    fn rank_is_checked() {
        let t = Tensor::zeros(tensorfmt_core::DType::F32, [2, 3], Order::RowMajor).unwrap();
        assert!(matches!(
            rearrange(&t, "a b c -> c b a"),
            Err(SpaceError::InvalidArgument(_))
        ));
    }

    #[test]
    fn column_major_input_gives_row_major_output() {
        let t = Tensor::from_vec((0..6).collect::<Vec<u16>>(), [2, 3], Order::RowMajor).unwrap();
        let c = t.to_order(Order::ColumnMajor).unwrap();
        let a = rearrange(&c, "i j -> j i").unwrap();
        assert_eq!(a.order(), Order::RowMajor);
        assert_eq!(a, rearrange(&t, "i j -> j i").unwrap());
        let same = rearrange(&c, "i j -> (i j)").unwrap();
        assert_eq!(same.to_vec::<u16>().unwrap(), (0..6).collect::<Vec<u16>>());
    }
}
