//! The advisory lock that marks a database file as in use by an open
//! [`SqliteStore`](crate::SqliteStore), so that a tool about to change
//! counters (`ratewarden replay`) can tell that a running service would
//! see them change under its feet.
//!
//! Design decisions:
//! - **A shared `flock` on the database file itself**, held from open to
//!   close: any number of stores (processes, or stores of one process)
//!   hold it together, and [`in_use`] asks for an exclusive lock without
//!   waiting, which fails while any store holds it. A lock file beside the
//!   database would survive crashes as clutter and could be deleted by
//!   hand; the kernel drops a `flock` when its process ends, crash or not.
//! - **Independent of SQLite's locks.** On Linux and the BSDs, `flock`
//!   locks and the POSIX `fcntl` locks SQLite uses never interact. But
//!   closing *any* descriptor of a file drops *every* POSIX lock the
//!   process holds on it (POSIX's rule), so a descriptor of ours must never
//!   be closed while a SQLite connection of this process is open on the
//!   file. Hence: a store opens its descriptor after its connection and
//!   closes it only after the connection is closed; one descriptor per file
//!   per process, shared by every store of the process on that file and
//!   closed with the last of them; and [`in_use`] opens, tries and closes
//!   its descriptor only while no store of this process has the file open
//!   (if one has, it answers without opening anything). A process-wide
//!   mutex orders all of this against stores being opened at the same
//!   time. SQLite connections that the process opens on the file itself,
//!   outside [`SqliteStore`](crate::SqliteStore), are not known here.
//! - **The same descriptor flushes the file.** The background checkpointer
//!   (`checkpoint.rs`) `fsync`s the database file through it ([`FileSync`]):
//!   a descriptor of its own would have to be closed some time, which is
//!   what the rule above forbids. [`FileSync`] borrows the registry's
//!   descriptor for the call, while its store holds the lock.
//! - **Unix only.** Windows locks are mandatory byte-range locks that
//!   would block SQLite's own reads and writes; there the store takes no
//!   lock and [`in_use`] answers `false`. On NFS, Linux emulates `flock`
//!   with POSIX locks, which would then interact with SQLite's: keep the
//!   database on a local file system (SQLite's own advice).

use std::collections::HashMap;
use std::fs::{File, TryLockError};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How a file is told apart from every other: device and inode (the same
/// file under two paths is one file).
type FileId = (u64, u64);

/// The lock descriptor of every database file that stores of this process
/// hold open, with how many stores share it.
#[derive(Default)]
struct Registry {
    files: HashMap<FileId, (Arc<File>, usize)>,
}

/// The registry, behind the process-wide mutex that also orders store
/// opening against [`in_use`].
fn registry() -> MutexGuard<'static, Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY
        .get_or_init(Mutex::default)
        .lock()
        // The registry is consistent after every statement: a panic while
        // it was held leaves nothing half done.
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Held while a store may be opening its connection: no [`in_use`] probe
/// of this process opens and closes a descriptor meanwhile.
pub(crate) struct Opening(MutexGuard<'static, Registry>);

/// Starts opening a store; keep the guard until [`Opening::lock`] (or
/// until the connection is closed again, on failure).
pub(crate) fn opening() -> Opening {
    Opening(registry())
}

impl Opening {
    /// Takes this store's share of the lock on the database file at
    /// `path`, whose SQLite connection is open now. Waits up to `patience`
    /// for an exclusive holder (an [`in_use`] probe, for microseconds) to
    /// let go.
    ///
    /// The handle comes back even when the lock could not be had: the
    /// caller must drop it after the connection is closed, like any other.
    ///
    /// # Errors
    /// The file's metadata cannot be read, it cannot be opened, or the
    /// shared lock cannot be had within `patience`.
    pub(crate) fn lock(mut self, path: &Path, patience: Duration) -> (FileLock, io::Result<()>) {
        let none = FileLock { id: None };
        if !LOCKS {
            return (none, Ok(()));
        }
        let id = match std::fs::metadata(path) {
            Ok(m) => file_id(&m),
            Err(e) => return (none, Err(e)),
        };
        if let Some((_, stores)) = self.0.files.get_mut(&id) {
            *stores += 1;
            return (FileLock { id: Some(id) }, Ok(()));
        }
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) => return (none, Err(e)),
        };
        // From here on `file` must not be closed while this store's
        // connection is open: it goes into the registry whatever happens
        // (under `id`, which the mutex keeps vacant until then).
        let deadline = Instant::now() + patience;
        let locked = loop {
            match file.try_lock_shared() {
                Ok(()) => break Ok(()),
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(TryLockError::WouldBlock) => {
                    break Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        format!(
                            "another process has held an exclusive lock on the file for {} ms",
                            patience.as_millis()
                        ),
                    ));
                }
                Err(TryLockError::Error(e)) => break Err(e),
            }
        };
        self.0.files.insert(id, (Arc::new(file), 1));
        (FileLock { id: Some(id) }, locked)
    }
}

/// One store's share of the lock on its database file: released (the
/// descriptor closed once no store of the process uses the file) when
/// dropped. Drop it only after the store's connection is closed.
#[derive(Debug)]
pub(crate) struct FileLock {
    /// `None` where no lock is taken (not Unix).
    id: Option<FileId>,
}

impl FileLock {
    /// A handle that flushes this store's database file from another
    /// thread (the checkpointer's), for as long as the store holds it.
    pub(crate) fn sync(&self) -> FileSync {
        FileSync { id: self.id }
    }
}

/// Flushes a database file's written pages to disk through the process's
/// lock descriptor of it ([`FileLock::sync`]).
#[derive(Debug)]
pub(crate) struct FileSync {
    id: Option<FileId>,
}

impl FileSync {
    /// `fdatasync`s the file. Does nothing where no lock is taken (not
    /// Unix). Call it only while the store that made it holds its
    /// [`FileLock`] (its checkpointer is stopped before that lock is
    /// dropped): the registry's handle then outlives the one borrowed here,
    /// and the descriptor is closed, as ever, with the last [`FileLock`].
    ///
    /// # Errors
    /// The operating system's, from `fdatasync`.
    pub(crate) fn sync_data(&self) -> io::Result<()> {
        let Some(id) = self.id else { return Ok(()) };
        let file = registry().files.get(&id).map(|(file, _)| Arc::clone(file));
        // Outside the registry's mutex: an `fsync` takes milliseconds.
        file.map_or(Ok(()), |file| file.sync_data())
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        let mut registry = registry();
        if let Some((_, stores)) = registry.files.get_mut(&id) {
            *stores -= 1;
            if *stores == 0 {
                // Closing the descriptor releases the flock.
                registry.files.remove(&id);
            }
        }
    }
}

/// Whether an open [`SqliteStore`](crate::SqliteStore), of this process
/// or of another, holds the database file at `path`. A missing file is not
/// in use. Call it before this process opens its own SQLite connection
/// on the file (see the module documentation). Always `false` where no
/// lock is taken (not Unix).
///
/// # Errors
/// The file exists but cannot be opened or its lock cannot be tried.
pub fn in_use(path: &Path) -> io::Result<bool> {
    if !LOCKS {
        return Ok(false);
    }
    let registry = registry();
    let metadata = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if registry.files.contains_key(&file_id(&metadata)) {
        return Ok(true);
    }
    let file = File::open(path)?;
    let held = match file.try_lock() {
        Ok(()) => false,
        Err(TryLockError::WouldBlock) => true,
        Err(TryLockError::Error(e)) => return Err(e),
    };
    // Closing releases the exclusive lock, if it was had, while the
    // registry is still held: no store of this process opens meanwhile.
    drop(file);
    drop(registry);
    Ok(held)
}

/// Whether this platform takes the lock.
const LOCKS: bool = cfg!(unix);

#[cfg(unix)]
fn file_id(metadata: &std::fs::Metadata) -> FileId {
    use std::os::unix::fs::MetadataExt;
    (metadata.dev(), metadata.ino())
}

#[cfg(not(unix))]
fn file_id(_metadata: &std::fs::Metadata) -> FileId {
    (0, 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

    use super::*;

    fn held(id: Option<FileId>) -> bool {
        id.is_some_and(|id| registry().files.contains_key(&id))
    }

    /// The checkpointer's flush borrows the registry's descriptor while the
    /// store holds its lock, and never opens (nor keeps) one of its own:
    /// once the last lock is gone there is nothing to flush through.
    #[test]
    fn a_file_sync_flushes_through_the_lock_descriptor_while_it_is_held() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("ratewarden.db");
        std::fs::write(&path, b"pages").unwrap();
        let (lock, locked) = opening().lock(&path, Duration::from_secs(1));
        locked.unwrap();
        let sync = lock.sync();
        assert_eq!(held(sync.id), LOCKS);
        std::fs::write(&path, b"more pages").unwrap();
        sync.sync_data().unwrap();
        // The borrowed handle is given back: the lock still closes the
        // descriptor, and with it releases the file.
        if let Some(id) = sync.id {
            assert_eq!(Arc::strong_count(&registry().files[&id].0), 1);
        }
        drop(lock);
        assert!(!held(sync.id));
        assert!(!in_use(&path).unwrap());
        // After the store let go: nothing to do, nothing opened.
        sync.sync_data().unwrap();
        assert!(!held(sync.id));
    }
}
