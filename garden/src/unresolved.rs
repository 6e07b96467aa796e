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
//! any file sgard did not merge. A record goes when a checkpoint finds the
//! markers gone, when `add` takes the file as it is, or when a new merge
//! writes the path again.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use sgard_store::durable;

use crate::base::{escape, unescape};
use crate::{Garden, Result};

/// diffy's conflict markers, as whole lines.
const MARKERS: [&str; 4] = [
    "<<<<<<< ours",
    "||||||| original",
    "=======",
    ">>>>>>> theirs",
];

const MAGIC: &str = "sgard-unresolved-merges 1";
const FILE: &str = "merges";

/// The paths holding markers a merge wrote, with the markers (a bit per
/// entry of [`MARKERS`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Unresolved {
    paths: BTreeMap<String, u8>,
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
        if lines.next() != Some(MAGIC) {
            return out;
        }
        for line in lines {
            if let Some((mask, path)) = line.split_once(' ')
                && let Ok(mask) = mask.parse::<u8>()
                && let Some(path) = unescape(path)
            {
                out.paths.insert(path, mask);
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
        for (path, mask) in &self.paths {
            text.push_str(&format!("{mask} {}\n", escape(path)));
        }
        durable::create_private_dir_all(dir)?;
        durable::write_atomic(&p, text.as_bytes(), 0o600)?;
        Ok(())
    }

    /// Whether a merge left markers in `path` (they may be gone since).
    pub(crate) fn has(&self, path: &str) -> bool {
        self.paths.contains_key(path)
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
    let mut r = BufReader::new(f);
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
    /// Whether the file of `path` (at `abs`) still holds conflict markers a
    /// merge wrote into it (see the module documentation).
    pub(crate) fn unresolved_merge(&self, path: &str, abs: &Path) -> bool {
        self.unresolved
            .paths
            .get(path)
            .is_some_and(|&mask| holds_markers(abs, mask))
    }

    /// Remembers that a merge wrote the markers `mask` into `path` (none:
    /// it wrote a clean result), durably.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    pub(crate) fn set_unresolved(&mut self, path: &str, mask: u8) -> Result<()> {
        let before = self.unresolved.clone();
        if mask == 0 {
            self.unresolved.paths.remove(path);
        } else {
            self.unresolved.paths.insert(path.to_owned(), mask);
        }
        self.save_unresolved(&before)
    }

    /// Forgets the merges of `paths`: the markers are gone, or the file was
    /// taken as it is.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    pub(crate) fn drop_unresolved<'p>(
        &mut self,
        paths: impl IntoIterator<Item = &'p str>,
    ) -> Result<()> {
        let before = self.unresolved.clone();
        for p in paths {
            self.unresolved.paths.remove(p);
        }
        self.save_unresolved(&before)
    }

    fn save_unresolved(&self, before: &Unresolved) -> Result<()> {
        if self.unresolved == *before || self.dry_run {
            return Ok(());
        }
        match self.local_dir.as_deref() {
            Some(dir) => self.unresolved.save(dir),
            None => Ok(()),
        }
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
        u.paths.insert("~/odd name\tx".into(), 0b1001);
        u.paths.insert("~/.bashrc".into(), 0b1111);
        u.save(d.path()).unwrap();
        assert_eq!(Unresolved::load(Some(d.path())), u);
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
