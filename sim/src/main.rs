//! `sgard-sim`: runs seeds (or saved cases) against an sgard binary and
//! prints `N passed, M failed` last.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use sgard_sim::{Config, case, run, shrink};

/// A model-based simulation of machines, repositories and a server that
/// drives an sgard binary as a black box.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The sgard binary [default: `sgard` next to this program]
    #[arg(long, value_name = "PATH")]
    sgard: Option<PathBuf>,
    /// The sgardd binary [default: `sgardd` beside the sgard binary]
    #[arg(long, value_name = "PATH")]
    sgardd: Option<PathBuf>,
    /// How many seeds to run
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    /// The first seed
    #[arg(long, default_value_t = 0)]
    seed_start: u64,
    /// Operations per seed
    #[arg(long, default_value_t = 60)]
    steps: usize,
    /// Run these saved cases instead of seeds (each must pass)
    #[arg(long, value_name = "FILE", num_args = 1..)]
    replay: Vec<PathBuf>,
    /// Seeds run at once
    #[arg(long, short = 'j', default_value_t = 1)]
    jobs: usize,
    /// Write each failure's shrunk case into this folder
    #[arg(long, value_name = "DIR")]
    save: Option<PathBuf>,
    /// Report failures as found, without shrinking them
    #[arg(long)]
    no_shrink: bool,
    /// Seconds the shrinking of one failure may take
    #[arg(long, default_value_t = 300)]
    shrink_secs: u64,
    /// Keep the folder of a failing world (of every replayed one)
    #[arg(long)]
    keep: bool,
    /// Print every command and its outcome
    #[arg(long, short = 'v')]
    verbose: bool,
    /// Pass over failures of invariants whose name contains WORD (noted in
    /// the transcript), to look past a defect already known
    #[arg(long, value_name = "WORD")]
    skip: Vec<String>,
    /// Where worlds are made [default: the system's temp folder]
    #[arg(long, value_name = "DIR")]
    tmp: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let sgard = args.sgard.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join("sgard")))
            .unwrap_or_else(|| PathBuf::from("sgard"))
    });
    let sgardd = args
        .sgardd
        .clone()
        .unwrap_or_else(|| sgard.with_file_name("sgardd"));
    for b in [&sgard, &sgardd] {
        if !b.is_file() {
            eprintln!(
                "sgard-sim: error: {} is not there; build them (`cargo build --release` builds both) or name it with --sgard/--sgardd",
                b.display()
            );
            return ExitCode::from(2);
        }
    }
    let cfg = Config {
        sgard,
        sgardd,
        steps: args.steps,
        keep: args.keep,
        strace: sgard_sim::strace_works(),
        tmp: args.tmp.clone().unwrap_or_else(std::env::temp_dir),
        skip: args.skip.clone(),
    };
    if !cfg.strace {
        eprintln!("sgard-sim: strace cannot trace here: no full-disk faults");
    }
    let (passed, failed) = if args.replay.is_empty() {
        seeds(&cfg, &args)
    } else {
        replays(&cfg, &args)
    };
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn replays(cfg: &Config, args: &Args) -> (u64, u64) {
    let (mut passed, mut failed) = (0, 0);
    for f in &args.replay {
        let result = case::read(f).and_then(|ops| run::run_ops(cfg, &ops));
        match result {
            Ok((None, t)) => {
                if args.verbose {
                    eprintln!("{}", t.join("\n"));
                }
                println!("{}: ok", f.display());
                passed += 1;
            }
            Ok((Some(fail), t)) => {
                println!("{}: FAILED {fail}", f.display());
                eprintln!("{}", t.join("\n"));
                failed += 1;
            }
            Err(e) => {
                println!("{}: error: {e}", f.display());
                failed += 1;
            }
        }
    }
    (passed, failed)
}

fn seeds(cfg: &Config, args: &Args) -> (u64, u64) {
    let next = AtomicU64::new(args.seed_start);
    let end = args.seed_start + args.seeds;
    let tally = Mutex::new((0u64, 0u64));
    std::thread::scope(|s| {
        for _ in 0..args.jobs.max(1) {
            s.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= end {
                        break;
                    }
                    let ok = one_seed(cfg, args, seed);
                    if let Ok(mut t) = tally.lock() {
                        if ok {
                            t.0 += 1;
                        } else {
                            t.1 += 1;
                        }
                    }
                }
            });
        }
    });
    tally.into_inner().unwrap_or_default()
}

fn one_seed(cfg: &Config, args: &Args, seed: u64) -> bool {
    let t0 = Instant::now();
    let (ops, failure, transcript) = match run::run_seed(cfg, seed) {
        Ok(r) => (r.ops, r.failure, r.transcript),
        Err(e) => {
            println!("seed {seed}: error: {e}");
            return false;
        }
    };
    let Some(failure) = failure else {
        println!(
            "seed {seed}: ok ({} steps, {:.1} s)",
            ops.len(),
            t0.elapsed().as_secs_f64()
        );
        if args.verbose {
            eprintln!("{}", transcript.join("\n"));
        }
        return true;
    };
    println!("seed {seed}: FAILED {failure}");
    if args.verbose {
        eprintln!("{}", transcript.join("\n"));
    }
    let (ops, failure) = if args.no_shrink {
        (ops[..=failure.step.min(ops.len() - 1)].to_vec(), failure)
    } else {
        let cfg = Config {
            keep: false,
            ..cfg.clone()
        };
        match shrink::shrink(
            &cfg,
            &ops,
            &failure,
            Duration::from_secs(args.shrink_secs),
            |n| eprintln!("seed {seed}: shrunk to {n} operations"),
        ) {
            Ok(r) => r,
            Err(e) => {
                println!("seed {seed}: shrinking stopped: {e}");
                (ops[..=failure.step.min(ops.len() - 1)].to_vec(), failure)
            }
        }
    };
    let text = case::render(Some(seed), &failure, &ops);
    println!(
        "seed {seed}: {} operations reproduce it:\n{text}",
        ops.len()
    );
    if let Some(dir) = &args.save {
        save(dir, seed, &text);
    }
    false
}

fn save(dir: &Path, seed: u64, text: &str) {
    let p = dir.join(format!("seed-{seed}.case"));
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&p, text)) {
        eprintln!("sgard-sim: error: {}: {e}", p.display());
    } else {
        println!("saved {}", p.display());
    }
}
