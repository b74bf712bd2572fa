//! A guard against mapped inputs that shrink while being read.
//!
//! Reading a page of a file mapping beyond the file's current end raises `SIGBUS`,
//! which kills the process (exit 135, no message): another process truncating or
//! rewriting an input while we convert it, a sync tool replacing a file. The guard is a
//! process-wide `SIGBUS` handler plus a lock-free registry of the mappings made by
//! [`map_file`](super::map_file). On a fault inside a registered mapping the handler maps
//! an anonymous zero page over the faulting page (`mmap` is async-signal-safe), counts
//! the fault and returns: the read goes on and sees zeros. Every [`AtomicFile`]
//! (super::AtomicFile) then refuses to commit an output whose writing overlapped a fault
//! ([`faults`] changed), so a zero-filled result is never published: the caller gets
//! [`Error::InputChanged`](crate::Error::InputChanged) naming the input, and the
//! temporary file is removed. Faults at other addresses go to the previous handler (or
//! the default action), so the guard never hides a real bug.
//!
//! Cost: one `sigaction` per process and two atomic stores per mapping; nothing on the
//! read path (see ARCHITECTURE.md).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, Once, OnceLock};

/// Mappings tracked at once; more are still read, unguarded.
const SLOTS: usize = 4096;

static STARTS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static LENS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static FAULTS: AtomicU64 = AtomicU64::new(0);
static LAST_SLOT: AtomicUsize = AtomicUsize::new(usize::MAX);
static PAGE: AtomicUsize = AtomicUsize::new(4096);
static PATHS: Mutex<Vec<(usize, PathBuf)>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

#[cfg(unix)]
struct Previous(libc::sigaction);
// SAFETY: a `sigaction` is plain data (a handler address, flags and a mask); it is
// written once before the handler can run and only read afterwards.
#[cfg(unix)]
unsafe impl Sync for Previous {}
#[cfg(unix)]
unsafe impl Send for Previous {}
#[cfg(unix)]
static PREVIOUS: OnceLock<Previous> = OnceLock::new();

/// The number of guarded faults so far in this process.
pub fn faults() -> u64 {
    FAULTS.load(Ordering::SeqCst)
}

/// The input of the most recent guarded fault, when it is still known.
pub fn last_faulted_path() -> Option<PathBuf> {
    let slot = LAST_SLOT.load(Ordering::SeqCst);
    let paths = PATHS.lock().unwrap_or_else(|p| p.into_inner());
    paths
        .iter()
        .find(|(s, _)| *s == slot)
        .map(|(_, p)| p.clone())
}

/// Records a fault that the kernel reported as `EFAULT` instead of a signal: a
/// `write(2)` whose source buffer `[addr, addr + len)` lies in a registered mapping
/// whose file shrank. It counts like a guarded signal (so no open `AtomicFile`
/// commits) and returns the input's path; `None` when the buffer is not ours.
pub(crate) fn record_efault(addr: usize, len: usize) -> Option<PathBuf> {
    for slot in 0..SLOTS {
        let start = STARTS[slot].load(Ordering::SeqCst);
        if start == 0 {
            continue;
        }
        let size = LENS[slot].load(Ordering::SeqCst);
        if addr < start.saturating_add(size) && start < addr.saturating_add(len) {
            LAST_SLOT.store(slot, Ordering::SeqCst);
            FAULTS.fetch_add(1, Ordering::SeqCst);
            let paths = PATHS.lock().unwrap_or_else(|p| p.into_inner());
            return paths
                .iter()
                .find(|(s, _)| *s == slot)
                .map(|(_, p)| p.clone());
        }
    }
    None
}

/// A mapping's place in the registry; dropping it (before the unmap) removes it.
#[derive(Debug)]
pub(crate) struct Registration {
    slot: usize,
}

impl Drop for Registration {
    fn drop(&mut self) {
        LENS[self.slot].store(0, Ordering::SeqCst);
        STARTS[self.slot].store(0, Ordering::SeqCst);
        // Keep the path of a faulted mapping for the error message; drop the others.
        if LAST_SLOT.load(Ordering::SeqCst) != self.slot {
            let mut paths = PATHS.lock().unwrap_or_else(|p| p.into_inner());
            paths.retain(|(s, _)| *s != self.slot);
        }
    }
}

/// Registers a mapping (`None` when every slot is taken: the mapping is then read
/// unguarded, as before the guard existed).
pub(crate) fn register(data: &[u8], path: &Path) -> Option<Registration> {
    if data.is_empty() {
        return None;
    }
    install();
    let start = data.as_ptr() as usize;
    for slot in 0..SLOTS {
        if STARTS[slot]
            .compare_exchange(0, start, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            {
                let mut paths = PATHS.lock().unwrap_or_else(|p| p.into_inner());
                paths.retain(|(s, _)| *s != slot);
                paths.push((slot, path.to_path_buf()));
            }
            LENS[slot].store(data.len(), Ordering::SeqCst);
            return Some(Registration { slot });
        }
    }
    None
}

/// Installs the process-wide `SIGBUS` handler (once; later calls do nothing). The
/// facade's `map_file` calls it, and so do the CLI at start and the Python module at
/// import.
///
/// ```
/// tensorfmt_core::io::install_fault_guard();
/// tensorfmt_core::io::install_fault_guard(); // idempotent
/// ```
pub fn install() {
    INSTALL.call_once(|| {
        #[cfg(unix)]
        // SAFETY: `sysconf` and `sigaction` are called with valid arguments; the new
        // action's handler is `on_sigbus`, an `extern "C"` function with the
        // `SA_SIGINFO` signature, and the old action is stored before any fault can be
        // routed to it (the registry is still empty while this runs).
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE);
            if page > 0 {
                PAGE.store(page as usize, Ordering::SeqCst);
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut new.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &new, &mut old) == 0 {
                let _ = PREVIOUS.set(Previous(old));
            }
        }
    });
}

#[cfg(unix)]
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid `siginfo_t` for a SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    for slot in 0..SLOTS {
        let start = STARTS[slot].load(Ordering::SeqCst);
        if start == 0 {
            continue;
        }
        let len = LENS[slot].load(Ordering::SeqCst);
        if addr >= start && addr - start < len {
            let base = addr & !(page - 1);
            // SAFETY: `base` is the page of a live read-only mapping that we made (it is
            // registered until just before it is unmapped); replacing that page with a
            // private zero page changes what a reader of the vanished file region sees
            // (zeros instead of a fault) and nothing else. `mmap` is async-signal-safe.
            let p = unsafe {
                libc::mmap(
                    base as *mut libc::c_void,
                    page,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                LAST_SLOT.store(slot, Ordering::SeqCst);
                FAULTS.fetch_add(1, Ordering::SeqCst);
                return;
            }
        }
    }
    // Not one of ours: what would have happened without the guard.
    // SAFETY: calling the previously installed handler with the arguments we received
    // (the signature its flags declare), or restoring the default action so that the
    // faulting instruction, when it runs again on return, ends the process as before.
    unsafe {
        match PREVIOUS.get() {
            Some(Previous(old))
                if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN =>
            {
                if old.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(old.sa_sigaction);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(old.sa_sigaction);
                    f(sig);
                }
            }
            _ => {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        }
    }
}
