//! The `tensorfmt` command-line tool (work in progress).
fn main() {}
