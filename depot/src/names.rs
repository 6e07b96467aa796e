//! The validated names every key is built from: gardens, documents, object
//! kinds and scopes. Nothing else reaches a key, so no input can name a key
//! outside the depot's prefix or in another garden.

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// A garden's name: 1 to 64 of `a-z 0-9 . _ -`, beginning with a letter or a
/// digit (`[a-z0-9][a-z0-9._-]{0,63}`). [`Garden::default`] is `default`, the
/// garden of requests that name none.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Garden(String);

impl Garden {
    /// The name of the garden used when a request names none.
    pub const DEFAULT: &'static str = "default";

    /// Checks `name` and wraps it.
    ///
    /// # Errors
    /// [`Error::BadGarden`] when `name` breaks the rule above.
    pub fn new(name: &str) -> Result<Self> {
        let valid = (1..=64).contains(&name.len())
            && name
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && name.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
            });
        if valid {
            Ok(Self(name.to_owned()))
        } else {
            Err(Error::BadGarden {
                name: name.to_owned(),
            })
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Garden {
    fn default() -> Self {
        Self(Self::DEFAULT.to_owned())
    }
}

impl FromStr for Garden {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::new(s)
    }
}

impl fmt::Display for Garden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Garden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Garden({:?})", self.0)
    }
}

/// A document's name: 1 to 128 of `A-Z a-z 0-9 . _ -`, beginning with a
/// letter or a digit. No `/`, so a document never names a folder, and no
/// leading `.`, so `.` and `..` (and the depot's own temp files) are never
/// document names.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DocName(String);

impl DocName {
    /// Checks `name` and wraps it.
    ///
    /// # Errors
    /// [`Error::BadName`] when `name` breaks the rule above.
    pub fn new(name: &str) -> Result<Self> {
        if is_doc_name(name) {
            Ok(Self(name.to_owned()))
        } else {
            Err(Error::BadName {
                name: name.to_owned(),
            })
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

pub(crate) fn is_doc_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl FromStr for DocName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::new(s)
    }
}

impl fmt::Display for DocName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for DocName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DocName({:?})", self.0)
    }
}

/// Where a document lives: in one garden, or in the server-wide area
/// (signing keys, login nonces) that no garden's keys reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    /// The documents of one garden (its heads, its history).
    Garden(&'a Garden),
    /// The server's own documents.
    Server,
}

impl<'a> From<&'a Garden> for Scope<'a> {
    fn from(garden: &'a Garden) -> Self {
        Scope::Garden(garden)
    }
}

/// The kinds of content-addressed object; each has its own key space, so
/// the same hash can name a blob and a chunk without the two meeting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A whole file's content (`objects/`).
    Blob,
    /// A chunked file's chunk list (`lists/`).
    ChunkList,
    /// One chunk of a big file (`chunks/`).
    Chunk,
}

impl Kind {
    /// Every kind, in key-space order.
    pub const ALL: [Kind; 3] = [Kind::Blob, Kind::ChunkList, Kind::Chunk];

    /// The folder of this kind's key space inside a garden.
    pub fn dir(self) -> &'static str {
        match self {
            Kind::Blob => "objects",
            Kind::ChunkList => "lists",
            Kind::Chunk => "chunks",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Blob => "blob",
            Kind::ChunkList => "chunk list",
            Kind::Chunk => "chunk",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garden_names() {
        for ok in [
            "default",
            "a",
            "0",
            "work-laptop",
            "a.b_c-d",
            &"x".repeat(64),
        ] {
            assert!(Garden::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "-a",
            "_a",
            ".a",
            "A",
            "a/b",
            "a\\b",
            "a b",
            "é",
            "a\0",
            &"x".repeat(65),
        ] {
            assert!(
                matches!(Garden::new(bad), Err(Error::BadGarden { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(Garden::default().as_str(), "default");
    }

    #[test]
    fn doc_names() {
        for ok in ["head", "HEAD", "nonce.0a1b", "a-b_c.d", &"x".repeat(128)] {
            assert!(DocName::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            ".sgard-tmp-x",
            "-x",
            "a/b",
            "../x",
            "a\\b",
            "a b",
            "a\n",
            "ü",
            &"x".repeat(129),
        ] {
            assert!(
                matches!(DocName::new(bad), Err(Error::BadName { .. })),
                "{bad:?}"
            );
        }
    }
}
