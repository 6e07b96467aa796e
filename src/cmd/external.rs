//! `sgard external add|refresh|list`: files, archives and git
//! repositories fetched once, checked against their pin, and stored in the
//! repository (see `sgard_garden::Garden::add_external` and
//! `refresh_externals`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sgard_externals::{Format, Limits};
use sgard_garden::{ExternalSpec, LockMode, Refreshed, Source};
use sgard_manifest::externals::period_secs;

use super::Ctx;
use crate::exit::Fail;
use crate::ui;

/// A period: a number and `s`, `m`, `h`, `d` or `w`.
pub(crate) fn period(flag: &str, s: &str) -> Result<u64> {
    period_secs(s).ok_or_else(|| {
        Fail::usage(format!(
            "{flag} {s:?}: give a number and s, m, h, d or w (e.g. 7d)"
        ))
    })
}

/// The limits `--max-size` and `--timeout` set.
fn limits(max_size: Option<&str>, timeout: Option<&str>) -> Result<Limits> {
    let mut limits = Limits::default();
    if let Some(s) = max_size {
        let n = parse_size(s)?;
        limits.max_unpacked = n;
        limits.max_download = n;
    }
    if let Some(t) = timeout {
        limits.timeout = std::time::Duration::from_secs(period("--timeout", t)?);
    }
    Ok(limits)
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
    let source = if a.git {
        if a.archive || a.format.is_some() || a.sha256.is_some() || a.strip > 0 {
            return Err(Fail::usage(
                "--git takes --ref (a tag or a commit pins it), not --archive, --format, \
                 --sha256 or --strip",
            ));
        }
        Source::Git(a.reference.clone())
    } else {
        if a.reference.is_some() {
            return Err(Fail::usage("--ref is for git repositories (--git)"));
        }
        match (&a.format, a.archive) {
            (Some(f), _) => match Format::parse(f) {
                Some(Format::File) => Source::File,
                Some(f) => Source::Archive(f),
                None => {
                    return Err(Fail::usage(format!(
                        "--format {f:?}: one of file, tar, tar.gz, tar.xz, tar.zst, zip"
                    )));
                }
            },
            (None, true) => Source::Archive(Format::of_name(&a.url).ok_or_else(|| {
                Fail::usage(format!(
                    "{}: the name says no archive format; give --format",
                    a.url
                ))
            })?),
            (None, false) => Source::File,
        }
    };
    if !matches!(source, Source::Archive(_)) && a.strip > 0
        || matches!(source, Source::File) && !a.include.is_empty()
    {
        return Err(Fail::usage(
            "--strip is for archives (--archive), --include for archives and --git",
        ));
    }
    if matches!(source, Source::Git(_)) && !a.include.is_empty() {
        return Err(Fail::usage("--include is for archives (--archive)"));
    }
    if let Some(p) = &a.sha256
        && (p.len() != 64 || !p.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(Fail::usage(format!(
            "--sha256 {p:?}: give the 64 hex digits of a SHA-256"
        )));
    }
    if let Some(r) = &a.refresh {
        period("--refresh", r)?;
    }
    let limits = limits(a.max_size.as_deref(), a.timeout.as_deref())?;
    if a.dry_run {
        let g = ctx.open(LockMode::Shared)?;
        let path = g.env().resolve(&a.path);
        writeln!(
            out,
            "Dry run: would fetch {} ({}{}) into {}; nothing was fetched.",
            ui::clean(&a.url),
            match &source {
                Source::File => "a file".to_owned(),
                Source::Archive(f) => f.as_str().to_owned(),
                Source::Git(r) => format!("git, {}", r.as_deref().unwrap_or("default branch")),
            },
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
        source: source.clone(),
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
    let what = match &r.commit {
        Some(c) => format!("commit {}", short(c)),
        None => format!("sha256 {}", short(&r.sha256)),
    };
    writeln!(
        out,
        "Fetched {} ({}, {what}) into {}: {} stored.",
        ui::clean(&spec.url),
        ui::bytes(r.fetched),
        ui::clean(&r.path),
        ui::counts(r.files, "file")
    )?;
    if !r.pinned {
        ui::note(&match &r.commit {
            Some(c) => format!(
                "not pinned: it follows a branch; `--ref` with a tag or `--ref {c}` would pin it"
            ),
            None => format!(
                "not pinned: `--sha256 {}` would refuse a source that changes",
                r.sha256
            ),
        });
    }
    Ok(ExitCode::SUCCESS)
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

fn refresh(ctx: &Ctx, a: RefreshArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let limits = limits(a.max_size.as_deref(), a.timeout.as_deref())?;
    let mut g = ctx.open(LockMode::Exclusive)?;
    let report = match g.refresh_externals(&a.paths, a.force, &limits) {
        Err(sgard_garden::Error::NotTracked(p)) => {
            return Err(Fail::usage(format!(
                "{p} is no external (`sgard external list`)"
            )));
        }
        other => other?,
    };
    ctx.finish(g)?;
    let (mut code, mut due) = (0u8, 0);
    for (path, r) in &report {
        let path = ui::clean(path);
        match r {
            Refreshed::NotDue => {}
            Refreshed::Unchanged => {
                due += 1;
                writeln!(out, "{} {path}", ui::word(ctx.colour, "unchanged", 10))?;
            }
            Refreshed::Updated { from, to, files } => {
                due += 1;
                writeln!(
                    out,
                    "{} {path} ({} → {}, {})",
                    ui::word(ctx.colour, "updated", 10),
                    short(from),
                    short(to),
                    ui::counts(*files, "file")
                )?;
            }
            Refreshed::Kept(e) => {
                due += 1;
                let c = if e.is_integrity() {
                    crate::exit::INTEGRITY
                } else if matches!(e, sgard_garden::Error::Conflict(_)) {
                    crate::exit::CONFLICT
                } else {
                    crate::exit::ERROR
                };
                // The most serious wins: a changed pin, an error, a refusal.
                let rank = |c: u8| match c {
                    3 => 3,
                    1 => 2,
                    4 => 1,
                    _ => 0,
                };
                if rank(c) > rank(code) {
                    code = c;
                }
                writeln!(out, "{} {path}", ui::word(ctx.colour, "refused", 10))?;
                ui::warn(&format!("{e}"));
            }
        }
    }
    let skipped = report.len() - due;
    if due == 0 {
        writeln!(
            out,
            "Nothing to refresh: no external is past its refresh period ({} looked at; \
             --force fetches {}).",
            skipped,
            if skipped == 1 { "it" } else { "them" }
        )?;
    } else if skipped > 0 {
        writeln!(
            out,
            "{} not due (--force fetches {}).",
            ui::counts(skipped as u64, "other external"),
            if skipped == 1 { "it" } else { "them" }
        )?;
    }
    if code != 0 {
        return Ok(ExitCode::from(code));
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
                    "sha256": (!x.sha256.is_empty()).then_some(&x.sha256),
                    "ref": x.reference,
                    "commit": x.commit,
                    "pinned": x.pinned,
                    "strip": x.strip,
                    "include": x.include,
                    "refresh": x.refresh,
                    "fetched": x.fetched.to_string(),
                    "due": x.is_due(g.env().now),
                    "files": g.manifest().files.iter().filter(|e| log.owner(&e.path).is_some_and(|o| o.path == x.path)).count(),
                })
            })
            .collect();
        super::print_json(out, &serde_json::Value::Array(v))?;
        return Ok(ExitCode::SUCCESS);
    }
    if log.externals.is_empty() {
        writeln!(out, "No externals (`sgard external add URL PATH`).")?;
        return Ok(ExitCode::SUCCESS);
    }
    let now = g.env().now;
    for x in &log.externals {
        let at = match &x.reference {
            Some(r) => format!(" @ {}", ui::clean(r)),
            None => String::new(),
        };
        writeln!(
            out,
            "{:<8} {} {}{at} ({}{}{})",
            x.format,
            ui::clean(&x.path),
            ui::clean(&x.url),
            if x.pinned { "pinned " } else { "" },
            short(x.content_id()),
            if x.is_due(now) {
                ", due for refresh"
            } else {
                ""
            }
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard external add`.
#[derive(clap::Args, Debug)]
pub struct AddArgs {
    /// Where it comes from: an http(s):// or file:// URL, or with --git a git URL
    url: String,
    /// Where it goes (a new path: a file, or a folder for an archive)
    path: std::ffi::OsString,
    /// The SHA-256 it must have (pins it: a source that changes is refused)
    #[arg(long, value_name = "HEX")]
    sha256: Option<String>,
    /// It is a git repository: check it out (without .git) at --ref
    #[arg(long)]
    git: bool,
    /// With --git: the branch, tag or full commit id [default: the remote's default branch]; a tag or a commit pins it
    #[arg(long = "ref", value_name = "REF")]
    reference: Option<String>,
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
    /// How long the fetch may take [default: 5m]
    #[arg(long, value_name = "PERIOD")]
    timeout: Option<String>,
    /// Say what would be fetched; fetch and change nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
}

/// The arguments of `sgard external refresh`.
#[derive(clap::Args, Debug)]
pub struct RefreshArgs {
    /// The externals to refresh (their paths, or paths inside them) [default: all]
    #[arg(value_name = "PATH", value_parser = crate::cli::path_arg())]
    paths: Vec<std::ffi::OsString>,
    /// Fetch them even within their refresh period (or with none)
    #[arg(short, long)]
    force: bool,
    /// The most each may fetch or unpack to [default: 2G fetched, 4G unpacked]
    #[arg(long, value_name = "SIZE")]
    max_size: Option<String>,
    /// How long each fetch may take [default: 5m]
    #[arg(long, value_name = "PERIOD")]
    timeout: Option<String>,
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
    /// Fetch a file, an archive or a git repository into a new path and store it in the repository
    Add(AddArgs),
    /// Fetch again the externals past their refresh period (all with --force), several at once
    Refresh(RefreshArgs),
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
            Action::Refresh(a) => refresh(ctx, a, out),
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
