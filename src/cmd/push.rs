//! `sgard push`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard::remote::client::{self, PushPlan, Pushed};
use sgard_garden::LockMode;

use super::Ctx;
use crate::exit::Fail;
use crate::ui;

fn run(ctx: &Ctx, dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let opts = ctx.remote_opts()?;
    if dry_run {
        let mut g = ctx.open_to_change(true)?;
        match client::push_plan(&mut g, &opts)? {
            PushPlan::UpToDate => writeln!(out, "Already up to date: nothing would be sent.")?,
            PushPlan::Refused => {
                return Err(Fail::conflict(format!(
                    "a push would be refused: the server at {} has changes this repository \
                     has not pulled; run `sgard pull` first",
                    opts.remote.addr
                )));
            }
            PushPlan::Send { blobs, bytes } => writeln!(
                out,
                "Dry run: would send {} ({}) to {}; nothing was sent.",
                ui::counts(blobs as u64, "blob"),
                ui::bytes(bytes),
                opts.remote.addr
            )?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut g = ctx.open(LockMode::Exclusive)?;
    g.record_data()?;
    match client::push(&mut g, &opts)? {
        Pushed::UpToDate => writeln!(out, "Already up to date.")?,
        Pushed::Done(n) => writeln!(out, "Pushed {}.", ui::counts(n as u64, "blob"))?,
    }
    ctx.finish(g)?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard push`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The sync server [default: SGARD_REMOTE, then <repo>/remote.yaml]
    #[arg(short = 'r', long, value_name = "HOST:PORT")]
    remote: Option<String>,
    /// Ask the server what it would take; send nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
    #[command(flatten)]
    net: crate::cli::NetArgs,
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

    fn needs_history(&self) -> bool {
        true
    }

    fn net(&self) -> super::Net {
        super::Net::of(self.remote.as_ref(), Some(&self.net))
    }
}
