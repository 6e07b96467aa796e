//! # sgard-server: `sgardd`, the GardenSync service
//!
//! The service is the protocol's front: it authenticates callers, finds
//! their garden, bounds what they send, logs and counts every call, and
//! hands the work to a [`Backend`]: [`local::Local`] keeps each garden as
//! an sgard repository in a folder (the same `Garden` methods as the CLI,
//! under the repository lock), [`object::Object`] keeps every garden in an
//! object store through `sgard-depot`, for replicas without local state.
//! Rules the Go server breaks and this one keeps: pushed blobs are hashed
//! while streamed (bounded memory) and dropped with `DATA_LOSS` when they do
//! not match; a manifest is installed only if it validates and every blob it
//! names is stored; push state is per client, never server-wide; pushes are
//! fast-forwards of the head the client last synced with; prune spares young
//! blobs (pushes in progress); nonces are accepted once.

pub mod auth;
pub mod error;
pub mod fleet;
pub mod health;
pub mod local;
pub mod metrics;
pub mod migrate;
pub mod object;
pub mod service;

use std::collections::HashSet;
use std::pin::Pin;
use std::time::Duration;

use sgard_garden::Base;
use sgard_manifest::history::Record;
use sgard_manifest::{Manifest, Timestamp};
pub use sgard_proto::blobs::Piece;
use sgard_store::Hash;
use tokio_stream::Stream;

pub use crate::error::{Error, Result};
pub use crate::service::{Service, serve};

/// How the server is run.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The largest file accepted (`--max-file-size`), whole or as the
    /// content of a chunk list; also the largest object of any kind.
    pub max_blob: u64,
    /// Push streams allowed at once.
    pub max_streams: usize,
    /// How long a push past `max_streams` waits for a free stream before it
    /// is refused (`RESOURCE_EXHAUSTED`; sgard clients then try again).
    pub queue_wait: Duration,
    /// Unreferenced blobs younger than this survive a prune.
    pub prune_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_blob: 1 << 30,
            max_streams: 16,
            queue_wait: Duration::from_secs(10),
            prune_grace: Duration::from_secs(3600),
        }
    }
}

pub use sgard_proto::wire::{BUSY, DEFAULT_GARDEN, REAUTH_TYPE_URL, RpcStatus};

/// A push's manifest, as the client sent it.
pub struct Push {
    /// The manifest.
    pub manifest: Manifest,
    /// The history records pushed with it.
    pub history: Vec<Record>,
    /// The server head the client last synced with.
    pub base: Base,
    /// Only decide and list what is missing; install nothing.
    pub negotiate: bool,
    /// More blobs the client can send (its snapshots').
    pub extra: Vec<Hash>,
    /// The head statement and its signature, checked (see `signed_head`).
    pub signature: Option<(String, String)>,
    /// The purges the client made or applied, each signed (checked: a good
    /// signature of its statement).
    pub purges: Vec<sgard_manifest::purges::Purge>,
}

/// What a pull asks for.
pub struct Pull {
    /// The contents (or chunks).
    pub hashes: Vec<Hash>,
    /// Chunk lists for content stored chunked.
    pub lists: bool,
    /// The hashes name chunks.
    pub chunks: bool,
}

/// What a machine says after a sync (the fleet view).
pub struct Report {
    /// Its host name.
    pub host: String,
    /// Its sgard version.
    pub version: String,
    /// The head it has.
    pub head: Hash,
    /// What it did.
    pub op: fleet::Op,
}

/// A garden's machines, and what is needed to judge where each is.
pub struct FleetView {
    /// The garden's head.
    pub head: Hash,
    /// Every head its history names.
    pub known: HashSet<Hash>,
    /// The machines.
    pub machines: Vec<fleet::Machine>,
}

/// A piece of a stream of objects (see [`sgard_proto::blobs::Piece`]).
pub type Pieces = Pin<Box<dyn Stream<Item = Result<Piece>> + Send>>;

/// The head of a garden, as a pull takes it.
pub struct HeadView {
    /// Its manifest.
    pub manifest: Manifest,
    /// Its id.
    pub id: Hash,
    /// The shared history.
    pub history: Vec<Record>,
    /// The size of each blob the manifest and history name.
    pub sizes: Vec<(Hash, u64)>,
    /// The head statement and signature pushed with it.
    pub signed: Option<(String, String)>,
    /// The purges the garden applied, oldest first, each with its
    /// signature.
    pub purges: Vec<sgard_manifest::purges::Purge>,
}

/// What a push was told: the rule's verdict
/// ([`sgard_garden::rules::push_verdict`]).
pub use sgard_garden::rules::Verdict as Decision;

/// The answer to a push's manifest.
#[derive(Clone, Debug)]
pub struct PushOutcome {
    /// The decision.
    pub decision: Decision,
    /// What the server lacks of it.
    pub missing: Vec<Hash>,
    /// When the server's head was last updated (a Go client's notion).
    pub server_updated: Option<Timestamp>,
    /// The server's head (after the push, when installed).
    pub head: Option<Hash>,
}

/// Where and how gardens are kept: the work of every RPC, for one garden,
/// in domain types and a domain [`Error`] (the gRPC service maps both).
#[tonic::async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The garden's head, as `PullManifest` answers it.
    async fn pull_manifest(&self, garden: &str) -> Result<HeadView>;
    /// Decides a push (and installs it unless it negotiates).
    async fn push_manifest(&self, garden: &str, who: &str, push: Push) -> Result<PushOutcome>;
    /// Stores pushed objects (and installs a Go client's manifest); how
    /// many were stored.
    async fn push_blobs(&self, garden: &str, who: &str, pieces: Pieces) -> Result<u64>;
    /// Streams objects to a puller.
    async fn pull_blobs(&self, garden: &str, pull: Pull) -> Result<Pieces>;
    /// Which of these chunks the garden lacks.
    async fn missing_chunks(&self, garden: &str, hashes: Vec<Hash>) -> Result<Vec<Hash>>;
    /// Deletes what nothing needs; how many blobs went.
    async fn prune(&self, garden: &str) -> Result<u64>;
    /// Records what a machine says of itself at `now` (unix seconds).
    async fn report(&self, garden: &str, who: &str, report: Report, now: i64) -> Result<()>;
    /// The garden's machines.
    async fn fleet(&self, garden: &str) -> Result<FleetView>;
    /// Whether a login nonce is used for the first time (by any replica).
    async fn first_use_of_nonce(&self, nonce: &[u8], ts: i64) -> Result<bool>;
    /// The garden's identity, kept with the garden (made at first ask), the
    /// same through every replica: clients key their sync state by it, not
    /// by the address they dialled.
    async fn garden_id(&self, garden: &str) -> Result<String>;
}
