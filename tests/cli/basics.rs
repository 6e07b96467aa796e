//! Smoke test of the harness itself.

use crate::common::*;

#[test]
fn version_and_help() {
    let t = TestEnv::new();
    t.sgard(["version"]).ok().stdout_has("sgard ");
    t.sgard(["--version"]).ok().stdout_has("sgard ");
    t.sgard(["--help"]).ok().stdout_has("checkpoint");
    t.sgard(["no-such-command"]).code(2);
}

#[test]
fn now_constant_matches() {
    let t = chrono_free_parse(NOW);
    assert_eq!(t, now_secs());
}

fn chrono_free_parse(s: &str) -> i64 {
    // Days from 1970-01-01 to 2026-03-23, computed independently.
    assert_eq!(s, "2026-03-23T12:00:00Z");
    let days_before_2026: i64 = (1970..2026)
        .map(|y| {
            if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 {
                366
            } else {
                365
            }
        })
        .sum();
    let days_in_2026 = 31 + 28 + 22;
    (days_before_2026 + days_in_2026) * 86400 + 12 * 3600
}
