//! `sgard prune`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;

use super::Ctx;
use crate::ui::{bytes, bytes_exact, counts};

fn run(ctx: &Ctx, remote: bool, dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
    if remote {
        let n = sgard::remote::client::remote_prune(&ctx.remote_opts()?)?;
        let n = u64::try_from(n).unwrap_or(0);
        writeln!(out, "Pruned {} on remote.", counts(n, "orphaned blob"))?;
        return Ok(ExitCode::SUCCESS);
    }
    if dry_run {
        let mut g = ctx.open(LockMode::Shared)?;
        let r = g.prune_dry_run()?;
        let c = &r.chunks;
        writeln!(
            out,
            "Would delete {} ({}), {} and {} ({}), {} of forgotten safety snapshots ({}): \
             {} in all.",
            counts(r.blobs, "orphaned blob"),
            bytes(r.blob_bytes),
            counts(c.lists, "chunk list"),
            counts(c.chunks, "chunk"),
            bytes(c.bytes),
            counts(r.local_blobs, "blob"),
            bytes(r.local_bytes),
            bytes_exact(r.blob_bytes + c.bytes + r.local_bytes),
        )?;
        if let Some(why) = &c.held_back {
            writeln!(out, "No chunk would be deleted: {why}")?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut g = ctx.open(LockMode::Exclusive)?;
    let r = g.prune()?;
    writeln!(
        out,
        "Pruned {}, freed {}.",
        counts(r.blobs, "orphaned blob"),
        bytes(r.blob_bytes)
    )?;
    let c = &r.chunks;
    if c.lists + c.chunks > 0 {
        writeln!(
            out,
            "Pruned {} and {}, freed {}.",
            counts(c.lists, "chunk list"),
            counts(c.chunks, "chunk"),
            bytes(c.bytes)
        )?;
    }
    if c.journals > 0 {
        writeln!(
            out,
            "Dropped {} of interrupted stores (their files changed, or 30 days passed).",
            counts(c.journals, "journal")
        )?;
    }
    if let Some(why) = &c.held_back {
        crate::ui::warn(&format!(
            "no chunk was pruned, since which chunks the repository needs is unknown: {why} \
             (run `sgard verify`)"
        ));
    }
    if r.local_blobs > 0 {
        writeln!(
            out,
            "Pruned {} of forgotten safety snapshots from this machine's state, freed {}.",
            counts(r.local_blobs, "blob"),
            bytes(r.local_bytes)
        )?;
    }
    if r.temps > 0 {
        writeln!(
            out,
            "Removed {}, freed {}.",
            counts(r.temps, "stale temp file"),
            bytes(r.temp_bytes)
        )?;
    }
    ctx.finish(g)?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard prune`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Say what would be deleted and how much it would free; delete nothing
    #[arg(short = 'n', long, conflicts_with = "remote")]
    dry_run: bool,
    /// Prune the sync server's store instead [default server: SGARD_REMOTE, then <repo>/remote.yaml]
    #[arg(short = 'r', long, value_name = "HOST:PORT", num_args = 0..=1, default_missing_value = "")]
    remote: Option<String>,
    #[command(flatten)]
    net: crate::cli::NetArgs,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, ctx.net.remote.is_some(), self.dry_run, out)
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }

    fn needs_history(&self) -> bool {
        self.remote.is_none()
    }

    fn net(&self) -> super::Net {
        super::Net::of(self.remote.as_ref(), Some(&self.net))
    }
}
