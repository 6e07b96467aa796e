//! `sgard prune`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;

use super::Ctx;

pub fn run(ctx: &Ctx, remote: bool, dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
    if remote {
        let n = sgard::remote::client::remote_prune(&ctx.remote_opts()?)?;
        writeln!(out, "Pruned {n} orphaned blob(s) on remote.")?;
        return Ok(ExitCode::SUCCESS);
    }
    if dry_run {
        let mut g = ctx.open(LockMode::Shared)?;
        let r = g.prune_dry_run()?;
        let c = &r.chunks;
        writeln!(
            out,
            "Would delete {} orphaned blob(s) ({} bytes), {} chunk list(s) and {} chunk(s) ({} bytes), \
             {} blob(s) of forgotten safety snapshots ({} bytes): {} bytes in all.",
            r.blobs,
            r.blob_bytes,
            c.lists,
            c.chunks,
            c.bytes,
            r.local_blobs,
            r.local_bytes,
            r.blob_bytes + c.bytes + r.local_bytes
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
        "Pruned {} orphaned blob(s), freed {} bytes.",
        r.blobs, r.blob_bytes
    )?;
    let c = &r.chunks;
    if c.lists + c.chunks > 0 {
        writeln!(
            out,
            "Pruned {} chunk list(s) and {} chunk(s), freed {} bytes.",
            c.lists, c.chunks, c.bytes
        )?;
    }
    if c.journals > 0 {
        writeln!(
            out,
            "Dropped {} journal(s) of interrupted stores (their files changed, or 30 days passed).",
            c.journals
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
            "Pruned {} blob(s) of forgotten safety snapshots from this machine's state, freed \
             {} bytes.",
            r.local_blobs, r.local_bytes
        )?;
    }
    if r.temps > 0 {
        writeln!(
            out,
            "Removed {} stale temp file(s), freed {} bytes.",
            r.temps, r.temp_bytes
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
