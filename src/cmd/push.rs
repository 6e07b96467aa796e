//! `sgard push`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard::remote::client::{self, Pushed};
use sgard_garden::LockMode;

use super::Ctx;

pub fn run(ctx: &Ctx, out: &mut dyn Write) -> Result<ExitCode> {
    let opts = ctx.remote_opts()?;
    let mut g = ctx.open(LockMode::Exclusive)?;
    g.record_data()?;
    match client::push(&mut g, &opts)? {
        Pushed::UpToDate => writeln!(out, "Already up to date.")?,
        Pushed::Done(n) => writeln!(out, "Pushed {n} blob(s).")?,
    }
    Ok(ExitCode::SUCCESS)
}
