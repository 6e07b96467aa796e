//! A folder opened by handle, and the few operations the confinement does
//! relative to one: the platform's part of [`super::Confine`].
//!
//! Every name given here is one component (or, for [`Dir::stat`], a short
//! relative path under a component the caller just checked), and nothing
//! here follows a symlink unless it says so. On Unix a [`Dir`] is a
//! descriptor opened with `O_DIRECTORY | O_NOFOLLOW`, and each operation
//! is the `*at` system call relative to it.
//!
//! Errors are plain [`std::io::Error`]s; the caller names the path.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::{Dir, not_a_folder, path_bytes, path_of_bytes, set_mode};
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::{Dir, not_a_folder, path_bytes, path_of_bytes, set_mode};

/// Whether each staged file is flushed through its own handle as it is
/// written (Windows: no `syncfs`, and a file can only be flushed through a
/// handle that may write it), rather than all at once when committed.
pub(crate) const FLUSH_WHEN_STAGED: bool = cfg!(windows);

/// Whether a folder's names can be flushed ([`Dir::sync`] does something):
/// not on Windows.
pub(crate) const FOLDERS_SYNC: bool = cfg!(unix);

/// What a name in a folder is, without following a symlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    Symlink,
    Other,
}

/// What [`Dir::stat`] and [`Dir::identity`] tell.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stat {
    pub kind: Kind,
    /// The file system's device and the file's number on it: what
    /// [`crate::own`] compares to know sgard's own folders by identity
    /// (`None` where the platform does not tell).
    pub dev_ino: Option<(u64, u64)>,
}
