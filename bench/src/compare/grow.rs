//! GROW: what keeping every version of a big file costs, in repository
//! growth and time per checkpoint, beside git doing the same.
//!
//! 1. A 64 MiB random file is added, then changed twice, a checkpoint after
//!    each: one byte overwritten in the middle (same size), then one byte
//!    inserted a quarter in (every later byte moves). A file stored whole
//!    costs 64 MiB per checkpoint; chunked, an edit costs the chunks around
//!    it plus the new chunk list.
//! 2. A 10 MiB text file (a shell history) is added, then 30 times 3 KiB of
//!    lines are appended and checkpointed (a month of days).
//!
//! git runs the same edits in its own repository (`git commit -a` each
//! time); its growth is that of loose objects, before any `git gc`, and its
//! packed size after one `git gc` is given too. Growth is the change in the
//! repository's apparent size (the sum of its files' lengths). After both
//! series, `sgard verify` checks every stored version, untimed.

use std::fs;
use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result};

use super::{Check, Limit, Report, Sgard, git, secs, time_plain, time_rss};
use crate::tree::Rng;
use crate::{Ctx, sync};

const MIB: u64 = 1 << 20;

/// The big file's size.
const BIG: u64 = 64 * MIB;

/// The history file's size before the appends.
const HISTORY: u64 = 10 * MIB;

/// Days of appends, and what each day appends.
const DAYS: usize = 30;
const DAY: usize = 3 * 1024;

/// The budget for one checkpoint of a one-byte change to the 64 MiB file:
/// a few 256 KiB chunks (the largest a chunk gets) and a 1,000-chunk list.
const EDIT_BUDGET: u64 = MIB;

/// The budget for one day's append: the last chunk rewritten (at most
/// 256 KiB) twice over, with the list and the snapshot.
const APPEND_BUDGET: u64 = 512 * 1024;

/// Free space GROW wants: the file, its copies in the sgard and git
/// repositories (git's loose objects are whole), the history series.
pub(super) const GROW_MIN_FREE: u64 = 1 << 30;

/// The sum of the lengths of the files under `root`.
fn apparent_size(root: &Path) -> Result<u64> {
    let mut n = 0;
    for e in walkdir::WalkDir::new(root) {
        let e = e.with_context(|| format!("walking {}", root.display()))?;
        if e.file_type().is_file() {
            n += e
                .metadata()
                .with_context(|| format!("reading {}", e.path().display()))?
                .len();
        }
    }
    Ok(n)
}

fn mib(b: u64) -> String {
    format!("{:.2} MiB", b as f64 / MIB as f64)
}

/// Writes `size` random bytes (or text) from stream `index` to `path`.
fn generate(path: &Path, size: u64, index: u64, text: bool) -> Result<()> {
    let mut rng = Rng::new(0x5_9a2d, index);
    let mut f = fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut buf = vec![0u8; MIB as usize];
    let mut left = size;
    while left > 0 {
        let n = usize::try_from(left.min(MIB))?;
        if text {
            rng.fill_text(&mut buf[..n]);
        } else {
            rng.fill(&mut buf[..n]);
        }
        f.write_all(&buf[..n])
            .with_context(|| format!("writing {}", path.display()))?;
        left -= n as u64;
    }
    f.sync_all()
        .with_context(|| format!("syncing {}", path.display()))
}

/// One series' growth and checkpoint times, for sgard and git.
#[derive(Default)]
struct Side {
    growth: Vec<u64>,
    time: Vec<Duration>,
}

/// Runs `change`, then an sgard checkpoint and a git commit, recording
/// each side's growth and time.
fn step(
    ctx: &Ctx,
    sg: &Sgard,
    git_dir: &Path,
    logs: &Path,
    name: &str,
    rep: &mut Report,
    sides: &mut (Side, Side),
) -> Result<()> {
    let before = apparent_size(&sg.repo)?;
    sync();
    let s = time_rss(
        ctx,
        &sg.cmd(["checkpoint", "-m", name]),
        &logs.join(format!("grow-sgard-{name}")),
    )?;
    let grew = apparent_size(&sg.repo)?.saturating_sub(before);
    let g_before = apparent_size(git_dir)?;
    sync();
    let g = time_plain(
        &mut git(git_dir, &sg.home, &format!("git commit -qam {name}")),
        &logs.join(format!("grow-git-{name}")),
    )?;
    let g_grew = apparent_size(git_dir)?.saturating_sub(g_before);
    if !name.starts_with("day-") || ["day-1", "day-2", "day-30"].contains(&name) {
        rep.raw(
            &format!("sgard checkpoint ({name})"),
            s.wall,
            Some(&s),
            &format!("+{}", mib(grew)),
        );
        rep.raw(
            &format!("git commit -a ({name})"),
            g,
            None,
            &format!("+{}", mib(g_grew)),
        );
    }
    sides.0.growth.push(grew);
    sides.0.time.push(s.wall);
    sides.1.growth.push(g_grew);
    sides.1.time.push(g);
    Ok(())
}

/// GROW (see the module comment).
pub(super) fn grow_part(ctx: &Ctx, r: &Path, rep: &mut Report) -> Result<()> {
    let home = r.join("grow-home");
    let logs = r.join("logs");
    fs::create_dir_all(&home)?;
    fs::create_dir_all(&logs)?;
    let big = home.join("big64.bin");
    let hist = home.join("history.txt");
    println!("\n[GROW] 64 MiB edit and insert, 10 MiB history with {DAYS} appends");
    generate(&big, BIG, 64, false)?;
    generate(&hist, HISTORY, 10, true)?;

    let sg = Sgard {
        bin: &ctx.sgard,
        repo: r.join("grow-repo"),
        home: home.clone(),
        cache: r.join("grow-xdg-cache"),
        state: r.join("grow-xdg-state"),
    };
    let git_dir = r.join("grow-git");
    time_plain(&mut sg.cmd(["init"]), &logs.join("grow-sgard-init"))?;
    time_plain(
        &mut git(
            &git_dir,
            &home,
            "git init -q && git add -A && git commit -qm add",
        ),
        &logs.join("grow-git-init"),
    )?;
    sync();
    let s = time_rss(
        ctx,
        &sg.cmd(["add", "big64.bin", "history.txt"]),
        &logs.join("grow-sgard-add"),
    )?;
    rep.raw(
        "sgard add big64.bin history.txt",
        s.wall,
        Some(&s),
        &format!("repository {}", mib(apparent_size(&sg.repo)?)),
    );

    // 1. One byte overwritten, then one inserted.
    let mut big_sides = (Side::default(), Side::default());
    let mut bytes = fs::read(&big).with_context(|| format!("reading {}", big.display()))?;
    let mid = bytes.len() / 2 + 12_345;
    bytes[mid] ^= 0x5a;
    fs::write(&big, &bytes).with_context(|| format!("writing {}", big.display()))?;
    step(ctx, &sg, &git_dir, &logs, "edit", rep, &mut big_sides)?;
    bytes.insert(bytes.len() / 4 + 777, b'!');
    fs::write(&big, &bytes).with_context(|| format!("writing {}", big.display()))?;
    drop(bytes);
    step(ctx, &sg, &git_dir, &logs, "insert", rep, &mut big_sides)?;

    // 2. A month of appends to the history.
    let mut hist_sides = (Side::default(), Side::default());
    let mut rng = Rng::new(0x5_9a2d, 1_000);
    let mut day = vec![0u8; DAY];
    for d in 1..=DAYS {
        rng.fill_text(&mut day);
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(&hist)
            .with_context(|| format!("opening {}", hist.display()))?;
        f.write_all(&day)
            .with_context(|| format!("appending to {}", hist.display()))?;
        drop(f);
        step(
            ctx,
            &sg,
            &git_dir,
            &logs,
            &format!("day-{d}"),
            rep,
            &mut hist_sides,
        )?;
    }

    time_plain(&mut sg.cmd(["verify"]), &logs.join("grow-sgard-verify"))?;
    let loose = apparent_size(&git_dir)?;
    time_plain(
        &mut git(&git_dir, &home, "git gc -q"),
        &logs.join("grow-git-gc"),
    )?;
    let packed = apparent_size(&git_dir)?;
    let repo = apparent_size(&sg.repo)?;
    rep.note(format!(
        "GROW: after everything the sgard repository holds {}, git's {} loose and {} after `git gc` \
         (the files: {} + {}; `sgard verify` checked every version)",
        mib(repo),
        mib(loose),
        mib(packed),
        mib(BIG + 1),
        mib(HISTORY + (DAYS * DAY) as u64)
    ));

    for (i, (what, limit_what)) in [
        ("edit", "one byte overwritten"),
        ("insert", "one byte inserted"),
    ]
    .into_iter()
    .enumerate()
    {
        let grew = big_sides.0.growth[i];
        rep.checks.push(Check::new(
            &format!("14 GROW 64 MiB {what}, growth"),
            &format!("checkpoint after {limit_what}"),
            mib(grew),
            "budget (git commit -a adds)",
            format!("{} ({})", mib(EDIT_BUDGET), mib(big_sides.1.growth[i])),
            grew as f64 / EDIT_BUDGET as f64,
            Limit::AtMost(1.0),
        ));
        rep.checks.push(Check::time(
            &format!("14 GROW 64 MiB {what}, time"),
            &format!("checkpoint after {limit_what}"),
            big_sides.0.time[i],
            "`git commit -a`",
            big_sides.1.time[i],
            1.0,
        ));
    }
    let total: u64 = hist_sides.0.growth.iter().sum();
    let git_total: u64 = hist_sides.1.growth.iter().sum();
    let worst = hist_sides.0.growth.iter().copied().max().unwrap_or(0);
    let mean =
        |t: &[Duration]| t.iter().sum::<Duration>() / u32::try_from(t.len().max(1)).unwrap_or(1);
    rep.checks.push(Check::new(
        "14 GROW 30 appends, growth",
        &format!("{DAYS} checkpoints, worst day {}", mib(worst)),
        mib(total),
        "budget (git loose objects)",
        format!("{} ({})", mib(APPEND_BUDGET * DAYS as u64), mib(git_total)),
        total as f64 / (APPEND_BUDGET * DAYS as u64) as f64,
        Limit::AtMost(1.0),
    ));
    rep.note(format!(
        "GROW: a history checkpoint took {} on average (git commit -a: {}); stored whole, the \
         {DAYS} days would have added {}",
        secs(mean(&hist_sides.0.time)),
        secs(mean(&hist_sides.1.time)),
        mib(DAYS as u64 * HISTORY)
    ));
    Ok(())
}
