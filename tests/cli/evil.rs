//! A hostile sync server: a real gRPC server (tonic, in the test process)
//! that answers `sgard pull` with whatever a test scripts: paths outside
//! the home, entries through symlinks, blobs it never sends, blobs nobody
//! asked for, endless or stalled streams, setuid modes, control characters.
//! The client under test is the real `sgard` binary.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sgard_proto::v1;
use sgard_proto::v1::garden_sync_server::{GardenSync, GardenSyncServer};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::common::*;

/// What the server does when asked for blobs.
#[derive(Clone, Debug, Default)]
pub enum Blobs {
    /// Sends what was asked for, as stored.
    #[default]
    Honest,
    /// Never sends these.
    Omit(Vec<String>),
    /// Also sends this one, unasked (hash, bytes).
    Extra(String, Vec<u8>),
    /// Sends the first asked-for blob's name, then data without end.
    Endless,
    /// Sends nothing and never ends the stream.
    Stall,
}

/// The scripted server state.
#[derive(Clone, Default)]
pub struct Script {
    pub manifest: v1::Manifest,
    pub history: Vec<v1::HistoryRecord>,
    pub blobs: HashMap<String, Vec<u8>>,
    pub mode: Blobs,
    /// Stall the manifest answer (a server that never answers).
    pub stall_manifest: bool,
    /// Declared blob sizes to send (none: like a Go server).
    pub sizes: HashMap<String, u64>,
    /// The RPCs called, in order (`PushManifest`, `PushBlobs`, …).
    pub calls: Vec<&'static str>,
    /// A manifest accepted by PushManifest, installed at the end of the
    /// next PushBlobs (as the Go sgardd does).
    pub pending: Option<v1::Manifest>,
}

impl Script {
    /// Adds a file entry whose blob holds `data`.
    pub fn file(&mut self, path: &str, data: &[u8], mode: &str) -> String {
        let h = sha(data);
        self.blobs.insert(h.clone(), data.to_vec());
        self.manifest.files.push(v1::ManifestEntry {
            path: path.into(),
            hash: h.clone(),
            r#type: "file".into(),
            mode: mode.into(),
            updated: Some(prost_types::Timestamp {
                seconds: now_secs(),
                nanos: 0,
            }),
            ..Default::default()
        });
        h
    }

    /// Adds a symlink entry.
    pub fn link(&mut self, path: &str, target: &str) {
        self.manifest.files.push(v1::ManifestEntry {
            path: path.into(),
            r#type: "link".into(),
            mode: "0777".into(),
            target: target.into(),
            updated: Some(prost_types::Timestamp {
                seconds: now_secs(),
                nanos: 0,
            }),
            ..Default::default()
        });
    }
}

type ChunkStream = Pin<Box<dyn Stream<Item = Result<v1::PullBlobsResponse, Status>> + Send>>;

struct Evil(Arc<Mutex<Script>>);

fn chunk(hash: &str, data: Vec<u8>) -> Result<v1::PullBlobsResponse, Status> {
    Ok(v1::PullBlobsResponse {
        chunk: Some(v1::BlobChunk {
            hash: hash.into(),
            data,
            kind: 0,
        }),
    })
}

#[tonic::async_trait]
impl GardenSync for Evil {
    async fn authenticate(
        &self,
        _: Request<v1::AuthenticateRequest>,
    ) -> Result<Response<v1::AuthenticateResponse>, Status> {
        Err(Status::unimplemented("no login here"))
    }

    /// As the Go sgardd decides: a newer manifest is accepted (and kept
    /// for the next PushBlobs), asking for the blobs of `type: file`
    /// entries it lacks; an older one is refused; the same time is up to
    /// date.
    async fn push_manifest(
        &self,
        req: Request<v1::PushManifestRequest>,
    ) -> Result<Response<v1::PushManifestResponse>, Status> {
        let mut s = self.0.lock().unwrap();
        s.calls.push("PushManifest");
        let theirs = req.into_inner().manifest.unwrap_or_default();
        let secs = |m: &v1::Manifest| m.updated.map(|t| (t.seconds, t.nanos));
        let (client, server) = (secs(&theirs), secs(&s.manifest));
        use v1::push_manifest_response::Decision;
        let (decision, missing) = if client > server {
            let missing = theirs
                .files
                .iter()
                .filter(|e| e.r#type == "file" && !e.hash.is_empty())
                .filter(|e| !s.blobs.contains_key(&e.hash))
                .map(|e| e.hash.clone())
                .collect();
            s.pending = Some(theirs);
            (Decision::Accepted, missing)
        } else if server > client {
            (Decision::Rejected, Vec::new())
        } else {
            (Decision::UpToDate, Vec::new())
        };
        Ok(Response::new(v1::PushManifestResponse {
            decision: decision as i32,
            missing_blobs: missing,
            server_updated: s.manifest.updated,
            ..Default::default()
        }))
    }

    /// Stores every blob sent (whatever its name, hash-checked), then
    /// installs the pending manifest.
    async fn push_blobs(
        &self,
        req: Request<tonic::Streaming<v1::PushBlobsRequest>>,
    ) -> Result<Response<v1::PushBlobsResponse>, Status> {
        use tokio_stream::StreamExt;
        self.0.lock().unwrap().calls.push("PushBlobs");
        let mut stream = req.into_inner();
        let mut got: Vec<(String, Vec<u8>)> = Vec::new();
        while let Some(msg) = stream.next().await {
            let Some(c) = msg?.chunk else { continue };
            if !c.hash.is_empty() {
                got.push((c.hash, c.data));
            } else if let Some(last) = got.last_mut() {
                last.1.extend_from_slice(&c.data);
            }
        }
        let mut s = self.0.lock().unwrap();
        let n = got.len();
        for (h, data) in got {
            if sha(&data) != h {
                return Err(Status::invalid_argument("hash mismatch"));
            }
            s.blobs.insert(h, data);
        }
        if let Some(m) = s.pending.take() {
            s.manifest = m;
        }
        Ok(Response::new(v1::PushBlobsResponse {
            blobs_received: i32::try_from(n).unwrap(),
        }))
    }

    async fn missing_chunks(
        &self,
        _: Request<v1::MissingChunksRequest>,
    ) -> Result<Response<v1::MissingChunksResponse>, Status> {
        Err(Status::unimplemented("no chunks here"))
    }

    async fn report(
        &self,
        _: Request<v1::ReportRequest>,
    ) -> Result<Response<v1::ReportResponse>, Status> {
        Err(Status::unimplemented("like a Go server"))
    }

    async fn fleet(
        &self,
        _: Request<v1::FleetRequest>,
    ) -> Result<Response<v1::FleetResponse>, Status> {
        Err(Status::unimplemented("like a Go server"))
    }

    async fn pull_manifest(
        &self,
        _: Request<v1::PullManifestRequest>,
    ) -> Result<Response<v1::PullManifestResponse>, Status> {
        self.0.lock().unwrap().calls.push("PullManifest");
        let s = self.0.lock().unwrap().clone();
        if s.stall_manifest {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ok(Response::new(v1::PullManifestResponse {
            manifest: Some(s.manifest),
            head_id: String::new(),
            history: s.history,
            blob_sizes: s.sizes,
            ..Default::default()
        }))
    }

    type PullBlobsStream = ChunkStream;

    async fn pull_blobs(
        &self,
        req: Request<v1::PullBlobsRequest>,
    ) -> Result<Response<Self::PullBlobsStream>, Status> {
        let s = self.0.lock().unwrap().clone();
        let asked = req.into_inner().hashes;
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            match s.mode {
                Blobs::Stall => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    drop(tx);
                }
                Blobs::Endless => {
                    let Some(h) = asked.first() else { return };
                    if tx.send(chunk(h, vec![b'x'; 65536])).await.is_err() {
                        return;
                    }
                    while tx.send(chunk("", vec![b'x'; 65536])).await.is_ok() {}
                }
                ref mode => {
                    for h in &asked {
                        if let Blobs::Omit(skip) = mode
                            && skip.contains(h)
                        {
                            continue;
                        }
                        let data = s.blobs.get(h).cloned().unwrap_or_default();
                        if tx.send(chunk(h, data)).await.is_err() {
                            return;
                        }
                    }
                    if let Blobs::Extra(h, data) = mode {
                        let _ = tx.send(chunk(h, data.clone())).await;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn prune(
        &self,
        _: Request<v1::PruneRequest>,
    ) -> Result<Response<v1::PruneResponse>, Status> {
        Err(Status::unimplemented("read-only"))
    }
}

/// A running hostile server; stopped when dropped.
pub struct EvilServer {
    pub addr: String,
    /// The state it serves (and what pushes did to it).
    pub script: Arc<Mutex<Script>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for EvilServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts a hostile server on 127.0.0.1 serving `script`.
pub fn serve(script: Script) -> EvilServer {
    let shared = Arc::new(Mutex::new(script));
    let s2 = Arc::clone(&shared);
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(l.local_addr().unwrap().to_string()).unwrap();
            let svc = GardenSyncServer::new(Evil(s2))
                .max_decoding_message_size(64 << 20)
                .max_encoding_message_size(64 << 20);
            let _ = tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(l),
                    async {
                        let _ = stop_rx.await;
                    },
                )
                .await;
        });
    });
    let addr = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    EvilServer {
        addr,
        script: shared,
        stop: Some(stop_tx),
        thread: Some(thread),
    }
}

/// `sgard pull -r ADDR` in `t` (no SSH key: a no-login server), bounded.
pub fn pull(t: &TestEnv, addr: &str, extra: &[&str]) -> Run {
    let mut args = vec!["pull", "-r", addr];
    args.extend_from_slice(extra);
    let child = t
        .command(&args)
        .env("SSH_AUTH_SOCK", "")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_limited(child, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("`sgard pull` hung: {e}"))
}
