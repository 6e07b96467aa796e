//! Errors of the blob store.

use std::io;
use std::path::PathBuf;

use crate::Hash;

/// Everything that can go wrong in the blob store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O operation on a path failed.
    #[error("{op} {}", path.display())]
    Io {
        /// What was being done, e.g. "creating folder".
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Reading the data to be stored failed (the caller knows which file it was).
    #[error("reading the data to store")]
    Source(#[source] io::Error),
    /// A string is not a valid blob name.
    #[error("malformed blob hash {0:?}: expected 64 lowercase hex characters")]
    InvalidHash(String),
    /// The blob is not in the store.
    #[error("blob {0} is missing from the store")]
    Missing(Hash),
    /// The data is larger than allowed.
    #[error("data larger than the limit of {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// A file would be cut into more chunks than one chunk list holds.
    #[error("{chunks} chunks are more than one chunk list holds")]
    TooManyChunks {
        /// How many chunks the file made.
        chunks: usize,
    },
    /// Ctrl-C (or another signal) stopped the work; nothing half-done was kept.
    #[error("interrupted")]
    Interrupted,
    /// A chunk list is not one sgard wrote (damaged, foreign or hostile).
    #[error("chunk list {} is damaged: {reason}", path.display())]
    BadChunkList {
        /// The list's file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A chunk of chunked content is not in the store (the content's list
    /// is).
    #[error("chunk {chunk} of {content} is missing from the store")]
    MissingChunk {
        /// The content's name (its list's).
        content: Hash,
        /// The chunk's name.
        chunk: Hash,
    },
    /// A chunk of chunked content does not hash to its name.
    #[error("chunk {chunk} of {content} is corrupt: its bytes do not hash to its name")]
    CorruptChunk {
        /// The content's name (its list's).
        content: Hash,
        /// The chunk's name.
        chunk: Hash,
    },
    /// The repository's chunking setting file is not one sgard wrote.
    #[error("chunking setting {} is malformed: {reason}", path.display())]
    BadSetting {
        /// The setting's file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The blob's bytes do not hash to its name.
    #[error("blob {hash} is corrupt: its content hashes to {actual}")]
    Corrupt {
        /// The name of the blob.
        hash: Hash,
        /// What its bytes actually hash to.
        actual: Hash,
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

    /// True when the error means stored data failed its hash or is gone
    /// (the CLI exits 3 for these).
    pub fn is_integrity(&self) -> bool {
        matches!(
            self,
            Error::Corrupt { .. }
                | Error::Missing(_)
                | Error::MissingChunk { .. }
                | Error::CorruptChunk { .. }
                | Error::BadChunkList { .. }
        )
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
