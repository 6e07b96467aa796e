//! `sgard completion <shell>`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::Cli;

pub fn run(shell: clap_complete::Shell, out: &mut dyn Write) -> Result<ExitCode> {
    clap_complete::generate(shell, &mut Cli::command(), "sgard", out);
    Ok(ExitCode::SUCCESS)
}
