//! `sgard purge`: a leaked secret's stored versions leave every file of
//! the repository, the history is rewritten around them, and everything
//! else still verifies and restores.

use std::fs;
use std::process::Stdio;

use crate::common::*;

const LEAK1: &str = "password LEAKED-SECRET-ONE\n";
const LEAK2: &str = "password LEAKED-SECRET-TWO\n";

fn with_pw(t: &TestEnv, args: &[&str]) -> Run {
    t.command(args)
        .env("SGARD_PASSPHRASE", "pw")
        .env("SGARD_TEST_ARGON2", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into()
}

/// Every file under the repository holding `needle`.
fn holding(t: &TestEnv, needle: &[u8]) -> Vec<String> {
    holding_in(&t.repo(), needle)
}

/// Three checkpoints: the secret twice in plaintext (one of them big
/// enough to be stored in chunks), then encrypted.
fn leaked() -> TestEnv {
    let t = TestEnv::init();
    with_pw(&t, &["encrypt", "init"]).ok();
    t.write(".vimrc", "set one\n");
    t.write(".netrc", LEAK1);
    t.sgard(["add", "~/.vimrc"]).ok();
    t.sgard(["add", "--plaintext", "~/.netrc"]).ok();
    t.sgard(["checkpoint", "-m", "one"]).ok();
    let mut big = LEAK2.repeat(60_000);
    big.push_str("end\n");
    t.write(".netrc", &big);
    t.write(".vimrc", "set two\n");
    t.sgard(["checkpoint", "-m", "two"]).ok();
    t.write(".netrc", "password safe-now\n");
    with_pw(&t, &["add", "--encrypt", "~/.netrc"]).ok();
    t.write(".vimrc", "set three\n");
    with_pw(&t, &["checkpoint", "-m", "three"]).ok();
    assert!(!holding(&t, b"LEAKED-SECRET-ONE").is_empty());
    assert!(!holding(&t, b"LEAKED-SECRET-TWO").is_empty());
    t
}

/// The Done-when story: checkpointed in plaintext, re-added encrypted,
/// then `purge --keep-current`: no file of the repository holds the
/// secret, verify passes, every other version restores, and log and show
/// say what was purged.
#[test]
fn purge_keep_current_removes_every_plaintext_version_and_keeps_the_rest() {
    let t = leaked();
    // A dry run and a refusal at the prompt change nothing.
    let before = crate::sync::files_under(&t.repo());
    t.sgard(["purge", "--keep-current", "-n", "~/.netrc"])
        .ok()
        .stdout_has("purge      ~/.netrc (2 older versions)")
        .stdout_has("Dry run");
    t.sgard(["purge", "--keep-current", "~/.netrc"])
        .code(4)
        .stderr_has("nothing was purged");
    assert_eq!(before, crate::sync::files_under(&t.repo()));

    t.sgard(["purge", "--keep-current", "-y", "~/.netrc"])
        .ok()
        .stdout_has("Purged 2 stored versions from 2 snapshots")
        .stderr_has("the next `sgard push` carries the purge");
    assert_eq!(holding(&t, b"LEAKED-SECRET-ONE"), Vec::<String>::new());
    assert_eq!(holding(&t, b"LEAKED-SECRET-TWO"), Vec::<String>::new());
    let r = t.sgard(["verify"]);
    r.ok();
    // Every other version restores.
    for (at, want) in [
        ("@~2", "set one\n"),
        ("@~1", "set two\n"),
        ("@", "set three\n"),
    ] {
        t.sgard(["restore", "--at", at, "-f", "~/.vimrc"]).ok();
        assert_eq!(t.read(".vimrc"), want.as_bytes(), "{at}");
    }
    // The current, encrypted version stays.
    fs::remove_file(t.path(".netrc")).unwrap();
    with_pw(&t, &["restore", "~/.netrc"]).ok();
    assert_eq!(t.read(".netrc"), b"password safe-now\n");
    // A snapshot that lost the entry restores without it.
    t.sgard(["restore", "--at", "@~2", "-f", "~/.netrc"])
        .code(1)
        .stderr_has("~/.netrc");
    // log and show say what was purged, and when.
    let log = t.sgard(["log"]);
    log.ok();
    assert_eq!(
        log.stdout.matches("purged ~/.netrc on").count(),
        2,
        "{log:#?}"
    );
    t.sgard(["show", "@~1"])
        .ok()
        .stdout_has("purged ~/.netrc on")
        .stdout_has("current version kept");
    let j = t.sgard(["log", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&j.ok().stdout).unwrap();
    let purged: Vec<&serde_json::Value> = v["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["purged"].as_array().is_some_and(|p| !p.is_empty()))
        .collect();
    assert_eq!(purged.len(), 2, "{v}");
    assert_eq!(purged[0]["purged"][0]["paths"][0], "~/.netrc");
    assert_eq!(purged[0]["purged"][0]["kept_current"], true);
    // Nothing left to purge.
    t.sgard(["purge", "--keep-current", "-y", "~/.netrc"])
        .ok()
        .stdout_has("Nothing to purge");
}

/// Without --keep-current the path is purged whole and no longer tracked;
/// a content also stored under another path is refused (exit 4), and
/// naming that path too purges both.
#[test]
fn purge_refuses_shared_content_and_untracks_a_path_purged_whole() {
    let t = TestEnv::init();
    t.write(".a", "shared secret\n");
    t.write(".b", "shared secret\n");
    t.write(".c", "other\n");
    t.sgard(["add", "--plaintext", "~/.a", "~/.b", "~/.c"]).ok();
    t.sgard(["checkpoint"]).ok();
    let before = crate::sync::files_under(&t.repo());
    t.sgard(["purge", "-y", "~/.a"])
        .code(4)
        .stderr_has("also stored as ~/.b");
    assert_eq!(before, crate::sync::files_under(&t.repo()));
    t.sgard(["purge", "-y", "~/.a", "~/.b"])
        .ok()
        .stdout_has("untracked  ~/.a")
        .stdout_has("untracked  ~/.b");
    assert!(holding(&t, b"shared secret").is_empty());
    let list = t.sgard(["list"]);
    assert!(!list.ok().stdout.contains("~/.a"), "{list:#?}");
    t.sgard(["verify"]).ok();
    t.sgard(["status"]).ok().stdout_has("ok         ~/.c");
}

/// Killed in the middle (after the purge log, after the history was
/// rewritten): running purge again finishes it, and nothing of the secret
/// is left.
#[test]
fn a_purge_killed_in_the_middle_is_finished_by_running_it_again() {
    for point in ["purge-logged", "purge-rewritten"] {
        let t = leaked();
        let r: Run = t
            .command(["purge", "--keep-current", "-y", "~/.netrc"])
            .env("SGARD_TEST_CRASH_AT", point)
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .into();
        assert_ne!(r.code, 0, "{point}: {r:#?}");
        t.sgard(["purge", "--keep-current", "-y", "~/.netrc"]).ok();
        assert_eq!(
            holding(&t, b"LEAKED-SECRET-ONE"),
            Vec::<String>::new(),
            "{point}"
        );
        assert_eq!(
            holding(&t, b"LEAKED-SECRET-TWO"),
            Vec::<String>::new(),
            "{point}"
        );
        t.sgard(["verify"]).ok();
        let log = t.sgard(["log"]);
        assert!(
            log.ok().stdout.contains("purged ~/.netrc"),
            "{point}: {log:#?}"
        );
    }
}

/// A damaged purge log: log and show warn and go on; purge refuses to
/// write over it.
#[test]
fn a_damaged_purge_log_is_said_and_never_written_over() {
    let t = leaked();
    fs::write(t.repo().join("purges.yaml"), "purges: [ {time: nope} ]\n").unwrap();
    t.sgard(["log"])
        .ok()
        .stdout_has("three")
        .stderr_has("purge log cannot be read");
    t.sgard(["show", "@"]).ok().stderr_has("purge log");
    t.sgard(["purge", "--keep-current", "-y", "~/.netrc"])
        .code(1);
    assert_eq!(
        fs::read_to_string(t.repo().join("purges.yaml")).unwrap(),
        "purges: [ {time: nope} ]\n"
    );
    assert!(!holding(&t, b"LEAKED-SECRET-ONE").is_empty());
}

/// Every file under `dir` holding `needle`.
fn holding_in(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    crate::sync::files_under(dir)
        .into_iter()
        .filter(|rel| {
            let b = fs::read(dir.join(rel)).unwrap();
            b.windows(needle.len()).any(|w| w == needle)
        })
        .collect()
}

/// The Done-when story through `sgardd`: a secret two machines synced in
/// plaintext, then re-added encrypted and purged on one of them. The push
/// carries the signed purge; the server applies it (the secret leaves every
/// file of its repository, which still verifies); the other machine, whose
/// push of a history naming the old snapshots is refused until it pulls,
/// applies it at its next pull, and every version but the purged ones
/// still restores on both.
#[test]
fn a_purge_travels_through_the_server_to_every_machine() {
    use crate::sync::{World, local, sg, sg_env, world_or_skip};
    let w = world_or_skip!(2);
    let (ka, kb) = (w.key(0), w.key(1));
    let srv = w.serve(&[]);
    let addr = srv.addr.as_str();
    let pw = [("SGARD_PASSPHRASE", "pw"), ("SGARD_TEST_ARGON2", "1")];

    let mut a = TestEnv::init();
    sg_env(&a, None, &["encrypt", "init"], &pw).ok();
    a.write(".vimrc", "set one\n");
    a.write(".netrc", LEAK1);
    local(&a, &["add", "~/.vimrc"]).ok();
    local(&a, &["add", "--plaintext", "~/.netrc"]).ok();
    local(&a, &["checkpoint", "-m", "one"]).ok();
    sg(&a, ka, &["push", "-r", addr]).ok();
    // B takes it, and so holds the secret too.
    let mut b = TestEnv::new();
    sg_env(&b, Some(kb), &["pull", "-r", addr], &pw).ok();
    assert_eq!(b.read(".netrc"), LEAK1.as_bytes());
    crate::sync::trust(&b, kb);
    crate::sync::trust(&a, kb);

    // A encrypts it and pushes; B pulls that.
    a.now = crate::sync::now_plus(5);
    a.write(".netrc", "password safe-now\n");
    sg_env(&a, None, &["add", "--encrypt", "~/.netrc"], &pw).ok();
    sg_env(&a, None, &["checkpoint", "-m", "two"], &pw).ok();
    sg(&a, ka, &["push", "-r", addr]).ok();
    b.now = crate::sync::now_plus(6);
    sg_env(&b, Some(kb), &["pull", "-r", addr], &pw).ok();
    assert_eq!(b.read(".netrc"), b"password safe-now\n");
    for dir in [a.repo(), b.repo(), srv.repo.clone()] {
        assert!(!holding_in(&dir, b"LEAKED-SECRET-ONE").is_empty());
    }

    // A purges and pushes: the head is the same, the push is not a no-op.
    a.now = crate::sync::now_plus(10);
    local(&a, &["purge", "--keep-current", "-y", "~/.netrc"]).ok();
    assert_eq!(
        holding_in(&a.repo(), b"LEAKED-SECRET-ONE"),
        Vec::<String>::new()
    );
    sg(&a, ka, &["push", "-r", addr]).ok();
    assert_eq!(
        holding_in(&srv.repo, b"LEAKED-SECRET-ONE"),
        Vec::<String>::new(),
        "the server still holds the secret"
    );
    let srv_repo = srv.repo.to_str().unwrap().to_owned();
    local(&a, &["--repo", &srv_repo, "verify"]).ok();
    assert!(
        fs::read_to_string(srv.repo.join("purges.yaml"))
            .unwrap()
            .contains("BEGIN SSH SIGNATURE"),
        "the server keeps the purge's signature"
    );
    sg(&a, ka, &["push", "-r", addr])
        .ok()
        .stdout_has("Already up to date.");

    // B has not pulled the purge: its push would bring the secret back.
    b.now = crate::sync::now_plus(12);
    b.write(".vimrc", "set two\n");
    local(&b, &["checkpoint", "-m", "b"]).ok();
    sg(&b, kb, &["push", "-r", addr])
        .code(4)
        .stderr_has("sgard pull");
    assert_eq!(
        holding_in(&srv.repo, b"LEAKED-SECRET-ONE"),
        Vec::<String>::new()
    );
    // Its pull applies the purge, and then its push goes.
    sg_env(&b, Some(kb), &["pull", "-r", addr], &pw)
        .ok()
        .stdout_has("Applied the purge made on")
        .stdout_has("1 stored version removed here");
    assert_eq!(
        holding_in(&b.repo(), b"LEAKED-SECRET-ONE"),
        Vec::<String>::new()
    );
    local(&b, &["verify"]).ok();
    assert!(local(&b, &["log"]).stdout.contains("purged ~/.netrc on"));
    sg(&b, kb, &["push", "-r", addr]).ok();
    assert_eq!(
        holding_in(&srv.repo, b"LEAKED-SECRET-ONE"),
        Vec::<String>::new()
    );

    // A takes B's change; the purge is not applied twice.
    a.now = crate::sync::now_plus(15);
    let r = sg_env(&a, Some(ka), &["pull", "-r", addr], &pw);
    r.ok();
    assert!(!r.stdout.contains("Applied the purge"), "{r:#?}");
    assert_eq!(a.read(".vimrc"), b"set two\n");
    // Every version but the purged ones restores, on both.
    for t in [&a, &b] {
        local(t, &["restore", "--at", "@~3", "-f", "~/.vimrc"]).ok();
        assert_eq!(t.read(".vimrc"), b"set one\n");
        sg_env(t, None, &["restore", "-f", "~/.vimrc", "~/.netrc"], &pw).ok();
        assert_eq!(t.read(".netrc"), b"password safe-now\n");
        local(t, &["verify"]).ok();
    }
    assert_eq!(
        holding_in(&a.repo(), b"LEAKED-SECRET-ONE"),
        Vec::<String>::new()
    );

    // A new machine takes the purge only from a key it trusts: the head
    // is B's (trusted on first use), the purge A's.
    let c = TestEnv::new();
    sg_env(&c, Some(kb), &["pull", "-r", addr], &pw)
        .code(3)
        .stderr_has("refusing a purge")
        .stderr_has("does not trust");
    crate::sync::trust(&c, ka);
    sg_env(&c, Some(kb), &["pull", "-r", addr], &pw)
        .ok()
        .stdout_has("Applied the purge made on");
    assert_eq!(c.read(".netrc"), b"password safe-now\n");
    local(&c, &["verify"]).ok();
}

/// A purge statement that says a snapshot became something that is not
/// it with contents purged (a hand-edited or hostile purge log) deletes
/// nothing on the server: the push fails, naming the purge, and the
/// server's repository still verifies with every snapshot in it.
#[test]
fn a_purge_that_is_not_one_is_refused_by_the_server() {
    use crate::sync::{World, local, sg, world_or_skip};
    let w = world_or_skip!(1);
    let ka = w.key(0);
    let srv = w.serve(&[]);
    let addr = srv.addr.as_str();
    let mut a = TestEnv::init();
    a.write(".vimrc", "set one\n");
    local(&a, &["add", "~/.vimrc"]).ok();
    local(&a, &["checkpoint", "-m", "one"]).ok();
    a.now = crate::sync::now_plus(5);
    a.write(".vimrc", "set two\n");
    local(&a, &["checkpoint", "-m", "two"]).ok();
    sg(&a, ka, &["push", "-r", addr]).ok();
    let ids: Vec<String> = crate::sync::log_json(&a)
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(ids.len() >= 2, "{ids:?}");
    // "The first snapshot became the second": not a purge of it.
    fs::write(
        a.repo().join("purges.yaml"),
        format!(
            "version: 1\npurges:\n  - time: 2026-03-23T12:10:00Z\n    host: evil\n    paths: \
             [\"~/.vimrc\"]\n    kept_current: true\n    versions: 1\n    snapshots: [{b}]\n    \
             renamed: [\"{a} {b}\"]\n",
            a = ids[ids.len() - 1],
            b = ids[0]
        ),
    )
    .unwrap();
    let before = crate::sync::files_under(&srv.repo);
    sg(&a, ka, &["push", "-r", addr])
        .code(1)
        .stderr_has("not it with contents purged")
        .stderr_has("nothing was purged");
    let after = crate::sync::files_under(&srv.repo);
    assert!(
        before
            .iter()
            .filter(|f| f.starts_with("blobs/"))
            .all(|f| after.contains(f)),
        "the server deleted something"
    );
    assert!(!srv.repo.join("purges.yaml").exists());
    let srv_repo = srv.repo.to_str().unwrap().to_owned();
    local(&a, &["--repo", &srv_repo, "verify"]).ok();
}

/// A purge cut off in the middle, on the server (killed after it logged
/// the purge) or at a machine's pull, is finished by the next push or
/// pull: nothing of the secret is left and both still verify.
#[test]
fn a_purge_cut_off_on_the_server_or_at_a_pull_is_finished_by_the_next_one() {
    use crate::sync::{World, local, serve, sg, sg_env, try_serve_env, world_or_skip};
    let w = world_or_skip!(2);
    let (ka, kb) = (w.key(0), w.key(1));
    let crash = [("SGARD_TEST_CRASH_AT", "purge-logged")];
    let mut srv = try_serve_env(
        &w.srv_home(),
        &w.srv_repo(),
        &w.serve_args(0, &[]),
        &[("SGARD_TEST_CRASH_AT".into(), "purge-logged".into())],
    )
    .unwrap();
    let (port, addr) = (srv.port, srv.addr.clone());
    let addr = addr.as_str();

    let mut a = TestEnv::init();
    a.write(".vimrc", "set one\n");
    a.write(".netrc", LEAK1);
    local(&a, &["add", "--plaintext", "~/.vimrc", "~/.netrc"]).ok();
    local(&a, &["checkpoint", "-m", "one"]).ok();
    a.now = crate::sync::now_plus(5);
    a.write(".netrc", "password safe-now\n");
    local(&a, &["checkpoint", "-m", "two"]).ok();
    sg(&a, ka, &["push", "-r", addr]).ok();
    let b = TestEnv::new();
    sg(&b, kb, &["pull", "-r", addr]).ok();
    crate::sync::trust(&b, kb);
    assert!(!holding_in(&b.repo(), b"LEAKED-SECRET-ONE").is_empty());

    a.now = crate::sync::now_plus(10);
    local(&a, &["purge", "--keep-current", "-y", "~/.netrc"]).ok();
    // The server dies after it logged the purge.
    let r = sg(&a, ka, &["push", "-r", addr]);
    assert_ne!(r.code, 0, "{r:#?}");
    srv.kill9();
    let srv = serve(&w.srv_home(), &w.srv_repo(), &w.serve_args(port, &[]));
    assert!(srv.repo.join("purges.yaml").exists());
    sg(&a, ka, &["push", "-r", addr]).ok();
    assert_eq!(
        holding_in(&srv.repo, b"LEAKED-SECRET-ONE"),
        Vec::<String>::new()
    );
    let srv_repo = srv.repo.to_str().unwrap().to_owned();
    local(&a, &["--repo", &srv_repo, "verify"]).ok();

    // B dies after it logged the purge; its next pull finishes it.
    let r = sg_env(&b, Some(kb), &["pull", "-r", addr], &crash);
    assert_ne!(r.code, 0, "{r:#?}");
    assert!(b.repo().join("purges.yaml").exists());
    sg(&b, kb, &["pull", "-r", addr]).ok();
    assert_eq!(
        holding_in(&b.repo(), b"LEAKED-SECRET-ONE"),
        Vec::<String>::new()
    );
    local(&b, &["verify"]).ok();
    assert_eq!(b.read(".netrc"), b"password safe-now\n");
    // And B's push is taken: its history is the server's.
    sg(&b, kb, &["push", "-r", addr]).ok();
}
