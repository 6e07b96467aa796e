//! Cancellation (Ctrl-C) and the temp files to remove when it comes.
//!
//! The CLI's signal thread calls [`request`]; long loops (copying blobs,
//! staging restored files) call [`check`] between chunks and stop with
//! [`crate::Error::Interrupted`], so the temp files they own are dropped
//! and removed as the error travels up. Temp files a blocked process
//! (waiting at a prompt) cannot drop itself are registered by folder and
//! name prefix ([`register_prefix`]), so the
//! signal thread can remove them with [`remove_registered`] before it ends
//! the process.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// Set while a child owns the terminal (an editor): signals are its own.
static HELD: AtomicBool = AtomicBool::new(false);
/// A termination request (SIGTERM, SIGHUP) that came while [`HELD`].
static DEFERRED: AtomicBool = AtomicBool::new(false);
/// How many [`Committing`] sections are open.
static COMMITTING: AtomicUsize = AtomicUsize::new(0);
/// Per folder, the prefixes of the temp files in it (see [`register_prefix`]).
static TEMPS: Mutex<Option<HashMap<PathBuf, Vec<OsString>>>> = Mutex::new(None);

/// Asks every loop to stop.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// While `on`, the signal thread ignores signals: an editor started on the
/// terminal gets the user's Ctrl-C and decides (vi keeps running), and this
/// process cleans up once the editor exits.
pub fn hold(on: bool) {
    HELD.store(on, Ordering::SeqCst);
    if !on && DEFERRED.swap(false, Ordering::SeqCst) {
        request();
    }
}

/// Notes a termination request that came while signals were held: it
/// takes effect when [`hold`] ends (the child's own Ctrl-C does not).
pub fn defer() {
    DEFERRED.store(true, Ordering::SeqCst);
}

/// Whether signals are being left to a child (see [`hold`]).
pub fn held() -> bool {
    HELD.load(Ordering::SeqCst)
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// A section that must run to its end once begun (a restore putting in
/// place what its safety record already names): while one is open, the
/// signal thread does not end the process (see [`committing`]); a stop
/// asked for meanwhile is seen by the next [`check`] after it.
#[derive(Debug)]
#[must_use = "the section ends when this is dropped"]
pub struct Committing(());

impl Drop for Committing {
    fn drop(&mut self) {
        COMMITTING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Opens a [`Committing`] section, until the value is dropped.
pub fn commit_section() -> Committing {
    COMMITTING.fetch_add(1, Ordering::SeqCst);
    Committing(())
}

/// Whether a [`Committing`] section is open: the process must not be
/// ended from outside it.
pub fn committing() -> bool {
    COMMITTING.load(Ordering::SeqCst) > 0
}

/// Stops with [`crate::Error::Interrupted`] once a stop was asked for.
///
/// # Errors
/// [`crate::Error::Interrupted`].
pub fn check() -> crate::Result<()> {
    if requested() {
        Err(crate::Error::Interrupted)
    } else {
        Ok(())
    }
}

/// Notes that files named `prefix…` in the folder `dir` are temp files
/// that must not outlive an interrupted process. The prefix names one run
/// of one process, so nothing else in the folder carries it; one note per
/// folder covers every temp file there (a note per file held 100 bytes for
/// each of a restore's 100,000 staged files).
pub fn register_prefix(dir: &Path, prefix: &OsStr) {
    if let Ok(mut t) = TEMPS.lock() {
        let map = t.get_or_insert_with(HashMap::new);
        match map.get_mut(dir) {
            Some(prefixes) => {
                if !prefixes.iter().any(|p| p == prefix) {
                    prefixes.push(prefix.to_owned());
                }
            }
            None => {
                map.insert(dir.to_path_buf(), vec![prefix.to_owned()]);
            }
        }
    }
}

/// Removes every registered temp file (best effort): in each noted folder,
/// whatever carries a noted prefix (a private folder with what is in it).
pub fn remove_registered() {
    let list: Vec<(PathBuf, Vec<OsString>)> = match TEMPS.lock() {
        Ok(mut t) => t
            .take()
            .map(|s| s.into_iter().collect())
            .unwrap_or_default(),
        Err(_) => return,
    };
    for (dir, prefixes) in list {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let bytes = name.as_encoded_bytes();
            if prefixes
                .iter()
                .any(|p| bytes.starts_with(p.as_encoded_bytes()))
            {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = std::fs::remove_dir_all(e.path());
                } else {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interrupt removes, in each registered folder, exactly the files
    /// that carry a registered prefix: not the folder's other files, not
    /// another run's temp files, not files in folders never registered.
    #[test]
    fn removal_takes_only_the_registered_prefixes() {
        let d = tempfile::tempdir().unwrap();
        let (a, b, other) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
        for dir in [&a, &b, &other] {
            std::fs::create_dir(dir).unwrap();
            for name in [".sgard-restore-1-aa-0-x", ".sgard-restore-2-bb-0-x", "x"] {
                std::fs::write(dir.join(name), b"t").unwrap();
            }
        }
        register_prefix(&a, OsStr::new(".sgard-restore-1-aa-"));
        register_prefix(&a, OsStr::new(".sgard-restore-1-aa-"));
        register_prefix(&b, OsStr::new(".sgard-restore-1-aa-"));
        remove_registered();
        let left = |dir: &Path| {
            let mut v: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        for dir in [&a, &b] {
            assert_eq!(left(dir), [".sgard-restore-2-bb-0-x", "x"]);
        }
        assert_eq!(left(&other).len(), 3);
        // Once removed, the notes are gone: nothing more is removed.
        std::fs::write(a.join(".sgard-restore-1-aa-1-y"), b"t").unwrap();
        remove_registered();
        assert!(a.join(".sgard-restore-1-aa-1-y").exists());
    }
}
