//! `sgard pull`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard::remote::client;
use sgard_garden::{Garden, LockMode, RestoreOptions, Side};

use super::scripts::{self, Scripts};
use super::{Ctx, restore};
use crate::exit::Fail;
use crate::ui::StdinPrompt;

/// The flags of `pull`.
pub struct Flags {
    pub theirs: bool,
    pub ours: bool,
    pub force: bool,
    pub allow_absolute: bool,
    pub allow_setuid: bool,
    pub no_scripts: bool,
    pub allow_unsigned: bool,
    pub dry_run: bool,
}

fn run(ctx: &Ctx, f: Flags, out: &mut dyn Write) -> Result<ExitCode> {
    let Flags {
        theirs,
        ours,
        force,
        allow_absolute,
        allow_setuid,
        no_scripts,
        allow_unsigned,
        dry_run,
    } = f;
    let opts = ctx.remote_opts()?;
    let trust = sgard_garden::Trust {
        absolute: allow_absolute,
        setuid: allow_setuid,
    };
    let side = if theirs {
        Side::Theirs
    } else if ours {
        Side::Ours
    } else {
        Side::Merge
    };
    if dry_run {
        return preview(ctx, &opts, side, trust, allow_unsigned, out);
    }
    if !client::exists(&ctx.repo) {
        Garden::init(&ctx.repo, ctx.env.clone())?;
        writeln!(
            out,
            "Initialized sgard repository at {}",
            ctx.repo.display()
        )?;
        // The server it came from is its server from now on (`sgard push`,
        // `sgard fleet` need no -r).
        super::remote::save(ctx, &opts.remote, out)?;
    }
    let mut g = ctx.open(LockMode::Exclusive)?;
    if no_scripts {
        g.forbid_template_commands();
    }
    let mut prompt = StdinPrompt::new();
    let p = client::pull(
        &mut g,
        &opts,
        side,
        RestoreOptions {
            force,
            dry_run: false,
        },
        trust,
        allow_unsigned,
        &mut prompt,
    )?;
    let scripts = if no_scripts {
        Scripts::Skip
    } else {
        Scripts::Run
    };
    // Run with the repository closed: a script may run sgard.
    let plan = scripts::plan(&mut g, scripts)?;
    ctx.finish(g)?;
    for (host, r) in &p.purged {
        let paths: Vec<String> = r
            .paths
            .keys()
            .map(|p| crate::ui::clean(p).into_owned())
            .collect();
        writeln!(
            out,
            "Applied the purge made on {}{}: {} removed here.",
            crate::ui::clean(host),
            if paths.is_empty() {
                String::new()
            } else {
                format!(" of {}", paths.join(", "))
            },
            crate::ui::counts(r.versions as u64, "stored version")
        )?;
        for k in &r.kept {
            crate::ui::warn(&format!(
                "{} here is a purged version; it stays stored while this repository's head \
                 names it (check in another version, then `sgard purge --keep-current {}`)",
                crate::ui::clean(k),
                crate::ui::clean(k)
            ));
        }
    }
    if p.report.up_to_date {
        writeln!(out, "Already up to date.")?;
        // What failed last time is due again.
        let failed = scripts::run_plan(plan, out)?;
        return scripts::end(Ok(ExitCode::SUCCESS), &failed);
    }
    writeln!(out, "Pulled {}.", crate::ui::counts(p.blobs, "blob"))?;
    trusted_note(p.newly_trusted.as_deref(), false);
    for s in &p.report.stripped {
        crate::ui::note(&format!(
            "dropped the setuid/setgid bits the server gave {s} (`sgard pull --allow-setuid` keeps them)"
        ));
    }
    for s in &p.report.settled {
        writeln!(out, "{:<10} {s}", if theirs { "theirs" } else { "ours" })?;
    }
    for c in &p.report.conflicts {
        writeln!(
            out,
            "{} {}",
            crate::ui::word(ctx.colour, "conflict", 10),
            crate::ui::clean(c)
        )?;
    }
    restore::print_actions(ctx.colour, &p.report.restore, false, out)?;
    let failed = scripts::run_plan(plan, out)?;
    let done = match restore::finish(&p.report.restore, false, out) {
        done if p.report.conflicts.is_empty() => done,
        Ok(_) => Err(conflicts_left(&p.report.conflicts, false)),
        // Both are said; the exit code is the restore's: a failure (1, or
        // 3 for lost content) outranks the conflicts' 4, and a file left
        // for want of an answer is a 4 as well.
        Err(e) => {
            crate::ui::error(&conflicts_left(&p.report.conflicts, false));
            Err(e)
        }
    };
    scripts::end(done, &failed)
}

/// The entries a pull leaves conflicts, and how to settle them (exit 4).
fn conflicts_left(paths: &[String], dry_run: bool) -> anyhow::Error {
    let n = paths.len();
    let names: Vec<_> = paths.iter().map(|p| crate::ui::clean(p)).collect();
    Fail::conflict(format!(
        "{} changed both here and on the server {} left {}: {}; the server's version is \
         in the repository, this machine's on disk{}; settle {} with `sgard merge PATH`, \
         `sgard add PATH` (keep this one) or `sgard restore -f PATH` (take the server's)",
        crate::ui::count(n as u64, "entry", "entries"),
        match (dry_run, n == 1) {
            (true, _) => "would be",
            (false, true) => "is",
            (false, false) => "are",
        },
        if n == 1 { "a conflict" } else { "conflicts" },
        names.join(", "),
        if dry_run { "; nothing was changed" } else { "" },
        if n == 1 { "it" } else { "each" },
    ))
}

/// `pull --dry-run`: the server's manifest merged in memory; what would be
/// taken, settled or refused. No blob is fetched, nothing is written (no
/// repository is created either).
fn preview(
    ctx: &Ctx,
    opts: &client::Opts,
    side: Side,
    trust: sgard_garden::Trust,
    allow_unsigned: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    if !client::exists(&ctx.repo) {
        writeln!(
            out,
            "Dry run: would create a repository at {} and take everything the server at {} has.",
            ctx.repo.display(),
            opts.remote.addr
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut g = ctx.open_to_change(true)?;
    let (plan, blobs, newly) = client::pull_plan(&mut g, opts, side, trust, allow_unsigned)?;
    trusted_note(newly.as_deref(), true);
    let c = ctx.colour;
    for p in &plan.taken {
        writeln!(
            out,
            "{} {}",
            crate::ui::word(c, "take", 10),
            crate::ui::clean(p)
        )?;
    }
    for p in &plan.settled {
        let how = if side == Side::Theirs {
            "theirs"
        } else {
            "ours"
        };
        writeln!(
            out,
            "{} {}",
            crate::ui::word(c, how, 10),
            crate::ui::clean(p)
        )?;
    }
    for p in plan.conflicts.iter().chain(&plan.unsettled) {
        writeln!(
            out,
            "{} {}",
            crate::ui::word(c, "conflict", 10),
            crate::ui::clean(p)
        )?;
    }
    for p in &plan.stripped {
        writeln!(
            out,
            "{} {} (its setuid/setgid bits would be dropped)",
            crate::ui::word(c, "mode", 10),
            crate::ui::clean(p)
        )?;
    }
    if let Some(refusal) = plan.refusal() {
        writeln!(
            out,
            "Dry run: the pull would be refused; nothing was changed."
        )?;
        let hint = crate::ui::hint(&refusal).unwrap_or_default();
        return Err(Fail::conflict(format!("{refusal}{hint}")));
    }
    writeln!(
        out,
        "Dry run: would take {} and fetch {} of content (and the history's snapshots) \
         from {}, then restore what changed here (asking before overwriting your edits); \
         nothing was changed.",
        crate::ui::count(plan.taken.len() as u64, "entry", "entries"),
        crate::ui::counts(blobs as u64, "blob"),
        opts.remote.addr
    )?;
    // Exit 4, as the pull would.
    if !plan.conflicts.is_empty() {
        return Err(conflicts_left(&plan.conflicts, true));
    }
    Ok(ExitCode::SUCCESS)
}

/// Says that the key that signed the server's head is trusted now, on
/// first use (or would be, in a dry run).
fn trusted_note(fingerprint: Option<&str>, dry_run: bool) {
    if let Some(fp) = fingerprint {
        crate::ui::note(&format!(
            "{} the key {fp}, which signed the server's head, to sign this repository's heads \
             (first use: no key was trusted here yet); check it is one of your machines' keys \
             (`ssh-keygen -lf KEY.pub` there); `sgard trust remove {fp}` undoes this",
            if dry_run { "would trust" } else { "trusting" }
        ));
    }
}

/// The arguments of `sgard pull`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Settle entries changed on both sides with the server's version
    #[arg(long, conflicts_with = "ours")]
    theirs: bool,
    /// Settle entries changed on both sides with the local version
    #[arg(long)]
    ours: bool,
    /// Overwrite local files without asking
    #[arg(short, long)]
    force: bool,
    /// Accept entries outside the home folder (absolute paths) from the server
    #[arg(long)]
    allow_absolute: bool,
    /// Keep setuid/setgid bits the server's entries carry (dropped by default)
    #[arg(long)]
    allow_setuid: bool,
    /// Do not run the scripts that are due
    #[arg(long)]
    no_scripts: bool,
    /// Take a head no key signed, though this repository's heads are signed (a Go client's push)
    #[arg(long)]
    allow_unsigned: bool,
    /// Fetch what the server has and show what the pull would change; change nothing here
    #[arg(short = 'n', long)]
    dry_run: bool,
    /// The sync server [default: SGARD_REMOTE, then <repo>/remote.yaml]
    #[arg(short = 'r', long, value_name = "HOST:PORT")]
    remote: Option<String>,
    #[command(flatten)]
    net: crate::cli::NetArgs,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(
            ctx,
            Flags {
                theirs: self.theirs,
                ours: self.ours,
                force: self.force,
                allow_absolute: self.allow_absolute,
                allow_setuid: self.allow_setuid,
                no_scripts: self.no_scripts,
                allow_unsigned: self.allow_unsigned,
                dry_run: self.dry_run,
            },
            out,
        )
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }

    fn needs_history(&self) -> bool {
        true
    }

    fn net(&self) -> super::Net {
        super::Net::of(self.remote.as_ref(), Some(&self.net))
    }
}
