//! Pushing to a server that behaves as the Go sgardd does (the scripted
//! server of `evil.rs`, which decides pushes by `updated`, keeps the
//! manifest of a negotiation for the next PushBlobs of anyone, and asks
//! only for the blobs of `type: file` entries).

use std::fs;
use std::process::Stdio;
use std::time::Duration;

use crate::common::*;
use crate::evil::{self, Script};

/// `sgard <args> -r ADDR` in `t`, no key (the server needs no login).
fn remote(t: &TestEnv, args: &[&str], addr: &str) -> Run {
    let mut a = args.to_vec();
    a.extend_from_slice(&["-r", addr]);
    let child = t
        .command(&a)
        .env("SSH_AUTH_SOCK", "")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_limited(child, Duration::from_secs(60)).unwrap_or_else(|e| panic!("hung: {e}"))
}

/// A Go server made after the machines' last change: empty, and an hour
/// newer than the tests' "now".
fn fresh_go_server() -> evil::EvilServer {
    let mut s = Script::default();
    s.manifest.version = 1;
    s.manifest.updated = Some(prost_types::Timestamp {
        seconds: 1_774_267_200 + 3600, // NOW (2026-03-23T12:00:00Z) + 1 h
        nanos: 0,
    });
    s.manifest.created = s.manifest.updated;
    evil::serve(s)
}

/// The first push to a fresh Go server is taken (it used to be refused
/// forever: the server looked newer, and a pull of its empty manifest
/// changed nothing); the next one is up to date.
#[test]
fn the_first_push_to_a_fresh_go_server_is_taken() {
    let t = TestEnv::tracking("f", "one\n");
    t.sgard(["checkpoint"]).ok();
    let srv = fresh_go_server();
    remote(&t, &["push"], &srv.addr)
        .ok()
        .stdout_has("Pushed 1 blob.");
    let m = srv.script.lock().unwrap().manifest.clone();
    assert!(m.files.iter().any(|e| e.path == "~/f"), "{m:?}");
    remote(&t, &["push"], &srv.addr)
        .ok()
        .stdout_has("Already up to date.");
    // The local manifest moved past the server's time, and says so.
    t.sgard(["status"]).ok().stdout_has("ok         ~/f");
}

/// A Go server asks only for `type: file` blobs: the template source and
/// the template data are sent whole all the same, so a machine pulling
/// from it renders the template.
#[test]
fn templates_reach_a_go_server_whole() {
    let a = TestEnv::init();
    fs::write(a.repo().join("data.yaml"), "who: ada\n").unwrap();
    a.write(".gitconfig", "name = {{ data.who }}\n");
    a.sgard(["add", "--template", "~/.gitconfig"]).ok();
    a.sgard(["checkpoint"]).ok();
    let srv = fresh_go_server();
    remote(&a, &["push"], &srv.addr).ok();
    let b = TestEnv::new();
    remote(&b, &["pull"], &srv.addr).ok();
    assert_eq!(b.read(".gitconfig"), b"name = ada\n");
}

/// `push --dry-run` never negotiates with a Go server (it would keep the
/// manifest for the next PushBlobs of anyone); it decides as the server
/// would and changes nothing there.
#[test]
fn a_dry_push_never_leaves_a_manifest_on_a_go_server() {
    let mut t = TestEnv::tracking("f", "one\n");
    t.sgard(["checkpoint"]).ok();
    let srv = fresh_go_server();
    remote(&t, &["push"], &srv.addr).ok();
    // Later (the server's time is past the first push's), an edit.
    t.now = "2026-03-23T14:00:00Z".into();
    t.write("f", "two\n");
    t.sgard(["checkpoint"]).ok();
    let before = srv.script.lock().unwrap().clone();
    srv.script.lock().unwrap().calls.clear();
    remote(&t, &["push", "-n"], &srv.addr)
        .ok()
        .stdout_has("Dry run: would send 1 blob");
    let after = srv.script.lock().unwrap().clone();
    assert!(
        !after.calls.contains(&"PushManifest"),
        "a dry run negotiated: {:?}",
        after.calls
    );
    assert!(after.pending.is_none());
    assert_eq!(after.manifest, before.manifest);
}
