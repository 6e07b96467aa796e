//! Stories of issue 30: restore, undo records, scripts, templates and the
//! temp files restore leaves behind.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Stdio};

use crate::common::*;
use crate::hostile::debris;
use crate::sync::{World, local, sg, sg_env, world_or_skip};

/// Runs `args` in `t` with the test hook `var` set to `point`, stdin closed.
fn hooked(t: &TestEnv, args: &[&str], var: &str, point: &str) -> Run {
    t.command(args)
        .env(var, point)
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into()
}

/// The reasons of this machine's log, newest first (`log` lines).
fn reasons(t: &TestEnv) -> Vec<String> {
    let r = t.sgard(["log"]);
    r.ok();
    r.stdout
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5).map(str::to_owned))
        .collect()
}

/// A repository of `n` files under `~/conf`, checkpointed, then removed
/// from the home: a restore into a fresh home writes them all.
fn fresh_home(n: usize) -> TestEnv {
    let t = TestEnv::init();
    for i in 0..n {
        t.write(&format!("conf/f{i}"), format!("file {i}\n"));
    }
    t.sgard(["add", "~/conf"]).ok();
    t.sgard(["checkpoint"]).ok();
    fs::remove_dir_all(t.path("conf")).unwrap();
    t
}

/// Item 3. Ctrl-C before a restore recorded its safety snapshot: nothing
/// written, nothing recorded, nothing for `undo` to act on.
#[test]
fn a_restore_interrupted_before_it_records_writes_and_records_nothing() {
    let t = fresh_home(12);
    let r = hooked(
        &t,
        &["restore"],
        "SGARD_TEST_INTERRUPT_AT",
        "restore-before-snapshot",
    );
    r.code(130).stderr_has("interrupted");
    for i in 0..12 {
        assert!(!t.path(&format!("conf/f{i}")).exists(), "f{i} was written");
    }
    assert!(debris(&t.home).is_empty(), "{:?}", debris(&t.home));
    assert_eq!(reasons(&t), ["checkpoint"], "the log names a restore");
    t.sgard(["undo", "-y"])
        .code(1)
        .stderr_has("nothing to undo");
    // The next restore does the whole job.
    t.sgard(["restore"]).ok();
    assert_eq!(t.read("conf/f11"), b"file 11\n");
}

/// Item 3. Ctrl-C once the safety snapshot is recorded (the files staged
/// beside their destinations): the staged files are put in place before
/// the command stops, so the record names what is on disk, and `undo`
/// reverses exactly that.
#[test]
fn a_restore_interrupted_after_it_recorded_writes_what_its_record_names() {
    for point in ["restore-after-snapshot", "restore-staged"] {
        let t = fresh_home(12);
        let r = hooked(&t, &["restore"], "SGARD_TEST_INTERRUPT_AT", point);
        r.code(130).stderr_has("interrupted");
        assert!(debris(&t.home).is_empty(), "{point}: {:?}", debris(&t.home));
        assert_eq!(
            reasons(&t),
            ["restore", "before-restore", "checkpoint"],
            "{point}"
        );
        for i in 0..12 {
            assert_eq!(
                t.read(&format!("conf/f{i}")),
                format!("file {i}\n").as_bytes(),
                "{point}: the record names f{i}, which was not written"
            );
        }
        let st = t.sgard(["status"]);
        st.ok();
        assert!(!st.stdout.contains("missing"), "{point}: {st:#?}");
        let u = t.sgard(["undo", "-y"]);
        u.ok().stdout_has("deleted    ~/conf/f0");
        assert!(!t.path("conf/f0").exists(), "{point}");
    }
}

/// Item 3. A restore killed right after it recorded (a `kill -9`: nothing
/// written) leaves a record `undo` cannot pretend to reverse: it says there
/// is nothing to undo, not "Undo complete".
#[test]
fn undo_of_a_restore_that_never_reached_the_disk_says_nothing_to_undo() {
    let t = fresh_home(4);
    let r = hooked(
        &t,
        &["restore"],
        "SGARD_TEST_CRASH_AT",
        "restore-after-snapshot",
    );
    assert_ne!(r.code, 0, "{r:#?}");
    assert!(!t.path("conf/f0").exists());
    let u = t.sgard(["undo", "-y"]);
    u.ok().stdout_has("Nothing to undo");
    assert!(!u.stdout.contains("Undo complete"), "{u:#?}");
    t.sgard(["restore"]).ok();
    assert_eq!(t.read("conf/f3"), b"file 3\n");
}

/// Item 3, at a real Ctrl-C: a restore held just before it records (the
/// test hook waits there), sent SIGINT, ends with exit 130 having written
/// and recorded nothing.
#[test]
fn a_real_ctrl_c_before_the_record_leaves_no_record() {
    let t = fresh_home(6);
    let gate = t.outside().join("gate");
    let hook = format!("restore-before-snapshot:{}", gate.display());
    let child = t
        .command(["restore"])
        .env("SGARD_TEST_WAIT_AT", &hook)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reached = t.outside().join("gate.reached");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !reached.exists() {
        assert!(
            std::time::Instant::now() < until,
            "the hook was not reached"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    fs::write(&gate, "after-signal").unwrap();
    let r = wait_limited(child, std::time::Duration::from_secs(60)).unwrap();
    r.code(130);
    assert!(!t.path("conf/f0").exists());
    assert!(debris(&t.home).is_empty(), "{:?}", debris(&t.home));
    assert_eq!(reasons(&t), ["checkpoint"]);
}

/// A script that appends `tag` to `<outside>/ran` and exits 0.
fn script(t: &TestEnv, rel: &str, tag: &str) -> String {
    let log = t.outside().join("ran");
    let p = t.write(
        rel,
        format!("#!/bin/sh\necho {tag} >> '{}'\n", log.display()),
    );
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    format!("~/{rel}")
}

fn ran(t: &TestEnv) -> Vec<String> {
    fs::read_to_string(t.outside().join("ran"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Item 4. A `once` script runs once per distinct content on this
/// machine, whichever repository brings it: a second repository holding
/// the same script does not run it again.
#[test]
fn a_once_script_does_not_run_again_from_a_second_repository() {
    let t = TestEnv::init();
    let s = script(&t, "bin/setup.sh", "once");
    t.sgard(["add", "--run", "once", &s]).ok();
    t.sgard(["restore"]).ok();
    assert_eq!(ran(&t), ["once"]);
    let second = t.path("second");
    let repo = second.to_str().unwrap();
    t.sgard(["--repo", repo, "init"]).ok();
    t.sgard(["--repo", repo, "add", "--run", "once", &s]).ok();
    t.sgard(["--repo", repo, "restore"]).ok();
    t.sgard(["--repo", repo, "run-scripts"])
        .ok()
        .stdout_has("No scripts are due.");
    assert_eq!(
        ran(&t),
        ["once"],
        "the script ran again for another repository"
    );
    // A new content is a new script, in either repository.
    let mut text = fs::read_to_string(t.path("bin/setup.sh")).unwrap();
    text.push_str("# v2\n");
    t.write("bin/setup.sh", &text);
    t.sgard(["--repo", repo, "add", &s]).ok();
    t.sgard(["--repo", repo, "restore"]).ok();
    assert_eq!(ran(&t), ["once", "once"]);
    t.sgard(["add", &s]).ok();
    t.sgard(["restore"]).ok();
    assert_eq!(ran(&t), ["once", "once"], "v2 already ran on this machine");
}

/// Item 4. What an older sgard recorded per repository counts: its
/// records are merged into the machine's (and its file removed) when a
/// run is next recorded.
#[test]
fn per_repository_script_records_of_older_versions_count() {
    let t = TestEnv::init();
    let s = script(&t, "bin/setup.sh", "once");
    let other = script(&t, "bin/other.sh", "other");
    t.sgard(["add", "--run", "once", &s, &other]).ok();
    // As an older version kept it: a record in this repository's state
    // that setup.sh (this content) ran.
    let content = fs::read(t.path("bin/setup.sh")).unwrap();
    let legacy = t.state().join("scripts");
    fs::create_dir_all(t.state()).unwrap();
    fs::write(
        &legacy,
        format!("{} {}\n", sha(&content), sha("~/bin/setup.sh")),
    )
    .unwrap();
    t.sgard(["restore"]).ok();
    assert_eq!(ran(&t), ["other"], "the older record was not read");
    assert!(!legacy.exists(), "the older record was not merged");
    let machine = t.home.join(".state/sgard/scripts");
    let text = fs::read_to_string(machine).unwrap();
    assert!(text.contains(&sha(&content)), "{text}");
    t.sgard(["run-scripts"])
        .ok()
        .stdout_has("No scripts are due.");
}

/// Item 4, through a server: `pull -r` into a fresh `~/.sgard` on a
/// machine that already ran the script from another repository.
#[test]
fn a_once_script_does_not_run_again_after_a_pull_into_a_fresh_repository() {
    let w = world_or_skip!(1);
    let key = w.key(0);
    let srv = w.serve(&[]);
    let t = TestEnv::init();
    let s = script(&t, "bin/setup.sh", "once");
    local(&t, &["add", "--run", "once", &s]).ok();
    local(&t, &["checkpoint"]).ok();
    local(&t, &["restore"]).ok();
    assert_eq!(ran(&t), ["once"]);
    sg(&t, key, &["push", "-r", &srv.addr]).ok();
    fs::rename(t.repo(), t.path("old-sgard")).unwrap();
    sg(&t, key, &["pull", "-r", &srv.addr]).ok();
    assert!(t.repo().join("manifest.yaml").exists());
    assert_eq!(ran(&t), ["once"], "the pull ran the script again");
}

/// Item 9. Answering `n` keeps the file and says so once, in one honest
/// summary: never "every entry is up to date".
#[test]
fn answering_no_keeps_the_file_and_the_summary_says_so() {
    let t = TestEnv::init();
    for f in [".bashrc", ".vimrc", ".zshrc"] {
        t.write(f, format!("{f} v1\n"));
    }
    t.sgard(["add", "~/.bashrc", "~/.vimrc", "~/.zshrc"]).ok();
    t.sgard(["checkpoint"]).ok();
    t.write(".bashrc", "mine\n");
    fs::remove_file(t.path(".vimrc")).unwrap();
    fs::remove_file(t.path(".zshrc")).unwrap();
    let r = t.sgard_stdin(["restore"], "n\n");
    r.ok()
        .stdout_has("kept       ~/.bashrc")
        .stdout_has("created    ~/.vimrc")
        .stdout_has("Restored 2, kept 1 as it is here.");
    assert!(!r.stdout.contains("up to date"), "{r:#?}");
    assert_eq!(t.read(".bashrc"), b"mine\n");
    // Only a question, answered no.
    let r = t.sgard_stdin(["restore"], "n\n");
    r.ok().stdout_has("Restored 0, kept 1 as it is here.");
    assert!(!r.stdout.contains("up to date"), "{r:#?}");
    assert!(!r.stdout.contains("Restore complete"), "{r:#?}");
    t.sgard(["status"]).ok().stdout_has("modified   ~/.bashrc");
    // No answer at all (end of input) is not an answer: refused, exit 4.
    t.sgard(["restore"])
        .code(4)
        .stdout_has("refused    ~/.bashrc")
        .stderr_has("left as it is");
}

/// Item 9. `q` at a real terminal is an answer: that file and the rest
/// asked about are kept, exit 0, and nobody is told to "answer the
/// question at a terminal".
#[test]
fn quitting_at_a_terminal_keeps_the_rest_and_exits_0() {
    if !on_path("script") {
        eprintln!("note: `script` (util-linux) is not installed; skipping the pty test");
        return;
    }
    let t = TestEnv::init();
    for f in [".a", ".b", ".c"] {
        t.write(f, "repo\n");
    }
    t.sgard(["add", "~/.a", "~/.b", "~/.c"]).ok();
    t.sgard(["checkpoint"]).ok();
    for f in [".a", ".b", ".c"] {
        t.write(f, "mine\n");
    }
    let c = t.command(std::iter::empty::<&str>());
    let r = pty_run(&c, "restore", "q\n");
    r.ok()
        .stdout_has("kept       ~/.a")
        .stdout_has("kept       ~/.c")
        .stdout_has("Restored 0, kept 3 as they are here.");
    assert_eq!(r.stdout.matches("Overwrite it?").count(), 1, "{r:#?}");
    assert!(!r.stdout.contains("at a terminal"), "{r:#?}");
    for f in [".a", ".b", ".c"] {
        assert_eq!(t.read(f), b"mine\n", "{f}");
    }
}

/// Item 18. A failing script is reported once, with its cause once.
#[test]
fn a_failing_script_is_reported_once() {
    let t = TestEnv::init();
    let p = t.write("bin/fail.sh", "#!/bin/sh\nexit 3\n");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    t.sgard(["add", "--run", "once", "~/bin/fail.sh"]).ok();
    for args in [&["restore"][..], &["run-scripts"]] {
        let r = t.sgard(args);
        r.code(1);
        assert_eq!(
            r.stderr.matches("~/bin/fail.sh").count(),
            1,
            "{args:?}: {r:#?}"
        );
        assert_eq!(r.stderr.matches("exit status: 3").count(), 1, "{r:#?}");
        assert_eq!(r.stderr.matches("sgard: error:").count(), 1, "{r:#?}");
        assert!(r.stderr.contains("runs again next time"), "{r:#?}");
        assert!(
            !r.stderr.contains("the files were restored"),
            "{args:?}: {r:#?}"
        );
    }
    // Two failures: one error, each cause once.
    let q = t.write("bin/other.sh", "#!/bin/sh\nexit 4\n");
    fs::set_permissions(&q, fs::Permissions::from_mode(0o755)).unwrap();
    t.sgard(["add", "--run", "once", "~/bin/other.sh"]).ok();
    let r = t.sgard(["run-scripts"]);
    r.code(1).stderr_has("2 scripts failed");
    assert_eq!(r.stderr.matches("sgard: error:").count(), 1, "{r:#?}");
    assert_eq!(r.stderr.matches("~/bin/fail.sh").count(), 1, "{r:#?}");
    assert_eq!(r.stderr.matches("~/bin/other.sh").count(), 1, "{r:#?}");
    assert_eq!(r.stderr.matches("exit status: 4").count(), 1, "{r:#?}");
}

/// Item 24. Block tags on lines of their own leave no blank line (and no
/// indentation) behind: templates render with `trim_blocks` and
/// `lstrip_blocks`.
#[test]
fn block_tags_on_their_own_lines_leave_no_blank_lines() {
    let t = TestEnv::init();
    t.write(
        ".gitconfig",
        "[core]\n\
         {% if sgard.hostname == \"testhost\" %}\n\
         \x20   editor = vim\n\
         {% endif %}\n\
         \x20   {% if sgard.hostname == \"elsewhere\" %}\n\
         \x20   pager = more\n\
         \x20   {% endif %}\n\
         {% for t in [\"a\", \"b\"] %}\n\
         [{{ t }}]\n\
         {% endfor %}\n\
         [user]\n",
    );
    t.sgard(["add", "--template", "~/.gitconfig"]).ok();
    let want = "[core]\n    editor = vim\n[a]\n[b]\n[user]\n";
    t.sgard(["render", "~/.gitconfig"]).ok();
    assert_eq!(t.sgard(["render", "~/.gitconfig"]).stdout, want);
    t.sgard(["restore"]).ok();
    assert_eq!(String::from_utf8(t.read(".gitconfig")).unwrap(), want);
    t.sgard(["status"])
        .ok()
        .stdout_has("ok         ~/.gitconfig");
}

/// A pid no process has (beyond the kernel's maximum).
const DEAD: u32 = 4_194_305;

/// Item 26. A run that writes into a folder removes the temp files dead
/// sgard processes left there, even where no tracked entry of the head
/// lives (`restore --at` of a file no longer tracked).
#[test]
fn a_write_into_a_folder_removes_the_debris_of_dead_processes_there() {
    let t = TestEnv::init();
    t.write("old/f", "old\n");
    t.sgard(["add", "~/old/f"]).ok();
    t.sgard(["checkpoint"]).ok();
    t.sgard(["remove", "~/old/f"]).ok();
    t.sgard(["checkpoint"]).ok();
    fs::remove_file(t.path("old/f")).unwrap();
    let stray = [
        t.path(&format!("old/.sgard-restore-{DEAD}-abc-0-f")),
        t.path(&format!("old/.sgard-link-{DEAD}-abc-l")),
    ];
    for p in &stray {
        fs::write(p, "half").unwrap();
    }
    let mine = t.path("old/.sgard-restore-x");
    fs::write(&mine, "not ours by name").unwrap();
    t.sgard(["restore", "--at", "@~1", "~/old/f"]).ok();
    assert_eq!(t.read("old/f"), b"old\n");
    for p in &stray {
        assert!(!p.exists(), "{} left", p.display());
    }
    assert!(
        mine.exists(),
        "a file not named as ours (no pid) was removed"
    );
}

/// Item 26, the story: a `pull` killed while its files were staged leaves
/// them in the home; `doctor` names them, and the next `pull` (which
/// writes into those folders) removes them.
#[test]
fn debris_of_a_killed_pull_is_named_by_doctor_and_removed_by_the_next_pull() {
    let w = world_or_skip!(2);
    let srv = w.serve(&[]);
    let a = TestEnv::init();
    a.write("d/f", "f\n");
    a.write("d/g", "g\n");
    std::os::unix::fs::symlink("f", a.path("d/l")).unwrap();
    local(&a, &["add", "~/d"]).ok();
    local(&a, &["checkpoint"]).ok();
    sg(&a, w.key(0), &["push", "-r", &srv.addr]).ok();
    let b = TestEnv::new();
    // Killed (abort: nothing flushed) once its files are staged.
    let r = sg_env(
        &b,
        Some(w.key(1)),
        &["pull", "-r", &srv.addr],
        &[("SGARD_TEST_CRASH_AT", "restore-staged")],
    );
    assert_ne!(r.code, 0, "{r:#?}");
    // What a killed link write leaves, by a process that is gone.
    let link = b.path(&format!("d/.sgard-link-{DEAD}-abc-l"));
    std::os::unix::fs::symlink("f", &link).unwrap();
    let left = debris(&b.home);
    assert!(left.len() >= 3, "{left:?}");
    let doc = local(&b, &["doctor"]);
    let temp = doc
        .stdout
        .lines()
        .find(|l| l.contains("temp-files"))
        .unwrap_or_default()
        .to_owned();
    assert!(temp.contains("beside tracked files"), "{doc:#?}");
    assert!(temp.contains(".sgard-restore-"), "{doc:#?}");
    assert!(temp.contains(".sgard-link-"), "{doc:#?}");
    sg(&b, w.key(1), &["pull", "-r", &srv.addr]).ok();
    assert_eq!(b.read("d/f"), b"f\n");
    assert_eq!(b.read("d/g"), b"g\n");
    let left = debris(&b.home);
    assert!(left.is_empty(), "the next pull left {left:?}");
}

/// Item 26, where no entry leads: a `restore --at` of a file the head no
/// longer tracks, killed once its file is staged, leaves it in a folder no
/// entry names; the next run that writes into the home (here a restore of
/// another file, elsewhere) still clears it, from the dead run's journal.
#[test]
fn debris_where_no_entry_is_cleared_by_the_next_restore_anywhere() {
    let t = TestEnv::init();
    t.write("old/f", "old\n");
    t.write("x", "1\n");
    t.sgard(["add", "~/old/f", "~/x"]).ok();
    t.sgard(["checkpoint"]).ok();
    t.sgard(["remove", "~/old/f"]).ok();
    t.sgard(["checkpoint"]).ok();
    fs::remove_file(t.path("old/f")).unwrap();
    let r = hooked(
        &t,
        &["restore", "--at", "@~1", "~/old/f"],
        "SGARD_TEST_CRASH_AT",
        "restore-staged",
    );
    assert_ne!(r.code, 0, "{r:#?}");
    assert!(!debris(&t.home).is_empty(), "the killed run staged nothing");
    fs::write(t.path("x"), "2\n").unwrap();
    t.sgard(["restore", "-f", "~/x"]).ok();
    assert_eq!(t.read("x"), b"1\n");
    let left = debris(&t.home);
    assert!(left.is_empty(), "the next restore left {left:?}");
}
