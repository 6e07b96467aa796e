//! One module per subcommand: parse, call one Garden method, render.

mod add;
mod checkpoint;
mod completion;
mod diff;
mod info;
mod init;
mod list;
mod prune;
mod remove;
mod restore;
mod status;
mod verify;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::{Env, Garden, LockMode};

use crate::cli::{Cli, Command};
use crate::{context, ui};

/// What every command gets.
pub struct Ctx {
    /// The environment of this run.
    pub env: Env,
    /// The repository folder (absolute).
    pub repo: PathBuf,
}

impl Ctx {
    /// Opens the repository with the lock `mode`, saying so if it must wait.
    pub fn open(&self, mode: LockMode) -> Result<Garden> {
        Ok(Garden::open(&self.repo, self.env.clone(), mode, &ui::note)?)
    }
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    match cli.command {
        Command::Version => {
            writeln!(out, "sgard {}", env!("CARGO_PKG_VERSION"))?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Completion { shell } => return completion::run(shell, &mut out),
        _ => {}
    }
    let env = context::env()?;
    let repo = context::repo_path(&env, cli.repo.as_deref());
    let ctx = Ctx { env, repo };
    let out: &mut dyn Write = &mut out;
    let code = match cli.command {
        Command::Init => init::run(&ctx, out)?,
        Command::Add(a) => add::run(&ctx, &a, out)?,
        Command::Remove { paths } => remove::run(&ctx, &paths, out)?,
        Command::Checkpoint { message } => checkpoint::run(&ctx, message.as_deref(), out)?,
        Command::Restore {
            paths,
            force,
            dry_run,
        } => restore::run(&ctx, &paths, force, dry_run, out)?,
        Command::Status { exit_code } => status::run(&ctx, exit_code, out)?,
        Command::Diff { path, exit_code } => diff::run(&ctx, &path, exit_code, out)?,
        Command::Verify => verify::run(&ctx, out)?,
        Command::List => list::run(&ctx, out)?,
        Command::Info { path } => info::run(&ctx, &path, out)?,
        Command::Prune => prune::run(&ctx, out)?,
        Command::Version | Command::Completion { .. } => ExitCode::SUCCESS,
    };
    out.flush()?;
    Ok(code)
}
