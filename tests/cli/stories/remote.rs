//! Stories of issue 30: remote configuration, pull, trust and the sync
//! server client; `undo --help`; the README's command table.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::*;
use crate::doctor::expect;
use crate::sync::{
    Server, World, change, fingerprint, local, log_json, make_certs, sg, sg_env, track, trust,
    two_machines_one_server, world_or_skip,
};

/// The `tls-ca:` path `remote show` prints, if any.
fn shown_ca(t: &TestEnv, env: &[(&str, &str)]) -> Option<PathBuf> {
    let r = sg_env(t, None, &["remote", "show"], env);
    r.ok();
    r.stdout
        .lines()
        .find_map(|l| l.strip_prefix("tls-ca: "))
        .map(|p| PathBuf::from(p.trim()))
}

/// `sgard remote set ADDR --tls-ca CA` in `t`.
#[track_caller]
fn remote_set_ca(t: &TestEnv, addr: &str, ca: &Path) -> Run {
    local(
        t,
        &["remote", "set", addr, "--tls-ca", ca.to_str().unwrap()],
    )
}

/// Item 14: `remote set --tls-ca FILE` keeps the certificate (public) in
/// the repository, never this machine's path to it: another machine
/// sharing the repository (the same stick, a clone) reaches the server over
/// TLS without that file. Doctor checks the file it will use, even when
/// the server cannot be reached.
#[test]
fn a_saved_tls_certificate_travels_with_the_repository_and_doctor_checks_it() {
    let w = world_or_skip!(1);
    let k = w.key(0);
    let on_a = w.root().join("certs-on-a");
    fs::create_dir_all(&on_a).unwrap();
    let Some((ca, cert, key)) = make_certs(&on_a) else {
        eprintln!("skipping: openssl is not installed");
        return;
    };
    // The server keeps its own copies of its certificate and key.
    let srv_dir = w.root().join("srv-certs");
    fs::create_dir_all(&srv_dir).unwrap();
    let (srv_cert, srv_key) = (srv_dir.join("srv.pem"), srv_dir.join("srv.key"));
    fs::copy(&cert, &srv_cert).unwrap();
    fs::copy(&key, &srv_key).unwrap();
    let mut srv = w.serve(&[
        "--tls-cert",
        srv_cert.to_str().unwrap(),
        "--tls-key",
        srv_key.to_str().unwrap(),
    ]);
    let addr = srv.addr.clone();

    let a = TestEnv::init();
    a.write("f", "over tls\n");
    track(&a, &["f"]);
    remote_set_ca(&a, &addr, &ca)
        .ok()
        .stdout_has(&format!("Remote set: {addr} (TLS"));
    let yaml = fs::read_to_string(a.repo().join("remote.yaml")).unwrap();
    assert!(
        !yaml.contains(on_a.to_str().unwrap()),
        "the shared remote.yaml names a file of this machine: {yaml}"
    );
    sg(&a, k, &["push"]).ok().stdout_has("Pushed ");

    // Another machine, the same repository; A's certificate file is not
    // there.
    fs::remove_dir_all(&on_a).unwrap();
    let b = TestEnv::new();
    let repo = a.repo();
    let shared = [("SGARD_REPO", repo.to_str().unwrap())];
    sg_env(&b, Some(k), &["push"], &shared)
        .ok()
        .stdout_has("Already up to date.");
    let r = sg_env(&b, Some(k), &["doctor"], &shared);
    expect(&r, "remote", "ok", &[&addr, "TLS trusting"]);
    expect(&r, "tls", "ok", &["trusted through"]);

    // The file doctor checks is the one a push would use: damaged, it is
    // an error on the remote line, with the server down as well.
    let used = shown_ca(&b, &shared).expect("remote show names the certificate");
    assert!(used.starts_with(&repo), "{}", used.display());
    srv.kill9();
    fs::write(&used, "not a certificate\n").unwrap();
    let r = sg_env(&b, Some(k), &["doctor"], &shared);
    r.code(1);
    expect(&r, "remote", "error", &["no certificate", "--tls-ca"]);
    fs::remove_file(&used).unwrap();
    let r = sg_env(&b, Some(k), &["doctor"], &shared);
    r.code(1);
    expect(&r, "remote", "error", &["--tls-ca"]);

    // Only certificates go into the repository: a private key in the same
    // file stays out. A file without a certificate is refused, and
    // nothing is saved.
    let combined = w.root().join("combined.pem");
    let both = [fs::read(&srv_cert).unwrap(), fs::read(&srv_key).unwrap()].concat();
    fs::write(&combined, both).unwrap();
    remote_set_ca(&a, &addr, &combined).ok();
    let kept = fs::read_to_string(shown_ca(&a, &[]).unwrap()).unwrap();
    assert!(
        kept.contains("BEGIN CERTIFICATE") && !kept.contains("PRIVATE KEY"),
        "{kept}"
    );
    let before = fs::read(a.repo().join("remote.yaml")).unwrap();
    remote_set_ca(&a, "127.0.0.1:1", &srv_key)
        .code(1)
        .stderr_has("no certificate");
    assert_eq!(fs::read(a.repo().join("remote.yaml")).unwrap(), before);
    assert_eq!(
        fs::read_to_string(shown_ca(&a, &[]).unwrap()).unwrap(),
        kept
    );

    // `remote unset` forgets the certificate with the server.
    // (The server's certificate, pinned, is as good a file as the CA.)
    remote_set_ca(&a, &addr, &srv_cert).ok();
    let used = shown_ca(&a, &[]).unwrap();
    assert!(used.exists());
    local(&a, &["remote", "unset"]).ok();
    assert!(!used.exists(), "the certificate outlived the remote");
}

/// Item 15: `pull -r ADDR` on a machine without a repository makes one and
/// saves the server in it, so the README's next step, `sgard fleet`,
/// needs no `-r`.
#[test]
fn a_pull_that_creates_the_repository_saves_the_server() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let a = TestEnv::init();
    a.write(".bashrc", "export A=1\n");
    track(&a, &[".bashrc"]);
    sg(&a, ka, &["push", "-r", addr]).ok();

    let b = TestEnv::new();
    sg(&b, kb, &["pull", "-r", addr])
        .ok()
        .stdout_has("Initialized sgard repository")
        .stdout_has(&format!("Remote set: {addr}"));
    local(&b, &["remote", "show"])
        .ok()
        .stdout_has(&format!("addr:   {addr}\n"));
    sg(&b, kb, &["fleet"]).ok().stdout_has("testhost");
    sg(&b, kb, &["pull"]).ok().stdout_has("Already up to date.");

    // A pull into an existing repository with -r leaves its remote alone.
    let c = TestEnv::init();
    sg(&c, kb, &["pull", "-r", addr]).ok();
    local(&c, &["remote", "show"])
        .ok()
        .stdout_has("No remote configured.");
    drop(srv);
}

/// Item 15, the guide: every command is in the table of *Commands at a
/// glance* (docs/src/commands.md), and every command that takes `-r` is
/// among those the sync how-to (docs/src/how-to/sync.md) says take the
/// server options.
#[test]
fn the_guide_lists_every_command_and_every_command_that_takes_a_server() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src");
    let commands_page = fs::read_to_string(docs.join("commands.md")).unwrap();
    let table: String = commands_page
        .lines()
        .filter(|l| l.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n");
    let sync_page = fs::read_to_string(docs.join("how-to/sync.md")).unwrap();
    let server_options = sync_page
        .split("Server options (")
        .nth(1)
        .unwrap()
        .split("given")
        .next()
        .unwrap()
        .to_owned();
    let t = TestEnv::new();
    let help = t.sgard(["--help"]);
    help.ok();
    let commands: Vec<&str> = help
        .stdout
        .split("Commands:\n")
        .nth(1)
        .unwrap()
        .split("\nOptions:")
        .next()
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.contains(&"fleet"), "{commands:?}");
    for c in commands {
        assert!(
            table.contains(&format!("`{c} ")) || table.contains(&format!("`{c}`")),
            "`{c}` is not in the command table of docs/src/commands.md"
        );
        let r = t.sgard([c, "--help"]);
        r.ok();
        if r.stdout.contains("-r, --remote") {
            assert!(
                server_options.contains(&format!("`{c}`")),
                "`{c}` takes -r, but the list of commands with server options in \
                 docs/src/how-to/sync.md lacks it: {server_options}"
            );
        }
    }
}

/// The line of `trust list` naming `fp`, past the fingerprint and type.
#[track_caller]
fn trust_comment(t: &TestEnv, fp: &str) -> String {
    let r = local(t, &["trust", "list"]);
    r.ok();
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with(fp))
        .unwrap_or_else(|| panic!("{fp} is not listed; {r:#?}"));
    line.split_whitespace()
        .skip(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Item 20: `trust list` names this machine's own key (trusted by its
/// push) by its key file's comment, and a key trusted on first use by the
/// host that pushed the head it signed.
#[test]
fn trust_list_names_this_machines_key_and_a_key_trusted_on_first_use() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let laptop = [("SGARD_HOSTNAME", "laptop")];
    let a = TestEnv::init();
    a.write("f", "one\n");
    sg_env(&a, None, &["add", "f"], &laptop).ok();
    sg_env(&a, None, &["checkpoint"], &laptop).ok();
    sg_env(&a, Some(ka), &["push", "-r", addr], &laptop).ok();
    assert_eq!(trust_comment(&a, &fingerprint(ka)), "key0");

    let b = TestEnv::new();
    sg(&b, kb, &["pull", "-r", addr])
        .ok()
        .stderr_has("trusting the key");
    let comment = trust_comment(&b, &fingerprint(ka));
    assert!(comment.contains("laptop"), "{comment:?}");
    drop(srv);
}

/// Item 22: a pull where the same file changed on both sides takes
/// everything else, leaves that file as it is on disk and a `conflict`
/// (the server's version in the repository, this machine's last sync as
/// the base), says so, and `sgard merge` settles it as on a shared folder.
/// `--theirs`/`--ours` stay explicit choices.
#[test]
fn a_pull_with_both_sides_changed_leaves_a_conflict_that_merge_settles() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let mut a = TestEnv::init();
    let mut b = TestEnv::new();
    a.write(".bashrc", "base\n");
    a.write("g", "g1\n");
    track(&a, &[".bashrc", "g"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    sg(&b, kb, &["pull", "-r", addr]).ok();
    trust(&a, kb);

    change(&mut a, ".bashrc", "top from a\nbase\n", 1);
    change(&mut a, "g", "g2\n", 2);
    sg(&a, ka, &["push", "-r", addr]).ok();
    change(&mut b, ".bashrc", "base\nbottom from b\n", 3);

    // The dry run says so, exits 4 as the pull will, and changes nothing.
    sg(&b, kb, &["pull", "-n", "-r", addr])
        .code(4)
        .stdout_has("conflict   ~/.bashrc")
        .stderr_has("would be left a conflict");
    // Cut off after the bases of the conflict were journaled, before the
    // new head: the file still agrees with the old head (never `behind`,
    // which a restore would overwrite). More in
    // `a_conflicted_pull_cut_off_anywhere_is_finished_by_the_next_one`.
    let r = sg_env(
        &b,
        Some(kb),
        &["pull", "-r", addr],
        &[("SGARD_TEST_CRASH_AT", "pending-before-head")],
    );
    assert_eq!(r.code, -1, "not killed; {r:#?}");
    local(&b, &["status", "~/.bashrc"])
        .ok()
        .stdout_has("ok         ~/.bashrc");
    local(&b, &["restore"]).ok();
    assert_eq!(b.read(".bashrc"), b"base\nbottom from b\n");

    let r = sg(&b, kb, &["pull", "-r", addr]);
    r.code(4)
        .stdout_has("conflict   ~/.bashrc")
        .stderr_has("~/.bashrc")
        .stderr_has("sgard merge");
    assert_eq!(b.read(".bashrc"), b"base\nbottom from b\n", "overwritten");
    assert_eq!(b.read("g"), b"g2\n", "the rest was not taken");
    local(&b, &["status", "~/.bashrc"]).stdout_has("conflict   ~/.bashrc");
    // A second pull changes nothing (it would ask at a terminal).
    let r = sg(&b, kb, &["pull", "-r", addr]);
    r.code(4).stderr_has("sgard merge");
    assert_eq!(b.read(".bashrc"), b"base\nbottom from b\n", "{r:#?}");

    local(&b, &["merge", "~/.bashrc"])
        .ok()
        .stdout_has("merged     ~/.bashrc");
    let merged = "top from a\nbase\nbottom from b\n";
    assert_eq!(b.read(".bashrc"), merged.as_bytes());
    local(&b, &["checkpoint"]).ok();
    sg(&b, kb, &["push", "-r", addr]).ok();
    sg(&a, ka, &["pull", "-r", addr]).ok();
    assert_eq!(a.read(".bashrc"), merged.as_bytes());

    // A change on both sides no conflict can hold (the server stopped
    // tracking it): the pull is refused and changes nothing; --ours (or
    // --theirs) settles it.
    local(&a, &["remove", "g"]).ok();
    fs::remove_file(a.path("g")).unwrap();
    sg(&a, ka, &["push", "-r", addr]).ok();
    change(&mut b, "g", "g from b\n", 4);
    let before = (b.read("g"), b.manifest(), log_json(&b));
    sg(&b, kb, &["pull", "-r", addr])
        .code(4)
        .stderr_has("~/g")
        .stderr_has("--theirs or --ours");
    assert!(before == (b.read("g"), b.manifest(), log_json(&b)));
    sg(&b, kb, &["pull", "-r", addr, "--ours"]).ok();
    assert!(b.manifest().contains(&sha("g from b\n")));
    sg(&b, kb, &["push", "-r", addr]).ok();
    sg(&a, ka, &["pull", "-r", addr]).ok();

    // Cut off after the new head, before the base's own save: the base
    // that makes it a conflict was journaled with the head it waits for,
    // so it is a conflict, never `behind`.
    change(&mut a, ".bashrc", "a again\n", 5);
    sg(&a, ka, &["push", "-r", addr]).ok();
    change(&mut b, ".bashrc", "b again\n", 6);
    let r = sg_env(
        &b,
        Some(kb),
        &["pull", "-r", addr],
        &[("SGARD_TEST_CRASH_AT", "head-before-base")],
    );
    assert_eq!(r.code, -1, "not killed; {r:#?}");
    local(&b, &["status", "~/.bashrc"]).stdout_has("conflict   ~/.bashrc");
    local(&b, &["restore"]).code(4);
    assert_eq!(b.read(".bashrc"), b"b again\n");
    local(&b, &["restore", "-f", "~/.bashrc"]).ok();
    assert_eq!(b.read(".bashrc"), b"a again\n");
    sg(&b, kb, &["pull", "-r", addr]).ok();

    // --theirs still takes the server's version outright.
    change(&mut a, ".bashrc", "a third\n", 7);
    sg(&a, ka, &["push", "-r", addr]).ok();
    change(&mut b, ".bashrc", "b third\n", 8);
    sg(&b, kb, &["pull", "-r", addr, "--theirs"]).ok();
    assert_eq!(b.read(".bashrc"), b"a third\n");
    local(&b, &["status", "~/.bashrc"])
        .ok()
        .stdout_has("ok         ~/.bashrc");
    drop(srv);
}

/// Item 22's story up to B's pull: both machines changed ~/.bashrc since
/// the last sync (B recorded its change; with `unrecorded`, B edited it
/// again without recording), and A changed ~/g, which B's pull takes.
fn both_sides_changed(unrecorded: bool) -> (World, Server, TestEnv, TestEnv) {
    let w = World::new(2).expect("ssh-keygen");
    let srv = w.serve(&[]);
    let addr = srv.addr.clone();
    let (ka, kb) = (w.key(0), w.key(1));
    let mut a = TestEnv::init();
    let mut b = TestEnv::new();
    a.write(".bashrc", "base\n");
    a.write("g", "g1\n");
    track(&a, &[".bashrc", "g"]);
    sg(&a, ka, &["push", "-r", &addr]).ok();
    sg(&b, kb, &["pull", "-r", &addr]).ok();
    trust(&a, kb);
    change(&mut a, ".bashrc", "top from a\nbase\n", 1);
    change(&mut a, "g", "g2\n", 2);
    sg(&a, ka, &["push", "-r", &addr]).ok();
    change(&mut b, ".bashrc", "base\nbottom from b\n", 3);
    if unrecorded {
        b.write(".bashrc", "base\nbottom from b\nmore from b\n");
    }
    (w, srv, a, b)
}

/// What B's ~/.bashrc holds in [`both_sides_changed`].
fn bs_bashrc(unrecorded: bool) -> &'static str {
    if unrecorded {
        "base\nbottom from b\nmore from b\n"
    } else {
        "base\nbottom from b\n"
    }
}

/// B's pull in [`both_sides_changed`], killed at `point`.
#[track_caller]
fn pull_killed_at(w: &World, srv: &Server, b: &TestEnv, point: &str) {
    let r = sg_env(
        b,
        Some(w.key(1)),
        &["pull", "-r", &srv.addr],
        &[("SGARD_TEST_CRASH_AT", point)],
    );
    assert_eq!(r.code, -1, "{point}: not killed; {r:#?}");
}

/// A pull cut off after it journaled this machine's bases of the
/// conflicts, before its head, and run again at once: the conflict is left
/// as the first run would have left it, never refused as "a version this
/// machine never had" (whose advice, --theirs, would drop this machine's
/// change).
#[test]
fn a_pull_cut_off_before_its_head_and_run_again_leaves_the_conflict() {
    let (w, srv, _a, b) = both_sides_changed(false);
    pull_killed_at(&w, &srv, &b, "pending-before-head");
    sg(&b, w.key(1), &["pull", "-r", &srv.addr])
        .code(4)
        .stderr_has("left a conflict")
        .stdout_has("conflict   ~/.bashrc");
    assert_eq!(b.read(".bashrc"), bs_bashrc(false).as_bytes());
    assert_eq!(b.read("g"), b"g2\n");
}

/// The same cut-off pull with an edit not yet recorded: this machine's own
/// recorded change is no conflict with itself; the edit is a local change
/// a checkpoint records.
#[test]
fn a_pull_cut_off_before_its_head_keeps_an_unrecorded_edit_a_local_change() {
    let (w, srv, _a, b) = both_sides_changed(true);
    pull_killed_at(&w, &srv, &b, "pending-before-head");
    local(&b, &["status"])
        .ok()
        .stdout_has("modified   ~/.bashrc");
    local(&b, &["checkpoint"]).ok();
    assert_eq!(b.read(".bashrc"), bs_bashrc(true).as_bytes());
}

/// A pull leaving a conflict, cut off at any point it passes, is finished
/// by the next pull run at once: the same end state as a pull never cut
/// off (the conflict left, this machine's file as it was, the rest taken),
/// which `merge` settles with both changes, an unrecorded edit included.
#[test]
fn a_conflicted_pull_cut_off_anywhere_is_finished_by_the_next_one() {
    for unrecorded in [false, true] {
        // The pull never cut off, for the end state to compare with.
        let (w, srv, _a, b) = both_sides_changed(unrecorded);
        sg(&b, w.key(1), &["pull", "-r", &srv.addr]).code(4);
        let want = local(&b, &["status"]).stdout.clone();
        assert!(want.contains("conflict   ~/.bashrc"), "{want}");
        drop(srv);
        for point in [
            "pulling-object",
            "pending-before-head",
            "index-save",
            "head-before-base",
            "pull-after-merge",
            "restore-before-snapshot",
            "restore-after-snapshot",
            "restore-staged",
            "restore-before-base",
        ] {
            let at = format!("{point} (unrecorded edit: {unrecorded})");
            let (w, srv, a, b) = both_sides_changed(unrecorded);
            pull_killed_at(&w, &srv, &b, point);
            let r = sg(&b, w.key(1), &["pull", "-r", &srv.addr]);
            assert_eq!(r.code, 4, "{at}: {r:#?}");
            assert!(r.stderr.contains("sgard merge"), "{at}: {r:#?}");
            assert_eq!(b.read(".bashrc"), bs_bashrc(unrecorded).as_bytes(), "{at}");
            assert_eq!(b.read("g"), b"g2\n", "{at}");
            assert_eq!(local(&b, &["status"]).stdout, want, "{at}");
            local(&b, &["merge", "~/.bashrc"])
                .ok()
                .stdout_has("merged     ~/.bashrc");
            let merged = format!("top from a\n{}", bs_bashrc(unrecorded));
            assert_eq!(b.read(".bashrc"), merged.as_bytes(), "{at}");
            local(&b, &["checkpoint"]).ok();
            sg(&b, w.key(1), &["push", "-r", &srv.addr]).ok();
            drop((a, srv));
        }
    }
}

/// A pull that leaves a conflict and whose restore is refused (no answer
/// about a file edited here) or fails (a folder where it writes a file)
/// says both, each once; it exits with the restore's code: 4 for the
/// refusal, 1 for the failure, which outranks the conflict's 4.
#[test]
fn a_pull_leaving_a_conflict_says_so_when_its_restore_is_refused_or_fails() {
    for (folder, code, restore_says) in [
        (false, 4, "was left as it is: ~/g"),
        (true, 1, "could not be restored"),
    ] {
        let (w, srv, _a, b) = both_sides_changed(false);
        let kept = if folder {
            fs::remove_file(b.path("g")).unwrap();
            b.write("g/keep", "keep\n");
            "g/keep"
        } else {
            b.write("g", "g edited\n");
            "g"
        };
        let before = b.read(kept);
        let r = sg(&b, w.key(1), &["pull", "-r", &srv.addr]);
        r.code(code)
            .stdout_has("conflict   ~/.bashrc")
            .stderr_has(restore_says)
            .stderr_has("is left a conflict: ~/.bashrc");
        assert_eq!(r.stderr.matches("sgard: error:").count(), 2, "{r:#?}");
        assert_eq!(b.read(".bashrc"), bs_bashrc(false).as_bytes());
        assert_eq!(b.read(kept), before);
    }
}

/// Item 23: `undo --help` names every operation undo reverses, as the
/// README does.
#[test]
fn undo_help_names_every_operation_it_reverses() {
    let t = TestEnv::new();
    let r = t.sgard(["undo", "--help"]);
    r.ok();
    for op in [
        "restore",
        "restore --at",
        "pull",
        "merge",
        "mirror down",
        "undo",
    ] {
        assert!(
            r.stdout.contains(op),
            "`undo --help` does not name {op}; {r:#?}"
        );
    }
}
