//! `cargo xtask codegen`: prost code generated from `proto/` (filled in by the Caffe work).

pub fn run(_check: bool) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn codegen_is_fresh() {
        super::run(true).unwrap();
    }
}
