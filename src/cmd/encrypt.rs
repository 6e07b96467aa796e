//! `sgard encrypt init|list-slots|remove-slot|change-passphrase|rotate-dek`

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use sgard_garden::LockMode;

use super::Ctx;
use crate::ui::StdinPrompt;
use sgard::context;

fn run(ctx: &Ctx, action: Action, out: &mut dyn Write) -> Result<ExitCode> {
    match action {
        Action::Init { dry_run } => {
            let mut g = ctx.open_to_change(dry_run)?;
            if g.encryption_initialized() {
                return Err(anyhow!(
                    "encryption is already initialized in {} (`sgard encrypt list-slots` shows \
                     its key slots)",
                    ctx.repo.display()
                ));
            }
            if dry_run {
                writeln!(
                    out,
                    "Dry run: would create a data key and wrap it in a passphrase slot; \
                     nothing was changed."
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            let pass = context::new_passphrase_for_init().map_err(anyhow::Error::msg)?;
            g.encrypt_init(&pass, context::kdf_params())?;
            writeln!(out, "Encryption initialized with passphrase slot.")?;
            ctx.finish(g)?;
        }
        Action::ListSlots => {
            let g = ctx.open(LockMode::Shared)?;
            let slots = g.key_slots();
            if slots.is_empty() {
                writeln!(
                    out,
                    "No encryption configured (`sgard encrypt init` sets it up)."
                )?;
            } else {
                let head = format!("{:<30} {}", "SLOT", "KIND");
                writeln!(
                    out,
                    "{}",
                    crate::ui::paint(ctx.colour, crate::ui::Role::Heading, &head)
                )?;
            }
            for (name, kind) in slots {
                writeln!(out, "{:<30} {kind}", crate::ui::clean(&name))?;
            }
            ctx.finish_query(g);
        }
        Action::RemoveSlot { name, dry_run } => {
            let mut g = ctx.open_to_change(dry_run)?;
            g.remove_slot(&name)?;
            if dry_run {
                writeln!(
                    out,
                    "Dry run: would remove key slot {name:?}; nothing was changed."
                )?;
            } else {
                writeln!(out, "Removed key slot {name:?}.")?;
            }
            ctx.finish(g)?;
        }
        Action::ChangePassphrase { dry_run } => {
            let mut g = ctx.open_to_change(dry_run)?;
            if !g.encryption_initialized() {
                return Err(anyhow!(
                    "encryption is not initialized; run `sgard encrypt init` first"
                ));
            }
            if dry_run {
                writeln!(
                    out,
                    "Dry run: would unlock the data key with the current passphrase and wrap it \
                     under a new one; nothing was changed."
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            // Unlock with the current passphrase first: a wrong one must fail
            // before a new one is asked for.
            g.verify_passphrase()?;
            let new = context::new_passphrase_for_change().map_err(anyhow::Error::msg)?;
            g.change_passphrase(
                &new,
                std::env::var("SGARD_TEST_ARGON2")
                    .is_ok()
                    .then(context::kdf_params),
            )?;
            writeln!(out, "Passphrase changed.")?;
            ctx.finish(g)?;
        }
        Action::RotateDek { dry_run: true } => {
            let g = ctx.open(LockMode::Shared)?;
            if !g.encryption_initialized() {
                return Err(anyhow!(
                    "encryption is not initialized; run `sgard encrypt init` first"
                ));
            }
            let files = g.manifest().files.iter().filter(|e| e.encrypted).count() as u64;
            writeln!(
                out,
                "Dry run: would make a new data key, re-encrypt {} and re-wrap {}; nothing \
                 was changed.",
                crate::ui::counts(files, "file"),
                crate::ui::counts(g.key_slots().len() as u64, "key slot")
            )?;
            ctx.finish_query(g);
        }
        Action::RotateDek { dry_run: false } => {
            let mut g = ctx.open(LockMode::Exclusive)?;
            let mut prompt = StdinPrompt::new();
            let r = g.rotate_dek(&mut prompt)?;
            for p in &r.reencrypted {
                writeln!(out, "{:<10} {p}", "encrypted")?;
            }
            for s in &r.dropped {
                writeln!(out, "{:<10} key slot {s}", "dropped")?;
            }
            writeln!(
                out,
                "Data key rotated: {} re-encrypted, {} re-wrapped.",
                crate::ui::counts(r.reencrypted.len() as u64, "file"),
                crate::ui::counts(r.rewrapped.len() as u64, "slot")
            )?;
            ctx.finish(g)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard encrypt`.
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
        matches!(self.action, Action::ListSlots) || self.dry_run()
    }

    fn dry_run(&self) -> bool {
        matches!(
            self.action,
            Action::Init { dry_run: true }
                | Action::RemoveSlot { dry_run: true, .. }
                | Action::ChangePassphrase { dry_run: true }
                | Action::RotateDek { dry_run: true }
        )
    }
}

/// `encrypt` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Set up encryption with a passphrase
    Init {
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// List the key slots
    ListSlots,
    /// Remove a key slot (never the last one)
    RemoveSlot {
        /// The slot's name
        name: String,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Re-wrap the data key under a new passphrase
    ChangePassphrase {
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Replace the data key and re-encrypt every encrypted file
    RotateDek {
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
}
