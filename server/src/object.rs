//! The object-store backend: every garden in an object store (S3, or a
//! folder or memory through the same code), through `sgard-depot`, so any
//! number of `sgardd` replicas serve the same gardens with no state of
//! their own.
//!
//! A garden is content-addressed objects (blobs, chunk lists, chunks; the
//! manifest, history, sizes and signature of each head are blobs too) and
//! one small document, `head`, naming the head's objects. A push writes its
//! objects first (idempotent) and then moves `head` by a conditional write
//! from the version it read: of two pushes racing from one head through two
//! replicas, exactly one moves it; the other is refused as "the server
//! changed" and succeeds after a pull. A replica killed mid-push leaves only
//! objects nothing names (a prune frees them). The login nonces and the
//! token key are documents of the server's own, shared by every replica.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use sgard_depot::{
    Cond, Depot, DocName, Garden as GardenName, Kind as ObjKind, Scope, Version, Written,
};
use sgard_garden::rules::{self, Live, Verdict, push_verdict};
use sgard_garden::{Base, Env, head_id_of};
use sgard_manifest::history::{History, Reason, Record};
use sgard_manifest::purges::{Purge, PurgeLog};
use sgard_manifest::{Manifest, Timestamp};
use sgard_proto::CHUNK_SIZE;
use sgard_store::Hash;
use sgard_store::chunks::ChunkList;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

use crate::fleet;
use crate::{
    Backend, Decision, Error, FleetView, HeadView, Pieces, Pull, Push, PushOutcome, Report,
};
use sgard_proto::blobs::{Kind, MAX_LIST, Piece};
use sgard_proto::wire::WINDOW_SECS;

/// The document naming a garden's head.
const HEAD: &str = "head";
/// The first line of a head document.
const HEAD_MAGIC: &str = "sgard-head 1";
/// The server's token key document.
const TOKEN_KEY: &str = "token-key";
/// A garden's identity document: 32 hex digits, written once.
const GARDEN_ID: &str = "garden-id";
/// How long a prune's list of condemned objects holds pushes back from
/// naming any of them; past it the list is ignored (its prune died).
const CONDEMNED_FOR: Duration = Duration::from_secs(3600);
/// How long after it condemned objects a prune may still delete them: well
/// inside [`CONDEMNED_FOR`], so that no replica judges the list expired
/// (clocks a little apart) while it is being carried out.
const DELETE_WITHIN: Duration = Duration::from_secs(1800);
/// How many times a push or a prune that lost a race with the other starts
/// again before it gives up.
const FENCE_TRIES: usize = 4;
/// The most a text read whole from the store may have (a head's manifest,
/// history or sizes, a snapshot): far more than any reply can carry, so
/// only a damaged or planted object is larger.
const MAX_TEXT: u64 = 64 << 20;

/// Gardens in an object store.
pub struct Object {
    depot: Depot,
    env: Arc<dyn Fn() -> Result<Env, String> + Send + Sync>,
    max_blob: u64,
    prune_grace: Duration,
    /// Test hook: run once when a push is judged again after a prune's
    /// mark failed its compare-and-swap, before it reads the head again
    /// (so a test can land another push in that gap).
    #[cfg(test)]
    on_fenced: std::sync::Mutex<Option<FencedHook>>,
}

#[cfg(test)]
type FencedHook = Box<dyn FnOnce(Depot) -> futures_util::future::BoxFuture<'static, ()> + Send>;

/// What a head document names.
#[derive(Clone, Debug, Default)]
struct HeadDoc {
    manifest: Option<Hash>,
    history: Option<Hash>,
    sizes: Option<Hash>,
    statement: Option<Hash>,
    signature: Option<Hash>,
    /// The purge log (`purges.yaml`'s text) of the purges applied.
    purges: Option<Hash>,
    /// A prune at work: the text listing the objects it is deleting, and
    /// when it listed them (unix seconds). No push may name one of them
    /// while this stands (see [`Object::prune`]).
    condemned: Option<(Hash, i64)>,
}

impl HeadDoc {
    /// Whether both name the same head (whatever prune is at work).
    fn same_head(&self, other: &HeadDoc) -> bool {
        (
            self.manifest,
            self.history,
            self.sizes,
            self.statement,
            self.signature,
            self.purges,
        ) == (
            other.manifest,
            other.history,
            other.sizes,
            other.statement,
            other.signature,
            other.purges,
        )
    }

    /// The list of a prune at work now: `None` when there is none, or when
    /// its time is more than [`CONDEMNED_FOR`] away from now (that prune
    /// died, or the time is damaged).
    fn condemning(&self) -> Option<Hash> {
        self.condemned.and_then(|(h, at)| {
            (sgard_proto::wire::unix_now().abs_diff(at) < CONDEMNED_FOR.as_secs()).then_some(h)
        })
    }

    fn to_text(&self) -> String {
        let mut s = format!("{HEAD_MAGIC}\n");
        for (k, v) in [
            ("manifest", self.manifest),
            ("history", self.history),
            ("sizes", self.sizes),
            ("statement", self.statement),
            ("signature", self.signature),
            ("purges", self.purges),
        ] {
            if let Some(h) = v {
                s.push_str(&format!("{k} {}\n", h.to_hex()));
            }
        }
        if let Some((h, at)) = self.condemned {
            s.push_str(&format!("condemned {} {at}\n", h.to_hex()));
        }
        s
    }

    fn parse(text: &str) -> Result<HeadDoc, Error> {
        let bad = || Error::damaged("the garden's head document is damaged");
        let mut lines = text.lines();
        if lines.next() != Some(HEAD_MAGIC) {
            return Err(bad());
        }
        let mut d = HeadDoc::default();
        for l in lines {
            let (k, v) = l.split_once(' ').ok_or_else(bad)?;
            if k == "condemned" {
                let (h, at) = v.split_once(' ').ok_or_else(bad)?;
                let h = Hash::parse(h).map_err(|_| bad())?;
                d.condemned = Some((h, at.parse().map_err(|_| bad())?));
                continue;
            }
            let h = Some(Hash::parse(v).map_err(|_| bad())?);
            match k {
                "manifest" => d.manifest = h,
                "history" => d.history = h,
                "sizes" => d.sizes = h,
                "statement" => d.statement = h,
                "signature" => d.signature = h,
                "purges" => d.purges = h,
                _ => return Err(bad()),
            }
        }
        Ok(d)
    }
}

/// A garden's head as `sgardd migrate` moves it.
pub struct Head {
    /// The manifest.
    pub manifest: Manifest,
    /// The history.
    pub history: Vec<Record>,
    /// The head statement and its signature.
    pub signed: Option<(String, String)>,
    /// The purges the garden applied (its history is renamed already).
    pub purges: Vec<Purge>,
}

/// What became of a head a migration brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    /// It is the garden's head now.
    Installed(Hash),
    /// The garden had it already.
    AlreadyThere(Hash),
    /// The garden has another head (named): left as it is.
    Refused(Hash),
}

/// What the purges a push carries do to a garden (see
/// [`Object::plan_purges`]): installed with the push's head.
#[derive(Clone, Debug, Default)]
struct PurgeApply {
    /// Each snapshot a purge renamed: its old id, its new one.
    renamed: HashMap<Hash, Hash>,
    /// The contents the purges removed.
    gone: BTreeSet<Hash>,
    /// The garden's purge log with the new purges (`None`: unchanged).
    log: Option<PurgeLog>,
}

impl PurgeApply {
    /// What the sweep after the install deletes whatever its age.
    fn forced(&self) -> HashSet<Hash> {
        self.gone
            .iter()
            .chain(self.renamed.keys())
            .copied()
            .collect()
    }
}

/// What a prune is about to delete, and the head it judged by.
struct PrunePlan {
    /// `None`: the garden has no head document (the mark creates one).
    version: Option<Version>,
    doc: HeadDoc,
    objects: Vec<(ObjKind, Hash)>,
}

/// A prune's mark on the head: its list, and when it was made.
struct Marked {
    list: Hash,
    at: i64,
    since: std::time::Instant,
    objects: Vec<(ObjKind, Hash)>,
}

/// How one try to move the head ended.
enum Installed {
    /// The head is the new one.
    Done(Hash),
    /// Another push moved the head first.
    Lost,
    /// A prune marked the head (or took its mark away) since it was read.
    Fenced,
}

/// A garden as read from its head: what every RPC judges by.
struct State {
    /// The head document's version (`None`: the garden has no head yet).
    version: Option<Version>,
    manifest: Manifest,
    history: Vec<Record>,
    /// The size of every content the head and its history name.
    sizes: HashMap<Hash, u64>,
    /// The head's statement and signature.
    signed: Option<(String, String)>,
    /// The purges applied.
    purges: PurgeLog,
    /// The head document itself.
    doc: HeadDoc,
}

/// A depot's error as the client is answered: a store that failed is
/// `UNAVAILABLE` with its cause (the depot's words end with it: what the
/// store answered, or why it could not be reached), and a bucket that is
/// gone is named as such, never an empty garden.
fn depot_error(e: sgard_depot::Error) -> Error {
    match e {
        sgard_depot::Error::NotFound { .. } => Error::not_found(e.to_string()),
        sgard_depot::Error::Corrupt { .. }
        | sgard_depot::Error::HashMismatch { .. }
        | sgard_depot::Error::TooLarge { .. }
        | sgard_depot::Error::BadDoc { .. } => Error::damaged(e.to_string()),
        // Its words name the object store already.
        sgard_depot::Error::NoBucket { .. } => Error::unavailable(e.to_string()),
        other => Error::unavailable(format!("the object store: {other}")),
    }
}

fn doc(name: &str) -> Result<DocName, Error> {
    DocName::new(name).map_err(|e| Error::internal(e.to_string()))
}

fn garden_name(g: &str) -> Result<GardenName, Error> {
    GardenName::new(g).map_err(|e| Error::invalid(e.to_string()))
}

/// The token key a `token-key` document holds: 64 hex digits (`None`:
/// anything else, whoever wrote it).
fn token_key_of(stored: &[u8]) -> Option<[u8; 32]> {
    let text = stored.trim_ascii();
    if text.len() != 64 || !text.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut key = [0u8; 32];
    for (k, pair) in key.iter_mut().zip(text.chunks_exact(2)) {
        *k = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(key)
}

fn text_of(b: &Bytes, what: &str) -> Result<String, Error> {
    String::from_utf8(b.to_vec()).map_err(|_| Error::damaged(format!("{what} is not text")))
}

impl Object {
    /// The backend over `depot`.
    pub fn new(
        depot: Depot,
        env: Arc<dyn Fn() -> Result<Env, String> + Send + Sync>,
        max_blob: u64,
        prune_grace: Duration,
    ) -> Self {
        Object {
            depot,
            env,
            max_blob,
            prune_grace,
            #[cfg(test)]
            on_fenced: std::sync::Mutex::new(None),
        }
    }

    /// The key every replica signs tokens with: made by the first replica
    /// that asks, read by the others.
    ///
    /// # Errors
    /// The object store's errors.
    pub async fn token_secret(&self) -> anyhow::Result<[u8; 32]> {
        let name = doc(TOKEN_KEY).map_err(|s| anyhow::anyhow!(s.message().to_owned()))?;
        let mut fresh = [0u8; 32];
        getrandom::fill(&mut fresh).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
        let hex: String = fresh.iter().map(|b| format!("{b:02x}")).collect();
        self.depot
            .write_once(Scope::Server, &name, hex.as_bytes())
            .await?;
        let Some((text, _)) = self.depot.read_doc(Scope::Server, &name).await? else {
            anyhow::bail!("the server's token key vanished from the object store");
        };
        token_key_of(&text)
            .ok_or_else(|| anyhow::anyhow!("the server's token key in the object store is damaged"))
    }

    /// The id stored with garden `g`, if it has one.
    async fn stored_garden_id(&self, g: &GardenName) -> Result<Option<String>, Error> {
        let Some((text, _)) = self
            .depot
            .read_doc(Scope::Garden(g), &doc(GARDEN_ID)?)
            .await
            .map_err(depot_error)?
        else {
            return Ok(None);
        };
        let id = text.trim_ascii();
        if id.len() != 32 || !id.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(Error::damaged(format!(
                "the {GARDEN_ID} document of garden {} in the object store is damaged (not 32 \
                 hex digits): restore it from a backup of the bucket, or delete it to give the \
                 garden a new id (every machine's next sync of it then starts with no base)",
                g.as_str()
            )));
        }
        Ok(Some(String::from_utf8_lossy(id).into_owned()))
    }

    /// Records `id` as garden `garden`'s (`sgardd migrate` carries a
    /// garden's id with its head, so its machines carry on).
    pub(crate) async fn set_garden_id(&self, garden: &str, id: &str) -> Result<(), Error> {
        let g = garden_name(garden)?;
        let name = doc(GARDEN_ID)?;
        for _ in 0..FENCE_TRIES {
            let cond = match self
                .depot
                .read_doc(Scope::Garden(&g), &name)
                .await
                .map_err(depot_error)?
            {
                Some((text, _)) if text.trim_ascii() == id.as_bytes() => return Ok(()),
                Some((_, v)) => Cond::Version(v),
                None => Cond::Absent,
            };
            let w = self
                .depot
                .write_doc(Scope::Garden(&g), &name, id.as_bytes(), cond)
                .await
                .map_err(depot_error)?;
            if matches!(w, Written::Done(_)) {
                return Ok(());
            }
        }
        Err(Error::retry(format!(
            "the id of garden {garden} kept changing while it was written"
        )))
    }

    /// The id garden `garden` has, if any.
    pub(crate) async fn garden_id_if_any(&self, garden: &str) -> Result<Option<String>, Error> {
        self.stored_garden_id(&garden_name(garden)?).await
    }

    /// The depot the gardens are in.
    pub(crate) fn depot(&self) -> &Depot {
        &self.depot
    }

    /// The server's token key, when one was made.
    pub(crate) async fn stored_token_key(&self) -> Result<Option<[u8; 32]>, Error> {
        let Some((text, _)) = self
            .depot
            .read_doc(Scope::Server, &doc(TOKEN_KEY)?)
            .await
            .map_err(depot_error)?
        else {
            return Ok(None);
        };
        token_key_of(&text)
            .map(Some)
            .ok_or_else(|| Error::damaged("the server's token key is damaged"))
    }

    /// Stores `key` as the server's token key unless it has one; `true`
    /// when stored.
    pub(crate) async fn adopt_token_key(&self, key: &[u8; 32]) -> Result<bool, Error> {
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        self.depot
            .write_once(Scope::Server, &doc(TOKEN_KEY)?, hex.as_bytes())
            .await
            .map_err(depot_error)
    }

    /// The garden's head: its manifest, history and signature (`None`
    /// when it has none, or only an empty one).
    pub(crate) async fn export_head(&self, garden: &str) -> Result<Option<Head>, Error> {
        let g = garden_name(garden)?;
        let s = self.load(&g).await?;
        if s.manifest.files.is_empty() && s.history.is_empty() {
            return Ok(None);
        }
        Ok(Some(Head {
            manifest: s.manifest,
            history: s.history,
            signed: s.signed,
            purges: s.purges.purges,
        }))
    }

    /// Makes `head` the garden's head if it has none, this one already, or
    /// one of its history (an earlier run of the migration). Every object
    /// it names must be stored first.
    pub(crate) async fn import_head(&self, garden: &str, head: Head) -> Result<Imported, Error> {
        let g = garden_name(garden)?;
        let s = self.load(&g).await?;
        let id = head_id_of(&head.manifest);
        if head_id_of(&s.manifest) == id {
            return Ok(Imported::AlreadyThere(id));
        }
        let theirs = head_id_of(&s.manifest);
        let empty = s.manifest.files.is_empty() && s.history.is_empty();
        if !empty && !head.history.iter().any(|r| r.id == theirs) {
            return Ok(Imported::Refused(theirs));
        }
        // The purges come as the log they were: the history is renamed.
        let mut log = s.purges.clone();
        for p in head.purges {
            if !log.purges.iter().any(|q| q.id() == p.id()) {
                log.purges.push(p);
            }
        }
        let apply = PurgeApply {
            log: (log != s.purges).then_some(log),
            ..PurgeApply::default()
        };
        match self
            .install_purging(
                &g,
                s,
                head.manifest,
                head.history,
                "sgardd migrate",
                head.signed,
                &[],
                &apply,
            )
            .await?
        {
            Some(id) => Ok(Imported::Installed(id)),
            None => Err(Error::retry(
                "the garden's head changed during the migration; run it again",
            )),
        }
    }

    /// The fleet records of the garden.
    pub(crate) async fn machines(&self, garden: &str) -> Result<Vec<fleet::Machine>, Error> {
        Ok(self.fleet(garden).await?.machines)
    }

    /// Stores `m` as a fleet record of the garden unless it has one for the
    /// machine; `true` when stored.
    pub(crate) async fn adopt_machine(
        &self,
        garden: &str,
        m: &fleet::Machine,
    ) -> Result<bool, Error> {
        let g = garden_name(garden)?;
        let name = doc(&format!("fleet-{}", fleet::record_name(&m.key, &m.host)))?;
        self.depot
            .write_once(Scope::Garden(&g), &name, m.to_text().as_bytes())
            .await
            .map_err(depot_error)
    }

    async fn get_text(&self, g: &GardenName, h: &Hash, what: &str) -> Result<String, Error> {
        let b = self
            .depot
            .get_object_within(g, ObjKind::Blob, h, MAX_TEXT)
            .await
            .map_err(depot_error)?;
        text_of(&b, what)
    }

    async fn put_text(&self, g: &GardenName, text: &str) -> Result<Hash, Error> {
        let h = Hash::of(text.as_bytes());
        self.depot
            .put_object(g, ObjKind::Blob, &h, Bytes::from(text.to_owned()))
            .await
            .map_err(depot_error)?;
        Ok(h)
    }

    async fn load(&self, g: &GardenName) -> Result<State, Error> {
        let Some((text, version)) = self
            .depot
            .read_doc(Scope::Garden(g), &doc(HEAD)?)
            .await
            .map_err(depot_error)?
        else {
            return Ok(State {
                version: None,
                manifest: Manifest::new(Timestamp::zero()),
                history: Vec::new(),
                sizes: HashMap::new(),
                signed: None,
                purges: PurgeLog::default(),
                doc: HeadDoc::default(),
            });
        };
        let d = HeadDoc::parse(&text_of(&text, "the head document")?)?;
        let manifest = match d.manifest {
            Some(h) => Manifest::from_yaml(&self.get_text(g, &h, "the manifest").await?)
                .map_err(|e| Error::damaged(format!("the garden's manifest: {e}")))?,
            None => Manifest::new(Timestamp::zero()),
        };
        let history = match d.history {
            Some(h) => {
                History::from_yaml(&self.get_text(g, &h, "the history").await?)
                    .map_err(|e| Error::damaged(format!("the garden's history: {e}")))?
                    .records
            }
            None => Vec::new(),
        };
        let mut sizes = HashMap::new();
        if let Some(h) = d.sizes {
            for line in self.get_text(g, &h, "the sizes").await?.lines() {
                if let Some((h, n)) = line.split_once(' ')
                    && let (Ok(h), Ok(n)) = (Hash::parse(h), n.parse())
                {
                    sizes.insert(h, n);
                }
            }
        }
        let signed = match (d.statement, d.signature) {
            (Some(s), Some(sig)) => Some((
                self.get_text(g, &s, "the head statement").await?,
                self.get_text(g, &sig, "the head signature").await?,
            )),
            _ => None,
        };
        let purges = match d.purges {
            Some(h) => PurgeLog::parse(
                &self.get_text(g, &h, "the purge log").await?,
                std::path::Path::new("the garden's purge log"),
            )
            .map_err(|e| Error::damaged(format!("the garden's purge log: {e}")))?,
            None => PurgeLog::default(),
        };
        Ok(State {
            version: Some(version),
            manifest,
            history,
            sizes,
            signed,
            purges,
            doc: d,
        })
    }

    /// The size of content `h` as stored: a whole blob, or chunked (its
    /// list's size); `None` when it is not stored. With `chunks`, chunked
    /// content counts as stored only when every chunk its list names is:
    /// a list stored by a push a prune refused can outlive a chunk that
    /// prune deleted (it was stored after the prune judged, so its chunks
    /// were not kept), and would otherwise make a later push name content
    /// nobody can pull, never sent again.
    async fn content_size(
        &self,
        g: &GardenName,
        h: &Hash,
        chunks: bool,
    ) -> Result<Option<u64>, Error> {
        use futures_util::StreamExt as Futures;
        if let Some(n) = self
            .depot
            .object_size(g, ObjKind::Blob, h)
            .await
            .map_err(depot_error)?
        {
            return Ok(Some(n));
        }
        let list = match self.depot.get_list(g, h).await {
            Ok(text) => match ChunkList::parse(&text_of(&text, "a chunk list")?) {
                Ok(l) => l,
                Err(_) => return Ok(None),
            },
            Err(sgard_depot::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(depot_error(e)),
        };
        if chunks {
            let sizes = Futures::map(
                futures_util::stream::iter(list.chunks.iter().copied()),
                |(c, _)| async move { self.depot.object_size(g, ObjKind::Chunk, &c).await },
            );
            let mut sizes = Futures::buffer_unordered(sizes, LIST_READS);
            while let Some(got) = Futures::next(&mut sizes).await {
                if got.map_err(depot_error)?.is_none() {
                    return Ok(None);
                }
            }
        }
        Ok(Some(list.size))
    }

    /// The contents `m`, `history` and `extra` name that the garden lacks.
    async fn missing(
        &self,
        g: &GardenName,
        s: &State,
        m: &Manifest,
        history: &[Record],
        extra: &[Hash],
    ) -> Result<Vec<Hash>, Error> {
        let mut want: BTreeSet<Hash> = m.referenced_blobs().collect();
        want.extend(history.iter().map(|r| r.id));
        want.extend(extra.iter().copied());
        let mut out = Vec::new();
        for h in want {
            if !s.sizes.contains_key(&h) && self.content_size(g, &h, true).await?.is_none() {
                out.push(h);
            }
        }
        Ok(out)
    }

    fn now(&self) -> Result<Timestamp, Error> {
        Ok((self.env)().map_err(Error::internal)?.now)
    }

    /// Installs `m` (pushed with `history` by `who`) as the garden's head by
    /// a conditional write from the head `s` was read at. `Ok(None)`: the
    /// head moved meanwhile (another replica's push won).
    /// Makes `m` with `history` the garden's head, replacing the head `s`
    /// was read from: the new head, or `None` when another push moved the
    /// head first. A prune that marked the head since `s` was read does not
    /// count as a move: the push reads the head again and tries again.
    // (the parts of one push, as each caller has them)
    #[allow(clippy::too_many_arguments)]
    async fn install(
        &self,
        g: &GardenName,
        s: State,
        m: Manifest,
        history: Vec<Record>,
        who: &str,
        signature: Option<(String, String)>,
        extra: &[Hash],
    ) -> Result<Option<Hash>, Error> {
        self.install_purging(
            g,
            s,
            m,
            history,
            who,
            signature,
            extra,
            &PurgeApply::default(),
        )
        .await
    }

    /// As [`Object::install`], the head carrying what `apply` does too
    /// (the history renamed, the purge log grown).
    // (the parts of one push, as each caller has them)
    #[allow(clippy::too_many_arguments)]
    async fn install_purging(
        &self,
        g: &GardenName,
        s: State,
        m: Manifest,
        history: Vec<Record>,
        who: &str,
        signature: Option<(String, String)>,
        extra: &[Hash],
        apply: &PurgeApply,
    ) -> Result<Option<Hash>, Error> {
        // The head the caller judged the push by (its base, its time).
        let judged = s.doc.clone();
        let mut s = s;
        for _ in 0..FENCE_TRIES {
            match self
                .install_once(
                    g,
                    s,
                    m.clone(),
                    history.clone(),
                    who,
                    signature.clone(),
                    extra,
                    apply,
                )
                .await?
            {
                Installed::Done(h) => return Ok(Some(h)),
                Installed::Lost => return Ok(None),
                Installed::Fenced => {
                    #[cfg(test)]
                    if let Some(hook) = self.on_fenced.lock().ok().and_then(|mut h| h.take()) {
                        hook(self.depot.clone()).await;
                    }
                    s = self.load(g).await?;
                    // Another push may have landed since the swap failed:
                    // this one was judged against the head before it.
                    if !s.doc.same_head(&judged) {
                        return Ok(None);
                    }
                }
            }
        }
        Err(Error::retry(
            "the garden's head kept changing under a prune; push again",
        ))
    }

    /// Refuses a push that names something a prune at work is deleting
    /// (the head `s` carries its list): its content, a chunk of it, a
    /// snapshot of `history` or what such a snapshot names, or what
    /// `texts` lists (the head's own texts, and the content the pushing
    /// client says its snapshots name). What the head `s` names is safe:
    /// no prune condemns it.
    async fn spare_condemned(
        &self,
        g: &GardenName,
        s: &State,
        m: &Manifest,
        history: &[Record],
        texts: &[Hash],
    ) -> Result<(), Error> {
        let Some(list) = s.doc.condemning() else {
            return Ok(());
        };
        let text = match self
            .depot
            .get_object_within(g, ObjKind::Blob, &list, MAX_TEXT)
            .await
        {
            Ok(b) => text_of(&b, "a prune's list")?,
            // The prune ended: it took its mark away before it deleted its
            // list, so the head moved since `s` and this push's
            // compare-and-swap fails; it reads the head again.
            Err(sgard_depot::Error::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(depot_error(e)),
        };
        // Contents (whole blobs, chunk lists) and chunks apart: a chunk may
        // have the bytes, and so the name, of a whole blob the head keeps.
        let mut condemned: HashSet<Hash> = HashSet::new();
        let mut condemned_chunks: HashSet<Hash> = HashSet::new();
        for l in text.lines() {
            let Some((kind, h)) = l.split_once(' ') else {
                continue;
            };
            let Ok(h) = Hash::parse(h) else {
                continue;
            };
            if kind == ObjKind::Chunk.dir() {
                condemned_chunks.insert(h);
            } else if kind == ObjKind::Blob.dir() || kind == ObjKind::ChunkList.dir() {
                condemned.insert(h);
            }
        }
        let mut named: BTreeSet<Hash> = m.referenced_blobs().collect();
        named.extend(texts.iter().copied());
        let known: HashSet<Hash> = s.history.iter().map(|r| r.id).collect();
        for r in history.iter().filter(|r| !known.contains(&r.id)) {
            named.insert(r.id);
            // A snapshot not stored whole (chunked) names what `texts`
            // say; one the store fails to give now cannot be judged.
            match self
                .depot
                .get_object_within(g, ObjKind::Blob, &r.id, MAX_TEXT)
                .await
            {
                Ok(t) => {
                    if let Ok(snap) = Manifest::from_yaml(&String::from_utf8_lossy(&t)) {
                        named.extend(snap.referenced_blobs());
                    }
                }
                Err(sgard_depot::Error::NotFound { .. }) => {}
                Err(e) => return Err(depot_error(e)),
            }
        }
        let mut chunks = Vec::new();
        for h in named.iter().filter(|h| !s.sizes.contains_key(h)) {
            match self.depot.get_list(g, h).await {
                Ok(text) => {
                    if let Ok(l) = ChunkList::parse(&text_of(&text, "a chunk list")?) {
                        chunks.extend(l.chunks.iter().map(|(c, _)| *c));
                    }
                }
                Err(sgard_depot::Error::NotFound { .. }) => {}
                Err(e) => return Err(depot_error(e)),
            }
        }
        if named.iter().any(|h| condemned.contains(h))
            || chunks.iter().any(|c| condemned_chunks.contains(c))
        {
            return Err(Error::retry(
                "a prune running on the server is deleting content this push names; \
                 push again in a minute",
            ));
        }
        Ok(())
    }

    // (the parts of one push, as each caller has them)
    #[allow(clippy::too_many_arguments)]
    async fn install_once(
        &self,
        g: &GardenName,
        s: State,
        mut m: Manifest,
        history: Vec<Record>,
        who: &str,
        signature: Option<(String, String)>,
        extra: &[Hash],
        apply: &PurgeApply,
    ) -> Result<Installed, Error> {
        if signature.is_none() {
            sgard_garden::keep_go_dropped(&mut m, &s.manifest);
        }
        // Checked again here, with the snapshots' content the push named
        // (`extra`): a prune may have run whole since the caller checked.
        let lacking = self.missing(g, &s, &m, &history, extra).await?;
        if let Some(h) = lacking.first() {
            return Err(Error::refused(format!(
                "the push names {} blob(s) the server does not have (first: {}); push again \
                 to send them",
                lacking.len(),
                h.short(12)
            )));
        }
        let before = head_id_of(&s.manifest);
        let head = head_id_of(&m);
        // The history: the server's, and the records it lacks, in time order.
        let mut records = s.history.clone();
        let have: HashSet<(Hash, String, Timestamp)> = records
            .iter()
            .map(|r| (r.id, r.reason.as_str().to_owned(), r.time))
            .collect();
        records.extend(
            history
                .into_iter()
                .filter(|r| !have.contains(&(r.id, r.reason.as_str().to_owned(), r.time))),
        );
        let mut records = rules::parents_first(records);
        if !apply.renamed.is_empty() {
            records = rules::rename_records(&records, &apply.renamed);
        }
        if !records.iter().any(|r| r.id == head) {
            records.push(Record {
                id: head,
                parent: records.last().map(|r| r.id),
                time: self.now()?,
                host: "sgardd".into(),
                machine: None,
                reason: Reason::Other("push".into()),
                message: Some(format!("pushed by {who}")),
                entries: m.files.len() as u64,
                bytes: 0,
                new_blobs: 0,
                head_before: Some(before),
            });
        }
        // The sizes of everything the head and its history name.
        let mut sizes = s.sizes.clone();
        // What a purge renamed or removed is no longer named (but for a
        // content the new head names: it stays).
        let head_names: HashSet<Hash> = m.referenced_blobs().collect();
        sizes.retain(|h, _| {
            !apply.renamed.contains_key(h) && (!apply.gone.contains(h) || head_names.contains(h))
        });
        let mut want: BTreeSet<Hash> = m.referenced_blobs().collect();
        want.extend(records.iter().map(|r| r.id));
        for h in want {
            // (what is not in the head's sizes was just found stored whole)
            if let std::collections::hash_map::Entry::Vacant(v) = sizes.entry(h)
                && let Some(n) = self.content_size(g, &h, false).await?
            {
                v.insert(n);
            }
        }
        let mut sizes_text: Vec<String> = sizes
            .iter()
            .map(|(h, n)| format!("{} {n}\n", h.to_hex()))
            .collect();
        sizes_text.sort_unstable();
        let yaml = m.to_yaml();
        let manifest = self.put_text(g, &yaml).await?;
        debug_assert_eq!(manifest, head);
        let records_named = records.clone();
        let history = self.put_text(g, &History { records }.to_yaml()).await?;
        let sizes = self.put_text(g, &sizes_text.concat()).await?;
        let (statement, signature) = match &signature {
            Some((st, sig)) => (
                Some(self.put_text(g, st).await?),
                Some(self.put_text(g, sig).await?),
            ),
            None => (None, None),
        };
        let purges = match &apply.log {
            Some(log) => Some(self.put_text(g, &log.to_yaml()).await?),
            None => s.doc.purges,
        };
        let texts: Vec<Hash> = [
            Some(manifest),
            Some(history),
            Some(sizes),
            statement,
            signature,
            purges,
        ]
        .into_iter()
        .flatten()
        .collect();
        let named: Vec<Hash> = texts.iter().chain(extra).copied().collect();
        self.spare_condemned(g, &s, &m, &records_named, &named)
            .await?;
        let d = HeadDoc {
            manifest: Some(manifest),
            history: Some(history),
            sizes: Some(sizes),
            statement,
            signature,
            purges,
            // A prune at work goes on after this push.
            condemned: s.doc.condemning().and(s.doc.condemned),
        };
        let cond = match &s.version {
            Some(v) => Cond::Version(v.clone()),
            None => Cond::Absent,
        };
        match self
            .depot
            .write_doc(Scope::Garden(g), &doc(HEAD)?, d.to_text().as_bytes(), cond)
            .await
            .map_err(depot_error)?
        {
            Written::Done(_) => Ok(Installed::Done(head)),
            Written::Conflict => {
                // The store's client retries a request whose reply was
                // lost, and the retry of a write that landed answers
                // Conflict: the head may be this very one.
                let now = self
                    .depot
                    .read_doc(Scope::Garden(g), &doc(HEAD)?)
                    .await
                    .map_err(depot_error)?
                    .and_then(|(text, _)| HeadDoc::parse(std::str::from_utf8(&text).ok()?).ok());
                Ok(match now {
                    Some(now) if now.manifest == Some(manifest) => Installed::Done(head),
                    // Only a prune marked or unmarked the head.
                    Some(now) if now.same_head(&s.doc) => Installed::Fenced,
                    _ => Installed::Lost,
                })
            }
        }
    }

    /// What a prune of garden `g` would delete now: every stored object
    /// older than the grace period that nothing names, with the head it
    /// judged by; `None` when there is nothing to delete.
    async fn prune_plan(
        &self,
        g: &GardenName,
        forced: &HashSet<Hash>,
    ) -> Result<Option<PrunePlan>, Error> {
        let g = g.clone();
        let s = self.load(&g).await?;
        let version = s.version.clone();
        if s.doc.condemning().is_some() {
            return Err(Error::retry(
                "another prune of this garden is running; try again once it ends",
            ));
        }
        // Everything the head, its history's snapshots and pending pushes
        // name (the rule of what is live), with the chunks of the chunked
        // ones.
        let mut live = Live::of(&s.manifest, &s.history);
        let d = &s.doc;
        live.add(
            [
                d.manifest,
                d.history,
                d.sizes,
                d.statement,
                d.signature,
                d.purges,
            ]
            .into_iter()
            .flatten(),
        );
        // What a snapshot (or a pending push) names is known only by
        // reading it: one that cannot be read (a damaged object, the store
        // failing for a moment) stops the prune, as in a folder store.
        let unreadable = |what: &str, h: &Hash, why: String| {
            Error::damaged(format!(
                "{what} {} cannot be read ({why}); nothing was pruned",
                h.short(12)
            ))
        };
        for id in live.snapshots().to_vec() {
            let t = self
                .get_text(&g, &id, "a snapshot")
                .await
                .map_err(|e| unreadable("snapshot", &id, e.message().to_owned()))?;
            let m =
                Manifest::from_yaml(&t).map_err(|e| unreadable("snapshot", &id, e.to_string()))?;
            live.add_doc(&m);
        }
        for name in self
            .depot
            .list_docs(Scope::Garden(&g))
            .await
            .map_err(depot_error)?
        {
            if !name.as_str().starts_with("pending-") {
                continue;
            }
            if let Some((t, _)) = self
                .depot
                .read_doc(Scope::Garden(&g), &name)
                .await
                .map_err(depot_error)?
            {
                if self.stale_pending(&String::from_utf8_lossy(&t)) {
                    // Never to be installed (see push_blobs): it goes, and
                    // protects nothing.
                    self.depot
                        .remove_doc(Scope::Garden(&g), &name)
                        .await
                        .map_err(depot_error)?;
                    continue;
                }
                for (k, h) in String::from_utf8_lossy(&t).lines().filter_map(|l| {
                    l.split_once(' ')
                        .and_then(|(k, h)| Some((k, Hash::parse(h).ok()?)))
                }) {
                    live.add([h]);
                    if k == "manifest" {
                        let t = self
                            .get_text(&g, &h, "a pending manifest")
                            .await
                            .map_err(|e| unreadable("pending push", &h, e.message().to_owned()))?;
                        let m = Manifest::from_yaml(&t)
                            .map_err(|e| unreadable("pending push", &h, e.to_string()))?;
                        live.add_doc(&m);
                    }
                }
            }
        }
        let keep = live.into_set();
        let grace = self.prune_grace;
        let young = |t: &SystemTime| t.elapsed().map_or(true, |age| age < grace);
        let aged = |all: &[(Hash, u64, SystemTime)]| -> HashMap<Hash, bool> {
            all.iter().map(|(h, _, t)| (*h, young(t))).collect()
        };
        let lists = self
            .depot
            .list_objects_aged(&g, ObjKind::ChunkList)
            .await
            .map_err(depot_error)?;
        let lists_young = aged(&lists);
        // What a purge removed goes whatever its age.
        let is_young = |ages: &HashMap<Hash, bool>, h: &Hash| {
            !forced.contains(h) && ages.get(h).copied().unwrap_or(true)
        };
        let lists_gone = rules::doomed(&keep, lists.iter().map(|(h, _, _)| *h), |h| {
            is_young(&lists_young, h)
        });
        // The chunks of every list that stays: those something names, and
        // the young ones (a push in progress stored them, its head comes
        // next; their chunks may be old ones it found already stored).
        let gone: HashSet<Hash> = lists_gone.iter().copied().collect();
        let mut chunks: HashSet<Hash> = HashSet::new();
        let mut forced_chunks: HashSet<Hash> = HashSet::new();
        for (h, _, _) in &lists {
            if gone.contains(h) {
                if forced.contains(h)
                    && let Ok(text) = self.depot.get_list(&g, h).await
                    && let Ok(l) = ChunkList::parse(&text_of(&text, "a chunk list")?)
                {
                    forced_chunks.extend(l.chunks.iter().map(|(c, _)| *c));
                }
                continue;
            }
            let text = self.depot.get_list(&g, h).await.map_err(depot_error)?;
            match ChunkList::parse(&text_of(&text, "a chunk list")?) {
                Ok(l) => chunks.extend(l.chunks.iter().map(|(c, _)| *c)),
                Err(why) => {
                    // Which chunks are needed is unknown: none go.
                    return Err(Error::damaged(format!(
                        "chunk list {h} is damaged ({why}); nothing was pruned"
                    )));
                }
            }
        }
        let blobs = self
            .depot
            .list_objects_aged(&g, ObjKind::Blob)
            .await
            .map_err(depot_error)?;
        let stored_chunks = self
            .depot
            .list_objects_aged(&g, ObjKind::Chunk)
            .await
            .map_err(depot_error)?;
        let (blobs_young, chunks_young) = (aged(&blobs), aged(&stored_chunks));
        let mut objects = Vec::new();
        objects.extend(
            rules::doomed(&keep, blobs.iter().map(|(h, _, _)| *h), |h| {
                is_young(&blobs_young, h)
            })
            .into_iter()
            .map(|h| (ObjKind::Blob, h)),
        );
        objects.extend(lists_gone.into_iter().map(|h| (ObjKind::ChunkList, h)));
        objects.extend(
            rules::doomed(&chunks, stored_chunks.iter().map(|(h, _, _)| *h), |h| {
                !forced_chunks.contains(h) && is_young(&chunks_young, h)
            })
            .into_iter()
            .map(|h| (ObjKind::Chunk, h)),
        );
        Ok((!objects.is_empty()).then_some(PrunePlan {
            version,
            doc: s.doc,
            objects,
        }))
    }

    /// Marks the head with the plan's list (a compare-and-swap from the
    /// head the plan judged by): from then on no push names what it lists.
    /// `None` when a push moved the head first (plan again).
    async fn prune_mark(&self, g: &GardenName, plan: PrunePlan) -> Result<Option<Marked>, Error> {
        let mut text: Vec<String> = plan
            .objects
            .iter()
            .map(|(kind, h)| format!("{} {}\n", kind.dir(), h.to_hex()))
            .collect();
        text.sort_unstable();
        text.dedup();
        // This prune's own: two prunes judging one head list the same
        // objects, and a mark is told apart from another's (after a lost
        // reply) by its list and second alone.
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| Error::internal(format!("no randomness: {e}")))?;
        text.push(format!("prune {}\n", Hash::of(&nonce).to_hex()));
        let list = self.put_text(g, &text.concat()).await?;
        // The deadline to delete by counts from before the mark is written
        // (a write the store's client retries for long eats into it).
        let since = std::time::Instant::now();
        let at = sgard_proto::wire::unix_now();
        let d = HeadDoc {
            condemned: Some((list, at)),
            ..plan.doc
        };
        match self
            .depot
            .write_doc(
                Scope::Garden(g),
                &doc(HEAD)?,
                d.to_text().as_bytes(),
                match plan.version {
                    Some(v) => Cond::Version(v),
                    None => Cond::Absent,
                },
            )
            .await
            .map_err(depot_error)?
        {
            Written::Done(_) => Ok(Some(Marked {
                list,
                at,
                since,
                objects: plan.objects,
            })),
            Written::Conflict => {
                // A lost reply: the mark may be there.
                let now = self.head_doc(g).await?;
                Ok(now
                    .filter(|n| n.condemned == Some((list, at)))
                    .map(|_| Marked {
                        list,
                        at,
                        since,
                        objects: plan.objects,
                    }))
            }
        }
    }

    /// Deletes what the mark lists (the number of whole contents deleted),
    /// stopping when [`DELETE_WITHIN`] has passed since the mark.
    async fn prune_delete(&self, g: &GardenName, marked: &Marked) -> Result<u64, Error> {
        let mut removed = 0;
        for (kind, h) in &marked.objects {
            if marked.since.elapsed() >= DELETE_WITHIN {
                return Err(Error::timeout(format!(
                    "the prune ran out of time after deleting {removed} content(s); run it again"
                )));
            }
            self.depot
                .delete_object(g, *kind, h)
                .await
                .map_err(depot_error)?;
            if *kind == ObjKind::Blob {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Takes the mark away (pushes may name those objects again: a push
    /// sends what is no longer stored); `true` once the head no longer
    /// carries it, `false` when pushes kept landing (it then expires).
    async fn prune_unmark(&self, g: &GardenName, marked: &Marked) -> Result<bool, Error> {
        for _ in 0..FENCE_TRIES * 4 {
            let Some((text, v)) = self
                .depot
                .read_doc(Scope::Garden(g), &doc(HEAD)?)
                .await
                .map_err(depot_error)?
            else {
                return Ok(true);
            };
            let d = HeadDoc::parse(&text_of(&text, "the head document")?)?;
            if d.condemned != Some((marked.list, marked.at)) {
                return Ok(true);
            }
            let d = HeadDoc {
                condemned: None,
                ..d
            };
            if let Written::Done(_) = self
                .depot
                .write_doc(
                    Scope::Garden(g),
                    &doc(HEAD)?,
                    d.to_text().as_bytes(),
                    Cond::Version(v),
                )
                .await
                .map_err(depot_error)?
            {
                return Ok(true);
            }
        }
        // Pushes kept landing: the mark expires by itself.
        Ok(false)
    }

    /// Prunes garden `g` (see [`Backend::prune`]), deleting the objects of
    /// `forced` (and the chunks of those that are chunk lists) whatever
    /// their age, unless something live names them: what a purge removed.
    async fn sweep(&self, g: &GardenName, forced: &HashSet<Hash>) -> Result<u64, Error> {
        let g = g.clone();
        for _ in 0..FENCE_TRIES {
            let Some(plan) = self.prune_plan(&g, forced).await? else {
                return Ok(0);
            };
            let Some(marked) = self.prune_mark(&g, plan).await? else {
                continue;
            };
            let removed = self.prune_delete(&g, &marked).await;
            if self.prune_unmark(&g, &marked).await? {
                // Nothing reads the list once the mark is gone (a push that
                // read the marked head fails its compare-and-swap).
                let _ = self
                    .depot
                    .delete_object(&g, ObjKind::Blob, &marked.list)
                    .await;
            }
            return removed;
        }
        Err(Error::retry(
            "pushes kept landing during the prune; nothing was pruned, run it again",
        ))
    }

    /// Whether purge `p` is done in garden `g` (read at `s`): in its log,
    /// no record of its history names a snapshot the purge renamed, and
    /// none of those is stored any more (a sweep cut off leaves some).
    async fn purge_done(&self, g: &GardenName, s: &State, p: &Purge) -> Result<bool, Error> {
        if !s.purges.purges.iter().any(|q| q.id() == p.id()) {
            return Ok(false);
        }
        let old: HashSet<Hash> = p.renamed.iter().map(|r| r.0).collect();
        if s.history.iter().any(|r| {
            old.contains(&r.id)
                || r.parent.is_some_and(|h| old.contains(&h))
                || r.head_before.is_some_and(|h| old.contains(&h))
        }) {
            return Ok(false);
        }
        for h in &old {
            if self.content_size(g, h, false).await?.is_some() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// What `purges` (pushed, their signatures checked) do to garden `g`
    /// as read at `s`: for each one not done, each snapshot it renamed
    /// that is stored here must be the new one's original with only
    /// contents purged ([`rules::purge_of`]), which gives the contents.
    ///
    /// # Errors
    /// [`Error::refused`] for a purge that says otherwise, or names a new
    /// snapshot the garden does not have; store errors.
    async fn plan_purges(
        &self,
        g: &GardenName,
        s: &State,
        purges: &[Purge],
    ) -> Result<PurgeApply, Error> {
        let mut a = PurgeApply::default();
        let mut log = s.purges.clone();
        for p in purges {
            if self.purge_done(g, s, p).await? {
                continue;
            }
            let snapshot = |h: Hash| async move {
                match self
                    .depot
                    .get_object_within(g, ObjKind::Blob, &h, MAX_TEXT)
                    .await
                {
                    Ok(b) => Manifest::from_yaml(&text_of(&b, "a snapshot")?)
                        .map(Some)
                        .map_err(|e| Error::damaged(format!("snapshot {}: {e}", h.short(12)))),
                    Err(sgard_depot::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(depot_error(e)),
                }
            };
            for (old, new) in &p.renamed {
                a.renamed.insert(*old, *new);
                let Some(o) = snapshot(*old).await? else {
                    continue;
                };
                let n = snapshot(*new).await?.ok_or_else(|| {
                    Error::refused(rules::purge_refusal(&p.host, old, new, false))
                })?;
                a.gone.extend(rules::purge_of(&o, &n).ok_or_else(|| {
                    Error::refused(rules::purge_refusal(&p.host, old, new, true))
                })?);
            }
            if !log.purges.iter().any(|q| q.id() == p.id()) {
                let mut record = p.clone();
                let mut news: Vec<Hash> = p.renamed.iter().map(|r| r.1).collect();
                news.sort();
                news.dedup();
                record.snapshots = news;
                log.purges.push(record);
                a.log = Some(log.clone());
            }
        }
        Ok(a)
    }

    /// The garden's head document, if it has one.
    async fn head_doc(&self, g: &GardenName) -> Result<Option<HeadDoc>, Error> {
        match self
            .depot
            .read_doc(Scope::Garden(g), &doc(HEAD)?)
            .await
            .map_err(depot_error)?
        {
            Some((text, _)) => Ok(Some(HeadDoc::parse(&text_of(&text, "the head document")?)?)),
            None => Ok(None),
        }
    }

    /// Whether a pending push's text is older than the prune grace period
    /// (or says no time).
    fn stale_pending(&self, text: &str) -> bool {
        let since = text.lines().find_map(|l| {
            l.strip_prefix("since ")
                .and_then(|t| t.trim().parse::<i64>().ok())
        });
        since.is_none_or(|t| {
            let age = sgard_proto::wire::unix_now().saturating_sub(t);
            u64::try_from(age)
                .is_ok_and(|a| rules::go_push_expired(Duration::from_secs(a), self.prune_grace))
        })
    }

    /// The name of the pending (Go client) push of `who`.
    fn pending_name(who: &str) -> Result<DocName, Error> {
        doc(&format!("pending-{}", Hash::of(who.as_bytes()).short(32)))
    }
}

/// The push decision: the rule every server and the CLI follow
/// ([`sgard_garden::rules::push_verdict`]); `None` when the push may go on.
fn decide(s: &State, m: &Manifest, base: Base) -> Option<Decision> {
    match push_verdict(&s.manifest, !s.history.is_empty(), m, base) {
        Verdict::Accepted => None,
        refused_or_done => Some(refused_or_done),
    }
}

#[tonic::async_trait]
impl Backend for Object {
    async fn garden_id(&self, garden: &str) -> Result<String, Error> {
        let g = garden_name(garden)?;
        let name = doc(GARDEN_ID)?;
        if let Some(id) = self.stored_garden_id(&g).await? {
            return Ok(id);
        }
        // The first replica to ask makes it; any other reads that one.
        let mut fresh = [0u8; 16];
        getrandom::fill(&mut fresh).map_err(|e| Error::internal(format!("no randomness: {e}")))?;
        let hex: String = fresh.iter().map(|b| format!("{b:02x}")).collect();
        self.depot
            .write_once(Scope::Garden(&g), &name, hex.as_bytes())
            .await
            .map_err(depot_error)?;
        self.stored_garden_id(&g)
            .await?
            .ok_or_else(|| Error::internal("the garden's id vanished from the object store"))
    }

    async fn pull_manifest(&self, garden: &str) -> Result<HeadView, Error> {
        let g = garden_name(garden)?;
        let s = self.load(&g).await?;
        Ok(HeadView {
            id: head_id_of(&s.manifest),
            sizes: s.sizes.iter().map(|(h, n)| (*h, *n)).collect(),
            manifest: s.manifest,
            history: s.history,
            signed: s.signed,
            purges: s.purges.purges,
        })
    }

    async fn push_manifest(
        &self,
        garden: &str,
        who: &str,
        push: Push,
    ) -> Result<PushOutcome, Error> {
        let g = garden_name(garden)?;
        let s = self.load(&g).await?;
        let head = head_id_of(&s.manifest);
        let resp = |decision: Decision, missing: Vec<Hash>, head: Option<Hash>| PushOutcome {
            decision,
            missing,
            server_updated: Some(s.manifest.updated),
            head,
        };
        // The rule with purges (see `rules::with_purges`): one not done
        // here makes the push worth taking; a history naming a snapshot a
        // purge renamed is refused.
        let mut unseen = false;
        for p in &push.purges {
            if !self.purge_done(&g, &s, p).await? {
                unseen = true;
                break;
            }
        }
        let verdict = rules::with_purges(
            push_verdict(
                &s.manifest,
                !s.history.is_empty(),
                &push.manifest,
                push.base,
            ),
            unseen,
            rules::names_purged(&push.history, &s.purges),
        );
        if verdict != Verdict::Accepted {
            return Ok(resp(verdict, vec![], Some(head)));
        }
        let missing = self
            .missing(&g, &s, &push.manifest, &push.history, &push.extra)
            .await?;
        if push.negotiate {
            return Ok(resp(Decision::Accepted, missing, Some(head)));
        }
        if push.base == Base::Legacy {
            // The Go client streams blobs next, perhaps through another
            // replica: its manifest waits in the store.
            let manifest = self.put_text(&g, &push.manifest.to_yaml()).await?;
            let history = self
                .put_text(
                    &g,
                    &History {
                        records: push.history,
                    }
                    .to_yaml(),
                )
                .await?;
            let text = format!(
                "manifest {}\nhistory {}\nsince {}\n",
                manifest.to_hex(),
                history.to_hex(),
                sgard_proto::wire::unix_now()
            );
            let name = Self::pending_name(who)?;
            let scope = Scope::Garden(&g);
            let cond = match self
                .depot
                .read_doc(scope, &name)
                .await
                .map_err(depot_error)?
            {
                Some((_, v)) => Cond::Version(v),
                None => Cond::Absent,
            };
            if let Written::Conflict = self
                .depot
                .write_doc(scope, &name, text.as_bytes(), cond)
                .await
                .map_err(depot_error)?
            {
                return Err(Error::retry(
                    "another push of this key is starting at the same time; try again",
                ));
            }
            return Ok(resp(Decision::Accepted, missing, None));
        }
        if !missing.is_empty() {
            return Err(Error::refused(format!(
                "{} blob(s) are missing on the server; push them first",
                missing.len()
            )));
        }
        let updated = s.manifest.updated;
        let apply = self.plan_purges(&g, &s, &push.purges).await?;
        match self
            .install_purging(
                &g,
                s,
                push.manifest,
                push.history,
                who,
                push.signature,
                &push.extra,
                &apply,
            )
            .await?
        {
            Some(new) => {
                // The purged contents go now; a sweep cut off is done
                // again by the next push carrying the purge (it is not
                // done while an old snapshot is stored).
                let forced = apply.forced();
                if !forced.is_empty() {
                    match self.sweep(&g, &forced).await {
                        Ok(n) => tracing::info!(who, contents = n, "applied a purge"),
                        Err(e) => tracing::warn!(
                            who,
                            "a purge's contents were not all deleted: {}",
                            e.message()
                        ),
                    }
                }
                Ok(PushOutcome {
                    decision: Decision::Accepted,
                    missing: vec![],
                    server_updated: Some(updated),
                    head: Some(new),
                })
            }
            None => Ok(PushOutcome {
                decision: Decision::Rejected,
                missing: vec![],
                server_updated: Some(updated),
                head: Some(head),
            }),
        }
    }

    async fn push_blobs(&self, garden: &str, who: &str, mut pieces: Pieces) -> Result<u64, Error> {
        let g = garden_name(garden)?;
        /// What is being received.
        enum Current {
            Object(Box<sgard_depot::ObjectWriter>, Hash, u64),
            List(Hash, Vec<u8>),
        }
        let mut current: Option<Current> = None;
        let mut done = 0u64;
        let max = self.max_blob;
        let finish = |c: Option<Current>, depot: &Depot, g: &GardenName| {
            let depot = depot.clone();
            let g = g.clone();
            async move {
                match c {
                    None => Ok(false),
                    Some(Current::Object(w, _, _)) => {
                        w.finish().await.map(|()| true).map_err(|e| match e {
                            sgard_depot::Error::HashMismatch { .. } => Error::damaged(format!(
                                "{e}: the bytes sent do not hash to their name; dropped"
                            )),
                            other => depot_error(other),
                        })
                    }
                    Some(Current::List(h, text)) => {
                        let t = String::from_utf8(text)
                            .map_err(|_| Error::invalid("a chunk list that is not text"))?;
                        if sgard_proto::blobs::list_over_limit(&t, max).is_some() {
                            return Err(crate::error::blob_too_large(&h, max));
                        }
                        store_list(&depot, &g, &h, t).await.map(|()| true)
                    }
                }
            }
        };
        while let Some(piece) = pieces.next().await {
            let Piece { start, data } = piece?;
            crate::metrics::bytes_received(data.len());
            if let Some((h, kind)) = start {
                if finish(current.take(), &self.depot, &g).await? {
                    done += 1;
                }
                current = Some(match kind {
                    Kind::List => Current::List(h, Vec::new()),
                    k => {
                        let kind = if k == Kind::Chunk {
                            ObjKind::Chunk
                        } else {
                            ObjKind::Blob
                        };
                        let w = self
                            .depot
                            .object_writer(&g, kind, &h)
                            .await
                            .map_err(depot_error)?;
                        Current::Object(Box::new(w), h, 0)
                    }
                });
            }
            match current.as_mut() {
                None if !data.is_empty() => {
                    return Err(Error::invalid("data before any blob hash"));
                }
                None => {}
                Some(Current::List(_, text)) => {
                    if text.len() as u64 + data.len() as u64 > MAX_LIST {
                        return Err(Error::too_large("a chunk list too long"));
                    }
                    text.extend_from_slice(&data);
                }
                Some(Current::Object(w, h, n)) => {
                    *n += data.len() as u64;
                    if *n > self.max_blob {
                        return Err(crate::error::blob_too_large(h, self.max_blob));
                    }
                    w.write(&data).await.map_err(depot_error)?;
                }
            }
        }
        if finish(current.take(), &self.depot, &g).await? {
            done += 1;
        }
        // A Go client's manifest waits for the end of its blobs.
        let name = Self::pending_name(who)?;
        let scope = Scope::Garden(&g);
        if let Some((text, _)) = self
            .depot
            .read_doc(scope, &name)
            .await
            .map_err(depot_error)?
        {
            let text = text_of(&text, "a pending push")?;
            let field = |k: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(k).and_then(|h| Hash::parse(h.trim()).ok()))
                    .ok_or_else(|| Error::damaged("a pending push is damaged"))
            };
            let (mh, hh) = (field("manifest ")?, field("history ")?);
            if self.stale_pending(&text) {
                // Its client went away long ago (a Go client's blobs come
                // right after its manifest): a PushBlobs of the same key now
                // is another push, which must not install that old manifest.
                tracing::warn!(
                    garden,
                    "dropped a Go client's push left waiting past the grace period"
                );
                self.depot
                    .remove_doc(scope, &name)
                    .await
                    .map_err(depot_error)?;
                return Ok(done);
            }
            let m = Manifest::from_yaml(&self.get_text(&g, &mh, "a pushed manifest").await?)
                .map_err(|e| Error::damaged(e.to_string()))?;
            let history = History::from_yaml(&self.get_text(&g, &hh, "a pushed history").await?)
                .map_err(|e| Error::damaged(e.to_string()))?
                .records;
            self.depot
                .remove_doc(scope, &name)
                .await
                .map_err(depot_error)?;
            let s = self.load(&g).await?;
            let overtaken =
                || Error::retry("the server changed during the push; pull, then push again");
            match decide(&s, &m, Base::Legacy) {
                None => {
                    if self
                        .install(&g, s, m, history, who, None, &[])
                        .await?
                        .is_none()
                    {
                        return Err(overtaken());
                    }
                }
                // Another push came first (newer than this one): this one
                // did not land, and the client must hear it.
                Some(Decision::Rejected) => return Err(overtaken()),
                Some(_) => {}
            }
        }
        Ok(done)
    }

    async fn pull_blobs(&self, garden: &str, pull: Pull) -> Result<Pieces, Error> {
        let g = garden_name(garden)?;
        let depot = self.depot.clone();
        let (tx, rx) = mpsc::channel::<Result<Piece, Error>>(8);
        tokio::spawn(async move {
            for h in pull.hashes {
                let r = send(&depot, &g, &h, pull.lists, pull.chunks, &tx).await;
                if let Err(st) = r {
                    let _ = tx.send(Err(st)).await;
                    return;
                }
            }
        });
        Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
    }

    async fn missing_chunks(&self, garden: &str, hashes: Vec<Hash>) -> Result<Vec<Hash>, Error> {
        let g = garden_name(garden)?;
        let mut out = Vec::new();
        for h in hashes {
            if self
                .depot
                .object_size(&g, ObjKind::Chunk, &h)
                .await
                .map_err(depot_error)?
                .is_none()
            {
                out.push(h);
            }
        }
        Ok(out)
    }

    /// Deletes what nothing names, in two steps that no push can slip
    /// between: the objects to delete are listed and the head is marked
    /// with that list by a compare-and-swap from the head they were judged
    /// by (a push that moved the head first sends the prune back to
    /// judging); from the mark on, a push that would name a listed object
    /// is refused, and one that read the head before the mark finds its
    /// own compare-and-swap failing, reads again and is judged against the
    /// list. Then the listed objects are deleted and the mark taken away.
    async fn prune(&self, garden: &str) -> Result<u64, Error> {
        let g = garden_name(garden)?;
        self.sweep(&g, &HashSet::new()).await
    }

    async fn report(&self, garden: &str, who: &str, report: Report, now: i64) -> Result<(), Error> {
        let g = garden_name(garden)?;
        fleet::check(&report.host, &report.version)
            .map_err(|e| Error::invalid(format!("{e:#}")))?;
        let name = doc(&format!("fleet-{}", fleet::record_name(who, &report.host)))?;
        let scope = Scope::Garden(&g);
        // A machine's own record: a few tries if it reports twice at once.
        for _ in 0..4 {
            let (mut m, cond) = match self
                .depot
                .read_doc(scope, &name)
                .await
                .map_err(depot_error)?
            {
                Some((t, v)) => (
                    fleet::Machine::parse(&String::from_utf8_lossy(&t)),
                    Cond::Version(v),
                ),
                None => (fleet::Machine::default(), Cond::Absent),
            };
            m.update(
                who,
                &report.host,
                &report.version,
                report.head,
                report.op,
                now,
            );
            if let Written::Done(_) = self
                .depot
                .write_doc(scope, &name, m.to_text().as_bytes(), cond)
                .await
                .map_err(depot_error)?
            {
                return Ok(());
            }
        }
        Err(Error::retry(
            "the machine's record kept changing; try again",
        ))
    }

    async fn fleet(&self, garden: &str) -> Result<FleetView, Error> {
        let g = garden_name(garden)?;
        let s = self.load(&g).await?;
        let scope = Scope::Garden(&g);
        let mut machines = Vec::new();
        for name in self.depot.list_docs(scope).await.map_err(depot_error)? {
            if !name.as_str().starts_with("fleet-") {
                continue;
            }
            if let Some((t, _)) = self
                .depot
                .read_doc(scope, &name)
                .await
                .map_err(depot_error)?
            {
                let m = fleet::Machine::parse(&String::from_utf8_lossy(&t));
                if !m.key.is_empty() {
                    machines.push(m);
                }
            }
        }
        machines.sort_by(|a, b| (&a.host, &a.key).cmp(&(&b.host, &b.key)));
        Ok(FleetView {
            head: head_id_of(&s.manifest),
            known: s
                .history
                .iter()
                .flat_map(|r| [Some(r.id), r.head_before])
                .flatten()
                .collect(),
            machines,
        })
    }

    async fn first_use_of_nonce(&self, nonce: &[u8], ts: i64) -> Result<bool, Error> {
        // Named by the signed pair (a replay carries the same one), with
        // the time first so old ones are told apart without reading them;
        // the nonce by its hash, so any length allowed fits a name.
        let name = doc(&format!("nonce-{ts}-{}", Hash::of(nonce).to_hex()))?;
        let first = self
            .depot
            .write_once(Scope::Server, &name, b"used")
            .await
            .map_err(depot_error)?;
        // Now and then, the nonces whose window closed go.
        if nonce.first().is_some_and(|b| b % 32 == 0) {
            let now = sgard_proto::wire::unix_now();
            if let Ok(names) = self.depot.list_docs(Scope::Server).await {
                for n in names {
                    let old = n
                        .as_str()
                        .strip_prefix("nonce-")
                        .and_then(|r| r.split_once('-'))
                        .and_then(|(t, _)| t.parse::<i64>().ok())
                        .is_some_and(|t| (now - t).abs() > 2 * WINDOW_SECS);
                    if old {
                        let _ = self.depot.remove_doc(Scope::Server, &n).await;
                    }
                }
            }
        }
        Ok(first)
    }
}

/// Chunks read at once while a chunk list is checked.
const LIST_READS: usize = 4;

/// Stores `text` as the chunk list of content `h` once it is proven, as a
/// folder store's `install_list` proves it: a list, every chunk it names
/// stored at its length, the chunks together hashing to `h`. A stored list
/// makes its content count as stored for every later push, so an unproven
/// one (chunks never sent, or pruned meanwhile; chunks of other content)
/// would let a head name content nobody can pull. A list already stored
/// is left as it is.
pub(crate) async fn store_list(
    depot: &Depot,
    g: &GardenName,
    h: &Hash,
    text: String,
) -> Result<(), Error> {
    use futures_util::StreamExt as Futures;
    let list =
        ChunkList::parse(&text).map_err(|why| Error::invalid(format!("chunk list {h}: {why}")))?;
    if depot
        .object_size(g, ObjKind::ChunkList, h)
        .await
        .map_err(depot_error)?
        .is_some()
    {
        return Ok(());
    }
    let reads = Futures::map(
        futures_util::stream::iter(list.chunks.iter().copied()),
        |(c, len)| async move {
            let got = depot
                .get_object_within(g, ObjKind::Chunk, &c, u64::from(len))
                .await;
            (c, len, got)
        },
    );
    let mut chunks = Futures::buffered(reads, LIST_READS);
    let mut whole = sgard_store::Hasher::new();
    while let Some((c, len, got)) = Futures::next(&mut chunks).await {
        let data = match got {
            Ok(data) if data.len() as u64 == u64::from(len) => data,
            Ok(_) | Err(sgard_depot::Error::TooLarge { .. }) => {
                return Err(Error::damaged(format!(
                    "chunk list {h}: chunk {c} is not {len} bytes long; dropped"
                )));
            }
            Err(sgard_depot::Error::NotFound { .. }) => {
                return Err(Error::refused(format!(
                    "chunk list {h} names chunk {c}, which the server does not have; dropped"
                )));
            }
            Err(e) => return Err(depot_error(e)),
        };
        whole.update(&data);
    }
    let actual = whole.finish();
    if actual != *h {
        return Err(Error::damaged(format!(
            "chunk list {h}: its chunks make content {actual}, not {h}; dropped"
        )));
    }
    depot
        .put_list(g, h, Bytes::from(text))
        .await
        .map_err(depot_error)
}

/// Sends chunked content `h` (its list `text`) whole, reassembled chunk by
/// chunk (one in memory at a time), each chunk checked against its name
/// and length and the whole against `h`: what a folder store serves a peer
/// that asks for whole blobs.
async fn send_whole(
    depot: &Depot,
    g: &GardenName,
    h: &Hash,
    text: &str,
    tx: &mpsc::Sender<Result<Piece, Error>>,
) -> Result<(), Error> {
    let list = ChunkList::parse(text)
        .map_err(|why| Error::damaged(format!("chunk list {h} is damaged ({why})")))?;
    let mut whole = sgard_store::Hasher::new();
    let mut first = true;
    let send = |data: &[u8], first: &mut bool| {
        let piece = Piece {
            start: first.then_some((*h, Kind::Blob)),
            data: data.to_vec(),
        };
        *first = false;
        crate::metrics::bytes_sent(piece.data.len());
        tx.send(Ok(piece))
    };
    for (c, len) in &list.chunks {
        let data = depot
            .get_object_within(g, ObjKind::Chunk, c, u64::from(*len))
            .await
            .map_err(depot_error)?;
        if data.len() as u64 != u64::from(*len) {
            return Err(Error::damaged(format!(
                "chunk list {h}: chunk {c} is not {len} bytes long"
            )));
        }
        whole.update(&data);
        for piece in data.chunks(CHUNK_SIZE) {
            if send(piece, &mut first).await.is_err() {
                return Ok(());
            }
        }
    }
    if first && send(&[], &mut first).await.is_err() {
        return Ok(());
    }
    let actual = whole.finish();
    if actual != *h {
        return Err(Error::damaged(format!(
            "content {h} is damaged on the server: its chunks make {actual}"
        )));
    }
    Ok(())
}

/// Sends content `h` (a blob; when it is stored chunked, its chunk list
/// with `lists`, else the content whole) or the chunk `h` (with `chunks`).
async fn send(
    depot: &Depot,
    g: &GardenName,
    h: &Hash,
    lists: bool,
    chunks: bool,
    tx: &mpsc::Sender<Result<Piece, Error>>,
) -> Result<(), Error> {
    let (kind, wire) = if chunks {
        (ObjKind::Chunk, Kind::Chunk)
    } else {
        (ObjKind::Blob, Kind::Blob)
    };
    if !chunks
        && depot
            .object_size(g, ObjKind::Blob, h)
            .await
            .map_err(depot_error)?
            .is_none()
    {
        // Stored chunked: its list to a peer that takes lists, else the
        // content whole (a Go peer asks only for blobs).
        match depot.get_list(g, h).await {
            Ok(text) => {
                let text = text_of(&text, "a chunk list")?;
                if !lists {
                    return send_whole(depot, g, h, &text, tx).await;
                }
                for piece in sgard_proto::blobs::list_pieces(h, &text) {
                    crate::metrics::bytes_sent(piece.data.len());
                    if tx.send(Ok(piece)).await.is_err() {
                        return Ok(());
                    }
                }
                return Ok(());
            }
            Err(sgard_depot::Error::NotFound { .. }) => {}
            Err(e) => return Err(depot_error(e)),
        }
    }
    let mut stream = match depot.object_stream(g, kind, h).await {
        Ok(s) => s,
        Err(sgard_depot::Error::NotFound { .. }) => {
            return Err(Error::not_found(format!("blob {h} not found")));
        }
        Err(e) => return Err(depot_error(e)),
    };
    let mut first = true;
    let mut buf: Vec<u8> = Vec::new();
    let flush = |buf: &mut Vec<u8>, first: &mut bool| {
        let piece = Piece {
            start: first.then_some((*h, wire)),
            data: std::mem::take(buf),
        };
        *first = false;
        piece
    };
    while let Some(piece) = stream.next_chunk().await {
        let piece = piece.map_err(depot_error)?;
        buf.extend_from_slice(&piece);
        while buf.len() >= CHUNK_SIZE {
            let rest = buf.split_off(CHUNK_SIZE);
            let mut whole = std::mem::replace(&mut buf, rest);
            let chunk = flush(&mut whole, &mut first);
            crate::metrics::bytes_sent(chunk.data.len());
            if tx.send(Ok(chunk)).await.is_err() {
                return Ok(());
            }
        }
    }
    if first || !buf.is_empty() {
        let chunk = flush(&mut buf, &mut first);
        crate::metrics::bytes_sent(chunk.data.len());
        let _ = tx.send(Ok(chunk)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use sgard_depot::{AwsEnv, Location};

    fn env() -> Env {
        Env {
            chunk_stall: None,
            render_once_max: None,
            folding: None,
            no_symlinks: false,
            sqlite_timeout: None,
            config_dir: None,
            username: "u".into(),
            no_watch: false,
            watch_stall: None,
            home: "/home/u".into(),
            cwd: "/home/u".into(),
            now: Timestamp::parse("2026-03-23T12:00:00Z").unwrap(),
            hostname: "h".into(),
            state_dir: None,
            cache_dir: None,
            no_cache: false,
            crash_at: None,
            interrupt_at: None,
            wait_at: None,
            scan_window: None,
        }
    }

    fn object(depot: Depot, grace: Duration) -> Object {
        Object::new(depot, Arc::new(|| Ok(env())), 1 << 30, grace)
    }

    /// An object backend over a folder depot in `dir` (whose files a test
    /// can age or damage).
    fn in_folder(dir: &tempfile::TempDir, grace: Duration) -> Object {
        let depot =
            Depot::open(&Location::Dir(dir.path().join("depot")), &AwsEnv::default()).unwrap();
        object(depot, grace)
    }

    /// The file of an object in a folder depot made by [`in_folder`].
    fn file_of(dir: &tempfile::TempDir, kind: ObjKind, h: &Hash) -> std::path::PathBuf {
        let hex = h.to_hex();
        std::fs::canonicalize(dir.path().join("depot"))
            .unwrap()
            .join("gardens/default")
            .join(kind.dir())
            .join(&hex[..2])
            .join(&hex[2..4])
            .join(&hex)
    }

    fn age(path: &std::path::Path, by: Duration) {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(SystemTime::now() - by)
            .unwrap();
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn garden() -> GardenName {
        GardenName::default()
    }

    /// A manifest with one file `~/f` holding `h`, updated at minute `min`.
    fn manifest(h: &Hash, min: u32) -> Manifest {
        Manifest::from_yaml(&format!(
            "version: 1\ncreated: '2026-03-23T12:00:00Z'\nupdated: '2026-03-23T12:{min:02}:00Z'\n\
             files:\n  - path: ~/f\n    hash: {}\n    type: file\n    mode: '0644'\n    \
             updated: '2026-03-23T12:{min:02}:00Z'\n",
            h.to_hex()
        ))
        .unwrap()
    }

    async fn blob(o: &Object, bytes: &[u8]) -> Hash {
        let h = Hash::of(bytes);
        o.depot
            .put_object(&garden(), ObjKind::Blob, &h, Bytes::copy_from_slice(bytes))
            .await
            .unwrap();
        h
    }

    /// Pushes `m` from `base`, as an sgard client does; the new head.
    async fn push(o: &Object, m: Manifest, base: Base) -> Hash {
        let r = o
            .push_manifest(
                "default",
                "SHA256:test",
                Push {
                    manifest: m,
                    history: Vec::new(),
                    base,
                    negotiate: false,
                    extra: Vec::new(),
                    signature: None,
                    purges: Vec::new(),
                },
            )
            .await
            .unwrap();
        assert_eq!(r.decision, Decision::Accepted, "{r:?}");
        r.head.unwrap()
    }

    /// A garden's id is made once, by whichever replica asks first, and
    /// every replica answers it; each garden has its own; a damaged one is
    /// an error, never replaced.
    #[test]
    fn a_gardens_id_is_one_across_replicas() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (
            in_folder(&dir, Duration::ZERO),
            in_folder(&dir, Duration::ZERO),
        );
        rt().block_on(async {
            let id = a.garden_id("default").await.unwrap();
            assert_eq!(id.len(), 32);
            assert_eq!(b.garden_id("default").await.unwrap(), id);
            assert_eq!(a.garden_id("default").await.unwrap(), id);
            let other = b.garden_id("work").await.unwrap();
            assert_ne!(other, id);
            assert_eq!(a.garden_id("work").await.unwrap(), other);
            // migrate's carry: set, then answered by every replica.
            a.set_garden_id("work", &id).await.unwrap();
            assert_eq!(b.garden_id("work").await.unwrap(), id);
            let g = GardenName::new("work").unwrap();
            let name = doc(GARDEN_ID).unwrap();
            let (_, v) = a
                .depot
                .read_doc(Scope::Garden(&g), &name)
                .await
                .unwrap()
                .unwrap();
            let w = a
                .depot
                .write_doc(Scope::Garden(&g), &name, b"../../etc", Cond::Version(v))
                .await
                .unwrap();
            assert!(matches!(w, Written::Done(_)));
            let e = b.garden_id("work").await.unwrap_err();
            assert!(e.message().contains("damaged"), "{e:?}");
        });
    }

    #[test]
    fn prune_refuses_when_a_snapshot_cannot_be_read() {
        let dir = tempfile::tempdir().unwrap();
        let o = in_folder(&dir, Duration::ZERO);
        rt().block_on(async {
            let g = garden();
            let x = blob(&o, b"the first version\n").await;
            let first = push(&o, manifest(&x, 1), Base::Never).await;
            let y = blob(&o, b"the second version\n").await;
            push(&o, manifest(&y, 2), Base::Id(first)).await;
            // Only the first head's snapshot names x; it cannot be read.
            std::fs::write(file_of(&dir, ObjKind::Blob, &first), b"damaged").unwrap();
            let r = o.prune("default").await;
            assert!(r.is_err(), "prune went on without a snapshot: {r:?}");
            assert!(
                o.depot
                    .object_size(&g, ObjKind::Blob, &x)
                    .await
                    .unwrap()
                    .is_some(),
                "prune deleted what an unreadable snapshot may name"
            );
        });
    }

    #[test]
    fn prune_keeps_the_chunks_of_a_list_a_push_in_progress_just_stored() {
        let dir = tempfile::tempdir().unwrap();
        let o = in_folder(&dir, Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            // A chunk left long ago by a push that never finished.
            let chunk = vec![7u8; 20_000];
            let c = Hash::of(&chunk);
            o.depot
                .put_object(&g, ObjKind::Chunk, &c, Bytes::from(chunk.clone()))
                .await
                .unwrap();
            age(
                &file_of(&dir, ObjKind::Chunk, &c),
                Duration::from_secs(7200),
            );
            // A push now: its list names that chunk (MissingChunks said it
            // is there), its head is not installed yet.
            let text = format!(
                "sgard-chunks 1\nfastcdc-2020 16384 65536 262144\nsize 20000\n{} 20000\n",
                c.to_hex()
            );
            store_list(&o.depot, &g, &c, text).await.unwrap();
            o.prune("default").await.unwrap();
            assert!(
                o.depot
                    .object_size(&g, ObjKind::Chunk, &c)
                    .await
                    .unwrap()
                    .is_some(),
                "prune deleted a chunk a young list names"
            );
            // The push ends: its head names the content, which is whole.
            let head = push(&o, manifest(&c, 1), Base::Never).await;
            assert_eq!(o.load(&g).await.unwrap().manifest.files.len(), 1, "{head}");
            assert_eq!(o.content_size(&g, &c, true).await.unwrap(), Some(20_000));
        });
    }

    #[test]
    fn a_head_write_whose_reply_was_lost_is_known_as_done() {
        let o = object(Depot::memory(), Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            let x = blob(&o, b"content\n").await;
            let m = manifest(&x, 1);
            // Two reads of the same head: the write from the first lands;
            // the retry of it (from the same read) finds the head moved.
            let (s1, s2) = (o.load(&g).await.unwrap(), o.load(&g).await.unwrap());
            let first = o
                .install(&g, s1, m.clone(), Vec::new(), "k", None, &[])
                .await
                .unwrap();
            let retried = o
                .install(&g, s2, m, Vec::new(), "k", None, &[])
                .await
                .unwrap();
            assert_eq!(first, Some(head_id_of(&manifest(&x, 1))));
            assert_eq!(retried, first, "a write that landed was called refused");
            // Another head from the same read is still refused.
            let y = blob(&o, b"other\n").await;
            let s3 = State {
                version: None,
                manifest: Manifest::new(Timestamp::zero()),
                history: Vec::new(),
                sizes: HashMap::new(),
                signed: None,
                purges: PurgeLog::default(),
                doc: HeadDoc::default(),
            };
            let other = o
                .install(&g, s3, manifest(&y, 2), Vec::new(), "k", None, &[])
                .await
                .unwrap();
            assert_eq!(other, None);
        });
    }

    #[test]
    fn a_go_push_left_waiting_past_the_grace_period_is_dropped() {
        let o = object(Depot::memory(), Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            let x = blob(&o, b"content\n").await;
            let r = o
                .push_manifest(
                    "default",
                    "SHA256:go",
                    Push {
                        manifest: manifest(&x, 1),
                        history: Vec::new(),
                        base: Base::Legacy,
                        negotiate: false,
                        extra: Vec::new(),
                        signature: None,
                        purges: Vec::new(),
                    },
                )
                .await
                .unwrap();
            assert_eq!(r.decision, Decision::Accepted);
            let name = Object::pending_name("SHA256:go").unwrap();
            let (text, v) = o
                .depot
                .read_doc(Scope::Garden(&g), &name)
                .await
                .unwrap()
                .unwrap();
            let text = String::from_utf8(text.to_vec()).unwrap();
            assert!(!o.stale_pending(&text), "{text}");
            assert!(o.stale_pending("manifest x\n"), "no time: stale");
            // Two hours later its client is long gone: prune drops it.
            let old = sgard_proto::wire::unix_now() - 7200;
            let aged: String = text
                .lines()
                .map(|l| {
                    if l.starts_with("since ") {
                        format!("since {old}\n")
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect();
            assert!(o.stale_pending(&aged));
            let w = o
                .depot
                .write_doc(Scope::Garden(&g), &name, aged.as_bytes(), Cond::Version(v))
                .await
                .unwrap();
            assert!(matches!(w, Written::Done(_)));
            o.prune("default").await.unwrap();
            assert!(
                o.depot
                    .read_doc(Scope::Garden(&g), &name)
                    .await
                    .unwrap()
                    .is_none(),
                "a stale pending push outlived prune"
            );
        });
    }

    /// A push of `m` from `base` as an sgard client commits it: the
    /// server's answer.
    async fn try_push(o: &Object, m: Manifest, base: Base) -> Result<PushOutcome, Error> {
        o.push_manifest(
            "default",
            "SHA256:test",
            Push {
                manifest: m,
                history: Vec::new(),
                base,
                negotiate: false,
                extra: Vec::new(),
                signature: None,
                purges: Vec::new(),
            },
        )
        .await
    }

    /// A folder-depot garden whose head names `y`, and `x` stored two
    /// hours ago and named by nothing (a push that never finished).
    async fn head_and_an_old_orphan(o: &Object, dir: &tempfile::TempDir) -> (Hash, Hash, Hash) {
        let y = blob(o, b"what the head holds\n").await;
        let head = push(o, manifest(&y, 1), Base::Never).await;
        let x = blob(o, b"left by a push that never finished\n").await;
        age(&file_of(dir, ObjKind::Blob, &x), Duration::from_secs(7200));
        (head, x, y)
    }

    async fn stored(o: &Object, h: &Hash) -> bool {
        o.depot
            .object_size(&garden(), ObjKind::Blob, h)
            .await
            .unwrap()
            .is_some()
    }

    /// A chunk `bytes` stored two hours ago and named by nothing.
    async fn old_chunk(o: &Object, dir: &tempfile::TempDir, bytes: &[u8]) -> Hash {
        let c = Hash::of(bytes);
        o.depot
            .put_object(&garden(), ObjKind::Chunk, &c, Bytes::copy_from_slice(bytes))
            .await
            .unwrap();
        age(&file_of(dir, ObjKind::Chunk, &c), Duration::from_secs(7200));
        c
    }

    /// New content made of the stored chunk `old` and a new chunk, with
    /// its list stored (as a push stores it before its head): its hash.
    async fn old_and_new_chunk_list(o: &Object, old: &[u8]) -> Hash {
        let fresh = vec![8u8; 20_000];
        let f = Hash::of(&fresh);
        o.depot
            .put_object(&garden(), ObjKind::Chunk, &f, Bytes::from(fresh.clone()))
            .await
            .unwrap();
        let mut all = old.to_vec();
        all.extend_from_slice(&fresh);
        let whole = Hash::of(&all);
        let text = format!(
            "sgard-chunks 1\nfastcdc-2020 16384 65536 262144\nsize {}\n{} {}\n{} 20000\n",
            all.len(),
            Hash::of(old).to_hex(),
            old.len(),
            f.to_hex()
        );
        store_list(&o.depot, &garden(), &whole, text).await.unwrap();
        whole
    }

    /// The rest of a prune after its mark: the deletes, the unmarking.
    async fn finish(o: &Object, marked: &Marked) {
        o.prune_delete(&garden(), marked).await.unwrap();
        o.prune_unmark(&garden(), marked).await.unwrap();
    }

    #[test]
    fn a_head_document_keeps_a_prunes_mark() {
        let h = Hash::of(b"list");
        let d = HeadDoc {
            manifest: Some(Hash::of(b"m")),
            condemned: Some((h, 1_765_000_000)),
            ..HeadDoc::default()
        };
        let back = HeadDoc::parse(&d.to_text()).unwrap();
        assert_eq!(back.condemned, d.condemned);
        assert!(back.same_head(&HeadDoc {
            condemned: None,
            ..d.clone()
        }));
        assert!(HeadDoc::parse("sgard-head 1\ncondemned zz 1\n").is_err());
        assert!(HeadDoc::parse("sgard-head 1\ncondemned {h}\n").is_err());
        // A mark from two hours ago (its prune died) holds nothing back.
        let old = HeadDoc {
            condemned: Some((h, sgard_proto::wire::unix_now() - 7200)),
            ..d.clone()
        };
        assert_eq!(old.condemning(), None);
        let now = HeadDoc {
            condemned: Some((h, sgard_proto::wire::unix_now())),
            ..d
        };
        assert_eq!(now.condemning(), Some(h));
    }

    /// The race prune's mark closes: a push that finds an old orphan
    /// stored (so does not send it) and names it, while a prune deletes
    /// it. From the mark on, the push is refused; after the prune, it
    /// sends the content again and lands, and its head names only stored
    /// content.
    #[test]
    fn a_push_naming_what_a_prune_is_deleting_is_refused_until_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let o = in_folder(&dir, Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            let (head, x, _) = head_and_an_old_orphan(&o, &dir).await;
            let plan = o.prune_plan(&g, &HashSet::new()).await.unwrap().unwrap();
            assert!(
                plan.objects.contains(&(ObjKind::Blob, x)),
                "{:?}",
                plan.objects
            );
            let marked = o.prune_mark(&g, plan).await.unwrap().unwrap();
            assert!(o.load(&g).await.unwrap().doc.condemning().is_some());
            // x is still stored, but condemned: the push is refused.
            let e = try_push(&o, manifest(&x, 2), Base::Id(head))
                .await
                .unwrap_err();
            assert!(e.message().contains("prune"), "{e:?}");
            // A second prune meanwhile is refused too.
            let e = o.prune("default").await.unwrap_err();
            assert!(e.message().contains("another prune"), "{e:?}");
            assert_eq!(o.prune_delete(&g, &marked).await.unwrap(), 1);
            o.prune_unmark(&g, &marked).await.unwrap();
            assert!(!stored(&o, &x).await);
            assert_eq!(o.load(&g).await.unwrap().doc.condemned, None);
            // The push again: x is missing, sent, and the head lands.
            let e = try_push(&o, manifest(&x, 2), Base::Id(head))
                .await
                .unwrap_err();
            assert!(e.message().contains("missing"), "{e:?}");
            blob(&o, b"left by a push that never finished\n").await;
            push(&o, manifest(&x, 2), Base::Id(head)).await;
            let s = o.load(&g).await.unwrap();
            assert_eq!(s.manifest.files[0].hash, Some(x));
            assert!(stored(&o, &x).await);
        });
    }

    /// A push that read the head before a prune marked it, and checked
    /// then that its content is stored, finds its compare-and-swap failing;
    /// it reads the head again and is judged against the prune's list, so
    /// it never installs a head naming what the prune deletes.
    #[test]
    fn a_push_that_read_the_head_before_the_mark_is_judged_again() {
        let dir = tempfile::tempdir().unwrap();
        let o = in_folder(&dir, Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            let (head, x, y) = head_and_an_old_orphan(&o, &dir).await;
            let before = o.load(&g).await.unwrap();
            let plan = o.prune_plan(&g, &HashSet::new()).await.unwrap().unwrap();
            let marked = o.prune_mark(&g, plan).await.unwrap().unwrap();
            let e = o
                .install(&g, before, manifest(&x, 2), Vec::new(), "k", None, &[])
                .await
                .unwrap_err();
            assert!(e.message().contains("prune"), "{e:?}");
            finish(&o, &marked).await;
            let s = o.load(&g).await.unwrap();
            assert_eq!(head_id_of(&s.manifest), head);
            assert_eq!(s.manifest.files[0].hash, Some(y));
            // A push of other content that read the head before the mark
            // only reads it again and lands.
            let before = o.load(&g).await.unwrap();
            let z = blob(&o, b"new\n").await;
            let x2 = blob(&o, b"another orphan\n").await;
            age(
                &file_of(&dir, ObjKind::Blob, &x2),
                Duration::from_secs(7200),
            );
            let plan = o.prune_plan(&g, &HashSet::new()).await.unwrap().unwrap();
            let marked = o.prune_mark(&g, plan).await.unwrap().unwrap();
            let new = o
                .install(&g, before, manifest(&z, 3), Vec::new(), "k", None, &[])
                .await
                .unwrap();
            assert_eq!(new, Some(head_id_of(&manifest(&z, 3))));
            // The mark outlives the push, and goes with the prune.
            assert!(o.load(&g).await.unwrap().doc.condemning().is_some());
            finish(&o, &marked).await;
            let s = o.load(&g).await.unwrap();
            assert_eq!(s.doc.condemned, None);
            assert_eq!(s.manifest.files[0].hash, Some(z));
            assert!(stored(&o, &z).await && !stored(&o, &x2).await);
        });
    }

    /// The prune's list keeps kinds apart: a condemned chunk with the bytes
    /// (so the name) of a whole blob the history keeps does not refuse a
    /// push bringing that blob back.
    #[test]
    fn a_condemned_chunk_does_not_refuse_a_whole_blob_of_the_same_name() {
        let dir = tempfile::tempdir().unwrap();
        let o = in_folder(&dir, Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            let bytes = b"the same bytes, stored twice\n";
            let b = blob(&o, bytes).await;
            let first = push(&o, manifest(&b, 1), Base::Never).await;
            let d = blob(&o, b"the next version\n").await;
            let second = push(&o, manifest(&d, 2), Base::Id(first)).await;
            o.depot
                .put_object(&g, ObjKind::Chunk, &b, Bytes::from_static(bytes))
                .await
                .unwrap();
            age(
                &file_of(&dir, ObjKind::Chunk, &b),
                Duration::from_secs(7200),
            );
            let plan = o.prune_plan(&g, &HashSet::new()).await.unwrap().unwrap();
            assert_eq!(plan.objects, vec![(ObjKind::Chunk, b)]);
            let marked = o.prune_mark(&g, plan).await.unwrap().unwrap();
            push(&o, manifest(&b, 3), Base::Id(second)).await;
            finish(&o, &marked).await;
            assert!(stored(&o, &b).await);
            assert_eq!(o.load(&g).await.unwrap().manifest.files[0].hash, Some(b));
        });
    }

    /// A push that lands between a prune's judging and its mark sends the
    /// prune back to judging, which then keeps what the push named.
    #[test]
    fn a_prune_overtaken_by_a_push_judges_again() {
        let dir = tempfile::tempdir().unwrap();
        let o = in_folder(&dir, Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            let (head, x, y) = head_and_an_old_orphan(&o, &dir).await;
            let plan = o.prune_plan(&g, &HashSet::new()).await.unwrap().unwrap();
            push(&o, manifest(&x, 2), Base::Id(head)).await;
            assert!(o.prune_mark(&g, plan).await.unwrap().is_none());
            // Judged again: x is the head's, y its history's.
            assert_eq!(o.prune("default").await.unwrap(), 0);
            assert!(stored(&o, &x).await && stored(&o, &y).await);
            assert_eq!(o.load(&g).await.unwrap().doc.condemned, None);
        });
    }

    /// A mark left by a prune that died holds pushes back only until it
    /// expires; then pushes land and a new prune runs.
    #[test]
    fn a_dead_prunes_mark_expires() {
        let dir = tempfile::tempdir().unwrap();
        let o = in_folder(&dir, Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            let (head, x, _) = head_and_an_old_orphan(&o, &dir).await;
            let plan = o.prune_plan(&g, &HashSet::new()).await.unwrap().unwrap();
            let marked = o.prune_mark(&g, plan).await.unwrap().unwrap();
            // The prune dies; its mark is rewritten two hours older.
            let (text, v) = o
                .depot
                .read_doc(Scope::Garden(&g), &doc(HEAD).unwrap())
                .await
                .unwrap()
                .unwrap();
            let mut d = HeadDoc::parse(std::str::from_utf8(&text).unwrap()).unwrap();
            d.condemned = Some((marked.list, marked.at - 7200));
            let w = o
                .depot
                .write_doc(
                    Scope::Garden(&g),
                    &doc(HEAD).unwrap(),
                    d.to_text().as_bytes(),
                    Cond::Version(v),
                )
                .await
                .unwrap();
            assert!(matches!(w, Written::Done(_)));
            let new = push(&o, manifest(&x, 2), Base::Id(head)).await;
            let s = o.load(&g).await.unwrap();
            assert_eq!(head_id_of(&s.manifest), new);
            assert_eq!(s.doc.condemned, None, "an expired mark was carried on");
            o.prune("default").await.unwrap();
            assert!(stored(&o, &x).await);
        });
    }

    /// A garden without a head is pruned too: the mark makes its head
    /// document, which then names an empty garden that a first push fills.
    #[test]
    fn a_garden_without_a_head_is_pruned_and_stays_empty() {
        let dir = tempfile::tempdir().unwrap();
        let o = in_folder(&dir, Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            let x = blob(&o, b"orphan\n").await;
            age(&file_of(&dir, ObjKind::Blob, &x), Duration::from_secs(7200));
            assert_eq!(o.prune("default").await.unwrap(), 1);
            assert!(!stored(&o, &x).await);
            let s = o.load(&g).await.unwrap();
            assert!(s.manifest.files.is_empty() && s.history.is_empty());
            let y = blob(&o, b"first\n").await;
            push(&o, manifest(&y, 1), Base::Never).await;
        });
    }

    /// A chunk a prune is deleting cannot come back through a new chunk
    /// list: a push naming content whose list names it is refused. That
    /// list, left stored, names a chunk the prune deletes: once the prune
    /// ends, the content does not count
    /// as stored (the list would name a chunk nobody can pull), so the next
    /// push is told to send it again rather than landing a head naming it.
    #[test]
    fn a_list_left_by_a_refused_push_does_not_make_its_pruned_chunk_count_as_stored() {
        let dir = tempfile::tempdir().unwrap();
        let o = in_folder(&dir, Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            let (head, _, _) = head_and_an_old_orphan(&o, &dir).await;
            let c = old_chunk(&o, &dir, &[7u8; 20_000]).await;
            let plan = o.prune_plan(&g, &HashSet::new()).await.unwrap().unwrap();
            assert!(plan.objects.contains(&(ObjKind::Chunk, c)));
            let marked = o.prune_mark(&g, plan).await.unwrap().unwrap();
            // A push finds the old chunk stored, sends only a new one and
            // the list, and is refused.
            let whole = old_and_new_chunk_list(&o, &[7u8; 20_000]).await;
            let e = try_push(&o, manifest(&whole, 2), Base::Id(head))
                .await
                .unwrap_err();
            assert!(e.message().contains("prune"), "{e:?}");
            finish(&o, &marked).await;
            assert!(
                o.depot
                    .object_size(&g, ObjKind::Chunk, &c)
                    .await
                    .unwrap()
                    .is_none()
            );
            // The push again: the content is missing (its chunk is gone).
            let s = o.load(&g).await.unwrap();
            assert_eq!(
                o.missing(&g, &s, &manifest(&whole, 2), &[], &[])
                    .await
                    .unwrap(),
                vec![whole]
            );
            let e = try_push(&o, manifest(&whole, 2), Base::Id(head))
                .await
                .unwrap_err();
            assert!(e.message().contains("missing"), "{e:?}");
            assert_eq!(head_id_of(&o.load(&g).await.unwrap().manifest), head);
        });
    }

    /// A snapshot of a push's history names content a prune deletes: a
    /// prune that runs whole between the push's reading of the head and its
    /// compare-and-swap (the swap fails on the mark's versions, the head is
    /// the same, the push is judged again) leaves the push naming a snapshot
    /// whose content is gone, unless the push checks that content again.
    #[test]
    fn a_push_judged_again_after_a_whole_prune_checks_its_snapshots_content() {
        let dir = tempfile::tempdir().unwrap();
        let o = in_folder(&dir, Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            let (_, x, y) = head_and_an_old_orphan(&o, &dir).await;
            // A snapshot the push brings (sent now, so young) names x.
            let snap = manifest(&x, 1).to_yaml();
            let r = o.put_text(&g, &snap).await.unwrap();
            let record = Record {
                id: r,
                parent: None,
                time: Timestamp::parse("2026-03-23T11:00:00Z").unwrap(),
                host: "h".into(),
                machine: None,
                reason: Reason::Other("checkpoint".into()),
                message: None,
                entries: 1,
                bytes: 0,
                new_blobs: 0,
                head_before: None,
            };
            // The push reads the head and finds everything stored.
            let before = o.load(&g).await.unwrap();
            let z = blob(&o, b"new\n").await;
            assert!(
                o.missing(
                    &g,
                    &before,
                    &manifest(&z, 2),
                    std::slice::from_ref(&record),
                    &[x]
                )
                .await
                .unwrap()
                .is_empty()
            );
            // A whole prune: x goes.
            assert_eq!(o.prune("default").await.unwrap(), 1);
            assert!(!stored(&o, &x).await);
            let out = o
                .install(&g, before, manifest(&z, 2), vec![record], "k", None, &[x])
                .await;
            assert!(
                out.is_err(),
                "the head's history names snapshot {r} whose content {x} was pruned"
            );
            let s = o.load(&g).await.unwrap();
            assert_eq!(s.manifest.files[0].hash, Some(y));
        });
    }

    /// A push judged again because a prune marked the head must not land
    /// over another push that landed meanwhile: it was judged (its base,
    /// its time) against the head it first read, so it is told the head
    /// moved, as when no prune is at work.
    #[test]
    fn a_push_judged_again_does_not_overwrite_a_push_that_landed_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let o = in_folder(&dir, Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            let (head, _, _) = head_and_an_old_orphan(&o, &dir).await;
            let before = o.load(&g).await.unwrap();
            // Another replica's push from the same head, ready to land.
            let q = blob(&o, b"the other push\n").await;
            let theirs = o.put_text(&g, &manifest(&q, 3).to_yaml()).await.unwrap();
            let plan = o.prune_plan(&g, &HashSet::new()).await.unwrap().unwrap();
            o.prune_mark(&g, plan).await.unwrap().unwrap();
            // It lands just after this push finds the swap failing on the
            // mark alone, before it reads the head again.
            let hook: FencedHook = Box::new(move |depot: Depot| {
                Box::pin(async move {
                    let g = garden();
                    let (text, v) = depot
                        .read_doc(Scope::Garden(&g), &doc(HEAD).unwrap())
                        .await
                        .unwrap()
                        .unwrap();
                    let mut d = HeadDoc::parse(std::str::from_utf8(&text).unwrap()).unwrap();
                    d.manifest = Some(theirs);
                    let w = depot
                        .write_doc(
                            Scope::Garden(&g),
                            &doc(HEAD).unwrap(),
                            d.to_text().as_bytes(),
                            Cond::Version(v),
                        )
                        .await
                        .unwrap();
                    assert!(matches!(w, Written::Done(_)));
                })
            });
            *o.on_fenced.lock().unwrap() = Some(hook);
            let z = blob(&o, b"this push\n").await;
            let out = o
                .install(&g, before, manifest(&z, 2), Vec::new(), "k", None, &[])
                .await
                .unwrap();
            assert!(o.on_fenced.lock().unwrap().is_none(), "never judged again");
            assert_eq!(
                out, None,
                "a push from {head} overwrote the one that landed"
            );
            assert_eq!(o.load(&g).await.unwrap().doc.manifest, Some(theirs));
        });
    }

    /// Two prunes judging the same head list the same objects; the one
    /// whose mark loses the swap must not take the winner's mark for its
    /// own when both marked within the same second (it would go on
    /// deleting after the winner took the mark away and pushes sent those
    /// objects again).
    #[test]
    fn a_prune_whose_mark_lost_does_not_take_an_equal_mark_for_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let o = in_folder(&dir, Duration::from_secs(3600));
        rt().block_on(async {
            let g = garden();
            head_and_an_old_orphan(&o, &dir).await;
            loop {
                let one = o.prune_plan(&g, &HashSet::new()).await.unwrap().unwrap();
                let two = o.prune_plan(&g, &HashSet::new()).await.unwrap().unwrap();
                let t = sgard_proto::wire::unix_now();
                let won = o.prune_mark(&g, one).await.unwrap().unwrap();
                let lost = o.prune_mark(&g, two).await.unwrap();
                let same_second = sgard_proto::wire::unix_now() == t;
                if same_second || lost.is_some() {
                    assert!(lost.is_none(), "both prunes think they marked the head");
                    break;
                }
                assert!(o.prune_unmark(&g, &won).await.unwrap());
            }
        });
    }

    #[test]
    fn a_damaged_token_key_is_an_error_not_a_panic() {
        let o = object(Depot::memory(), Duration::from_secs(3600));
        rt().block_on(async {
            // 64 bytes, not 64 hex digits: "é" straddles a digit pair.
            let text = format!("a\u{e9}{}", "0".repeat(61));
            assert_eq!(text.len(), 64);
            let name = DocName::new(TOKEN_KEY).unwrap();
            assert!(
                o.depot
                    .write_once(Scope::Server, &name, text.as_bytes())
                    .await
                    .unwrap()
            );
            let e = o.token_secret().await.unwrap_err().to_string();
            assert!(e.contains("damaged"), "{e}");
            let e = o.stored_token_key().await.unwrap_err();
            assert!(e.message().contains("damaged"), "{e:?}");
        });
    }
}
