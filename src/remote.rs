//! The sync client: `sgard push`/`pull` and friends over gRPC to `sgardd`
//! (the `sgard-server` package) or a Go sgardd. What both sides agree on
//! beyond the messages is in `sgard_proto`; merging is the same `Garden`
//! methods the local commands call, on blocking threads, under the
//! repository lock.

pub mod auth;
pub mod client;
pub mod config;
pub mod explain;
pub mod probe;
pub mod tls;
pub mod trust;
