//! The validated names every key is built from: gardens, documents, object
//! kinds and scopes. Nothing else reaches a key, so no input can name a key
//! outside the depot's prefix or in another garden.

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// A garden's name: 1 to 64 of `a-z 0-9 . _ -`, beginning with a letter or a
/// digit (`[a-z0-9][a-z0-9._-]{0,63}`). [`Garden::default`] is `default`, the
/// garden of requests that name none. On Windows, also not ending with `.`
/// and not a DOS device name (see [`kept_apart`]).
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
            })
            && kept_apart(name);
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
/// document names. On Windows, also no capital, no trailing `.` and not a
/// DOS device name (see [`kept_apart`]).
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
        && kept_apart(name)
}

/// Whether a folder depot's files keep `name` (a garden's or a
/// document's, otherwise valid) apart from every other valid name, and
/// from devices. Unix: always.
#[cfg(not(windows))]
fn kept_apart(name: &str) -> bool {
    let _ = name;
    true
}

/// Windows: its file names ignore case (`HEAD` is `head`), drop a trailing
/// `.` (`a.` is `a`, in any part of a path: the garden `a.` would be the
/// garden `a`), and a DOS device name (`con`, `nul`, `com1`, … with or
/// without an extension) opens the device. Such names are refused, so two
/// names never meet in one file and no garden reaches another's.
#[cfg(windows)]
fn kept_apart(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or(name).to_ascii_lowercase();
    let device = matches!(stem.as_str(), "con" | "prn" | "aux" | "nul")
        || (stem.len() == 4
            && (stem.starts_with("com") || stem.starts_with("lpt"))
            && stem.as_bytes()[3].is_ascii_digit());
    !device && !name.ends_with('.') && !name.bytes().any(|b| b.is_ascii_uppercase())
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

    /// Names a Windows folder cannot keep apart: refused there, and
    /// valid elsewhere.
    #[test]
    fn names_that_fold_on_windows() {
        for name in ["con", "nul.txt", "com1", "lpt9.x", "a.", "aux"] {
            assert_eq!(Garden::new(name).is_err(), cfg!(windows), "{name}");
            assert_eq!(DocName::new(name).is_err(), cfg!(windows), "{name}");
        }
        for name in ["HEAD", "Head", "x.Y"] {
            assert_eq!(DocName::new(name).is_err(), cfg!(windows), "{name}");
        }
        for name in ["console", "com10", "nully", "a.b", "a..b"] {
            assert!(Garden::new(name).is_ok(), "{name}");
            assert!(DocName::new(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn doc_names() {
        #[cfg(not(windows))]
        assert!(DocName::new("HEAD").is_ok());
        for ok in ["head", "nonce.0a1b", "a-b_c.d", &"x".repeat(128)] {
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
