//! [`Key`]: the names in primitiv files (stat names, model path elements, optimizer
//! configs), kept as the raw bytes of a MessagePack `str`.

use std::fmt;

/// A key (stat name, model path element, optimizer config name): the raw bytes of a
/// MessagePack `str`. primitiv does not check UTF-8, so keys are kept losslessly as
/// bytes; `Display` shows invalid bytes as `\xNN`.
///
/// ```
/// use tensorfmt_primitiv::Key;
/// let k = Key::from("Adam.m1");
/// assert_eq!(k.as_str(), Some("Adam.m1"));
/// assert_eq!(Key::new(vec![b'a', 0xff]).to_string(), "a\\xff");
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Key(Vec<u8>);

impl Key {
    /// A key from raw bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Key {
        Key(bytes.into())
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The key as text when it is UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }
}

impl From<&str> for Key {
    fn from(s: &str) -> Key {
        Key(s.as_bytes().to_vec())
    }
}

impl From<String> for Key {
    fn from(s: String) -> Key {
        Key(s.into_bytes())
    }
}

impl PartialEq<str> for Key {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for Key {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            f.write_str(chunk.valid())?;
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}
