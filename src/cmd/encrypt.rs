//! `sgard encrypt init|add-recipient|list-recipients|remove-recipient|keygen|list-slots|remove-slot|change-passphrase|rotate-dek`

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use sgard_garden::LockMode;

use super::Ctx;
use crate::ui::StdinPrompt;
use sgard::context;

fn run(ctx: &Ctx, action: Action, out: &mut dyn Write) -> Result<ExitCode> {
    match action {
        Action::Init {
            dry_run,
            recipient,
            label,
            passphrase,
        } => {
            let mut g = ctx.open_to_change(dry_run)?;
            if g.encryption_initialized() {
                return Err(anyhow!(
                    "encryption is already initialized in {} (`sgard encrypt list-slots` shows \
                     its key slots)",
                    ctx.repo.display()
                ));
            }
            let recipients = parse_recipients(ctx, &recipient)?;
            let with_passphrase = recipients.is_empty() || passphrase;
            if dry_run {
                let mut what = Vec::new();
                if with_passphrase {
                    what.push("a passphrase slot".to_owned());
                }
                if !recipients.is_empty() {
                    what.push(crate::ui::counts(recipients.len() as u64, "recipient slot"));
                }
                writeln!(
                    out,
                    "Dry run: would create a data key and wrap it in {}; nothing was changed.",
                    what.join(" and ")
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            if recipients.is_empty() {
                let pass = context::new_passphrase_for_init().map_err(anyhow::Error::msg)?;
                g.encrypt_init(&pass, context::kdf_params())?;
                writeln!(out, "Encryption initialized with passphrase slot.")?;
            } else {
                let pass = if with_passphrase {
                    Some(context::new_passphrase_for_init().map_err(anyhow::Error::msg)?)
                } else {
                    None
                };
                let added = g.encrypt_init_with(
                    &recipients,
                    label.as_deref(),
                    pass.as_ref().map(|p| (p.as_str(), context::kdf_params())),
                )?;
                print_added(out, &added)?;
                writeln!(
                    out,
                    "Encryption initialized with {}{}.",
                    crate::ui::counts(added.iter().filter(|a| a.new).count() as u64, "recipient"),
                    if with_passphrase {
                        " and a passphrase slot"
                    } else {
                        " (no passphrase)"
                    }
                )?;
            }
            ctx.finish(g)?;
        }
        Action::AddRecipient {
            keys,
            label,
            dry_run,
        } => {
            let recipients = parse_recipients(ctx, &keys)?;
            let mut g = ctx.open_to_change(dry_run)?;
            if !g.encryption_initialized() {
                return Err(sgard_garden::Error::NoEncryption.into());
            }
            if dry_run {
                let have = g.recipient_slots();
                for r in &recipients {
                    match have.iter().find(|s| {
                        s.recipient
                            .as_ref()
                            .is_some_and(|k| k.canonical == r.canonical)
                    }) {
                        Some(s) => writeln!(
                            out,
                            "{:<10} {} {} (already, as {})",
                            "kept",
                            r.kind,
                            r.fingerprint(),
                            crate::ui::clean(&s.slot)
                        )?,
                        None => {
                            writeln!(out, "{:<10} {} {}", "would add", r.kind, r.fingerprint())?;
                        }
                    }
                }
                writeln!(out, "Dry run: nothing was changed.")?;
                return Ok(ExitCode::SUCCESS);
            }
            let added = g.add_recipients(&recipients, label.as_deref())?;
            print_added(out, &added)?;
            let n = added.iter().filter(|a| a.new).count() as u64;
            if n > 0 {
                writeln!(
                    out,
                    "Added {}: {} can now unlock this repository with {} own key.",
                    crate::ui::counts(n, "recipient"),
                    if n == 1 {
                        "its machine"
                    } else {
                        "their machines"
                    },
                    if n == 1 { "its" } else { "their" }
                )?;
            } else {
                writeln!(
                    out,
                    "Nothing to add: every key given is a recipient already."
                )?;
            }
            ctx.finish(g)?;
        }
        Action::ListRecipients => {
            let g = ctx.open(LockMode::Shared)?;
            let slots = g.recipient_slots();
            if slots.is_empty() {
                writeln!(
                    out,
                    "No recipients (`sgard encrypt add-recipient KEY` adds one)."
                )?;
            } else {
                let head = format!("{:<24} {:<12} {}", "RECIPIENT", "TYPE", "FINGERPRINT");
                writeln!(
                    out,
                    "{}",
                    crate::ui::paint(ctx.colour, crate::ui::Role::Heading, &head)
                )?;
            }
            for s in slots {
                match &s.recipient {
                    Some(r) => writeln!(
                        out,
                        "{:<24} {:<12} {}",
                        crate::ui::clean(&s.label),
                        r.kind.to_string(),
                        r.fingerprint()
                    )?,
                    None => writeln!(
                        out,
                        "{:<24} {:<12} (a key this sgard cannot read; kept as it is)",
                        crate::ui::clean(&s.label),
                        "?"
                    )?,
                }
            }
            ctx.finish_query(g);
        }
        Action::RemoveRecipient { which, dry_run } => {
            let mut g = ctx.open_to_change(dry_run)?;
            let s = g.remove_recipient(&which)?;
            let fp = s
                .recipient
                .as_ref()
                .map(|r| format!(" ({})", r.fingerprint()))
                .unwrap_or_default();
            if dry_run {
                writeln!(
                    out,
                    "Dry run: would remove recipient {}{fp}; nothing was changed.",
                    crate::ui::clean(&s.slot)
                )?;
                ctx.finish_query(g);
                return Ok(ExitCode::SUCCESS);
            }
            writeln!(out, "Removed recipient {}{fp}.", crate::ui::clean(&s.slot))?;
            crate::ui::note(
                "a machine with that key keeps what it already decrypted, and may have kept \
                 the data key itself: `sgard encrypt rotate-dek` makes what is stored from now \
                 on unreadable to it",
            );
            ctx.finish(g)?;
        }
        Action::Keygen { force } => {
            let path = ctx
                .env
                .config_dir
                .as_ref()
                .ok_or_else(|| anyhow!("no configuration folder: set XDG_CONFIG_HOME or HOME"))?
                .join(sgard_garden::recipients::IDENTITY_FILE);
            let public = sgard_garden::recipients::keygen(&path, force, ctx.env.now)?;
            writeln!(out, "Wrote a new age identity to {}.", path.display())?;
            writeln!(out, "Its recipient (the public key to add): {public}")?;
            writeln!(
                out,
                "On a machine that can unlock the repository: sgard encrypt add-recipient {public}"
            )?;
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
            // Unlock with the current passphrase (or this machine's key)
            // first: a wrong one must fail before a new one is asked for.
            g.verify_passphrase()?;
            let had = g.key_slots().iter().any(|(_, kind)| kind == "passphrase");
            let new = context::new_passphrase_for_change().map_err(anyhow::Error::msg)?;
            g.change_passphrase(
                &new,
                std::env::var("SGARD_TEST_ARGON2")
                    .is_ok()
                    .then(context::kdf_params),
            )?;
            if had {
                writeln!(out, "Passphrase changed.")?;
            } else {
                writeln!(
                    out,
                    "Passphrase slot added: the passphrase now unlocks this repository too \
                     (the Go sgard uses it)."
                )?;
            }
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

/// The recipients the command line names (keys or files of them).
fn parse_recipients(
    ctx: &Ctx,
    args: &[String],
) -> Result<Vec<sgard_garden::recipients::Recipient>> {
    let mut out = Vec::new();
    for a in args {
        out.extend(sgard_garden::recipients::Recipient::from_arg(
            a,
            &ctx.env.cwd,
            &ctx.env.home,
        )?);
    }
    Ok(out)
}

fn print_added(out: &mut dyn Write, added: &[sgard_garden::AddedRecipient]) -> Result<()> {
    for a in added {
        let r = &a.recipient;
        if a.new {
            writeln!(
                out,
                "{:<10} {} {} {}",
                "added",
                crate::ui::clean(&a.slot),
                r.kind,
                r.fingerprint()
            )?;
        } else {
            writeln!(
                out,
                "{:<10} {} {} {} (a recipient already)",
                "kept",
                crate::ui::clean(&a.slot),
                r.kind,
                r.fingerprint()
            )?;
        }
    }
    Ok(())
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
        matches!(self.action, Action::ListSlots | Action::ListRecipients) || self.dry_run()
    }

    fn dry_run(&self) -> bool {
        matches!(
            self.action,
            Action::Init { dry_run: true, .. }
                | Action::AddRecipient { dry_run: true, .. }
                | Action::RemoveRecipient { dry_run: true, .. }
                | Action::RemoveSlot { dry_run: true, .. }
                | Action::ChangePassphrase { dry_run: true }
                | Action::RotateDek { dry_run: true }
        )
    }
}

/// `encrypt` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Set up encryption: with a passphrase, or with recipients (machine keys) and no passphrase
    Init {
        /// Wrap the data key to this key instead of a passphrase: `age1…`, an SSH public key (`ssh-ed25519 …`, `ssh-rsa …`) or a file of them such as `~/.ssh/id_ed25519.pub` (repeatable)
        #[arg(long, value_name = "KEY")]
        recipient: Vec<String>,
        /// The recipient slot's label [default: the key's comment]
        #[arg(long, requires = "recipient")]
        label: Option<String>,
        /// With --recipient: add a passphrase slot too (for the Go sgard, or a machine without its key)
        #[arg(long, requires = "recipient")]
        passphrase: bool,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Let a machine's key unlock the repository: wrap the data key to an age or SSH public key
    AddRecipient {
        /// `age1…`, an SSH public key (`ssh-ed25519 …`, `ssh-rsa …`), or a file of them such as a `.pub` file
        #[arg(required = true, value_name = "KEY")]
        keys: Vec<String>,
        /// The slot's label [default: the key's comment]
        #[arg(long)]
        label: Option<String>,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// List the recipients: label, key type, fingerprint
    ListRecipients,
    /// Stop wrapping the data key to a recipient (by label, key or fingerprint)
    RemoveRecipient {
        /// The recipient's label (as `list-recipients` shows it), key or fingerprint
        which: String,
        /// Show what would change; change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Make an age identity for this machine ($XDG_CONFIG_HOME/sgard/keys.txt) and print its recipient
    Keygen {
        /// Replace an identity that is there already (what only it opened stays locked)
        #[arg(long)]
        force: bool,
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
