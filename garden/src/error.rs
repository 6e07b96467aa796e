//! Errors of Garden operations.

use std::io;
use std::path::PathBuf;

/// Everything a Garden operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O operation on a path failed.
    #[error("{op} {}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// `add` met a file or folder it may not read: nothing was added.
    #[error("{op} {}: permission denied; nothing was added", path.display())]
    Unreadable {
        /// What was being done.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The exclusion rule that would keep it out (its `~/…` form).
        rule: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The manifest could not be loaded, validated or saved.
    #[error(transparent)]
    Manifest(#[from] sgard_manifest::Error),
    /// The blob store failed.
    #[error(transparent)]
    Store(#[from] sgard_store::Error),
    /// The stored content of a tracked path failed its hash or is gone.
    #[error("stored content of {path} cannot be trusted")]
    Integrity {
        /// The tracked path.
        path: String,
        /// What the store found.
        #[source]
        source: sgard_store::Error,
    },
    /// A SQLite database could not be captured consistently (locked past
    /// the timeout, unreadable by SQLite, or its copy failed its check).
    #[error("cannot capture the SQLite database {} consistently: {reason}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A command that writes the repository met one it cannot write (a
    /// read-only mount, or a folder another user owns).
    #[error("{} is read-only", path.display())]
    ReadOnly {
        /// The repository.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// There is no repository at the given place.
    #[error("no sgard repository at {} (no manifest.yaml)", .0.display())]
    NotARepo(PathBuf),
    /// `init` found an existing repository.
    #[error("repository already exists at {}", .0.display())]
    AlreadyExists(PathBuf),
    /// A path argument does not exist on disk.
    #[error("{}: no such file or directory", .0.display())]
    NotFound(PathBuf),
    /// A path is not tracked.
    #[error("not tracked: {0}")]
    NotTracked(String),
    /// A selection matched no tracked entry.
    #[error("no matching tracked entries")]
    NoMatch,
    /// An explicit argument is excluded by a rule.
    #[error("{path} is excluded by the rule {rule:?}")]
    Excluded {
        /// The path given.
        path: String,
        /// The rule that excludes it.
        rule: String,
    },
    /// An argument points into the repository itself.
    #[error("{}: refusing to track the sgard repository itself", .0.display())]
    InsideRepo(PathBuf),
    /// An argument is one of sgard's own machine-local files: in its state,
    /// cache or configuration folder, or one of its temp files.
    #[error("{path}: refusing to track sgard's own {what}")]
    OwnFile {
        /// The path, for people.
        path: String,
        /// What it is, and why that is never tracked.
        what: String,
    },
    /// New files that look like secrets (private keys, credentials; see
    /// [`crate::secrets`]) would have been stored in plaintext without
    /// being asked for: nothing was stored.
    #[error("{}", crate::secrets::refusal(found))]
    LooksSecret {
        /// Each such file (its manifest path) and what it looks like.
        found: Vec<(String, crate::secrets::Secret)>,
    },
    /// A path cannot be written into the manifest.
    #[error("{path}: {reason}")]
    BadPath {
        /// The path as given.
        path: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// An operation does not apply to this kind of entry or file.
    #[error("{path}: {reason}")]
    Unsupported {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// A snapshot name that does not resolve, or a history operation refused.
    #[error("{0}")]
    Snapshot(String),
    /// Encryption failed: no key, a wrong passphrase, a hostile key slot.
    #[error("{0}")]
    Crypto(String),
    /// The repository has no encryption set up.
    #[error("encryption is not initialized")]
    NoEncryption,
    /// A recipient slot opened a data key that is not the one this machine
    /// last unlocked, nor one it replaced: a slot anyone who can write the
    /// manifest could have made. Nothing was decrypted or encrypted.
    #[error(
        "a recipient slot gives another data key than the one this machine last unlocked (recorded in {}), and not one that replaced it: the slot is not trusted",
        record.display()
    )]
    KeyChanged {
        /// The file recording the key this machine knows.
        record: PathBuf,
    },
    /// The data key is wrapped only to recipients, and none of this
    /// machine's identities is one of them.
    #[error(
        "no key of this machine opens the data key (the repository has recipient slots {}, and no passphrase slot){}",
        slots.join(", "),
        if tried.is_empty() { String::new() } else { format!("; tried {}", tried.join("; ")) }
    )]
    NoKey {
        /// The recipient slots there are.
        slots: Vec<String>,
        /// What each identity file tried gave.
        tried: Vec<String>,
    },
    /// The home folder changed since the operation being undone.
    #[error("{0}")]
    Conflict(String),
    /// An external could not be fetched or unpacked.
    #[error(transparent)]
    External(#[from] sgard_externals::Error),
    /// A pinned external whose source now gives other bytes.
    #[error(
        "{url} no longer gives what {path} is pinned to: pinned {what} {pinned}, fetched \
         {got}; nothing was changed"
    )]
    PinMismatch {
        /// The external's path.
        path: String,
        /// Its URL.
        url: String,
        /// What the pin is: `sha256` or `commit`.
        what: &'static str,
        /// The pin.
        pinned: String,
        /// What was fetched.
        got: String,
    },
    /// A pull would take entries that changed on both sides in a way the
    /// disk cannot hold as a conflict: nothing was changed.
    #[error(
        "{} changed both here and on the server since the last sync, in a way this disk \
         cannot hold as a conflict (untracked on one side, its settings changed, a template, \
         or a version this machine never had): {}; nothing was changed",
        plural(paths.len(), "entry", "entries"),
        paths.join(", ")
    )]
    Unsettled {
        /// The entries (manifest paths).
        paths: Vec<String>,
    },
    /// The server's manifest tracks paths outside the home folder, which a
    /// pull takes only when told to: nothing was changed.
    #[error(
        "the server's manifest tracks {} outside your home folder ({}); nothing was changed",
        plural(paths.len(), "path", "paths"),
        paths.join(", ")
    )]
    OutsideHome {
        /// The paths.
        paths: Vec<String>,
    },
    /// A path below one tracked as a file or a symlink: nothing can be
    /// tracked there, and nothing was changed.
    #[error(
        "{path}: is below {above}, which is tracked as a file or a symlink; nothing can be \
         tracked below one; nothing was changed"
    )]
    BelowTracked {
        /// The path refused.
        path: String,
        /// The entry above it.
        above: String,
    },
    /// A file would be cut into more chunks than one chunk list holds:
    /// it was not stored.
    #[error("{}: {chunks} chunks are more than one chunk list holds", path.display())]
    TooManyChunks {
        /// The file.
        path: PathBuf,
        /// How many chunks it made.
        chunks: usize,
    },
    /// `merge` cannot merge this file.
    #[error("{path}: {why}")]
    Unmergeable {
        /// The entry (manifest path).
        path: String,
        /// Why.
        why: crate::merge::Unmergeable,
    },
    /// A tracked plain file is not a file on disk, so it cannot be edited
    /// in place.
    #[error("{0}: not a file on disk")]
    NotOnDisk(String),
    /// Ctrl-C (or another signal) stopped the command.
    #[error("interrupted")]
    Interrupted,
    /// A snapshot went into the log (the commit point), then a step after
    /// it failed (making its name durable, writing `manifest.yaml`, saving
    /// this machine's index). Said only when the snapshot is the head by
    /// the log's rule (see `history::interrupted_head`): a reader takes it
    /// from the log, and the next writer writes `manifest.yaml` and the
    /// index.
    #[error("snapshot {id} is recorded in the log, but the steps after it did not finish")]
    AfterCommit {
        /// The snapshot's short id.
        id: String,
        /// Why it was recorded (a pull's files are still to be written).
        reason: sgard_manifest::history::Reason,
        /// The step that failed (a [`Error`]).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// `history.yaml` could not be read.
    #[error("{0}")]
    DamagedHistory(String),
    /// The repository's targeting data is inconsistent.
    #[error("{0}")]
    Invalid(String),
    /// A template (or the data it reads) cannot be rendered.
    #[error("{message}")]
    Template {
        /// The template's path, or the data file's (the message names a
        /// data file itself; callers name the template).
        path: String,
        /// What is wrong, with the line and column.
        message: String,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The error of the step that failed after a commit (see
    /// [`Error::AfterCommit`]).
    fn after_commit(&self) -> Option<&Error> {
        match self {
            Error::AfterCommit { source, .. } => source.downcast_ref::<Error>(),
            _ => None,
        }
    }

    /// True when the command was interrupted (exit code 130).
    pub fn is_interrupted(&self) -> bool {
        if let Some(inner) = self.after_commit() {
            return inner.is_interrupted();
        }
        matches!(
            self,
            Error::Interrupted
                | Error::Store(sgard_store::Error::Interrupted)
                | Error::External(sgard_externals::Error::Interrupted)
        ) || matches!(
            self,
            Error::Integrity {
                source: sgard_store::Error::Interrupted,
                ..
            }
        )
    }

    /// True when the system failed to read or write (EIO, ENOSPC, a
    /// permission), not that bytes failed their checksum or parse: an
    /// error to report, never damage to rebuild or set aside (the next run
    /// reads the same file again).
    pub fn is_io_failure(&self) -> bool {
        let (Error::Io { source, .. }
        | Error::Manifest(sgard_manifest::Error::Read { source, .. })
        | Error::Store(sgard_store::Error::Io { source, .. })) = self
        else {
            return false;
        };
        !sgard_store::durable::is_damage(source)
    }

    /// True when stored data failed its hash or is missing (exit code 3).
    pub fn is_integrity(&self) -> bool {
        if let Some(inner) = self.after_commit() {
            return inner.is_integrity();
        }
        match self {
            Error::Integrity { .. } | Error::DamagedHistory(_) | Error::PinMismatch { .. } => true,
            Error::Store(e) => e.is_integrity(),
            _ => false,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `n` and the noun for it.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
