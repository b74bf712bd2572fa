//! SIGINT, SIGTERM and SIGHUP end the program without leaving hidden temporary files.
//!
//! Writers publish through `AtomicFile` (`.<name>.<pid>.<n>.tmp` beside the output,
//! renamed into place), so an interrupted conversion never leaves a half output; but a
//! killed process used to leave its temporary file until the next write to that
//! output. Here the three signals are blocked in every thread and taken by one thread
//! (`sigwait`), which removes this process's temporaries beside every output it was
//! writing, then dies of the same signal (the shell sees the usual status). SIGKILL
//! cannot be caught: its temporaries are removed by the next write to the output, as
//! before.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Outputs this process writes (their temporaries are removed on a signal).
static OUTPUTS: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Notes that this process writes `output`.
pub fn writing(output: &Path) {
    let mut o = OUTPUTS.lock().unwrap_or_else(|p| p.into_inner());
    o.insert(output.to_path_buf());
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset / sigaddset initialise and fill a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Removes this process's temporaries beside every registered output.
fn remove_temporaries() {
    let pid = std::process::id();
    let outputs = OUTPUTS.lock().unwrap_or_else(|p| p.into_inner()).clone();
    for out in outputs {
        let (Some(dir), Some(name)) = (out.parent(), out.file_name()) else {
            continue;
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let prefix = format!(".{}.{pid}.", name.to_string_lossy());
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let n = e.file_name();
            let n = n.to_string_lossy();
            if n.starts_with(&prefix) && n.ends_with(".tmp") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Blocks the signals in the calling thread (and so in every thread it starts later)
/// and starts the thread that handles them. Call first thing in `main`.
pub fn install() {
    let set = signal_set();
    // SAFETY: changes this thread's signal mask with a valid set.
    let blocked = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if blocked != 0 {
        return; // signals keep their default action
    }
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || loop {
            let mut sig: libc::c_int = 0;
            // SAFETY: waits for one of the blocked signals of a valid set.
            if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                continue;
            }
            remove_temporaries();
            // SAFETY: default action, unblocked in this thread, then delivered to it:
            // the process ends as the signal's default action says.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                let mut one: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut one);
                libc::sigaddset(&mut one, sig);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
                libc::raise(sig);
            }
            std::process::exit(128 + sig);
        });
    if spawned.is_err() {
        // No handler thread: give the signals back their default action.
        // SAFETY: unblocks the set blocked above.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    }
}
