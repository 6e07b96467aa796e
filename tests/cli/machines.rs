//! Several machines sharing one repository folder (a USB stick, an NFS
//! mount): each throwaway HOME is a machine with its own host name and its
//! own machine-local state, all pointed at one `--repo`.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{Run, TestEnv, mode_of, now_secs, set_mtime, sha, spawn_held_at};

/// One machine: a HOME, a host name, and the shared repository.
pub(crate) struct Machine {
    pub(crate) t: TestEnv,
    host: &'static str,
    pub(crate) repo: PathBuf,
}

impl Machine {
    pub(crate) fn new(host: &'static str, repo: &Path) -> Self {
        Machine {
            t: TestEnv::new(),
            host,
            repo: repo.to_path_buf(),
        }
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut c = self
            .t
            .command([std::ffi::OsStr::new("--repo"), self.repo.as_os_str()]);
        c.args(args).env("SGARD_HOSTNAME", self.host);
        c
    }

    /// Runs sgard with stdin closed.
    pub(crate) fn sg(&self, args: &[&str]) -> Run {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .into()
    }

    /// Runs sgard with the passphrase `pass` (and tiny Argon2 parameters
    /// for new key slots), answering `input`.
    pub(crate) fn sg_key(&self, args: &[&str], pass: &str, input: &str) -> Run {
        use std::io::Write;
        let mut child = self
            .command(args)
            .env("SGARD_PASSPHRASE", pass)
            .env("SGARD_TEST_ARGON2", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
        child.wait_with_output().unwrap().into()
    }

    /// Runs sgard answering `input`.
    pub(crate) fn sg_in(&self, args: &[&str], input: &str) -> Run {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
        child.wait_with_output().unwrap().into()
    }

    pub(crate) fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        self.t.write(rel, content)
    }

    pub(crate) fn read(&self, rel: &str) -> String {
        String::from_utf8(self.t.read(rel)).unwrap()
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.t.path(rel)
    }

    /// This machine's status line of `path` (word and detail).
    pub(crate) fn state(&self, path: &str) -> String {
        let r = self.sg(&["status", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| {
            panic!("status --json: {e}; {r:#?}");
        });
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["path"] == path)
            .map(|e| e["state"].as_str().unwrap().to_owned())
            .unwrap_or_else(|| panic!("{path} not in status; {r:#?}"))
    }
}

/// A shared folder and two machines, the desktop having created the
/// repository with `~/.bashrc` checkpointed, the laptop having restored it.
pub(crate) fn desk_and_laptop() -> (tempfile::TempDir, Machine, Machine) {
    let shared = tempfile::tempdir().unwrap();
    let repo = shared.path().join("dotfiles");
    let desk = Machine::new("desktop", &repo);
    let lap = Machine::new("laptop", &repo);
    desk.sg(&["init"]).ok();
    desk.write(".bashrc", "base\n");
    desk.sg(&["add", "~/.bashrc"]).ok();
    desk.sg(&["checkpoint", "-m", "first"]).ok();
    lap.sg(&["restore"]).ok().stdout_has("created    ~/.bashrc");
    (shared, desk, lap)
}

/// The hash the shared manifest records for `path`.
fn stored_hash(repo: &Path, path: &str) -> String {
    let text = fs::read_to_string(repo.join("manifest.yaml")).unwrap();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("- path: {path}") {
            for l in lines.by_ref() {
                if let Some(h) = l.trim().strip_prefix("hash: ") {
                    return h.to_owned();
                }
            }
        }
    }
    panic!("{path} has no hash in\n{text}");
}

#[test]
fn the_desktops_change_survives_the_laptops_checkpoint() {
    let (_shared, desk, lap) = desk_and_laptop();
    desk.write(".bashrc", "base\nalias dt=1\n");
    desk.sg(&["checkpoint", "-m", "dt"]).ok();

    // The laptop never touched it: behind, not modified.
    let st = lap.sg(&["status"]);
    st.ok()
        .stdout_has("behind     ~/.bashrc  (changed in the repository: content)");
    lap.sg(&["status", "--exit-code"]).code(1);

    // Its checkpoint leaves the desktop's work alone, and says so.
    let r = lap.sg(&["checkpoint", "-m", "save my work"]);
    r.ok().stdout_has("behind     ~/.bashrc");
    assert_eq!(
        stored_hash(&desk.repo, "~/.bashrc"),
        sha("base\nalias dt=1\n")
    );

    // Restore brings it without a question (stdin closed).
    let r = lap.sg(&["restore"]);
    r.ok();
    assert!(!r.stdout.contains("Overwrite"), "{r:#?}");
    assert_eq!(lap.read(".bashrc"), "base\nalias dt=1\n");
    assert_eq!(lap.state("~/.bashrc"), "ok");
    assert_eq!(desk.state("~/.bashrc"), "ok");

    // And the laptop's own edit is its own again.
    lap.write(".bashrc", "base\nalias dt=1\nalias lp=1\n");
    assert_eq!(lap.state("~/.bashrc"), "modified");
    lap.sg(&["checkpoint"])
        .ok()
        .stdout_has("updated    ~/.bashrc");
    assert_eq!(desk.state("~/.bashrc"), "behind");
    desk.sg(&["restore"]).ok();
    assert_eq!(desk.read(".bashrc"), "base\nalias dt=1\nalias lp=1\n");
}

#[test]
fn a_mode_change_and_a_link_target_change_from_another_machine_survive() {
    let (_shared, desk, lap) = desk_and_laptop();
    desk.write(".ssh/config", "Host *\n");
    desk.t.chmod(".ssh/config", 0o644);
    symlink("profile-a", desk.path(".profile")).unwrap();
    desk.sg(&["add", "~/.ssh/config", "~/.profile"]).ok();
    desk.sg(&["checkpoint"]).ok();
    lap.sg(&["restore"]).ok();
    assert_eq!(mode_of(&lap.path(".ssh/config")), 0o644);

    desk.t.chmod(".ssh/config", 0o600);
    fs::remove_file(desk.path(".profile")).unwrap();
    symlink("profile-b", desk.path(".profile")).unwrap();
    desk.sg(&["checkpoint"]).ok();

    assert_eq!(lap.state("~/.ssh/config"), "behind");
    assert_eq!(lap.state("~/.profile"), "behind");
    lap.sg(&["status"])
        .ok()
        .stdout_has("changed in the repository: mode 0644 -> 0600");
    // The laptop's checkpoint keeps them; its restore takes them, unasked.
    lap.sg(&["checkpoint"]).ok();
    let m = fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap();
    assert!(m.contains("mode: \"0600\""), "{m}");
    assert!(m.contains("target: profile-b"), "{m}");
    lap.sg(&["restore"]).ok();
    assert_eq!(mode_of(&lap.path(".ssh/config")), 0o600);
    assert_eq!(
        fs::read_link(lap.path(".profile")).unwrap(),
        PathBuf::from("profile-b")
    );
    assert_eq!(lap.state("~/.profile"), "ok");
}

#[test]
fn a_conflict_is_refused_and_each_resolution_settles_it() {
    let (_shared, desk, lap) = desk_and_laptop();
    let conflict = |desk_text: &str, lap_text: &str| {
        desk.write(".bashrc", desk_text);
        desk.sg(&["checkpoint"]).ok();
        lap.write(".bashrc", lap_text);
        assert_eq!(lap.state("~/.bashrc"), "conflict");
    };

    // Both changed: checkpoint keeps the repository's version, exit 4.
    conflict("base\ndesk 1\n", "base\nlap 1\n");
    let r = lap.sg(&["checkpoint", "-m", "mine"]);
    r.code(4)
        .stdout_has("conflict   ~/.bashrc (changed here (content) and in the repository (content)");
    r.stderr_has("1 entry changed both here and in the repository was not recorded: ~/.bashrc");
    assert_eq!(stored_hash(&desk.repo, "~/.bashrc"), sha("base\ndesk 1\n"));
    // A restore that cannot ask refuses it (exit 4) and writes nothing.
    let r = lap.sg(&["restore"]);
    r.code(4).stdout_has(
        "~/.bashrc: changed here (content) and in the repository (content). Overwrite it?",
    );
    r.stdout_has("refused    ~/.bashrc");
    assert_eq!(lap.read(".bashrc"), "base\nlap 1\n");
    // `d` shows the difference and asks again; `n` keeps it.
    let r = lap.sg_in(&["restore"], "d\nn\n");
    r.ok()
        .stdout_has("--- ~/.bashrc (repository)\n+++ ~/.bashrc (current)\n@@ -1,2 +1,2 @@\n base\n-desk 1\n+lap 1\n")
        .stdout_has("kept       ~/.bashrc");
    // Answering no and checkpointing later still loses nothing.
    lap.sg(&["checkpoint"]).code(4);
    assert_eq!(stored_hash(&desk.repo, "~/.bashrc"), sha("base\ndesk 1\n"));

    // 1. add: this machine's content wins.
    lap.sg(&["add", "~/.bashrc"]).ok();
    assert_eq!(lap.state("~/.bashrc"), "ok");
    assert_eq!(stored_hash(&desk.repo, "~/.bashrc"), sha("base\nlap 1\n"));
    assert_eq!(desk.state("~/.bashrc"), "behind");
    desk.sg(&["restore"]).ok();

    // 2. restore -f: the repository's content wins.
    conflict("base\nlap 1\ndesk 2\n", "base\nlap 1\nlap 2\n");
    lap.sg(&["restore", "-f", "~/.bashrc"]).ok();
    assert_eq!(lap.read(".bashrc"), "base\nlap 1\ndesk 2\n");
    assert_eq!(lap.state("~/.bashrc"), "ok");

    // 3. merge, clean: both edits, recorded by the next checkpoint.
    conflict(
        "top desk\nbase\nlap 1\ndesk 2\n",
        "base\nlap 1\ndesk 2\nbottom lap\n",
    );
    let r = lap.sg(&["merge", "~/.bashrc"]);
    r.ok().stdout_has("merged     ~/.bashrc");
    let merged = "top desk\nbase\nlap 1\ndesk 2\nbottom lap\n";
    assert_eq!(lap.read(".bashrc"), merged);
    assert_eq!(lap.state("~/.bashrc"), "modified");
    lap.sg(&["checkpoint"])
        .ok()
        .stdout_has("updated    ~/.bashrc");
    assert_eq!(stored_hash(&desk.repo, "~/.bashrc"), sha(merged));
    desk.sg(&["restore"]).ok();
    assert_eq!(desk.read(".bashrc"), merged);
    // The merge is undoable like a restore.
    conflict("desk line\n", "lap line\n");
    lap.sg(&["merge", "~/.bashrc"]).code(4);
    lap.sg(&["undo"]).ok();
    assert_eq!(lap.read(".bashrc"), "lap line\n");
    lap.sg(&["add", "~/.bashrc"]).ok();
    desk.sg(&["restore"]).ok();

    // 4. merge with conflict markers: exit 4, markers on disk, settled.
    conflict("lap line\ndesk edit\n", "lap line\nlap edit\n");
    let r = lap.sg(&["merge", "~/.bashrc"]);
    r.code(4)
        .stdout_has("conflicts  ~/.bashrc (1 conflict marked");
    let text = lap.read(".bashrc");
    assert!(
        text.contains("<<<<<<< ours\nlap edit\n") && text.contains("desk edit\n>>>>>>> theirs"),
        "{text}"
    );
    // Not a change to record while the markers are there.
    assert_eq!(lap.state("~/.bashrc"), "conflict");
    lap.write(".bashrc", "lap line\ndesk edit\nlap edit\n");
    lap.sg(&["checkpoint"]).ok();
    desk.sg(&["restore"]).ok();
    assert_eq!(desk.read(".bashrc"), "lap line\ndesk edit\nlap edit\n");
}

#[test]
fn a_fresh_machine_with_an_older_different_file_is_asked() {
    let (shared, desk, _lap) = desk_and_laptop();
    let fresh = Machine::new("fresh", &shared.path().join("dotfiles"));
    // Its own ~/.bashrc, much older than the checkpoint: no record of a
    // sync here, so it is a question, never a silent overwrite.
    let p = fresh.write(".bashrc", "my own\n");
    set_mtime(&p, now_secs() - 86_400 * 365);
    let st = fresh.sg(&["status"]);
    st.ok().stdout_has(
        "conflict   ~/.bashrc  (differs from the repository (content), and this machine has \
         no record of syncing it)",
    );
    fresh.sg(&["checkpoint"]).code(4);
    assert_eq!(stored_hash(&desk.repo, "~/.bashrc"), sha("base\n"));
    fresh.sg(&["restore"]).code(4);
    assert_eq!(fresh.read(".bashrc"), "my own\n");
    fresh.sg_in(&["restore"], "y\n").ok();
    assert_eq!(fresh.read(".bashrc"), "base\n");
    assert_eq!(fresh.state("~/.bashrc"), "ok");
    // An identical file on a fresh machine is simply ok.
    let other = Machine::new("other", &shared.path().join("dotfiles"));
    other.write(".bashrc", "base\n");
    assert_eq!(other.state("~/.bashrc"), "ok");
}

#[test]
fn three_machines_edit_different_files_and_converge() {
    let (shared, desk, lap) = desk_and_laptop();
    let repo = shared.path().join("dotfiles");
    let third = Machine::new("third", &repo);
    desk.write(".vimrc", "set nu\n");
    desk.sg(&["add", "~/.vimrc"]).ok();
    desk.sg(&["checkpoint"]).ok();
    for m in [&lap, &third] {
        m.sg(&["restore"]).ok();
    }
    // Each changes one thing, then checkpoints without restoring first.
    desk.write(".vimrc", "set nu\nsyntax on\n");
    desk.sg(&["checkpoint"]).ok();
    lap.write(".bashrc", "base\nlaptop\n");
    lap.sg(&["checkpoint"]).ok();
    third.write(".gitconfig", "[user]\n");
    third.sg(&["add", "~/.gitconfig"]).ok();
    third.sg(&["checkpoint"]).ok();
    // Nobody lost anything; each restore brings the others' work unasked.
    for m in [&desk, &lap, &third] {
        let r = m.sg(&["restore"]);
        r.ok();
        assert!(!r.stdout.contains("Overwrite"), "{}: {r:#?}", m.host);
        assert_eq!(m.read(".vimrc"), "set nu\nsyntax on\n", "{}", m.host);
        assert_eq!(m.read(".bashrc"), "base\nlaptop\n", "{}", m.host);
        assert_eq!(m.read(".gitconfig"), "[user]\n", "{}", m.host);
    }
    for m in [&desk, &lap, &third] {
        m.sg(&["status", "--exit-code"]).ok();
    }
}

#[test]
fn the_base_is_machine_local_and_follows_the_repository_when_it_moves() {
    let (shared, desk, lap) = desk_and_laptop();
    desk.write(".bashrc", "base\nnew\n");
    desk.sg(&["checkpoint"]).ok();
    // Nothing of the base is in the repository.
    let repo = shared.path().join("dotfiles");
    for name in fs::read_dir(&repo).unwrap() {
        let n = name.unwrap().file_name();
        assert!(
            [
                "manifest.yaml",
                "blobs",
                ".gitignore",
                ".gitattributes",
                "lock.turn",
                "history.yaml",
                "lock",
                "repo-id",
                "chunking"
            ]
            .contains(&n.to_str().unwrap()),
            "unexpected {n:?} in the repository"
        );
    }
    assert!(lap.t.state_of(&repo).join("index").is_file());
    assert!(!lap.t.state_of(&repo).join("base").exists());
    // The stick mounted at another path is the same repository.
    let moved = shared.path().join("mounted-elsewhere");
    fs::rename(&repo, &moved).unwrap();
    let lap2 = Machine {
        t: lap.t,
        host: lap.host,
        repo: moved,
    };
    assert_eq!(lap2.state("~/.bashrc"), "behind");
}

#[test]
fn a_damaged_base_makes_differences_questions() {
    let (shared, desk, lap) = desk_and_laptop();
    desk.write(".bashrc", "base\nnew\n");
    desk.sg(&["checkpoint"]).ok();
    let index = lap
        .t
        .state_of(&shared.path().join("dotfiles"))
        .join("index");
    let mut bytes = fs::read(&index).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    fs::write(&index, bytes).unwrap();
    let r = lap.sg(&["status"]);
    r.ok().stderr_has("was damaged and is rebuilt");
    r.stdout_has("conflict   ~/.bashrc");
    // Never a silent overwrite: a restore that cannot ask refuses.
    lap.sg(&["restore"]).code(4);
    assert_eq!(lap.read(".bashrc"), "base\n");
    lap.sg_in(&["restore"], "y\n").ok();
    assert_eq!(lap.state("~/.bashrc"), "ok");
}

#[test]
fn undo_reverses_only_this_machines_operations() {
    let (_shared, desk, lap) = desk_and_laptop();
    desk.write(".bashrc", "base\ndesk\n");
    desk.sg(&["checkpoint"]).ok();
    lap.sg(&["restore"]).ok();
    // The desktop's newest restore-like operation is not the laptop's.
    desk.write(".vimrc", "v\n");
    desk.sg(&["add", "~/.vimrc"]).ok();
    fs::remove_file(desk.path(".vimrc")).unwrap();
    desk.sg(&["restore"]).ok();
    let r = lap.sg(&["undo"]);
    r.ok();
    assert_eq!(
        lap.read(".bashrc"),
        "base\n",
        "the laptop's own restore is undone"
    );
    assert!(desk.path(".vimrc").exists());
}

/// The crash points of a restore: after its safety snapshot (nothing
/// written), with every file staged (not yet in place), and with every file
/// in place but the base not saved.
const RESTORE_CRASH_POINTS: [&str; 3] = [
    "restore-after-snapshot",
    "restore-staged",
    "restore-before-base",
];

#[test]
fn a_restore_killed_at_any_point_is_finished_by_the_next_one() {
    for point in RESTORE_CRASH_POINTS {
        let (_shared, desk, lap) = desk_and_laptop();
        desk.write(".vimrc", "v1\n");
        desk.write(".config/a", "a1\n");
        desk.sg(&["add", "~/.vimrc", "~/.config/a"]).ok();
        desk.sg(&["checkpoint"]).ok();
        lap.sg(&["restore"]).ok();
        desk.write(".bashrc", "base\nd\n");
        desk.write(".vimrc", "v2\n");
        desk.write(".config/a", "a2\n");
        desk.sg(&["checkpoint"]).ok();

        let r: Run = lap
            .command(&["restore"])
            .env("SGARD_TEST_CRASH_AT", point)
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, -1, "{point}: not killed; {r:#?}");
        // Whatever was written is ok, the rest is still behind; nothing is
        // a conflict or a local change, and a checkpoint records nothing.
        for p in ["~/.bashrc", "~/.vimrc", "~/.config/a"] {
            let s = lap.state(p);
            assert!(s == "ok" || s == "behind", "{point}: {p} is {s}");
        }
        let r = lap.sg(&["checkpoint"]);
        r.ok();
        assert!(!r.stdout.contains("updated"), "{point}: {r:#?}");
        let r = lap.sg(&["restore"]);
        r.ok();
        assert!(!r.stdout.contains("Overwrite"), "{point}: {r:#?}");
        assert_eq!(lap.read(".bashrc"), "base\nd\n", "{point}");
        assert_eq!(lap.read(".vimrc"), "v2\n", "{point}");
        assert_eq!(lap.read(".config/a"), "a2\n", "{point}");
        lap.sg(&["status", "--exit-code"]).ok();
        lap.sg(&["verify"]).ok();
    }
}

/// Runs git in `dir`, failing the test on an error; `None` when git is not
/// installed.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "protocol.file.allow=always",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_git_clone_of_the_repository_restores_on_a_new_home() {
    let shared = tempfile::tempdir().unwrap();
    let origin = shared.path().join("origin");
    let desk = Machine::new("desktop", &origin);
    desk.sg(&["init"]).ok();
    if git(&origin, &["init", "-q"]).is_none() {
        eprintln!("skipping: git is not installed");
        return;
    }
    desk.write(".bashrc", "export A=1\n");
    desk.write(".config/app/conf", "x = 1\n");
    desk.sg(&["add", "~/.bashrc", "~/.config/app"]).ok();
    desk.sg(&["checkpoint", "-m", "first"]).ok();
    git(&origin, &["add", "-A"]);
    git(&origin, &["commit", "-qm", "first"]);
    // Only machine-local files stay out of git.
    let tracked = git(&origin, &["ls-files"]).unwrap();
    assert!(tracked.contains("blobs/"), "{tracked}");
    assert!(tracked.contains("repo-id"), "{tracked}");
    assert!(!tracked.contains("lock"), "{tracked}");

    // A new machine clones and restores.
    let clone = shared.path().join("clone");
    git(shared.path(), &["clone", "-q", "origin", "clone"]);
    let lap = Machine::new("laptop", &clone);
    lap.sg(&["status"]).ok().stdout_has("missing    ~/.bashrc");
    lap.sg(&["restore"]).ok();
    assert_eq!(lap.read(".bashrc"), "export A=1\n");
    assert_eq!(lap.read(".config/app/conf"), "x = 1\n");
    lap.sg(&["status", "--exit-code"]).ok();
    lap.sg(&["verify"]).ok();

    // The desktop commits a change; after `git pull` the laptop is behind.
    desk.write(".bashrc", "export A=2\n");
    desk.sg(&["checkpoint", "-m", "second"]).ok();
    git(&origin, &["add", "-A"]);
    git(&origin, &["commit", "-qm", "second"]);
    git(&clone, &["pull", "-q", "--ff-only"]);
    assert_eq!(lap.state("~/.bashrc"), "behind");
    lap.sg(&["restore"]).ok();
    assert_eq!(lap.read(".bashrc"), "export A=2\n");
}

#[test]
fn a_clone_without_blobs_says_so_and_a_failed_restore_records_nothing() {
    let shared = tempfile::tempdir().unwrap();
    let origin = shared.path().join("origin");
    let desk = Machine::new("desktop", &origin);
    desk.sg(&["init"]).ok();
    if git(&origin, &["init", "-q"]).is_none() {
        eprintln!("skipping: git is not installed");
        return;
    }
    // The .gitignore older versions wrote: blobs stay out of git.
    fs::write(
        origin.join(".gitignore"),
        "blobs/\ntags\nlock\nsync-state\n",
    )
    .unwrap();
    desk.write(".bashrc", "export A=1\n");
    desk.sg(&["add", "~/.bashrc"]).ok();
    desk.sg(&["checkpoint"]).ok();
    git(&origin, &["add", "-A"]);
    git(&origin, &["commit", "-qm", "first"]);
    let clone = shared.path().join("clone");
    git(shared.path(), &["clone", "-q", "origin", "clone"]);
    let lap = Machine::new("laptop", &clone);

    // Not "missing" with exit 0: the repository lacks the content.
    let r = lap.sg(&["status"]);
    r.code(3)
        .stdout_has("error      ~/.bashrc")
        .stderr_has("content (blob");
    r.stderr_has("is missing from the repository");
    r.stderr_has("lacks the content of 1 entry");
    // Each cause once: one error line for the entry, no second one.
    assert_eq!(r.stderr.matches("error:").count(), 1, "{r:#?}");
    let history = fs::read(clone.join("history.yaml")).unwrap();
    let r = lap.sg(&["restore"]);
    r.code(3).stderr_has("~/.bashrc");
    assert!(!lap.path(".bashrc").exists());
    assert_eq!(
        fs::read(clone.join("history.yaml")).unwrap(),
        history,
        "a restore that wrote nothing recorded a snapshot"
    );
    assert_eq!(git(&clone, &["status", "--porcelain"]).unwrap(), "");
}

/// `cmd` run with the repository `repo` bind-mounted read-only at `mnt`
/// (private user and mount namespaces: nothing outside the test sees it).
pub(crate) fn read_only(cmd: &Command, repo: &Path, mnt: &Path) -> Command {
    let mut c = Command::new("unshare");
    // -r: a user namespace too, so this works without being root.
    c.arg("-rm")
        .arg("sh")
        .arg("-c")
        .arg(r#"mount --bind "$1" "$2" && mount -o remount,ro,bind "$2" && shift 2 && exec "$@""#)
        .arg("sh")
        .arg(repo)
        .arg(mnt)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(d) = cmd.get_current_dir() {
        c.current_dir(d);
    }
    c.env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            c.env(k, v);
        }
    }
    c.stdin(Stdio::null());
    c
}

/// Every file under `dir` with its bytes (to see that nothing changed).
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_read_only_repository_restores_and_undo_works() {
    let (shared, desk, _lap) = desk_and_laptop();
    let repo = shared.path().join("dotfiles");
    desk.write(".vimrc", "set nu\n");
    desk.sg(&["add", "~/.vimrc"]).ok();
    desk.sg(&["checkpoint"]).ok();
    let mnt = shared.path().join("ro");
    fs::create_dir(&mnt).unwrap();
    let ro = Machine::new("reader", &mnt);
    let run = |args: &[&str]| -> Run {
        read_only(&ro.command(args), &repo, &mnt)
            .output()
            .unwrap()
            .into()
    };
    let probe = run(&["--version"]);
    if probe.code != 0 {
        eprintln!("skipping: cannot bind-mount here ({})", probe.stderr.trim());
        return;
    }
    // The repository-id of the real folder keys this machine's state.
    let ro_state = ro.t.state_of(&repo);
    let before = tree(&repo);
    ro.write(".vimrc", "my own\n");

    for args in [
        &["status"][..],
        &["diff"],
        &["list"],
        &["info", "~/.bashrc"],
        &["log"],
        &["verify"],
        &["restore", "--dry-run"],
    ] {
        let r = run(args);
        assert_eq!(r.code, 0, "{args:?}: {r:#?}");
        assert!(!r.stderr.contains("error"), "{args:?}: {r:#?}");
    }
    let r = run(&["restore"]);
    assert_eq!(r.code, 4, "the local ~/.vimrc is asked about: {r:#?}");
    assert!(r.stderr.contains("is read-only"), "{r:#?}");
    assert_eq!(ro.read(".bashrc"), "base\n");
    assert_eq!(ro.read(".vimrc"), "my own\n");
    let r = run(&["restore", "-f", "~/.vimrc"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(ro.read(".vimrc"), "set nu\n");
    assert!(ro_state.join("undo/history.yaml").is_file());
    let r = run(&["undo"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(
        ro.read(".vimrc"),
        "my own\n",
        "undo did not put the local file back"
    );
    assert_eq!(tree(&repo), before, "a read-only repository was written");
}

#[test]
fn an_upgraded_machine_gets_its_base_from_its_own_history() {
    // Two machines that used an sgard without bases: their records are in
    // the history, but neither has a base file.
    let (shared, desk, lap) = desk_and_laptop();
    let repo = shared.path().join("dotfiles");
    desk.write(".vimrc", "v\n");
    desk.sg(&["add", "~/.vimrc"]).ok();
    desk.sg(&["checkpoint"]).ok();
    lap.sg(&["restore"]).ok();
    lap.write(".bashrc", "base\nlaptop edit\n");
    desk.write(".vimrc", "v2\n");
    desk.sg(&["checkpoint"]).ok();
    // As an older sgard kept them: restores in the shared log, no base.
    for m in [&desk, &lap] {
        let state = m.t.state_of(&repo);
        fs::remove_file(state.join("index")).unwrap();
        let local = fs::read_to_string(state.join("undo/history.yaml")).unwrap_or_default();
        let shared_log = fs::read_to_string(repo.join("history.yaml")).unwrap();
        let moved: String = local.lines().skip(2).map(|l| format!("{l}\n")).collect();
        fs::write(repo.join("history.yaml"), format!("{shared_log}{moved}")).unwrap();
        let blobs = state.join("undo/blobs");
        if blobs.is_dir() {
            let out = Command::new("cp")
                .args(["-a", "--no-clobber"])
                .arg(format!("{}/.", blobs.display()))
                .arg(repo.join("blobs"))
                .output()
                .unwrap();
            assert!(out.status.success());
        }
        let _ = fs::remove_dir_all(state.join("undo"));
    }
    // Records of an older sgard carry no machine id.
    let log = fs::read_to_string(repo.join("history.yaml")).unwrap();
    let legacy: String = log
        .lines()
        .filter(|l| !l.trim_start().starts_with("machine:"))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(repo.join("history.yaml"), legacy).unwrap();
    // The desktop (its checkpoint) and the laptop (its restore) know again
    // what they last synced: a local edit is modified, the other's is behind.
    assert_eq!(lap.state("~/.bashrc"), "modified");
    assert_eq!(lap.state("~/.vimrc"), "behind");
    assert_eq!(desk.state("~/.vimrc"), "ok");
    lap.sg(&["checkpoint"])
        .ok()
        .stdout_has("updated    ~/.bashrc");
    lap.sg(&["restore"]).ok();
    assert_eq!(lap.read(".vimrc"), "v2\n");
}

#[test]
fn restore_answers_all_and_quit_hold_for_the_rest() {
    let (_shared, desk, lap) = desk_and_laptop();
    for f in [".a", ".b", ".c"] {
        desk.write(f, "repo\n");
    }
    desk.sg(&["add", "~/.a", "~/.b", "~/.c"]).ok();
    desk.sg(&["checkpoint"]).ok();
    lap.sg(&["restore"]).ok();
    let edit = || {
        for f in [".a", ".b", ".c"] {
            lap.write(f, "mine\n");
        }
    };
    // `q` at the first question: that one and the rest are kept (an
    // answer, like `n`: exit 0), and nothing more is asked.
    edit();
    let r = lap.sg_in(&["restore"], "q\ny\ny\n");
    r.ok().stdout_has("Restored 0, kept 3 as they are here.");
    assert_eq!(r.stdout.matches("Overwrite it?").count(), 1, "{r:#?}");
    for f in [".a", ".b", ".c"] {
        assert_eq!(lap.read(f), "mine\n", "{f}");
    }
    // `n`, then `a`: the first kept, the second and third overwritten.
    let r = lap.sg_in(&["restore"], "n\na\n");
    r.ok();
    assert_eq!(r.stdout.matches("Overwrite it?").count(), 2, "{r:#?}");
    assert_eq!(lap.read(".a"), "mine\n");
    assert_eq!(lap.read(".b"), "repo\n");
    assert_eq!(lap.read(".c"), "repo\n");
    // An unknown answer explains the choices and asks again.
    let r = lap.sg_in(&["restore", "~/.a"], "what\ny\n");
    r.ok().stdout_has("d - show the difference, then ask again");
    assert_eq!(lap.read(".a"), "repo\n");
}

#[test]
fn checkpoint_and_status_take_paths_and_checkpoint_has_a_dry_run() {
    let (_shared, desk, _lap) = desk_and_laptop();
    desk.write(".vimrc", "v\n");
    desk.sg(&["add", "~/.vimrc"]).ok();
    desk.sg(&["checkpoint"]).ok();
    desk.write(".bashrc", "base\nnew\n");
    desk.write(".vimrc", "v2\n");
    let st = desk.sg(&["status", "~/.vimrc"]);
    st.ok();
    assert_eq!(st.stdout, "modified   ~/.vimrc  (content)\n");
    desk.sg(&["status", "~/nothing"])
        .code(1)
        .stderr_has("not tracked: ~/nothing");

    let manifest = fs::read(desk.repo.join("manifest.yaml")).unwrap();
    let history = fs::read(desk.repo.join("history.yaml")).unwrap();
    let r = desk.sg(&["checkpoint", "--dry-run"]);
    r.ok()
        .stdout_has("update     ~/.bashrc")
        .stdout_has("update     ~/.vimrc")
        .stdout_has("Dry run: would record a snapshot (2 entries); nothing was recorded.");
    assert_eq!(fs::read(desk.repo.join("manifest.yaml")).unwrap(), manifest);
    assert_eq!(fs::read(desk.repo.join("history.yaml")).unwrap(), history);
    assert_eq!(desk.state("~/.vimrc"), "modified");

    // Only the named entry is recorded.
    let r = desk.sg(&["checkpoint", "-m", "vim only", "~/.vimrc"]);
    r.ok().stdout_has("updated    ~/.vimrc");
    assert!(!r.stdout.contains(".bashrc"), "{r:#?}");
    assert_eq!(stored_hash(&desk.repo, "~/.vimrc"), sha("v2\n"));
    assert_eq!(stored_hash(&desk.repo, "~/.bashrc"), sha("base\n"));
    assert_eq!(desk.state("~/.bashrc"), "modified");
}

#[test]
fn a_base_lost_after_the_upgrade_is_not_rebuilt_from_checkpoints() {
    // Since machines keep bases, a checkpoint keeps other machines'
    // versions of what it did not take: rebuilding a lost base from it
    // would make the desktop's change look like the laptop's.
    let (shared, desk, lap) = desk_and_laptop();
    let repo = shared.path().join("dotfiles");
    lap.write(".bashrc", "base\nlaptop\n");
    lap.sg(&["checkpoint"]).ok();
    desk.write(".vimrc", "v\n");
    desk.sg(&["add", "~/.vimrc"]).ok();
    desk.sg(&["checkpoint"]).ok();
    assert_eq!(desk.state("~/.bashrc"), "behind");
    fs::remove_file(desk.t.state_of(&repo).join("index")).unwrap();
    assert_eq!(desk.state("~/.bashrc"), "conflict");
    desk.sg(&["checkpoint"]).code(4);
    assert_eq!(stored_hash(&repo, "~/.bashrc"), sha("base\nlaptop\n"));
}

#[test]
fn a_new_repository_id_carries_this_machines_state_over() {
    let (shared, desk, lap) = desk_and_laptop();
    let repo = shared.path().join("dotfiles");
    desk.write(".bashrc", "base\ndesk\n");
    desk.sg(&["checkpoint"]).ok();
    lap.sg(&["tag", "add", "work"]).ok();
    // A git merge or a copy replaced the id.
    fs::write(repo.join("repo-id"), "0123456789abcdef0123456789abcdef\n").unwrap();
    let r = lap.sg(&["status"]);
    r.ok()
        .stderr_has("has a new id")
        .stdout_has("behind     ~/.bashrc");
    lap.sg(&["tag", "list"]).ok().stdout_has("work");
}

#[test]
fn a_failed_add_leaves_the_base_as_it_was() {
    let (_shared, _desk, lap) = desk_and_laptop();
    let with = |args: &[&str], pass: &str| lap.sg_key(args, pass, "");
    with(&["encrypt", "init"], "right").ok();
    lap.write(".secret", "s1\n");
    with(&["add", "--encrypt", "~/.secret"], "right").ok();
    with(&["checkpoint"], "right").ok();
    lap.write(".bashrc", "base\nprecious edit\n");
    lap.write(".secret", "s2\n");
    // ~/.bashrc is handled first; the secret then fails: nothing is saved,
    // and the base must not claim ~/.bashrc's new content was recorded.
    let r = with(&["add", "~/.bashrc", "~/.secret"], "wrong");
    assert_eq!(r.code, 1, "{r:#?}");
    assert_eq!(lap.state("~/.bashrc"), "modified");
    lap.sg(&["restore", "~/.bashrc"]).code(4);
    assert_eq!(lap.read(".bashrc"), "base\nprecious edit\n");
}

#[test]
fn undo_puts_the_base_back_too() {
    let (_shared, desk, lap) = desk_and_laptop();
    desk.write(".bashrc", "base\ndesk\n");
    desk.sg(&["checkpoint"]).ok();
    // The laptop takes the desktop's change, then undoes that restore: its
    // file is the old version again, and that is `behind`, not a local
    // change that a checkpoint would push over the desktop's.
    lap.sg(&["restore"]).ok();
    lap.sg(&["undo"]).ok();
    assert_eq!(lap.read(".bashrc"), "base\n");
    assert_eq!(lap.state("~/.bashrc"), "behind");
    lap.sg(&["checkpoint"]).ok();
    assert_eq!(stored_hash(&desk.repo, "~/.bashrc"), sha("base\ndesk\n"));
    // Undoing a merge makes the conflict a conflict again.
    lap.write(".bashrc", "base\nlaptop\n");
    assert_eq!(lap.state("~/.bashrc"), "conflict");
    lap.sg(&["merge", "~/.bashrc"]).code(4);
    // The markers are on disk: an unresolved merge, a conflict still.
    assert_eq!(lap.state("~/.bashrc"), "conflict");
    lap.sg(&["undo"]).ok();
    assert_eq!(lap.read(".bashrc"), "base\nlaptop\n");
    assert_eq!(lap.state("~/.bashrc"), "conflict");
    lap.sg(&["checkpoint"]).code(4);
    // And a redo (undo of the undo) is the merge's state again: the
    // markers are back, and so is the unresolved merge.
    lap.sg(&["undo"]).ok();
    assert!(lap.read(".bashrc").contains("<<<<<<< ours\n"));
    assert_eq!(lap.state("~/.bashrc"), "conflict");
    lap.sg(&["checkpoint"]).code(4);
    assert_eq!(stored_hash(&desk.repo, "~/.bashrc"), sha("base\ndesk\n"));
}

#[test]
fn a_folder_add_or_mirror_up_never_reverts_another_machines_work() {
    let (_shared, desk, lap) = desk_and_laptop();
    desk.write("d/x", "x1\n");
    desk.write("d/z", "z1\n");
    desk.sg(&["add", "~/d"]).ok();
    desk.sg(&["checkpoint"]).ok();
    lap.sg(&["restore"]).ok();
    // The desktop changes x and adds y; the laptop deletes z and adds w.
    desk.write("d/x", "x2\n");
    desk.write("d/y", "y1\n");
    desk.sg(&["add", "~/d/y"]).ok();
    desk.sg(&["checkpoint"]).ok();
    fs::remove_file(lap.path("d/z")).unwrap();
    lap.write("d/w", "w1\n");

    // add of the folder: x is not taken back from the laptop's disk.
    let r = lap.sg(&["add", "~/d"]);
    r.ok().stderr_has("~/d/x: behind");
    assert_eq!(stored_hash(&desk.repo, "~/d/x"), sha("x2\n"));
    // mirror up: w tracked, z (deleted here) dropped, y (added elsewhere)
    // and x (changed elsewhere) kept as the repository has them.
    let r = lap.sg(&["mirror", "up", "~/d"]);
    r.ok();
    let m = fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap();
    assert!(
        m.contains("~/d/y"),
        "another machine's new file was dropped:\n{m}"
    );
    assert!(
        !m.contains("~/d/z"),
        "the file deleted here is still tracked:\n{m}"
    );
    assert!(m.contains("~/d/w"), "{m}");
    assert_eq!(stored_hash(&desk.repo, "~/d/x"), sha("x2\n"));
    lap.sg(&["restore"]).ok();
    assert_eq!(lap.read("d/x"), "x2\n");
    assert_eq!(lap.read("d/y"), "y1\n");
}

#[test]
fn a_file_edited_while_restore_asks_about_another_is_left_alone() {
    use std::io::{Read, Write};
    let (_shared, desk, lap) = desk_and_laptop();
    desk.write(".fa", "a1\n");
    desk.write(".fb", "b1\n");
    desk.sg(&["add", "~/.fa", "~/.fb"]).ok();
    desk.sg(&["checkpoint"]).ok();
    lap.sg(&["restore"]).ok();
    desk.write(".fa", "a2\n");
    desk.write(".fb", "b2\n");
    desk.sg(&["checkpoint"]).ok();
    lap.write(".fb", "b local\n");
    // ~/.fa is behind (written unasked), ~/.fb a conflict (asked about).
    let mut child = lap
        .command(&["restore"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("Overwrite it?") {
        assert_eq!(out.read(&mut byte).unwrap(), 1, "no question: {seen:?}");
        seen.push(byte[0]);
    }
    // While it waits for the answer, the user edits ~/.fa.
    lap.write(".fa", "a edited meanwhile\n");
    child.stdin.take().unwrap().write_all(b"n\n").unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(4), "{rest}");
    assert!(
        rest.contains("conflict   ~/.fa"),
        "the edit made meanwhile was not reported: {rest}"
    );
    assert_eq!(lap.read(".fa"), "a edited meanwhile\n");
    assert_eq!(lap.read(".fb"), "b local\n");
}

/// Every blob file under `repo/blobs` (outside `tmp/`).
fn blob_count(repo: &Path) -> usize {
    tree(&repo.join("blobs"))
        .iter()
        .filter(|(p, _)| !p.to_string_lossy().contains("/tmp/"))
        .count()
}

#[test]
fn merging_a_secret_keeps_it_encrypted_and_out_of_the_repository() {
    let (shared, desk, lap) = desk_and_laptop();
    let repo = shared.path().join("dotfiles");
    let with = |m: &Machine, args: &[&str], input: &str| m.sg_key(args, "pw", input);
    with(&desk, &["encrypt", "init"], "").ok();
    desk.write(".netrc", "machine a\nlogin me\n");
    with(&desk, &["add", "--encrypt", "~/.netrc"], "").ok();
    with(&desk, &["checkpoint"], "").ok();
    with(&lap, &["restore"], "").ok();
    desk.write(".netrc", "machine a\nlogin me\npassword desk\n");
    with(&desk, &["checkpoint"], "").ok();
    lap.write(".netrc", "machine b\nmachine a\nlogin me\n");
    assert_eq!(lap.state("~/.netrc"), "conflict");
    let blobs = blob_count(&repo);
    with(&lap, &["merge", "~/.netrc"], "").ok();
    assert_eq!(
        lap.read(".netrc"),
        "machine b\nmachine a\nlogin me\npassword desk\n"
    );
    assert_eq!(blob_count(&repo), blobs, "merge wrote into the repository");
    for (p, bytes) in tree(&lap.t.state_of(&repo).join("undo/blobs")) {
        assert!(
            !String::from_utf8_lossy(&bytes).contains("password desk"),
            "plaintext in {}",
            p.display()
        );
    }
    with(&lap, &["checkpoint"], "").ok();
    with(&desk, &["restore"], "").ok();
    assert_eq!(
        desk.read(".netrc"),
        "machine b\nmachine a\nlogin me\npassword desk\n"
    );
}

#[test]
fn a_key_rotation_elsewhere_is_not_a_change_of_the_secret() {
    let (_shared, desk, lap) = desk_and_laptop();
    let with = |m: &Machine, args: &[&str]| m.sg_key(args, "pw", "");
    with(&desk, &["encrypt", "init"]).ok();
    desk.write(".netrc", "one\n");
    with(&desk, &["add", "--encrypt", "~/.netrc"]).ok();
    with(&desk, &["checkpoint"]).ok();
    with(&lap, &["restore"]).ok();
    // The desktop rotates the key: every ciphertext changes, no plaintext.
    with(&desk, &["encrypt", "rotate-dek"]).ok();
    lap.write(".netrc", "two\n");
    let r = with(&lap, &["checkpoint"]);
    r.ok().stdout_has("updated    ~/.netrc");
    with(&desk, &["restore"]).ok();
    assert_eq!(desk.read(".netrc"), "two\n");
}

#[test]
fn a_damaged_local_log_is_set_aside_not_fatal() {
    let (shared, desk, lap) = desk_and_laptop();
    let repo = shared.path().join("dotfiles");
    desk.write(".bashrc", "base\nd\n");
    desk.sg(&["checkpoint"]).ok();
    lap.sg(&["restore"]).ok();
    let log = lap.t.state_of(&repo).join("undo/history.yaml");
    fs::write(&log, "version: 1\nsnapshots: [ {{{ not yaml\n").unwrap();
    let r = lap.sg(&["status"]);
    r.ok()
        .stderr_has("log of its restores is unreadable and is set aside");
    assert!(log.with_file_name("history.yaml.damaged").is_file());
    // Everything else works; undo says there is nothing of this machine's.
    lap.sg(&["log"]).ok();
    lap.sg(&["undo"]).code(1).stderr_has("nothing to undo");
    lap.sg(&["verify"]).ok();
}

#[test]
fn a_crash_between_the_manifest_and_the_base_is_resolved() {
    let (_shared, desk, lap) = desk_and_laptop();
    let crash = |args: &[&str], point: &str| {
        let r: Run = lap
            .command(args)
            .env("SGARD_TEST_CRASH_AT", point)
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, -1, "{point}: not reached; {r:#?}");
    };
    // A checkpoint that dies after recording, before its base is saved:
    // the laptop's own change must not look like another machine's.
    lap.write(".bashrc", "base\nlap 1\n");
    crash(&["checkpoint"], "head-before-base");
    // (No command in between: a status would find disk and repository
    // equal and record that itself.)
    lap.write(".bashrc", "base\nlap 2\n");
    assert_eq!(lap.state("~/.bashrc"), "modified");
    lap.sg(&["checkpoint"])
        .ok()
        .stdout_has("updated    ~/.bashrc");
    // The same for add.
    lap.write(".vimrc", "v\n");
    crash(&["add", "~/.vimrc"], "manifest-before-base");
    lap.write(".vimrc", "v2\n");
    assert_eq!(lap.state("~/.vimrc"), "modified");
    assert_eq!(desk.state("~/.vimrc"), "missing");
}

#[test]
fn an_undo_killed_part_way_still_leaves_the_other_machines_change_behind() {
    for point in RESTORE_CRASH_POINTS {
        let (_shared, desk, lap) = desk_and_laptop();
        desk.write(".bashrc", "base\ndesk\n");
        desk.sg(&["checkpoint"]).ok();
        lap.sg(&["restore"]).ok();
        let r: Run = lap
            .command(&["undo"])
            .env("SGARD_TEST_CRASH_AT", point)
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, -1, "{point}: not killed; {r:#?}");
        let s = lap.state("~/.bashrc");
        assert!(s == "ok" || s == "behind", "{point}: {s}");
        lap.sg(&["checkpoint"]).ok();
        assert_eq!(
            stored_hash(&desk.repo, "~/.bashrc"),
            sha("base\ndesk\n"),
            "{point}"
        );
    }
}

#[test]
fn an_undo_without_its_saved_base_makes_differences_questions() {
    let (shared, desk, lap) = desk_and_laptop();
    desk.write(".bashrc", "base\ndesk\n");
    desk.sg(&["checkpoint"]).ok();
    lap.sg(&["restore"]).ok();
    // As for an operation recorded by a version that saved no base.
    fs::remove_dir_all(
        lap.t
            .state_of(&shared.path().join("dotfiles"))
            .join("undo/bases"),
    )
    .unwrap();
    lap.sg(&["undo"]).ok();
    assert_eq!(lap.state("~/.bashrc"), "conflict");
    lap.sg(&["checkpoint"]).code(4);
    assert_eq!(stored_hash(&desk.repo, "~/.bashrc"), sha("base\ndesk\n"));
}

#[test]
fn another_repository_at_the_same_path_does_not_inherit_the_state() {
    // Two sticks mounted one after the other at one path.
    let shared = tempfile::tempdir().unwrap();
    let mnt = shared.path().join("stick");
    let lap = Machine::new("laptop", &mnt);
    let a = shared.path().join("a");
    let b = shared.path().join("b");
    for (stick, text) in [(&a, "from a\n"), (&b, "from b\n")] {
        let m = Machine::new("maker", stick);
        m.sg(&["init"]).ok();
        m.write(".bashrc", text);
        m.sg(&["add", "~/.bashrc"]).ok();
        m.sg(&["checkpoint"]).ok();
    }
    fs::rename(&a, &mnt).unwrap();
    lap.sg(&["restore"]).ok();
    assert_eq!(lap.read(".bashrc"), "from a\n");
    fs::rename(&mnt, &a).unwrap();
    fs::rename(&b, &mnt).unwrap();
    // Stick b is another repository: the laptop has no record of it, so
    // its different ~/.bashrc is a question, not `behind`.
    assert_eq!(lap.state("~/.bashrc"), "conflict");
    lap.sg(&["restore"]).code(4);
    assert_eq!(lap.read(".bashrc"), "from a\n");
    // And stick a, back again, is known as before.
    fs::rename(&mnt, &b).unwrap();
    fs::rename(&a, &mnt).unwrap();
    assert_eq!(lap.state("~/.bashrc"), "ok");
}

#[test]
fn a_restore_waiting_for_an_answer_does_not_block_other_readers() {
    use std::io::{Read, Write};
    let (_shared, desk, lap) = desk_and_laptop();
    desk.write(".bashrc", "base\ndesk\n");
    desk.sg(&["checkpoint"]).ok();
    lap.write(".bashrc", "base\nlap\n");
    let mut child = lap
        .command(&["restore"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("Overwrite it?") {
        assert_eq!(out.read(&mut byte).unwrap(), 1, "no question: {seen:?}");
        seen.push(byte[0]);
    }
    // While the laptop's restore waits, the desktop's status runs.
    let r = crate::common::wait_limited(
        desk.command(&["status"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        std::time::Duration::from_secs(20),
    )
    .expect("status waited for the restore's lock");
    assert_eq!(r.code, 0, "{r:#?}");
    child.stdin.take().unwrap().write_all(b"n\n").unwrap();
    let _ = child.wait();
}

#[test]
fn mirror_up_does_not_track_again_what_another_machine_untracked() {
    let (_shared, desk, lap) = desk_and_laptop();
    desk.write("d/x", "x\n");
    desk.write("d/y", "y\n");
    desk.sg(&["add", "~/d"]).ok();
    desk.sg(&["checkpoint"]).ok();
    lap.sg(&["restore"]).ok();
    desk.sg(&["remove", "~/d/x"]).ok();
    let r = lap.sg(&["mirror", "up", "~/d"]);
    r.ok().stderr_has("~/d/x: untracked on another machine");
    let m = fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap();
    assert!(!m.contains("~/d/x"), "{m}");
    // A remove here is this machine's own wish: mirror up may track it again.
    desk.sg(&["mirror", "up", "~/d"]).ok();
    let m = fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap();
    assert!(m.contains("~/d/x"), "{m}");
}

#[test]
fn a_restore_from_an_older_repository_leaves_no_file_in_it() {
    let (shared, desk, lap) = desk_and_laptop();
    let repo = shared.path().join("dotfiles");
    // An older repository: no id yet.
    fs::remove_file(repo.join("repo-id")).unwrap();
    desk.write(".bashrc", "base\nd\n");
    let before = tree(&repo);
    lap.sg(&["status"]).ok();
    fs::remove_file(lap.path(".bashrc")).unwrap();
    lap.sg(&["restore"]).ok();
    lap.sg(&["undo"]).ok();
    lap.sg(&["restore"]).ok();
    assert_eq!(
        tree(&repo),
        before,
        "a command that only changes the home wrote the repository"
    );
    // The first command that writes the repository gives it an id, and the
    // laptop's record follows.
    desk.sg(&["checkpoint"]).ok();
    assert!(repo.join("repo-id").is_file());
    assert_eq!(lap.state("~/.bashrc"), "behind");
}

#[test]
fn a_merge_whose_file_changes_meanwhile_writes_and_settles_nothing() {
    let (_shared, desk, lap) = desk_and_laptop();
    let with = |m: &Machine, args: &[&str]| m.sg_key(args, "pw", "");
    with(&desk, &["encrypt", "init"]).ok();
    desk.write(".netrc", "a\nb\n");
    with(&desk, &["add", "--encrypt", "~/.netrc"]).ok();
    with(&desk, &["checkpoint"]).ok();
    with(&lap, &["restore"]).ok();
    desk.write(".netrc", "a\nb\ndesk\n");
    with(&desk, &["checkpoint"]).ok();
    lap.write(".netrc", "lap\na\nb\n");
    // The passphrase command edits the file while merge is at work.
    let script = lap.write(
        "pw.sh",
        format!(
            "echo meanwhile >> {}\necho pw\n",
            lap.path(".netrc").display()
        ),
    );
    let r: Run = lap
        .command(&["merge", "~/.netrc"])
        .env(
            "SGARD_PASSPHRASE_COMMAND",
            format!("sh {}", script.display()),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into();
    assert_ne!(r.code, 0, "{r:#?}");
    assert!(r.stdout.contains("failed"), "{r:#?}");
    assert_eq!(lap.read(".netrc"), "lap\na\nb\nmeanwhile\n");
    assert_eq!(lap.state("~/.netrc"), "conflict");
}

/// A running sgard whose output is collected as it comes.
struct Watched {
    child: std::process::Child,
    out: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Watched {
    fn start(m: &Machine, args: &[&str]) -> Self {
        use std::io::Read;
        let mut child = m
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        for mut r in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let o = out.clone();
            std::thread::spawn(move || {
                let mut b = [0u8; 256];
                while let Ok(n) = r.read(&mut b) {
                    if n == 0 {
                        break;
                    }
                    o.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&b[..n]));
                }
            });
        }
        Watched { child, out }
    }

    fn wait_for(&self, pat: &str, limit: std::time::Duration) -> bool {
        let start = std::time::Instant::now();
        while start.elapsed() < limit {
            if self.out.lock().unwrap().contains(pat) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    }

    fn answer(&mut self, s: &str) {
        use std::io::Write;
        self.child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(s.as_bytes())
            .unwrap();
    }

    fn finished_within(&mut self, limit: std::time::Duration) -> Option<i32> {
        let start = std::time::Instant::now();
        while start.elapsed() < limit {
            if let Some(st) = self.child.try_wait().unwrap() {
                return Some(st.code().unwrap_or(-1));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A writer waiting for the lock goes before readers that come after it:
/// `flock` alone let a stream of readers keep a writer out for ever.
#[test]
fn a_waiting_writer_goes_before_readers_that_come_after_it() {
    let (shared, desk, _lap) = desk_and_laptop();
    let repo = shared.path().join("dotfiles");
    let (a, b) = (Machine::new("a", &repo), Machine::new("b", &repo));
    for m in [&a, &b] {
        m.write(".bashrc", "its own\n");
    }
    let long = std::time::Duration::from_secs(20);
    // Reader A holds the shared lock, waiting at a question.
    let mut ra = Watched::start(&a, &["restore"]);
    assert!(
        ra.wait_for("Overwrite it?", long),
        "{}",
        ra.out.lock().unwrap()
    );
    // A writer comes, and waits for A.
    let mut w = Watched::start(&desk, &["checkpoint"]);
    assert!(
        w.wait_for("waiting for the exclusive lock", long),
        "{}",
        w.out.lock().unwrap()
    );
    // Reader B comes after the writer: it waits behind it.
    let mut rb = Watched::start(&b, &["restore"]);
    assert!(
        !rb.wait_for("Overwrite it?", std::time::Duration::from_secs(1)),
        "a reader overtook the waiting writer"
    );
    ra.answer("n\n");
    assert_eq!(
        w.finished_within(long),
        Some(0),
        "{}",
        w.out.lock().unwrap()
    );
    assert!(
        rb.wait_for("Overwrite it?", long),
        "{}",
        rb.out.lock().unwrap()
    );
    rb.answer("n\n");
    assert_eq!(rb.finished_within(long), Some(0));
}

/// A machine an older sgard kept its base for in the text file `base`:
/// the first run of this one moves it into the index (and removes the
/// file), and what it said still counts: the desktop's change is `behind`
/// on the laptop, not a conflict.
#[test]
fn a_base_kept_by_an_older_build_moves_into_the_index() {
    let (shared, desk, lap) = desk_and_laptop();
    let repo = shared.path().join("dotfiles");
    let state = lap.t.state_of(&repo);
    // What the older build wrote: one checksummed line per entry.
    let h = sha("base\n");
    let body = format!("f 0644 {h} = ~/.bashrc\n");
    fs::write(
        state.join("base"),
        format!("sgard-base 1 {}\n{body}", sha(&body)),
    )
    .unwrap();
    fs::remove_file(state.join("index")).unwrap();
    desk.write(".bashrc", "base\ndesk\n");
    desk.sg(&["checkpoint"]).ok();
    assert_eq!(lap.state("~/.bashrc"), "behind");
    assert!(!state.join("base").exists(), "the old file stayed");
    assert!(state.join("index").is_file());
    assert_eq!(lap.state("~/.bashrc"), "behind");
}

/// The agreements journalled in `base.pending` before a crash survive a
/// later command that fails and rolls its own base changes back: the
/// index written at its end must not drop the journal (nor lose what the
/// next open took from it).
#[test]
fn journalled_agreements_survive_a_failed_command() {
    let (shared, desk, lap) = desk_and_laptop();
    lap.write(".vimrc", "v\n");
    let r: Run = lap
        .command(&["add", "~/.vimrc"])
        .env("SGARD_TEST_CRASH_AT", "manifest-before-base")
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, -1, "not killed; {r:#?}");
    assert!(
        lap.t
            .state_of(&shared.path().join("dotfiles"))
            .join("base.pending")
            .exists()
    );
    lap.sg(&["add", "~/does-not-exist"]).code(1);
    lap.write(".vimrc", "v2\n");
    assert_eq!(lap.state("~/.vimrc"), "modified", "the laptop's own add");
    assert_eq!(desk.state("~/.vimrc"), "missing");
}

/// A command that did not change the base (a `status` that only re-hashed
/// a file) must not write the base it read at open over one a `restore`
/// saved meanwhile: the laptop's edit after that restore is its own change
/// (`modified`), not a conflict. The status is held at the moment it saves
/// its index while the restore runs.
#[test]
fn a_reader_does_not_write_its_old_base_over_a_newer_one() {
    let (shared, desk, lap) = desk_and_laptop();
    let repo = shared.path().join("dotfiles");
    lap.write("other", "o\n");
    lap.sg(&["add", "~/other"]).ok();
    desk.write(".bashrc", "base\ndesk\n");
    desk.sg(&["checkpoint", "-m", "desk"]).ok();
    assert_eq!(lap.state("~/.bashrc"), "behind");
    // A stale stat entry for `other`, settled past the racy window: the
    // status re-hashes it, so it has an index to write but no base change.
    std::thread::sleep(std::time::Duration::from_millis(2300));
    lap.sg(&["status"]).ok();
    fs::set_permissions(lap.path("other"), fs::Permissions::from_mode(0o640)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2300));
    let gate = lap.t.outside().join("go");
    let held = spawn_held_at(
        lap.command(&["status", "~/other"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        "index-save",
        &gate,
    );
    lap.sg(&["restore", "~/.bashrc"]).ok();
    fs::write(&gate, "").unwrap();
    let out = held.wait_with_output().unwrap();
    assert!(out.status.success());
    lap.write(".bashrc", "base\ndesk\nlaptop\n");
    assert_eq!(lap.state("~/.bashrc"), "modified");
    assert!(lap.t.state_of(&repo).join("index").is_file());
}

/// `verify`, `list`, `log` and `identity` read the repository alone: they
/// leave this machine's index as it is (its base and stat cache are never
/// loaded, so writing the index back would lose them), even when the
/// manifest changed since the index was written; this machine's view of
/// the change is then exactly what it was.
#[test]
fn repository_readers_leave_this_machines_index_alone() {
    let (shared, desk, lap) = desk_and_laptop();
    let repo = shared.path().join("dotfiles");
    desk.write(".bashrc", "base\ndesk\n");
    desk.sg(&["checkpoint", "-m", "desk"]).ok();
    let index = lap.t.state_of(&repo).join("index");
    let before = fs::read(&index).unwrap();
    lap.sg(&["verify"]).ok();
    lap.sg(&["list"]).ok().stdout_has("~/.bashrc");
    lap.sg(&["log"]).ok().stdout_has("desk");
    lap.sg(&["identity"]).ok();
    assert!(
        fs::read(&index).unwrap() == before,
        "a repository reader rewrote this machine's index"
    );
    assert_eq!(lap.state("~/.bashrc"), "behind");
    // A corrupt blob is still found without this machine's state.
    let h = stored_hash(&repo, "~/.bashrc");
    let blob = repo.join("blobs").join(&h[..2]).join(&h[2..4]).join(&h);
    fs::set_permissions(&blob, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&blob, "tampered\n").unwrap();
    lap.sg(&["verify"])
        .code(3)
        .stdout_has("corrupt    ~/.bashrc");
}

/// A repository the Go sgard made has no `repo-id` until this sgard first
/// writes it: what this machine recorded before (keyed by the path) is
/// carried over, so a local edit is `modified`, not a conflict.
#[test]
fn the_record_of_a_go_made_repository_survives_its_first_id() {
    let t = TestEnv::new();
    let content = b"from the go sgard\n";
    let h = sha(content);
    let repo = t.repo();
    fs::create_dir_all(repo.join("blobs").join(&h[0..2]).join(&h[2..4])).unwrap();
    fs::write(t.blob_path(&h), content).unwrap();
    fs::write(
        repo.join("manifest.yaml"),
        format!(
            "version: 1\ncreated: 2026-03-01T00:00:00Z\nupdated: 2026-03-01T00:00:00Z\n\
             message: go\nfiles:\n    - path: ~/.goconf\n      hash: {h}\n      type: file\n      \
             mode: \"0644\"\n      updated: 2026-03-01T00:00:00Z\n"
        ),
    )
    .unwrap();
    t.sgard(["restore"]).ok();
    assert!(!repo.join("repo-id").exists(), "a reader gives it no id");
    t.write(".goconf", "edited here\n");
    set_mtime(&t.path(".goconf"), now_secs() - 5);
    t.sgard(["status"]).ok().stdout_has("modified   ~/.goconf");
    t.sgard(["checkpoint", "-m", "mine"]).ok();
    assert!(repo.join("repo-id").exists());
    t.sgard(["status", "--exit-code"]).ok();
}
