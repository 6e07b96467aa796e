//! Cancellation (Ctrl-C) and the temp files to remove when it comes.
//!
//! The CLI's signal thread calls [`request`]; long loops (copying blobs,
//! staging restored files) call [`check`] between chunks and stop with
//! [`crate::Error::Interrupted`], so the temp files they own are dropped
//! and removed as the error travels up. Temp files a blocked process
//! (waiting at a prompt) cannot drop itself are [`register`]ed, so the
//! signal thread can remove them with [`remove_registered`] before it ends
//! the process.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static TEMPS: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Asks every loop to stop.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
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

/// Notes a temp file that must not outlive an interrupted process.
pub fn register(p: &Path) {
    if let Ok(mut t) = TEMPS.lock() {
        t.get_or_insert_with(HashSet::new).insert(p.to_path_buf());
    }
}

/// Forgets a temp file (renamed into place, or removed).
pub fn unregister(p: &Path) {
    if let Ok(mut t) = TEMPS.lock()
        && let Some(set) = t.as_mut()
    {
        set.remove(p);
    }
}

/// Removes every registered temp file (best effort).
pub fn remove_registered() {
    let list: Vec<PathBuf> = match TEMPS.lock() {
        Ok(mut t) => t
            .take()
            .map(|s| s.into_iter().collect())
            .unwrap_or_default(),
        Err(_) => return,
    };
    for p in list {
        let _ = std::fs::remove_file(p);
    }
}
