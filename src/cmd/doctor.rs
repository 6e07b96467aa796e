//! `sgard doctor [--json]`: one line per check (`ok`, `warning`, `error`),
//! and for the last two what to do. It changes nothing: the repository is
//! read under a shared lock taken without waiting (a held lock is reported
//! with its holder), this machine's state is read as it is, and the
//! server gets a login whose token is thrown away.

mod machine;
mod repo;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anstyle::{AnsiColor, Style};
use anyhow::Result;
use serde_json::json;
use sgard::remote::probe::{Finding, Level};

use super::{Ctx, print_json};
use crate::ui;

fn run(ctx: &Ctx, json: bool, out: &mut dyn Write) -> Result<ExitCode> {
    let mut checks = Vec::new();
    let found = repo::checks(ctx, &mut checks);
    remote(ctx, found.is_some(), &mut checks);
    if found.is_some() {
        externals(ctx, &mut checks);
        watcher(ctx, &mut checks);
    }
    // Git is looked at whenever there is a repository, even one whose
    // manifest does not load (a merge's conflict markers).
    let is_repo = sgard_store::durable::lstat_exists(&ctx.repo.join(sgard_manifest::MANIFEST_FILE));
    machine::platform(ctx, &mut checks);
    machine::git(ctx, is_repo, &mut checks);
    machine::editor(&mut checks);
    machine::completion(ctx, &mut checks);
    let count = |l: Level| checks.iter().filter(|c| c.level == l).count();
    let (errors, warnings) = (count(Level::Error), count(Level::Warning));
    if json {
        let list: Vec<_> = checks
            .iter()
            .map(|c| {
                json!({
                    "check": c.check,
                    "status": c.level.as_str(),
                    "detail": c.detail,
                    "hint": c.hint,
                })
            })
            .collect();
        print_json(
            out,
            &json!({
                "schema": 1,
                "checks": list,
                "errors": errors,
                "warnings": warnings,
            }),
        )?;
    } else {
        for c in &checks {
            writeln!(
                out,
                "{} {:<13} {}",
                ui::styled(ctx.colour, style(c.level), c.level.as_str(), 7),
                c.check,
                ui::clean_lines(&c.detail, &" ".repeat(22))
            )?;
            if let Some(h) = &c.hint {
                writeln!(out, "{:22}→ {}", "", ui::clean(h))?;
            }
        }
        writeln!(
            out,
            "{errors} error{}, {warnings} warning{}",
            plural(errors),
            plural(warnings)
        )?;
    }
    Ok(if errors > 0 {
        ExitCode::from(crate::exit::ERROR)
    } else {
        ExitCode::SUCCESS
    })
}

/// The colour of a status word.
fn style(l: Level) -> Style {
    let c = match l {
        Level::Ok => AnsiColor::Green,
        Level::Warning => AnsiColor::Yellow,
        Level::Error => AnsiColor::Red,
    };
    Style::new().fg_color(Some(c.into()))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `1 entry`, `3 entries`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `path` for people: `~/…` under the home folder.
fn show(ctx: &Ctx, path: &Path) -> String {
    match path.strip_prefix(&ctx.env.home) {
        Ok(rest) if rest.as_os_str().is_empty() => "~".into(),
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

/// A list for people: the first `n` items, then how many more.
fn some_of(items: &[String], n: usize) -> String {
    let mut s = items.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > n {
        s.push_str(&format!(" and {} more", items.len() - n));
    }
    s
}

/// Gathers several findings of one check into one: the worst level, the
/// details and hints joined.
struct Parts {
    check: &'static str,
    level: Level,
    details: Vec<String>,
    hints: Vec<String>,
}

impl Parts {
    fn new(check: &'static str) -> Self {
        Parts {
            check,
            level: Level::Ok,
            details: Vec::new(),
            hints: Vec::new(),
        }
    }

    fn ok(&mut self, detail: impl Into<String>) {
        self.details.push(detail.into());
    }

    fn raise(&mut self, level: Level, detail: impl Into<String>, hint: impl Into<String>) {
        let rank = |l: Level| match l {
            Level::Ok => 0,
            Level::Warning => 1,
            Level::Error => 2,
        };
        if rank(level) > rank(self.level) {
            self.level = level;
        }
        self.details.push(detail.into());
        let h = hint.into();
        if !h.is_empty() && !self.hints.contains(&h) {
            self.hints.push(h);
        }
    }

    fn finish(self) -> Finding {
        Finding {
            check: self.check,
            level: self.level,
            detail: self.details.join("; "),
            hint: (!self.hints.is_empty()).then(|| self.hints.join("; ")),
        }
    }
}

/// Whether `sgard watch` runs for this repository, and can vouch for what
/// did not change.
fn watcher(ctx: &Ctx, out: &mut Vec<Finding>) {
    let Some(dir) = sgard_garden::doctor::state_folder(&ctx.repo, &ctx.env) else {
        return;
    };
    let socket = dir.join(sgard_garden::watch::SOCKET);
    let finding = match sgard_watch::probe(&socket, std::time::Duration::from_secs(3)) {
        Ok(info) => match info.broken {
            None if !info.blind.is_empty() => Finding::warning(
                "watcher",
                format!(
                    "runs (process {}), but cannot vouch for {} folder{} (a network file \
                     system, or one it cannot watch), first {}",
                    info.pid,
                    info.blind.len(),
                    if info.blind.len() == 1 { "" } else { "s" },
                    show(ctx, &info.blind[0])
                ),
                "status always looks at what is under them; nothing to do unless that is slow",
            ),
            None => Finding::ok(
                "watcher",
                format!(
                    "runs (process {}): {} tracked paths in {} folders; status looks only at what changed",
                    info.pid, info.paths, info.folders
                ),
            ),
            Some(why) => Finding::warning(
                "watcher",
                format!(
                    "runs (process {}) but cannot vouch for anything: {why}",
                    info.pid
                ),
                "status looks at every file until that is fixed; restart the watcher after",
            ),
        },
        Err(sgard_watch::Error::NotRunning(_)) => Finding::ok(
            "watcher",
            "not running: status looks at every tracked file (`sgard watch --install` \
             starts one at login)",
        ),
        Err(e) => Finding::warning(
            "watcher",
            format!("does not answer: {e}"),
            "status looks at every file; restart it (`systemctl --user restart \
             sgard-watch-…`, or stop and start `sgard watch`)",
        ),
    };
    out.push(finding);
}

/// The externals: past their refresh period, or their source gone (asked
/// of every source at once, 10 seconds each at most; nothing is fetched).
fn externals(ctx: &Ctx, out: &mut Vec<Finding>) {
    use sgard_manifest::externals::{EXTERNALS_FILE, ExternalLog};
    let file = ctx.repo.join(EXTERNALS_FILE);
    let log = match ExternalLog::load(&file) {
        Ok(l) => l,
        Err(e) => {
            out.push(Finding::error(
                "externals",
                format!("{e}"),
                format!("fix or remove {}", show(ctx, &file)),
            ));
            return;
        }
    };
    if log.externals.is_empty() {
        out.push(Finding::ok("externals", "none"));
        return;
    }
    let limits = sgard_externals::Limits {
        timeout: std::time::Duration::from_secs(10),
        ..sgard_externals::Limits::default()
    };
    let answers: Vec<Option<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = log
            .externals
            .iter()
            .map(|x| {
                s.spawn(move || {
                    let r = if x.format == "git" {
                        sgard_externals::git::resolve(&x.url, x.reference.as_deref(), &limits)
                            .map(|_| ())
                    } else {
                        sgard_externals::reachable(&x.url, &limits)
                    };
                    r.err().map(|e| e.to_string())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Some("the check failed".into())))
            .collect()
    });
    let mut p = Parts::new("externals");
    let due: Vec<String> = log
        .externals
        .iter()
        .filter(|x| x.is_due(ctx.env.now))
        .map(|x| x.path.clone())
        .collect();
    let gone: Vec<&String> = answers.iter().flatten().collect();
    let n = log.externals.len();
    if due.is_empty() && gone.is_empty() {
        p.ok(format!(
            "{}, every source answers",
            count(n, "external", "externals")
        ));
    }
    if !due.is_empty() {
        p.raise(
            Level::Warning,
            format!("past the refresh period: {}", some_of(&due, 5)),
            "`sgard external refresh` fetches them",
        );
    }
    for g in gone {
        p.raise(
            Level::Warning,
            g.clone(),
            "the repository still has its files (restore needs no network); \
             find where it moved, then `sgard remove` it and `sgard external add` it again",
        );
    }
    out.push(p.finish());
}

/// The sync server: which one, then what the probe finds.
fn remote(ctx: &Ctx, have_repo: bool, out: &mut Vec<Finding>) {
    use sgard::remote::config;
    let saved = if have_repo {
        match config::load(&ctx.repo) {
            Ok(s) => s,
            Err(e) => {
                out.push(Finding::error(
                    "remote",
                    format!("{e:#}"),
                    format!(
                        "fix the file, or write it again: `sgard remote set HOST:PORT` ({})",
                        show(ctx, &ctx.repo.join(config::REMOTE_FILE))
                    ),
                ));
                return;
            }
        }
    } else {
        None
    };
    let opts = match ctx.remote_opts() {
        Ok(o) => o,
        Err(e) if e.to_string().starts_with("no remote configured") => {
            out.push(Finding::ok(
                "remote",
                "none configured (sync through a server is optional)",
            ));
            return;
        }
        Err(e) => {
            out.push(Finding::error(
                "remote",
                format!("{e:#}"),
                "see `sgard remote show`; `sgard remote set HOST:PORT` saves a server",
            ));
            return;
        }
    };
    let r = &opts.remote;
    let from = if ctx.net.remote.is_some() {
        "--remote".to_owned()
    } else if saved.as_ref().is_some_and(|s| s.addr == r.addr) {
        show(ctx, &ctx.repo.join(config::REMOTE_FILE))
    } else {
        "SGARD_REMOTE".to_owned()
    };
    let tls = match (&r.tls_ca, r.tls) {
        (Some(ca), true) => format!("TLS trusting {}", show(ctx, ca)),
        (None, true) => "TLS trusting the system's CAs".to_owned(),
        _ => "no TLS".to_owned(),
    };
    let said = format!("{} (from {from}; {tls})", r.addr);
    // The certificate file a push would use, whether or not the server
    // can be reached now.
    let fix_ca = format!(
        "give the file holding the server's certificate (or its CA): `sgard remote set {} \
         --tls-ca FILE` keeps a copy in the repository, for every machine that shares it",
        r.addr
    );
    let ca = r.tls_ca.as_ref().filter(|_| r.tls);
    if let Some(Err(e)) = ca.map(|ca| sgard::remote::tls::read_certs(ca)) {
        out.push(Finding::error("remote", format!("{said}: {e:#}"), fix_ca));
        return;
    }
    // A path in the shared remote.yaml (the Go sgard's `tls_ca`, or an
    // older sgard's) names a file of one machine.
    let path_in_file = ca.is_some_and(|ca| {
        ctx.net.tls_ca.is_none()
            && saved.as_ref().is_some_and(|s| s.addr == r.addr)
            && !config::is_kept_ca(&ctx.repo, ca)
    });
    if path_in_file {
        out.push(Finding::warning(
            "remote",
            format!(
                "{said}: remote.yaml names a certificate file of this machine; the other \
                 machines that share the repository do not have it there"
            ),
            fix_ca,
        ));
    } else {
        out.push(Finding::ok("remote", said));
    }
    let home = format!("{}/", ctx.env.home.display());
    out.extend(sgard::remote::probe::probe(&opts).into_iter().map(|mut f| {
        f.detail = f.detail.replace(&home, "~/");
        f
    }));
}

/// The arguments of `sgard doctor`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print one JSON document
    #[arg(long)]
    json: bool,
    /// The sync server to check [default: SGARD_REMOTE, then <repo>/remote.yaml]
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

    fn git_setup(&self) -> bool {
        false
    }
}
