//! `sgard target`

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::{LockMode, Targeting};

use super::Ctx;

pub fn run(
    ctx: &Ctx,
    paths: &[OsString],
    only: Vec<String>,
    never: Vec<String>,
    clear: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let t = if clear {
        Targeting::Clear
    } else if !only.is_empty() {
        Targeting::Only(only)
    } else {
        Targeting::Never(never)
    };
    let mut g = ctx.open(LockMode::Exclusive)?;
    for p in g.set_target(paths, &t)? {
        writeln!(out, "Updated targeting for {p}.")?;
    }
    Ok(ExitCode::SUCCESS)
}
