//! `<repo>/retired-keys`: the data keys `encrypt rotate-dek` retired, kept
//! outside the manifest.
//!
//! The manifest's `encryption.retired_deks` holds them too (where the Go
//! sgard reads them), but any manifest write by the Go sgard drops that
//! field, and with it every snapshot taken before the rotation. This file is
//! one the Go tool never touches. Each line is a retired key sealed under a
//! newer data key (as in the manifest); a key opens with the current data
//! key or with a key already opened, so the chain of rotations is walked
//! back to the oldest. Lines are only ever added, and a line that opens with
//! no key is harmless, so a crash between this file and the manifest loses
//! nothing.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use sgard_store::durable;

use crate::Result;
use crate::crypto::{self, Dek};

/// The file's name inside a repository.
pub const FILE: &str = "retired-keys";

/// Far more than any real chain of rotations (a line is ~100 bytes); a
/// hostile file is not read past it.
const MAX_BYTES: u64 = 1 << 20;

const MAGIC: &str = "# sgard retired data keys v1: each sealed under a newer data key";

/// The sealed keys in `<root>/retired-keys` (none when it is missing or
/// unreadable; lines that are not base64 are skipped).
pub(crate) fn read(root: &Path) -> Vec<String> {
    let mut text = String::new();
    let read = durable::open_regular_file(&root.join(FILE))
        .and_then(|f| f.take(MAX_BYTES).read_to_string(&mut text));
    if read.is_err() {
        return Vec::new();
    }
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| {
            l.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='))
        })
        .map(str::to_owned)
        .collect()
}

/// Adds `sealed` keys the file lacks (atomically; nothing when all are in).
///
/// # Errors
/// Writing the file.
pub(crate) fn add(root: &Path, sealed: &[String]) -> Result<()> {
    let mut have = read(root);
    let known: BTreeSet<&String> = have.iter().collect();
    let new: Vec<String> = sealed
        .iter()
        .filter(|s| !known.contains(s))
        .cloned()
        .collect();
    if new.is_empty() {
        return Ok(());
    }
    have.extend(new);
    let mut text = format!("{MAGIC}\n");
    for l in &have {
        text.push_str(l);
        text.push('\n');
    }
    durable::write_atomic(&root.join(FILE), text.as_bytes(), 0o600)?;
    Ok(())
}

/// Every retired key reachable from `current` through `sealed` (each opened
/// by the current key or by one opened before it).
pub(crate) fn open_all(current: &Dek, sealed: &[String]) -> Vec<Dek> {
    let mut held: Vec<Dek> = Vec::new();
    let mut left: Vec<&String> = sealed.iter().collect();
    let mut frontier = vec![current.duplicate()];
    while let Some(k) = frontier.pop() {
        let (opened, rest): (Vec<&String>, Vec<&String>) = left
            .into_iter()
            .partition(|s| !crypto::unwrap_retired(&k, std::slice::from_ref(*s)).is_empty());
        left = rest;
        for s in opened {
            for d in crypto::unwrap_retired(&k, std::slice::from_ref(s)) {
                if d.bytes() != current.bytes() && !held.iter().any(|h| h.bytes() == d.bytes()) {
                    frontier.push(d.duplicate());
                    held.push(d);
                }
            }
        }
    }
    held
}
