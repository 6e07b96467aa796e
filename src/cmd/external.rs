//! `sgard external add|list`: files and archives fetched once, checked
//! against their pin, and stored in the repository (see
//! `sgard_garden::Garden::add_external`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_externals::{Format, Limits};
use sgard_garden::{ExternalSpec, LockMode};

use super::Ctx;
use crate::exit::Fail;
use crate::ui;

/// A refresh period: a number and `m`, `h`, `d` or `w`.
fn check_period(s: &str) -> Result<()> {
    let (n, unit) = s.split_at(s.len().saturating_sub(1));
    if n.parse::<u32>().is_ok_and(|n| n > 0) && matches!(unit, "m" | "h" | "d" | "w") {
        return Ok(());
    }
    Err(Fail::usage(format!(
        "--refresh {s:?}: give a number and m, h, d or w (e.g. 7d)"
    )))
}

/// A size: a number with an optional K, M or G (powers of 1024).
fn parse_size(s: &str) -> Result<u64> {
    let (n, mult) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&s[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    n.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|n| *n > 0)
        .ok_or_else(|| Fail::usage(format!("--max-size {s:?}: give a size such as 512M")))
}

fn add(ctx: &Ctx, a: AddArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let archive = match (&a.format, a.archive) {
        (Some(f), _) => match Format::parse(f) {
            Some(Format::File) => None,
            Some(f) => Some(f),
            None => {
                return Err(Fail::usage(format!(
                    "--format {f:?}: one of file, tar, tar.gz, tar.xz, tar.zst, zip"
                )));
            }
        },
        (None, true) => Some(Format::of_name(&a.url).ok_or_else(|| {
            Fail::usage(format!(
                "{}: the name says no archive format; give --format",
                a.url
            ))
        })?),
        (None, false) => None,
    };
    if archive.is_none() && (a.strip > 0 || !a.include.is_empty()) {
        return Err(Fail::usage(
            "--strip and --include are for archives (--archive)",
        ));
    }
    if let Some(p) = &a.sha256
        && (p.len() != 64 || !p.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(Fail::usage(format!(
            "--sha256 {p:?}: give the 64 hex digits of a SHA-256"
        )));
    }
    if let Some(r) = &a.refresh {
        check_period(r)?;
    }
    let mut limits = Limits::default();
    if let Some(s) = &a.max_size {
        let n = parse_size(s)?;
        limits.max_unpacked = n;
        limits.max_download = n;
    }
    if a.dry_run {
        let g = ctx.open(LockMode::Shared)?;
        let path = g.env().resolve(&a.path);
        writeln!(
            out,
            "Dry run: would fetch {} ({}{}) into {}; nothing was fetched.",
            ui::clean(&a.url),
            archive.map_or("a file", Format::as_str),
            if a.sha256.is_some() { ", pinned" } else { "" },
            ui::clean(&path.display().to_string())
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut g = ctx.open(LockMode::Exclusive)?;
    let spec = ExternalSpec {
        path: a.path.clone(),
        url: a.url.clone(),
        sha256: a.sha256.clone(),
        archive,
        strip: a.strip,
        include: a.include.clone(),
        refresh: a.refresh.clone(),
        limits,
    };
    let r = match g.add_external(&spec) {
        Err(sgard_garden::Error::Conflict(msg)) => return Err(Fail::conflict(msg)),
        other => other?,
    };
    ctx.finish(g)?;
    writeln!(
        out,
        "Fetched {} ({}, sha256 {}) into {}: {} stored.",
        ui::clean(&spec.url),
        ui::bytes(r.fetched),
        &r.sha256[..12],
        ui::clean(&r.path),
        ui::counts(r.files, "file")
    )?;
    if spec.sha256.is_none() {
        ui::note(&format!(
            "not pinned: `--sha256 {}` would refuse a source that changes",
            r.sha256
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn list(ctx: &Ctx, json: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let g = ctx.open(LockMode::Shared)?;
    let log = g.externals()?;
    if json {
        let v: Vec<serde_json::Value> = log
            .externals
            .iter()
            .map(|x| {
                serde_json::json!({
                    "path": x.path,
                    "url": x.url,
                    "format": x.format,
                    "sha256": x.sha256,
                    "pinned": x.pinned,
                    "strip": x.strip,
                    "include": x.include,
                    "refresh": x.refresh,
                    "fetched": x.fetched.to_string(),
                    "files": g.manifest().files.iter().filter(|e| log.owner(&e.path).is_some_and(|o| o.path == x.path)).count(),
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if log.externals.is_empty() {
        writeln!(out, "No externals (`sgard external add URL PATH`).")?;
        return Ok(ExitCode::SUCCESS);
    }
    for x in &log.externals {
        writeln!(
            out,
            "{:<8} {} {} ({}{})",
            x.format,
            ui::clean(&x.path),
            ui::clean(&x.url),
            if x.pinned { "pinned " } else { "" },
            &x.sha256[..12]
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard external add`.
#[derive(clap::Args, Debug)]
pub struct AddArgs {
    /// Where it comes from: an http(s):// or file:// URL
    url: String,
    /// Where it goes (a new path: a file, or a folder for an archive)
    path: std::ffi::OsString,
    /// The SHA-256 it must have (pins it: a source that changes is refused)
    #[arg(long, value_name = "HEX")]
    sha256: Option<String>,
    /// Unpack it (format from the name: .tar, .tar.gz/.tgz, .tar.xz, .tar.zst, .zip)
    #[arg(long)]
    archive: bool,
    /// The format, whatever the name says (file, tar, tar.gz, tar.xz, tar.zst, zip)
    #[arg(long, value_name = "FORMAT")]
    format: Option<String>,
    /// Drop this many leading folders of every name in the archive
    #[arg(long, default_value_t = 0, value_name = "N")]
    strip: u32,
    /// Unpack only the files matching this glob (repeatable)
    #[arg(long, value_name = "GLOB")]
    include: Vec<String>,
    /// How long a fetch stays fresh (for `external refresh`): 30m, 12h, 7d, 2w
    #[arg(long, value_name = "PERIOD")]
    refresh: Option<String>,
    /// The most it may fetch or unpack to [default: 2G fetched, 4G unpacked]
    #[arg(long, value_name = "SIZE")]
    max_size: Option<String>,
    /// Say what would be fetched; fetch and change nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
}

/// The arguments of `sgard external`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to do
    #[command(subcommand)]
    action: Action,
}

/// `external` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Fetch a file or an archive into a new path and store it in the repository
    Add(AddArgs),
    /// List the externals
    List {
        /// As JSON
        #[arg(long)]
        json: bool,
    },
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        match self.action {
            Action::Add(a) => add(ctx, a, out),
            Action::List { json } => list(ctx, json, out),
        }
    }

    fn answers(&self) -> bool {
        matches!(self.action, Action::List { .. }) || self.dry_run()
    }

    fn dry_run(&self) -> bool {
        matches!(&self.action, Action::Add(a) if a.dry_run)
    }
}
