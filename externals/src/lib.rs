//! # sgard-externals: what sgard fetches for a home
//!
//! An *external* is content a home holds that nobody writes by hand: a
//! plugin, a font, a theme, a release binary. sgard fetches it once, checks
//! it against its pin, unpacks it, and stores every file in the repository
//! like any other entry, so no other command needs the network.
//!
//! This crate does the part that meets the outside: [`fetch`] reads a URL
//! (HTTP(S), `file://`) into a file, bounded in size and time, hashing as it
//! reads; [`unpack`] writes an archive (`.tar`, `.tar.gz`, `.tar.xz`,
//! `.tar.zst`, `.zip`) into an empty folder, refusing what would leave it
//! (absolute paths, `..`, symlinks that point out, writes through a symlink
//! the archive made, hard links, devices) and stopping at a size bound, so a
//! decompression bomb writes at most that much.

use std::path::PathBuf;

mod fetch;
pub mod git;
mod unpack;

pub use fetch::{Fetched, fetch, reachable};
pub use git::{CheckedOut, RefKind, Resolved};
pub use unpack::{Unpacked, unpack};

/// What went wrong with an external.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The source could not be read.
    #[error("fetching {url}: {reason}")]
    Fetch {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// More than the bound.
    #[error("{what} is larger than {limit} bytes (the bound); nothing was kept")]
    TooLarge {
        /// What.
        what: String,
        /// The bound.
        limit: u64,
    },
    /// An archive entry that would write outside its folder, or that is no
    /// file, folder or symlink.
    #[error("the archive's entry {entry:?} {why}; nothing was kept")]
    Hostile {
        /// The entry's name as the archive gives it.
        entry: String,
        /// What is wrong with it.
        why: String,
    },
    /// The archive cannot be read.
    #[error("the archive is damaged or not a {format}: {reason}")]
    Damaged {
        /// The format it was read as.
        format: Format,
        /// Why.
        reason: String,
    },
    /// A local I/O error.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Stopped by `Limits::interrupted` (Ctrl-C).
    #[error("interrupted")]
    Interrupted,
    /// A pattern of `--include` that is not one.
    #[error("the pattern {0:?} is not a glob: {1}")]
    Pattern(String, String),
}

impl Error {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// The crate's result.
pub type Result<T> = std::result::Result<T, Error>;

/// What an external's content is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One file, written as it is.
    File,
    /// A tar archive.
    Tar,
    /// A gzip-compressed tar archive.
    TarGz,
    /// An xz-compressed tar archive.
    TarXz,
    /// A zstd-compressed tar archive.
    TarZst,
    /// A zip archive.
    Zip,
}

impl Format {
    /// The manifest's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::File => "file",
            Format::Tar => "tar",
            Format::TarGz => "tar.gz",
            Format::TarXz => "tar.xz",
            Format::TarZst => "tar.zst",
            Format::Zip => "zip",
        }
    }

    /// Reads the manifest's word (and the usual other spellings).
    pub fn parse(s: &str) -> Option<Format> {
        Some(match s {
            "file" => Format::File,
            "tar" => Format::Tar,
            "tar.gz" | "tgz" => Format::TarGz,
            "tar.xz" | "txz" => Format::TarXz,
            "tar.zst" | "tzst" => Format::TarZst,
            "zip" => Format::Zip,
            _ => return None,
        })
    }

    /// The archive format a URL's name says (`None`: not an archive name).
    pub fn of_name(url: &str) -> Option<Format> {
        let name = url
            .split(['?', '#'])
            .next()
            .unwrap_or(url)
            .to_ascii_lowercase();
        [
            (".tar.gz", Format::TarGz),
            (".tgz", Format::TarGz),
            (".tar.xz", Format::TarXz),
            (".txz", Format::TarXz),
            (".tar.zst", Format::TarZst),
            (".tzst", Format::TarZst),
            (".tar", Format::Tar),
            (".zip", Format::Zip),
        ]
        .into_iter()
        .find(|(suffix, _)| name.ends_with(suffix))
        .map(|(_, f)| f)
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Bounds on what one external may bring.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The most bytes fetched.
    pub max_download: u64,
    /// The most bytes an archive unpacks to (all files together).
    pub max_unpacked: u64,
    /// The most entries an archive may have.
    pub max_entries: u64,
    /// How long a fetch may take, all told.
    pub timeout: std::time::Duration,
    /// Asked between buffers: `true` stops the work with
    /// [`Error::Interrupted`].
    pub interrupted: Option<fn() -> bool>,
    /// Told every buffer of bytes fetched or unpacked (for a progress bar).
    pub progress: Option<fn(u64)>,
}

impl Limits {
    /// Counts `n` bytes of progress, and stops if asked to.
    pub(crate) fn tick(&self, n: u64) -> Result<()> {
        if let Some(p) = self.progress {
            p(n);
        }
        if self.interrupted.is_some_and(|f| f()) {
            return Err(Error::Interrupted);
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_download: 2 << 30,
            max_unpacked: 4 << 30,
            max_entries: 1_000_000,
            timeout: std::time::Duration::from_secs(300),
            interrupted: None,
            progress: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_says_its_format() {
        assert_eq!(
            Format::of_name("https://x/a.tar.gz?x=1"),
            Some(Format::TarGz)
        );
        assert_eq!(Format::of_name("a.TGZ"), Some(Format::TarGz));
        assert_eq!(Format::of_name("a.zip"), Some(Format::Zip));
        assert_eq!(Format::of_name("a.tar.zst"), Some(Format::TarZst));
        assert_eq!(Format::of_name("font.ttf"), None);
        for f in [
            Format::File,
            Format::Tar,
            Format::TarGz,
            Format::TarXz,
            Format::TarZst,
            Format::Zip,
        ] {
            assert_eq!(Format::parse(f.as_str()), Some(f));
        }
    }
}
