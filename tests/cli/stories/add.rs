//! Stories of issue 30: add.

use crate::common::*;

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
