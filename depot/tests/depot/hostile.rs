//! Hostile names never reach a key, and nothing lands outside the depot.

use bytes::Bytes;
use sgard_depot::{AwsEnv, Depot, DocName, Error, Garden, Hash, Kind, Location, Scope};

use crate::fixture::{fixtures, hash, s3_location};
use crate::objects::walk;

const HOSTILE: &[&str] = &[
    "",
    ".",
    "..",
    "../x",
    "../../etc/passwd",
    "a/b",
    "/abs",
    "a\\b",
    "a\0b",
    "a b",
    "a\nb",
    "%2e%2e",
    "gardens/other",
    "ü",
];

#[test]
fn hostile_garden_document_and_hash_names_are_errors() {
    for bad in HOSTILE {
        assert!(
            matches!(Garden::new(bad), Err(Error::BadGarden { .. })),
            "{bad:?}"
        );
        assert!(
            matches!(DocName::new(bad), Err(Error::BadName { .. })),
            "{bad:?}"
        );
        assert!(Hash::parse(bad).is_err(), "{bad:?}");
    }
    for bad in ["Default", "-x", ".hidden", &"g".repeat(65)] {
        assert!(
            matches!(Garden::new(bad), Err(Error::BadGarden { .. })),
            "{bad:?}"
        );
    }
    let upper = "A".repeat(64);
    let short = "a".repeat(63);
    let long = "a".repeat(65);
    for bad in [
        upper.as_str(),
        short.as_str(),
        long.as_str(),
        "../../../../../../../../x",
    ] {
        assert!(Hash::parse(bad).is_err(), "{bad:?}");
    }
    // The error names what was refused.
    let err = Garden::new("../x").unwrap_err().to_string();
    assert!(err.contains("\"../x\""), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_written_outside_the_folder() {
    let fixture = fixtures("outside")
        .into_iter()
        .find(|f| f.name == "dir")
        .unwrap();
    let outer = fixture.dir.as_ref().unwrap().path().to_path_buf();
    let root = outer.join("depot");
    let depot = fixture.open();
    let gardens = [
        Garden::default(),
        Garden::new("a.b").unwrap(),
        Garden::new("z-9_").unwrap(),
    ];
    for g in &gardens {
        for kind in Kind::ALL {
            let content = Bytes::from(format!("{g} {kind}"));
            depot
                .put_object(g, kind, &hash(&content), content)
                .await
                .unwrap();
        }
        // Windows refuses the names its files would fold into others
        // (`HEAD` is `head`, `x.` is `x`: see `DocName`).
        let names: &[&str] = if cfg!(windows) {
            &["head", "a..b"]
        } else {
            &["head", "a..b", "x.", "HEAD"]
        };
        for n in names {
            let n = DocName::new(n).unwrap();
            assert!(depot.write_once(Scope::Garden(g), &n, b"x").await.unwrap());
        }
    }
    assert!(
        depot
            .write_once(Scope::Server, &DocName::new("nonce").unwrap(), b"n")
            .await
            .unwrap()
    );
    for path in walk(&outer) {
        assert!(
            path.starts_with(&root),
            "{} is outside {}",
            path.display(),
            root.display()
        );
    }
    // And every file is where the layout says.
    for path in walk(&root).into_iter().filter(|p| p.is_file()) {
        // Joined with `/` whatever the platform's separator.
        let rel = path
            .strip_prefix(&root)
            .unwrap()
            .iter()
            .map(|c| c.to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let ok = rel.starts_with("server/docs/")
            || rel.starts_with("server/doc-locks/")
            || gardens
                .iter()
                .any(|g| rel.starts_with(&format!("gardens/{g}/")));
        assert!(ok, "{rel}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_without_the_header_is_an_error() {
    let fixture = fixtures("bad-doc")
        .into_iter()
        .find(|f| f.name == "dir")
        .unwrap();
    let depot = fixture.open();
    let docs = fixture
        .dir
        .as_ref()
        .unwrap()
        .path()
        .join("depot/server/docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("planted"), b"no header here").unwrap();
    let planted = DocName::new("planted").unwrap();
    match depot.read_doc(Scope::Server, &planted).await {
        Err(Error::BadDoc { key, .. }) => assert!(
            std::path::Path::new(&key).ends_with("server/docs/planted"),
            "{key}"
        ),
        other => panic!("{other:?}"),
    }
    // A stray file that is no document name is not listed.
    std::fs::write(docs.join(".junk"), b"x").unwrap();
    assert_eq!(depot.list_docs(Scope::Server).await.unwrap(), vec![planted]);
}

/// Whoever holds the store's keys can put anything where the server reads
/// a document or a chunk list whole: one larger than any the depot writes
/// is refused before it is read, so it cannot fill the server's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_document_or_chunk_list_is_refused_unread() {
    let fixture = fixtures("huge")
        .into_iter()
        .find(|f| f.name == "dir")
        .unwrap();
    let depot = fixture.open();
    let root = fixture.dir.as_ref().unwrap().path().join("depot");
    // Sparse files: big to the store, nothing on the disk.
    let plant = |path: std::path::PathBuf, start: &[u8], len: u64| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, start).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len)
            .unwrap();
    };
    let g = Garden::default();
    plant(
        root.join("gardens/default/docs/head"),
        b"sgard-depot-doc 1 0000000000000001 1\n",
        (1 << 20) + 1,
    );
    let head = DocName::new("head").unwrap();
    match depot.read_doc(Scope::Garden(&g), &head).await {
        Err(e) => assert!(e.to_string().contains("not read"), "{e}"),
        Ok(_) => panic!("a document of over 1 MiB was read whole"),
    }
    let h = hash(b"content");
    let hex = h.to_hex();
    plant(
        root.join(format!(
            "gardens/default/lists/{}/{}/{hex}",
            &hex[..2],
            &hex[2..4]
        )),
        b"sgard-chunks 1\n",
        (64 << 20) + 1,
    );
    match depot.get_list(&g, &h).await {
        Err(e) => assert!(e.to_string().contains("not read"), "{e}"),
        Ok(_) => panic!("a chunk list of over 64 MiB was read whole"),
    }
}

#[test]
fn an_s3_location_without_settings_names_the_missing_variable() {
    let location = Location::parse("s3://some-bucket/prefix").unwrap();
    let err = Depot::open(&location, &AwsEnv::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("AWS_ACCESS_KEY_ID") && err.contains("s3://some-bucket/prefix"),
        "{err}"
    );
    let err = Location::parse("s3:///prefix").unwrap_err().to_string();
    assert!(err.contains("no bucket"), "{err}");

    // With every setting, opening makes no request and does not fail (the
    // TLS client is built: rustls has its crypto provider).
    let aws = AwsEnv {
        access_key_id: Some("id".into()),
        secret_access_key: Some("secret".into()),
        region: Some("eu-west-1".into()),
        endpoint: Some("https://127.0.0.1:1".into()),
        ..AwsEnv::default()
    };
    let depot = Depot::open(&location, &aws).unwrap();
    assert_eq!(depot.location(), &location);
    let plain = AwsEnv {
        endpoint: Some("http://127.0.0.1:1".into()),
        ..aws
    };
    let err = Depot::open(&location, &plain).unwrap_err().to_string();
    assert!(err.contains("AWS_ALLOW_HTTP=true"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_depot_keeps_to_its_prefix() {
    let Some((inner, aws)) = s3_location("prefix-test/inner") else {
        return;
    };
    let depot = Depot::open(&inner, &aws).unwrap();
    let g = Garden::new("kept").unwrap();
    let content = Bytes::from_static(b"inside");
    depot
        .put_object(&g, Kind::Blob, &hash(&content), content.clone())
        .await
        .unwrap();
    assert!(
        depot
            .write_once(Scope::Garden(&g), &DocName::new("head").unwrap(), b"h")
            .await
            .unwrap()
    );
    assert!(
        depot
            .write_once(Scope::Server, &DocName::new("key").unwrap(), b"k")
            .await
            .unwrap()
    );
    assert_eq!(depot.list_gardens().await.unwrap(), vec![g.clone()]);

    // Neither the parent prefix nor a sibling sees any of it as its own.
    for other in [
        "prefix-test",
        "prefix-test/other",
        "prefix-test/inner/gardens/kept",
    ] {
        let (location, aws) = s3_location(other).unwrap();
        let other_depot = Depot::open(&location, &aws).unwrap();
        assert!(
            other_depot.list_gardens().await.unwrap().is_empty(),
            "{other}"
        );
        assert!(
            other_depot
                .list_objects(&g, Kind::Blob)
                .await
                .unwrap()
                .is_empty(),
            "{other}"
        );
        assert!(
            other_depot
                .list_docs(Scope::Server)
                .await
                .unwrap()
                .is_empty(),
            "{other}"
        );
        assert_eq!(
            other_depot
                .object_size(&g, Kind::Blob, &hash(&content))
                .await
                .unwrap(),
            None,
            "{other}"
        );
    }
}
