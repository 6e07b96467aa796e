//! sgardd's storage: the gardens' content-addressed objects and small
//! documents (heads, history, the server's own keys), kept in a folder, in
//! memory, or in an S3-compatible object store, through the `object_store`
//! crate.
//!
//! # Key layout
//!
//! Every key lives under the location's prefix (`s3://BUCKET/PREFIX`; a
//! folder is its own root):
//!
//! ```text
//! <prefix>/gardens/<garden>/objects/<h0h1>/<h2h3>/<sha256>   blobs
//! <prefix>/gardens/<garden>/lists/<h0h1>/<h2h3>/<sha256>     chunk lists
//! <prefix>/gardens/<garden>/chunks/<h0h1>/<h2h3>/<sha256>    chunks
//! <prefix>/gardens/<garden>/docs/<name>                      the garden's documents
//! <prefix>/server/docs/<name>                                the server's documents
//! ```
//!
//! Keys are built only from checked names ([`Garden`], [`DocName`],
//! [`Hash`](struct@Hash), [`Kind`]), so no input reaches a key outside the prefix, and a
//! garden's operations only ever see keys under its own folder: there is no
//! way to ask about another garden's objects.
//!
//! # Invariants
//!
//! - An object's content always hashes (SHA-256) to its name: writes check it
//!   before anything becomes visible, reads check it again. Writing an object
//!   that is already there is a no-op success.
//! - A document changes only through a conditional write ([`Cond`]): created
//!   only if absent, replaced only if still at the version the writer read.
//!   On S3 that is `If-None-Match: *` / `If-Match: <etag>`, in memory the
//!   store's own check, in a folder a `link(2)` that never replaces (create)
//!   and a per-document lock (replace). There is no read-then-write.
//! - Each stored document carries a small header (a random incarnation and a
//!   generation counter), so every write makes a new [`Version`], even when
//!   the bytes are the same as an earlier one's.
//!
//! # Outages
//!
//! A store that fails says why: an [`Error::Store`]'s words end with its
//! cause, short (see [`cause_of`]). A bucket that does not exist (deleted,
//! or the store reset, under a running server) is [`Error::NoBucket`] on
//! every path that meets it, never a missing key: a read of a document or
//! an object fails rather than finding nothing, and a write never answers
//! a conflict. (An empty prefix of a bucket that exists is an empty
//! depot.) [`Depot::probe`] asks the store once, quickly, for a health
//! check.
//!
//! Operations are async (tokio); a [`Depot`] is cheap to clone and shared by
//! all tasks of a server.

mod docs;
mod error;
mod location;
pub mod moto;
mod names;
mod objects;

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

pub use docs::{Cond, MAX_DOC, Version, Written};
pub use error::{Error, Result, cause_of};
pub use location::{AwsEnv, Location};
pub use names::{DocName, Garden, Kind, Scope};
pub use objects::{MAX_LIST, ObjectStream, ObjectWriter};
pub use sgard_store::Hash;

/// A handle on one depot. Clones share the connection.
#[derive(Clone)]
pub struct Depot {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Depot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Depot({})", self.inner.location)
    }
}

/// How long [`Depot::probe`] waits for the store's answer.
pub const PROBE_LIMIT: Duration = Duration::from_secs(5);

struct Inner {
    store: Arc<dyn ObjectStore>,
    /// The same store, asked once without retrying and within
    /// [`PROBE_LIMIT`] (S3 only): [`Depot::probe`]'s.
    probe: Option<Arc<dyn ObjectStore>>,
    backend: Backend,
    /// Key prefix (segments joined by `/`, maybe empty).
    prefix: String,
    location: Location,
}

enum Backend {
    Memory,
    /// A folder: `root` is its canonical path, the root of every key.
    Dir {
        root: PathBuf,
    },
    S3 {
        bucket: String,
    },
}

impl Depot {
    /// Opens the depot at `location`. `aws` is only read for S3 locations;
    /// a folder is created if missing.
    ///
    /// # Errors
    /// [`Error::Config`] naming a missing or invalid `AWS_*` setting,
    /// [`Error::Io`] when the folder cannot be made.
    pub fn open(location: &Location, aws: &AwsEnv) -> Result<Depot> {
        let (store, probe, backend, prefix): (Arc<dyn ObjectStore>, _, _, _) = match location {
            Location::Memory => return Ok(Self::memory()),
            Location::Dir(dir) => {
                let root = open_dir(dir)?;
                let local = LocalFileSystem::new_with_prefix(&root)
                    .map_err(|e| Error::store("opening folder store", location.to_string(), e))?
                    .with_fsync(true);
                (Arc::new(local), None, Backend::Dir { root }, String::new())
            }
            Location::S3 { bucket, prefix } => {
                let shown = location.to_string();
                let aws = aws.check(&shown)?;
                // reqwest's rustls has no bundled crypto: ring is the
                // process default (unless the process chose one already).
                let _ = rustls::crypto::ring::default_provider().install_default();
                let build = |options: ClientOptions, retry: RetryConfig| {
                    // The client options first: they hold `allow_http`.
                    let mut builder = AmazonS3Builder::new()
                        .with_client_options(options)
                        .with_retry(retry)
                        .with_bucket_name(bucket)
                        .with_region(aws.region.clone())
                        .with_access_key_id(aws.access_key_id.clone())
                        .with_secret_access_key(aws.secret_access_key.clone())
                        .with_allow_http(aws.allow_http)
                        .with_conditional_put(S3ConditionalPut::ETagMatch);
                    if let Some(token) = &aws.session_token {
                        builder = builder.with_token(token.clone());
                    }
                    if let Some(endpoint) = &aws.endpoint {
                        builder = builder.with_endpoint(endpoint.clone());
                    }
                    builder.build().map_err(|e| Error::Config {
                        location: shown.clone(),
                        reason: with_causes(&e),
                    })
                };
                let s3 = build(ClientOptions::new(), RetryConfig::default())?;
                let once = build(
                    ClientOptions::new()
                        .with_timeout(PROBE_LIMIT)
                        .with_connect_timeout(PROBE_LIMIT),
                    RetryConfig {
                        backoff: BackoffConfig::default(),
                        max_retries: 0,
                        retry_timeout: PROBE_LIMIT,
                    },
                )?;
                let once: Arc<dyn ObjectStore> = Arc::new(once);
                (
                    Arc::new(s3),
                    Some(once),
                    Backend::S3 {
                        bucket: bucket.clone(),
                    },
                    prefix.clone(),
                )
            }
        };
        Ok(Depot {
            inner: Arc::new(Inner {
                store,
                probe,
                backend,
                prefix,
                location: location.clone(),
            }),
        })
    }

    /// A fresh, empty depot in memory (for tests).
    pub fn memory() -> Depot {
        Depot {
            inner: Arc::new(Inner {
                store: Arc::new(InMemory::new()),
                probe: None,
                backend: Backend::Memory,
                prefix: String::new(),
                location: Location::Memory,
            }),
        }
    }

    /// Where this depot lives.
    pub fn location(&self) -> &Location {
        &self.inner.location
    }

    /// Checks that the store answers and its bucket exists (a list of the
    /// depot's root), so a server fails at start rather than at its first
    /// request.
    ///
    /// # Errors
    /// [`Error::Config`] naming the missing bucket or the refused
    /// credentials, [`Error::Store`] naming the location and what the store
    /// answered.
    pub async fn check(&self) -> Result<()> {
        let base = self.key(&[]);
        let Err(e) = self.inner.store.list_with_delimiter(Some(&base)).await else {
            return Ok(());
        };
        let reason = match self.fail("listing", self.show(&base), e) {
            Error::NoBucket { bucket, .. } => format!("the bucket {bucket} does not exist"),
            Error::Store { cause, .. }
                if [
                    "InvalidAccessKeyId",
                    "SignatureDoesNotMatch",
                    "AccessDenied",
                ]
                .iter()
                .any(|code| cause.starts_with(code)) =>
            {
                format!(
                    "the store refused the credentials (AWS_ACCESS_KEY_ID, \
                     AWS_SECRET_ACCESS_KEY): {cause}"
                )
            }
            other => return Err(other),
        };
        Err(Error::Config {
            location: self.inner.location.to_string(),
            reason,
        })
    }

    /// Asks the store once, without retrying, whether it answers and its
    /// bucket exists (a list of the depot's root, as [`Depot::check`]),
    /// within [`PROBE_LIMIT`]: a health check's question, cheap enough to
    /// ask every few seconds. A folder depot checks that its folder can be
    /// read; a memory depot always answers.
    ///
    /// # Errors
    /// [`Error::NoBucket`], [`Error::Store`] with what the store answered
    /// or why it could not be reached, [`Error::NoAnswer`], or (a folder)
    /// [`Error::Io`].
    pub async fn probe(&self) -> Result<()> {
        let base = self.key(&[]);
        match &self.inner.backend {
            Backend::Memory => Ok(()),
            Backend::Dir { root } => {
                let root = root.clone();
                let shown = root.display().to_string();
                tokio::task::spawn_blocking(move || {
                    std::fs::read_dir(&root)
                        .map(drop)
                        .map_err(|e| Error::io("reading folder", root, e))
                })
                .await
                .map_err(|_| Error::Interrupted { key: shown })?
            }
            Backend::S3 { .. } => {
                let store = self.inner.probe.as_ref().unwrap_or(&self.inner.store);
                let asked = store.list_with_delimiter(Some(&base));
                match tokio::time::timeout(PROBE_LIMIT, asked).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => Err(self.fail("listing", self.show(&base), e)),
                    Err(_) => Err(Error::NoAnswer {
                        key: self.show(&base),
                        secs: PROBE_LIMIT.as_secs(),
                    }),
                }
            }
        }
    }

    /// The gardens that hold at least one key, sorted.
    ///
    /// # Errors
    /// [`Error::Store`] when listing fails.
    pub async fn list_gardens(&self) -> Result<Vec<Garden>> {
        let base = self.key(&["gardens"]);
        let listed = self
            .inner
            .store
            .list_with_delimiter(Some(&base))
            .await
            .map_err(|e| self.fail("listing", self.show(&base), e))?;
        let mut gardens: Vec<Garden> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().and_then(|n| Garden::new(n).ok()))
            .collect();
        gardens.sort();
        gardens.dedup();
        Ok(gardens)
    }

    /// The key made of the prefix and `parts` (each already checked).
    fn key(&self, parts: &[&str]) -> Path {
        let mut text = self.inner.prefix.clone();
        for part in parts {
            if !text.is_empty() {
                text.push('/');
            }
            text.push_str(part);
        }
        Path::from(text)
    }

    /// The parts of a scope's folder.
    fn scope_parts(scope: Scope<'_>) -> Vec<&str> {
        match scope {
            Scope::Garden(g) => vec!["gardens", g.as_str()],
            Scope::Server => vec!["server"],
        }
    }

    /// A key as shown in errors: with its location.
    fn show(&self, key: &Path) -> String {
        match &self.inner.backend {
            Backend::Memory => format!("memory:{key}"),
            Backend::Dir { root } => root.join(key.as_ref()).display().to_string(),
            Backend::S3 { bucket } => format!("s3://{bucket}/{key}"),
        }
    }

    /// The bucket of an S3 depot.
    fn bucket(&self) -> Option<&str> {
        match &self.inner.backend {
            Backend::S3 { bucket } => Some(bucket.as_str()),
            _ => None,
        }
    }

    /// Whether `e` is the store saying that the bucket does not exist: a
    /// "not found" that must not be taken for a missing key.
    pub(crate) fn no_bucket(&self, e: &object_store::Error) -> bool {
        self.bucket().is_some() && error::says_no_bucket(e)
    }

    /// The error of a store call that failed (`op` on the key `shown`).
    pub(crate) fn fail(&self, op: &'static str, shown: String, e: object_store::Error) -> Error {
        fail_in(self.bucket(), op, shown, e)
    }

    /// The file of `key` in a folder depot.
    fn file_of(root: &FsPath, key: &Path) -> PathBuf {
        root.join(key.as_ref())
    }
}

/// The error of a store call that failed (`op` on the key `shown`) in a
/// depot on `bucket`: [`Error::NoBucket`] when the store says the bucket
/// is missing, else [`Error::Store`].
pub(crate) fn fail_in(
    bucket: Option<&str>,
    op: &'static str,
    shown: String,
    e: object_store::Error,
) -> Error {
    match bucket {
        Some(bucket) if error::says_no_bucket(&e) => Error::NoBucket {
            bucket: bucket.to_owned(),
            source: Box::new(e),
        },
        _ => Error::store(op, shown, e),
    }
}

/// Creates (if needed) and canonicalises a folder depot's root.
fn open_dir(dir: &FsPath) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("creating folder", dir, e))?;
    std::fs::canonicalize(dir).map_err(|e| Error::io("resolving folder", dir, e))
}

/// An error with each of its causes, for an error whose message leaves
/// them out (the S3 client's "builder error" says nothing of the missing
/// CA certificates under it).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}
