//! Running one sgard command and measuring its wall time and peak RSS.
//!
//! Wall time is `Instant` around spawn and wait, so it includes process
//! start-up (about a millisecond).
//!
//! Peak RSS needs the kernel's `ru_maxrss` of the child, which safe Rust's
//! standard library does not expose (`wait4`/`getrusage` would need `unsafe`,
//! which this workspace forbids). So:
//!
//! * If GNU time works at `/usr/bin/time`, the command runs under
//!   `/usr/bin/time -f '%U %S %M' -o FILE`: `%M` is the child's exact
//!   `ru_maxrss` in KiB, as reported by `wait4`, and `%U %S` its user and
//!   system CPU seconds. This is the normal method.
//! * Otherwise the harness samples `VmHWM` (the kernel's own high-water mark
//!   of resident memory) from `/proc/PID/status` every 2 ms until the child
//!   exits and reports the largest value seen. As `VmHWM` only grows this
//!   is exact up to the last sample, but memory touched in the final
//!   milliseconds before exit can be missed: a lower bound. CPU time is not
//!   reported in this mode.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

/// How peak RSS is obtained.
#[derive(Clone, Debug)]
pub enum RssMethod {
    /// GNU time at this path (`-f '%U %S %M'`): exact `ru_maxrss` and CPU.
    GnuTime(PathBuf),
    /// Sampling `VmHWM` in `/proc/PID/status` every 2 ms: a lower bound.
    ProcPoll,
}

impl RssMethod {
    /// GNU time if `/usr/bin/time` behaves like it, else `/proc` sampling.
    pub fn detect(scratch: &Path) -> Self {
        let time = PathBuf::from("/usr/bin/time");
        let out = scratch.join("time-probe.txt");
        let ok = Command::new(&time)
            .arg("-f")
            .arg(TIME_FORMAT)
            .arg("-o")
            .arg(&out)
            .arg("true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
            && fs::read_to_string(&out)
                .ok()
                .and_then(|s| parse_time_output(&s))
                .is_some();
        let _ = fs::remove_file(&out);
        if ok {
            RssMethod::GnuTime(time)
        } else {
            RssMethod::ProcPoll
        }
    }

    /// A short description for the report.
    pub fn describe(&self) -> String {
        match self {
            RssMethod::GnuTime(p) => {
                format!("{} -f '{TIME_FORMAT}' (exact ru_maxrss)", p.display())
            }
            RssMethod::ProcPoll => {
                "VmHWM from /proc/PID/status sampled every 2 ms (lower bound)".to_owned()
            }
        }
    }
}

/// The measurements of one run.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Wall-clock time.
    pub wall: Duration,
    /// Peak resident set size in KiB (0 if it could not be read).
    pub peak_rss_kib: u64,
    /// User plus system CPU time, when known (GNU time only).
    pub cpu: Option<Duration>,
    /// How the command exited.
    pub status: ExitStatus,
}

/// Runs `cmd` (already configured with args, env and cwd) with stdout and
/// stderr sent to `log` (`.out` and `.err` appended), measuring it.
pub fn run(method: &RssMethod, cmd: &Command, log: &Path) -> Result<Sample> {
    let stdout = File::create(log.with_extension("out"))
        .with_context(|| format!("creating {}", log.display()))?;
    let stderr = File::create(log.with_extension("err"))
        .with_context(|| format!("creating {}", log.display()))?;
    match method {
        RssMethod::GnuTime(time) => {
            let rss_file = log.with_extension("rss");
            let mut wrapped = Command::new(time);
            wrapped
                .arg("-f")
                .arg(TIME_FORMAT)
                .arg("-o")
                .arg(&rss_file)
                .arg(cmd.get_program())
                .args(cmd.get_args());
            copy_env_and_cwd(cmd, &mut wrapped);
            wrapped.stdin(Stdio::null()).stdout(stdout).stderr(stderr);
            let start = Instant::now();
            let status = wrapped
                .status()
                .with_context(|| format!("running {}", time.display()))?;
            let wall = start.elapsed();
            let text = fs::read_to_string(&rss_file)
                .with_context(|| format!("reading {}", rss_file.display()))?;
            let Some((cpu, peak_rss_kib)) = parse_time_output(&text) else {
                bail!("cannot read the peak RSS from GNU time's output {text:?}");
            };
            Ok(Sample {
                wall,
                peak_rss_kib,
                cpu: Some(cpu),
                status,
            })
        }
        RssMethod::ProcPoll => {
            let mut c = Command::new(cmd.get_program());
            c.args(cmd.get_args());
            copy_env_and_cwd(cmd, &mut c);
            c.stdin(Stdio::null()).stdout(stdout).stderr(stderr);
            let start = Instant::now();
            let mut child = c
                .spawn()
                .with_context(|| format!("running {}", cmd.get_program().display()))?;
            let status_path = PathBuf::from(format!("/proc/{}/status", child.id()));
            let mut peak = 0;
            let status = loop {
                if let Some(kib) = fs::read_to_string(&status_path)
                    .ok()
                    .and_then(|s| vm_hwm_kib(&s))
                {
                    peak = peak.max(kib);
                }
                if let Some(st) = child.try_wait()? {
                    break st;
                }
                thread::sleep(Duration::from_millis(2));
            };
            Ok(Sample {
                wall: start.elapsed(),
                peak_rss_kib: peak,
                cpu: None,
                status,
            })
        }
    }
}

/// Replays `from`'s environment changes and working folder onto `to`.
fn copy_env_and_cwd(from: &Command, to: &mut Command) {
    for (k, v) in from.get_envs() {
        match v {
            Some(v) => {
                to.env(k, v);
            }
            None => {
                to.env_remove(k);
            }
        }
    }
    if let Some(dir) = from.get_current_dir() {
        to.current_dir(dir);
    }
}

/// GNU time's format: user CPU s, system CPU s, max RSS KiB.
const TIME_FORMAT: &str = "%U %S %M";

/// The last line of GNU time's `-o` file is the [`TIME_FORMAT`] line; a line
/// before it may say "Command exited with non-zero status N". Returns the
/// CPU time and the peak RSS in KiB.
fn parse_time_output(text: &str) -> Option<(Duration, u64)> {
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?;
    let mut it = line.split_whitespace();
    let user: f64 = it.next()?.parse().ok()?;
    let sys: f64 = it.next()?.parse().ok()?;
    let rss = it.next()?.parse().ok()?;
    if it.next().is_some() || !(user + sys).is_finite() || user < 0.0 || sys < 0.0 {
        return None;
    }
    Some((Duration::from_secs_f64(user + sys), rss))
}

/// `VmHWM:   12345 kB` from a `/proc/PID/status` text.
pub(crate) fn vm_hwm_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_gnu_time_output() {
        assert_eq!(
            parse_time_output("0.25 0.50 1528\n"),
            Some((Duration::from_millis(750), 1528))
        );
        assert_eq!(
            parse_time_output("Command exited with non-zero status 3\n0.00 0.00 2040\n"),
            Some((Duration::ZERO, 2040))
        );
        assert_eq!(parse_time_output(""), None);
        assert_eq!(parse_time_output("1528\n"), None);
    }

    #[test]
    fn parses_vm_hwm() {
        let s = "Name:\tsgard\nVmPeak:\t  9000 kB\nVmHWM:\t    4321 kB\nVmRSS:\t 100 kB\n";
        assert_eq!(vm_hwm_kib(s), Some(4321));
        assert_eq!(vm_hwm_kib("Name:\tzombie\n"), None);
    }

    #[test]
    fn both_methods_measure_a_real_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg("exit 0");
        for m in [RssMethod::detect(dir.path()), RssMethod::ProcPoll] {
            let s = run(&m, &cmd, &dir.path().join("log")).expect("run");
            assert!(s.status.success());
        }
    }
}
