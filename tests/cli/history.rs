//! History and undo: snapshots per checkpoint, the append-only log, naming
//! snapshots (`@`, `@~N`, id prefixes), `log`, `show`, `diff --at`,
//! `restore --at`, the safety snapshot before every change to the home,
//! `undo` (and redo), `forget` + `prune`, `verify` of every snapshot, and
//! crash consistency of head and log.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

// ---------------------------------------------------------------- helpers

/// `secs` since the epoch as an RFC 3339 UTC timestamp (`2026-03-23T12:00:00Z`).
fn iso(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil from days (Howard Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// Sets the pinned "now" of `t` to `offset` seconds after [`NOW`].
fn at(t: &mut TestEnv, offset: i64) {
    t.now = iso(now_secs() + offset);
}

/// Parses stdout of a `--json` run.
#[track_caller]
fn json_of(r: &Run) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}); {r:#?}"))
}

/// `log --json` snapshots, newest first.
#[track_caller]
fn log(t: &TestEnv) -> Vec<Value> {
    let r = t.sgard(["log", "--json"]);
    r.ok();
    json_of(&r)["snapshots"].as_array().unwrap().clone()
}

/// Ids of `log --json`, newest first.
#[track_caller]
fn log_ids(t: &TestEnv) -> Vec<String> {
    log(t)
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Ids of the checkpoint snapshots, newest first.
#[track_caller]
fn checkpoint_ids(t: &TestEnv) -> Vec<String> {
    log(t)
        .iter()
        .filter(|s| s["reason"] == "checkpoint")
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The records of the repository's history.yaml, then those of this home's
/// local log (its restores' safety snapshots), each oldest first, as key →
/// raw value maps.
fn history_records(t: &TestEnv) -> Vec<BTreeMap<String, String>> {
    let mut out = records_of(&t.repo().join("history.yaml"));
    out.extend(records_of(&t.state().join("undo/history.yaml")));
    out
}

/// The records of one history file.
fn records_of(p: &Path) -> Vec<BTreeMap<String, String>> {
    let text = match fs::read_to_string(p) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("reading {}: {e}", p.display()),
    };
    let mut out: Vec<BTreeMap<String, String>> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let (item, kv) = match trimmed.strip_prefix("- ") {
            Some(rest) if line.starts_with("    - ") => (true, rest),
            _ if line.starts_with("      ") => (false, trimmed),
            _ => continue,
        };
        let Some((k, v)) = kv.split_once(": ") else {
            continue;
        };
        if item {
            out.push(BTreeMap::new());
        }
        if let Some(rec) = out.last_mut() {
            rec.insert(k.to_owned(), v.trim().trim_matches('"').to_owned());
        }
    }
    out
}

/// Every id and parent id named in history.yaml.
fn history_hashes(t: &TestEnv) -> Vec<String> {
    let mut v = Vec::new();
    for r in history_records(t) {
        v.extend(r.get("id").cloned());
        v.extend(r.get("parent").cloned());
    }
    v
}

/// Panics unless every id (and parent id) in history.yaml has its blob.
#[track_caller]
fn assert_history_blobs_exist(t: &TestEnv, case: &str) {
    for h in history_hashes(t) {
        assert_eq!(h.len(), 64, "{case}: malformed id {h:?} in history.yaml");
        assert!(
            t.blob_path(&h).is_file() || local_blob_path(t, &h).is_file(),
            "{case}: history names {h} but its blob is missing"
        );
    }
}

/// Regular files under `blobs/`.
fn blob_files(t: &TestEnv) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = fs::read_dir(d) else { return };
        for e in rd {
            let p = e.unwrap().path();
            let md = fs::symlink_metadata(&p).unwrap();
            if md.is_dir() {
                walk(&p, out);
            } else if md.is_file() {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&t.repo().join("blobs"), &mut out);
    out.sort();
    out
}

/// The bytes of history.yaml (empty when there is none).
fn history_bytes(t: &TestEnv) -> Vec<u8> {
    fs::read(t.repo().join("history.yaml")).unwrap_or_default()
}

/// Where the blob `hash` of this home's local log lives.
fn local_blob_path(t: &TestEnv, hash: &str) -> PathBuf {
    t.state()
        .join("undo/blobs")
        .join(&hash[0..2])
        .join(&hash[2..4])
        .join(hash)
}

/// The bytes of the blob `hash` (in the repository, or in this home's local
/// log for what a safety snapshot captured).
fn blob(t: &TestEnv, hash: &str) -> Vec<u8> {
    fs::read(t.blob_path(hash))
        .or_else(|_| fs::read(local_blob_path(t, hash)))
        .unwrap_or_else(|e| panic!("blob {hash}: {e}"))
}

/// Replaces the bytes of a file whatever its permissions.
fn tamper(p: &Path, bytes: &[u8]) {
    fs::remove_file(p).unwrap();
    fs::write(p, bytes).unwrap();
}

/// A snapshot document's file paths and its `absent` list.
fn doc_paths(text: &str) -> (Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    let mut absent = Vec::new();
    let mut in_absent = false;
    for l in text.lines() {
        if !l.starts_with(' ') {
            in_absent = l.starts_with("absent:");
            continue;
        }
        let t = l.trim_start();
        if in_absent {
            if let Some(p) = t.strip_prefix("- ") {
                absent.push(p.trim().trim_matches('"').to_owned());
            }
        } else if let Some(p) = t.strip_prefix("- path: ") {
            files.push(p.trim().trim_matches('"').to_owned());
        }
    }
    (files, absent)
}

/// Whether some line of `out` is `word` then `path` (and maybe details).
fn has_line(out: &str, word: &str, path: &str) -> bool {
    out.lines().any(|l| {
        let mut w = l.split_whitespace();
        w.next() == Some(word) && w.next() == Some(path)
    })
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Waits for `child` (draining stderr), failing the test after `limit`.
#[track_caller]
fn finish(mut child: Child, limit: Duration, what: &str) -> Run {
    let mut err = child.stderr.take();
    let drain = thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`sgard {what}` hung: killed after {limit:?}");
        }
        thread::sleep(Duration::from_millis(5));
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::new(),
        stderr: drain.join().unwrap(),
    }
}

/// Three checkpoints of `~/f` (contents `v1`, `v2`, `v3`, one minute
/// apart, messages `one`, `two`, `three`). Returns the ids oldest first.
fn three_versions(t: &mut TestEnv, v: [&[u8]; 3]) -> [String; 3] {
    at(t, 0);
    t.write("f", v[0]);
    t.chmod("f", 0o644);
    t.sgard(["add", "~/f"]).ok();
    t.sgard(["checkpoint", "-m", "one"]).ok();
    at(t, 60);
    t.write("f", v[1]);
    t.sgard(["checkpoint", "-m", "two"]).ok();
    at(t, 120);
    t.write("f", v[2]);
    t.sgard(["checkpoint", "-m", "three"]).ok();
    let ids = checkpoint_ids(t);
    assert_eq!(ids.len(), 3, "{ids:?}");
    [ids[2].clone(), ids[1].clone(), ids[0].clone()]
}

// ------------------------------------------------------------------ tests

/// (1) `log` lists the checkpoints newest first; every version comes back by
/// id prefix and by `@`, `@~1`, `@~2`; bad names are refused clearly.
#[test]
fn restore_each_version_by_prefix_and_relative_name() {
    assert_eq!(iso(now_secs()), NOW);
    let mut t = TestEnv::init();
    let v: [&[u8]; 3] = [b"version one\n", b"version two\n", b"version three\n"];
    let ids = three_versions(&mut t, v);

    // log: three checkpoints, newest first, with their messages.
    let r = t.sgard(["log"]);
    r.ok();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{r:#?}");
    for (line, (id, msg)) in
        lines
            .iter()
            .zip([(&ids[2], "three"), (&ids[1], "two"), (&ids[0], "one")])
    {
        assert!(line.starts_with(&id[..12]), "{line:?} is not {id}");
        assert!(line.contains("checkpoint"), "{line:?}");
        assert!(line.trim_end().ends_with(msg), "{line:?} lacks {msg}");
    }
    let j = log(&t);
    assert_eq!(j.len(), 3);
    for (s, (id, msg)) in j
        .iter()
        .zip([(&ids[2], "three"), (&ids[1], "two"), (&ids[0], "one")])
    {
        assert_eq!(s["id"], id.as_str());
        assert_eq!(s["message"], msg);
        assert_eq!(s["reason"], "checkpoint");
        assert_eq!(s["host"], "testhost");
    }
    assert_eq!(j[0]["parent"], ids[1].as_str());
    assert_eq!(j[1]["parent"], ids[0].as_str());
    assert_eq!(j[2]["time"], NOW);
    // The head manifest is exactly the newest snapshot's document.
    assert_eq!(t.manifest().as_bytes(), &blob(&t, &ids[2])[..]);

    // By id prefix (8 characters).
    t.write("f", b"scratch\n");
    for (i, id) in ids.iter().enumerate() {
        t.sgard(["restore", "--at", &id[..8], "-f", "~/f"]).ok();
        assert_eq!(t.read("f"), v[i], "restore --at {}", &id[..8]);
    }
    // By the full id, and by a 4-character prefix.
    t.sgard(["restore", "--at", &ids[1], "-f", "~/f"]).ok();
    assert_eq!(t.read("f"), v[1]);
    t.sgard(["restore", "--at", &ids[0][..4], "-f", "~/f"]).ok();
    assert_eq!(t.read("f"), v[0]);
    // Relative names (restores in between do not move @).
    for (name, want) in [("@", v[2]), ("@~1", v[1]), ("@~2", v[0]), ("@~0", v[2])] {
        t.sgard(["restore", "--at", name, "-f", "~/f"]).ok();
        assert_eq!(t.read("f"), want, "restore --at {name}");
    }
    t.sgard(["restore", "--at", "@~1", "-f", "~/f"]).ok();
    assert_eq!(t.read("f"), v[1]);

    // Past the oldest: refused, nothing written.
    let before = t.read("f");
    let r = t.sgard(["restore", "--at", "@~3", "-f", "~/f"]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("@~3").stderr_has("ancestor");
    assert_eq!(t.read("f"), before);
    let r = t.sgard(["show", "@~3"]);
    assert_ne!(r.code, 0, "{r:#?}");
    let r = t.sgard(["restore", "--at", "@x", "-f", "~/f"]);
    assert_ne!(r.code, 0, "{r:#?}");

    // Unknown prefix.
    let all = log_ids(&t);
    let unknown = ["deadbeef0000", "cafef00d1111", "0123456789ab"]
        .into_iter()
        .find(|p| !all.iter().any(|id| id.starts_with(p)))
        .unwrap();
    let r = t.sgard(["restore", "--at", unknown, "-f", "~/f"]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has(&format!("no snapshot {unknown}"));
    assert_eq!(t.read("f"), before);

    // A 3-character prefix is refused even though it matches.
    let r = t.sgard(["restore", "--at", &ids[0][..3], "-f", "~/f"]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("not a snapshot name");
    assert_eq!(t.read("f"), before);
    let r = t.sgard(["show", &ids[0][..3]]);
    assert_ne!(r.code, 0, "{r:#?}");

    // Ambiguous prefix: a (forged) record whose id shares the first 10
    // characters of the oldest checkpoint's id.
    let real = &ids[0];
    let last = if real.ends_with('0') { '1' } else { '0' };
    let fake = format!("{}{last}", &real[..63]);
    let mut h = fs::read_to_string(t.repo().join("history.yaml")).unwrap();
    assert!(h.ends_with('\n'));
    h.push_str(&format!(
        "    - id: {fake}\n      time: {NOW}\n      host: testhost\n      reason: before-restore\n      entries: 0\n      bytes: 0\n      new_blobs: 0\n"
    ));
    fs::write(t.repo().join("history.yaml"), h).unwrap();
    let r = t.sgard(["restore", "--at", &real[..10], "-f", "~/f"]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("ambiguous");
    assert_eq!(t.read("f"), before);
    let r = t.sgard(["show", &real[..10]]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("ambiguous");
    // The whole id still names it.
    t.sgard(["restore", "--at", real, "-f", "~/f"]).ok();
    assert_eq!(t.read("f"), v[0]);
}

/// (2) `undo` after a restore puts back the exact bytes and mode it
/// overwrote and removes what it created; `undo` again redoes; a dry run
/// changes nothing. The safety snapshot names exactly the touched paths.
#[test]
fn undo_puts_back_bytes_and_mode_and_redo_works() {
    let t = TestEnv::init();
    t.write("f", b"stored f\n");
    t.write("g", b"stored g\n");
    t.write("same", b"untouched\n");
    for p in ["f", "g", "same"] {
        t.chmod(p, 0o644);
    }
    t.sgard(["add", "~/f", "~/g", "~/same"]).ok();
    t.sgard(["checkpoint", "-m", "base"]).ok();

    // Local state: f edited and 0600, g gone, same unchanged.
    let local = b"my local edit of f\n\x00\xff binary tail".to_vec();
    t.write("f", &local);
    t.chmod("f", 0o600);
    fs::remove_file(t.path("g")).unwrap();

    let r = t.sgard(["restore", "-f"]);
    r.ok();
    assert!(has_line(&r.stdout, "restored", "~/f"), "{r:#?}");
    assert!(has_line(&r.stdout, "created", "~/g"), "{r:#?}");
    assert_eq!(t.read("f"), b"stored f\n");
    assert_eq!(mode_of(&t.path("f")), 0o644);
    assert_eq!(t.read("g"), b"stored g\n");

    // The safety snapshot: exactly the touched paths, g as absent; the
    // overwritten content is stored.
    let recs = log(&t);
    assert_eq!(recs[0]["reason"], "restore", "{recs:#?}");
    assert_eq!(recs[1]["reason"], "before-restore", "{recs:#?}");
    assert_eq!(recs[0]["parent"], recs[1]["id"]);
    assert_eq!(recs[1]["entries"], 2, "{recs:#?}");
    let before_doc = String::from_utf8(blob(&t, recs[1]["id"].as_str().unwrap())).unwrap();
    let (files, absent) = doc_paths(&before_doc);
    assert_eq!(files, vec!["~/f"], "{before_doc}");
    assert_eq!(absent, vec!["~/g"], "{before_doc}");
    // In this machine's local log, not in the shared repository.
    assert!(
        local_blob_path(&t, &sha(&local)).is_file(),
        "overwritten bytes not stored"
    );
    assert!(
        !t.blob_path(&sha(&local)).exists(),
        "a safety snapshot wrote into the repository"
    );
    let after_doc = String::from_utf8(blob(&t, recs[0]["id"].as_str().unwrap())).unwrap();
    let (mut files, absent) = doc_paths(&after_doc);
    files.sort();
    assert_eq!(files, vec!["~/f", "~/g"], "{after_doc}");
    assert!(absent.is_empty(), "{after_doc}");
    // A restore is not a checkpoint: @ is unchanged.
    let head = checkpoint_ids(&t)[0].clone();
    let show = json_of(t.sgard(["show", "@", "--json"]).ok());
    assert_eq!(show["snapshot"]["id"], head.as_str());

    // Dry run: reports, changes nothing (disk, log).
    let hist = history_bytes(&t);
    let blobs = blob_files(&t);
    let r = t.sgard(["undo", "--dry-run"]);
    r.ok().stdout_has("Dry run");
    assert!(has_line(&r.stdout, "overwrite", "~/f"), "{r:#?}");
    assert!(has_line(&r.stdout, "delete", "~/g"), "{r:#?}");
    assert_eq!(t.read("f"), b"stored f\n");
    assert_eq!(mode_of(&t.path("f")), 0o644);
    assert_eq!(t.read("g"), b"stored g\n");
    assert_eq!(history_bytes(&t), hist, "dry run wrote the log");
    assert_eq!(blob_files(&t), blobs, "dry run stored blobs");

    // Undo: exact bytes and mode back, the created file gone.
    let r = t.sgard(["undo"]);
    r.ok()
        .stdout_has("Undo the restore of ")
        .stdout_has("Undo complete");
    assert!(has_line(&r.stdout, "restored", "~/f"), "{r:#?}");
    assert!(has_line(&r.stdout, "deleted", "~/g"), "{r:#?}");
    assert_eq!(t.read("f"), local);
    assert_eq!(mode_of(&t.path("f")), 0o600);
    assert!(!t.path("g").exists(), "undo left the created file");
    assert_eq!(t.read("same"), b"untouched\n");
    let recs = log(&t);
    assert_eq!(recs[0]["reason"], "undo", "{recs:#?}");
    assert_eq!(recs[1]["reason"], "before-restore", "{recs:#?}");

    // Undo the undo: the restored state is back.
    let r = t.sgard(["undo"]);
    r.ok().stdout_has("Undo the undo ");
    assert_eq!(t.read("f"), b"stored f\n");
    assert_eq!(mode_of(&t.path("f")), 0o644);
    assert_eq!(t.read("g"), b"stored g\n");
    assert_eq!(mode_of(&t.path("g")), 0o644);
    // And once more.
    t.sgard(["undo"]).ok();
    assert_eq!(t.read("f"), local);
    assert_eq!(mode_of(&t.path("f")), 0o600);
    assert!(!t.path("g").exists());
    t.sgard(["verify"]).ok();
}

/// 2c. `restore --at` records a safety snapshot too: a path it creates is
/// `absent` in it, and `undo` removes it again.
#[test]
fn restore_at_safety_snapshot_names_created_paths_absent() {
    let mut t = TestEnv::init();
    t.write("f", b"f one\n");
    t.write("keep", b"keep\n");
    t.sgard(["add", "~/f", "~/keep"]).ok();
    t.sgard(["checkpoint"]).ok();
    at(&mut t, 60);
    t.write("f", b"f two\n");
    t.sgard(["checkpoint"]).ok();
    fs::remove_file(t.path("f")).unwrap();
    let r = t.sgard(["restore", "--at", "@~1"]);
    r.ok();
    assert!(has_line(&r.stdout, "created", "~/f"), "{r:#?}");
    assert_eq!(t.read("f"), b"f one\n");
    let j = log(&t);
    assert_eq!(j[1]["reason"], "before-restore", "{j:#?}");
    assert!(
        j[1]["message"].as_str().unwrap().contains("restore --at"),
        "{j:#?}"
    );
    let before_doc = String::from_utf8(blob(&t, j[1]["id"].as_str().unwrap())).unwrap();
    let (files, absent) = doc_paths(&before_doc);
    assert!(files.is_empty(), "{before_doc}");
    assert_eq!(absent, vec!["~/f"], "{before_doc}");
    t.sgard(["undo"]).ok();
    assert!(
        !t.path("f").exists(),
        "undo left the file restore --at created"
    );
    assert_eq!(t.read("keep"), b"keep\n");
}

/// 2b. Nothing to undo without a restore; a dry run then also refuses.
#[test]
fn undo_without_a_restore_is_refused() {
    let t = TestEnv::tracking("f", b"x\n");
    t.sgard(["checkpoint"]).ok();
    let r = t.sgard(["undo"]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("nothing to undo");
    assert_eq!(t.read("f"), b"x\n");
}

/// (3) `undo` leaves a path edited after the restore alone (exit 4,
/// `conflict`), whether the restore created or overwrote it, and still
/// undoes the other paths.
#[test]
fn undo_reports_conflicts_and_undoes_the_rest() {
    let t = TestEnv::init();
    for p in ["f", "g", "h"] {
        t.write(p, format!("stored {p}\n"));
    }
    t.sgard(["add", "~/f", "~/g", "~/h"]).ok();
    t.sgard(["checkpoint"]).ok();
    t.write("f", b"local f\n");
    fs::remove_file(t.path("g")).unwrap();
    t.write("h", b"local h\n");
    t.sgard(["restore", "-f"]).ok();
    assert_eq!(t.read("g"), b"stored g\n");

    // After the restore: f (overwritten by it) and g (created by it) edited.
    t.write("f", b"edited f after the restore\n");
    t.write("g", b"edited g after the restore\n");
    let r = t.sgard(["undo"]);
    r.code(4);
    assert!(has_line(&r.stdout, "conflict", "~/f"), "{r:#?}");
    assert!(has_line(&r.stdout, "conflict", "~/g"), "{r:#?}");
    assert!(has_line(&r.stdout, "restored", "~/h"), "{r:#?}");
    assert!(!r.stdout.contains("Undo complete"), "{r:#?}");
    assert_eq!(t.read("f"), b"edited f after the restore\n");
    assert_eq!(t.read("g"), b"edited g after the restore\n");
    assert_eq!(t.read("h"), b"local h\n");

    // The partial undo is recorded: undoing it again touches only ~/h.
    let j = log(&t);
    assert_eq!(j[0]["reason"], "undo", "{j:#?}");
    let r = t.sgard(["undo"]);
    r.ok();
    assert_eq!(t.read("h"), b"stored h\n");
    assert_eq!(t.read("f"), b"edited f after the restore\n");
    assert_eq!(t.read("g"), b"edited g after the restore\n");
}

/// 3b. A created file deleted after the restore is not a conflict (nothing
/// to remove); an overwritten file deleted after it is a conflict (the
/// undo does not recreate over the user's deletion).
#[test]
fn undo_conflict_on_deleted_overwritten_file() {
    let t = TestEnv::tracking("f", b"stored f\n");
    t.sgard(["checkpoint"]).ok();
    t.write("f", b"local f\n");
    t.sgard(["restore", "-f"]).ok();
    fs::remove_file(t.path("f")).unwrap();
    let r = t.sgard(["undo"]);
    r.code(4);
    assert!(has_line(&r.stdout, "conflict", "~/f"), "{r:#?}");
    assert!(!t.path("f").exists());
}

/// (4) `forget` + `prune` free exactly the blobs no remaining snapshot (nor
/// the head) needs; `@` is never forgotten; `--keep-last`.
#[test]
fn forget_and_prune_free_exactly_the_unneeded_blobs() {
    let mut t = TestEnv::init();
    let v: [&[u8]; 3] = [b"content one\n", b"content two\n", b"content three\n"];
    let ids = three_versions(&mut t, v);
    assert_eq!(blob_files(&t).len(), 6, "{:?}", blob_files(&t));

    // @ (by name or id) is refused.
    let hist = history_bytes(&t);
    for name in ["@", &ids[2][..8], "@~0"] {
        let r = t.sgard(["forget", name]);
        assert_ne!(r.code, 0, "forget {name}; {r:#?}");
        r.stderr_has("never forgotten");
        assert_eq!(history_bytes(&t), hist);
    }

    let r = t.sgard(["forget", "@~2"]);
    r.ok().stdout_has(&ids[0][..12]);
    assert_eq!(log_ids(&t), vec![ids[2].clone(), ids[1].clone()]);
    // Its blobs stay until prune.
    assert!(t.blob_path(&ids[0]).is_file());
    assert!(t.blob_path(&sha(v[0])).is_file());
    t.sgard(["verify"]).ok();

    let r = t.sgard(["prune"]);
    r.ok().stdout_has("Pruned 2 orphaned blobs,");
    assert!(!t.blob_path(&ids[0]).exists(), "forgotten snapshot kept");
    assert!(!t.blob_path(&sha(v[0])).exists(), "its content blob kept");
    for h in [&ids[1], &ids[2], &sha(v[1]), &sha(v[2])] {
        assert!(t.blob_path(h).is_file(), "prune deleted needed blob {h}");
    }
    assert_eq!(blob_files(&t).len(), 4);
    t.sgard(["verify"]).ok();
    // The surviving snapshots still restore.
    t.sgard(["restore", "--at", "@~1", "-f", "~/f"]).ok();
    assert_eq!(t.read("f"), v[1]);
    t.sgard(["restore", "--at", "@", "-f", "~/f"]).ok();
    assert_eq!(t.read("f"), v[2]);
    // The restores' safety snapshots need no new content blob (the bytes
    // were already stored); forget them by id and prune again: nothing of
    // the checkpoints goes.
    let restore_recs: Vec<String> = log(&t)
        .iter()
        .filter(|s| s["reason"] == "before-restore")
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(restore_recs.len(), 2);
    t.sgard(["forget", &restore_recs[0][..8], &restore_recs[1][..8]])
        .ok();
    assert_eq!(log_ids(&t), vec![ids[2].clone(), ids[1].clone()]);
    t.sgard(["prune"]).ok();
    for h in [&ids[1], &ids[2], &sha(v[1]), &sha(v[2])] {
        assert!(t.blob_path(h).is_file(), "prune deleted needed blob {h}");
    }

    // --keep-last 1 keeps only the head.
    at(&mut t, 180);
    let v4 = b"content four\n";
    t.write("f", v4);
    t.sgard(["checkpoint", "-m", "four"]).ok();
    let head = checkpoint_ids(&t)[0].clone();
    let r = t.sgard(["forget", "--keep-last", "1"]);
    r.ok().stdout_has("Forgot 2 snapshots");
    assert_eq!(log_ids(&t), vec![head.clone()]);
    assert_eq!(log(&t)[0]["parent"], Value::Null);
    t.sgard(["verify"]).ok();
    let r = t.sgard(["prune"]);
    r.ok().stdout_has("Pruned 4 orphaned blobs,");
    for h in [&ids[1], &ids[2], &sha(v[1]), &sha(v[2])] {
        assert!(!t.blob_path(h).exists(), "{h} survived prune");
    }
    assert!(t.blob_path(&head).is_file());
    assert!(t.blob_path(&sha(v4)).is_file());
    assert_eq!(blob_files(&t).len(), 2);
    // Head is never forgotten, even with --keep-last 0.
    t.sgard(["forget", "--keep-last", "0"]).ok();
    assert_eq!(log_ids(&t), vec![head.clone()]);
    t.sgard(["verify"]).ok();
}

/// 4a. `--keep-last N` counts checkpoints, not records: restores between
/// them do not push a checkpoint out, and the restores since the oldest
/// kept one stay (undo keeps working). `--dry-run` changes nothing.
#[test]
fn forget_keep_last_counts_checkpoints() {
    let mut t = TestEnv::init();
    let v: [&[u8]; 3] = [b"one\n", b"two\n", b"three\n"];
    let ids = three_versions(&mut t, v);
    // Three restores after the newest checkpoint: six records.
    for _ in 0..3 {
        fs::remove_file(t.path("f")).unwrap();
        t.sgard(["restore"]).ok();
    }
    assert_eq!(log_ids(&t).len(), 9);
    let before = history_bytes(&t);
    let r = t.sgard(["forget", "--keep-last", "2", "--dry-run"]);
    r.ok()
        .stdout_has(&format!("forget     {} checkpoint", &ids[0][..12]))
        .stdout_has("Dry run: 1 snapshot would be forgotten");
    assert_eq!(history_bytes(&t), before, "a dry run wrote the log");
    t.sgard(["forget", "--keep-last", "2"])
        .ok()
        .stdout_has("Forgot 1 snapshot");
    let kept = checkpoint_ids(&t);
    assert_eq!(kept, vec![ids[2].clone(), ids[1].clone()]);
    assert_eq!(log_ids(&t).len(), 8, "the restores were forgotten");
    t.sgard(["undo"]).ok();
    t.sgard(["verify"]).ok();
}

/// 4b. `--keep-within`: operations older than the age go (with now moved
/// forward); the head stays however old.
#[test]
fn forget_keep_within() {
    let mut t = TestEnv::init();
    let day = 86_400;
    t.now = iso(now_secs() - 3 * day);
    t.write("f", b"a\n");
    t.sgard(["add", "~/f"]).ok();
    t.sgard(["checkpoint", "-m", "old"]).ok();
    at(&mut t, -4 * 3600);
    t.write("f", b"b\n");
    t.sgard(["checkpoint", "-m", "recent"]).ok();
    at(&mut t, 0);
    t.write("f", b"c\n");
    t.sgard(["checkpoint", "-m", "head"]).ok();
    let ids = checkpoint_ids(&t);
    assert_eq!(ids.len(), 3);

    // Now: 6 hours later; within 1d keeps "recent" and the head.
    at(&mut t, 6 * 3600);
    let r = t.sgard(["forget", "--keep-within", "1d"]);
    r.ok().stdout_has(&ids[2][..12]);
    assert_eq!(log_ids(&t), vec![ids[0].clone(), ids[1].clone()]);
    t.sgard(["prune"])
        .ok()
        .stdout_has("Pruned 2 orphaned blobs,");
    assert!(!t.blob_path(&sha(b"a\n")).exists());
    assert!(t.blob_path(&sha(b"b\n")).is_file());

    // Ten days later: everything but the head goes.
    at(&mut t, 10 * day);
    t.sgard(["forget", "--keep-within", "30d"]).ok();
    assert_eq!(log_ids(&t).len(), 2);
    t.sgard(["forget", "--keep-within", "12h"]).ok();
    assert_eq!(log_ids(&t), vec![ids[0].clone()]);
    t.sgard(["verify"]).ok();
    t.sgard(["prune"]).ok();
    assert!(!t.blob_path(&sha(b"b\n")).exists());
    assert!(t.blob_path(&sha(b"c\n")).is_file());
    assert!(t.blob_path(&ids[0]).is_file());
}

/// 4c. `--keep-daily N`: the newest operation of each of the last N days
/// that have one.
#[test]
fn forget_keep_daily() {
    let mut t = TestEnv::init();
    let day = 86_400;
    // 03-20 10:00, 03-20 15:00, 03-21 09:00, 03-21 20:00, 03-23 12:00.
    let times = [
        -3 * day - 2 * 3600,
        -3 * day + 3 * 3600,
        -2 * day - 3 * 3600,
        -2 * day + 8 * 3600,
        0,
    ];
    t.write("f", b"day version 0\n");
    t.now = iso(now_secs() + times[0]);
    t.sgard(["add", "~/f"]).ok();
    for (i, off) in times.iter().enumerate() {
        at(&mut t, *off);
        t.write("f", format!("day version {i}\n"));
        t.sgard(["checkpoint", "-m", &format!("v{i}")]).ok();
    }
    let ids = checkpoint_ids(&t); // newest first
    assert_eq!(ids.len(), 5);
    assert_eq!(log(&t)[4]["time"], "2026-03-20T10:00:00Z");

    let r = t.sgard(["forget", "--keep-daily", "2"]);
    r.ok().stdout_has("Forgot 3 snapshots");
    // Kept: 03-23 12:00 (head) and 03-21 20:00 (newest of 03-21).
    assert_eq!(log_ids(&t), vec![ids[0].clone(), ids[1].clone()]);
    let j = log(&t);
    assert_eq!(j[1]["time"], "2026-03-21T20:00:00Z");
    assert_eq!(j[0]["parent"], ids[1].as_str());
    t.sgard(["verify"]).ok();
    t.sgard(["prune"])
        .ok()
        .stdout_has("Pruned 6 orphaned blobs,");
    for i in [0, 1, 2] {
        assert!(!t.blob_path(&sha(format!("day version {i}\n"))).exists());
    }
    for i in [3, 4] {
        assert!(t.blob_path(&sha(format!("day version {i}\n"))).is_file());
    }
    // --keep-daily 1 leaves the head only.
    t.sgard(["forget", "--keep-daily", "1"]).ok();
    assert_eq!(log_ids(&t), vec![ids[0].clone()]);
}

/// (5) Identical snapshots dedupe: a checkpoint with no change stores no
/// blob and adds no record, whatever its message.
#[test]
fn unchanged_checkpoints_record_nothing() {
    let mut t = TestEnv::init();
    t.write("f", b"same\n");
    t.write("d/g", b"also same\n");
    t.sgard(["add", "~/f", "~/d"]).ok();
    let r = t.sgard(["checkpoint", "-m", "first"]);
    r.ok();
    assert_eq!(log_ids(&t).len(), 1);
    let blobs = blob_files(&t);
    let hist = history_bytes(&t);
    let manifest = t.manifest();

    for (off, args) in [
        (60, &["checkpoint"][..]),
        (120, &["checkpoint"][..]),
        (180, &["checkpoint", "-m", "first"][..]),
    ] {
        at(&mut t, off);
        let r = t.sgard(args);
        r.ok().stdout_has("nothing changed");
        assert_eq!(blob_files(&t), blobs, "{args:?} stored a blob");
        assert_eq!(history_bytes(&t), hist, "{args:?} wrote the log");
        assert_eq!(t.manifest(), manifest, "{args:?} rewrote the manifest");
    }

    // A new message alone is not a change: nothing is recorded (the Go
    // sgard, and sgard before, recorded an empty snapshot each time).
    at(&mut t, 240);
    let r = t.sgard(["checkpoint", "-m", "new"]);
    r.ok().stdout_has("nothing changed");
    assert_eq!(blob_files(&t), blobs);
    assert_eq!(history_bytes(&t), hist);
    assert_eq!(t.manifest(), manifest);
    // A change with a message is recorded with it.
    at(&mut t, 300);
    t.write("f", b"changed\n");
    let r = t.sgard(["checkpoint", "-m", "new"]);
    r.ok();
    assert!(!r.stdout.contains("nothing changed"), "{r:#?}");
    let j = log(&t);
    assert_eq!(j.len(), 2);
    assert_eq!(j[0]["message"], "new");
    assert_eq!(j[0]["reason"], "checkpoint");
    assert_eq!(
        t.manifest().as_bytes(),
        &blob(&t, j[0]["id"].as_str().unwrap())[..]
    );
}

/// The kill delays of a `kill -9` test, chosen as it goes: none (to measure
/// a whole run), a few early ones, then a coarse sweep from 30 % of a whole
/// run upwards until a run finishes before the kill, then a 1 ms sweep over
/// the last 15 ms before that point (where the log and manifest writes
/// are), then none (a clean run at the end).
struct KillSchedule {
    /// How long a whole run took (set by the caller after the first round).
    full: Duration,
    /// Rounds handed out so far.
    step: usize,
    /// The current delay of the coarse sweep.
    coarse: Option<Duration>,
    /// The fine delays still to hand out (last first).
    fine: Option<Vec<Duration>>,
    /// Whether the final clean run was handed out.
    ended: bool,
}

impl KillSchedule {
    fn new() -> Self {
        KillSchedule {
            full: Duration::ZERO,
            step: 0,
            coarse: None,
            fine: None,
            ended: false,
        }
    }

    /// The next delay (`Some(None)`: run without a kill), given whether the
    /// previous run finished before its kill. `None`: no more rounds.
    fn next(&mut self, last_finished: bool) -> Option<Option<Duration>> {
        const EARLY: [u64; 4] = [0, 5, 20, 50];
        let s = self.step;
        self.step += 1;
        if s == 0 {
            return Some(None);
        }
        if let Some(&ms) = EARLY.get(s - 1) {
            return Some(Some(Duration::from_millis(ms)));
        }
        if self.fine.is_none() {
            let finished = self.coarse.is_some() && last_finished;
            let too_far = self.coarse.is_some_and(|d| d > self.full * 4);
            if !finished && !too_far {
                let d = match self.coarse {
                    None => self.full.mul_f64(0.3),
                    Some(d) => d + self.full / 10,
                };
                self.coarse = Some(d);
                return Some(Some(d));
            }
            let end = self.coarse.unwrap_or(self.full);
            // Popped from the end: end - 15 ms first, up to end.
            self.fine = Some(
                (0..=15)
                    .map(|k| end.saturating_sub(Duration::from_millis(k)))
                    .collect(),
            );
        }
        if let Some(d) = self.fine.as_mut().and_then(Vec::pop) {
            return Some(Some(d));
        }
        if !self.ended {
            self.ended = true;
            return Some(None);
        }
        None
    }
}

/// Runs `args` and kills it (`kill -9`) after `delay`; returns its exit
/// code (-1 when killed) and how long it ran.
fn run_killed(t: &TestEnv, args: &[&str], delay: Option<Duration>) -> (Run, Duration) {
    let spawned = Instant::now();
    let mut child = t
        .command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(d) = delay {
        thread::sleep(d.saturating_sub(spawned.elapsed()));
        let _ = child.kill();
    }
    let r = finish(child, Duration::from_secs(120), &args.join(" "));
    (r, spawned.elapsed())
}

/// Runs `args` set to die at the named point (`SGARD_TEST_CRASH_AT`).
fn run_crashing(t: &TestEnv, args: &[&str], point: &str) -> (Run, Duration) {
    let spawned = Instant::now();
    let child = t
        .command(args)
        .env("SGARD_TEST_CRASH_AT", point)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let r = finish(child, Duration::from_secs(120), &args.join(" "));
    (r, spawned.elapsed())
}

/// 6a. `kill -9` at any moment of a checkpoint leaves head and log
/// consistent: verify passes (every snapshot checked), log works, every
/// record's blob exists, and the head is the newest snapshot or an
/// interrupted one the next exclusive open finishes.
#[test]
fn kill_9_during_checkpoint_keeps_head_and_log_consistent() {
    const SIZE: usize = 32 << 20;
    let t = TestEnv::init();
    let mut content = noise(SIZE, 7);
    let big = t.write("big.bin", &content);
    t.write("small", b"small\n");
    t.sgard(["add", "~/big.bin", "~/small"]).ok();

    let mut sched = KillSchedule::new();
    let (mut interrupted, mut recorded_kills, mut unfinished_heads) = (0, 0, 0);
    let mut finished = false;
    let mut round = 0u64;
    while let Some(delay) = sched.next(finished) {
        round += 1;
        let stamp = (0xBEEF_0000 + round).to_le_bytes();
        content[..8].copy_from_slice(&stamp);
        fs::File::options()
            .write(true)
            .open(&big)
            .unwrap()
            .write_all_at(&stamp, 0)
            .unwrap();
        let msg = format!("round {round}");
        let (r, took) = run_killed(&t, &["checkpoint", "-m", &msg], delay);
        let case = format!("round {round}: kill after {delay:?}, exit {}", r.code);
        if sched.full.is_zero() {
            sched.full = took;
        }
        finished = r.code != -1;
        if !finished {
            interrupted += 1;
        }
        if delay.is_none() {
            assert_eq!(r.code, 0, "{case}: {r:#?}");
        }

        // Head and log consistent (read before any exclusive open).
        let recs = history_records(&t);
        let head_sha = sha(t.manifest());
        let last = recs.last().unwrap_or_else(|| panic!("{case}: empty log"));
        let newest_cp = recs
            .iter()
            .rev()
            .find(|r| r["reason"] == "checkpoint")
            .unwrap();
        let consistent = newest_cp["id"] == head_sha
            || (last["reason"] == "checkpoint"
                && last.get("head_before").map(String::as_str) == Some(head_sha.as_str()));
        assert!(
            consistent,
            "{case}: manifest.yaml ({head_sha}) is neither the newest snapshot nor the one it \
             replaces; log: {recs:#?}"
        );
        if !finished && last.get("message") == Some(&msg) {
            recorded_kills += 1;
            if newest_cp["id"] != head_sha {
                unfinished_heads += 1;
            }
        }
        assert_history_blobs_exist(&t, &case);
        let v = t.sgard(["verify"]);
        assert_eq!(v.code, 0, "{case}: verify; {v:#?}");
        let l = t.sgard(["log"]);
        assert_eq!(l.code, 0, "{case}: log; {l:#?}");
        let s = t.sgard(["status"]);
        assert_eq!(s.code, 0, "{case}: status; {s:#?}");
        if finished {
            let j = log(&t);
            assert_eq!(j[0]["message"], msg.as_str(), "{case}");
            let big_line = s.stdout.lines().find(|l| l.contains("~/big.bin")).unwrap();
            assert!(big_line.starts_with("ok"), "{case}: {s:#?}");
        }
    }
    assert!(
        interrupted >= 5,
        "only {interrupted} checkpoints were actually interrupted"
    );
    // An exclusive command finishes any interrupted head: manifest.yaml is
    // then exactly the newest snapshot.
    t.sgard(["checkpoint"]).ok();
    let newest = checkpoint_ids(&t)[0].clone();
    assert_eq!(t.manifest().as_bytes(), &blob(&t, &newest)[..]);
    assert_history_blobs_exist(&t, "end");
    t.sgard(["verify"]).ok();
    eprintln!(
        "kill -9 checkpoint: {round} rounds, a whole checkpoint took {:?}, {interrupted} \
         interrupted, {recorded_kills} killed after the log record ({unfinished_heads} before \
         manifest.yaml)",
        sched.full
    );
}

/// 6c. `kill -9` at any moment of an `add` of a tree (hundreds of
/// small files copied on all cores, two big ones through the hashing
/// pipeline, one batched flush) leaves the manifest as it was or as it
/// would be, never a mix, and every blob it names whole.
#[test]
fn kill_9_during_add_of_a_tree_leaves_old_or_new_manifest() {
    const SMALL: usize = 200;
    const BIG: usize = 10 << 20;
    let t = TestEnv::init();
    let names: Vec<String> = (0..SMALL)
        .map(|i| format!("tree/d{}/f{i:03}", i % 7))
        .chain(["tree/big0.bin".into(), "tree/big1.bin".into()])
        .collect();
    let mut contents: Vec<Vec<u8>> = names
        .iter()
        .enumerate()
        .map(|(i, _)| noise(if i >= SMALL { BIG } else { 64 + i * 37 }, 500 + i as u64))
        .collect();
    let hashes_of = |contents: &[Vec<u8>]| -> Vec<String> {
        let mut v: Vec<String> = contents.iter().map(sha).collect();
        v.sort();
        v
    };
    let manifest_hashes = |t: &TestEnv| -> Vec<String> {
        let mut v: Vec<String> = t
            .manifest()
            .lines()
            .filter_map(|l| l.trim().strip_prefix("hash: "))
            .map(str::to_owned)
            .collect();
        v.sort();
        v
    };

    let mut sched = KillSchedule::new();
    let mut previous: Vec<String> = Vec::new();
    let (mut interrupted, mut round, mut finished) = (0, 0u64, false);
    while let Some(delay) = sched.next(finished) {
        round += 1;
        // New bytes in every file, so every blob of this round is new.
        for ((n, c), i) in names.iter().zip(&mut contents).zip(0u64..) {
            c[..8].copy_from_slice(&(round << 32 | i).to_le_bytes());
            t.write(n, &*c);
        }
        let wanted = hashes_of(&contents);
        let (r, took) = run_killed(&t, &["add", "~/tree"], delay);
        let case = format!("round {round}: kill after {delay:?}, exit {}", r.code);
        if sched.full.is_zero() {
            sched.full = took;
        }
        finished = r.code != -1;
        if finished {
            assert_eq!(r.code, 0, "{case}: {r:#?}");
        } else {
            interrupted += 1;
        }
        let now = manifest_hashes(&t);
        assert!(
            now == previous || now == wanted,
            "{case}: the manifest is neither the old one nor the new one"
        );
        if finished {
            assert_eq!(now, wanted, "{case}: a finished add lost entries");
        }
        // Every blob named is whole (verify re-hashes each one).
        let v = t.sgard(["verify"]);
        assert_eq!(v.code, 0, "{case}: verify; {v:#?}");
        previous = now;
    }
    assert!(
        interrupted >= 3,
        "only {interrupted} rounds were interrupted"
    );
    // Leftover temp files are swept by the next exclusive command.
    t.sgard(["prune"]).ok();
    t.sgard(["verify"]).ok();
    eprintln!(
        "kill -9 add: {round} rounds, a whole add took {:?}, {interrupted} interrupted",
        sched.full
    );
}

/// 6b. `kill -9` at any moment of a restore of several big files leaves a
/// consistent log, and either nothing changed on disk (no record yet) or
/// `undo` puts every file back as it was before the restore.
#[test]
fn kill_9_during_restore_keeps_log_consistent_and_undoable() {
    const SIZE: usize = 4 << 20;
    const FILES: usize = 4;
    let t = TestEnv::init();
    let names: Vec<String> = (0..FILES).map(|i| format!("dir/file{i}.bin")).collect();
    let stored: Vec<Vec<u8>> = (0..FILES).map(|i| noise(SIZE, 100 + i as u64)).collect();
    for (n, c) in names.iter().zip(&stored) {
        t.write(n, c);
    }
    t.sgard(["add", "~/dir"]).ok();
    t.sgard(["checkpoint", "-m", "base"]).ok();

    let mut sched = KillSchedule::new();
    let (mut interrupted, mut undone) = (0, 0);
    let mut finished = false;
    let mut round = 0usize;
    // After the timed kills, deaths at the named points between the safety
    // snapshot and the last rename (SGARD_TEST_CRASH_AT), where a timed kill
    // may or may not land: the undo of a half-done restore is always tried.
    let mut points = vec![
        "restore-recorded",
        "restore-before-base",
        "restore-staged",
        "restore-after-snapshot",
    ];
    loop {
        let (delay, point) = match sched.next(finished) {
            Some(d) => (d, None),
            None => match points.pop() {
                Some(p) => (None, Some(p)),
                None => break,
            },
        };
        round += 1;
        // Local edits the restore will overwrite.
        let local: Vec<Vec<u8>> = stored
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut c = s.clone();
                c[..8].copy_from_slice(&(0xF00D_0000 + (round * 16 + i) as u64).to_le_bytes());
                c
            })
            .collect();
        for (n, c) in names.iter().zip(&local) {
            t.write(n, c);
        }
        let nrec = history_records(&t).len();
        let (r, took) = match point {
            None => run_killed(&t, &["restore", "-f", "~/dir"], delay),
            Some(p) => run_crashing(&t, &["restore", "-f", "~/dir"], p),
        };
        let case = format!(
            "round {round}: kill after {delay:?} / at {point:?}, exit {}",
            r.code
        );
        if sched.full.is_zero() {
            sched.full = took;
        }
        finished = r.code != -1;
        if !finished {
            interrupted += 1;
        }
        if delay.is_none() && point.is_none() {
            assert_eq!(r.code, 0, "{case}: {r:#?}");
        }
        if point.is_some() {
            assert_eq!(
                r.code, -1,
                "{case}: the crash point was not reached; {r:#?}"
            );
        }

        assert_history_blobs_exist(&t, &case);
        let v = t.sgard(["verify"]);
        assert_eq!(v.code, 0, "{case}: verify; {v:#?}");
        let l = t.sgard(["log"]);
        assert_eq!(l.code, 0, "{case}: log; {l:#?}");
        // Each file is whole: the local edit or the stored version.
        for (i, n) in names.iter().enumerate() {
            let now = t.read(n);
            assert!(
                now == local[i] || now == stored[i],
                "{case}: {n} is neither the local nor the stored version"
            );
        }
        let recs = history_records(&t);
        assert!(
            recs.len() == nrec || recs.len() == nrec + 2,
            "{case}: the restore added {} record(s)",
            recs.len() - nrec
        );
        if recs.len() == nrec {
            for (i, n) in names.iter().enumerate() {
                assert!(
                    t.read(n) == local[i],
                    "{case}: {n} changed before the safety snapshot was recorded"
                );
            }
            continue;
        }
        assert_eq!(recs[nrec]["reason"], "before-restore", "{case}");
        assert_eq!(recs[nrec + 1]["reason"], "restore", "{case}");
        if finished {
            for (i, n) in names.iter().enumerate() {
                assert!(t.read(n) == stored[i], "{case}: {n} not restored");
            }
        } else {
            undone += 1;
        }
        // Undo puts back every local edit, whatever the restore managed.
        let u = t.sgard(["undo"]);
        assert_eq!(u.code, 0, "{case}: undo; {u:#?}");
        for (i, n) in names.iter().enumerate() {
            assert!(t.read(n) == local[i], "{case}: undo did not put back {n}");
        }
        assert_history_blobs_exist(&t, &case);
    }
    assert!(
        interrupted >= 4,
        "only {interrupted} restores were actually interrupted"
    );
    assert!(
        undone >= 1,
        "no restore was killed after its safety snapshot: the undo of a half-done restore \
         was never tried"
    );
    t.sgard(["verify"]).ok();
    eprintln!(
        "kill -9 restore: {round} rounds, a whole restore took {:?}, {interrupted} \
         interrupted, {undone} undone after a kill",
        sched.full
    );
}

/// A restore cut off right after its records, before it could clear the
/// note of an earlier undo that changed nothing, is what `undo` reverses
/// next, without a question about that older undo.
#[test]
fn a_restore_cut_off_after_its_records_outdates_the_note_of_an_undo_that_changed_nothing() {
    let t = TestEnv::init();
    t.write("a", b"stored\n");
    t.sgard(["add", "~/a"]).ok();
    t.sgard(["checkpoint", "-m", "base"]).ok();

    // Recorded, then cut off before writing: the undo changes nothing and
    // notes so.
    t.write("a", b"local 1\n");
    let (r, _) = run_crashing(&t, &["restore", "-f", "~/a"], "restore-after-snapshot");
    assert_eq!(r.code, -1, "{r:#?}");
    let u = t.sgard(["undo"]);
    u.ok();
    assert!(u.stdout.contains("Nothing to undo"), "{u:#?}");
    // Asked about with that note: the latest undo changed nothing.
    let again = t.sgard(["undo", "-n"]);
    again.ok();
    assert!(again.stdout.contains("changed nothing"), "{again:#?}");

    // A second restore recorded, then cut off before it clears the note.
    let (r, _) = run_crashing(&t, &["restore", "-f", "~/a"], "restore-recorded");
    assert_eq!(r.code, -1, "{r:#?}");
    let u = t.sgard(["undo"]);
    assert_eq!(u.code, 0, "{u:#?}");
    assert!(!u.stdout.contains("changed nothing"), "{u:#?}");
    assert_eq!(t.read("a"), b"local 1\n");
}

/// (7) A checkpoint interrupted after its log record but before
/// manifest.yaml: readers see the new snapshot, and the next mutating
/// command writes manifest.yaml as the snapshot's exact bytes.
#[test]
fn checkpoint_interrupted_before_manifest_write_is_finished() {
    let mut t = TestEnv::tracking("f", b"first\n");
    t.sgard(["checkpoint", "-m", "one"]).ok();
    at(&mut t, 60);
    t.write("f", b"second\n");
    let prev = fs::read(t.repo().join("manifest.yaml")).unwrap();
    t.sgard(["checkpoint", "-m", "two"]).ok();
    let ids = checkpoint_ids(&t);
    assert_eq!(ids.len(), 2);
    let newest = ids[0].clone();
    let snap = blob(&t, &newest);
    assert_ne!(snap, prev);
    // The crash: the log has the record, manifest.yaml is the old head.
    fs::write(t.repo().join("manifest.yaml"), &prev).unwrap();
    fs::set_permissions(
        t.repo().join("manifest.yaml"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();

    // Readers see the new snapshot.
    let s = t.sgard(["status"]);
    s.ok();
    assert!(
        has_line(&s.stdout, "ok", "~/f"),
        "status reads the old head; {s:#?}"
    );
    let l = t.sgard(["list"]);
    l.ok();
    assert!(l.stdout.contains(&sha(b"second\n")[..8]), "{l:#?}");
    assert!(!l.stdout.contains(&sha(b"first\n")[..8]), "{l:#?}");
    let j = t.sgard(["list", "--json"]);
    assert_eq!(
        json_of(&j)["entries"][0]["hash"],
        sha(b"second\n").as_str(),
        "{j:#?}"
    );
    t.sgard(["verify"]).ok();
    let show = json_of(&t.sgard(["show", "@", "--json"]));
    assert_eq!(show["snapshot"]["id"], newest.as_str());

    // A mutating command finishes it: manifest.yaml is the snapshot blob.
    at(&mut t, 120);
    let r = t.sgard(["checkpoint"]);
    r.ok().stdout_has("nothing changed");
    assert_eq!(
        fs::read(t.repo().join("manifest.yaml")).unwrap(),
        snap,
        "manifest.yaml is not the newest snapshot's document"
    );
    assert_eq!(log_ids(&t).len(), 2, "finishing added a record");
    t.sgard(["verify"]).ok();
    t.sgard(["status"]).ok().stdout_has("ok");
}

/// 7b. The same crash, finished by another kind of mutating command
/// (`restore`), which then works from the new head.
#[test]
fn interrupted_checkpoint_is_finished_by_restore() {
    let mut t = TestEnv::tracking("f", b"first\n");
    t.sgard(["checkpoint"]).ok();
    at(&mut t, 60);
    t.write("f", b"second\n");
    let prev = fs::read(t.repo().join("manifest.yaml")).unwrap();
    t.sgard(["checkpoint"]).ok();
    let newest = checkpoint_ids(&t)[0].clone();
    fs::write(t.repo().join("manifest.yaml"), &prev).unwrap();
    t.write("f", b"local junk\n");
    t.sgard(["restore", "-f", "~/f"]).ok();
    assert_eq!(t.read("f"), b"second\n", "restore used the old head");
    assert_eq!(
        fs::read(t.repo().join("manifest.yaml")).unwrap(),
        blob(&t, &newest)
    );
}

/// (8) `verify` checks every snapshot (exit 3, `snapshot <12 hex>`); `prune`
/// refuses while a snapshot is unreadable and deletes nothing.
#[test]
fn verify_reports_damaged_snapshots_and_prune_refuses() {
    let mut t = TestEnv::init();
    let v1 = b"old content only the first snapshot has\n";
    t.write("f", v1);
    t.sgard(["add", "~/f"]).ok();
    t.sgard(["checkpoint", "-m", "one"]).ok();
    at(&mut t, 60);
    t.write("f", b"new content\n");
    t.sgard(["checkpoint", "-m", "two"]).ok();
    let ids = checkpoint_ids(&t);
    let (old, head) = (ids[1].clone(), ids[0].clone());
    t.sgard(["verify"]).ok();
    let damaged = |out: &str, id: &str| {
        out.lines()
            .any(|l| l.starts_with("damaged") && l.contains(&format!("snapshot {}", &id[..12])))
    };
    // An orphan blob, so "prune deletes nothing" means something.
    let orphan = b"orphan blob nothing references\n";
    let op = t.blob_path(&sha(orphan));
    fs::create_dir_all(op.parent().unwrap()).unwrap();
    fs::write(&op, orphan).unwrap();

    // (a) The old snapshot's blob deleted.
    let saved = blob(&t, &old);
    fs::remove_file(t.blob_path(&old)).unwrap();
    let r = t.sgard(["verify"]);
    r.code(3);
    assert!(damaged(&r.stdout, &old), "{r:#?}");
    assert!(!damaged(&r.stdout, &head), "{r:#?}");
    r.stdout_has("missing");
    let vj = t.sgard(["verify", "--json"]);
    vj.code(3);
    let vj = json_of(&vj);
    assert_eq!(vj["ok"], false);
    let bad: Vec<&str> = vj["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["ok"] == false)
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(bad, vec![old.as_str()]);
    // prune refuses: it cannot know what the lost snapshot needed.
    let blobs = blob_files(&t);
    let r = t.sgard(["prune"]);
    assert_ne!(r.code, 0, "prune went ahead; {r:#?}");
    assert_eq!(blob_files(&t), blobs, "prune deleted blobs");
    assert!(t.blob_path(&sha(v1)).is_file());
    assert!(op.is_file());

    // (b) The old snapshot's blob corrupt.
    let mut bad_bytes = saved.clone();
    bad_bytes[10] ^= 0x20;
    fs::write(t.blob_path(&old), &bad_bytes).unwrap();
    let r = t.sgard(["verify"]);
    r.code(3);
    assert!(damaged(&r.stdout, &old), "{r:#?}");
    r.stdout_has("corrupt");
    let blobs = blob_files(&t);
    let r = t.sgard(["prune"]);
    assert_ne!(r.code, 0, "prune went ahead; {r:#?}");
    assert_eq!(blob_files(&t), blobs, "prune deleted blobs");
    assert!(t.blob_path(&sha(v1)).is_file());
    assert!(op.is_file());
    tamper(&t.blob_path(&old), &saved);
    t.sgard(["verify"]).ok();

    // (c) The head snapshot's blob corrupt (manifest.yaml intact).
    let head_saved = blob(&t, &head);
    let mut hb = head_saved.clone();
    hb[0] ^= 0x01;
    tamper(&t.blob_path(&head), &hb);
    let r = t.sgard(["verify"]);
    r.code(3);
    assert!(damaged(&r.stdout, &head), "{r:#?}");
    assert!(!damaged(&r.stdout, &old), "{r:#?}");
    tamper(&t.blob_path(&head), &head_saved);
    t.sgard(["verify"]).ok();

    // (d) A content blob only the old snapshot references.
    let cp = t.blob_path(&sha(v1));
    let mut cb = v1.to_vec();
    cb[0] = b'X';
    tamper(&cp, &cb);
    let r = t.sgard(["verify"]);
    r.code(3);
    assert!(damaged(&r.stdout, &old), "{r:#?}");
    assert!(!damaged(&r.stdout, &head), "{r:#?}");
    assert!(r.stdout.contains(&sha(v1)[..12]), "{r:#?}");
    // The head's entries themselves are fine.
    assert!(has_line(&r.stdout, "ok", "~/f"), "{r:#?}");
    // And missing.
    fs::remove_file(&cp).unwrap();
    let r = t.sgard(["verify"]);
    r.code(3);
    assert!(damaged(&r.stdout, &old), "{r:#?}");
    fs::write(&cp, v1).unwrap();
    t.sgard(["verify"]).ok();

    // Healthy again: prune deletes only the orphan.
    t.sgard(["prune"])
        .ok()
        .stdout_has("Pruned 1 orphaned blob,");
    assert!(!op.exists());
    assert!(t.blob_path(&sha(v1)).is_file());

    // (e) A record whose parent is not in the log (the first record cut
    // out of history.yaml by hand).
    let hp = t.repo().join("history.yaml");
    let text = fs::read_to_string(&hp).unwrap();
    let second = text
        .match_indices("\n    - id: ")
        .nth(1)
        .map(|(i, _)| i + 1)
        .unwrap();
    let first = text.find("    - id: ").unwrap();
    fs::write(&hp, format!("{}{}", &text[..first], &text[second..])).unwrap();
    assert_eq!(log_ids(&t), vec![head.clone()]);
    let r = t.sgard(["verify"]);
    r.code(3);
    assert!(damaged(&r.stdout, &head), "{r:#?}");
    r.stdout_has("parent");
}

/// (9) `show` lists what a snapshot changed against its parent.
#[test]
fn show_lists_added_modified_and_mode_changes() {
    let mut t = TestEnv::init();
    t.write("a", b"a one\n");
    t.write("b", b"b\n");
    t.write("same", b"same\n");
    for p in ["a", "b", "same"] {
        t.chmod(p, 0o644);
    }
    t.sgard(["add", "~/a", "~/b", "~/same"]).ok();
    t.sgard(["checkpoint", "-m", "first"]).ok();
    at(&mut t, 60);
    t.write("a", b"a two\n");
    t.chmod("b", 0o600);
    t.write("c", b"new file\n");
    t.sgard(["add", "~/c"]).ok();
    t.sgard(["checkpoint", "-m", "second"]).ok();
    let ids = checkpoint_ids(&t);

    let r = t.sgard(["show", "@"]);
    r.ok();
    r.stdout_has(&format!("snapshot {}", ids[0]))
        .stdout_has(&format!("parent   {}", ids[1]))
        .stdout_has("reason   checkpoint")
        .stdout_has("message  second");
    assert!(has_line(&r.stdout, "added", "~/c"), "{r:#?}");
    assert!(has_line(&r.stdout, "modified", "~/a"), "{r:#?}");
    assert!(has_line(&r.stdout, "mode", "~/b"), "{r:#?}");
    assert!(r.stdout.contains("0644 -> 0600"), "{r:#?}");
    assert!(!r.stdout.contains("~/same"), "{r:#?}");
    // The same by id prefix.
    let r2 = t.sgard(["show", &ids[0][..6]]);
    r2.ok();
    assert_eq!(r2.stdout, r.stdout);

    let j = json_of(t.sgard(["show", "@", "--json"]).ok());
    let s = &j["snapshot"];
    assert_eq!(s["id"], ids[0].as_str());
    assert_eq!(s["parent"], ids[1].as_str());
    assert_eq!(s["reason"], "checkpoint");
    assert_eq!(s["message"], "second");
    let mut changes: Vec<(String, String)> = j["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_owned(),
                c["change"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    changes.sort();
    assert_eq!(
        changes,
        vec![
            ("~/a".to_owned(), "modified".to_owned()),
            ("~/b".to_owned(), "mode".to_owned()),
            ("~/c".to_owned(), "added".to_owned()),
        ]
    );
    // The first snapshot has no parent: everything is added.
    let j = json_of(t.sgard(["show", "@~1", "--json"]).ok());
    assert_eq!(j["snapshot"]["parent"], Value::Null);
    assert_eq!(j["snapshot"]["message"], "first");
    assert!(
        j["changes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["change"] == "added"),
        "{j:#}"
    );
}

/// (10) `diff --at` compares a snapshot with the disk; `diff ID1 ID2`
/// compares two snapshots, both ids in the headers.
#[test]
fn diff_at_a_snapshot_and_between_snapshots() {
    let mut t = TestEnv::tracking("f", b"alpha\nbeta\ngamma\n");
    t.sgard(["checkpoint"]).ok();
    at(&mut t, 60);
    t.write("f", b"alpha\nBETA\ngamma\n");
    t.sgard(["checkpoint"]).ok();
    let ids = checkpoint_ids(&t);
    let (old, new) = (&ids[1], &ids[0]);

    let r = t.sgard(["diff", "--at", "@~1", "~/f"]);
    r.ok()
        .stdout_has(&format!("--- ~/f ({})", &old[..12]))
        .stdout_has("+++ ~/f (current)")
        .stdout_has("\n-beta\n")
        .stdout_has("\n+BETA\n");
    // Against the head: no change.
    t.sgard(["diff", "--at", "@", "~/f"])
        .ok()
        .stdout_has("No changes.");
    let r = t.sgard(["diff", "--at", "@~1", "--exit-code", "~/f"]);
    r.code(1);

    let r = t.sgard(["diff", &old[..8], &new[..8], "~/f"]);
    r.ok()
        .stdout_has(&format!("--- ~/f ({})", &old[..12]))
        .stdout_has(&format!("+++ ~/f ({})", &new[..12]))
        .stdout_has("\n-beta\n")
        .stdout_has("\n+BETA\n");
    assert!(!r.stdout.contains("(current)"), "{r:#?}");
    // Reversed, and with relative names.
    let r = t.sgard(["diff", "@", "@~1", "~/f"]);
    r.ok()
        .stdout_has(&format!("--- ~/f ({})", &new[..12]))
        .stdout_has(&format!("+++ ~/f ({})", &old[..12]))
        .stdout_has("\n-BETA\n")
        .stdout_has("\n+beta\n");
    // The disk changed: diff between snapshots ignores it.
    t.write("f", b"something else entirely\n");
    t.sgard(["diff", &old[..8], &new[..8], "~/f"])
        .ok()
        .stdout_has("\n+BETA\n");
}

/// (11) `mirror down -f` records a safety snapshot: an untracked file it
/// deletes (and a tracked file it overwrites) comes back with `undo`.
#[test]
fn mirror_down_deletion_is_undone() {
    let t = TestEnv::init();
    t.write("d/tracked", b"tracked stored\n");
    t.sgard(["add", "~/d"]).ok();
    t.sgard(["checkpoint"]).ok();
    let junk = b"untracked \x00 bytes\nkeep me\n".to_vec();
    t.write("d/junk.txt", &junk);
    t.chmod("d/junk.txt", 0o640);
    let deep = b"deeper untracked\n".to_vec();
    t.write("d/sub/deep.txt", &deep);
    t.write("d/tracked", b"tracked local edit\n");

    let r = t.sgard(["mirror", "down", "-f", "~/d"]);
    r.ok();
    assert!(!t.path("d/junk.txt").exists());
    assert!(!t.path("d/sub/deep.txt").exists());
    assert_eq!(t.read("d/tracked"), b"tracked stored\n");
    let j = log(&t);
    assert_eq!(j[0]["reason"], "restore", "{j:#?}");
    assert_eq!(j[1]["reason"], "before-restore", "{j:#?}");
    assert!(
        j[1]["message"].as_str().unwrap().contains("mirror down"),
        "{j:#?}"
    );
    let before_doc = String::from_utf8(blob(&t, j[1]["id"].as_str().unwrap())).unwrap();
    let (mut files, absent) = doc_paths(&before_doc);
    files.sort();
    assert_eq!(
        files,
        vec!["~/d/junk.txt", "~/d/sub/deep.txt", "~/d/tracked"],
        "{before_doc}"
    );
    assert!(absent.is_empty(), "{before_doc}");

    let r = t.sgard(["undo"]);
    r.ok();
    assert_eq!(t.read("d/junk.txt"), junk, "deleted file not put back");
    assert_eq!(mode_of(&t.path("d/junk.txt")), 0o640);
    assert_eq!(t.read("d/sub/deep.txt"), deep, "deleted file not put back");
    assert_eq!(t.read("d/tracked"), b"tracked local edit\n");
    t.sgard(["verify"]).ok();
}

/// (12) `restore --at` follows the normal prompt rules: a file that holds
/// what this machine last synced (its content is in the repository) is
/// overwritten without a question, whatever its mtime; a local change is
/// only overwritten after a yes.
#[test]
fn restore_at_asks_before_overwriting_local_changes() {
    let mut t = TestEnv::tracking("f", b"v1\n");
    t.sgard(["checkpoint"]).ok();
    at(&mut t, 3600);
    t.write("f", b"v2\n");
    t.sgard(["checkpoint"]).ok();
    at(&mut t, 7200);
    let p = t.path("f");

    // Disk = the head, newer than @~1's entry: nothing to lose, no question.
    set_mtime(&p, now_secs() + 1800);
    let r = t.sgard(["restore", "--at", "@~1", "~/f"]);
    r.ok();
    assert!(!r.stdout.contains("Overwrite"), "{r:#?}");
    assert_eq!(t.read("f"), b"v1\n");
    // The old version on disk is a local change against the head now.
    t.sgard(["status"])
        .ok()
        .stdout_has("modified   ~/f  (content)");
    t.sgard(["undo"]).ok();
    assert_eq!(t.read("f"), b"v2\n");
    t.sgard(["status"]).ok().stdout_has("ok         ~/f");

    // A local edit, older than the entry: asks; "n" keeps it, records nothing.
    t.write("f", b"v3 local\n");
    set_mtime(&p, now_secs() - 86_400);
    let question = "~/f: changed here since the last sync (content). Overwrite it?";
    let nrec = log_ids(&t).len();
    let r = t.sgard_stdin(["restore", "--at", "@~1", "~/f"], "n\n");
    r.ok().stdout_has(question);
    assert!(has_line(&r.stdout, "kept", "~/f"), "{r:#?}");
    assert_eq!(t.read("f"), b"v3 local\n");
    assert_eq!(
        log_ids(&t).len(),
        nrec,
        "a declined restore recorded snapshots"
    );
    // Closed stdin: refused (exit 4), nothing changed.
    let r = t.sgard(["restore", "--at", "@~1", "~/f"]);
    r.code(4).stdout_has(question);
    assert_eq!(t.read("f"), b"v3 local\n");
    assert_eq!(log_ids(&t).len(), nrec);
    // "y" overwrites; undo brings the local edit back.
    let r = t.sgard_stdin(["restore", "--at", "@~1", "~/f"], "y\n");
    r.ok().stdout_has(question);
    assert_eq!(t.read("f"), b"v1\n");
    t.sgard(["undo"]).ok();
    assert_eq!(t.read("f"), b"v3 local\n");
    // A dry run reports `ask` and changes nothing.
    let r = t.sgard(["restore", "--at", "@~1", "-n", "~/f"]);
    r.ok();
    assert!(
        r.stdout
            .contains("ask        ~/f (changed here since the last sync (content))"),
        "{r:#?}"
    );
    assert_eq!(t.read("f"), b"v3 local\n");
}

/// The Go sgard's `prune` deletes every blob its manifest does not name,
/// the snapshots' included: the head's snapshot is manifest.yaml itself, so
/// verify still passes and the next writer puts its blob back.
#[test]
fn the_head_snapshot_blob_deleted_by_a_go_prune_is_put_back() {
    let t = TestEnv::tracking(".bashrc", "one\n");
    t.sgard(["checkpoint", "-m", "one"]).ok();
    t.write(".bashrc", "two\n");
    set_mtime(&t.path(".bashrc"), now_secs() - 5);
    t.sgard(["checkpoint", "-m", "two"]).ok();
    let ids = checkpoint_ids(&t);
    let head = t.blob_path(&ids[0]);
    assert_eq!(
        sha(fs::read(t.repo().join("manifest.yaml")).unwrap()),
        ids[0]
    );
    fs::remove_file(&head).unwrap();
    t.sgard(["verify"]).ok();
    t.sgard(["show", &ids[0]]).ok();
    t.sgard(["status"]).ok();
    t.sgard(["checkpoint"])
        .ok()
        .stderr_has("had lost its blob, as the Go sgard's prune does");
    assert_eq!(sha(fs::read(&head).unwrap()), ids[0]);
    // An older snapshot's blob cannot be put back: verify says so.
    fs::remove_file(t.blob_path(&ids[1])).unwrap();
    t.sgard(["verify"])
        .code(3)
        .stdout_has("its snapshot blob is missing");
}

/// A restore before the first checkpoint records its snapshots in this
/// home's local log only; the checkpoint after it is the repository's
/// first snapshot, and nothing is reported lost on the way.
#[test]
fn a_checkpoint_after_a_first_restore_says_nothing_was_lost() {
    let t = TestEnv::tracking(".a", "a\n");
    t.write(".a", "z\n");
    t.sgard(["restore", "-f"]).ok();
    assert_eq!(t.read(".a"), b"a\n");
    t.write(".a", "b\n");
    let r = t.sgard(["checkpoint", "-m", "x"]);
    r.ok();
    assert!(!r.stderr.contains("lost its blob"), "{r:#?}");
    let head = sha(fs::read(t.repo().join("manifest.yaml")).unwrap());
    t.sgard(["show", &head]).ok().stdout_has("added      ~/.a");
    t.sgard(["verify"]).ok();
    t.sgard(["log"]).ok().stdout_has("before-restore");
}

/// A parsed snapshot document is kept in this machine's state folder under
/// its id (a snapshot never changes) and used again instead of the blob; a
/// damaged copy is parsed again from the blob and replaced; and a copy
/// whose snapshot the repository no longer holds is never used.
#[test]
fn parsed_snapshots_are_cached_by_id_and_never_outlive_the_repository() {
    let mut t = TestEnv::init();
    let v: [&[u8]; 3] = [b"first\n", b"second\n", b"third\n"];
    let ids = three_versions(&mut t, v);
    let cache = t.state().join("snapshots");
    for (id, want) in [(&ids[0], v[0]), (&ids[1], v[1])] {
        t.sgard(["restore", "--at", id, "-f", "~/f"]).ok();
        assert_eq!(t.read("f"), want);
        assert!(cache.join(id).is_file(), "{id} not cached");
    }

    // A copy under another snapshot's name is not that snapshot's.
    let first = cache.join(&ids[0]);
    let good = fs::read(&first).unwrap();
    let second = fs::read(cache.join(&ids[1])).unwrap();
    fs::write(&first, &second).unwrap();
    t.sgard(["restore", "--at", &ids[0], "-f", "~/f"]).ok();
    assert_eq!(t.read("f"), v[0]);
    assert_eq!(fs::read(&first).unwrap(), good, "the copy was replaced");

    // Served from the cache: the second snapshot's parsed form, named (and
    // checksummed) as the first's, is what a restore of the first writes.
    // Layout: magic (14), version (4), id (32), CRC-32 of id + body (4).
    let id0: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&ids[0][2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let body = &second[54..];
    let mut forged = second[..18].to_vec();
    forged.extend_from_slice(&id0);
    forged.extend_from_slice(&crc32(&[&id0[..], body].concat()).to_le_bytes());
    forged.extend_from_slice(body);
    fs::write(&first, &forged).unwrap();
    t.sgard(["restore", "--at", &ids[0], "-f", "~/f"]).ok();
    assert_eq!(t.read("f"), v[1], "the cached document was not used");

    // A damaged copy is a miss: the blob is parsed again and the copy
    // replaced by a sound one.
    fs::write(&first, &good[..good.len() / 2]).unwrap();
    t.sgard(["restore", "--at", &ids[0], "-f", "~/f"]).ok();
    assert_eq!(t.read("f"), v[0]);
    assert_eq!(fs::read(&first).unwrap(), good);

    // The snapshot's blob gone (a Go prune, a damaged disk): the cached
    // copy does not stand in for it.
    fs::remove_file(t.blob_path(&ids[0])).unwrap();
    t.write("f", b"local\n");
    let r = t.sgard(["restore", "--at", &ids[0], "-f", "~/f"]);
    assert_ne!(r.code, 0, "{r:#?}");
    assert_eq!(t.read("f"), b"local\n");
    let r = t.sgard(["verify"]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stdout_has(&ids[0][..12]);
}

/// The parsed-snapshot cache is a convenience: when it cannot be written
/// (here a file stands where its folder goes), a run that parses many
/// snapshots does its work, says so once, and tries no more writes; and a
/// run never keeps more than the cache's bound of documents.
#[test]
fn a_snapshot_cache_that_cannot_be_written_is_said_once_and_bounded() {
    let mut t = TestEnv::init();
    let v: [&[u8]; 3] = [b"first\n", b"second\n", b"third\n"];
    let ids = three_versions(&mut t, v);
    let cache = t.state().join("snapshots");
    let _ = fs::remove_dir_all(&cache);
    fs::write(&cache, b"not a folder").unwrap();
    let r = t.sgard(["verify"]);
    r.ok();
    let said = "could not keep the parsed snapshots";
    assert_eq!(r.stderr.matches(said).count(), 1, "{r:#?}");
    t.sgard(["restore", "--at", &ids[0], "-f", "~/f"])
        .ok()
        .stderr_has(said);
    assert_eq!(t.read("f"), v[0]);
    assert_eq!(fs::read(&cache).unwrap(), b"not a folder");

    // 70 snapshots, none cached: one verify parses them all and keeps at
    // most 64 (the cache's bound), never failing for the rest.
    fs::remove_file(&cache).unwrap();
    for i in 0..67i64 {
        at(&mut t, 180 + 60 * i);
        t.write("f", format!("v{i}\n").as_bytes());
        t.sgard(["checkpoint", "-m", "more"]).ok();
    }
    let _ = fs::remove_dir_all(&cache);
    let r = t.sgard(["verify"]);
    r.ok();
    assert!(!r.stderr.contains(said), "{r:#?}");
    let kept = fs::read_dir(&cache).unwrap().count();
    assert!((1..=64).contains(&kept), "kept {kept}");

    // The documents of the newest snapshots are what stays: a second
    // verify keeps the ones the first could not (the head's is
    // manifest.yaml, never parsed), and a third, finding the folder full
    // of newer ones, changes nothing. Each run used to evict what the
    // next one read first.
    let cached = || -> std::collections::BTreeSet<String> {
        fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect()
    };
    let newest: std::collections::BTreeSet<String> =
        log_ids(&t).into_iter().skip(1).take(64).collect();
    assert_eq!(newest.len(), 64);
    t.sgard(["verify"]).ok();
    assert_eq!(cached(), newest);
    t.sgard(["verify"]).ok();
    assert_eq!(cached(), newest);
}

/// CRC-32 (IEEE), as the snapshot cache's files carry it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A checkpoint renders its head document once, into memory, for both its
/// snapshot and manifest.yaml when the head is small, and twice, streamed,
/// when it is big: either way manifest.yaml holds the snapshot's bytes, the
/// log names them by their hash, and the next run reads them back.
#[test]
fn a_checkpoint_writes_the_same_document_as_its_snapshot_and_manifest() {
    for most in [None, Some("0"), Some("2")] {
        let t = TestEnv::init();
        let run = |args: &[&str]| {
            let mut c = t.command(args);
            if let Some(m) = most {
                c.env("SGARD_TEST_RENDER_ONCE_MAX", m);
            }
            let r: Run = c.stdin(Stdio::null()).output().unwrap().into();
            r.ok();
            r
        };
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            t.write(name, format!("file {i}\n"));
            run(&["add", &format!("~/{name}")]);
        }
        run(&["checkpoint", "-m", "first"]);
        t.write("b", "changed\n");
        run(&["checkpoint", "-m", "second"]);
        let text = fs::read(t.repo().join("manifest.yaml")).unwrap();
        let id = sha(&text);
        let ids = checkpoint_ids(&t);
        assert_eq!(ids.first(), Some(&id), "{most:?}: {ids:?}");
        assert_eq!(blob(&t, &id), text, "{most:?}: the snapshot differs");
        assert!(
            String::from_utf8_lossy(&text).contains(&sha("changed\n")),
            "{most:?}: the head lacks the change"
        );
        let r = run(&["status"]);
        assert_eq!(r.stdout.matches("ok ").count(), 3, "{most:?}: {r:#?}");
        run(&["verify"]);
    }
}

/// A restore's record counts the bytes of the contents it names, each
/// content once (two files hold the same one here).
#[test]
fn a_restore_record_counts_the_bytes_it_wrote() {
    let t = TestEnv::init();
    t.write("d/a", "hello\n");
    t.write("d/b", "x".repeat(3000));
    t.write("d/same", "hello\n");
    t.write("d/e/c", "y".repeat(700));
    t.sgard(["add", "~/d"]).ok();
    fs::remove_dir_all(t.path("d")).unwrap();
    t.sgard(["restore", "-f"]).ok();
    let local = fs::read_to_string(t.state().join("undo/history.yaml")).unwrap();
    let restore = local
        .split("- id:")
        .find(|r| r.contains("reason: restore\n"))
        .unwrap_or_else(|| panic!("no restore record:\n{local}"));
    assert!(restore.contains("entries: 4\n"), "{restore}");
    assert!(restore.contains("bytes: 3706\n"), "{restore}");
}
