//! Progress bars on a terminal, silence elsewhere, moved by the facade's progress hook
//! (`tensorfmt::progress`: the bytes each decoded piece holds).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tensorfmt::progress::Progress;
use tensorfmt::Result;

/// Work below this many bytes gets no bar (it is over before one would help).
const MIN_BYTES: u64 = 16 << 20;

/// A bar counting bytes, drawn only when stderr is a terminal, the work is large and
/// the command is not `quiet` (`--quiet` or `--json`).
pub fn bytes_bar(total: u64, message: &str, quiet: bool) -> ProgressBar {
    if quiet || total < MIN_BYTES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(message.to_string());
    bar
}

/// A bar over files of `total` bytes, advanced by each file's size when it is done;
/// it ticks on its own (elapsed time) so that one large file does not look stuck.
/// Drawn only when stderr is a terminal, the work is large and not `quiet`.
pub fn files_bar(total: u64, files: usize, message: &str, quiet: bool) -> ProgressBar {
    if quiet || total < MIN_BYTES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(&format!(
        "{{spinner}} {{msg}} [{{bar:40}}] {{bytes}}/{{total_bytes}} of {files} file(s) ({{elapsed}})"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(message.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// The progress hook (see `tensorfmt::progress`) that moves `bar`: the CLI's display of
/// the same hook Python's `progress=` callback uses.
pub fn bar_hook(bar: &ProgressBar) -> impl Fn(u64, u64) -> Result<()> + Send + Sync {
    let bar = bar.clone();
    move |done, total| {
        if bar.length() != Some(total) {
            bar.set_length(total);
        }
        bar.set_position(done);
        Ok(())
    }
}

/// A progress over `bar`'s length that moves `bar`, for reading through
/// [`tensorfmt::progress::Tracked`] (`inspect --stats`, `diff`).
pub fn bar_progress(bar: &ProgressBar) -> Progress<'static> {
    Progress::new(bar.length().unwrap_or(0), bar_hook(bar))
}
