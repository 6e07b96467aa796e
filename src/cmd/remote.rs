//! `sgard remote set|show|unset`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard::remote::config::{self, Remote};

use super::Ctx;
use crate::cli::RemoteAction;

pub fn run(ctx: &Ctx, action: RemoteAction, out: &mut dyn Write) -> Result<ExitCode> {
    if !ctx.repo.join(sgard_manifest::MANIFEST_FILE).exists() {
        anyhow::bail!(
            "no sgard repository at {}; run `sgard init` first",
            ctx.repo.display()
        );
    }
    match action {
        RemoteAction::Set { addr, dry_run, .. } => {
            let r = Remote {
                addr: addr.clone(),
                tls: ctx.net.tls.unwrap_or(false),
                tls_ca: ctx
                    .net
                    .tls_ca
                    .as_ref()
                    .map(|p| ctx.env.resolve(p.as_os_str())),
            };
            if dry_run {
                write!(out, "Dry run: would set the remote to {addr}")?;
                write_tls(ctx, &r, out)?;
                writeln!(out)?;
            } else {
                save(ctx, &r, out)?;
            }
        }
        RemoteAction::Show => match config::load(&ctx.repo)? {
            None => writeln!(out, "No remote configured.")?,
            Some(r) => {
                writeln!(out, "addr:   {}", r.addr)?;
                writeln!(out, "tls:    {}", r.tls)?;
                if let Some(ca) = r.tls_ca {
                    writeln!(out, "tls-ca: {}", ca.display())?;
                }
            }
        },
        RemoteAction::Unset { dry_run: true } => match config::load(&ctx.repo)? {
            Some(r) => writeln!(out, "Dry run: would forget the remote {}.", r.addr)?,
            None => writeln!(out, "No remote configured.")?,
        },
        RemoteAction::Unset { dry_run: false } => {
            if config::unset(&ctx.repo)? {
                writeln!(out, "Remote removed.")?;
            } else {
                writeln!(out, "No remote configured.")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Saves `r` as this repository's remote (see [`config::save`]: a
/// certificate file is copied into the repository) and says so.
pub fn save(ctx: &Ctx, r: &Remote, out: &mut dyn Write) -> Result<()> {
    config::save(&ctx.repo, r)?;
    write!(out, "Remote set: {}", r.addr)?;
    write_tls(ctx, r, out)?;
    writeln!(out)?;
    Ok(())
}

/// ` (TLS)`, or ` (TLS, CA: FILE kept in the repository as remote-ca.pem)`.
fn write_tls(ctx: &Ctx, r: &Remote, out: &mut dyn Write) -> Result<()> {
    if let Some(ca) = &r.tls_ca {
        write!(
            out,
            " (TLS, CA: {}, kept in the repository as {})",
            ca.display(),
            ctx.repo.join(config::CA_FILE).display()
        )?;
    } else if r.tls {
        write!(out, " (TLS)")?;
    }
    Ok(())
}
