//! CLI integration tests: the built `sgard` binary in a throwaway HOME.
//!
//! One test binary (faster to link on small machines); one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

mod basics;
mod chunks;
mod doctor;
mod encryption;
mod evil;
mod externals;
mod folding;
mod gitflow;
mod gopeer;
mod history;
mod hostile;
mod index;
mod local;
mod machines;
mod managers;
mod objstore;
mod ops;
mod polish;
mod purge;
mod recipients;
mod scenarios;
mod sim;
mod sqlite;
mod statcache;
mod stories;
mod sync;
mod templates;
mod trust;
mod ux;
#[cfg(target_os = "linux")]
mod watch;
