//! Command-line interface definition (clap derive).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// sgard checkpoints your dotfiles into a portable repository and restores
/// them on any machine.
#[derive(Parser, Debug)]
#[command(name = "sgard", version, about, long_about = None, disable_version_flag = true)]
pub struct Cli {
    /// Repository folder [default: ~/.sgard]
    #[arg(long, global = true, env = "SGARD_REPO", value_name = "PATH")]
    pub repo: Option<PathBuf>,

    /// Print version
    #[arg(short = 'V', long = "version", action = clap::ArgAction::Version)]
    pub version: Option<bool>,

    /// What to do
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create a new repository
    Init,
    /// Track files, symlinks and folders (folders are recursed)
    Add(AddArgs),
    /// Stop tracking paths (an entry, or every entry under a folder)
    #[command(alias = "rm")]
    Remove {
        /// Paths to untrack
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<OsString>,
    },
    /// Record the current content of every tracked path
    Checkpoint {
        /// A message describing this checkpoint
        #[arg(short, long)]
        message: Option<String>,
    },
    /// Write tracked entries back to disk
    Restore {
        /// Entries (or folders of entries) to restore [default: all]
        #[arg(value_name = "PATH")]
        paths: Vec<OsString>,
        /// Overwrite without asking
        #[arg(short, long)]
        force: bool,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Show how each tracked path compares with the repository
    #[command(alias = "st")]
    Status {
        /// Exit with status 1 when anything is not ok
        #[arg(long)]
        exit_code: bool,
    },
    /// Show a unified diff of a tracked file: stored against current
    Diff {
        /// The tracked file
        #[arg(value_name = "PATH")]
        path: OsString,
        /// Exit with status 1 when the file differs
        #[arg(long)]
        exit_code: bool,
    },
    /// Re-hash every stored blob
    Verify,
    /// List tracked entries
    #[command(alias = "ls")]
    List,
    /// Show everything known about a tracked path
    Info {
        /// The tracked path
        #[arg(value_name = "PATH")]
        path: OsString,
    },
    /// Delete stored blobs nothing references, and stale temp files
    Prune,
    /// Print sgard's version
    Version,
    /// Print a shell completion script
    Completion {
        /// The shell
        shell: clap_complete::Shell,
    },
}

/// Arguments of `add`.
#[derive(Args, Debug)]
pub struct AddArgs {
    /// Files, symlinks or folders to track
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<OsString>,
}
