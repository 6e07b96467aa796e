//! `sgard init`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::Garden;

use super::Ctx;

pub fn run(ctx: &Ctx, out: &mut dyn Write) -> Result<ExitCode> {
    Garden::init(&ctx.repo, ctx.env.clone())?;
    writeln!(
        out,
        "Initialized sgard repository at {}",
        ctx.repo.display()
    )?;
    Ok(ExitCode::SUCCESS)
}
