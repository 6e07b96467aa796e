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
            } else {
                config::save(&ctx.repo, &r)?;
                write!(out, "Remote set: {addr}")?;
            }
            if r.tls {
                write!(out, " (TLS")?;
                if let Some(ca) = &r.tls_ca {
                    write!(out, ", CA: {}", ca.display())?;
                }
                write!(out, ")")?;
            }
            writeln!(out)?;
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
