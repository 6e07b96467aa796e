//! `sgard doctor`: a healthy setup passes every check; each problem it
//! names is found, with what to do, and an error makes it exit 1; it
//! changes nothing.

use std::ffi::OsStr;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::sync::{fingerprint, keygen, make_certs, pubkey};

/// How long one doctor run may take before the test calls it hung.
const LIMIT: Duration = Duration::from_secs(60);

/// One check's line: its status and the rest (detail, then the hint line
/// if any).
#[derive(Debug)]
struct Line {
    status: String,
    detail: String,
    hint: Option<String>,
}

/// The checks of a text report, by name, in order.
fn checks(r: &Run) -> Vec<(String, Line)> {
    let mut out: Vec<(String, Line)> = Vec::new();
    for l in r.stdout.lines() {
        if let Some(h) = l.trim_start().strip_prefix("→ ") {
            let last = out.last_mut().expect("a hint before any check");
            last.1.hint = Some(h.to_owned());
            continue;
        }
        let mut w = l.split_whitespace();
        let (Some(status), Some(name)) = (w.next(), w.next()) else {
            continue;
        };
        if !["ok", "warning", "error"].contains(&status) {
            continue;
        }
        let detail = w.collect::<Vec<_>>().join(" ");
        out.push((
            name.to_owned(),
            Line {
                status: status.to_owned(),
                detail,
                hint: None,
            },
        ));
    }
    out
}

/// The line of check `name` (the test fails without one).
#[track_caller]
fn check<'a>(all: &'a [(String, Line)], name: &str) -> &'a Line {
    all.iter()
        .find(|(n, _)| n == name)
        .map(|(_, l)| l)
        .unwrap_or_else(|| panic!("no {name} check in {all:#?}"))
}

/// Asserts check `name` has `status` and its detail (or hint) says each of
/// `says`.
#[track_caller]
pub(crate) fn expect(r: &Run, name: &str, status: &str, says: &[&str]) {
    let all = checks(r);
    let l = check(&all, name);
    assert_eq!(l.status, status, "{name}: {l:#?}\n{}", r.stdout);
    let text = format!("{} {}", l.detail, l.hint.as_deref().unwrap_or(""));
    for s in says {
        assert!(text.contains(s), "{name} does not say {s:?}: {l:#?}");
    }
    if status != "ok" {
        assert!(
            l.hint.is_some(),
            "{name} says what is wrong, not what to do"
        );
    }
}

/// A doctor command in `t` with `env` set (stdin closed, bounded).
fn doctor_with(t: &TestEnv, args: &[&str], env: &[(&str, &OsStr)]) -> Run {
    let mut full = vec!["doctor"];
    full.extend_from_slice(args);
    let mut c = t.command(&full);
    for (k, v) in env {
        c.env(k, v);
    }
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_limited(child, LIMIT).unwrap_or_else(|e| panic!("doctor hung: {e}"))
}

fn doctor(t: &TestEnv, args: &[&str]) -> Run {
    doctor_with(t, args, &[])
}

/// A machine set up so that every machine check passes: an editor on
/// disk, and the bash completion installed where bash looks.
fn healthy_machine(t: &TestEnv) -> Vec<(&'static str, std::ffi::OsString)> {
    let editor = t.write("bin/myeditor", "#!/bin/sh\nexit 0\n");
    t.chmod("bin/myeditor", 0o755);
    let script = t.sgard(["completion", "bash"]);
    script.ok();
    t.write(
        ".local/share/bash-completion/completions/sgard",
        &script.stdout,
    );
    vec![
        ("EDITOR", editor.into_os_string()),
        ("SHELL", "/bin/bash".into()),
    ]
}

fn as_env<'a>(v: &'a [(&'static str, std::ffi::OsString)]) -> Vec<(&'static str, &'a OsStr)> {
    v.iter().map(|(k, v)| (*k, v.as_os_str())).collect()
}

/// Every file under `dir` with its size and modification time (what a
/// command that changes nothing leaves as it was).
fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let md = fs::symlink_metadata(e.path()).unwrap();
            if md.is_dir() {
                stack.push(e.path());
            }
            out.push((e.path(), md.len(), md.modified().unwrap()));
        }
    }
    out.sort();
    out
}

fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// A repository tracking a file, a link and a big (chunked) file, with a
/// checkpoint.
fn tracked() -> TestEnv {
    let t = TestEnv::tracking(".bashrc", "alias ll='ls -l'\n");
    t.write("big.bin", noise(1_500_000, 7));
    std::os::unix::fs::symlink(".bashrc", t.path(".profile")).unwrap();
    t.sgard(["add", "big.bin", ".profile"]).ok();
    t.sgard(["checkpoint", "-m", "first"]).ok();
    t
}

// ------------------------------------------------------------ healthy

/// Everything in order: every check is `ok`, the report ends `0 errors,
/// 0 warnings`, doctor exits 0, the JSON report says the same in its
/// schema, and nothing on disk changed.
#[test]
fn a_healthy_setup_passes_every_check_and_nothing_changes() {
    let t = tracked();
    let machine = healthy_machine(&t);
    let before = snapshot(&t.home);
    let r = doctor_with(&t, &[], &as_env(&machine));
    r.ok().stdout_has("0 errors, 0 warnings");
    let all = checks(&r);
    let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "version",
            "repository",
            "lock",
            "manifest",
            "history",
            "content",
            "secrets",
            "temp-files",
            "state",
            "base",
            "encryption",
            "remote",
            "externals",
            "watcher",
            "platform",
            "git",
            "editor",
            "completion"
        ],
        "{}",
        r.stdout
    );
    for (n, l) in &all {
        assert_eq!(l.status, "ok", "{n}: {l:#?}");
        assert!(l.hint.is_none(), "{n}: {l:#?}");
    }
    expect(&r, "version", "ok", &["sgard ", "repository format 1"]);
    expect(&r, "manifest", "ok", &["3 entries", "2 files", "1 link"]);
    expect(&r, "history", "ok", &["1 snapshot"]);
    expect(&r, "content", "ok", &["1 chunked file"]);
    expect(&r, "base", "ok", &["3 of 3 entries"]);
    expect(
        &r,
        "completion",
        "ok",
        &["bash-completion/completions/sgard"],
    );
    expect(&r, "editor", "ok", &["EDITOR", "myeditor"]);

    let j = doctor_with(&t, &["--json"], &as_env(&machine));
    j.ok();
    let v: Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(v["schema"], 1);
    assert_eq!(v["errors"], 0);
    assert_eq!(v["warnings"], 0);
    let list = v["checks"].as_array().unwrap();
    assert_eq!(list.len(), all.len());
    for c in list {
        let keys: Vec<&str> = c.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["check", "status", "detail", "hint"], "{c}");
        assert_eq!(c["status"], "ok", "{c}");
        assert!(c["hint"].is_null(), "{c}");
        assert!(c["detail"].as_str().is_some_and(|d| !d.is_empty()), "{c}");
    }
    assert_eq!(list[0]["check"], "version");

    assert_eq!(snapshot(&t.home), before, "doctor changed something");
}

/// No repository: an error naming `sgard init` and `--repo`, and the
/// machine's own checks still run.
#[test]
fn without_a_repository_it_says_how_to_make_one_and_checks_the_machine() {
    let t = TestEnv::new();
    let machine = healthy_machine(&t);
    let r = doctor_with(&t, &[], &as_env(&machine));
    r.code(1).stdout_has("1 error, 0 warnings");
    expect(
        &r,
        "repository",
        "error",
        &["no repository at ~/.sgard", "sgard init", "--repo"],
    );
    for name in ["version", "remote", "git", "editor", "completion"] {
        check(&checks(&r), name);
    }
    assert!(!checks(&r).iter().any(|(n, _)| n == "manifest"));
    assert!(!t.repo().exists(), "doctor made a repository");

    let j = doctor_with(&t, &["--json"], &as_env(&machine));
    j.code(1);
    let v: Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(v["errors"], 1);
    let rep = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "repository")
        .unwrap();
    assert_eq!(rep["status"], "error");
    assert!(rep["hint"].as_str().unwrap().contains("sgard init"));
}

// ------------------------------------------------------------ the repository

/// A blob the head needs is gone: an error naming the entry, exit 1.
#[test]
fn a_missing_blob_is_an_error_naming_the_entry() {
    let t = tracked();
    fs::remove_file(t.blob_path(&sha("alias ll='ls -l'\n"))).unwrap();
    let r = doctor(&t, &[]);
    r.code(1);
    expect(
        &r,
        "content",
        "error",
        &["~/.bashrc", "missing", "sgard verify", "sgard pull"],
    );
}

/// A chunk of a big file is gone: an error naming the file.
#[test]
fn a_missing_chunk_is_an_error_naming_the_file() {
    let t = tracked();
    let chunks = t.repo().join("chunks");
    let mut files = Vec::new();
    for l1 in fs::read_dir(&chunks).unwrap() {
        let l1 = l1.unwrap().path();
        if l1.file_name().unwrap().len() != 2 {
            continue;
        }
        for l2 in fs::read_dir(&l1).unwrap() {
            for f in fs::read_dir(l2.unwrap().path()).unwrap() {
                files.push(f.unwrap().path());
            }
        }
    }
    assert!(files.len() > 2, "the big file was not chunked: {files:?}");
    fs::remove_file(&files[1]).unwrap();
    let r = doctor(&t, &[]);
    r.code(1);
    expect(&r, "content", "error", &["~/big.bin", "1 chunk of"]);
    check(&checks(&r), "manifest");
}

/// A manifest that does not parse: an error naming the file; the checks
/// that need no manifest still run.
#[test]
fn a_malformed_manifest_is_an_error() {
    let t = tracked();
    fs::write(t.repo().join("manifest.yaml"), "version: 1\nfiles: [oops\n").unwrap();
    let r = doctor(&t, &[]);
    r.code(1);
    expect(&r, "manifest", "error", &["manifest.yaml", "good copy"]);
    for name in ["lock", "history", "state", "remote", "git", "editor"] {
        check(&checks(&r), name);
    }
}

/// A damaged history: an error saying what works meanwhile.
#[test]
fn a_damaged_history_is_an_error() {
    let t = tracked();
    fs::write(t.repo().join("history.yaml"), "snapshots: {{{\n").unwrap();
    let r = doctor(&t, &[]);
    r.code(1);
    expect(&r, "history", "error", &["history.yaml", "move it aside"]);
    expect(&r, "manifest", "ok", &["3 entries"]);
}

/// Another sgard holding the lock (a writer stopped at a test hook):
/// doctor does not wait, and names it with what to do.
#[test]
fn a_held_lock_names_its_holder_without_waiting() {
    let t = tracked();
    t.write("new", "n\n");
    let gate = t.outside().join("gate");
    let mut held: Child = spawn_held_at(
        t.command(["add", "new"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        "manifest-before-base",
        &gate,
    );
    let r = doctor(&t, &[]);
    fs::write(&gate, "").unwrap();
    assert!(held.wait().unwrap().success());
    r.ok();
    let pid = held.id().to_string();
    expect(&r, "lock", "warning", &["held by", &pid, "add new", "kill"]);
    expect(&r, "temp-files", "ok", &["not checked"]);
}

/// Temp files of interrupted writes: a warning naming `sgard prune`,
/// which clears it.
#[test]
fn temp_debris_is_a_warning_until_prune() {
    let t = tracked();
    fs::write(t.repo().join(".sgard-tmp-1234-x"), "half").unwrap();
    fs::create_dir_all(t.repo().join("blobs/tmp")).unwrap();
    fs::write(t.repo().join("blobs/tmp/abc"), "half a blob").unwrap();
    let r = doctor(&t, &[]);
    r.ok();
    expect(
        &r,
        "temp-files",
        "warning",
        &["2 temp files", "in the repository", "sgard prune"],
    );
    t.sgard(["prune"]).ok();
    expect(&doctor(&t, &[]), "temp-files", "ok", &["none"]);
}

/// A damaged index: warnings saying what sgard does about it (the base is
/// lost, differences become conflicts), and doctor leaves it as it is.
#[test]
fn a_damaged_index_and_base_are_reported_with_what_sgard_does() {
    let t = tracked();
    let index = t.index();
    let mut bytes = fs::read(&index).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    fs::write(&index, &bytes).unwrap();
    let r = doctor(&t, &[]);
    r.ok();
    expect(&r, "state", "warning", &["damaged", "writes a new one"]);
    expect(&r, "base", "warning", &["conflict", "sgard restore -f"]);
    assert_eq!(fs::read(&index).unwrap(), bytes, "doctor rewrote the index");
}

// ------------------------------------------------------------ encryption

fn encrypted() -> TestEnv {
    let t = TestEnv::init();
    t.write("secret", "s3cret\n");
    t.command(["encrypt", "init"])
        .env("SGARD_PASSPHRASE", "right")
        .env("SGARD_TEST_ARGON2", "1")
        .output()
        .unwrap();
    let r: Run = t
        .command(["add", "--encrypt", "secret"])
        .env("SGARD_PASSPHRASE", "right")
        .output()
        .unwrap()
        .into();
    r.ok();
    t
}

/// The passphrase sources: the right one unlocks the key; a failing
/// command and a wrong passphrase are errors; an empty SGARD_PASSPHRASE
/// is a warning, not "unset". The passphrase is never printed.
#[test]
fn passphrase_sources_are_tried_and_never_printed() {
    let t = encrypted();
    let r = doctor_with(&t, &[], &[("SGARD_PASSPHRASE", "right".as_ref())]);
    expect(
        &r,
        "encryption",
        "ok",
        &["1 key slot", "passphrase", "1 encrypted entry"],
    );
    expect(
        &r,
        "passphrase",
        "ok",
        &["SGARD_PASSPHRASE unlocks the data key"],
    );
    assert!(!r.stdout.contains("right"), "{}", r.stdout);

    let r = doctor_with(&t, &[], &[("SGARD_PASSPHRASE_COMMAND", "exit 3".as_ref())]);
    r.code(1);
    expect(
        &r,
        "passphrase",
        "error",
        &["SGARD_PASSPHRASE_COMMAND", "failed", "by hand"],
    );

    let r = doctor_with(&t, &[], &[("SGARD_PASSPHRASE", "zebra-42".as_ref())]);
    r.code(1);
    expect(
        &r,
        "passphrase",
        "error",
        &["does not unlock", "wrong passphrase"],
    );
    assert!(!r.stdout.contains("zebra-42"), "{}", r.stdout);

    let file = t.outside().join("pass");
    fs::write(&file, "right\n").unwrap();
    let r = doctor_with(
        &t,
        &[],
        &[
            ("SGARD_PASSPHRASE", "".as_ref()),
            ("SGARD_PASSPHRASE_FILE", file.as_os_str()),
        ],
    );
    r.ok();
    expect(
        &r,
        "passphrase",
        "warning",
        &[
            "set but empty",
            "SGARD_PASSPHRASE_FILE",
            "unlocks the data key",
        ],
    );
}

// ------------------------------------------------------------ the machine

/// An editor that is not installed and a missing completion: warnings
/// with the exact command to fix each.
#[test]
fn a_missing_editor_and_completion_are_warnings_with_the_fix() {
    let t = TestEnv::tracking("f", "f\n");
    let r = doctor_with(
        &t,
        &[],
        &[
            ("EDITOR", "no-such-editor-here --wait".as_ref()),
            ("SHELL", "/usr/bin/zsh".as_ref()),
        ],
    );
    r.ok();
    expect(
        &r,
        "editor",
        "warning",
        &[
            "EDITOR is `no-such-editor-here --wait`",
            "sgard edit",
            "export EDITOR=",
        ],
    );
    expect(
        &r,
        "completion",
        "warning",
        &[
            "no zsh completion",
            "sgard completion zsh > ~/.zfunc/_sgard",
            "fpath",
        ],
    );
    let r = doctor_with(&t, &[], &[("SHELL", "/bin/bash".as_ref())]);
    expect(
        &r,
        "completion",
        "warning",
        &["sgard completion bash > ~/.local/share/bash-completion/completions/sgard"],
    );
    // A completion script of another version is not this one.
    t.write(
        ".local/share/bash-completion/completions/sgard",
        "complete -F _old sgard\n",
    );
    let r = doctor_with(&t, &[], &[("SHELL", "/bin/bash".as_ref())]);
    expect(&r, "completion", "warning", &["not this sgard's"]);
}

/// A repository under git whose .gitignore keeps `blobs/` out (the Go
/// sgard's): a clone could restore nothing.
#[test]
fn a_git_repository_that_ignores_blobs_is_a_warning() {
    let t = tracked();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(t.repo())
            .env("HOME", &t.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output();
        match o {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => panic!("git: {e}"),
            Ok(o) => {
                assert!(
                    o.status.success(),
                    "git {args:?}: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                Some(())
            }
        }
    };
    if git(&["init", "-q", "-b", "main"]).is_none() {
        eprintln!("skipping: git is not installed");
        return;
    }
    let r = doctor(&t, &[]);
    expect(
        &r,
        "git",
        "warning",
        &["branch main", "uncommitted", "git -C ~/.sgard add -A"],
    );
    fs::write(t.repo().join(".gitignore"), "blobs/\nlock\n").unwrap();
    git(&["add", "-A"]).unwrap();
    git(&["commit", "-q", "-m", "dotfiles"]).unwrap();
    let r = doctor(&t, &[]);
    r.ok();
    expect(
        &r,
        "git",
        "warning",
        &["git ignores blobs/", "restores nothing", ".gitignore"],
    );
    assert!(!r.stdout.contains("uncommitted change"), "{}", r.stdout);
}

// ------------------------------------------------------------ the server

/// A running `sgardd`, killed when dropped.
struct Srv {
    child: Child,
    addr: String,
}

impl Drop for Srv {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `sgardd` on 127.0.0.1:0 over a new repository under `dir`, with
/// `args` and `env`, and waits (at most 20 s) until it serves.
fn sgardd(dir: &Path, args: &[&OsStr], env: &[(&str, &str)]) -> Srv {
    let home = dir.join("srvhome");
    fs::create_dir_all(&home).unwrap();
    let mut c = Command::new(crate::common::sgardd_bin());
    c.arg("--repo")
        .arg(dir.join("srv"))
        .args(["--init", "--listen", "127.0.0.1:0"])
        .args(args)
        .current_dir(&home)
        .env_clear()
        .env("HOME", &home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SGARD_HOSTNAME", "server")
        .env("LC_ALL", "C");
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut srv = Srv {
        child,
        addr: String::new(),
    };
    let until = Instant::now() + Duration::from_secs(20);
    while srv.addr.is_empty() {
        let left = until.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).expect("sgardd did not start");
        if let Some(rest) = line.strip_prefix("sgardd serving on ") {
            srv.addr = rest.split_whitespace().next().unwrap().to_owned();
        }
    }
    srv
}

/// Keys `key0` (authorized) and `stranger` (not), an `authorized_keys`
/// file; `None` without ssh-keygen.
fn keys(dir: &Path) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let kdir = dir.join("keys");
    fs::create_dir_all(&kdir).unwrap();
    let k = keygen(&kdir, "key0")?;
    let s = keygen(&kdir, "stranger")?;
    let auth = dir.join("authorized_keys");
    fs::write(&auth, pubkey(&k)).unwrap();
    Some((k, s, auth))
}

fn remote_args<'a>(addr: &'a str, key: &'a Path) -> Vec<&'a str> {
    vec!["-r", addr, "--ssh-key", key.to_str().unwrap()]
}

/// Against a good server: it answers, the key logs in, the clocks agree,
/// and no token is cached (doctor keeps nothing).
#[test]
fn a_good_server_passes_and_no_token_is_kept() {
    let t = TestEnv::tracking("f", "f\n");
    let dir = t.outside();
    let Some((key, _, auth)) = keys(&dir) else {
        eprintln!("skipping: ssh-keygen is not installed");
        return;
    };
    let srv = sgardd(&dir, &["--authorized-keys".as_ref(), auth.as_os_str()], &[]);
    let r = doctor(&t, &remote_args(&srv.addr, &key));
    r.ok();
    expect(&r, "remote", "ok", &[&srv.addr, "from --remote", "no TLS"]);
    expect(&r, "connection", "ok", &["answers"]);
    expect(&r, "tls", "ok", &["not used"]);
    expect(&r, "login", "ok", &["accepted", &fingerprint(&key)]);
    expect(&r, "server-clock", "ok", &["within a minute"]);
    assert!(
        !t.home.join(".state/sgard/tokens").exists(),
        "doctor cached a token"
    );

    // The saved server is the one checked.
    t.sgard(["remote", "set", &srv.addr]).ok();
    let r = doctor(&t, &["--ssh-key", key.to_str().unwrap()]);
    r.ok();
    expect(&r, "remote", "ok", &["from ~/.sgard/remote.yaml"]);
    expect(&r, "login", "ok", &["accepted"]);
}

/// Nothing listens at the address: an error, and nothing after it is
/// tried.
#[test]
fn an_unreachable_server_is_an_error() {
    let t = TestEnv::tracking("f", "f\n");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let r = doctor(&t, &["-r", &addr]);
    r.code(1);
    expect(
        &r,
        "connection",
        "error",
        &["nothing is listening at", &addr, "sgardd"],
    );
    assert!(!checks(&r).iter().any(|(n, _)| n == "login" || n == "tls"));
}

/// TLS with a certificate file that did not sign the server's: an error
/// in words (no rustls names); the right file passes; a plain connection
/// to a TLS server is named too.
#[test]
fn a_tls_problem_is_said_in_words() {
    let t = TestEnv::tracking("f", "f\n");
    let dir = t.outside();
    let Some((key, _, auth)) = keys(&dir) else {
        eprintln!("skipping: ssh-keygen is not installed");
        return;
    };
    let (good, other) = (dir.join("good"), dir.join("other"));
    fs::create_dir_all(&good).unwrap();
    fs::create_dir_all(&other).unwrap();
    let Some((ca, cert, tls_key)) = make_certs(&good) else {
        eprintln!("skipping: openssl is not installed");
        return;
    };
    let (wrong_ca, _, _) = make_certs(&other).unwrap();
    let srv = sgardd(
        &dir,
        &[
            "--authorized-keys".as_ref(),
            auth.as_os_str(),
            "--tls-cert".as_ref(),
            cert.as_os_str(),
            "--tls-key".as_ref(),
            tls_key.as_os_str(),
        ],
        &[],
    );
    let mut args = remote_args(&srv.addr, &key);
    args.extend(["--tls-ca", wrong_ca.to_str().unwrap()]);
    let r = doctor(&t, &args);
    r.code(1);
    // Both test CAs have the same name: the server's issuer is found in
    // the file by name, and its key does not fit.
    expect(
        &r,
        "tls",
        "error",
        &["is not signed by", "other/ca.pem", "--tls-ca"],
    );
    for name in [
        "UnknownIssuer",
        "BadSignature",
        "InvalidCertificate",
        "Error",
    ] {
        assert!(!r.stdout.contains(name), "{}", r.stdout);
    }
    assert!(!checks(&r).iter().any(|(n, _)| n == "login"));

    let mut args = remote_args(&srv.addr, &key);
    args.extend(["--tls-ca", ca.to_str().unwrap()]);
    let r = doctor(&t, &args);
    r.ok();
    expect(&r, "tls", "ok", &["TLS 1.", "trusted"]);
    expect(&r, "login", "ok", &["accepted"]);

    let r = doctor(&t, &remote_args(&srv.addr, &key));
    r.code(1);
    expect(&r, "tls", "error", &["the server speaks TLS", "--tls-ca"]);
}

/// A key the server does not know: the login is refused, naming the key.
#[test]
fn a_refused_key_is_an_error_naming_it() {
    let t = TestEnv::tracking("f", "f\n");
    let dir = t.outside();
    let Some((_, stranger, auth)) = keys(&dir) else {
        eprintln!("skipping: ssh-keygen is not installed");
        return;
    };
    let srv = sgardd(&dir, &["--authorized-keys".as_ref(), auth.as_os_str()], &[]);
    let r = doctor(&t, &remote_args(&srv.addr, &stranger));
    r.code(1);
    expect(
        &r,
        "login",
        "error",
        &[
            "refused every key",
            &fingerprint(&stranger),
            "not authorized",
            "authorized_keys",
        ],
    );
}

/// A server whose clock is 10 minutes ahead: the login is refused for it,
/// and the server's clock is named, by how much.
#[test]
fn a_server_clock_ten_minutes_off_is_an_error() {
    let t = TestEnv::tracking("f", "f\n");
    let dir = t.outside();
    let Some((key, _, auth)) = keys(&dir) else {
        eprintln!("skipping: ssh-keygen is not installed");
        return;
    };
    let srv = sgardd(
        &dir,
        &["--authorized-keys".as_ref(), auth.as_os_str()],
        &[("SGARD_TEST_CLOCK_OFFSET", "600")],
    );
    let r = doctor(&t, &remote_args(&srv.addr, &key));
    r.code(1);
    expect(&r, "login", "error", &["knows", "5 minutes"]);
    // 600 s, give or take the second the answer took.
    expect(
        &r,
        "server-clock",
        "error",
        &[" min", "ahead of this machine's clock", "NTP"],
    );
    let clock = check(&checks(&r), "server-clock").detail.clone();
    assert!(
        clock.starts_with("10 min") || clock.starts_with("9 min"),
        "{clock}"
    );
}
