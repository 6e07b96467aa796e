//! `sgard watch`: a status that asks the watcher looks only at what
//! changed, and never misses a change (the watcher down, restarted or
//! overflowed, a change in the same second as the index, a rename across
//! folders, a folder replaced by a symlink).

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{TestEnv, spawn_held_at};

/// A running `sgard watch`, killed when dropped.
struct Watcher {
    child: Child,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn socket(t: &TestEnv) -> PathBuf {
    t.state().join("watch.sock")
}

fn start(t: &TestEnv, stall: Option<&Path>) -> Watcher {
    start_with(t, &[], stall, Stdio::null())
}

/// `sgard watch ARGS`, its stderr to `stderr`, once it answers.
fn start_with(t: &TestEnv, args: &[&str], stall: Option<&Path>, stderr: Stdio) -> Watcher {
    let mut c = t.command([&["watch"][..], args].concat());
    if let Some(s) = stall {
        c.env("SGARD_TEST_WATCH_STALL", s);
    }
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let w = Watcher { child };
    let until = Instant::now() + Duration::from_secs(20);
    while t.sgard(["watch", "--check"]).code != 0 {
        assert!(Instant::now() < until, "the watcher did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    w
}

/// `status --json`: how it used the watcher, and each entry's state.
fn status(t: &TestEnv) -> (Value, Vec<(String, String)>) {
    let r = t.sgard(["status", "--json"]);
    assert!(r.code == 0 || r.code == 3, "{r:#?}");
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    (v["watch"].clone(), entries(&v))
}

/// Each entry's path and state in a `status --json` document.
fn entries(v: &Value) -> Vec<(String, String)> {
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_owned(),
                e["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The states a status without the watcher gives (it changes nothing a
/// status with it relies on, but may rewrite the index: the next status
/// with the watcher then looks at everything).
fn truth(t: &TestEnv) -> Vec<(String, String)> {
    let r = t
        .command(["status", "--json"])
        .env("SGARD_NO_WATCH", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert!(v["watch"].is_null(), "{v}");
    entries(&v)
}

fn state_of<'a>(entries: &'a [(String, String)], path: &str) -> &'a str {
    &entries.iter().find(|(p, _)| p == path).unwrap().1
}

fn not_ok(entries: &[(String, String)]) -> Vec<(String, String)> {
    entries.iter().filter(|(_, s)| s != "ok").cloned().collect()
}

fn pair(p: &str, s: &str) -> (String, String) {
    (p.to_owned(), s.to_owned())
}

/// Removes the blob of the tracked file `path` from the repository.
fn lose_blob(t: &TestEnv, path: &str) {
    let manifest = t.manifest();
    let hash = manifest
        .split(&format!("path: {path}\n"))
        .nth(1)
        .and_then(|rest| rest.split("hash: ").nth(1))
        .map(|h| h[..64].to_owned())
        .unwrap();
    std::fs::remove_file(
        t.repo()
            .join("blobs")
            .join(&hash[..2])
            .join(&hash[2..4])
            .join(&hash),
    )
    .unwrap();
}

const FILES: [(&str, &str); 5] = [
    (".zshrc", "zsh one\n"),
    (".config/a/x", "ax\n"),
    (".config/b/x", "bx-longer\n"),
    (".config/nvim/init.lua", "init\n"),
    (".config/nvim/lua/plug.lua", "plug\n"),
];

/// A repository tracking [`FILES`], settled: older than the stat cache's
/// racy window, so a status records them all.
fn settled() -> TestEnv {
    let t = TestEnv::init();
    for (p, c) in FILES {
        t.write(p, c);
    }
    let paths: Vec<&str> = FILES.iter().map(|(p, _)| *p).collect();
    t.sgard([&["add"][..], &paths].concat()).ok();
    std::thread::sleep(Duration::from_millis(2200));
    t
}

/// Two statuses: the first starts from no token, the second gives the
/// first's lines again without opening the repository.
fn warm(t: &TestEnv) {
    let (w, e) = status(t);
    assert_eq!(w["state"], "full", "{w}");
    assert_eq!(not_ok(&e), vec![]);
    let (w, e2) = status(t);
    assert_eq!(w["state"], "unchanged", "{w}");
    assert_eq!(e2, e);
}

/// A status after a change: it looks only at what changed (`skipped` is
/// how many files it did not look at); the next one gives its lines again.
fn after_change(t: &TestEnv, skipped: u64) -> Vec<(String, String)> {
    let (w, e) = status(t);
    assert_eq!(w["state"], "narrowed", "{w}");
    assert_eq!(w["skipped"], skipped, "{w}");
    let (w, e2) = status(t);
    assert_eq!(w["state"], "unchanged", "{w}");
    assert_eq!(e2, e);
    e
}

#[test]
fn status_with_the_watcher_sees_every_change_and_looks_at_no_other_file() {
    let t = settled();
    let _w = start(&t, None);
    warm(&t);

    // Rewritten at the same size with its old mtime: only the ctime and
    // the watcher tell.
    let zshrc = t.path(".zshrc");
    let mtime = std::fs::metadata(&zshrc).unwrap().modified().unwrap();
    t.write(".zshrc", "zsh two\n");
    std::fs::File::options()
        .write(true)
        .open(&zshrc)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let e = after_change(&t, 4);
    assert_eq!(not_ok(&e), vec![pair("~/.zshrc", "modified")]);
    // A change elsewhere: the modified file is still looked at (its record
    // is older than its change), and still modified.
    t.write(".config/nvim/init.lua", "init\n");
    let e = after_change(&t, 3);
    assert_eq!(not_ok(&e), vec![pair("~/.zshrc", "modified")]);

    // Renamed across folders, over another tracked file.
    std::fs::rename(t.path(".config/a/x"), t.path(".config/b/x")).unwrap();
    // Only plug.lua is not looked at: .zshrc and init.lua were read last
    // time (changed too recently to be vouched for).
    let e = after_change(&t, 1);
    assert_eq!(state_of(&e, "~/.config/a/x"), "missing");
    assert_eq!(state_of(&e, "~/.config/b/x"), "modified");

    // A folder replaced by a symlink to a folder with other contents.
    std::fs::rename(t.path(".config/nvim"), t.path("nvim-old")).unwrap();
    t.write("nvim-new/init.lua", "other\n");
    t.write("nvim-new/lua/plug.lua", "plug\n");
    std::os::unix::fs::symlink(t.path("nvim-new"), t.path(".config/nvim")).unwrap();
    let (w, e) = status(&t);
    assert_eq!(w["state"], "narrowed", "{w}");
    assert_ne!(state_of(&e, "~/.config/nvim/init.lua"), "ok", "{e:?}");
    assert_eq!(e, truth(&t), "with and without the watcher alike");
}

#[test]
fn a_watcher_down_restarted_or_overflowed_means_looking_at_everything() {
    let t = settled();
    let w = start(&t, None);
    warm(&t);

    // Killed: its socket is left behind, and answers nothing.
    drop(w);
    assert!(socket(&t).exists(), "kill -9 leaves the socket");
    t.write(".config/b/x", "changed while down\n");
    let (w, e) = status(&t);
    assert_eq!(w["state"], "not-running", "{w}");
    assert_eq!(not_ok(&e), vec![pair("~/.config/b/x", "modified")]);
    t.sgard(["watch", "--check"])
        .code(1)
        .stdout_has("No watcher runs");

    // Changed again while down, then a new watcher: its tokens are not the
    // old one's.
    t.write(".config/a/x", "also while down\n");
    let _w = start(&t, None);
    let (w, e) = status(&t);
    assert_eq!(w["state"], "full", "{w}");
    assert!(w["why"].as_str().unwrap().contains("restarted"), "{w}");
    assert_eq!(
        not_ok(&e),
        vec![
            pair("~/.config/a/x", "modified"),
            pair("~/.config/b/x", "modified")
        ]
    );
    let (w, _) = status(&t);
    assert_eq!(w["state"], "unchanged", "{w}");
    // One more change: only it is looked at.
    t.write(".zshrc", "zsh two\n");
    let e = after_change(&t, 2);
    assert_eq!(not_ok(&e).len(), 3, "{e:?}");
    t.sgard(["doctor"])
        .stdout_has("watcher")
        .stdout_has("runs (process");
}

#[test]
fn an_overflow_of_the_kernels_queue_is_never_a_missed_change() {
    let limit: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384);
    if limit > 200_000 {
        eprintln!("skipped: max_queued_events is {limit}, too many files to make");
        return;
    }
    let t = settled();
    let stall = t.outside().join("stall");
    let _w = start(&t, Some(&stall));
    warm(&t);

    // The watcher stops taking events; more happen than the kernel keeps,
    // the tracked file's change last (so it is one of those lost).
    std::fs::write(&stall, "").unwrap();
    let junk = t.path("junk");
    std::fs::create_dir(&junk).unwrap();
    for i in 0..limit + 64 {
        std::fs::write(t.home.join(format!(".junk{i}")), "").unwrap();
    }
    t.write(".config/nvim/init.lua", "lost event\n");
    std::fs::remove_file(&stall).unwrap();
    // Once it answers about itself, it has taken every event queued.
    let until = Instant::now() + Duration::from_secs(60);
    while t.sgard(["watch", "--check"]).code != 0 {
        assert!(Instant::now() < until);
    }
    let (w, e) = status(&t);
    assert_eq!(w["state"], "full", "{w}");
    assert_eq!(
        not_ok(&e),
        vec![pair("~/.config/nvim/init.lua", "modified")]
    );
    let (w, e) = status(&t);
    assert_eq!(w["state"], "unchanged", "{w}");
    assert_eq!(
        not_ok(&e),
        vec![pair("~/.config/nvim/init.lua", "modified")]
    );
}

#[test]
fn status_of_some_paths_and_no_cache_do_not_ask_the_watcher() {
    let t = settled();
    let _w = start(&t, None);
    let r = t.sgard(["status", "--json", ".zshrc"]);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(v["watch"].is_null(), "{v}");
    let r = t.sgard(["--no-cache", "status", "--json"]);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(v["watch"].is_null(), "{v}");
}

#[test]
fn install_writes_a_user_unit_and_enables_it_and_uninstall_removes_it() {
    let t = TestEnv::tracking(".zshrc", "x");
    let bin = t.outside().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = t.outside().join("systemctl.log");
    let fake = bin.join("systemctl");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\necho \"$@\" >> '{}'\n", log.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |args: &[&str]| -> crate::common::Run {
        t.command(args)
            .env("PATH", &path)
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .into()
    };
    run(&["watch", "--install"])
        .ok()
        .stdout_has("Started sgard-watch-");
    let units = t.path(".config/systemd/user");
    let unit: Vec<_> = std::fs::read_dir(&units).unwrap().flatten().collect();
    assert_eq!(unit.len(), 1);
    let name = unit[0].file_name().into_string().unwrap();
    let text = std::fs::read_to_string(unit[0].path()).unwrap();
    assert!(
        text.contains(&format!(
            "ExecStart=\"{}\" --repo \"{}\" watch",
            TestEnv::bin().display(),
            t.repo().display()
        )),
        "{text}"
    );
    assert!(text.contains("WantedBy=default.target"), "{text}");
    assert!(
        text.contains(&format!(
            "Environment=\"XDG_STATE_HOME={}\"",
            t.home.join(".state").display()
        )),
        "the unit sees the state folder this shell sees: {text}"
    );
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        said,
        format!("--user daemon-reload\n--user enable --now {name}\n")
    );
    run(&["watch", "--uninstall"]).ok().stdout_has("Removed");
    assert!(!unit[0].path().exists());
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.ends_with(&format!(
            "--user disable --now {name}\n--user daemon-reload\n"
        )),
        "{said}"
    );
}

#[test]
fn checkpoint_after_records_changed_files_once_quiet_and_never_a_conflict() {
    let t = settled();
    let log = t.outside().join("watch.log");
    let _w = start_with(
        &t,
        &["--checkpoint-after", "1s"],
        None,
        std::fs::File::create(&log).unwrap().into(),
    );
    let snapshots = |t: &TestEnv| t.sgard(["log"]).stdout.matches("sgard watch:").count();
    assert_eq!(snapshots(&t), 0);

    t.write(".config/nvim/init.lua", "edited\n");
    let until = Instant::now() + Duration::from_secs(30);
    while snapshots(&t) == 0 {
        assert!(
            Instant::now() < until,
            "no checkpoint; the watcher said: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t.sgard(["log"])
        .stdout_has("sgard watch: changed files quiet for 1s");
    let (_, e) = status(&t);
    assert_eq!(not_ok(&e), vec![], "the edit is recorded");

    // Another home on the same repository changes two files: here one is
    // `behind`, and the other is edited here too (a conflict).
    let other = TestEnv::new();
    let repo = t.repo();
    let repo = repo.to_str().unwrap();
    other.sgard(["--repo", repo, "restore"]).ok();
    other.write(".zshrc", "theirs\n");
    other.write(".config/a/x", "theirs too\n");
    other.sgard(["--repo", repo, "checkpoint"]).ok();
    t.write(".zshrc", "mine\n");
    t.write(".config/nvim/lua/plug.lua", "mine too\n");
    let until = Instant::now() + Duration::from_secs(30);
    while snapshots(&t) < 2 {
        assert!(
            Instant::now() < until,
            "no second checkpoint; the watcher said: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, e) = status(&t);
    assert_eq!(
        not_ok(&e),
        vec![
            pair("~/.config/a/x", "behind"),
            pair("~/.zshrc", "conflict")
        ],
        "only the plain edit was recorded"
    );
    assert_eq!(t.read(".zshrc"), b"mine\n", "nothing here was overwritten");
    let r = other.sgard(["--repo", repo, "status", "--json"]);
    let theirs = entries(&serde_json::from_str(&r.stdout).unwrap());
    assert_eq!(
        not_ok(&theirs),
        vec![pair("~/.config/nvim/lua/plug.lua", "behind")],
        "the repository holds their .zshrc and the watcher's plug.lua"
    );
}

#[test]
fn a_symlinked_folder_moved_away_and_made_again_is_seen() {
    // ~/.config/nvim is a symlink to ~/src/nvim-cfg: the watch on it sits
    // on the target's folder, whose own parents are not watched.
    let t = TestEnv::init();
    t.write("src/nvim-cfg/init.lua", "one\n");
    t.write(".zshrc", "z\n");
    std::fs::create_dir_all(t.path(".config")).unwrap();
    std::os::unix::fs::symlink(t.path("src/nvim-cfg"), t.path(".config/nvim")).unwrap();
    t.sgard(["add", ".config/nvim/init.lua", ".zshrc"]).ok();
    std::thread::sleep(Duration::from_millis(2200));
    let _w = start(&t, None);
    let (w, _) = status(&t);
    assert_eq!(w["state"], "full", "{w}");
    let (w, _) = status(&t);
    assert_eq!(w["state"], "unchanged", "{w}");

    std::fs::rename(t.path("src"), t.path("src.old")).unwrap();
    t.write("src/nvim-cfg/init.lua", "two\n");
    let (w, e) = status(&t);
    assert_ne!(w["state"], "unchanged", "{w}");
    assert_eq!(
        not_ok(&e),
        vec![pair("~/.config/nvim/init.lua", "modified")]
    );
    // And the new folder is watched: a change in it is seen too.
    let _ = status(&t);
    t.write("src/nvim-cfg/init.lua", "one\n");
    let (_, e) = status(&t);
    assert_eq!(not_ok(&e), vec![]);
    assert_eq!(e, truth(&t));
}

#[test]
fn the_repository_or_this_machines_labels_changing_void_the_last_lines() {
    let t = settled();
    let _w = start(&t, None);
    warm(&t);

    // Another home checkpoints into the same repository.
    let other = TestEnv::new();
    let repo = t.repo();
    let repo = repo.to_str().unwrap();
    other.sgard(["--repo", repo, "restore"]).ok();
    other.write(".config/a/x", "theirs\n");
    other.sgard(["--repo", repo, "checkpoint"]).ok();
    let (w, e) = status(&t);
    assert_ne!(w["state"], "unchanged", "{w}");
    assert_eq!(not_ok(&e), vec![pair("~/.config/a/x", "behind")]);
    t.sgard(["restore"]).ok();
    let (_, e) = status(&t);
    assert_eq!(not_ok(&e), vec![]);

    // A blob lost from the repository.
    lose_blob(&t, "~/.config/b/x");
    let (w, e) = status(&t);
    assert_ne!(w["state"], "unchanged", "{w}");
    assert_eq!(not_ok(&e), vec![pair("~/.config/b/x", "error")]);
    t.sgard(["add", ".config/b/x"]).ok();

    // An entry only for machines tagged `work`: changed while this machine
    // is not, then the tag comes back.
    t.sgard(["tag", "add", "work"]).ok();
    t.sgard(["target", "--only", "tag:work", ".zshrc"]).ok();
    std::thread::sleep(Duration::from_millis(2200));
    let _ = status(&t);
    let _ = status(&t);
    t.sgard(["tag", "remove", "work"]).ok();
    let (_, e) = status(&t);
    assert_eq!(state_of(&e, "~/.zshrc"), "skipped");
    t.write(".zshrc", "zsh 1\n");
    let (_, e) = status(&t);
    assert_eq!(state_of(&e, "~/.zshrc"), "skipped");
    t.sgard(["tag", "add", "work"]).ok();
    let (_, e) = status(&t);
    assert_eq!(state_of(&e, "~/.zshrc"), "modified");
}

#[test]
fn a_status_is_printed_again_as_it_was_and_a_damaged_copy_is_not_used() {
    let t = settled();
    let _w = start(&t, None);
    t.write(".zshrc", "zsh changed\n");
    let plain = |t: &TestEnv| {
        t.command(["status"])
            .env("SGARD_NO_WATCH", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let first = t.sgard(["status"]);
    first.ok().stdout_has("modified   ~/.zshrc");
    assert_eq!(first.stdout.as_bytes(), plain(&t).stdout);
    // Kept as printed, and printed again from there.
    let file = t.state().join("status-cache");
    let kept = std::fs::read(&file).unwrap();
    let at = kept
        .windows(first.stdout.len())
        .position(|w| w == first.stdout.as_bytes())
        .expect("the printed status is kept");
    let again = t.sgard(["status"]);
    assert_eq!(again.stdout, first.stdout);
    t.sgard(["status", "--exit-code"]).code(1);
    // One byte of the copy damaged: it is not printed.
    let mut damaged = kept.clone();
    damaged[at] ^= 0x20;
    std::fs::write(&file, &damaged).unwrap();
    assert_eq!(t.sgard(["status"]).stdout, first.stdout);
    // A truncated or foreign file, likewise.
    std::fs::write(&file, &kept[..kept.len() / 2]).unwrap();
    assert_eq!(t.sgard(["status"]).stdout, first.stdout);
    std::fs::write(&file, b"not a cache").unwrap();
    assert_eq!(t.sgard(["status"]).stdout, first.stdout);
}

#[test]
fn a_clone_sharing_the_state_folder_or_a_repository_not_watched_whole_is_never_replayed() {
    let t = settled();
    // Its blobs through a symlink: a blob lost there makes no event in the
    // repository's folder, so the repository is not vouched for.
    std::fs::rename(t.repo().join("blobs"), t.path("blobs-elsewhere")).unwrap();
    std::os::unix::fs::symlink(t.path("blobs-elsewhere"), t.repo().join("blobs")).unwrap();
    let _w = start(&t, None);
    t.sgard(["watch", "--check"])
        .ok()
        .stdout_has(&format!("It cannot vouch for {}", t.repo().display()));
    for _ in 0..3 {
        let (w, e) = status(&t);
        assert_ne!(w["state"], "unchanged", "{w}");
        assert_eq!(not_ok(&e), vec![]);
    }
    std::fs::remove_file(t.repo().join("blobs")).unwrap();
    std::fs::rename(t.path("blobs-elsewhere"), t.repo().join("blobs")).unwrap();

    // A copy of the repository has the same id, so the same state folder:
    // its status is its own, never the original's lines.
    let clone = t.path("clone");
    let out = std::process::Command::new("cp")
        .arg("-a")
        .arg(t.repo())
        .arg(&clone)
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(clone.join("tags"), "other\n").ok();
    let in_clone = || {
        let r = t.sgard(["--repo", clone.to_str().unwrap(), "status", "--json"]);
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        (
            v["watch"]["state"].as_str().unwrap_or("").to_owned(),
            entries(&v),
        )
    };
    assert_ne!(in_clone().0, "unchanged");
    // The watcher now watches the clone (the set names the folder): a
    // blob lost there is seen.
    let _ = in_clone();
    let blobs = clone.join("blobs");
    let leaf = std::fs::read_dir(&blobs)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let leaf = std::fs::read_dir(&leaf)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    for b in std::fs::read_dir(&leaf).unwrap().flatten() {
        std::fs::remove_file(b.path()).unwrap();
    }
    let (state, e) = in_clone();
    assert_ne!(state, "unchanged");
    assert!(e.iter().any(|(_, s)| s == "error"), "{e:?}");
}

#[test]
fn a_repository_with_templates_is_judged_afresh_every_time() {
    // A template may read the environment or a password manager, which
    // nothing watches: its status is never given again from a copy.
    let t = settled();
    t.write(".gitconfig", "[user]\n  name = {{ sgard.username }}\n");
    t.sgard(["add", "--template", ".gitconfig"]).ok();
    let _w = start(&t, None);
    for _ in 0..3 {
        let (w, _) = status(&t);
        assert_ne!(w["state"], "unchanged", "{w}");
        assert_ne!(t.sgard(["status"]).code, 3);
    }
    assert!(!t.state().join("status-cache").exists());
}

#[test]
fn a_blob_lost_after_the_last_status_vouched_for_the_repository_is_seen() {
    let t = settled();
    let _w = start(&t, None);
    warm(&t);
    // A change in the home: the next status is narrowed, and it says the
    // repository held every content without looking at it again (nothing
    // in the repository changed since the last status found them all).
    t.write(".zshrc", "zsh two\n");
    let e = after_change(&t, 4);
    assert_eq!(not_ok(&e), vec![pair("~/.zshrc", "modified")]);
    t.write(".zshrc", "zsh one\n");
    let e = after_change(&t, 4);
    assert_eq!(not_ok(&e), vec![]);

    // Then a blob goes, and a file changes in the home at the same time.
    lose_blob(&t, "~/.config/a/x");
    t.write(".config/nvim/init.lua", "init 2\n");
    let (w, e) = status(&t);
    assert_eq!(w["state"], "narrowed", "{w}");
    assert_eq!(
        not_ok(&e),
        vec![
            pair("~/.config/a/x", "error"),
            pair("~/.config/nvim/init.lua", "modified")
        ]
    );
    assert_eq!(e, truth(&t));
}

/// A blob removed while a status opens the repository, after the store's
/// folders were looked at ahead and before the watcher was asked: that
/// status looks again, after the watcher's token, so it and every status
/// after it say so (a look from before the token, kept with it, would have
/// the next ones take the blob as held until the repository changed again).
#[test]
fn a_blob_lost_while_a_status_opens_the_repository_is_seen_then_and_after() {
    let t = settled();
    let _w = start(&t, None);
    warm(&t);
    // A change in the home, so that the status opens the repository.
    t.write(".zshrc", "zsh two\n");
    let gate = t.outside().join("go");
    let held = spawn_held_at(
        t.command(["status", "--json"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
        "status-before-watcher",
        &gate,
    );
    lose_blob(&t, "~/.config/a/x");
    std::fs::write(&gate, "").unwrap();
    let out = held.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let want = vec![pair("~/.config/a/x", "error"), pair("~/.zshrc", "modified")];
    assert_eq!(not_ok(&entries(&v)), want, "{v}");
    for _ in 0..2 {
        let (w, e) = status(&t);
        assert_eq!(not_ok(&e), want, "{w}");
    }
    assert_eq!(not_ok(&truth(&t)), want);
}

#[test]
fn a_state_folder_deeper_than_a_sockets_address_still_gets_a_watcher() {
    let t = settled();
    // A Unix socket's address holds about 100 bytes: this state folder's
    // socket path is over 200.
    let deep = t.path(&"d".repeat(150));
    let sgard = |args: &[&str]| {
        t.command(args)
            .env("XDG_STATE_HOME", &deep)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    // None yet: said as such, not as an error about the long path.
    let none = sgard(&["watch", "--check"]);
    assert_eq!(none.status.code(), Some(1), "{none:?}");
    assert!(
        String::from_utf8_lossy(&none.stdout).starts_with("No watcher runs"),
        "{none:?}"
    );
    let mut child = t
        .command(["watch"])
        .env("XDG_STATE_HOME", &deep)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while !sgard(&["watch", "--check"]).status.success() {
        if let Ok(Some(_)) = child.try_wait() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            panic!("the watcher stopped: {err}");
        }
        assert!(Instant::now() < until, "the watcher did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let w = Watcher { child };
    let state = |out: std::process::Output| -> Value {
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["watch"]["state"].clone()
    };
    assert_eq!(state(sgard(&["status", "--json"])), "full");
    assert_eq!(state(sgard(&["status", "--json"])), "unchanged");
    t.write(".zshrc", "zsh two\n");
    let out = sgard(&["status", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["watch"]["state"], "narrowed", "{v}");
    assert_eq!(not_ok(&entries(&v)), vec![pair("~/.zshrc", "modified")]);
    drop(w);
}

/// A folder of tracked files removed, then made again after quiet
/// answers: the watcher watches it again, so a later change deep in it
/// (same size, only the watcher can tell without a look) is seen.
#[test]
fn a_folder_of_tracked_files_removed_and_made_again_is_watched_again() {
    let t = settled();
    let _w = start(&t, None);
    warm(&t);
    std::fs::remove_dir_all(t.path(".config/nvim")).unwrap();
    let (_, e) = status(&t);
    assert_eq!(state_of(&e, "~/.config/nvim/lua/plug.lua"), "missing");
    for _ in 0..3 {
        let (w, _) = status(&t);
        assert_eq!(w["state"], "unchanged", "{w}");
    }
    t.write(".config/nvim/init.lua", "init\n");
    t.write(".config/nvim/lua/plug.lua", "plug\n");
    let (_, e) = status(&t);
    assert_eq!(not_ok(&e), vec![], "{e:?}");
    // Settled, vouched for, then quiet answers again.
    std::thread::sleep(Duration::from_millis(2200));
    for _ in 0..3 {
        let _ = status(&t);
    }
    let (w, _) = status(&t);
    assert_eq!(w["state"], "unchanged", "{w}");
    t.write(".config/nvim/lua/plug.lua", "plig\n");
    let (w, e) = status(&t);
    assert_ne!(w["state"], "unchanged", "{w}");
    assert_eq!(state_of(&e, "~/.config/nvim/lua/plug.lua"), "modified");
    assert_eq!(e, truth(&t), "with and without the watcher alike");
}
