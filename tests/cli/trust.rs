//! The trust boundary: what a hostile sync server can and cannot do to the
//! machine that pulls from it (issue 12). The server is `evil.rs`'s.

use std::fs;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::evil::{self, Blobs, Script};

/// Every file under `dir` (relative paths), for "nothing was written".
fn files(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn absolute_paths_from_a_server_are_refused_unless_allowed() {
    let t = TestEnv::new();
    let outside = t.outside().join("probe");
    let mut s = Script::default();
    s.file("~/.bashrc", b"ok\n", "0644");
    s.file(outside.to_str().unwrap(), b"planted\n", "0644");
    let srv = evil::serve(s);
    let r = evil::pull(&t, &srv.addr, &[]);
    assert_eq!(r.code, 4, "{r:#?}");
    assert!(r.stderr.contains("outside your home folder"), "{r:#?}");
    assert!(r.stderr.contains("--allow-absolute"), "{r:#?}");
    assert!(!outside.exists());
    assert!(
        !t.path(".bashrc").exists(),
        "a refused pull wrote something"
    );
    let r = evil::pull(&t, &srv.addr, &["--allow-absolute"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(fs::read(&outside).unwrap(), b"planted\n");
}

#[test]
fn entries_through_a_symlink_from_a_server_are_refused() {
    let t = TestEnv::new();
    let escape = t.outside().join("escape");
    fs::create_dir_all(&escape).unwrap();
    for target in [escape.to_str().unwrap(), "../../.."] {
        let mut s = Script::default();
        s.link("~/lnk", target);
        s.file("~/lnk/through", b"x\n", "0644");
        let srv = evil::serve(s);
        let r = evil::pull(&t, &srv.addr, &["-f"]);
        assert_ne!(r.code, 0, "{r:#?}");
        assert!(r.stderr.contains("~/lnk/through"), "{r:#?}");
        assert!(r.stderr.contains("symlink"), "{r:#?}");
        assert!(files(&escape).is_empty(), "wrote through the link");
        assert!(!t.path("lnk").exists());
    }
}

#[test]
fn a_server_cannot_write_into_the_repository() {
    let t = TestEnv::init();
    let mut s = Script::default();
    s.file("~/.sgard/manifest.yaml", b"version: 1\nfiles: []\n", "0644");
    s.file(
        &format!("~/.sgard/blobs/3a/99/{}", "3a99".repeat(16)),
        b"wrong bytes\n",
        "0644",
    );
    s.file("~/.bashrc", b"fine\n", "0644");
    let srv = evil::serve(s);
    let r = evil::pull(&t, &srv.addr, &["-f"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(
        r.stderr.contains("sgard's own repository or state"),
        "{r:#?}"
    );
    assert_eq!(t.read(".bashrc"), b"fine\n");
    // The repository still works, and has no misnamed blob.
    t.sgard(["status"]).ok();
    t.sgard(["verify"]).ok();
    assert!(
        !t.repo()
            .join(format!("blobs/3a/99/{}", "3a99".repeat(16)))
            .exists()
    );
}

#[test]
fn a_blob_the_server_never_sends_means_nothing_is_recorded() {
    let t = TestEnv::init();
    let before = (t.manifest(), fs::read(t.repo().join("history.yaml")).ok());
    let mut s = Script::default();
    s.file("~/.bashrc", b"one\n", "0644");
    let h = s.file("~/.vimrc", b"two\n", "0644");
    s.mode = Blobs::Omit(vec![h.clone()]);
    let srv = evil::serve(s);
    let r = evil::pull(&t, &srv.addr, &["-f"]);
    assert_eq!(r.code, 3, "{r:#?}");
    assert!(
        r.stderr.contains("did not send 1 blob the pull needs"),
        "{r:#?}"
    );
    assert!(r.stderr.contains(&h[..12]), "{r:#?}");
    assert!(r.stderr.contains("nothing was recorded"), "{r:#?}");
    assert_eq!(
        (t.manifest(), fs::read(t.repo().join("history.yaml")).ok()),
        before
    );
    assert!(!t.path(".bashrc").exists());
    t.sgard(["verify"]).ok();
}

#[test]
fn a_blob_nobody_asked_for_is_refused() {
    let t = TestEnv::init();
    let mut s = Script::default();
    s.file("~/.bashrc", b"one\n", "0644");
    let stray = b"not asked for\n".to_vec();
    s.mode = Blobs::Extra(sha(&stray), stray.clone());
    let srv = evil::serve(s);
    let r = evil::pull(&t, &srv.addr, &["-f"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stderr.contains("was not asked for"), "{r:#?}");
    assert!(!t.blob_path(&sha(&stray)).exists());
}

#[test]
fn a_stalled_server_is_given_up_on_in_time_and_the_lock_released() {
    let t = TestEnv::init();
    for stall_manifest in [true, false] {
        let mut s = Script::default();
        s.file("~/.bashrc", b"one\n", "0644");
        s.stall_manifest = stall_manifest;
        if !stall_manifest {
            s.mode = Blobs::Stall;
        }
        let srv = evil::serve(s);
        let started = Instant::now();
        let r = evil::pull(&t, &srv.addr, &["--timeout", "2"]);
        assert_eq!(r.code, 1, "{r:#?}");
        assert!(r.stderr.contains("did not answer within 2 s"), "{r:#?}");
        assert!(started.elapsed() < Duration::from_secs(20));
        // The lock is free at once.
        t.sgard(["checkpoint"]).ok();
    }
}

#[test]
fn an_endless_or_oversized_blob_stream_is_cut_off() {
    let t = TestEnv::init();
    // No declared sizes (a Go server): bounded by --max-blob-size.
    let mut s = Script::default();
    s.file("~/.bashrc", b"one\n", "0644");
    s.mode = Blobs::Endless;
    let srv = evil::serve(s);
    let r = evil::pull(&t, &srv.addr, &["--max-blob-size", "1000000"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(files(&t.repo().join("blobs")).is_empty(), "temp files left");
    drop(srv);
    // A declared size bounds the blob exactly.
    let mut s = Script::default();
    let h = s.file("~/.bashrc", b"one\n", "0644");
    s.blobs.insert(h.clone(), vec![b'x'; 200_000]);
    s.sizes.insert(h, 4);
    let srv = evil::serve(s);
    let r = evil::pull(&t, &srv.addr, &[]);
    assert_ne!(r.code, 0, "{r:#?}");
    assert!(files(&t.repo().join("blobs")).is_empty(), "temp files left");
}

#[test]
fn setuid_bits_from_a_server_are_dropped_unless_allowed() {
    let t = TestEnv::new();
    let mut s = Script::default();
    s.file("~/bin/tool", b"#!/bin/sh\n", "4755");
    let srv = evil::serve(s);
    let r = evil::pull(&t, &srv.addr, &[]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(
        r.stderr.contains("dropped the setuid/setgid bits"),
        "{r:#?}"
    );
    assert_eq!(mode_of(&t.path("bin/tool")), 0o755);
    let t2 = TestEnv::new();
    let r = evil::pull(&t2, &srv.addr, &["--allow-setuid"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(mode_of(&t2.path("bin/tool")), 0o4755);
}
