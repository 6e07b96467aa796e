//! SQLite databases captured through the backup API (issue 14): rows that
//! are only in the `-wal` file, a concurrent writer during checkpoints
//! (every snapshot holds whole transactions), a database locked past the
//! timeout, logical status, and side files left untracked.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::Connection;

use crate::common::*;

fn wal(db: &Path) -> Connection {
    let c = Connection::open(db).unwrap();
    let mode: String = c
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    c
}

fn count(db: &Path) -> i64 {
    let c = Connection::open(db).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok", "{}", db.display());
    c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn rows_only_in_the_wal_are_captured_and_status_compares_logically() {
    let t = TestEnv::init();
    let dir = t.path(".local/share/app");
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("history.db");
    let c = wal(&db);
    c.execute_batch("PRAGMA wal_autocheckpoint=0; CREATE TABLE t(x TEXT);")
        .unwrap();
    for i in 0..1000 {
        c.execute("INSERT INTO t VALUES (?1)", [format!("command {i}")])
            .unwrap();
    }
    // Every row is in the WAL; the main file holds none of them.
    assert!(std::fs::metadata(dir.join("history.db-wal")).unwrap().len() > 10_000);
    assert!(std::fs::metadata(&db).unwrap().len() <= 8192);
    t.sgard(["add", ".local/share/app"])
        .ok()
        .stderr_has("skipped ~/.local/share/app/history.db-wal: part of the SQLite database ~/.local/share/app/history.db");
    let m = t.manifest();
    assert!(
        m.contains("history.db") && !m.contains("-wal") && !m.contains("-shm"),
        "{m}"
    );
    // The bytes on disk differ from the capture; the transactions do not.
    t.sgard(["status", "--exit-code"])
        .ok()
        .stdout_has("ok         ~/.local/share/app/history.db");
    c.execute("INSERT INTO t VALUES ('one more')", []).unwrap();
    t.sgard(["status"])
        .ok()
        .stdout_has("modified   ~/.local/share/app/history.db");
    t.sgard(["checkpoint", "-m", "one more"]).ok();
    t.sgard(["status", "--exit-code"]).ok();
    // Replacing it under the program that has it open is refused.
    c.execute("INSERT INTO t VALUES ('not checkpointed')", [])
        .unwrap();
    t.sgard(["restore", "--force"])
        .code(1)
        .stderr_has("live -wal file");
    assert_eq!(count(&db), 1002);
    drop(c);
    for f in ["history.db", "history.db-wal", "history.db-shm"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    t.sgard(["restore"]).ok();
    assert_eq!(count(&db), 1001);
    let c = Connection::open(&db).unwrap();
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete", "a plain database file");
}

/// A checkpoint reads a file whose size moved in one pass, copying it into
/// the store as it hashes it (on all cores, with enough of them): a plain
/// file that became a database among many edited files is still captured,
/// never copied raw (its rows are only in the `-wal` file).
#[test]
fn a_database_among_many_edited_files_is_captured_not_copied() {
    let t = TestEnv::init();
    let name = |i: usize| format!("many/f{i:02}");
    for i in 0..12 {
        let p = t.write(&name(i), format!("content {i}\n"));
        set_mtime(&p, now_secs() - 3600);
    }
    let p = t.write("many/zz.db", "not a database yet\n");
    set_mtime(&p, now_secs() - 3600);
    t.sgard(["add", "many"]).ok();
    // Settled past the racy window: this status caches every file at its
    // stored size.
    std::thread::sleep(std::time::Duration::from_millis(2300));
    t.sgard(["status", "--exit-code"]).ok();
    for i in 0..12 {
        t.write(&name(i), format!("edited {i}, a longer line\n"));
    }
    let db = t.path("many/zz.db");
    std::fs::remove_file(&db).unwrap();
    let c = wal(&db);
    c.execute_batch("PRAGMA wal_autocheckpoint=0; CREATE TABLE t(x TEXT);")
        .unwrap();
    for i in 0..300 {
        c.execute("INSERT INTO t VALUES (?1)", [format!("row {i}")])
            .unwrap();
    }
    t.sgard(["checkpoint", "-m", "edited"]).ok();
    let m = t.manifest();
    for i in 0..12 {
        let want = sha(format!("edited {i}, a longer line\n"));
        assert!(m.contains(&want), "{i}: its own content not recorded");
        assert!(t.blob_path(&want).is_file(), "{i}: blob missing");
    }
    drop(c);
    for f in ["zz.db", "zz.db-wal", "zz.db-shm"] {
        let _ = std::fs::remove_file(t.path("many").join(f));
    }
    t.sgard(["restore", "--force"]).ok();
    assert_eq!(count(&db), 300, "the database was copied, not captured");
    t.sgard(["verify"]).ok();
}

#[test]
fn a_database_written_during_checkpoints_is_captured_at_transaction_boundaries() {
    let t = TestEnv::init();
    let db = t.path("app.db");
    {
        let c = wal(&db);
        c.execute_batch("CREATE TABLE t(k INTEGER, x TEXT);")
            .unwrap();
    }
    t.sgard(["add", "app.db"]).ok();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, db) = (Arc::clone(&stop), db.clone());
        std::thread::spawn(move || {
            let mut c = wal(&db);
            c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
            let mut k = 0;
            while !stop.load(Ordering::Relaxed) {
                let tx = c.transaction().unwrap();
                for i in 0..50 {
                    tx.execute(
                        "INSERT INTO t VALUES (?1, ?2)",
                        rusqlite::params![k, format!("row {i} of {k} {}", "x".repeat(200))],
                    )
                    .unwrap();
                }
                tx.commit().unwrap();
                k += 1;
            }
            k
        })
    };
    let mut ids = Vec::new();
    for i in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(150));
        let r = t.sgard(["checkpoint", "-m", &format!("c{i}")]);
        r.ok();
        if let Some(id) = r
            .stdout
            .split("snapshot ")
            .nth(1)
            .and_then(|s| s.split('.').next())
        {
            ids.push(id.to_owned());
        }
    }
    stop.store(true, Ordering::Relaxed);
    let txns = writer.join().unwrap();
    assert!(txns > 5, "the writer wrote {txns} transactions");
    assert!(ids.len() >= 3, "{ids:?}");
    let mut last = -1;
    for id in &ids {
        t.sgard(["restore", "--force", "--at", id]).ok();
        let n = count(&db);
        let c = Connection::open(&db).unwrap();
        let torn: i64 = c
            .query_row(
                "SELECT count(*) FROM (SELECT k FROM t GROUP BY k HAVING count(*) != 50)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(torn, 0, "snapshot {id} holds a partial transaction");
        assert!(n >= last, "snapshots grow: {n} after {last}");
        last = n;
    }
}

#[test]
fn a_database_locked_past_the_timeout_is_reported_and_its_previous_version_kept() {
    let t = TestEnv::init();
    let db = t.path("locked.db");
    let mut c = Connection::open(&db).unwrap();
    c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .unwrap();
    t.sgard(["add", "locked.db"]).ok();
    t.sgard(["checkpoint", "-m", "one row"]).ok();
    c.execute("INSERT INTO t VALUES (2)", []).unwrap();
    // Another process holds the database's exclusive lock.
    let tx = c
        .transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)
        .unwrap();
    tx.execute("INSERT INTO t VALUES (3)", []).unwrap();
    let r = t
        .command(["checkpoint", "-m", "while locked"])
        .env("SGARD_SQLITE_TIMEOUT_MS", "300")
        .output()
        .unwrap();
    let r = Run::from(r);
    assert_eq!(r.code, 1, "{r:#?}");
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(
        all.contains("~/locked.db") || all.contains("locked.db"),
        "{r:#?}"
    );
    assert!(
        all.contains("stayed locked by another process for 300 ms"),
        "{r:#?}"
    );
    tx.rollback().unwrap();
    drop(c);
    std::fs::remove_file(&db).unwrap();
    t.sgard(["restore", "locked.db"]).ok();
    assert_eq!(count(&db), 1, "the version before the lock is kept");
}
