//! Stories of issue 30: add.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::process::Stdio;

use crate::common::*;

/// Runs sgard with the passphrase set (and tiny Argon2 parameters).
fn with_passphrase(t: &TestEnv, args: &[&str]) -> Run {
    t.command(args)
        .env("SGARD_TEST_ARGON2", "1")
        .env("SGARD_PASSPHRASE", "correct horse")
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into()
}

/// Item 6: an empty path (an unset `$TYPO`) is a usage error, not the
/// working folder: nothing is walked, nothing is tracked or untracked.
#[test]
fn an_empty_path_is_a_usage_error() {
    let t = TestEnv::tracking(".bashrc", "x\n");
    t.write("big/a", "a\n");
    let before = t.manifest();
    for args in [
        &["add", ""][..],
        &["add", "~/.bashrc", ""],
        &["remove", ""],
        &["status", ""],
        &["checkpoint", ""],
        &["restore", ""],
        &["mirror", "up", ""],
    ] {
        let r = t.sgard(args);
        assert_eq!(
            r.code,
            2,
            "`sgard {}` must be a usage error; {r:#?}",
            args.join(" ")
        );
        assert!(r.stderr.contains("empty"), "{r:#?}");
        assert_eq!(t.manifest(), before);
    }
}

/// Item 19: a name that is not UTF-8 is skipped and shown as `~/…` with the
/// bytes that are not text escaped, never raw and absolute.
#[test]
fn a_name_that_is_not_utf8_is_shown_escaped_under_tilde() {
    let t = TestEnv::init();
    t.write("d/good", "g\n");
    let bad = t.path("d").join(OsStr::from_bytes(b"bad\xffname"));
    fs::write(&bad, "b\n").unwrap();
    let r = t.sgard(["add", "~/d"]);
    r.ok();
    assert!(
        r.stderr.contains("skipped ~/d/bad\\xffname"),
        "want `skipped ~/d/bad\\xffname`; {r:#?}"
    );
    assert!(!r.stderr.contains(&t.home.display().to_string()), "{r:#?}");
    assert!(!r.stderr.contains('\u{fffd}'), "{r:#?}");

    // Named directly: refused, shown the same way.
    let r = t
        .command([OsStr::new("add"), bad.as_os_str()])
        .output()
        .unwrap();
    let r = Run::from(r);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stderr.contains("~/d/bad\\xffname"), "{r:#?}");
    assert!(!r.stderr.contains('\u{fffd}'), "{r:#?}");
}

/// Item 21: `list` marks encrypted entries as it marks scripts.
#[test]
fn list_marks_encrypted_entries() {
    let t = TestEnv::init();
    let pw = |args: &[&str]| with_passphrase(&t, args);
    pw(&["encrypt", "init"]).ok();
    t.write(".token", "s3cret\n");
    t.write(".plain", "p\n");
    pw(&["add", "--encrypt", "~/.token"]).ok();
    t.sgard(["add", "~/.plain"]).ok();
    let r = t.sgard(["list"]);
    r.ok();
    let line_of = |p: &str| {
        r.stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(p))
            .unwrap_or_else(|| panic!("no line for {p}; {r:#?}"))
            .to_owned()
    };
    assert!(line_of("~/.token").contains("encrypted"), "{r:#?}");
    assert!(!line_of("~/.plain").contains("encrypted"), "{r:#?}");
}
