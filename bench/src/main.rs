//! `sgard-bench`: the benchmark harness of sgard (a program, not a test).
//!
//! ```text
//! cargo build --release -p sgard -p sgard-bench
//! target/release/sgard-bench <dotfiles|t10k|big|all> [--sgard PATH] [--dir DIR] [--keep]
//! target/release/sgard-bench compare [--no-big] [--json FILE] [--sgard PATH] [--dir DIR] [--keep]
//! target/release/sgard-bench chart FILE --out DIR
//! target/release/sgard-bench server [--clients N] [--rounds R] [--contenders K]
//!                                   [--store s3|dir|both] [--sgardd PATH]
//! ```
//!
//! `server` runs many client machines against `sgardd` at once, on an
//! object store (two replicas on a moto bucket) and on a folder; see
//! [`server`].
//!
//! `compare --json FILE` also writes its rows as JSON ([`results`]), and
//! `chart FILE --out DIR` draws them as SVG ([`chart`]).
//!
//! `compare` is different: it measures sgard side by side with git, restic,
//! `cp -a` and `openssl dgst -sha256` on the same trees and checks the
//! performance targets; see [`compare`].
//!
//! Each scenario generates a deterministic tree in a fresh temporary HOME
//! (under `--dir`, default the system temp folder), runs `sgard init` with the
//! repository next to (not inside) that HOME, then times four steps of the
//! real `sgard` binary:
//!
//! 1. `add` of the whole tree (first add: every blob is hashed, written and
//!    fsynced);
//! 2. `status --exit-code` with nothing changed (must exit 0);
//! 3. `checkpoint` after appending a line to 1% of the files (at least one);
//! 4. `restore --force` into a second, empty HOME from the same `--repo`.
//!
//! The restored tree is then compared byte for byte (and mode for mode) with
//! the edited one, outside the timings. The scenarios:
//!
//! * `dotfiles`: 300 text files, 100 B to 8 KiB, in a typical dotfiles layout;
//! * `t10k`: 10,000 binary files in 4 levels, about 20 KiB each, ~200 MB;
//! * `big`: one 1 GiB binary file (skipped with a note when the target
//!   filesystem has under 5 GiB free).
//!
//! `sync` runs before every timed step so that dirty pages left by the
//! generator are not charged to sgard's own fsyncs. The page cache is not
//! dropped: the numbers are warm-cache numbers. `SGARD_HOSTNAME` is pinned to
//! `sgard-bench`; `XDG_CACHE_HOME` and `XDG_STATE_HOME` point to folders of
//! the run outside each HOME (the restore HOME gets its own). See [`measure`] for how peak RSS is measured.

mod chart;
mod compare;
mod measure;
mod results;
mod server;
mod tree;

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, ValueEnum};

use measure::{RssMethod, Sample};
use tree::TreeSpec;

/// Benchmark sgard: time first add, no-change status, checkpoint after a 1%
/// edit, and restore into an empty HOME, on generated trees.
#[derive(Parser, Debug)]
#[command(name = "sgard-bench")]
struct Args {
    /// Which tree to benchmark
    scenario: Scenario,

    /// chart: the `compare --json` file to draw
    #[arg(value_name = "FILE", required_if_eq("scenario", "chart"))]
    file: Option<PathBuf>,

    /// chart: the folder to write the SVG charts into
    #[arg(long, value_name = "DIR", required_if_eq("scenario", "chart"))]
    out: Option<PathBuf>,

    /// compare: also write every row (best and every run's ratio, limit,
    /// met) and the run's metadata to FILE as JSON, for `chart`
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// The sgard binary [default: `sgard` next to this binary]
    #[arg(long, value_name = "PATH")]
    sgard: Option<PathBuf>,

    /// Where to create the temporary HOMEs and repository [default: the
    /// system temp folder]
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// Keep the generated trees and repository (and print where they are)
    #[arg(long)]
    keep: bool,

    /// compare: skip the 1 GiB file (also skipped when the disk is low)
    #[arg(long)]
    no_big: bool,

    /// compare: skip T100k (100,000 files)
    #[arg(long)]
    no_t100k: bool,

    /// compare: skip T10k (10,000 files)
    #[arg(long)]
    no_t10k: bool,

    /// compare: skip GROW (a 64 MiB file's edits, a history's appends)
    #[arg(long)]
    no_grow: bool,

    /// compare: how many times to run everything; every run is printed,
    /// then each target's best
    #[arg(long, default_value_t = 3, value_name = "N")]
    runs: usize,

    /// server: client machines pushing and pulling at once, each with a
    /// garden of its own
    #[arg(long, default_value_t = 50, value_name = "N")]
    clients: usize,

    /// server: rounds of edit, checkpoint, push, pull per client
    #[arg(long, default_value_t = 5, value_name = "R")]
    rounds: usize,

    /// server: machines pushing at once into one shared garden
    #[arg(long, default_value_t = 10, value_name = "K")]
    contenders: usize,

    /// server: which stores to measure
    #[arg(long, value_enum, default_value_t = server::Stores::Both)]
    store: server::Stores,

    /// server: the sgardd binary [default: `sgardd` next to sgard]
    #[arg(long, value_name = "PATH")]
    sgardd: Option<PathBuf>,

    /// server: pass `--max-streams N` to every sgardd [default: sgardd's
    /// own, 16 push streams at once]
    #[arg(long, value_name = "N")]
    max_streams: Option<usize>,
}

/// The scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// About 300 config files, 100 B to 8 KiB
    Dotfiles,
    /// 10,000 files in 4 levels, ~200 MB
    T10k,
    /// One 1 GiB file
    Big,
    /// All three, in that order
    All,
    /// sgard against git, restic, cp -a and openssl on T10k, T100k and BIG,
    /// checked against the performance targets
    Compare,
    /// Many clients pushing and pulling against sgardd at once: two
    /// replicas on a moto bucket, and one sgardd on a folder
    Server,
    /// SVG charts of a `compare --json` file: `chart FILE --out DIR`
    Chart,
}

/// Free space `big` wants: the tree, the repository, the restored tree and
/// the temporary files of each, with room to spare.
const BIG_MIN_FREE: u64 = 5 << 30;

/// One line of the results table.
struct Row {
    scenario: &'static str,
    step: &'static str,
    files: usize,
    bytes: u64,
    sample: Sample,
}

/// What every scenario needs.
struct Ctx {
    sgard: PathBuf,
    dir: PathBuf,
    keep: bool,
    rss: RssMethod,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sgard-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<()> {
    if args.scenario == Scenario::Chart {
        let (Some(file), Some(out)) = (&args.file, &args.out) else {
            bail!("usage: sgard-bench chart FILE --out DIR");
        };
        for written in chart::write_all(file, out)? {
            println!("wrote {}", written.display());
        }
        return Ok(());
    }
    if args.file.is_some() || args.out.is_some() {
        bail!("FILE and --out are for `chart` only");
    }
    if let Some(json) = &args.json {
        if args.scenario != Scenario::Compare {
            bail!("--json is for `compare` only");
        }
        // Checked now rather than after the comparison's minutes.
        let parent = std::path::absolute(json)
            .context("resolving --json")?
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        if !parent.is_dir() {
            bail!("--json {}: no folder {}", json.display(), parent.display());
        }
    }
    let sgard = sgard_binary(args.sgard.as_deref())?;
    let dir = match &args.dir {
        Some(d) => std::path::absolute(d).context("resolving --dir")?,
        None => std::env::temp_dir(),
    };
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let rss = RssMethod::detect(&dir);
    let ctx = Ctx {
        sgard,
        dir,
        keep: args.keep,
        rss,
    };

    print_header(&ctx)?;
    if args.scenario == Scenario::Server {
        return server::run(
            &ctx,
            &server::Opts {
                clients: args.clients,
                rounds: args.rounds,
                contenders: args.contenders,
                stores: args.store,
                sgardd: args.sgardd.clone(),
                max_streams: args.max_streams,
            },
        );
    }
    if args.scenario == Scenario::Compare {
        return compare::run(
            &ctx,
            &compare::Parts {
                big: !args.no_big,
                t100k: !args.no_t100k,
                t10k: !args.no_t10k,
                grow: !args.no_grow,
                runs: args.runs.max(1),
                json: args.json.clone(),
            },
        );
    }

    let scenarios = match args.scenario {
        Scenario::All => vec![Scenario::Dotfiles, Scenario::T10k, Scenario::Big],
        one => vec![one],
    };
    let mut rows = Vec::new();
    for s in scenarios {
        let (name, spec) = match s {
            Scenario::Dotfiles => ("dotfiles", tree::dotfiles()),
            Scenario::T10k => ("t10k", tree::t10k()),
            Scenario::Big
            | Scenario::All
            | Scenario::Compare
            | Scenario::Server
            | Scenario::Chart => ("big", tree::big()),
        };
        if s == Scenario::Big {
            match free_bytes(&ctx.dir) {
                Some(free) if free < BIG_MIN_FREE => {
                    println!(
                        "skipping big: {} has {:.1} GiB free, big needs {} GiB",
                        ctx.dir.display(),
                        free as f64 / f64::from(1 << 30),
                        BIG_MIN_FREE >> 30
                    );
                    continue;
                }
                Some(_) => {}
                None => eprintln!(
                    "sgard-bench: warning: cannot tell the free space of {}; running big anyway",
                    ctx.dir.display()
                ),
            }
        }
        rows.extend(run_scenario(&ctx, name, &spec)?);
    }
    println!();
    print!("{}", table(&rows));
    Ok(())
}

/// `--sgard`, or `sgard` next to this executable (`target/release/sgard`
/// when run through `cargo run --release`).
fn sgard_binary(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        let p = std::path::absolute(p).context("resolving --sgard")?;
        if !p.is_file() {
            bail!("--sgard {}: no such file", p.display());
        }
        return Ok(p);
    }
    let exe = std::env::current_exe().context("locating sgard-bench itself")?;
    let dir = exe.parent().context("sgard-bench has no parent folder")?;
    let p = dir.join(format!("sgard{}", std::env::consts::EXE_SUFFIX));
    if !p.is_file() {
        bail!(
            "no sgard binary at {}: run `cargo build --release -p sgard` first, or pass --sgard PATH",
            p.display()
        );
    }
    Ok(p)
}

fn print_header(ctx: &Ctx) -> Result<()> {
    let version = Command::new(&ctx.sgard)
        .arg("version")
        .output()
        .with_context(|| format!("running {} version", ctx.sgard.display()))?;
    println!(
        "sgard:   {} ({})",
        ctx.sgard.display(),
        String::from_utf8_lossy(&version.stdout).trim()
    );
    println!("dir:     {} ({})", ctx.dir.display(), fs_type(&ctx.dir));
    println!("rss:     {}", ctx.rss.describe());
    println!(
        "machine: {} x {}; Linux {}",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        cpu_model(),
        fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "?".to_owned(), |s| s.trim().to_owned())
    );
    Ok(())
}

fn run_scenario(ctx: &Ctx, name: &'static str, spec: &TreeSpec) -> Result<Vec<Row>> {
    let root = tempfile::Builder::new()
        .prefix(&format!("sgard-bench-{name}-"))
        .tempdir_in(&ctx.dir)
        .with_context(|| format!("creating a temp folder in {}", ctx.dir.display()))?;
    let home = root.path().join("home");
    let home2 = root.path().join("home-restore");
    let repo = root.path().join("repo");
    let logs = root.path().join("logs");
    for d in [&home, &home2, &logs] {
        fs::create_dir(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let files = spec.files.len();
    let bytes = spec.total_bytes();

    print!(
        "\n[{name}] generating {files} files, {:.1} MiB ... ",
        bytes as f64 / f64::from(1 << 20)
    );
    io::stdout().flush()?;
    let t = Instant::now();
    spec.write(&home)?;
    sync();
    println!("{:.2} s", t.elapsed().as_secs_f64());

    let step = |step: &'static str, home: &Path, args: &[&std::ffi::OsStr]| -> Result<Row> {
        sync();
        // Each HOME is its own machine, with its machine-local folders (the
        // stat cache, fingerprints) outside it, so they are neither in the
        // restored tree nor in the user's own cache.
        let machine = if home == home2.as_path() {
            "restore"
        } else {
            "home"
        };
        let mut cmd = Command::new(&ctx.sgard);
        cmd.arg("--repo")
            .arg(&repo)
            .args(args)
            .env("HOME", home)
            .env(
                "XDG_CACHE_HOME",
                root.path().join(format!("xdg-cache-{machine}")),
            )
            .env(
                "XDG_STATE_HOME",
                root.path().join(format!("xdg-state-{machine}")),
            )
            .env("SGARD_HOSTNAME", "sgard-bench")
            .env_remove("SGARD_REPO")
            .env_remove("SGARD_NOW")
            .current_dir(home);
        let log = logs.join(step);
        let sample = measure::run(&ctx.rss, &cmd, &log)?;
        if !sample.status.success() {
            let err = fs::read_to_string(log.with_extension("err")).unwrap_or_default();
            bail!("[{name}] sgard {step} failed ({}):\n{err}", sample.status);
        }
        println!(
            "[{name}] {step:<10} {:>8.3} s wall  {:>7} s CPU  {:>7.1} MiB peak RSS",
            sample.wall.as_secs_f64(),
            sample
                .cpu
                .map_or_else(|| "n/a".to_owned(), |c| format!("{:.2}", c.as_secs_f64())),
            sample.peak_rss_kib as f64 / 1024.0
        );
        Ok(Row {
            scenario: name,
            step,
            files,
            bytes,
            sample,
        })
    };

    step("init", &home, &["init".as_ref()])?;
    let mut add_args: Vec<&std::ffi::OsStr> = vec!["add".as_ref()];
    let roots: Vec<PathBuf> = spec.roots.iter().map(|r| home.join(r)).collect();
    add_args.extend(roots.iter().map(|r| r.as_os_str()));

    let mut rows = vec![step("add", &home, &add_args)?];
    rows.push(step(
        "status",
        &home,
        &["status".as_ref(), "--exit-code".as_ref()],
    )?);
    rows.push(step(
        "list-json",
        &home,
        &["list".as_ref(), "--json".as_ref()],
    )?);
    let edited = spec.edit_one_percent(&home)?;
    println!("[{name}] edited {edited} file(s)");
    rows.push(step(
        "checkpoint",
        &home,
        &["checkpoint".as_ref(), "-m".as_ref(), "bench edit".as_ref()],
    )?);
    rows.push(step(
        "restore",
        &home2,
        &["restore".as_ref(), "--force".as_ref()],
    )?);

    let t = Instant::now();
    let checked = compare_trees(&home, &home2)?;
    println!(
        "[{name}] restored tree verified: {checked} files identical ({:.2} s)",
        t.elapsed().as_secs_f64()
    );

    if ctx.keep {
        let kept = root.keep();
        println!("[{name}] kept {}", kept.display());
    } else {
        root.close()
            .with_context(|| format!("removing the {name} temp folder"))?;
    }
    Ok(rows)
}

/// Flushes dirty pages system-wide (`sync(1)`), so a step's fsyncs do not
/// pay for what the generator or the previous step left behind.
fn sync() {
    let _ = Command::new("sync").status();
}

/// Checks that `b` holds exactly the regular files of `a`, with the same
/// bytes and permission bits. Returns the number of files compared.
fn compare_trees(a: &Path, b: &Path) -> Result<usize> {
    let list = |root: &Path| -> Result<Vec<PathBuf>> {
        let mut v = Vec::new();
        for e in walkdir::WalkDir::new(root).sort_by_file_name() {
            let e = e?;
            if e.file_type().is_file() {
                v.push(e.path().strip_prefix(root)?.to_path_buf());
            }
        }
        Ok(v)
    };
    let (la, lb) = (list(a)?, list(b)?);
    if la != lb {
        let only_a: Vec<_> = la.iter().filter(|p| !lb.contains(p)).take(5).collect();
        let only_b: Vec<_> = lb.iter().filter(|p| !la.contains(p)).take(5).collect();
        bail!(
            "restored tree differs: {} files vs {}; missing {only_a:?}, extra {only_b:?}",
            la.len(),
            lb.len()
        );
    }
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    for rel in &la {
        let (pa, pb) = (a.join(rel), b.join(rel));
        let (ma, mb) = (fs::metadata(&pa)?, fs::metadata(&pb)?);
        if ma.len() != mb.len() {
            bail!(
                "restored {} has {} bytes, not {}",
                rel.display(),
                mb.len(),
                ma.len()
            );
        }
        if ma.permissions().mode() & 0o7777 != mb.permissions().mode() & 0o7777 {
            bail!("restored {} has a different mode", rel.display());
        }
        let (mut fa, mut fb) = (File::open(&pa)?, File::open(&pb)?);
        loop {
            let n = read_full(&mut fa, &mut ba)?;
            let m = read_full(&mut fb, &mut bb)?;
            if n != m || ba[..n] != bb[..m] {
                bail!("restored {} has different content", rel.display());
            }
            if n == 0 {
                break;
            }
        }
    }
    Ok(la.len())
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// `df -PTk DIR`: the second line's Type and Available columns.
fn df(dir: &Path) -> Option<(String, u64)> {
    let out = Command::new("df").arg("-PTk").arg(dir).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().nth(1)?;
    let cols: Vec<&str> = line.split_whitespace().collect();
    let avail_kib: u64 = cols.get(4)?.parse().ok()?;
    Some(((*cols.get(1)?).to_owned(), avail_kib * 1024))
}

fn free_bytes(dir: &Path) -> Option<u64> {
    df(dir).map(|(_, free)| free)
}

fn fs_type(dir: &Path) -> String {
    df(dir).map_or_else(|| "filesystem type unknown".to_owned(), |(t, _)| t)
}

fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

/// The results as a Markdown table. Rates are over the whole tree (every
/// step reads or writes all of it except `checkpoint`, whose rate is still
/// given per tree so the steps compare).
fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| scenario | step | files | data MB | wall s | CPU s | peak RSS MiB | files/s | MB/s |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let secs = r.sample.wall.as_secs_f64().max(1e-9);
        let mb = r.bytes as f64 / 1e6;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.3} | {} | {:.1} | {} | {} |",
            r.scenario,
            r.step,
            r.files,
            mb,
            secs,
            r.sample
                .cpu
                .map_or_else(|| "n/a".to_owned(), |c| format!("{:.2}", c.as_secs_f64())),
            r.sample.peak_rss_kib as f64 / 1024.0,
            rate(r.files as f64 / secs),
            rate(mb / secs)
        );
    }
    s
}

/// A rate with about three significant digits.
fn rate(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}
