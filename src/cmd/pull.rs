//! `sgard pull`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard::remote::client;
use sgard_garden::{Garden, LockMode, RestoreOptions, Side};

use super::scripts::{self, Scripts};
use super::{Ctx, restore};
use crate::ui::StdinPrompt;

/// The flags of `pull`.
pub struct Flags {
    pub theirs: bool,
    pub ours: bool,
    pub force: bool,
    pub allow_absolute: bool,
    pub allow_setuid: bool,
    pub no_scripts: bool,
}

pub fn run(ctx: &Ctx, f: Flags, out: &mut dyn Write) -> Result<ExitCode> {
    let Flags {
        theirs,
        ours,
        force,
        allow_absolute,
        allow_setuid,
        no_scripts,
    } = f;
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
        sgard_garden::Trust {
            absolute: allow_absolute,
            setuid: allow_setuid,
        },
        &mut prompt,
    )?;
    let scripts = if no_scripts {
        Scripts::Skip
    } else {
        Scripts::Run
    };
    // Run with the repository closed: a script may run sgard.
    let plan = scripts::plan(&g, scripts)?;
    drop(g);
    if p.report.up_to_date {
        writeln!(out, "Already up to date.")?;
        // What failed last time is due again.
        let failed = scripts::run_plan(plan, out)?;
        if !failed.is_empty() {
            return Err(scripts::failed_error(&failed));
        }
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "Pulled {} blob(s).", p.blobs)?;
    for s in &p.report.stripped {
        crate::ui::note(&format!(
            "dropped the setuid/setgid bits the server gave {s} (`sgard pull --allow-setuid` keeps them)"
        ));
    }
    for s in &p.report.settled {
        writeln!(out, "{:<10} {s}", if theirs { "theirs" } else { "ours" })?;
    }
    restore::print_actions(&p.report.restore, false, out)?;
    let failed = scripts::run_plan(plan, out)?;
    let code = restore::finish(&p.report.restore, false, out)?;
    if !failed.is_empty() {
        return Err(scripts::failed_error(&failed));
    }
    Ok(code)
}
