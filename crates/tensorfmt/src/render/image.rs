//! [`Image`]: the 8-bit RGB pixels every renderer draws into and PNG output encodes.

/// An 8-bit RGB image.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Row-major RGB bytes, `3 * width * height` long.
    pub rgb: Vec<u8>,
}
