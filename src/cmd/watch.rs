//! `sgard watch`: the watcher that lets `status` look only at what
//! changed (see `sgard_watch` and `sgard_garden::watch`), and its systemd
//! user unit.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use sgard::context;
use sgard_garden::LockMode;
use sgard_watch::daemon::{Config, Set};

use super::Ctx;
use crate::ui;

/// The arguments of `sgard watch`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write a systemd user unit that runs the watcher for this repository, and start it
    #[arg(long, conflicts_with_all = ["uninstall", "check"])]
    install: bool,
    /// Stop the unit `--install` wrote, and remove it
    #[arg(long, conflicts_with = "check")]
    uninstall: bool,
    /// Say whether a watcher runs for this repository (exit 1 when none does)
    #[arg(long)]
    check: bool,
    /// Checkpoint the tracked files that changed once they have been quiet this long (30s, 5m, 1h); entries in conflict or changed by another machine are left alone
    #[arg(long, value_name = "DUR", conflicts_with_all = ["uninstall", "check"])]
    checkpoint_after: Option<String>,
}

impl super::Run for Args {
    fn run(self, ctx: &Ctx, out: &mut dyn Write) -> Result<ExitCode> {
        let quiet = self
            .checkpoint_after
            .as_deref()
            .map(|s| super::external::period("--checkpoint-after", s))
            .transpose()?
            .map(Duration::from_secs);
        if quiet == Some(Duration::ZERO) {
            return Err(crate::exit::Fail::usage(
                "--checkpoint-after 0: give a time the files must be quiet for (e.g. 30s)",
            ));
        }
        if self.install {
            install(ctx, self.checkpoint_after.as_deref(), out)
        } else if self.uninstall {
            uninstall(ctx, out)
        } else if self.check {
            check(ctx, out)
        } else {
            serve(ctx, quiet, self.checkpoint_after.as_deref())
        }
    }
}

/// The watcher's socket, lock and cookie folder, and the repository's
/// state folder's name (its key).
fn places(ctx: &Ctx) -> Result<(PathBuf, PathBuf, PathBuf, Set)> {
    let g = ctx.open(LockMode::Shared)?;
    let (socket, lock, cookies) = g.watch_places().ok_or_else(|| {
        anyhow!("sgard watch keeps its socket in the state folder, and there is none (set HOME)")
    })?;
    let set = g.watch_set();
    // The watcher never holds the repository's lock: it reads it again
    // only when the tracked paths change.
    drop(g);
    Ok((socket, lock, cookies, set))
}

/// Checkpoints `paths` in a child `sgard checkpoint` (one at a time: a
/// checkpoint still running when the next is due makes that one wait for
/// the next quiet spell).
struct Checkpointer {
    repo: PathBuf,
    after: String,
    running: Option<std::process::Child>,
    /// Paths whose checkpoint waits for the running one.
    waiting: Vec<PathBuf>,
}

/// Beyond this many paths, the checkpoint is of every entry (it records
/// only what changed here anyway): an argument list has a limit.
const MAX_PATH_ARGS: usize = 1000;

impl Checkpointer {
    /// Called on every turn of the watcher: `paths` are due (often none).
    fn run(&mut self, mut paths: Vec<PathBuf>) {
        if let Some(child) = &mut self.running {
            match child.try_wait() {
                Ok(None) => {
                    self.waiting.append(&mut paths);
                    return;
                }
                _ => self.running = None,
            }
        }
        paths.append(&mut self.waiting);
        if paths.is_empty() {
            return;
        }
        paths.sort();
        paths.dedup();
        let Ok(exe) = std::env::current_exe() else {
            ui::warn("cannot find sgard's own executable to checkpoint with");
            return;
        };
        let mut c = Command::new(exe);
        c.arg("--repo")
            .arg(&self.repo)
            .arg("--quiet")
            .arg("checkpoint")
            .arg("-m")
            .arg(format!(
                "sgard watch: changed files quiet for {}",
                self.after
            ));
        if paths.len() <= MAX_PATH_ARGS {
            c.arg("--").args(&paths);
        }
        ui::note(&format!(
            "checkpointing {} after {} of quiet",
            ui::count(paths.len() as u64, "changed path", "changed paths"),
            self.after
        ));
        match c.stdin(Stdio::null()).spawn() {
            Ok(child) => self.running = Some(child),
            Err(e) => ui::warn(&format!("cannot run sgard checkpoint: {e}")),
        }
    }
}

fn serve(ctx: &Ctx, quiet: Option<Duration>, after: Option<&str>) -> Result<ExitCode> {
    let (socket, lock, cookies, first) = places(ctx)?;
    if let Some(dir) = socket.parent() {
        sgard_store::durable::create_private_dir_all(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut first = Some(first);
    let mut load = || -> std::result::Result<Set, String> {
        if let Some(s) = first.take() {
            return Ok(s);
        }
        let g = ctx.open(LockMode::Shared).map_err(|e| format!("{e:#}"))?;
        Ok(g.watch_set())
    };
    let say = |m: &str| ui::note(m);
    let mut checkpointer = Checkpointer {
        repo: ctx.repo.clone(),
        after: after.unwrap_or_default().to_owned(),
        running: None,
        waiting: Vec::new(),
    };
    let mut on_quiet = |paths: Vec<PathBuf>| checkpointer.run(paths);
    sgard_watch::daemon::serve(Config {
        socket,
        lock,
        cookies,
        load: &mut load,
        stop: &sgard_store::cancel::requested,
        say: &say,
        test_hooks: ctx.env.watch_stall.is_some(),
        stall: ctx.env.watch_stall.clone(),
        quiet,
        on_quiet: &mut on_quiet,
    })?;
    // Stopped as asked (Ctrl-C, SIGTERM from systemd): a clean end.
    ui::note("the watcher stopped");
    Ok(ExitCode::SUCCESS)
}

fn check(ctx: &Ctx, out: &mut dyn Write) -> Result<ExitCode> {
    let (socket, _, _, set) = places(ctx)?;
    match sgard_watch::probe(&socket, Duration::from_secs(3)) {
        Ok(info) => {
            let current = if info.set == set.id {
                "the current tracked paths"
            } else {
                "an older list of tracked paths (the next status makes it read them again)"
            };
            writeln!(
                out,
                "A watcher runs (process {}): {} tracked paths in {} folders, {current}.",
                info.pid, info.paths, info.folders
            )?;
            for b in &info.blind {
                writeln!(
                    out,
                    "It cannot vouch for {} (a network file system, or a folder it cannot \
                     watch): status always looks at what is under it.",
                    b.display()
                )?;
            }
            if let Some(why) = info.broken {
                writeln!(out, "It cannot vouch for anything: {why}.")?;
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(sgard_watch::Error::NotRunning(_)) => {
            writeln!(
                out,
                "No watcher runs for this repository: status looks at every tracked file \
                 (`sgard watch --install` starts one at login)."
            )?;
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e.into()),
    }
}

/// The unit's name for this repository: one per repository, named by its
/// state folder's key.
fn unit_name(socket: &Path) -> String {
    let key = socket
        .parent()
        .and_then(Path::file_name)
        .map(|k| k.to_string_lossy().into_owned())
        .unwrap_or_default();
    let short: String = key
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(16)
        .collect();
    format!("sgard-watch-{short}.service")
}

/// One argument of `ExecStart=`, quoted as systemd reads it.
fn quote(arg: &str) -> String {
    let mut s = String::from("\"");
    for c in arg.chars() {
        match c {
            '"' | '\\' => {
                s.push('\\');
                s.push(c);
            }
            '%' => s.push_str("%%"),
            '$' => s.push_str("$$"),
            _ => s.push(c),
        }
    }
    s.push('"');
    s
}

/// The unit: `env` is what this shell has that the watcher must see the
/// same (`XDG_STATE_HOME`, where its socket is; `XDG_CONFIG_HOME`): the
/// user's service manager may not have it.
fn unit_text(
    exe: &Path,
    repo: &Path,
    after: Option<&str>,
    env: &[(&str, &Path)],
) -> Result<String> {
    let utf8 = |p: &Path| -> Result<String> {
        let s = p
            .to_str()
            .ok_or_else(|| anyhow!("a systemd unit cannot name a path that is not UTF-8"))?;
        if s.contains('\n') {
            bail!("a systemd unit cannot name a path with a line break");
        }
        Ok(s.to_owned())
    };
    let (exe, repo) = (utf8(exe)?, utf8(repo)?);
    let mut environment = String::new();
    for (k, v) in env {
        environment.push_str(&format!(
            "Environment={}\n",
            quote(&format!("{k}={}", utf8(v)?))
        ));
    }
    Ok(format!(
        "# Written by `sgard watch --install`; `sgard watch --uninstall` removes it.\n\
         [Unit]\n\
         Description=sgard watch: prompt-speed status for {repo}\n\
         \n\
         [Service]\n\
         Type=simple\n\
         {environment}\
         ExecStart={} --repo {} watch{}\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         Nice=10\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        quote(&exe),
        quote(&repo),
        after
            .map(|a| format!(" --checkpoint-after {}", quote(a)))
            .unwrap_or_default(),
    ))
}

fn systemctl(args: &[&str]) -> Result<()> {
    let out = Command::new("systemctl")
        .arg("--user")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running `systemctl --user {}`", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "`systemctl --user {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn unit_path(ctx: &Ctx, name: &str) -> PathBuf {
    context::config_home(&ctx.env.home)
        .join("systemd/user")
        .join(name)
}

fn install(ctx: &Ctx, after: Option<&str>, out: &mut dyn Write) -> Result<ExitCode> {
    if !cfg!(target_os = "linux") {
        bail!(
            "`sgard watch --install` writes a systemd user unit, which only Linux has; run `sgard watch` from your login items instead"
        );
    }
    let (socket, _, _, _) = places(ctx)?;
    let name = unit_name(&socket);
    let path = unit_path(ctx, &name);
    let exe = std::env::current_exe().context("finding sgard's own executable")?;
    let mut env: Vec<(&str, &Path)> = Vec::new();
    if let Some(s) = ctx.env.state_dir.as_deref() {
        env.push(("XDG_STATE_HOME", s));
    }
    if let Some(c) = ctx.env.config_dir.as_deref().and_then(Path::parent) {
        env.push(("XDG_CONFIG_HOME", c));
    }
    let text = unit_text(&exe, &ctx.repo, after, &env)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    sgard_store::durable::write_atomic(&path, text.as_bytes(), 0o644)
        .with_context(|| format!("writing {}", path.display()))?;
    writeln!(out, "Wrote {}.", path.display())?;
    systemctl(&["daemon-reload"])
        .and_then(|()| systemctl(&["enable", "--now", &name]))
        .with_context(|| {
            format!(
                "the unit is written but not started: run `systemctl --user enable --now {name}`"
            )
        })?;
    writeln!(
        out,
        "Started {name}: it runs at every login; `sgard watch --check` says what it watches."
    )?;
    Ok(ExitCode::SUCCESS)
}

fn uninstall(ctx: &Ctx, out: &mut dyn Write) -> Result<ExitCode> {
    let (socket, _, _, _) = places(ctx)?;
    let name = unit_name(&socket);
    let path = unit_path(ctx, &name);
    if !sgard_store::durable::lstat_exists(&path) {
        writeln!(
            out,
            "There is no unit at {}: nothing to remove.",
            path.display()
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    // Stopping may fail for a unit systemd never loaded: removing it is
    // what was asked.
    if let Err(e) = systemctl(&["disable", "--now", &name]) {
        ui::warn(&format!("{e:#}"));
    }
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    let _ = systemctl(&["daemon-reload"]);
    writeln!(out, "Removed {}.", path.display())?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_quotes_what_systemd_would_expand() {
        let t = unit_text(
            Path::new("/opt/my sgard/sgard"),
            Path::new("/h/100%$x\""),
            None,
            &[("XDG_STATE_HOME", Path::new("/h/state dir"))],
        )
        .unwrap();
        assert!(
            t.contains("Environment=\"XDG_STATE_HOME=/h/state dir\"\n"),
            "{t}"
        );
        assert!(
            t.contains(r#"ExecStart="/opt/my sgard/sgard" --repo "/h/100%%$$x\"" watch"#),
            "{t}"
        );
        assert!(unit_text(Path::new("/a\nb"), Path::new("/r"), None, &[]).is_err());
        let t = unit_text(Path::new("/s"), Path::new("/r"), Some("5m"), &[]).unwrap();
        assert!(
            t.contains(r#"ExecStart="/s" --repo "/r" watch --checkpoint-after "5m""#),
            "{t}"
        );
    }

    #[test]
    fn the_unit_is_named_by_the_repository_key() {
        assert_eq!(
            unit_name(Path::new(
                "/s/sgard/repos/id-0123456789abcdef0123/watch.sock"
            )),
            "sgard-watch-id0123456789abcd.service"
        );
    }
}
