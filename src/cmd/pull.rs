//! `sgard pull`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard::remote::client;
use sgard_garden::{Garden, LockMode, RestoreOptions, Side};

use super::{Ctx, restore};
use crate::ui::StdinPrompt;

pub fn run(
    ctx: &Ctx,
    theirs: bool,
    ours: bool,
    force: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let opts = ctx.remote_opts()?;
    if !client::exists(&ctx.repo) {
        Garden::init(&ctx.repo, ctx.env.clone())?;
        writeln!(
            out,
            "Initialized sgard repository at {}",
            ctx.repo.display()
        )?;
    }
    let mut g = ctx.open(LockMode::Exclusive)?;
    let side = if theirs {
        Side::Theirs
    } else if ours {
        Side::Ours
    } else {
        Side::Merge
    };
    let mut prompt = StdinPrompt::new();
    let p = client::pull(
        &mut g,
        &opts,
        side,
        RestoreOptions {
            force,
            dry_run: false,
        },
        &mut prompt,
    )?;
    if p.report.up_to_date {
        writeln!(out, "Already up to date.")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "Pulled {} blob(s).", p.blobs)?;
    for s in &p.report.settled {
        writeln!(out, "{:<10} {s}", if theirs { "theirs" } else { "ours" })?;
    }
    restore::print_actions(&p.report.restore, false, out)?;
    restore::finish(&p.report.restore, false, out)
}
