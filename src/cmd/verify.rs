//! `sgard verify`

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use sgard_garden::{SnapshotCheck, VerifyLine, VerifyState};

use super::{Ctx, print_json};
use crate::exit::Fail;
use crate::ui;

fn run(ctx: &Ctx, json: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let mut g = ctx.open_repository_only()?;
    let (lines, snaps) = g.verify_all()?;
    // Each line names its entry by its place in the manifest: rendered
    // while the repository is open, written once it is let go (a reader
    // that pages slowly holds no lock).
    let mut text = Vec::new();
    let shown = show(ctx, &g.manifest().files, &lines, &snaps, json, &mut text);
    ctx.finish_query(g);
    out.write_all(&text)?;
    shown
}

/// Prints the verdicts (`lines`, on `files`' entries, and `snaps`); the
/// exit code they make.
fn show(
    ctx: &Ctx,
    files: &[sgard_manifest::Entry],
    lines: &[VerifyLine],
    snaps: &[SnapshotCheck],
    json: bool,
    out: &mut dyn Write,
) -> Result<ExitCode> {
    let path = |l: &VerifyLine| files.get(l.entry).map_or("", |e| e.path.as_str());
    let bad = lines.iter().filter(|l| l.state != VerifyState::Ok).count();
    let bad_snaps = snaps.iter().filter(|s| !s.problems.is_empty()).count();
    if json {
        let entries: Vec<_> = lines
            .iter()
            .map(|l| json!({"path": path(l), "state": l.state.as_str()}))
            .collect();
        let snapshots: Vec<_> = snaps
            .iter()
            .map(|s| {
                json!({"id": s.record.id.to_hex(), "reason": s.record.reason.as_str(),
                       "ok": s.problems.is_empty(), "problems": s.problems})
            })
            .collect();
        print_json(
            out,
            &json!({"schema": 1, "ok": bad == 0 && bad_snaps == 0, "entries": entries,
                    "snapshots": snapshots}),
        )?;
    } else {
        let c = ctx.colour;
        for l in lines {
            writeln!(
                out,
                "{} {}",
                ui::word(c, l.state.as_str(), 10),
                ui::clean(path(l))
            )?;
        }
        for s in snaps {
            for p in &s.problems {
                let (id, why) = (s.record.id.short(12), &s.record.reason);
                writeln!(
                    out,
                    "{} snapshot {} ({why}): {p}",
                    ui::word(c, "damaged", 10),
                    ui::paint(c, ui::Role::Id, &id)
                )?;
            }
        }
    }
    if bad > 0 || bad_snaps > 0 {
        out.flush()?;
        let mut parts = Vec::new();
        if bad > 0 {
            let named: Vec<&str> = lines
                .iter()
                .filter(|l| l.state != VerifyState::Ok)
                .map(path)
                .take(10)
                .collect();
            parts.push(format!(
                "{} with a corrupt or missing blob ({}{})",
                ui::count(bad as u64, "entry", "entries"),
                named.join(", "),
                if bad > named.len() { ", …" } else { "" }
            ));
        }
        if bad_snaps > 0 {
            parts.push(ui::counts(bad_snaps as u64, "damaged snapshot"));
        }
        return Err(Fail::integrity(format!(
            "verification failed: {}",
            parts.join(", ")
        )));
    }
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard verify`.
#[derive(clap::Args, Debug)]
pub struct Args {
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
        super::buffered(out, |o| run(ctx, self.json, o))
    }

    fn answers(&self) -> bool {
        true
    }

    fn needs_history(&self) -> bool {
        true
    }
}
