//! Remote sync over gRPC: `sgardd` (the server) and `sgard push`/`pull`
//! (the client). Both call the same `Garden` methods as the local commands,
//! on blocking threads, under the repository lock.

pub mod auth;
pub mod blobs;
pub mod client;
pub mod config;
pub mod explain;
pub mod fleet;
pub mod metrics;
pub mod probe;
pub mod server;
pub mod tls;
pub mod trust;
