//! Streaming blobs between gRPC chunks and the store, in bounded memory.

use sgard_store::{Hash, Store};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A blocking reader over chunks arriving on a channel.
pub struct ChannelReader {
    rx: mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
    pos: usize,
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pos >= self.buf.len() {
            match self.rx.blocking_recv() {
                Some(b) => {
                    self.buf = b;
                    self.pos = 0;
                }
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// What a `BlobChunk`'s hash names (its `kind` field, an sgard addition).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A whole blob (the only kind a Go peer knows).
    Blob,
    /// The chunk list of chunked content; the data is its text.
    List,
    /// A chunk of chunked content.
    Chunk,
}

impl Kind {
    /// The kind a wire value names (`None`: unknown).
    pub fn from_wire(k: u32) -> Option<Kind> {
        match k {
            0 => Some(Kind::Blob),
            1 => Some(Kind::List),
            2 => Some(Kind::Chunk),
            _ => None,
        }
    }

    /// The wire value.
    pub fn wire(self) -> u32 {
        match self {
            Kind::Blob => 0,
            Kind::List => 1,
            Kind::Chunk => 2,
        }
    }
}

/// A piece of a stream of objects, as both ends handle it: the first
/// piece of each object names it (and its kind), the others carry more of
/// its data. On the wire it is a `BlobChunk`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The object this piece starts.
    pub start: Option<(Hash, Kind)>,
    /// Its data.
    pub data: Vec<u8>,
}

impl Piece {
    /// The piece a `BlobChunk` carries; a malformed hash or an unknown
    /// kind is refused.
    pub fn from_wire(c: crate::v1::BlobChunk) -> Result<Piece, String> {
        let crate::v1::BlobChunk { hash, data, kind } = c;
        let start = if hash.is_empty() {
            None
        } else {
            let h = Hash::parse(&hash).map_err(|_| format!("malformed hash {hash:?}"))?;
            let k = Kind::from_wire(kind).ok_or_else(|| format!("unknown kind {kind}"))?;
            Some((h, k))
        };
        Ok(Piece { start, data })
    }

    /// The `BlobChunk` carrying it.
    pub fn into_wire(self) -> crate::v1::BlobChunk {
        let (hash, kind) = match self.start {
            Some((h, k)) => (h.to_hex(), k.wire()),
            None => (String::new(), Kind::Blob.wire()),
        };
        crate::v1::BlobChunk {
            hash,
            data: self.data,
            kind,
        }
    }
}

/// The pieces that carry the chunk list `text` of content `h`.
pub fn list_pieces<'a>(h: &Hash, text: &'a str) -> impl Iterator<Item = Piece> + 'a {
    let h = *h;
    text.as_bytes()
        .chunks(crate::CHUNK_SIZE)
        .enumerate()
        .map(move |(i, piece)| Piece {
            start: (i == 0).then_some((h, Kind::List)),
            data: piece.to_vec(),
        })
}

/// The messages that carry the chunk list `text` of content `h`.
pub fn list_messages<'a>(
    h: &Hash,
    text: &'a str,
) -> impl Iterator<Item = crate::v1::BlobChunk> + 'a {
    list_pieces(h, text).map(Piece::into_wire)
}

/// The most bytes a chunk list may take on the wire.
pub const MAX_LIST: u64 = 64 << 20;

/// The blob being written: its data channel and the blocking writer.
type Writer = (mpsc::Sender<Vec<u8>>, JoinHandle<sgard_store::Result<()>>);

/// The size of the content a pushed chunk list assembles, when that is over
/// `limit`: a server's size limit bounds a file whether it comes whole or
/// in chunks, so both backends refuse such a list (a list that does not
/// parse is refused on its own account when it is installed).
pub fn list_over_limit(text: &str, limit: u64) -> Option<u64> {
    let size = sgard_store::chunks::ChunkList::parse(text).ok()?.size;
    (size > limit).then_some(size)
}

/// Writes a stream of `(hash, data)` chunks into the store: each blob is
/// hashed while written to a temp file and kept only if it matches.
pub struct BlobSink {
    store: Store,
    max: Option<u64>,
    current: Option<Writer>,
    /// Blobs completed so far.
    pub done: u64,
}

impl BlobSink {
    /// A sink into `store`, refusing blobs larger than `max`.
    pub fn new(store: Store, max: Option<u64>) -> Self {
        BlobSink {
            store,
            max,
            current: None,
            done: 0,
        }
    }

    /// Starts the blob named `hash` (finishing the previous one).
    pub async fn start(&mut self, hash: Hash) -> sgard_store::Result<()> {
        let max = self.max;
        self.start_with(hash, max).await
    }

    /// As [`BlobSink::start`], refusing the blob past `limit` bytes.
    pub async fn start_bounded(&mut self, hash: Hash, limit: u64) -> sgard_store::Result<()> {
        self.start_with(hash, Some(limit)).await
    }

    async fn start_with(&mut self, hash: Hash, max: Option<u64>) -> sgard_store::Result<()> {
        self.start_kind(hash, Kind::Blob, max).await
    }

    /// Starts an object of `kind`: a blob or a chunk (kept only if it
    /// hashes to `hash`, at most `max` bytes), or the chunk list of content
    /// `hash` (kept only once its chunks are here and reassemble to it).
    pub async fn start_kind(
        &mut self,
        hash: Hash,
        kind: Kind,
        max: Option<u64>,
    ) -> sgard_store::Result<()> {
        self.finish().await?;
        let (tx, rx) = mpsc::channel::<Vec<u8>>(4);
        let store = self.store.clone();
        let handle = tokio::task::spawn_blocking(move || {
            let mut r = ChannelReader {
                rx,
                buf: Vec::new(),
                pos: 0,
            };
            let Some(cs) = store.chunked().filter(|_| kind != Kind::Blob) else {
                return store.write_expect(&mut r, &hash, max).map(|_| ());
            };
            if kind == Kind::Chunk {
                return cs.objects().write_expect(&mut r, &hash, max).map(|_| ());
            }
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut std::io::Read::take(&mut r, MAX_LIST + 1), &mut text)
                .map_err(sgard_store::Error::Source)?;
            let bad = |reason: &str| sgard_store::Error::BadChunkList {
                path: cs.list_path(&hash),
                reason: reason.into(),
            };
            if text.len() as u64 > MAX_LIST {
                return Err(bad("longer than any list sgard writes"));
            }
            let text = String::from_utf8(text).map_err(|_| bad("not UTF-8 text"))?;
            if let Some(limit) = max
                && list_over_limit(&text, limit).is_some()
            {
                return Err(sgard_store::Error::TooLarge { limit });
            }
            cs.install_list(&hash, &text)
        });
        self.current = Some((tx, handle));
        Ok(())
    }

    /// Feeds data to the current blob; false if there is none.
    pub async fn feed(&mut self, data: Vec<u8>) -> sgard_store::Result<bool> {
        let Some((tx, _)) = &self.current else {
            return Ok(false);
        };
        if tx.send(data).await.is_err() {
            // The writer stopped early: its result says why.
            self.finish().await?;
            return Err(sgard_store::Error::Source(std::io::Error::other(
                "blob writer stopped",
            )));
        }
        Ok(true)
    }

    /// Finishes the current blob, if any.
    pub async fn finish(&mut self) -> sgard_store::Result<()> {
        if let Some((tx, handle)) = self.current.take() {
            drop(tx);
            handle
                .await
                .map_err(|e| sgard_store::Error::Source(std::io::Error::other(e.to_string())))??;
            self.done += 1;
        }
        Ok(())
    }
}
