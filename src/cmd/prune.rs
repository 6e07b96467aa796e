//! `sgard prune`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_garden::LockMode;

use super::Ctx;

pub fn run(ctx: &Ctx, remote: bool, out: &mut dyn Write) -> Result<ExitCode> {
    if remote {
        let n = sgard::remote::client::remote_prune(&ctx.remote_opts()?)?;
        writeln!(out, "Pruned {n} orphaned blob(s) on remote.")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut g = ctx.open(LockMode::Exclusive)?;
    let r = g.prune()?;
    writeln!(
        out,
        "Pruned {} orphaned blob(s), freed {} bytes.",
        r.blobs, r.blob_bytes
    )?;
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
