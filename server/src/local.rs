//! The folder backend: a garden is an sgard repository (the served
//! folder for the default garden, `gardens/<name>/` in it for the others),
//! and every RPC runs the same `Garden` methods as the CLI on a blocking
//! thread, under the repository lock.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sgard_garden::{Access, Base, Env, Garden, LockMode, PushDecision};
use sgard_manifest::Manifest;
use sgard_manifest::history::Record;
use sgard_proto::CHUNK_SIZE;
use sgard_store::Hash;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

use crate::auth::Authority;
use crate::error::{chain, store_error};
use crate::fleet;
use crate::{Backend, DEFAULT_GARDEN, Decision, Error, HeadView, Pieces, Pull, Push, PushOutcome};
use sgard_proto::blobs::{BlobSink, Kind, Piece};

/// Where the other gardens' repositories are, in the served folder.
pub const GARDENS_DIR: &str = "gardens";

/// A Go client's manifest and history, and when they came.
type Pending = (Manifest, Vec<Record>, std::time::Instant);

/// Gardens as sgard repositories in a folder.
pub struct Local {
    repo: PathBuf,
    env: Arc<dyn Fn() -> Result<Env, String> + Send + Sync>,
    /// Replay protection of logins (this process only).
    auth: Option<Arc<Authority>>,
    max_blob: u64,
    prune_grace: Duration,
    /// The manifests of Go clients' pushes, until their PushBlobs ends.
    pending: Arc<Mutex<HashMap<String, Pending>>>,
    /// One garden's repository is made at a time.
    init_lock: Mutex<()>,
}

impl Local {
    /// The backend serving the repository at `repo`.
    pub fn new(
        repo: PathBuf,
        env: Arc<dyn Fn() -> Result<Env, String> + Send + Sync>,
        auth: Option<Arc<Authority>>,
        max_blob: u64,
        prune_grace: Duration,
    ) -> Self {
        Local {
            repo,
            env,
            auth,
            max_blob,
            prune_grace,
            pending: Arc::default(),
            init_lock: Mutex::new(()),
        }
    }

    /// The repository of `garden`: the served folder for the default one,
    /// `gardens/<name>` in it for the others (made at first use, with an
    /// empty head older than any push).
    fn garden_repo(&self, garden: &str) -> Result<PathBuf, Error> {
        if garden == DEFAULT_GARDEN {
            return Ok(self.repo.clone());
        }
        let repo = self.repo.join(GARDENS_DIR).join(garden);
        if repo.join(sgard_manifest::MANIFEST_FILE).exists() {
            return Ok(repo);
        }
        let _one = self
            .init_lock
            .lock()
            .map_err(|_| Error::internal("poisoned"))?;
        if !repo.join(sgard_manifest::MANIFEST_FILE).exists() {
            let env = (self.env)().map_err(Error::internal)?;
            sgard_store::durable::create_dir_all_durable(&self.repo.join(GARDENS_DIR))
                .map_err(store_error)?;
            Garden::init(&repo, env)
                .and_then(|mut g| g.backdate_empty_head())
                .map_err(garden_error)?;
            tracing::info!(garden, "made the garden's repository");
        }
        Ok(repo)
    }

    async fn blocking<T, F>(&self, repo: &Path, mode: LockMode, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(&mut Garden) -> Result<T, Error> + Send + 'static,
    {
        let repo = repo.to_path_buf();
        let env = (self.env)().map_err(Error::internal)?;
        tokio::task::spawn_blocking(move || {
            let mut g =
                Garden::open(&repo, env, Access::from(mode).into()).map_err(garden_error)?;
            let out = f(&mut g)?;
            // This machine's index of the garden is a cache: one that cannot
            // be saved costs the next call a full read, not its answer.
            if let Err(e) = g.finish() {
                tracing::warn!("saving the index of {}: {}", repo.display(), chain(&e));
            }
            Ok(out)
        })
        .await
        .map_err(|e| Error::internal(format!("worker failed: {e}")))?
    }
}

impl Local {
    /// What the Go clients' pushes waiting for their blobs name: no prune
    /// deletes it.
    fn protected(&self) -> Result<std::collections::HashSet<Hash>, Error> {
        let grace = self.prune_grace;
        let mut pending = self
            .pending
            .lock()
            .map_err(|_| Error::internal("poisoned"))?;
        pending.retain(|_, p| !sgard_garden::rules::go_push_expired(p.2.elapsed(), grace));
        Ok(pending
            .values()
            .flat_map(|(m, h, _)| {
                m.referenced_blobs()
                    .chain(h.iter().map(|r| r.id))
                    .collect::<Vec<_>>()
            })
            .collect())
    }
}

/// The backend error for a Garden error.
pub fn garden_error(e: sgard_garden::Error) -> Error {
    let msg = chain(&e);
    match e {
        sgard_garden::Error::Conflict(_) => Error::refused(msg),
        e if e.is_integrity() => Error::damaged(msg),
        sgard_garden::Error::NotARepo(_) => Error::refused(msg),
        _ => Error::internal(msg),
    }
}

#[tonic::async_trait]
impl Backend for Local {
    async fn garden_id(&self, garden: &str) -> Result<String, Error> {
        // The repository's own id (`repo-id`), made now if it has none.
        // None that stays (a read-only folder, a damaged file): none is
        // named, and clients key their state by the address, rather than
        // by a stand-in that would change with the folder's path.
        let repo = self.garden_repo(garden)?;
        tokio::task::spawn_blocking(move || {
            let _ = sgard_garden::repository_id(&repo);
            sgard_garden::recorded_repo_id(&repo).unwrap_or_default()
        })
        .await
        .map_err(|e| Error::internal(format!("worker failed: {e}")))
    }

    async fn pull_manifest(&self, garden: &str) -> Result<HeadView, Error> {
        let repo = self.garden_repo(garden)?;
        self.blocking(&repo, LockMode::Shared, |g| {
            Ok(HeadView {
                purges: g.purges().map_err(garden_error)?.purges,
                signed: g.head_signature(),
                manifest: g.manifest().clone(),
                id: g.head_id(),
                history: g.shared_history().records.clone(),
                sizes: g.blob_sizes().into_iter().collect(),
            })
        })
        .await
    }

    async fn push_manifest(
        &self,
        garden: &str,
        who: &str,
        push: Push,
    ) -> Result<PushOutcome, Error> {
        let repo = self.garden_repo(garden)?;
        let who_owned = who.to_owned();
        let pending = self.pending.clone();
        let protect = if push.purges.is_empty() {
            std::collections::HashSet::new()
        } else {
            self.protected()?
        };
        let grace = self.prune_grace;
        self.blocking(&repo, LockMode::Exclusive, move |g| {
            let Push {
                manifest,
                history,
                base,
                negotiate,
                extra,
                signature,
                purges,
            } = push;
            let server_updated = Some(g.manifest().updated);
            let resp = |decision: Decision, missing: Vec<Hash>, head: Option<Hash>| PushOutcome {
                decision,
                missing,
                server_updated,
                head,
            };
            let decision = g
                .push_decision(&manifest, base, &history, &extra, &purges)
                .map_err(garden_error)?;
            match decision {
                PushDecision::UpToDate => Ok(resp(Decision::UpToDate, vec![], Some(g.head_id()))),
                PushDecision::Rejected => Ok(resp(Decision::Rejected, vec![], Some(g.head_id()))),
                PushDecision::Accepted(missing) => {
                    if negotiate {
                        return Ok(resp(Decision::Accepted, missing, Some(g.head_id())));
                    }
                    if base == Base::Legacy {
                        // The Go client streams blobs next; keep its manifest
                        // for it alone until its PushBlobs ends.
                        pending
                            .lock()
                            .map_err(|_| Error::internal("poisoned"))?
                            .insert(who_owned, (manifest, history, std::time::Instant::now()));
                        return Ok(resp(Decision::Accepted, missing, None));
                    }
                    if !missing.is_empty() {
                        return Err(Error::refused(format!(
                            "{} blob(s) are missing on the server; push them first",
                            missing.len()
                        )));
                    }
                    let sig = signature
                        .as_ref()
                        .map(|(st, sig)| (st.as_str(), sig.as_str()));
                    let (head, purged) = g
                        .install_push_purging(
                            manifest,
                            history,
                            &who_owned,
                            sig,
                            &purges,
                            &protect,
                            Some(grace),
                        )
                        .map_err(garden_error)?;
                    for r in purged {
                        tracing::info!(
                            who = %who_owned,
                            versions = r.versions,
                            snapshots = r.snapshots,
                            kept = ?r.kept,
                            "applied a purge"
                        );
                    }
                    Ok(resp(Decision::Accepted, vec![], Some(head)))
                }
            }
        })
        .await
    }

    async fn push_blobs(&self, garden: &str, who: &str, mut pieces: Pieces) -> Result<u64, Error> {
        let repo = self.garden_repo(garden)?;
        let store = sgard_store::Store::open(&repo);
        let mut sink = BlobSink::new(store, Some(self.max_blob));
        // The object being received, to name it when it is too large.
        let mut current = None;
        let too_large =
            |e: sgard_store::Error, current: Option<Hash>, limit: u64| match (e, current) {
                (sgard_store::Error::TooLarge { .. }, Some(h)) => {
                    crate::error::blob_too_large(&h, limit)
                }
                (e, _) => store_error(e),
            };
        while let Some(piece) = pieces.next().await {
            let Piece { start, data } = piece?;
            if let Some((h, kind)) = start {
                // The object before ends first, so that what stops it (a
                // chunk list over the limit) is named by its own hash.
                sink.finish()
                    .await
                    .map_err(|e| too_large(e, current, self.max_blob))?;
                current = Some(h);
                sink.start_kind(h, kind, Some(self.max_blob))
                    .await
                    .map_err(|e| too_large(e, current, self.max_blob))?;
            }
            crate::metrics::bytes_received(data.len());
            if !data.is_empty()
                && !sink
                    .feed(data)
                    .await
                    .map_err(|e| too_large(e, current, self.max_blob))?
            {
                return Err(Error::invalid("data before any blob hash"));
            }
        }
        sink.finish()
            .await
            .map_err(|e| too_large(e, current, self.max_blob))?;
        let received = sink.done;
        let pending = self
            .pending
            .lock()
            .map_err(|_| Error::internal("poisoned"))?
            .remove(who);
        // One left waiting past the grace period is its client's, gone long
        // ago (see the object backend): never installed by a later push.
        let grace = self.prune_grace;
        if let Some((manifest, history, _)) =
            pending.filter(|p| !sgard_garden::rules::go_push_expired(p.2.elapsed(), grace))
        {
            let who = who.to_owned();
            self.blocking(&repo, LockMode::Exclusive, move |g| {
                // Decided again: another push may have landed since.
                match g
                    .push_decision(&manifest, Base::Legacy, &history, &[], &[])
                    .map_err(garden_error)?
                {
                    PushDecision::UpToDate => Ok(()),
                    PushDecision::Rejected => Err(Error::retry(
                        "the server changed during the push; pull, then push again",
                    )),
                    PushDecision::Accepted(_) => g
                        .install_push(manifest, history, &who, None)
                        .map(|_| ())
                        .map_err(garden_error),
                }
            })
            .await?;
        }
        Ok(received)
    }

    async fn pull_blobs(&self, garden: &str, pull: Pull) -> Result<Pieces, Error> {
        let repo = self.garden_repo(garden)?;
        let Pull {
            hashes,
            lists,
            chunks,
        } = pull;
        let store = sgard_store::Store::open(&repo);
        let (tx, rx) = mpsc::channel::<Result<Piece, Error>>(8);
        tokio::task::spawn_blocking(move || {
            for h in hashes {
                let sent = match store.chunked() {
                    Some(cs) if chunks => send_object(cs.objects(), &h, Kind::Chunk, &tx),
                    Some(cs)
                        if lists && !store.contains_blob(&h).unwrap_or(true) && cs.contains(&h) =>
                    {
                        send_list(cs, &h, &tx)
                    }
                    _ => send_object(&store, &h, Kind::Blob, &tx),
                };
                if let Err(st) = sent {
                    let _ = tx.blocking_send(Err(st));
                    return;
                }
            }
        });
        Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
    }

    async fn missing_chunks(&self, garden: &str, hashes: Vec<Hash>) -> Result<Vec<Hash>, Error> {
        let repo = self.garden_repo(garden)?;
        let store = sgard_store::Store::open(&repo);
        tokio::task::spawn_blocking(move || {
            let Some(cs) = store.chunked() else {
                return Ok(hashes);
            };
            let mut missing = Vec::new();
            for h in hashes {
                if !cs.objects().contains(&h).map_err(store_error)? {
                    missing.push(h);
                }
            }
            Ok(missing)
        })
        .await
        .map_err(|e| Error::internal(e.to_string()))?
    }

    async fn prune(&self, garden: &str) -> Result<u64, Error> {
        let repo = self.garden_repo(garden)?;
        let grace = self.prune_grace;
        let protect = self.protected()?;
        self.blocking(&repo, LockMode::Exclusive, move |g| {
            let r = g.prune_with(&protect, Some(grace)).map_err(garden_error)?;
            Ok(r.blobs)
        })
        .await
    }

    async fn report(
        &self,
        garden: &str,
        who: &str,
        report: super::Report,
        now: i64,
    ) -> Result<(), Error> {
        let repo = self.garden_repo(garden)?;
        let who = who.to_owned();
        tokio::task::spawn_blocking(move || {
            fleet::record(
                &repo,
                &who,
                &report.host,
                &report.version,
                report.head,
                report.op,
                now,
            )
            .map_err(|e| Error::invalid(format!("{e:#}")))
        })
        .await
        .map_err(|e| Error::internal(e.to_string()))?
    }

    async fn fleet(&self, garden: &str) -> Result<super::FleetView, Error> {
        let repo = self.garden_repo(garden)?;
        let dir = repo.clone();
        self.blocking(&repo, LockMode::Shared, move |g| {
            let known = g
                .shared_history()
                .records
                .iter()
                .flat_map(|r| [Some(r.id), r.head_before])
                .flatten()
                .collect();
            let machines = fleet::list(&dir).map_err(|e| Error::internal(format!("{e:#}")))?;
            Ok(super::FleetView {
                head: g.head_id(),
                known,
                machines,
            })
        })
        .await
    }

    async fn first_use_of_nonce(&self, nonce: &[u8], ts: i64) -> Result<bool, Error> {
        Ok(self.auth.as_ref().is_none_or(|a| a.first_use(nonce, ts)))
    }
}

/// Sends the chunk list of chunked content `h` (kind 1).
fn send_list(
    cs: &sgard_store::chunks::ChunkStore,
    h: &Hash,
    tx: &mpsc::Sender<Result<Piece, Error>>,
) -> Result<(), Error> {
    let text = cs
        .list_text(h)
        .map_err(|e| Error::damaged(format!("chunk list {h}: {}", chain(&e))))?;
    for piece in sgard_proto::blobs::list_pieces(h, &text) {
        crate::metrics::bytes_sent(piece.data.len());
        if tx.blocking_send(Ok(piece)).is_err() {
            break;
        }
    }
    Ok(())
}

fn send_object(
    store: &sgard_store::Store,
    h: &Hash,
    kind: Kind,
    tx: &mpsc::Sender<Result<Piece, Error>>,
) -> Result<(), Error> {
    let mut first = true;
    let sent = store.read_chunks(h, CHUNK_SIZE, &mut |data| {
        crate::metrics::bytes_sent(data.len());
        let piece = Piece {
            start: first.then_some((*h, kind)),
            data: data.to_vec(),
        };
        first = false;
        // A client that went away ends the stream; nothing more to do.
        Ok(tx.blocking_send(Ok(piece)).is_ok())
    });
    match sent {
        Ok(_) => Ok(()),
        Err(sgard_store::Error::Missing(_)) => Err(Error::not_found(format!("blob {h} not found"))),
        Err(sgard_store::Error::Corrupt { .. }) => {
            Err(Error::damaged(format!("blob {h} is corrupt on the server")))
        }
        Err(e) => Err(Error::internal(format!("reading blob {h}: {}", chain(&e)))),
    }
}
