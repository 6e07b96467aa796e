//! The sgard package's shared code: the environment the CLI reads, and the
//! remote sync client, the only async code in the CLI.
//!
//! The binary is `sgard` (`src/main.rs`); the server, `sgardd`, is the
//! `sgard-server` package (`server/`).

pub mod context;
pub mod remote;
