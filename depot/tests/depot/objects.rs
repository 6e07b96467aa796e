//! Content-addressed objects: round trips, idempotence, refusal of content
//! that does not match its name, streaming, listing, deletion.

use bytes::Bytes;
use futures_util::StreamExt;
use sgard_depot::{Depot, Error, Garden, Kind};

use crate::fixture::{fixtures, hash, noise};

async fn read_stream(depot: &Depot, garden: &Garden, kind: Kind, h: &sgard_depot::Hash) -> Vec<u8> {
    let mut stream = depot.object_stream(garden, kind, h).await.unwrap();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        out.extend_from_slice(&chunk.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_round_trip() {
    for f in fixtures("round-trip") {
        let depot = f.open();
        let g = Garden::default();
        let content = b"hello, depot\n".to_vec();
        let h = hash(&content);
        depot
            .put_object(&g, Kind::Blob, &h, Bytes::from(content.clone()))
            .await
            .unwrap();
        assert_eq!(
            depot.get_object(&g, Kind::Blob, &h).await.unwrap(),
            content,
            "{}",
            f.name
        );
        assert_eq!(
            depot.object_size(&g, Kind::Blob, &h).await.unwrap(),
            Some(content.len() as u64),
            "{}",
            f.name
        );
        assert_eq!(
            read_stream(&depot, &g, Kind::Blob, &h).await,
            content,
            "{}",
            f.name
        );
        let stream = depot.object_stream(&g, Kind::Blob, &h).await.unwrap();
        assert_eq!(stream.size(), content.len() as u64);

        // Each kind is its own key space.
        for other in [Kind::ChunkList, Kind::Chunk] {
            assert_eq!(
                depot.object_size(&g, other, &h).await.unwrap(),
                None,
                "{}",
                f.name
            );
            assert!(matches!(
                depot.get_object(&g, other, &h).await,
                Err(Error::NotFound { .. })
            ));
        }

        // The empty object is an object too.
        let empty = hash(b"");
        depot
            .put_object(&g, Kind::Chunk, &empty, Bytes::new())
            .await
            .unwrap();
        assert_eq!(
            depot.get_object(&g, Kind::Chunk, &empty).await.unwrap(),
            Bytes::new()
        );
        assert_eq!(
            depot.object_size(&g, Kind::Chunk, &empty).await.unwrap(),
            Some(0)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn putting_an_object_again_is_a_no_op() {
    for f in fixtures("idempotent") {
        let depot = f.open();
        let g = Garden::default();
        let content = Bytes::from_static(b"same bytes");
        let h = hash(&content);
        for _ in 0..3 {
            depot
                .put_object(&g, Kind::Blob, &h, content.clone())
                .await
                .unwrap();
        }
        // A streaming write of a stored object succeeds too, and checks.
        let mut reader: &[u8] = &content;
        depot
            .put_object_from(&g, Kind::Blob, &h, &mut reader)
            .await
            .unwrap();
        let mut wrong: &[u8] = b"other bytes";
        assert!(
            matches!(
                depot.put_object_from(&g, Kind::Blob, &h, &mut wrong).await,
                Err(Error::HashMismatch { .. })
            ),
            "{}",
            f.name
        );
        let listed = depot.list_objects(&g, Kind::Blob).await.unwrap();
        assert_eq!(listed, vec![(h, content.len() as u64)], "{}", f.name);
        assert_eq!(depot.get_object(&g, Kind::Blob, &h).await.unwrap(), content);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_with_the_wrong_hash_is_refused_and_nothing_is_visible() {
    for f in fixtures("wrong-hash") {
        let depot = f.open();
        let g = Garden::default();
        let claimed = hash(b"what the name says");
        let err = depot
            .put_object(
                &g,
                Kind::Blob,
                &claimed,
                Bytes::from_static(b"something else"),
            )
            .await
            .unwrap_err();
        match &err {
            Error::HashMismatch { key, actual } => {
                assert_eq!(*actual, hash(b"something else"));
                assert!(key.contains(&claimed.to_hex()), "{key}");
            }
            other => panic!("{}: {other}", f.name),
        }

        // Streaming, both below and above the multipart threshold.
        for len in [1000, (8 << 20) + 1000] {
            let content = noise(len, 7);
            let mut reader: &[u8] = &content;
            let err = depot
                .put_object_from(&g, Kind::Chunk, &claimed, &mut reader)
                .await
                .unwrap_err();
            assert!(
                matches!(err, Error::HashMismatch { .. }),
                "{}: {err}",
                f.name
            );
        }

        for kind in Kind::ALL {
            assert_eq!(
                depot.object_size(&g, kind, &claimed).await.unwrap(),
                None,
                "{}",
                f.name
            );
            assert!(
                depot.list_objects(&g, kind).await.unwrap().is_empty(),
                "{}",
                f.name
            );
            assert!(matches!(
                depot.get_object(&g, kind, &claimed).await,
                Err(Error::NotFound { .. })
            ));
        }
        if let Some(dir) = &f.dir {
            // No temp or staging file left behind either.
            let files: Vec<_> = walk(dir.path())
                .into_iter()
                .filter(|p| p.is_file())
                .collect();
            assert!(files.is_empty(), "{files:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_put_of_a_big_object() {
    for f in fixtures("big") {
        let depot = f.open();
        let g = Garden::default();
        // Three parts of a multipart upload, the last one short.
        let content = noise((20 << 20) + 12345, 42);
        let h = hash(&content);
        let mut reader: &[u8] = &content;
        depot
            .put_object_from(&g, Kind::Chunk, &h, &mut reader)
            .await
            .unwrap();
        assert_eq!(
            depot.object_size(&g, Kind::Chunk, &h).await.unwrap(),
            Some(content.len() as u64),
            "{}",
            f.name
        );
        assert!(
            depot.get_object(&g, Kind::Chunk, &h).await.unwrap() == content,
            "{}",
            f.name
        );
        assert!(
            read_stream(&depot, &g, Kind::Chunk, &h).await == content,
            "{}",
            f.name
        );

        // The writer by hand, in uneven pieces.
        let small = noise(300_000, 3);
        let hs = hash(&small);
        let mut writer = depot.object_writer(&g, Kind::Blob, &hs).await.unwrap();
        for piece in small.chunks(65_537) {
            writer.write(piece).await.unwrap();
        }
        writer.finish().await.unwrap();
        assert!(depot.get_object(&g, Kind::Blob, &hs).await.unwrap() == small);

        // An aborted writer stores nothing.
        let other = noise(10 << 20, 5);
        let ho = hash(&other);
        let mut writer = depot.object_writer(&g, Kind::Blob, &ho).await.unwrap();
        writer.write(&other).await.unwrap();
        writer.abort().await.unwrap();
        assert_eq!(
            depot.object_size(&g, Kind::Blob, &ho).await.unwrap(),
            None,
            "{}",
            f.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_and_deletion() {
    for f in fixtures("list") {
        let depot = f.open();
        let g = Garden::default();
        assert!(
            depot.list_objects(&g, Kind::Blob).await.unwrap().is_empty(),
            "{}",
            f.name
        );

        let blobs: Vec<Vec<u8>> = (0..5).map(|i| noise(100 + i, i as u64 + 1)).collect();
        for b in &blobs {
            depot
                .put_object(&g, Kind::Blob, &hash(b), Bytes::from(b.clone()))
                .await
                .unwrap();
        }
        let chunk = b"a chunk".to_vec();
        depot
            .put_object(&g, Kind::Chunk, &hash(&chunk), Bytes::from(chunk.clone()))
            .await
            .unwrap();

        let mut expected: Vec<_> = blobs.iter().map(|b| (hash(b), b.len() as u64)).collect();
        expected.sort();
        assert_eq!(
            depot.list_objects(&g, Kind::Blob).await.unwrap(),
            expected,
            "{}",
            f.name
        );
        assert_eq!(
            depot.list_objects(&g, Kind::Chunk).await.unwrap(),
            vec![(hash(&chunk), chunk.len() as u64)]
        );
        assert!(
            depot
                .list_objects(&g, Kind::ChunkList)
                .await
                .unwrap()
                .is_empty()
        );

        let gone = hash(&blobs[2]);
        depot.delete_object(&g, Kind::Blob, &gone).await.unwrap();
        assert_eq!(
            depot.object_size(&g, Kind::Blob, &gone).await.unwrap(),
            None,
            "{}",
            f.name
        );
        assert!(matches!(
            depot.get_object(&g, Kind::Blob, &gone).await,
            Err(Error::NotFound { .. })
        ));
        expected.retain(|(h, _)| *h != gone);
        assert_eq!(
            depot.list_objects(&g, Kind::Blob).await.unwrap(),
            expected,
            "{}",
            f.name
        );
        // Deleting what is not there succeeds.
        depot.delete_object(&g, Kind::Blob, &gone).await.unwrap();
        depot
            .delete_object(&g, Kind::ChunkList, &gone)
            .await
            .unwrap();
        // The chunk of the same garden is untouched.
        assert!(
            depot
                .object_size(&g, Kind::Chunk, &hash(&chunk))
                .await
                .unwrap()
                .is_some()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_object_is_reported_not_returned() {
    // Only a folder depot can be damaged from outside here.
    let fixture = fixtures("damaged")
        .into_iter()
        .find(|f| f.name == "dir")
        .unwrap();
    let depot = fixture.open();
    let g = Garden::default();
    let content = noise(5000, 9);
    let h = hash(&content);
    depot
        .put_object(&g, Kind::Blob, &h, Bytes::from(content))
        .await
        .unwrap();
    let hex = h.to_hex();
    let file = fixture
        .dir
        .as_ref()
        .unwrap()
        .path()
        .join("depot/gardens/default/objects")
        .join(&hex[0..2])
        .join(&hex[2..4])
        .join(&hex);
    std::fs::write(&file, b"bit rot").unwrap();
    match depot.get_object(&g, Kind::Blob, &h).await {
        Err(Error::Corrupt { key, actual }) => {
            assert_eq!(actual, hash(b"bit rot"));
            assert!(key.ends_with(&hex), "{key}");
        }
        other => panic!("{other:?}"),
    }
    let mut stream = depot.object_stream(&g, Kind::Blob, &h).await.unwrap();
    let mut last = None;
    while let Some(item) = stream.next().await {
        last = Some(item);
    }
    assert!(matches!(last, Some(Err(Error::Corrupt { .. }))), "{last:?}");
}

/// Every path under `root`.
pub fn walk(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path.clone());
            }
            out.push(path);
        }
    }
    out
}
