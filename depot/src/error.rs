//! The depot's error type. Every variant names what it is about: the store
//! location, the key (shown with its location, e.g.
//! `s3://bucket/prefix/gardens/default/docs/head`), or the rejected input.

use std::path::PathBuf;

use sgard_store::Hash;

/// What went wrong in a depot operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A store location that is not a folder, `memory:` or
    /// `s3://BUCKET[/PREFIX]`.
    #[error("invalid store location {location:?}: {reason}")]
    BadLocation {
        /// The location as given.
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A setting the store needs is missing or invalid (for S3: one of the
    /// `AWS_*` environment variables, named in `reason`).
    #[error("cannot open store {location}: {reason}")]
    Config {
        /// The store location.
        location: String,
        /// What is missing or wrong.
        reason: String,
    },
    /// A garden name outside `[a-z0-9][a-z0-9._-]{0,63}`.
    #[cfg_attr(
        not(windows),
        error(
            "invalid garden name {name:?}: use 1 to 64 of a-z 0-9 . _ -, beginning with a letter or digit"
        )
    )]
    #[cfg_attr(
        windows,
        error(
            "invalid garden name {name:?}: use 1 to 64 of a-z 0-9 . _ -, beginning with a letter or digit, not ending with a dot, and no device name (con, nul, com1, ...)"
        )
    )]
    BadGarden {
        /// The name as given.
        name: String,
    },
    /// A document name outside `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`.
    #[cfg_attr(
        not(windows),
        error(
            "invalid document name {name:?}: use 1 to 128 of A-Z a-z 0-9 . _ -, beginning with a letter or digit"
        )
    )]
    #[cfg_attr(
        windows,
        error(
            "invalid document name {name:?}: use 1 to 128 of a-z 0-9 . _ -, beginning with a letter or digit, not ending with a dot, and no device name (con, nul, com1, ...)"
        )
    )]
    BadName {
        /// The name as given.
        name: String,
    },
    /// An object name that is not 64 lowercase hex digits.
    #[error("invalid object hash {text:?}: expected 64 lowercase hex digits")]
    BadHash {
        /// The text as given.
        text: String,
    },
    /// Content offered for an object does not hash (SHA-256) to the
    /// object's name; nothing was written.
    #[error("refused to write {key}: its content hashes to {actual}, not to its name")]
    HashMismatch {
        /// The object's key.
        key: String,
        /// The hash of the content offered.
        actual: Hash,
    },
    /// A stored object's content no longer hashes to its name.
    #[error("{key} is corrupt: its content hashes to {actual}")]
    Corrupt {
        /// The object's key.
        key: String,
        /// The hash of the content read.
        actual: Hash,
    },
    /// A stored object or document is larger than anything of its kind
    /// should be; it was not read.
    #[error("{key} is {size} bytes, more than the {limit} it may have; not read")]
    TooLarge {
        /// The key concerned.
        key: String,
        /// Its size, as the store gave it.
        size: u64,
        /// The most it may have.
        limit: u64,
    },
    /// No object at this key.
    #[error("{key} not found")]
    NotFound {
        /// The key asked for.
        key: String,
    },
    /// A stored document without the depot's header.
    #[error("{key} is not a depot document: {reason}")]
    BadDoc {
        /// The document's key.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The object store failed.
    #[error("{op} {key}")]
    Store {
        /// What was being done (`reading`, `writing`, `listing`, ...).
        op: &'static str,
        /// The key or key prefix concerned.
        key: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// A file operation of the folder backend failed.
    #[error("{op} {}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or folder concerned.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A durable-write step of the folder backend failed (names its path).
    #[error(transparent)]
    Durable(#[from] sgard_store::Error),
    /// Reading the content to store failed (the caller's reader).
    #[error("reading the content for {key}")]
    Source {
        /// The object's key.
        key: String,
        /// The reader's error.
        #[source]
        source: std::io::Error,
    },
    /// Work on this key stopped half-way: its background task was
    /// cancelled, or a streaming write was used after it failed.
    #[error("work on {key} was interrupted")]
    Interrupted {
        /// The key concerned.
        key: String,
    },
}

impl Error {
    pub(crate) fn store(op: &'static str, key: String, source: object_store::Error) -> Self {
        Error::Store { op, key, source }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// `Result` with the depot's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
