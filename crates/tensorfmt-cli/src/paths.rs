//! What a path is, beyond its spelling: a file's identity (device and inode), which
//! directory walks use to stop at link loops and conversions to refuse writing over
//! their input.

/// A file's identity: device and inode (what `ln`, `./x` vs `x` and symbolic links
/// cannot disguise).
pub type Identity = (u64, u64);

/// The identity of what `meta` describes.
pub fn identity(meta: &std::fs::Metadata) -> Identity {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}
