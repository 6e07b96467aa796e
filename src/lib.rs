//! The sgard package's shared code: the environment (read in one place) and
//! the remote sync client and server, the only async code in sgard.
//!
//! The binaries are `sgard` (`src/main.rs`) and `sgardd` (`src/sgardd.rs`).

pub mod context;
pub mod remote;
