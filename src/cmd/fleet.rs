//! `sgard fleet [--json]`: the machines of this garden as the sync server
//! sees them.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;

use super::{Ctx, print_json};
use crate::ui;

/// `3 min ago`, `2 days ago`.
fn ago(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => "just now".into(),
        60..3600 => format!("{} ago", ui::count((s / 60) as u64, "min", "min")),
        3600..86_400 => format!("{} ago", ui::counts((s / 3600) as u64, "hour")),
        _ => format!("{} ago", ui::counts((s / 86_400) as u64, "day")),
    }
}

fn rfc3339(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

fn run(ctx: &Ctx, json: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let opts = ctx.remote_opts()?;
    let f = sgard::remote::client::fleet(&opts)?;
    let now = f.server_time.map_or(0, |t| t.seconds);
    let seen = |m: &sgard_proto::v1::FleetMachine| {
        m.last_push
            .map(|t| t.seconds)
            .max(m.last_pull.map(|t| t.seconds))
    };
    if json {
        let machines: Vec<_> = f
            .machines
            .iter()
            .map(|m| {
                json!({
                    "host": m.host,
                    "key": m.key,
                    "head": m.head,
                    "state": m.state,
                    "behind": m.state == "behind",
                    "last_sync": seen(m).map(rfc3339),
                    "last_push": m.last_push.map(|t| rfc3339(t.seconds)),
                    "last_pull": m.last_pull.map(|t| rfc3339(t.seconds)),
                    "seen_seconds_ago": seen(m).map(|s| (now - s).max(0)),
                    "version": m.version,
                })
            })
            .collect();
        print_json(
            out,
            &json!({"schema": 1, "server": opts.remote.addr, "head": f.head_id,
                    "machines": machines}),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    if f.machines.is_empty() {
        writeln!(
            out,
            "No machine has synced with {} since it keeps a fleet view.",
            opts.remote.addr
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let c = ctx.colour;
    let head = format!(
        "{:<20} {:<10} {:<12} {:<16} {:<10} KEY",
        "HOST", "STATE", "HEAD", "LAST SYNC", "VERSION"
    );
    writeln!(out, "{}", ui::paint(c, ui::Role::Heading, &head))?;
    for m in &f.machines {
        let role = match m.state.as_str() {
            "current" => ui::Role::Good,
            "behind" => ui::Role::Incoming,
            _ => ui::Role::Change,
        };
        let short: String = m.head.chars().take(12).collect();
        writeln!(
            out,
            "{:<20} {} {} {:<16} {:<10} {}",
            ui::clean(&m.host),
            ui::paint(c, role, &format!("{:<10}", m.state)),
            ui::paint(c, ui::Role::Id, &format!("{short:<12}")),
            seen(m).map_or_else(|| "never".into(), |s| ago(now - s)),
            ui::clean(&m.version),
            ui::clean(&m.key)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard fleet`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print one JSON document
    #[arg(long)]
    json: bool,
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
        run(ctx, self.json, out)
    }

    fn answers(&self) -> bool {
        true
    }

    fn net(&self) -> super::Net {
        super::Net::of(self.remote.as_ref(), Some(&self.net))
    }
}
