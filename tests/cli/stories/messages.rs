//! Stories of issue 30: messages. How errors are printed (one `sgard:
//! error:` per message, multi-line causes as indented lines), what counts
//! as damage and what is only a passing I/O error, a read-only repository,
//! and what doctor says about git and chunking.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::*;

/// Every line of stderr that starts a message (`sgard: …`).
fn messages(r: &Run) -> Vec<&str> {
    r.stderr
        .lines()
        .filter(|l| l.starts_with("sgard:"))
        .collect()
}

/// Runs git in `dir` with a fixed identity; `None` when git is not
/// installed. A failing git command (a merge with conflicts) is no panic.
fn git(dir: &Path, args: &[&str]) -> Option<std::process::Output> {
    Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .stdin(Stdio::null())
        .output()
        .ok()
}

/// Item 5: two checkpoints committed on two git branches and merged with a
/// merge driver that fails leave `manifest.yaml` unmerged; doctor says
/// the repository is in an unfinished git merge and what to do, not only
/// git's version.
#[test]
fn doctor_names_an_unfinished_git_merge_and_what_to_do() {
    let t = TestEnv::tracking(".vimrc", "set nu\n");
    t.sgard(["checkpoint", "-m", "first"]).ok();
    let repo = t.repo();
    if git(&repo, &["init", "-q"]).is_none() {
        eprintln!("skipping: git is not installed");
        return;
    }
    let ok = |args: &[&str]| {
        let o = git(&repo, args).unwrap();
        assert!(o.status.success(), "git {args:?}: {o:?}");
    };
    // A merge driver that fails (as one whose program broke would): git
    // stops the merge with the manifest unmerged.
    ok(&["config", "merge.sgard.driver", "false"]);
    ok(&["add", "-A"]);
    ok(&["commit", "-qm", "first"]);
    // Each branch adds a file and checkpoints, as two machines would.
    for (branch, file) in [("laptop", ".laptop"), ("main", ".desktop")] {
        ok(&["checkout", "-qB", branch]);
        t.write(file, "x\n");
        t.sgard(["add", file]).ok();
        t.sgard(["checkpoint", "-m", branch]).ok();
        ok(&["add", "-A"]);
        ok(&["commit", "-qm", branch]);
        ok(&["checkout", "-q", "main"]);
    }
    let merge = git(&repo, &["merge", "-q", "laptop"]).unwrap();
    assert!(
        !merge.status.success(),
        "the merge had no conflict: {merge:?}"
    );

    let r = t.sgard(["doctor"]);
    r.code(1);
    let line = r
        .stdout
        .lines()
        .position(|l| l.starts_with("error   git"))
        .unwrap_or_else(|| panic!("no git error: {r:#?}"));
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[line].contains("unfinished git merge"), "{}", r.stdout);
    assert!(lines[line].contains("manifest.yaml"), "{}", r.stdout);
    let hint = lines[line + 1];
    assert!(
        hint.contains("→") && hint.contains("git -C ~/.sgard merge --abort"),
        "{}",
        r.stdout
    );
}

/// Item 13: a manifest that does not parse is one message with one
/// "error", its snippet as indented lines under it, in doctor as in every
/// other command; no `\x0a` escapes.
#[test]
fn a_manifest_that_does_not_parse_is_one_error_with_indented_lines() {
    let t = TestEnv::tracking(".vimrc", "set nu\n");
    fs::write(
        t.repo().join("manifest.yaml"),
        "version: 1\nfiles:\n  - path: [\n",
    )
    .unwrap();
    let r = t.sgard(["status"]);
    r.code(1);
    let first = r.stderr.lines().next().unwrap();
    assert!(
        first.starts_with("sgard: error: ") && first.contains("manifest.yaml: line 3 column"),
        "{r:#?}"
    );
    assert_eq!(r.stderr.matches("error").count(), 1, "{r:#?}");
    for l in r.stderr.lines().skip(1) {
        assert!(
            l.starts_with("  "),
            "a line of the message not indented: {r:#?}"
        );
    }

    let r = t.sgard(["doctor"]);
    r.code(1);
    assert!(!r.stdout.contains("\\x0a"), "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("error   manifest"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(
        lines[at].contains("manifest.yaml: line 3 column") && !lines[at].contains(": error:"),
        "{}",
        r.stdout
    );
    // The snippet's lines sit under the detail, before the hint.
    let under: Vec<&&str> = lines[at + 1..]
        .iter()
        .take_while(|l| !l.trim_start().starts_with('→'))
        .collect();
    assert!(under.len() >= 3, "{}", r.stdout);
    for l in under {
        assert!(l.starts_with(&" ".repeat(22)), "{}", r.stdout);
    }
}

/// `cmd` run with `repo` bind-mounted read-only over itself; `None` where
/// mount namespaces cannot be made.
fn read_only(cmd: &Command, repo: &Path) -> Option<Run> {
    let probe: Run = crate::machines::read_only(&Command::new("true"), repo, repo)
        .output()
        .unwrap()
        .into();
    if probe.code != 0 {
        eprintln!("skipping: cannot bind-mount here ({})", probe.stderr.trim());
        return None;
    }
    Some(
        crate::machines::read_only(cmd, repo, repo)
            .output()
            .unwrap()
            .into(),
    )
}

/// Item 16: `checkpoint` and `add` on a read-only repository say that the
/// repository is read-only, not which lock file they could not open.
#[test]
fn checkpoint_and_add_on_a_read_only_repository_say_it_is_read_only() {
    let t = TestEnv::tracking(".vimrc", "set nu\n");
    t.write(".vimrc", "set nonu\n");
    t.write(".bashrc", "x\n");
    for args in [&["checkpoint"][..], &["add", "~/.bashrc"]] {
        let Some(r) = read_only(&t.command(args), &t.repo()) else {
            return;
        };
        r.code(1);
        assert!(
            r.stderr.starts_with(&format!(
                "sgard: error: {} is read-only",
                t.repo().display()
            )),
            "{args:?}: {r:#?}"
        );
        assert!(!r.stderr.contains("lock file"), "{args:?}: {r:#?}");
    }
}

/// Item 25: a new user's first big file is stored in chunks without a note
/// about the Go sgard; doctor says it. A repository the Go sgard made (no
/// chunking setting) still gets the note, once.
#[test]
fn the_go_sgard_note_is_for_repositories_the_go_sgard_used() {
    let big = vec![7u8; 1 << 20];
    let t = TestEnv::init();
    t.write("big.bin", &big);
    let r = t.sgard(["add", "big.bin"]);
    r.ok();
    assert!(!r.stderr.contains("Go sgard"), "{r:#?}");
    t.sgard(["doctor"])
        .stdout_has("files from 1.0 MiB stored in chunks, which the Go sgard cannot restore");

    // As the Go sgard leaves a repository: no chunking setting.
    let go = TestEnv::init();
    fs::remove_file(go.repo().join("chunking")).unwrap();
    go.write("big.bin", &big);
    go.write("big2.bin", vec![8u8; 1 << 20]);
    go.sgard(["add", "big.bin"])
        .ok()
        .stderr_has("the Go sgard cannot restore those");
    let r = go.sgard(["add", "big2.bin"]);
    r.ok();
    assert!(!r.stderr.contains("Go sgard"), "said twice: {r:#?}");
}

/// Item 25: `prune -n` gives a size below 1 KiB once, not "231 bytes (231
/// bytes)".
#[test]
fn prune_dry_run_says_a_small_size_once() {
    let t = TestEnv::tracking("small", vec![b'x'; 231]);
    t.sgard(["remove", "small"]).ok();
    let r = t.sgard(["prune", "-n"]);
    r.ok().stdout_has(": 231 bytes in all.");
    assert!(!r.stdout.contains("231 bytes (231 bytes)"), "{r:#?}");
}

/// Runs `command` under strace with every `call` that touches `path`
/// failing with `errno`.
fn failing_at(command: &Command, path: &Path, call: &str, errno: &str) -> Run {
    let mut c = Command::new("strace");
    c.args(["-f", "-qq", "-o", "/dev/null", "-P"])
        .arg(path)
        .args(["-e", &format!("trace={call}")])
        .args(["-e", &format!("inject={call}:error={errno}")])
        .arg(command.get_program())
        .args(command.get_args());
    copy_env(command, &mut c);
    c.stdin(Stdio::null()).output().unwrap().into()
}

/// Item 27: an EIO or ENOSPC while a checkpoint opens or reads this
/// machine's index is an error (exit 1), not a damaged record: nothing is
/// rebuilt, no entry becomes a conflict, and the next checkpoint succeeds.
#[test]
fn an_io_error_on_the_index_is_an_error_not_damage() {
    if !strace_works() {
        eprintln!("skipping: strace cannot trace here");
        return;
    }
    for (call, errno) in [("openat", "EIO"), ("openat", "ENOSPC"), ("read", "EIO")] {
        let t = TestEnv::tracking(".vimrc", "set nu\n");
        t.sgard(["checkpoint"]).ok();
        t.write(".vimrc", "set nonu\n");
        let r = failing_at(&t.command(["checkpoint"]), &t.index(), call, errno);
        r.code(1);
        assert!(
            r.stderr.starts_with("sgard: error: ") && r.stderr.contains("index"),
            "{call} {errno}: {r:#?}"
        );
        assert!(!r.stderr.contains("damaged"), "{call} {errno}: {r:#?}");
        t.sgard(["status"]).ok().stdout_has("modified   ~/.vimrc");
        let r = t.sgard(["checkpoint"]);
        r.ok();
        assert!(!r.stderr.contains("damaged"), "{call} {errno}: {r:#?}");
        t.sgard(["status", "--exit-code"]).ok();
    }
}

/// Item 27: an ENOSPC opening this machine's undo log during an `add` is an
/// error; the log is not set aside, and `undo` still reaches the restore.
#[test]
fn an_io_error_on_the_undo_log_does_not_set_it_aside() {
    if !strace_works() {
        eprintln!("skipping: strace cannot trace here");
        return;
    }
    let t = TestEnv::tracking(".vimrc", "set nu\n");
    t.sgard(["checkpoint"]).ok();
    t.write(".vimrc", "mine\n");
    t.sgard(["restore", "-f"]).ok();
    let log = t.state().join("undo/history.yaml");
    assert!(log.is_file());
    // The index vouches for the log only while it is unchanged: touch it
    // so that it is read.
    let text = fs::read(&log).unwrap();
    fs::write(&log, &text).unwrap();
    t.write(".bashrc", "x\n");
    let r = failing_at(&t.command(["add", ".bashrc"]), &log, "openat", "ENOSPC");
    r.code(1);
    assert!(r.stderr.starts_with("sgard: error: "), "{r:#?}");
    assert!(!r.stderr.contains("set aside"), "{r:#?}");
    assert!(log.is_file(), "the log was moved");
    assert!(!t.state().join("undo/history.yaml.damaged").exists());
    t.sgard(["add", ".bashrc"]).ok();
    t.sgard(["undo", "--yes"]).ok();
    assert_eq!(t.read(".vimrc"), b"mine\n");
}

/// Item 28: `log` on a damaged history prints one message, as an error;
/// `status`, which works, warns.
#[test]
fn log_on_a_damaged_history_prints_one_error() {
    let t = TestEnv::tracking(".vimrc", "set nu\n");
    t.sgard(["checkpoint"]).ok();
    fs::write(
        t.repo().join("history.yaml"),
        "version: 1\nsnapshots: [ {{{\n",
    )
    .unwrap();
    let r = t.sgard(["log"]);
    r.code(3);
    let said = messages(&r);
    assert_eq!(said.len(), 1, "{r:#?}");
    assert!(said[0].starts_with("sgard: error: "), "{r:#?}");
    assert!(said[0].contains("history.yaml is damaged"), "{r:#?}");

    let r = t.sgard(["status"]);
    r.ok();
    let said = messages(&r);
    assert_eq!(said.len(), 1, "{r:#?}");
    assert!(
        said[0].starts_with("sgard: warning: the history is damaged"),
        "{r:#?}"
    );
}
