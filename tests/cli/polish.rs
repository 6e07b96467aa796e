//! The behaviour fixes of issue 16, item 6: `diff` and targeting, `diff`
//! of secrets without the key, the fingerprint cache keyed by content, what
//! a checkpoint that failed an entry says, `add --follow`, the modes of
//! folders a restore creates, what `undo` shows and asks, and what `log`
//! counts.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::process::Stdio;

use crate::common::*;

/// The passphrase of the encrypted repositories made here.
const PW: &str = "correct horse battery staple";

/// Runs sgard with tiny Argon2 parameters, stdin closed and `env` added.
fn run(t: &TestEnv, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = t.command(args);
    c.env("SGARD_TEST_ARGON2", "1").stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap().into()
}

/// Runs sgard with the passphrase [`PW`].
fn pw(t: &TestEnv, args: &[&str]) -> Run {
    run(t, args, &[("SGARD_PASSPHRASE", PW)])
}

/// A repository with encryption set up.
fn encrypted_repo() -> TestEnv {
    let t = TestEnv::init();
    pw(&t, &["encrypt", "init"]).ok();
    t
}

/// `log --json`'s records, newest first.
fn log_json(t: &TestEnv) -> Vec<serde_json::Value> {
    let r = t.sgard(["log", "--json"]);
    r.ok();
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    v["snapshots"].as_array().unwrap().clone()
}

// ------------------------------------------------------------------ log

#[test]
fn log_counts_the_contents_a_snapshot_adds_not_its_own_blob() {
    let t = TestEnv::init();
    t.write("a", "one\n");
    // Big enough to be stored in chunks: still one content.
    t.write("big", vec![7u8; 3 << 20]);
    t.sgard(["add", "a", "big"]).ok();
    t.sgard(["checkpoint", "-m", "first"]).ok();
    let recs = log_json(&t);
    assert_eq!(recs[0]["new_blobs"], 2, "{recs:#?}");
    t.sgard(["log"])
        .ok()
        .stdout_has("2 entries, ")
        .stdout_has(", 2 new blobs  first");

    // One file changed: one new content, whatever the snapshot stored.
    t.write("a", "two\n");
    t.sgard(["checkpoint", "-m", "second"]).ok();
    let recs = log_json(&t);
    assert_eq!(recs[0]["new_blobs"], 1, "{recs:#?}");
    t.sgard(["log", "-n", "1"])
        .ok()
        .stdout_has(", 1 new blob  second");

    // A content that comes back from an older snapshot is not new to the
    // parent either way; a mode change adds none.
    t.chmod("a", 0o600);
    t.sgard(["checkpoint", "-m", "third"]).ok();
    assert_eq!(log_json(&t)[0]["new_blobs"], 0);
    t.sgard(["log", "-n", "1"])
        .ok()
        .stdout_has(", 0 new blobs  third");
}

// ------------------------------------------------------------------ diff

#[test]
fn diff_leaves_out_entries_targeted_away_unless_named() {
    let t = TestEnv::init();
    t.write("here", "a\n");
    t.write("away", "b\n");
    t.write("dir/away2", "c\n");
    t.sgard(["add", "here"]).ok();
    t.sgard(["add", "--only", "os:fakeos", "away", "dir"]).ok();
    t.write("away", "changed on the other machine's copy\n");
    t.write("dir/away2", "changed too\n");

    // status skips them; diff agrees.
    t.sgard(["status", "--exit-code"]).ok();
    let r = t.sgard(["diff", "--exit-code"]);
    r.ok().stdout_has("No changes.");
    t.sgard(["diff", "--stat"])
        .ok()
        .stdout_has(" 0 files changed");
    // A folder argument keeps targeting.
    t.sgard(["diff", "--exit-code", "dir"]).ok();
    t.sgard(["diff", "--exit-code", "here", "dir"]).ok();

    // Named exactly, it is diffed.
    let r = t.sgard(["diff", "--exit-code", "away"]);
    r.code(1).stdout_has("+changed on the other machine's copy");
    let r = t.sgard(["diff", "--exit-code", "here", "dir/away2"]);
    r.code(1).stdout_has("+changed too");
    assert!(!r.stdout.contains("other machine"), "{r:#?}");
}

#[test]
fn diff_reports_a_secret_it_cannot_decrypt_and_goes_on() {
    let t = encrypted_repo();
    t.write("a", "plain one\n");
    t.write("b", "plain two\n");
    t.write(".secret", "hidden\n");
    pw(&t, &["add", "--encrypt", ".secret"]).ok();
    t.sgard(["add", "a", "b"]).ok();
    t.write(".secret", "hidden, edited\n");
    t.write("b", "plain two, edited\n");

    for exit_code in [false, true] {
        let mut args = vec!["diff"];
        if exit_code {
            args.push("--exit-code");
        }
        let r = run(&t, &args, &[]);
        r.code(1)
            .stdout_has("+plain two, edited")
            .stderr_has("sgard: error: ~/.secret: cannot decrypt: no passphrase");
        assert_eq!(
            r.stderr.matches("sgard: error:").count(),
            1,
            "one line for the one file; {r:#?}"
        );
    }
    let r = run(&t, &["diff", "--stat"], &[]);
    r.code(1)
        .stdout_has(" ~/b ")
        .stdout_has("1 file changed")
        .stderr_has("~/.secret: cannot decrypt");
    let r = run(&t, &["diff", "--stat", "--json"], &[]);
    r.code(1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["files_changed"], 1);
    assert_eq!(v["errors"][0]["path"], "~/.secret");

    // Nothing else differs: said so, still an error.
    t.write("b", "plain two\n");
    let r = run(&t, &["diff"], &[]);
    r.code(1).stdout_has("No changes in the other files.");
    // With the passphrase, all is well.
    pw(&t, &["diff"]).ok().stdout_has("+hidden, edited");
}

// ------------------------------------------------------------------ checkpoint

#[test]
fn a_checkpoint_that_failed_an_entry_is_not_complete() {
    let t = encrypted_repo();
    t.write("a", "one\n");
    t.write("b", "two\n");
    t.write(".secret", "hidden\n");
    pw(&t, &["add", "--encrypt", ".secret"]).ok();
    t.sgard(["add", "a", "b"]).ok();
    pw(&t, &["checkpoint"]).ok();
    t.write("a", "one, edited\n");
    t.write("b", "two, edited\n");
    t.write(".secret", "hidden, edited\n");

    let r = run(&t, &["checkpoint", "-m", "partly"], &[]);
    r.code(1)
        .stdout_has("failed     ~/.secret (")
        .stdout_has("Checkpoint recorded snapshot ")
        .stdout_has(" (2 entries); 1 entry failed: ~/.secret.")
        .stderr_has("sgard: error: 1 entry could not be checkpointed")
        .stderr_has(": ~/.secret");
    assert!(!r.stdout.contains("complete"), "{r:#?}");
    let head = &log_json(&t)[0];
    assert_eq!(head["message"], "partly");
    assert!(t.manifest().contains(&sha("one, edited\n")));

    // Only the secret is left: nothing recorded, and it says so.
    let r = run(&t, &["checkpoint"], &[]);
    r.code(1)
        .stdout_has("Checkpoint recorded nothing; 1 entry failed: ~/.secret.");
    assert!(!r.stdout.contains("complete"), "{r:#?}");
    pw(&t, &["checkpoint"])
        .ok()
        .stdout_has("Checkpoint complete: snapshot ");
}

// ------------------------------------------------------------------ fingerprints

/// A secret tracked, checkpointed with the passphrase, then looked at only
/// through this machine's fingerprint cache.
fn tracked_secret() -> TestEnv {
    let t = encrypted_repo();
    t.write(".secret", "hidden\n");
    pw(&t, &["add", "--encrypt", ".secret"]).ok();
    pw(&t, &["checkpoint"]).ok();
    t
}

#[test]
fn a_copied_repository_knows_its_unchanged_secrets_without_the_key() {
    let t = tracked_secret();
    // A copy that is another repository (no shared id, so no shared
    // record of the last sync): only the fingerprint of the content says
    // the secret is unchanged.
    let copy = t.path("copy");
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(t.repo())
        .arg(&copy)
        .status()
        .unwrap();
    assert!(st.success());
    fs::remove_file(copy.join("repo-id")).unwrap();
    let r = run(&t, &["--repo", "~/copy", "status", "--exit-code"], &[]);
    r.ok().stdout_has("ok         ~/.secret");
    run(&t, &["--repo", "~/copy", "diff", "--exit-code"], &[]).ok();

    // One cache for the machine; the per-repository files are gone.
    let state = t.home.join(".state/sgard");
    assert!(state.join("fingerprints").is_file());
    let old: Vec<_> = fs::read_dir(&state)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("fingerprints-"))
        .collect();
    assert!(old.is_empty(), "{old:?}");
    assert_eq!(
        mode_of(&state.join("fingerprints")),
        0o600,
        "the cache is private"
    );
}

#[test]
fn the_per_repository_caches_of_older_versions_are_merged_in() {
    let t = tracked_secret();
    let state = t.home.join(".state/sgard");
    // As an older version left it: one file per repository path.
    let text = fs::read_to_string(state.join("fingerprints")).unwrap();
    fs::remove_file(state.join("fingerprints")).unwrap();
    fs::write(state.join("fingerprints-0123456789abcdef"), &text).unwrap();
    let copy = t.path("copy");
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(t.repo())
        .arg(&copy)
        .status()
        .unwrap();
    assert!(st.success());
    fs::remove_file(copy.join("repo-id")).unwrap();
    run(&t, &["--repo", "~/copy", "status", "--exit-code"], &[]).ok();
    assert!(!state.join("fingerprints-0123456789abcdef").exists());
    assert_eq!(
        fs::read_to_string(state.join("fingerprints")).unwrap(),
        text
    );
}

/// A `sgardd --insecure-no-auth` on a loopback port, killed when dropped.
struct Sgardd(std::process::Child, String);

impl Drop for Sgardd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Sgardd {
    fn start(dir: &std::path::Path) -> Sgardd {
        use std::io::BufRead;
        let mut child = std::process::Command::new(crate::common::sgardd_bin())
            .arg("--repo")
            .arg(dir.join("srv"))
            .args(["--init", "--insecure-no-auth", "--listen", "127.0.0.1:0"])
            .current_dir(dir)
            .env_clear()
            .env("HOME", dir)
            .env("SGARD_NOW", NOW)
            .env("SGARD_HOSTNAME", "server")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let addr = loop {
            let line = lines.next().expect("sgardd exited").unwrap();
            if let Some(rest) = line.strip_prefix("sgardd serving on ") {
                break rest.split_whitespace().next().unwrap().to_owned();
            }
        };
        // Keep draining its output.
        std::thread::spawn(move || for _ in lines {});
        Sgardd(child, addr)
    }
}

#[test]
fn a_pull_into_a_new_repository_knows_the_unchanged_secret() {
    let t = tracked_secret();
    let srv_dir = tempfile::tempdir().unwrap();
    let srv = Sgardd::start(srv_dir.path());
    t.sgard(["push", "-r", &srv.1]).ok();
    // The same home pulls into a new repository: its file is there already.
    let r = run(&t, &["--repo", "~/other", "pull", "-r", &srv.1], &[]);
    r.ok();
    let r = run(&t, &["--repo", "~/other", "status", "--exit-code"], &[]);
    r.ok().stdout_has("ok         ~/.secret");
}

// ------------------------------------------------------------------ undo

#[test]
fn undo_says_what_it_reverses_before_it_does() {
    let t = TestEnv::init();
    t.write("a", "stored a\n");
    t.write("b", "stored b\n");
    t.sgard(["add", "a", "b"]).ok();
    t.sgard(["checkpoint"]).ok();
    t.write("a", "local a\n");
    fs::remove_file(t.path("b")).unwrap();
    t.sgard(["restore", "-f"]).ok();

    let want = "Undo the restore of 2026-03-23 12:00:00 UTC on this machine: 2 paths: ~/a, ~/b\n";
    let r = t.sgard(["undo", "--dry-run"]);
    r.ok().stdout_has(want).stdout_has("Dry run");
    assert!(r.stdout.starts_with(want), "{r:#?}");
    // Not a terminal, nothing unusual: no question (scripts go on).
    let r = t.sgard(["undo"]);
    r.ok().stdout_has(want).stdout_has("Undo complete.");
    assert!(!r.stdout.contains("Reverse it?"), "{r:#?}");
    assert_eq!(t.read("a"), b"local a\n");
    assert!(!t.path("b").exists());
}

#[test]
fn undo_lists_at_most_twenty_paths() {
    let t = TestEnv::init();
    let names: Vec<String> = (0..25).map(|i| format!("d/f{i:02}")).collect();
    for n in &names {
        t.write(n, "stored\n");
    }
    t.sgard(["add", "d"]).ok();
    t.sgard(["checkpoint"]).ok();
    for n in &names {
        fs::remove_file(t.path(n)).unwrap();
    }
    t.sgard(["restore"]).ok();
    let r = t.sgard(["undo", "-n"]);
    r.ok()
        .stdout_has("on this machine: 25 paths: ~/d/f00, ~/d/f01, ")
        .stdout_has(", ~/d/f19, and 5 more\n");
    assert!(!r.stdout.contains("~/d/f20,"), "{r:#?}");
}

#[test]
fn undo_does_not_silently_reach_past_a_restore_that_changed_nothing() {
    let mut t = TestEnv::init();
    t.write("f", "one\n");
    t.sgard(["add", "f"]).ok();
    t.sgard(["checkpoint"]).ok();
    t.now = "2026-03-23T13:00:00Z".into();
    t.write("f", "two\n");
    t.sgard(["checkpoint"]).ok();
    // This one changes the file...
    t.now = "2026-03-23T14:00:00Z".into();
    t.sgard(["restore", "--at", "@~1", "f"]).ok();
    assert_eq!(t.read("f"), b"one\n");
    // ...this one finds it as it wants it: it changes nothing.
    t.now = "2026-03-23T15:00:00Z".into();
    let r = t.sgard(["restore", "--at", "@~1", "f"]);
    r.ok();

    let note = "The latest restore --at ";
    let when = "(2026-03-23 15:00:00 UTC) changed nothing; the most recent one that changed \
                files was restore --at ";
    // Without a terminal and without -y: refused, nothing changed.
    let r = t.sgard(["undo"]);
    r.code(4)
        .stdout_has(note)
        .stdout_has(when)
        .stdout_has(" at 2026-03-23 14:00:00 UTC.")
        .stderr_has("not confirmed");
    assert_eq!(t.read("f"), b"one\n");
    // The dry run shows the same, and asks nothing.
    t.sgard(["undo", "--dry-run"]).ok().stdout_has(when);
    // An answer on stdin counts.
    let r = t.sgard_stdin(["undo"], "n\n");
    r.code(4).stdout_has("Reverse it? [y/N]");
    assert_eq!(t.read("f"), b"one\n");
    let r = t.sgard_stdin(["undo"], "y\n");
    r.ok().stdout_has("Undo complete.");
    assert_eq!(t.read("f"), b"two\n");

    // -y needs no answer.
    t.sgard(["undo"]).ok();
    assert_eq!(t.read("f"), b"one\n");
    t.sgard(["restore", "--at", "@~1", "f"]).ok();
    t.sgard(["undo"]).code(4);
    t.sgard(["undo", "-y"]).ok();
    assert_eq!(t.read("f"), b"two\n");
}

// ------------------------------------------------------------------ folder modes

/// The `folders:` records of a manifest, as `(path, mode)` pairs.
fn folder_records(manifest: &str) -> Vec<(String, String)> {
    let Some(rest) = manifest.split("\nfolders:\n").nth(1) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut lines = rest.lines();
    while let Some(l) = lines.next() {
        let Some(p) = l.strip_prefix("    - path: ") else {
            break;
        };
        let m = lines.next().unwrap().trim().strip_prefix("mode: ").unwrap();
        out.push((p.to_owned(), m.trim_matches('"').to_owned()));
    }
    out
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn restore_creates_folders_with_the_modes_they_had_where_they_were_added() {
    let t = TestEnv::init();
    t.write(".ssh/config", "Host *\n");
    t.write(".config/app/sub/x", "x\n");
    t.chmod(".ssh", 0o700);
    t.chmod(".config/app", 0o750);
    t.sgard(["add", ".ssh/config", ".config/app"]).ok();
    // Only what is not 0755, never the home; the folders are no entries.
    assert_eq!(
        folder_records(&t.manifest()),
        pairs(&[("~/.config/app", "0750"), ("~/.ssh", "0700")])
    );
    assert!(!t.sgard(["list"]).stdout.contains("dir "));

    // A new machine: another home restoring from this repository.
    let other = TestEnv::new();
    let repo = t.repo();
    let r = other.sgard([
        std::ffi::OsStr::new("--repo"),
        repo.as_os_str(),
        "restore".as_ref(),
    ]);
    r.ok();
    assert_eq!(mode_of(&other.path(".ssh")), 0o700);
    assert_eq!(mode_of(&other.path(".config/app")), 0o750);
    assert_eq!(mode_of(&other.path(".config/app/sub")), 0o755 & !umask());
    assert_eq!(other.read(".ssh/config"), b"Host *\n");

    // A folder that exists keeps its mode.
    let third = TestEnv::new();
    fs::create_dir(third.path(".ssh")).unwrap();
    third.chmod(".ssh", 0o755);
    third
        .sgard([
            std::ffi::OsStr::new("--repo"),
            repo.as_os_str(),
            "restore".as_ref(),
        ])
        .ok();
    assert_eq!(mode_of(&third.path(".ssh")), 0o755);
    // ...and its checkpoint does not loosen the record: it never agreed
    // with the repository on that folder.
    third.write(".ssh/config", "Host *\n  User me\n");
    third
        .sgard([
            std::ffi::OsStr::new("--repo"),
            repo.as_os_str(),
            "checkpoint".as_ref(),
        ])
        .ok();
    assert!(t.manifest().contains("User me") || t.manifest().contains(&sha("Host *\n  User me\n")));
    assert_eq!(
        folder_records(&t.manifest()),
        pairs(&[("~/.config/app", "0750"), ("~/.ssh", "0700")])
    );
}

/// This process's umask (what folders made without a record get).
fn umask() -> u32 {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("x");
    fs::create_dir(&p).unwrap();
    0o777 & !mode_of(&p)
}

#[test]
fn a_folder_mode_changed_here_is_recorded_by_checkpoint() {
    let t = TestEnv::init();
    t.write(".ssh/config", "Host *\n");
    t.chmod(".ssh", 0o700);
    t.sgard(["add", ".ssh/config"]).ok();
    t.sgard(["checkpoint"]).ok();
    // Only the folder changed: that is a change to record.
    t.chmod(".ssh", 0o750);
    let r = t.sgard(["checkpoint"]);
    r.ok()
        .stdout_has("Checkpoint complete: snapshot ")
        .stderr_has("recorded the mode of folder ~/.ssh (0750)");
    assert_eq!(folder_records(&t.manifest()), pairs(&[("~/.ssh", "0750")]));
    // The Go sgard drops the list when it rewrites the manifest: the next
    // checkpoint records it again from this disk.
    let m = t.manifest();
    let i = m.find("folders:\n").unwrap();
    fs::write(t.repo().join("manifest.yaml"), &m[..i]).unwrap();
    assert_eq!(folder_records(&t.manifest()), Vec::new());
    t.sgard(["checkpoint"]).ok();
    assert_eq!(folder_records(&t.manifest()), pairs(&[("~/.ssh", "0750")]));
    // Back to the default: the record goes.
    t.chmod(".ssh", 0o755);
    t.sgard(["checkpoint"]).ok();
    assert_eq!(folder_records(&t.manifest()), Vec::new());
    assert!(!t.manifest().contains("folders:"));
    // Nothing tracked below it any more: no record either.
    t.chmod(".ssh", 0o700);
    t.sgard(["add", ".ssh/config"]).ok();
    assert_eq!(folder_records(&t.manifest()), pairs(&[("~/.ssh", "0700")]));
    t.sgard(["remove", ".ssh/config"]).ok();
    t.write("f", "f\n");
    t.sgard(["add", "f"]).ok();
    assert_eq!(folder_records(&t.manifest()), Vec::new());
}

#[test]
fn folder_modes_travel_through_push_and_pull_without_special_bits() {
    let a = TestEnv::init();
    a.write(".ssh/config", "Host *\n");
    a.write("shared/x", "x\n");
    a.chmod(".ssh", 0o700);
    fs::set_permissions(a.path("shared"), fs::Permissions::from_mode(0o2770)).unwrap();
    a.sgard(["add", ".ssh/config", "shared/x"]).ok();
    assert_eq!(
        folder_records(&a.manifest()),
        pairs(&[("~/.ssh", "0700"), ("~/shared", "2770")])
    );
    a.sgard(["checkpoint"]).ok();
    let srv_dir = tempfile::tempdir().unwrap();
    let srv = Sgardd::start(srv_dir.path());
    a.sgard(["push", "-r", &srv.1]).ok();

    let b = TestEnv::new();
    let r = b.sgard(["pull", "-r", &srv.1]);
    r.ok();
    assert_eq!(mode_of(&b.path(".ssh")), 0o700);
    // setgid from a server is dropped unless allowed.
    assert_eq!(mode_of(&b.path("shared")), 0o770);
    assert_eq!(
        folder_records(&b.manifest()),
        pairs(&[("~/.ssh", "0700"), ("~/shared", "0770")])
    );
    let c = TestEnv::new();
    c.sgard(["pull", "--allow-setuid", "-r", &srv.1]).ok();
    assert_eq!(mode_of(&c.path("shared")), 0o2770);
    // And through the history: the snapshot holds them too.
    let recs = log_json(&b);
    let pull = recs
        .iter()
        .find(|r| r["reason"] == "pull")
        .unwrap_or_else(|| panic!("no pull record: {recs:?}"));
    let id = pull["id"].as_str().unwrap();
    let snapshot = fs::read_to_string(b.blob_path(id)).unwrap();
    assert_eq!(
        folder_records(&snapshot),
        pairs(&[("~/.ssh", "0700"), ("~/shared", "0770")]),
        "{snapshot}"
    );
}

// ------------------------------------------------------------------ add --follow

/// A stow-style home: `~/.config/tmux -> <outside>/dotfiles/tmux`, a
/// folder outside the home holding `tmux.conf` and `plugins/p.conf`.
fn stowed() -> (TestEnv, std::path::PathBuf) {
    let t = TestEnv::init();
    let dots = t.outside().join("dotfiles/tmux");
    fs::create_dir_all(dots.join("plugins")).unwrap();
    fs::write(dots.join("tmux.conf"), "set -g mouse on\n").unwrap();
    fs::write(dots.join("plugins/p.conf"), "plugin\n").unwrap();
    fs::create_dir_all(t.path(".config")).unwrap();
    t.write(".config/other", "other\n");
    symlink(&dots, t.path(".config/tmux")).unwrap();
    (t, dots)
}

#[test]
fn a_walk_that_meets_a_symlinked_folder_says_so() {
    let (t, dots) = stowed();
    let r = t.sgard(["add", ".config"]);
    let note = format!(
        "sgard: ~/.config/tmux is a symlink to a folder ({}): stored as a link; \
         `sgard add --follow` stores what it points to\n",
        dots.display()
    );
    r.ok().stderr_has(&note);
    assert_eq!(r.stderr.matches("is a symlink").count(), 1, "{r:#?}");
    let m = t.manifest();
    assert!(
        m.contains("- path: ~/.config/tmux\n      type: link"),
        "{m}"
    );
    assert!(!m.contains("tmux.conf"), "{m}");
}

#[test]
fn add_follow_stores_what_a_symlinked_folder_points_to() {
    let (t, dots) = stowed();
    t.sgard(["add", "--follow", ".config"]).ok();
    let m = t.manifest();
    for p in [
        "~/.config/other",
        "~/.config/tmux/tmux.conf",
        "~/.config/tmux/plugins/p.conf",
    ] {
        assert!(m.contains(&format!("- path: {p}\n")), "{p}: {m}");
    }
    assert!(!m.contains("type: link"), "{m}");
    // Later commands read through the link.
    t.sgard(["status", "--exit-code"]).ok();
    fs::write(dots.join("tmux.conf"), "set -g mouse off\n").unwrap();
    t.sgard(["status"])
        .ok()
        .stdout_has("modified   ~/.config/tmux/tmux.conf");
    t.sgard(["diff"]).ok().stdout_has("+set -g mouse off");
    t.sgard(["checkpoint"])
        .ok()
        .stdout_has("updated    ~/.config/tmux/tmux.conf");
    assert!(t.manifest().contains(&sha("set -g mouse off\n")));

    // Restore writes through the link this machine followed: the link stays.
    fs::remove_file(dots.join("plugins/p.conf")).unwrap();
    t.sgard(["restore"])
        .ok()
        .stdout_has("created    ~/.config/tmux/plugins/p.conf");
    assert_eq!(fs::read(dots.join("plugins/p.conf")).unwrap(), b"plugin\n");
    assert!(
        fs::symlink_metadata(t.path(".config/tmux"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    fs::write(dots.join("tmux.conf"), "local edit\n").unwrap();
    t.sgard(["restore", "-f", ".config/tmux/tmux.conf"]).ok();
    assert_eq!(
        fs::read(dots.join("tmux.conf")).unwrap(),
        b"set -g mouse off\n"
    );
    assert!(
        fs::symlink_metadata(t.path(".config/tmux"))
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // A link pointing elsewhere now is not written through.
    let elsewhere = t.outside().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::remove_file(t.path(".config/tmux")).unwrap();
    symlink(&elsewhere, t.path(".config/tmux")).unwrap();
    let r = t.sgard(["restore", "-f"]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("is a symlink; sgard never writes through one");
    assert!(!elsewhere.join("tmux.conf").exists());

    // A new machine gets a real folder.
    let other = TestEnv::new();
    let repo = t.repo();
    other
        .sgard([
            std::ffi::OsStr::new("--repo"),
            repo.as_os_str(),
            "restore".as_ref(),
        ])
        .ok();
    let md = fs::symlink_metadata(other.path(".config/tmux")).unwrap();
    assert!(md.is_dir());
    assert_eq!(other.read(".config/tmux/tmux.conf"), b"set -g mouse off\n");
}

#[test]
fn add_follow_of_the_link_itself_and_of_a_later_walk() {
    let (t, _dots) = stowed();
    t.sgard(["add", "--follow", ".config/tmux"]).ok();
    assert!(t.manifest().contains("- path: ~/.config/tmux/tmux.conf\n"));
    assert!(!t.manifest().contains("type: link"), "{}", t.manifest());
    // A walk without --follow keeps following what this machine followed
    // (a link entry there would be refused below its files).
    let r = t.sgard(["add", ".config"]);
    r.ok();
    assert!(!r.stderr.contains("is a symlink"), "{r:#?}");
    assert!(t.manifest().contains("- path: ~/.config/other\n"));
}

#[test]
fn add_follow_ends_loops_with_a_note() {
    let t = TestEnv::init();
    t.write("d/sub/f", "f\n");
    symlink("..", t.path("d/sub/up")).unwrap();
    symlink(t.path("d"), t.path("d/sub/again")).unwrap();
    let r = t.sgard(["add", "--follow", "d"]);
    r.ok()
        .stderr_has("~/d/sub/up is a symlink to a folder it is inside (..): not followed")
        .stderr_has("~/d/sub/again is a symlink to a folder it is inside (");
    let m = t.manifest();
    assert!(m.contains("- path: ~/d/sub/f\n"), "{m}");
    assert!(m.contains("- path: ~/d/sub/up\n      type: link"), "{m}");
    // A link to the home, given as the argument: not followed either.
    symlink(&t.home, t.path("home-again")).unwrap();
    t.sgard(["add", "--follow", "home-again"])
        .ok()
        .stderr_has("~/home-again is a symlink to a folder it is inside");
}

#[test]
fn add_follow_of_a_symlink_to_a_file_tracks_both() {
    let t = TestEnv::init();
    t.write("dotfiles/bashrc", "alias ll='ls -l'\n");
    symlink("dotfiles/bashrc", t.path(".bashrc")).unwrap();
    let r = t.sgard(["add", "--follow", ".bashrc"]);
    r.ok().stderr_has(
        "~/.bashrc is a symlink to a file: tracked the link and the file it points to, \
         ~/dotfiles/bashrc",
    );
    let m = t.manifest();
    assert!(m.contains("- path: ~/.bashrc\n      type: link"), "{m}");
    assert!(m.contains("- path: ~/dotfiles/bashrc\n"), "{m}");
    t.sgard(["status", "--exit-code"]).ok();
    // Without --follow: the link alone, as ever.
    let u = TestEnv::init();
    u.write("dotfiles/bashrc", "x\n");
    symlink("dotfiles/bashrc", u.path(".bashrc")).unwrap();
    u.sgard(["add", ".bashrc"]).ok();
    assert!(!u.manifest().contains("~/dotfiles/bashrc"));
}

#[test]
fn a_link_tracked_as_a_link_is_replaced_when_followed_and_never_has_entries_below() {
    let (t, _dots) = stowed();
    t.sgard(["add", ".config/tmux"]).ok();
    assert!(t.manifest().contains("type: link"));
    // A file below the tracked link: refused, nothing changed (the
    // manifest would not load again).
    let before = t.manifest();
    let r = t.sgard(["add", ".config/tmux/tmux.conf"]);
    r.code(1)
        .stderr_has("~/.config/tmux/tmux.conf: is below ~/.config/tmux, which is tracked as a file or a symlink");
    assert_eq!(t.manifest(), before);
    t.sgard(["status"]).ok();
    // Followed now: the link's entry gives way to the files.
    let r = t.sgard(["add", "--follow", ".config/tmux"]);
    r.ok()
        .stderr_has("~/.config/tmux was tracked as a symlink; it is followed now");
    let m = t.manifest();
    assert!(!m.contains("type: link"), "{m}");
    assert!(m.contains("- path: ~/.config/tmux/tmux.conf\n"), "{m}");
    t.sgard(["status", "--exit-code"]).ok();

    // Another machine with the same link, never followed there: a walk
    // finds files tracked below it and walks it too.
    let other = TestEnv::new();
    fs::create_dir_all(other.path(".config")).unwrap();
    symlink(
        t.outside().join("dotfiles/tmux"),
        other.path(".config/tmux"),
    )
    .unwrap();
    other.write(".config/mine", "mine\n");
    let repo = t.repo();
    let r = other.sgard([
        std::ffi::OsStr::new("--repo"),
        repo.as_os_str(),
        "add".as_ref(),
        ".config".as_ref(),
    ]);
    r.ok();
    let m = t.manifest();
    assert!(!m.contains("type: link"), "{m}");
    assert!(m.contains("- path: ~/.config/mine\n"), "{m}");
}

/// Another machine tracks files under a folder that is a symlink here:
/// a plain `add` of the folder above it never starts following the link
/// (that is this machine's choice alone, `--follow`), so a restore cannot be
/// made to write through it into the place it points to.
#[test]
fn entries_below_a_symlink_here_never_make_add_follow_it() {
    let a = TestEnv::init();
    a.write(".local/share/foo/evil", "from elsewhere\n");
    a.sgard(["add", "~/.local"]).ok();
    let repo = a.repo();
    let repo = repo.to_str().unwrap();
    let b = TestEnv::new();
    let target = b.outside().join("target");
    fs::create_dir_all(&target).unwrap();
    fs::create_dir_all(b.path(".local/share")).unwrap();
    std::os::unix::fs::symlink(&target, b.path(".local/share/foo")).unwrap();
    b.write(".local/other", "mine\n");
    let r = b.sgard(["--repo", repo, "add", "~/.local"]);
    r.ok()
        .stderr_has("~/.local/share/foo is a symlink to a folder")
        .stderr_has("skipped; `sgard add --follow ~/.local/share/foo` follows it");
    let r = b.sgard(["--repo", repo, "restore", "-f"]);
    assert_ne!(r.code, 0, "{r:#?}");
    assert!(
        !target.join("evil").exists(),
        "a restore wrote through a symlink this machine never chose to follow"
    );
    // Chosen here with --follow: then it is followed.
    b.sgard(["--repo", repo, "add", "--follow", "~/.local/share/foo"])
        .ok();
}
