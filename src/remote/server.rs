//! `sgardd`: the GardenSync service.
//!
//! Every RPC runs the same `Garden` methods as the CLI on a blocking thread,
//! under the repository lock. Rules the Go server breaks and this one keeps:
//! pushed blobs are hashed while streamed into a temp file (bounded memory)
//! and dropped with `DATA_LOSS` when they do not match; a manifest is
//! installed only if it validates and every blob it names is stored; push
//! state is per client, never server-wide; pushes are fast-forwards of the
//! head the client last synced with; prune spares young blobs (pushes in
//! progress); nonces are accepted once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sgard_garden::{Base, Env, Garden, LockMode, PushDecision};
use sgard_manifest::Manifest;
use sgard_manifest::history::Record;
use sgard_proto::convert::{self, Invalid};
use sgard_proto::v1::garden_sync_server::GardenSync;
use sgard_proto::v1::push_manifest_response::Decision;
use sgard_proto::v1::{self, BlobChunk};
use sgard_proto::{CHUNK_SIZE, TOKEN_METADATA_KEY};
use sgard_store::Hash;
use tokio::sync::{Semaphore, mpsc};
use tokio_stream::{Stream, StreamExt};
use tonic::{Code, Request, Response, Status, Streaming};

use super::auth::{Authority, TokenCheck};
use super::blobs::{BlobSink, Kind};
use super::fleet;

/// How the server is run.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The largest blob accepted.
    pub max_blob: u64,
    /// Push streams allowed at once.
    pub max_streams: usize,
    /// Unreferenced blobs younger than this survive a prune.
    pub prune_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_blob: 1 << 30,
            max_streams: 16,
            prune_grace: Duration::from_secs(3600),
        }
    }
}

type Pending = (Manifest, Vec<Record>);

/// The garden of keys that name none.
pub const DEFAULT_GARDEN: &str = "default";
/// Where the other gardens' repositories are, in the served folder.
pub const GARDENS_DIR: &str = "gardens";

/// Who called: their key's fingerprint, how the log names them (with their
/// garden), and their garden's repository.
struct Caller {
    who: String,
    label: String,
    repo: PathBuf,
}

/// The service.
pub struct Service {
    repo: PathBuf,
    env: Arc<dyn Fn() -> Result<Env, String> + Send + Sync>,
    auth: Option<Arc<Authority>>,
    limits: Limits,
    pending: Arc<Mutex<HashMap<String, Pending>>>,
    streams: Arc<Semaphore>,
    /// One garden's repository is made at a time.
    init_lock: Mutex<()>,
}

impl Service {
    /// A service over the repository at `repo`.
    pub fn new(
        repo: PathBuf,
        env: Arc<dyn Fn() -> Result<Env, String> + Send + Sync>,
        auth: Option<Arc<Authority>>,
        limits: Limits,
    ) -> Self {
        let streams = Arc::new(Semaphore::new(limits.max_streams.max(1)));
        Service {
            repo,
            env,
            auth,
            limits,
            pending: Arc::default(),
            streams,
            init_lock: Mutex::new(()),
        }
    }

    /// Who called, and the repository of their garden (made at its first
    /// use).
    fn caller<T>(&self, req: &Request<T>) -> Result<Caller, Status> {
        let who = self.who(req)?;
        let garden = match &self.auth {
            None => DEFAULT_GARDEN.to_owned(),
            Some(a) => a
                .garden_of(&who)
                .ok_or_else(|| Status::permission_denied("key no longer authorized"))?,
        };
        let repo = self.garden_repo(&garden)?;
        let label = if garden == DEFAULT_GARDEN {
            who.clone()
        } else {
            format!("{who} ({garden})")
        };
        Ok(Caller { who, label, repo })
    }

    /// The repository of `garden`: the served folder for the default one,
    /// `gardens/<name>` in it for the others (made at first use, with an
    /// empty head older than any push).
    fn garden_repo(&self, garden: &str) -> Result<PathBuf, Status> {
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
            .map_err(|_| Status::internal("poisoned"))?;
        if !repo.join(sgard_manifest::MANIFEST_FILE).exists() {
            let env = (self.env)().map_err(Status::internal)?;
            sgard_store::durable::create_dir_all_durable(&self.repo.join(GARDENS_DIR))
                .map_err(store_status)?;
            Garden::init(&repo, env)
                .and_then(|mut g| g.backdate_empty_head())
                .map_err(garden_status)?;
            tracing::info!(garden, "made the garden's repository");
        }
        Ok(repo)
    }

    /// The server's time, unix seconds (the authority's clock, test hook
    /// included).
    fn now(&self) -> i64 {
        match &self.auth {
            Some(a) => a.now(),
            None => super::auth::unix_now(),
        }
    }

    fn who<T>(&self, req: &Request<T>) -> Result<String, Status> {
        let Some(auth) = &self.auth else {
            return Ok("anonymous".into());
        };
        let token = req
            .metadata()
            .get(TOKEN_METADATA_KEY)
            .and_then(|v| v.to_str().ok())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Status::unauthenticated("missing auth token"))?;
        match auth.check(token) {
            TokenCheck::Ok(sub) => Ok(sub),
            TokenCheck::Revoked => Err(Status::permission_denied("key no longer authorized")),
            TokenCheck::Invalid => Err(Status::unauthenticated("invalid token")),
            TokenCheck::Expired => {
                let mut nonce = [0u8; 32];
                let _ = getrandom::fill(&mut nonce);
                Err(reauth_status("token expired", &nonce, auth.now()))
            }
        }
    }

    async fn blocking<T, F>(&self, repo: &Path, mode: LockMode, f: F) -> Result<T, Status>
    where
        T: Send + 'static,
        F: FnOnce(&mut Garden) -> Result<T, Status> + Send + 'static,
    {
        let repo = repo.to_path_buf();
        let env = (self.env)().map_err(Status::internal)?;
        tokio::task::spawn_blocking(move || {
            let mut g = Garden::open(&repo, env, mode, &|_| {}).map_err(garden_status)?;
            f(&mut g)
        })
        .await
        .map_err(|e| Status::internal(format!("worker failed: {e}")))?
    }
}

/// A gRPC status for a Garden error.
pub fn garden_status(e: sgard_garden::Error) -> Status {
    let msg = chain(&e);
    match e {
        sgard_garden::Error::Conflict(_) => Status::failed_precondition(msg),
        e if e.is_integrity() => Status::data_loss(msg),
        sgard_garden::Error::NotARepo(_) => Status::failed_precondition(msg),
        _ => Status::internal(msg),
    }
}

/// An error and its causes on one line.
fn chain(e: &dyn std::error::Error) -> String {
    sgard_garden::error_chain(e)
}

fn invalid(e: Invalid) -> Status {
    Status::invalid_argument(e.to_string())
}

/// `google.rpc.Status`, to carry a `ReauthChallenge` the way grpc-go does.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    /// The code.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// The message.
    #[prost(string, tag = "2")]
    pub message: String,
    /// Typed details.
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<prost_types::Any>,
}

/// The type URL of the challenge detail.
pub const REAUTH_TYPE_URL: &str = "type.googleapis.com/sgard.v1.ReauthChallenge";

/// An `Unauthenticated` status saying `message`, carrying a challenge to
/// sign (a fresh nonce, the server's time `ts`).
fn reauth_status(message: &str, nonce: &[u8], ts: i64) -> Status {
    use prost::Message;
    let challenge = v1::ReauthChallenge {
        nonce: nonce.to_vec(),
        timestamp: ts,
    };
    let st = RpcStatus {
        code: Code::Unauthenticated as i32,
        message: message.into(),
        details: vec![prost_types::Any {
            type_url: REAUTH_TYPE_URL.into(),
            value: challenge.encode_to_vec(),
        }],
    };
    Status::with_details(Code::Unauthenticated, message, st.encode_to_vec().into())
}

fn parse_history(recs: &[v1::HistoryRecord]) -> Result<Vec<Record>, Status> {
    recs.iter()
        .map(convert::record_from_proto)
        .collect::<Result<_, _>>()
        .map_err(invalid)
}

fn log_rpc(name: &str, who: &str, started: Instant, result: &Result<impl Sized, Status>) {
    let took = started.elapsed();
    let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    let code = result.as_ref().map_or_else(Status::code, |_| Code::Ok);
    super::metrics::rpc_done(name, code, took);
    let code = super::metrics::code_name(code);
    match result {
        Ok(_) => tracing::info!(rpc = name, client = who, ms, code = %code, "ok"),
        Err(s) => tracing::info!(rpc = name, client = who, ms, code = %code, "{}", s.message()),
    }
}

type BlobStream = Pin<Box<dyn Stream<Item = Result<v1::PullBlobsResponse, Status>> + Send>>;

#[tonic::async_trait]
impl GardenSync for Service {
    async fn authenticate(
        &self,
        req: Request<v1::AuthenticateRequest>,
    ) -> Result<Response<v1::AuthenticateResponse>, Status> {
        let started = Instant::now();
        let r = req.into_inner();
        let out = match &self.auth {
            None => Err(Status::unimplemented("authentication not configured")),
            Some(a) => a
                .authenticate(&r.nonce, r.timestamp, &r.signature, &r.public_key)
                .map(|token| Response::new(v1::AuthenticateResponse { token }))
                .map_err(|(denied, msg)| {
                    if denied {
                        Status::permission_denied(msg)
                    } else if a.outside_window(r.timestamp) {
                        // The key is known (that is checked first); the
                        // clocks disagree. A challenge dated by the
                        // server's clock says by how much (`sgard doctor`
                        // reads it; Go clients ignore the detail).
                        let mut nonce = [0u8; 32];
                        let _ = getrandom::fill(&mut nonce);
                        reauth_status(&msg, &nonce, a.now())
                    } else {
                        Status::unauthenticated(msg)
                    }
                }),
        };
        log_rpc("Authenticate", "-", started, &out);
        out
    }

    async fn push_manifest(
        &self,
        req: Request<v1::PushManifestRequest>,
    ) -> Result<Response<v1::PushManifestResponse>, Status> {
        let started = Instant::now();
        let c = self.caller(&req)?;
        let r = req.into_inner();
        let out = self.push_manifest_inner(&c, r).await;
        log_rpc("PushManifest", &c.label, started, &out);
        out.map(Response::new)
    }

    async fn push_blobs(
        &self,
        req: Request<Streaming<v1::PushBlobsRequest>>,
    ) -> Result<Response<v1::PushBlobsResponse>, Status> {
        let started = Instant::now();
        let c = self.caller(&req)?;
        let permit = self
            .streams
            .clone()
            .try_acquire_owned()
            .map_err(|_| Status::resource_exhausted("too many pushes at once; try again"))?;
        let out = self.push_blobs_inner(&c, req.into_inner()).await;
        drop(permit);
        log_rpc("PushBlobs", &c.label, started, &out);
        out.map(|n| Response::new(v1::PushBlobsResponse { blobs_received: n }))
    }

    async fn pull_manifest(
        &self,
        req: Request<v1::PullManifestRequest>,
    ) -> Result<Response<v1::PullManifestResponse>, Status> {
        let started = Instant::now();
        let c = self.caller(&req)?;
        let out = self
            .blocking(&c.repo, LockMode::Shared, |g| {
                let (head_statement, head_signature) = g.head_signature().unwrap_or_default();
                Ok(v1::PullManifestResponse {
                    head_statement,
                    head_signature,
                    manifest: Some(convert::manifest_to_proto(g.manifest())),
                    head_id: g.head_id().to_hex(),
                    history: g
                        .shared_history()
                        .records
                        .iter()
                        .map(convert::record_to_proto)
                        .collect(),
                    blob_sizes: g
                        .blob_sizes()
                        .into_iter()
                        .map(|(h, n)| (h.to_hex(), n))
                        .collect(),
                })
            })
            .await;
        log_rpc("PullManifest", &c.label, started, &out);
        out.map(Response::new)
    }

    type PullBlobsStream = BlobStream;

    async fn pull_blobs(
        &self,
        req: Request<v1::PullBlobsRequest>,
    ) -> Result<Response<Self::PullBlobsStream>, Status> {
        let started = Instant::now();
        let c = self.caller(&req)?;
        let r = req.into_inner();
        let (lists, chunks) = (r.lists, r.chunks);
        let hashes = parse_hashes(&r.hashes)?;
        let store = sgard_store::Store::open(&c.repo);
        let (tx, rx) = mpsc::channel::<Result<v1::PullBlobsResponse, Status>>(8);
        tokio::task::spawn_blocking(move || {
            for h in hashes {
                let sent = match store.chunked() {
                    Some(cs) if chunks => send_object(cs.objects(), &h, Kind::Chunk, &tx),
                    Some(cs)
                        if lists && !store.contains_blob(&h).unwrap_or(true) && cs.contains(&h) =>
                    {
                        send_list(cs, &h, &tx)
                    }
                    _ => send_blob(&store, &h, &tx),
                };
                if let Err(st) = sent {
                    let _ = tx.blocking_send(Err(st));
                    return;
                }
            }
        });
        log_rpc("PullBlobs", &c.label, started, &Ok::<(), Status>(()));
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn missing_chunks(
        &self,
        req: Request<v1::MissingChunksRequest>,
    ) -> Result<Response<v1::MissingChunksResponse>, Status> {
        let started = Instant::now();
        let c = self.caller(&req)?;
        let hashes = req.into_inner().hashes;
        if hashes.len() > 1_000_000 {
            return Err(Status::invalid_argument(
                "at most 1,000,000 chunks per question",
            ));
        }
        let hashes = parse_hashes(&hashes)?;
        let store = sgard_store::Store::open(&c.repo);
        let out = tokio::task::spawn_blocking(move || {
            let Some(cs) = store.chunked() else {
                return Ok(hashes);
            };
            let mut missing = Vec::new();
            for h in hashes {
                if !cs.objects().contains(&h).map_err(store_status)? {
                    missing.push(h);
                }
            }
            Ok(missing)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        log_rpc("MissingChunks", &c.label, started, &out);
        out.map(|m: Vec<Hash>| {
            Response::new(v1::MissingChunksResponse {
                missing: m.iter().map(Hash::to_hex).collect(),
            })
        })
    }

    async fn report(
        &self,
        req: Request<v1::ReportRequest>,
    ) -> Result<Response<v1::ReportResponse>, Status> {
        let started = Instant::now();
        let c = self.caller(&req)?;
        let r = req.into_inner();
        let op = match r.op.as_str() {
            "push" => fleet::Op::Push,
            "pull" => fleet::Op::Pull,
            other => return Err(Status::invalid_argument(format!("unknown op {other:?}"))),
        };
        let head = Hash::parse(&r.head).map_err(|_| Status::invalid_argument("malformed head"))?;
        let now = self.now();
        let (repo, who) = (c.repo.clone(), c.who.clone());
        let out = tokio::task::spawn_blocking(move || {
            fleet::record(&repo, &who, &r.host, &r.version, head, op, now)
                .map_err(|e| Status::invalid_argument(format!("{e:#}")))
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        log_rpc("Report", &c.label, started, &out);
        out.map(|()| Response::new(v1::ReportResponse {}))
    }

    async fn fleet(
        &self,
        req: Request<v1::FleetRequest>,
    ) -> Result<Response<v1::FleetResponse>, Status> {
        let started = Instant::now();
        let c = self.caller(&req)?;
        let now = self.now();
        let repo = c.repo.clone();
        let out = self
            .blocking(&c.repo, LockMode::Shared, move |g| {
                let head = g.head_id();
                let known: std::collections::HashSet<Hash> = g
                    .shared_history()
                    .records
                    .iter()
                    .flat_map(|r| [Some(r.id), r.head_before])
                    .flatten()
                    .collect();
                let machines = fleet::list(&repo)
                    .map_err(|e| Status::internal(format!("{e:#}")))?
                    .into_iter()
                    .map(|m| {
                        let state = match m.head {
                            Some(h) if h == head => "current",
                            Some(h) if known.contains(&h) => "behind",
                            _ => "ahead",
                        };
                        v1::FleetMachine {
                            host: m.host,
                            key: m.key,
                            head: m.head.map(|h| h.to_hex()).unwrap_or_default(),
                            last_push: m.last_push.map(|s| prost_types::Timestamp {
                                seconds: s,
                                nanos: 0,
                            }),
                            last_pull: m.last_pull.map(|s| prost_types::Timestamp {
                                seconds: s,
                                nanos: 0,
                            }),
                            version: m.version,
                            state: state.into(),
                        }
                    })
                    .collect();
                Ok(v1::FleetResponse {
                    head_id: head.to_hex(),
                    machines,
                    server_time: Some(prost_types::Timestamp {
                        seconds: now,
                        nanos: 0,
                    }),
                })
            })
            .await;
        log_rpc("Fleet", &c.label, started, &out);
        out.map(Response::new)
    }

    async fn prune(
        &self,
        req: Request<v1::PruneRequest>,
    ) -> Result<Response<v1::PruneResponse>, Status> {
        let started = Instant::now();
        let c = self.caller(&req)?;
        let protect: std::collections::HashSet<Hash> = self
            .pending
            .lock()
            .map_err(|_| Status::internal("poisoned"))?
            .values()
            .flat_map(|(m, h)| {
                m.referenced_blobs()
                    .chain(h.iter().map(|r| r.id))
                    .collect::<Vec<_>>()
            })
            .collect();
        let grace = self.limits.prune_grace;
        let out = self
            .blocking(&c.repo, LockMode::Exclusive, move |g| {
                let r = g.prune_with(&protect, Some(grace)).map_err(garden_status)?;
                Ok(v1::PruneResponse {
                    blobs_removed: i32::try_from(r.blobs).unwrap_or(i32::MAX),
                })
            })
            .await;
        log_rpc("Prune", &c.label, started, &out);
        out.map(Response::new)
    }
}

impl Service {
    async fn push_manifest_inner(
        &self,
        c: &Caller,
        r: v1::PushManifestRequest,
    ) -> Result<v1::PushManifestResponse, Status> {
        let m = r
            .manifest
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("no manifest"))?;
        let manifest = convert::manifest_from_proto(m).map_err(invalid)?;
        let history = parse_history(&r.history)?;
        let base = match r.base_id.as_str() {
            "" => Base::Legacy,
            "none" => Base::Never,
            h => {
                Base::Id(Hash::parse(h).map_err(|_| Status::invalid_argument("malformed base_id"))?)
            }
        };
        let negotiate = r.negotiate;
        let extra = parse_hashes(&r.extra_blobs)?;
        let signature = signed_head(&r, &manifest, &history)?;
        let who_owned = c.who.clone();
        let pending = self.pending.clone();
        self.blocking(&c.repo, LockMode::Exclusive, move |g| {
            let server_updated = Some(prost_types::Timestamp {
                seconds: g.manifest().updated.datetime().timestamp(),
                nanos: i32::try_from(g.manifest().updated.datetime().timestamp_subsec_nanos())
                    .unwrap_or(0),
            });
            let resp = |decision: Decision, missing: Vec<Hash>, head: Option<Hash>| {
                v1::PushManifestResponse {
                    decision: decision as i32,
                    missing_blobs: missing.iter().map(Hash::to_hex).collect(),
                    server_updated,
                    head_id: head.map(|h| h.to_hex()).unwrap_or_default(),
                }
            };
            let decision = g
                .push_decision(&manifest, base, &history, &extra)
                .map_err(garden_status)?;
            match decision {
                PushDecision::UpToDate => Ok(resp(Decision::UpToDate, vec![], Some(g.head_id()))),
                PushDecision::Rejected(_) => {
                    Ok(resp(Decision::Rejected, vec![], Some(g.head_id())))
                }
                PushDecision::Accepted(missing) => {
                    if negotiate {
                        return Ok(resp(Decision::Accepted, missing, Some(g.head_id())));
                    }
                    if base == Base::Legacy {
                        // The Go client streams blobs next; keep its manifest
                        // for it alone until its PushBlobs ends.
                        pending
                            .lock()
                            .map_err(|_| Status::internal("poisoned"))?
                            .insert(who_owned, (manifest, history));
                        return Ok(resp(Decision::Accepted, missing, None));
                    }
                    if !missing.is_empty() {
                        return Err(Status::failed_precondition(format!(
                            "{} blob(s) are missing on the server; push them first",
                            missing.len()
                        )));
                    }
                    let sig = signature
                        .as_ref()
                        .map(|(st, sig)| (st.as_str(), sig.as_str()));
                    let head = g
                        .install_push(manifest, history, &who_owned, sig)
                        .map_err(garden_status)?;
                    Ok(resp(Decision::Accepted, vec![], Some(head)))
                }
            }
        })
        .await
    }

    async fn push_blobs_inner(
        &self,
        c: &Caller,
        mut stream: Streaming<v1::PushBlobsRequest>,
    ) -> Result<i32, Status> {
        let who = c.who.as_str();
        let store = sgard_store::Store::open(&c.repo);
        let mut sink = BlobSink::new(store, Some(self.limits.max_blob));
        while let Some(msg) = stream.next().await {
            let msg = msg?;
            let Some(BlobChunk { hash, data, kind }) = msg.chunk else {
                return Err(Status::invalid_argument("message without a chunk"));
            };
            if !hash.is_empty() {
                let h = Hash::parse(&hash)
                    .map_err(|_| Status::invalid_argument(format!("malformed hash {hash:?}")))?;
                let kind = Kind::from_wire(kind)
                    .ok_or_else(|| Status::invalid_argument(format!("unknown kind {kind}")))?;
                sink.start_kind(h, kind, Some(self.limits.max_blob))
                    .await
                    .map_err(store_status)?;
            }
            super::metrics::bytes_received(data.len());
            if !data.is_empty() && !sink.feed(data).await.map_err(store_status)? {
                return Err(Status::invalid_argument("data before any blob hash"));
            }
        }
        sink.finish().await.map_err(store_status)?;
        let received = i32::try_from(sink.done).unwrap_or(i32::MAX);
        let pending = self
            .pending
            .lock()
            .map_err(|_| Status::internal("poisoned"))?
            .remove(who);
        if let Some((manifest, history)) = pending {
            let who = who.to_owned();
            self.blocking(&c.repo, LockMode::Exclusive, move |g| {
                g.install_push(manifest, history, &who, None)
                    .map(|_| ())
                    .map_err(garden_status)
            })
            .await?;
        }
        Ok(received)
    }
}

/// The statement and signature a push carries, checked: well formed, a
/// good signature, naming exactly the pushed manifest and every pushed
/// history record. (Whose key it is, is for the pulling machines to judge.)
fn signed_head(
    r: &v1::PushManifestRequest,
    manifest: &sgard_manifest::Manifest,
    history: &[sgard_manifest::history::Record],
) -> Result<Option<(String, String)>, Status> {
    use super::trust;
    if r.head_signature.is_empty() && r.head_statement.is_empty() {
        return Ok(None);
    }
    let bad = |why: String| Status::invalid_argument(format!("the head signature: {why}"));
    let st = trust::Statement::parse(&r.head_statement).map_err(|e| bad(e.to_string()))?;
    trust::verify(&r.head_statement, &r.head_signature).map_err(|e| bad(e.to_string()))?;
    if st.manifest != sgard_garden::head_id_of(manifest) {
        return Err(bad("it names another manifest than the one pushed".into()));
    }
    if history
        .iter()
        .any(|rec| !st.records.contains(&trust::record_digest(rec)))
    {
        return Err(bad("a pushed history record is not in it".into()));
    }
    Ok(Some((r.head_statement.clone(), r.head_signature.clone())))
}

/// Hashes named in a request, each validated.
fn parse_hashes(hashes: &[String]) -> Result<Vec<Hash>, Status> {
    hashes
        .iter()
        .map(|h| {
            Hash::parse(h).map_err(|_| Status::invalid_argument(format!("malformed hash {h:?}")))
        })
        .collect()
}

fn store_status(e: sgard_store::Error) -> Status {
    match e {
        sgard_store::Error::Corrupt { hash, actual } => Status::data_loss(format!(
            "blob {hash}: the bytes sent hash to {actual}; dropped"
        )),
        sgard_store::Error::TooLarge { limit } => Status::resource_exhausted(format!(
            "blob larger than the server's limit of {limit} bytes; dropped"
        )),
        other => Status::internal(chain(&other)),
    }
}

fn send_blob(
    store: &sgard_store::Store,
    h: &Hash,
    tx: &mpsc::Sender<Result<v1::PullBlobsResponse, Status>>,
) -> Result<(), Status> {
    send_object(store, h, Kind::Blob, tx)
}

/// Sends the chunk list of chunked content `h` (kind 1).
fn send_list(
    cs: &sgard_store::chunks::ChunkStore,
    h: &Hash,
    tx: &mpsc::Sender<Result<v1::PullBlobsResponse, Status>>,
) -> Result<(), Status> {
    let text = cs
        .list_text(h)
        .map_err(|e| Status::data_loss(format!("chunk list {h}: {}", chain(&e))))?;
    for chunk in super::blobs::list_messages(h, &text) {
        super::metrics::bytes_sent(chunk.data.len());
        if tx
            .blocking_send(Ok(v1::PullBlobsResponse { chunk: Some(chunk) }))
            .is_err()
        {
            break;
        }
    }
    Ok(())
}

fn send_object(
    store: &sgard_store::Store,
    h: &Hash,
    kind: Kind,
    tx: &mpsc::Sender<Result<v1::PullBlobsResponse, Status>>,
) -> Result<(), Status> {
    let mut first = true;
    let sent = store.read_chunks(h, CHUNK_SIZE, &mut |data| {
        super::metrics::bytes_sent(data.len());
        let chunk = BlobChunk {
            hash: if first { h.to_hex() } else { String::new() },
            data: data.to_vec(),
            kind: kind.wire(),
        };
        first = false;
        // A client that went away ends the stream; nothing more to do.
        Ok(tx
            .blocking_send(Ok(v1::PullBlobsResponse { chunk: Some(chunk) }))
            .is_ok())
    });
    match sent {
        Ok(_) => Ok(()),
        Err(sgard_store::Error::Missing(_)) => {
            Err(Status::not_found(format!("blob {h} not found")))
        }
        Err(sgard_store::Error::Corrupt { .. }) => Err(Status::data_loss(format!(
            "blob {h} is corrupt on the server"
        ))),
        Err(e) => Err(Status::internal(format!("reading blob {h}: {}", chain(&e)))),
    }
}

/// Serves until `shutdown` resolves; in-flight calls finish first. The
/// standard `grpc.health.v1.Health` service answers `SERVING` for `""` and
/// `sgard.v1.GardenSync`, and `NOT_SERVING` once `shutdown` resolved.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: Service,
    tls: Option<tonic::transport::ServerTlsConfig>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    type SyncServer = v1::garden_sync_server::GardenSyncServer<Service>;
    let (health, health_svc) = tonic_health::server::health_reporter();
    health.set_serving::<SyncServer>().await;
    let shutdown = async move {
        shutdown.await;
        health.set_not_serving::<SyncServer>().await;
        health
            .set_service_status("", tonic_health::ServingStatus::NotServing)
            .await;
    };
    let svc = SyncServer::new(service)
        .max_decoding_message_size(4 << 20)
        .max_encoding_message_size(4 << 20);
    let mut builder = tonic::transport::Server::builder()
        .concurrency_limit_per_connection(32)
        .timeout(Duration::from_secs(3600));
    if let Some(t) = tls {
        builder = builder.tls_config(t)?;
    }
    builder
        .layer(super::metrics::InFlightLayer)
        .add_service(health_svc)
        .add_service(svc)
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            shutdown,
        )
        .await?;
    Ok(())
}
