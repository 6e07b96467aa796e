//! Stories of issue 30: remote configuration, pull, trust and the sync
//! server client; `undo --help`; the README's command table.

use crate::common::*;

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
