//! Colour maps for scalar pictures: viridis (perceptual, from an 11-entry lookup
//! table, linearly interpolated) and grayscale, plus the fixed colours used for
//! backgrounds and NaN pixels.

/// Colour of gaps and of the area around hexagonal cells.
pub const BACKGROUND: [u8; 3] = [255, 255, 255];

/// Colour of NaN values (PINK shows NaN as `#ffaadd`).
pub const NAN_COLOR: [u8; 3] = [0xff, 0xaa, 0xdd];

/// Viridis at 0, 0.1, ..., 1 (matplotlib's values).
const VIRIDIS: [[u8; 3]; 11] = [
    [0x44, 0x01, 0x54],
    [0x48, 0x24, 0x75],
    [0x41, 0x44, 0x87],
    [0x35, 0x5f, 0x8d],
    [0x2a, 0x78, 0x8e],
    [0x21, 0x91, 0x8c],
    [0x22, 0xa8, 0x84],
    [0x44, 0xbf, 0x70],
    [0x7a, 0xd1, 0x51],
    [0xbd, 0xdf, 0x26],
    [0xfd, 0xe7, 0x25],
];

/// A map from `[0, 1]` to colours.
///
/// ```
/// use tensorfmt::render::colormap::Colormap;
/// assert_eq!(Colormap::Viridis.color(0.0), [0x44, 0x01, 0x54]);
/// assert_eq!(Colormap::Viridis.color(1.0), [0xfd, 0xe7, 0x25]);
/// assert_eq!(Colormap::Gray.color(0.5), [128, 128, 128]);
/// assert_eq!(Colormap::Gray.color(f32::NAN), tensorfmt::render::colormap::NAN_COLOR);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Colormap {
    /// Perceptually uniform, colour-blind friendly (the default).
    #[default]
    Viridis,
    /// Black to white.
    Gray,
}

impl Colormap {
    /// The colour of `t` (clamped to `[0, 1]`; NaN gives [`NAN_COLOR`]).
    pub fn color(self, t: f32) -> [u8; 3] {
        if t.is_nan() {
            return NAN_COLOR;
        }
        let t = t.clamp(0.0, 1.0);
        match self {
            Colormap::Gray => {
                let v = (t * 255.0).round() as u8;
                [v, v, v]
            }
            Colormap::Viridis => {
                let x = t * (VIRIDIS.len() - 1) as f32;
                let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
                let f = x - i as f32;
                let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
                let mix = |k: usize| (a[k] as f32 + (b[k] as f32 - a[k] as f32) * f).round() as u8;
                [mix(0), mix(1), mix(2)]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viridis_is_monotone_in_lightness() {
        let lum = |c: [u8; 3]| 0.2126 * c[0] as f32 + 0.7152 * c[1] as f32 + 0.0722 * c[2] as f32;
        let mut last = -1.0;
        for i in 0..=100 {
            let l = lum(Colormap::Viridis.color(i as f32 / 100.0));
            assert!(l >= last - 0.5, "lightness drops at {i}");
            last = l;
        }
        assert_eq!(Colormap::Viridis.color(0.5), VIRIDIS[5]);
        assert_eq!(Colormap::Viridis.color(-3.0), VIRIDIS[0]);
        assert_eq!(Colormap::Viridis.color(7.0), VIRIDIS[10]);
    }
}
