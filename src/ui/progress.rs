//! The progress bar: drawn on stderr from the process's progress counters
//! (`sgard_store::progress`) by a thread of its own, once a phase of work
//! has taken longer than a moment, and only on a terminal.
//!
//! Bytes and files are shown with a rate and, when the total is known, an
//! ETA. With `-v` every finished path is listed (above the bar, if there is
//! one). Nothing is drawn with `-q` or when stderr is not a terminal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sgard_store::progress::{self, Reading};

use super::Verbosity;

/// The bar on screen, if any (the `-v` listing prints above it).
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Draws progress until dropped.
pub struct View {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl View {
    /// Starts watching the counters: a bar appears once a phase has run for
    /// `delay` (on a terminal, not with `-q`); with `-v` every finished path
    /// is listed on stderr.
    pub fn start(verbosity: Verbosity, delay: Duration) -> View {
        if verbosity == Verbosity::Verbose {
            progress::on_path(Box::new(|what, path| {
                let line = format!("{what} {}", super::clean(path));
                match BAR.lock().ok().as_deref().and_then(Option::as_ref) {
                    Some(bar) => bar.println(line),
                    None => {
                        let _ = writeln!(std::io::stderr().lock(), "{line}");
                    }
                }
            }));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let draw = verbosity != Verbosity::Quiet && std::io::stderr().is_terminal();
        let thread = draw.then(|| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || watch(&stop, delay))
        });
        View { stop, thread }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Ok(mut bar) = BAR.lock()
            && let Some(b) = bar.take()
        {
            b.finish_and_clear();
        }
    }
}

/// While held, no bar is drawn (see [`pause`]).
static PAUSED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Keeps the bar off the screen until dropped (see [`pause`]).
pub struct Paused(());

impl Drop for Paused {
    fn drop(&mut self) {
        PAUSED.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Removes the bar and keeps it away while the guard lives: a prompt or a
/// passphrase question is never drawn over.
pub fn pause() -> Paused {
    PAUSED.fetch_add(1, Ordering::SeqCst);
    hide();
    Paused(())
}

fn hide() {
    if let Ok(mut bar) = BAR.lock()
        && let Some(b) = bar.take()
    {
        b.finish_and_clear();
    }
}

fn watch(stop: &AtomicBool, delay: Duration) {
    let mut phase = 0;
    let mut since = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        let Some(r) = progress::now() else { continue };
        if r.phase != phase {
            phase = r.phase;
            since = Instant::now();
            hide();
            continue;
        }
        if since.elapsed() < delay {
            continue;
        }
        let Ok(mut slot) = BAR.lock() else { return };
        // Checked under the lock: `pause` counts, then clears under it.
        if PAUSED.load(Ordering::SeqCst) > 0 {
            continue;
        }
        let bar = slot.get_or_insert_with(|| new_bar(&r, since.elapsed()));
        show(bar, &r, since.elapsed());
    }
}

/// A bar for the phase `r` belongs to: measured in bytes when the bytes
/// to come are known, else in files (with the bytes as its message).
fn new_bar(r: &Reading, elapsed: Duration) -> ProgressBar {
    let (len, template) = if r.bytes_total > 0 {
        (
            Some(r.bytes_total),
            "{prefix} [{bar:30}] {binary_bytes}/{binary_total_bytes} \
             {binary_bytes_per_sec}, {eta} left {msg}",
        )
    } else if r.files_total > 0 {
        (
            Some(r.files_total),
            "{prefix} [{bar:30}] {pos}/{len} files, {msg}",
        )
    } else {
        (None, "{prefix} {spinner} {pos} files, {msg}")
    };
    // The phase began before the bar appears: its rate and ETA count from
    // the phase's start.
    let bar =
        ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr()).with_elapsed(elapsed);
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(r.label.clone());
    bar
}

fn show(bar: &ProgressBar, r: &Reading, elapsed: Duration) {
    if r.bytes_total > 0 {
        bar.set_length(r.bytes_total.max(r.bytes));
        bar.set_position(r.bytes);
        let files = if r.files_total > 0 {
            format!("({}/{} files)", r.files, r.files_total)
        } else {
            format!("({} files)", r.files)
        };
        bar.set_message(files);
    } else {
        if r.files_total > 0 {
            bar.set_length(r.files_total.max(r.files));
        }
        bar.set_position(r.files);
        let secs = elapsed.as_secs_f64().max(0.001);
        let mut msg = format!(
            "{}, {}/s",
            super::bytes(r.bytes),
            super::bytes((r.bytes as f64 / secs) as u64)
        );
        // Files finish at an even pace often enough for an estimate.
        if r.files_total >= 10 && r.files > 0 && r.files < r.files_total {
            let left = secs * (r.files_total - r.files) as f64 / r.files as f64;
            msg.push_str(&format!(
                ", {} left",
                indicatif::HumanDuration(Duration::from_secs_f64(left))
            ));
        }
        bar.set_message(msg);
    }
}
