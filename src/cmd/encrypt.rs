//! `sgard encrypt init|list-slots|remove-slot|change-passphrase|rotate-dek`

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use sgard_garden::LockMode;

use super::Ctx;
use crate::cli::EncryptAction;
use crate::ui::StdinPrompt;
use sgard::context;

pub fn run(ctx: &Ctx, action: EncryptAction, out: &mut dyn Write) -> Result<ExitCode> {
    match action {
        EncryptAction::Init => {
            let mut g = ctx.open(LockMode::Exclusive)?;
            if g.encryption_initialized() {
                return Err(anyhow!("encryption is already initialized"));
            }
            let pass = context::new_passphrase_for_init().map_err(anyhow::Error::msg)?;
            g.encrypt_init(&pass, context::kdf_params())?;
            writeln!(out, "Encryption initialized with passphrase slot.")?;
        }
        EncryptAction::ListSlots => {
            let g = ctx.open(LockMode::Shared)?;
            let slots = g.key_slots();
            if slots.is_empty() {
                writeln!(out, "No encryption configured.")?;
            }
            for (name, kind) in slots {
                writeln!(out, "{name:<30} {kind}")?;
            }
        }
        EncryptAction::RemoveSlot { name } => {
            let mut g = ctx.open(LockMode::Exclusive)?;
            g.remove_slot(&name)?;
            writeln!(out, "Removed key slot {name:?}.")?;
        }
        EncryptAction::ChangePassphrase => {
            let mut g = ctx.open(LockMode::Exclusive)?;
            if !g.encryption_initialized() {
                return Err(anyhow!(
                    "encryption is not initialized; run `sgard encrypt init` first"
                ));
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
        }
        EncryptAction::RotateDek => {
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
                "Data key rotated: {} file(s) re-encrypted, {} slot(s) re-wrapped.",
                r.reencrypted.len(),
                r.rewrapped.len()
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
