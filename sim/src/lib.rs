//! `sgard-sim`: a model-based simulation of machines, repositories and a
//! server.
//!
//! It drives a given `sgard` binary as a black box: three homes (machines
//! with their own host names, state folders and SSH keys), one shared
//! folder repository, one git origin with a clone per machine and one
//! `sgardd` on loopback. A seeded generator plays long sequences of
//! ordinary operations on them (file edits, every command, git, faults:
//! SIGINT, SIGKILL, a full disk, a damaged store) and after every step the
//! runner checks the invariants in [`run::inv`] against what is on disk,
//! read without sgard. A failure is shrunk (delta debugging) to a short
//! list of operations that can be saved and replayed.
//!
//! What it models and what it does not is in the guide (docs/src/development.md) and
//! ARCHITECTURE.md ("The simulation").

use std::path::PathBuf;

pub mod case;
mod content;
pub mod generate;
pub mod home;
pub mod op;
pub mod repo;
pub mod run;
pub mod shrink;
pub mod world;

/// What every world of a run is built with.
#[derive(Clone, Debug)]
pub struct Config {
    /// The `sgard` binary under test.
    pub sgard: PathBuf,
    /// The `sgardd` binary (the server of the world).
    pub sgardd: PathBuf,
    /// Operations per generated case.
    pub steps: usize,
    /// Keep the world's folder of a failing run.
    pub keep: bool,
    /// Whether `strace` can inject a full disk here.
    pub strace: bool,
    /// Where worlds are made.
    pub tmp: PathBuf,
    /// Invariants (by a word of their name) whose failures are noted and
    /// passed over, to look past a defect already known.
    pub skip: Vec<String>,
}

impl Config {
    /// Whether failures of `invariant` are passed over.
    pub fn skips(&self, invariant: &str) -> bool {
        self.skip.iter().any(|s| invariant.contains(s.as_str()))
    }
}

/// What stops the sim itself (not a failure of sgard).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or program of the sim's own could not be used.
    #[error("{path}: {source}")]
    Io {
        /// What it was.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A command of the world's set-up failed (sgard, git, ssh-keygen, sgardd).
    #[error("setting up the world: {0}")]
    Setup(String),
    /// A case file does not read.
    #[error("reading a case: {0}")]
    Case(String),
}

/// Whether `strace` can trace (and so inject faults) on this machine.
pub fn strace_works() -> bool {
    std::process::Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
