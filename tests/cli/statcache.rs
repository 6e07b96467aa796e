//! The machine-local stat cache: consulted, bypassed by `--no-cache`,
//! never trusted when damaged, and never trusted for racily-clean files.

use std::fs;

use crate::common::*;

/// Claims in the index that `path` with `disk`'s current stat data hashes
/// to `hash`.
fn plant(t: &TestEnv, path: &str, disk: &std::path::Path, hash: &str) {
    IndexFile::read(&t.index()).plant(path, disk, hash);
}

#[test]
fn the_cache_is_consulted_and_no_cache_bypasses_it() {
    let t = TestEnv::tracking("f", "content\n");
    // A cache entry matching the file's exact stat is trusted without
    // reading the file: plant one that lies about the content.
    plant(&t, "~/f", &t.path("f"), &sha("something else\n"));
    let r = t.sgard(["status"]);
    r.ok();
    assert_eq!(
        r.stdout, "modified   ~/f  (content)\n",
        "the cache was not consulted"
    );
    // --no-cache reads the file.
    let r = t.sgard(["--no-cache", "status"]);
    assert_eq!(r.stdout, "ok         ~/f\n");
    // A correct entry gives ok without reading.
    plant(&t, "~/f", &t.path("f"), &sha("content\n"));
    assert_eq!(t.sgard(["status"]).stdout, "ok         ~/f\n");
}

#[test]
fn a_damaged_cache_is_ignored() {
    let t = TestEnv::tracking("f", "content\n");
    plant(&t, "~/f", &t.path("f"), &sha("lie\n"));
    assert_eq!(t.sgard(["status"]).stdout, "modified   ~/f  (content)\n");
    // Damage one byte (the last, inside the planted hash): the checksum no
    // longer matches, and nothing in the file is used.
    let file = t.index();
    let good = fs::read(&file).unwrap();
    let mut bad = good.clone();
    *bad.last_mut().unwrap() ^= 1;
    fs::write(&file, &bad).unwrap();
    let r = t.sgard(["status"]);
    assert_eq!(r.stdout, "ok         ~/f\n");
    r.stderr_has("was damaged and is rebuilt");
    // Cut short, garbage, or an index of another version, too.
    for bytes in [
        good[..good.len() - 1].to_vec(),
        b"not an index at all\n".to_vec(),
        [
            &good[..12],
            &(IndexFile::VERSION + 1).to_le_bytes()[..],
            &good[16..],
        ]
        .concat(),
    ] {
        fs::write(&file, &bytes).unwrap();
        plant_ok_after(&t);
    }
}

/// After an unusable index: status is right, and writes a usable one.
fn plant_ok_after(t: &TestEnv) {
    assert_eq!(t.sgard(["status"]).stdout, "ok         ~/f\n");
    IndexFile::read(&t.index());
}

#[test]
fn a_same_size_rewrite_with_the_old_mtime_is_seen() {
    // A filesystem with coarse timestamps can give a rewritten file the
    // same size and mtime; its ctime still moves, and the cache keys on it.
    let t = TestEnv::init();
    let p = t.write("f", "aaaa\n");
    set_mtime(&p, now_secs() - 3600);
    t.sgard(["add", "f"]).ok();
    // Let the file settle past the 2-second racy window, then cache it.
    std::thread::sleep(std::time::Duration::from_millis(2300));
    t.sgard(["status"]).ok();
    let file = t.index();
    assert_eq!(mode_of(&file) & 0o777, 0o600);
    assert!(
        IndexFile::read(&file).has_stat("~/f"),
        "a settled file was not cached"
    );
    // Rewrite in place: same size, mtime put back by hand.
    fs::write(&p, "bbbb\n").unwrap();
    set_mtime(&p, now_secs() - 3600);
    assert_eq!(t.sgard(["status"]).stdout, "modified   ~/f  (content)\n");
    t.sgard(["checkpoint"]).ok();
    assert!(t.manifest().contains(&sha("bbbb\n")));
}

#[test]
fn files_inside_the_racy_window_are_never_cached() {
    let t = TestEnv::tracking("f", "fresh\n");
    t.sgard(["status"]).ok();
    assert!(
        !IndexFile::read(&t.index()).has_stat("~/f"),
        "a file changed just now was cached"
    );
}

#[test]
fn checkpoint_restores_a_lost_blob_unless_the_cache_vouches_for_the_file() {
    let t = TestEnv::tracking("f", "kept\n");
    let blob = t.blob_path(&sha("kept\n"));
    // A file the cache cannot vouch for is hashed, and its lost blob is
    // stored again from it.
    fs::remove_file(&blob).unwrap();
    t.sgard(["checkpoint"]).ok();
    assert_eq!(fs::read(&blob).unwrap(), b"kept\n");
    // With a settled cache entry the blob is not looked up (that is the
    // point of the cache); verify says it is missing, and `--no-cache
    // checkpoint` stores it again.
    plant(&t, "~/f", &t.path("f"), &sha("kept\n"));
    fs::remove_file(&blob).unwrap();
    t.sgard(["checkpoint"]).ok();
    let r = t.sgard(["verify"]);
    r.code(3);
    assert!(r.stdout.starts_with("missing    ~/f\n"), "{}", r.stdout);
    t.sgard(["--no-cache", "checkpoint"]).ok();
    assert_eq!(fs::read(&blob).unwrap(), b"kept\n");
    t.sgard(["verify"]).ok();
}

#[test]
fn a_lost_blob_is_restored_when_many_files_are_hashed_in_parallel() {
    // Enough uncached files for prehash to hash them on all cores (and
    // record them in the cache as it goes): the cache must still not count
    // as having vouched for them in the same run.
    let t = TestEnv::init();
    let names: Vec<String> = (0..80).map(|i| format!("many/f{i:02}")).collect();
    for (i, n) in names.iter().enumerate() {
        t.write(n, format!("content {i}\n"));
    }
    t.sgard(["add", "~/many"]).ok();
    // Settle the files so the run records them in the cache.
    std::thread::sleep(std::time::Duration::from_millis(2300));
    let blob = t.blob_path(&sha("content 41\n"));
    fs::remove_file(&blob).unwrap();
    t.sgard(["checkpoint"]).ok();
    assert_eq!(fs::read(&blob).unwrap(), b"content 41\n");
    assert!(
        IndexFile::read(&t.index()).has_stat("~/many/f41"),
        "the run did not cache the settled files"
    );
    t.sgard(["verify"]).ok();
}

/// `status`, `checkpoint` and `add` look at the disk (and copy files) a
/// window of entries at a time: across window boundaries, every entry is
/// judged on what the scan found for it, hashes computed in a window fill
/// the stat cache, a selection of a few far-apart paths is judged right,
/// and a checkpoint that copied files while scanning records each one's own
/// content. 200 files in windows of 97: two windows large enough to hash on
/// all cores, one of 6 that hashes as it judges.
#[test]
fn windowed_scans_judge_every_entry_on_its_own_findings() {
    let t = TestEnv::init();
    let name = |i: usize| format!("tree/d{}/f{i:03}", i / 50);
    for i in 0..200 {
        let p = t.write(&name(i), format!("file {i}\n"));
        set_mtime(&p, now_secs() - 3600);
    }
    let sg = |args: &[&str]| -> Run {
        t.command(args)
            .env("SGARD_TEST_SCAN_WINDOW", "97")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
            .into()
    };
    sg(&["add", "tree"]).ok();
    let manifest = t.manifest();
    for i in 0..200 {
        assert!(
            manifest.contains(&format!("~/{}", name(i))),
            "{i} not added"
        );
        assert!(
            t.blob_path(&sha(format!("file {i}\n"))).is_file(),
            "blob {i}"
        );
    }
    // Settled past the racy window: this status hashes every file (the add
    // recorded none it copied ahead) and caches them all.
    std::thread::sleep(std::time::Duration::from_millis(2300));
    let r = sg(&["status", "--exit-code"]);
    r.ok();
    assert_eq!(r.stdout.lines().count(), 200);
    let index = IndexFile::read(&t.index());
    for i in [0, 96, 97, 193, 194, 199] {
        assert!(index.has_stat(&format!("~/{}", name(i))), "{i} not cached");
    }
    // One lie planted in the last window is believed: the cache is
    // consulted there too.
    plant(
        &t,
        &format!("~/{}", name(196)),
        &t.path(&name(196)),
        &sha("lie\n"),
    );
    let r = sg(&["status"]);
    let modified: Vec<&str> = r.stdout.lines().filter(|l| !l.starts_with("ok ")).collect();
    assert_eq!(modified, [format!("modified   ~/{}  (content)", name(196))]);
    plant(
        &t,
        &format!("~/{}", name(196)),
        &t.path(&name(196)),
        &sha("file 196\n"),
    );
    // Every file edited (a different size each): the two big windows copy
    // their files into the store as they hash them, in one read; the last
    // hashes as it judges.
    for i in 0..200 {
        t.write(&name(i), format!("edited {i}{}\n", "!".repeat(i % 7)));
    }
    let picked = [name(3), name(71), name(198)].map(|n| t.path(&n));
    let r = sg(&[
        "status",
        picked[0].to_str().unwrap(),
        picked[1].to_str().unwrap(),
        picked[2].to_str().unwrap(),
    ]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines,
        [3, 71, 198].map(|i| format!("modified   ~/{}  (content)", name(i)))
    );
    sg(&["checkpoint", "-m", "all edited"]).ok();
    let manifest = t.manifest();
    for i in 0..200 {
        let want = sha(format!("edited {i}{}\n", "!".repeat(i % 7)));
        assert!(
            manifest.contains(&want),
            "{i}: its own content not recorded"
        );
        assert!(t.blob_path(&want).is_file(), "{i}: blob missing");
    }
    sg(&["status", "--exit-code"]).ok();
}

#[test]
fn diff_reads_only_what_the_cache_cannot_vouch_for() {
    let t = TestEnv::tracking("f", "content\n");
    t.write("f", "changed\n");
    // A record matching the file's exact stat that says it still holds the
    // stored content: diff takes its word, as status does, and reads
    // nothing.
    plant(&t, "~/f", &t.path("f"), &sha("content\n"));
    let r = t.sgard(["diff"]);
    assert_eq!(r.stdout, "No changes.\n", "{r:#?}");
    // --no-cache reads the file.
    let r = t.sgard(["--no-cache", "diff"]);
    assert!(r.stdout.contains("+changed"), "{r:#?}");
    // Once the record no longer matches the file's stat, it is read.
    set_mtime(&t.path("f"), now_secs() - 100);
    let r = t.sgard(["diff"]);
    assert!(r.stdout.contains("+changed"), "{r:#?}");
}

#[test]
fn diff_of_an_unchanged_file_whose_blob_is_lost_says_so() {
    let t = TestEnv::tracking("f", "content\n");
    plant(&t, "~/f", &t.path("f"), &sha("content\n"));
    let h = sha("content\n");
    fs::remove_file(t.repo().join("blobs").join(&h[..2]).join(&h[2..4]).join(&h)).unwrap();
    // The stat cache vouches for the file, but the repository lacks what
    // it is compared with: that is said, not "No changes".
    let r = t.sgard(["diff"]);
    assert_ne!(r.stdout, "No changes.\n", "{r:#?}");
    assert!(
        format!("{}{}", r.stdout, r.stderr).contains("~/f"),
        "{r:#?}"
    );
}
