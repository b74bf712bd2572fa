//! Text on stdout: every command prints through [`emit`] (a closed pipe stops the
//! output, not the work), [`emit_json`] for JSON documents and `sayln!` for lines.

use serde_json::Value;

/// `println!` through [`emit`].
macro_rules! sayln {
    ($($arg:tt)*) => {
        $crate::output::emit(&format!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use sayln;

/// Prints a JSON document, pretty, on stdout.
pub(crate) fn emit_json(doc: &Value) {
    // One string, the size of what is printed (no second formatted copy).
    let mut text = serde_json::to_string_pretty(doc).unwrap_or_default();
    text.push('\n');
    emit(&text);
}

/// Set once stdout is a closed pipe.
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes text to stdout. A closed pipe (`tensorfmt validate -r DIR | head -1`) drops
/// the rest of the output but not the work: the command goes on, and its exit code
/// still says whether anything failed (instead of exiting 0 as soon as the reader
/// leaves, which would hide the failures it did not read).
pub(crate) fn emit(text: &str) {
    use std::io::Write;
    use std::sync::atomic::Ordering;
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            return;
        }
        eprintln!("tensorfmt: error: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}
