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

impl Failure {
    /// An error of a conversion from `input` to `output`: as it is when it names either
    /// file (a write error names the output), else naming the input first (a limit or
    /// a bad value met while reading it).
    pub fn in_conversion(
        input: &std::path::Path,
        output: &std::path::Path,
        e: tensorfmt::Error,
    ) -> Failure {
        let m = e.to_string();
        if m.contains(&output.display().to_string()) {
            Failure::Input(m)
        } else {
            Failure::in_file(input, e)
        }
    }

    /// The message for a text line that names `path` already (`PATH: error: ...` in a
    /// collection): without a leading `PATH: `, so the file is named once. (JSON keeps
    /// the whole message: its `error` string stands alone.)
    pub fn message_about(&self, path: &std::path::Path) -> String {
        without_path(self.message(), path)
    }
}

/// `message` without a leading `PATH: `, for a line that names `path` already.
pub fn without_path(message: String, path: &std::path::Path) -> String {
    let prefix = format!("{}: ", path.display());
    match message.strip_prefix(&prefix) {
        Some(rest) => rest.to_string(),
        None => message,
    }
}

impl From<tensorfmt::Error> for Failure {
    fn from(e: tensorfmt::Error) -> Failure {
        Failure::Input(e.to_string())
    }
}
