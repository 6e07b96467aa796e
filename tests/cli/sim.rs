//! The simulation in the suite: every case `sgard-sim` found and we fixed
//! (`sim/cases/`) replays clean against this build, and a bounded number of
//! seeds run through the whole world (three homes, a shared folder, a git
//! origin, sgardd) with every invariant checked after every step.
//!
//! Thousands of seeds are for by hand: `cargo build --release && cargo run
//! --release -p sgard-sim -- --seeds 1000 -j 2` (README, *The simulation*).

use std::path::{Path, PathBuf};

use sgard_sim::{Config, case, run};

use crate::common::*;

/// Seeds each of the seed tests runs (three tests, so the harness runs
/// them side by side), and operations per seed.
const SEEDS: u64 = 8;
const STEPS: usize = 80;

/// A configuration on this build's binaries; `None` (the test skips) when
/// the world cannot be built here (no ssh-keygen or git).
fn config() -> Option<Config> {
    if !on_path("ssh-keygen") || !on_path("git") {
        eprintln!("skipping: the simulation needs ssh-keygen and git");
        return None;
    }
    Some(Config {
        sgard: TestEnv::bin(),
        sgardd: crate::common::sgardd_bin(),
        steps: STEPS,
        keep: false,
        strace: sgard_sim::strace_works(),
        tmp: std::env::temp_dir(),
        skip: Vec::new(),
    })
}

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sim/cases");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "case"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_saved_case_replays_clean() {
    let Some(cfg) = config() else { return };
    let all = cases();
    assert!(!all.is_empty(), "no cases under sim/cases");
    for f in all {
        let ops = case::read(&f).unwrap();
        let (failure, transcript) = run::run_ops(&cfg, &ops).unwrap();
        if let Some(fail) = failure {
            panic!(
                "{} fails again: {fail}\n{}",
                f.display(),
                transcript.join("\n")
            );
        }
    }
}

/// Runs seeds `from..from + SEEDS`; a failure shows its operations (a case
/// to save under `sim/cases/` once fixed).
fn seeds(from: u64) {
    let Some(cfg) = config() else { return };
    for seed in from..from + SEEDS {
        let r = run::run_seed(&cfg, seed).unwrap();
        if let Some(fail) = r.failure {
            panic!(
                "seed {seed}: {fail}\n{}\ntranscript:\n{}",
                case::render(Some(seed), &fail, &r.ops),
                r.transcript.join("\n")
            );
        }
    }
}

#[test]
fn seeds_0_to_7_hold_every_invariant() {
    seeds(0);
}

#[test]
fn seeds_8_to_15_hold_every_invariant() {
    seeds(8);
}

#[test]
fn seeds_16_to_23_hold_every_invariant() {
    seeds(16);
}
