//! The gRPC front (`sgard.v1.GardenSync`): authenticates callers, finds
//! their garden, bounds what they send, logs and counts every call, turns
//! messages into the backend's domain types and its [`Error`] into a
//! `tonic::Status`. The only code of the server that knows gRPC's types.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sgard_garden::Base;
use sgard_manifest::Timestamp;
use sgard_manifest::history::Record;
use sgard_proto::TOKEN_METADATA_KEY;
use sgard_proto::blobs::Piece;
use sgard_proto::convert::{self, Invalid};
use sgard_proto::v1;
use sgard_proto::v1::garden_sync_server::GardenSync;
use sgard_proto::wire::{BUSY, DEFAULT_GARDEN, REAUTH_TYPE_URL, RpcStatus};
use sgard_store::Hash;
use tokio::sync::Semaphore;
use tokio_stream::{Stream, StreamExt};
use tonic::{Code, Request, Response, Status, Streaming};

use crate::auth::{Authority, LoginFailure, LoginRefused, TokenCheck};
use crate::error::Kind;
use crate::{Backend, Decision, Error, Limits, Pull, Push, Report, fleet};

/// Who called: their key's fingerprint, how the log names them (with their
/// garden), and their garden.
struct Caller {
    who: String,
    label: String,
    garden: String,
}

/// The service.
pub struct Service {
    backend: Arc<dyn Backend>,
    auth: Option<Arc<Authority>>,
    streams: Arc<Semaphore>,
    queue_wait: Duration,
}

impl Service {
    /// A service over `backend`.
    pub fn new(backend: Arc<dyn Backend>, auth: Option<Arc<Authority>>, limits: Limits) -> Self {
        let streams = Arc::new(Semaphore::new(limits.max_streams.max(1)));
        Service {
            backend,
            auth,
            streams,
            queue_wait: limits.queue_wait,
        }
    }

    /// [`Service::caller`], with a refusal logged and counted as the
    /// RPC's outcome (a revoked key's cached token is refused here).
    fn caller_logged<T>(
        &self,
        req: &Request<T>,
        rpc: &str,
        started: Instant,
    ) -> Result<Caller, Status> {
        self.caller(req)
            .inspect_err(|s| log_rpc(rpc, "-", started, &Err::<(), _>(s.clone())))
    }

    /// Who called, and their garden.
    fn caller<T>(&self, req: &Request<T>) -> Result<Caller, Status> {
        let who = self.who(req)?;
        let garden = match &self.auth {
            None => DEFAULT_GARDEN.to_owned(),
            Some(a) => a
                .garden_of(&who)
                .ok_or_else(|| Status::permission_denied("key no longer authorized"))?,
        };
        let label = if garden == DEFAULT_GARDEN {
            who.clone()
        } else {
            format!("{who} ({garden})")
        };
        Ok(Caller { who, label, garden })
    }

    /// The server's time, unix seconds (the authority's clock, test hook
    /// included).
    fn now(&self) -> i64 {
        match &self.auth {
            Some(a) => a.now(),
            None => sgard_proto::wire::unix_now(),
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
}

/// The gRPC status a backend's error is answered with: the one place the
/// backends' [`Kind`]s meet gRPC codes.
impl From<Error> for Status {
    fn from(e: Error) -> Status {
        let code = match e.kind() {
            Kind::Invalid => Code::InvalidArgument,
            Kind::Refused => Code::FailedPrecondition,
            Kind::Damaged => Code::DataLoss,
            Kind::Retry => Code::Aborted,
            // Not the BUSY refusal (that one is retried): a size limit.
            Kind::TooLarge => Code::ResourceExhausted,
            Kind::NotFound => Code::NotFound,
            Kind::Unavailable => Code::Unavailable,
            Kind::Timeout => Code::DeadlineExceeded,
            Kind::Denied => Code::PermissionDenied,
            Kind::Internal => Code::Internal,
        };
        Status::new(code, e.message())
    }
}

fn invalid(e: Invalid) -> Status {
    Status::invalid_argument(e.to_string())
}

/// A protobuf time.
fn timestamp(t: Timestamp) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.datetime().timestamp(),
        nanos: i32::try_from(t.datetime().timestamp_subsec_nanos()).unwrap_or(0),
    }
}

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

/// One line per RPC, at the level of what happened: INFO for an answer,
/// WARN for a refusal of the client's request (a login, a token, a size,
/// a busy server: the client can act on it), ERROR for the server's own
/// failure (its store, a bug). A refusal is also counted by its reason.
fn log_rpc(name: &str, who: &str, started: Instant, result: &Result<impl Sized, Status>) {
    let took = started.elapsed();
    let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    let code = result.as_ref().map_or_else(Status::code, |_| Code::Ok);
    crate::metrics::rpc_done(name, code, took);
    if let Some(reason) = result.as_ref().err().and_then(refusal_reason) {
        crate::metrics::refused(reason);
    }
    if code == Code::Unavailable {
        // Perhaps the store: check it now rather than at the next interval.
        crate::health::suspect();
    }
    let level = level_of(code);
    let code = crate::metrics::code_name(code);
    match (result, level) {
        (Ok(_), _) => tracing::info!(rpc = name, client = who, ms, code = %code, "ok"),
        (Err(s), tracing::Level::ERROR) => {
            tracing::error!(rpc = name, client = who, ms, code = %code, "{}", s.message());
        }
        (Err(s), tracing::Level::WARN) => {
            tracing::warn!(rpc = name, client = who, ms, code = %code, "{}", s.message());
        }
        (Err(s), _) => {
            tracing::info!(rpc = name, client = who, ms, code = %code, "{}", s.message());
        }
    }
}

/// The level an RPC's outcome is logged at (see [`log_rpc`]).
fn level_of(code: Code) -> tracing::Level {
    match code {
        Code::Ok | Code::Cancelled | Code::NotFound | Code::AlreadyExists => tracing::Level::INFO,
        Code::Internal
        | Code::Unknown
        | Code::Unavailable
        | Code::DataLoss
        | Code::DeadlineExceeded
        | Code::Unimplemented => tracing::Level::ERROR,
        Code::InvalidArgument
        | Code::PermissionDenied
        | Code::Unauthenticated
        | Code::ResourceExhausted
        | Code::FailedPrecondition
        | Code::Aborted
        | Code::OutOfRange => tracing::Level::WARN,
    }
}

/// The `sgardd_refusals` reason of an RPC's code, when it is a refusal.
fn refusal_reason(s: &Status) -> Option<&'static str> {
    match s.code() {
        Code::PermissionDenied => Some("denied"),
        Code::Unauthenticated => Some("unauthenticated"),
        Code::ResourceExhausted if s.message() == sgard_proto::wire::BUSY => Some("busy"),
        Code::ResourceExhausted => Some("too_large"),
        _ => None,
    }
}

/// A push the server refused because the garden has changes it lacks: an
/// answer (`Rejected`), not an error, so its RPC line says `ok`; this line
/// and `sgardd_refusals{reason="pull_first"}` say it was refused.
fn log_pull_first(who: &str) {
    crate::metrics::refused("pull_first");
    tracing::info!(
        rpc = "PushManifest",
        client = who,
        decision = "rejected",
        "push refused: the garden has changes this push lacks (the client pulls first)"
    );
}

/// A refused login's status, counted by its reason in
/// `sgardd_login_failures` (and, by [`log_rpc`], by its code in
/// `sgardd_refusals`): an unknown key is denied; a login refused for its
/// time carries a challenge dated by the server's clock (`sgard doctor`
/// reads it; Go clients ignore the detail).
fn login_refused(a: &Authority, r: LoginRefused) -> Status {
    crate::metrics::login_failed(r.reason);
    match r.reason {
        LoginFailure::UnknownKey => Status::permission_denied(r.message),
        LoginFailure::Clock => {
            let mut nonce = [0u8; 32];
            let _ = getrandom::fill(&mut nonce);
            reauth_status(&r.message, &nonce, a.now())
        }
        _ => Status::unauthenticated(r.message),
    }
}

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
            Some(a) => match a.verify_login(&r.nonce, r.timestamp, &r.signature, &r.public_key) {
                Ok((fp, now)) => match self.backend.first_use_of_nonce(&r.nonce, r.timestamp).await
                {
                    Ok(true) => Ok(Response::new(v1::AuthenticateResponse {
                        token: a.issue(&fp, now),
                    })),
                    Ok(false) => Err(login_refused(a, LoginRefused::replay())),
                    Err(e) => Err(Status::from(e)),
                },
                Err(refused) => Err(login_refused(a, refused)),
            },
        };
        log_rpc("Authenticate", "-", started, &out);
        out
    }

    async fn push_manifest(
        &self,
        req: Request<v1::PushManifestRequest>,
    ) -> Result<Response<v1::PushManifestResponse>, Status> {
        let started = Instant::now();
        let c = self.caller_logged(&req, "PushManifest", started)?;
        let r = req.into_inner();
        // The garden's id first: a push that installed its head is never
        // answered with an error about something else.
        let out = match (push_of(&r), self.backend.garden_id(&c.garden).await) {
            (Ok(push), Ok(id)) => self
                .backend
                .push_manifest(&c.garden, &c.who, push)
                .await
                .map(|o| push_reply(o, id))
                .map_err(Status::from),
            (Err(e), _) => Err(e),
            (_, Err(e)) => Err(Status::from(e)),
        };
        log_rpc("PushManifest", &c.label, started, &out);
        if let Ok(r) = &out
            && r.decision == v1::push_manifest_response::Decision::Rejected as i32
        {
            log_pull_first(&c.label);
        }
        out.map(Response::new)
    }

    async fn push_blobs(
        &self,
        req: Request<Streaming<v1::PushBlobsRequest>>,
    ) -> Result<Response<v1::PushBlobsResponse>, Status> {
        let started = Instant::now();
        let c = self.caller_logged(&req, "PushBlobs", started)?;
        // Past the limit a push waits in line (the semaphore is fair) for
        // a while, then is refused; sgard clients try again after a pause.
        let slot = self.streams.clone();
        let Ok(Ok(permit)) = tokio::time::timeout(self.queue_wait, slot.acquire_owned()).await
        else {
            let out = Err(Status::resource_exhausted(BUSY));
            log_rpc("PushBlobs", &c.label, started, &out);
            return out;
        };
        // A broken stream (a message over the limit, a client gone) is
        // answered with its own status, whatever the backend made of it.
        let broken: Arc<std::sync::Mutex<Option<Status>>> = Arc::default();
        let seen = broken.clone();
        let pieces = req.into_inner().map(move |m| {
            let m = m.map_err(|s| {
                let e = Error::unavailable(format!("the push stream broke: {}", s.message()));
                if let Ok(mut slot) = seen.lock() {
                    slot.get_or_insert(s);
                }
                e
            })?;
            let chunk = m
                .chunk
                .ok_or_else(|| Error::invalid("message without a chunk"))?;
            Piece::from_wire(chunk).map_err(Error::invalid)
        });
        let out = self
            .backend
            .push_blobs(&c.garden, &c.who, Box::pin(pieces))
            .await
            .map_err(|e| {
                broken
                    .lock()
                    .ok()
                    .and_then(|mut s| s.take())
                    .unwrap_or_else(|| Status::from(e))
            });
        drop(permit);
        log_rpc("PushBlobs", &c.label, started, &out);
        out.map(|n| {
            Response::new(v1::PushBlobsResponse {
                blobs_received: i32::try_from(n).unwrap_or(i32::MAX),
            })
        })
    }

    async fn pull_manifest(
        &self,
        req: Request<v1::PullManifestRequest>,
    ) -> Result<Response<v1::PullManifestResponse>, Status> {
        let started = Instant::now();
        let c = self.caller_logged(&req, "PullManifest", started)?;
        let (id, head) = tokio::join!(
            self.backend.garden_id(&c.garden),
            self.backend.pull_manifest(&c.garden)
        );
        let out = id.and_then(|id| head.map(|h| (id, h)));
        let out = out
            .map(|(garden_id, h)| v1::PullManifestResponse {
                garden_id,
                manifest: Some(convert::manifest_to_proto(&h.manifest)),
                head_id: h.id.to_hex(),
                history: h.history.iter().map(convert::record_to_proto).collect(),
                blob_sizes: h.sizes.iter().map(|(h, n)| (h.to_hex(), *n)).collect(),
                head_statement: h.signed.as_ref().map(|s| s.0.clone()).unwrap_or_default(),
                head_signature: h.signed.map(|s| s.1).unwrap_or_default(),
                purges: h
                    .purges
                    .iter()
                    .map(|p| v1::PurgeStatement {
                        statement: p.statement(),
                        signature: p.signature.clone().unwrap_or_default(),
                    })
                    .collect(),
            })
            .map_err(Status::from);
        log_rpc("PullManifest", &c.label, started, &out);
        out.map(Response::new)
    }

    type PullBlobsStream = BlobStream;

    async fn pull_blobs(
        &self,
        req: Request<v1::PullBlobsRequest>,
    ) -> Result<Response<Self::PullBlobsStream>, Status> {
        let started = Instant::now();
        let c = self.caller_logged(&req, "PullBlobs", started)?;
        let r = req.into_inner();
        let pull = Pull {
            hashes: parse_hashes(&r.hashes)?,
            lists: r.lists,
            chunks: r.chunks,
        };
        let out = self
            .backend
            .pull_blobs(&c.garden, pull)
            .await
            .map(|pieces| -> BlobStream {
                Box::pin(pieces.map(|p| {
                    p.map(|p| v1::PullBlobsResponse {
                        chunk: Some(p.into_wire()),
                    })
                    .map_err(Status::from)
                }))
            })
            .map_err(Status::from);
        log_rpc("PullBlobs", &c.label, started, &out);
        out.map(Response::new)
    }

    async fn missing_chunks(
        &self,
        req: Request<v1::MissingChunksRequest>,
    ) -> Result<Response<v1::MissingChunksResponse>, Status> {
        let started = Instant::now();
        let c = self.caller_logged(&req, "MissingChunks", started)?;
        let hashes = req.into_inner().hashes;
        if hashes.len() > 1_000_000 {
            return Err(Status::invalid_argument(
                "at most 1,000,000 chunks per question",
            ));
        }
        let hashes = parse_hashes(&hashes)?;
        let out = self
            .backend
            .missing_chunks(&c.garden, hashes)
            .await
            .map_err(Status::from);
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
        let c = self.caller_logged(&req, "Report", started)?;
        let r = req.into_inner();
        let op = match r.op.as_str() {
            "push" => fleet::Op::Push,
            "pull" => fleet::Op::Pull,
            other => return Err(Status::invalid_argument(format!("unknown op {other:?}"))),
        };
        let head = Hash::parse(&r.head).map_err(|_| Status::invalid_argument("malformed head"))?;
        let report = Report {
            host: r.host,
            version: r.version,
            head,
            op,
        };
        let out = self
            .backend
            .report(&c.garden, &c.who, report, self.now())
            .await
            .map_err(Status::from);
        log_rpc("Report", &c.label, started, &out);
        out.map(|()| Response::new(v1::ReportResponse {}))
    }

    async fn fleet(
        &self,
        req: Request<v1::FleetRequest>,
    ) -> Result<Response<v1::FleetResponse>, Status> {
        let started = Instant::now();
        let c = self.caller_logged(&req, "Fleet", started)?;
        let now = self.now();
        let out = self
            .backend
            .fleet(&c.garden)
            .await
            .map_err(Status::from)
            .map(|v| {
                let at =
                    |s: Option<i64>| s.map(|seconds| prost_types::Timestamp { seconds, nanos: 0 });
                let machines = v
                    .machines
                    .into_iter()
                    .map(|m| {
                        let state = match m.head {
                            Some(h) if h == v.head => "current",
                            Some(h) if v.known.contains(&h) => "behind",
                            _ => "ahead",
                        };
                        v1::FleetMachine {
                            host: m.host,
                            key: m.key,
                            head: m.head.map(|h| h.to_hex()).unwrap_or_default(),
                            last_push: at(m.last_push),
                            last_pull: at(m.last_pull),
                            version: m.version,
                            state: state.into(),
                        }
                    })
                    .collect();
                v1::FleetResponse {
                    head_id: v.head.to_hex(),
                    machines,
                    server_time: at(Some(now)),
                }
            });
        log_rpc("Fleet", &c.label, started, &out);
        out.map(Response::new)
    }

    async fn prune(
        &self,
        req: Request<v1::PruneRequest>,
    ) -> Result<Response<v1::PruneResponse>, Status> {
        let started = Instant::now();
        let c = self.caller_logged(&req, "Prune", started)?;
        let out = self
            .backend
            .prune(&c.garden)
            .await
            .map_err(Status::from)
            .map(|n| v1::PruneResponse {
                blobs_removed: i32::try_from(n).unwrap_or(i32::MAX),
            });
        log_rpc("Prune", &c.label, started, &out);
        out.map(Response::new)
    }
}

/// A stream of blob chunks to a puller.
pub type BlobStream = Pin<Box<dyn Stream<Item = Result<v1::PullBlobsResponse, Status>> + Send>>;

/// The answer to a push's manifest.
fn push_reply(o: crate::PushOutcome, garden_id: String) -> v1::PushManifestResponse {
    use v1::push_manifest_response::Decision as Wire;
    v1::PushManifestResponse {
        decision: match o.decision {
            Decision::Accepted => Wire::Accepted,
            Decision::Rejected => Wire::Rejected,
            Decision::UpToDate => Wire::UpToDate,
        } as i32,
        missing_blobs: o.missing.iter().map(Hash::to_hex).collect(),
        server_updated: o.server_updated.map(timestamp),
        head_id: o.head.map(|h| h.to_hex()).unwrap_or_default(),
        garden_id,
    }
}

/// A push request, read and checked.
fn push_of(r: &v1::PushManifestRequest) -> Result<Push, Status> {
    let m = r
        .manifest
        .as_ref()
        .ok_or_else(|| Status::invalid_argument("no manifest"))?;
    let manifest = convert::manifest_from_proto(m).map_err(invalid)?;
    let history = parse_history(&r.history)?;
    let base = match r.base_id.as_str() {
        "" => Base::Legacy,
        "none" => Base::Never,
        h => Base::Id(Hash::parse(h).map_err(|_| Status::invalid_argument("malformed base_id"))?),
    };
    let signature = signed_head(r, &manifest, &history)?;
    Ok(Push {
        manifest,
        history,
        base,
        negotiate: r.negotiate,
        extra: parse_hashes(&r.extra_blobs)?,
        signature,
        purges: signed_purges(&r.purges)?,
    })
}

/// The most purges one push may carry.
const MAX_PURGES: usize = 10_000;

/// The purges a push carries, checked: each a purge statement, with a
/// good signature of it or none. (Whose key it is, is for the pulling machines to judge,
/// as for heads.)
fn signed_purges(
    purges: &[v1::PurgeStatement],
) -> Result<Vec<sgard_manifest::purges::Purge>, Status> {
    if purges.len() > MAX_PURGES {
        return Err(Status::invalid_argument("too many purges in one push"));
    }
    purges
        .iter()
        .map(|p| {
            let bad = |why: String| Status::invalid_argument(format!("a purge: {why}"));
            let mut purge = sgard_manifest::purges::Purge::from_statement(&p.statement)
                .map_err(|e| bad(e.to_string()))?;
            // Unsigned: a push to a server without logins (and every
            // negotiation, which installs nothing).
            if !p.signature.is_empty() {
                sgard_proto::head::verify(&p.statement, &p.signature)
                    .map_err(|e| bad(e.to_string()))?;
                purge.signature = Some(p.signature.clone());
            }
            Ok(purge)
        })
        .collect()
}

/// The statement and signature a push carries, checked: well formed, a
/// good signature, naming exactly the pushed manifest and every pushed
/// history record. (Whose key it is, is for the pulling machines to judge.)
fn signed_head(
    r: &v1::PushManifestRequest,
    manifest: &sgard_manifest::Manifest,
    history: &[sgard_manifest::history::Record],
) -> Result<Option<(String, String)>, Status> {
    use sgard_proto::head as trust;
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

/// Serves `listener` until `draining`, then `stop`, resolve. The standard
/// `grpc.health.v1.Health` service answers for `""` and
/// `sgard.v1.GardenSync` (and the metrics listener's `/readyz` says the
/// same): `SERVING` while the store answers `check` (see
/// [`crate::health`]; no check: always) and until `draining` resolves;
/// `NOT_SERVING` while the store fails, and from `draining` on for good,
/// while calls are still taken, so that load balancers stop sending any;
/// once `stop` resolves the listener closes and the calls in flight
/// finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: Service,
    tls: Option<tonic::transport::ServerTlsConfig>,
    draining: impl std::future::Future<Output = ()> + Send,
    stop: impl std::future::Future<Output = ()> + Send,
    check: Option<crate::health::StoreCheck>,
) -> Result<(), tonic::transport::Error> {
    type SyncServer = v1::garden_sync_server::GardenSyncServer<Service>;
    let (reporter, health_svc) = tonic_health::server::health_reporter();
    let name = <SyncServer as tonic::server::NamedService>::NAME;
    let gate = crate::health::Gate::new(reporter, name).await;
    let watcher = check.map(|c| tokio::spawn(crate::health::watch(c, gate.clone())));
    let shutdown = async move {
        draining.await;
        gate.drain().await;
        stop.await;
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
    let served = builder
        .layer(crate::metrics::InFlightLayer)
        .add_service(health_svc)
        .add_service(svc)
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            shutdown,
        )
        .await;
    if let Some(w) = watcher {
        w.abort();
    }
    served
}
