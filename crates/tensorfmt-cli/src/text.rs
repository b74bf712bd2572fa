//! Text that reaches a terminal: names, paths and messages taken from files are
//! escaped (a control character is written as `\n`, `\t`, `\u{1b}` ...) and bounded,
//! so that a file cannot move the cursor, recolour the terminal, split one line into
//! two or print a megabyte-wide column. JSON output escapes by itself and is whole.

use std::borrow::Cow;
use std::path::Path;

/// Whether `c` must not reach a terminal raw: C0 and C1 controls, DEL, and the
/// bidirectional overrides that reorder what follows them.
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every control character escaped (`\n`, `\r`, `\t`, otherwise `\u{XX}`);
/// borrowed when there is none.
///
/// ```ignore
/// assert_eq!(esc("a\u{1b}[31mb\n"), "a\\u{1b}[31mb\\n");
/// ```
pub fn esc(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A path for text output: lossy UTF-8, escaped.
pub fn path(p: &Path) -> String {
    esc(&p.to_string_lossy()).into_owned()
}

/// `s` escaped; longer than `max` characters (after escaping), cut to `max - room`
/// and followed by `note(len in bytes)`, which stays within `room` characters.
fn bounded(s: &str, max: usize, room: usize, note: impl Fn(usize) -> String) -> String {
    let e = esc(s);
    if e.chars().count() <= max {
        return e.into_owned();
    }
    let head: String = e.chars().take(max - room).collect();
    format!("{head}... {}", note(s.len()))
}

/// Longest name (in characters, after escaping) that text output prints whole.
pub const NAME_MAX: usize = 120;

/// `s` escaped and cut to at most [`NAME_MAX`] characters plus a note of the length
/// (`--json` shows it whole).
pub fn name(s: &str) -> String {
    bounded(s, NAME_MAX, 24, |n| format!("({n} bytes)"))
}

/// Longest message (error, warning, note; in characters after escaping) printed whole.
pub const MESSAGE_MAX: usize = 2000;

/// A message for a terminal: escaped, and cut to [`MESSAGE_MAX`] characters with a note
/// of its length (a warning listing 300,000 unused layers, a 70 kB name inside an
/// error). `--json` carries messages whole.
pub fn message(s: &str) -> String {
    bounded(s, MESSAGE_MAX, 60, |n| {
        format!("({n} bytes in all; --json shows the whole message)")
    })
}

/// Longest header value (in characters, after escaping) a line of text output shows.
pub const VALUE_MAX: usize = 240;

/// A header value for one line of text: escaped and cut to [`VALUE_MAX`] characters
/// with the full length noted (`--json` shows it whole). Lists and maps print inline,
/// and one long name inside them must not make a 70 kB line.
pub fn value(s: &str) -> String {
    bounded(s, VALUE_MAX, 40, |n| {
        format!("({n} bytes; --json shows all)")
    })
}

/// `s` followed by spaces up to `width` characters (nothing added when it is longer).
/// Unlike `{:width$}`, any width is fine.
pub fn pad(s: &str, width: usize) -> String {
    let n = s.chars().count();
    let mut out = String::with_capacity(s.len() + width.saturating_sub(n));
    out.push_str(s);
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(n)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_escaped_and_bounded() {
        assert_eq!(message("a\nb"), "a\\nb");
        let long = format!("unused layers: {}", "x, ".repeat(100_000));
        let m = message(&long);
        assert!(m.chars().count() <= MESSAGE_MAX, "{}", m.len());
        assert!(
            m.ends_with("bytes in all; --json shows the whole message)"),
            "{m}"
        );
    }

    #[test]
    fn escapes_controls_only() {
        assert_eq!(esc("plain name/ü"), "plain name/ü");
        assert!(matches!(esc("plain"), Cow::Borrowed(_)));
        assert_eq!(esc("a\u{1b}[31mb\n"), "a\\u{1b}[31mb\\n");
        assert_eq!(
            esc("\t\r\u{7f}\u{9b}\u{202e}"),
            "\\t\\r\\u{7f}\\u{9b}\\u{202e}"
        );
    }

    #[test]
    fn names_are_bounded() {
        let long = "x".repeat(70_000);
        let n = name(&long);
        assert!(n.chars().count() <= NAME_MAX + 20, "{}", n.len());
        assert!(n.ends_with("(70000 bytes)"));
        assert_eq!(name("short"), "short");
        assert_eq!(pad("ab", 4), "ab  ");
        assert_eq!(pad("abcdef", 4), "abcdef");
        assert_eq!(pad("x", 100_000).len(), 100_000);
    }
}
