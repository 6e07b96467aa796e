//! Robustness against a hostile world: corrupt blobs, forged manifests,
//! FIFOs, symlinks at restore targets, concurrent writers, `kill -9`, a
//! repository written by the Go sgard, the repository tracking itself, a
//! held lock and a closed stdout.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

// ---------------------------------------------------------------- helpers

/// How long a command may run before the watchdog calls it hung.
const WATCHDOG: Duration = Duration::from_secs(10);

/// Waits for `child`, draining its piped stdout and stderr, and kills it
/// (failing the test) if it has not finished within `limit`.
#[track_caller]
fn finish(child: Child, limit: Duration, what: &str) -> Run {
    match wait_limited(child, limit) {
        Ok(r) => r,
        Err(stderr) => panic!("`sgard {what}` hung: killed after {limit:?}; stderr: {stderr}"),
    }
}

/// Runs sgard with stdin closed under the watchdog.
#[track_caller]
fn sgard_timed(t: &TestEnv, args: &[&str]) -> Run {
    let child = t
        .command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(child, WATCHDOG, &args.join(" "))
}

/// The temp folder every path of `t` lives in (HOME's parent).
fn root_of(t: &TestEnv) -> PathBuf {
    t.home.parent().unwrap().to_path_buf()
}

/// Everything under `root`: kind, mode, content hash or link target.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for p in names {
            let md = fs::symlink_metadata(&p).unwrap();
            let mode = md.permissions().mode() & 0o7777;
            let ft = md.file_type();
            let desc = if ft.is_symlink() {
                format!("link -> {}", fs::read_link(&p).unwrap().display())
            } else if ft.is_dir() {
                walk(&p, out);
                format!("dir {mode:o}")
            } else if ft.is_file() {
                format!("file {mode:o} {}", sha(fs::read(&p).unwrap()))
            } else {
                format!("special {mode:o}")
            };
            out.insert(p, desc);
        }
    }
    let mut out = BTreeMap::new();
    walk(root, &mut out);
    out
}

/// Stores `data` as a blob of the repository at `repo`, the way the Go sgard
/// lays it out, and returns its hash.
fn put_blob(repo: &Path, data: &[u8]) -> String {
    let h = sha(data);
    let dir = blob_dir(repo, &h);
    fs::create_dir_all(&dir).unwrap();
    let p = dir.join(&h);
    fs::write(&p, data).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    h
}

/// The fan-out folder holding blob `h` of the repository at `repo`.
fn blob_dir(repo: &Path, h: &str) -> PathBuf {
    repo.join("blobs").join(&h[0..2]).join(&h[2..4])
}

/// Replaces the bytes of an existing blob (whatever its permissions).
fn tamper(p: &Path, bytes: &[u8]) {
    fs::remove_file(p).unwrap();
    fs::write(p, bytes).unwrap();
}

/// Names in `dir` that look like restore temp files.
fn restore_temps(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".sgard-restore-") || n.starts_with(".sgard-link-"))
        .collect()
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success(), "mkfifo {} failed", p.display());
    assert!(fs::symlink_metadata(p).unwrap().file_type().is_fifo());
}

/// Deterministic pseudo-random bytes (xorshift64*), fast enough for 64 MiB.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The `hash:` values of a manifest, in order.
fn manifest_hashes(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("hash:"))
        .map(|h| h.trim().trim_matches('"').to_owned())
        .collect()
}

/// Whether `s` contains `line ` followed by a number.
fn names_a_line(s: &str) -> bool {
    s.match_indices("line ").any(|(i, m)| {
        s[i + m.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

const TS: &str = "2026-03-23T12:00:00Z";

/// A manifest whose entries are the given YAML fragments (each one list
/// item, already indented the Go way).
fn manifest_with(items: &[String]) -> String {
    let mut m = format!("version: 1\ncreated: {TS}\nupdated: {TS}\nfiles:\n");
    for i in items {
        m.push_str(i);
    }
    m
}

fn file_item(path: &str, hash: &str) -> String {
    format!(
        "    - path: {path}\n      hash: {hash}\n      type: file\n      mode: \"0644\"\n      updated: {TS}\n"
    )
}

fn write_manifest(t: &TestEnv, text: &str) {
    fs::write(t.repo().join("manifest.yaml"), text).unwrap();
}

/// Runs each read command against the repository and checks it refuses with
/// exit 1, names every string of `names` on stderr and writes nothing
/// anywhere in the test's folder.
#[track_caller]
fn assert_refused(t: &TestEnv, case: &str, names: &[&str]) {
    let root = root_of(t);
    let before = snapshot(&root);
    for args in [
        &["status"][..],
        &["restore", "--force"],
        &["restore"],
        &["verify"],
        &["list"],
    ] {
        let r = sgard_timed(t, args);
        assert_eq!(
            r.code,
            1,
            "{case}: `sgard {}` should refuse the manifest with exit 1; {r:#?}",
            args.join(" ")
        );
        for n in names {
            assert!(
                r.stderr.contains(n),
                "{case}: `sgard {}` error does not name {n:?}; {r:#?}",
                args.join(" ")
            );
        }
        assert!(
            !r.stderr.contains("panicked"),
            "{case}: `sgard {}` panicked; {r:#?}",
            args.join(" ")
        );
        assert_eq!(
            snapshot(&root),
            before,
            "{case}: `sgard {}` changed files",
            args.join(" ")
        );
    }
}

// ------------------------------------------------------------------ tests

/// Case 1b: The same in a tree big enough to be staged on all cores, with a
/// link and a locked-down file in the middle of the runs of plain files:
/// the corrupt one alone is refused, every other entry is restored exactly.
#[test]
fn corrupt_blob_in_a_big_tree_is_refused_alone() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    const FILES: usize = 150;
    let t = TestEnv::init();
    let names: Vec<String> = (0..FILES)
        .map(|i| format!("tree/d{}/f{i:03}", i % 5))
        .collect();
    for (i, n) in names.iter().enumerate() {
        let p = t.write(n, format!("file {i}\n").repeat(i % 7 + 1));
        if i % 10 == 0 {
            fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
    symlink("d1/f001", t.path("tree/d2/link")).unwrap();
    t.sgard(["add", "~/tree"]).ok();
    let bad = 77;
    let bad_content = format!("file {bad}\n").repeat(bad % 7 + 1);
    tamper(&t.blob_path(&sha(&bad_content)), b"forged");
    fs::remove_dir_all(t.path("tree")).unwrap();

    let r = t.sgard(["restore", "--force"]);
    assert_eq!(r.code, 3, "{r:#?}");
    assert!(r.stderr.contains(&names[bad]), "{r:#?}");
    for (i, n) in names.iter().enumerate() {
        let p = t.path(n);
        if i == bad {
            assert!(fs::symlink_metadata(&p).is_err(), "corrupt blob restored");
            continue;
        }
        assert_eq!(
            t.read(n),
            format!("file {i}\n").repeat(i % 7 + 1).into_bytes(),
            "{n}"
        );
        let want = if i % 10 == 0 { 0o600 } else { 0o644 };
        assert_eq!(mode_of(&p) & 0o777, want, "{n}");
    }
    assert_eq!(
        fs::read_link(t.path("tree/d2/link")).unwrap(),
        Path::new("d1/f001")
    );
    for d in 0..5 {
        let temps = restore_temps(&t.path(&format!("tree/d{d}")));
        assert!(temps.is_empty(), "temp files left: {temps:?}");
    }
}

/// Case 1: A blob whose bytes no longer match its name is never written out:
/// exit 3, the path is named, the destination is exactly as it was and no
/// temp file is left next to it.
#[test]
fn corrupt_blob_is_never_restored() {
    let stored = b"precious stored content\n".to_vec();
    // None: the blob is deleted.
    let forgeries: [(&str, Option<Vec<u8>>); 4] = [
        ("same length", Some(b"PRECIOUS STORED CONTENT\n".to_vec())),
        ("other length", Some(b"evil".to_vec())),
        ("truncated", Some(Vec::new())),
        ("blob deleted", None),
    ];
    for (how, forged) in &forgeries {
        for changed in [false, true] {
            let case = format!(
                "{how}, destination {}",
                if changed { "changed" } else { "deleted" }
            );
            let t = TestEnv::init();
            let p = t.write("conf/app.rc", &stored);
            let sibling = t.write("conf/other.rc", "an intact sibling\n");
            t.sgard(["add", "~/conf"]).ok();
            let h = sha(&stored);
            let blob = t.blob_path(&h);
            assert_eq!(fs::read(&blob).unwrap(), stored, "{case}: blob layout");
            match forged {
                Some(bytes) => tamper(&blob, bytes),
                None => fs::remove_file(&blob).unwrap(),
            }
            let mine = b"the user's newer bytes\n";
            if changed {
                fs::write(&p, mine).unwrap();
            } else {
                fs::remove_file(&p).unwrap();
            }
            let mut runs = vec![
                &["restore", "--force"][..],
                &["restore", "--force", "~/conf/app.rc"],
            ];
            if !changed {
                // Nothing to overwrite: a plain restore writes without asking.
                runs.push(&["restore"]);
            }
            for args in runs {
                fs::remove_file(&sibling).unwrap();
                let r = t.sgard(args);
                assert_eq!(r.code, 3, "{case}: {args:?} must exit 3; {r:#?}");
                assert!(
                    r.stderr.contains("~/conf/app.rc"),
                    "{case}: stderr must name the path; {r:#?}"
                );
                if changed {
                    assert_eq!(t.read("conf/app.rc"), mine, "{case}: destination changed");
                } else {
                    assert!(
                        fs::symlink_metadata(&p).is_err(),
                        "{case}: a corrupt blob was restored to {}",
                        p.display()
                    );
                }
                if !args.contains(&"~/conf/app.rc") {
                    // One bad entry does not stop the others.
                    assert_eq!(
                        fs::read(&sibling).ok().as_deref(),
                        Some(&b"an intact sibling\n"[..]),
                        "{case}: {args:?} did not restore the intact sibling; {r:#?}"
                    );
                } else {
                    fs::write(&sibling, "an intact sibling\n").unwrap();
                }
                let temps = restore_temps(&t.path("conf"));
                assert!(temps.is_empty(), "{case}: temp files left: {temps:?}");
                assert_eq!(fs::read(&blob).ok(), *forged, "{case}: blob touched");
            }
            // verify agrees that the blob is corrupt.
            let v = t.sgard(["verify"]);
            assert_eq!(v.code, 3, "{case}: verify; {v:#?}");
            let word = if forged.is_some() {
                "corrupt"
            } else {
                "missing"
            };
            assert!(v.stdout.contains(word), "{case}: verify; {v:#?}");
        }
    }
}

/// Case 2: Forged manifest entries (a hash that is a path, paths that climb out
/// of HOME or are relative) are refused by every command before anything is
/// read or written.
#[test]
fn forged_manifest_entries_are_refused() {
    let t = TestEnv::init();
    let good = put_blob(&t.repo(), b"harmless\n");
    let evil = put_blob(&t.repo(), b"attacker controlled\n");
    let abs_escape = format!("{}/../outside/abs-escape", t.home.display());
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "hash is a path",
            file_item("~/victim", "../../etc/passwd"),
            vec!["~/victim", "../../etc/passwd"],
        ),
        (
            "path climbs out of HOME",
            file_item("~/../outside/escape", &evil),
            vec!["~/../outside/escape"],
        ),
        (
            "path climbs far out of HOME",
            file_item("~/../../tmp/x", &evil),
            vec!["~/../../tmp/x"],
        ),
        (
            "absolute path with ..",
            file_item(&abs_escape, &evil),
            vec![abs_escape.as_str()],
        ),
        (
            "relative path without ~",
            file_item("outside/rel", &evil),
            vec!["outside/rel"],
        ),
        (
            "relative dotdot path",
            file_item("../outside/rel2", &evil),
            vec!["../outside/rel2"],
        ),
    ];
    for (case, bad, names) in &cases {
        // A valid entry first: it must not be restored either.
        write_manifest(
            &t,
            &manifest_with(&[file_item("~/good", &good), bad.clone()]),
        );
        assert_refused(&t, case, names);
        assert!(!t.path("good").exists(), "{case}: ~/good was restored");
        assert!(
            !root_of(&t).join("outside").exists(),
            "{case}: wrote outside HOME"
        );
    }
}

/// Case 3: Syntax errors name the line; newer schemas, unknown entry types and
/// empty manifests are refused.
#[test]
fn malformed_manifests_are_refused() {
    let t = TestEnv::init();
    let unclosed = format!(
        "version: 1\ncreated: {TS}\nupdated: {TS}\nfiles: [\n    {{path: ~/x, type: link, target: y}},\n"
    );
    let r = sgard_timed(&t, &["status"]);
    r.ok();
    write_manifest(&t, &unclosed);
    let before = snapshot(&root_of(&t));
    for args in [
        &["status"][..],
        &["list"],
        &["verify"],
        &["restore", "--force"],
    ] {
        let r = sgard_timed(&t, args);
        assert_eq!(r.code, 1, "unclosed [: {args:?}; {r:#?}");
        assert!(
            names_a_line(&r.stderr),
            "unclosed [: no `line N` in the error; {r:#?}"
        );
        assert!(
            r.stderr.contains("manifest.yaml"),
            "unclosed [: file not named; {r:#?}"
        );
        assert!(!r.stderr.contains("panicked"), "{r:#?}");
    }
    assert_eq!(snapshot(&root_of(&t)), before);

    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "version 2",
            format!("version: 2\ncreated: {TS}\nupdated: {TS}\nfiles: []\n"),
            vec!["newer"],
        ),
        (
            "type socket",
            manifest_with(&[format!(
                "    - path: ~/.ssh/agent.sock\n      type: socket\n      updated: {TS}\n"
            )]),
            vec!["~/.ssh/agent.sock", "socket"],
        ),
        ("empty file", String::new(), vec!["empty"]),
        ("only blank lines", "\n\n  \n".to_owned(), vec!["empty"]),
    ];
    for (case, text, names) in &cases {
        write_manifest(&t, text);
        assert_refused(&t, case, names);
        assert_eq!(t.manifest(), *text, "{case}: manifest rewritten");
    }
    // A refused manifest is not overwritten by a writing command either.
    write_manifest(&t, &cases[0].1);
    t.write("x", "x");
    let r = sgard_timed(&t, &["add", "~/x"]);
    assert_eq!(r.code, 1, "add with a version 2 manifest; {r:#?}");
    assert!(r.stderr.contains("newer"), "{r:#?}");
    assert_eq!(
        t.manifest(),
        cases[0].1,
        "a newer manifest was written back"
    );
}

/// Case 4: FIFOs never make sgard block: a FIFO inside an added folder is skipped
/// with a warning, and a tracked file replaced by a FIFO is reported.
#[test]
fn fifos_never_hang() {
    let t = TestEnv::init();
    t.write("d/a.txt", "a\n");
    mkfifo(&t.path("d/m-fifo"));
    t.write("d/z.txt", "z\n");
    let r = sgard_timed(&t, &["add", "~/d"]);
    r.ok();
    assert!(
        r.stderr.contains("~/d/m-fifo") && r.stderr.contains("warning"),
        "no warning naming the FIFO; {r:#?}"
    );
    let m = t.manifest();
    assert!(!m.contains("m-fifo"), "the FIFO was tracked:\n{m}");
    assert!(m.contains("~/d/a.txt") && m.contains("~/d/z.txt"), "{m}");

    // A tracked file replaced by a FIFO.
    let stored = b"tracked content\n";
    t.write("f", stored);
    t.sgard(["add", "~/f"]).ok();
    fs::remove_file(t.path("f")).unwrap();
    mkfifo(&t.path("f"));
    let before = t.manifest();

    let r = sgard_timed(&t, &["status"]);
    r.ok();
    assert!(
        r.stdout
            .lines()
            .any(|l| l == "typechange ~/f  (tracked as a file, now a FIFO)"),
        "status does not report the typechange; {r:#?}"
    );
    for args in [&["diff", "~/f"][..], &["info", "~/f"], &["add", "~/f"]] {
        let r = sgard_timed(&t, args);
        assert!(!r.stderr.contains("panicked"), "{args:?}; {r:#?}");
    }
    assert_eq!(t.manifest(), before, "`add` of a FIFO changed the manifest");

    let r = sgard_timed(&t, &["checkpoint"]);
    r.ok();
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("typechange") && l.contains(" ~/f")),
        "checkpoint does not report the typechange; {r:#?}"
    );
    assert!(
        manifest_hashes(&t.manifest()).contains(&sha(stored)),
        "checkpoint dropped the stored version:\n{}",
        t.manifest()
    );
    assert!(
        fs::symlink_metadata(t.path("f"))
            .unwrap()
            .file_type()
            .is_fifo()
    );

    let r = sgard_timed(&t, &["restore", "--dry-run", "~/f"]);
    r.ok();
    assert!(
        fs::symlink_metadata(t.path("f"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    let r = sgard_timed(&t, &["restore", "--force", "~/f"]);
    r.ok();
    assert!(r.stdout.contains("~/f"), "{r:#?}");
    let md = fs::symlink_metadata(t.path("f")).unwrap();
    assert!(md.is_file(), "~/f is still not a regular file");
    assert_eq!(t.read("f"), stored);
    assert!(restore_temps(&t.home).is_empty());
    sgard_timed(&t, &["status"]).ok();
}

/// Case 4b: A hostile repository holding a FIFO where a blob or the manifest
/// belongs must not hang any command either: a blob that is not a regular
/// file is bad data (integrity failure, exit 3), a manifest that is not one
/// is an error naming it (exit 1); neither is something to block on.
#[test]
fn fifo_in_the_repository_never_hangs() {
    const LIMIT: Duration = Duration::from_secs(3);
    let t = TestEnv::init();
    let stored = b"tracked content\n";
    t.write("f", stored);
    t.sgard(["add", "~/f"]).ok();
    let blob = t.blob_path(&sha(stored));
    fs::remove_file(&blob).unwrap();
    mkfifo(&blob);
    // Every command is tried (so one report shows every hang), then judged.
    let mut problems = Vec::new();
    let mut attempt = |args: &[&str], check: &dyn Fn(&Run) -> Option<String>| {
        let child = t
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let what = args.join(" ");
        match wait_limited(child, LIMIT) {
            Err(_) => problems.push(format!("`sgard {what}` hung (killed after {LIMIT:?})")),
            Ok(r) => {
                if let Some(p) = check(&r) {
                    problems.push(format!("`sgard {what}`: {p}; {r:#?}"));
                }
            }
        }
    };
    let integrity = |r: &Run| (r.code != 3).then(|| format!("exit {} instead of 3", r.code));
    attempt(&["verify"], &integrity);
    t.write("f", "changed on disk\n");
    attempt(&["diff", "~/f"], &integrity);
    fs::remove_file(t.path("f")).unwrap();
    let home = t.home.clone();
    attempt(&["restore", "--force"], &|r| {
        if r.code != 3 {
            Some(format!("exit {} instead of 3", r.code))
        } else if !r.stderr.contains("~/f") {
            Some("the error does not name ~/f".into())
        } else if home.join("f").exists() {
            Some("~/f was created".into())
        } else if !restore_temps(&home).is_empty() {
            Some("a temp file was left in HOME".into())
        } else {
            None
        }
    });
    // With the file back, a checkpoint replaces the bad blob or at least
    // finishes.
    t.write("f", stored);
    attempt(&["checkpoint"], &|r| {
        r.stderr.contains("panicked").then(|| "panicked".into())
    });

    // The manifest itself a FIFO.
    let u = TestEnv::init();
    let manifest = u.repo().join("manifest.yaml");
    fs::remove_file(&manifest).unwrap();
    mkfifo(&manifest);
    for args in [&["status"][..], &["list"], &["add", "~"]] {
        let child = u
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let what = args.join(" ");
        match wait_limited(child, LIMIT) {
            Err(_) => problems.push(format!(
                "`sgard {what}` with a FIFO manifest hung (killed after {LIMIT:?})"
            )),
            Ok(r) if r.code != 1 || !r.stderr.contains("manifest.yaml") => problems.push(format!(
                "`sgard {what}` with a FIFO manifest: want exit 1 naming it; {r:#?}"
            )),
            Ok(_) => {}
        }
    }
    assert!(
        fs::symlink_metadata(&manifest)
            .unwrap()
            .file_type()
            .is_fifo(),
        "the FIFO manifest was replaced"
    );
    assert!(
        problems.is_empty(),
        "a FIFO in the repository:\n{}",
        problems.join("\n")
    );
}

/// Case 5: Restoring over a symlink replaces the link; it never writes through
/// it to the file it points at.
#[test]
fn restore_replaces_a_symlink_instead_of_writing_through_it() {
    let t = TestEnv::init();
    let stored = b"dotfile as stored\n";
    t.write("f", stored);
    t.chmod("f", 0o640);
    t.sgard(["add", "~/f"]).ok();
    let out = t.outside();
    let target = out.join("target");
    let original = b"someone else's file, must survive\n";
    fs::write(&target, original).unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();

    for (case, points_to) in [
        ("existing target", target.clone()),
        ("dangling", out.join("absent")),
    ] {
        let f = t.path("f");
        fs::remove_file(&f).unwrap();
        std::os::unix::fs::symlink(&points_to, &f).unwrap();
        let r = sgard_timed(&t, &["restore", "--force", "~/f"]);
        r.ok();
        let md = fs::symlink_metadata(&f).unwrap();
        assert!(
            md.is_file(),
            "{case}: ~/f is not a regular file after restore"
        );
        assert_eq!(t.read("f"), stored, "{case}");
        assert_eq!(mode_of(&f), 0o640, "{case}: mode");
        assert_eq!(
            fs::read(&target).unwrap(),
            original,
            "{case}: wrote through the link"
        );
        assert_eq!(mode_of(&target), 0o644, "{case}: target's mode changed");
        assert!(
            !out.join("absent").exists(),
            "{case}: created the link's target"
        );
        assert!(restore_temps(&t.home).is_empty(), "{case}");
    }
}

/// Case 6: Sixteen `add`s at once: the repository lock serialises them and no
/// update is lost.
#[test]
fn concurrent_adds_lose_nothing() {
    let t = TestEnv::init();
    let names: Vec<String> = (0..16).map(|i| format!("c/file{i:02}")).collect();
    for (i, n) in names.iter().enumerate() {
        t.write(n, format!("content {i}\n"));
    }
    let children: Vec<Child> = names
        .iter()
        .map(|n| {
            t.command(["add", &format!("~/{n}")])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let runs: Vec<Run> = children
        .into_iter()
        .map(|c| finish(c, Duration::from_secs(60), "add (concurrent)"))
        .collect();
    for (n, r) in names.iter().zip(&runs) {
        assert_eq!(r.code, 0, "add ~/{n}; {r:#?}");
    }
    let m = t.manifest();
    for (i, n) in names.iter().enumerate() {
        assert!(m.contains(&format!("- path: ~/{n}\n")), "~/{n} lost:\n{m}");
        assert!(
            manifest_hashes(&m).contains(&sha(format!("content {i}\n"))),
            "hash of ~/{n} lost:\n{m}"
        );
    }
    let list = t.sgard(["list"]);
    list.ok();
    assert_eq!(list.stdout.lines().count(), 16, "{list:#?}");
    t.sgard(["verify"]).ok();
}

/// Case 7: `kill -9` at any moment of a checkpoint of a big file leaves a
/// consistent repository: the old manifest or the new one, every blob it
/// names intact.
///
/// The kill delays are fixed early ones (before and while hashing) plus
/// fractions of a measured uninterrupted checkpoint, so some land in the
/// blob write, the renames and the manifest save whatever the machine's
/// speed.
#[test]
fn kill_9_during_checkpoint_leaves_a_consistent_repo() {
    const SIZE: usize = 64 << 20;
    let t = TestEnv::init();
    let mut content = noise(SIZE, 1);
    let big = t.write("big.bin", &content);
    t.sgard(["add", "~/big.bin"]).ok();
    let mut current = sha(&content);
    assert_eq!(manifest_hashes(&t.manifest()), vec![current.clone()]);
    content = noise(SIZE, 2);
    fs::write(&big, &content).unwrap();

    let started = Instant::now();
    let mut full = Duration::ZERO;
    let mut killed_early = 0;
    // A checkpoint killed after its log record (the commit point) but
    // before its manifest write is finished by the next exclusive open,
    // which is the next round's checkpoint: that round may then leave the
    // killed round's manifest.
    let mut committed_before: Option<String> = None;
    let fractions = [0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.1];
    let rounds = 1 + 6 + fractions.len() + 1;
    for round in 0..rounds {
        // None: run to the end (the first round measures, the last checks).
        let delay: Option<Duration> = match round {
            0 => None,
            r if r <= 6 => Some(Duration::from_millis([0, 5, 20, 50, 100, 200][r - 1])),
            r if r <= 6 + fractions.len() => Some(full.mul_f64(fractions[r - 7])),
            _ => None,
        };
        // New content for this round: the first 8 bytes change.
        let stamp = (0xC0FF_EE00 + round as u64).to_le_bytes();
        content[..8].copy_from_slice(&stamp);
        fs::File::options()
            .write(true)
            .open(&big)
            .unwrap()
            .write_all_at(&stamp, 0)
            .unwrap();
        let new = sha(&content);
        let spawned = Instant::now();
        let mut child = t
            .command(["checkpoint"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let case = match delay {
            Some(d) => {
                thread::sleep(d.saturating_sub(spawned.elapsed()));
                let _ = child.kill();
                format!("round {round}: killed after {d:?}")
            }
            None => format!("round {round}: not killed"),
        };
        let r = finish(child, Duration::from_secs(60), "checkpoint");
        if round == 0 {
            full = spawned.elapsed();
        }
        if delay.is_some() && r.code == -1 {
            killed_early += 1;
        }
        if delay.is_none() {
            assert_eq!(r.code, 0, "{case}: {r:#?}");
        }
        let text = t.manifest();
        let hashes = manifest_hashes(&text);
        assert!(
            hashes == vec![current.clone()]
                || hashes == vec![new.clone()]
                || committed_before
                    .as_ref()
                    .is_some_and(|c| hashes == vec![c.clone()]),
            "{case}: manifest is neither the old nor the new one (nor one an interrupted \
             checkpoint committed):\n{text}"
        );
        committed_before = (r.code == -1).then(|| new.clone());
        let l = t.sgard(["list"]);
        assert_eq!(l.code, 0, "{case}: manifest does not parse; {l:#?}");
        assert!(l.stdout.contains("~/big.bin"), "{case}: {l:#?}");
        let s = t.sgard(["status"]);
        assert_eq!(s.code, 0, "{case}: status; {s:#?}");
        let v = t.sgard(["verify"]);
        assert_eq!(v.code, 0, "{case}: verify; {v:#?}");
        assert!(
            v.stdout.contains("ok") && v.stdout.contains("~/big.bin"),
            "{v:#?}"
        );
        if delay.is_none() {
            assert_eq!(hashes, vec![new.clone()], "{case}: checkpoint not recorded");
            assert!(
                s.stdout.starts_with("ok ") && s.stdout.lines().count() == 1,
                "{s:#?}"
            );
        }
        current = hashes[0].clone();
    }
    assert!(
        killed_early >= 6,
        "only {killed_early} checkpoints were actually interrupted"
    );
    eprintln!(
        "kill -9: {rounds} rounds in {:?} (a full checkpoint took {full:?}, {killed_early} interrupted)",
        started.elapsed()
    );
}

/// Case 8: A repository as the Go sgard writes it restores byte for byte under
/// another user's HOME.
#[test]
fn go_written_repository_restores_under_another_home() {
    let go = TestEnv::new();
    let repo = go.outside().join("go-repo");
    fs::create_dir_all(repo.join("blobs")).unwrap();
    fs::write(repo.join(".gitignore"), "blobs/\ntags\n").unwrap();
    let bashrc = b"export PS1='$ '\nalias ll='ls -l'\n".to_vec();
    let secret = b"token = \"s3cr3t\"\n\x00binary\xff tail".to_vec();
    let tool = b"#!/bin/sh\necho tool\n".to_vec();
    let h_bashrc = put_blob(&repo, &bashrc);
    let h_secret = put_blob(&repo, &secret);
    let h_tool = put_blob(&repo, &tool);
    // Go's yaml.v3 layout: 4-space indents, insertion order (not sorted),
    // RFC3339Nano timestamps (plain and quoted), quoted modes.
    let manifest = format!(
        "version: 1
created: 2025-11-02T08:15:30.123456789Z
updated: \"2026-01-05T21:04:05.987654321Z\"
message: from the go sgard
files:
    - path: ~/.vimrc
      type: link
      mode: \"0777\"
      target: .config/vim/vimrc
      updated: 2026-01-05T21:04:05.000000001Z
    - path: ~/.bashrc
      hash: {h_bashrc}
      type: file
      mode: \"0644\"
      updated: 2025-11-02T08:15:30.5Z
    - path: ~/.config/app/secret.conf
      hash: {h_secret}
      type: file
      mode: \"0600\"
      updated: \"2026-01-05T21:04:05.987654321Z\"
    - path: ~/.local/bin/tool
      hash: {h_tool}
      type: file
      mode: \"0755\"
      updated: 2026-01-05T21:04:05.987654321Z
    - path: ~/.abs-link
      type: link
      target: /nonexistent/go/absolute target
      updated: 2026-01-05T21:04:05Z
    - path: ~/.ssh/config
      hash: {h_bashrc}
      type: file
      mode: \"0600\"
      updated: 0001-01-01T00:00:00Z
    - path: ~/.ssh
      type: directory
      mode: \"0700\"
      updated: 2026-01-05T21:04:05.1Z
"
    );
    fs::write(repo.join("manifest.yaml"), &manifest).unwrap();
    // Leftovers of interrupted Go writes are not blobs and not entries.
    let leaf = blob_dir(&repo, &h_tool);
    fs::write(leaf.join(".blob-4242"), "half a blob").unwrap();
    fs::write(repo.join("manifest.yaml.tmp.1234"), "version: 1\nfiles: [").unwrap();
    fs::set_permissions(
        repo.join("manifest.yaml"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();

    let other = TestEnv::new();
    let repo_arg = repo.to_str().unwrap();
    let r = other.sgard(["--repo", repo_arg, "restore", "--force"]);
    r.ok();
    assert!(other.path(".ssh").is_dir());
    assert_eq!(mode_of(&other.path(".ssh")), 0o700, "folder mode");
    for (rel, bytes, mode) in [
        (".ssh/config", &bashrc, 0o600),
        (".bashrc", &bashrc, 0o644),
        (".config/app/secret.conf", &secret, 0o600),
        (".local/bin/tool", &tool, 0o755),
    ] {
        let p = other.path(rel);
        assert!(fs::symlink_metadata(&p).unwrap().is_file(), "{rel}");
        assert_eq!(&fs::read(&p).unwrap(), bytes, "{rel}: content");
        assert_eq!(mode_of(&p), mode, "{rel}: mode");
    }
    assert_eq!(
        fs::read_link(other.path(".vimrc")).unwrap(),
        PathBuf::from(".config/vim/vimrc"),
        "relative link target not restored raw"
    );
    assert_eq!(
        fs::read_link(other.path(".abs-link")).unwrap(),
        PathBuf::from("/nonexistent/go/absolute target")
    );
    assert!(
        !go.home.join(".bashrc").exists(),
        "restored into the Go user's HOME"
    );
    other.sgard(["--repo", repo_arg, "verify"]).ok();
    let s = other.sgard(["--repo", repo_arg, "status"]);
    s.ok();
    assert_eq!(s.stdout.lines().count(), 7, "{s:#?}");
    assert!(s.stdout.lines().all(|l| l.starts_with("ok ")), "{s:#?}");
    let l = other.sgard(["--repo", repo_arg, "list"]);
    l.ok();
    assert!(
        l.stdout.contains("~/.bashrc") && l.stdout.contains(&h_secret[..8]),
        "{l:#?}"
    );
    // Reading commands never rewrite the Go manifest.
    assert_eq!(
        fs::read_to_string(repo.join("manifest.yaml")).unwrap(),
        manifest
    );
}

/// Case 9: The repository never tracks itself, whether reached by a walk of HOME
/// or named directly.
#[test]
fn repository_is_never_tracked() {
    let t = TestEnv::init();
    t.write("a.txt", "a\n");
    t.write("sub/b.txt", "b\n");
    let r = t.sgard(["add", "~"]);
    r.ok();
    let m = t.manifest();
    assert!(!m.contains("~/.sgard"), "the repository was tracked:\n{m}");
    assert!(
        m.contains("- path: ~/a.txt\n") && m.contains("- path: ~/sub/b.txt\n"),
        "{m}"
    );
    let list = t.sgard(["list"]);
    assert!(!list.stdout.contains(".sgard"), "{list:#?}");

    std::os::unix::fs::symlink(t.repo(), t.path("alias")).unwrap();
    let before = t.manifest();
    for arg in [
        "~/.sgard/manifest.yaml",
        "~/.sgard",
        ".sgard/blobs",
        "~/.sgard/../.sgard/lock",
        "~/alias/manifest.yaml",
    ] {
        let r = t.sgard(["add", arg]);
        assert_eq!(r.code, 1, "add {arg} must be refused; {r:#?}");
        assert!(
            r.stderr.contains("repository"),
            "add {arg}: unclear error; {r:#?}"
        );
        assert_eq!(t.manifest(), before, "add {arg} changed the manifest");
    }

    // The default ~/.sgard as a symlink to a repository kept elsewhere in
    // HOME (a common dotfiles layout): the real folder is not tracked either.
    let w = TestEnv::new();
    w.write("y.txt", "y\n");
    w.sgard(["--repo", "~/dotfiles/repo", "init"]).ok();
    std::os::unix::fs::symlink(w.path("dotfiles/repo"), w.repo()).unwrap();
    w.sgard(["add", "~"]).ok();
    let m = w.manifest();
    assert!(
        !m.contains("~/dotfiles/repo"),
        "the repository was tracked:\n{m}"
    );
    assert!(m.contains("- path: ~/y.txt\n"), "{m}");
    let before = w.manifest();
    let r = w.sgard(["add", "~/dotfiles/repo/manifest.yaml"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert_eq!(w.manifest(), before);

    // A repository elsewhere in HOME (--repo) is skipped by a walk too.
    let u = TestEnv::new();
    u.write("x.txt", "x\n");
    u.sgard(["--repo", "~/dotrepo", "init"]).ok();
    u.sgard(["--repo", "~/dotrepo", "add", "~"]).ok();
    let m = fs::read_to_string(u.path("dotrepo/manifest.yaml")).unwrap();
    assert!(
        !m.contains("dotrepo"),
        "the --repo repository was tracked:\n{m}"
    );
    assert!(m.contains("- path: ~/x.txt\n"), "{m}");
}

/// Case 10: A command that must wait for the repository lock says so, then
/// proceeds once it is released.
#[test]
fn waiting_for_the_lock_is_announced() {
    let t = TestEnv::init();
    t.write("x", "x\n");
    let lock_path = t.repo().join("lock");
    let lock = fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .unwrap();
    lock.lock().unwrap();
    let (mut writer, writer_err) = spawn_watched(t.command(["add", "x"]));
    let (mut reader, reader_err) = spawn_watched(t.command(["list"]));
    thread::sleep(Duration::from_millis(300));
    // On a loaded machine the children may need longer to reach the lock.
    for (err, word) in [(&writer_err.0, "exclusive"), (&reader_err.0, "shared")] {
        let deadline = Instant::now() + WATCHDOG;
        while !err.lock().unwrap().contains("waiting for the") && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        let said = err.lock().unwrap().clone();
        assert!(
            said.contains(&format!("waiting for the {word} lock")),
            "no note about waiting for the {word} lock while it was held: {said:?}"
        );
        assert!(said.contains(&lock_path.display().to_string()), "{said:?}");
    }
    assert!(
        writer.try_wait().unwrap().is_none(),
        "`add` finished while the exclusive lock was held"
    );
    assert!(
        reader.try_wait().unwrap().is_none(),
        "`list` finished while an exclusive lock was held"
    );
    assert!(
        !t.manifest().contains("~/x"),
        "add wrote while the lock was held"
    );
    lock.unlock().unwrap();
    drop(lock);
    let mut r = finish(writer, WATCHDOG, "add x");
    r.stderr = take_watched(writer_err);
    r.ok();
    assert!(
        r.stderr.contains("waiting for the exclusive lock"),
        "no waiting note; {r:#?}"
    );
    assert!(t.manifest().contains("- path: ~/x\n"), "{}", t.manifest());
    let mut l = finish(reader, WATCHDOG, "list");
    l.stderr = take_watched(reader_err);
    l.ok();
    assert!(l.stderr.contains("waiting for the shared lock"), "{l:#?}");
}

type Watch = (Arc<Mutex<String>>, thread::JoinHandle<()>);

/// Spawns `cmd` (stdin closed, stdout piped) with its stderr copied, as it
/// arrives, into a shared string.
fn spawn_watched(mut cmd: Command) -> (Child, Watch) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let seen = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&seen);
    let h = thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    (child, (seen, h))
}

/// Everything the watched stderr said, once the child has exited.
fn take_watched(w: Watch) -> String {
    w.1.join().unwrap();
    w.0.lock().unwrap().clone()
}

/// Case 11: `sgard list | head`: a reader that closes early is not an error and
/// never a panic.
#[test]
fn closed_stdout_is_not_a_panic() {
    let t = TestEnv::init();
    let long = "x".repeat(150);
    let items: Vec<String> = (0..3000)
        .map(|i| {
            format!(
                "    - path: ~/links/l{i:05}\n      type: link\n      target: /far/away/{long}/{i}\n      updated: {TS}\n"
            )
        })
        .collect();
    write_manifest(&t, &manifest_with(&items));
    let full = t.sgard(["list"]);
    full.ok();
    assert!(
        full.stdout.len() > 256 << 10,
        "output too small to fill a pipe"
    );

    for keep in [0usize, 1, 4096] {
        let mut child = t
            .command(["list"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut buf = vec![0u8; keep];
        out.read_exact(&mut buf).unwrap();
        drop(out);
        let r = finish(child, WATCHDOG, "list (closed stdout)");
        assert!(!r.stderr.contains("panicked"), "kept {keep}: panic; {r:#?}");
        assert_eq!(
            r.code, 0,
            "kept {keep}: a closed stdout is not an error; {r:#?}"
        );
        assert!(r.stderr.is_empty(), "kept {keep}: noise on stderr; {r:#?}");
    }
}

/// Case 11b: No command panics when its stdout was closed before it started
/// (`sgard … | true`).
#[test]
fn no_command_panics_on_a_closed_stdout() {
    let t = TestEnv::tracking("a", "a\n");
    t.write("a", "b\n");
    for args in [
        &["list"][..],
        &["status"],
        &["verify"],
        &["diff", "~/a"],
        &["info", "~/a"],
        &["version"],
        &["--help"],
        &["completion", "bash"],
        &["completion", "zsh"],
    ] {
        let (read_end, write_end) = std::io::pipe().unwrap();
        drop(read_end);
        let child = t
            .command(args)
            .stdin(Stdio::null())
            .stdout(write_end)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let r = finish(child, WATCHDOG, &args.join(" "));
        assert!(
            !r.stderr.contains("panicked"),
            "`sgard {}` panicked on a closed stdout; {r:#?}",
            args.join(" ")
        );
        assert_eq!(
            r.code,
            0,
            "`sgard {}` with a closed stdout; {r:#?}",
            args.join(" ")
        );
    }
}

// ------------------------------------------------- trust boundary (issue 12)

fn link_item(path: &str, target: &str) -> String {
    format!(
        "    - path: {path}\n      type: link\n      mode: \"0777\"\n      target: {target}\n      updated: {TS}\n"
    )
}

fn dir_item(path: &str, mode: &str) -> String {
    format!(
        "    - path: {path}\n      type: directory\n      mode: \"{mode}\"\n      updated: {TS}\n"
    )
}

/// A manifest tracking a path below a tracked symlink is refused by every
/// command, naming both entries (restoring it would write through the link).
#[test]
fn a_manifest_tracking_below_a_tracked_symlink_is_refused() {
    let t = TestEnv::init();
    let escape = t.outside().join("escape");
    let h = put_blob(&t.repo(), b"through\n");
    for target in [escape.to_str().unwrap(), "../../.."] {
        write_manifest(
            &t,
            &manifest_with(&[link_item("~/lnk", target), file_item("~/lnk/through", &h)]),
        );
        assert_refused(&t, target, &["~/lnk/through", "~/lnk", "symlink"]);
        assert!(!escape.join("through").exists());
    }
}

/// A symlink on disk in a folder above a tracked path (one sgard does not
/// track) is never followed: that entry fails, naming the symlink, the
/// others are restored, and nothing is written where it points.
#[test]
fn restore_never_writes_through_a_symlinked_folder() {
    let t = TestEnv::init();
    let outside = t.outside().join("elsewhere");
    fs::create_dir_all(&outside).unwrap();
    let h = put_blob(&t.repo(), b"x\n");
    let ok = put_blob(&t.repo(), b"fine\n");
    write_manifest(
        &t,
        &manifest_with(&[
            file_item("~/d/f", &h),
            file_item("~/up/deeper/f", &h),
            file_item("~/fine", &ok),
        ]),
    );
    std::os::unix::fs::symlink(&outside, t.path("d")).unwrap();
    std::os::unix::fs::symlink("../outside/elsewhere", t.path("up")).unwrap();
    let r = sgard_timed(&t, &["restore", "-f"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(
        r.stderr
            .contains("is a symlink; sgard never writes through one"),
        "{r:#?}"
    );
    assert!(
        r.stderr.contains("~/d/f") && r.stderr.contains("~/up/deeper/f"),
        "{r:#?}"
    );
    assert_eq!(t.read("fine"), b"fine\n");
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        0,
        "wrote through the symlink"
    );
    // Mode fixes and deletions do not follow it either: undo of the restore
    // (which created ~/fine) removes only ~/fine.
    t.sgard(["undo"]).ok();
    assert!(!t.path("fine").exists());
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
}

/// Entries naming the repository, or sgard's own state and cache, are
/// never written, whatever their type.
#[test]
fn entries_inside_the_repository_or_state_are_refused() {
    let t = TestEnv::init();
    let evil = put_blob(&t.repo(), b"version: 1\nfiles: []\n");
    t.write(".bashrc", "x\n");
    t.sgard(["add", "~/.bashrc"]).ok();
    t.sgard(["status"]).ok();
    let manifest_before = t.manifest();
    let h = sha("x\n");
    let text = manifest_with(&[
        file_item("~/.bashrc", &h),
        file_item("~/.sgard/manifest.yaml", &evil),
        file_item(
            &format!("~/.sgard/blobs/3a/99/{}", "3a99".repeat(16)),
            &evil,
        ),
        file_item("~/.state/sgard/machine-id", &evil),
        file_item("~/.cache/sgard/planted", &evil),
        dir_item("~/.sgard", "0777"),
    ]);
    // Valid as a manifest (files below a folder entry are allowed): only
    // confinement stands in the way.
    write_manifest(&t, &text);
    let r = sgard_timed(&t, &["restore", "-f"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(
        r.stderr.contains("sgard's own repository or state"),
        "{r:#?}"
    );
    // The repository's manifest is the hostile one written above (the test
    // wrote it), never the blob's content; no blob has a wrong name; the
    // repository folder kept its mode.
    assert!(
        t.manifest().contains("~/.sgard/manifest.yaml"),
        "{}",
        t.manifest()
    );
    assert!(
        !t.repo()
            .join(format!("blobs/3a/99/{}", "3a99".repeat(16)))
            .exists()
    );
    assert_ne!(mode_of(&t.repo()) & 0o777, 0o777);
    assert!(!t.path(".cache/sgard/planted").exists());
    let id = fs::read_to_string(t.path(".state/sgard/machine-id")).unwrap();
    assert_ne!(id, "version: 1\nfiles: []\n");
    let _ = manifest_before;
}

/// The home folder itself is never replaced or chmodded by an entry.
#[test]
fn an_entry_for_the_home_folder_itself_is_refused() {
    let t = TestEnv::init();
    write_manifest(&t, &manifest_with(&[dir_item("\"~\"", "0777")]));
    let before = mode_of(&t.home);
    let r = sgard_timed(&t, &["restore", "-f"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stderr.contains("is the home folder itself"), "{r:#?}");
    assert_eq!(mode_of(&t.home), before);
}

/// Control characters in paths, link targets and history fields (from a
/// manifest or a server) reach the terminal escaped, never raw.
#[test]
fn control_characters_in_untrusted_text_are_escaped() {
    let t = TestEnv::init();
    let h = put_blob(&t.repo(), b"x\n");
    write_manifest(
        &t,
        &manifest_with(&[
            file_item("\"~/\\e[2Jevil\"", &h),
            link_item("~/lnk", "\"\\e]0;pwned\\a\""),
        ]),
    );
    let hist = format!(
        "version: 1\nsnapshots:\n    - id: {h}\n      time: {TS}\n      host: \"\\e]0;pwned\\a\"\n      reason: restore\n      message: \"bad\\rline\"\n      entries: 1\n      bytes: 2\n      new_blobs: 0\n"
    );
    fs::write(t.repo().join("history.yaml"), hist).unwrap();
    for args in [
        &["status"][..],
        &["list"],
        &["log"],
        &["info", "~/lnk"],
        &["restore", "-n"],
    ] {
        let r = sgard_timed(&t, args);
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(
            !all.chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{args:?} printed a raw control character: {all:?}"
        );
        assert!(all.contains("\\x1b"), "{args:?}: {all:?}");
    }
}

/// A damaged history.yaml is reported, and what does not need the history
/// still works; what would rewrite it refuses (exit 3) and leaves it as it is.
#[test]
fn a_damaged_history_stops_only_what_needs_it() {
    let t = TestEnv::tracking(".bashrc", "x\n");
    t.sgard(["checkpoint"]).ok();
    let hist = t.repo().join("history.yaml");
    fs::write(&hist, "version: 1\nsnapshots: [ {{{ damaged\n").unwrap();
    let damaged = fs::read(&hist).unwrap();
    for args in [
        &["status"][..],
        &["list"],
        &["diff"],
        &["info", "~/.bashrc"],
    ] {
        let r = sgard_timed(&t, args);
        assert_eq!(r.code, 0, "{args:?}: {r:#?}");
        assert!(
            r.stderr.contains("the history is damaged"),
            "{args:?}: {r:#?}"
        );
    }
    fs::remove_file(t.path(".bashrc")).unwrap();
    sgard_timed(&t, &["restore"]);
    assert_eq!(t.read(".bashrc"), b"x\n");
    t.write(".bashrc", "y\n");
    for args in [
        &["log"][..],
        &["checkpoint"],
        &["prune"],
        &["forget", "--keep-last", "1"],
        &["verify"],
    ] {
        let r = sgard_timed(&t, args);
        assert_eq!(r.code, 3, "{args:?}: {r:#?}");
        assert!(
            r.stderr.contains("history.yaml is damaged"),
            "{args:?}: {r:#?}"
        );
    }
    assert_eq!(
        fs::read(&hist).unwrap(),
        damaged,
        "the damaged log was rewritten"
    );
}

/// Names of sgard's temp files anywhere under `dir`.
pub(crate) fn debris(dir: &Path) -> Vec<PathBuf> {
    snapshot(dir)
        .into_keys()
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with(".sgard-") || p.parent().is_some_and(|d| d.ends_with("blobs/tmp"))
        })
        .collect()
}

/// Ctrl-C: at a prompt, while files are staged, while blobs are copied:
/// exit 130 with "interrupted", and no temp file left anywhere.
#[test]
fn ctrl_c_removes_its_temp_files_and_exits_130() {
    let t = TestEnv::init();
    for i in 0..40 {
        t.write(&format!("tree/f{i}"), noise_bytes(20_000, i));
    }
    // While an add has copied its files into the store (not yet named).
    let r: Run = t
        .command(["add", "~/tree"])
        .env("SGARD_TEST_INTERRUPT_AT", "add-copied")
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 130, "{r:#?}");
    assert!(r.stderr.contains("sgard: interrupted"), "{r:#?}");
    assert!(
        debris(&root_of(&t)).is_empty(),
        "{:?}",
        debris(&root_of(&t))
    );
    assert!(!t.manifest().contains("~/tree/f0"));
    t.sgard(["add", "~/tree"]).ok();
    // While a restore has staged its files beside their destinations.
    fs::remove_dir_all(t.path("tree")).unwrap();
    let r: Run = t
        .command(["restore", "-f"])
        .env("SGARD_TEST_INTERRUPT_AT", "restore-staged")
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 130, "{r:#?}");
    assert!(
        debris(&root_of(&t)).is_empty(),
        "{:?}",
        debris(&root_of(&t))
    );
    t.sgard(["restore"]).ok();
    assert!(t.path("tree/f39").is_file());
    // A real SIGINT while waiting at a question.
    t.write("tree/f0", "local edit\n");
    let mut child = t
        .command(["restore"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut b = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("Overwrite it?") {
        assert_eq!(out.read(&mut b).unwrap(), 1);
        seen.push(b[0]);
    }
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let r = finish(child, WATCHDOG, "restore");
    assert_eq!(r.code, 130, "{r:#?}");
    assert!(r.stderr.contains("interrupted"), "{r:#?}");
    assert_eq!(t.read("tree/f0"), b"local edit\n");
    assert!(debris(&root_of(&t)).is_empty());
}

fn noise_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// What a killed restore leaves beside its files, and a killed write in the
/// repository, is removed by the next restore, or by prune.
#[test]
fn debris_of_killed_commands_is_swept() {
    let t = TestEnv::tracking("d/f", "x\n");
    // As a process that is gone would leave them (pid 1 is never ours, and
    // a pid beyond the kernel's maximum is nobody's).
    let dead = 4_194_305u32;
    let stray = [
        t.path(&format!("d/.sgard-restore-{dead}-abc-f")),
        t.path(&format!("d/.sgard-link-{dead}-abc-l")),
    ];
    for p in &stray {
        fs::write(p, "half").unwrap();
    }
    let live = t.path("d/.sgard-restore-1-abc-f");
    fs::write(&live, "someone else's").unwrap();
    let repo_tmp = t.repo().join(".sgard-tmp-xyz");
    fs::write(&repo_tmp, "half").unwrap();
    t.sgard(["restore"]).ok();
    for p in &stray {
        assert!(!p.exists(), "{} left", p.display());
    }
    assert!(live.exists(), "a live process's temp file was removed");
    // prune (or any writing command) clears the repository's.
    t.sgard(["prune"]).ok();
    assert!(!repo_tmp.exists());
    fs::remove_file(live).unwrap();
}

/// A repository of a few files, folders and a link, checkpointed, then the
/// home changed so that `restore -f` has to write, create and replace.
fn restore_fixture() -> (TestEnv, Vec<(String, Vec<u8>)>) {
    let t = TestEnv::init();
    let mut files = Vec::new();
    for i in 0..6u64 {
        let rel = format!("conf/d{}/f{i}", i % 2);
        let body = noise_bytes(3000 + 1000 * i as usize, i);
        t.write(&rel, &body);
        files.push((rel, body));
    }
    std::os::unix::fs::symlink("d0/f0", t.path("conf/link")).unwrap();
    t.sgard(["add", "~/conf"]).ok();
    t.sgard(["checkpoint"]).ok();
    // Two missing (a whole folder), one changed, the link gone.
    fs::remove_dir_all(t.path("conf/d1")).unwrap();
    t.write(&files[0].0, "local edit\n");
    fs::remove_file(t.path("conf/link")).unwrap();
    (t, files)
}

/// The folders a restore makes, in order, from `strace -f -y` of it: every
/// folder of the home that gained a folder is flushed (an `fsync` of it, or
/// a `syncfs` that succeeded) after the folder was made and before any
/// staged file or link is renamed into a folder below it. Returns the calls
/// checked (made, renamed into place).
fn check_folders_flushed_before_renames(trace: &str, home: &Path) -> (usize, usize) {
    let home = home.to_str().unwrap();
    let mut pending: Vec<String> = Vec::new();
    let (mut made, mut renamed) = (0, 0);
    for c in traced_calls(trace).iter().filter(|c| c.result == "0") {
        match c.call.as_str() {
            "mkdirat" => {
                if let Some(d) = c.first_fd().filter(|d| d.starts_with(home)) {
                    made += 1;
                    pending.push(d.to_owned());
                }
            }
            "fsync" | "fdatasync" => {
                if let Some(d) = c.first_fd() {
                    pending.retain(|p| *p != d);
                }
            }
            "syncfs" => pending.clear(),
            "renameat" | "renameat2"
                if c.args.contains("\".sgard-restore-") || c.args.contains("\".sgard-link-") =>
            {
                let d = c.first_fd().unwrap();
                renamed += 1;
                // A folder above `d` that gained a folder may have gained
                // the one on the way to `d` (`d` itself gaining one is no
                // matter for a name in it).
                let unflushed: Vec<&String> = pending
                    .iter()
                    .filter(|p| *p != d && Path::new(d).starts_with(p))
                    .collect();
                assert!(
                    unflushed.is_empty(),
                    "a file was put in place in {d} while {unflushed:?} had a new folder \
                     not yet flushed:\n{trace}"
                );
            }
            _ => {}
        }
    }
    assert!(pending.is_empty(), "never flushed: {pending:?}\n{trace}");
    (made, renamed)
}

/// One system call of an `strace -f -y` log: the lines where it started
/// and ended (a call cut in two by another thread, `<unfinished ...>` then
/// `<... call resumed>`, is put back together).
struct Traced {
    start: usize,
    end: usize,
    call: String,
    args: String,
    result: String,
}

impl Traced {
    /// The path of the first argument's descriptor: `7</a/b>`.
    fn first_fd(&self) -> Option<&str> {
        let (_, p) = self.args.split_once('<')?;
        Some(p.split_once('>')?.0)
    }

    /// The quoted arguments (a rename's two paths).
    fn quoted(&self) -> Vec<&str> {
        self.args.split('"').skip(1).step_by(2).collect()
    }

    fn ok(&self) -> bool {
        !self.result.starts_with('-')
    }
}

/// Every call of an `strace -f -y` log, in the order they ended.
fn traced_calls(trace: &str) -> Vec<Traced> {
    let mut open: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let mut calls = Vec::new();
    for (i, l) in trace.lines().enumerate() {
        let Some((tid, rest)) = l.split_once(' ').map(|(t, r)| (t, r.trim_start())) else {
            continue;
        };
        let (start, whole) = if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            open.insert(tid.to_owned(), (i, head.to_owned()));
            continue;
        } else if let Some(tail) = rest.strip_prefix("<... ") {
            let Some((start, head)) = open.remove(tid) else {
                continue;
            };
            let tail = tail.split_once("resumed>").map_or("", |(_, t)| t);
            (start, format!("{head}{tail}"))
        } else {
            (i, rest.to_owned())
        };
        let Some((call, args)) = whole.split_once('(') else {
            continue;
        };
        let Some((args, result)) = args.rsplit_once(" = ") else {
            continue;
        };
        calls.push(Traced {
            start,
            end: i,
            call: call.to_owned(),
            args: args.to_owned(),
            result: result.split_whitespace().next().unwrap_or("").to_owned(),
        });
    }
    calls
}

/// A restore into an empty home makes the tree's folders without an
/// `fsync` per folder made (the `syncfs` before the renames flushes them),
/// yet every folder's new names are durable before a file is put in place
/// below it: with `syncfs` working, and with it failing (then each folder
/// is synced on its own). A link in a folder the staged files made is put
/// in place (and recorded) before they are: the folders above it are
/// flushed first.
#[test]
fn folders_a_restore_makes_are_flushed_before_files_go_in_place() {
    if !strace_works() {
        eprintln!("skipping: strace cannot trace here");
        return;
    }
    let t = TestEnv::init();
    let mut files = Vec::new();
    for (i, rel) in [
        "conf/a/b/f0",
        "conf/a/b/f1",
        "conf/a/c/f2",
        "conf/d/e/f/f3",
        "top",
    ]
    .iter()
    .enumerate()
    {
        let body = noise_bytes(500 + i * 300, i as u64);
        t.write(rel, &body);
        files.push((rel.to_string(), body));
    }
    std::os::unix::fs::symlink("b/f0", t.path("conf/a/link")).unwrap();
    t.sgard(["add", "~/conf", "~/top"]).ok();
    for fault in [None, Some(("syncfs", "EIO", 1))] {
        fs::remove_dir_all(t.path("conf")).unwrap();
        fs::remove_file(t.path("top")).unwrap();
        let (r, trace) = traced(
            &t.command(["restore", "-f"]),
            &["-y"],
            "mkdir,mkdirat,fsync,fdatasync,syncfs,rename,renameat,renameat2",
            fault,
        );
        assert_eq!(r.code, 0, "{fault:?}: {r:#?}");
        for (rel, body) in &files {
            assert_eq!(&t.read(rel), body, "{fault:?}: {rel}");
        }
        assert_eq!(
            fs::read_link(t.path("conf/a/link")).unwrap(),
            Path::new("b/f0")
        );
        let (made, renamed) = check_folders_flushed_before_renames(&trace, &t.home);
        // conf, a, b, c, d, e, f; every file and the link.
        assert_eq!((made, renamed), (7, files.len() + 1), "{fault:?}:\n{trace}");
    }
}

/// A checkpoint flushes its new blobs' bytes ahead (on another thread),
/// renders its snapshot meanwhile and names the snapshot's blob with
/// theirs: yet every blob's bytes are durable before it gets its name, and
/// every name before the history record is put in place; the base's
/// journal goes in before the record, `manifest.yaml` after it, and the
/// index last. With `syncfs` working, and with it failing (then each is
/// synced on its own).
#[test]
fn a_checkpoint_makes_its_blobs_durable_before_recording_them() {
    if !strace_works() {
        eprintln!("skipping: strace cannot trace here");
        return;
    }
    let t = checkpoint_fixture();
    for (round, fault) in [None, Some(("syncfs", "EIO", 1))].into_iter().enumerate() {
        // Two files edited (another size each round: no stat can miss it).
        for i in [1u64, 4] {
            let body = noise_bytes(2000 + 500 * round + i as usize, 10 * i + round as u64);
            t.write(&format!("conf/d{}/f{i}", i % 2), body);
        }
        let (r, trace) = traced(
            &t.command(["checkpoint", "-m", "edit"]),
            &["-y"],
            "write,pwrite64,mkdir,mkdirat,fsync,fdatasync,syncfs,rename,renameat,renameat2",
            fault,
        );
        r.ok();
        assert!(r.stdout.contains("updated"), "{fault:?}: {r:#?}");
        let id = sha(fs::read(t.repo().join("manifest.yaml")).unwrap());
        let calls = traced_calls(&trace);
        let renamed = |c: &Traced| c.call.starts_with("rename") && c.ok();
        // Blobs get their names by a rename from the store's temp folder.
        let named: Vec<&Traced> = calls
            .iter()
            .filter(|c| {
                renamed(c)
                    && c.quoted()
                        .first()
                        .is_some_and(|s| s.contains("/blobs/tmp/"))
            })
            .collect();
        let names: Vec<&str> = named.iter().map(|c| c.quoted()[1]).collect();
        assert_eq!(
            names.len(),
            3,
            "{fault:?}: two contents and the snapshot:\n{trace}"
        );
        assert!(
            names
                .iter()
                .any(|n| n.ends_with(&format!("/{}/{}/{id}", &id[..2], &id[2..4]))),
            "{fault:?}: the snapshot {id} was not named with them:\n{trace}"
        );
        let recorded = calls
            .iter()
            .find(|c| {
                renamed(c)
                    && c.quoted()
                        .get(1)
                        .is_some_and(|d| d.ends_with("/history.yaml"))
            })
            .unwrap_or_else(|| panic!("{fault:?}: no record:\n{trace}"));
        // The base's journal before the record, the record before
        // manifest.yaml, and this machine's index, which holds the base
        // that goes with them, named after both.
        let renamed_to = |suffix: &str| -> Vec<&Traced> {
            calls
                .iter()
                .filter(|c| renamed(c) && c.quoted().get(1).is_some_and(|d| d.ends_with(suffix)))
                .collect()
        };
        let [manifest] = renamed_to("/manifest.yaml")[..] else {
            panic!("{fault:?}: manifest.yaml not renamed once:\n{trace}");
        };
        let journal = renamed_to("/base.pending");
        assert!(!journal.is_empty(), "{fault:?}: no journal:\n{trace}");
        assert!(
            journal.iter().all(|c| c.end < recorded.start),
            "{fault:?}: the record went in before the base's journal:\n{trace}"
        );
        assert!(recorded.end < manifest.start, "{fault:?}:\n{trace}");
        let index = renamed_to("/index");
        assert!(!index.is_empty(), "{fault:?}: no index:\n{trace}");
        assert!(
            index.iter().all(|c| c.start > manifest.end),
            "{fault:?}: the index was named before manifest.yaml:\n{trace}"
        );
        let flushed = |c: &Traced, path: &str| {
            c.ok()
                && (c.call == "syncfs" || (c.call.contains("sync") && c.first_fd() == Some(path)))
        };
        for n in named {
            let [tmp, name] = [n.quoted()[0], n.quoted()[1]];
            let written = calls
                .iter()
                .filter(|c| c.call.contains("write") && c.first_fd() == Some(tmp))
                .map(|c| c.end)
                .max()
                .unwrap_or_else(|| panic!("{fault:?}: {tmp} never written:\n{trace}"));
            assert!(
                calls
                    .iter()
                    .any(|c| flushed(c, tmp) && c.start > written && c.end < n.start),
                "{fault:?}: {name} was named before its bytes were flushed:\n{trace}"
            );
            let leaf = name.rsplit_once('/').unwrap().0;
            assert!(
                calls
                    .iter()
                    .any(|c| flushed(c, leaf) && c.start > n.end && c.end < recorded.start),
                "{fault:?}: the record went in place before the name {name} was flushed:\n{trace}"
            );
        }
        // A folder of the store that gained a folder (a leaf, a fan-out
        // folder) is flushed before the record too.
        let repo = fs::canonicalize(t.repo()).unwrap();
        let in_repo =
            |p: &str| Path::new(p).starts_with(&repo) || Path::new(p).starts_with(t.repo());
        let mut gained: Vec<(String, usize)> = Vec::new();
        for c in calls.iter().filter(|c| c.ok() && c.end < recorded.start) {
            match c.call.as_str() {
                "mkdir" | "mkdirat" => {
                    let made = c.quoted()[0];
                    let made = match (made.starts_with('/'), c.first_fd()) {
                        (false, Some(dir)) => format!("{dir}/{made}"),
                        _ => made.to_owned(),
                    };
                    let above = made.rsplit_once('/').unwrap().0.to_owned();
                    if in_repo(&above) {
                        gained.push((above, c.end));
                    }
                }
                "syncfs" => gained.retain(|(_, made)| *made > c.start),
                "fsync" | "fdatasync" => gained
                    .retain(|(dir, made)| Some(dir.as_str()) != c.first_fd() || *made > c.start),
                _ => {}
            }
        }
        assert!(
            gained.is_empty(),
            "{fault:?}: the record went in place while {gained:?} had new folders not flushed:\n{trace}"
        );
        t.sgard(["verify"]).ok();
    }
}

/// A repository of six files, checkpointed, then two of them edited.
fn checkpoint_fixture() -> TestEnv {
    let t = TestEnv::init();
    for i in 0..6u64 {
        t.write(
            &format!("conf/d{}/f{i}", i % 2),
            noise_bytes(700 + 300 * i as usize, i),
        );
    }
    t.sgard(["add", "~/conf"]).ok();
    t.sgard(["checkpoint", "-m", "first"]).ok();
    for i in [1u64, 4] {
        t.write(
            &format!("conf/d{}/f{i}", i % 2),
            noise_bytes(2500 + i as usize, 10 + i),
        );
    }
    t
}

/// Injected I/O errors (EIO from the n-th call on, for each durability and
/// rename call, for every n a checkpoint reaches; its snapshot is named with
/// the batch of its new blobs): the checkpoint fails with a clear error or
/// completes, the error says whether its snapshot is in the log, the
/// repository still verifies, no temp file is left, and the next checkpoint
/// records the edits.
#[test]
fn io_errors_inside_checkpoint_lose_nothing_and_the_next_one_records() {
    if !strace_works() {
        eprintln!("skipping: strace cannot trace here");
        return;
    }
    const CALLS: &str = "fsync,fdatasync,syncfs,rename,renameat,renameat2";
    let edit = |t: &TestEnv| t.command(["checkpoint", "-m", "under-fault"]);
    let (r, counts) = with_faults(&edit(&checkpoint_fixture()), CALLS, None);
    r.ok();
    assert!(counts.get("syncfs").is_some_and(|n| *n > 0), "{counts:?}");
    for (call, total) in counts {
        for n in 1..=total {
            let what = format!("EIO from {call} call {n} of {total} on");
            let t = checkpoint_fixture();
            let (r, _) = with_faults(&edit(&t), CALLS, Some((&call, "EIO", n)));
            assert_fails_cleanly(&r, &what);
            // A failure past the commit point says the snapshot is in:
            // the error says so exactly when the log holds it.
            let recorded = t.sgard(["log"]).ok().stdout.contains("under-fault");
            assert!(r.code != 0 || recorded, "{what}: {r:#?}");
            if r.code != 0 {
                assert_eq!(
                    r.stderr.contains("is recorded in the log"),
                    recorded,
                    "{what}: {r:#?}"
                );
            }
            t.sgard(["verify"]).ok();
            let left = debris(&t.home);
            assert!(left.is_empty(), "{what}: left {left:?}");
            t.sgard(["checkpoint", "-m", "again"]).ok();
            let st = t.sgard(["status"]);
            st.ok();
            assert!(
                st.stdout.lines().all(|l| l.starts_with("ok ")),
                "{what}: {st:#?}"
            );
            t.sgard(["verify"]).ok();
        }
    }
}

/// After a failed or interrupted command: every file holds either nothing,
/// its old content or its stored content (never a mix), and no temp file
/// is left in the home or the repository.
fn assert_whole_and_clean(t: &TestEnv, files: &[(String, Vec<u8>)], what: &str) {
    for (rel, body) in files {
        if let Ok(got) = fs::read(t.path(rel)) {
            assert!(
                got == *body || got == b"local edit\n",
                "{what}: {rel} holds {} bytes of neither version",
                got.len()
            );
        }
    }
    let left = debris(&t.home);
    assert!(left.is_empty(), "{what}: left {left:?}");
}

/// Injected I/O errors (EIO from the n-th fsync on, then from the n-th
/// rename on, for every n a restore reaches): the restore fails with a clear
/// error, writes no half file and leaves no temp file; the next restore
/// finishes the job.
#[test]
fn io_errors_inside_restore_lose_nothing_and_leave_nothing() {
    if !strace_works() {
        eprintln!("skipping: strace cannot trace here");
        return;
    }
    const CALLS: &str = "fsync,fdatasync,syncfs,rename,renameat,renameat2,linkat,symlinkat";
    let (t, _) = restore_fixture();
    let (r, counts) = with_faults(&t.command(["restore", "-f"]), CALLS, None);
    r.ok();
    assert!(counts.get("fsync").is_some_and(|n| *n > 0), "{counts:?}");
    for (call, total) in counts {
        for n in 1..=total {
            let what = format!("EIO from {call} call {n} of {total} on");
            let (t, files) = restore_fixture();
            let (r, _) = with_faults(
                &t.command(["restore", "-f"]),
                CALLS,
                Some((&call, "EIO", n)),
            );
            assert_fails_cleanly(&r, &what);
            assert_whole_and_clean(&t, &files, &what);
            t.sgard(["restore", "-f"]).ok();
            for (rel, body) in &files {
                assert_eq!(&t.read(rel), body, "{what}: {rel} after the next restore");
            }
            assert_eq!(
                fs::read_link(t.path("conf/link")).unwrap(),
                Path::new("d0/f0"),
                "{what}"
            );
            let st = t.sgard(["status"]);
            st.ok();
            assert!(
                st.stdout.lines().all(|l| l.starts_with("ok ")),
                "{what}: {st:#?}"
            );
        }
    }
}

/// A fresh repository and 1,300 untracked files under `~/many` (two
/// windows of renames, 1,024 and 276, both on worker threads), for a test
/// that fails renames from each thread's n-th on under strace; `None`
/// (the test is skipped) without strace, or on one core, where the
/// renames run on the main thread, whose later renames would fail too.
fn many_files_for_rename_faults() -> Option<(TestEnv, Vec<(String, String)>)> {
    if !strace_works() {
        eprintln!("skipping: strace cannot trace here");
        return None;
    }
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        eprintln!("skipping: one core");
        return None;
    }
    let t = TestEnv::init();
    let files: Vec<(String, String)> = (0..1300)
        .map(|i| {
            (
                format!("many/d{:02}/f{i:04}", i % 20),
                format!("file {i}\n"),
            )
        })
        .collect();
    for (rel, body) in &files {
        t.write(rel, body);
    }
    Some((t, files))
}

/// An add of many new files names their blobs on all cores. A rename that
/// fails there fails the add: nothing is recorded (the manifest is as it
/// was), no temp file is left in the repository, and the next add stores
/// and records every file.
#[test]
fn a_blob_rename_failing_among_many_fails_the_add_and_records_nothing() {
    let Some((t, files)) = many_files_for_rename_faults() else {
        return;
    };
    let manifest = t.manifest();
    // Each thread's blob renames fail from its 20th on (strace counts per
    // thread).
    let (r, _) = with_faults(
        &t.command(["add", "~/many"]),
        "rename,renameat,renameat2",
        Some(("renameat2", "EIO", 20)),
    );
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stderr.contains("renaming temp file to"), "{r:#?}");
    assert_eq!(t.manifest(), manifest, "the failed add recorded something");
    let left = debris(&t.repo());
    assert!(left.is_empty(), "left {left:?}");
    t.sgard(["add", "~/many"]).ok();
    let list = t.sgard(["list"]);
    for (rel, _) in &files {
        assert!(
            list.stdout.contains(&format!("~/{rel}")),
            "{rel} not tracked"
        );
    }
    t.sgard(["verify"]).ok();
    fs::remove_dir_all(t.path("many")).unwrap();
    t.sgard(["restore", "-f"]).ok();
    for (rel, body) in &files {
        assert_eq!(t.read(rel), body.as_bytes(), "{rel} after the restore");
    }
}

/// A restore of many files puts them in place on all cores. A rename that
/// fails there fails its own file only: each file is reported as what came
/// of it (the report and the record of what was restored go by the same
/// position), the files put in place are whole, the others leave no temp
/// file behind, and the next restore writes them.
#[test]
fn a_rename_failing_among_many_fails_only_its_own_files() {
    let Some((t, files)) = many_files_for_rename_faults() else {
        return;
    };
    t.sgard(["add", "~/many"]).ok();
    t.sgard(["checkpoint"]).ok();
    fs::remove_dir_all(t.path("many")).unwrap();
    // strace counts calls per thread: each thread's renames fail from its
    // 20th on. However many worker threads a window has (two to eight),
    // some files are put in place (at most 2 × 8 × 19) and the rest are
    // not.
    let (r, _) = with_faults(
        &t.command(["restore", "-f"]),
        "rename,renameat,renameat2",
        Some(("renameat", "EIO", 20)),
    );
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stderr.contains("renaming into place"), "{r:#?}");
    // Each file is reported as what came of it.
    let home_rel = |p: &str| t.path(p.strip_prefix("~/").unwrap());
    let created: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("created"))
        .map(str::trim)
        .collect();
    let failed: Vec<&str> = r
        .stderr
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("~/many/"))
        .filter_map(|l| l.split_once(": renaming into place"))
        .map(|(rel, _)| rel)
        .collect();
    assert_eq!(created.len() + failed.len(), files.len(), "{r:#?}");
    for p in &created {
        assert!(home_rel(p).exists(), "{p} reported created, not there");
    }
    for rel in &failed {
        assert!(
            !t.path(&format!("many/{rel}")).exists(),
            "{rel} reported failed, there"
        );
    }
    let placed: Vec<&(String, String)> = files
        .iter()
        .filter(|(rel, _)| t.path(rel).exists())
        .collect();
    assert!(
        !placed.is_empty() && placed.len() < files.len(),
        "{} of {} placed",
        placed.len(),
        files.len()
    );
    for (rel, body) in &placed {
        assert_eq!(t.read(rel), body.as_bytes(), "{rel}");
    }
    let left = debris(&t.home);
    assert!(left.is_empty(), "left {left:?}");
    let st = t.sgard(["status"]);
    for (rel, _) in &files {
        let path = format!("~/{rel}");
        let ok = st
            .stdout
            .lines()
            .any(|l| l.split_whitespace().eq(["ok", path.as_str()]));
        assert_eq!(ok, t.path(rel).exists(), "{rel}: {}", st.stdout);
    }
    t.sgard(["restore", "-f"]).ok();
    for (rel, body) in &files {
        assert_eq!(t.read(rel), body.as_bytes(), "{rel} after the next restore");
    }
    let st = t.sgard(["status"]);
    st.ok();
    assert!(st.stdout.lines().all(|l| l.starts_with("ok ")), "{st:#?}");
}
