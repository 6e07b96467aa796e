//! `sgard log` and `sgard forget`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::{Value, json};
use sgard_garden::{ForgetPolicy, LockMode};
use sgard_manifest::history::Record;
use sgard_manifest::purges::PurgeLog;

use super::{Ctx, print_json};

fn run(ctx: &Ctx, max: Option<usize>, json: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let g = ctx.open_repository_only()?;
    g.require_history()?;
    let purges = purge_log(&g);
    let recs: Vec<&Record> = g
        .history()
        .records
        .iter()
        .rev()
        .take(max.unwrap_or(usize::MAX))
        .collect();
    if json {
        let snaps: Vec<Value> = recs
            .iter()
            .map(|r| {
                let mut v = record_json(r);
                v["purged"] = purged_json(&purges, r);
                v
            })
            .collect();
        print_json(out, &json!({"schema": 1, "snapshots": snaps}))?;
        return Ok(ExitCode::SUCCESS);
    }
    if recs.is_empty() {
        writeln!(out, "No snapshots yet: run `sgard checkpoint`.")?;
    }
    for r in recs {
        writeln!(
            out,
            "{}  {}  {:<10} {:<15} {}, {}, {}{}",
            crate::ui::paint(ctx.colour, crate::ui::Role::Id, &r.id.short(12)),
            r.time.human(),
            crate::ui::clean(&r.host),
            crate::ui::clean(r.reason.as_str()),
            crate::ui::count(r.entries, "entry", "entries"),
            crate::ui::count(r.bytes, "byte", "bytes"),
            crate::ui::count(r.new_blobs, "new blob", "new blobs"),
            r.message
                .as_deref()
                .map(|m| format!("  {}", crate::ui::clean(m)))
                .unwrap_or_default()
        )?;
        for line in purged_lines(&purges, r) {
            writeln!(out, "              {line}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The repository's purge log; a damaged one is said, and `log` and `show`
/// go on without it.
pub fn purge_log(g: &sgard_garden::Garden) -> PurgeLog {
    g.purges().unwrap_or_else(|e| {
        crate::ui::warn(&format!(
            "the purge log cannot be read ({}); what purges took out of snapshots is not shown",
            sgard_garden::error_chain(&e)
        ));
        PurgeLog::default()
    })
}

/// What purges took out of snapshot `r`, one line each.
pub fn purged_lines(purges: &PurgeLog, r: &Record) -> Vec<String> {
    purges
        .of(&r.id)
        .into_iter()
        .map(|p| {
            format!(
                "purged {} on {} ({}{})",
                p.paths
                    .iter()
                    .map(|x| crate::ui::clean(x).into_owned())
                    .collect::<Vec<_>>()
                    .join(", "),
                p.time.human(),
                crate::ui::clean(&p.host),
                if p.kept_current {
                    ", current version kept"
                } else {
                    ""
                }
            )
        })
        .collect()
}

/// The JSON form of what purges took out of snapshot `r`.
pub fn purged_json(purges: &PurgeLog, r: &Record) -> Value {
    Value::Array(
        purges
            .of(&r.id)
            .into_iter()
            .map(|p| {
                json!({"time": p.time.to_string(), "host": p.host, "paths": p.paths,
                       "kept_current": p.kept_current})
            })
            .collect(),
    )
}

/// The JSON form of a history record.
pub fn record_json(r: &Record) -> Value {
    json!({
        "id": r.id.to_hex(),
        "parent": r.parent.map(|p| p.to_hex()),
        "time": r.time.to_string(),
        "host": r.host,
        "reason": r.reason.as_str(),
        "message": r.message,
        "entries": r.entries,
        "bytes": r.bytes,
        "new_blobs": r.new_blobs,
    })
}

fn forget(
    ctx: &Ctx,
    ids: Vec<String>,
    keep_last: Option<usize>,
    keep_within: Option<chrono::Duration>,
    keep_daily: Option<usize>,
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let policy = match (keep_last, keep_within, keep_daily) {
        (Some(n), _, _) => ForgetPolicy::KeepLast(n),
        (_, Some(d), _) => ForgetPolicy::KeepWithin(d),
        (_, _, Some(n)) => ForgetPolicy::KeepDaily(n),
        _ => ForgetPolicy::Ids(ids),
    };
    let mut g = ctx.open(if dry_run {
        LockMode::Shared
    } else {
        LockMode::Exclusive
    })?;
    let dropped = g.forget(&policy, dry_run)?;
    ctx.finish(g)?;
    let word = if dry_run { "forget" } else { "forgot" };
    let c = ctx.colour;
    for r in &dropped {
        writeln!(
            out,
            "{} {} {}",
            crate::ui::word(c, word, 10),
            crate::ui::paint(c, crate::ui::Role::Id, &r.id.short(12)),
            r.reason
        )?;
    }
    let n = crate::ui::counts(dropped.len() as u64, "snapshot");
    if dry_run {
        writeln!(out, "Dry run: {n} would be forgotten; nothing was changed.")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "Forgot {n}; run `sgard prune` to free their blobs.")?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard log`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Show at most N snapshots
    #[arg(short = 'n', long, value_name = "N")]
    max: Option<usize>,
    /// Print one JSON document
    #[arg(long)]
    json: bool,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        super::buffered(out, |o| run(ctx, self.max, self.json, o))
    }

    fn answers(&self) -> bool {
        true
    }

    fn needs_history(&self) -> bool {
        true
    }
}

/// The arguments of `sgard forget`.
#[derive(clap::Args, Debug)]
pub struct ForgetArgs {
    /// Snapshots to forget (id prefixes, @~N)
    #[arg(value_name = "ID")]
    ids: Vec<String>,
    /// Keep only the newest N checkpoints (and the restores since the oldest of them)
    #[arg(long, value_name = "N", conflicts_with_all = ["ids", "keep_within", "keep_daily"])]
    keep_last: Option<usize>,
    /// Keep only operations within this age (e.g. 30d, 12h, 2w, 1y)
    #[arg(long, value_name = "AGE", value_parser = crate::cli::parse_age, conflicts_with_all = ["ids", "keep_daily"])]
    keep_within: Option<chrono::Duration>,
    /// Keep the newest operation of each of the last N days that have one
    #[arg(long, value_name = "N", conflicts_with = "ids")]
    keep_daily: Option<usize>,
    /// Show what would be forgotten; change nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
}

impl super::Run for ForgetArgs {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        forget(
            ctx,
            self.ids,
            self.keep_last,
            self.keep_within,
            self.keep_daily,
            self.dry_run,
            out,
        )
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }

    fn needs_history(&self) -> bool {
        true
    }
}
