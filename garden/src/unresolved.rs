//! Merges left unresolved: the conflict markers `merge` wrote into files.
//!
//! A merge with conflicts writes diff3 markers (`<<<<<<< ours`,
//! `||||||| original`, `=======`, `>>>>>>> theirs`) into the file and
//! settles the base on the repository's version, so the file is a local
//! change. To keep `checkpoint` from recording the markers, this machine
//! remembers, per path, which marker lines the merge wrote that none of the
//! three merged versions held (`repos/<key>/merges`, machine-local). While
//! the file still holds one of them, `judge` calls it a `conflict`
//! (unresolved merge), whatever else it says; a marker-like line that was
//! in the text before (a `=======` heading) never counts, and neither does
//! any file sgard did not merge. `checkpoint` and `edit` refuse to store
//! such a file.
//!
//! A record names the stored content the merge wrote. It rests (counts for
//! nothing) once a checkpoint finds the markers gone (resolved, or put back
//! as the repository holds it) or sgard writes or deletes the path with
//! other content (a restore, an undo, a pull), so a marker-like line
//! written later is an ordinary change; it wakes when sgard writes exactly
//! the merge's content again (the undo of that undo). It goes when `add`
//! takes the file as it is, when `edit` stores it, or when a new merge
//! writes the path.

use crate::Tx;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use sgard_store::{Hash, durable};

use crate::base::{escape, unescape};
use crate::{Garden, Result};

/// diffy's conflict markers, as whole lines.
const MARKERS: [&str; 4] = [
    "<<<<<<< ours",
    "||||||| original",
    "=======",
    ">>>>>>> theirs",
];

const MAGIC_V1: &str = "sgard-unresolved-merges 1";
const MAGIC: &str = "sgard-unresolved-merges 2";
const FILE: &str = "merges";

/// The paths a merge wrote markers into.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Unresolved {
    paths: BTreeMap<String, Record>,
}

/// What a merge wrote into one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Record {
    /// The markers, a bit per entry of [`MARKERS`].
    mask: u8,
    /// The stored content written (unknown in a record of the first format).
    written: Option<Hash>,
    /// Whether the record counts (see the module documentation).
    live: bool,
}

impl Unresolved {
    /// This machine's records in the state folder `dir` (none when it
    /// holds none, or a file sgard did not write).
    pub(crate) fn load(dir: Option<&Path>) -> Self {
        let mut out = Unresolved::default();
        let Some(text) = dir.and_then(|d| durable::read_regular_to_string(&d.join(FILE)).ok())
        else {
            return out;
        };
        let mut lines = text.lines();
        let v2 = match lines.next() {
            Some(MAGIC) => true,
            Some(MAGIC_V1) => false,
            _ => return out,
        };
        for line in lines {
            let Some((mask, rest)) = line.split_once(' ') else {
                continue;
            };
            let (written, live, path) = if v2 {
                let mut f = rest.splitn(3, ' ');
                let (Some(h), Some(l), Some(p)) = (f.next(), f.next(), f.next()) else {
                    continue;
                };
                (Hash::parse(h).ok(), l == "live", p)
            } else {
                (None, true, rest)
            };
            if let Ok(mask) = mask.parse::<u8>()
                && let Some(path) = unescape(path)
            {
                out.paths.insert(
                    path,
                    Record {
                        mask,
                        written,
                        live,
                    },
                );
            }
        }
        out
    }

    /// Writes the records into `dir` (durably; none removes the file).
    fn save(&self, dir: &Path) -> Result<()> {
        let p = dir.join(FILE);
        if self.paths.is_empty() {
            if std::fs::remove_file(&p).is_ok() {
                durable::fsync_dir(dir)?;
            }
            return Ok(());
        }
        let mut text = format!("{MAGIC}\n");
        for (path, r) in &self.paths {
            let hash = r.written.map_or_else(|| "-".to_owned(), |h| h.to_hex());
            let live = if r.live { "live" } else { "rests" };
            text.push_str(&format!("{} {hash} {live} {}\n", r.mask, escape(path)));
        }
        durable::create_private_dir_all(dir)?;
        durable::write_atomic(&p, text.as_bytes(), 0o600)?;
        Ok(())
    }

    /// The live record of `path`'s merge, if any (its markers may be
    /// gone since).
    fn live(&self, path: &str) -> Option<&Record> {
        self.paths.get(path).filter(|r| r.live)
    }
}

/// The markers in `merged` that none of `versions` holds as a line (a bit
/// per entry of [`MARKERS`]).
pub(crate) fn markers_written(merged: &str, versions: [&str; 3]) -> u8 {
    let held = |m: &str, text: &str| text.lines().any(|l| l == m);
    let mut mask = 0;
    for (bit, m) in MARKERS.iter().enumerate() {
        if held(m, merged) && !versions.iter().any(|v| held(m, v)) {
            mask |= 1 << bit;
        }
    }
    mask
}

/// Whether the file at `abs` holds one of the markers in `mask` as a line
/// (read as a stream; an unreadable file holds none).
fn holds_markers(abs: &Path, mask: u8) -> bool {
    let Ok((f, _)) = crate::fsx::open_regular(abs) else {
        return false;
    };
    holds_markers_in(BufReader::new(f), mask)
}

/// Whether the text read from `r` holds one of the markers in `mask` as a
/// line: the one test of "still unresolved", for a file and for bytes.
fn holds_markers_in(mut r: impl BufRead, mask: u8) -> bool {
    let mut line = Vec::new();
    loop {
        line.clear();
        match r.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if MARKERS
            .iter()
            .enumerate()
            .any(|(bit, m)| mask & (1 << bit) != 0 && text == m.as_bytes())
        {
            return true;
        }
    }
}

impl Garden {
    /// Whether `content`, about to be stored for `path`, still holds
    /// conflict markers a merge wrote into the path.
    pub(crate) fn unresolved_merge_in(&self, path: &str, content: &[u8]) -> bool {
        self.work
            .unresolved
            .live(path)
            .is_some_and(|r| holds_markers_in(content, r.mask))
    }

    /// Whether a live merge record names `path` (its markers may be gone).
    /// Remembers that a merge writes the markers `mask` into `path` as the
    /// stored content `written` (no markers: it writes a clean result),
    /// durably.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    pub(crate) fn set_unresolved(&mut self, path: &str, mask: u8, written: Hash) -> Result<()> {
        let before = self.work.unresolved.clone();
        if mask == 0 {
            self.work.unresolved.paths.remove(path);
        } else {
            self.work.unresolved.paths.insert(
                path.to_owned(),
                Record {
                    mask,
                    written: Some(written),
                    live: true,
                },
            );
        }
        self.save_unresolved(&before)
    }

    /// Paths sgard is writing (with the stored content it writes) or
    /// deleting (`None`): a merge's record counts again exactly when the
    /// merge's content is written, and rests otherwise.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    pub(crate) fn note_overwritten<'p>(
        &mut self,
        writes: impl IntoIterator<Item = (&'p str, Option<Hash>)>,
    ) -> Result<()> {
        let before = self.work.unresolved.clone();
        for (p, h) in writes {
            if let Some(r) = self.work.unresolved.paths.get_mut(p) {
                r.live = h.is_some() && r.written == h;
            }
        }
        self.save_unresolved(&before)
    }

    /// Lets the merges of `paths` rest: their markers are gone.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    pub(crate) fn rest_unresolved<'p>(
        &mut self,
        paths: impl IntoIterator<Item = &'p str>,
    ) -> Result<()> {
        // As if written with no content: the record rests.
        self.note_overwritten(paths.into_iter().map(|p| (p, None)))
    }

    /// Forgets the merges of `paths`: the file was taken as it is.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    pub(crate) fn drop_unresolved<'p>(
        &mut self,
        paths: impl IntoIterator<Item = &'p str>,
    ) -> Result<()> {
        let before = self.work.unresolved.clone();
        for p in paths {
            self.work.unresolved.paths.remove(p);
        }
        self.save_unresolved(&before)
    }

    fn save_unresolved(&self, before: &Unresolved) -> Result<()> {
        if self.work.unresolved == *before || self.repo.dry_run {
            return Ok(());
        }
        match self.repo.local_dir.as_deref() {
            Some(dir) => self.work.unresolved.save(dir),
            None => Ok(()),
        }
    }
}

impl Tx<'_> {
    /// Whether the file of `path` (at `abs`) still holds conflict markers a
    /// merge wrote into it (see the module documentation).
    pub(crate) fn unresolved_merge(&self, path: &str, abs: &Path) -> bool {
        self.work
            .unresolved
            .live(path)
            .is_some_and(|r| holds_markers(abs, r.mask))
    }
}

impl crate::Work {
    /// Whether a merge left conflict markers in `path` that are still there.
    pub(crate) fn has_unresolved(&self, path: &str) -> bool {
        self.unresolved.live(path).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_markers_none_of_the_versions_held_count() {
        let merged = "a\n<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n";
        assert_eq!(markers_written(merged, ["a\n", "a\nx\n", "a\ny\n"]), 0b1101);
        // A heading underlined with `=======` was there before.
        assert_eq!(
            markers_written(merged, ["a\n=======\n", "a\nx\n", "a\ny\n"]),
            0b1001
        );
        assert_eq!(markers_written("clean\n", ["a\n", "b\n", "c\n"]), 0);
    }

    #[test]
    fn records_survive_a_round_trip_and_a_foreign_file_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let mut u = Unresolved::default();
        let rec = |mask, written, live| Record {
            mask,
            written,
            live,
        };
        u.paths
            .insert("~/odd name\tx".into(), rec(0b1001, None, false));
        u.paths.insert(
            "~/.bashrc".into(),
            rec(0b1111, Some(Hash::of(b"merged")), true),
        );
        u.save(d.path()).unwrap();
        assert_eq!(Unresolved::load(Some(d.path())), u);
        // A record of the first format knows no content, and counts.
        std::fs::write(d.path().join(FILE), "sgard-unresolved-merges 1\n5 ~/x\n").unwrap();
        assert_eq!(
            Unresolved::load(Some(d.path())).paths.get("~/x"),
            Some(&rec(5, None, true))
        );
        std::fs::write(d.path().join(FILE), "something else\n1 ~/x\n").unwrap();
        assert_eq!(Unresolved::load(Some(d.path())), Unresolved::default());
        Unresolved::default().save(d.path()).unwrap();
        assert!(!d.path().join(FILE).exists());
    }

    #[test]
    fn a_file_holds_markers_only_as_whole_lines_of_the_mask() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, "a\r\n=======\r\nb <<<<<<< ours\n").unwrap();
        assert!(holds_markers(&f, 0b0100));
        assert!(!holds_markers(&f, 0b1011));
        assert!(!holds_markers(&d.path().join("missing"), 0b1111));
    }
}
