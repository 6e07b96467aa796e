//! SQLite databases, captured consistently (issue 14).
//!
//! A database in use is not a file to copy byte by byte: in WAL mode its
//! committed rows may all sit in `<db>-wal`, and a copy taken while another
//! process writes is torn. A tracked file whose first bytes are SQLite's
//! header is instead captured through SQLite's online backup API (the
//! bundled SQLite of `rusqlite`, so no system library is needed): one
//! backup step copies every page inside one read transaction, so the copy
//! holds exactly the transactions committed when it began, WAL included.
//! The copy is switched to the rollback journal (a plain, self-contained
//! database file), must pass `PRAGMA integrity_check`, and is then stored
//! like any file (chunked when big).
//!
//! Comparing: a copy of an unchanged database is byte for byte the same
//! every time, so a database whose bytes on disk differ from what is stored
//! is compared by capturing it again and hashing the copy (see
//! `Garden::hash_tracked`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use crate::{Error, Result};

/// The first 16 bytes of every SQLite 3 database file.
pub(crate) const HEADER: &[u8; 16] = b"SQLite format 3\0";

/// How long a database locked by another process is waited for by default.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The files SQLite keeps next to a database, never tracked on their own.
pub(crate) const SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Whether `head` (a file's first bytes) is a SQLite database's.
pub(crate) fn is_header(head: &[u8]) -> bool {
    head.starts_with(HEADER)
}

/// Whether the regular file at `abs` is a SQLite database (by its header,
/// never its name). Unreadable files are not.
pub(crate) fn is_database(abs: &Path) -> bool {
    let Ok(mut f) = sgard_store::durable::open_regular_file(abs) else {
        return false;
    };
    let mut head = [0u8; 16];
    f.read_exact(&mut head).is_ok() && is_header(&head)
}

/// The database `side` is a side file of (`x.db` for `x.db-wal`), when
/// that database exists and is one.
pub(crate) fn side_file_of(side: &Path) -> Option<PathBuf> {
    let name = side.file_name()?.to_str()?;
    let base = SIDE_FILES.iter().find_map(|s| name.strip_suffix(s))?;
    let db = side.with_file_name(base);
    is_database(&db).then_some(db)
}

fn failed(abs: &Path, reason: impl std::fmt::Display) -> Error {
    Error::Sqlite {
        path: abs.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// Copies the database at `abs` into a new temp file in `tmp_dir` through
/// the backup API, waiting up to `timeout` for another process's lock, and
/// checks the copy.
///
/// # Errors
/// [`Error::Sqlite`] naming the database and why: locked past the timeout,
/// not a database SQLite can read, or a copy that fails its integrity
/// check; [`Error::Io`] for the temp file.
pub(crate) fn capture(
    abs: &Path,
    tmp_dir: &Path,
    timeout: Duration,
) -> Result<tempfile::NamedTempFile> {
    sgard_store::durable::create_dir_all_durable(tmp_dir)?;
    let tmp = tempfile::Builder::new()
        .prefix("sqlite-")
        .tempfile_in(tmp_dir)
        .map_err(|e| Error::io("creating temp file in", tmp_dir, e))?;
    // Read-only: this connection never checkpoints the WAL into the file
    // nor rolls a hot journal back; the database is left as it was.
    let src = Connection::open_with_flags(
        abs,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| failed(abs, e))?;
    src.busy_timeout(timeout).map_err(|e| failed(abs, e))?;
    let mut dst = Connection::open(tmp.path()).map_err(|e| failed(abs, e))?;
    {
        let backup = Backup::new(&src, &mut dst).map_err(|e| failed(abs, e))?;
        let deadline = Instant::now() + timeout;
        loop {
            sgard_store::cancel::check().map_err(Error::Store)?;
            // All pages in one step: one read transaction, one moment.
            match backup.step(-1).map_err(|e| failed(abs, e))? {
                StepResult::Done => break,
                StepResult::More => {}
                StepResult::Busy | StepResult::Locked => {
                    if Instant::now() >= deadline {
                        return Err(failed(
                            abs,
                            format!(
                                "it stayed locked by another process for {} ms",
                                timeout.as_millis()
                            ),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => return Err(failed(abs, "the backup stopped for an unknown reason")),
            }
        }
    }
    drop(src);
    let mode: String = dst
        .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
        .map_err(|e| failed(abs, e))?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(failed(
            abs,
            format!("its copy stayed in journal mode {mode:?}"),
        ));
    }
    let check: String = dst
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .map_err(|e| failed(abs, e))?;
    if check != "ok" {
        return Err(failed(
            abs,
            format!("its copy fails the integrity check: {check}"),
        ));
    }
    dst.close().map_err(|(_, e)| failed(abs, e))?;
    Ok(tmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wal_database_is_captured_whole_and_the_same_every_time() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("a.db");
        let c = Connection::open(&db).unwrap();
        let _: String = c
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .unwrap();
        c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3);")
            .unwrap();
        assert!(d.path().join("a.db-wal").exists());
        assert!(is_database(&db));
        assert_eq!(side_file_of(&d.path().join("a.db-wal")), Some(db.clone()));
        assert_eq!(side_file_of(&d.path().join("b.db-wal")), None);
        let cap = |n: &str| {
            let t = capture(&db, &d.path().join(n), DEFAULT_TIMEOUT).unwrap();
            std::fs::read(t.path()).unwrap()
        };
        let (one, two) = (cap("t1"), cap("t2"));
        assert_eq!(one, two, "an unchanged database captures the same bytes");
        assert!(is_header(&one));
        let copy = d.path().join("copy.db");
        std::fs::write(&copy, &one).unwrap();
        let n: i64 = Connection::open(&copy)
            .unwrap()
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 3, "the rows in the WAL are in the copy");
        assert!(!d.path().join("copy.db-wal").exists());
        // Not a database: a clear error naming it.
        std::fs::write(d.path().join("x.db"), b"SQLite format 3\0 but not really").unwrap();
        let e = capture(&d.path().join("x.db"), d.path(), DEFAULT_TIMEOUT).unwrap_err();
        assert!(e.to_string().contains("x.db"), "{e}");
    }
}
