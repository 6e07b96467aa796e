//! `sgard trust add|list|remove`: the keys this machine trusts to sign the
//! heads of this repository (see `sgard::remote::trust`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use sgard::remote::trust::{TrustStore, fingerprint};
use sgard_garden::LockMode;

use super::Ctx;
use crate::ui;

fn run(ctx: &Ctx, action: Action, out: &mut dyn Write) -> Result<ExitCode> {
    let g = ctx.open(LockMode::Shared)?;
    let dir = g
        .local_state_dir()
        .ok_or_else(|| anyhow!("no folder for machine-local state (set XDG_STATE_HOME or HOME)"))?;
    let store = TrustStore::in_dir(dir);
    match action {
        Action::List => {
            let keys = store.keys()?;
            if keys.is_empty() {
                writeln!(
                    out,
                    "No key is trusted yet: the first signed head pulled (or this machine's \
                     first push) sets one."
                )?;
            } else {
                let head = format!("{:<52} {:<12} COMMENT", "FINGERPRINT", "TYPE");
                writeln!(out, "{}", ui::paint(ctx.colour, ui::Role::Heading, &head))?;
            }
            for k in keys {
                writeln!(
                    out,
                    "{:<52} {:<12} {}",
                    fingerprint(&k),
                    k.algorithm().as_str(),
                    ui::clean(k.comment())
                )?;
            }
            if store.signed_seen() {
                writeln!(
                    out,
                    "Unsigned heads are refused (`sgard pull --allow-unsigned`)."
                )?;
            }
        }
        Action::Add { key, dry_run } => {
            let path = ctx.env.resolve(key.as_os_str());
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let line = text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#'))
                .ok_or_else(|| anyhow!("{}: no public key in it", path.display()))?;
            let k = ssh_key::PublicKey::from_openssh(line).map_err(|e| {
                anyhow!(
                    "{}: not an OpenSSH public key ({e}); give the KEY.pub file of the key",
                    path.display()
                )
            })?;
            let fp = fingerprint(&k);
            if dry_run {
                let already = store.trusts(&k)?;
                writeln!(
                    out,
                    "Dry run: {fp} {}; nothing was changed.",
                    if already {
                        "is trusted already"
                    } else {
                        "would be trusted"
                    }
                )?;
            } else if store.add(&k)? {
                writeln!(out, "Trusting {fp} ({}).", ui::clean(k.comment()))?;
            } else {
                writeln!(out, "{fp} is trusted already.")?;
            }
        }
        Action::Remove { which, dry_run } => {
            let matches: Vec<_> = store
                .keys()?
                .into_iter()
                .filter(|k| fingerprint(k) == which || (!which.is_empty() && k.comment() == which))
                .collect();
            if matches.is_empty() {
                bail!("no trusted key is {which:?} (`sgard trust list` shows them)");
            }
            if dry_run {
                writeln!(
                    out,
                    "Dry run: would stop trusting {}; nothing was changed.",
                    ui::count(matches.len() as u64, "key", "keys")
                )?;
            } else {
                for k in store.remove(&which)? {
                    writeln!(out, "No longer trusting {}.", fingerprint(&k))?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard trust`.
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
        matches!(self.action, Action::List) || self.dry_run()
    }

    fn dry_run(&self) -> bool {
        matches!(
            self.action,
            Action::Add { dry_run: true, .. } | Action::Remove { dry_run: true, .. }
        )
    }
}

/// `trust` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Trust the key in a public key file (KEY.pub) to sign heads
    Add {
        /// The public key file (one OpenSSH public key line)
        #[arg(value_name = "KEY.pub")]
        key: std::path::PathBuf,
        /// Say what would be trusted; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// List the trusted keys
    List,
    /// Stop trusting a key (its SHA256 fingerprint, or its comment)
    Remove {
        /// The key's fingerprint (`SHA256:…`) or comment
        #[arg(value_name = "KEY")]
        which: String,
        /// Say what would be removed; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
}
