//! The `sgardd` binary as a user starts it. (The sync tests of the `sgard`
//! package run it against the client; this target also makes Cargo build
//! it whenever the workspace is tested.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn sgardd(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sgardd"))
        .args(args)
        .env_remove("SGARD_TEST_CLOCK_OFFSET")
        .output()
        .expect("running sgardd")
}

#[test]
fn it_says_its_version() {
    let out = sgardd(&["--version"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("sgardd "), "{text}");
}

#[test]
fn it_refuses_to_serve_without_authentication_beyond_loopback() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("repo");
    let store = store.to_str().expect("utf-8 path");
    let out = sgardd(&[
        "--store",
        store,
        "--init",
        "--insecure-no-auth",
        "--listen",
        "0.0.0.0:0",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("only serves a loopback address"), "{err}");
}
