//! tensorfmt support for the primitiv format (work in progress).
