//! tensorfmt support for the pvp format (work in progress).
