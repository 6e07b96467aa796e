//! The machine-local index: when it is trusted for the manifest, and that
//! a damaged, foreign or stale one is never used for it.

use std::fs;

use crate::common::*;

/// `manifest.yaml` rewritten behind sgard's back, at the same size and with
/// its old mtime put back: the index's fingerprint of it no longer matches
/// (the ctime and inode moved), so the new manifest is what counts.
#[test]
fn a_manifest_changed_behind_sgards_back_is_read_again() {
    let t = TestEnv::tracking("f", "one\n");
    // Settle it, so the index would vouch for the manifest on its own.
    set_mtime(&t.repo().join("manifest.yaml"), now_secs() - 3600);
    std::thread::sleep(std::time::Duration::from_millis(2300));
    t.sgard(["status"]).ok().stdout_has("ok         ~/f");
    t.sgard(["status"]).ok().stdout_has("ok         ~/f");
    // Another tool (a `git checkout`, the Go sgard) puts a different hash
    // of the same length in place.
    let m = t.manifest();
    let edited = m.replace(&sha("one\n"), &sha("two\n"));
    assert_ne!(m, edited);
    assert_eq!(m.len(), edited.len());
    let p = t.repo().join("manifest.yaml");
    fs::write(&p, edited).unwrap();
    set_mtime(&p, now_secs() - 3600);
    t.sgard(["status"]).stdout_has("~/f");
    let r = t.sgard(["status"]);
    assert!(
        !r.stdout.starts_with("ok "),
        "the index's manifest was used for a changed manifest.yaml: {r:#?}"
    );
}

/// An index copied from another repository's state folder supplies none of
/// its manifest.
#[test]
fn an_index_from_another_repository_supplies_nothing() {
    let a = TestEnv::init();
    a.write("f", "a\n");
    a.sgard(["add", "f"]).ok();
    let b = TestEnv::init();
    b.write("g", "b\n");
    b.sgard(["add", "g"]).ok();
    fs::copy(a.index(), b.index()).unwrap();
    let r = b.sgard(["list"]);
    r.ok().stdout_has("~/g");
    assert!(!r.stdout.contains("~/f"), "{r:#?}");
}

/// A first run writes the index; an older build's `base` file is moved
/// into it and removed, keeping what it said.
#[test]
fn the_index_replaces_the_older_files() {
    let t = TestEnv::tracking("f", "one\n");
    let idx = IndexFile::read(&t.index());
    assert!(!idx.head.is_empty());
    assert!(!t.state().join("base").exists());
}

/// Saving the index is the end of a command's work, and its failure
/// reaches the user: a command that changed something fails naming the
/// index, a query says it and still answers (it used to vanish, saved from
/// a `Drop` whose error was dropped).
#[test]
fn a_failed_save_of_the_index_reaches_the_user() {
    let t = TestEnv::tracking("f", "one\n");
    // The index's place taken by a folder: no write can replace it (not
    // even root's).
    let idx = t.index();
    fs::remove_file(&idx).unwrap();
    fs::create_dir(&idx).unwrap();
    fs::write(idx.join("x"), "").unwrap();
    t.write("f", "two\n");
    let r = t.sgard(["status"]);
    r.ok()
        .stdout_has("~/f")
        .stderr_has("could not save this machine's index of the repository");
    let r = t.sgard(["tag", "add", "work"]);
    r.code(1)
        .stdout_has("Tag \"work\" added.")
        .stderr_has("sgard: error: saving this machine's index of the repository")
        .stderr_has(&idx.display().to_string());
}
