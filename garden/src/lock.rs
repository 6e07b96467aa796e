//! The repository lock: `<repo>/lock`, an advisory `flock`.
//!
//! Commands that write take it exclusively, readers share it. The file is
//! never deleted; the kernel releases the lock when the process ends, so a
//! crashed sgard never leaves a stale lock behind.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::Path;

use crate::{Error, Result};

/// The lock file's name inside a repository.
pub const LOCK_FILE: &str = "lock";

/// How a command uses the repository.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LockMode {
    /// Reads only; shares the lock with other readers.
    Shared,
    /// Writes; excludes everyone else.
    Exclusive,
}

/// A held repository lock (released on drop).
#[derive(Debug)]
pub struct RepoLock {
    _file: Option<File>,
    /// A writer's turn (see [`RepoLock::acquire`]).
    _turn: Option<File>,
    mode: LockMode,
}

/// The file whose exclusive holder is the next writer.
pub const TURN_FILE: &str = "lock.turn";

/// Opens the lock file `name` of `repo` (`None`: a read-only repository,
/// for a reader; a writer is refused with [`Error::ReadOnly`]).
fn open_lock_file(repo: &Path, name: &str, mode: LockMode) -> Result<Option<File>> {
    let path = repo.join(name);
    match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
    {
        Ok(f) => Ok(Some(f)),
        Err(e) if is_read_only(&e) => match mode {
            LockMode::Shared => Ok(File::open(&path).ok()),
            LockMode::Exclusive => Err(Error::ReadOnly {
                path: repo.to_path_buf(),
                source: e,
            }),
        },
        Err(e) => Err(Error::io("opening lock file", path, e)),
    }
}

/// Locks `file` in `mode`, saying once (through `say`) that it waits.
fn take(file: &File, shown: &Path, mode: LockMode, say: &dyn Fn(&str)) -> Result<()> {
    let attempt = match mode {
        LockMode::Shared => file.try_lock_shared(),
        LockMode::Exclusive => file.try_lock(),
    };
    match attempt {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => {
            say(&wait_message(shown, mode));
            match mode {
                LockMode::Shared => file.lock_shared(),
                LockMode::Exclusive => file.lock(),
            }
            .map_err(|e| Error::io("locking", shown, e))
        }
        Err(TryLockError::Error(e)) => Err(Error::io("locking", shown, e)),
    }
}

impl RepoLock {
    /// Takes the lock of the repository at `repo`, calling `on_wait` with a
    /// message once if another process holds it and we must wait.
    ///
    /// `flock` does not queue: a stream of readers could keep a writer out
    /// for ever. So a writer first takes `lock.turn` exclusively (then waits
    /// for the readers inside to leave), and a reader passes through
    /// `lock.turn` (shared, released as soon as it holds `lock`): readers
    /// arriving while a writer waits wait behind it.
    ///
    /// A shared lock on a read-only repository (no lock file can be created)
    /// proceeds without one: nothing can write there anyway.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] for a writer when the repository cannot be
    /// written; [`Error::Io`] when the lock file cannot be opened or locked.
    pub fn acquire(repo: &Path, mode: LockMode, on_wait: &dyn Fn(&str)) -> Result<Self> {
        let waited = std::cell::Cell::new(false);
        let say = |m: &str| {
            if !waited.replace(true) {
                on_wait(m);
            }
        };
        let turn = open_lock_file(repo, TURN_FILE, mode)?;
        if let Some(t) = &turn {
            take(t, &repo.join(LOCK_FILE), mode, &say)?;
        }
        let Some(file) = open_lock_file(repo, LOCK_FILE, mode)? else {
            return Ok(RepoLock {
                _file: None,
                _turn: None,
                mode,
            });
        };
        take(&file, &repo.join(LOCK_FILE), mode, &say)?;
        // A reader lets the next writer take its turn at once.
        let turn = match mode {
            LockMode::Shared => None,
            LockMode::Exclusive => turn,
        };
        Ok(RepoLock {
            _file: Some(file),
            _turn: turn,
            mode,
        })
    }

    /// The mode held.
    pub fn mode(&self) -> LockMode {
        self.mode
    }
}

fn wait_message(path: &Path, mode: LockMode) -> String {
    let what = match mode {
        LockMode::Shared => "shared",
        LockMode::Exclusive => "exclusive",
    };
    format!(
        "waiting for the {what} lock on {} (another sgard is using this repository)",
        path.display()
    )
}

fn is_read_only(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied || e.kind() == io::ErrorKind::ReadOnlyFilesystem
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn shared_locks_coexist_and_exclusive_waits() {
        let dir = tempfile::tempdir().unwrap();
        let a = RepoLock::acquire(dir.path(), LockMode::Shared, &|_| panic!("waited")).unwrap();
        let b = RepoLock::acquire(dir.path(), LockMode::Shared, &|_| panic!("waited")).unwrap();
        assert_eq!(a.mode(), LockMode::Shared);
        drop((a, b));
        let held = RepoLock::acquire(dir.path(), LockMode::Exclusive, &|_| {}).unwrap();
        let f = File::open(dir.path().join(LOCK_FILE)).unwrap();
        assert!(matches!(f.try_lock_shared(), Err(TryLockError::WouldBlock)));
        drop(held);
        assert!(f.try_lock_shared().is_ok());
    }

    #[test]
    fn waiting_says_which_lock() {
        let dir = tempfile::tempdir().unwrap();
        let held = RepoLock::acquire(dir.path(), LockMode::Exclusive, &|_| {}).unwrap();
        let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let p = dir.path().to_path_buf();
        let said2 = said.clone();
        let t = std::thread::spawn(move || {
            let waited = Cell::new(false);
            let _l = RepoLock::acquire(&p, LockMode::Shared, &|m| {
                waited.set(true);
                *said2.lock().unwrap() = m.to_owned();
            })
            .unwrap();
            waited.get()
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        drop(held);
        assert!(t.join().unwrap());
        let msg = said.lock().unwrap().clone();
        assert!(msg.contains("waiting for the shared lock"), "{msg}");
        assert!(msg.contains("lock"), "{msg}");
    }
}
