//! Black-box scenarios of local use (reference §5.2, 1–28, as adapted: the
//! bugs the reference marks are fixed here).

use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::common::*;

// ---------------------------------------------------------------------------
// Helpers (local to this file)

/// Runs sgard with the working folder `dir` and stdin closed.
fn run_in<I, S>(t: &TestEnv, dir: &Path, args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    t.command(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into()
}

/// The paths of the manifest's entries, in order.
pub(crate) fn entry_paths(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- path: "))
        .map(str::to_owned)
        .collect()
}

/// The lines of the entry whose path is `path`.
fn entry_block(manifest: &str, path: &str) -> Option<Vec<String>> {
    let mut lines = manifest.lines();
    let head = format!("- path: {path}");
    lines.by_ref().find(|l| l.trim_start() == head)?;
    let mut out = vec![head];
    for l in lines {
        let t = l.trim_start();
        if t.starts_with("- path: ") || !l.starts_with("      ") {
            break;
        }
        out.push(t.to_owned());
    }
    Some(out)
}

/// One field of one entry (the raw YAML value).
fn field(manifest: &str, path: &str, key: &str) -> Option<String> {
    let block = entry_block(manifest, path)
        .unwrap_or_else(|| panic!("no entry {path} in manifest:\n{manifest}"));
    let prefix = format!("{key}: ");
    block
        .iter()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
}

/// A top-level manifest field.
fn top_field(manifest: &str, key: &str) -> Option<String> {
    let prefix = format!("{key}: ");
    manifest
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
}

/// Every blob file in the store (the temp folder excluded).
fn blob_files(t: &TestEnv) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for p in names {
            if fs::symlink_metadata(&p).unwrap().is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let blobs = t.repo().join("blobs");
    let mut out = Vec::new();
    for e in fs::read_dir(&blobs).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap() == "tmp" {
            continue;
        }
        if p.is_dir() {
            walk(&p, &mut out);
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// 2000-01-01T00:00:00Z: older than any entry.
const OLD: i64 = 946_684_800;

/// Makes `~/rel` older than every entry (restore does not ask).
fn make_old(t: &TestEnv, rel: &str) {
    set_mtime(&t.path(rel), OLD);
}

/// Makes `~/rel` newer than every entry (restore asks).
fn make_newer(t: &TestEnv, rel: &str) {
    set_mtime(&t.path(rel), now_secs() + 3600);
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_owned()
}

fn ino(p: &Path) -> u64 {
    fs::symlink_metadata(p).unwrap().ino()
}

// ---------------------------------------------------------------------------
// 1–3: init and opening

#[test]
fn init_creates_manifest_blobs_and_gitignore() {
    let t = TestEnv::new();
    let r = t.sgard(["init"]);
    r.ok();
    assert_eq!(
        r.stdout,
        format!("Initialized sgard repository at {}\n", t.repo().display())
    );
    assert!(t.repo().join("manifest.yaml").is_file());
    assert!(t.repo().join("blobs").is_dir());
    assert_eq!(
        fs::read_to_string(t.repo().join(".gitignore")).unwrap(),
        "lock\nlock.turn\nsync-state\njwt.key\ntags\n.sgard-tmp-*\nblobs/tmp/\nchunks/tmp/\nchunks/journal/\n",
        "only machine-local files and unfinished writes are kept out of git; blobs and chunks are versioned"
    );
    // The repository's identity, which a clone shares.
    let id = fs::read_to_string(t.repo().join("repo-id")).unwrap();
    assert_eq!(id.trim().len(), 32, "{id:?}");
    assert_eq!(
        fs::read_to_string(t.repo().join(".gitignore")).unwrap(),
        sgard_garden::GITIGNORE
    );
    let m = t.manifest();
    assert_eq!(top_field(&m, "version").as_deref(), Some("1"));
    assert_eq!(top_field(&m, "created").as_deref(), Some(NOW));
    assert_eq!(top_field(&m, "files").as_deref(), Some("[]"));
}

#[test]
fn second_init_fails_already_exists() {
    let t = TestEnv::init();
    let before = t.manifest();
    let r = t.sgard(["init"]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("already exists");
    assert_eq!(t.manifest(), before);
}

#[test]
fn init_with_repo_creates_nested_folders() {
    let t = TestEnv::new();
    let repo = t.path("a/b/c");
    let r = t.sgard(["init", "--repo", &s(&repo)]);
    r.ok();
    assert_eq!(
        r.stdout,
        format!("Initialized sgard repository at {}\n", repo.display())
    );
    assert!(repo.join("manifest.yaml").is_file());
    assert!(repo.join("blobs").is_dir());
    assert!(repo.join(".gitignore").is_file());
    assert!(
        !t.repo().exists(),
        "the default repository must not be made"
    );
}

#[test]
fn status_without_repository_fails_and_creates_nothing() {
    let t = TestEnv::new();
    let nope = t.path("nope");
    let r = t.sgard(["status", "--repo", &s(&nope)]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("no sgard repository")
        .stderr_has("(no manifest.yaml); run `sgard init` first");
    assert!(!nope.exists(), "status must not create {}", nope.display());
    assert!(!t.repo().exists());
}

// ---------------------------------------------------------------------------
// 4–11: add

#[test]
fn add_file_records_entry_and_blob() {
    let t = TestEnv::init();
    t.write(".bashrc", "hi\n");
    t.chmod(".bashrc", 0o644);
    let r = t.sgard(["add", &s(&t.path(".bashrc"))]);
    r.ok();
    assert_eq!(r.stdout, "Added 1 path\n");
    let m = t.manifest();
    assert_eq!(entry_paths(&m), ["~/.bashrc"]);
    let h = sha("hi\n");
    assert_eq!(field(&m, "~/.bashrc", "type").as_deref(), Some("file"));
    assert_eq!(field(&m, "~/.bashrc", "mode").as_deref(), Some("\"0644\""));
    assert_eq!(field(&m, "~/.bashrc", "hash"), Some(h.clone()));
    assert_eq!(field(&m, "~/.bashrc", "updated").as_deref(), Some(NOW));
    let blob = t.blob_path(&h);
    assert_eq!(
        blob,
        t.repo()
            .join("blobs")
            .join(&h[0..2])
            .join(&h[2..4])
            .join(&h)
    );
    assert_eq!(fs::read(&blob).unwrap(), b"hi\n");
    assert_eq!(blob_files(&t), [blob]);
}

#[test]
fn add_again_keeps_one_entry() {
    let t = TestEnv::init();
    t.write(".bashrc", "hi\n");
    t.sgard(["add", &s(&t.path(".bashrc"))]).ok();
    let r = t.sgard(["add", &s(&t.path(".bashrc"))]);
    r.ok();
    assert_eq!(r.stdout, "Added 0 paths, 1 already up to date\n");
    let m = t.manifest();
    assert_eq!(entry_paths(&m), ["~/.bashrc"]);
}

#[test]
fn add_folder_recurses_lexically_without_folder_entries() {
    let t = TestEnv::init();
    t.write(".config/app/z", "z\n");
    t.write(".config/app/sub/b", "b\n");
    t.write(".config/app/a", "a\n");
    t.write(".config/app/sub/a", "sa\n");
    let r = t.sgard(["add", &s(&t.path(".config/app"))]);
    r.ok();
    assert_eq!(r.stdout, "Added 4 paths\n");
    let m = t.manifest();
    assert_eq!(
        entry_paths(&m),
        [
            "~/.config/app/a",
            "~/.config/app/sub/a",
            "~/.config/app/sub/b",
            "~/.config/app/z"
        ]
    );
    assert!(!m.contains("type: directory"), "{m}");
    assert_eq!(field(&m, "~/.config/app/sub/b", "hash"), Some(sha("b\n")));
}

#[test]
fn add_symlink_stores_raw_target_and_no_blob() {
    let t = TestEnv::init();
    symlink("../elsewhere/target", t.path(".hl")).unwrap();
    let r = t.sgard(["add", &s(&t.path(".hl"))]);
    r.ok();
    assert_eq!(r.stdout, "Added 1 path\n");
    let m = t.manifest();
    assert_eq!(field(&m, "~/.hl", "type").as_deref(), Some("link"));
    assert_eq!(
        field(&m, "~/.hl", "target").as_deref(),
        Some("../elsewhere/target")
    );
    assert_eq!(field(&m, "~/.hl", "hash"), None);
    assert!(blob_files(&t).is_empty(), "{:?}", blob_files(&t));
}

#[test]
fn add_outside_home_stores_absolute_path() {
    let t = TestEnv::init();
    let x = t.outside().join("x.conf");
    fs::write(&x, "x\n").unwrap();
    t.sgard(["add", &s(&x)]).ok();
    let m = t.manifest();
    assert_eq!(entry_paths(&m), [s(&x)]);
    assert!(!m.contains("path: ~"), "{m}");
}

#[test]
fn add_relative_path_resolves_against_working_folder() {
    let t = TestEnv::init();
    t.write(".config/app/a", "a\n");
    let r = run_in(&t, &t.path(".config"), ["add", "app/a"]);
    r.ok();
    assert_eq!(entry_paths(&t.manifest()), ["~/.config/app/a"]);
}

#[test]
fn literal_tilde_argument_means_home_in_every_command() {
    let t = TestEnv::init();
    t.write(".bashrc", "hi\n");
    // Work from a folder where "~/.bashrc" taken as a relative name would not
    // exist.
    let sub = t.path("sub");
    fs::create_dir(&sub).unwrap();

    let r = run_in(&t, &sub, ["add", "~/.bashrc"]);
    r.ok();
    assert_eq!(r.stdout, "Added 1 path\n");
    assert_eq!(entry_paths(&t.manifest()), ["~/.bashrc"]);
    assert!(!sub.join("~").exists());

    let r = run_in(&t, &sub, ["info", "~/.bashrc"]);
    r.ok().stdout_has("Path:       ~/.bashrc\n");

    let r = run_in(&t, &sub, ["diff", "~/.bashrc"]);
    r.ok();
    assert_eq!(r.stdout, "No changes.\n");

    fs::remove_file(t.path(".bashrc")).unwrap();
    let r = run_in(&t, &sub, ["restore", "--force", "~/.bashrc"]);
    r.ok();
    assert_eq!(t.read(".bashrc"), b"hi\n");
    assert!(!sub.join("~").exists());

    let r = run_in(&t, &sub, ["remove", "~/.bashrc"]);
    r.ok();
    assert_eq!(r.stdout, "Removed 1 path\n");
    assert!(entry_paths(&t.manifest()).is_empty());
}

#[test]
fn add_missing_path_fails_and_leaves_manifest_unchanged() {
    let mut t = TestEnv::init();
    t.write(".bashrc", "hi\n");
    t.sgard(["add", &s(&t.path(".bashrc"))]).ok();
    let before = fs::read(t.repo().join("manifest.yaml")).unwrap();
    let blobs_before = blob_files(&t);
    t.now = "2026-03-24T00:00:00Z".to_owned();
    t.write(".other", "other\n");
    let r = t.sgard(["add", &s(&t.path(".other")), &s(&t.path("does-not-exist"))]);
    r.code(1);
    r.stderr_has("does-not-exist");
    r.stderr_has("no such file or directory");
    assert_eq!(fs::read(t.repo().join("manifest.yaml")).unwrap(), before);
    assert_eq!(blob_files(&t), blobs_before, "no blob may be stored");
}

#[test]
fn equal_contents_share_one_blob() {
    let t = TestEnv::init();
    t.write("one", "same\n");
    t.write("two", "same\n");
    t.sgard(["add", &s(&t.path("one")), &s(&t.path("two"))])
        .ok();
    let m = t.manifest();
    let h = sha("same\n");
    assert_eq!(field(&m, "~/one", "hash"), Some(h.clone()));
    assert_eq!(field(&m, "~/two", "hash"), Some(h.clone()));
    assert_eq!(blob_files(&t), [t.blob_path(&h)]);
}

// ---------------------------------------------------------------------------
// 12: status

fn ok_mod_gone() -> TestEnv {
    let t = TestEnv::init();
    t.write("ok", "ok\n");
    t.write("mod", "mod\n");
    t.write("gone", "gone\n");
    // Added in lexical order, so manifest order (sorted by path) and
    // insertion order agree.
    t.sgard(["add", "gone", "mod", "ok"]).ok();
    t
}

#[test]
fn status_prints_padded_states() {
    let t = ok_mod_gone();
    t.write("mod", "changed\n");
    fs::remove_file(t.path("gone")).unwrap();
    let r = t.sgard(["status"]);
    r.ok();
    assert_eq!(
        r.stdout,
        "missing    ~/gone\nmodified   ~/mod  (content)\nok         ~/ok\n"
    );
}

#[test]
fn status_exit_code_reports_changes() {
    let t = ok_mod_gone();
    let r = t.sgard(["status", "--exit-code"]);
    r.ok();
    assert_eq!(
        r.stdout,
        "ok         ~/gone\nok         ~/mod\nok         ~/ok\n"
    );
    t.write("mod", "changed\n");
    t.sgard(["status", "--exit-code"]).code(1);
    // Without the flag a change is not an error.
    t.sgard(["status"]).ok();
    // Missing alone also counts.
    t.write("mod", "mod\n");
    t.sgard(["status", "--exit-code"]).ok();
    fs::remove_file(t.path("gone")).unwrap();
    t.sgard(["status", "--exit-code"]).code(1);
}

#[test]
fn status_shows_mode_change_as_modified() {
    let t = TestEnv::init();
    t.write("f", "x\n");
    t.chmod("f", 0o644);
    t.sgard(["add", "f"]).ok();
    t.chmod("f", 0o600);
    let r = t.sgard(["status"]);
    r.ok();
    assert_eq!(r.stdout, "modified   ~/f  (mode 0644 -> 0600)\n");
}

#[test]
fn status_shows_file_replaced_by_folder_as_typechange() {
    let t = TestEnv::init();
    t.write("f", "x\n");
    t.write("g", "g\n");
    t.sgard(["add", "f", "g"]).ok();
    fs::remove_file(t.path("f")).unwrap();
    t.write("f/inner", "inner\n");
    let r = t.sgard(["status"]);
    r.ok();
    assert_eq!(
        r.stdout,
        "typechange ~/f  (tracked as a file, now a folder)\nok         ~/g\n"
    );
}

// ---------------------------------------------------------------------------
// 13–15: checkpoint

#[test]
fn checkpoint_records_new_content_and_keeps_old_blob() {
    let mut t = TestEnv::tracking("f", "old\n");
    t.write("f", "new\n");
    t.now = "2026-03-24T09:00:00Z".to_owned();
    let r = t.sgard(["checkpoint", "-m", "m1"]);
    r.ok();
    assert_eq!(
        snapshot_ids_masked(&r.stdout),
        "added      ~/f\nupdated    ~/f\nCheckpoint complete: snapshot ID.\n"
    );
    let m = t.manifest();
    assert_eq!(field(&m, "~/f", "hash"), Some(sha("new\n")));
    assert_eq!(
        field(&m, "~/f", "updated").as_deref(),
        Some("2026-03-24T09:00:00Z")
    );
    assert_eq!(top_field(&m, "message").as_deref(), Some("m1"));
    assert_eq!(fs::read(t.blob_path(&sha("old\n"))).unwrap(), b"old\n");
    assert_eq!(fs::read(t.blob_path(&sha("new\n"))).unwrap(), b"new\n");
    let st = t.sgard(["status"]);
    st.ok();
    assert_eq!(st.stdout, "ok         ~/f\n");
}

#[test]
fn checkpoint_of_unchanged_files_keeps_entry_updated() {
    let mut t = TestEnv::init();
    t.write("a", "a\n");
    t.write("b", "b\n");
    t.sgard(["add", "a", "b"]).ok();
    t.now = "2026-03-25T08:30:00Z".to_owned();
    let r = t.sgard(["checkpoint"]);
    r.ok();
    // The first snapshot records what `add` added.
    assert_eq!(
        snapshot_ids_masked(&r.stdout),
        "added      ~/a\nadded      ~/b\nCheckpoint complete: snapshot ID.\n"
    );
    let m = t.manifest();
    assert_eq!(field(&m, "~/a", "updated").as_deref(), Some(NOW));
    assert_eq!(field(&m, "~/b", "updated").as_deref(), Some(NOW));
    assert_eq!(
        top_field(&m, "updated").as_deref(),
        Some("2026-03-25T08:30:00Z")
    );
    assert_eq!(top_field(&m, "created").as_deref(), Some(NOW));
    // A second checkpoint with nothing changed records nothing: the
    // manifest stays byte-identical (the newest snapshot already is it).
    t.now = "2026-03-26T08:30:00Z".to_owned();
    let r = t.sgard(["checkpoint"]);
    r.ok();
    assert_eq!(
        snapshot_ids_masked(&r.stdout),
        "Checkpoint complete: nothing changed since snapshot ID.\n"
    );
    assert_eq!(t.manifest(), m);
}

#[test]
fn checkpoint_of_deleted_file_keeps_entry() {
    let mut t = TestEnv::tracking("f", "f\n");
    let before = entry_block(&t.manifest(), "~/f").unwrap();
    fs::remove_file(t.path("f")).unwrap();
    t.now = "2026-03-24T00:00:00Z".to_owned();
    let r = t.sgard(["checkpoint"]);
    r.ok();
    assert_eq!(
        snapshot_ids_masked(&r.stdout),
        "added      ~/f\nmissing    ~/f (kept the stored version)\nCheckpoint complete: snapshot ID.\n"
    );
    assert_eq!(entry_block(&t.manifest(), "~/f").unwrap(), before);
    let st = t.sgard(["status"]);
    assert_eq!(st.stdout, "missing    ~/f\n");
}

#[test]
fn checkpoint_of_file_turned_folder_reports_typechange_and_goes_on() {
    let mut t = TestEnv::init();
    t.write("a", "a\n");
    t.write("b", "b\n");
    t.sgard(["add", "a", "b"]).ok();
    let before_a = entry_block(&t.manifest(), "~/a").unwrap();
    fs::remove_file(t.path("a")).unwrap();
    t.write("a/inner", "inner\n");
    t.write("b", "b2\n");
    t.now = "2026-03-24T00:00:00Z".to_owned();
    let r = t.sgard(["checkpoint"]);
    r.ok();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{r:#?}");
    // The first snapshot records what `add` added, then what changed.
    assert_eq!(lines[..2], ["added      ~/a", "added      ~/b"]);
    assert!(lines[2].starts_with("typechange ~/a ("), "{r:#?}");
    assert!(lines[2].ends_with("entry kept)"), "{r:#?}");
    assert_eq!(lines[3], "updated    ~/b");
    assert_eq!(
        snapshot_ids_masked(lines[4]),
        "Checkpoint complete: snapshot ID."
    );
    let m = t.manifest();
    assert_eq!(entry_block(&m, "~/a").unwrap(), before_a);
    assert_eq!(field(&m, "~/b", "hash"), Some(sha("b2\n")));
    assert_eq!(
        top_field(&m, "updated").as_deref(),
        Some("2026-03-24T00:00:00Z")
    );
}

// ---------------------------------------------------------------------------
// 16–23: restore

#[test]
fn restore_recreates_byte_identical() {
    let t = TestEnv::init();
    let content: Vec<u8> = (0..=255u8).chain(b"tail\n".iter().copied()).collect();
    t.write(".bashrc", &content);
    t.sgard(["add", ".bashrc"]).ok();
    fs::remove_file(t.path(".bashrc")).unwrap();
    let r = t.sgard(["restore"]);
    r.ok();
    assert_eq!(r.stdout, "created    ~/.bashrc\nRestore complete.\n");
    assert_eq!(t.read(".bashrc"), content);
}

#[test]
fn restore_keeps_mode_0600() {
    let t = TestEnv::init();
    t.write("s", "secret\n");
    t.chmod("s", 0o600);
    t.sgard(["add", "s"]).ok();
    assert_eq!(
        field(&t.manifest(), "~/s", "mode").as_deref(),
        Some("\"0600\"")
    );
    fs::remove_file(t.path("s")).unwrap();
    t.sgard(["restore", "-f"]).ok();
    assert_eq!(mode_of(&t.path("s")), 0o600);
    assert_eq!(t.read("s"), b"secret\n");
}

#[test]
fn restore_creates_parent_folders() {
    let t = TestEnv::tracking("a/b/c", "deep\n");
    fs::remove_dir_all(t.path("a")).unwrap();
    t.sgard(["restore", "-f"]).ok();
    assert!(t.path("a/b").is_dir());
    assert_eq!(t.read("a/b/c"), b"deep\n");
}

#[test]
fn restore_recreates_symlink_with_raw_target() {
    let t = TestEnv::init();
    symlink("relative/target", t.path(".hl")).unwrap();
    t.sgard(["add", ".hl"]).ok();
    fs::remove_file(t.path(".hl")).unwrap();
    let r = t.sgard(["restore", "-f"]);
    r.ok();
    assert_eq!(r.stdout, "created    ~/.hl\nRestore complete.\n");
    assert_eq!(
        fs::read_link(t.path(".hl")).unwrap(),
        PathBuf::from("relative/target")
    );
}

#[test]
fn restore_asks_about_a_local_change() {
    let t = TestEnv::tracking("f", "original\n");
    t.write("f", "changed\n");
    make_newer(&t, "f");
    let question = "~/f: changed here since the last sync (content). Overwrite it? [y,n,d,a,q,?]";

    let r = t.sgard_stdin(["restore"], "n\n");
    r.ok().stdout_has(question);
    r.stdout_has("kept       ~/f");
    assert_eq!(t.read("f"), b"changed\n");

    // Stdin closed: nothing is overwritten, and the command says so (exit 4).
    let r = t.sgard(["restore"]);
    r.code(4).stdout_has(question);
    r.stdout_has("refused    ~/f");
    r.stderr_has("1 entry differs here and was left as it is: ~/f");
    assert_eq!(t.read("f"), b"changed\n");

    let r = t.sgard_stdin(["restore"], "y\n");
    r.ok().stdout_has(question);
    r.stdout_has("restored   ~/f");
    assert_eq!(t.read("f"), b"original\n");
}

#[test]
fn restore_asks_about_a_local_change_even_when_the_disk_is_older() {
    // The Go sgard overwrites a file whose mtime is older than the entry's
    // `updated` without asking, losing an edit made with an old mtime (an
    // extracted archive, a copied file, a clock behind). Only the base
    // decides now: this is a local change, so it is asked about.
    let t = TestEnv::tracking("f", "original\n");
    t.write("f", "changed\n");
    make_old(&t, "f");
    let r = t.sgard(["restore"]);
    r.code(4)
        .stdout_has("~/f: changed here since the last sync (content). Overwrite it?");
    assert_eq!(t.read("f"), b"changed\n");
}

#[test]
fn restore_force_does_not_ask() {
    let t = TestEnv::tracking("f", "original\n");
    t.write("f", "changed\n");
    make_newer(&t, "f");
    let r = t.sgard(["restore", "--force"]);
    r.ok();
    assert!(!r.stdout.contains("Overwrite"), "{r:#?}");
    assert_eq!(t.read("f"), b"original\n");
}

#[test]
fn restore_reads_one_answer_per_line_from_piped_stdin() {
    let t = TestEnv::init();
    t.write("f1", "one\n");
    t.write("f2", "two\n");
    t.sgard(["add", "f1", "f2"]).ok();
    t.write("f1", "one changed\n");
    t.write("f2", "two changed\n");
    make_newer(&t, "f1");
    make_newer(&t, "f2");
    let r = t.sgard_stdin(["restore"], "y\nn\n");
    r.ok();
    r.stdout_has("~/f1: changed here since the last sync (content). Overwrite it? [y,n,d,a,q,?]");
    r.stdout_has("~/f2: changed here since the last sync (content). Overwrite it? [y,n,d,a,q,?]");
    r.stdout_has("restored   ~/f1");
    r.stdout_has("kept       ~/f2");
    assert_eq!(t.read("f1"), b"one\n");
    assert_eq!(t.read("f2"), b"two changed\n");

    // The other way round: a reader that swallowed the second line with the
    // first would see EOF (no) at the second question.
    t.write("f1", "one changed\n");
    make_newer(&t, "f1");
    make_newer(&t, "f2");
    let r = t.sgard_stdin(["restore"], "n\ny\n");
    r.ok();
    r.stdout_has("kept       ~/f1");
    r.stdout_has("restored   ~/f2");
    assert_eq!(t.read("f1"), b"one changed\n");
    assert_eq!(t.read("f2"), b"two\n");
}

#[test]
fn restore_leaves_matching_file_alone() {
    let t = TestEnv::init();
    t.write("f", "same\n");
    t.chmod("f", 0o644);
    t.sgard(["add", "f"]).ok();
    make_newer(&t, "f");
    let p = t.path("f");
    let ino_before = ino(&p);
    let mtime_before = fs::metadata(&p).unwrap().modified().unwrap();

    let r = t.sgard(["restore"]);
    r.ok();
    assert!(!r.stdout.contains("Overwrite"), "{r:#?}");
    assert_eq!(
        r.stdout,
        "Nothing to restore: every entry is up to date here.\n"
    );
    let r = t.sgard(["restore", "--force"]);
    r.ok();
    assert_eq!(
        r.stdout,
        "Nothing to restore: every entry is up to date here.\n"
    );

    assert_eq!(ino(&p), ino_before, "the file was rewritten");
    assert_eq!(fs::metadata(&p).unwrap().modified().unwrap(), mtime_before);
    assert_eq!(t.read("f"), b"same\n");
}

#[test]
fn restore_of_matching_file_corrects_only_its_mode() {
    let t = TestEnv::init();
    t.write("f", "same\n");
    t.chmod("f", 0o644);
    t.sgard(["add", "f"]).ok();
    t.chmod("f", 0o600);
    make_newer(&t, "f");
    let p = t.path("f");
    let ino_before = ino(&p);
    let mtime_before = fs::metadata(&p).unwrap().modified().unwrap();
    // A chmod here is a local change: asked about like any other.
    let r = t.sgard_stdin(["restore"], "y\n");
    r.ok();
    assert_eq!(
        r.stdout,
        "~/f: changed here since the last sync (mode 0644 -> 0600). Overwrite it? \
         [y,n,d,a,q,?] \nmode       ~/f\nRestore complete.\n"
    );
    assert_eq!(mode_of(&p), 0o644);
    assert_eq!(ino(&p), ino_before, "the file was rewritten");
    assert_eq!(fs::metadata(&p).unwrap().modified().unwrap(), mtime_before);
    assert_eq!(t.read("f"), b"same\n");
}

#[test]
fn restore_over_existing_file_gives_exactly_the_stored_mode() {
    let t = TestEnv::init();
    t.write("f", "secret\n");
    t.chmod("f", 0o600);
    t.sgard(["add", "f"]).ok();
    t.write("f", "other\n");
    t.chmod("f", 0o755);
    let r = t.sgard(["restore", "-f"]);
    r.ok();
    assert_eq!(r.stdout, "restored   ~/f\nRestore complete.\n");
    assert_eq!(t.read("f"), b"secret\n");
    assert_eq!(mode_of(&t.path("f")), 0o600);
}

#[test]
fn restore_replaces_a_symlink_at_the_destination() {
    let t = TestEnv::tracking("f", "stored\n");
    fs::remove_file(t.path("f")).unwrap();
    t.write("target", "target content\n");
    symlink(t.path("target"), t.path("f")).unwrap();
    t.sgard(["restore", "-f"]).ok();
    let md = fs::symlink_metadata(t.path("f")).unwrap();
    assert!(md.is_file(), "~/f is still a symlink");
    assert_eq!(t.read("f"), b"stored\n");
    assert_eq!(t.read("target"), b"target content\n");
}

#[test]
fn restore_dry_run_changes_nothing() {
    let t = TestEnv::init();
    t.write("a", "a\n");
    t.write("b", "b\n");
    t.write("c", "c\n");
    t.sgard(["add", "a", "b", "c"]).ok();
    fs::remove_file(t.path("a")).unwrap();
    t.write("b", "b changed\n");
    make_newer(&t, "b");
    t.write("c", "c changed\n");
    make_old(&t, "c");
    let manifest = t.manifest();

    let r = t.sgard_stdin(["restore", "--dry-run"], "y\ny\ny\n");
    r.ok();
    assert_eq!(
        r.stdout,
        "create     ~/a\nask        ~/b (changed here since the last sync (content))\n\
         ask        ~/c (changed here since the last sync (content))\n\
         Dry run: nothing was changed.\n"
    );
    let r = t.sgard(["restore", "-n", "--force"]);
    r.ok();
    assert_eq!(
        r.stdout,
        "create     ~/a\noverwrite  ~/b\noverwrite  ~/c\nDry run: nothing was changed.\n"
    );
    assert!(!t.path("a").exists());
    assert_eq!(t.read("b"), b"b changed\n");
    assert_eq!(t.read("c"), b"c changed\n");
    assert_eq!(t.manifest(), manifest);
}

#[test]
fn restore_selected_paths_only() {
    let t = TestEnv::init();
    t.write("f1", "1\n");
    t.write("f2", "2\n");
    t.sgard(["add", "f1", "f2"]).ok();
    fs::remove_file(t.path("f1")).unwrap();
    fs::remove_file(t.path("f2")).unwrap();
    let r = t.sgard(["restore", &s(&t.path("f1")), "-f"]);
    r.ok();
    assert_eq!(r.stdout, "created    ~/f1\nRestore complete.\n");
    assert_eq!(t.read("f1"), b"1\n");
    assert!(!t.path("f2").exists());
}

#[test]
fn restore_of_folder_restores_entries_under_it() {
    let t = TestEnv::init();
    t.write(".config/app/a", "a\n");
    t.write(".config/app/sub/b", "b\n");
    t.write(".config/application", "not under\n");
    t.write("other", "o\n");
    t.sgard(["add", ".config/app", ".config/application", "other"])
        .ok();
    fs::remove_dir_all(t.path(".config")).unwrap();
    fs::remove_file(t.path("other")).unwrap();
    let r = t.sgard(["restore", "-f", "~/.config/app"]);
    r.ok();
    assert_eq!(
        r.stdout,
        "created    ~/.config/app/a\ncreated    ~/.config/app/sub/b\nRestore complete.\n"
    );
    assert_eq!(t.read(".config/app/a"), b"a\n");
    assert_eq!(t.read(".config/app/sub/b"), b"b\n");
    assert!(!t.path(".config/application").exists());
    assert!(!t.path("other").exists());
}

#[test]
fn restore_of_untracked_path_fails() {
    let t = TestEnv::tracking("f", "f\n");
    let r = t.sgard(["restore", &s(&t.path("untracked"))]);
    assert_eq!(r.code, 1, "{r:#?}");
    r.stderr_has("sgard: error: not tracked: ~/untracked (`sgard list` shows what is");
}

#[test]
fn restore_failure_of_one_entry_does_not_stop_the_others() {
    let t = TestEnv::init();
    t.write("a", "a\n");
    t.write("b", "b\n");
    t.write("c", "c\n");
    t.sgard(["add", "a", "b", "c"]).ok();
    fs::remove_file(t.path("a")).unwrap();
    fs::remove_file(t.path("c")).unwrap();
    fs::remove_file(t.path("b")).unwrap();
    t.write("b/keep", "keep\n");
    let r = t.sgard(["restore", "-f"]);
    r.code(1);
    assert_eq!(
        r.stdout, "created    ~/a\nfailed     ~/b\ncreated    ~/c\n",
        "{r:#?}"
    );
    r.stderr_has("~/b");
    r.stderr_has("could not be restored");
    assert_eq!(t.read("a"), b"a\n");
    assert_eq!(t.read("c"), b"c\n");
    assert_eq!(t.read("b/keep"), b"keep\n");
}

// ---------------------------------------------------------------------------
// 24: remove and prune

#[test]
fn remove_untracks_entry() {
    let t = TestEnv::tracking(".bashrc", "hi\n");
    let r = t.sgard(["remove", &s(&t.path(".bashrc"))]);
    r.ok();
    assert_eq!(r.stdout, "Removed 1 path\n");
    let l = t.sgard(["list"]);
    l.ok();
    assert_eq!(l.stdout, "");
    assert!(entry_paths(&t.manifest()).is_empty());
    // The file on disk and the blob stay.
    assert_eq!(t.read(".bashrc"), b"hi\n");
    assert!(t.blob_path(&sha("hi\n")).is_file());
}

#[test]
fn remove_of_folder_untracks_entries_under_it() {
    let t = TestEnv::init();
    t.write(".config/app/a", "a\n");
    t.write(".config/app/sub/b", "b\n");
    t.write(".config/application", "x\n");
    t.sgard(["add", ".config/app", ".config/application"]).ok();
    let r = t.sgard(["remove", &s(&t.path(".config/app"))]);
    r.ok();
    assert_eq!(r.stdout, "Removed 2 paths\n");
    assert_eq!(entry_paths(&t.manifest()), ["~/.config/application"]);
}

#[test]
fn remove_of_untracked_path_fails() {
    let t = TestEnv::tracking("f", "f\n");
    let before = t.manifest();
    let r = t.sgard(["remove", &s(&t.path("f")), &s(&t.path("nope"))]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("not tracked: ~/nope");
    assert_eq!(t.manifest(), before);
}

#[test]
fn prune_deletes_orphaned_blobs() {
    let t = TestEnv::init();
    t.write(".bashrc", "hi\n");
    t.write("keep", "keep\n");
    t.sgard(["add", ".bashrc", "keep"]).ok();
    t.sgard(["remove", ".bashrc"]).ok();
    let r = t.sgard(["prune"]);
    r.ok();
    assert_eq!(r.stdout, "Pruned 1 orphaned blob, freed 3 bytes.\n");
    assert!(!t.blob_path(&sha("hi\n")).exists());
    assert!(t.blob_path(&sha("keep\n")).is_file());
    let r = t.sgard(["prune"]);
    r.ok();
    assert_eq!(r.stdout, "Pruned 0 orphaned blobs, freed 0 bytes.\n");
}

#[test]
fn prune_removes_stale_temp_files() {
    let t = TestEnv::tracking("f", "f\n");
    let tmp = t.repo().join("blobs").join("tmp");
    fs::create_dir_all(&tmp).unwrap();
    fs::write(tmp.join("blob-stale"), "half").unwrap();
    let r = t.sgard(["prune"]);
    r.ok();
    assert_eq!(
        r.stdout,
        "Pruned 0 orphaned blobs, freed 0 bytes.\nRemoved 1 stale temp file, freed 4 bytes.\n"
    );
    assert!(!tmp.join("blob-stale").exists());
    assert!(t.blob_path(&sha("f\n")).is_file());
}

// ---------------------------------------------------------------------------
// 25: verify

#[test]
fn verify_reports_ok() {
    let t = TestEnv::init();
    t.write("f", "f\n");
    symlink("/nowhere", t.path("l")).unwrap();
    t.sgard(["add", "f", "l"]).ok();
    let r = t.sgard(["verify"]);
    r.ok();
    assert_eq!(r.stdout, "ok         ~/f\n");
}

#[test]
fn verify_reports_corrupt_blob() {
    let t = TestEnv::init();
    t.write("f", "f\n");
    t.write("g", "g\n");
    t.sgard(["add", "f", "g"]).ok();
    let blob = t.blob_path(&sha("f\n"));
    fs::set_permissions(&blob, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    fs::write(&blob, "X\n").unwrap();
    let r = t.sgard(["verify"]);
    r.code(3);
    assert_eq!(r.stdout, "corrupt    ~/f\nok         ~/g\n");
    r.stderr_has("verification failed");
}

#[test]
fn verify_reports_missing_blob() {
    let t = TestEnv::tracking("f", "f\n");
    fs::remove_file(t.blob_path(&sha("f\n"))).unwrap();
    let r = t.sgard(["verify"]);
    r.code(3);
    assert_eq!(r.stdout, "missing    ~/f\n");
}

// ---------------------------------------------------------------------------
// 26: list

#[test]
fn list_prints_files_and_links() {
    let t = TestEnv::init();
    t.write("f", "f\n");
    symlink("/etc/hosts", t.path("l")).unwrap();
    t.sgard(["add", "f", "l"]).ok();
    let r = t.sgard(["list"]);
    r.ok();
    let h = sha("f\n");
    assert_eq!(
        r.stdout,
        format!("file   ~/f\t{}\nlink   ~/l\t-> /etc/hosts\n", &h[..8])
    );
}

// ---------------------------------------------------------------------------
// 27: diff

#[test]
fn diff_of_unchanged_file_says_no_changes() {
    let t = TestEnv::tracking("f", "original\n");
    let r = t.sgard(["diff", "f"]);
    r.ok();
    assert_eq!(r.stdout, "No changes.\n");
}

#[test]
fn diff_after_edit_is_unified() {
    let t = TestEnv::tracking("f", "original\n");
    t.write("f", "modified\n");
    let r = t.sgard(["diff", &s(&t.path("f"))]);
    r.ok();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "--- ~/f (stored)");
    assert_eq!(lines[1], "+++ ~/f (current)");
    assert!(lines[2].starts_with("@@ "), "{r:#?}");
    assert!(lines.contains(&"-original"), "{r:#?}");
    assert!(lines.contains(&"+modified"), "{r:#?}");
    assert_eq!(
        r.stdout,
        "--- ~/f (stored)\n+++ ~/f (current)\n@@ -1 +1 @@\n-original\n+modified\n"
    );
}

#[test]
fn diff_limits_context_around_changes() {
    let t = TestEnv::init();
    let orig: String = (1..=100).map(|i| format!("line{i}\n")).collect();
    t.write("f", &orig);
    t.sgard(["add", "f"]).ok();
    let changed = orig.replace("line50\n", "LINE FIFTY\n");
    t.write("f", &changed);
    let r = t.sgard(["diff", "f"]);
    r.ok();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(!lines.contains(&" line1"), "line 1 printed: {r:#?}");
    assert!(!lines.contains(&" line100"), "{r:#?}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("@@")).count(), 1);
    assert!(lines.contains(&"-line50"), "{r:#?}");
    assert!(lines.contains(&"+LINE FIFTY"), "{r:#?}");
    assert!(lines.contains(&" line47"), "{r:#?}");
    assert!(lines.contains(&" line53"), "{r:#?}");
    assert!(!lines.contains(&" line46"), "{r:#?}");
    assert!(!lines.contains(&" line54"), "{r:#?}");
    assert!(lines.len() < 15, "{r:#?}");
}

#[test]
fn diff_exit_code_reports_difference() {
    let t = TestEnv::tracking("f", "original\n");
    t.sgard(["diff", "--exit-code", "f"]).ok();
    t.write("f", "modified\n");
    t.sgard(["diff", "--exit-code", "f"])
        .code(1)
        .stdout_has("+modified");
    t.sgard(["diff", "f"]).ok();
}

#[test]
fn diff_of_binary_file_says_binary_files_differ() {
    let t = TestEnv::tracking("b", b"\x00\x01bin");
    t.write("b", b"\x00\x02bin");
    let r = t.sgard(["diff", "b"]);
    r.ok();
    assert_eq!(
        r.stdout,
        "Binary files ~/b (stored) and ~/b (current) differ\n"
    );
    t.sgard(["diff", "--exit-code", "b"]).code(1);
}

#[test]
fn diff_of_link_or_untracked_path_fails() {
    let t = TestEnv::init();
    symlink("/etc/hosts", t.path("l")).unwrap();
    t.sgard(["add", "l"]).ok();
    let r = t.sgard(["diff", "l"]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("~/l");
    let r = t.sgard(["diff", "untracked"]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("not tracked: ~/untracked");
}

// ---------------------------------------------------------------------------
// 28: info

#[test]
fn info_describes_entry_through_its_states() {
    let t = TestEnv::init();
    t.write("f", "f\n");
    t.chmod("f", 0o644);
    set_mtime(&t.path("f"), now_secs());
    t.sgard(["add", "f"]).ok();
    let h = sha("f\n");

    let r = t.sgard(["info", "f"]);
    r.ok();
    assert_eq!(
        r.stdout,
        format!(
            "Path:       ~/f\n\
             Type:       file\n\
             Status:     ok\n\
             Mode:       0644\n\
             Updated:    2026-03-23 12:00:00 UTC\n\
             Disk mtime: 2026-03-23 12:00:00 UTC\n\
             Hash:       {h}\n\
             Blob:       stored\n"
        )
    );

    t.write("f", "edited\n");
    let r = t.sgard(["info", "f"]);
    r.ok();
    r.stdout_has("Status:     modified\n");
    r.stdout_has(&format!("Hash:       {h}\n"));
    r.stdout_has(&format!("Disk hash:  {}\n", sha("edited\n")));
    r.stdout_has("Disk mtime: ");

    fs::remove_file(t.path("f")).unwrap();
    let r = t.sgard(["info", "f"]);
    r.ok();
    r.stdout_has("Status:     missing\n");
    assert!(!r.stdout.contains("Disk mtime:"), "{r:#?}");
    assert!(!r.stdout.contains("Disk hash:"), "{r:#?}");
    r.stdout_has("Blob:       stored\n");

    let r = t.sgard(["info", "untracked"]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("not tracked: ~/untracked");
}

// ---------------------------------------------------------------------------
// Completion and usage

#[test]
fn completion_bash_prints_a_script() {
    let t = TestEnv::new();
    let r = t.sgard(["completion", "bash"]);
    r.ok();
    assert!(r.stdout.contains("sgard"), "{r:#?}");
    assert!(r.stdout.contains("complete"), "{r:#?}");
    assert!(r.stdout.contains("checkpoint"), "{r:#?}");
}

#[test]
fn usage_errors_exit_2() {
    let t = TestEnv::init();
    for args in [
        &["add"][..],
        &["remove"],
        &["diff", "--json"],
        &["info"],
        &["restore", "--bogus"],
        &["status", "--nope"],
        &["checkpoint", "-m"],
        &["completion", "nosuchshell"],
        &["no-such-command"],
    ] {
        let r = t.sgard(args);
        assert_eq!(r.code, 2, "sgard {args:?}: {r:#?}");
        assert!(!r.stderr.is_empty(), "sgard {args:?}: {r:#?}");
    }
}

/// Replaces every 12-hex-digit snapshot id after "snapshot " with `ID`.
fn snapshot_ids_masked(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("snapshot ") {
        let (head, tail) = rest.split_at(i + "snapshot ".len());
        out.push_str(head);
        let id: String = tail.chars().take_while(char::is_ascii_hexdigit).collect();
        if id.len() == 12 {
            out.push_str("ID");
            rest = &tail[12..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}
