//! `sgard init`

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};
use sgard_garden::Garden;

use super::Ctx;

fn run(ctx: &Ctx, dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
    if dry_run {
        if ctx.repo.join(sgard_manifest::MANIFEST_FILE).exists() {
            bail!(
                "{} is already an sgard repository; nothing to create",
                ctx.repo.display()
            );
        }
        writeln!(
            out,
            "Dry run: would create an sgard repository at {}; nothing was created.",
            ctx.repo.display()
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let g = Garden::init(&ctx.repo, ctx.env.clone())?;
    ctx.finish(g)?;
    super::git::set_up(&ctx.repo, super::git::Attributes::Leave);
    writeln!(
        out,
        "Initialized sgard repository at {}",
        ctx.repo.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard init`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Say what would be created; create nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, self.dry_run, out)
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }
}
