//! How far the running command has got, for a progress bar.
//!
//! Like [`crate::cancel`], this is process-wide: one command runs per
//! process. The libraries only count (a relaxed atomic add per file and per
//! buffer of bytes, nothing else); the CLI decides whether and how to show
//! it, reading [`now`] from its own thread. A process that never calls
//! [`begin`] (the server, the tests of the libraries) pays for the counting
//! only.
//!
//! Bytes are counted where they are read or written (hashing, copying into
//! the store, chunking, restoring), files where a path is finished
//! ([`done`]), so a 1 GiB file moves the bar while it is copied.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

static FILES: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static FILES_TOTAL: AtomicU64 = AtomicU64::new(0);
static BYTES_TOTAL: AtomicU64 = AtomicU64::new(0);
/// Bumped by every [`begin`], so a reader can tell phases apart.
static PHASE: AtomicU64 = AtomicU64::new(0);
static LABEL: Mutex<String> = Mutex::new(String::new());
/// What is told of every finished path: what was done, and the path.
pub type PathSink = Box<dyn Fn(&str, &str) + Send + Sync>;

/// Called with every finished path (`-v`), when set.
static ON_PATH: OnceLock<PathSink> = OnceLock::new();

/// A reading of the counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// Which phase this is (changes at every [`begin`]; 0: none yet).
    pub phase: u64,
    /// What is being done (`adding`, `restoring`, …).
    pub label: String,
    /// Paths finished.
    pub files: u64,
    /// Paths expected (0: not known).
    pub files_total: u64,
    /// Bytes read or written.
    pub bytes: u64,
    /// Bytes expected (0: not known).
    pub bytes_total: u64,
}

/// Starts a phase of work: `label` says what (`adding`), with the files and
/// bytes expected when they are known (0 otherwise; [`expect`] can add to
/// them later). The counters start again from zero.
pub fn begin(label: &str, files: u64, bytes: u64) {
    if let Ok(mut l) = LABEL.lock() {
        label.clone_into(&mut l);
    }
    FILES.store(0, Ordering::Relaxed);
    BYTES.store(0, Ordering::Relaxed);
    FILES_TOTAL.store(files, Ordering::Relaxed);
    BYTES_TOTAL.store(bytes, Ordering::Relaxed);
    PHASE.fetch_add(1, Ordering::Release);
}

/// More work expected in the current phase (found as it goes).
pub fn expect(files: u64, bytes: u64) {
    FILES_TOTAL.fetch_add(files, Ordering::Relaxed);
    BYTES_TOTAL.fetch_add(bytes, Ordering::Relaxed);
}

/// `n` more bytes read or written.
pub fn bytes(n: u64) {
    BYTES.fetch_add(n, Ordering::Relaxed);
}

/// One path finished; `what` says what was done with it (`added`), for
/// the `-v` listing.
pub fn done(path: &str, what: &str) {
    FILES.fetch_add(1, Ordering::Relaxed);
    if let Some(f) = ON_PATH.get() {
        f(what, path);
    }
}

/// Where finished paths are told (`-v`); set once, by the CLI.
pub fn on_path(f: PathSink) {
    let _ = ON_PATH.set(f);
}

/// The counters now (`None` before the first [`begin`]).
pub fn now() -> Option<Reading> {
    let phase = PHASE.load(Ordering::Acquire);
    if phase == 0 {
        return None;
    }
    Some(Reading {
        phase,
        label: LABEL.lock().map(|l| l.clone()).unwrap_or_default(),
        files: FILES.load(Ordering::Relaxed),
        files_total: FILES_TOTAL.load(Ordering::Relaxed),
        bytes: BYTES.load(Ordering::Relaxed),
        bytes_total: BYTES_TOTAL.load(Ordering::Relaxed),
    })
}
