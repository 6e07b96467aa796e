//! Big files in content-defined chunks (issue 14): growth of a repository
//! under edits, inserts and appends; every version restoring byte for
//! byte; corrupt chunks detected and never restored; prune's mark and
//! sweep; kill -9 in the middle of a big add, then a rerun; the Go-readable
//! setting; `sgard stats`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// Deterministic bytes that do not repeat (xorshift).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

#[track_caller]
fn json_of(r: &Run) -> Value {
    r.ok();
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}); {r:#?}"))
}

/// Bytes of everything the repository stores (`stats --json`).
#[track_caller]
fn stored(t: &TestEnv) -> u64 {
    json_of(&t.sgard(["stats", "--json"]))["stored"]["bytes"]
        .as_u64()
        .unwrap()
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The chunk objects (not temp files, not journals).
pub(crate) fn chunk_files(t: &TestEnv) -> Vec<PathBuf> {
    let root = t.repo().join("chunks");
    files_under(&root)
        .into_iter()
        .filter(|p| {
            let rel = p.strip_prefix(&root).unwrap();
            !rel.starts_with("journal") && !rel.starts_with("tmp")
        })
        .collect()
}

/// Writes `~/rel` with a distinct mtime, so the stat cache sees each edit.
fn write_at(t: &TestEnv, rel: &str, data: &[u8], secs: i64) {
    t.write(rel, data);
    set_mtime(&t.path(rel), secs);
}

/// The id printed by `checkpoint`.
#[track_caller]
fn checkpoint(t: &TestEnv, msg: &str) -> String {
    let r = t.sgard(["checkpoint", "-m", msg]);
    r.ok();
    let id = r
        .stdout
        .split("snapshot ")
        .nth(1)
        .and_then(|s| s.split('.').next())
        .unwrap_or_else(|| panic!("no snapshot id; {r:#?}"));
    id.to_owned()
}

#[test]
fn edits_inserts_and_appends_to_big_files_store_little_and_every_version_restores() {
    let t = TestEnv::init();
    let base = noise(8 << 20, 1);
    write_at(&t, "big.bin", &base, now_secs() - 100);
    let history: Vec<u8> = (0..200_000)
        .flat_map(|i| format!(": {}:0;echo command number {i}\n", 1_700_000_000 + i).into_bytes())
        .collect();
    write_at(&t, ".zsh_history", &history, now_secs() - 100);
    t.sgard(["add", "big.bin", ".zsh_history"]).ok();
    let mut versions = vec![(checkpoint(&t, "first"), base.clone(), history.clone())];
    // The Go layout holds none of it: both are over the 1 MiB threshold.
    assert!(!t.blob_path(&sha(&base)).exists());
    assert!(t.repo().join("chunk-lists").is_dir());
    let s = json_of(&t.sgard(["stats", "--json"]));
    assert_eq!(s["tracked"]["chunked_files"], 2, "{s}");

    let mut big = base.clone();
    let mut hist = history.clone();
    let mut secs = now_secs() - 90;
    // One byte changed, then one inserted: a chunk or two each.
    for (what, change) in [("edit", 0), ("insert", 1)] {
        let before = stored(&t);
        if change == 0 {
            big[3 << 20] ^= 0x55;
        } else {
            big.insert(5 << 20, b'!');
        }
        write_at(&t, "big.bin", &big, secs);
        secs += 1;
        versions.push((checkpoint(&t, what), big.clone(), hist.clone()));
        let grew = stored(&t) - before;
        assert!(
            grew < 1 << 20,
            "a one-byte {what} grew the repository by {grew} bytes"
        );
    }
    // Thirty days of a growing shell history: each append costs its tail.
    let before = stored(&t);
    for day in 0..30 {
        for i in 0..40 {
            hist.extend_from_slice(format!(": 1800000000:0;day {day} command {i}\n").as_bytes());
        }
        write_at(&t, ".zsh_history", &hist, secs);
        secs += 1;
        versions.push((checkpoint(&t, "day"), big.clone(), hist.clone()));
    }
    let grew = stored(&t) - before;
    assert!(
        grew < 30 * (600 << 10),
        "30 appends to a {} byte history grew the repository by {grew} bytes",
        history.len()
    );

    // Every version comes back byte for byte.
    for (id, b, h) in versions.iter().step_by(4).chain(versions.last()) {
        t.sgard(["restore", "--force", "--at", id]).ok();
        assert!(t.read("big.bin") == *b, "big.bin at {id}");
        assert!(t.read(".zsh_history") == *h, ".zsh_history at {id}");
    }
    t.sgard(["verify"]).ok().stdout_has("ok         ~/big.bin");
    let s = json_of(&t.sgard(["stats", "--json", "--snapshots"]));
    assert!(s["dedup_ratio"].as_f64().unwrap() > 10.0, "{s}");
    let snaps = s["snapshots"].as_array().unwrap();
    assert!(
        snaps[0]["added_bytes"].as_u64().unwrap() > 16_000_000,
        "{}",
        snaps[0]
    );
    for later in &snaps[1..versions.len()] {
        assert!(
            later["added_bytes"].as_u64().unwrap() < 600 << 10,
            "{later}"
        );
    }
}

#[test]
fn a_corrupt_chunk_is_detected_and_never_restored() {
    let t = TestEnv::init();
    let data = noise(3 << 20, 2);
    write_at(&t, "big.bin", &data, now_secs() - 10);
    t.sgard(["add", "big.bin"]).ok();
    let chunks = chunk_files(&t);
    assert!(chunks.len() > 10, "{chunks:?}");
    let victim = &chunks[chunks.len() / 2];
    let mut bytes = fs::read(victim).unwrap();
    bytes[100] ^= 1;
    fs::write(victim, &bytes).unwrap();
    t.sgard(["verify"])
        .code(3)
        .stdout_has("corrupt    ~/big.bin");
    // The file on disk was changed; restoring must not replace it with
    // bytes that fail their hash, nor leave a temp file.
    let mine = noise(3 << 20, 3);
    write_at(&t, "big.bin", &mine, now_secs() - 5);
    let r = t.sgard(["restore", "--force", "big.bin"]);
    assert_eq!(r.code, 3, "{r:#?}");
    assert!(r.stderr.contains("corrupt"), "{r:#?}");
    assert!(t.read("big.bin") == mine, "the file on disk is untouched");
    let debris: Vec<_> = fs::read_dir(&t.home)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("sgard") && n != ".sgard")
        .collect();
    assert!(debris.is_empty(), "{debris:?}");
    // A missing chunk, or a list that is not one sgard wrote: the same.
    bytes[100] ^= 1;
    fs::write(victim, &bytes).unwrap();
    t.sgard(["verify"]).ok();
    fs::remove_file(victim).unwrap();
    t.sgard(["verify"])
        .code(3)
        .stdout_has("missing    ~/big.bin");
    fs::write(victim, &bytes).unwrap();
    let list = files_under(&t.repo().join("chunk-lists")).remove(0);
    fs::write(&list, "sgard-chunks 1\nfastcdc-2020 1 2 3\nsize 9\n").unwrap();
    t.sgard(["verify"])
        .code(3)
        .stdout_has("corrupt    ~/big.bin");
    t.sgard(["restore", "--force", "big.bin"]).code(3);
    assert!(t.read("big.bin") == mine);
    // Prune keeps every chunk while a list the head needs is unreadable.
    let before = chunk_files(&t).len();
    t.sgard(["prune"]).ok().stderr_has("no chunk was pruned");
    assert_eq!(chunk_files(&t).len(), before);
    // Adding the content again replaces the damaged list.
    write_at(&t, "big.bin", &data, now_secs() - 3);
    t.sgard(["add", "big.bin"]).ok();
    t.sgard(["verify"]).ok();
}

#[test]
fn prune_frees_the_chunks_of_forgotten_versions_and_keeps_every_chunk_a_snapshot_needs() {
    let t = TestEnv::init();
    let mut data = noise(4 << 20, 4);
    let mut ids = Vec::new();
    let mut versions = Vec::new();
    for i in 0..4 {
        // Each version differs from the last in its first megabyte.
        data[..1 << 20].copy_from_slice(&noise(1 << 20, 100 + i));
        write_at(&t, "big.bin", &data, now_secs() - 100 + i as i64);
        if i == 0 {
            t.sgard(["add", "big.bin"]).ok();
        }
        ids.push(checkpoint(&t, &format!("v{i}")));
        versions.push(data.clone());
    }
    t.sgard(["prune"]).ok();
    let kept = chunk_files(&t).len();
    t.sgard(["forget", &ids[0], &ids[1]]).ok();
    let dry = t.sgard(["prune", "--dry-run"]);
    dry.ok().stdout_has("Would delete");
    assert_eq!(chunk_files(&t).len(), kept, "a dry run deletes nothing");
    let would: u64 = dry
        .stdout
        .split(" bytes) in all.")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{dry:#?}"));
    assert!(would > 2 << 20, "two forgotten megabytes and more: {would}");
    let r = t.sgard(["prune"]);
    r.ok().stdout_has("chunk list");
    assert!(chunk_files(&t).len() < kept);
    assert!(stored(&t) < 6 << 20, "two versions of 4 MiB that share 3");
    for (id, v) in ids.iter().zip(&versions).skip(2) {
        t.sgard(["restore", "--force", "--at", id]).ok();
        assert!(t.read("big.bin") == *v, "{id}");
    }
    t.sgard(["verify"]).ok();
}

/// Starts `sgard add big.bin` stalling after `commits` commits of its
/// chunks, waits until its journal says so, and kills it with SIGKILL.
fn add_killed_after(t: &TestEnv, commits: u32) {
    let mut child = t
        .command(["add", "big.bin"])
        .env("SGARD_TEST_CHUNK_STALL", commits.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let journal = t.repo().join("chunks/journal");
    let want = commits as usize * 200;
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let lines = files_under(&journal)
            .iter()
            .map(|p| fs::read_to_string(p).unwrap_or_default().lines().count())
            .max()
            .unwrap_or(0);
        if lines >= want {
            break;
        }
        assert!(Instant::now() < until, "the add never stalled");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the add ended before stalling"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let it reach the stall, then kill it as the OOM killer would.
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_big_add_killed_at_several_points_is_resumed_and_nothing_half_done_is_named() {
    let t = TestEnv::init();
    let data = noise(56 << 20, 5);
    write_at(&t, "big.bin", &data, now_secs() - 10);
    for commits in [1, 2] {
        add_killed_after(&t, commits);
        // Nothing names what was half stored.
        assert!(!t.manifest().contains("big.bin"));
        assert!(files_under(&t.repo().join("chunk-lists")).is_empty());
        t.sgard(["verify"]).ok();
    }
    let r = t.sgard(["add", "big.bin"]);
    r.ok().stderr_has("~/big.bin: resumed an interrupted store");
    let count = |r: &Run| -> u64 {
        r.stderr
            .split("resumed an interrupted store (")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        count(&r) >= 400,
        "two commits of 16 MiB were reused; {r:#?}"
    );
    assert!(files_under(&t.repo().join("chunks/journal")).is_empty());
    fs::remove_file(t.path("big.bin")).unwrap();
    t.sgard(["restore", "big.bin"]).ok();
    assert!(t.read("big.bin") == data);
    t.sgard(["verify"]).ok();

    // A source that changed since is not resumed from, and says why.
    let t = TestEnv::init();
    write_at(&t, "big.bin", &data, now_secs() - 10);
    add_killed_after(&t, 1);
    set_mtime(&t.path("big.bin"), now_secs() - 5);
    // prune drops the journal of a changed file (and the chunks only it named).
    t.sgard(["prune"]).ok().stdout_has("Dropped 1 journal");
    add_killed_after(&t, 1);
    set_mtime(&t.path("big.bin"), now_secs() - 4);
    t.sgard(["add", "big.bin"])
        .ok()
        .stderr_has("not resuming an interrupted store of it: it was modified since");
    t.sgard(["remove", "big.bin"]).ok();
    t.sgard(["prune"]).ok();
    // Changed content under a forged modification time: the chunks say so.
    add_killed_after(&t, 1);
    let mut changed = data.clone();
    changed[0] ^= 1;
    write_at(&t, "big.bin", &changed, now_secs() - 4);
    t.sgard(["add", "big.bin"])
        .ok()
        .stderr_has("not resuming an interrupted store of it: its chunk 1 differs");
    fs::remove_file(t.path("big.bin")).unwrap();
    t.sgard(["restore", "big.bin"]).ok();
    assert!(t.read("big.bin") == changed);
}

#[test]
fn chunking_off_keeps_the_repository_readable_by_the_go_sgard() {
    let t = TestEnv::init();
    let data = noise(2 << 20, 6);
    write_at(&t, "big.bin", &data, now_secs() - 10);
    t.sgard(["add", "big.bin"]).ok();
    assert!(!t.blob_path(&sha(&data)).exists());
    t.sgard(["chunking", "--off"])
        .ok()
        .stdout_has("Chunking: off")
        .stdout_has("Stored 1 chunked file of the head whole");
    assert_eq!(fs::read(t.blob_path(&sha(&data))).unwrap(), data);
    // While that blob is damaged, its chunks are the only good copy: kept.
    let blob = t.blob_path(&sha(&data));
    let mut rotten = data.clone();
    rotten[7] ^= 1;
    fs::write(&blob, &rotten).unwrap();
    let chunks = chunk_files(&t).len();
    t.sgard(["prune"]).ok();
    assert_eq!(chunk_files(&t).len(), chunks);
    fs::write(&blob, &data).unwrap();
    t.sgard(["prune"]).ok();
    assert!(
        chunk_files(&t).is_empty(),
        "prune frees chunks stored whole too"
    );
    assert!(files_under(&t.repo().join("chunk-lists")).is_empty());
    // New big content is stored whole from now on.
    let more = noise(3 << 20, 7);
    write_at(&t, "big.bin", &more, now_secs() - 5);
    checkpoint(&t, "whole");
    assert_eq!(fs::read(t.blob_path(&sha(&more))).unwrap(), more);
    assert!(chunk_files(&t).is_empty());
    t.sgard(["chunking"]).ok().stdout_has("Chunking: off");
    // And back on, with other sizes.
    t.sgard([
        "chunking",
        "--on",
        "--threshold",
        "512K",
        "--sizes",
        "4K,16K,64K",
    ])
    .ok()
    .stdout_has("Threshold: 512.0 KiB");
    let fs_text = fs::read_to_string(t.repo().join("chunking")).unwrap();
    assert!(
        fs_text.contains("fastcdc-2020 4096 16384 65536"),
        "{fs_text}"
    );
    t.sgard(["chunking", "--sizes", "1,2,3"])
        .code(1)
        .stderr_has("outside");
    t.sgard(["chunking", "--threshold", "lots"])
        .code(1)
        .stderr_has("not a size");
    // A malformed setting is an error naming the file, for writers.
    fs::write(t.repo().join("chunking"), "chunking sideways\n").unwrap();
    write_at(&t, "big.bin", &data, now_secs() - 1);
    t.sgard(["checkpoint"])
        .code(1)
        .stdout_has("failed     ~/big.bin (chunking setting")
        .stdout_has("is malformed: unknown line");
    t.sgard(["status"]).ok();
}

#[test]
fn prune_keeps_a_fresh_journal_drops_an_abandoned_one_and_sweeps_interrupted_writes() {
    let t = TestEnv::init();
    let data = noise(40 << 20, 7);
    write_at(&t, "big.bin", &data, now_secs() - 10);
    add_killed_after(&t, 1);
    let stored = chunk_files(&t).len();
    assert!(stored >= 200, "one commit of 16 MiB is durable");
    // What interrupted chunk-list and journal writes leave behind.
    let lists = t.repo().join("chunk-lists/ab/cd");
    let journals = t.repo().join("chunks/journal");
    fs::create_dir_all(&lists).unwrap();
    fs::write(lists.join(".sgard-tmp-AbCdEf"), b"half a list").unwrap();
    fs::write(journals.join(".sgard-tmp-GhIjKl"), b"half a journal").unwrap();
    fs::write(t.repo().join("chunks/tmp/blob-XyZ"), b"half a chunk").unwrap();
    t.sgard(["prune"]).ok();
    assert!(!lists.join(".sgard-tmp-AbCdEf").exists());
    assert!(!journals.join(".sgard-tmp-GhIjKl").exists());
    assert!(!t.repo().join("chunks/tmp/blob-XyZ").exists());
    assert_eq!(
        chunk_files(&t).len(),
        stored,
        "the journal of an unchanged file keeps its chunks for a rerun"
    );

    // A journal nobody resumed for a month gives its chunks back.
    let month_ago = std::time::SystemTime::now() - Duration::from_secs(31 * 24 * 3600);
    let journal = files_under(&journals);
    assert_eq!(journal.len(), 1);
    fs::File::options()
        .write(true)
        .open(&journal[0])
        .unwrap()
        .set_modified(month_ago)
        .unwrap();
    t.sgard(["prune", "--dry-run"]).ok();
    assert_eq!(chunk_files(&t).len(), stored, "a dry run deletes nothing");
    t.sgard(["prune"]).ok().stdout_has("Dropped 1 journal");
    assert!(chunk_files(&t).is_empty());
    assert!(files_under(&journals).is_empty());
    let r = t.sgard(["add", "big.bin"]);
    assert!(!r.ok().stderr.contains("resumed"), "{r:#?}");
    fs::remove_file(t.path("big.bin")).unwrap();
    t.sgard(["restore", "big.bin"]).ok();
    assert!(t.read("big.bin") == data);
}

/// A file of 256 MiB or more is cut into bigger chunks (256 KiB / 1 MiB /
/// 4 MiB) with the default sizes, so a big image is hundreds of chunk
/// files rather than thousands; sizes set by hand stay as they are; the
/// file restores whole.
#[test]
fn a_very_big_file_is_cut_into_bigger_chunks_and_restores_whole() {
    use std::os::unix::fs::FileExt;
    let t = TestEnv::init();
    // 256 MiB: noise at both ends, a hole between (zeros, which FastCDC
    // cuts at the maximum size).
    let p = t.write("big.img", noise(6 << 20, 7));
    let f = fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(256 << 20).unwrap();
    f.write_all_at(&noise(3 << 20, 8), (256 << 20) - (3 << 20))
        .unwrap();
    drop(f);
    let want = sha(fs::read(&p).unwrap());
    t.sgard(["add", "~/big.img"]).ok();
    let lists = files_under(&t.repo().join("chunk-lists"));
    assert_eq!(lists.len(), 1, "{lists:?}");
    let text = fs::read_to_string(&lists[0]).unwrap();
    assert!(
        text.contains("\nfastcdc-2020 262144 1048576 4194304\n"),
        "{}",
        &text[..200.min(text.len())]
    );
    let n = chunk_files(&t).len();
    // 64 KiB chunks would be ~140 for the 9 MiB of noise alone.
    assert!((3..40).contains(&n), "{n} chunk files");
    t.sgard(["chunking"])
        .ok()
        .stdout_has("From 256.0 MiB: 256.0 KiB min, 1.0 MiB average, 4.0 MiB max");
    fs::remove_file(&p).unwrap();
    t.sgard(["restore", "--force", "~/big.img"]).ok();
    assert_eq!(sha(fs::read(&p).unwrap()), want);

    // Sizes set by hand are used whatever the size.
    t.sgard(["chunking", "--sizes", "32K,128K,512K"]).ok();
    let r = t.sgard(["chunking"]);
    r.ok()
        .stdout_has("Chunk sizes: 32.0 KiB min, 128.0 KiB average, 512.0 KiB max");
    assert!(!r.stdout.contains("From 256"), "{r:#?}");
    let f = fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.write_all_at(b"edited", 1 << 20).unwrap();
    drop(f);
    t.sgard(["checkpoint", "-m", "edited"]).ok();
    let lists = files_under(&t.repo().join("chunk-lists"));
    assert_eq!(lists.len(), 2, "{lists:?}");
    assert!(lists.iter().any(|l| {
        fs::read_to_string(l)
            .unwrap()
            .contains("\nfastcdc-2020 32768 131072 524288\n")
    }));
}
