//! `<repo>/retired-keys`: the data keys `encrypt rotate-dek` retired, kept
//! outside the manifest.
//!
//! The manifest's `encryption.retired_deks` holds them too, but any manifest
//! write by the Go sgard drops that field, and with it every snapshot taken
//! before the rotation. This file is one the Go tool never touches.
//!
//! Both hold a chain: each rotation adds one line, the old key sealed under
//! the new one, and never re-seals the older lines, so a line once written
//! stays byte for byte the same. A key opens with the current data key or
//! with a key already opened, so the chain is walked back to the oldest.
//! (Lines from older sgard builds, every old key sealed under the current
//! one, open the same way.) The file only ever grows by whole lines and is
//! rewritten with everything it held, even lines it cannot read; a file it
//! cannot read at all is left alone.

use std::collections::HashSet;
use std::io::{self, Read};
use std::path::Path;

use sgard_store::durable;

use crate::crypto::{self, Dek};
use crate::{Error, Result};

/// The file's name inside a repository.
pub const FILE: &str = "retired-keys";

/// Far more than any real chain of rotations (a line is ~100 bytes, one per
/// rotation); a file past it is not one sgard wrote.
const MAX_BYTES: u64 = 1 << 20;

const MAGIC: &str = "# sgard retired data keys v1: each sealed under a newer data key";

/// The file's bytes (`None` when there is none).
///
/// # Errors
/// It cannot be read, is not a regular file, or is over [`MAX_BYTES`].
fn read_bytes(root: &Path) -> Result<Option<Vec<u8>>> {
    let path = root.join(FILE);
    let io_err = |e: io::Error| Error::io("reading", &path, e);
    let f = match durable::open_regular_file(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(e)),
    };
    let mut buf = Vec::new();
    f.take(MAX_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(io_err)?;
    if buf.len() as u64 > MAX_BYTES {
        return Err(Error::Invalid(format!(
            "{} is over {MAX_BYTES} bytes: not a file sgard wrote; left as it is",
            path.display()
        )));
    }
    Ok(Some(buf))
}

/// The sealed keys among `bytes`' lines (anything else is skipped).
fn lines(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|b| *b == b'\n')
        .map(|l| String::from_utf8_lossy(l).trim().to_owned())
        .filter(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='))
        })
        .collect()
}

/// The sealed keys in `<root>/retired-keys` (none when it is missing).
///
/// # Errors
/// As [`read_bytes`].
pub(crate) fn read(root: &Path) -> Result<Vec<String>> {
    Ok(read_bytes(root)?.map(|b| lines(&b)).unwrap_or_default())
}

/// Adds the `sealed` keys the file lacks, keeping every byte it held
/// (atomically; nothing is written when all are in).
///
/// # Errors
/// The file cannot be read (then it is not rewritten) or written.
pub(crate) fn add(root: &Path, sealed: &[String]) -> Result<()> {
    let old = read_bytes(root)?;
    let have: HashSet<String> = old
        .as_deref()
        .map(lines)
        .unwrap_or_default()
        .into_iter()
        .collect();
    let mut seen = HashSet::new();
    let new: Vec<&String> = sealed
        .iter()
        .filter(|s| !have.contains(*s) && seen.insert(*s))
        .collect();
    if new.is_empty() {
        return Ok(());
    }
    let mut text = match old {
        Some(b) if !b.is_empty() => {
            let mut b = b;
            if b.last() != Some(&b'\n') {
                b.push(b'\n');
            }
            b
        }
        _ => format!("{MAGIC}\n").into_bytes(),
    };
    for l in new {
        text.extend_from_slice(l.as_bytes());
        text.push(b'\n');
    }
    durable::write_atomic(&root.join(FILE), &text, 0o600)?;
    Ok(())
}

/// Every retired key reachable from `current` through `sealed` (each opened
/// by the current key or by one opened before it), with the line that
/// held it. Each line is tried once per key: linear in keys × lines.
pub(crate) fn open_all(current: &Dek, sealed: &[String]) -> Vec<(Dek, String)> {
    let mut held: Vec<(Dek, String)> = Vec::new();
    let mut left: Vec<&String> = {
        let mut seen = HashSet::new();
        sealed.iter().filter(|s| seen.insert(*s)).collect()
    };
    let mut frontier = vec![current.duplicate()];
    while let Some(k) = frontier.pop() {
        let mut rest = Vec::with_capacity(left.len());
        for s in left {
            match crypto::unwrap_retired(&k, std::slice::from_ref(s)).pop() {
                Some(d) => {
                    let known = d.bytes() == current.bytes()
                        || held.iter().any(|(h, _)| h.bytes() == d.bytes());
                    if !known {
                        frontier.push(d.duplicate());
                        held.push((d, s.clone()));
                    }
                }
                None => rest.push(s),
            }
        }
        left = rest;
    }
    held
}
