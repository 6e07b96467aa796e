//! The world a case runs in: three homes, a shared folder, a git origin
//! with a clone per machine, and one `sgardd` on loopback.

use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::op::{Fault, Repo};
use crate::{Config, Error};

/// Machines in a world.
pub const MACHINES: usize = 3;

/// The passphrase every machine knows (encryption is set up in every
/// repository at the start).
pub const PASSPHRASE: &str = "sgard-sim passphrase";

/// The word a case writes for the server's address.
pub const SERVER: &str = "@server";

/// How long one command may run before it counts as hung.
const LIMIT: Duration = Duration::from_secs(120);

/// The clock every command starts at; each step moves it on a minute.
const EPOCH: i64 = 1_774_267_200; // 2026-03-23T12:00:00Z

/// One simulated machine.
#[derive(Debug)]
pub struct Machine {
    /// `m1`, `m2`, `m3`: its host name too.
    pub name: String,
    /// Its home folder.
    pub home: PathBuf,
    /// Its SSH key (outside the home, given as `SGARD_SSH_KEY`).
    pub key: PathBuf,
}

/// How a command ended.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// What it printed.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
    /// It ran past the limit and was killed.
    pub hung: bool,
}

impl Outcome {
    /// Whether it exited 0.
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// A short account for failure reports.
    pub fn describe(&self) -> String {
        let how = match (self.code, self.signal) {
            _ if self.hung => "hung (killed after the limit)".to_owned(),
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            (None, None) => "ended unaccountably".to_owned(),
        };
        let cut = |s: &str| {
            let s = s.trim_end();
            if s.len() > 1500 {
                let mut i = 1500;
                while !s.is_char_boundary(i) {
                    i -= 1;
                }
                format!("{}…", &s[..i])
            } else {
                s.to_owned()
            }
        };
        format!(
            "{how}\n  stdout: {}\n  stderr: {}",
            cut(&self.stdout).replace('\n', "\n          "),
            cut(&self.stderr).replace('\n', "\n          ")
        )
    }
}

/// The running world. Dropping it stops `sgardd` and removes the folder
/// (unless kept).
pub struct World {
    tmp: Option<tempfile::TempDir>,
    /// The folder everything of the world is in.
    pub root: PathBuf,
    /// What it was built with.
    pub cfg: Config,
    /// Its machines.
    pub machines: Vec<Machine>,
    server: Option<Child>,
    /// `127.0.0.1:PORT` of sgardd.
    pub addr: String,
    /// Seconds since the epoch given to the next command as `SGARD_NOW`.
    pub clock: i64,
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(mut s) = self.server.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl World {
    /// Builds a world and sets up its repositories (every machine can then
    /// use all three).
    pub fn new(cfg: &Config) -> Result<World, Error> {
        let tmp = tempfile::Builder::new()
            .prefix("sgard-sim-")
            .tempdir_in(&cfg.tmp)
            .map_err(io(&cfg.tmp))?;
        let root = tmp.path().to_path_buf();
        let mut w = World {
            tmp: Some(tmp),
            root: root.clone(),
            cfg: cfg.clone(),
            machines: Vec::new(),
            server: None,
            addr: String::new(),
            clock: EPOCH,
        };
        let keys = root.join("keys");
        fs::create_dir_all(&keys).map_err(io(&keys))?;
        let mut authorized = String::new();
        for i in 0..MACHINES {
            let name = format!("m{}", i + 1);
            let home = root.join(&name);
            fs::create_dir_all(&home).map_err(io(&home))?;
            let key = keys.join(&name);
            w.setup(
                Command::new("ssh-keygen")
                    .args(["-q", "-t", "ed25519", "-N", "", "-C", &name, "-f"])
                    .arg(&key),
                "ssh-keygen",
            )?;
            let pub_path = key.with_extension("pub");
            authorized.push_str(&fs::read_to_string(&pub_path).map_err(io(&pub_path))?);
            w.machines.push(Machine { name, home, key });
        }
        let auth = root.join("authorized_keys");
        fs::write(&auth, authorized).map_err(io(&auth))?;
        w.start_server(&auth)?;
        w.setup_repos()?;
        Ok(w)
    }

    /// Keeps the world's folder after the run (for a look by hand).
    pub fn keep(&mut self) -> PathBuf {
        if let Some(t) = self.tmp.take() {
            let _ = t.keep();
        }
        self.root.clone()
    }

    fn start_server(&mut self, auth: &Path) -> Result<(), Error> {
        let srv_home = self.root.join("srvhome");
        fs::create_dir_all(&srv_home).map_err(io(&srv_home))?;
        let log_path = self.root.join("sgardd.log");
        let log = fs::File::create(&log_path).map_err(io(&log_path))?;
        let mut child = Command::new(&self.cfg.sgardd)
            .arg("--repo")
            .arg(self.root.join("srv"))
            .arg("--init")
            .arg("--authorized-keys")
            .arg(auth)
            .args(["--listen", "127.0.0.1:0"])
            .current_dir(&srv_home)
            .env_clear()
            .env("HOME", &srv_home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SGARD_HOSTNAME", "server")
            .env("NO_COLOR", "1")
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(io(&self.cfg.sgardd))?;
        let Some(stdout) = child.stdout.take() else {
            return Err(Error::Setup("sgardd has no stdout".into()));
        };
        self.server = Some(child);
        let (tx, rx) = mpsc::channel::<String>();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix("sgardd serving on ") {
                        self.addr = rest
                            .split_whitespace()
                            .next()
                            .unwrap_or_default()
                            .to_owned();
                        return Ok(());
                    }
                }
                Err(_) => {
                    let log = fs::read_to_string(&log_path).unwrap_or_default();
                    return Err(Error::Setup(format!("sgardd did not start: {log}")));
                }
            }
        }
    }

    /// Runs a set-up command, which must succeed.
    fn setup(&self, c: &mut Command, what: &str) -> Result<Outcome, Error> {
        let out = self.run(c, None, None)?;
        if out.ok() {
            Ok(out)
        } else {
            Err(Error::Setup(format!("{what}: {}", out.describe())))
        }
    }

    fn setup_sgard(&self, m: usize, repo: Repo, args: &[&str]) -> Result<Outcome, Error> {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        let mut c = self.sgard_command(m, repo, &args);
        self.setup(
            &mut c,
            &format!(
                "{} sgard {} {}",
                self.machines[m].name,
                repo.name(),
                args.join(" ")
            ),
        )
    }

    fn setup_git(&self, m: usize, dir: &Path, args: &[&str]) -> Result<Outcome, Error> {
        let mut c = self.git_command(m, dir, args);
        self.setup(&mut c, &format!("git {}", args.join(" ")))
    }

    fn setup_repos(&mut self) -> Result<(), Error> {
        // The shared folder: made by m1, used by all.
        self.setup_sgard(0, Repo::Usb, &["init"])?;
        self.setup_sgard(0, Repo::Usb, &["encrypt", "init"])?;
        // git: m1 makes the repository in its clone and pushes it; the
        // others clone.
        let origin = self.root.join("origin.git");
        let origin_s = origin.display().to_string();
        self.setup_git(
            0,
            &self.root,
            &["init", "-q", "--bare", "-b", "main", &origin_s],
        )?;
        let dots = self.repo_dir(0, Repo::Git);
        self.setup_sgard(0, Repo::Git, &["init"])?;
        self.setup_sgard(0, Repo::Git, &["encrypt", "init"])?;
        self.setup_git(0, &dots, &["init", "-q", "-b", "main"])?;
        self.setup_git(0, &dots, &["add", "-A"])?;
        self.setup_git(0, &dots, &["commit", "-q", "-m", "sgard repository"])?;
        self.setup_git(0, &dots, &["remote", "add", "origin", &origin_s])?;
        self.setup_git(0, &dots, &["push", "-q", "-u", "origin", "main"])?;
        for m in 1..MACHINES {
            let home = self.machines[m].home.clone();
            self.setup_git(m, &home, &["clone", "-q", &origin_s, "dots"])?;
        }
        // The server: m1 pushes a repository; the others pull it (which
        // makes theirs) and every machine trusts every machine's key.
        let addr = self.addr.clone();
        self.setup_sgard(0, Repo::Srv, &["init"])?;
        self.setup_sgard(0, Repo::Srv, &["encrypt", "init"])?;
        self.setup_sgard(0, Repo::Srv, &["push", "-r", &addr])?;
        for m in 1..MACHINES {
            self.setup_sgard(m, Repo::Srv, &["pull", "-r", &addr])?;
        }
        for m in 0..MACHINES {
            for other in 0..MACHINES {
                if other != m {
                    let p = self.machines[other]
                        .key
                        .with_extension("pub")
                        .display()
                        .to_string();
                    self.setup_sgard(m, Repo::Srv, &["trust", "add", &p])?;
                }
            }
        }
        Ok(())
    }

    /// The folder of machine `m`'s repository `repo`.
    pub fn repo_dir(&self, m: usize, repo: Repo) -> PathBuf {
        match repo {
            Repo::Usb => self.root.join("usb"),
            Repo::Git => self.machines[m].home.join("dots"),
            Repo::Srv => self.machines[m].home.join(".sgard"),
        }
    }

    /// Machine `m`'s sgard state folder (XDG defaults under its home).
    pub fn state_dir(&self, m: usize) -> PathBuf {
        self.machines[m].home.join(".local/state/sgard")
    }

    /// Where machine `m`'s scripts log their runs.
    pub fn runs_file(&self, m: usize) -> PathBuf {
        self.root.join(format!(
            "{}{}",
            self.machines[m].name,
            crate::content::RUNS_SUFFIX
        ))
    }

    /// The environment of machine `m`: its home (XDG folders left to their
    /// defaults under it), host name, clock, passphrase and key.
    fn machine_env(&self, m: usize, c: &mut Command) {
        let mach = &self.machines[m];
        let now = chrono_like(self.clock);
        c.current_dir(&mach.home)
            .env_clear()
            .env("HOME", &mach.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("USER", &mach.name)
            .env("LOGNAME", &mach.name)
            .env("SGARD_NOW", now)
            .env("SGARD_HOSTNAME", &mach.name)
            .env("SGARD_PASSPHRASE", PASSPHRASE)
            .env("SGARD_TEST_ARGON2", "1")
            .env("SGARD_SSH_KEY", &mach.key)
            .env("SSH_AUTH_SOCK", "")
            .env("NO_COLOR", "1")
            .env("LC_ALL", "C")
            .env("EDITOR", "true")
            .env("GIT_AUTHOR_NAME", &mach.name)
            .env("GIT_AUTHOR_EMAIL", format!("{}@sim.invalid", mach.name))
            .env("GIT_COMMITTER_NAME", &mach.name)
            .env("GIT_COMMITTER_EMAIL", format!("{}@sim.invalid", mach.name))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0");
    }

    /// `sgard [--repo DIR] ARGS` as machine `m`.
    pub fn sgard_command(&self, m: usize, repo: Repo, args: &[String]) -> Command {
        let mut c = Command::new(&self.cfg.sgard);
        self.machine_env(m, &mut c);
        if repo != Repo::Srv {
            let mut r = OsString::from("--repo=");
            r.push(self.repo_dir(m, repo));
            c.arg(r);
        }
        // `@server` stands for this world's sgardd (its port differs from
        // world to world, and a saved case must replay on any).
        c.args(args.iter().map(|a| {
            if a == SERVER {
                self.addr.as_str()
            } else {
                a.as_str()
            }
        }));
        c
    }

    /// `git ARGS` in `dir` as machine `m`.
    pub fn git_command(&self, m: usize, dir: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("git");
        self.machine_env(m, &mut c);
        c.current_dir(dir).args(args);
        c
    }

    /// Runs `c` with `stdin` (one answer a line; `None` or empty: closed),
    /// and `fault` done to it; at most [`LIMIT`].
    pub fn run(
        &self,
        c: &mut Command,
        stdin: Option<&[String]>,
        fault: Option<&Fault>,
    ) -> Result<Outcome, Error> {
        let out_path = self.root.join(".out");
        let err_path = self.root.join(".err");
        let out = fs::File::create(&out_path).map_err(io(&out_path))?;
        let err = fs::File::create(&err_path).map_err(io(&err_path))?;
        let traced = match fault {
            Some(Fault::Enospc { call, nth }) => {
                Some((syscalls(call), format!("error=ENOSPC:when={nth}+")))
            }
            Some(Fault::KillAt { call, nth }) => {
                Some((syscalls(call), format!("signal=KILL:when={nth}")))
            }
            _ => None,
        };
        let mut cmd = match traced {
            Some((calls, what)) => {
                let mut s = Command::new("strace");
                s.args(["-f", "-qq", "-o", "/dev/null", "-e"])
                    .arg(format!("trace={calls}"))
                    .arg("-e")
                    .arg(format!("inject={calls}:{what}"))
                    .arg(c.get_program())
                    .args(c.get_args())
                    .env_clear();
                for (k, v) in c.get_envs() {
                    if let Some(v) = v {
                        s.env(k, v);
                    }
                }
                if let Some(d) = c.get_current_dir() {
                    s.current_dir(d);
                }
                s
            }
            _ => std::mem::replace(c, Command::new("true")),
        };
        let answers = stdin.filter(|a| !a.is_empty());
        cmd.stdin(if answers.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(out)
        .stderr(err);
        let mut child = cmd.spawn().map_err(io(Path::new(cmd.get_program())))?;
        if let (Some(a), Some(mut pipe)) = (answers, child.stdin.take()) {
            let mut text = a.join("\n");
            text.push('\n');
            // A command that reads no answer may be gone already.
            let _ = pipe.write_all(text.as_bytes());
        }
        let started = Instant::now();
        let mut signalled = false;
        let mut hung = false;
        let status = loop {
            if let Some(s) = child.try_wait().map_err(io(Path::new("child")))? {
                break s;
            }
            let waited = started.elapsed();
            if !signalled {
                let at = match fault {
                    Some(Fault::Int(ms)) => Some((
                        Duration::from_millis(u64::from(*ms)),
                        rustix::process::Signal::INT,
                    )),
                    Some(Fault::Kill(ms)) => Some((
                        Duration::from_millis(u64::from(*ms)),
                        rustix::process::Signal::KILL,
                    )),
                    _ => None,
                };
                if let Some((after, sig)) = at
                    && waited >= after
                {
                    signal(&child, sig);
                    signalled = true;
                }
            }
            if waited > LIMIT {
                hung = true;
                let _ = child.kill();
            }
            thread::sleep(Duration::from_millis(2));
        };
        use std::os::unix::process::ExitStatusExt;
        Ok(Outcome {
            code: status.code(),
            signal: status.signal(),
            stdout: String::from_utf8_lossy(&fs::read(&out_path).unwrap_or_default()).into_owned(),
            stderr: String::from_utf8_lossy(&fs::read(&err_path).unwrap_or_default()).into_owned(),
            hung,
        })
    }
}

/// The system calls a fault's name stands for (`rename` is every form of
/// it, as libc and rustix use one or another).
fn syscalls(call: &str) -> String {
    match call {
        "rename" => "rename,renameat,renameat2".to_owned(),
        "unlink" => "unlink,unlinkat".to_owned(),
        c => c.to_owned(),
    }
}

fn signal(child: &Child, sig: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// `SECS` as `YYYY-MM-DDTHH:MM:SSZ`, the form `SGARD_NOW` takes.
pub fn chrono_like(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_reads_as_a_date() {
        assert_eq!(super::chrono_like(super::EPOCH), "2026-03-23T12:00:00Z");
        assert_eq!(super::chrono_like(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::chrono_like(951_782_400), "2000-02-29T00:00:00Z");
    }
}
