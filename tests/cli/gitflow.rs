//! The repository under git, as the README tells it: two machines with a
//! clone each of one bare origin, `sgard checkpoint`, commit, `git pull`.
//! git merges `manifest.yaml` and `history.yaml` with `sgard
//! git-merge-driver`, so different files never conflict and the same file
//! changed on both sides is an sgard `conflict`, never conflict markers.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::common::*;
use crate::machines::Machine;

/// Whether git is installed (the tests skip without it, as CI installs it).
fn have_git() -> bool {
    Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `sgard git ARGS` on `m` (git in its repository, with its
/// environment, so the merge driver sees this machine's state).
#[track_caller]
fn git(m: &Machine, args: &[&str]) -> Run {
    let mut all = vec!["git"];
    all.extend_from_slice(args);
    m.sg(&all)
}

/// The origin, and two machines with a clone each: the laptop made the
/// repository (`.bashrc`, `.vimrc`, `.profile`) and pushed it; the desktop
/// cloned it and restored.
fn two_clones() -> Option<(tempfile::TempDir, Machine, Machine)> {
    if !have_git() {
        eprintln!("git is not installed: skipped");
        return None;
    }
    let shared = tempfile::tempdir().unwrap();
    let origin = shared.path().join("origin.git");
    let out = Command::new("git")
        .args(["init", "-q", "--bare", "-b", "main"])
        .arg(&origin)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let lap = Machine::new("laptop", &shared.path().join("lap-dots"));
    let desk = Machine::new("desktop", &shared.path().join("desk-dots"));
    lap.sg(&["init"]).ok();
    lap.write(
        ".bashrc",
        "alias ll='ls -l'\n# (between)\n\nexport EDITOR=vi\n",
    );
    lap.write(".vimrc", "set nu\n");
    lap.write(".profile", "PATH=$PATH:~/bin\n");
    lap.sg(&["add", "~/.bashrc", "~/.vimrc", "~/.profile"]).ok();
    lap.sg(&["checkpoint", "-m", "first"]).ok();
    git(&lap, &["init", "-q", "-b", "main"]).ok();
    identity(&lap);
    git(&lap, &["add", "-A"]).ok();
    git(&lap, &["commit", "-q", "-m", "first"]).ok();
    git(&lap, &["remote", "add", "origin", origin.to_str().unwrap()]).ok();
    git(&lap, &["push", "-q", "-u", "origin", "main"]).ok();
    let out = Command::new("git")
        .args(["clone", "-q"])
        .arg(&origin)
        .arg(&desk.repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // The first sgard command in the clone defines the merge driver.
    desk.sg(&["restore"])
        .ok()
        .stdout_has("created    ~/.bashrc");
    identity(&desk);
    let driver = git(&desk, &["config", "--get", "merge.sgard.driver"]);
    driver.ok().stdout_has("git-merge-driver %O %A %B %P");
    Some((shared, lap, desk))
}

fn identity(m: &Machine) {
    git(m, &["config", "user.name", "t"]).ok();
    git(m, &["config", "user.email", "t@example.invalid"]).ok();
}

/// Checkpoint, then commit everything sgard wrote.
fn checkpoint_and_commit(m: &Machine, message: &str) {
    m.sg(&["checkpoint", "-m", message]).ok();
    git(m, &["add", "-A"]).ok();
    git(m, &["commit", "-q", "-m", message]).ok();
}

/// No file sgard reads holds a conflict marker.
fn no_markers(repo: &Path) {
    for f in ["manifest.yaml", "history.yaml"] {
        let text = fs::read_to_string(repo.join(f)).unwrap();
        assert!(
            !text.contains("<<<<<<<") && !text.contains(">>>>>>>"),
            "{f} holds conflict markers:\n{text}"
        );
    }
}

#[test]
fn checkpoints_of_different_files_merge_without_conflict_and_travel_both_ways() {
    for pull in [["pull", "--no-rebase", "-q"], ["pull", "--rebase", "-q"]] {
        let Some((_shared, lap, desk)) = two_clones() else {
            return;
        };
        lap.write(".bashrc", "alias ll='ls -l'\nexport EDITOR=vim\n");
        checkpoint_and_commit(&lap, "laptop: vim");
        git(&lap, &["push", "-q"]).ok();
        desk.write(".vimrc", "set nu\nset ai\n");
        checkpoint_and_commit(&desk, "desktop: ai");
        let r = git(&desk, &pull);
        r.ok();
        no_markers(&desk.repo);
        assert_eq!(desk.state("~/.bashrc"), "behind", "{pull:?}");
        assert_eq!(desk.state("~/.vimrc"), "ok", "{pull:?}");
        desk.sg(&["restore"]).ok();
        assert_eq!(
            desk.read(".bashrc"),
            "alias ll='ls -l'\nexport EDITOR=vim\n"
        );
        desk.sg(&["status", "--exit-code"]).ok();
        // Both machines' records are in the history.
        let log = desk.sg(&["log"]);
        log.ok().stdout_has("laptop: vim").stdout_has("desktop: ai");
        git(&desk, &["push", "-q"]).ok();
        git(&lap, &["pull", "-q"]).ok();
        no_markers(&lap.repo);
        assert_eq!(lap.state("~/.vimrc"), "behind", "{pull:?}");
        lap.sg(&["restore"]).ok();
        assert_eq!(lap.read(".vimrc"), "set nu\nset ai\n");
        lap.sg(&["status", "--exit-code"]).ok();
        lap.sg(&["verify"]).ok();
        desk.sg(&["verify"]).ok();
    }
}

#[test]
fn the_same_file_changed_on_both_sides_is_an_sgard_conflict_that_merge_settles() {
    for pull in [["pull", "--no-rebase", "-q"], ["pull", "--rebase", "-q"]] {
        let Some((_shared, lap, desk)) = two_clones() else {
            return;
        };
        lap.write(
            ".bashrc",
            "alias ll='ls -la'\n# (between)\n\nexport EDITOR=vi\n",
        );
        checkpoint_and_commit(&lap, "laptop: la");
        git(&lap, &["push", "-q"]).ok();
        desk.write(
            ".bashrc",
            "alias ll='ls -l'\n# (between)\n\nexport EDITOR=nano\n",
        );
        checkpoint_and_commit(&desk, "desktop: nano");
        let r = git(&desk, &pull);
        r.ok().stderr_has("~/.bashrc changed on both sides");
        no_markers(&desk.repo);
        // Neither version is lost: the desktop's on its disk, the
        // laptop's in the repository, and status calls it a conflict.
        assert_eq!(
            desk.read(".bashrc"),
            "alias ll='ls -l'\n# (between)\n\nexport EDITOR=nano\n"
        );
        assert_eq!(desk.state("~/.bashrc"), "conflict", "{pull:?}");
        desk.sg(&["checkpoint"]).code(4);
        // merge settles it (the changes are on different lines).
        desk.sg(&["merge", "~/.bashrc"]).ok();
        assert_eq!(
            desk.read(".bashrc"),
            "alias ll='ls -la'\n# (between)\n\nexport EDITOR=nano\n"
        );
        assert_eq!(desk.state("~/.bashrc"), "modified");
        checkpoint_and_commit(&desk, "desktop: merged");
        git(&desk, &["push", "-q"]).ok();
        git(&lap, &["pull", "-q"]).ok();
        assert_eq!(lap.state("~/.bashrc"), "behind");
        lap.sg(&["restore"]).ok();
        assert_eq!(
            lap.read(".bashrc"),
            "alias ll='ls -la'\n# (between)\n\nexport EDITOR=nano\n"
        );
        lap.sg(&["status", "--exit-code"]).ok();
        desk.sg(&["status", "--exit-code"]).ok();
    }
}

#[test]
fn init_routes_the_manifest_and_history_to_the_driver_and_doctor_checks_the_clone() {
    let Some((_shared, lap, desk)) = two_clones() else {
        return;
    };
    let attrs = fs::read_to_string(lap.repo.join(".gitattributes")).unwrap();
    assert!(attrs.contains("manifest.yaml merge=sgard"), "{attrs}");
    assert!(attrs.contains("history.yaml merge=sgard"), "{attrs}");
    // A clone whose config lost the driver: doctor says so, and the next
    // command puts it back.
    git(&desk, &["config", "--unset", "merge.sgard.driver"]).ok();
    let cmd = desk
        .command(&["doctor"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let r: Run = cmd.into();
    r.stdout_has("merge driver");
    desk.sg(&["status"]).ok();
    git(&desk, &["config", "--get", "merge.sgard.driver"]).ok();
}

#[test]
fn checkpoint_commits_and_pushes_as_asked_and_a_failed_push_loses_nothing() {
    let Some((shared, lap, desk)) = two_clones() else {
        return;
    };
    let last_subject = |m: &Machine| {
        git(m, &["log", "-1", "--format=%s"])
            .stdout
            .trim()
            .to_owned()
    };
    // --commit: the checkpoint's message is the commit's.
    lap.write(".vimrc", "set nu\nset hls\n");
    lap.sg(&["checkpoint", "--commit", "-m", "vim: hls"])
        .ok()
        .stdout_has("Committed ");
    assert_eq!(last_subject(&lap), "vim: hls");
    assert_eq!(git(&lap, &["status", "--porcelain"]).stdout, "");
    // Nothing recorded: nothing committed.
    let r = lap.sg(&["checkpoint", "--commit"]);
    assert!(!r.ok().stdout.contains("Committed"), "{r:#?}");

    // The repository's settings: every checkpoint commits and pushes.
    lap.sg(&["git", "auto-push", "on"])
        .ok()
        .stdout_has("auto-commit on, auto-push on");
    lap.sg(&["git", "auto-commit", "maybe"]).code(2);
    lap.write(".profile", "PATH=$PATH:~/bin:~/.local/bin\n");
    lap.sg(&["checkpoint", "-m", "local bin"])
        .ok()
        .stdout_has("Committed ")
        .stdout_has("Pushed.");
    git(&desk, &["pull", "-q"]).ok();
    desk.sg(&["restore"]).ok();
    assert_eq!(desk.read(".profile"), "PATH=$PATH:~/bin:~/.local/bin\n");
    assert_eq!(desk.read(".vimrc"), "set nu\nset hls\n");

    // A push that fails is a warning: the checkpoint and the commit stand.
    let gone = shared.path().join("gone.git");
    git(
        &lap,
        &["remote", "set-url", "origin", gone.to_str().unwrap()],
    )
    .ok();
    lap.write(".profile", "PATH=$PATH\n");
    let r = lap.sg(&["checkpoint", "-m", "offline"]);
    r.ok()
        .stdout_has("Committed ")
        .stderr_has("the checkpoint is recorded, but `git push` failed");
    assert_eq!(last_subject(&lap), "offline");
    lap.sg(&["log"]).ok().stdout_has("offline");
    lap.sg(&["status", "--exit-code"]).ok();
}

/// Every `.yaml` file of `repo` with `\r\n` line ends, as git on Windows
/// with `core.autocrlf` checks text files out.
fn yaml_to_crlf(repo: &Path) {
    for e in fs::read_dir(repo).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            let text = fs::read_to_string(&p).unwrap();
            assert!(!text.contains('\r'), "{}", p.display());
            fs::write(&p, text.replace('\n', "\r\n")).unwrap();
        }
    }
}

/// A repository whose YAML files (manifest, history, data) were turned to
/// `\r\n` still reads: status, log, verify, restore and restore --at work,
/// and the files restore byte for byte, `\r\n` in a tracked file included.
/// The head's snapshot blob keeps the bytes it was recorded with (blobs
/// are named by their bytes), so verify still finds it sound.
#[test]
fn a_repository_whose_yaml_turned_to_crlf_still_reads() {
    let t = TestEnv::init();
    fs::write(
        t.repo().join("data.yaml"),
        "git:\n  email: ada@home.example\n",
    )
    .unwrap();
    t.write(".bashrc", "one\n");
    t.write(".crlf", b"a\r\nb\r\n");
    t.write(".gitconfig", "email = {{ data.git.email }}\n");
    t.sgard(["add", "~/.bashrc", "~/.crlf"]).ok();
    t.sgard(["add", "--template", "~/.gitconfig"]).ok();
    t.sgard(["checkpoint", "-m", "first"]).ok();
    t.write(".bashrc", "two\n");
    t.sgard(["checkpoint", "-m", "second"]).ok();
    // The template's rendering in place.
    t.sgard(["restore"]).ok();
    t.sgard(["status", "--exit-code"]).ok();
    yaml_to_crlf(&t.repo());

    t.sgard(["status", "--exit-code"]).ok();
    t.sgard(["log"])
        .ok()
        .stdout_has("first")
        .stdout_has("second");
    t.sgard(["verify"]).ok();
    // The line ends are no change (of data.yaml either: its data is
    // recorded with `\n`).
    t.sgard(["checkpoint", "-m", "same"])
        .ok()
        .stdout_has("nothing changed");
    for f in [".bashrc", ".crlf", ".gitconfig"] {
        fs::remove_file(t.path(f)).unwrap();
    }
    t.sgard(["restore"]).ok();
    assert_eq!(t.read(".bashrc"), b"two\n");
    assert_eq!(t.read(".crlf"), b"a\r\nb\r\n");
    assert_eq!(t.read(".gitconfig"), b"email = ada@home.example\n");
    t.sgard(["restore", "--at", "@~1", "-f", "~/.bashrc"]).ok();
    assert_eq!(t.read(".bashrc"), b"one\n");
    t.sgard(["status", "--exit-code", "~/.crlf", "~/.gitconfig"])
        .ok();
    // The next save writes `\n` again.
    t.write(".bashrc", "three\n");
    t.sgard(["checkpoint", "-m", "third"]).ok();
    assert!(!t.manifest().contains('\r'));
    t.sgard(["verify"]).ok();
    t.sgard(["show", "@"]).ok().stdout_has("~/.bashrc");
}

/// `init`'s `.gitattributes` keeps git from converting line endings: a
/// clone with `core.autocrlf=true` (git on Windows) holds the blobs and
/// sgard's YAML byte for byte, so its blobs verify and its files restore
/// as they were, `\r\n` and `\n` alike.
#[test]
fn a_clone_with_autocrlf_keeps_every_file_byte_for_byte() {
    if !have_git() {
        eprintln!("git is not installed: skipped");
        return;
    }
    let shared = tempfile::tempdir().unwrap();
    let lap = Machine::new("laptop", &shared.path().join("lap-dots"));
    let desk = Machine::new("desktop", &shared.path().join("desk-dots"));
    lap.sg(&["init"]).ok();
    lap.write(".bashrc", "export EDITOR=vi\n");
    lap.write(".crlf", "a\r\nb\r\n");
    lap.sg(&["add", "~/.bashrc", "~/.crlf"]).ok();
    lap.sg(&["checkpoint", "-m", "first"]).ok();
    git(&lap, &["init", "-q", "-b", "main"]).ok();
    identity(&lap);
    git(&lap, &["add", "-A"]).ok();
    git(&lap, &["commit", "-q", "-m", "first"]).ok();
    let out = Command::new("git")
        .args(["-c", "core.autocrlf=true", "clone", "-q"])
        .arg(&lap.repo)
        .arg(&desk.repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for f in ["manifest.yaml", "history.yaml"] {
        assert_eq!(
            fs::read(lap.repo.join(f)).unwrap(),
            fs::read(desk.repo.join(f)).unwrap(),
            "{f}"
        );
    }
    desk.sg(&["verify"]).ok();
    desk.sg(&["restore"]).ok();
    assert_eq!(desk.read(".bashrc"), "export EDITOR=vi\n");
    assert_eq!(desk.read(".crlf"), "a\r\nb\r\n");
}

/// A `.gitattributes` an older sgard wrote (without `* -text`): doctor
/// says what git with `core.autocrlf` would do, and the next command that
/// writes the repository adds the line, once.
#[test]
fn an_older_gitattributes_gets_the_line_that_keeps_bytes() {
    let Some((_shared, lap, _desk)) = two_clones() else {
        return;
    };
    let path = lap.repo.join(".gitattributes");
    // An older sgard's lines, less one its user took out on purpose.
    let old = fs::read_to_string(&path)
        .unwrap()
        .replace("* -text\n", "")
        .replace("retired-keys merge=union\n", "");
    fs::write(&path, &old).unwrap();
    // A reader, and `sgard git` itself, leave the checkout as it is.
    lap.sg(&["status"]).ok();
    lap.sg(&["git", "log", "-1", "--format=%s"]).ok();
    assert_eq!(fs::read_to_string(&path).unwrap(), old);
    let r: Run = lap
        .command(&["doctor"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
        .into();
    r.stdout_has("core.autocrlf");
    lap.write(".vimrc", "set nu\nset ai\n");
    lap.sg(&["checkpoint"]).ok();
    let now = fs::read_to_string(&path).unwrap();
    assert_eq!(now, format!("{old}* -text\n"));
    lap.sg(&["checkpoint"]).ok();
    assert_eq!(fs::read_to_string(&path).unwrap(), now);
}
