//! Stories of issue 30: messages. How errors are printed (one `sgard:
//! error:` per message, multi-line causes as indented lines), what counts
//! as damage and what is only a passing I/O error, a read-only repository,
//! and what doctor says about git and chunking.

use std::fs;

use crate::common::*;

/// Every line of stderr that starts a message (`sgard: …`).
fn messages(r: &Run) -> Vec<&str> {
    r.stderr
        .lines()
        .filter(|l| l.starts_with("sgard:"))
        .collect()
}

/// Item 13: a manifest that does not parse is one message with one
/// "error", its snippet as indented lines under it, in doctor as in every
/// other command; no `\x0a` escapes.
#[test]
fn a_manifest_that_does_not_parse_is_one_error_with_indented_lines() {
    let t = TestEnv::tracking(".vimrc", "set nu\n");
    fs::write(
        t.repo().join("manifest.yaml"),
        "version: 1\nfiles:\n  - path: [\n",
    )
    .unwrap();
    let r = t.sgard(["status"]);
    r.code(1);
    let first = r.stderr.lines().next().unwrap();
    assert!(
        first.starts_with("sgard: error: ") && first.contains("manifest.yaml: line 3 column"),
        "{r:#?}"
    );
    assert_eq!(r.stderr.matches("error").count(), 1, "{r:#?}");
    for l in r.stderr.lines().skip(1) {
        assert!(
            l.starts_with("  "),
            "a line of the message not indented: {r:#?}"
        );
    }

    let r = t.sgard(["doctor"]);
    r.code(1);
    assert!(!r.stdout.contains("\\x0a"), "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("error   manifest"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(
        lines[at].contains("manifest.yaml: line 3 column") && !lines[at].contains(": error:"),
        "{}",
        r.stdout
    );
    // The snippet's lines sit under the detail, before the hint.
    let under: Vec<&&str> = lines[at + 1..]
        .iter()
        .take_while(|l| !l.trim_start().starts_with('→'))
        .collect();
    assert!(under.len() >= 3, "{}", r.stdout);
    for l in under {
        assert!(l.starts_with(&" ".repeat(22)), "{}", r.stdout);
    }
}

/// Item 28: `log` on a damaged history prints one message, as an error;
/// `status`, which works, warns.
#[test]
fn log_on_a_damaged_history_prints_one_error() {
    let t = TestEnv::tracking(".vimrc", "set nu\n");
    t.sgard(["checkpoint"]).ok();
    fs::write(
        t.repo().join("history.yaml"),
        "version: 1\nsnapshots: [ {{{\n",
    )
    .unwrap();
    let r = t.sgard(["log"]);
    r.code(3);
    let said = messages(&r);
    assert_eq!(said.len(), 1, "{r:#?}");
    assert!(said[0].starts_with("sgard: error: "), "{r:#?}");
    assert!(said[0].contains("history.yaml is damaged"), "{r:#?}");

    let r = t.sgard(["status"]);
    r.ok();
    let said = messages(&r);
    assert_eq!(said.len(), 1, "{r:#?}");
    assert!(
        said[0].starts_with("sgard: warning: the history is damaged"),
        "{r:#?}"
    );
}
