//! `sgard remote set|show|unset`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard::remote::config::{self, Remote};

use super::Ctx;

fn run(ctx: &Ctx, action: Action, out: &mut dyn Write) -> Result<ExitCode> {
    if !ctx.repo.join(sgard_manifest::MANIFEST_FILE).exists() {
        anyhow::bail!(
            "no sgard repository at {}; run `sgard init` first",
            ctx.repo.display()
        );
    }
    match action {
        Action::Set { addr, dry_run, .. } => {
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
        Action::Show => match config::load(&ctx.repo)? {
            None => writeln!(out, "No remote configured.")?,
            Some(r) => {
                writeln!(out, "addr:   {}", r.addr)?;
                writeln!(out, "tls:    {}", r.tls)?;
                if let Some(ca) = r.tls_ca {
                    writeln!(out, "tls-ca: {}", ca.display())?;
                }
            }
        },
        Action::Unset { dry_run: true } => match config::load(&ctx.repo)? {
            Some(r) => writeln!(out, "Dry run: would forget the remote {}.", r.addr)?,
            None => writeln!(out, "No remote configured.")?,
        },
        Action::Unset { dry_run: false } => {
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

/// The arguments of `sgard remote`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to do
    #[command(subcommand)]
    action: Action,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(ctx, self.action, out)
    }

    fn answers(&self) -> bool {
        matches!(self.action, Action::Show) || self.dry_run()
    }

    fn dry_run(&self) -> bool {
        matches!(
            self.action,
            Action::Set { dry_run: true, .. } | Action::Unset { dry_run: true }
        )
    }

    fn net(&self) -> super::Net {
        match &self.action {
            Action::Set { tls, tls_ca, .. } => super::Net::of(
                None,
                Some(&crate::cli::NetArgs {
                    tls: *tls,
                    tls_ca: tls_ca.clone(),
                    ..crate::cli::NetArgs::default()
                }),
            ),
            _ => super::Net::of(None, None),
        }
    }
}

/// `remote` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Save the server address (and --tls / --tls-ca) in <repo>/remote.yaml
    Set {
        /// HOST:PORT
        addr: String,
        /// Use TLS to the server
        #[arg(long)]
        tls: bool,
        /// Trust this PEM certificate or CA bundle for the server (implies --tls)
        #[arg(long, value_name = "FILE")]
        tls_ca: Option<std::path::PathBuf>,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Show the saved server
    Show,
    /// Forget the saved server
    Unset {
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
}
