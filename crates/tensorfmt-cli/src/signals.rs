//! SIGINT, SIGTERM and SIGHUP end the program without leaving hidden temporary files.
//!
//! Writers publish through `AtomicFile` (`.<name>.<pid>.<n>.tmp` beside the output,
//! renamed into place), so an interrupted conversion never leaves a half output; but a
//! killed process used to leave its temporary file until the next write to that
//! output. Here the three signals are blocked in every thread and taken by one thread
//! (`sigwait`), which stops every write (`tensorfmt::io::stop_writes`), removes the
//! temporary files being written (`tensorfmt::io::remove_live_temporaries`, the table
//! `AtomicFile` keeps), then dies of the same signal (the shell sees the usual status).
//! SIGKILL cannot be caught: its temporaries are removed by the next write to the
//! output, as before.

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

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
            tensorfmt::io::stop_writes(true);
            tensorfmt::io::remove_live_temporaries();
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
