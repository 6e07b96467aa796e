//! The client side: connecting, authenticating, pushing and pulling.
//!
//! Network work runs on a runtime built here; repository work stays in the
//! synchronous `Garden` methods, called between network steps.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::collections::HashMap;

use anyhow::{Context, Result, anyhow, bail};
use sgard_garden::{Base, Garden, Prompt, PullReport, RestoreOptions, Side, SyncKey};
use sgard_manifest::history::Record;
use sgard_manifest::{Manifest, Timestamp};
use sgard_proto::convert;
use sgard_proto::v1::garden_sync_client::GardenSyncClient;
use sgard_proto::v1::push_manifest_response::Decision;
use sgard_proto::v1::{self, BlobChunk};
use sgard_proto::{CHUNK_SIZE, TOKEN_METADATA_KEY};
use sgard_store::{Hash, Store};
use tokio_stream::StreamExt;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Request, Response, Status};

use super::auth::{self, challenge_payload, unix_now};
use super::config::{self, Remote};
use sgard_proto::blobs::{BlobSink, Kind, MAX_LIST};

/// Everything needed to reach and log in to a server.
#[derive(Clone, Debug)]
pub struct Opts {
    /// The server.
    pub remote: Remote,
    /// An explicit SSH key (`--ssh-key`, `SGARD_SSH_KEY`).
    pub ssh_key: Option<PathBuf>,
    /// The home folder (for `~/.ssh/id_*`).
    pub home: PathBuf,
    /// Machine-local state (the token cache).
    pub state_dir: Option<PathBuf>,
    /// The ssh-agent socket, if any.
    pub agent: Option<PathBuf>,
    /// How long to wait for the server.
    pub timeouts: Timeouts,
    /// The largest blob accepted from a server that does not declare sizes.
    pub max_blob: u64,
    /// Tells the user something on the way (such as a busy server), on
    /// stderr the way the CLI prints notes.
    pub note: fn(&str),
}

/// How long a client waits for a server.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// To connect.
    pub connect: Duration,
    /// For any one answer or message of a stream.
    pub idle: Duration,
    /// For the whole push or pull.
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(3600),
        }
    }
}

/// The largest blob taken from a server that does not say how big its
/// blobs are (a Go server), by default.
pub const DEFAULT_MAX_BLOB: u64 = 1 << 30;

/// Awaits `f` for at most `limit`, naming `addr` and `what` when it runs out.
async fn within<T>(
    limit: Duration,
    addr: &str,
    what: &str,
    f: impl Future<Output = T>,
) -> Result<T> {
    tokio::time::timeout(limit, f).await.map_err(|_| {
        anyhow!(
            "the server at {addr} did not answer within {} s ({what}); nothing was recorded",
            limit.as_secs()
        )
    })
}

/// A refusal that maps to exit code 4.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// A gRPC failure, with its code kept for messages and tests.
#[derive(Debug, thiserror::Error)]
#[error("the server answered: {} ({message})", super::explain::words(&format!("{code:?}")))]
pub struct RemoteError {
    /// The gRPC code.
    pub code: Code,
    /// The message.
    pub message: String,
}

/// A failed call to the server at `r`: the server's answer, or what kept
/// it from answering, in words. `answered`: the server had answered a call
/// of this connection before (so it is an sgard server on the right port,
/// and a broken connection is only that).
fn remote_err(s: Status, r: &Remote, answered: bool) -> anyhow::Error {
    let host = r.addr.rsplit_once(':').map_or(r.addr.as_str(), |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Some(why) = super::explain::status(&s, &r.addr, host, r.tls_ca.as_deref()) {
        if answered {
            return anyhow!(
                "talking to {}: the connection broke off ({}); nothing was recorded, run the \
                 command again",
                r.addr,
                s.message()
            );
        }
        return anyhow!("talking to {}: {why}", r.addr);
    }
    anyhow::Error::new(RemoteError {
        code: s.code(),
        message: s.message().to_owned(),
    })
}

/// Runs a future on a fresh runtime (the CLI's only async entry point).
pub fn block_on<F: Future>(f: F) -> Result<F::Output> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the network runtime")?;
    Ok(rt.block_on(f))
}

/// What a server says its head is.
pub struct ServerHead {
    /// The manifest.
    pub manifest: Manifest,
    /// Its id (sgard servers name it; a Go server does not).
    pub id: Option<Hash>,
    /// The server's history.
    pub history: Vec<Record>,
    /// The sizes of the blobs they name, as the server declares them.
    pub sizes: HashMap<Hash, u64>,
    /// The head statement and its signature, if the head is signed.
    pub signed: Option<(String, String)>,
    /// The purges the server applied, each with its signature (unchecked).
    pub purges: Vec<v1::PurgeStatement>,
    /// The garden's id, as the server names it (empty: it names none).
    pub garden: String,
}

/// The server's answer to a push's manifest.
pub struct PushAnswer {
    /// Its decision.
    pub decision: Decision,
    /// The blobs it lacks.
    pub missing: Vec<Hash>,
    /// Its head (an sgard server names it; a Go server does not).
    pub head: Option<Hash>,
    /// The garden's id, as the server names it (empty: it names none).
    pub garden: String,
}

/// A connected, possibly authenticated client.
pub struct Client {
    inner: GardenSyncClient<Channel>,
    opts: Opts,
    token: Option<String>,
    token_path: Option<PathBuf>,
    no_auth: bool,
    /// A call of this connection was answered.
    answered: bool,
}

/// Whether `addr` ends in a port (`HOST:PORT`, `[V6]:PORT`).
pub(super) fn has_port(addr: &str) -> bool {
    match addr.rsplit_once(':') {
        Some((host, port)) => {
            !host.is_empty()
                && (!host.contains(':') || (host.starts_with('[') && host.ends_with(']')))
                && port.parse::<u16>().is_ok()
        }
        None => false,
    }
}

pub(super) async fn channel(r: &Remote, t: &Timeouts) -> Result<Channel> {
    if !has_port(&r.addr) {
        bail!(
            "bad server address {:?}: write HOST:PORT (sgardd listens on :9473 unless told otherwise)",
            r.addr
        );
    }
    let host = r.addr.rsplit_once(':').map_or(r.addr.as_str(), |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let connecting = |ep: Endpoint| async move {
        match (&r.tls_ca, r.tls) {
            // A certificate file: our own TLS connector, which also trusts
            // the exact certificates in it (a self-signed one included).
            (Some(ca), true) => {
                let conn = super::tls::Connector::new(ca, host)?;
                let addr = r.addr.clone();
                let ep = ep.origin(
                    format!("https://{}", r.addr)
                        .parse()
                        .with_context(|| format!("bad server address {:?}", r.addr))?,
                );
                let svc = tower::service_fn(move |_: http::Uri| conn.clone().connect(addr.clone()));
                Ok(ep.connect_with_connector(svc).await?)
            }
            (None, true) => {
                let tls = ClientTlsConfig::new()
                    .domain_name(host.to_owned())
                    .with_native_roots();
                Ok(ep.tls_config(tls)?.connect().await?)
            }
            (_, false) => Ok::<_, anyhow::Error>(ep.connect().await?),
        }
    };
    // With a certificate file the connector does TLS, so the endpoint itself
    // is plain (tonic would otherwise insist on its own TLS for https).
    let uri = if r.tls && r.tls_ca.is_none() {
        "https"
    } else {
        "http"
    };
    let ep = Endpoint::from_shared(format!("{uri}://{}", r.addr))
        .with_context(|| format!("bad server address {:?}", r.addr))?
        .connect_timeout(t.connect);
    match within(t.connect, &r.addr, "connecting", connecting(ep)).await? {
        Ok(ch) => Ok(ch),
        Err(e) => {
            let src: &(dyn std::error::Error + 'static) = e.as_ref();
            match super::explain::reaching(src, &r.addr, host, r.tls_ca.as_deref()) {
                Some(why) => Err(anyhow!("connecting to {}: {why}", r.addr)),
                None => Err(e.context(format!("connecting to {}", r.addr))),
            }
        }
    }
}

impl Client {
    /// Connects (no RPC yet).
    pub async fn connect(opts: &Opts) -> Result<Self> {
        let ch = channel(&opts.remote, &opts.timeouts).await?;
        let inner = GardenSyncClient::new(ch)
            .max_decoding_message_size(4 << 20)
            .max_encoding_message_size(4 << 20);
        let token_path = config::token_path(opts.state_dir.as_deref(), &opts.remote.addr);
        Ok(Client {
            inner,
            token: config::load_token(token_path.as_deref()),
            token_path,
            opts: opts.clone(),
            no_auth: false,
            answered: false,
        })
    }

    fn attach<T>(&self, req: &mut Request<T>) {
        if let Some(t) = &self.token
            && let Ok(v) = t.parse()
        {
            req.metadata_mut().insert(TOKEN_METADATA_KEY, v);
        }
    }

    /// Logs in unless a token is cached (or the server needs none).
    pub async fn ensure_auth(&mut self) -> Result<()> {
        if self.token.is_none() && !self.no_auth {
            self.authenticate(None).await?;
        }
        Ok(())
    }

    /// Signs a challenge with each candidate key until one is accepted.
    pub async fn authenticate(&mut self, challenge: Option<(Vec<u8>, i64)>) -> Result<()> {
        let (nonce, ts) = match challenge {
            Some(c) => c,
            None => {
                let mut n = vec![0u8; 32];
                getrandom::fill(&mut n).map_err(|e| anyhow!("no randomness: {e}"))?;
                (n, unix_now())
            }
        };
        let payload = challenge_payload(&nonce, ts);
        let mut tried = Vec::new();
        let signers = Self::signers_for(&self.opts)?;
        if signers.is_empty() {
            // No key here: a server without authentication needs none.
            match self
                .inner
                .authenticate(v1::AuthenticateRequest::default())
                .await
            {
                Err(s) if s.code() == Code::Unimplemented => {
                    self.no_auth = true;
                    self.token = None;
                    return Ok(());
                }
                Err(s)
                    if !matches!(
                        s.code(),
                        Code::Unauthenticated | Code::PermissionDenied | Code::InvalidArgument
                    ) =>
                {
                    return Err(remote_err(s, &self.opts.remote, self.answered))
                        .context("logging in");
                }
                _ => bail!(
                    "no SSH key to log in with: pass --ssh-key, set SGARD_SSH_KEY, start \
                     ssh-agent, or create ~/.ssh/id_ed25519"
                ),
            }
        }
        for signer in signers {
            let (public_key, signature) = match signer.sign(&payload) {
                Ok(x) => x,
                Err(e) => {
                    tried.push(format!("{}: {e}", signer.name()));
                    continue;
                }
            };
            let req = v1::AuthenticateRequest {
                nonce: nonce.clone(),
                timestamp: ts,
                signature,
                public_key,
            };
            match self.inner.authenticate(req).await {
                Ok(r) => {
                    let token = r.into_inner().token;
                    config::save_token(self.token_path.as_deref(), &token)?;
                    self.token = Some(token);
                    self.answered = true;
                    return Ok(());
                }
                Err(s) if s.code() == Code::Unimplemented => {
                    // A server without authentication: go on without a token.
                    self.no_auth = true;
                    self.token = None;
                    return Ok(());
                }
                Err(s) if s.code() == Code::PermissionDenied => {
                    tried.push(format!("{}: {}", signer.name(), s.message()));
                }
                Err(s) => {
                    return Err(remote_err(s, &self.opts.remote, self.answered))
                        .context("logging in");
                }
            }
        }
        if tried.is_empty() {
            bail!(
                "no SSH key to log in with: pass --ssh-key, set SGARD_SSH_KEY, start ssh-agent, \
                 or create ~/.ssh/id_ed25519"
            );
        }
        bail!(
            "the server accepted none of these keys: {}",
            tried.join("; ")
        )
    }

    /// The keys a login tries, in order: `--ssh-key` or `SGARD_SSH_KEY`
    /// alone, else every ssh-agent key, then `~/.ssh/id_ed25519`,
    /// `id_ecdsa`, `id_rsa`.
    pub(super) fn signers_for(opts: &Opts) -> Result<Vec<Signer>> {
        let mut out = Vec::new();
        let explicit = opts.ssh_key.clone().or_else(|| {
            std::env::var_os("SGARD_SSH_KEY")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
        });
        if let Some(p) = explicit {
            out.push(Signer::File(Box::new(auth::read_private_key(&p)?), p));
            return Ok(out);
        }
        if let Some(sock) = &opts.agent
            && let Ok(mut agent) = ssh_agent_client_rs::Client::connect(sock)
            && let Ok(ids) = agent.list_all_identities()
        {
            for id in ids {
                if let ssh_agent_client_rs::Identity::PublicKey(pk) = &id {
                    out.push(Signer::Agent(
                        sock.clone(),
                        pk.as_ref().clone().into_owned(),
                    ));
                }
            }
        }
        for name in ["id_ed25519", "id_ecdsa", "id_rsa"] {
            let p = opts.home.join(".ssh").join(name);
            if p.exists()
                && let Ok(k) = auth::read_private_key(&p)
            {
                out.push(Signer::File(Box::new(k), p));
            }
        }
        Ok(out)
    }

    /// One RPC, logging in again once if the token is refused.
    async fn call<Q, R, F, Fut>(&mut self, msg: Q, f: F) -> Result<R>
    where
        Q: Clone,
        F: Fn(GardenSyncClient<Channel>, Request<Q>) -> Fut,
        Fut: Future<Output = Result<Response<R>, Status>>,
    {
        self.ensure_auth().await?;
        let mut again = false;
        loop {
            let mut req = Request::new(msg.clone());
            self.attach(&mut req);
            let answer = within(
                self.opts.timeouts.idle,
                &self.opts.remote.addr,
                "waiting for an answer",
                f(self.inner.clone(), req),
            )
            .await?;
            match answer {
                Ok(r) => {
                    self.answered = true;
                    return Ok(r.into_inner());
                }
                Err(s) if s.code() == Code::Unauthenticated && !again && !self.no_auth => {
                    again = true;
                    self.token = None;
                    self.authenticate(challenge_of(&s)).await?;
                }
                Err(s) => return Err(remote_err(s, &self.opts.remote, self.answered)),
            }
        }
    }

    /// The server's manifest, head id, history and declared blob sizes.
    pub async fn pull_manifest(&mut self) -> Result<ServerHead> {
        let r = self
            .call(v1::PullManifestRequest {}, |mut c, r| async move {
                c.pull_manifest(r).await
            })
            .await?;
        let m = r
            .manifest
            .as_ref()
            .map(convert::manifest_from_proto)
            .transpose()?
            .unwrap_or_else(|| Manifest::new(sgard_manifest::Timestamp::zero()));
        let head = (!r.head_id.is_empty())
            .then(|| Hash::parse(&r.head_id))
            .transpose()
            .map_err(|_| anyhow!("the server sent a malformed head id"))?;
        let history = r
            .history
            .iter()
            .map(convert::record_from_proto)
            .collect::<Result<Vec<_>, _>>()?;
        let sizes = r
            .blob_sizes
            .iter()
            .filter_map(|(h, n)| Some((Hash::parse(h).ok()?, *n)))
            .collect();
        let signed = (!r.head_signature.is_empty() || !r.head_statement.is_empty())
            .then(|| (r.head_statement.clone(), r.head_signature.clone()));
        Ok(ServerHead {
            manifest: m,
            id: head,
            history,
            sizes,
            signed,
            purges: r.purges,
            garden: r.garden_id,
        })
    }

    /// Fetches content into `store`, each object checked against its name
    /// and bounded by the size the server declared for it (else by the
    /// client's maximum); an object nobody asked for is refused. From an
    /// sgard server (`sgard_peer`), chunked content comes as its chunk
    /// list, then only the chunks this repository lacks, and each list is
    /// stored once its content reassembles to its name; a Go server sends
    /// whole blobs.
    pub async fn pull_content(
        &mut self,
        store: &Store,
        hashes: &[Hash],
        sizes: &HashMap<Hash, u64>,
        progress: &Progress,
        sgard_peer: bool,
    ) -> Result<u64> {
        let want = if sgard_peer { Want::Lists } else { Want::Blobs };
        let (mut n, lists) = self
            .pull_objects(store, hashes, sizes, progress, want)
            .await?;
        if lists.is_empty() {
            return Ok(n);
        }
        let Some(cs) = store.chunked() else {
            bail!("this repository cannot hold chunked content");
        };
        let mut need = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut parsed = Vec::new();
        for (h, text) in lists {
            let list = sgard_store::chunks::ChunkList::parse(&text).map_err(|why| {
                anyhow!(
                    "the server at {} sent a damaged chunk list for {}: {why}; nothing was recorded",
                    self.opts.remote.addr,
                    h.short(12)
                )
            })?;
            for (c, _) in &list.chunks {
                if seen.insert(*c) && !cs.objects().contains(c)? {
                    need.push(*c);
                }
            }
            parsed.push((h, text));
        }
        n += self
            .pull_objects(store, &need, &HashMap::new(), progress, Want::Chunks)
            .await?
            .0;
        for (h, text) in parsed {
            cs.install_list(&h, &text).with_context(|| {
                format!(
                    "storing chunked content {} pulled from {}",
                    h.short(12),
                    self.opts.remote.addr
                )
            })?;
        }
        Ok(n)
    }

    /// The one loop of [`Client::pull_content`]:
    /// returns the objects stored and the chunk lists received (not yet
    /// stored: their chunks come after them).
    async fn pull_objects(
        &mut self,
        store: &Store,
        hashes: &[Hash],
        sizes: &HashMap<Hash, u64>,
        progress: &Progress,
        want: Want,
    ) -> Result<(u64, Vec<(Hash, String)>)> {
        let mut lists = Vec::new();
        if hashes.is_empty() {
            return Ok((0, lists));
        }
        let req = v1::PullBlobsRequest {
            hashes: hashes.iter().map(Hash::to_hex).collect(),
            lists: want == Want::Lists,
            chunks: want == Want::Chunks,
        };
        let mut stream = self
            .call(req, |mut c, r| async move { c.pull_blobs(r).await })
            .await?;
        let mut asked: std::collections::HashSet<Hash> = hashes.iter().copied().collect();
        let addr = self.opts.remote.addr.clone();
        let max = self.opts.max_blob;
        let mut sink = BlobSink::new(store.clone(), Some(max));
        let mut list: Option<(Hash, Vec<u8>)> = None;
        loop {
            let next = within(
                self.opts.timeouts.idle,
                &addr,
                "receiving blobs",
                stream.next(),
            )
            .await?;
            let Some(msg) = next else { break };
            let msg = msg.map_err(|s| remote_err(s, &self.opts.remote, self.answered))?;
            let Some(BlobChunk { hash, data, kind }) = msg.chunk else {
                continue;
            };
            if !hash.is_empty() {
                lists.extend(
                    list.take()
                        .map(|(h, t)| (h, String::from_utf8_lossy(&t).into_owned())),
                );
                let kind = Kind::from_wire(kind);
                let fits = match want {
                    Want::Blobs => kind == Some(Kind::Blob),
                    Want::Lists => matches!(kind, Some(Kind::Blob | Kind::List)),
                    Want::Chunks => kind == Some(Kind::Chunk),
                };
                if !fits {
                    bail!(
                        "the server at {addr} sent an object of a kind that was not asked for; \
                         nothing was recorded"
                    );
                }
                let h =
                    Hash::parse(&hash).map_err(|_| anyhow!("the server sent a malformed hash"))?;
                if !asked.remove(&h) {
                    bail!(
                        "the server at {addr} sent blob {} that was not asked for (or sent it \
                         twice); nothing was recorded",
                        h.short(12)
                    );
                }
                let limit = sizes.get(&h).map_or(max, |n| (*n).min(max));
                match kind {
                    Some(Kind::List) => {
                        sink.finish().await.context("storing a pulled blob")?;
                        list = Some((h, Vec::new()));
                    }
                    Some(Kind::Chunk) => sink
                        .start_kind(h, Kind::Chunk, Some(limit))
                        .await
                        .context("storing a pulled chunk")?,
                    _ => sink
                        .start_bounded(h, limit)
                        .await
                        .context("storing a pulled blob")?,
                }
                progress.item(&h);
            }
            if let Some((_, text)) = list.as_mut() {
                if text.len() as u64 + data.len() as u64 > MAX_LIST {
                    bail!("the server at {addr} sent a chunk list longer than any sgard writes");
                }
                text.extend_from_slice(&data);
                continue;
            }
            if !data.is_empty() && !sink.feed(data).await? {
                bail!("the server sent data before a blob hash");
            }
        }
        sink.finish().await.context("storing a pulled blob")?;
        lists.extend(
            list.take()
                .map(|(h, t)| (h, String::from_utf8_lossy(&t).into_owned())),
        );
        Ok((sink.done, lists))
    }

    /// Tells the server what this machine has after a push or a pull, for
    /// its fleet view. Best effort: a server without the view (the Go
    /// sgardd) or a failure changes nothing.
    pub async fn report(&mut self, env: &sgard_garden::Env, head: Hash, op: &str) {
        let req = v1::ReportRequest {
            host: sgard_garden::identity::short_hostname(&env.hostname),
            version: env!("CARGO_PKG_VERSION").into(),
            head: head.to_hex(),
            op: op.into(),
        };
        let _ = self
            .call(req, |mut c, r| async move { c.report(r).await })
            .await;
    }

    /// The server's view of the machines of this garden.
    pub async fn fleet(&mut self) -> Result<v1::FleetResponse> {
        self.call(
            v1::FleetRequest {},
            |mut c, r| async move { c.fleet(r).await },
        )
        .await
    }

    /// Which of `chunks` the server lacks (`None`: it cannot say, so it
    /// cannot take chunks: an older server).
    pub async fn missing_chunks(&mut self, chunks: &[Hash]) -> Result<Option<Vec<Hash>>> {
        let mut out = Vec::new();
        for part in chunks.chunks(100_000) {
            let req = v1::MissingChunksRequest {
                hashes: part.iter().map(Hash::to_hex).collect(),
            };
            let r = match self
                .call(req, |mut c, r| async move { c.missing_chunks(r).await })
                .await
            {
                Ok(r) => r,
                Err(e)
                    if e.downcast_ref::<Status>()
                        .is_some_and(|s| s.code() == Code::Unimplemented)
                        || e.to_string().contains("Unimplemented")
                        || e.to_string().contains("unimplemented") =>
                {
                    return Ok(None);
                }
                Err(e) => return Err(e),
            };
            for h in &r.missing {
                out.push(
                    Hash::parse(h)
                        .map_err(|_| anyhow!("the server named a malformed chunk hash"))?,
                );
            }
        }
        Ok(Some(out))
    }

    /// Asks about (or, with `negotiate` false, commits) a push.
    // (the parts of one push, as the request has them)
    #[allow(clippy::too_many_arguments)]
    pub async fn push_manifest(
        &mut self,
        m: &Manifest,
        base: Base,
        history: &[Record],
        negotiate: bool,
        extra: &[Hash],
        signed: Option<&(String, String)>,
        purges: &[v1::PurgeStatement],
    ) -> Result<PushAnswer> {
        let (head_statement, head_signature) = signed.cloned().unwrap_or_default();
        let req = v1::PushManifestRequest {
            head_statement,
            head_signature,
            purges: purges.to_vec(),
            manifest: Some(convert::manifest_to_proto(m)),
            base_id: match base {
                Base::Legacy => String::new(),
                Base::Never => "none".into(),
                Base::Id(h) => h.to_hex(),
            },
            negotiate,
            history: history.iter().map(convert::record_to_proto).collect(),
            extra_blobs: extra.iter().map(Hash::to_hex).collect(),
        };
        let r = self
            .call(req, |mut c, r| async move { c.push_manifest(r).await })
            .await?;
        let missing = r
            .missing_blobs
            .iter()
            .map(|h| Hash::parse(h).map_err(|_| anyhow!("the server asked for a malformed hash")))
            .collect::<Result<Vec<_>>>()?;
        let head = (!r.head_id.is_empty())
            .then(|| Hash::parse(&r.head_id).ok())
            .flatten();
        Ok(PushAnswer {
            decision: Decision::try_from(r.decision).unwrap_or(Decision::Unspecified),
            missing,
            head,
            garden: r.garden_id,
        })
    }

    /// Streams blobs from `store` to the server.
    pub async fn push_blobs(
        &mut self,
        store: &Store,
        hashes: &[Hash],
        progress: &Progress,
    ) -> Result<i32> {
        let items: Vec<(Hash, Kind)> = hashes.iter().map(|h| (*h, Kind::Blob)).collect();
        self.push_objects(store, &items, progress).await
    }

    /// Streams objects of each kind from `store` to the server (chunks
    /// before the lists that name them).
    pub async fn push_objects(
        &mut self,
        store: &Store,
        items: &[(Hash, Kind)],
        progress: &Progress,
    ) -> Result<i32> {
        let hashes = items;
        self.ensure_auth().await?;
        let mut again = false;
        let mut busy = Busy::default();
        loop {
            let (tx, rx) = tokio::sync::mpsc::channel::<v1::PushBlobsRequest>(8);
            let st = store.clone();
            let list = hashes.to_vec();
            let pb = progress.clone();
            let producer = tokio::task::spawn_blocking(move || produce(&st, &list, &tx, &pb));
            let mut req = Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
            self.attach(&mut req);
            let res = self.inner.push_blobs(req).await;
            let produced = producer
                .await
                .map_err(|e| anyhow!("reading blobs failed: {e}"))?;
            match res {
                Ok(r) => {
                    produced?;
                    return Ok(r.into_inner().blobs_received);
                }
                Err(s) if s.code() == Code::Unauthenticated && !again && !self.no_auth => {
                    again = true;
                    self.token = None;
                    self.authenticate(challenge_of(&s)).await?;
                }
                Err(s)
                    if is_busy(&s) && busy.wait(&self.opts.remote.addr, self.opts.note).await? =>
                {
                    progress.restart();
                }
                Err(s) => return Err(remote_err(s, &self.opts.remote, self.answered)),
            }
        }
    }

    /// Runs the server's prune.
    pub async fn prune(&mut self) -> Result<i32> {
        let r = self
            .call(
                v1::PruneRequest {},
                |mut c, r| async move { c.prune(r).await },
            )
            .await?;
        Ok(r.blobs_removed)
    }
}

/// What one pull asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    /// Whole blobs (from a Go server, or what only whole blobs can be).
    Blobs,
    /// Whole blobs, or the chunk lists of chunked content.
    Lists,
    /// Chunks.
    Chunks,
}

/// What a push sends an sgard server: the chunks it lacks of the chunked
/// content it lacks, then those contents' lists, then whole blobs. A
/// server that cannot take chunks gets every content whole.
async fn plan_push(c: &mut Client, store: &Store, missing: &[Hash]) -> Result<Vec<(Hash, Kind)>> {
    let Some(cs) = store.chunked() else {
        return Ok(missing.iter().map(|h| (*h, Kind::Blob)).collect());
    };
    let mut lists = Vec::new();
    let mut blobs = Vec::new();
    let mut chunks = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for h in missing {
        if !store.contains_blob(h)? && cs.contains(h) {
            let list = cs
                .list(h)
                .with_context(|| format!("reading the chunk list of {h}"))?;
            chunks.extend(
                list.chunks
                    .iter()
                    .map(|(c, _)| *c)
                    .filter(|c| seen.insert(*c)),
            );
            lists.push(*h);
        } else {
            blobs.push(*h);
        }
    }
    if lists.is_empty() {
        return Ok(blobs.into_iter().map(|h| (h, Kind::Blob)).collect());
    }
    let Some(lacking) = c.missing_chunks(&chunks).await? else {
        return Ok(missing.iter().map(|h| (*h, Kind::Blob)).collect());
    };
    Ok(lacking
        .into_iter()
        .map(|h| (h, Kind::Chunk))
        .chain(lists.into_iter().map(|h| (h, Kind::List)))
        .chain(blobs.into_iter().map(|h| (h, Kind::Blob)))
        .collect())
}

fn produce(
    store: &Store,
    items: &[(Hash, Kind)],
    tx: &tokio::sync::mpsc::Sender<v1::PushBlobsRequest>,
    pb: &Progress,
) -> Result<()> {
    for (h, kind) in items {
        let (h, kind) = (h, *kind);
        let mut first = true;
        let mut gone = false;
        let objects = match (kind, store.chunked()) {
            (Kind::Chunk, Some(cs)) => cs.objects(),
            (Kind::List, Some(cs)) => {
                let text = cs
                    .list_text(h)
                    .with_context(|| format!("reading the chunk list of {h}"))?;
                for chunk in sgard_proto::blobs::list_messages(h, &text) {
                    if tx
                        .blocking_send(v1::PushBlobsRequest { chunk: Some(chunk) })
                        .is_err()
                    {
                        return Ok(());
                    }
                }
                pb.item(h);
                continue;
            }
            _ => store,
        };
        let sent = objects.read_chunks(h, CHUNK_SIZE, &mut |data| {
            let chunk = BlobChunk {
                hash: if first { h.to_hex() } else { String::new() },
                data: data.to_vec(),
                kind: kind.wire(),
            };
            first = false;
            gone = tx
                .blocking_send(v1::PushBlobsRequest { chunk: Some(chunk) })
                .is_err();
            Ok(!gone)
        });
        match sent {
            Ok(_) if gone => return Ok(()),
            Ok(_) => {}
            Err(sgard_store::Error::Missing(_)) => bail!("blob {h} is missing locally"),
            Err(sgard_store::Error::Corrupt { .. }) => {
                bail!("local blob {h} is corrupt; run `sgard verify`")
            }
            Err(e) => return Err(e).with_context(|| format!("reading blob {h}")),
        }
        pb.item(h);
    }
    Ok(())
}

pub(super) fn challenge_of(s: &Status) -> Option<(Vec<u8>, i64)> {
    use prost::Message;
    let st = sgard_proto::wire::RpcStatus::decode(s.details()).ok()?;
    let any = st
        .details
        .iter()
        .find(|a| a.type_url == sgard_proto::wire::REAUTH_TYPE_URL)?;
    let c = v1::ReauthChallenge::decode(any.value.as_slice()).ok()?;
    Some((c.nonce, c.timestamp))
}

/// A key that can sign a challenge.
pub(super) enum Signer {
    File(Box<ssh_key::PrivateKey>, PathBuf),
    Agent(PathBuf, ssh_key::PublicKey),
}

impl Signer {
    pub(super) fn name(&self) -> String {
        match self {
            Signer::File(_, p) => p.display().to_string(),
            Signer::Agent(_, k) => format!("agent key {}", k.fingerprint(ssh_key::HashAlg::Sha256)),
        }
    }

    /// The key's name: its comment in the key file (or in the `.pub` file
    /// beside it, for a PEM key), or the one ssh-agent has for it; empty
    /// when there is none.
    pub(super) fn comment(&self) -> String {
        let c = match self {
            Signer::File(k, p) if k.comment().is_empty() => {
                let mut pubfile = p.clone().into_os_string();
                pubfile.push(".pub");
                std::fs::read_to_string(pubfile)
                    .ok()
                    .and_then(|t| ssh_key::PublicKey::from_openssh(t.trim()).ok())
                    .map(|pk| pk.comment().to_owned())
                    .unwrap_or_default()
            }
            Signer::File(k, _) => k.comment().to_owned(),
            Signer::Agent(_, pk) => pk.comment().to_owned(),
        };
        super::trust::key_name(&c)
    }

    /// (authorized_keys line, SSH wire signature).
    pub(super) fn sign(&self, payload: &[u8]) -> Result<(String, Vec<u8>)> {
        match self {
            Signer::File(k, _) => Ok((
                k.public_key().to_openssh().map_err(|e| anyhow!("{e}"))?,
                auth::sign_with_key(k, payload)?,
            )),
            Signer::Agent(sock, pk) => {
                let mut agent = ssh_agent_client_rs::Client::connect(sock)
                    .map_err(|e| anyhow!("ssh-agent: {e}"))?;
                let sig = agent
                    .sign(pk.clone(), payload)
                    .map_err(|e| anyhow!("ssh-agent refused to sign: {e}"))?;
                Ok((
                    pk.to_openssh().map_err(|e| anyhow!("{e}"))?,
                    auth::encode_sig(&sig)?,
                ))
            }
        }
    }
}

/// How long a push the server refuses while busy (all its push streams
/// taken, see `sgardd --max-streams`) keeps trying before it gives up.
const BUSY_PATIENCE: Duration = Duration::from_secs(120);

/// Whether the server refused a push only because it is busy.
fn is_busy(s: &Status) -> bool {
    s.code() == Code::ResourceExhausted && s.message() == sgard_proto::wire::BUSY
}

/// The tries of a push that a busy server refused.
#[derive(Default)]
struct Busy {
    tries: u32,
    since: Option<std::time::Instant>,
}

impl Busy {
    /// Waits before the next try; `false` once the patience is spent.
    /// Ctrl-C during the wait stops the push.
    async fn wait(&mut self, addr: &str, note: fn(&str)) -> Result<bool> {
        let since = *self.since.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() >= BUSY_PATIENCE {
            return Ok(false);
        }
        if self.tries == 0 {
            note(&format!(
                "{addr} is busy with other pushes; trying again (for up to {} s)",
                BUSY_PATIENCE.as_secs()
            ));
        }
        let until = std::time::Instant::now() + busy_pause(self.tries);
        self.tries += 1;
        while std::time::Instant::now() < until {
            sgard_store::cancel::check()?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sgard_store::cancel::check()?;
        Ok(true)
    }
}

/// The pause before try `n + 1` after a busy refusal: 250 ms doubling up to
/// 4 s, plus up to half of that again at random, so that the clients a
/// server refused together come back spread out.
fn busy_pause(n: u32) -> Duration {
    let base = 250u64 << n.min(4);
    let mut b = [0u8; 8];
    let jitter = match getrandom::fill(&mut b) {
        Ok(()) => u64::from_le_bytes(b) % (base / 2 + 1),
        Err(_) => 0,
    };
    Duration::from_millis(base + jitter)
}

/// How far a push or pull has got, in objects (blobs, chunk lists,
/// chunks), through the process's progress counters (the CLI draws them;
/// bytes are counted where the store reads and writes).
#[derive(Clone)]
pub struct Progress {
    what: &'static str,
    total: u64,
    /// Where the test hooks are read (`<what>-object`, after each object).
    env: sgard_garden::Env,
}

impl Progress {
    /// `total` objects to move; `what` names the work (`pushing`).
    pub fn new(total: u64, what: &'static str, env: &sgard_garden::Env) -> Self {
        sgard_store::progress::begin(what, total, 0);
        Progress {
            what,
            total,
            env: env.clone(),
        }
    }

    /// Starts the count again (a push the server refused while busy is
    /// sent again from the start).
    fn restart(&self) {
        sgard_store::progress::begin(self.what, self.total, 0);
    }

    /// One object moved.
    fn item(&self, h: &Hash) {
        sgard_store::progress::done(&h.short(12), self.what);
        self.env.crash_point(&format!("{}-object", self.what));
    }
}

/// What `push` did.
#[derive(Debug)]
pub enum Pushed {
    /// Blobs sent; the server's head is now ours.
    Done(usize),
    /// The server already had exactly this.
    UpToDate,
}

/// What a push offers the server: the manifest, the history and the
/// snapshot blobs, against the server head this repository last synced.
struct PushInput {
    /// Whom the push is with, as far as this repository knows before the
    /// server answers (the garden the address served last).
    key: SyncKey,
    base: Base,
    m: Manifest,
    history: Vec<Record>,
    store: Store,
    extra: Vec<Hash>,
    /// Every purge made or applied here (signed when pushed).
    purges: Vec<sgard_manifest::purges::Purge>,
}

impl PushInput {
    fn of(g: &mut Garden, o: &Opts) -> Result<PushInput> {
        g.require_history()?;
        let key = g.sync_key_at(&o.remote.addr);
        let base = base_of(g.sync_base(&key));
        let history = g.shared_history().records.clone();
        let extra = g.snapshot_blobs(&history);
        Ok(PushInput {
            key,
            base,
            m: g.manifest().clone(),
            extra,
            history,
            store: g.store().clone(),
            purges: g.purges()?.purges,
        })
    }
}

/// The base a push offers: the head last synced, or none.
fn base_of(b: Option<Hash>) -> Base {
    match b {
        Some(b) => Base::Id(b),
        None => Base::Never,
    }
}

/// Pushes the repository: a fast-forward of the server head this repository
/// last synced with, or refused (exit 4) when the server has changes to pull.
pub fn push(g: &mut Garden, o: &Opts) -> Result<Pushed> {
    let mut moved = false;
    loop {
        match push_once(g, o)? {
            Push::Done(pushed, server_head, key) => {
                let head = server_head.unwrap_or_else(|| g.head_id());
                g.set_sync_base(&key, head)?;
                return Ok(pushed);
            }
            // A Go server made after this repository's last change looks
            // newer, though it holds nothing: move past it, once.
            Push::FreshGoServer(t) if !moved => {
                moved = true;
                g.move_updated_past(t)?;
            }
            Push::FreshGoServer(_) => {
                return Err(anyhow::Error::new(Refused(
                    "the server has changes this repository has not pulled; run `sgard pull` \
                     first, then push again"
                        .into(),
                )));
            }
        }
    }
}

/// How one push attempt ended.
enum Push {
    /// Pushed (or nothing to push); the server's new head, if it names one,
    /// and whom the push was with.
    Done(Pushed, Option<Hash>, SyncKey),
    /// Refused by an empty Go server whose `updated` is this time.
    FreshGoServer(Timestamp),
}

/// Signs the head statement of a push of `m` with `history` with the first
/// key that signs (the keys a login would try, in order): the statement,
/// the signature and the key. `None` when there is no key at all (a server
/// without logins).
fn sign_head(
    o: &Opts,
    m: &Manifest,
    history: &[Record],
) -> Result<Option<(String, String, ssh_key::PublicKey)>> {
    use super::trust::{Statement, sign};
    let signers = Client::signers_for(o)?;
    if signers.is_empty() {
        return Ok(None);
    }
    let st = Statement::of(sgard_garden::head_id_of(m), history);
    let mut tried = Vec::new();
    for s in &signers {
        match sign(s, &st) {
            Ok(armored) => {
                let mut key = ssh_key::SshSig::from_pem(&armored)
                    .map(|sig| ssh_key::PublicKey::from(sig.public_key().clone()))
                    .map_err(|e| anyhow!("reading back the head signature: {e}"))?;
                key.set_comment(s.comment());
                return Ok(Some((st.to_text(), armored, key)));
            }
            Err(e) => tried.push(format!("{}: {e:#}", s.name())),
        }
    }
    bail!(
        "no key could sign the head (every push is signed; see `sgard trust`): {}",
        tried.join("; ")
    )
}

/// The purges a push carries: each one's statement, with the signature
/// it came with (a purge another machine made) or one made now with the
/// first key that signs (as the head's); unsigned where no key signs (a
/// server without logins).
fn sign_purges(
    o: &Opts,
    purges: &[sgard_manifest::purges::Purge],
) -> Result<Vec<v1::PurgeStatement>> {
    if purges.is_empty() {
        return Ok(Vec::new());
    }
    let signers = Client::signers_for(o)?;
    let mut out = Vec::new();
    for p in purges {
        let statement = p.statement();
        let signature = match &p.signature {
            Some(s) => s.clone(),
            None => {
                let mut made = None;
                let mut tried = Vec::new();
                for s in &signers {
                    match super::trust::sign_text(s, &statement) {
                        Ok(sig) => {
                            made = Some(sig);
                            break;
                        }
                        Err(e) => tried.push(format!("{}: {e:#}", s.name())),
                    }
                }
                match made {
                    Some(sig) => sig,
                    None if signers.is_empty() => String::new(),
                    None => bail!("no key could sign the purge: {}", tried.join("; ")),
                }
            }
        };
        out.push(v1::PurgeStatement {
            statement,
            signature,
        });
    }
    Ok(out)
}

/// The purges a server sent that this repository has not applied, each
/// checked as its head is (see [`check_head`]): signed by a key this
/// machine trusts, or unsigned where unsigned heads are taken.
///
/// # Errors
/// [`Untrusted`] (exit 3) for a purge that fails; I/O errors.
pub fn check_purges(
    g: &Garden,
    addr: &str,
    purges: &[v1::PurgeStatement],
    allow_unsigned: bool,
) -> Result<Vec<sgard_manifest::purges::Purge>> {
    use super::trust::{TrustStore, fingerprint, verify};
    let known: std::collections::HashSet<Hash> = g
        .purges()?
        .purges
        .iter()
        .map(sgard_manifest::purges::Purge::id)
        .collect();
    let untrusted = |why: String| {
        anyhow::Error::new(Untrusted(format!(
            "refusing a purge the server at {addr} sent: {why}; nothing was written"
        )))
    };
    let store = g.local_state_dir().map(TrustStore::in_dir);
    let mut out = Vec::new();
    for w in purges {
        let mut p = sgard_manifest::purges::Purge::from_statement(&w.statement)
            .map_err(|e| untrusted(format!("{e}")))?;
        if known.contains(&p.id()) {
            // Taken before; one cut off in the middle is finished.
            if !g.purge_done(&p)? {
                out.push(p);
            }
            continue;
        }
        let strict = match &store {
            Some(s) => s.signed_seen() || !s.keys()?.is_empty(),
            None => false,
        };
        if w.signature.is_empty() {
            if strict && !allow_unsigned {
                return Err(untrusted(
                    "it is not signed, and this repository's heads are; `sgard pull \
                     --allow-unsigned` takes it if you know where it came from"
                        .into(),
                ));
            }
        } else {
            let key =
                verify(&w.statement, &w.signature).map_err(|e| untrusted(format!("{e:#}")))?;
            if let Some(s) = &store
                && strict
                && !s.trusts(&key)?
            {
                return Err(untrusted(format!(
                    "it is signed by {}, a key this machine does not trust for this \
                     repository (`sgard trust list`)",
                    fingerprint(&key)
                )));
            }
            p.signature = Some(w.signature.clone());
        }
        out.push(p);
    }
    Ok(out)
}

/// The contents a Go server never asks for (it asks only for the blobs of
/// `type: file` entries): template sources and the template data. They are
/// sent whole with every push to one, so a pull from it finds them.
fn unasked_by_go(m: &Manifest) -> Vec<Hash> {
    let mut v: Vec<Hash> = m
        .files
        .iter()
        .filter(|e| e.template)
        .filter_map(|e| e.hash)
        .chain(m.data)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn push_once(g: &mut Garden, o: &Opts) -> Result<Push> {
    let PushInput {
        key,
        base,
        m,
        history,
        store,
        extra,
        purges,
    } = PushInput::of(g, o)?;
    let env = g.env().clone();
    let (signed, own_key) = match sign_head(o, &m, &history)? {
        Some((st, sig, key)) => (Some((st, sig)), Some(key)),
        None => (None, None),
    };
    let purges = sign_purges(o, &purges)?;
    block_on(async {
        let mut c = Client::connect(o).await?;
        let (mut key, mut base) = (key, base);
        let mut a = c
            .push_manifest(&m, base, &history, true, &extra, None, &purges)
            .await?;
        // The server names its garden: when it is not the one this address
        // served last (another replica's address, a moved server, another
        // garden), the push is built on that garden's base instead.
        let named = SyncKey::new(&o.remote.addr, &a.garden);
        if named != key {
            let b = base_of(g.sync_base(&named));
            key = named;
            if b != base {
                base = b;
                a = c
                    .push_manifest(&m, base, &history, true, &extra, None, &purges)
                    .await?;
            }
        }
        let PushAnswer {
            decision: d,
            missing,
            head: server_head,
            ..
        } = a;
        let ours = server_head.is_some();
        match d {
            Decision::UpToDate => {
                return Ok::<_, anyhow::Error>(Push::Done(Pushed::UpToDate, server_head, key));
            }
            Decision::Rejected => {
                if !ours {
                    let theirs = c.pull_manifest().await?.manifest;
                    if theirs.files.is_empty() && theirs.encryption.is_none() {
                        return Ok(Push::FreshGoServer(theirs.updated));
                    }
                }
                return Err(anyhow::Error::new(Refused(
                    "the server has changes this repository has not pulled; run `sgard pull` \
                     first, then push again"
                        .into(),
                )));
            }
            Decision::Accepted => {}
            Decision::Unspecified => bail!("the server answered the push with no decision"),
        }
        let items = if ours {
            plan_push(&mut c, &store, &missing).await?
        } else {
            let mut all = missing.clone();
            all.extend(
                unasked_by_go(&m)
                    .into_iter()
                    .filter(|h| !missing.contains(h)),
            );
            all.into_iter().map(|h| (h, Kind::Blob)).collect()
        };
        let pb = Progress::new(items.len() as u64, "pushing", &env);
        c.push_objects(&store, &items, &pb).await?;
        if !ours {
            // A Go server installed the manifest at the end of PushBlobs.
            return Ok(Push::Done(Pushed::Done(items.len()), None, key));
        }
        let PushAnswer {
            decision: d,
            head: new_head,
            ..
        } = c
            .push_manifest(&m, base, &history, false, &extra, signed.as_ref(), &purges)
            .await?;
        match d {
            Decision::Accepted | Decision::UpToDate => {
                if let Some(h) = new_head {
                    c.report(&env, h, "push").await;
                }
                // This machine's own key signs its heads: trusted here,
                // named by its comment, else by this machine's name.
                if let (Some(mut key), Some(dir)) = (own_key, g.local_state_dir()) {
                    if key.comment().is_empty() {
                        key.set_comment(sgard_garden::identity::short_hostname(&env.hostname));
                    }
                    let store = super::trust::TrustStore::in_dir(dir);
                    store.add(&key)?;
                    store.note_signed()?;
                }
                Ok(Push::Done(Pushed::Done(missing.len()), new_head, key))
            }
            _ => Err(anyhow::Error::new(Refused(
                "the server changed during the push; run `sgard pull`, then push again".into(),
            ))),
        }
    })?
    .map_err(|e| name_large_blob(e, g, &m))
}

/// A push refused for a file over the server's `--max-file-size`: the
/// server names its content by its hash, and this says which tracked file
/// holds it, now or in a snapshot (newest first), and how to go on.
fn name_large_blob(e: anyhow::Error, g: &mut Garden, m: &Manifest) -> anyhow::Error {
    let text = format!("{e:#}");
    if !text.contains(sgard_proto::TOO_LARGE) {
        return e;
    }
    let Some(h) = text
        .split(|c: char| !c.is_ascii_hexdigit())
        .filter(|w| w.len() == 64)
        .find_map(|w| Hash::parse(w).ok())
    else {
        return e;
    };
    let holds = |doc: &Manifest| -> Vec<String> {
        doc.files
            .iter()
            .filter(|f| f.hash == Some(h))
            .map(|f| f.path.clone())
            .collect()
    };
    let now = holds(m);
    if !now.is_empty() {
        return e.context(format!(
            "{} is over the server's size limit: the server keeps it out, whole or in chunks \
             (ask for a higher --max-file-size on the server, or stop tracking it with \
             `sgard remove`)",
            now.join(", ")
        ));
    }
    let ids: Vec<Hash> = g
        .shared_history()
        .records
        .iter()
        .rev()
        .map(|r| r.id)
        .collect();
    for id in ids {
        let Ok(doc) = g.snapshot_doc(&id) else {
            continue;
        };
        let then = holds(&doc);
        if !then.is_empty() {
            return e.context(format!(
                "an older version of {} (snapshot {}) is over the server's size limit: \
                 `sgard purge {} --keep-current` drops it from the history, and the rest pushes",
                then.join(", "),
                id.short(12),
                then[0]
            ));
        }
    }
    e
}

/// What a push would do (`push --dry-run`), as the server answered a
/// negotiation that installs nothing.
#[derive(Debug)]
pub enum PushPlan {
    /// The server already has exactly this.
    UpToDate,
    /// The push would be refused: the server has changes to pull first.
    Refused,
    /// The push would send this many blobs (contents the server lacks;
    /// between sgard peers, only their chunks the server lacks) of about
    /// these many bytes.
    Send {
        /// Blobs to send.
        blobs: usize,
        /// The bytes to send (chunk lists not counted).
        bytes: u64,
    },
}

/// Asks the server what a push would send; sends nothing, changes nothing
/// on either side.
pub fn push_plan(g: &mut Garden, o: &Opts) -> Result<PushPlan> {
    let PushInput {
        m,
        history,
        store,
        extra,
        purges,
        ..
    } = PushInput::of(g, o)?;
    // Unsigned: a negotiation installs nothing.
    let purges: Vec<v1::PurgeStatement> = purges
        .iter()
        .map(|p| v1::PurgeStatement {
            statement: p.statement(),
            signature: String::new(),
        })
        .collect();
    block_on(async {
        let mut c = Client::connect(o).await?;
        // A Go server keeps a negotiated manifest for the next PushBlobs of
        // anyone: it is never sent one by a dry run. Its decision is made
        // here as it would make it, by `updated`.
        let ServerHead {
            manifest: theirs,
            id: server_head,
            garden,
            ..
        } = c.pull_manifest().await?;
        // Built on the base of the garden the server names, as the push
        // would be.
        let base = base_of(g.sync_base(&SyncKey::new(&o.remote.addr, &garden)));
        if server_head.is_none() {
            let fresh = theirs.files.is_empty() && theirs.encryption.is_none();
            if m.updated == theirs.updated {
                return Ok(PushPlan::UpToDate);
            }
            if m.updated < theirs.updated && !fresh {
                return Ok(PushPlan::Refused);
            }
            let known: std::collections::HashSet<Hash> = theirs.referenced_blobs().collect();
            let mut send: Vec<Hash> = m
                .files
                .iter()
                .filter(|e| e.kind == sgard_manifest::EntryKind::File && !e.template)
                .filter_map(|e| e.hash)
                .filter(|h| !known.contains(h))
                .chain(unasked_by_go(&m))
                .collect();
            send.sort_unstable();
            send.dedup();
            let mut bytes = 0;
            for h in &send {
                bytes += store.size_of(h)?.unwrap_or(0);
            }
            return Ok(PushPlan::Send {
                blobs: send.len(),
                bytes,
            });
        }
        let PushAnswer {
            decision: d,
            missing,
            head: server_head,
            ..
        } = c
            .push_manifest(&m, base, &history, true, &extra, None, &purges)
            .await?;
        match d {
            Decision::UpToDate => return Ok(PushPlan::UpToDate),
            Decision::Rejected => return Ok(PushPlan::Refused),
            Decision::Accepted => {}
            Decision::Unspecified => bail!("the server answered the push with no decision"),
        }
        let items = if server_head.is_some() {
            plan_push(&mut c, &store, &missing).await?
        } else {
            missing.iter().map(|h| (*h, Kind::Blob)).collect()
        };
        let mut bytes = 0;
        for (h, kind) in &items {
            let objects = match (kind, store.chunked()) {
                (Kind::Chunk, Some(cs)) => cs.objects(),
                (Kind::List, _) => continue,
                _ => &store,
            };
            bytes += objects.size_of(h)?.unwrap_or(0);
        }
        Ok::<_, anyhow::Error>(PushPlan::Send {
            blobs: missing.len(),
            bytes,
        })
    })?
}

/// What `pull` did.
#[derive(Debug)]
pub struct Pulled {
    /// Blobs fetched.
    pub blobs: u64,
    /// The merge and restore.
    pub report: PullReport,
    /// The fingerprint of the key trusted on first use, if any.
    pub newly_trusted: Option<String>,
    /// The purges from the server applied here: the host that made each,
    /// and what it did here.
    pub purged: Vec<(String, sgard_garden::PurgeReport)>,
}

/// Pulls the server's state and merges it (see `Garden::pull_merge`).
pub fn pull(
    g: &mut Garden,
    o: &Opts,
    side: Side,
    ropts: RestoreOptions,
    trust: sgard_garden::Trust,
    allow_unsigned: bool,
    prompt: &mut dyn Prompt,
) -> Result<Pulled> {
    let store = g.store().clone();
    let (theirs, history, blobs, newly_trusted, purges, key) = {
        let g_ref = &mut *g;
        block_on(async {
            within(o.timeouts.total, &o.remote.addr, "pulling", async {
                let mut c = Client::connect(o).await?;
                let head = c.pull_manifest().await?;
                // Nothing is fetched for a head this machine cannot trust.
                let checked = check_head(&*g_ref, &o.remote.addr, &head, allow_unsigned, true)?;
                let purges = check_purges(&*g_ref, &o.remote.addr, &head.purges, allow_unsigned)?;
                let ServerHead {
                    manifest: theirs,
                    id: _head,
                    sizes,
                    garden,
                    ..
                } = head;
                let key = SyncKey::new(&o.remote.addr, &garden);
                let history = checked.history;
                let missing = g_ref.missing_for(&theirs, &history)?;
                let pb = Progress::new(missing.len() as u64, "pulling", g_ref.env());
                // An sgard server (it names its head) sends chunked content
                // as chunks; a Go server sends every blob whole.
                let ours = _head.is_some();
                let mut n = c.pull_content(&store, &missing, &sizes, &pb, ours).await?;
                // The snapshot documents are here now: fetch what they reference.
                let more = g_ref.snapshot_blobs_missing(&history)?;
                n += c.pull_content(&store, &more, &sizes, &pb, ours).await?;
                Ok::<_, anyhow::Error>((theirs, history, n, checked.newly_trusted, purges, key))
            })
            .await?
        })??
    };
    // Nothing is recorded unless every blob it names is here, verified on
    // arrival against its name.
    let mut lacking = g.missing_for(&theirs, &history)?;
    lacking.extend(g.snapshot_blobs_missing(&history)?);
    if let Some(first) = lacking.first() {
        return Err(
            anyhow::Error::new(sgard_store::Error::Missing(*first)).context(format!(
                "the server at {} did not send {} blob{} the pull needs (first: {}); nothing \
             was recorded",
                o.remote.addr,
                lacking.len(),
                if lacking.len() == 1 { "" } else { "s" },
                first.short(12)
            )),
        );
    }
    let base = g.sync_base_known(&key, sgard_garden::head_id_of(&theirs), &history);
    // The server's head, and its entries, to tell after the merge whether
    // this machine has just that or changes of its own besides.
    let (their_id, their_files) = (sgard_garden::head_id_of(&theirs), theirs.files.clone());
    let report = match g.pull_merge(
        theirs,
        history,
        base,
        side,
        ropts,
        trust,
        prompt,
        &o.remote.addr,
    ) {
        Err(sgard_garden::Error::Conflict(msg)) => return Err(anyhow::Error::new(Refused(msg))),
        other => other?,
    };
    if let Some(b) = report.base {
        g.set_sync_base(&key, b)?;
    }
    // The purges the server applied, after the merge: the history they
    // rename is all here now, and a content this machine's head no longer
    // names can go.
    let mut purged = Vec::new();
    for p in &purges {
        match g.apply_purge(p, &std::collections::HashSet::new(), None) {
            Ok(Some(r)) => purged.push((p.host.clone(), r)),
            Ok(None) => {}
            Err(sgard_garden::Error::Conflict(msg)) => {
                return Err(anyhow::Error::new(Refused(format!(
                    "the pull was merged, but {msg}"
                ))));
            }
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context("the pull was merged, but applying a purge from the server failed"));
            }
        }
    }
    // What this machine has now, for the server's fleet view (best effort,
    // and never longer than a connection's timeout): the server's head when
    // its entries are the server's (the merge's own record differs only in
    // its time), else its own.
    let head = if g.manifest().files == their_files {
        their_id
    } else {
        g.head_id()
    };
    let env = g.env().clone();
    let _ = block_on(async {
        let said = async {
            if let Ok(mut c) = Client::connect(o).await {
                c.report(&env, head, "pull").await;
            }
        };
        let _ = tokio::time::timeout(o.timeouts.connect, said).await;
    });
    Ok(Pulled {
        blobs,
        report,
        newly_trusted,
        purged,
    })
}

/// A head this machine may take, and the history records it may take with
/// it.
pub struct HeadCheck {
    /// The records of the server's history the head's signature covers
    /// (all of them, for an unsigned head this machine accepts).
    pub history: Vec<Record>,
    /// The fingerprint of a key trusted now on first use.
    pub newly_trusted: Option<String>,
}

/// Judges the server's head (see [`super::trust`]): a signed head must be
/// signed by a key this machine trusts (on first use, when it trusts none
/// and never saw a signed head here, the signer is trusted, if `record`)
/// and name exactly the manifest sent; only the history records it names
/// are taken. An unsigned head is taken only where no signed head was ever
/// seen and no key is trusted, or with `allow_unsigned`.
///
/// # Errors
/// [`Untrusted`] (exit 3) for a head that fails; I/O errors.
pub fn check_head(
    g: &Garden,
    addr: &str,
    head: &ServerHead,
    allow_unsigned: bool,
    record: bool,
) -> Result<HeadCheck> {
    use super::trust::{Statement, TrustStore, fingerprint, record_digest, verify};
    let untrusted = |why: String| {
        anyhow::Error::new(Untrusted(format!(
            "refusing the head of the server at {addr}: {why}; nothing was written"
        )))
    };
    let Some(dir) = g.local_state_dir() else {
        return Ok(HeadCheck {
            history: head.history.clone(),
            newly_trusted: None,
        });
    };
    let store = TrustStore::in_dir(dir);
    let Some((statement, signature)) = &head.signed else {
        if allow_unsigned {
            return Ok(HeadCheck {
                history: head.history.clone(),
                newly_trusted: None,
            });
        }
        if store.signed_seen() || !store.keys()?.is_empty() {
            return Err(untrusted(
                "it is not signed, and this repository's heads are (a Go client's push, or \
                 a server that lost or dropped the signature); `sgard pull --allow-unsigned` \
                 takes it if you know where it came from"
                    .into(),
            ));
        }
        return Ok(HeadCheck {
            history: head.history.clone(),
            newly_trusted: None,
        });
    };
    let st = Statement::parse(statement).map_err(|e| untrusted(format!("{e:#}")))?;
    let key = verify(statement, signature).map_err(|e| untrusted(format!("{e:#}")))?;
    let fp = fingerprint(&key);
    if st.manifest != sgard_garden::head_id_of(&head.manifest) {
        return Err(untrusted(format!(
            "its manifest is not the one signed (by {fp}): it was changed after it was pushed"
        )));
    }
    let mut newly_trusted = None;
    if !store.trusts(&key)? {
        if store.signed_seen() || !store.keys()?.is_empty() {
            return Err(untrusted(format!(
                "it is signed by {fp}, a key this machine does not trust for this repository \
                 (`sgard trust list`); if it is one of your machines' keys, `sgard trust add \
                 KEY.pub` here"
            )));
        }
        if record {
            // Named by the machine that made the head it signed.
            let host = head
                .history
                .iter()
                .rev()
                .find(|r| r.id == st.manifest && st.records.contains(&record_digest(r)))
                .map(|r| super::trust::key_name(&r.host))
                .filter(|h| !h.is_empty());
            let mut named = key.clone();
            named.set_comment(match host {
                Some(h) => format!("{h} (trusted on first use)"),
                None => format!("signer at {addr} (trusted on first use)"),
            });
            store.add(&named)?;
        }
        newly_trusted = Some(fp);
    }
    if record {
        store.note_signed()?;
    }
    let history = head
        .history
        .iter()
        .filter(|r| st.records.contains(&record_digest(r)))
        .cloned()
        .collect();
    Ok(HeadCheck {
        history,
        newly_trusted,
    })
}

/// A head refused by this machine's trust (exit 3).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Untrusted(pub String);

/// What a pull would do (`pull --dry-run`): the server's manifest is
/// fetched and merged in memory; no blob is fetched and nothing is written.
pub fn pull_plan(
    g: &mut Garden,
    o: &Opts,
    side: Side,
    trust: sgard_garden::Trust,
    allow_unsigned: bool,
) -> Result<(sgard_garden::PullPlan, usize, Option<String>)> {
    let head = block_on(async {
        within(
            o.timeouts.total,
            &o.remote.addr,
            "asking what a pull would bring",
            async {
                let mut c = Client::connect(o).await?;
                c.pull_manifest().await
            },
        )
        .await?
    })??;
    // Judged as the pull would judge it, recording nothing.
    let checked = check_head(g, &o.remote.addr, &head, allow_unsigned, false)?;
    let theirs = head.manifest;
    // The content the pull would fetch (not the snapshot documents).
    let missing = g.missing_for(&theirs, &[])?.len();
    let base = g.sync_base_known(
        &SyncKey::new(&o.remote.addr, &head.garden),
        sgard_garden::head_id_of(&theirs),
        &checked.history,
    );
    let plan = g.plan_pull(&theirs, base, side, trust)?;
    Ok((plan, missing, checked.newly_trusted))
}

/// The server's manifest (for `list --remote`).
pub fn remote_manifest(o: &Opts) -> Result<Manifest> {
    block_on(async {
        let mut c = Client::connect(o).await?;
        Ok::<_, anyhow::Error>(c.pull_manifest().await?.manifest)
    })?
}

/// Runs the server's prune.
pub fn remote_prune(o: &Opts) -> Result<i32> {
    block_on(async {
        let mut c = Client::connect(o).await?;
        c.prune().await
    })?
}

/// Whether `path` exists (used to decide on repository creation).
pub fn exists(path: &Path) -> bool {
    path.join(sgard_manifest::MANIFEST_FILE).exists()
}

/// The server's view of the machines of this garden (`sgard fleet`).
///
/// # Errors
/// Connection errors; a server without the view (the Go sgardd) says so.
pub fn fleet(o: &Opts) -> Result<v1::FleetResponse> {
    block_on(async {
        let mut c = Client::connect(o).await?;
        c.fleet().await.map_err(|e| {
            if format!("{e:#}").to_lowercase().contains("unimplemented") {
                anyhow!(
                    "the server at {} keeps no fleet view (a Go sgardd?); sgard's own sgardd does",
                    o.remote.addr
                )
            } else {
                e
            }
        })
    })?
}
