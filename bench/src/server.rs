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
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::thread;
use std::time::Duration;

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
    /// Per client: `Ok(files compared)` or why B's HOME differs from A's.
    verified: Vec<Result<usize, String>>,
    /// Per sgardd: CPU time and peak RSS (KiB), read just before it stops.
    servers: Vec<Option<(Duration, u64)>>,
    /// `/proc/loadavg` before and after.
    load: (String, String),
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
        "work:    {} clients x (first push + first pull + {} rounds of edit {EDITS_PER_ROUND} files, checkpoint, push, pull); {} contenders in one garden",
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

    if ctx.keep {
        let kept = root.keep();
        println!("\nkept {}", kept.display());
    }
    let failures = failures(&reports);
    if !failures.is_empty() {
        bail!(
            "the server benchmark saw failures:\n{}",
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
            "no sgardd binary at {}: run `cargo build --release -p sgard` first, or pass --sgardd PATH",
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
    _moto: Option<MotoServer>,
}

fn start_servers(kind: Kind, dir: &Path, sgardd: &Path, auth: &Path) -> Result<Servers> {
    let keys_arg = |mut a: Vec<OsString>| {
        a.push("--authorized-keys".into());
        a.push(auth.into());
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
                _moto: None,
            })
        }
        Kind::S3 => {
            let moto = MotoServer::start()?.ok_or_else(|| {
                anyhow!("moto_server not found (PATH or ${})", "SGARD_MOTO_SERVER")
            })?;
            moto.create_bucket(BUCKET)
                .context("creating the bucket on moto")?;
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
    let servers = start_servers(kind, &dir, sgardd, auth)?;
    let addrs: Vec<String> = servers.daemons.iter().map(|d| d.addr.clone()).collect();
    println!("[{}] serving on {}", kind.short(), addrs.join(", "));

    let (first, rounds, pairs) = main_workload(ctx, o, kind, &dir, &addrs, keys)?;
    let contention = contention(ctx, o, kind, &dir, &addrs, keys)?;
    let servers_usage = servers.daemons.iter().map(Daemon::usage).collect();
    let logs: Vec<PathBuf> = servers.daemons.iter().map(|d| d.log.clone()).collect();
    drop(servers);

    print!("[{}] verifying every pulled HOME ... ", kind.short());
    std::io::stdout().flush()?;
    let verified: Vec<Result<usize, String>> = pairs
        .iter()
        .map(|(a, b)| compare_trees(&a.home, &b.home).map_err(|e| format!("{}: {e:#}", b.host)))
        .collect();
    let bad = verified.iter().filter(|v| v.is_err()).count();
    println!("{} of {} match", verified.len() - bad, verified.len());
    let errors =
        first.iter().chain(&rounds).filter(|r| !r.ok()).count() + contention.errors().count();
    if errors > 0 {
        for log in &logs {
            println!(
                "[{}] the end of {}:\n{}",
                kind.short(),
                log.display(),
                daemon::tail(log)
            );
        }
    }
    Ok(StoreReport {
        kind,
        first,
        rounds,
        contention,
        verified,
        servers: servers_usage,
        load: (load_before, loadavg()),
    })
}

/// One client's two machines and its tree.
struct Client {
    i: usize,
    a: Machine,
    b: Machine,
    spec: TreeSpec,
}

type Phases = (Vec<Record>, Vec<Record>, Vec<(Machine, Machine)>);

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
) -> Result<Phases> {
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
    let s_count = addrs.len();
    println!(
        "[{tag}] {n} clients at once: first push + first pull, then {} rounds",
        o.rounds
    );
    let outs: Vec<Result<ClientRun>> = thread::scope(|s| {
        let jobs: Vec<_> = clients
            .into_iter()
            .map(|c| {
                let barrier = &barrier;
                s.spawn(move || {
                    let a_addr = &addrs[c.i % s_count];
                    let b_addr = &addrs[(c.i + 1) % s_count];
                    barrier.wait();
                    let first = first_phase(&c, a_addr, b_addr);
                    // Everyone finishes the first phase before the rounds.
                    barrier.wait();
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
    let (mut first, mut rounds, mut pairs) = (Vec::new(), Vec::new(), Vec::new());
    for out in outs {
        let (f, r, c) = out?;
        first.extend(f);
        rounds.extend(r);
        pairs.push((c.a, c.b));
    }
    let errs = first.iter().chain(&rounds).filter(|r| !r.ok()).count();
    println!(
        "[{tag}] done: first phase {:.2} s, rounds {:.2} s, {errs} failed runs",
        stats::span(&first).as_secs_f64(),
        stats::span(&rounds).as_secs_f64()
    );
    Ok((first, rounds, pairs))
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
        "Main workload: {} clients, each its own garden; {} rounds.\n",
        o.clients, o.rounds
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
        let ok = r.verified.iter().filter(|v| v.is_ok()).count();
        let files: usize = r.verified.iter().filter_map(|v| v.as_ref().ok()).sum();
        let _ = writeln!(
            s,
            "* {}: {ok} of {} pulled HOMEs match their pusher's ({files} files compared); load average {} before, {} after",
            r.kind.name(),
            r.verified.len(),
            r.load.0,
            r.load.1
        );
        for (i, u) in r.servers.iter().enumerate() {
            if let Some((cpu, rss)) = u {
                let _ = writeln!(
                    s,
                    "  * sgardd #{}: {:.1} s CPU over the run, peak RSS {:.1} MiB",
                    i + 1,
                    cpu.as_secs_f64(),
                    *rss as f64 / 1024.0
                );
            }
        }
    }
    s
}

/// Everything that went wrong, one line each (with the first failure's
/// standard error per store).
fn failures(reports: &[StoreReport]) -> Vec<String> {
    let mut out = Vec::new();
    for r in reports {
        let tag = r.kind.short();
        let failed: Vec<&Record> = r
            .first
            .iter()
            .chain(&r.rounds)
            .filter(|x| !x.ok())
            .chain(r.contention.errors())
            .collect();
        if let Some(f) = failed.first() {
            let mut by_code = std::collections::BTreeMap::new();
            for x in &failed {
                *by_code.entry((x.op.name(), x.code)).or_insert(0usize) += 1;
            }
            let counts: Vec<String> = by_code
                .iter()
                .map(|((op, code), n)| {
                    format!(
                        "{n} x {op} exit {}",
                        code.map_or_else(|| "signal".to_owned(), |c| c.to_string())
                    )
                })
                .collect();
            out.push(format!(
                "[{tag}] {} failed runs ({}); the first, {} {}:\n{}",
                failed.len(),
                counts.join(", "),
                f.op.name(),
                f.who,
                f.stderr.trim_end()
            ));
        }
        for v in r.verified.iter().filter_map(|v| v.as_ref().err()) {
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
