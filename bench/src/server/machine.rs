//! A client machine of the `server` scenario: a HOME of its own, its
//! repository and XDG folders beside (not inside) that HOME, an SSH key,
//! a host name. Every command runs the real `sgard` binary.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};

use super::stats::{Op, Record};

/// One client machine.
pub struct Machine {
    /// The HOME: exactly the tracked tree, nothing of sgard's own.
    pub home: PathBuf,
    repo: PathBuf,
    xdg: PathBuf,
    /// The private key (`KEY.pub` beside it).
    pub key: PathBuf,
    /// `SGARD_HOSTNAME`.
    pub host: String,
    sgard: PathBuf,
}

impl Machine {
    /// A machine in `dir/name` (created empty) with `key`.
    pub fn new(sgard: &Path, dir: &Path, name: &str, key: &Path) -> Result<Machine> {
        let root = dir.join(name);
        let m = Machine {
            home: root.join("home"),
            repo: root.join("repo"),
            xdg: root.join("xdg"),
            key: key.to_path_buf(),
            host: format!("bench-{name}"),
            sgard: sgard.to_path_buf(),
        };
        for d in [&m.home, &m.xdg] {
            fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        Ok(m)
    }

    /// `sgard --repo REPO ARGS` with this machine's HOME, XDG folders and
    /// host name, no ssh-agent (the key file is used), stdin closed.
    fn command(&self, args: &[&OsStr]) -> Command {
        let mut c = Command::new(&self.sgard);
        c.arg("--repo")
            .arg(&self.repo)
            .args(args)
            .current_dir(&self.home)
            .env("HOME", &self.home)
            .env("XDG_CACHE_HOME", self.xdg.join("cache"))
            .env("XDG_STATE_HOME", self.xdg.join("state"))
            .env("XDG_CONFIG_HOME", self.xdg.join("config"))
            .env("XDG_DATA_HOME", self.xdg.join("data"))
            .env("SGARD_HOSTNAME", &self.host)
            .env("SSH_AUTH_SOCK", "")
            .env("NO_COLOR", "1")
            .env("LC_ALL", "C")
            .env_remove("SGARD_REPO")
            .env_remove("SGARD_REMOTE")
            .env_remove("SGARD_NOW")
            .stdin(Stdio::null());
        c
    }

    /// Runs `sgard ARGS` and times it (spawn to exit).
    pub fn timed(&self, op: Op, who: &str, args: &[&OsStr]) -> Result<Record> {
        let mut cmd = self.command(args);
        let started = Instant::now();
        let out = cmd
            .output()
            .with_context(|| format!("running {}", self.sgard.display()))?;
        let wall = started.elapsed();
        let ok = out.status.success();
        Ok(Record {
            op,
            started,
            wall,
            code: out.status.code(),
            who: who.to_owned(),
            stderr: if ok {
                String::new()
            } else {
                String::from_utf8_lossy(&out.stderr).into_owned()
            },
        })
    }

    /// Runs `sgard ARGS` untimed; an error when it does not exit 0.
    pub fn must(&self, args: &[&OsStr]) -> Result<()> {
        let out = self
            .command(args)
            .output()
            .with_context(|| format!("running {}", self.sgard.display()))?;
        if !out.status.success() {
            bail!(
                "{}: sgard {} failed ({}):\n{}",
                self.host,
                args.iter()
                    .map(|a| a.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim_end()
            );
        }
        Ok(())
    }

    /// `push -r ADDR --ssh-key KEY`, timed.
    pub fn push(&self, op: Op, who: &str, addr: &str) -> Result<Record> {
        self.timed(op, who, &self.remote_args("push", addr))
    }

    /// `pull -r ADDR --ssh-key KEY`, timed.
    pub fn pull(&self, op: Op, who: &str, addr: &str) -> Result<Record> {
        self.timed(op, who, &self.remote_args("pull", addr))
    }

    fn remote_args<'a>(&'a self, verb: &'a str, addr: &'a str) -> Vec<&'a OsStr> {
        vec![
            verb.as_ref(),
            "-r".as_ref(),
            addr.as_ref(),
            "--ssh-key".as_ref(),
            self.key.as_os_str(),
        ]
    }

    /// `sgard trust add OTHER.pub`.
    pub fn trust(&self, other_key: &Path) -> Result<()> {
        let public = pub_of(other_key);
        self.must(&["trust".as_ref(), "add".as_ref(), public.as_os_str()])
    }
}

/// `KEY.pub`.
pub fn pub_of(key: &Path) -> PathBuf {
    let mut p = key.as_os_str().to_owned();
    p.push(".pub");
    PathBuf::from(p)
}

/// Makes an ed25519 key `dir/name` (and `name.pub`), no passphrase.
pub fn keygen(dir: &Path, name: &str) -> Result<PathBuf> {
    let p = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&p)
        .stdin(Stdio::null())
        .output()
        .context("running ssh-keygen (Debian: apt-get install openssh-client)")?;
    if !out.status.success() {
        bail!(
            "ssh-keygen failed: {}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(p)
}
