//! Interrupting writes: a process-wide "stop writing" flag that every [`AtomicFile`]
//! write checks, and a lock-free table of the temporary files being written, which a
//! SIGTERM / SIGHUP handler removes before the process dies of the signal.
//!
//! Why: a host (the Python module) that sees Ctrl-C while a long native conversion
//! runs must stop it, and the temporary file must go; a process killed by SIGTERM
//! used to leave its hidden temporary file until the next write to that output.
//!
//! [`AtomicFile`]: super::AtomicFile

use std::cell::UnsafeCell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

/// Makes every [`AtomicFile`](super::AtomicFile) write fail (`true`) until called
/// again with `false`. A failed write abandons its output: the temporary file is
/// removed and nothing is published.
///
/// ```
/// use std::io::Write;
/// let dir = tempfile::tempdir()?;
/// let mut f = tensorfmt_core::io::AtomicFile::create(dir.path().join("x"))?;
/// tensorfmt_core::io::stop_writes(true);
/// let e = f.write_all(b"data").unwrap_err();
/// tensorfmt_core::io::stop_writes(false);
/// assert!(e.to_string().contains("interrupted"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn stop_writes(stop: bool) {
    STOP.store(stop, Ordering::SeqCst);
}

/// Whether writes are being stopped (see [`stop_writes`]).
///
/// ```
/// assert!(!tensorfmt_core::io::writes_stopped());
/// ```
pub fn writes_stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// `Err` once [`stop_writes`] asked every long operation to stop: the check that
/// streamed reads (statistics, validation, diff, every chunk the facade's `Document`
/// hands out) make between pieces, so
/// that a long read-only call is interrupted as promptly as a write.
///
/// ```
/// assert!(tensorfmt_core::io::check_stop().is_ok());
/// tensorfmt_core::io::stop_writes(true);
/// assert!(tensorfmt_core::io::check_stop().unwrap_err().to_string().contains("interrupted"));
/// tensorfmt_core::io::stop_writes(false);
/// ```
pub fn check_stop() -> crate::Result<()> {
    if writes_stopped() {
        return Err(crate::Error::Invalid(
            "interrupted (a signal asked to stop)".into(),
        ));
    }
    Ok(())
}

const SLOTS: usize = 256;
const PATH_MAX: usize = 4096;
const FREE: u8 = 0;
const FILLING: u8 = 1;
const LIVE: u8 = 2;

struct Slot {
    state: AtomicU8,
    path: UnsafeCell<[u8; PATH_MAX]>,
}

// SAFETY: `path` is written only by the thread that moved `state` from FREE to
// FILLING, and read (by the signal handler) only while `state` is LIVE.
unsafe impl Sync for Slot {}

#[allow(clippy::declare_interior_mutable_const)] // only used to build the array
const EMPTY: Slot = Slot {
    state: AtomicU8::new(FREE),
    path: UnsafeCell::new([0; PATH_MAX]),
};

static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];

/// Records a temporary file being written; `None` when the table is full or the path
/// too long (that file is then left to the next write's stale-temporary sweep).
pub(crate) fn register(path: &Path) -> Option<usize> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= PATH_MAX || bytes.contains(&0) {
        return None;
    }
    for (k, slot) in TABLE.iter().enumerate() {
        if slot
            .state
            .compare_exchange(FREE, FILLING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: this thread owns the slot while it is FILLING.
            let buf = unsafe { &mut *slot.path.get() };
            buf[..bytes.len()].copy_from_slice(bytes);
            buf[bytes.len()] = 0;
            slot.state.store(LIVE, Ordering::Release);
            return Some(k);
        }
    }
    None
}

/// Forgets a temporary file (committed or removed).
pub(crate) fn unregister(slot: Option<usize>) {
    if let Some(k) = slot {
        TABLE[k].state.store(FREE, Ordering::Release);
    }
}

/// Unlinks every temporary file an [`AtomicFile`](super::AtomicFile) of this process
/// is writing (its later writes then fail, so nothing is published). Async-signal-safe
/// (atomic loads and `unlink` only): meant for a termination handler.
///
/// ```
/// use std::io::Write;
/// let dir = tempfile::tempdir()?;
/// let mut f = tensorfmt_core::io::AtomicFile::create(dir.path().join("x"))?;
/// f.write_all(b"data")?;
/// tensorfmt_core::io::remove_live_temporaries();
/// assert_eq!(std::fs::read_dir(dir.path())?.count(), 0);
/// assert!(f.commit().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn remove_live_temporaries() {
    remove_registered(|_| true);
}

/// Unlinks the live temporaries whose path `wanted` accepts (tests pick their own, so
/// that other tests' writes running in the same process are left alone).
fn remove_registered(wanted: impl Fn(&[u8]) -> bool) {
    for slot in &TABLE {
        if slot.state.load(Ordering::Acquire) == LIVE {
            // SAFETY: a LIVE slot holds a NUL-terminated path.
            let path = unsafe { &*slot.path.get() };
            let len = path.iter().position(|&b| b == 0).unwrap_or(0);
            if wanted(&path[..len]) {
                // SAFETY: as above.
                unsafe { libc::unlink(slot.path.get() as *const libc::c_char) };
            }
        }
    }
}

extern "C" fn on_termination(sig: libc::c_int) {
    remove_live_temporaries();
    // SAFETY: back to the default action, then the same signal: the process ends as
    // it would have without us (the shell sees the signal).
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// For SIGTERM and SIGHUP whose action is still the default (terminate): removes the
/// temporary files being written, then terminates as before. A signal someone else
/// handles is left alone (that handler decides; a host language's handler that raises
/// an exception stops the write through [`stop_writes`]).
///
/// ```
/// tensorfmt_core::io::install_termination_cleanup(); // idempotent
/// tensorfmt_core::io::install_termination_cleanup();
/// ```
pub fn install_termination_cleanup() {
    static DONE: AtomicBool = AtomicBool::new(false);
    if DONE.swap(true, Ordering::SeqCst) {
        return;
    }
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: queries and sets a signal action with valid structs.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_termination as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut new.sa_mask);
            new.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &new, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_temporaries_are_removed_and_freed_slots_reused() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        // Only this test's files: other tests of this process write at the same time.
        let ours = dir.path().as_os_str().as_bytes().to_vec();
        let remove_live_temporaries = || remove_registered(|p| p.starts_with(&ours));
        let a = dir.path().join(".a.tmp");
        std::fs::write(&a, b"x").unwrap();
        let slot = register(&a);
        assert!(slot.is_some());
        remove_live_temporaries();
        assert!(!a.exists());
        unregister(slot);
        let b = dir.path().join(".b.tmp");
        std::fs::write(&b, b"x").unwrap();
        remove_live_temporaries();
        assert!(b.exists(), "an unregistered file is never touched");
    }
}
