//! Catalogue ids carried with a data file: one `# id <text>` line per entry in the
//! file's `#` comment block, in entry order.
//!
//! Why the comment block and not a sidecar file: the ids cannot be separated from the
//! images they name (a copy, a move or an archive keeps them together), PINK itself
//! skips comment lines (`get_file_header.cpp`), so a data file with ids still trains
//! and maps in PINK, and [`crate::mapping::map_files`] copies them into the mapping and
//! rotation/flip files it writes, so results join back to the catalogue by position
//! or by id. The cost: one short text line per entry (5 MB for 200,000 ids), and pyink
//! cannot read commented files at all (`specs/som.md` §2), so leave ids out for pyink.
//!
//! ```
//! use tensorfmt_som::ids::{id_comments, ids_from_comments};
//! let lines = id_comments(&["ILTJ1234+5678".to_string(), "".to_string()])?;
//! assert_eq!(lines, vec!["# id ILTJ1234+5678", "# id "]);
//! assert_eq!(ids_from_comments(lines.iter().map(String::as_str)), vec!["ILTJ1234+5678", ""]);
//! # Ok::<(), tensorfmt_som::SomError>(())
//! ```

use crate::read::SomFile;
use crate::{Result, SomError};

/// The start of an id line.
pub const ID_PREFIX: &str = "# id ";

/// The comment lines holding `ids` (ASCII, no line breaks: what a comment line can hold).
pub fn id_comments(ids: &[String]) -> Result<Vec<String>> {
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            if !id.is_ascii() || id.contains(['\n', '\r']) {
                return Err(SomError::MapOption {
                    option: "ids",
                    value: format!("{id:?} (entry {i})"),
                    reason: "ids must be ASCII without line breaks (they go into # comment lines)"
                        .into(),
                });
            }
            Ok(format!("{ID_PREFIX}{id}"))
        })
        .collect()
}

/// Checks comment lines a user gives beside the ids: one that reads as an id line
/// (`id ...`, written `# id ...`) would add an id that names no entry, and every later
/// reading of the ids would fail.
///
/// ```
/// use tensorfmt_som::ids::check_free_comments;
/// assert!(check_free_comments(&["made by a survey".to_string()]).is_ok());
/// assert!(check_free_comments(&["id column = NVSS name".to_string()]).is_err());
/// ```
pub fn check_free_comments(lines: &[String]) -> Result<()> {
    for (i, l) in lines.iter().enumerate() {
        let written = crate::write::comment_line(l);
        if !ids_from_comments(std::iter::once(&*written)).is_empty() {
            return Err(SomError::BadComment {
                line: i,
                reason: "it reads as a catalogue id line (`# id ...`); give ids as ids",
            });
        }
    }
    Ok(())
}

/// The ids among comment lines, in order (lines starting with [`ID_PREFIX`]; a bare
/// `# id` line is an empty id).
pub fn ids_from_comments<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<String> {
    lines
        .filter_map(|l| {
            let l = l.trim_end_matches('\r');
            if l == ID_PREFIX.trim_end() {
                Some(String::new())
            } else {
                l.strip_prefix(ID_PREFIX).map(str::to_string)
            }
        })
        .collect()
}

/// The ids a PINK file carries: `None` without id lines; an error when there are id
/// lines but not one per entry.
///
/// ```
/// let mut b = b"# id a\n# id b\n".to_vec();
/// for v in [2i32, 0, 0, 2, 0, 2, 1, 1] { b.extend_from_slice(&v.to_le_bytes()); }
/// b.extend_from_slice(&[0; 8]);
/// let f = tensorfmt_som::SomFile::from_bytes(b.into())?;
/// assert_eq!(tensorfmt_som::ids::entry_ids(&f)?, Some(vec!["a".to_string(), "b".to_string()]));
/// # Ok::<(), tensorfmt_som::SomError>(())
/// ```
pub fn entry_ids(file: &SomFile) -> Result<Option<Vec<String>>> {
    let ids = ids_from_comments(file.comments().lines.iter().map(String::as_str));
    if ids.is_empty() {
        return Ok(None);
    }
    let entries = file.n_entries().unwrap_or(0);
    if ids.len() as u64 != entries {
        return Err(SomError::MapOption {
            option: "ids",
            value: format!("{} id lines", ids.len()),
            reason: format!("the file has {entries} entries; expected one `# id` line per entry"),
        });
    }
    Ok(Some(ids))
}
