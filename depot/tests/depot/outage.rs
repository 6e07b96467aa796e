//! Outages: a bucket that does not exist (deleted, or the store reset,
//! under a running server) is named on every path, never taken for an
//! empty store; a store that cannot be reached says why; the probe asks
//! once, without retrying.

use bytes::Bytes;
use sgard_depot::moto::MotoServer;
use sgard_depot::{Cond, Depot, DocName, Error, Garden, Kind, Scope, Written};

use crate::fixture::{fixtures, hash, s3_at, s3_location};

const GONE: &str = "sgard-gone";

fn name(s: &str) -> DocName {
    DocName::new(s).unwrap()
}

#[track_caller]
fn no_bucket<T: std::fmt::Debug>(what: &str, got: Result<T, Error>) {
    match got {
        Err(e @ Error::NoBucket { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains(&format!("bucket {GONE} does not exist")),
                "{what}: {text}"
            );
        }
        other => panic!("{what}: {other:?}, not a missing bucket"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_is_named_on_every_path_and_never_empty() {
    let Some((location, aws)) = s3_at(&format!("s3://{GONE}/team")) else {
        return;
    };
    let depot = Depot::open(&location, &aws).unwrap();
    let g = Garden::default();
    let head = name("head");
    let scope = Scope::Garden(&g);
    // A version to replace, from a bucket that exists.
    let (real, real_aws) = s3_location("outage-version").unwrap();
    let Written::Done(version) = Depot::open(&real, &real_aws)
        .unwrap()
        .write_doc(scope, &head, b"x", Cond::Absent)
        .await
        .unwrap()
    else {
        panic!("a fresh document conflicted");
    };

    no_bucket("read_doc", depot.read_doc(scope, &head).await);
    no_bucket(
        "write_doc (create)",
        depot.write_doc(scope, &head, b"y", Cond::Absent).await,
    );
    // Not a conflict: a push would read again, find "nothing", and start
    // a fresh garden.
    no_bucket(
        "write_doc (replace)",
        depot
            .write_doc(scope, &head, b"y", Cond::Version(version))
            .await,
    );
    no_bucket("write_once", depot.write_once(scope, &head, b"y").await);
    no_bucket("remove_doc", depot.remove_doc(scope, &head).await);
    no_bucket("list_docs", depot.list_docs(scope).await);
    no_bucket("list_gardens", depot.list_gardens().await);
    let content = Bytes::from_static(b"content");
    let h = hash(&content);
    no_bucket(
        "put_object",
        depot.put_object(&g, Kind::Blob, &h, content.clone()).await,
    );
    no_bucket("get_object", depot.get_object(&g, Kind::Blob, &h).await);
    no_bucket(
        "get_object_within",
        depot.get_object_within(&g, Kind::Blob, &h, 10).await,
    );
    no_bucket("get_list", depot.get_list(&g, &h).await);
    no_bucket(
        "object_stream",
        depot.object_stream(&g, Kind::Blob, &h).await,
    );
    no_bucket(
        "delete_object",
        depot.delete_object(&g, Kind::Blob, &h).await,
    );
    no_bucket("list_objects", depot.list_objects(&g, Kind::Blob).await);
    no_bucket(
        "list_objects_aged",
        depot.list_objects_aged(&g, Kind::Blob).await,
    );
    let mut reader: &[u8] = &content;
    no_bucket(
        "put_object_from",
        depot.put_object_from(&g, Kind::Blob, &h, &mut reader).await,
    );
    no_bucket("probe", depot.probe().await);
    // At start the words are the server's: the bucket, not a reset.
    let e = depot.check().await.unwrap_err().to_string();
    assert!(
        e.contains(&format!("the bucket {GONE} does not exist")),
        "{e}"
    );
}

/// An empty prefix of a bucket that exists is an empty depot, as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_prefix_is_an_empty_depot() {
    for f in fixtures("outage-empty") {
        let depot = f.open();
        let g = Garden::default();
        assert_eq!(
            depot
                .read_doc(Scope::Garden(&g), &name("head"))
                .await
                .unwrap(),
            None,
            "{}",
            f.name
        );
        assert_eq!(depot.list_gardens().await.unwrap(), vec![], "{}", f.name);
        depot.probe().await.unwrap();
        depot.check().await.unwrap();
    }
}

/// A store that is not there: the probe answers at once (no retries) with
/// the cause; a reset store names its bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_says_why_the_store_fails() {
    let Some(exe) = MotoServer::executable().unwrap() else {
        eprintln!("note: moto_server not found: skipping");
        return;
    };
    let server = MotoServer::start_with(&exe).unwrap();
    server.create_bucket("probed").unwrap();
    let location = sgard_depot::Location::parse("s3://probed/p").unwrap();
    let depot = Depot::open(&location, &server.aws_env()).unwrap();
    depot.probe().await.unwrap();

    server.reset().unwrap();
    match depot.probe().await {
        Err(Error::NoBucket { bucket, .. }) => assert_eq!(bucket, "probed"),
        other => panic!("{other:?}"),
    }
    let e = depot
        .read_doc(Scope::Server, &name("token-key"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("bucket probed does not exist"), "{e}");
    server.create_bucket("probed").unwrap();
    depot.probe().await.unwrap();

    drop(server);
    // The probe asks once: retrying a refused connection would take it
    // past its limit, to `NoAnswer`.
    let e = depot.probe().await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::Store { .. }), "{e:?}");
    assert!(text.starts_with("listing s3://probed/p"), "{text}");
    assert!(
        text.to_lowercase().contains("connection refused"),
        "no cause in {text:?}"
    );
}
