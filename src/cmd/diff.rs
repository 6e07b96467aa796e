//! `sgard diff`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::{Diff, LockMode};

use super::Ctx;

pub fn run(ctx: &Ctx, path: &OsString, exit_code: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let g = ctx.open(LockMode::Shared)?;
    let differs = match g.diff(path)? {
        Diff::Same => {
            writeln!(out, "No changes.")?;
            false
        }
        Diff::Text(t) => {
            out.write_all(t.as_bytes())?;
            true
        }
        Diff::Binary { path } => {
            writeln!(
                out,
                "Binary files {path} (stored) and {path} (current) differ"
            )?;
            true
        }
    };
    Ok(if exit_code && differs {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
