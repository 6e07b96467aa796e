//! Documents: compare-and-swap on every backend, across handles that stand
//! for separate server replicas.

use std::sync::Arc;

use sgard_depot::{Cond, DocName, Garden, Scope, Written};
use tokio::sync::Barrier;

use crate::fixture::fixtures;

fn name(s: &str) -> DocName {
    DocName::new(s).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_if_absent_twice_the_second_conflicts() {
    for f in fixtures("create-twice") {
        let depot = f.open();
        let g = Garden::default();
        let head = name("head");
        assert_eq!(
            depot.read_doc(Scope::Garden(&g), &head).await.unwrap(),
            None,
            "{}",
            f.name
        );
        let Written::Done(v1) = depot
            .write_doc(Scope::Garden(&g), &head, b"first", Cond::Absent)
            .await
            .unwrap()
        else {
            panic!("{}: the first create conflicted", f.name);
        };
        assert_eq!(v1.generation(), 1);
        assert_eq!(
            depot
                .write_doc(Scope::Garden(&g), &head, b"second", Cond::Absent)
                .await
                .unwrap(),
            Written::Conflict,
            "{}",
            f.name
        );
        let (content, version) = depot
            .read_doc(Scope::Garden(&g), &head)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&content[..], b"first", "{}", f.name);
        assert_eq!(version, v1, "{}", f.name);
        // Another handle (another replica) sees the same.
        let (content, version) = f
            .open()
            .read_doc(Scope::Garden(&g), &head)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((&content[..], version), (&b"first"[..], v1), "{}", f.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_from_a_stale_version_conflicts() {
    for f in fixtures("stale") {
        let depot = f.open();
        let s = Scope::Server;
        let doc = name("signing-key");
        let Written::Done(v1) = depot.write_doc(s, &doc, b"A", Cond::Absent).await.unwrap() else {
            panic!("{}", f.name)
        };
        let Written::Done(v2) = depot
            .write_doc(s, &doc, b"B", Cond::Version(v1.clone()))
            .await
            .unwrap()
        else {
            panic!("{}: updating from the current version conflicted", f.name)
        };
        assert_eq!(v2.generation(), 2);
        assert_eq!(
            depot
                .write_doc(s, &doc, b"C", Cond::Version(v1.clone()))
                .await
                .unwrap(),
            Written::Conflict,
            "{}",
            f.name
        );
        assert_eq!(&depot.read_doc(s, &doc).await.unwrap().unwrap().0[..], b"B");

        // Writing the first bytes again still makes a new version: no ABA.
        let Written::Done(v3) = depot
            .write_doc(s, &doc, b"A", Cond::Version(v2))
            .await
            .unwrap()
        else {
            panic!("{}", f.name)
        };
        assert_ne!(v3, v1);
        assert_eq!(
            depot
                .write_doc(s, &doc, b"D", Cond::Version(v1.clone()))
                .await
                .unwrap(),
            Written::Conflict,
            "{}: a version from before A-B-A still matched",
            f.name
        );

        // Nor across a delete and a re-create with the same bytes.
        depot.remove_doc(s, &doc).await.unwrap();
        assert_eq!(depot.read_doc(s, &doc).await.unwrap(), None);
        assert_eq!(
            depot
                .write_doc(s, &doc, b"E", Cond::Version(v3.clone()))
                .await
                .unwrap(),
            Written::Conflict,
            "{}: updating a deleted document succeeded",
            f.name
        );
        let Written::Done(again) = depot.write_doc(s, &doc, b"A", Cond::Absent).await.unwrap()
        else {
            panic!("{}", f.name)
        };
        assert_eq!(again.generation(), 1);
        for stale in [v1, v3] {
            assert_eq!(
                depot
                    .write_doc(s, &doc, b"F", Cond::Version(stale))
                    .await
                    .unwrap(),
                Written::Conflict,
                "{}: a version from before the re-create matched",
                f.name
            );
        }
        assert_eq!(&depot.read_doc(s, &doc).await.unwrap().unwrap().0[..], b"A");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_writers_from_one_version_exactly_one_wins() {
    const WRITERS: usize = 8;
    const ROUNDS: usize = 20;
    for f in fixtures("race") {
        let g = Garden::new("racers").unwrap();
        let head = name("head");
        // One handle per writer: separate replicas of the server.
        let handles: Vec<_> = (0..WRITERS).map(|_| f.open()).collect();
        let Written::Done(mut current) = handles[0]
            .write_doc(Scope::Garden(&g), &head, b"round 0", Cond::Absent)
            .await
            .unwrap()
        else {
            panic!("{}", f.name)
        };
        for round in 1..=ROUNDS {
            let barrier = Arc::new(Barrier::new(WRITERS));
            let mut tasks = Vec::new();
            for (i, depot) in handles.iter().enumerate() {
                let (depot, g, head, from, barrier) = (
                    depot.clone(),
                    g.clone(),
                    head.clone(),
                    current.clone(),
                    barrier.clone(),
                );
                tasks.push(tokio::spawn(async move {
                    let content = format!("round {round} writer {i}");
                    barrier.wait().await;
                    let written = depot
                        .write_doc(
                            Scope::Garden(&g),
                            &head,
                            content.as_bytes(),
                            Cond::Version(from),
                        )
                        .await
                        .unwrap();
                    (content, written)
                }));
            }
            let mut winners = Vec::new();
            for task in tasks {
                if let (content, Written::Done(v)) = task.await.unwrap() {
                    winners.push((content, v));
                }
            }
            assert_eq!(
                winners.len(),
                1,
                "{}: round {round}: winners {winners:?}",
                f.name
            );
            let (content, version) = winners.pop().unwrap();
            let (stored, stored_version) = handles[0]
                .read_doc(Scope::Garden(&g), &head)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(stored, content.as_bytes(), "{}: round {round}", f.name);
            assert_eq!(stored_version, version, "{}: round {round}", f.name);
            assert_eq!(version.generation(), round as u64 + 1);
            current = version;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn write_once_from_many_tasks_exactly_one_is_first() {
    const WRITERS: usize = 16;
    for f in fixtures("once") {
        for attempt in 0..3 {
            let nonce = name(&format!("nonce.{attempt}"));
            let barrier = Arc::new(Barrier::new(WRITERS));
            let mut tasks = Vec::new();
            for i in 0..WRITERS {
                let (depot, nonce, barrier) = (f.open(), nonce.clone(), barrier.clone());
                tasks.push(tokio::spawn(async move {
                    barrier.wait().await;
                    let first = depot
                        .write_once(Scope::Server, &nonce, format!("writer {i}").as_bytes())
                        .await
                        .unwrap();
                    (i, first)
                }));
            }
            let mut firsts = Vec::new();
            for task in tasks {
                let (i, first) = task.await.unwrap();
                if first {
                    firsts.push(i);
                }
            }
            assert_eq!(firsts.len(), 1, "{}: firsts {firsts:?}", f.name);
            let (content, _) = f
                .open()
                .read_doc(Scope::Server, &nonce)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                content,
                format!("writer {}", firsts[0]).as_bytes(),
                "{}",
                f.name
            );
            assert!(
                !f.open()
                    .write_once(Scope::Server, &nonce, b"late")
                    .await
                    .unwrap()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_and_removing_documents() {
    for f in fixtures("doc-list") {
        let depot = f.open();
        let g = Garden::new("work").unwrap();
        assert!(
            depot.list_docs(Scope::Server).await.unwrap().is_empty(),
            "{}",
            f.name
        );
        for n in ["nonce.b", "nonce.a", "jwt-key"] {
            assert!(
                depot
                    .write_once(Scope::Server, &name(n), n.as_bytes())
                    .await
                    .unwrap()
            );
        }
        assert!(
            depot
                .write_once(Scope::Garden(&g), &name("head"), b"h")
                .await
                .unwrap()
        );
        assert_eq!(
            depot.list_docs(Scope::Server).await.unwrap(),
            vec![name("jwt-key"), name("nonce.a"), name("nonce.b")],
            "{}",
            f.name
        );
        assert_eq!(
            depot.list_docs(Scope::Garden(&g)).await.unwrap(),
            vec![name("head")]
        );
        depot
            .remove_doc(Scope::Server, &name("nonce.a"))
            .await
            .unwrap();
        depot
            .remove_doc(Scope::Server, &name("never-was"))
            .await
            .unwrap();
        assert_eq!(
            depot.list_docs(Scope::Server).await.unwrap(),
            vec![name("jwt-key"), name("nonce.b")],
            "{}",
            f.name
        );
        // The server's area and a garden's are separate.
        assert_eq!(
            depot.read_doc(Scope::Server, &name("head")).await.unwrap(),
            None
        );
        assert_eq!(
            depot
                .read_doc(Scope::Garden(&g), &name("jwt-key"))
                .await
                .unwrap(),
            None
        );
        // Empty content is a document too.
        assert!(
            depot
                .write_once(Scope::Server, &name("empty"), b"")
                .await
                .unwrap()
        );
        let (content, _) = depot
            .read_doc(Scope::Server, &name("empty"))
            .await
            .unwrap()
            .unwrap();
        assert!(content.is_empty());
    }
}
