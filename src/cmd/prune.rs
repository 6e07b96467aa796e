//! `sgard prune`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;

use super::Ctx;
use crate::ui::{bytes, bytes_exact, counts};

pub fn run(ctx: &Ctx, remote: bool, dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
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
    Ok(ExitCode::SUCCESS)
}
