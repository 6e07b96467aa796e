//! The two backends, driven through the `Backend` trait with no gRPC in
//! between, fed the same pushes and prunes: a folder of sgard repositories
//! (`Local`) and an object store (`Object`, here over a folder depot) must
//! decide, keep and delete alike, because both ask the same rules
//! (`sgard_garden::rules`).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use sgard_depot::{AwsEnv, Depot, Location};
use sgard_garden::{Base, Env, Garden};
use sgard_manifest::{Manifest, Timestamp};
use sgard_proto::blobs::{Kind, Piece};
use sgard_server::local::Local;
use sgard_server::object::Object;
use sgard_server::{Backend, Decision, Pull, Push};
use sgard_store::Hash;

fn env(home: &Path) -> Env {
    Env {
        home: home.to_path_buf(),
        cwd: home.to_path_buf(),
        now: Timestamp::parse("2026-03-23T13:00:00Z").unwrap(),
        hostname: "server".into(),
        state_dir: None,
        cache_dir: None,
        no_cache: true,
        crash_at: None,
        interrupt_at: None,
        wait_at: None,
        scan_window: None,
        chunk_stall: None,
        render_once_max: None,
        folding: None,
        no_symlinks: false,
        sqlite_timeout: None,
        config_dir: None,
        username: "sgard".into(),
        no_watch: false,
        watch_stall: None,
    }
}

/// Both backends over fresh storage in `dir`, pruning with no grace.
fn backends(dir: &Path) -> Vec<(&'static str, Arc<dyn Backend>)> {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let e = env(&home);
    let env_fn: Arc<dyn Fn() -> Result<Env, String> + Send + Sync> =
        Arc::new(move || Ok(e.clone()));
    let repo = dir.join("repo");
    Garden::init(&repo, env(&home)).unwrap();
    let local = Local::new(repo, env_fn.clone(), None, 1 << 30, Duration::ZERO);
    let depot = Depot::open(&Location::Dir(dir.join("depot")), &AwsEnv::default()).unwrap();
    let object = Object::new(depot, env_fn, 1 << 30, Duration::ZERO);
    vec![("folder", Arc::new(local)), ("object", Arc::new(object))]
}

/// A manifest with one file `~/f` holding `h`, updated at minute `min`.
fn manifest(files: &[(&str, Hash)], min: u32) -> Manifest {
    let mut y = format!(
        "version: 1\ncreated: '2026-03-23T12:00:00Z'\nupdated: '2026-03-23T12:{min:02}:00Z'\nfiles:\n"
    );
    for (path, h) in files {
        y.push_str(&format!(
            "  - path: ~/{path}\n    hash: {}\n    type: file\n    mode: '0644'\n    updated: '2026-03-23T12:{min:02}:00Z'\n",
            h.to_hex()
        ));
    }
    Manifest::from_yaml(&y).unwrap()
}

fn push(m: &Manifest, base: Base, negotiate: bool) -> Push {
    Push {
        manifest: m.clone(),
        history: Vec::new(),
        base,
        negotiate,
        extra: Vec::new(),
        signature: None,
        purges: Vec::new(),
    }
}

async fn send(b: &dyn Backend, contents: &[&[u8]]) -> u64 {
    let pieces: Vec<_> = contents
        .iter()
        .map(|c| {
            Ok(Piece {
                start: Some((Hash::of(c), Kind::Blob)),
                data: c.to_vec(),
            })
        })
        .collect();
    b.push_blobs(
        "default",
        "SHA256:test",
        Box::pin(futures_util::stream::iter(pieces)),
    )
    .await
    .unwrap()
}

/// Whether the backend serves `h` whole and intact.
async fn holds(b: &dyn Backend, h: Hash) -> bool {
    let pull = Pull {
        hashes: vec![h],
        lists: false,
        chunks: false,
    };
    let Ok(mut s) = b.pull_blobs("default", pull).await else {
        return false;
    };
    let mut data = Vec::new();
    while let Some(p) = s.next().await {
        match p {
            Ok(p) => data.extend(p.data),
            Err(_) => return false,
        }
    }
    Hash::of(&data) == h
}

/// One step of the script, and what each backend answered.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// The decision, what is missing, and the head it names (`empty`: the
    /// garden's first head, which each store makes itself when it makes
    /// the garden).
    Pushed(Decision, Vec<Hash>, String),
    Stored(u64),
    /// A prune ran. (How many objects it deleted is not compared: an
    /// object store also deletes the texts of heads gone by, which a folder
    /// keeps as files of its own.)
    Pruned,
    Holds(Vec<bool>),
    Head(Hash, usize, usize),
    Failed(sgard_server::error::Kind),
}

async fn script(b: &dyn Backend) -> Vec<Answer> {
    let (one, two, orphan) = (&b"one\n"[..], &b"two\n"[..], &b"nobody's\n"[..]);
    let (x, y, z) = (Hash::of(one), Hash::of(two), Hash::of(orphan));
    let m1 = manifest(&[("f", x)], 1);
    let m2 = manifest(&[("f", y), ("g", x)], 2);
    let m3 = manifest(&[("f", y)], 3);
    let mut out = Vec::new();
    let empty = b.pull_manifest("default").await.unwrap().id;
    let answer = async |p: Push| match b.push_manifest("default", "SHA256:test", p).await {
        Ok(o) => Answer::Pushed(
            o.decision,
            {
                let mut m = o.missing;
                m.sort();
                m
            },
            match o.head {
                Some(h) if h == empty => "empty".into(),
                Some(h) => h.to_hex(),
                None => "-".into(),
            },
        ),
        Err(e) => Answer::Failed(e.kind()),
    };
    let h1 = sgard_garden::head_id_of(&m1);
    let h2 = sgard_garden::head_id_of(&m2);
    // A first push: what is missing, the blobs, the manifest.
    out.push(answer(push(&m1, Base::Never, true)).await);
    out.push(answer(push(&m1, Base::Never, false)).await);
    out.push(Answer::Stored(send(b, &[one]).await));
    out.push(answer(push(&m1, Base::Never, false)).await);
    // Again: up to date. From nothing onto a garden with a head: refused.
    out.push(answer(push(&m1, Base::Id(h1), false)).await);
    out.push(answer(push(&m2, Base::Never, false)).await);
    // A fast-forward, and one from a head the server never had.
    out.push(Answer::Stored(send(b, &[two, orphan]).await));
    out.push(answer(push(&m2, Base::Id(Hash::of(b"elsewhere")), false)).await);
    out.push(answer(push(&m2, Base::Id(h1), false)).await);
    // A Go client (no base): the newer wins, an older one is refused.
    out.push(answer(push(&m1, Base::Legacy, false)).await);
    out.push(answer(push(&m3, Base::Id(h2), true)).await);
    // The head as a pull takes it.
    out.push(match b.pull_manifest("default").await {
        Ok(h) => Answer::Head(h.id, h.manifest.files.len(), h.history.len()),
        Err(e) => Answer::Failed(e.kind()),
    });
    // A prune keeps what the head and its history name (the snapshots of
    // both heads too) and deletes the orphan.
    let prune = async || match b.prune("default").await {
        Ok(_) => Answer::Pruned,
        Err(e) => Answer::Failed(e.kind()),
    };
    out.push(prune().await);
    let all = [x, y, z, h1, h2];
    let mut held = Vec::new();
    for h in all {
        held.push(holds(b, h).await);
    }
    out.push(Answer::Holds(held));
    // Replaced by m3, x is still named by the snapshot of m2: it stays.
    out.push(answer(push(&m3, Base::Id(h2), false)).await);
    out.push(prune().await);
    let mut held = Vec::new();
    for h in all {
        held.push(holds(b, h).await);
    }
    out.push(Answer::Holds(held));
    // A head with no files but a history: nothing may be pushed onto it
    // "from nothing" (the one fact each backend finds for itself).
    let h3 = sgard_garden::head_id_of(&m3);
    let empty_head = manifest(&[], 4);
    out.push(answer(push(&empty_head, Base::Id(h3), false)).await);
    out.push(answer(push(&m1, Base::Never, true)).await);
    // A Go client (no base): a newer manifest is taken once its blobs are
    // in (judged again then), the same `updated` is up to date.
    let go = manifest(&[("f", y)], 5);
    out.push(answer(push(&go, Base::Legacy, false)).await);
    out.push(Answer::Stored(send(b, &[]).await));
    out.push(match b.pull_manifest("default").await {
        Ok(h) => Answer::Head(h.id, h.manifest.files.len(), h.history.len()),
        Err(e) => Answer::Failed(e.kind()),
    });
    out.push(answer(push(&manifest(&[("g", y)], 5), Base::Legacy, false)).await);
    out
}

#[test]
fn both_backends_decide_keep_and_prune_alike() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut answers = Vec::new();
    for (name, b) in backends(dir.path()) {
        answers.push((name, rt.block_on(script(b.as_ref()))));
    }
    let (folder, object) = (&answers[0].1, &answers[1].1);
    for (i, (f, o)) in folder.iter().zip(object).enumerate() {
        assert_eq!(
            f, o,
            "step {i}: the folder backend and the object backend differ"
        );
    }
    assert_eq!(folder.len(), object.len());
    // And the answers are the rule's, not merely the same.
    let x = Hash::of(b"one\n");
    assert!(matches!(&folder[0], Answer::Pushed(Decision::Accepted, m, _) if *m == vec![x]));
    assert!(matches!(
        folder[5],
        Answer::Pushed(Decision::Rejected, _, _)
    ));
    assert!(matches!(
        folder[7],
        Answer::Pushed(Decision::Rejected, _, _)
    ));
    assert!(matches!(
        folder[8],
        Answer::Pushed(Decision::Accepted, _, _)
    ));
    assert!(matches!(
        folder[9],
        Answer::Pushed(Decision::Rejected, _, _)
    ));
    assert_eq!(
        folder[13],
        Answer::Holds(vec![true, true, false, true, true])
    );
    assert_eq!(
        folder[16],
        Answer::Holds(vec![true, true, false, true, true])
    );
    assert!(matches!(
        folder[17],
        Answer::Pushed(Decision::Accepted, _, _)
    ));
    assert!(matches!(
        folder[18],
        Answer::Pushed(Decision::Rejected, _, _)
    ));
    assert!(matches!(&folder[19], Answer::Pushed(Decision::Accepted, _, h) if h == "-"));
    let go = manifest(&[("f", Hash::of(b"two\n"))], 5);
    assert!(matches!(folder[21], Answer::Head(id, 1, _) if id == sgard_garden::head_id_of(&go)));
    assert!(matches!(
        folder[22],
        Answer::Pushed(Decision::UpToDate, _, _)
    ));
}
