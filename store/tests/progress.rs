//! The progress counters are process-wide: this test runs in a process of
//! its own, so no other test's writes count in it (in the library's test
//! binary, a concurrent store test's bytes did).
#![allow(clippy::unwrap_used, missing_docs)]

use sgard_store::progress::{begin, bytes, done, expect, now};

#[test]
fn a_phase_counts_from_zero_and_grows_its_totals() {
    begin("adding", 2, 10);
    bytes(4);
    done("~/a", "added");
    expect(1, 5);
    let r = now().unwrap();
    assert_eq!(r.label, "adding");
    assert_eq!(
        (r.files, r.files_total, r.bytes, r.bytes_total),
        (1, 3, 4, 15)
    );
    let before = r.phase;
    begin("restoring", 0, 0);
    let r = now().unwrap();
    assert!(r.phase > before);
    assert_eq!((r.files, r.bytes), (0, 0));
}
