//! `sgard completion <shell>`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::Cli;

pub fn run(shell: clap_complete::Shell, out: &mut dyn Write) -> Result<ExitCode> {
    // Generate into memory: clap_complete panics when its writer fails, and
    // a closed stdout must stay a quiet exit.
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "sgard", &mut buf);
    out.write_all(&buf)?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard completion`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The shell
    pub shell: clap_complete::Shell,
}
