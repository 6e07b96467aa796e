//! A running `sgardd` of the `server` scenario: started on
//! `127.0.0.1:0`, its address read from its `sgardd serving on ADDR` line,
//! its log in a file, killed when dropped.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

/// How long `sgardd` may take to say it is serving.
const START_LIMIT: Duration = Duration::from_secs(30);

/// The `AWS_*` variables `sgardd` reads; removed from a folder store's
/// environment so a stray setting cannot change what is measured.
pub const AWS_VARS: [&str; 6] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ALLOW_HTTP",
];

/// A running `sgardd`.
pub struct Daemon {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Its standard error (one line per call).
    pub log: PathBuf,
}

impl Daemon {
    /// Starts `sgardd ARGS --listen 127.0.0.1:0` in `home` (its HOME and
    /// working folder) with `env` set, its output in `log`.
    pub fn start(
        sgardd: &Path,
        home: &Path,
        args: &[OsString],
        env: &[(String, String)],
        log: &Path,
    ) -> Result<Daemon> {
        fs::create_dir_all(home).with_context(|| format!("creating {}", home.display()))?;
        let err = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = Command::new(sgardd);
        cmd.args(args)
            .args(["--listen", "127.0.0.1:0"])
            .current_dir(home)
            .env("HOME", home)
            .env("SGARD_HOSTNAME", "sgard-bench-server")
            .env("NO_COLOR", "1")
            .env_remove("SGARD_NOW")
            .env_remove("SGARD_REPO");
        for v in AWS_VARS {
            cmd.env_remove(v);
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", sgardd.display()))?;
        let Some(stdout) = child.stdout.take() else {
            bail!("sgardd's standard output was not captured");
        };
        let (tx, rx) = mpsc::channel::<String>();
        // Reads the banner, then keeps draining so sgardd never blocks on
        // a full pipe.
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let mut daemon = Daemon {
            child,
            addr: String::new(),
            log: log.to_path_buf(),
        };
        let mut seen = String::new();
        loop {
            match rx.recv_timeout(START_LIMIT) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix("sgardd serving on ") {
                        let addr = rest.split_whitespace().next().unwrap_or_default();
                        if !addr.starts_with("127.0.0.1:") {
                            bail!("sgardd is not on loopback: {line}");
                        }
                        daemon.addr = addr.to_owned();
                        return Ok(daemon);
                    }
                    seen.push_str(&line);
                    seen.push('\n');
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    bail!(
                        "sgardd did not say it was serving within {START_LIMIT:?}; stdout: {seen}; log: {}",
                        tail(log)
                    );
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = daemon.child.wait().ok();
                    bail!(
                        "sgardd exited ({}) before serving; stdout: {seen}; stderr:\n{}",
                        status.map_or_else(|| "?".to_owned(), |s| s.to_string()),
                        tail(log)
                    );
                }
            }
        }
    }

    /// The process id (for its CPU time and peak RSS in `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process's CPU time (user + system) and peak RSS (KiB) so far,
    /// from `/proc/PID/stat` and `/proc/PID/status`.
    pub fn usage(&self) -> Option<(Duration, u64)> {
        let stat = fs::read_to_string(format!("/proc/{}/stat", self.pid())).ok()?;
        // The fields after the command name (which may hold spaces and
        // parentheses) start after the last ')'; utime and stime are the
        // 14th and 15th fields of the line, the 12th and 13th after it.
        let rest = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        let utime: u64 = f.get(11)?.parse().ok()?;
        let stime: u64 = f.get(12)?.parse().ok()?;
        let ticks = clock_ticks()?;
        let cpu = Duration::from_secs_f64((utime + stime) as f64 / ticks as f64);
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let hwm = crate::measure::vm_hwm_kib(&status)?;
        Some((cpu, hwm))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `getconf CLK_TCK`: the unit of `/proc/PID/stat`'s CPU times.
fn clock_ticks() -> Option<u64> {
    let out = Command::new("getconf").arg("CLK_TCK").output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// The last 20 lines of a log file that are not `INFO` (sgardd logs
/// every call at `INFO`).
pub fn tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.contains(" INFO ")).collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
