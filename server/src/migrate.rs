//! `sgardd migrate`: copies every garden of one store into another (a
//! folder into an object store, or back), so a server can move onto S3
//! and off it without its machines noticing.
//!
//! Per garden, in the order that keeps the target consistent at every
//! moment: the chunks, the chunk lists (each taken only once its chunks
//! prove it), the whole objects (all content addressed, so copying one
//! twice is harmless and an interrupted run is simply run again), then
//! the head (manifest, history, signature) — only
//! into a garden that has no head yet, or one the source's history holds
//! (an earlier run's: so a first run can copy the bulk while the old
//! server still serves, and a second, after it stopped, the rest); never
//! over another — then the fleet records the target lacks. Last, the server's token key
//! if the target has none, so tokens already issued keep working.
//!
//! What is copied is every object stored, referenced or not, so the
//! target's history (undo, `log`) is as complete as the source's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use futures_util::{StreamExt as _, TryStreamExt as _};
use sgard_depot::{Garden as GardenName, Kind as ObjKind};
use sgard_garden::{Access, Env, Garden, head_id_of};
use sgard_store::{Hash, Store};

use super::DEFAULT_GARDEN;
use super::local::GARDENS_DIR;
use super::object::{Head, Imported, Object};
use crate::fleet;

/// Objects copied at once to or from an object store.
const PARALLEL: usize = 8;

/// Whole contents larger than this are streamed, not held in memory.
const HELD_WHOLE: u64 = 8 << 20;

/// The token key file of a folder store (raw 32 bytes).
const JWT_KEY: &str = "jwt.key";

/// One side of a migration.
pub enum Side {
    /// A folder: the default garden's repository, the others in
    /// `gardens/NAME` in it.
    Dir(PathBuf),
    /// An object store.
    Objects(Arc<Object>),
}

/// What happened to one garden.
#[derive(Debug, Default)]
pub struct GardenReport {
    /// Its name.
    pub name: String,
    /// Objects (whole contents, chunk lists, chunks) copied.
    pub copied: u64,
    /// Objects the target had already.
    pub present: u64,
    /// What became of its head (`None`: the source's is empty).
    pub head: Option<Imported>,
    /// Fleet records copied.
    pub machines: u64,
}

/// What a migration did (or, dry, would do).
#[derive(Debug, Default)]
pub struct Report {
    /// Per garden.
    pub gardens: Vec<GardenReport>,
    /// The token key was copied.
    pub token_key: bool,
}

/// One object: its kind, name and size.
type Obj = (ObjKind, Hash, u64);

/// Copies every garden of `from` into `to` (with `dry`, only finds what it
/// would copy). `say` hears each step.
///
/// # Errors
/// A store's errors, naming it; a damaged object; a source garden whose
/// head names an object it lacks.
pub async fn migrate(
    from: &Side,
    to: &Side,
    env: Env,
    dry: bool,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Report> {
    let mut report = Report::default();
    for name in from.gardens().await? {
        let mut r = GardenReport {
            name: name.clone(),
            ..Default::default()
        };
        let objects = from.objects(&name, &env).await?;
        say(&format!(
            "garden {name}: {} object{} in the source",
            objects.len(),
            if objects.len() == 1 { "" } else { "s" }
        ));
        if !dry {
            to.prepare(&name, &env).await?;
        }
        // Each kind in its turn (a list is taken only once its chunks are
        // in), the objects of one kind several at once.
        for kind in [ObjKind::Chunk, ObjKind::ChunkList, ObjKind::Blob] {
            let results: Vec<bool> = futures_util::stream::iter(
                objects
                    .iter()
                    .filter(|(k, _, _)| *k == kind)
                    .map(|(_, h, n)| (*h, *n)),
            )
            .map(|(h, size)| {
                let name = name.clone();
                async move {
                    if to.has(&name, kind, &h).await? {
                        return Ok::<bool, anyhow::Error>(false);
                    }
                    if !dry {
                        if kind == ObjKind::Blob && size > HELD_WHOLE {
                            copy_streaming(from, to, &name, &h).await?;
                        } else {
                            let data = from.read(&name, kind, &h).await?;
                            to.write(&name, kind, &h, data).await?;
                        }
                    }
                    Ok(true)
                }
            })
            .buffer_unordered(PARALLEL)
            .try_collect()
            .await?;
            let copied = results.iter().filter(|&&c| c).count() as u64;
            r.copied += copied;
            r.present += results.len() as u64 - copied;
        }
        let source_head = from.head(&name, &env).await?;
        // The garden's id goes with its head (its machines keep their sync
        // state under it): into a target that takes the head, or has none.
        if !dry && let Some(gid) = from.garden_id(&name).await? {
            let takes = match (&source_head, to.head_id(&name, &env).await?) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(h), Some(t)) => {
                    head_id_of(&h.manifest) == t || h.history.iter().any(|r| r.id == t)
                }
            };
            if takes {
                to.set_garden_id(&name, &gid).await?;
            }
        }
        if let Some(head) = source_head {
            let id = head_id_of(&head.manifest);
            r.head = Some(if dry {
                match to.head_id(&name, &env).await? {
                    Some(t) if t == id => Imported::AlreadyThere(id),
                    Some(t) if !head.history.iter().any(|r| r.id == t) => Imported::Refused(t),
                    _ => Imported::Installed(id),
                }
            } else {
                to.import(&name, head, &env).await?
            });
        }
        for m in from.machines(&name).await? {
            if dry || to.adopt_machine(&name, &m).await? {
                r.machines += 1;
            }
        }
        say(&describe(&r, dry));
        report.gardens.push(r);
    }
    if let Some(key) = from.token_key().await? {
        report.token_key = if dry {
            to.token_key().await?.is_none()
        } else {
            to.adopt_token_key(&key).await?
        };
    }
    Ok(report)
}

/// One garden's line of the report.
pub fn describe(r: &GardenReport, dry: bool) -> String {
    let would = if dry { "would be " } else { "" };
    let head = match r.head {
        None => "its head is empty".to_owned(),
        Some(Imported::Installed(h)) => format!("head {} {would}installed", h.short(12)),
        Some(Imported::AlreadyThere(h)) => format!("head {} already there", h.short(12)),
        Some(Imported::Refused(h)) => format!(
            "NOT installed: the target's garden has another head ({})",
            h.short(12)
        ),
    };
    format!(
        "garden {}: {} object{} {would}copied, {} already there; {head}; {} machine record{} {would}copied",
        r.name,
        r.copied,
        if r.copied == 1 { "" } else { "s" },
        r.present,
        r.machines,
        if r.machines == 1 { "" } else { "s" },
    )
}

/// Copies the whole content `h` of garden `g` piece by piece (its hash
/// checked on the way in): for contents too big to hold.
async fn copy_streaming(from: &Side, to: &Side, g: &str, h: &Hash) -> Result<()> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    /// Where the pieces go.
    enum Sink {
        Objects(Box<sgard_depot::ObjectWriter>),
        Dir(PathBuf, tempfile::NamedTempFile, tokio::fs::File),
    }
    let mut sink = match to {
        Side::Objects(o) => Sink::Objects(Box::new(
            o.depot()
                .object_writer(&depot_name(g)?, ObjKind::Blob, h)
                .await?,
        )),
        Side::Dir(dir) => {
            let repo = garden_dir(dir, g);
            let tmp = tempfile::Builder::new()
                .prefix(".migrate-")
                .tempfile_in(&repo)
                .with_context(|| format!("making a temp file in {}", repo.display()))?;
            let file = tokio::fs::File::from_std(
                tmp.reopen()
                    .with_context(|| format!("opening {}", tmp.path().display()))?,
            );
            Sink::Dir(repo, tmp, file)
        }
    };
    let mut put = async |piece: &[u8]| -> Result<()> {
        match &mut sink {
            Sink::Objects(w) => w.write(piece).await?,
            Sink::Dir(_, tmp, file) => file
                .write_all(piece)
                .await
                .with_context(|| format!("writing {}", tmp.path().display()))?,
        }
        Ok(())
    };
    match from {
        Side::Objects(o) => {
            let mut stream = o
                .depot()
                .object_stream(&depot_name(g)?, ObjKind::Blob, h)
                .await?;
            while let Some(piece) = stream.next_chunk().await {
                put(&piece?).await?;
            }
        }
        Side::Dir(dir) => {
            let path = Store::open(&garden_dir(dir, g)).path_of(h);
            let mut file = tokio::fs::File::open(&path)
                .await
                .with_context(|| format!("opening {}", path.display()))?;
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = file
                    .read(&mut buf)
                    .await
                    .with_context(|| format!("reading {}", path.display()))?;
                if n == 0 {
                    break;
                }
                put(&buf[..n]).await?;
            }
        }
    }
    match sink {
        Sink::Objects(w) => w.finish().await?,
        Sink::Dir(repo, tmp, mut file) => {
            file.flush()
                .await
                .with_context(|| format!("writing {}", tmp.path().display()))?;
            drop(file);
            let h = *h;
            blocking(move || {
                let mut reader = std::fs::File::open(tmp.path())
                    .with_context(|| format!("opening {}", tmp.path().display()))?;
                // Hashed again as it is stored: a mismatch stores nothing.
                Store::open(&repo).write_expect(&mut reader, &h, None)?;
                drop(tmp);
                Ok(())
            })
            .await?;
        }
    }
    Ok(())
}

fn status(e: crate::Error) -> anyhow::Error {
    anyhow!("{}", e.message())
}

fn depot_name(g: &str) -> Result<GardenName> {
    GardenName::new(g).map_err(|e| anyhow!("{e}"))
}

/// The repository of garden `g` in the folder store `dir`.
fn garden_dir(dir: &Path, g: &str) -> PathBuf {
    if g == DEFAULT_GARDEN {
        dir.to_path_buf()
    } else {
        dir.join(GARDENS_DIR).join(g)
    }
}

/// Runs `f` on a blocking thread.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| anyhow!("a worker failed: {e}"))?
}

impl Side {
    /// The gardens with anything in them.
    async fn gardens(&self) -> Result<Vec<String>> {
        match self {
            Side::Dir(dir) => {
                let dir = dir.clone();
                blocking(move || {
                    let mut out = Vec::new();
                    if dir.join(sgard_manifest::MANIFEST_FILE).exists() {
                        out.push(DEFAULT_GARDEN.to_owned());
                    } else {
                        bail!("no sgard repository at {}", dir.display());
                    }
                    let gardens = dir.join(GARDENS_DIR);
                    let rd = match std::fs::read_dir(&gardens) {
                        Ok(rd) => rd,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
                        Err(e) => {
                            return Err(e)
                                .with_context(|| format!("reading {}", gardens.display()));
                        }
                    };
                    for e in rd {
                        let e = e.with_context(|| format!("reading {}", gardens.display()))?;
                        let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                            continue;
                        };
                        if GardenName::new(&name).is_ok()
                            && e.path().join(sgard_manifest::MANIFEST_FILE).exists()
                        {
                            out.push(name);
                        }
                    }
                    out[1..].sort();
                    Ok(out)
                })
                .await
            }
            Side::Objects(o) => Ok(o
                .depot()
                .list_gardens()
                .await?
                .into_iter()
                .map(|g| g.as_str().to_owned())
                .collect()),
        }
    }

    /// Every object of garden `g`.
    async fn objects(&self, g: &str, env: &Env) -> Result<Vec<Obj>> {
        match self {
            Side::Dir(dir) => {
                let repo = garden_dir(dir, g);
                let env = env.clone();
                blocking(move || {
                    // Read under the repository's lock, so no writer is
                    // half-way.
                    let _g = Garden::open(&repo, env, Access::Read.into())?;
                    let store = Store::open(&repo);
                    let mut out: Vec<Obj> = store
                        .list()?
                        .into_iter()
                        .map(|b| (ObjKind::Blob, b.hash, b.size))
                        .collect();
                    if let Some(cs) = store.chunked() {
                        out.extend(cs.lists()?.into_iter().map(|h| (ObjKind::ChunkList, h, 0)));
                        out.extend(
                            cs.objects()
                                .list()?
                                .into_iter()
                                .map(|b| (ObjKind::Chunk, b.hash, b.size)),
                        );
                    }
                    Ok(out)
                })
                .await
            }
            Side::Objects(o) => {
                let g = depot_name(g)?;
                let mut out = Vec::new();
                for kind in ObjKind::ALL {
                    out.extend(
                        o.depot()
                            .list_objects(&g, kind)
                            .await?
                            .into_iter()
                            .map(|(h, n)| (kind, h, n)),
                    );
                }
                Ok(out)
            }
        }
    }

    /// The bytes of one object (a chunk list's text).
    async fn read(&self, g: &str, kind: ObjKind, h: &Hash) -> Result<Bytes> {
        match self {
            Side::Dir(dir) => {
                let repo = garden_dir(dir, g);
                let h = *h;
                blocking(move || {
                    let store = Store::open(&repo);
                    let cs = store
                        .chunked()
                        .ok_or_else(|| anyhow!("{}: no chunk store", repo.display()))?;
                    let data = match kind {
                        ObjKind::Blob => store.read(&h)?,
                        ObjKind::ChunkList => cs.list_text(&h)?.into_bytes(),
                        ObjKind::Chunk => cs.objects().read(&h)?,
                    };
                    Ok(Bytes::from(data))
                })
                .await
            }
            Side::Objects(o) => {
                let g = depot_name(g)?;
                Ok(match kind {
                    ObjKind::ChunkList => o.depot().get_list(&g, h).await?,
                    kind => o.depot().get_object(&g, kind, h).await?,
                })
            }
        }
    }

    /// Makes garden `g` ready to take objects.
    async fn prepare(&self, g: &str, env: &Env) -> Result<()> {
        let Side::Dir(dir) = self else {
            return Ok(());
        };
        let repo = garden_dir(dir, g);
        let (dir, env) = (dir.clone(), env.clone());
        blocking(move || {
            // The folder is the default garden's repository, whichever
            // garden comes first.
            for r in [&dir, &repo] {
                if !r.join(sgard_manifest::MANIFEST_FILE).exists() {
                    if *r != dir {
                        sgard_store::durable::create_dir_all_durable(&dir.join(GARDENS_DIR))?;
                    }
                    Garden::init(r, env.clone())?.backdate_empty_head()?;
                }
            }
            Ok(())
        })
        .await
    }

    /// Whether garden `g` has the object.
    async fn has(&self, g: &str, kind: ObjKind, h: &Hash) -> Result<bool> {
        match self {
            Side::Dir(dir) => {
                let repo = garden_dir(dir, g);
                let h = *h;
                blocking(move || {
                    let store = Store::open(&repo);
                    let Some(cs) = store.chunked() else {
                        return Ok(false);
                    };
                    Ok(match kind {
                        ObjKind::Blob => store.contains_blob(&h)?,
                        ObjKind::ChunkList => cs.contains(&h),
                        ObjKind::Chunk => cs.objects().contains(&h)?,
                    })
                })
                .await
            }
            Side::Objects(o) => {
                let g = depot_name(g)?;
                Ok(match kind {
                    ObjKind::ChunkList => match o.depot().get_list(&g, h).await {
                        Ok(_) => true,
                        Err(sgard_depot::Error::NotFound { .. }) => false,
                        Err(e) => return Err(e.into()),
                    },
                    kind => o.depot().object_size(&g, kind, h).await?.is_some(),
                })
            }
        }
    }

    /// Stores one object (its bytes checked against its name).
    async fn write(&self, g: &str, kind: ObjKind, h: &Hash, data: Bytes) -> Result<()> {
        match self {
            Side::Dir(dir) => {
                let repo = garden_dir(dir, g);
                let h = *h;
                blocking(move || {
                    let store = Store::open(&repo);
                    let cs = store
                        .chunked()
                        .ok_or_else(|| anyhow!("{}: no chunk store", repo.display()))?;
                    match kind {
                        ObjKind::Blob => {
                            store.write_expect(&mut &data[..], &h, None)?;
                        }
                        ObjKind::ChunkList => {
                            let text = std::str::from_utf8(&data)
                                .map_err(|_| anyhow!("the chunk list of {h} is not text"))?;
                            cs.install_list(&h, text)?;
                        }
                        ObjKind::Chunk => {
                            cs.objects().write_expect(&mut &data[..], &h, None)?;
                        }
                    }
                    Ok(())
                })
                .await
            }
            Side::Objects(o) => {
                let g = depot_name(g)?;
                match kind {
                    // Proven before it is taken (its chunks came first), as
                    // a folder's install_list proves it.
                    ObjKind::ChunkList => {
                        let text = String::from_utf8(data.to_vec())
                            .map_err(|_| anyhow!("the chunk list of {h} is not text"))?;
                        super::object::store_list(o.depot(), &g, h, text)
                            .await
                            .map_err(status)?;
                    }
                    kind => o.depot().put_object(&g, kind, h, data).await?,
                }
                Ok(())
            }
        }
    }

    /// Garden `g`'s head (`None`: none, or an empty one).
    async fn head(&self, g: &str, env: &Env) -> Result<Option<Head>> {
        match self {
            Side::Dir(dir) => {
                let repo = garden_dir(dir, g);
                let env = env.clone();
                blocking(move || {
                    let garden = Garden::open(&repo, env, Access::Read.into())?;
                    let history = garden.shared_history().records.clone();
                    if garden.manifest().files.is_empty() && history.is_empty() {
                        return Ok(None);
                    }
                    Ok(Some(Head {
                        manifest: garden.manifest().clone(),
                        history,
                        signed: garden.head_signature(),
                        purges: garden.purges()?.purges,
                    }))
                })
                .await
            }
            Side::Objects(o) => o.export_head(g).await.map_err(status),
        }
    }

    /// The id of garden `g`'s head (`None`: no garden, or an empty head).
    async fn head_id(&self, g: &str, env: &Env) -> Result<Option<Hash>> {
        if let Side::Dir(dir) = self
            && !garden_dir(dir, g)
                .join(sgard_manifest::MANIFEST_FILE)
                .exists()
        {
            return Ok(None);
        }
        Ok(self.head(g, env).await?.map(|h| head_id_of(&h.manifest)))
    }

    /// Makes `head` garden `g`'s head, unless it has another.
    async fn import(&self, g: &str, head: Head, env: &Env) -> Result<Imported> {
        match self {
            Side::Dir(dir) => {
                let repo = garden_dir(dir, g);
                let env = env.clone();
                blocking(move || {
                    let mut garden = Garden::open(&repo, env, Access::Write.into())?;
                    let id = head_id_of(&head.manifest);
                    let now = garden.head_id();
                    if now == id {
                        return Ok(Imported::AlreadyThere(id));
                    }
                    let empty = garden.manifest().files.is_empty()
                        && garden.shared_history().records.is_empty();
                    if !empty && !head.history.iter().any(|r| r.id == now) {
                        return Ok(Imported::Refused(now));
                    }
                    let sig = head
                        .signed
                        .as_ref()
                        .map(|(st, sig)| (st.as_str(), sig.as_str()));
                    // The purges come applied (the history is renamed):
                    // applying them here records them.
                    let (installed, _) = garden.install_push_purging(
                        head.manifest,
                        head.history,
                        "sgardd migrate",
                        sig,
                        &head.purges,
                        &std::collections::HashSet::new(),
                        None,
                    )?;
                    Ok(Imported::Installed(installed))
                })
                .await
            }
            Side::Objects(o) => o.import_head(g, head).await.map_err(status),
        }
    }

    /// Garden `g`'s id, if it has one.
    async fn garden_id(&self, g: &str) -> Result<Option<String>> {
        match self {
            Side::Dir(dir) => Ok(sgard_garden::recorded_repo_id(&garden_dir(dir, g))),
            Side::Objects(o) => o.garden_id_if_any(g).await.map_err(status),
        }
    }

    /// Makes `id` garden `g`'s id.
    async fn set_garden_id(&self, g: &str, id: &str) -> Result<()> {
        match self {
            Side::Dir(dir) => {
                let (repo, id) = (garden_dir(dir, g), id.to_owned());
                blocking(move || Ok(sgard_garden::set_repo_id(&repo, &id)?)).await
            }
            Side::Objects(o) => o.set_garden_id(g, id).await.map_err(status),
        }
    }

    /// Garden `g`'s fleet records.
    async fn machines(&self, g: &str) -> Result<Vec<fleet::Machine>> {
        match self {
            Side::Dir(dir) => {
                let repo = garden_dir(dir, g);
                blocking(move || fleet::list(&repo)).await
            }
            Side::Objects(o) => o.machines(g).await.map_err(status),
        }
    }

    /// Stores a fleet record unless the machine has one.
    async fn adopt_machine(&self, g: &str, m: &fleet::Machine) -> Result<bool> {
        match self {
            Side::Dir(dir) => {
                let repo = garden_dir(dir, g);
                let m = m.clone();
                blocking(move || fleet::adopt(&repo, &m)).await
            }
            Side::Objects(o) => o.adopt_machine(g, m).await.map_err(status),
        }
    }

    /// The server's token key, if it has one.
    async fn token_key(&self) -> Result<Option<[u8; 32]>> {
        match self {
            Side::Dir(dir) => {
                let path = dir.join(JWT_KEY);
                match std::fs::read(&path) {
                    Ok(b) if b.len() >= 32 => {
                        let mut k = [0u8; 32];
                        k.copy_from_slice(&b[..32]);
                        Ok(Some(k))
                    }
                    Ok(_) => Ok(None),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
                }
            }
            Side::Objects(o) => o.stored_token_key().await.map_err(status),
        }
    }

    /// Stores the token key unless the server has one; `true` when stored.
    async fn adopt_token_key(&self, key: &[u8; 32]) -> Result<bool> {
        match self {
            Side::Dir(dir) => {
                let path = dir.join(JWT_KEY);
                if path.exists() {
                    return Ok(false);
                }
                sgard_store::durable::write_atomic(&path, key, 0o600)
                    .with_context(|| format!("writing {}", path.display()))?;
                Ok(true)
            }
            Side::Objects(o) => o.adopt_token_key(key).await.map_err(status),
        }
    }
}
