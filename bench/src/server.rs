//! The `server` scenario: many client machines pushing and pulling against
//! `sgardd` at once, on an object store (two replicas on one moto bucket)
//! and on a local folder (one `sgardd`), with the same clients and work.
//!
//! For each store:
//!
//! 1. **Main workload.** `--clients` machines (50 by default), each with a
//!    garden of its own (its key carries `garden="cNN"` in
//!    `authorized_keys`), so the numbers measure the server and not merge
//!    contention. Each garden has two machines: A, which edits, checkpoints
//!    and pushes, and B, which pulls into a HOME of its own. Untimed setup:
//!    A writes a dotfiles tree of 40 files (~250 KB, different bytes for
//!    every client) and runs `sgard add`. Then all clients at once:
//!    * phase *first*: A's first push (the whole tree), B's first pull
//!      (into an empty HOME);
//!    * phase *rounds*, after every client finished the first phase:
//!      `--rounds` times (5 by default) A appends a line to 3 files,
//!      `sgard checkpoint`, `sgard push`; B `sgard pull`.
//!
//!    On the object store, client *i*'s A talks to replica *i* mod 2 and
//!    its B to the other one, so every pull reads what the other replica
//!    wrote. Every run is timed from spawn to exit.
//! 2. **Contention.** `--contenders` machines (10 by default) in ONE garden
//!    (`team`), each trusting the others' keys. The first pushes a small
//!    tree and the others pull it; then each adds a file of its own and
//!    all push at once: one wins, the rest are refused (exit 4, expected).
//!    The refused ones pull (a merge) and push again, all at once, until
//!    every push went through. A fresh machine then pulls and checks that
//!    every machine's file is there with its bytes: none lost.
//! 3. **Verification** (untimed): every B's HOME must match its A's, file
//!    for file, byte for byte and mode for mode.
//!
//! The tables give, per phase and operation: runs, errors (any exit but 0;
//! in the contention scenario exit 4 is counted apart), throughput (runs ÷
//! the phase's span from first spawn to last exit), and the p50, p99 and
//! max latency of the runs that succeeded (nearest rank). The run exits
//! non-zero after printing when anything failed.

mod daemon;
mod machine;
mod stats;

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::fs;
use std::io::Read as _;
use std::io::Write as _;
use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use clap::ValueEnum;
use sgard_depot::moto::MotoServer;

use crate::tree::{self, TreeSpec};
use crate::{Ctx, compare_trees};
use daemon::Daemon;
use machine::{Machine, keygen, pub_of};
use stats::{Op, Record};

/// The bucket of the object-store run (moto's, made by the harness).
const BUCKET: &str = "sgard-bench";
/// Where the gardens are in it.
const S3_STORE: &str = "s3://sgard-bench/gardens";
/// Files each round edits on each machine A.
const EDITS_PER_ROUND: usize = 3;

/// Which stores to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Stores {
    /// Two sgardd replicas on one bucket of a moto server
    S3,
    /// One sgardd on a local folder
    Dir,
    /// s3, then dir
    Both,
}

/// The options of the scenario.
pub struct Opts {
    pub clients: usize,
    pub rounds: usize,
    pub contenders: usize,
    pub stores: Stores,
    /// `--sgardd`, or `sgardd` next to the sgard binary.
    pub sgardd: Option<PathBuf>,
    /// `sgardd --max-streams N` (else sgardd's default).
    pub max_streams: Option<usize>,
}

/// One store's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    S3,
    Dir,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::S3 => "s3 (moto, 2 replicas)",
            Kind::Dir => "dir (1 sgardd)",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Kind::S3 => "s3",
            Kind::Dir => "dir",
        }
    }
}

/// The keys of a run: per client an A and a B key, and the contenders'.
struct Keys {
    a: Vec<PathBuf>,
    b: Vec<PathBuf>,
    team: Vec<PathBuf>,
    /// The machine that checks the contention result (garden `team`).
    checker: PathBuf,
}

/// What one store's run measured.
struct StoreReport {
    kind: Kind,
    first: Vec<Record>,
    rounds: Vec<Record>,
    contention: Contention,
    verified: Verified,
    /// The machine's CPU use in each phase of the main workload.
    busy: [Option<f64>; 2],
    /// The sgardd processes' CPU time (summed) up to the end of the main
    /// workload.
    main_cpu: Option<Duration>,
    /// moto's time per request, one at a time (s3 only).
    moto_request: Option<Duration>,
    /// Per sgardd: CPU time and peak RSS (KiB), read just before it stops.
    servers: Vec<Option<(Duration, u64)>>,
    /// `/proc/loadavg` before and after.
    load: (String, String),
}

/// The check that every B's HOME matches its A's.
#[derive(Default)]
struct Verified {
    /// Clients whose every timed run succeeded and whose B matched as pulled.
    as_pulled: usize,
    /// Clients with a failed run, which matched after an untimed push by A
    /// and pull by B.
    after_retry: usize,
    /// Files compared in all.
    files: usize,
    /// Why a B did not match.
    bad: Vec<String>,
}

/// The contention scenario's outcome.
#[derive(Default)]
struct Contention {
    /// The first wave: every machine pushing from the same head.
    first_won: usize,
    first_refused: usize,
    /// Pull-and-push rounds after the first wave until all were in.
    rounds: usize,
    /// Exit-4 refusals over the whole scenario.
    refusals: usize,
    /// Every push and pull (refused pushes included).
    records: Vec<Record>,
    /// Machines whose file the final pull did not have, or had wrong.
    lost: Vec<String>,
    /// Machines still refused when the round limit ran out.
    unsettled: usize,
}

impl Contention {
    /// Runs that failed with anything but a push's refusal.
    fn errors(&self) -> impl Iterator<Item = &Record> {
        self.records
            .iter()
            .filter(|r| !r.ok() && (r.op != Op::Push || r.code != Some(4)))
    }
}

/// Runs the scenario.
pub fn run(ctx: &Ctx, o: &Opts) -> Result<()> {
    if o.clients == 0 || o.contenders < 2 {
        bail!("--clients must be at least 1 and --contenders at least 2");
    }
    let sgardd = sgardd_binary(&ctx.sgard, o.sgardd.as_deref())?;
    let kinds = match o.stores {
        Stores::S3 => vec![Kind::S3],
        Stores::Dir => vec![Kind::Dir],
        Stores::Both => vec![Kind::S3, Kind::Dir],
    };
    println!("sgardd:  {}", sgardd.display());
    if kinds.contains(&Kind::S3) {
        match MotoServer::executable()? {
            Some(p) => println!("moto:    {} (requests served one at a time)", p.display()),
            None => bail!(
                "the s3 run needs moto_server (PyPI moto[server]) on PATH or in ${}; or pass --store dir",
                sgard_depot::moto::ENV_VAR
            ),
        }
    }
    println!(
        "work:    {} clients x (first push + first pull + {} round(s) of edit {EDITS_PER_ROUND} files, checkpoint, push, pull); {} contenders in one garden",
        o.clients, o.rounds, o.contenders
    );

    let root = tempfile::Builder::new()
        .prefix("sgard-bench-server-")
        .tempdir_in(&ctx.dir)
        .with_context(|| format!("creating a temp folder in {}", ctx.dir.display()))?;
    let keys = make_keys(root.path(), o)?;
    let auth = root.path().join("authorized_keys");
    write_authorized_keys(&auth, &keys)?;

    let mut reports = Vec::new();
    for kind in kinds {
        reports.push(run_store(ctx, o, kind, root.path(), &sgardd, &auth, &keys)?);
    }

    println!();
    print!("{}", report(&reports, o));
    let errors = errors(&reports);
    if !errors.is_empty() {
        print!("\n{errors}");
    }

    if ctx.keep {
        let kept = root.keep();
        println!("\nkept {}", kept.display());
    }
    let failures = failures(&reports);
    if !failures.is_empty() {
        bail!(
            "what was pushed did not all arrive:\n{}",
            failures.join("\n")
        );
    }
    Ok(())
}

/// `--sgardd`, or `sgardd` in the sgard binary's folder.
fn sgardd_binary(sgard: &Path, explicit: Option<&Path>) -> Result<PathBuf> {
    let p = match explicit {
        Some(p) => std::path::absolute(p).context("resolving --sgardd")?,
        None => sgard
            .parent()
            .context("the sgard binary has no parent folder")?
            .join(format!("sgardd{}", std::env::consts::EXE_SUFFIX)),
    };
    if !p.is_file() {
        bail!(
            "no sgardd binary at {}: run `cargo build --release -p sgard -p sgard-server` first, or pass --sgardd PATH",
            p.display()
        );
    }
    Ok(p)
}

fn make_keys(root: &Path, o: &Opts) -> Result<Keys> {
    let dir = root.join("keys");
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut keys = Keys {
        a: Vec::new(),
        b: Vec::new(),
        team: Vec::new(),
        checker: keygen(&dir, "t-check")?,
    };
    for i in 0..o.clients {
        keys.a.push(keygen(&dir, &format!("c{i:02}-a"))?);
        keys.b.push(keygen(&dir, &format!("c{i:02}-b"))?);
    }
    for j in 0..o.contenders {
        keys.team.push(keygen(&dir, &format!("t{j:02}"))?);
    }
    Ok(keys)
}

/// Client *i*'s two keys get the garden `cNN`; the contenders' and the
/// checker's the garden `team`.
fn write_authorized_keys(path: &Path, keys: &Keys) -> Result<()> {
    let line = |key: &Path, garden: &str| -> Result<String> {
        let public = pub_of(key);
        let text =
            fs::read_to_string(&public).with_context(|| format!("reading {}", public.display()))?;
        Ok(format!("garden=\"{garden}\" {}\n", text.trim()))
    };
    let mut s = String::new();
    for (i, (a, b)) in keys.a.iter().zip(&keys.b).enumerate() {
        s.push_str(&line(a, &format!("c{i:02}"))?);
        s.push_str(&line(b, &format!("c{i:02}"))?);
    }
    for k in keys.team.iter().chain([&keys.checker]) {
        s.push_str(&line(k, "team")?);
    }
    fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

/// The servers of one store. Fields drop in declaration order: the
/// replicas stop before moto does.
struct Servers {
    daemons: Vec<Daemon>,
    moto_request: Option<Duration>,
    _moto: Option<MotoServer>,
}

/// PUTs the calibration sends to moto.
const MOTO_CALIBRATION: usize = 200;

/// moto's time per request: `n` unsigned PUTs of 4 KiB objects (under
/// `calibrate/`, outside the gardens' prefix), one at a time, each on a
/// connection of its own.
fn moto_request_time(port: u16, n: usize) -> Result<Duration> {
    let body = vec![b'x'; 4096];
    let started = Instant::now();
    for i in 0..n {
        let mut s =
            TcpStream::connect((Ipv4Addr::LOCALHOST, port)).context("connecting to moto")?;
        write!(
            s,
            "PUT /{BUCKET}/calibrate/{i} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )?;
        s.write_all(&body)?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer)
            .context("reading moto's answer")?;
        let status = answer.split(|&b| b == b'\n').next().unwrap_or_default();
        if !String::from_utf8_lossy(status).contains(" 200") {
            bail!(
                "moto answered a calibration PUT with {:?}",
                String::from_utf8_lossy(status).trim_end()
            );
        }
    }
    Ok(started.elapsed() / u32::try_from(n.max(1))?)
}

/// The machine's busy and total CPU time so far (`/proc/stat`, all CPUs,
/// in clock ticks).
fn cpu_ticks() -> Option<(u64, u64)> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest is in user).
    let idle = v.get(3)? + v.get(4)?;
    let busy: u64 = v.iter().take(8).sum::<u64>() - idle;
    Some((busy, busy + idle))
}

/// Cores busy on average between two [`cpu_ticks`] samples.
fn cores_busy(a: Option<(u64, u64)>, b: Option<(u64, u64)>) -> Option<f64> {
    let ((b0, t0), (b1, t1)) = (a?, b?);
    let cores = thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let total = t1.checked_sub(t0).filter(|&t| t > 0)?;
    Some(b1.saturating_sub(b0) as f64 / total as f64 * cores as f64)
}

fn start_servers(
    kind: Kind,
    dir: &Path,
    sgardd: &Path,
    auth: &Path,
    max_streams: Option<usize>,
) -> Result<Servers> {
    let keys_arg = |mut a: Vec<OsString>| {
        a.push("--authorized-keys".into());
        a.push(auth.into());
        if let Some(n) = max_streams {
            a.push("--max-streams".into());
            a.push(n.to_string().into());
        }
        a
    };
    match kind {
        Kind::Dir => {
            let args = keys_arg(vec![
                "--store".into(),
                dir.join("store").into(),
                "--init".into(),
            ]);
            let d = Daemon::start(
                sgardd,
                &dir.join("srvhome"),
                &args,
                &[],
                &dir.join("sgardd.log"),
            )?;
            Ok(Servers {
                daemons: vec![d],
                moto_request: None,
                _moto: None,
            })
        }
        Kind::S3 => {
            let moto = MotoServer::start()?.ok_or_else(|| {
                anyhow!("moto_server not found (PATH or ${})", "SGARD_MOTO_SERVER")
            })?;
            moto.create_bucket(BUCKET)
                .context("creating the bucket on moto")?;
            let per_request = moto_request_time(moto.port(), MOTO_CALIBRATION)?;
            println!(
                "[s3] moto: {MOTO_CALIBRATION} PUTs of 4 KiB one at a time, {:.2} ms each ({:.0} requests/s)",
                per_request.as_secs_f64() * 1e3,
                1.0 / per_request.as_secs_f64().max(1e-9)
            );
            let e = moto.aws_env();
            let env: Vec<(String, String)> = [
                ("AWS_ACCESS_KEY_ID", e.access_key_id),
                ("AWS_SECRET_ACCESS_KEY", e.secret_access_key),
                ("AWS_REGION", e.region),
                ("AWS_ENDPOINT_URL", e.endpoint),
                ("AWS_ALLOW_HTTP", e.allow_http),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
            .collect();
            let mut daemons = Vec::new();
            for r in 0..2 {
                let args = keys_arg(vec!["--store".into(), S3_STORE.into()]);
                daemons.push(Daemon::start(
                    sgardd,
                    &dir.join(format!("srvhome-{r}")),
                    &args,
                    &env,
                    &dir.join(format!("sgardd-{r}.log")),
                )?);
            }
            Ok(Servers {
                daemons,
                moto_request: Some(per_request),
                _moto: Some(moto),
            })
        }
    }
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned())
}

#[allow(clippy::too_many_arguments)]
fn run_store(
    ctx: &Ctx,
    o: &Opts,
    kind: Kind,
    root: &Path,
    sgardd: &Path,
    auth: &Path,
    keys: &Keys,
) -> Result<StoreReport> {
    let dir = root.join(kind.short());
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let load_before = loadavg();
    println!(
        "\n[{}] starting the servers (load {load_before})",
        kind.short()
    );
    let servers = start_servers(kind, &dir, sgardd, auth, o.max_streams)?;
    let addrs: Vec<String> = servers.daemons.iter().map(|d| d.addr.clone()).collect();
    println!("[{}] serving on {}", kind.short(), addrs.join(", "));

    let work = main_workload(ctx, o, kind, &dir, &addrs, keys)?;
    let main_cpu: Option<Duration> = servers
        .daemons
        .iter()
        .map(|d| d.usage().map(|(cpu, _)| cpu))
        .sum();
    let contention = contention(ctx, o, kind, &dir, &addrs, keys)?;
    let verified = verify(kind, &work.clients, &addrs)?;
    let servers_usage = servers.daemons.iter().map(Daemon::usage).collect();
    let logs: Vec<PathBuf> = servers.daemons.iter().map(|d| d.log.clone()).collect();
    let moto_request = servers.moto_request;
    drop(servers);

    let errors = work
        .first
        .iter()
        .chain(&work.rounds)
        .filter(|r| !r.ok())
        .count()
        + contention.errors().count();
    if errors > 0 {
        for log in &logs {
            let tail = daemon::tail(log);
            if !tail.is_empty() {
                println!(
                    "[{}] the last warnings and errors in {}:\n{tail}",
                    kind.short(),
                    log.display()
                );
            }
        }
    }
    Ok(StoreReport {
        kind,
        first: work.first,
        rounds: work.rounds,
        contention,
        verified,
        busy: work.busy,
        main_cpu,
        moto_request,
        servers: servers_usage,
        load: (load_before, loadavg()),
    })
}

/// Compares every B's HOME with its A's. A client with a failed timed run
/// (its B may rightly lag) first gets an untimed push by A and pull by B:
/// whatever failed must be recoverable and must have lost nothing.
fn verify(kind: Kind, clients: &[Done], addrs: &[String]) -> Result<Verified> {
    print!("[{}] verifying every pulled HOME ... ", kind.short());
    std::io::stdout().flush()?;
    let mut v = Verified::default();
    for d in clients {
        if d.failed {
            let (a_addr, b_addr) = client_addrs(d.i, addrs);
            let retried =
                d.a.must(&remote("push", a_addr, &d.a.key))
                    .and_then(|()| d.b.must(&remote("pull", b_addr, &d.b.key)));
            if let Err(e) = retried {
                v.bad.push(format!(
                    "{}: the untimed push and pull failed: {e:#}",
                    d.b.host
                ));
                continue;
            }
        }
        match compare_trees(&d.a.home, &d.b.home) {
            Ok(files) => {
                v.files += files;
                if d.failed {
                    v.after_retry += 1;
                } else {
                    v.as_pulled += 1;
                }
            }
            Err(e) => v.bad.push(format!("{}: {e:#}", d.b.host)),
        }
    }
    println!(
        "{} match as pulled, {} after an untimed push and pull (clients with a failed run), {} differ",
        v.as_pulled,
        v.after_retry,
        v.bad.len()
    );
    Ok(v)
}

/// The servers client `i`'s A and B talk to: replica `i mod n` and the
/// next one (the same one when there is one server).
fn client_addrs(i: usize, addrs: &[String]) -> (&str, &str) {
    let n = addrs.len();
    (&addrs[i % n], &addrs[(i + 1) % n])
}

/// One client's two machines and its tree.
struct Client {
    i: usize,
    a: Machine,
    b: Machine,
    spec: TreeSpec,
}

/// A client after the main workload.
struct Done {
    i: usize,
    a: Machine,
    b: Machine,
    /// Whether any of its timed runs failed.
    failed: bool,
}

/// The main workload's records, per phase, and its clients.
struct Work {
    first: Vec<Record>,
    rounds: Vec<Record>,
    clients: Vec<Done>,
    busy: [Option<f64>; 2],
}

/// One client's records of each phase, and the client.
type ClientRun = (Vec<Record>, Vec<Record>, Client);

/// The main workload: every client at once, two phases (see the module
/// doc). Returns the records of each phase and the machines.
fn main_workload(
    ctx: &Ctx,
    o: &Opts,
    kind: Kind,
    dir: &Path,
    addrs: &[String],
    keys: &Keys,
) -> Result<Work> {
    let n = o.clients;
    let tag = kind.short();
    print!("[{tag}] setting up {n} clients (init, a 40-file tree, add) ... ");
    std::io::stdout().flush()?;
    let t = std::time::Instant::now();
    // Set up on all cores, untimed.
    let clients: Vec<Client> = thread::scope(|s| {
        let jobs: Vec<_> = (0..n)
            .map(|i| s.spawn(move || setup_client(ctx, dir, keys, i)))
            .collect();
        jobs.into_iter()
            .map(|j| {
                j.join()
                    .unwrap_or_else(|_| Err(anyhow!("a setup thread panicked")))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    println!("{:.1} s", t.elapsed().as_secs_f64());

    let barrier = Barrier::new(n);
    // CPU samples: at the start of each phase (by the barrier's leader)
    // and at the end.
    let samples = Mutex::new([None; 3]);
    println!(
        "[{tag}] {n} clients at once: first push + first pull, then {} round(s)",
        o.rounds
    );
    let outs: Vec<Result<ClientRun>> = thread::scope(|s| {
        let jobs: Vec<_> = clients
            .into_iter()
            .map(|c| {
                let (barrier, samples) = (&barrier, &samples);
                s.spawn(move || {
                    let (a_addr, b_addr) = client_addrs(c.i, addrs);
                    let sample = |k: usize| {
                        if let Ok(mut v) = samples.lock() {
                            v[k] = cpu_ticks();
                        }
                    };
                    if barrier.wait().is_leader() {
                        sample(0);
                    }
                    let first = first_phase(&c, a_addr, b_addr);
                    // Everyone finishes the first phase before the rounds.
                    if barrier.wait().is_leader() {
                        sample(1);
                    }
                    let first = first?;
                    let rounds = rounds_phase(&c, o.rounds, a_addr, b_addr)?;
                    Ok((first, rounds, c))
                })
            })
            .collect();
        jobs.into_iter()
            .map(|j| {
                j.join()
                    .unwrap_or_else(|_| Err(anyhow!("a client thread panicked")))
            })
            .collect()
    });
    let end = cpu_ticks();
    let s = samples.into_inner().unwrap_or([None; 3]);
    let busy = [cores_busy(s[0], s[1]), cores_busy(s[1], end)];
    let (mut first, mut rounds, mut clients) = (Vec::new(), Vec::new(), Vec::new());
    for out in outs {
        let (f, r, c) = out?;
        let failed = f.iter().chain(&r).any(|x| !x.ok());
        first.extend(f);
        rounds.extend(r);
        clients.push(Done {
            i: c.i,
            a: c.a,
            b: c.b,
            failed,
        });
    }
    let errs = first.iter().chain(&rounds).filter(|r| !r.ok()).count();
    println!(
        "[{tag}] done: first phase {:.2} s, rounds {:.2} s, {errs} failed runs",
        stats::span(&first).as_secs_f64(),
        stats::span(&rounds).as_secs_f64()
    );
    Ok(Work {
        first,
        rounds,
        clients,
        busy,
    })
}

fn setup_client(ctx: &Ctx, dir: &Path, keys: &Keys, i: usize) -> Result<Client> {
    let name = format!("c{i:02}");
    let base = dir.join("clients");
    let a = Machine::new(&ctx.sgard, &base, &format!("{name}-a"), &keys.a[i])?;
    let b = Machine::new(&ctx.sgard, &base, &format!("{name}-b"), &keys.b[i])?;
    let spec = tree::client_dotfiles(i as u64);
    spec.write(&a.home)?;
    a.must(&["init".as_ref()])?;
    let roots: Vec<PathBuf> = spec.roots.iter().map(|r| a.home.join(r)).collect();
    let mut args: Vec<&OsStr> = vec!["add".as_ref()];
    args.extend(roots.iter().map(|r| r.as_os_str()));
    a.must(&args)?;
    Ok(Client { i, a, b, spec })
}

fn first_phase(c: &Client, a_addr: &str, b_addr: &str) -> Result<Vec<Record>> {
    let who = format!("c{:02}", c.i);
    Ok(vec![
        c.a.push(Op::FirstPush, &who, a_addr)?,
        c.b.pull(Op::FirstPull, &who, b_addr)?,
    ])
}

fn rounds_phase(c: &Client, rounds: usize, a_addr: &str, b_addr: &str) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    for r in 0..rounds {
        let who = format!("c{:02} round {}", c.i, r + 1);
        edit(c, r)?;
        let msg = format!("round {}", r + 1);
        out.push(c.a.timed(
            Op::Checkpoint,
            &who,
            &["checkpoint".as_ref(), "-m".as_ref(), msg.as_ref()],
        )?);
        out.push(c.a.push(Op::Push, &who, a_addr)?);
        out.push(c.b.pull(Op::Pull, &who, b_addr)?);
    }
    Ok(out)
}

/// Appends a line to [`EDITS_PER_ROUND`] of A's files, a different set
/// each round.
fn edit(c: &Client, round: usize) -> Result<()> {
    let n = c.spec.files.len();
    for k in 0..EDITS_PER_ROUND {
        let f = &c.spec.files[(round * EDITS_PER_ROUND + k * 7 + c.i) % n];
        let path = c.a.home.join(&f.rel);
        let mut out = fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        writeln!(
            out,
            "# round {} of c{:02}, edited by sgard-bench",
            round + 1,
            c.i
        )
        .with_context(|| format!("appending to {}", path.display()))?;
    }
    Ok(())
}

/// The contention scenario (see the module doc).
fn contention(
    ctx: &Ctx,
    o: &Opts,
    kind: Kind,
    dir: &Path,
    addrs: &[String],
    keys: &Keys,
) -> Result<Contention> {
    let tag = kind.short();
    let k = o.contenders;
    let base = dir.join("team");
    print!("[{tag}] contention: setting up {k} machines in one garden ... ");
    std::io::stdout().flush()?;
    let mut machines = Vec::new();
    for (j, key) in keys.team.iter().enumerate() {
        let m = Machine::new(&ctx.sgard, &base, &format!("t{j:02}"), key)?;
        m.must(&["init".as_ref()])?;
        for (other, okey) in keys.team.iter().enumerate() {
            if other != j {
                m.trust(okey)?;
            }
        }
        machines.push(m);
    }
    let addr_of = |j: usize| addrs[j % addrs.len()].as_str();
    let seed = &machines[0];
    fs::write(seed.home.join(".team.conf"), "# shared by the team\n")
        .context("writing the team's first file")?;
    seed.must(&["add".as_ref(), ".team.conf".as_ref()])?;
    seed.must(&remote("push", addr_of(0), &seed.key))?;
    for (j, m) in machines.iter().enumerate().skip(1) {
        m.must(&remote("pull", addr_of(j), &m.key))?;
    }
    for (j, m) in machines.iter().enumerate() {
        let name = format!("client-t{j:02}.txt");
        fs::write(m.home.join(&name), contender_bytes(j))
            .with_context(|| format!("writing {name}"))?;
        m.must(&["add".as_ref(), name.as_ref()])?;
    }
    println!("done");

    let mut c = Contention::default();
    // Wave 0: everyone pushes from the same head. Then the refused pull
    // and push again, all at once, until none is refused.
    let mut pending: Vec<usize> = (0..k).collect();
    let limit = 3 * k;
    let mut wave = 0;
    while !pending.is_empty() && wave <= limit {
        let barrier = Barrier::new(pending.len());
        let results: Vec<Result<Vec<Record>>> = thread::scope(|s| {
            let jobs: Vec<_> = pending
                .iter()
                .map(|&j| {
                    let (m, barrier) = (&machines[j], &barrier);
                    let addr = addr_of(j);
                    s.spawn(move || {
                        let who = format!("t{j:02} wave {wave}");
                        let mut recs = Vec::new();
                        barrier.wait();
                        if wave > 0 {
                            let pull = m.pull(Op::Pull, &who, addr)?;
                            let ok = pull.ok();
                            recs.push(pull);
                            if !ok {
                                return Ok(recs);
                            }
                        }
                        recs.push(m.push(Op::Push, &who, addr)?);
                        Ok(recs)
                    })
                })
                .collect();
            jobs.into_iter()
                .map(|j| {
                    j.join()
                        .unwrap_or_else(|_| Err(anyhow!("a contender panicked")))
                })
                .collect()
        });
        let mut next = Vec::new();
        for (&j, recs) in pending.iter().zip(results) {
            let recs = recs?;
            let push = recs.iter().find(|r| r.op == Op::Push);
            match push.map(|p| p.code) {
                Some(Some(0)) if wave == 0 => c.first_won += 1,
                Some(Some(0)) => {}
                Some(Some(4)) => {
                    c.refusals += 1;
                    if wave == 0 {
                        c.first_refused += 1;
                    }
                    next.push(j);
                }
                // A failed pull (no push) or a failed push: an error, and
                // that machine stops (its file will be reported lost).
                _ => {}
            }
            c.records.extend(recs);
        }
        pending = next;
        if wave > 0 {
            c.rounds = wave;
        }
        wave += 1;
    }
    c.unsettled = pending.len();

    // The check: a fresh machine of the garden pulls everything.
    let checker = Machine::new(&ctx.sgard, &base, "t-check", &keys.checker)?;
    checker.must(&["init".as_ref()])?;
    for key in &keys.team {
        checker.trust(key)?;
    }
    checker.must(&remote("pull", addr_of(0), &checker.key))?;
    for j in 0..k {
        let name = format!("client-t{j:02}.txt");
        match fs::read(checker.home.join(&name)) {
            Ok(bytes) if bytes == contender_bytes(j) => {}
            Ok(_) => c.lost.push(format!("{name} (different bytes)")),
            Err(e) => c.lost.push(format!("{name} ({e})")),
        }
    }
    println!(
        "[{tag}] contention: first wave {} won, {} refused; all in after {} more rounds; {} refusals in all, {} other failures, {} files lost",
        c.first_won,
        c.first_refused,
        c.rounds,
        c.refusals,
        c.errors().count(),
        c.lost.len()
    );
    Ok(c)
}

/// `VERB -r ADDR --ssh-key KEY`.
fn remote<'a>(verb: &'a str, addr: &'a str, key: &'a Path) -> Vec<&'a OsStr> {
    vec![
        verb.as_ref(),
        "-r".as_ref(),
        addr.as_ref(),
        "--ssh-key".as_ref(),
        key.as_os_str(),
    ]
}

/// What contender `j` adds: a line naming it and 2 KiB of text.
fn contender_bytes(j: usize) -> Vec<u8> {
    let mut v = format!("written by t{j:02}\n").into_bytes();
    let mut body = vec![0u8; 2048];
    tree::Rng::new(0xC0_4747, j as u64).fill_text(&mut body);
    v.extend(body);
    v
}

/// The report: the tables and what they rest on.
fn report(reports: &[StoreReport], o: &Opts) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Main workload: {} clients, each its own garden; {} round(s); sgardd {}.\n",
        o.clients,
        o.rounds,
        o.max_streams.map_or_else(
            || "with its default --max-streams (16)".to_owned(),
            |n| format!("--max-streams {n}")
        )
    );
    s.push_str(&stats::table_header());
    for r in reports {
        s.push_str(&stats::phase_rows(
            r.kind.name(),
            "first",
            &r.first,
            &[Op::FirstPush, Op::FirstPull],
        ));
        s.push_str(&stats::phase_rows(
            r.kind.name(),
            "rounds",
            &r.rounds,
            &[Op::Checkpoint, Op::Push, Op::Pull],
        ));
    }
    let _ = writeln!(
        s,
        "\nContention: {} machines in one garden, all pushing at once.\n",
        o.contenders
    );
    let _ = writeln!(
        s,
        "| store | first wave: won | refused (exit 4) | rounds until all in | refusals in all | other failures | push p50 ms | push max ms | files lost |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in reports {
        let c = &r.contention;
        // Latency of every push that ran to a decision (won or refused).
        let mut pushes: Vec<Duration> = c
            .records
            .iter()
            .filter(|x| x.op == Op::Push && matches!(x.code, Some(0 | 4)))
            .map(|x| x.wall)
            .collect();
        pushes.sort_unstable();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.kind.name(),
            c.first_won,
            c.first_refused,
            c.rounds,
            c.refusals,
            c.errors().count(),
            stats::ms(stats::percentile(&pushes, 50.0)),
            stats::ms(pushes.last().copied()),
            c.lost.len() + c.unsettled
        );
    }
    s.push('\n');
    for r in reports {
        let v = &r.verified;
        let _ = writeln!(
            s,
            "* {}: {} of {} pulled HOMEs matched their pusher's as pulled, {} after an untimed push and pull (clients with a failed run), {} differ ({} files compared)",
            r.kind.name(),
            v.as_pulled,
            v.as_pulled + v.after_retry + v.bad.len(),
            v.after_retry,
            v.bad.len(),
            v.files
        );
        let busy = |b: Option<f64>| b.map_or_else(|| "?".to_owned(), |b| format!("{b:.2}"));
        let _ = writeln!(
            s,
            "  * cores busy (whole machine, of {}): {} in the first phase, {} in the rounds; load average {} before, {} after",
            thread::available_parallelism().map_or(0, std::num::NonZero::get),
            busy(r.busy[0]),
            busy(r.busy[1]),
            r.load.0,
            r.load.1
        );
        if let Some(cpu) = r.main_cpu {
            let calls = r
                .first
                .iter()
                .chain(&r.rounds)
                .filter(|x| x.op.remote())
                .count();
            let _ = writeln!(
                s,
                "  * sgardd CPU in the main workload (all replicas): {:.1} s, {:.1} ms per server call",
                cpu.as_secs_f64(),
                cpu.as_secs_f64() * 1e3 / calls.max(1) as f64
            );
        }
        if let Some(t) = r.moto_request {
            let _ = writeln!(
                s,
                "  * moto alone: {:.2} ms per 4 KiB PUT, one at a time ({:.0} requests/s)",
                t.as_secs_f64() * 1e3,
                1.0 / t.as_secs_f64().max(1e-9)
            );
        }
        for (i, u) in r.servers.iter().enumerate() {
            if let Some((cpu, rss)) = u {
                let _ = writeln!(
                    s,
                    "  * sgardd #{}: {:.1} s CPU over the whole run (contention and checks too), peak RSS {:.1} MiB",
                    i + 1,
                    cpu.as_secs_f64(),
                    *rss as f64 / 1024.0
                );
            }
        }
    }
    s
}

/// The failed runs of each store, grouped by operation, exit code and
/// first line of standard error; the first failure's whole standard error.
fn errors(reports: &[StoreReport]) -> String {
    let mut s = String::new();
    for r in reports {
        let failed: Vec<&Record> = r
            .first
            .iter()
            .chain(&r.rounds)
            .filter(|x| !x.ok())
            .chain(r.contention.errors())
            .collect();
        let Some(f) = failed.first() else { continue };
        let mut groups = std::collections::BTreeMap::new();
        for x in &failed {
            let line = x
                .stderr
                .lines()
                .find(|l| l.contains("error"))
                .or_else(|| x.stderr.lines().next())
                .unwrap_or("(no output)");
            *groups
                .entry((x.op.name(), x.code, line.to_owned()))
                .or_insert(0usize) += 1;
        }
        let _ = writeln!(s, "Errors, {}: {} failed runs", r.kind.name(), failed.len());
        for ((op, code, line), n) in &groups {
            let _ = writeln!(
                s,
                "* {n} x {op}, exit {}: {line}",
                code.map_or_else(|| "by a signal".to_owned(), |c| c.to_string())
            );
        }
        let _ = writeln!(
            s,
            "* the first ({} of {}), in full:\n{}",
            f.op.name(),
            f.who,
            f.stderr.trim_end()
        );
    }
    s
}

/// What makes the run fail: a pulled HOME that differs from what was
/// pushed, or a contender's file lost.
fn failures(reports: &[StoreReport]) -> Vec<String> {
    let mut out = Vec::new();
    for r in reports {
        let tag = r.kind.short();
        for v in &r.verified.bad {
            out.push(format!("[{tag}] pulled HOME differs: {v}"));
        }
        let c = &r.contention;
        if !c.lost.is_empty() || c.unsettled > 0 {
            out.push(format!(
                "[{tag}] contention: {} machines never got their push in; lost: {}",
                c.unsettled,
                c.lost.join(", ")
            ));
        }
    }
    out
}
