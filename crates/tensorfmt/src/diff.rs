//! Tensor-by-tensor comparison of two files (what `tensorfmt diff` prints).
