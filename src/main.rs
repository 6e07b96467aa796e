//! sgard: checkpoint dotfiles into a portable repository and restore them.
//!
//! This binary is a thin layer: it parses arguments, builds the
//! [`sgard_garden::Env`] (the only place the environment is read), calls one
//! `Garden` method per command, and renders the result. Exit codes: 0 ok,
//! 1 error, 2 usage, 3 integrity failure, 4 conflict or refused.

mod cli;
mod cmd;

mod exit;
mod ui;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

/// Ctrl-C, SIGTERM, SIGHUP: every long loop is asked to stop (it drops,
/// and so removes, its temp files, and the command ends with exit 130); a
/// process that cannot stop at once (waiting at a prompt) removes its
/// registered temp files and ends here after a second (once no section
/// that must end is open, see `sgard_store::cancel::commit_section`, or at
/// a second signal).
#[cfg(unix)]
fn watch_signals(done: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        // While an editor or a script runs, Ctrl-C is its own; a request
        // to end (SIGTERM, SIGHUP) takes effect once it is done.
        if signals
            .forever()
            .find(|&sig| {
                if !sgard_store::cancel::held() {
                    return true;
                }
                if sig != SIGINT {
                    sgard_store::cancel::defer();
                }
                false
            })
            .is_some()
        {
            stop(&done, || signals.pending().next().is_some());
        }
    });
}

/// Windows: Ctrl-C and `SIGTERM` (the C runtime's signals; Ctrl-Break
/// ends the process as Windows does, and the next run sweeps its temp
/// files), noticed within 20 ms; otherwise as on Unix.
#[cfg(windows)]
fn watch_signals(done: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use std::sync::atomic::{AtomicBool, Ordering};
    let hit = std::sync::Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        if signal_hook::flag::register(sig, hit.clone()).is_err() {
            return;
        }
    }
    std::thread::spawn(move || {
        loop {
            if done.load(Ordering::SeqCst) {
                return;
            }
            // While an editor or a script runs, Ctrl-C is its own.
            if hit.swap(false, Ordering::SeqCst) && !sgard_store::cancel::held() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        stop(&done, || hit.swap(false, Ordering::SeqCst));
    });
}

/// After a signal: every loop is asked to stop, and the process ends with
/// exit 130 a second later unless it ended by itself (`done`); a section
/// that must end is waited for unless `insists` says the user signalled
/// again.
fn stop(done: &std::sync::atomic::AtomicBool, mut insists: impl FnMut() -> bool) {
    sgard_store::cancel::request();
    // A second to stop; a section that must end (a restore putting in place
    // what its record names) is waited for, unless the user insists (a
    // second signal).
    let (mut ticks, mut insisted) = (0, false);
    while ticks < 50 || (sgard_store::cancel::committing() && !insisted) {
        if done.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        insisted |= insists();
        std::thread::sleep(std::time::Duration::from_millis(20));
        ticks += 1;
    }
    sgard_store::cancel::remove_registered();
    let _bar = ui::progress::pause();
    let _ = writeln!(io::stderr(), "\nsgard: interrupted");
    std::process::exit(i32::from(exit::INTERRUPTED));
}

/// Grows this process's table of file descriptors to 1,024 slots while it
/// still has one thread. Linux grows the table when a descriptor past its
/// end is opened (at 64, then 256, …); in a process with more than one
/// thread each growth waits for an RCU grace period, 5 to 12 ms on the
/// virtual machines measured, which was a fifth of a cached `status` on
/// 10,000 files (it opens the 256 fan-out folders of `blobs/` and one
/// folder per scanning thread). Opened once here, past slot 1,023, and
/// closed again, the room stays. Nothing depends on it: with a lower
/// descriptor limit, a lower mark is tried, then none.
#[cfg(unix)]
fn reserve_descriptors() {
    use std::os::fd::AsFd;
    let stderr = io::stderr();
    for mark in [1023, 255] {
        if rustix::io::fcntl_dupfd_cloexec(stderr.as_fd(), mark).is_ok() {
            return;
        }
    }
}

/// Windows has no such table.
#[cfg(windows)]
fn reserve_descriptors() {}

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => cli::better_suggestion(e).exit(),
    };
    reserve_descriptors();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    watch_signals(done.clone());
    let result = cmd::run(cli);
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    match result {
        Ok(code) => code,
        Err(err) => {
            if exit::is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            if exit::is_interrupted(&err) {
                let _ = writeln!(io::stderr().lock(), "sgard: interrupted");
                return ExitCode::from(exit::INTERRUPTED);
            }
            let code = exit::code_for(&err);
            ui::error(&err);
            ExitCode::from(code)
        }
    }
}
