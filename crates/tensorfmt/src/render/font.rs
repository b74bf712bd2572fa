//! A fixed-width bitmap font for the text in pictures (titles, colour-bar ticks):
//! printable ASCII (`0x20..=0x7E`) as 5x7 glyphs in 6x8 cells (one column and one
//! row of spacing), drawn at an integer scale. The glyph shapes are the classic 5x7
//! LCD character-generator patterns, redrawn for this project and dedicated to the
//! public domain.
//!
//! Text taken from files is [`escape`]d first (a control character becomes `\n`,
//! `\t`, `\u{1b}` ..., as the CLI's text output writes it), so that a name cannot
//! break the picture; any character still outside printable ASCII is drawn as `?`.
//!
//! ```
//! use tensorfmt::render::font::{draw_text, escape, text_width, CELL_H};
//! use tensorfmt::render::Image;
//! let label = escape("a\u{1b}b");
//! assert_eq!(label, "a\\u{1b}b");
//! let mut img = Image::filled(text_width(&label, 1), CELL_H, [255; 3])?;
//! draw_text(&mut img, 0, 0, &label, 1, [0, 0, 0]);
//! assert!(img.rgb.iter().any(|&b| b == 0));
//! # Ok::<(), tensorfmt::Error>(())
//! ```

use super::image::Image;

/// Width of a character cell at scale 1 (5 glyph columns and 1 of spacing).
pub const CELL_W: usize = 6;

/// Height of a character cell at scale 1 (7 glyph rows and 1 of spacing).
pub const CELL_H: usize = 8;

/// Glyphs for `0x20..=0x7E`, five columns each, left to right; bit `r` of a column is
/// row `r` from the top (rows 0 to 6).
const GLYPHS: [[u8; 5]; 95] = [
    [0x00, 0x00, 0x00, 0x00, 0x00], // ' '
    [0x00, 0x00, 0x5f, 0x00, 0x00], // '!'
    [0x00, 0x07, 0x00, 0x07, 0x00], // '"'
    [0x14, 0x7f, 0x14, 0x7f, 0x14], // '#'
    [0x24, 0x2a, 0x7f, 0x2a, 0x12], // '$'
    [0x23, 0x13, 0x08, 0x64, 0x62], // '%'
    [0x36, 0x49, 0x55, 0x22, 0x50], // '&'
    [0x00, 0x05, 0x03, 0x00, 0x00], // '\''
    [0x00, 0x1c, 0x22, 0x41, 0x00], // '('
    [0x00, 0x41, 0x22, 0x1c, 0x00], // ')'
    [0x14, 0x08, 0x3e, 0x08, 0x14], // '*'
    [0x08, 0x08, 0x3e, 0x08, 0x08], // '+'
    [0x00, 0x50, 0x30, 0x00, 0x00], // ','
    [0x08, 0x08, 0x08, 0x08, 0x08], // '-'
    [0x00, 0x60, 0x60, 0x00, 0x00], // '.'
    [0x20, 0x10, 0x08, 0x04, 0x02], // '/'
    [0x3e, 0x51, 0x49, 0x45, 0x3e], // '0'
    [0x00, 0x42, 0x7f, 0x40, 0x00], // '1'
    [0x42, 0x61, 0x51, 0x49, 0x46], // '2'
    [0x21, 0x41, 0x45, 0x4b, 0x31], // '3'
    [0x18, 0x14, 0x12, 0x7f, 0x10], // '4'
    [0x27, 0x45, 0x45, 0x45, 0x39], // '5'
    [0x3c, 0x4a, 0x49, 0x49, 0x30], // '6'
    [0x01, 0x71, 0x09, 0x05, 0x03], // '7'
    [0x36, 0x49, 0x49, 0x49, 0x36], // '8'
    [0x06, 0x49, 0x49, 0x29, 0x1e], // '9'
    [0x00, 0x36, 0x36, 0x00, 0x00], // ':'
    [0x00, 0x56, 0x36, 0x00, 0x00], // ';'
    [0x08, 0x14, 0x22, 0x41, 0x00], // '<'
    [0x14, 0x14, 0x14, 0x14, 0x14], // '='
    [0x00, 0x41, 0x22, 0x14, 0x08], // '>'
    [0x02, 0x01, 0x51, 0x09, 0x06], // '?'
    [0x32, 0x49, 0x79, 0x41, 0x3e], // '@'
    [0x7e, 0x11, 0x11, 0x11, 0x7e], // 'A'
    [0x7f, 0x49, 0x49, 0x49, 0x36], // 'B'
    [0x3e, 0x41, 0x41, 0x41, 0x22], // 'C'
    [0x7f, 0x41, 0x41, 0x22, 0x1c], // 'D'
    [0x7f, 0x49, 0x49, 0x49, 0x41], // 'E'
    [0x7f, 0x09, 0x09, 0x09, 0x01], // 'F'
    [0x3e, 0x41, 0x49, 0x49, 0x7a], // 'G'
    [0x7f, 0x08, 0x08, 0x08, 0x7f], // 'H'
    [0x00, 0x41, 0x7f, 0x41, 0x00], // 'I'
    [0x20, 0x40, 0x41, 0x3f, 0x01], // 'J'
    [0x7f, 0x08, 0x14, 0x22, 0x41], // 'K'
    [0x7f, 0x40, 0x40, 0x40, 0x40], // 'L'
    [0x7f, 0x02, 0x0c, 0x02, 0x7f], // 'M'
    [0x7f, 0x04, 0x08, 0x10, 0x7f], // 'N'
    [0x3e, 0x41, 0x41, 0x41, 0x3e], // 'O'
    [0x7f, 0x09, 0x09, 0x09, 0x06], // 'P'
    [0x3e, 0x41, 0x51, 0x21, 0x5e], // 'Q'
    [0x7f, 0x09, 0x19, 0x29, 0x46], // 'R'
    [0x46, 0x49, 0x49, 0x49, 0x31], // 'S'
    [0x01, 0x01, 0x7f, 0x01, 0x01], // 'T'
    [0x3f, 0x40, 0x40, 0x40, 0x3f], // 'U'
    [0x1f, 0x20, 0x40, 0x20, 0x1f], // 'V'
    [0x3f, 0x40, 0x38, 0x40, 0x3f], // 'W'
    [0x63, 0x14, 0x08, 0x14, 0x63], // 'X'
    [0x07, 0x08, 0x70, 0x08, 0x07], // 'Y'
    [0x61, 0x51, 0x49, 0x45, 0x43], // 'Z'
    [0x00, 0x7f, 0x41, 0x41, 0x00], // '['
    [0x02, 0x04, 0x08, 0x10, 0x20], // '\\'
    [0x00, 0x41, 0x41, 0x7f, 0x00], // ']'
    [0x04, 0x02, 0x01, 0x02, 0x04], // '^'
    [0x40, 0x40, 0x40, 0x40, 0x40], // '_'
    [0x00, 0x01, 0x02, 0x04, 0x00], // '`'
    [0x20, 0x54, 0x54, 0x54, 0x78], // 'a'
    [0x7f, 0x48, 0x44, 0x44, 0x38], // 'b'
    [0x38, 0x44, 0x44, 0x44, 0x20], // 'c'
    [0x38, 0x44, 0x44, 0x48, 0x7f], // 'd'
    [0x38, 0x54, 0x54, 0x54, 0x18], // 'e'
    [0x08, 0x7e, 0x09, 0x01, 0x02], // 'f'
    [0x0c, 0x52, 0x52, 0x52, 0x3e], // 'g'
    [0x7f, 0x08, 0x04, 0x04, 0x78], // 'h'
    [0x00, 0x44, 0x7d, 0x40, 0x00], // 'i'
    [0x20, 0x40, 0x44, 0x3d, 0x00], // 'j'
    [0x7f, 0x10, 0x28, 0x44, 0x00], // 'k'
    [0x00, 0x41, 0x7f, 0x40, 0x00], // 'l'
    [0x7c, 0x04, 0x18, 0x04, 0x78], // 'm'
    [0x7c, 0x08, 0x04, 0x04, 0x78], // 'n'
    [0x38, 0x44, 0x44, 0x44, 0x38], // 'o'
    [0x7c, 0x14, 0x14, 0x14, 0x08], // 'p'
    [0x08, 0x14, 0x14, 0x18, 0x7c], // 'q'
    [0x7c, 0x08, 0x04, 0x04, 0x08], // 'r'
    [0x48, 0x54, 0x54, 0x54, 0x20], // 's'
    [0x04, 0x3f, 0x44, 0x40, 0x20], // 't'
    [0x3c, 0x40, 0x40, 0x20, 0x7c], // 'u'
    [0x1c, 0x20, 0x40, 0x20, 0x1c], // 'v'
    [0x3c, 0x40, 0x30, 0x40, 0x3c], // 'w'
    [0x44, 0x28, 0x10, 0x28, 0x44], // 'x'
    [0x0c, 0x50, 0x50, 0x50, 0x3c], // 'y'
    [0x44, 0x64, 0x54, 0x4c, 0x44], // 'z'
    [0x00, 0x08, 0x36, 0x41, 0x00], // '{'
    [0x00, 0x00, 0x7f, 0x00, 0x00], // '|'
    [0x00, 0x41, 0x36, 0x08, 0x00], // '}'
    [0x08, 0x04, 0x08, 0x10, 0x08], // '~'
];

/// The glyph of `c`: its own for printable ASCII, `?` for anything else.
fn glyph(c: char) -> &'static [u8; 5] {
    let i = match c {
        ' '..='~' => c as usize - 0x20,
        _ => '?' as usize - 0x20,
    };
    &GLYPHS[i]
}

/// Whether `c` must be escaped: C0 and C1 controls, DEL, and the bidirectional
/// overrides (the same set as the CLI's text output).
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every control character written as an escape (`\n`, `\r`, `\t`,
/// otherwise `\u{XX}`), as the CLI prints names.
///
/// ```
/// use tensorfmt::render::font::escape;
/// assert_eq!(escape("conv\n1\u{1b}[31m"), "conv\\n1\\u{1b}[31m");
/// assert_eq!(escape("plain ü"), "plain ü");
/// ```
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Width in pixels of `text` at `scale` (one cell per character).
pub fn text_width(text: &str, scale: usize) -> usize {
    text.chars().count() * CELL_W * scale
}

/// `text` cut to at most `max_chars` characters, ending in `...` when cut.
///
/// ```
/// use tensorfmt::render::font::truncate;
/// assert_eq!(truncate("abcdefgh", 6), "abc...");
/// assert_eq!(truncate("abc", 6), "abc");
/// assert_eq!(truncate("abcdefgh", 2), "..");
/// ```
pub fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    if max_chars < 3 {
        return ".".repeat(max_chars);
    }
    let mut out: String = text.chars().take(max_chars - 3).collect();
    out.push_str("...");
    out
}

/// Draws `text` (already escaped) with its cell's top-left corner at `(x, y)`, each
/// font pixel a `scale x scale` square of `color`; pixels outside the image are
/// skipped. Characters outside printable ASCII are drawn as `?`.
pub fn draw_text(img: &mut Image, x: usize, y: usize, text: &str, scale: usize, color: [u8; 3]) {
    let scale = scale.max(1);
    for (i, c) in text.chars().enumerate() {
        let x0 = x + i * CELL_W * scale;
        if x0 >= img.width as usize {
            break;
        }
        for (col, bits) in glyph(c).iter().enumerate() {
            for row in 0..7 {
                if bits >> row & 1 == 1 {
                    for dy in 0..scale {
                        for dx in 0..scale {
                            img.set_pixel(x0 + col * scale + dx, y + row * scale + dy, color);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glyphs_are_distinct_and_in_the_cell() {
        let mut seen = std::collections::HashSet::new();
        for g in GLYPHS.iter() {
            assert!(g.iter().all(|c| c & 0x80 == 0), "row 7 is spacing");
            assert!(seen.insert(*g), "duplicate glyph {g:?}");
        }
        // 'l' and 'I' share no shape with '1'; only ' ' is blank.
        assert_eq!(
            GLYPHS.iter().filter(|g| g.iter().all(|&c| c == 0)).count(),
            1
        );
        assert_eq!(glyph('\u{e9}'), glyph('?'));
        assert_eq!(glyph('\n'), glyph('?'));
    }

    #[test]
    fn text_is_drawn_at_scale() {
        let mut one = Image::filled(12, 8, [255; 3]).unwrap();
        draw_text(&mut one, 0, 0, "H1", 1, [0; 3]);
        let mut two = Image::filled(24, 16, [255; 3]).unwrap();
        draw_text(&mut two, 0, 0, "H1", 2, [0; 3]);
        assert_eq!(two, one.upscale(2).unwrap());
        // 'H': both outer columns full height, the bar in row 3; column 5 is spacing.
        for y in 0..7 {
            assert_eq!(one.pixel(0, y), Some([0; 3]));
            assert_eq!(one.pixel(4, y), Some([0; 3]));
            assert_eq!(one.pixel(5, y), Some([255; 3]));
        }
        assert_eq!(one.pixel(2, 3), Some([0; 3]));
        assert_eq!(one.pixel(2, 2), Some([255; 3]));
        assert_eq!(one.pixel(0, 7), Some([255; 3]));
        // Text running off the image is clipped, not a panic.
        draw_text(&mut one, 10, 5, "long text", 3, [0; 3]);
    }
}
