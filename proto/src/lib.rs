//! # sgard-proto: the sync protocol
//!
//! `sgard/v1/sgard.proto` (package `sgard.v1`, service `GardenSync`) compiled
//! by protox at build time: no system `protoc` is needed. The messages and
//! field numbers are the Go sgard's, so a Go client talks to `sgardd` and a
//! Go server serves `sgard`; sgard's additions use new field numbers, which
//! Go peers ignore.
//!
//! [`convert`] turns manifests and history records into messages and back,
//! losslessly (every field the manifest crate knows survives a round trip).
//! [`wire`] holds what both sides must agree on beyond the messages (garden
//! names, the busy refusal, the login challenge), [`head`] the signed head
//! statement, [`blobs`] the streaming of objects into a store.

/// The generated `sgard.v1` messages, client and server.
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    tonic::include_proto!("sgard.v1");
}

pub mod blobs;
pub mod convert;
pub mod head;
pub mod wire;

/// The chunk size for streaming blobs (the Go sgard's).
pub const CHUNK_SIZE: usize = 64 * 1024;

/// The metadata key carrying the auth token.
pub const TOKEN_METADATA_KEY: &str = "x-sgard-auth-token";

/// The words of a push's refusal (`RESOURCE_EXHAUSTED`) for an object over
/// the server's `--max-file-size`: the server writes `content HASH` before them
/// and ` of N bytes` after, and the client finds the hash by them to name
/// the file that holds it.
pub const TOO_LARGE: &str = "is larger than the server's limit";
