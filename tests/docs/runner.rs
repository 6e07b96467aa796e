//! Running one markdown file as a session in a fresh sandbox (ARCHITECTURE.md,
//! "The docs test"): each command is a bash
//! process that restores the session's exported variables, working folder
//! and `$?` from files, runs, and saves them again; all of them (and what
//! they leave in the background) share one process group, killed when the
//! session is dropped (its end, an early return or a panic) and waited for
//! to be gone, so the next session can bind the same ports.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt as _;

use super::markdown::{self, Step};
use super::matcher;

/// How sessions run.
pub struct Config {
    /// The folder of `sgard` and `sgardd`, first on PATH.
    pub bin_dir: PathBuf,
    /// How long one command or block may take.
    pub timeout: Duration,
    /// moto_server, for the files that say `<!-- docs-test: needs moto -->`.
    pub moto: Option<String>,
}

/// What the sessions did.
#[derive(Default)]
pub struct Report {
    pub sessions: usize,
    /// Files not run at all because they need moto and it is not set.
    pub without_moto: usize,
    pub commands: usize,
    /// "file:line: reason", printed as they happen too.
    pub skips: Vec<String>,
    pub failures: Vec<String>,
}

/// The fixed clock, host and identity of every session.
const ENV: [(&str, &str); 10] = [
    ("USER", "you"),
    ("LANG", "C.UTF-8"),
    ("TZ", "UTC"),
    ("SGARD_NOW", "2026-12-01T09:00:00Z"),
    ("SGARD_HOSTNAME", "laptop"),
    ("GIT_AUTHOR_NAME", "You"),
    ("GIT_AUTHOR_EMAIL", "you@example.com"),
    ("GIT_COMMITTER_NAME", "You"),
    ("GIT_COMMITTER_EMAIL", "you@example.com"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
];

/// The folders of the sandbox that paths in commands are moved into.
const ROOTS: [&str; 4] = ["/home", "/media", "/mnt", "/srv"];

/// How long a killed session's processes may take to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(5);

/// Runs the file `path` (named `name` in messages) as one session.
pub fn run_file(cfg: &Config, path: &Path, name: &str, report: &mut Report) {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            report.failures.push(format!("{name}: cannot read: {e}"));
            return;
        }
    };
    let doc = markdown::parse(&text);
    for (line, what) in &doc.errors {
        report.failures.push(format!("{name}:{line}: {what}"));
    }
    if doc.needs_moto && cfg.moto.is_none() {
        report.without_moto += 1;
        skip(
            report,
            format!("{name}: the whole file (needs moto: SGARD_MOTO_SERVER is not set)"),
        );
        return;
    }
    if !doc.steps.iter().any(|s| !matches!(s, Step::Skipped { .. })) {
        for step in &doc.steps {
            if let Step::Skipped { line, reason } = step {
                skip(report, format!("{name}:{line}: {reason}"));
            }
        }
        return;
    }
    let mut session = match Session::start(cfg) {
        Ok(s) => s,
        Err(e) => {
            report
                .failures
                .push(format!("{name}: cannot start a session: {e}"));
            return;
        }
    };
    report.sessions += 1;
    for step in &doc.steps {
        let ok = match step {
            Step::Skipped { line, reason } => {
                skip(report, format!("{name}:{line}: {reason}"));
                true
            }
            Step::Script { line, text, setup } => {
                report.commands += 1;
                let what = if *setup { "docs-test setup" } else { "block" };
                match session.run(text, true) {
                    Ok(Outcome::Done { status: 0, .. }) => true,
                    Ok(Outcome::Done { status, output }) => {
                        report.failures.push(format!(
                            "{name}:{line}: this {what} failed (exit status {status}):\n{}\n\
                             --- its output:\n{}",
                            indent(text),
                            indent(&output.join("\n"))
                        ));
                        false
                    }
                    Ok(Outcome::TimedOut) => {
                        report
                            .failures
                            .push(timed_out(name, *line, text, cfg.timeout));
                        false
                    }
                    Err(e) => {
                        report
                            .failures
                            .push(format!("{name}:{line}: cannot run: {e}"));
                        false
                    }
                }
            }
            Step::Console(commands) => {
                let mut ok = true;
                for (i, c) in commands.iter().enumerate() {
                    report.commands += 1;
                    match session.run(&c.text, false) {
                        Ok(Outcome::Done { output, status }) => {
                            if !matcher::matches(&c.expected, &output) {
                                report.failures.push(mismatch(name, c, &output, status));
                            } else if status != 0
                                && commands
                                    .get(i + 1)
                                    .is_none_or(|n| n.text.trim() != "echo $?")
                            {
                                report
                                    .failures
                                    .push(failed_command(name, c, &output, status));
                            }
                        }
                        Ok(Outcome::TimedOut) => {
                            report
                                .failures
                                .push(timed_out(name, c.line, &c.text, cfg.timeout));
                            ok = false;
                            break;
                        }
                        Err(e) => {
                            report
                                .failures
                                .push(format!("{name}:{}: cannot run: {e}", c.line));
                            ok = false;
                            break;
                        }
                    }
                }
                ok
            }
        };
        if !ok {
            // What follows depends on what failed: its failures would
            // only repeat this one.
            if let Some(last) = report.failures.last_mut() {
                last.push_str("\n(the rest of this file was not run)");
            }
            break;
        }
    }
    // Dropping the session kills what it left running.
    drop(session);
}

fn skip(report: &mut Report, what: String) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "docs: skipped {what}");
    report.skips.push(what);
}

fn indent(text: &str) -> String {
    text.trim_end_matches('\n')
        .lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn timed_out(name: &str, line: usize, text: &str, timeout: Duration) -> String {
    format!(
        "{name}:{line}: did not finish within {} s (a command that waits for input or a \
         server that never answers?):\n{}",
        timeout.as_secs_f64(),
        indent(text)
    )
}

fn mismatch(name: &str, c: &markdown::Command, output: &[String], status: i32) -> String {
    let mut m = format!(
        "{name}:{}: the output differs\n--- command:\n{}\n",
        c.line,
        indent(&c.text)
    );
    let _ = writeln!(
        m,
        "--- expected:\n{}",
        indent(&matcher::trimmed(&c.expected).join("\n"))
    );
    let _ = write!(
        m,
        "--- actual (exit status {status}):\n{}",
        indent(&matcher::trimmed(output).join("\n"))
    );
    m
}

fn failed_command(name: &str, c: &markdown::Command, output: &[String], status: i32) -> String {
    format!(
        "{name}:{}: exited with status {status}: a command that fails must be followed by \
         `$ echo $?` showing its code\n--- command:\n{}\n--- its output:\n{}",
        c.line,
        indent(&c.text),
        indent(&matcher::trimmed(output).join("\n"))
    )
}

enum Outcome {
    Done { status: i32, output: Vec<String> },
    TimedOut,
}

/// The sandbox T, the state between commands, and the process group
/// (killed when dropped).
pub struct Session {
    dir: tempfile::TempDir,
    /// T, as it appears in paths and output.
    t: String,
    state: PathBuf,
    leader: Child,
    timeout: Duration,
    runs: usize,
}

impl Session {
    pub fn start(cfg: &Config) -> std::io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("sgard-docs-").tempdir()?;
        let root = dir.path().canonicalize()?;
        let t_path = root.join("t");
        for sub in ["home/you", "media", "mnt", "srv"] {
            fs::create_dir_all(t_path.join(sub))?;
        }
        let state = root.join("state");
        fs::create_dir_all(&state)?;
        let t = t_path.to_string_lossy().into_owned();
        let home = t_path.join("home/you");
        let mut env = String::new();
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", cfg.bin_dir.display());
        let mut vars: Vec<(&str, String)> = vec![
            ("HOME", home.to_string_lossy().into_owned()),
            ("PATH", path),
        ];
        vars.extend(ENV.iter().map(|(k, v)| (*k, (*v).to_owned())));
        if let Some(moto) = &cfg.moto {
            vars.push(("SGARD_MOTO_SERVER", moto.clone()));
        }
        for (k, v) in vars {
            let _ = writeln!(env, "export {k}='{}'", v.replace('\'', r"'\''"));
        }
        fs::write(state.join("env"), env)?;
        fs::write(state.join("cwd"), format!("{}\n", home.display()))?;
        fs::write(state.join("status"), "0\n")?;
        // The group's leader: every command joins its group.
        let leader = Command::new("sleep")
            .arg("86400")
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        Ok(Self {
            dir,
            t,
            state,
            leader,
            timeout: cfg.timeout,
            runs: 0,
        })
    }

    /// Runs one command of a console block; its exit status and output, or
    /// `None` when it timed out.
    pub fn command(&mut self, body: &str) -> std::io::Result<Option<(i32, Vec<String>)>> {
        Ok(match self.run(body, false)? {
            Outcome::Done { status, output } => Some((status, output)),
            Outcome::TimedOut => None,
        })
    }

    /// The process group's id.
    pub fn group(&self) -> u32 {
        self.leader.id()
    }

    /// Runs `body` (a command of a console block, or a script with
    /// `set -eo pipefail`) in the session; its output with T taken out.
    fn run(&mut self, body: &str, script: bool) -> std::io::Result<Outcome> {
        let s = self.state.display();
        let mut text = format!(
            "__state='{s}'\n\
             . \"$__state/env\"\n\
             __old=\"$OLDPWD\"; cd -- \"$(<\"$__state/cwd\")\" 2>/dev/null || cd ~; OLDPWD=\"$__old\"; unset __old\n\
             trap '__status=$?; export -p > \"$__state/env\"; pwd > \"$__state/cwd\"; \
             echo $__status > \"$__state/status\"' EXIT\n\
             umask 022\n"
        );
        if script {
            text.push_str("set -eo pipefail\n");
        } else {
            text.push_str("(exit \"$(<\"$__state/status\")\")\n");
        }
        text.push_str(&virtual_roots(body, &self.t));
        text.push('\n');
        let script_path = self.state.join("script.sh");
        fs::write(&script_path, text)?;
        // A new file each time: what a background process goes on
        // printing stays in the file of the command that started it.
        self.runs += 1;
        let out_path = self.state.join(format!("output-{}", self.runs));
        let out = fs::File::create(&out_path)?;
        let mut child = Command::new("bash")
            .arg("--noprofile")
            .arg("--norc")
            .arg(&script_path)
            .env_clear()
            .current_dir(&self.t)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(i32::try_from(self.leader.id()).unwrap_or(0))
            .spawn()?;
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if started.elapsed() > self.timeout {
                self.kill_group();
                let _ = child.wait();
                return Ok(Outcome::TimedOut);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        };
        let output = String::from_utf8_lossy(&fs::read(&out_path)?).replace(&self.t, "");
        Ok(Outcome::Done {
            status: status.code().unwrap_or(-1),
            output: output.lines().map(str::to_owned).collect(),
        })
    }

    fn kill_group(&self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.leader.id())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Session {
    /// Kills everything the session left running, and waits (a few
    /// seconds at most) until none of it is left; T goes with `dir`.
    fn drop(&mut self) {
        let group = self.leader.id();
        let deadline = Instant::now() + GONE_WITHIN;
        loop {
            self.kill_group();
            if self.leader.try_wait().ok().flatten().is_none() {
                let _ = self.leader.kill();
                let _ = self.leader.wait();
            }
            if !group_alive(group) || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = fs::remove_dir_all(self.dir.path());
    }
}

/// Whether a process of the group `pgid` still runs (zombies, which hold
/// no port or file, aside).
pub fn group_alive(pgid: u32) -> bool {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
                return false;
            };
            // pid (comm) state ppid pgrp …: comm may hold spaces and parens.
            let Some((_, after)) = stat.rsplit_once(')') else {
                return false;
            };
            let mut fields = after.split_whitespace();
            let state = fields.next().unwrap_or("Z");
            let pgrp = fields.nth(1).and_then(|g| g.parse::<u32>().ok());
            state != "Z" && state != "X" && pgrp == Some(pgid)
        })
}

/// `/home`, `/media`, `/mnt` and `/srv`, alone or followed by `/…`, moved
/// into T: at the start of the text or after whitespace or one of
/// `> < , { ; | & ( = : ' "`; alone, they must end the text or be followed
/// by whitespace, a quote, `)`, `;`, `|`, `&` or `>`.
pub fn virtual_roots(text: &str, t: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut prev: Option<char> = None;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let boundary = match prev {
            None => true,
            Some(p) => {
                p.is_whitespace()
                    || matches!(
                        p,
                        '>' | '<' | ',' | '{' | ';' | '|' | '&' | '(' | '=' | ':' | '\'' | '"'
                    )
            }
        };
        if boundary && c == '/' && ROOTS.iter().any(|r| root_at(rest, r)) {
            out.push_str(t);
        }
        out.push(c);
        prev = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Whether `text` starts with the root `r`, then `/`, or then the end of a
/// word.
fn root_at(text: &str, r: &str) -> bool {
    text.strip_prefix(r)
        .is_some_and(|after| match after.chars().next() {
            None => true,
            Some(n) => {
                n == '/'
                    || n.is_whitespace()
                    || matches!(n, '\'' | '"' | ')' | ';' | '|' | '&' | '>')
            }
        })
}
