//! `TestEnv`: a hermetic HOME, pinned time and host name, and helpers to run
//! the `sgard` binary and inspect the repository.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// The fixed "now" of every command unless a test changes it.
pub const NOW: &str = "2026-03-23T12:00:00Z";

/// A throwaway home folder with its own repository path.
pub struct TestEnv {
    dir: tempfile::TempDir,
    pub home: PathBuf,
    pub now: String,
}

/// What one run of sgard produced.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Panics with the whole output unless the exit code is `code`.
    #[track_caller]
    pub fn code(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "unexpected exit code; {self:#?}");
        self
    }

    /// Panics unless the run succeeded.
    #[track_caller]
    pub fn ok(&self) -> &Self {
        self.code(0)
    }

    /// Panics unless stdout contains `s`.
    #[track_caller]
    pub fn stdout_has(&self, s: &str) -> &Self {
        assert!(self.stdout.contains(s), "stdout lacks {s:?}; {self:#?}");
        self
    }

    /// Panics unless stderr contains `s`.
    #[track_caller]
    pub fn stderr_has(&self, s: &str) -> &Self {
        assert!(self.stderr.contains(s), "stderr lacks {s:?}; {self:#?}");
        self
    }
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl TestEnv {
    /// A fresh, empty HOME (no repository yet).
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        fs::create_dir(&home).unwrap();
        TestEnv {
            dir,
            home,
            now: NOW.to_owned(),
        }
    }

    /// A fresh HOME with `sgard init` already run.
    pub fn init() -> Self {
        let t = Self::new();
        t.sgard(["init"]).ok();
        t
    }

    /// A repository tracking one file, `rel` under HOME, written with
    /// `content` and added (the start of most single-file tests).
    pub fn tracking(rel: &str, content: impl AsRef<[u8]>) -> Self {
        let t = Self::init();
        t.write(rel, content);
        t.sgard(["add", rel]).ok();
        t
    }

    /// A scratch folder outside HOME (same temp dir).
    pub fn outside(&self) -> PathBuf {
        let p = self.dir.path().join("outside");
        fs::create_dir_all(&p).unwrap();
        p
    }

    /// The default repository, `~/.sgard`.
    pub fn repo(&self) -> PathBuf {
        self.home.join(".sgard")
    }

    /// `~/<rel>`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.home.join(rel)
    }

    /// The binary under test.
    pub fn bin() -> PathBuf {
        PathBuf::from(env!("CARGO_BIN_EXE_sgard"))
    }

    /// A `Command` for sgard with HOME, time and host name pinned, run in HOME.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut c = Command::new(Self::bin());
        c.args(args)
            .current_dir(&self.home)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SGARD_NOW", &self.now)
            .env("SGARD_HOSTNAME", "testhost")
            .env("XDG_STATE_HOME", self.home.join(".state"))
            .env("XDG_CACHE_HOME", self.home.join(".cache"))
            .env("NO_COLOR", "1")
            .env("USER", "tester")
            .env("LC_ALL", "C");
        c
    }

    /// Runs sgard with stdin closed (every prompt answers "no").
    pub fn sgard<I, S>(&self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .into()
    }

    /// Runs sgard feeding `input` on stdin.
    pub fn sgard_stdin<I, S>(&self, args: I, input: &str) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A command that never reads stdin may exit before we finish
        // writing: a broken pipe then is not a failure of the test.
        if let Err(e) = child.stdin.take().unwrap().write_all(input.as_bytes()) {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
        }
        child.wait_with_output().unwrap().into()
    }

    /// Writes `~/<rel>` (creating parents).
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, content).unwrap();
        p
    }

    /// Reads `~/<rel>`.
    pub fn read(&self, rel: &str) -> Vec<u8> {
        fs::read(self.path(rel)).unwrap()
    }

    /// The manifest text.
    pub fn manifest(&self) -> String {
        fs::read_to_string(self.repo().join("manifest.yaml")).unwrap()
    }

    /// This machine's state folder for the repository at `repo` (its base
    /// and tags), keyed by the repository's `repo-id`.
    pub fn state_of(&self, repo: &Path) -> PathBuf {
        let id = fs::read_to_string(repo.join("repo-id")).unwrap();
        self.home.join(".state/sgard/repos").join(id.trim())
    }

    /// This machine's index of the default repository.
    pub fn index(&self) -> PathBuf {
        self.state().join("index")
    }

    /// [`TestEnv::state_of`] the default repository.
    pub fn state(&self) -> PathBuf {
        self.state_of(&self.repo())
    }

    /// Where the blob of `hash` lives.
    pub fn blob_path(&self, hash: &str) -> PathBuf {
        self.repo()
            .join("blobs")
            .join(&hash[0..2])
            .join(&hash[2..4])
            .join(hash)
    }

    /// Sets the permission bits of `~/<rel>`.
    pub fn chmod(&self, rel: &str, mode: u32) {
        fs::set_permissions(self.path(rel), fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// SHA-256 hex of bytes.
pub fn sha(data: impl AsRef<[u8]>) -> String {
    Sha256::digest(data.as_ref())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Permission bits of a path (not following symlinks).
pub fn mode_of(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Sets a file's mtime to `secs` since the epoch.
pub fn set_mtime(p: &Path, secs: i64) {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(secs).unwrap());
    let f = fs::File::options().write(true).open(p).unwrap();
    f.set_modified(t).unwrap();
}

/// Unix seconds of [`NOW`].
pub fn now_secs() -> i64 {
    // 2026-03-23T12:00:00Z
    1_774_267_200
}

/// Waits for `child` (stdout and stderr piped), draining both; a child
/// still running after `limit` is killed and its stderr so far returned as
/// the error.
pub fn wait_limited(mut child: Child, limit: Duration) -> Result<Run, String> {
    let drain = |r: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(err.join().unwrap_or_default());
        }
        thread::sleep(Duration::from_millis(10));
    };
    Ok(Run {
        code: status.code().unwrap_or(-1),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    })
}

/// Whether `strace` can trace here (installed, and ptrace allowed).
/// Spawns `c` stopped at the test hook `point` (`SGARD_TEST_WAIT_AT`) and
/// returns once it got there; writing `gate` lets it go on.
pub fn spawn_held_at(c: &mut Command, point: &str, gate: &Path) -> Child {
    let child = c
        .env("SGARD_TEST_WAIT_AT", format!("{point}:{}", gate.display()))
        .spawn()
        .unwrap();
    let mut reached = gate.as_os_str().to_owned();
    reached.push(".reached");
    let until = Instant::now() + Duration::from_secs(30);
    while !Path::new(&reached).exists() {
        assert!(Instant::now() < until, "the command never got to {point}");
        thread::sleep(Duration::from_millis(5));
    }
    child
}

pub fn strace_works() -> bool {
    Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `command` under `strace -f -qq` (and `options`), tracing
/// `syscalls`, with every such call of `fault` (`(call, errno, n)`) failing
/// from its n-th on in each thread, if any. Returns the run and the log.
pub fn traced(
    command: &Command,
    options: &[&str],
    syscalls: &str,
    fault: Option<(&str, &str, u32)>,
) -> (Run, String) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut c = Command::new("strace");
    c.args(["-f", "-qq"])
        .args(options)
        .args(["-e", &format!("trace={syscalls}")])
        .arg("-o")
        .arg(log.path());
    if let Some((call, errno, n)) = fault {
        c.args(["-e", &format!("inject={call}:error={errno}:when={n}+")]);
    }
    c.arg(command.get_program())
        .args(command.get_args())
        .env_clear();
    for (k, v) in command.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(d) = command.get_current_dir() {
        c.current_dir(d);
    }
    let out = c.stdin(Stdio::null()).output().unwrap();
    (out.into(), fs::read_to_string(log.path()).unwrap())
}

/// Panics unless `r`, a run with an injected fault (`what`), succeeded or
/// failed cleanly: exit 1 or 3, saying `sgard: error:`, with no panic.
#[track_caller]
pub fn assert_fails_cleanly(r: &Run, what: &str) {
    assert!(
        matches!(r.code, 0 | 1 | 3),
        "{what}: exit {} (a crash?); {r:#?}",
        r.code
    );
    if r.code != 0 {
        assert!(r.stderr.contains("sgard: error:"), "{what}: {r:#?}");
        assert!(!r.stderr.contains("panicked"), "{what}: {r:#?}");
    }
}

/// Runs `command` under `strace` so that the `syscall` fails with `errno`
/// from its `nth` call on in each thread (`None`: never). Returns the run and,
/// for each of `syscalls` (comma-separated), the most calls one thread made.
/// (strace counts each system call and each thread on its own, so faults go
/// into one system call at a time.)
pub fn with_faults(
    command: &Command,
    syscalls: &str,
    fault: Option<(&str, &str, u32)>,
) -> (Run, BTreeMap<String, u32>) {
    let (out, text) = traced(command, &[], syscalls, fault);
    // strace counts calls per thread (`when=` too): per call, the most any
    // one thread made.
    let mut per_thread: BTreeMap<(String, String), u32> = BTreeMap::new();
    for l in text.lines() {
        // `TID name(args…) = result`, or `TID <... name resumed>…`.
        let Some((tid, rest)) = l.split_once(' ').map(|(t, r)| (t, r.trim_start())) else {
            continue;
        };
        if rest.starts_with('<') || rest.starts_with("+++") || rest.starts_with("---") {
            continue;
        }
        if let Some((name, _)) = rest.split_once('(') {
            *per_thread
                .entry((name.to_owned(), tid.to_owned()))
                .or_insert(0) += 1;
        }
    }
    let mut calls: BTreeMap<String, u32> = BTreeMap::new();
    for ((name, _), n) in per_thread {
        let m = calls.entry(name).or_insert(0);
        *m = (*m).max(n);
    }
    (out, calls)
}

/// This machine's index of a repository (`<state>/index`), taken apart as
/// far as the tests need: everything before the stat cache, and the stat
/// cache's entries (path, the 44 bytes of stat data, the 32-byte hash).
/// The layout is the one ARCHITECTURE.md describes; a test reading it
/// fails if it changes unnoticed.
pub struct IndexFile {
    pub path: PathBuf,
    /// From the start of the body up to the stat cache's count.
    pub head: Vec<u8>,
    pub stat: Vec<(String, [u8; 44], [u8; 32])>,
}

impl IndexFile {
    pub const MAGIC: &'static [u8] = b"sgard-index\n";
    /// The layout version this reader knows.
    pub const VERSION: u32 = 2;

    pub fn read(path: &Path) -> IndexFile {
        let buf = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(&buf[..12], Self::MAGIC, "not an index");
        assert_eq!(
            u32::from_le_bytes(buf[12..16].try_into().unwrap()),
            Self::VERSION
        );
        let sum = u32::from_le_bytes(buf[16..20].try_into().unwrap());
        let body = &buf[20..];
        assert_eq!(crc32fast::hash(body), sum, "the index's checksum");
        let mut pos = 0;
        let u32_at = |pos: &mut usize| {
            let v = u32::from_le_bytes(body[*pos..*pos + 4].try_into().unwrap());
            *pos += 4;
            v as usize
        };
        // The sections caching the manifest, the log and the local log: a
        // flag, then a u64 length and the bytes.
        for _ in 0..3 {
            if body[pos] == 1 {
                let n = u64::from_le_bytes(body[pos + 1..pos + 9].try_into().unwrap()) as usize;
                pos += 9 + n;
            } else {
                pos += 1;
            }
        }
        // The base (a flag: none kept yet, or a count), each record a
        // path, kind, flags, then what the flags say.
        let kept = body[pos] == 1;
        pos += 1;
        for _ in 0..if kept { u32_at(&mut pos) } else { 0 } {
            let n = u32_at(&mut pos);
            pos += n + 1;
            let flags = body[pos];
            pos += 1;
            if flags & 1 != 0 {
                pos += 4;
            }
            if flags & 2 != 0 {
                let n = u32_at(&mut pos);
                pos += n;
            }
            if flags & 4 != 0 {
                pos += 32;
            }
            if flags & 8 != 0 {
                pos += 32;
            }
        }
        let head = body[..pos].to_vec();
        let mut stat = Vec::new();
        for _ in 0..u32_at(&mut pos) {
            let n = u32_at(&mut pos);
            let p = String::from_utf8(body[pos..pos + n].to_vec()).unwrap();
            pos += n;
            let st: [u8; 44] = body[pos..pos + 44].try_into().unwrap();
            let h: [u8; 32] = body[pos + 44..pos + 76].try_into().unwrap();
            pos += 76;
            stat.push((p, st, h));
        }
        assert_eq!(pos, body.len(), "bytes after the stat cache");
        IndexFile {
            path: path.to_path_buf(),
            head,
            stat,
        }
    }

    /// The stat data the index records for `md`.
    pub fn stat_of(md: &fs::Metadata) -> [u8; 44] {
        let mut v = Vec::with_capacity(44);
        v.extend_from_slice(&md.dev().to_le_bytes());
        v.extend_from_slice(&md.ino().to_le_bytes());
        v.extend_from_slice(&md.size().to_le_bytes());
        v.extend_from_slice(&md.mode().to_le_bytes());
        let ns = |s: i64, n: i64| s * 1_000_000_000 + n;
        v.extend_from_slice(&ns(md.mtime(), md.mtime_nsec()).to_le_bytes());
        v.extend_from_slice(&ns(md.ctime(), md.ctime_nsec()).to_le_bytes());
        v.try_into().unwrap()
    }

    /// Claims that `path` (a `~/…` path) with `disk`'s current stat data
    /// hashes to `hash_hex`, replacing any entry for it; writes the file
    /// back with a correct checksum.
    pub fn plant(&mut self, path: &str, disk: &Path, hash_hex: &str) {
        let md = fs::symlink_metadata(disk).unwrap();
        let mut h = [0u8; 32];
        for (i, b) in h.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hash_hex[2 * i..2 * i + 2], 16).unwrap();
        }
        self.stat.retain(|(p, _, _)| p != path);
        self.stat.push((path.to_owned(), Self::stat_of(&md), h));
        // The index keeps its records in path order (anything else is not
        // an index of sgard's).
        self.stat.sort_by(|a, b| a.0.cmp(&b.0));
        self.write();
    }

    pub fn has_stat(&self, path: &str) -> bool {
        self.stat.iter().any(|(p, _, _)| p == path)
    }

    pub fn write(&self) {
        let mut body = self.head.clone();
        body.extend_from_slice(&(self.stat.len() as u32).to_le_bytes());
        for (p, st, h) in &self.stat {
            body.extend_from_slice(&(p.len() as u32).to_le_bytes());
            body.extend_from_slice(p.as_bytes());
            body.extend_from_slice(st);
            body.extend_from_slice(h);
        }
        let mut out = Self::MAGIC.to_vec();
        out.extend_from_slice(&Self::VERSION.to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        fs::write(&self.path, out).unwrap();
    }
}

/// Gives `to` exactly the environment and working folder of `from`.
pub fn copy_env(from: &Command, to: &mut Command) {
    to.env_clear();
    for (k, v) in from.get_envs() {
        if let Some(v) = v {
            to.env(k, v);
        }
    }
    if let Some(d) = from.get_current_dir() {
        to.current_dir(d);
    }
}

/// Whether an executable named `name` is on PATH.
pub fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            fs::metadata(d.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Runs `sgard <args>` (`args` as a shell would split them) under a
/// pseudo-terminal (util-linux `script`) with the environment and working
/// folder of `c`, typing `input`; stdin stays open until sgard ends (so
/// `script` never sees EOF early). What the terminal showed, stdout and
/// stderr together, is the run's stdout.
pub fn pty_run(c: &Command, args: &str, input: &str) -> Run {
    let shown = format!("'{}' {args}", TestEnv::bin().display());
    let mut s = Command::new("script");
    s.args(["-qec", &shown, "/dev/null"]);
    copy_env(c, &mut s);
    let mut child = s
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("sgard under a pty did not finish");
        }
        thread::sleep(Duration::from_millis(20));
    }
    drop(stdin);
    child.wait_with_output().unwrap().into()
}

/// The `sgardd` binary. It belongs to the `sgard-server` package, so Cargo
/// builds it beside `sgard` when the workspace is tested
/// (`cargo test --workspace`), but names it only to that package's tests.
pub(crate) fn sgardd_bin() -> PathBuf {
    static CHECKED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CHECKED
        .get_or_init(|| {
            let bin = Path::new(env!("CARGO_BIN_EXE_sgard"))
                .with_file_name(format!("sgardd{}", std::env::consts::EXE_SUFFIX));
            let built = fs::metadata(&bin).and_then(|m| m.modified());
            let Ok(built) = built else {
                panic!(
                    "{} is missing: run the tests with `cargo test --workspace` (sgardd is built \
                     by the sgard-server package)",
                    bin.display()
                );
            };
            // A `cargo test -p sgard` leaves an older sgardd in place: any
            // source of it newer than the binary means the tests would run
            // yesterday's server.
            if let Some(src) = newer_source(built) {
                panic!(
                    "{} is older than {}: run the tests with `cargo test --workspace`, which \
                     builds sgardd again",
                    bin.display(),
                    src.display()
                );
            }
            bin
        })
        .clone()
}

/// A source file of sgardd (its package and the workspace crates it builds
/// from) changed after `than`, if any.
fn newer_source(than: std::time::SystemTime) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut todo: Vec<PathBuf> = ["server", "proto", "garden", "manifest", "store", "depot"]
        .iter()
        .flat_map(|c| [root.join(c).join("src"), root.join(c).join("Cargo.toml")])
        .collect();
    todo.push(root.join("Cargo.lock"));
    while let Some(p) = todo.pop() {
        let Ok(md) = fs::symlink_metadata(&p) else {
            continue;
        };
        if md.is_dir() {
            todo.extend(
                fs::read_dir(&p)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path()),
            );
        } else if md.modified().is_ok_and(|m| m > than) {
            return Some(p);
        }
    }
    None
}
