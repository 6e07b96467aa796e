//! File systems that fold names (macOS): two entries that are one file
//! there are refused at `add` and at `restore`, never written over each
//! other. Linux's file systems keep case, so the test hook
//! `SGARD_TEST_FOLDING` stands for the file system's answer.

use std::process::Stdio;

use crate::common::*;

/// `sgard ARGS` on a file system that folds as `how` says.
fn folded(t: &TestEnv, how: &str, args: &[&str]) -> Run {
    t.command(args)
        .env("SGARD_TEST_FOLDING", how)
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into()
}

#[test]
fn add_refuses_a_second_name_for_one_file() {
    let t = TestEnv::tracking(".Vimrc", "set nu\n");
    t.write(".vimrc", "set nonu\n");
    let before = t.manifest();
    folded(&t, "case", &["add", ".vimrc"])
        .code(4)
        .stderr_has("~/.Vimrc and ~/.vimrc are one file here")
        .stderr_has("ignores case");
    assert_eq!(t.manifest(), before);
    // Composed and decomposed forms of one name.
    t.write("café", "composed\n");
    t.sgard(["add", "café"]).ok();
    t.write("cafe\u{301}", "decomposed\n");
    folded(&t, "unicode", &["add", "cafe\u{301}"])
        .code(4)
        .stderr_has("Unicode normalisation");
    // Where names keep case, both are files of their own.
    folded(&t, "none", &["add", ".vimrc"]).ok();
}

#[test]
fn restore_refuses_entries_that_are_one_file_here_and_writes_nothing() {
    let a = TestEnv::init();
    a.write(".Xresources", "big\n");
    a.write(".xresources", "small\n");
    a.write(".bashrc", "alias l=ls\n");
    a.sgard(["add", ".Xresources", ".xresources", ".bashrc"])
        .ok();
    a.sgard(["checkpoint", "-m", "three"]).ok();
    let b = TestEnv::new();
    let repo = a.repo();
    let repo = repo.to_str().unwrap();
    folded(&b, "case", &["--repo", repo, "restore", "-f"])
        .code(4)
        .stderr_has("~/.Xresources and ~/.xresources");
    assert!(!b.path(".Xresources").exists());
    assert!(!b.path(".xresources").exists());
    assert!(!b.path(".bashrc").exists());
    // The others restore by name.
    folded(&b, "case", &["--repo", repo, "restore", "-f", "~/.bashrc"]).ok();
    assert_eq!(b.read(".bashrc"), b"alias l=ls\n");
    folded(
        &b,
        "case",
        &["--repo", repo, "restore", "-f", "~/.xresources"],
    )
    .code(4)
    .stderr_has("~/.Xresources and ~/.xresources");
}

#[test]
fn doctor_names_the_platform_and_how_names_compare() {
    let t = TestEnv::tracking(".bashrc", "x\n");
    t.sgard(["doctor"])
        .ok()
        .stdout_has("platform")
        .stdout_has(std::env::consts::OS)
        .stdout_has("keeps case");
    folded(&t, "both", &["doctor"])
        .ok()
        .stdout_has("ignores case and Unicode normalisation")
        .stdout_has("refused at add and restore");
}
