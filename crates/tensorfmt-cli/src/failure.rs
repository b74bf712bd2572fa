//! [`Failure`]: why a command failed, which decides the exit code. Every command
//! returns it; `main` prints it and exits with its code.

/// Why a command failed, which decides the exit code.
#[derive(Debug)]
pub enum Failure {
    /// Invalid or unreadable input (exit 1; 2 for `diff`).
    Input(String),
    /// The command line asks for something impossible (exit 2).
    Usage(String),
    /// Already reported (e.g. validate's per-file lines); exit 1.
    Reported,
}

impl Failure {
    /// The sentence to show for this failure.
    pub fn message(&self) -> String {
        match self {
            Failure::Input(m) | Failure::Usage(m) => m.clone(),
            Failure::Reported => "failed (reported above)".into(),
        }
    }
}

impl Failure {
    /// An input error naming the file it concerns first, unless its message already
    /// does (`diff A B` must say which side was bad).
    pub fn in_file(path: &std::path::Path, e: tensorfmt::Error) -> Failure {
        let shown = path.display().to_string();
        let m = e.to_string();
        if m.contains(&shown) {
            Failure::Input(m)
        } else {
            Failure::Input(format!("{shown}: {m}"))
        }
    }
}

impl From<tensorfmt::Error> for Failure {
    fn from(e: tensorfmt::Error) -> Failure {
        Failure::Input(e.to_string())
    }
}
