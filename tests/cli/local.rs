//! Local features: locks, folder entries, targeting, tags, identity,
//! exclusions (prefix and glob), mirror up/down, JSON output and man pages
//! (reference §2.4, §2.14–§2.17, §5.2 scenarios 29–39).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::common::*;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// The absolute path of `~/<rel>` as a string argument (as a shell would
/// expand `~/<rel>`).
fn a(t: &TestEnv, rel: &str) -> String {
    t.path(rel).to_str().unwrap().to_owned()
}

/// A status line as printed: the state padded to 10, a space, the path.
fn line(state: &str, path: &str) -> String {
    format!("{state:<10} {path}")
}

/// A status line with its detail column.
fn line_d(state: &str, path: &str, detail: &str) -> String {
    format!("{state:<10} {path}  ({detail})")
}

/// Panics unless stdout has exactly the line `l`.
#[track_caller]
fn has_line(r: &Run, l: &str) {
    assert!(
        r.stdout.lines().any(|x| x == l),
        "stdout lacks the line {l:?}; {r:#?}"
    );
}

/// Parses stdout as exactly one JSON document with `"schema": 1`.
#[track_caller]
fn json_doc(r: &Run) -> Value {
    let v: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}); {r:#?}"));
    assert_eq!(v["schema"], Value::from(1), "schema; {r:#?}");
    v
}

/// `list --json`, parsed.
fn list_json(t: &TestEnv) -> Value {
    json_doc(t.sgard(["list", "--json"]).ok())
}

/// The `list --json` entry of `path`, if tracked.
fn entry(t: &TestEnv, path: &str) -> Option<Value> {
    list_json(t)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == path)
        .cloned()
}

/// The `list --json` entry of `path`; panics if not tracked.
#[track_caller]
fn tracked(t: &TestEnv, path: &str) -> Value {
    entry(t, path).unwrap_or_else(|| panic!("{path} is not tracked; manifest:\n{}", t.manifest()))
}

/// The paths of every tracked entry, in list order.
fn tracked_paths(t: &TestEnv) -> Vec<String> {
    list_json(t)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_owned())
        .collect()
}

/// The stored hash of `path`.
#[track_caller]
fn hash_of(t: &TestEnv, path: &str) -> String {
    tracked(t, path)["hash"].as_str().unwrap().to_owned()
}

/// The state of `path` in `status --json`.
#[track_caller]
fn state_of(t: &TestEnv, path: &str) -> String {
    let v = json_doc(t.sgard(["status", "--json"]).ok());
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == path)
        .unwrap_or_else(|| panic!("{path} not in status; {v:#}"))["state"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Runs sgard with extra environment variables (stdin closed).
fn sgard_env(t: &TestEnv, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = t.command(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(Stdio::null()).output().unwrap().into()
}

/// This machine's Go OS name.
fn this_os() -> &'static str {
    if cfg!(target_os = "linux") {
        "linux"
    } else if cfg!(target_os = "macos") {
        "darwin"
    } else {
        std::env::consts::OS
    }
}

/// This machine's Go architecture name.
fn this_arch() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "amd64"
    } else if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        std::env::consts::ARCH
    }
}

fn ino(p: &Path) -> u64 {
    fs::symlink_metadata(p).unwrap().ino()
}

fn mtime(p: &Path) -> i64 {
    fs::symlink_metadata(p).unwrap().mtime()
}

/// `~/.config/app/a` and `~/.config/app/sub/b`, both tracked.
fn app_setup(t: &TestEnv) {
    t.write(".config/app/a", "a\n");
    t.write(".config/app/sub/b", "b\n");
    t.sgard(["add", &a(t, ".config/app")])
        .ok()
        .stdout_has("Added 2 paths");
}

// ---------------------------------------------------------------------------
// Scenario 29: locked entries
// ---------------------------------------------------------------------------

#[test]
fn s29_locked_entry_repository_wins() {
    let t = TestEnv::init();
    t.write("u", "original\n");
    t.sgard(["add", "--lock", &a(&t, "u")]).ok();
    let e = tracked(&t, "~/u");
    assert_eq!(e["locked"], true);
    assert_eq!(e["hash"], sha("original\n").as_str());
    assert_eq!(e["mode"], "0644");
    assert!(t.manifest().contains("locked: true"), "{}", t.manifest());

    // Overwrite (and chmod): drifted.
    t.write("u", "local edit\n");
    t.chmod("u", 0o600);
    let st = t.sgard(["status"]);
    st.ok();
    has_line(&st, &line_d("drifted", "~/u", "content, mode 0644 -> 0600"));

    // checkpoint keeps the stored hash and mode.
    t.sgard(["checkpoint"]).ok();
    let e = tracked(&t, "~/u");
    assert_eq!(
        e["hash"],
        sha("original\n").as_str(),
        "checkpoint took a locked file"
    );
    assert_eq!(e["mode"], "0644", "checkpoint took a locked file's mode");
    assert_eq!(e["locked"], true);
    assert_eq!(state_of(&t, "~/u"), "drifted");

    // A disk file newer than the entry would be asked about if unlocked; a
    // locked one is restored without a prompt, without -f.
    set_mtime(&t.path("u"), now_secs() + 3600);
    let r = t.sgard(["restore"]);
    r.ok().stdout_has("Restore complete.");
    assert!(!r.stdout.contains("Overwrite"), "prompted; {r:#?}");
    assert_eq!(t.read("u"), b"original\n");
    assert_eq!(mode_of(&t.path("u")), 0o644);
    assert_eq!(state_of(&t, "~/u"), "ok");

    // A second restore skips it (hash matches): same inode, same mtime.
    let marker = now_secs() + 7200;
    set_mtime(&t.path("u"), marker);
    let before = ino(&t.path("u"));
    let r = t.sgard(["restore"]);
    r.ok();
    assert!(!r.stdout.contains("Overwrite"), "prompted; {r:#?}");
    assert!(
        !r.stdout.contains("~/u"),
        "second restore touched ~/u; {r:#?}"
    );
    assert_eq!(ino(&t.path("u")), before, "file was rewritten");
    assert_eq!(mtime(&t.path("u")), marker, "file was rewritten");

    // `add` on a locked file refreshes its content and keeps the lock.
    t.write("u", "new content\n");
    t.sgard(["add", &a(&t, "u")]).ok();
    let e = tracked(&t, "~/u");
    assert_eq!(e["hash"], sha("new content\n").as_str());
    assert_eq!(e["locked"], true);
    assert!(t.blob_path(&sha("new content\n")).exists());
    assert_eq!(state_of(&t, "~/u"), "ok");
}

// ---------------------------------------------------------------------------
// Scenario 30: lock / unlock
// ---------------------------------------------------------------------------

#[test]
fn s30_lock_and_unlock() {
    let t = TestEnv::init();
    t.write("f", "f\n");
    t.sgard(["add", &a(&t, "f")]).ok();
    assert_eq!(tracked(&t, "~/f")["locked"], false);

    t.sgard(["lock", &a(&t, "f")])
        .ok()
        .stdout_has("Locked 1 path.");
    assert_eq!(tracked(&t, "~/f")["locked"], true);
    t.write("f", "edited\n");
    let st = t.sgard(["status"]);
    has_line(st.ok(), &line_d("drifted", "~/f", "content"));

    t.sgard(["unlock", &a(&t, "f")])
        .ok()
        .stdout_has("Unlocked 1 path.");
    assert_eq!(tracked(&t, "~/f")["locked"], false);
    assert!(!t.manifest().contains("locked:"), "{}", t.manifest());
    let st = t.sgard(["status"]);
    has_line(st.ok(), &line_d("modified", "~/f", "content"));

    // Untracked: refused, nothing saved (not even the tracked one).
    t.write("untracked", "x\n");
    let before = t.manifest();
    let r = t.sgard(["lock", &a(&t, "untracked")]);
    assert_ne!(r.code, 0, "{r:#?}");
    assert_eq!(t.manifest(), before);
    let r = t.sgard(["lock", &a(&t, "f"), &a(&t, "untracked")]);
    assert_ne!(r.code, 0, "{r:#?}");
    assert_eq!(t.manifest(), before);
    assert_eq!(tracked(&t, "~/f")["locked"], false);
    let r = t.sgard(["lock", &a(&t, "nothing-here")]);
    assert_ne!(r.code, 0, "{r:#?}");
    assert_eq!(t.manifest(), before);
}

// ---------------------------------------------------------------------------
// Scenario 31: folder entries
// ---------------------------------------------------------------------------

#[test]
fn s31_dir_entry_tracks_the_folder_not_its_contents() {
    let t = TestEnv::init();
    t.write("d/x", "x\n");
    t.write("d/y/z", "z\n");
    t.chmod("d", 0o700);
    t.sgard(["add", "--dir", &a(&t, "d")])
        .ok()
        .stdout_has("Added 1 path");
    let v = list_json(&t);
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{v:#}");
    let e = &entries[0];
    assert_eq!(e["path"], "~/d");
    assert_eq!(e["type"], "directory");
    assert_eq!(e["mode"], "0700");
    assert_eq!(e["hash"], Value::Null);
    assert!(t.manifest().contains("type: directory"), "{}", t.manifest());
    assert!(!t.manifest().contains("~/d/"), "{}", t.manifest());
    has_line(t.sgard(["list"]).ok(), "dir    ~/d");

    // rm -r, then restore -f: a folder with the stored mode.
    fs::remove_dir_all(t.path("d")).unwrap();
    t.sgard(["restore", "-f"]).ok();
    assert!(t.path("d").is_dir());
    assert_eq!(mode_of(&t.path("d")), 0o700);
    assert!(!t.path("d/x").exists(), "children are not tracked");

    // rmdir, then restore -f.
    fs::remove_dir(t.path("d")).unwrap();
    t.sgard(["restore", "-f"]).ok();
    assert!(t.path("d").is_dir());
    assert_eq!(mode_of(&t.path("d")), 0o700);

    // An existing folder with another mode gets its mode fixed (a chmod
    // here is a local change: asked about first).
    t.chmod("d", 0o755);
    let r = t.sgard_stdin(["restore"], "y\n");
    r.ok()
        .stdout_has("~/d: changed here since the last sync (mode 0700 -> 0755). Overwrite it?");
    r.stdout_has("mode       ~/d");
    assert_eq!(mode_of(&t.path("d")), 0o700);
    assert!(t.path("d").is_dir());
}

// ---------------------------------------------------------------------------
// Scenarios 32–36: targeting, tags, identity, target
// ---------------------------------------------------------------------------

#[test]
fn s32_only_other_os_is_skipped_everywhere() {
    let t = TestEnv::init();
    t.write("t", "orig\n");
    t.sgard(["add", "--only", "os:fakeos", &a(&t, "t")]).ok();
    let e = tracked(&t, "~/t");
    assert_eq!(e["only"], json!(["os:fakeos"]));
    let st = t.sgard(["status"]);
    has_line(st.ok(), &line("skipped", "~/t"));

    t.write("t", "edited\n");
    t.sgard(["checkpoint"]).ok();
    assert_eq!(hash_of(&t, "~/t"), sha("orig\n"));
    assert!(!t.blob_path(&sha("edited\n")).exists());

    fs::remove_file(t.path("t")).unwrap();
    t.sgard(["restore", "-f"]).ok();
    assert!(
        !t.path("t").exists(),
        "restore recreated a targeted-away entry"
    );
    let st = t.sgard(["status"]);
    has_line(st.ok(), &line("skipped", "~/t"));
}

#[test]
fn s33_only_is_case_insensitive_never_excludes_and_both_are_refused() {
    let t = TestEnv::init();
    if cfg!(target_os = "linux") {
        t.write("t2", "x\n");
        t.sgard(["add", "--only", "OS:LINUX", &a(&t, "t2")]).ok();
        let st = t.sgard(["status"]);
        has_line(st.ok(), &line("ok", "~/t2"));
    }
    t.write("t3", "x\n");
    let never = format!("arch:{}", this_arch());
    t.sgard(["add", "--never", &never, &a(&t, "t3")]).ok();
    assert_eq!(tracked(&t, "~/t3")["never"], json!([never]));
    let st = t.sgard(["status"]);
    has_line(st.ok(), &line("skipped", "~/t3"));

    t.write("x", "x\n");
    let before = t.manifest();
    t.sgard(["add", "--only", "a", "--never", "b", &a(&t, "x")])
        .code(2);
    assert_eq!(t.manifest(), before);
    assert!(entry(&t, "~/x").is_none());
}

#[test]
fn s34_tags() {
    let t = TestEnv::init();
    t.sgard(["tag", "add", "work"])
        .ok()
        .stdout_has("Tag \"work\" added.");
    // Machine-local: in this machine's state, not in the shared repository.
    assert_eq!(
        fs::read_to_string(t.state().join("tags")).unwrap(),
        "work\n"
    );
    assert!(!t.repo().join("tags").exists());
    let id = t.sgard(["identity"]);
    has_line(id.ok(), "tag:work");
    t.sgard(["tag", "list"]).ok().stdout_has("work");

    t.write("w", "w\n");
    t.sgard(["add", "--only", "tag:work", &a(&t, "w")]).ok();
    has_line(t.sgard(["status"]).ok(), &line("ok", "~/w"));

    t.sgard(["tag", "remove", "work"])
        .ok()
        .stdout_has("Tag \"work\" removed.");
    has_line(t.sgard(["status"]).ok(), &line("skipped", "~/w"));
    let id = t.sgard(["identity"]);
    assert!(!id.ok().stdout.contains("tag:work"), "{id:#?}");
    let r = t.sgard(["tag", "list"]);
    r.ok();
    assert_eq!(r.stdout.trim(), "No tags set.");

    // Adding twice keeps one line; removing an unset tag changes nothing.
    t.sgard(["tag", "add", "work"]).ok();
    t.sgard(["tag", "add", " work "]).ok();
    assert_eq!(
        fs::read_to_string(t.state().join("tags")).unwrap(),
        "work\n"
    );
    t.sgard(["tag", "remove", "other"]).ok();
    assert_eq!(
        fs::read_to_string(t.state().join("tags")).unwrap(),
        "work\n"
    );
}

#[test]
fn tags_of_an_older_repository_are_taken_over_once() {
    // `<repo>/tags` as older versions (and the Go sgard) wrote it.
    let t = TestEnv::init();
    fs::write(t.repo().join("tags"), "work\nhome\n").unwrap();
    let r = t.sgard(["tag", "list"]);
    r.ok().stdout_has("work");
    r.stderr_has("tags are machine-local now: took work, home from");
    assert_eq!(
        fs::read_to_string(t.state().join("tags")).unwrap(),
        "work\nhome\n"
    );
    // Once: the note is not repeated, the old file is left alone, and a
    // change here does not reach it.
    t.sgard(["tag", "remove", "home"]).ok();
    let r = t.sgard(["identity"]);
    assert!(!r.ok().stderr.contains("machine-local now"), "{r:#?}");
    has_line(&r, "tag:work");
    assert!(!r.stdout.contains("tag:home"), "{r:#?}");
    assert_eq!(
        fs::read_to_string(t.repo().join("tags")).unwrap(),
        "work\nhome\n"
    );
}

#[test]
fn s35_identity_lines() {
    let t = TestEnv::init();
    let r = t.sgard(["identity"]);
    r.ok();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{r:#?}");
    assert_eq!(lines[0], "testhost");
    if cfg!(target_os = "linux") {
        assert_eq!(lines[1], "os:linux");
    }
    assert_eq!(lines[1], format!("os:{}", this_os()));
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        assert!(
            lines[2] == "arch:amd64" || lines[2] == "arch:arm64",
            "{r:#?}"
        );
    }
    assert_eq!(lines[2], format!("arch:{}", this_arch()));
}

#[test]
fn s35_identity_short_lowercase_hostname() {
    let t = TestEnv::init();
    let host = [("SGARD_HOSTNAME", "Laptop.Example.COM")];
    let r = sgard_env(&t, &["identity"], &host);
    r.ok();
    assert_eq!(r.stdout.lines().next(), Some("laptop"), "{r:#?}");
    assert!(!r.stdout.contains('.'), "{r:#?}");

    t.write("h", "h\n");
    sgard_env(&t, &["add", "--only", "LAPTOP", &a(&t, "h")], &host).ok();
    let st = sgard_env(&t, &["status"], &host);
    has_line(st.ok(), &line("ok", "~/h"));
    // The default test host name does not match.
    has_line(t.sgard(["status"]).ok(), &line("skipped", "~/h"));
}

#[test]
fn s36_target_sets_and_clears() {
    let t = TestEnv::init();
    t.write("f", "f\n");
    t.sgard(["add", &a(&t, "f")]).ok();
    t.sgard(["target", &a(&t, "f"), "--only", "os:fakeos"])
        .ok()
        .stdout_has("Updated targeting for ~/f: only on os:fakeos.");
    assert_eq!(tracked(&t, "~/f")["only"], json!(["os:fakeos"]));
    assert!(t.manifest().contains("only:"), "{}", t.manifest());
    has_line(t.sgard(["status"]).ok(), &line("skipped", "~/f"));

    t.sgard(["target", &a(&t, "f"), "--clear"])
        .ok()
        .stdout_has("Updated targeting for ~/f: everywhere.");
    has_line(t.sgard(["status"]).ok(), &line("ok", "~/f"));
    assert!(!t.manifest().contains("only:"), "{}", t.manifest());
    let e = tracked(&t, "~/f");
    assert_eq!(e["only"], json!([]));
    assert_eq!(e["never"], json!([]));

    // --never replaces --only.
    t.sgard(["target", &a(&t, "f"), "--only", "os:fakeos"]).ok();
    t.sgard(["target", &a(&t, "f"), "--never", "os:fakeos"])
        .ok();
    let e = tracked(&t, "~/f");
    assert_eq!(e["only"], json!([]));
    assert_eq!(e["never"], json!(["os:fakeos"]));
    has_line(t.sgard(["status"]).ok(), &line("ok", "~/f"));

    // No flag: a usage error, nothing changed.
    let before = t.manifest();
    t.sgard(["target", &a(&t, "f")]).code(2);
    assert_eq!(t.manifest(), before);
    // Untracked: refused.
    let r = t.sgard(["target", &a(&t, "nope"), "--clear"]);
    assert_ne!(r.code, 0, "{r:#?}");
    assert_eq!(t.manifest(), before);
}

// ---------------------------------------------------------------------------
// Locks combined with targeting
// ---------------------------------------------------------------------------

#[test]
fn locked_entry_targeted_away_is_never_restored() {
    let t = TestEnv::init();
    t.write("lt", "stored\n");
    t.sgard(["add", "--lock", "--only", "os:fakeos", &a(&t, "lt")])
        .ok();
    let e = tracked(&t, "~/lt");
    assert_eq!(e["locked"], true);
    assert_eq!(e["only"], json!(["os:fakeos"]));

    t.write("lt", "local\n");
    set_mtime(&t.path("lt"), now_secs() - 3600);
    has_line(t.sgard(["status"]).ok(), &line("skipped", "~/lt"));
    t.sgard(["restore"]).ok();
    assert_eq!(t.read("lt"), b"local\n");
    t.sgard(["restore", "-f"]).ok();
    assert_eq!(t.read("lt"), b"local\n");
    t.sgard(["checkpoint"]).ok();
    assert_eq!(hash_of(&t, "~/lt"), sha("stored\n"));
}

#[test]
fn locked_entry_that_applies_is_restored_without_prompt() {
    let t = TestEnv::init();
    t.write("la", "stored\n");
    let only = format!("os:{}", this_os());
    t.sgard(["add", "--lock", "--only", &only, &a(&t, "la")])
        .ok();
    t.write("la", "local\n");
    set_mtime(&t.path("la"), now_secs() + 3600);
    has_line(
        t.sgard(["status"]).ok(),
        &line_d("drifted", "~/la", "content"),
    );
    let r = t.sgard(["restore"]);
    r.ok();
    assert!(!r.stdout.contains("Overwrite"), "{r:#?}");
    assert_eq!(t.read("la"), b"stored\n");
    has_line(t.sgard(["status"]).ok(), &line("ok", "~/la"));
}

// ---------------------------------------------------------------------------
// Scenario 37: exclusions (prefix and glob)
// ---------------------------------------------------------------------------

#[test]
fn s37_exclude_and_include() {
    let t = TestEnv::init();
    app_setup(&t);
    let r = t.sgard(["exclude", &a(&t, ".config/app/sub")]);
    r.ok()
        .stdout_has("Excluded ~/.config/app/sub.")
        .stdout_has("Stopped tracking 1 excluded entry:\n  ~/.config/app/sub/b\n");
    assert!(entry(&t, "~/.config/app/sub/b").is_none());
    assert!(entry(&t, "~/.config/app/a").is_some());
    assert!(
        t.manifest().contains("~/.config/app/sub"),
        "{}",
        t.manifest()
    );
    let l = t.sgard(["exclude", "--list"]);
    l.ok();
    assert_eq!(l.stdout, "~/.config/app/sub\n");

    // Re-adding the folder skips the excluded subtree, not look-alikes.
    t.write(".config/app/sub/c", "c\n");
    t.write(".config/app/sub/deep/d", "d\n");
    t.write(".config/app/sub-backup/x", "x\n");
    t.sgard(["add", &a(&t, ".config/app")]).ok();
    let paths = tracked_paths(&t);
    assert!(
        !paths.iter().any(|p| p.starts_with("~/.config/app/sub/")),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"~/.config/app/sub-backup/x".to_owned()),
        "{paths:?}"
    );
    assert!(paths.contains(&"~/.config/app/a".to_owned()), "{paths:?}");

    // An explicit add of an excluded path is refused, naming the rule.
    let before = t.manifest();
    let r = t.sgard(["add", &a(&t, ".config/app/sub/b")]);
    r.code(1).stderr_has("~/.config/app/sub");
    assert!(r.stderr.contains("exclu"), "{r:#?}");
    assert_eq!(t.manifest(), before);

    // include lifts the rule; the list is empty.
    t.sgard(["include", &a(&t, ".config/app/sub")])
        .ok()
        .stdout_has("Removed ~/.config/app/sub from the exclusion list");
    let l = t.sgard(["exclude", "--list"]);
    l.ok();
    assert_eq!(l.stdout, "");
    assert!(!t.manifest().contains("exclude:"), "{}", t.manifest());
    // Dropped entries do not come back by themselves, but can be added.
    assert!(entry(&t, "~/.config/app/sub/b").is_none());
    t.sgard(["add", &a(&t, ".config/app/sub/b")]).ok();
    assert!(entry(&t, "~/.config/app/sub/b").is_some());
}

#[test]
fn s37_exclude_glob() {
    let t = TestEnv::init();
    t.write(".config/y/cache/k", "k\n");
    t.write(".config/y/keep", "keep\n");
    t.sgard(["add", &a(&t, ".config/y")]).ok();
    assert!(entry(&t, "~/.config/y/cache/k").is_some());

    let r = t.sgard(["exclude", "~/.config/*/cache"]);
    r.ok()
        .stdout_has("Excluded ~/.config/*/cache.")
        .stdout_has("Stopped tracking 1 excluded entry:\n  ~/.config/y/cache/k\n");
    assert!(entry(&t, "~/.config/y/cache/k").is_none());
    assert!(entry(&t, "~/.config/y/keep").is_some());
    let l = t.sgard(["exclude", "--list"]);
    l.ok();
    assert_eq!(l.stdout, "~/.config/*/cache\n");

    t.write(".config/x/cache/k", "k\n");
    t.write(".config/x/cache/deeper/k2", "k2\n");
    t.write(".config/x/cachex", "cx\n");
    t.write(".config/x/sub/cache/z", "z\n");
    t.write(".config/x/keep", "keep\n");
    t.sgard(["add", &a(&t, ".config/x")]).ok();
    let paths = tracked_paths(&t);
    assert!(
        !paths.iter().any(|p| p.starts_with("~/.config/x/cache/")),
        "{paths:?}"
    );
    for p in [
        "~/.config/x/cachex",
        "~/.config/x/sub/cache/z",
        "~/.config/x/keep",
    ] {
        assert!(paths.contains(&p.to_owned()), "{p} missing from {paths:?}");
    }
    let r = t.sgard(["add", &a(&t, ".config/x/cache/k")]);
    r.code(1).stderr_has("~/.config/*/cache");

    t.sgard(["include", "~/.config/*/cache"])
        .ok()
        .stdout_has("Removed ~/.config/*/cache from the exclusion list");
    assert_eq!(t.sgard(["exclude", "--list"]).ok().stdout, "");

    // No paths and no --list: a usage error. Including an unknown rule fails
    // and changes nothing.
    t.sgard(["exclude"]).code(2);
    let before = t.manifest();
    let r = t.sgard(["include", &a(&t, ".config/never-excluded")]);
    assert_ne!(r.code, 0, "{r:#?}");
    assert_eq!(t.manifest(), before);
}

// ---------------------------------------------------------------------------
// Scenario 38: mirror up
// ---------------------------------------------------------------------------

#[test]
fn s38_mirror_up_adds_drops_and_rehashes() {
    let t = TestEnv::init();
    app_setup(&t);
    t.write("other", "o\n");
    t.sgard(["add", &a(&t, "other")]).ok();
    fs::remove_file(t.path("other")).unwrap();
    t.sgard(["exclude", &a(&t, ".config/app/skipme")]).ok();

    t.write(".config/app/n", "n\n");
    std::os::unix::fs::symlink("/etc/hosts", t.path(".config/app/ln")).unwrap();
    t.write(".config/app/skipme", "s\n");
    fs::remove_file(t.path(".config/app/a")).unwrap();
    t.write(".config/app/sub/b", "b2\n");
    let r = t.sgard(["mirror", "up", &a(&t, ".config/app")]);
    r.ok();
    has_line(&r, &line("added", "~/.config/app/n"));
    has_line(&r, &line("added", "~/.config/app/ln"));
    has_line(&r, &line("removed", "~/.config/app/a"));
    has_line(&r, &line("updated", "~/.config/app/sub/b"));
    r.stdout_has("Mirror up complete: 2 added, 1 removed, 1 updated.");
    let ln = tracked(&t, "~/.config/app/ln");
    assert_eq!(ln["type"], "link");
    assert_eq!(ln["target"], "/etc/hosts");

    assert_eq!(hash_of(&t, "~/.config/app/n"), sha("n\n"));
    assert!(t.blob_path(&sha("n\n")).exists());
    assert!(entry(&t, "~/.config/app/a").is_none());
    assert_eq!(hash_of(&t, "~/.config/app/sub/b"), sha("b2\n"));
    assert!(t.blob_path(&sha("b2\n")).exists());
    assert!(entry(&t, "~/.config/app/skipme").is_none());
    // Outside the folder: untouched even though missing.
    assert!(entry(&t, "~/other").is_some());
    let st = t.sgard(["status"]);
    has_line(st.ok(), &line("ok", "~/.config/app/n"));
    has_line(&st, &line("ok", "~/.config/app/sub/b"));
}

#[test]
fn s38_mirror_up_keeps_locked_and_targeted_entries() {
    let t = TestEnv::init();
    app_setup(&t);
    t.write(".config/app/l", "l\n");
    t.sgard(["add", "--lock", &a(&t, ".config/app/l")]).ok();
    t.write(".config/app/gone-locked", "g\n");
    t.sgard(["add", "--lock", &a(&t, ".config/app/gone-locked")])
        .ok();
    t.write(".config/app/t", "t\n");
    t.sgard(["add", "--only", "os:fakeos", &a(&t, ".config/app/t")])
        .ok();
    t.write(".config/app/t2", "t2\n");
    t.sgard(["add", "--only", "os:fakeos", &a(&t, ".config/app/t2")])
        .ok();

    t.write(".config/app/l", "l changed\n");
    fs::remove_file(t.path(".config/app/gone-locked")).unwrap();
    fs::remove_file(t.path(".config/app/t")).unwrap();
    t.write(".config/app/t2", "t2 changed\n");
    let r = t.sgard(["mirror", "up", &a(&t, ".config/app")]);
    r.ok();

    let l = tracked(&t, "~/.config/app/l");
    assert_eq!(l["hash"], sha("l\n").as_str(), "locked entry refreshed");
    assert_eq!(l["locked"], true);
    assert!(!t.blob_path(&sha("l changed\n")).exists());
    assert!(
        !r.stdout.contains(&line("updated", "~/.config/app/l")),
        "{r:#?}"
    );
    has_line(&r, "kept       ~/.config/app/l (locked)");
    assert!(
        entry(&t, "~/.config/app/gone-locked").is_some(),
        "locked entry dropped"
    );

    let e = tracked(&t, "~/.config/app/t");
    assert_eq!(e["only"], json!(["os:fakeos"]));
    assert!(
        !r.stdout.contains(&line("removed", "~/.config/app/t")),
        "{r:#?}"
    );
    assert_eq!(hash_of(&t, "~/.config/app/t2"), sha("t2\n"));
    r.stdout_has("Mirror up complete: 0 added, 0 removed, 0 updated.");
}

// ---------------------------------------------------------------------------
// Scenario 39: mirror down
// ---------------------------------------------------------------------------

#[test]
fn s39_mirror_down_force_deletes_untracked_and_restores() {
    let t = TestEnv::init();
    app_setup(&t);
    t.write(".config/app/newdir/extra", "junk\n");
    t.write(".config/app/newdir/deeper/more", "junk\n");
    t.write(".config/app/a", "changed\n");
    set_mtime(&t.path(".config/app/a"), now_secs() + 3600);
    fs::remove_file(t.path(".config/app/sub/b")).unwrap();

    let r = t.sgard(["mirror", "down", &a(&t, ".config/app"), "-f"]);
    r.ok().stdout_has("Mirror down complete.");
    assert!(!r.stdout.contains("[y/N]"), "{r:#?}");
    has_line(&r, &line("deleted", "~/.config/app/newdir/extra"));
    has_line(&r, &line("deleted", "~/.config/app/newdir/deeper/more"));
    assert!(!t.path(".config/app/newdir/extra").exists());
    assert!(
        !t.path(".config/app/newdir").exists(),
        "emptied folder kept"
    );
    assert_eq!(t.read(".config/app/a"), b"a\n");
    assert_eq!(t.read(".config/app/sub/b"), b"b\n");
    assert!(t.path(".config/app").is_dir());
    // The manifest is not changed by mirror down.
    assert_eq!(
        tracked_paths(&t),
        ["~/.config/app/a", "~/.config/app/sub/b"]
    );
}

#[test]
fn s39_mirror_down_deletes_untracked_links_not_their_targets() {
    let t = TestEnv::init();
    app_setup(&t);
    let target = t.outside().join("precious");
    fs::write(&target, "keep me\n").unwrap();
    std::os::unix::fs::symlink(&target, t.path(".config/app/link")).unwrap();
    let r = t.sgard(["mirror", "down", &a(&t, ".config/app"), "-f"]);
    r.ok();
    has_line(&r, &line("deleted", "~/.config/app/link"));
    assert!(fs::symlink_metadata(t.path(".config/app/link")).is_err());
    assert_eq!(fs::read(&target).unwrap(), b"keep me\n");
}

#[test]
fn s39_mirror_down_leaves_targeted_away_entries_alone() {
    let t = TestEnv::init();
    app_setup(&t);
    t.write(".config/app/t", "stored\n");
    t.sgard(["add", "--only", "os:fakeos", &a(&t, ".config/app/t")])
        .ok();
    t.write(".config/app/t2", "stored\n");
    t.sgard(["add", "--only", "os:fakeos", &a(&t, ".config/app/t2")])
        .ok();
    t.write(".config/app/t", "local\n");
    fs::remove_file(t.path(".config/app/t2")).unwrap();
    let r = t.sgard(["mirror", "down", &a(&t, ".config/app"), "-f"]);
    r.ok();
    assert_eq!(t.read(".config/app/t"), b"local\n", "{r:#?}");
    assert!(!t.path(".config/app/t2").exists(), "{r:#?}");
}

#[test]
fn s39_mirror_down_asks_before_deleting() {
    let t = TestEnv::init();
    app_setup(&t);
    t.write(".config/app/newdir/extra", "junk\n");
    let dir = a(&t, ".config/app");

    let r = t.sgard_stdin(["mirror", "down", dir.as_str()], "n\nn\nn\n");
    r.ok()
        .stdout_has("Delete untracked file ~/.config/app/newdir/extra? [y/N]");
    assert_eq!(t.read(".config/app/newdir/extra"), b"junk\n");

    // Closed stdin answers no too.
    t.sgard(["mirror", "down", dir.as_str()]).ok();
    assert!(t.path(".config/app/newdir/extra").exists());

    // "y" deletes it.
    let r = t.sgard_stdin(["mirror", "down", dir.as_str()], "y\n");
    r.ok();
    assert!(!t.path(".config/app/newdir/extra").exists(), "{r:#?}");
    assert!(!t.path(".config/app/newdir").exists(), "{r:#?}");
    assert_eq!(t.read(".config/app/a"), b"a\n");
}

#[test]
fn s39_mirror_down_never_deletes_excluded_paths() {
    let t = TestEnv::init();
    app_setup(&t);
    t.write(".config/app/secret", "s\n");
    t.write(".config/app/cache/blob", "c\n");
    t.write(".config/app/x/cache/k", "k\n");
    t.sgard([
        "exclude",
        &a(&t, ".config/app/secret"),
        &a(&t, ".config/app/cache"),
    ])
    .ok();
    t.sgard(["exclude", "~/.config/app/*/cache"]).ok();
    t.write(".config/app/junk", "j\n");

    let r = t.sgard(["mirror", "down", &a(&t, ".config/app"), "-f"]);
    r.ok();
    assert_eq!(t.read(".config/app/secret"), b"s\n");
    assert_eq!(t.read(".config/app/cache/blob"), b"c\n");
    assert_eq!(t.read(".config/app/x/cache/k"), b"k\n");
    assert!(!t.path(".config/app/junk").exists(), "{r:#?}");
}

#[test]
fn s39_mirror_down_keeps_tracked_dir_entries() {
    let t = TestEnv::init();
    app_setup(&t);
    t.write(".config/app/keep/junk", "j\n");
    t.sgard(["add", "--dir", &a(&t, ".config/app/keep")]).ok();
    assert_eq!(tracked(&t, "~/.config/app/keep")["type"], "directory");

    let r = t.sgard(["mirror", "down", &a(&t, ".config/app"), "-f"]);
    r.ok();
    assert!(!t.path(".config/app/keep/junk").exists(), "{r:#?}");
    assert!(
        t.path(".config/app/keep").is_dir(),
        "tracked folder removed; {r:#?}"
    );
    assert!(
        !r.stdout.contains("rmdir      ~/.config/app/keep/\n"),
        "{r:#?}"
    );
}

#[test]
fn s39_mirror_down_dry_run_changes_nothing() {
    let t = TestEnv::init();
    app_setup(&t);
    t.write(".config/app/newdir/extra", "junk\n");
    t.write(".config/app/a", "changed\n");
    fs::remove_file(t.path(".config/app/sub/b")).unwrap();
    let dir = a(&t, ".config/app");

    let r = t.sgard(["mirror", "down", dir.as_str(), "-n", "-f"]);
    r.ok().stdout_has("Dry run: nothing was changed.");
    has_line(&r, &line("delete", "~/.config/app/newdir/extra"));
    assert!(t.path(".config/app/newdir/extra").exists());
    assert_eq!(t.read(".config/app/a"), b"changed\n");
    assert!(!t.path(".config/app/sub/b").exists());

    let r = t.sgard_stdin(["mirror", "down", dir.as_str(), "--dry-run"], "y\ny\ny\n");
    r.ok().stdout_has("Dry run: nothing was changed.");
    assert!(!r.stdout.contains("[y/N]"), "dry run asked; {r:#?}");
    assert!(t.path(".config/app/newdir/extra").exists());
    assert_eq!(t.read(".config/app/a"), b"changed\n");
    assert!(!t.path(".config/app/sub/b").exists());
}

#[test]
fn s39_mirror_down_never_touches_the_repository() {
    let t = TestEnv::new();
    let repo = a(&t, ".config/app/.repo");
    t.sgard(["init", "--repo", &repo]).ok();
    t.write(".config/app/a", "a\n");
    t.write(".config/app/sub/b", "b\n");
    let r = t.sgard(["add", "--repo", &repo, &a(&t, ".config/app")]);
    r.ok().stdout_has("Added 2 paths");
    let listed: Value = json_doc(t.sgard(["list", "--json", "--repo", &repo]).ok());
    assert_eq!(listed["entries"].as_array().unwrap().len(), 2, "{listed:#}");

    let repo_path = t.path(".config/app/.repo");
    let repo_files: Vec<_> = walk_files(&repo_path);
    assert!(repo_files.iter().any(|p| p.ends_with("manifest.yaml")));
    assert!(repo_files.len() >= 4, "{repo_files:?}");

    t.write(".config/app/junk", "j\n");
    let r = t.sgard([
        "mirror",
        "down",
        "--repo",
        &repo,
        &a(&t, ".config/app"),
        "-f",
    ]);
    r.ok();
    assert!(!r.stdout.contains(".repo"), "{r:#?}");
    assert!(!t.path(".config/app/junk").exists(), "{r:#?}");
    for f in &repo_files {
        assert!(f.exists(), "mirror down deleted {}", f.display());
    }
    let v = json_doc(t.sgard(["verify", "--json", "--repo", &repo]).ok());
    assert_eq!(v["ok"], true);
    assert_eq!(v["entries"].as_array().unwrap().len(), 2);
    t.sgard(["status", "--repo", &repo]).ok();
}

fn walk_files(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// JSON output
// ---------------------------------------------------------------------------

#[test]
fn json_status() {
    let t = TestEnv::init();
    for f in ["a-ok", "b-mod", "c-gone", "d-skip", "e-lock"] {
        t.write(f, format!("{f}\n"));
    }
    t.sgard(["add", &a(&t, "a-ok"), &a(&t, "b-mod"), &a(&t, "c-gone")])
        .ok();
    t.sgard(["add", "--only", "os:fakeos", &a(&t, "d-skip")])
        .ok();
    t.sgard(["add", "--lock", &a(&t, "e-lock")]).ok();
    t.write("b-mod", "changed\n");
    fs::remove_file(t.path("c-gone")).unwrap();
    t.write("e-lock", "changed\n");

    let v = json_doc(t.sgard(["status", "--json"]).ok());
    assert_eq!(v["clean"], false);
    let entries = v["entries"].as_array().unwrap();
    let want = [
        ("~/a-ok", "ok", Value::Null),
        ("~/b-mod", "modified", Value::from("content")),
        ("~/c-gone", "missing", Value::Null),
        ("~/d-skip", "skipped", Value::Null),
        ("~/e-lock", "drifted", Value::from("content")),
    ];
    assert_eq!(entries.len(), want.len(), "{v:#}");
    for (e, (path, state, detail)) in entries.iter().zip(want) {
        assert_eq!(e["path"], path, "{v:#}");
        assert_eq!(e["state"], state, "{v:#}");
        assert_eq!(e["detail"], detail, "{v:#}");
        assert_eq!(e.as_object().unwrap().len(), 3, "{e:#}");
    }

    // Clean: only ok and skipped entries.
    let t = TestEnv::init();
    t.write("a", "a\n");
    t.write("s", "s\n");
    t.sgard(["add", &a(&t, "a")]).ok();
    t.sgard(["add", "--only", "os:fakeos", &a(&t, "s")]).ok();
    let v = json_doc(t.sgard(["status", "--json"]).ok());
    assert_eq!(v["clean"], true, "{v:#}");
    assert_eq!(v["entries"].as_array().unwrap().len(), 2);

    // Empty repository.
    let t = TestEnv::init();
    let v = json_doc(t.sgard(["status", "--json"]).ok());
    assert_eq!(v["clean"], true);
    assert_eq!(v["entries"], json!([]));
}

#[test]
fn json_list() {
    let t = TestEnv::init();
    t.write("a-file", "f\n");
    t.chmod("a-file", 0o600);
    std::os::unix::fs::symlink("/etc/hosts", t.path("b-link")).unwrap();
    fs::create_dir(t.path("c-dir")).unwrap();
    t.chmod("c-dir", 0o700);
    t.write("d-lock", "l\n");
    t.write("e-only", "o\n");
    t.write("f-never", "n\n");
    t.sgard(["add", &a(&t, "a-file"), &a(&t, "b-link")]).ok();
    t.sgard(["add", "--dir", &a(&t, "c-dir")]).ok();
    t.sgard(["add", "--lock", &a(&t, "d-lock")]).ok();
    t.sgard(["add", "--only", "os:linux,tag:x", &a(&t, "e-only")])
        .ok();
    t.sgard(["add", "--never", "arch:fakearch", &a(&t, "f-never")])
        .ok();

    let v = list_json(&t);
    assert_eq!(v.as_object().unwrap().len(), 2, "{v:#}");
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 6, "{v:#}");
    let keys = [
        "path",
        "type",
        "hash",
        "plaintext_hash",
        "mode",
        "target",
        "updated",
        "locked",
        "encrypted",
        "only",
        "never",
    ];
    for e in entries {
        let o = e.as_object().unwrap();
        for k in keys {
            assert!(o.contains_key(k), "{k} missing in {e:#}");
        }
        assert_eq!(e["updated"], NOW, "{e:#}");
        assert_eq!(e["encrypted"], false, "{e:#}");
        assert_eq!(e["plaintext_hash"], Value::Null, "{e:#}");
    }
    let want = [
        (
            "~/a-file",
            "file",
            json!(sha("f\n")),
            "0600",
            Value::Null,
            false,
            json!([]),
            json!([]),
        ),
        (
            "~/b-link",
            "link",
            Value::Null,
            "0777",
            json!("/etc/hosts"),
            false,
            json!([]),
            json!([]),
        ),
        (
            "~/c-dir",
            "directory",
            Value::Null,
            "0700",
            Value::Null,
            false,
            json!([]),
            json!([]),
        ),
        (
            "~/d-lock",
            "file",
            json!(sha("l\n")),
            "0644",
            Value::Null,
            true,
            json!([]),
            json!([]),
        ),
        (
            "~/e-only",
            "file",
            json!(sha("o\n")),
            "0644",
            Value::Null,
            false,
            json!(["os:linux", "tag:x"]),
            json!([]),
        ),
        (
            "~/f-never",
            "file",
            json!(sha("n\n")),
            "0644",
            Value::Null,
            false,
            json!([]),
            json!(["arch:fakearch"]),
        ),
    ];
    for (e, (path, kind, hash, mode, target, locked, only, never)) in entries.iter().zip(want) {
        assert_eq!(e["path"], path, "{e:#}");
        assert_eq!(e["type"], kind, "{e:#}");
        assert_eq!(e["hash"], hash, "{e:#}");
        assert_eq!(e["mode"], mode, "{e:#}");
        assert_eq!(e["target"], target, "{e:#}");
        assert_eq!(e["locked"], locked, "{e:#}");
        assert_eq!(e["only"], only, "{e:#}");
        assert_eq!(e["never"], never, "{e:#}");
    }

    let t = TestEnv::init();
    assert_eq!(list_json(&t)["entries"], json!([]));
}

#[test]
fn json_info() {
    let t = TestEnv::init();
    t.write("f", "old\n");
    t.sgard(["add", &a(&t, "f")]).ok();
    t.write("f", "new\n");
    set_mtime(&t.path("f"), now_secs() - 100);

    let v = json_doc(t.sgard(["info", "--json", &a(&t, "f")]).ok());
    let e = &v["entry"];
    assert_eq!(e["path"], "~/f");
    assert_eq!(e["type"], "file");
    assert_eq!(e["hash"], sha("old\n").as_str());
    assert_eq!(e["mode"], "0644");
    assert_eq!(e["updated"], NOW);
    assert_eq!(e["locked"], false);
    assert_eq!(e["encrypted"], false);
    assert_eq!(e["only"], json!([]));
    assert_eq!(e["never"], json!([]));
    assert_eq!(v["status"], "modified");
    assert_eq!(v["applies"], true);
    assert_eq!(v["disk_mtime"], "2026-03-23T11:58:20Z");
    assert_eq!(v["disk_hash"], sha("new\n").as_str());
    assert_eq!(v["disk_target"], Value::Null);
    assert_eq!(v["blob"], "stored");

    // Unchanged: no disk hash.
    t.write("f", "old\n");
    let v = json_doc(t.sgard(["info", "--json", &a(&t, "f")]).ok());
    assert_eq!(v["status"], "ok");
    assert_eq!(v["disk_hash"], Value::Null);
    assert!(v["disk_mtime"].is_string());

    // Missing from disk, and blob gone.
    fs::remove_file(t.path("f")).unwrap();
    fs::remove_file(t.blob_path(&sha("old\n"))).unwrap();
    let v = json_doc(t.sgard(["info", "--json", &a(&t, "f")]).ok());
    // It cannot be restored: the status says so, not just "missing".
    assert_eq!(v["status"], "error");
    assert_eq!(v["disk_mtime"], Value::Null);
    assert_eq!(v["disk_hash"], Value::Null);
    assert_eq!(v["blob"], "missing");

    // Targeted away.
    t.write("t", "t\n");
    t.sgard(["add", "--only", "os:fakeos", &a(&t, "t")]).ok();
    let v = json_doc(t.sgard(["info", "--json", &a(&t, "t")]).ok());
    assert_eq!(v["status"], "skipped");
    assert_eq!(v["applies"], false);
    assert_eq!(v["disk_mtime"], Value::Null);
    assert_eq!(v["entry"]["only"], json!(["os:fakeos"]));

    // A link whose target changed.
    std::os::unix::fs::symlink("/old/target", t.path("l")).unwrap();
    t.sgard(["add", &a(&t, "l")]).ok();
    fs::remove_file(t.path("l")).unwrap();
    std::os::unix::fs::symlink("/new/target", t.path("l")).unwrap();
    let v = json_doc(t.sgard(["info", "--json", &a(&t, "l")]).ok());
    assert_eq!(v["entry"]["type"], "link");
    assert_eq!(v["entry"]["target"], "/old/target");
    assert_eq!(v["entry"]["hash"], Value::Null);
    assert_eq!(v["status"], "modified");
    assert_eq!(v["disk_target"], "/new/target");
    assert_eq!(v["disk_hash"], Value::Null);
    assert_eq!(v["blob"], Value::Null);

    // Untracked: an error, no JSON.
    let r = t.sgard(["info", "--json", &a(&t, "nope")]);
    assert_ne!(r.code, 0, "{r:#?}");
}

#[test]
fn json_verify() {
    let t = TestEnv::init();
    t.write("f", "f\n");
    t.write("g", "g\n");
    t.sgard(["add", &a(&t, "f"), &a(&t, "g")]).ok();
    let v = json_doc(t.sgard(["verify", "--json"]).ok());
    assert_eq!(v["ok"], true);
    assert_eq!(
        v["entries"],
        json!([{"path": "~/f", "state": "ok"}, {"path": "~/g", "state": "ok"}])
    );

    fs::write(t.blob_path(&sha("f\n")), "tampered").unwrap();
    fs::remove_file(t.blob_path(&sha("g\n"))).unwrap();
    let r = t.sgard(["verify", "--json"]);
    r.code(3);
    let v = json_doc(&r);
    assert_eq!(v["ok"], false);
    assert_eq!(
        v["entries"],
        json!([{"path": "~/f", "state": "corrupt"}, {"path": "~/g", "state": "missing"}])
    );
}

#[test]
fn json_identity() {
    let t = TestEnv::init();
    let v = json_doc(t.sgard(["identity", "--json"]).ok());
    let os = format!("os:{}", this_os());
    let arch = format!("arch:{}", this_arch());
    assert_eq!(v["labels"], json!(["testhost", os, arch]));
    assert_eq!(v["hostname"], "testhost");
    assert_eq!(v["os"], this_os());
    assert_eq!(v["arch"], this_arch());
    assert_eq!(v["tags"], json!([]));

    t.sgard(["tag", "add", "work"]).ok();
    t.sgard(["tag", "add", "home"]).ok();
    let v = json_doc(t.sgard(["identity", "--json"]).ok());
    assert_eq!(
        v["labels"],
        json!(["testhost", os, arch, "tag:work", "tag:home"])
    );
    assert_eq!(v["tags"], json!(["work", "home"]));

    let r = sgard_env(
        &t,
        &["identity", "--json"],
        &[("SGARD_HOSTNAME", "Box.LAN")],
    );
    let v = json_doc(r.ok());
    assert_eq!(v["hostname"], "box");
    assert_eq!(v["labels"][0], "box");
}

#[test]
fn json_diff_stat() {
    let t = TestEnv::init();
    t.write("a", "a\nb\nc\n");
    t.write("b-bin", b"\x00\x01\x02");
    t.write("c-same", "same\n");
    t.sgard(["add", &a(&t, "a"), &a(&t, "b-bin"), &a(&t, "c-same")])
        .ok();

    let v = json_doc(t.sgard(["diff", "--stat", "--json"]).ok());
    assert_eq!(v["files"], json!([]));
    assert_eq!(v["files_changed"], 0);
    assert_eq!(v["insertions"], 0);
    assert_eq!(v["deletions"], 0);

    t.write("a", "a\nB\nc\nd\n");
    t.write("b-bin", b"\x00\x01\x03");
    let v = json_doc(t.sgard(["diff", "--stat", "--json"]).ok());
    assert_eq!(
        v["files"],
        json!([
            {"path": "~/a", "binary": false, "insertions": 2, "deletions": 1},
            {"path": "~/b-bin", "binary": true, "insertions": null, "deletions": null},
        ])
    );
    assert_eq!(v["files_changed"], 2);
    assert_eq!(v["insertions"], 2);
    assert_eq!(v["deletions"], 1);

    // One path.
    let v = json_doc(t.sgard(["diff", "--stat", "--json", &a(&t, "a")]).ok());
    assert_eq!(v["files_changed"], 1);
    assert_eq!(v["files"][0]["path"], "~/a");

    // --json needs --stat.
    t.sgard(["diff", "--json"]).code(2);
}

#[test]
fn status_is_coloured_when_colour_is_forced() {
    let t = TestEnv::init();
    t.write("ok", "ok\n");
    t.write("mod", "mod\n");
    t.sgard(["add", &a(&t, "ok"), &a(&t, "mod")]).ok();
    t.write("mod", "changed\n");
    let mut c = t.command(["status"]);
    c.env_remove("NO_COLOR").env("CLICOLOR_FORCE", "1");
    let out = Run::from(c.stdin(Stdio::null()).output().unwrap());
    out.ok();
    // Green and yellow words, padded inside the colour, reset after.
    assert_eq!(
        out.stdout,
        "\x1b[33mmodified  \x1b[0m ~/mod  (content)\n\x1b[32mok        \x1b[0m ~/ok\n"
    );
}

#[test]
fn piped_output_keeps_the_bytes_of_the_users_data() {
    // Nothing is filtered on a pipe: a diff of a file holding escape bytes
    // shows them as they are (sgard itself adds none with colour off).
    let t = TestEnv::init();
    t.write("prompt", "PS1='\x1b[31m$ '\n");
    t.sgard(["add", &a(&t, "prompt")]).ok();
    t.write("prompt", "PS1='\x1b[32m$ '\n");
    let r = t.sgard(["diff"]);
    assert!(r.stdout.contains("+PS1='\x1b[32m$ '"), "{:?}", r.stdout);
    assert!(r.stdout.contains("-PS1='\x1b[31m$ '"), "{:?}", r.stdout);
}

#[test]
fn human_output_has_no_ansi_when_piped() {
    let t = TestEnv::init();
    t.write("ok", "ok\n");
    t.write("mod", "mod\n");
    t.write("gone", "gone\n");
    t.write("lk", "lk\n");
    t.write("sk", "sk\n");
    t.sgard(["add", &a(&t, "ok"), &a(&t, "mod"), &a(&t, "gone")])
        .ok();
    t.sgard(["add", "--lock", &a(&t, "lk")]).ok();
    t.sgard(["add", "--only", "os:fakeos", &a(&t, "sk")]).ok();
    t.write("mod", "changed\n");
    t.write("lk", "changed\n");
    fs::remove_file(t.path("gone")).unwrap();

    let color_env = [("TERM", "xterm-256color"), ("COLORTERM", "truecolor")];
    let runs: Vec<Vec<String>> = vec![
        vec!["status".into()],
        vec!["list".into()],
        vec!["info".into(), a(&t, "mod")],
        vec!["diff".into()],
        vec!["diff".into(), "--stat".into()],
        vec!["verify".into()],
        vec!["identity".into()],
        vec!["restore".into(), "-n".into()],
        vec!["tag".into(), "list".into()],
        vec!["--help".into()],
        vec!["no-such-command".into()],
    ];
    for args in runs {
        let mut c = t.command(&args);
        c.env_remove("NO_COLOR");
        for (k, v) in color_env {
            c.env(k, v);
        }
        let out = c.stdin(Stdio::null()).output().unwrap();
        assert!(
            !out.stdout.contains(&0x1b),
            "ANSI escape in stdout of {args:?}: {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            !out.stderr.contains(&0x1b),
            "ANSI escape in stderr of {args:?}: {:?}",
            String::from_utf8_lossy(&out.stderr)
        );
        if args[0] == "status" {
            let r = Run::from(out);
            has_line(&r, &line_d("modified", "~/mod", "content"));
            has_line(&r, &line_d("drifted", "~/lk", "content"));
            has_line(&r, &line("skipped", "~/sk"));
            has_line(&r, &line("missing", "~/gone"));
        }
    }
}

// ---------------------------------------------------------------------------
// man
// ---------------------------------------------------------------------------

#[test]
fn man_pages() {
    let t = TestEnv::new();
    let r = t.sgard(["man"]);
    r.ok();
    assert!(
        r.stdout.starts_with(".TH") || r.stdout.contains("\n.TH") || r.stdout.contains(".TH "),
        "{r:#?}"
    );
    assert!(r.stdout.contains("sgard"), "{r:#?}");

    let dir = t.outside().join("man");
    let d = dir.to_str().unwrap();
    t.sgard(["man", "--dir", d]).ok().stdout_has("man page(s)");
    for name in ["sgard.1", "sgard-add.1", "sgard-mirror.1"] {
        let text = fs::read_to_string(dir.join(name))
            .unwrap_or_else(|e| panic!("{name} not written: {e}"));
        assert!(text.contains(".TH"), "{name}: {text}");
    }
    let add = fs::read_to_string(dir.join("sgard-add.1")).unwrap();
    assert!(add.contains("lock"), "{add}");
    // No repository is needed or created.
    assert!(!t.repo().exists());
}

#[test]
fn diff_without_paths_covers_every_tracked_file() {
    let t = TestEnv::init();
    t.write("a", "one\n");
    t.write("dir/b", "two\n");
    t.write("dir/c", "three\n");
    t.sgard(["add", "a", "dir"]).ok();
    t.sgard(["diff", "--exit-code"])
        .ok()
        .stdout_has("No changes.");
    t.write("a", "ONE\n");
    t.write("dir/c", "THREE\n");
    let r = t.sgard(["diff", "--exit-code"]);
    r.code(1)
        .stdout_has("--- ~/a (stored)")
        .stdout_has("+++ ~/dir/c (current)");
    assert!(!r.stdout.contains("~/dir/b"), "{r:#?}");
    // A folder selects the files under it.
    let r = t.sgard(["diff", "dir"]);
    r.ok().stdout_has("-three").stdout_has("+THREE");
    assert!(!r.stdout.contains("~/a "), "{r:#?}");
    // An untracked path is still an error.
    t.sgard(["diff", "nope"])
        .code(1)
        .stderr_has("not tracked: ~/nope");
}
