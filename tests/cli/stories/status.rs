//! Stories of issue 30: status and checkpoint.

use std::fs;

use crate::common::*;
use crate::machines::Machine;

/// How many records `log` lists.
fn log_len(r: &Run) -> usize {
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    v["snapshots"].as_array().map_or(0, Vec::len)
}

/// A shared repository (see `desk_and_laptop`), then both machines
/// change `~/.bashrc` differently and the desktop checkpoints first: a
/// conflict on the laptop.
fn conflict_on_the_laptop() -> (tempfile::TempDir, Machine, Machine) {
    let (shared, desk, lap) = crate::machines::desk_and_laptop();
    desk.write(".bashrc", "base\ndesk\n");
    desk.sg(&["checkpoint", "-m", "desk"]).ok();
    lap.write(".bashrc", "base\nlap\n");
    assert_eq!(lap.state("~/.bashrc"), "conflict");
    (shared, desk, lap)
}

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
            .stderr_has("is missing from the repository")
            .stderr_has("; the file here still holds it (`sgard add ~/.bashrc` stores it again)\n");
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

// ------------------------------------------------------------ item 7

/// After a pull, a checkpoint with nothing changed records nothing, even
/// when the newest snapshot came from another machine whose manifest says
/// the same with another `created:`.
#[test]
fn a_checkpoint_right_after_a_pull_records_nothing() {
    use crate::sync::{World, local, sg, track, world_or_skip};
    let w = world_or_skip!(2);
    let (ka, kb) = (w.key(0), w.key(1));
    let srv = w.serve(&[]);
    let addr = srv.addr.as_str();
    let a = TestEnv::init();
    a.write(".bashrc", "export A=1\n");
    track(&a, &[".bashrc"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    // A new machine pulls (its repository is made then), and pushes.
    let mut b = TestEnv::new();
    b.now = crate::sync::now_plus(1);
    sg(&b, kb, &["pull", "-r", addr]).ok();
    let checkpoint_is_a_no_op = |t: &TestEnv| {
        let before = log_len(&local(t, &["log", "--json"]));
        let manifest = t.manifest();
        local(t, &["checkpoint"])
            .ok()
            .stdout_has("nothing changed since snapshot");
        assert_eq!(log_len(&local(t, &["log", "--json"])), before);
        assert_eq!(t.manifest(), manifest);
    };
    checkpoint_is_a_no_op(&b);
    sg(&b, kb, &["push", "-r", addr]).ok();
    // The first machine pulls the same entries back, and the other
    // machine's records with them.
    crate::sync::trust(&a, kb);
    sg(&a, ka, &["pull", "-r", addr]).ok();
    checkpoint_is_a_no_op(&a);
    drop(srv);
}

// ------------------------------------------------------------ item 8

/// `checkpoint -n` after `add` lists the added file, as the real run
/// records it, line for line.
#[test]
fn a_dry_checkpoint_after_add_lists_what_the_real_one_records() {
    let t = TestEnv::tracking(".bashrc", "export A=1\n");
    t.sgard(["checkpoint"]).ok();
    t.write(".vimrc", "set nu\n");
    t.sgard(["add", ".vimrc"]).ok();
    let dry = t.sgard(["checkpoint", "-n"]);
    dry.ok().stdout_has("added      ~/.vimrc\n");
    assert!(
        !dry.stdout.contains("nothing was recorded") || dry.stdout.contains("would record"),
        "{dry:#?}"
    );
    let real = t.sgard(["checkpoint"]);
    real.ok().stdout_has("added      ~/.vimrc\n");
    let lines = |s: &str| -> Vec<String> {
        let mut v: Vec<String> = s.lines().map(str::to_owned).collect();
        v.pop();
        v
    };
    assert_eq!(lines(&dry.stdout), lines(&real.stdout));
    // And now there is nothing to record: the dry run says so.
    t.sgard(["checkpoint", "-n"])
        .ok()
        .stdout_has("nothing to record");
}

// ----------------------------------------------------- items 10 and 11

/// `merge` leaves conflict markers: the file is `conflict (unresolved
/// merge)`, and `checkpoint` refuses it (exit 4, nothing recorded, never
/// "complete") until the markers are gone.
#[test]
fn conflict_markers_left_by_merge_are_never_checkpointed() {
    let (_shared, desk, lap) = conflict_on_the_laptop();
    lap.sg(&["merge", "~/.bashrc"]).code(4);
    assert!(lap.read(".bashrc").contains("<<<<<<< ours\n"));
    let r = lap.sg(&["status"]);
    r.ok().stdout_has("conflict   ~/.bashrc  (unresolved merge");
    let history = fs::read(desk.repo.join("history.yaml")).unwrap();
    let manifest = fs::read(desk.repo.join("manifest.yaml")).unwrap();
    let r = lap.sg(&["checkpoint"]);
    r.code(4).stdout_has("conflict   ~/.bashrc");
    assert!(!r.stdout.contains("complete"), "{r:#?}");
    assert_eq!(fs::read(desk.repo.join("history.yaml")).unwrap(), history);
    assert_eq!(fs::read(desk.repo.join("manifest.yaml")).unwrap(), manifest);
    // Neither a folder walk nor `mirror up` takes it.
    let r = lap.sg(&["add", "~"]);
    r.ok();
    assert!(
        format!("{}{}", r.stdout, r.stderr).contains("~/.bashrc: unresolved merge"),
        "{r:#?}"
    );
    let r = lap.sg(&["mirror", "up", "~"]);
    assert!(
        format!("{}{}", r.stdout, r.stderr).contains("unresolved merge"),
        "{r:#?}"
    );
    assert_eq!(lap.state("~/.bashrc"), "conflict");
    let manifest = fs::read(desk.repo.join("manifest.yaml")).unwrap();
    // One of two markers edited away is not enough.
    let half = lap.read(".bashrc").replace("<<<<<<< ours\n", "");
    lap.write(".bashrc", &half);
    assert_eq!(lap.state("~/.bashrc"), "conflict");
    lap.sg(&["checkpoint"]).code(4);
    assert_eq!(fs::read(desk.repo.join("history.yaml")).unwrap(), history);
    assert_eq!(fs::read(desk.repo.join("manifest.yaml")).unwrap(), manifest);
    // Resolved: a local change like any other, recorded.
    lap.write(".bashrc", "base\ndesk\nlap\n");
    assert_eq!(lap.state("~/.bashrc"), "modified");
    lap.sg(&["checkpoint"])
        .ok()
        .stdout_has("updated    ~/.bashrc");
    assert_eq!(
        desk.sg(&["status"]).stdout,
        "behind     ~/.bashrc  (changed in the repository: content)\n"
    );
}

/// An editor that appends `line` to the file it is given.
fn appending_editor(m: &Machine, line: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = m.t.path(".appending-editor");
    fs::write(&p, format!("#!/bin/sh\necho '{line}' >> \"$1\"\n")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

/// `edit` stores what the editor leaves, but never the markers a merge
/// wrote: it refuses (exit 4) and the repository is left as it was; once
/// the markers are gone it stores the file and the merge is over.
#[test]
fn edit_never_stores_the_markers_a_merge_wrote() {
    let (_shared, desk, lap) = conflict_on_the_laptop();
    lap.sg(&["merge", "~/.bashrc"]).code(4);
    let manifest = fs::read(desk.repo.join("manifest.yaml")).unwrap();
    let ed = appending_editor(&lap, "more");
    let r = lap
        .command(&["edit", "~/.bashrc"])
        .env("EDITOR", &ed)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let r: crate::common::Run = r.into();
    r.code(4).stderr_has("still holds the conflict markers");
    assert_eq!(fs::read(desk.repo.join("manifest.yaml")).unwrap(), manifest);
    assert_eq!(lap.state("~/.bashrc"), "conflict");
    // Resolved by hand, then edited: stored, and a plain file again.
    lap.write(".bashrc", "base\ndesk\nlap\n");
    let r: crate::common::Run = lap
        .command(&["edit", "~/.bashrc"])
        .env("EDITOR", &ed)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
        .into();
    r.ok().stdout_has("stored     ~/.bashrc");
    assert_eq!(lap.state("~/.bashrc"), "ok");
    // A later `=======` line is a change like any other.
    lap.write(".bashrc", "base\ndesk\nlap\n=======\n");
    assert_eq!(lap.state("~/.bashrc"), "modified");
}

/// The record of an unresolved merge ends when sgard puts another
/// version in place (`restore -f`, `undo`), or when a checkpoint finds the
/// file resolved to the repository's version: a `=======` line written
/// later is then a plain local change, never "unresolved merge" again.
#[test]
fn an_unresolved_merge_ends_when_the_file_is_replaced_or_resolved() {
    for how in ["restore", "undo", "resolved-to-repository"] {
        let (_shared, _desk, lap) = conflict_on_the_laptop();
        lap.sg(&["merge", "~/.bashrc"]).code(4);
        assert_eq!(lap.state("~/.bashrc"), "conflict", "{how}");
        match how {
            "restore" => {
                lap.sg(&["restore", "-f", "~/.bashrc"]).ok();
                assert_eq!(lap.read(".bashrc"), "base\ndesk\n");
            }
            "undo" => {
                lap.sg(&["undo", "-y"]).ok();
                assert_eq!(lap.read(".bashrc"), "base\nlap\n");
            }
            _ => {
                lap.write(".bashrc", "base\ndesk\n");
                assert_eq!(lap.state("~/.bashrc"), "ok");
                lap.sg(&["checkpoint"]).ok();
            }
        }
        let now = lap.read(".bashrc");
        lap.write(".bashrc", format!("{now}=======\n"));
        let st = lap.sg(&["status"]);
        assert!(!st.stdout.contains("unresolved merge"), "{how}: {st:#?}");
        // A plain local change (or, after the undo, the laptop's own
        // version against the desk's: a conflict, but not a merge's).
        let r = lap.sg(&["checkpoint"]);
        if how == "undo" {
            r.code(4).stdout_has("conflict   ~/.bashrc");
            assert!(!r.stdout.contains("unresolved"), "{how}: {r:#?}");
        } else {
            r.ok().stdout_has("updated    ~/.bashrc");
        }
    }
}

/// A checkpoint that meets a conflict says what it recorded and what it
/// did not, and never "complete".
#[test]
fn a_checkpoint_that_meets_a_conflict_is_never_complete() {
    let (_shared, _desk, lap) = conflict_on_the_laptop();
    let r = lap.sg(&["checkpoint"]);
    r.code(4)
        .stdout_has("Checkpoint recorded nothing; 1 entry in conflict: ~/.bashrc.")
        .stderr_has("changed both here and in the repository");
    assert!(!r.stdout.contains("complete"), "{r:#?}");
    // With something else to record.
    lap.write(".vimrc", "set nu\n");
    lap.sg(&["add", "~/.vimrc"]).ok();
    let r = lap.sg(&["checkpoint"]);
    r.code(4)
        .stdout_has("Checkpoint recorded snapshot ")
        .stdout_has("; 1 entry in conflict: ~/.bashrc.");
    assert!(!r.stdout.contains("complete"), "{r:#?}");
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
    // With --json too, the reason is on stderr (a script that reads only
    // the exit code is told why), once.
    let r = t.sgard(["status", "--json"]);
    r.code(3).stdout_has("\"state\": \"error\"");
    assert_eq!(r.stderr.matches("undefined variable").count(), 1, "{r:#?}");
    // The other entry alone is fine.
    t.sgard(["status", "~/.fine"]).ok();
}
