//! Stories of issue 30: status and checkpoint.

use std::fs;

use crate::common::*;

// ------------------------------------------------------------ item 2

/// The blob behind an unchanged file is deleted: every form of `status`
/// says `error` and exits 3, also when the stat cache vouches for the
/// file (so nothing else would look at the repository).
#[test]
fn status_says_error_when_the_repository_lost_a_files_content() {
    let t = TestEnv::tracking(".bashrc", "export A=1\n");
    t.write(".vimrc", "set nu\n");
    t.sgard(["add", ".vimrc"]).ok();
    t.sgard(["checkpoint", "-m", "first"]).ok();
    // The stat cache vouches for both files: status reads neither.
    IndexFile::read(&t.index()).plant("~/.bashrc", &t.path(".bashrc"), &sha("export A=1\n"));
    IndexFile::read(&t.index()).plant("~/.vimrc", &t.path(".vimrc"), &sha("set nu\n"));
    // Let the store's folders settle past the 2-second racy window: this
    // status remembers what it found there, and that memory must not hide
    // a loss.
    std::thread::sleep(std::time::Duration::from_millis(2300));
    t.sgard(["status"]).ok();
    assert!(t.state().join("present").is_file());
    fs::remove_file(t.blob_path(&sha("export A=1\n"))).unwrap();
    for args in [
        &["status"][..],
        &["--no-cache", "status"],
        &["status", "--exit-code"],
    ] {
        let r = t.sgard(args);
        r.code(3)
            .stdout_has("error      ~/.bashrc\n")
            .stdout_has("ok         ~/.vimrc\n")
            .stderr_has("is missing from the repository");
    }
    t.sgard(["status", "~/.bashrc"])
        .code(3)
        .stdout_has("error      ~/.bashrc\n");
    t.sgard(["status", "~/.vimrc"]).ok();
    let r = t.sgard(["status", "--json"]);
    r.code(3);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["entries"][0]["state"], "error", "{r:#?}");
    // The file still holds the content: `add` stores it again.
    t.sgard(["add", ".bashrc"]).ok();
    t.sgard(["status"])
        .ok()
        .stdout_has("ok         ~/.bashrc\n");
    t.sgard(["verify"]).ok();
}

/// A big file's content is in chunks: one chunk gone, and status says so.
#[test]
fn status_says_error_when_a_chunk_of_a_big_file_is_gone() {
    let t = TestEnv::init();
    let big: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    t.write("big.img", &big);
    t.sgard(["add", "big.img"]).ok();
    t.sgard(["checkpoint"]).ok();
    // Settled, and remembered as all there (see the test above).
    std::thread::sleep(std::time::Duration::from_millis(2300));
    t.sgard(["status"])
        .ok()
        .stdout_has("ok         ~/big.img\n");
    let chunks = crate::chunks::chunk_files(&t);
    assert!(chunks.len() > 2, "not chunked: {chunks:?}");
    fs::remove_file(&chunks[1]).unwrap();
    t.sgard(["status"])
        .code(3)
        .stdout_has("error      ~/big.img\n")
        .stderr_has("is missing from the repository");
}

// ----------------------------------------------------------- item 17

/// A template that does not render is an `error`, and an `error` exits 3
/// in every form of `status`.
#[test]
fn a_template_that_does_not_render_makes_status_exit_3() {
    let t = TestEnv::init();
    t.write(".tmplbad", "x = {{ data.nope }}\n");
    t.sgard(["add", "--template", ".tmplbad"]).ok();
    t.write(".fine", "fine\n");
    t.sgard(["add", ".fine"]).ok();
    for args in [
        &["status", "~/.tmplbad"][..],
        &["status"],
        &["status", "--exit-code"],
        &["--no-cache", "status"],
    ] {
        t.sgard(args)
            .code(3)
            .stdout_has("error      ~/.tmplbad\n")
            .stderr_has("undefined variable");
    }
    t.sgard(["status", "--json"]).code(3);
    // The other entry alone is fine.
    t.sgard(["status", "~/.fine"]).ok();
}
