//! tensorfmt support for the som format (work in progress).
