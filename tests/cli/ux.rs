//! How sgard talks: `--dry-run` on every command that writes, `-q` and
//! `-v`, the progress bar (on a terminal only), colour (on a terminal,
//! never with NO_COLOR), prompts that ask again, typo hints and messages
//! that name what they are about.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

/// Every file under `dir` (the home, with the repository and the
/// machine-local state in it), with its bytes, mode and modification time:
/// what a dry run must leave exactly as it was (not even rewritten).
fn tree(dir: &Path) -> BTreeMap<String, (Vec<u8>, u32, i64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let md = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let mtime = {
                use std::os::unix::fs::MetadataExt;
                md.mtime() * 1_000_000_000 + md.mtime_nsec()
            };
            if md.is_dir() {
                stack.push(p);
                out.insert(rel, (Vec::new(), md.permissions().mode(), 0));
            } else if md.is_file() {
                out.insert(rel, (fs::read(&p).unwrap(), md.permissions().mode(), mtime));
            } else {
                let target = fs::read_link(&p).unwrap();
                out.insert(rel, (target.display().to_string().into_bytes(), 0, 0));
            }
        }
    }
    out
}

/// Runs `args` and checks that it changed nothing under the home and
/// said it was a dry run.
#[track_caller]
fn dry(t: &TestEnv, args: &[&str], env: &[(&str, &str)]) -> Run {
    let before = tree(&t.home);
    let mut c = t.command(args);
    c.env("SGARD_TEST_ARGON2", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    let r: Run = c.stdin(Stdio::null()).output().unwrap().into();
    r.ok();
    assert!(
        r.stdout.contains("Dry run") || r.stdout.contains("Already up to date"),
        "{args:?}: {r:#?}"
    );
    let after = tree(&t.home);
    for (k, v) in &before {
        assert_eq!(after.get(k), Some(v), "{args:?} changed {k}; {r:#?}");
    }
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "{args:?} created or deleted files; {r:#?}"
    );
    r
}

const PASS: (&str, &str) = ("SGARD_PASSPHRASE", "correct horse");

#[test]
fn every_writing_command_has_a_dry_run_that_changes_nothing() {
    let t = TestEnv::init();
    t.write("a", "a\n");
    t.write("d/x", "x\n");
    t.write("d/y", "y\n");
    t.write("big", vec![7u8; 2 << 20]);
    t.sgard(["add", "a", "d", "big"]).ok();
    t.sgard(["checkpoint", "-m", "one"]).ok();
    t.sgard(["exclude", "~/d/skip"]).ok();
    t.sgard(["tag", "add", "laptop"]).ok();
    t.sgard(["remote", "set", "127.0.0.1:1"]).ok();

    dry(&t, &["remove", "-n", "~/a"], &[]).stdout_has("untrack    ~/a");
    // checkpoint and restore, with something to record and to restore.
    t.write("a", "a edited\n");
    dry(&t, &["checkpoint", "-n"], &[]).stdout_has("update     ~/a");
    t.write("a", "a\n");
    fs::remove_file(t.path("d/x")).unwrap();
    dry(&t, &["restore", "-n"], &[]).stdout_has("create     ~/d/x");
    t.sgard(["restore"]).ok();
    dry(&t, &["lock", "-n", "~/d"], &[])
        .stdout_has("lock       ~/d/x")
        .stdout_has("would lock 2 paths");
    t.sgard(["lock", "~/a"]).ok();
    dry(&t, &["unlock", "--dry-run", "~/a"], &[]).stdout_has("would unlock 1 path;");
    dry(&t, &["target", "-n", "~/a", "--only", "os:plan9"], &[])
        .stdout_has("target     ~/a (only on os:plan9)");
    dry(&t, &["exclude", "-n", "~/d/y"], &[])
        .stdout_has("would add 1 rule")
        .stdout_has("Would stop tracking 1 excluded entry:\n  ~/d/y\n");
    dry(&t, &["include", "-n", "~/d/skip"], &[]).stdout_has("would remove 1 rule");
    dry(&t, &["tag", "add", "-n", "work"], &[]).stdout_has("would add tag \"work\"");
    dry(&t, &["tag", "remove", "-n", "laptop"], &[]).stdout_has("would remove tag \"laptop\"");
    dry(&t, &["remote", "set", "-n", "10.0.0.1:9"], &[])
        .stdout_has("would set the remote to 10.0.0.1:9");
    dry(&t, &["remote", "unset", "-n"], &[]).stdout_has("would forget the remote 127.0.0.1:1");
    dry(&t, &["chunking", "--off", "-n"], &[])
        .stdout_has("Would store 1 chunked file of the head whole (2.0 MiB)")
        .stdout_has("Nothing was changed.");

    // mirror up: a new file, a deleted one, a changed one.
    t.write("d/new", "new\n");
    fs::remove_file(t.path("d/x")).unwrap();
    t.write("d/y", "y changed\n");
    dry(&t, &["mirror", "up", "-n", "~/d"], &[])
        .stdout_has("add        ~/d/new")
        .stdout_has("remove     ~/d/x")
        .stdout_has("update     ~/d/y")
        .stdout_has("would be 1 added, 1 removed, 1 updated");
    t.write("d/x", "x\n");
    t.write("d/y", "y\n");
    fs::remove_file(t.path("d/new")).unwrap();

    // add: a new file, a changed one, an unchanged one, a symlinked folder
    // followed.
    t.write("n1", "n1\n");
    t.write("a", "a changed\n");
    t.write("elsewhere/inner", "i\n");
    std::os::unix::fs::symlink(t.path("elsewhere"), t.path("d/linked")).unwrap();
    dry(&t, &["add", "-n", "n1", "a", "big"], &[])
        .stdout_has("add        ~/n1\n")
        .stdout_has("refresh    ~/a\n")
        .stdout_has("would add 1 path, refresh 1, 1 already up to date; nothing was changed.");
    dry(&t, &["add", "-n", "--follow", "d"], &[]).stdout_has("add        ~/d/linked/inner\n");
    t.write("a", "a\n");
    fs::remove_file(t.path("d/linked")).unwrap();

    // encryption: init, then its other commands.
    dry(&t, &["encrypt", "init", "-n"], &[PASS]).stdout_has("would create a data key");
    t.command(["encrypt", "init"])
        .env("SGARD_TEST_ARGON2", "1")
        .env(PASS.0, PASS.1)
        .output()
        .unwrap();
    t.write("secret", "s3cret\n");
    let r: Run = t
        .command(["add", "--encrypt", "secret"])
        .env(PASS.0, PASS.1)
        .output()
        .unwrap()
        .into();
    r.ok();
    dry(&t, &["encrypt", "change-passphrase", "-n"], &[PASS]).stdout_has("would unlock");
    dry(&t, &["encrypt", "rotate-dek", "-n"], &[PASS])
        .stdout_has("re-encrypt 1 file and re-wrap 1 key slot");
    // The only slot: refused in a dry run as for real.
    let r = t.sgard(["encrypt", "remove-slot", "-n", "passphrase"]);
    r.code(1).stderr_has("only key slot");

    // init: in a home without a repository.
    let fresh = TestEnv::new();
    dry(&fresh, &["init", "-n"], &[]).stdout_has("would create an sgard repository at");
    assert!(!fresh.repo().exists());
    t.sgard(["init", "-n"])
        .code(1)
        .stderr_has("already an sgard repository");
}

#[test]
fn quiet_prints_only_errors_and_verbose_lists_every_path() {
    let t = TestEnv::init();
    t.write("d/a", "a\n");
    t.write("d/b", "b\n");
    let r = t.sgard(["-q", "add", "d"]);
    r.ok();
    assert_eq!(r.stdout, "", "{r:#?}");
    assert_eq!(r.stderr, "", "{r:#?}");
    // A query still answers.
    t.sgard(["status", "-q"])
        .ok()
        .stdout_has("ok         ~/d/a");
    // An error is still printed, whole.
    let r = t.sgard(["-q", "remove", "~/nope"]);
    r.code(1);
    assert_eq!(r.stdout, "");
    r.stderr_has("sgard: error: not tracked: ~/nope");
    // -v lists each path as it is handled, on stderr.
    t.write("d/c", "c\n");
    let r = t.sgard(["add", "-v", "d"]);
    r.ok()
        .stderr_has("unchanged ~/d/a\n")
        .stderr_has("unchanged ~/d/b\n")
        .stderr_has("added ~/d/c\n");
    // A warning (a FIFO skipped) shows normally, not with -q.
    let fifo = t.path("d/pipe");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success());
    t.sgard(["add", "d"])
        .ok()
        .stderr_has("sgard: warning: skipped ~/d/pipe");
    let r = t.sgard(["add", "-q", "d"]);
    r.ok();
    assert_eq!(r.stderr, "", "{r:#?}");
    t.sgard(["-q", "-v", "status"]).code(2);
    // A dry run's report and doctor's checks are answers: -q keeps them.
    t.write("d/new", "n\n");
    t.sgard(["-q", "add", "-n", "d"])
        .ok()
        .stdout_has("add        ~/d/new");
    fs::remove_file(t.path("d/new")).unwrap();
    t.sgard(["-q", "doctor"]).stdout_has("manifest");
}

/// Runs `sgard <args>` under a pseudo-terminal (`quiet`: with -q), the add
/// held at the point where its phase has begun and counted its bytes
/// (`add-copied`) for 400 ms, long enough for the bar to be drawn.
fn held_add_on_a_pty(t: &TestEnv, args: &str, gate: &str) -> Run {
    let gate = t.outside().join(gate);
    let opener = {
        let gate = gate.clone();
        std::thread::spawn(move || {
            let reached = gate.with_extension("reached");
            for _ in 0..3000 {
                if reached.exists() {
                    std::thread::sleep(Duration::from_millis(400));
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            fs::write(&gate, "go").unwrap();
        })
    };
    let mut c = t.command(std::iter::empty::<&str>());
    c.env("SGARD_PROGRESS_DELAY_MS", "0")
        .env("TERM", "xterm")
        .env(
            "SGARD_TEST_WAIT_AT",
            format!("add-copied:{}", gate.display()),
        );
    let r = pty_run(&c, args, "");
    opener.join().unwrap();
    assert!(
        gate.with_extension("reached").exists(),
        "the add never reached its wait: {r:#?}"
    );
    r
}

/// The progress bar is drawn on a terminal (here, once the phase has run
/// for `SGARD_PROGRESS_DELAY_MS`), never on a pipe or with -q.
#[test]
fn progress_shows_on_a_terminal_only() {
    if !on_path("script") {
        eprintln!("note: `script` (util-linux) is not installed; skipping the pty test");
        return;
    }
    let t = TestEnv::init();
    t.write("big", vec![3u8; 8 << 20]);
    t.write("d/one", "1\n");
    let r = held_add_on_a_pty(&t, "add big d", "gate1");
    r.ok();
    assert!(
        r.stdout.contains("adding ["),
        "no bar on a terminal: {r:#?}"
    );
    assert!(r.stdout.contains("files"), "{r:#?}");
    assert!(r.stdout.contains("MiB"), "{r:#?}");

    // With -q on a terminal: no bar.
    t.write("big3", vec![5u8; 8 << 20]);
    t.write("e/one", "1\n");
    let r = held_add_on_a_pty(&t, "-q add big3 e", "gate2");
    r.ok();
    assert!(!r.stdout.contains("adding"), "{r:#?}");

    // On a pipe, held as long: no bar.
    t.write("big2", vec![4u8; 8 << 20]);
    t.write("f/one", "1\n");
    let gate = t.outside().join("gate3");
    let child = t
        .command(["add", "big2", "f"])
        .env("SGARD_PROGRESS_DELAY_MS", "0")
        .env("TERM", "xterm")
        .env(
            "SGARD_TEST_WAIT_AT",
            format!("add-copied:{}", gate.display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while !gate.with_extension("reached").exists() {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(400));
    fs::write(&gate, "go").unwrap();
    let r: Run = child.wait_with_output().unwrap().into();
    r.ok();
    assert!(!r.stderr.contains('['), "a bar on a pipe: {r:#?}");
    assert!(!r.stderr.contains('\r'), "{r:#?}");
}

/// Colour on a terminal, in every command's status words and on stderr;
/// none with NO_COLOR, none on a pipe.
#[test]
fn colour_on_a_terminal_only_and_never_with_no_color() {
    if !on_path("script") {
        eprintln!("note: `script` (util-linux) is not installed; skipping the pty test");
        return;
    }
    let t = TestEnv::init();
    t.write("f", "f\n");
    t.sgard(["add", "f"]).ok();
    fs::remove_file(t.path("f")).unwrap();
    let mut c = t.command(std::iter::empty::<&str>());
    c.env_remove("NO_COLOR").env("TERM", "xterm-256color");
    let r = pty_run(&c, "restore", "");
    r.ok();
    assert!(r.stdout.contains("\x1b[32mcreated"), "{r:#?}");
    let r = pty_run(&c, "remove ~/nope", "");
    assert!(r.stdout.contains("\x1b[31merror:"), "{r:#?}");
    let r = pty_run(&c, "verify", "");
    assert!(r.stdout.contains("\x1b[32mok"), "{r:#?}");
    t.write("f", "g\n");
    let r = pty_run(&c, "diff", "");
    assert!(r.stdout.contains("\x1b[31m-f"), "{r:#?}");
    assert!(r.stdout.contains("\x1b[32m+g"), "{r:#?}");
    t.sgard(["checkpoint"]).ok();
    let r = pty_run(&c, "log", "");
    assert!(
        r.stdout.contains("\x1b[33m"),
        "snapshot ids in yellow: {r:#?}"
    );

    c.env("NO_COLOR", "1");
    fs::remove_file(t.path("f")).unwrap();
    let r = pty_run(&c, "restore", "");
    r.ok();
    assert!(!r.stdout.contains('\x1b'), "{r:#?}");

    // A pipe gets none, NO_COLOR or not.
    fs::remove_file(t.path("f")).unwrap();
    let r: Run = t
        .command(["restore"])
        .env_remove("NO_COLOR")
        .env("TERM", "xterm-256color")
        .output()
        .unwrap()
        .into();
    r.ok().stdout_has("created    ~/f");
    assert!(
        !r.stdout.contains('\x1b') && !r.stderr.contains('\x1b'),
        "{r:#?}"
    );
}

/// The overwrite question and the y/N question ask again on a typo, at a
/// terminal.
#[test]
fn questions_ask_again_on_a_typo() {
    if !on_path("script") {
        eprintln!("note: `script` (util-linux) is not installed; skipping the pty test");
        return;
    }
    let t = TestEnv::init();
    t.write("d/keep", "k\n");
    t.sgard(["add", "d"]).ok();
    t.write("d/stray", "s\n");
    let c = t.command(std::iter::empty::<&str>());
    let r = pty_run(&c, "mirror down ~/d", "maybe\ny\n");
    r.ok().stdout_has("\"maybe\" is neither yes nor no");
    assert!(!t.path("d/stray").exists());

    t.write("d/stray", "s\n");
    let r = pty_run(&c, "mirror down ~/d", "x\nz\nq\n");
    r.ok();
    assert_eq!(
        r.stdout.matches("is neither yes nor no").count(),
        3,
        "{r:#?}"
    );
    assert!(t.path("d/stray").exists(), "three typos must not delete");

    // The overwrite question: a typo shows the choices and asks again.
    t.write("d/keep", "local\n");
    let r = pty_run(&c, "restore ~/d/keep", "what\ny\n");
    r.ok().stdout_has("n - keep it as it is");
    assert_eq!(t.read("d/keep"), b"k\n");
}

#[test]
fn a_mistyped_command_suggests_only_the_nearest() {
    let t = TestEnv::init();
    let r = t.sgard(["chekpoint"]);
    r.code(2).stderr_has("'checkpoint'");
    assert!(!r.stderr.contains("completion"), "{r:#?}");
    let r = t.sgard(["stauts"]);
    r.code(2).stderr_has("'status'");
    let r = t.sgard(["xyzzy"]);
    r.code(2);
    assert!(!r.stderr.contains("similar"), "{r:#?}");
    // Below a command, its own subcommands are the candidates.
    t.sgard(["mirror", "dwon"]).code(2).stderr_has("'down'");
    t.sgard(["encrypt", "rotate-dke"])
        .code(2)
        .stderr_has("'rotate-dek'");
}

#[test]
fn messages_name_what_they_are_about() {
    let t = TestEnv::tracking("f", "f\n");
    // An untracked path is named.
    t.sgard(["restore", "~/.zshrc"])
        .code(1)
        .stderr_has("not tracked: ~/.zshrc");
    // Each cause once: no line repeats, none is a library's enum name.
    let r = t.sgard(["push", "-r", "127.0.0.1:1"]);
    r.code(1).stderr_has("nothing is listening at 127.0.0.1:1");
    let lines: Vec<&str> = r.stderr.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        assert!(!lines[..i].contains(l), "{r:#?}");
    }
    assert!(!r.stderr.contains("transport error"), "{r:#?}");
    // An empty SGARD_PASSPHRASE is said to be set (with no terminal to ask
    // on: setsid detaches it).
    if !on_path("setsid") {
        eprintln!("note: no setsid; skipping the passphrase part");
        return;
    }
    t.command(["encrypt", "init"])
        .env("SGARD_TEST_ARGON2", "1")
        .env(PASS.0, PASS.1)
        .output()
        .unwrap();
    t.write("s", "s\n");
    let c = t.command(["add", "--encrypt", "s"]);
    let mut s = Command::new("setsid");
    s.arg("-w").arg(c.get_program()).args(c.get_args());
    copy_env(&c, &mut s);
    s.env("SGARD_PASSPHRASE", "");
    let r: Run = s.stdin(Stdio::null()).output().unwrap().into();
    r.code(1)
        .stderr_has("no passphrase (SGARD_PASSPHRASE is set, but empty)");
}

/// One unreadable file in a folder: the add names it and the exclude rule
/// that would keep it out, and adds nothing. (Root reads anything, so the
/// refusal is injected with strace where it can trace.)
#[test]
fn an_unreadable_file_names_itself_and_the_exclude_rule() {
    let t = TestEnv::init();
    t.write("conf/ok", "fine\n");
    let secret = t.write("conf/locked", "no\n");
    let before = t.manifest();
    let root = fs::File::open("/proc/self/status")
        .map(|_| fs::read_to_string("/proc/self/status").unwrap())
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    let r = if root {
        if !strace_works() {
            eprintln!("note: root without a working strace; skipping");
            return;
        }
        let c = t.command(["add", "conf"]);
        let mut s = Command::new("strace");
        s.args(["-f", "-qq", "-o", "/dev/null", "-P"])
            .arg(&secret)
            .args([
                "-e",
                "trace=openat,open",
                "-e",
                "inject=openat,open:error=EACCES",
            ])
            .arg(c.get_program())
            .args(c.get_args());
        copy_env(&c, &mut s);
        let r: Run = s.stdin(Stdio::null()).output().unwrap().into();
        r
    } else {
        fs::set_permissions(&secret, fs::Permissions::from_mode(0o000)).unwrap();
        t.sgard(["add", "conf"])
    };
    r.code(1)
        .stderr_has("conf/locked: permission denied; nothing was added")
        .stderr_has("`sgard exclude ~/conf/locked` keeps it out");
    assert_eq!(t.manifest(), before);
}

/// `undo` on a terminal says what it will reverse and asks; `n` (or a
/// typo three times) reverses nothing (exit 4), `y` reverses it; `-y` asks
/// nothing.
#[test]
fn undo_asks_on_a_terminal() {
    if !on_path("script") {
        eprintln!("note: `script` (util-linux) is not installed; skipping the pty test");
        return;
    }
    let t = TestEnv::tracking("f", "one\n");
    t.write("f", "local\n");
    t.sgard(["restore", "-f"]).ok();
    assert_eq!(t.read("f"), b"one\n");
    let c = t.command(std::iter::empty::<&str>());
    let r = pty_run(&c, "undo", "n\n");
    assert_eq!(r.code, 4, "{r:#?}");
    r.stdout_has("Undo the restore of")
        .stdout_has("~/f")
        .stdout_has("Reverse it? [y/N]");
    assert_eq!(t.read("f"), b"one\n");
    let r = pty_run(&c, "undo", "y\n");
    r.ok();
    assert_eq!(t.read("f"), b"local\n");
    // -y: no question, on a terminal too.
    let r = pty_run(&c, "undo -y", "");
    r.ok();
    assert!(!r.stdout.contains("Reverse it?"), "{r:#?}");
    assert_eq!(t.read("f"), b"one\n");
}
