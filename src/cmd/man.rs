//! `sgard man [--dir DIR]`

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::Cli;

pub fn run(dir: Option<&Path>, out: &mut dyn Write) -> Result<ExitCode> {
    let cmd = Cli::command();
    let Some(dir) = dir else {
        clap_mangen::Man::new(cmd).render(out)?;
        return Ok(ExitCode::SUCCESS);
    };
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = 0;
    let mut write_page = |name: &str, c: clap::Command| -> Result<()> {
        let mut buf = Vec::new();
        clap_mangen::Man::new(c).render(&mut buf)?;
        let path = dir.join(format!("{name}.1"));
        fs::write(&path, buf).with_context(|| format!("writing {}", path.display()))?;
        written += 1;
        Ok(())
    };
    write_page("sgard", cmd.clone())?;
    for sub in cmd.get_subcommands() {
        let name = format!("sgard-{}", sub.get_name());
        write_page(&name, sub.clone().name(name.clone()))?;
    }
    writeln!(out, "Wrote {written} man page(s) to {}", dir.display())?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard man`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write sgard.1 and sgard-<command>.1 into this folder
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}
