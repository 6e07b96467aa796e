//! The `compare` scenario: sgard side by side with git, restic, `cp -a` and
//! `openssl dgst -sha256` on the same trees, in one run, checked against the
//! performance targets.
//!
//! Everything runs `--runs` times (3 by default); each run prints its own
//! tables, and the last table gives each target's best run beside every
//! run's ratio. A run generates T10k (the `t10k` tree: 10,000 files,
//! ~200 MB, 4 levels), T100k (100,000 files of 50 B to 1.5 KiB in 5 levels)
//! and BIG (one 1 GiB file), then measures, in this order:
//!
//! 1. references on T10k:
//!    `find tree -type f -print0 | xargs -0 cat | openssl dgst -sha256`
//!    (best of 3), `git init && git add -A && git commit` and, when restic is
//!    installed, `restic init` + `restic backup` (then `sync`);
//! 2. `sgard add` of the tree (durable: sgard fsyncs itself), twice, each
//!    into a fresh repository, with a `cp -a` of the tree (then `sync`,
//!    timed apart) before, between and after;
//! 3. after making sure the tree is over 3 s old (the stat cache trusts only
//!    files whose mtime and ctime are over 2 s older than the run), one
//!    `sgard status` to fill the cache, then, best of 5 each: `sgard status`
//!    (cached), `git status --porcelain` (after one warm-up run) and
//!    `sgard checkpoint` with nothing changed (after one untimed checkpoint
//!    that records the message); `sgard --no-cache status` best of 3; then
//!    the watcher rows: with `sgard watch` running, `status` with nothing
//!    changed (best of 5) against `git status` and against a 10 ms budget,
//!    and `status` right after 10 files changed (best of 3, a fresh change
//!    each time; the files are among the 1% edit's) against `git status`;
//! 4. `sgard checkpoint` after appending a line to 1% of the files, twice;
//! 5. `sgard restore --force` into an empty HOME, twice, again between
//!    `cp -a` runs (each restored tree is compared with the edited one,
//!    untimed);
//! 6. `sgard --version` (best of 10), `sgard identity` (manifest load, best
//!    of 5) and `sgard lock`/`unlock` of one entry (manifest load + durable
//!    save, best of 10 alternating);
//! 7. T100k: `git init && git add -A && git commit`, `sgard add`, the
//!    filling `status`, then cached `status`, `git status --porcelain` and an
//!    unchanged `checkpoint` (best of 3 each), the watcher rows as in 3
//!    (best of 3), a checkpoint after a 1% edit,
//!    `diff`, `log`, `list --json`, `identity`, `lock`, `unlock`, `verify`
//!    and a `restore --force` into an empty HOME, each with its peak RSS
//!    (the largest is checked against 100 MiB);
//! 8. BIG: `openssl dgst -sha256` and `sha256sum` of the cached file (best
//!    of 2 each; the faster is the one-core SHA-256 reference), then twice:
//!    a `cp` of the file (the cost of writing 1 GiB into the page cache),
//!    `sgard add` of it into a fresh repository (chunked, the default) and
//!    into one with `chunking --off` (stored whole), with peak RSS;
//! 9. GROW (see [`grow`]): a 64 MiB file with a one-byte edit and a
//!    one-byte insert, and a 10 MiB history with 30 daily appends, a
//!    checkpoint after each change: repository growth and time, beside
//!    `git commit -a` of the same changes.
//!
//! Before each step that writes a copy of a tree, a scratch file is written
//! and deleted so that the step writes into memory the VM already holds
//! (see [`recycle_memory`]).
//!
//! With `--json FILE`, the best-of table's rows (each with every run's
//! ratio) and the run's date, commit and machine also go to FILE as JSON
//! (see [`crate::results`]), which `sgard-bench chart` draws.
//!
//! Each ratio uses the best time of each side. The file-creating steps are
//! interleaved with their `cp -a` references because on a shared virtual
//! disk their speed drifts several-fold within minutes; timing both sides
//! in the same minute keeps the drift out of the ratio.
//!
//! Every durable step (`sgard add`, `checkpoint`, `restore`, `cp -a`,
//! `restic backup`) starts after a `sync`. The sgard steps pin HOME,
//! `XDG_CACHE_HOME` and `XDG_STATE_HOME` to folders of the run (the restore
//! gets fresh ones, like a new machine), so the user's own cache is never
//! read or written.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

use crate::measure::{self, Sample};
use crate::results::{self, Limit, Quantity, ResultRow, Results, ratio_text};
use crate::tree::{self, TreeSpec};
use crate::{Ctx, compare_trees, free_bytes, sync};

mod grow;

/// Free space the T10k part wants: the tree, its six `cp -a` copies, the
/// git, restic and two sgard repositories and the two restored trees
/// (~3 GB; nothing is deleted mid-run), with room.
const T10K_MIN_FREE: u64 = 4 << 30;

/// Free space BIG wants: the file, its copy in each of four repositories
/// (two chunked, two whole), a copy and a 1 GiB scratch file at a time,
/// with room.
const BIG_MIN_FREE: u64 = 8 << 30;

/// How much older than the run start a file must be before sgard's stat
/// cache trusts it is 2 s; wait a little longer than that.
const CACHE_SETTLE: Duration = Duration::from_secs(3);

/// One line of the comparison table.
struct Check {
    target: String,
    /// The part that measured it (`T10k`, `T100k`, `BIG`, `GROW`); set by
    /// [`run_once`] after each part.
    tree: &'static str,
    sgard_what: String,
    sgard: String,
    reference_what: String,
    reference: String,
    /// `None`: not measured (the reference tool is missing).
    ratio: Option<f64>,
    limit: Limit,
}

impl Check {
    fn new(
        target: &str,
        sgard_what: &str,
        sgard: String,
        reference_what: &str,
        reference: String,
        ratio: f64,
        limit: Limit,
    ) -> Self {
        Check {
            target: target.to_owned(),
            tree: "",
            sgard_what: sgard_what.to_owned(),
            sgard,
            reference_what: reference_what.to_owned(),
            reference,
            ratio: Some(ratio),
            limit,
        }
    }

    /// A time ratio `sgard / reference`, at most `limit`.
    fn time(
        target: &str,
        sgard_what: &str,
        sgard: Duration,
        reference_what: &str,
        reference: Duration,
        limit: f64,
    ) -> Self {
        Check::new(
            target,
            sgard_what,
            secs(sgard),
            reference_what,
            secs(reference),
            sgard.as_secs_f64() / reference.as_secs_f64().max(1e-9),
            Limit::AtMost(limit),
        )
    }
}

/// One raw measurement, for the details table.
struct Raw {
    what: String,
    wall: Duration,
    /// CPU seconds and peak RSS KiB, when measured.
    extra: Option<(Option<Duration>, u64)>,
    note: String,
}

/// Everything the run collects.
#[derive(Default)]
struct Report {
    raws: Vec<Raw>,
    checks: Vec<Check>,
    notes: Vec<String>,
}

impl Report {
    /// Records and prints one measurement.
    fn raw(&mut self, what: &str, wall: Duration, extra: Option<&Sample>, note: &str) {
        let extra = extra.map(|s| (s.cpu, s.peak_rss_kib));
        let mut line = format!("  {what:<44} {:>10}", secs(wall));
        if let Some((cpu, rss)) = extra {
            let _ = write!(
                line,
                "  CPU {:>7}  peak RSS {:>7.1} MiB",
                cpu.map_or_else(|| "n/a".to_owned(), secs),
                rss as f64 / 1024.0
            );
        }
        if !note.is_empty() {
            let _ = write!(line, "  ({note})");
        }
        println!("{line}");
        self.raws.push(Raw {
            what: what.to_owned(),
            wall,
            extra,
            note: note.to_owned(),
        });
    }

    fn note(&mut self, s: String) {
        println!("  {s}");
        self.notes.push(s);
    }
}

/// Seconds with millisecond resolution, or milliseconds below 0.1 s.
fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 0.1 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.3} s")
    }
}

/// The folders of one sgard "machine": HOME, the repository and the
/// machine-local cache and state folders.
struct Sgard<'a> {
    bin: &'a Path,
    repo: PathBuf,
    home: PathBuf,
    cache: PathBuf,
    state: PathBuf,
}

impl Sgard<'_> {
    /// `sgard --repo REPO ARGS...` with HOME and the XDG folders pinned.
    fn cmd<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut c = Command::new(self.bin);
        c.arg("--repo")
            .arg(&self.repo)
            .args(args)
            .env("HOME", &self.home)
            .env("XDG_CACHE_HOME", &self.cache)
            .env("XDG_STATE_HOME", &self.state)
            .env("SGARD_HOSTNAME", "sgard-bench")
            .env_remove("SGARD_REPO")
            .env_remove("SGARD_NOW")
            .env_remove("SGARD_REMOTE")
            .current_dir(&self.home);
        c
    }
}

/// Runs `cmd` once without any wrapper (so short commands are not charged
/// for GNU time's own exec), stdout and stderr to `log.out`/`log.err`;
/// fails when it exits non-zero. Returns the wall time.
fn time_plain(cmd: &mut Command, log: &Path) -> Result<Duration> {
    let out = log.with_extension("out");
    let err = log.with_extension("err");
    cmd.stdin(Stdio::null())
        .stdout(fs::File::create(&out).with_context(|| format!("creating {}", out.display()))?)
        .stderr(fs::File::create(&err).with_context(|| format!("creating {}", err.display()))?);
    let start = Instant::now();
    let status = cmd
        .status()
        .with_context(|| format!("running {}", cmd.get_program().display()))?;
    let wall = start.elapsed();
    if !status.success() {
        bail!(
            "{} failed ({status}):\n{}",
            describe(cmd),
            fs::read_to_string(&err).unwrap_or_default()
        );
    }
    Ok(wall)
}

/// Runs `cmd` under the harness's RSS method (GNU time when present);
/// fails when it exits non-zero.
fn time_rss(ctx: &Ctx, cmd: &Command, log: &Path) -> Result<Sample> {
    let s = measure::run(&ctx.rss, cmd, log)?;
    if !s.status.success() {
        bail!(
            "{} failed ({}):\n{}",
            describe(cmd),
            s.status,
            fs::read_to_string(log.with_extension("err")).unwrap_or_default()
        );
    }
    Ok(s)
}

/// The fastest of `n` runs of `f`.
fn best_of(n: usize, mut f: impl FnMut(usize) -> Result<Duration>) -> Result<Duration> {
    let mut best = Duration::MAX;
    for i in 0..n {
        best = best.min(f(i)?);
    }
    Ok(best)
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// `sh -c SCRIPT` in `cwd`.
fn sh(script: &str, cwd: &Path) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).current_dir(cwd);
    c
}

/// Times one `sync`.
fn time_sync() -> Duration {
    let t = Instant::now();
    sync();
    t.elapsed()
}

/// Whether `prog ARG` runs and exits 0.
fn runs(prog: &str, arg: &str) -> bool {
    Command::new(prog)
        .arg(arg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// git with no system or user configuration, its repository in `git_dir`
/// and its work tree `work`.
fn git(git_dir: &Path, work: &Path, script: &str) -> Command {
    let mut c = sh(script, work);
    c.env("GIT_DIR", git_dir)
        .env("GIT_WORK_TREE", work)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "sgard-bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "sgard-bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid");
    c
}

/// What `compare` runs.
pub struct Parts {
    /// T10k (10,000 files).
    pub t10k: bool,
    /// GROW (a big file's versions).
    pub grow: bool,
    /// BIG (the 1 GiB file).
    pub big: bool,
    /// T100k (100,000 files).
    pub t100k: bool,
    /// How many times everything runs.
    pub runs: usize,
    /// Where to write every row as JSON (see [`results`]), if anywhere.
    pub json: Option<PathBuf>,
}

/// Runs the comparison `parts.runs` times, printing each run's tables, then
/// each target's best run.
///
/// Nothing is deleted until the end. On ext4 without a journal (this
/// project's benchmark VM) the inode allocator skips, one inode-table read
/// at a time, every inode freed in the last 60 seconds (300 while its
/// inode-table block is still dirty; `recently_deleted()` in
/// `fs/ext4/ialloc.c`), so creating files soon after deleting a
/// 10,000-file tree runs several times slower (`cp -a` of T10k went from
/// 0.6 s to 5-10 s, nearly all of it system time in `recently_deleted` and
/// `find_inode_bit`). For the same reason, leave a minute (after a `sync`)
/// between invocations.
pub fn run(ctx: &Ctx, parts: &Parts) -> Result<()> {
    let start = Instant::now();
    let mut roots = Vec::new();
    let mut all = Vec::new();
    for n in 1..=parts.runs {
        println!("\n# Run {n} of {}", parts.runs);
        let root = tempfile::Builder::new()
            .prefix("sgard-bench-compare-")
            .tempdir_in(&ctx.dir)
            .with_context(|| format!("creating a temp folder in {}", ctx.dir.display()))?;
        let checks = run_once(ctx, parts, root.path())?;
        roots.push(root);
        all.push(checks);
    }
    if parts.runs > 1 {
        println!("\n# Best of {} runs\n", parts.runs);
        print!("{}", best_table(&all));
    }
    let seconds = start.elapsed().as_secs_f64();
    println!("\ncompare took {seconds:.0} s in all");
    if let Some(path) = &parts.json {
        let rows = result_rows(&all);
        let results = Results {
            schema: results::SCHEMA,
            meta: meta(ctx, parts.runs, &rows, seconds),
            rows,
        };
        results.write(path)?;
        println!("wrote {} rows to {}", results.rows.len(), path.display());
    }
    for root in roots {
        if ctx.keep {
            println!("kept {}", root.keep().display());
        } else {
            root.close().context("removing a compare temp folder")?;
        }
    }
    Ok(())
}

/// One run of everything in `r`; prints its tables and returns its checks.
fn run_once(ctx: &Ctx, parts: &Parts, r: &Path) -> Result<Vec<Check>> {
    let run_start = Instant::now();
    let mut rep = Report::default();
    if parts.t10k {
        match free_bytes(&ctx.dir) {
            Some(free) if free < T10K_MIN_FREE => bail!(
                "{} has {:.1} GiB free; compare needs at least {} GiB for T10k",
                ctx.dir.display(),
                free as f64 / f64::from(1 << 30),
                T10K_MIN_FREE >> 30
            ),
            _ => {}
        }
        t10k_part(ctx, r, &mut rep)?;
        tag(&mut rep, "T10k");
    } else {
        rep.note("T10k: skipped (--no-t10k)".to_owned());
    }

    if !parts.t100k {
        rep.note("T100k: skipped (--no-t100k)".to_owned());
    } else {
        match free_bytes(&ctx.dir) {
            Some(free) if free < T100K_MIN_FREE => rep.note(format!(
                "T100k: skipped, {} has {:.1} GiB free and T100k needs {} GiB",
                ctx.dir.display(),
                free as f64 / f64::from(1 << 30),
                T100K_MIN_FREE >> 30
            )),
            _ => {
                t100k_part(ctx, &r.join("t100k"), &mut rep)?;
                tag(&mut rep, "T100k");
            }
        }
    }

    if !parts.big {
        rep.note("BIG: skipped (--no-big)".to_owned());
    } else {
        match free_bytes(&ctx.dir) {
            Some(free) if free < BIG_MIN_FREE => rep.note(format!(
                "BIG: skipped, {} has {:.1} GiB free and BIG needs {} GiB",
                ctx.dir.display(),
                free as f64 / f64::from(1 << 30),
                BIG_MIN_FREE >> 30
            )),
            _ => {
                big_part(ctx, r, &mut rep)?;
                tag(&mut rep, "BIG");
            }
        }
    }

    if !parts.grow {
        rep.note("GROW: skipped (--no-grow)".to_owned());
    } else {
        match free_bytes(&ctx.dir) {
            Some(free) if free < grow::GROW_MIN_FREE => rep.note(format!(
                "GROW: skipped, {} has {:.1} GiB free and GROW needs {} GiB",
                ctx.dir.display(),
                free as f64 / f64::from(1 << 30),
                grow::GROW_MIN_FREE >> 30
            )),
            _ => {
                grow::grow_part(ctx, r, &mut rep)?;
                tag(&mut rep, "GROW");
            }
        }
    }

    println!();
    println!("## Measurements\n");
    print!("{}", raw_table(&rep.raws));
    println!();
    println!("## Targets\n");
    print!("{}", check_table(&rep.checks));
    if !rep.notes.is_empty() {
        println!();
        for n in &rep.notes {
            println!("* {n}");
        }
    }
    println!("\nthis run took {:.0} s", run_start.elapsed().as_secs_f64());
    Ok(rep.checks)
}

/// Sets the part of the checks the last part added.
fn tag(rep: &mut Report, tree: &'static str) {
    for c in rep.checks.iter_mut().filter(|c| c.tree.is_empty()) {
        c.tree = tree;
    }
}

/// One target across the runs.
struct Best<'a> {
    /// The first run's check: the target's name, limit and what is measured.
    first: &'a Check,
    /// The best run's check and ratio, if any run measured it.
    best: Option<(&'a Check, f64)>,
    /// Every run's ratio, in run order.
    every: Vec<Option<f64>>,
}

/// Each target's best run: the lowest ratio of an "at most" target, the
/// highest of an "at least" one, with every run's ratio.
fn bests(runs: &[Vec<Check>]) -> Vec<Best<'_>> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let same: Vec<&Check> = runs
                .iter()
                .filter_map(|r| r.get(i))
                .filter(|x| x.target == c.target)
                .collect();
            let better = |a: f64, b: f64| match c.limit {
                Limit::AtMost(_) => a < b,
                Limit::AtLeast(_) => a > b,
            };
            let mut best: Option<(&Check, f64)> = None;
            for x in &same {
                if let Some(r) = x.ratio
                    && best.is_none_or(|(_, b)| better(r, b))
                {
                    best = Some((x, r));
                }
            }
            Best {
                first: c,
                best,
                every: same.iter().map(|x| x.ratio).collect(),
            }
        })
        .collect()
}

/// Each target's best run beside every run's ratio, as a table.
fn best_table(runs: &[Vec<Check>]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| target | sgard | best sgard value | reference value | best ratio | every run | limit | met |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---|---:|---|");
    for b in bests(runs) {
        let c = b.first;
        let every: Vec<String> = b
            .every
            .iter()
            .map(|x| x.map_or_else(|| "n/a".to_owned(), |r| ratio_text(r, c.limit)))
            .collect();
        let (value, reference, ratio, met) = match b.best {
            Some((b, r)) => (
                b.sgard.clone(),
                b.reference.clone(),
                ratio_text(r, b.limit),
                if b.limit.met(r) { "yes" } else { "**no**" },
            ),
            None => (
                c.sgard.clone(),
                "n/a".to_owned(),
                "n/a".to_owned(),
                "not measured",
            ),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {ratio} | {} | {} | {met} |",
            cell(&c.target),
            cell(&c.sgard_what),
            cell(&value),
            cell(&reference),
            every.join(", "),
            c.limit.describe()
        );
    }
    s
}

/// Every target's best run, for `--json`.
fn result_rows(runs: &[Vec<Check>]) -> Vec<ResultRow> {
    bests(runs)
        .into_iter()
        .map(|b| {
            let shown = b.best.map_or(b.first, |(c, _)| c);
            ResultRow {
                name: b.first.target.clone(),
                tree: b.first.tree.to_owned(),
                sgard_what: shown.sgard_what.clone(),
                sgard: Quantity::parse(&shown.sgard),
                reference_what: shown.reference_what.clone(),
                reference: Quantity::parse(&shown.reference),
                best_ratio: b.best.map(|(_, r)| r),
                ratios: b.every,
                limit: b.first.limit,
                met: b.best.map(|(c, r)| c.limit.met(r)),
            }
        })
        .collect()
}

/// The run's metadata, for `--json`; the parts are those that gave rows.
fn meta(ctx: &Ctx, runs: usize, rows: &[ResultRow], seconds: f64) -> results::Meta {
    let (commit, dirty) = results::source_commit();
    let sgard_version = Command::new(&ctx.sgard)
        .arg("version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_or_else(
            |_| "unknown".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        );
    let mut parts: Vec<String> = Vec::new();
    for r in rows {
        if !parts.contains(&r.tree) {
            parts.push(r.tree.clone());
        }
    }
    results::Meta {
        date: results::now(),
        commit,
        dirty,
        sgard_version,
        runs,
        parts,
        seconds: (seconds * 10.0).round() / 10.0,
        machine: results::Machine {
            cpu: crate::cpu_model(),
            cores: thread::available_parallelism().map_or(1, std::num::NonZero::get),
            kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
                .map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned()),
        },
    }
}

/// Free space T100k wants: the tree (~435 MB on disk: a block per file),
/// the git and sgard repositories and a restored tree, with room.
const T100K_MIN_FREE: u64 = 3 << 30;

/// How many runs each T100k status and checkpoint gets (each is ~0.3 s).
const T100K_RUNS: usize = 3;

/// The peak RSS budget of every command on T100k.
const T100K_RSS_MIB: f64 = 100.0;

/// T100k: cached status and unchanged checkpoint against `git status`,
/// and the peak RSS of every command people run on such a home.
fn t100k_part(ctx: &Ctx, r: &Path, rep: &mut Report) -> Result<()> {
    let spec = tree::t100k();
    let home = r.join("home");
    let logs = r.join("logs");
    let git_dir = r.join("git");
    for d in [&home, &logs, &git_dir] {
        fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let log = |name: &str| logs.join(name);
    let tree_dir = home.join("tree");
    print!(
        "\n[T100k] generating {} files, {:.1} MB ... ",
        spec.files.len(),
        spec.total_bytes() as f64 / 1e6
    );
    io::stdout().flush()?;
    let t = Instant::now();
    spec.write(&home)?;
    sync();
    let tree_written = Instant::now();
    println!("{:.2} s", t.elapsed().as_secs_f64());

    println!("[T100k] git");
    let commit = time_plain(
        &mut git(
            &git_dir,
            &tree_dir,
            "git init -q && git add -A && git commit -q -m bench",
        ),
        &log("git-commit"),
    )?;
    rep.raw(
        "T100k: git init && git add -A && git commit",
        commit,
        None,
        "",
    );

    println!("[T100k] sgard");
    let sg = Sgard {
        bin: &ctx.sgard,
        repo: r.join("repo"),
        home: home.clone(),
        cache: r.join("xdg-cache"),
        state: r.join("xdg-state"),
    };
    // Every command's peak RSS: (what, KiB).
    let mut peaks: Vec<(String, u64)> = Vec::new();
    let mut measured =
        |rep: &mut Report, what: &str, args: &[&str], name: &str| -> Result<Sample> {
            let s = time_rss(ctx, &sg.cmd(args), &log(name))?;
            rep.raw(&format!("T100k: sgard {what}"), s.wall, Some(&s), "");
            peaks.push((format!("`{what}`"), s.peak_rss_kib));
            Ok(s)
        };
    time_plain(&mut sg.cmd(["init"]), &log("sgard-init"))?;
    sync();
    measured(rep, "add tree (first add)", &["add", "tree"], "sgard-add")?;
    let since = tree_written.elapsed();
    if since < CACHE_SETTLE {
        thread::sleep(CACHE_SETTLE - since);
    }
    measured(
        rep,
        "status (filling the stat cache)",
        &["status", "--exit-code"],
        "sgard-status-fill",
    )?;
    let status = best_of(T100K_RUNS, |i| {
        time_plain(
            &mut sg.cmd(["status", "--exit-code"]),
            &log(&format!("sgard-status-{i}")),
        )
    })?;
    rep.raw("T100k: sgard status (cached, best of 3)", status, None, "");
    measured(
        rep,
        "status (cached)",
        &["status", "--exit-code"],
        "sgard-status-rss",
    )?;

    time_plain(
        &mut git(&git_dir, &tree_dir, "git status --porcelain"),
        &log("git-status-warmup"),
    )?;
    let git_status = best_of(T100K_RUNS, |i| {
        time_plain(
            &mut git(&git_dir, &tree_dir, "git status --porcelain"),
            &log(&format!("git-status-{i}")),
        )
    })?;
    let porcelain =
        fs::read_to_string(log("git-status-0").with_extension("out")).unwrap_or_default();
    if !porcelain.trim().is_empty() {
        bail!("git status --porcelain reports changes in an unchanged T100k:\n{porcelain}");
    }
    rep.raw(
        "T100k: git status --porcelain (warm, best of 3)",
        git_status,
        None,
        "",
    );

    time_plain(
        &mut sg.cmd(["checkpoint", "-m", "bench unchanged"]),
        &log("sgard-checkpoint-first"),
    )?;
    let ckpt = best_of(T100K_RUNS, |i| {
        sync();
        time_plain(
            &mut sg.cmd(["checkpoint", "-m", "bench unchanged"]),
            &log(&format!("sgard-checkpoint-same-{i}")),
        )
    })?;
    rep.raw(
        "T100k: sgard checkpoint, nothing changed (best of 3)",
        ckpt,
        None,
        "",
    );
    measured(
        rep,
        "checkpoint (nothing changed)",
        &["checkpoint", "-m", "bench unchanged"],
        "sgard-checkpoint-rss",
    )?;
    watcher_rows(&sg, "T100k", &spec, git_status, T100K_RUNS, &logs, rep)?;

    let edited = spec.edit_one_percent(&home)?;
    sync();
    measured(
        rep,
        &format!("checkpoint ({edited} files edited)"),
        &["checkpoint", "-m", "bench edit"],
        "sgard-checkpoint-edit",
    )?;
    measured(rep, "diff", &["diff"], "sgard-diff")?;
    measured(rep, "log", &["log"], "sgard-log")?;
    measured(rep, "list --json", &["list", "--json"], "sgard-list")?;
    measured(rep, "identity", &["identity"], "sgard-identity")?;
    let one = "tree/a0/b0/c0/d0/f00000.bin";
    measured(rep, "lock ENTRY", &["lock", one], "sgard-lock")?;
    measured(rep, "unlock ENTRY", &["unlock", one], "sgard-unlock")?;
    measured(rep, "verify", &["verify"], "sgard-verify")?;

    // Restore into an empty HOME, like a new machine.
    let home2 = r.join("home-restore");
    fs::create_dir(&home2)?;
    let sg2 = Sgard {
        bin: &ctx.sgard,
        repo: sg.repo.clone(),
        home: home2.clone(),
        cache: r.join("xdg-cache-restore"),
        state: r.join("xdg-state-restore"),
    };
    sync();
    let s = time_rss(ctx, &sg2.cmd(["restore", "--force"]), &log("sgard-restore"))?;
    rep.raw(
        "T100k: sgard restore --force into an empty HOME",
        s.wall,
        Some(&s),
        "",
    );
    peaks.push(("`restore --force`".to_owned(), s.peak_rss_kib));
    let checked = compare_trees(&home, &home2)?;
    println!("  restored tree verified: {checked} files identical");

    rep.checks.push(Check::time(
        "T100k status, unchanged",
        "`status` (cached)",
        status,
        "`git status --porcelain`",
        git_status,
        1.0,
    ));
    rep.checks.push(Check::time(
        "T100k checkpoint, unchanged",
        "`checkpoint` (cached)",
        ckpt,
        "`git status --porcelain`",
        git_status,
        1.0,
    ));
    let (what, kib) = peaks
        .iter()
        .max_by_key(|(_, k)| *k)
        .cloned()
        .unwrap_or_default();
    let mib = kib as f64 / 1024.0;
    rep.checks.push(Check::new(
        "T100k peak RSS, every command",
        &format!("largest: {what}"),
        format!("{mib:.1} MiB"),
        "budget",
        format!("{T100K_RSS_MIB:.0} MiB"),
        mib / T100K_RSS_MIB,
        Limit::AtMost(1.0),
    ));
    Ok(())
}

/// Memory recycled (see [`recycle_memory`]) before each step that writes a
/// copy of T10k: twice its size.
const T10K_RECYCLE: u64 = 512 << 20;

/// How many times each file-creating sgard step (first add, checkpoint
/// after an edit, restore) runs; `cp -a` runs once before, between and
/// after them, so that each side sees the same disk weather.
const ROUNDS: usize = 2;
/// Runs of each step that takes well under a second (best of these counts):
/// those are the steps the VM's scheduling noise moves most.
const FAST_RUNS: usize = 5;

/// The best `cp -a tree` times of one phase (a folder creation-heavy step
/// on a shared virtual disk varies several-fold from minute to minute, so
/// the references are taken right next to the sgard runs they judge).
struct CpBest {
    /// `cp -a` alone: the copy is in the page cache.
    plain: Duration,
    /// `cp -a` then `sync`: the copy is on disk.
    durable: Duration,
    runs: usize,
}

impl CpBest {
    fn new() -> Self {
        CpBest {
            plain: Duration::MAX,
            durable: Duration::MAX,
            runs: 0,
        }
    }

    /// One `sync; cp -a TREE DEST; sync` into a fresh DEST under `r` (kept
    /// until the end of the run: see [`run`] on why nothing is deleted
    /// mid-run).
    fn round(&mut self, phase: &str, tree_dir: &Path, r: &Path, rep: &mut Report) -> Result<()> {
        let dst = r.join(format!("cp-{}-{}", phase.replace(' ', "-"), self.runs));
        fs::create_dir(&dst).with_context(|| format!("creating {}", dst.display()))?;
        recycle_memory(&r.join("recycle"), T10K_RECYCLE)?;
        sync();
        let log = r.join("logs").join(format!("cp-{phase}-{}", self.runs));
        let cp = time_plain(Command::new("cp").arg("-a").arg(tree_dir).arg(&dst), &log)?;
        let cp_sync = time_sync();
        rep.raw(
            &format!("cp -a tree ({phase} #{})", self.runs + 1),
            cp,
            None,
            &format!("then sync {}", secs(cp_sync)),
        );
        self.plain = self.plain.min(cp);
        self.durable = self.durable.min(cp + cp_sync);
        self.runs += 1;
        Ok(())
    }
}

/// The absolute budget of a `status` with the watcher running and nothing
/// changed: a shell prompt's.
const WATCH_BUDGET: Duration = Duration::from_millis(10);

/// How many files the watcher's "changed" row edits.
const WATCH_EDITED: usize = 10;

/// The watcher rows (issue 36): with `sgard watch` running on `sg`,
/// `status` when nothing changed (best of `runs`) against `git status
/// --porcelain` without fsmonitor (`git_status`) and against
/// [`WATCH_BUDGET`]; and `status` right after [`WATCH_EDITED`] files of the
/// 1% edit changed (best of 3, a fresh change before each) against `git
/// status`. Each row is checked to measure what it says: the watcher's
/// state is read back from `status --json`, and the changed rows must
/// report exactly the edited files as modified.
fn watcher_rows(
    sg: &Sgard,
    name: &str,
    spec: &TreeSpec,
    git_status: Duration,
    runs: usize,
    logs: &Path,
    rep: &mut Report,
) -> Result<()> {
    let log = |n: &str| logs.join(n);
    let out = log("sgard-watch.out");
    let err = log("sgard-watch.err");
    let mut child = sg
        .cmd(["watch"])
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).with_context(|| format!("creating {}", out.display()))?)
        .stderr(fs::File::create(&err).with_context(|| format!("creating {}", err.display()))?)
        .spawn()
        .context("starting sgard watch")?;
    let rows = (|| -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let up = sg
                .cmd(["watch", "--check"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .context("running sgard watch --check")?
                .success();
            if up {
                break;
            }
            if let Some(st) = child.try_wait()? {
                bail!(
                    "sgard watch stopped ({st}):\n{}",
                    fs::read_to_string(&err).unwrap_or_default()
                );
            }
            if Instant::now() > deadline {
                bail!("sgard watch did not answer within 120 s");
            }
            thread::sleep(Duration::from_millis(100));
        }
        // The watcher's state as the last status used it.
        let state = |tag: &str| -> Result<String> {
            let l = log(&format!("sgard-status-watch-json-{tag}"));
            time_plain(&mut sg.cmd(["status", "--json"]), &l)?;
            let text = fs::read_to_string(l.with_extension("out"))?;
            let v: serde_json::Value =
                serde_json::from_str(&text).context("reading status --json")?;
            Ok(v["watch"]["state"].as_str().unwrap_or("none").to_owned())
        };
        // The first status looks at everything and keeps a token; the
        // second keeps its lines.
        for i in 0..2 {
            time_plain(
                &mut sg.cmd(["status"]),
                &log(&format!("sgard-status-watch-warm-{i}")),
            )?;
        }
        let unchanged = best_of(runs, |i| {
            time_plain(
                &mut sg.cmd(["status", "--exit-code"]),
                &log(&format!("sgard-status-watch-{i}")),
            )
        })?;
        let s = state("unchanged")?;
        if s != "unchanged" {
            bail!("a status with the watcher and nothing changed was {s:?}, not \"unchanged\"");
        }
        rep.raw(
            &format!("{name}: sgard status, watcher running, unchanged (best of {runs})"),
            unchanged,
            None,
            "",
        );
        let mut changed = Duration::MAX;
        for i in 0..3 {
            let n = spec.edit_first(&sg.home, WATCH_EDITED)?;
            let l = log(&format!("sgard-status-watch-edit-{i}"));
            changed = changed.min(time_plain(&mut sg.cmd(["status"]), &l)?);
            let text = fs::read_to_string(l.with_extension("out"))?;
            let modified = text.lines().filter(|l| l.starts_with("modified")).count();
            if modified != n {
                bail!(
                    "status with the watcher after {n} files changed reported {modified} modified"
                );
            }
        }
        spec.edit_first(&sg.home, WATCH_EDITED)?;
        let s = state("edited")?;
        if s != "narrowed" {
            bail!(
                "a status with the watcher after {WATCH_EDITED} files changed was {s:?}, not \"narrowed\""
            );
        }
        rep.raw(
            &format!(
                "{name}: sgard status, watcher running, {WATCH_EDITED} files changed (best of 3)"
            ),
            changed,
            None,
            "a fresh change before each",
        );
        rep.checks.push(Check::time(
            &format!("{name} status with the watcher, unchanged"),
            "`status`, `sgard watch` running",
            unchanged,
            "`git status --porcelain` (no fsmonitor)",
            git_status,
            1.0,
        ));
        rep.checks.push(Check::time(
            &format!("{name} status with the watcher, unchanged, absolute"),
            "`status`, `sgard watch` running",
            unchanged,
            "budget",
            WATCH_BUDGET,
            1.0,
        ));
        rep.checks.push(Check::time(
            &format!("{name} status with the watcher, {WATCH_EDITED} files changed"),
            "`status`, `sgard watch` running",
            changed,
            "`git status --porcelain` (no fsmonitor)",
            git_status,
            1.0,
        ));
        Ok(())
    })();
    // Stopped as a user stops it (SIGTERM), so it removes its socket.
    let _ = Command::new("kill")
        .arg(child.id().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
    rows
}

fn t10k_part(ctx: &Ctx, r: &Path, rep: &mut Report) -> Result<()> {
    let spec = tree::t10k();
    let home = r.join("home");
    let logs = r.join("logs");
    let git_dir = r.join("git");
    for d in [&home, &logs] {
        fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let log = |name: &str| logs.join(name);
    let files = spec.files.len();
    let bytes = spec.total_bytes();
    let tree_dir = home.join("tree");

    print!(
        "\n[T10k] generating {files} files, {:.1} MB ... ",
        bytes as f64 / 1e6
    );
    io::stdout().flush()?;
    let t = Instant::now();
    spec.write(&home)?;
    sync();
    let tree_written = Instant::now();
    println!("{:.2} s", t.elapsed().as_secs_f64());

    // ---- references -------------------------------------------------------
    println!("[T10k] references");
    let pipeline = "find tree -type f -print0 | xargs -0 cat | openssl dgst -sha256";
    let hash_all = best_of(3, |i| {
        time_plain(&mut sh(pipeline, &home), &log(&format!("openssl-{i}")))
    })?;
    let digest = fs::read_to_string(log("openssl-0").with_extension("out")).unwrap_or_default();
    if !digest.contains('=') {
        bail!("the openssl pipeline printed no digest: {digest:?}");
    }
    rep.raw(&format!("{pipeline} (best of 3)"), hash_all, None, "");

    fs::create_dir_all(&git_dir)?;
    let git_commit = time_plain(
        &mut git(
            &git_dir,
            &tree_dir,
            "git init -q && git add -A && git commit -q -m bench",
        ),
        &log("git-commit"),
    )?;
    rep.raw("git init && git add -A && git commit", git_commit, None, "");

    let restic = if runs("restic", "version") {
        let repo = r.join("restic");
        let pw = r.join("restic-password");
        fs::write(&pw, "sgard-bench\n")?;
        let restic = |args: &[&str]| {
            let mut c = Command::new("restic");
            c.args(args)
                .arg("--repo")
                .arg(&repo)
                .arg("--password-file")
                .arg(&pw)
                .env_remove("RESTIC_PASSWORD")
                .env_remove("RESTIC_REPOSITORY")
                .env("RESTIC_CACHE_DIR", r.join("restic-cache"))
                .current_dir(&home);
            c
        };
        time_plain(&mut restic(&["init"]), &log("restic-init"))?;
        recycle_memory(&r.join("recycle"), T10K_RECYCLE)?;
        sync();
        let backup = time_plain(
            &mut restic(&["backup", "-q", "tree"]),
            &log("restic-backup"),
        )?;
        let backup_sync = time_sync();
        rep.raw("restic backup tree", backup, None, "");
        rep.raw("sync after restic backup", backup_sync, None, "");
        Some(backup + backup_sync)
    } else {
        rep.note("restic: not installed (Debian: `apt-get install restic`)".to_owned());
        None
    };

    // ---- sgard ------------------------------------------------------------
    println!("[T10k] sgard");
    let sg = Sgard {
        bin: &ctx.sgard,
        repo: r.join("repo"),
        home: home.clone(),
        cache: r.join("xdg-cache"),
        state: r.join("xdg-state"),
    };
    // First add, ROUNDS times into fresh repositories (the first is kept
    // for the steps below), between `cp -a` runs.
    let mut cp_add = CpBest::new();
    let mut add = Duration::MAX;
    for i in 0..ROUNDS {
        cp_add.round("add phase", &tree_dir, r, rep)?;
        let this = if i == 0 {
            Sgard {
                bin: sg.bin,
                repo: sg.repo.clone(),
                home: sg.home.clone(),
                cache: sg.cache.clone(),
                state: sg.state.clone(),
            }
        } else {
            Sgard {
                bin: sg.bin,
                repo: r.join(format!("repo-{i}")),
                home: sg.home.clone(),
                cache: r.join(format!("xdg-cache-{i}")),
                state: r.join(format!("xdg-state-{i}")),
            }
        };
        time_plain(&mut this.cmd(["init"]), &log(&format!("sgard-init-{i}")))?;
        recycle_memory(&r.join("recycle"), T10K_RECYCLE)?;
        sync();
        let s = time_rss(
            ctx,
            &this.cmd(["add", "tree"]),
            &log(&format!("sgard-add-{i}")),
        )?;
        rep.raw(
            &format!("sgard add tree (first add #{})", i + 1),
            s.wall,
            Some(&s),
            "",
        );
        add = add.min(s.wall);
    }
    cp_add.round("add phase", &tree_dir, r, rep)?;

    // The stat cache trusts only files over 2 s older than the run.
    let since = tree_written.elapsed();
    if since < CACHE_SETTLE {
        thread::sleep(CACHE_SETTLE - since);
    }
    time_plain(
        &mut sg.cmd(["status", "--exit-code"]),
        &log("sgard-status-fill"),
    )?;
    // The index holds the manifest, base and stat cache (one per
    // repository, under the state folder).
    let index_bytes: u64 = fs::read_dir(sg.state.join("sgard").join("repos"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| fs::metadata(e.path().join("index")).ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    rep.note(format!(
        "index after the filling `sgard status`: {index_bytes} bytes under $XDG_STATE_HOME/sgard/repos/"
    ));

    let status = best_of(FAST_RUNS, |i| {
        time_plain(
            &mut sg.cmd(["status", "--exit-code"]),
            &log(&format!("sgard-status-{i}")),
        )
    })?;
    rep.raw(
        "sgard status (stat cache filled, best of 5)",
        status,
        None,
        "",
    );
    let status_nc = best_of(3, |i| {
        time_plain(
            &mut sg.cmd(["--no-cache", "status", "--exit-code"]),
            &log(&format!("sgard-status-nc-{i}")),
        )
    })?;
    rep.raw("sgard --no-cache status (best of 3)", status_nc, None, "");

    time_plain(
        &mut git(&git_dir, &tree_dir, "git status --porcelain"),
        &log("git-status-warmup"),
    )?;
    let git_status = best_of(FAST_RUNS, |i| {
        time_plain(
            &mut git(&git_dir, &tree_dir, "git status --porcelain"),
            &log(&format!("git-status-{i}")),
        )
    })?;
    let porcelain =
        fs::read_to_string(log("git-status-0").with_extension("out")).unwrap_or_default();
    if !porcelain.trim().is_empty() {
        bail!("git status --porcelain reports changes in an unchanged tree:\n{porcelain}");
    }
    rep.raw(
        "git status --porcelain (warm, best of 5)",
        git_status,
        None,
        "",
    );

    // One untimed run records the message, so every timed one has nothing
    // to record.
    time_plain(
        &mut sg.cmd(["checkpoint", "-m", "bench unchanged"]),
        &log("sgard-checkpoint-first"),
    )?;
    let ckpt_same = best_of(FAST_RUNS, |i| {
        sync();
        time_plain(
            &mut sg.cmd(["checkpoint", "-m", "bench unchanged"]),
            &log(&format!("sgard-checkpoint-same-{i}")),
        )
    })?;
    rep.raw(
        "sgard checkpoint, nothing changed (best of 5)",
        ckpt_same,
        None,
        "",
    );
    watcher_rows(&sg, "T10k", &spec, git_status, FAST_RUNS, &logs, rep)?;

    // Checkpoint after a 1% edit, ROUNDS times (each round appends to the
    // same 1% again).
    let mut ckpt_edit = Duration::MAX;
    let mut edited_bytes = 0;
    for i in 0..ROUNDS {
        let edited = spec.edit_one_percent(&home)?;
        edited_bytes = spec
            .edited_files()
            .map(|f| fs::metadata(home.join(&f.rel)).map_or(0, |m| m.len()))
            .sum();
        sync();
        let s = time_rss(
            ctx,
            &sg.cmd(["checkpoint", "-m", "bench edit"]),
            &log(&format!("sgard-checkpoint-edit-{i}")),
        )?;
        rep.raw(
            &format!("sgard checkpoint after a 1% edit (#{})", i + 1),
            s.wall,
            Some(&s),
            &format!("{edited} files edited, {edited_bytes} bytes to hash"),
        );
        ckpt_edit = ckpt_edit.min(s.wall);
    }
    // What hashing only the edited files costs, at the pipeline's rate.
    let hash_edited = hash_all.mul_f64(edited_bytes as f64 / bytes as f64);
    rep.raw(
        "hashing the edited files (at the pipeline's rate)",
        hash_edited,
        None,
        "derived",
    );

    // Restore into an empty HOME (fresh machine-local folders too), ROUNDS
    // times, between `cp -a` runs; each restored tree is verified.
    let mut cp_restore = CpBest::new();
    let mut restore = Duration::MAX;
    for i in 0..ROUNDS {
        cp_restore.round("restore phase", &tree_dir, r, rep)?;
        let home2 = r.join(format!("home-restore-{i}"));
        fs::create_dir(&home2)?;
        let sg2 = Sgard {
            bin: &ctx.sgard,
            repo: sg.repo.clone(),
            home: home2.clone(),
            cache: r.join(format!("xdg-cache-restore-{i}")),
            state: r.join(format!("xdg-state-restore-{i}")),
        };
        recycle_memory(&r.join("recycle"), T10K_RECYCLE)?;
        sync();
        let s = time_rss(
            ctx,
            &sg2.cmd(["restore", "--force"]),
            &log(&format!("sgard-restore-{i}")),
        )?;
        rep.raw(
            &format!("sgard restore --force into an empty HOME (#{})", i + 1),
            s.wall,
            Some(&s),
            "",
        );
        restore = restore.min(s.wall);
        let checked = compare_trees(&home, &home2)?;
        println!("  restored tree verified: {checked} files identical");
    }
    cp_restore.round("restore phase", &tree_dir, r, rep)?;

    // ---- start-up and manifest load/save ----------------------------------
    let version = best_of(10, |i| {
        time_plain(
            &mut sg.cmd(["--version"]),
            &log(&format!("sgard-version-{i}")),
        )
    })?;
    rep.raw("sgard --version (best of 10)", version, None, "");
    let identity = best_of(5, |i| {
        time_plain(
            &mut sg.cmd(["identity"]),
            &log(&format!("sgard-identity-{i}")),
        )
    })?;
    rep.raw(
        "sgard identity (10,000-entry manifest load, best of 5)",
        identity,
        None,
        "",
    );
    let one = "tree/a0/b0/c0/f0000.bin";
    let lock = best_of(10, |i| {
        let verb = if i % 2 == 0 { "lock" } else { "unlock" };
        time_plain(&mut sg.cmd([verb, one]), &log(&format!("sgard-{verb}-{i}")))
    })?;
    rep.raw(
        "sgard lock/unlock ENTRY (load + durable save, best of 10)",
        lock,
        None,
        "",
    );

    // ---- targets ------------------------------------------------------------
    rep.checks.push(Check::time(
        "1 status, unchanged",
        "`status` (cached)",
        status,
        "`git status --porcelain`",
        git_status,
        1.0,
    ));
    rep.checks.push(Check::time(
        "1 checkpoint, unchanged",
        "`checkpoint` (cached)",
        ckpt_same,
        "`git status --porcelain`",
        git_status,
        1.0,
    ));
    rep.checks.push(Check::time(
        "(1) status, no cache",
        "`--no-cache status`",
        status_nc,
        "`git status --porcelain`",
        git_status,
        2.0,
    ));
    let edit_ref = ckpt_same * 2 + hash_edited;
    rep.checks.push(Check::new(
        "2 checkpoint, 1% edited",
        "`checkpoint` (best of 2)",
        secs(ckpt_edit),
        &format!(
            "2 × unchanged checkpoint ({}) + hashing {edited_bytes} B ({})",
            secs(ckpt_same),
            secs(hash_edited)
        ),
        secs(edit_ref),
        ckpt_edit.as_secs_f64() / edit_ref.as_secs_f64().max(1e-9),
        Limit::AtMost(1.0),
    ));
    match restic {
        Some(backup) => rep.checks.push(Check::time(
            "3 first add vs restic",
            "`add` (durable, best of 2)",
            add,
            "`restic backup` + `sync`",
            backup,
            0.5,
        )),
        None => rep.checks.push(Check {
            target: "3 first add vs restic".to_owned(),
            tree: "",
            sgard_what: "`add` (durable, best of 2)".to_owned(),
            sgard: secs(add),
            reference_what: "restic: not installed (Debian: `apt-get install restic`)".to_owned(),
            reference: "n/a".to_owned(),
            ratio: None,
            limit: Limit::AtMost(0.5),
        }),
    }
    rep.checks.push(Check::time(
        "3 first add vs cp + hash",
        "`add` (durable, best of 2)",
        add,
        "`cp -a` + `sync` (best of 3, interleaved) + openssl pipeline",
        cp_add.durable + hash_all,
        2.0,
    ));
    rep.checks.push(Check::time(
        "(3) first add vs cp + hash, no sync",
        "`add` (durable, best of 2)",
        add,
        "`cp -a` (page cache; best of 3, interleaved) + openssl pipeline",
        cp_add.plain + hash_all,
        2.0,
    ));
    rep.checks.push(Check::time(
        "5 restore",
        "`restore --force` (durable, best of 2)",
        restore,
        "`cp -a` + `sync` (best of 3, interleaved)",
        cp_restore.durable,
        1.2,
    ));
    rep.checks.push(Check::time(
        "(5) restore, no sync",
        "`restore --force` (durable, best of 2)",
        restore,
        "`cp -a` (page cache; best of 3, interleaved)",
        cp_restore.plain,
        1.2,
    ));
    let load_save = lock.saturating_sub(version);
    rep.checks.push(Check::new(
        "6 manifest load + save",
        "`lock ENTRY` − `--version`",
        secs(load_save),
        "budget",
        "25 ms".to_owned(),
        load_save.as_secs_f64() / 0.025,
        Limit::AtMost(1.0),
    ));
    let load = identity.saturating_sub(version);
    rep.checks.push(Check::new(
        "(6) manifest load only",
        "`identity` − `--version`",
        secs(load),
        "budget",
        "10 ms".to_owned(),
        load.as_secs_f64() / 0.010,
        Limit::AtMost(1.0),
    ));
    rep.checks.push(Check::new(
        "6 start-up",
        "`--version`",
        secs(version),
        "budget",
        "5 ms".to_owned(),
        version.as_secs_f64() / 0.005,
        Limit::AtMost(1.0),
    ));
    Ok(())
}

fn big_part(ctx: &Ctx, r: &Path, rep: &mut Report) -> Result<()> {
    let spec: TreeSpec = tree::big();
    let home = r.join("big-home");
    let logs = r.join("logs");
    fs::create_dir_all(&home)?;
    fs::create_dir_all(&logs)?;
    let log = |name: &str| logs.join(name);
    let bytes = spec.total_bytes();
    print!("\n[BIG] generating one {} MiB file ... ", bytes >> 20);
    io::stdout().flush()?;
    let t = Instant::now();
    spec.write(&home)?;
    sync();
    println!("{:.2} s", t.elapsed().as_secs_f64());

    let openssl = best_of(2, |i| {
        time_plain(
            Command::new("openssl")
                .args(["dgst", "-sha256", "big.img"])
                .current_dir(&home),
            &log(&format!("big-openssl-{i}")),
        )
    })?;
    rep.raw(
        "openssl dgst -sha256 big.img (cached, best of 2)",
        openssl,
        None,
        &format!("{:.0} MB/s", bytes as f64 / 1e6 / openssl.as_secs_f64()),
    );
    let sha256sum = best_of(2, |i| {
        time_plain(
            Command::new("sha256sum").arg("big.img").current_dir(&home),
            &log(&format!("big-sha256sum-{i}")),
        )
    })?;
    rep.raw(
        "sha256sum big.img (cached, best of 2)",
        sha256sum,
        None,
        &format!("{:.0} MB/s", bytes as f64 / 1e6 / sha256sum.as_secs_f64()),
    );
    let (one_core, one_core_what) = if openssl <= sha256sum {
        (openssl, "`openssl dgst -sha256` (1 core)")
    } else {
        (sha256sum, "`sha256sum` (1 core)")
    };

    // ROUNDS first adds, each into a fresh repository, each after a `cp` of
    // the file (the cost of writing 1 GiB into the page cache here).
    let mbs = |d: Duration| bytes as f64 / 1e6 / d.as_secs_f64().max(1e-9);
    let mut add = Duration::MAX;
    let mut whole = Duration::MAX;
    let mut copy = Duration::MAX;
    let mut peak_kib = 0;
    for i in 0..ROUNDS {
        recycle_memory(&r.join("recycle"), bytes)?;
        let dst = r.join(format!("big-copy-{i}.img"));
        sync();
        let c = time_plain(
            Command::new("cp")
                .arg("big.img")
                .arg(&dst)
                .current_dir(&home),
            &log(&format!("big-cp-{i}")),
        )?;
        rep.raw(
            &format!("cp big.img (page cache, #{})", i + 1),
            c,
            None,
            &format!("{:.0} MB/s", mbs(c)),
        );
        copy = copy.min(c);
        // Deleting one file is harmless (see `run`), and hands its pages,
        // now backed by the host, to the add.
        fs::remove_file(&dst).with_context(|| format!("removing {}", dst.display()))?;
        // Chunked (the default), then stored whole (`chunking --off`, the
        // Go layout), each into a fresh repository.
        for (name, whole_file) in [("big", false), ("big-whole", true)] {
            if whole_file {
                recycle_memory(&r.join("recycle"), bytes)?;
            }
            let sg = Sgard {
                bin: &ctx.sgard,
                repo: r.join(format!("{name}-repo-{i}")),
                home: home.clone(),
                cache: r.join(format!("{name}-xdg-cache-{i}")),
                state: r.join(format!("{name}-xdg-state-{i}")),
            };
            time_plain(&mut sg.cmd(["init"]), &log(&format!("{name}-init-{i}")))?;
            if whole_file {
                time_plain(
                    &mut sg.cmd(["chunking", "--off"]),
                    &log(&format!("{name}-off-{i}")),
                )?;
            }
            sync();
            let s = time_rss(
                ctx,
                &sg.cmd(["add", "big.img"]),
                &log(&format!("{name}-add-{i}")),
            )?;
            let how = if whole_file {
                "whole, durable"
            } else {
                "durable"
            };
            rep.raw(
                &format!("sgard add big.img ({how}, #{})", i + 1),
                s.wall,
                Some(&s),
                &format!("{:.0} MB/s", mbs(s.wall)),
            );
            let best = if whole_file { &mut whole } else { &mut add };
            *best = (*best).min(s.wall);
            peak_kib = peak_kib.max(s.peak_rss_kib);
        }
    }

    rep.note(format!(
        "BIG: writing 1 GiB into the page cache (`cp big.img`, best of 2) runs at {:.0} MB/s here, \
         so a single-threaded read-hash-write loop cannot beat {:.0} MB/s \
         (1 / (1/SHA-256 + 1/copy)) before any fsync",
        mbs(copy),
        1.0 / (1.0 / mbs(one_core) + 1.0 / mbs(copy))
    ));

    let rss_mib = peak_kib as f64 / 1024.0;
    rep.checks.push(Check::new(
        "4 BIG add, peak RSS",
        "`add big.img` (largest of 2)",
        format!("{rss_mib:.1} MiB"),
        "budget",
        "64 MiB".to_owned(),
        rss_mib / 64.0,
        Limit::AtMost(1.0),
    ));
    for (target, what, best) in [
        ("4 BIG add, throughput", "`add big.img` chunked", add),
        (
            "4 BIG add whole, throughput",
            "`add big.img` with `chunking --off`",
            whole,
        ),
    ] {
        rep.checks.push(Check::new(
            target,
            &format!("{what}, MB/s (best of 2)"),
            format!("{:.0} MB/s", mbs(best)),
            one_core_what,
            format!("{:.0} MB/s", mbs(one_core)),
            mbs(best) / mbs(one_core),
            Limit::AtLeast(0.8),
        ));
    }
    let cores = thread::available_parallelism().map_or(1, std::num::NonZero::get);
    rep.note(format!(
        "BIG: a chunked add hashes every byte twice (the whole file's SHA-256, which the \
         manifest keeps, and each chunk's, which names it), on {cores} core(s) here: \
         at best {:.0} MB/s ({cores} × one-core SHA-256 / 2) before reading, cutting and writing",
        mbs(one_core) * cores.min(4) as f64 / 2.0
    ));
    Ok(())
}

/// Writes `bytes` of zeros to `path` and deletes it (untimed). On a VM
/// whose free memory goes back to the host (free page reporting, a
/// balloon), the first touch of such a page costs a hypervisor fault: the
/// first 1 GiB written into the page cache here took 3.5 s of system time,
/// the next (into the pages the first one freed) 0.27 s. Recycling memory
/// this way before each BIG step keeps that cost, which is the VM's and
/// not the program's, out of both sides of the comparison.
fn recycle_memory(path: &Path, bytes: u64) -> Result<()> {
    let chunk = vec![0u8; 1 << 20];
    let mut f = fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut left = bytes;
    while left > 0 {
        let n = usize::try_from(left.min(chunk.len() as u64))?;
        f.write_all(&chunk[..n])
            .with_context(|| format!("writing {}", path.display()))?;
        left -= n as u64;
    }
    drop(f);
    fs::remove_file(path).with_context(|| format!("removing {}", path.display()))
}

fn raw_table(raws: &[Raw]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| step | wall | CPU | peak RSS MiB | note |");
    let _ = writeln!(s, "|---|---:|---:|---:|---|");
    for r in raws {
        let (cpu, rss) = match r.extra {
            Some((cpu, rss)) => (
                cpu.map_or_else(|| "n/a".to_owned(), secs),
                format!("{:.1}", rss as f64 / 1024.0),
            ),
            None => (String::new(), String::new()),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {cpu} | {rss} | {} |",
            cell(&r.what),
            secs(r.wall),
            cell(&r.note)
        );
    }
    s
}

fn check_table(checks: &[Check]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| target | sgard | sgard value | reference | reference value | ratio | limit | met |"
    );
    let _ = writeln!(s, "|---|---|---:|---|---:|---:|---:|---|");
    for c in checks {
        let (ratio, met) = match c.ratio {
            Some(x) => (
                ratio_text(x, c.limit),
                if c.limit.met(x) { "yes" } else { "**no**" },
            ),
            None => ("n/a".to_owned(), "not measured"),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {ratio} | {} | {met} |",
            cell(&c.target),
            cell(&c.sgard_what),
            cell(&c.sgard),
            cell(&c.reference_what),
            cell(&c.reference),
            c.limit.describe()
        );
    }
    s
}

/// A Markdown table cell: `|` escaped.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_compare_the_right_way() {
        assert!(Limit::AtMost(2.0).met(2.0));
        assert!(!Limit::AtMost(2.0).met(2.01));
        assert!(Limit::AtLeast(0.8).met(0.9));
        assert!(!Limit::AtLeast(0.8).met(0.79));
    }

    #[test]
    fn time_checks_divide_sgard_by_reference() {
        let c = Check::time(
            "t",
            "s",
            Duration::from_millis(300),
            "r",
            Duration::from_millis(100),
            2.0,
        );
        assert!((c.ratio.unwrap_or(0.0) - 3.0).abs() < 1e-9);
        assert!(check_table(&[c]).contains("**no**"));
    }

    #[test]
    fn cells_escape_pipes_and_ratios_never_round_onto_the_limit() {
        assert_eq!(cell("a | b"), "a \\| b");
        assert_eq!(ratio_text(1.004, Limit::AtMost(1.0)), "1.004");
        assert_eq!(ratio_text(2.69, Limit::AtMost(2.0)), "2.69");
    }

    #[test]
    fn json_rows_take_each_target_best_run_and_every_ratio() {
        let run = |status_ms: u64, mbs: f64| {
            let mut rep = Report::default();
            rep.checks.push(Check::time(
                "1 status",
                "`status`",
                Duration::from_millis(status_ms),
                "`git status`",
                Duration::from_millis(100),
                1.0,
            ));
            tag(&mut rep, "T10k");
            rep.checks.push(Check::new(
                "4 BIG add",
                "`add`",
                format!("{mbs:.0} MB/s"),
                "SHA-256",
                "100 MB/s".to_owned(),
                mbs / 100.0,
                Limit::AtLeast(0.8),
            ));
            tag(&mut rep, "BIG");
            rep.checks
        };
        let rows = result_rows(&[run(150, 70.0), run(90, 90.0), run(120, 60.0)]);
        let round = |r: &[Option<f64>]| -> Vec<String> {
            r.iter()
                .map(|x| x.map_or_else(|| "n/a".to_owned(), |x| format!("{x:.6}")))
                .collect()
        };
        assert_eq!(rows.len(), 2);
        let (status, big) = (&rows[0], &rows[1]);
        assert_eq!((status.tree.as_str(), big.tree.as_str()), ("T10k", "BIG"));
        assert_eq!(round(&[status.best_ratio]), ["0.900000"]);
        assert_eq!(status.sgard.text, "90.00 ms");
        assert_eq!(
            (status.sgard.value, status.sgard.unit.as_deref()),
            (Some(90.0), Some("ms"))
        );
        assert_eq!(round(&status.ratios), ["1.500000", "0.900000", "1.200000"]);
        assert_eq!(status.met, Some(true));
        // An "at least" target's best is its highest ratio.
        assert_eq!(round(&[big.best_ratio]), ["0.900000"]);
        assert_eq!(big.sgard.unit.as_deref(), Some("MB/s"));
        assert_eq!(big.limit, Limit::AtLeast(0.8));
        assert_eq!(big.met, Some(true));
        assert!(best_table(&[run(150, 70.0)]).contains("| 1.50 | 1.50 | ≤ 1.00 | **no** |"));
    }

    #[test]
    fn secs_switches_to_milliseconds() {
        assert_eq!(secs(Duration::from_millis(1500)), "1.500 s");
        assert_eq!(secs(Duration::from_micros(2500)), "2.50 ms");
    }
}
