//! Errors of manifest loading, validation and saving.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong with a manifest.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the manifest file failed.
    #[error("reading {}", path.display())]
    Read {
        /// The manifest file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Writing the manifest file failed (the old file is untouched).
    #[error("saving {}", path.display())]
    Write {
        /// The manifest file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: sgard_store::Error,
    },
    /// The text is not valid YAML for a manifest (the message names the line).
    #[error("{}: {message}", origin.display())]
    Syntax {
        /// The file (or `<input>`) that failed to parse.
        origin: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A top-level field is invalid.
    #[error("{}: field `{field}`: {reason}", origin.display())]
    Field {
        /// The file (or `<input>`).
        origin: PathBuf,
        /// The field at fault.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// One entry is invalid.
    #[error("{}: entry {index} ({path}): {reason}", origin.display())]
    Entry {
        /// The file (or `<input>`).
        origin: PathBuf,
        /// 1-based position of the entry in the file.
        index: usize,
        /// The entry's path as written (may itself be the problem).
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The manifest was written by a newer sgard; it is never written back.
    #[error(
        "{}: manifest version {found} is newer than this sgard supports ({supported}); upgrade sgard",
        origin.display()
    )]
    UnsupportedVersion {
        /// The file (or `<input>`).
        origin: PathBuf,
        /// The version found.
        found: u64,
        /// The newest version this build understands.
        supported: u32,
    },
    /// Serialising failed (should not happen for a validated manifest).
    #[error("serialising manifest: {0}")]
    Serialize(String),
    /// A text that is not what it claims to be (a purge statement).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// The YAML of `origin` does not parse (see [`crate::yaml_message`]).
    pub(crate) fn syntax(origin: &std::path::Path, e: &serde_saphyr::Error) -> Self {
        Error::Syntax {
            origin: origin.to_path_buf(),
            message: crate::yaml_message(e, origin),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
