//! Content-addressed objects: blobs, chunk lists and chunks of one garden,
//! each named by the SHA-256 of its content.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream, StreamExt};
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutPayload, WriteMultipart};
use sgard_store::{Hash, Hasher};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::{Depot, Error, Garden, Kind, Result, fail_in};

/// Size of each part of a multipart upload, and the most a streaming write
/// holds before it starts one (S3 wants parts of at least 5 MiB).
const PART_SIZE: usize = 8 << 20;
/// Parts of one multipart upload in flight at once.
const PARALLEL_PARTS: usize = 2;
/// Read buffer of [`Depot::put_object_from`].
const READ_BUF: usize = 256 << 10;
/// The longest chunk list read (as long as any sgard writes: the store's
/// own bound).
pub const MAX_LIST: u64 = 64 << 20;

impl Depot {
    fn object_key(&self, garden: &Garden, kind: Kind, hash: &Hash) -> Path {
        let hex = hash.to_hex();
        let (a, b) = (&hex[0..2], &hex[2..4]);
        self.key(&["gardens", garden.as_str(), kind.dir(), a, b, &hex])
    }

    /// Stores `content` as the object `hash` of `kind` in `garden`.
    ///
    /// The content must hash to `hash`; an object already stored is left as
    /// it is (content-addressed writes are idempotent).
    ///
    /// # Errors
    /// [`Error::HashMismatch`] (nothing written) when `content` does not hash
    /// to `hash`; [`Error::Store`] when the write fails.
    pub async fn put_object(
        &self,
        garden: &Garden,
        kind: Kind,
        hash: &Hash,
        content: Bytes,
    ) -> Result<()> {
        let key = self.object_key(garden, kind, hash);
        let actual = Hash::of(&content);
        if actual != *hash {
            return Err(Error::HashMismatch {
                key: self.show(&key),
                actual,
            });
        }
        self.create_object(&key, content.into()).await
    }

    /// Writes `payload` at `key` unless something is there already.
    async fn create_object(&self, key: &Path, payload: PutPayload) -> Result<()> {
        match self
            .inner
            .store
            .put_opts(key, payload, PutMode::Create.into())
            .await
        {
            Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
            Err(e) => Err(self.fail("writing", self.show(key), e)),
        }
    }

    /// Starts a streaming write of the object `hash`: feed it with
    /// [`ObjectWriter::write`], then [`ObjectWriter::finish`], which stores the
    /// object only if everything written hashes to `hash`. Big objects go up
    /// as a multipart upload, which is aborted on a mismatch or an error.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be asked whether the object
    /// exists.
    pub async fn object_writer(
        &self,
        garden: &Garden,
        kind: Kind,
        hash: &Hash,
    ) -> Result<ObjectWriter> {
        let key = self.object_key(garden, kind, hash);
        let present = self.size_at(&key).await?.is_some();
        Ok(ObjectWriter {
            depot: self.clone(),
            key,
            expected: *hash,
            hasher: Hasher::new(),
            state: if present {
                State::Present
            } else {
                State::Buffer(Vec::new())
            },
        })
    }

    /// Stores the object `hash` from `reader`, read to its end (see
    /// [`Depot::object_writer`]).
    ///
    /// # Errors
    /// [`Error::Source`] when reading fails, [`Error::HashMismatch`] when the
    /// content does not hash to `hash`, [`Error::Store`] when writing fails;
    /// in every case nothing is stored.
    pub async fn put_object_from(
        &self,
        garden: &Garden,
        kind: Kind,
        hash: &Hash,
        reader: &mut (dyn AsyncRead + Unpin + Send),
    ) -> Result<()> {
        let mut writer = self.object_writer(garden, kind, hash).await?;
        let mut buf = vec![0u8; READ_BUF];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => writer.write(&buf[..n]).await?,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    let key = self.show(&writer.key);
                    // The read error is what the caller needs to see.
                    let _ = writer.abort().await;
                    return Err(Error::Source { key, source });
                }
            }
        }
        writer.finish().await
    }

    /// The content of the object `hash`, checked against its name.
    ///
    /// # Errors
    /// [`Error::NotFound`] when it is not stored, [`Error::Corrupt`] when its
    /// content does not hash to `hash`, [`Error::Store`] when reading fails.
    pub async fn get_object(&self, garden: &Garden, kind: Kind, hash: &Hash) -> Result<Bytes> {
        let key = self.object_key(garden, kind, hash);
        let got = self
            .inner
            .store
            .get(&key)
            .await
            .map_err(|e| self.read_error(&key, e))?;
        let content = got.bytes().await.map_err(|e| self.read_error(&key, e))?;
        let actual = Hash::of(&content);
        if actual != *hash {
            return Err(Error::Corrupt {
                key: self.show(&key),
                actual,
            });
        }
        Ok(content)
    }

    /// As [`Depot::get_object`], for an object that should be small (a
    /// text the caller reads whole): one larger than `limit` is refused
    /// before it is read.
    ///
    /// # Errors
    /// As [`Depot::get_object`], and [`Error::TooLarge`].
    pub async fn get_object_within(
        &self,
        garden: &Garden,
        kind: Kind,
        hash: &Hash,
        limit: u64,
    ) -> Result<Bytes> {
        let key = self.object_key(garden, kind, hash);
        let content = self.get_within(&key, limit).await?;
        let actual = Hash::of(&content);
        if actual != *hash {
            return Err(Error::Corrupt {
                key: self.show(&key),
                actual,
            });
        }
        Ok(content)
    }

    /// The bytes at `key`, refused before they are read when the store
    /// says they are more than `limit`.
    pub(crate) async fn get_within(&self, key: &Path, limit: u64) -> Result<Bytes> {
        let got = self
            .inner
            .store
            .get(key)
            .await
            .map_err(|e| self.read_error(key, e))?;
        let too_large = |size: u64| Error::TooLarge {
            key: self.show(key),
            size,
            limit,
        };
        if got.meta.size > limit {
            return Err(too_large(got.meta.size));
        }
        let content = got.bytes().await.map_err(|e| self.read_error(key, e))?;
        if content.len() as u64 > limit {
            return Err(too_large(content.len() as u64));
        }
        Ok(content)
    }

    /// The content of the object `hash` as a stream of chunks, for objects
    /// too big to hold in memory. The hash is checked at the end: the stream
    /// then yields [`Error::Corrupt`] as its last item instead of ending, so
    /// a consumer must not trust what it received before the stream ended
    /// cleanly.
    ///
    /// # Errors
    /// [`Error::NotFound`] when it is not stored, [`Error::Store`] when the
    /// read cannot start.
    pub async fn object_stream(
        &self,
        garden: &Garden,
        kind: Kind,
        hash: &Hash,
    ) -> Result<ObjectStream> {
        let key = self.object_key(garden, kind, hash);
        let got = self
            .inner
            .store
            .get(&key)
            .await
            .map_err(|e| self.read_error(&key, e))?;
        Ok(ObjectStream {
            bucket: self.bucket().map(str::to_owned),
            size: got.meta.size,
            inner: got.into_stream(),
            hasher: Some(Hasher::new()),
            expected: *hash,
            key: self.show(&key),
        })
    }

    /// The size of the object `hash`, or `None` when it is not stored; the
    /// content is not read (a HEAD request on S3).
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot answer.
    pub async fn object_size(
        &self,
        garden: &Garden,
        kind: Kind,
        hash: &Hash,
    ) -> Result<Option<u64>> {
        self.size_at(&self.object_key(garden, kind, hash)).await
    }

    async fn size_at(&self, key: &Path) -> Result<Option<u64>> {
        match self.inner.store.head(key).await {
            Ok(meta) => Ok(Some(meta.size)),
            // (S3 answers a HEAD without a body: a missing bucket looks
            // like a missing key here, and is named by the next request.)
            Err(e @ object_store::Error::NotFound { .. }) if !self.no_bucket(&e) => Ok(None),
            Err(e) => Err(self.fail("looking up", self.show(key), e)),
        }
    }

    /// Every object of `kind` in `garden`, with its size, sorted by hash.
    /// Keys that are not well-formed object names (a stray file in a folder
    /// depot, a temp file) are skipped.
    ///
    /// # Errors
    /// [`Error::Store`] when listing fails.
    pub async fn list_objects(&self, garden: &Garden, kind: Kind) -> Result<Vec<(Hash, u64)>> {
        let base = self.key(&["gardens", garden.as_str(), kind.dir()]);
        let mut listing = self.inner.store.list(Some(&base));
        let mut found = Vec::new();
        while let Some(item) = listing.next().await {
            let meta = item.map_err(|e| self.fail("listing", self.show(&base), e))?;
            if let Some(hash) = object_name(&base, &meta.location) {
                found.push((hash, meta.size));
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// Every object of `kind` in `garden` with its size and when it was
    /// last written (so a prune can spare what a push in progress wrote).
    ///
    /// # Errors
    /// [`Error::Store`] when listing fails.
    pub async fn list_objects_aged(
        &self,
        garden: &Garden,
        kind: Kind,
    ) -> Result<Vec<(Hash, u64, std::time::SystemTime)>> {
        let base = self.key(&["gardens", garden.as_str(), kind.dir()]);
        let mut listing = self.inner.store.list(Some(&base));
        let mut found = Vec::new();
        while let Some(item) = listing.next().await {
            let meta = item.map_err(|e| self.fail("listing", self.show(&base), e))?;
            if let Some(hash) = object_name(&base, &meta.location) {
                found.push((hash, meta.size, meta.last_modified.into()));
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// Stores the chunk list of the content `content`. A list is named by
    /// the content it describes, not by its own bytes, so it is not checked
    /// against its name here: the caller parses it and checks its chunks
    /// (and a puller checks the content it reassembles).
    ///
    /// # Errors
    /// [`Error::Store`] when the write fails.
    pub async fn put_list(&self, garden: &Garden, content: &Hash, text: Bytes) -> Result<()> {
        let key = self.object_key(garden, Kind::ChunkList, content);
        self.create_object(&key, text.into()).await
    }

    /// The text of the chunk list of `content` (see [`Depot::put_list`]).
    ///
    /// # Errors
    /// [`Error::NotFound`] when there is none, [`Error::TooLarge`] (not
    /// read) when it is longer than [`MAX_LIST`], [`Error::Store`] when
    /// reading fails.
    pub async fn get_list(&self, garden: &Garden, content: &Hash) -> Result<Bytes> {
        let key = self.object_key(garden, Kind::ChunkList, content);
        self.get_within(&key, MAX_LIST).await
    }

    /// Deletes the object `hash`; deleting a missing object succeeds.
    ///
    /// # Errors
    /// [`Error::Store`] when the delete fails.
    pub async fn delete_object(&self, garden: &Garden, kind: Kind, hash: &Hash) -> Result<()> {
        let key = self.object_key(garden, kind, hash);
        match self.inner.store.delete(&key).await {
            Ok(()) => Ok(()),
            Err(e @ object_store::Error::NotFound { .. }) if !self.no_bucket(&e) => Ok(()),
            Err(e) => Err(self.fail("deleting", self.show(&key), e)),
        }
    }

    pub(crate) fn read_error(&self, key: &Path, e: object_store::Error) -> Error {
        match e {
            object_store::Error::NotFound { .. } if !self.no_bucket(&e) => Error::NotFound {
                key: self.show(key),
            },
            e => self.fail("reading", self.show(key), e),
        }
    }
}

/// The hash named by `key` = `base/h0h1/h2h3/<hex>`, if it is one.
fn object_name(base: &Path, key: &Path) -> Option<Hash> {
    let parts: Vec<_> = key.prefix_match(base)?.collect();
    let [a, b, name] = parts.as_slice() else {
        return None;
    };
    let hash = Hash::parse(name.as_ref()).ok()?;
    let hex = hash.to_hex();
    (a.as_ref() == &hex[0..2] && b.as_ref() == &hex[2..4]).then_some(hash)
}

/// A streaming write of one object (see [`Depot::object_writer`]).
///
/// Dropped without [`finish`](Self::finish), it stores nothing; a multipart
/// upload in progress is then aborted in the background.
pub struct ObjectWriter {
    depot: Depot,
    key: Path,
    expected: Hash,
    hasher: Hasher,
    state: State,
}

enum State {
    /// The object is stored already: only hash what comes.
    Present,
    /// Small so far: held in memory, stored by one request at the end.
    Buffer(Vec<u8>),
    /// A multipart upload in progress.
    Upload(WriteMultipart),
    /// Finished, aborted, or failed.
    Done,
}

impl ObjectWriter {
    /// Adds `data` to the object.
    ///
    /// # Errors
    /// [`Error::Store`] when starting or feeding the upload fails; the upload
    /// is then aborted and the writer is spent.
    pub async fn write(&mut self, data: &[u8]) -> Result<()> {
        self.hasher.update(data);
        match &mut self.state {
            State::Present => Ok(()),
            State::Buffer(buf) if buf.len() + data.len() <= PART_SIZE => {
                buf.extend_from_slice(data);
                Ok(())
            }
            State::Buffer(_) => {
                let State::Buffer(mut buf) = std::mem::replace(&mut self.state, State::Done) else {
                    return Err(self.spent());
                };
                let upload = self
                    .depot
                    .inner
                    .store
                    .put_multipart(&self.key)
                    .await
                    .map_err(|e| {
                        self.depot
                            .fail("starting an upload of", self.depot.show(&self.key), e)
                    })?;
                let mut upload = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
                buf.extend_from_slice(data);
                upload.write(&buf);
                self.state = State::Upload(upload);
                Ok(())
            }
            State::Upload(upload) => {
                if let Err(e) = upload.wait_for_capacity(PARALLEL_PARTS).await {
                    let err = self.depot.fail("uploading", self.depot.show(&self.key), e);
                    if let State::Upload(upload) = std::mem::replace(&mut self.state, State::Done) {
                        // The upload's error is the one to report.
                        let _ = upload.abort().await;
                    }
                    return Err(err);
                }
                upload.write(data);
                Ok(())
            }
            State::Done => Err(self.spent()),
        }
    }

    /// Stores the object if what was written hashes to its name.
    ///
    /// # Errors
    /// [`Error::HashMismatch`] (nothing stored, the upload aborted) when it
    /// does not; [`Error::Store`] when the write fails.
    pub async fn finish(mut self) -> Result<()> {
        let state = std::mem::replace(&mut self.state, State::Done);
        let actual = std::mem::take(&mut self.hasher).finish();
        if actual != self.expected {
            if let State::Upload(upload) = state {
                // The mismatch is what the caller needs to see.
                let _ = upload.abort().await;
            }
            return Err(Error::HashMismatch {
                key: self.depot.show(&self.key),
                actual,
            });
        }
        match state {
            State::Present => Ok(()),
            State::Buffer(buf) => {
                self.depot
                    .create_object(&self.key, Bytes::from(buf).into())
                    .await
            }
            State::Upload(upload) => upload.finish().await.map(|_| ()).map_err(|e| {
                self.depot
                    .fail("completing an upload of", self.depot.show(&self.key), e)
            }),
            State::Done => Err(self.spent()),
        }
    }

    /// Gives up: nothing is stored, a multipart upload is aborted.
    ///
    /// # Errors
    /// [`Error::Store`] when aborting the upload fails.
    pub async fn abort(mut self) -> Result<()> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Upload(upload) => upload.abort().await.map_err(|e| {
                self.depot
                    .fail("aborting an upload of", self.depot.show(&self.key), e)
            }),
            _ => Ok(()),
        }
    }

    fn spent(&self) -> Error {
        Error::Interrupted {
            key: self.depot.show(&self.key),
        }
    }
}

impl Drop for ObjectWriter {
    fn drop(&mut self) {
        if let State::Upload(upload) = std::mem::replace(&mut self.state, State::Done)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                // Nobody is left to tell of a failure here.
                let _ = upload.abort().await;
            });
        }
    }
}

impl std::fmt::Debug for ObjectWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectWriter")
            .field("key", &self.depot.show(&self.key))
            .finish_non_exhaustive()
    }
}

/// An object's content as a stream of chunks (see [`Depot::object_stream`]).
pub struct ObjectStream {
    inner: BoxStream<'static, object_store::Result<Bytes>>,
    /// The depot's bucket (S3), to name it when it is missing.
    bucket: Option<String>,
    /// `None` once the stream has ended (or failed).
    hasher: Option<Hasher>,
    expected: Hash,
    key: String,
    size: u64,
}

impl ObjectStream {
    /// The object's size, as the store gave it before the first byte.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The next chunk; `None` once everything was read and checked.
    pub async fn next_chunk(&mut self) -> Option<Result<Bytes>> {
        self.next().await
    }
}

impl Stream for ObjectStream {
    type Item = Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let Some(hasher) = this.hasher.as_mut() else {
            return Poll::Ready(None);
        };
        match this.inner.poll_next_unpin(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(chunk))) => {
                hasher.update(&chunk);
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.hasher = None;
                let bucket = this.bucket.as_deref();
                Poll::Ready(Some(Err(fail_in(bucket, "reading", this.key.clone(), e))))
            }
            Poll::Ready(None) => {
                let actual = this.hasher.take().map(Hasher::finish);
                match actual {
                    Some(actual) if actual != this.expected => {
                        Poll::Ready(Some(Err(Error::Corrupt {
                            key: this.key.clone(),
                            actual,
                        })))
                    }
                    _ => Poll::Ready(None),
                }
            }
        }
    }
}

impl std::fmt::Debug for ObjectStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStream")
            .field("key", &self.key)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}
