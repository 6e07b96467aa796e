//! Gardens do not see each other's objects or documents.

use bytes::Bytes;
use sgard_depot::{DocName, Error, Garden, Kind, Scope};

use crate::fixture::{fixtures, hash};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_in_one_garden_is_invisible_from_another() {
    for f in fixtures("isolation") {
        let depot = f.open();
        assert!(depot.list_gardens().await.unwrap().is_empty(), "{}", f.name);
        let a = Garden::new("alice").unwrap();
        let b = Garden::new("bob").unwrap();
        let content = Bytes::from_static(b"alice's secret dotfile");
        let h = hash(&content);
        for kind in Kind::ALL {
            depot
                .put_object(&a, kind, &h, content.clone())
                .await
                .unwrap();
        }
        for kind in Kind::ALL {
            assert_eq!(
                depot.object_size(&b, kind, &h).await.unwrap(),
                None,
                "{} {kind}",
                f.name
            );
            assert!(
                matches!(
                    depot.get_object(&b, kind, &h).await,
                    Err(Error::NotFound { .. })
                ),
                "{} {kind}",
                f.name
            );
            assert!(matches!(
                depot.object_stream(&b, kind, &h).await,
                Err(Error::NotFound { .. })
            ));
            assert!(
                depot.list_objects(&b, kind).await.unwrap().is_empty(),
                "{} {kind}",
                f.name
            );
            // Nor from the default garden.
            assert_eq!(
                depot
                    .object_size(&Garden::default(), kind, &h)
                    .await
                    .unwrap(),
                None
            );
            assert_eq!(depot.list_objects(&a, kind).await.unwrap().len(), 1);
        }
        // Deleting from another garden leaves it alone.
        depot.delete_object(&b, Kind::Blob, &h).await.unwrap();
        assert!(
            depot
                .object_size(&a, Kind::Blob, &h)
                .await
                .unwrap()
                .is_some(),
            "{}",
            f.name
        );

        // Documents too.
        let head = DocName::new("head").unwrap();
        assert!(
            depot
                .write_once(Scope::Garden(&a), &head, b"a's head")
                .await
                .unwrap()
        );
        assert_eq!(
            depot.read_doc(Scope::Garden(&b), &head).await.unwrap(),
            None,
            "{}",
            f.name
        );
        assert!(depot.list_docs(Scope::Garden(&b)).await.unwrap().is_empty());
        assert!(
            depot
                .write_once(Scope::Garden(&b), &head, b"b's head")
                .await
                .unwrap()
        );
        let (ah, _) = depot
            .read_doc(Scope::Garden(&a), &head)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&ah[..], b"a's head", "{}", f.name);

        assert_eq!(
            depot.list_gardens().await.unwrap(),
            vec![a, b],
            "{}",
            f.name
        );
    }
}
