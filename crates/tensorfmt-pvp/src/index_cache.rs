//! A process-wide cache of sparse frame tables, keyed by the file's identity, so that
//! opening the same sparse file again (Python's `tensorfmt.open(sparse.pvp,
//! frames=k)` in a loop) costs O(1) in its frame count instead of a scan of every
//! frame header (issue 27, item 4).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::read::SparseTable;

/// What identifies one version of a file: device, inode, size and modification time
/// (nanoseconds). A file rewritten in place gets a new size or modification time, so
/// its old table is not used. The caller (the facade, which knows the path) builds it
/// from the file's metadata before mapping the file.
///
/// ```
/// let a = tensorfmt_pvp::FileKey { dev: 1, ino: 2, size: 3, mtime_ns: 4 };
/// assert_ne!(a, tensorfmt_pvp::FileKey { size: 5, ..a });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileKey {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i128,
}

/// How many tables are kept (least recently used dropped first).
const CAPACITY: usize = 32;

/// The reading options a table depends on, beside the file: the scan stops at
/// `max_items`, and a truncated last frame is a warning or an error.
type Entry = ((FileKey, u64, bool), Arc<SparseTable>);

static CACHE: Mutex<VecDeque<Entry>> = Mutex::new(VecDeque::new());

/// The table cached for `key` (most recently used moves to the front).
pub(crate) fn get(key: (FileKey, u64, bool)) -> Option<Arc<SparseTable>> {
    let mut c = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let i = c.iter().position(|(k, _)| *k == key)?;
    let e = c.remove(i)?;
    let t = e.1.clone();
    c.push_front(e);
    Some(t)
}

/// Remembers `table` for `key`, dropping the least recently used beyond [`CAPACITY`].
pub(crate) fn put(key: (FileKey, u64, bool), table: Arc<SparseTable>) {
    let mut c = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    c.retain(|(k, _)| *k != key);
    c.push_front((key, table));
    c.truncate(CAPACITY);
}
