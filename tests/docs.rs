//! The docs test: every example in README.md and the book (docs/src/, but
//! the generated reference/) runs against the built binaries, every
//! relative link resolves, and the command reference is what `sgard man
//! --markdown` writes. The contract the pages are written to is in
//! ARCHITECTURE.md ("The docs test").
//!
//! `SGARD_DOCS_ONLY=README.md,docs/src/how-to/secrets.md` limits the
//! examples and links checked to those files.

#![allow(missing_docs)]

mod docs {
    pub mod links;
    pub mod markdown;
    pub mod matcher;
    pub mod runner;
}

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use docs::runner::{Config, Report};
use docs::{links, runner};

/// Sessions use fixed ports: one at a time, across the tests too.
static SESSIONS: Mutex<()> = Mutex::new(());

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sgard() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sgard"))
}

/// The folder of sgard, with sgardd beside it (built by `cargo test
/// --workspace`, as the CLI's tests need it too).
fn bin_dir() -> PathBuf {
    let sgard = sgard();
    let sgardd = sgard.with_file_name(format!("sgardd{}", std::env::consts::EXE_SUFFIX));
    assert!(
        sgardd.exists(),
        "{} is missing: run the tests with `cargo test --workspace` (sgardd is built by the \
         sgard-server package), or `cargo build -p sgard-server` first",
        sgardd.display()
    );
    sgard.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn config(timeout: Duration) -> Config {
    Config {
        bin_dir: bin_dir(),
        timeout,
        moto: std::env::var("SGARD_MOTO_SERVER")
            .ok()
            .filter(|m| !m.is_empty()),
    }
}

/// README.md and the book's pages but the generated reference, or the
/// files SGARD_DOCS_ONLY names; and whether that is all of them.
fn doc_files() -> (Vec<PathBuf>, bool) {
    let root = root();
    if let Ok(only) = std::env::var("SGARD_DOCS_ONLY") {
        let files = only
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                let p = Path::new(s.trim());
                if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    root.join(p)
                }
            })
            .collect();
        return (files, false);
    }
    let reference = root.join("docs/src/reference");
    let mut files = vec![root.join("README.md")];
    files.extend(
        links::pages(&root.join("docs/src"))
            .into_iter()
            .filter(|p| !p.starts_with(&reference)),
    );
    (files, true)
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SESSIONS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn run_files(cfg: &Config, files: &[PathBuf]) -> Report {
    let _guard = lock();
    let root = root();
    let mut report = Report::default();
    for f in files {
        runner::run_file(cfg, f, &links::display(&root, f), &mut report);
    }
    report
}

fn fixture(name: &str) -> PathBuf {
    root().join("tests/docs/fixtures").join(name)
}

fn fail_with(what: &str, failures: &[String]) {
    if !failures.is_empty() {
        panic!("{} {what}:\n\n{}\n", failures.len(), failures.join("\n\n"));
    }
}

#[test]
fn examples() {
    let (files, _) = doc_files();
    let started = Instant::now();
    let report = run_files(&config(Duration::from_secs(60)), &files);
    let _ = writeln!(
        std::io::stderr(),
        "docs: {} file(s), {} session(s), {} command(s) and block(s) run, {} skip(s), {} \
         failure(s), {:.1} s",
        files.len(),
        report.sessions,
        report.commands,
        report.skips.len(),
        report.failures.len(),
        started.elapsed().as_secs_f64()
    );
    fail_with("failure(s) in the examples", &report.failures);
}

#[test]
fn links() {
    let root = root();
    let (mut files, all) = doc_files();
    if all {
        // The generated pages' links too (their examples are not run).
        files.extend(links::pages(&root.join("docs/src/reference")));
    }
    let mut failures = links::check(&root, &files);
    if all {
        failures.extend(links::orphans(&root, &root.join("docs/src")));
    }
    fail_with("broken link(s)", &failures);
}

const BEGIN: &str = "<!-- reference:begin -->";
const END: &str = "<!-- reference:end -->";

/// docs/src/reference/ is what the binary writes, and SUMMARY.md lists
/// each of its pages. `SGARD_DOCS_BLESS=1` rewrites both.
#[test]
fn reference() {
    let root = root();
    let dir = root.join("docs/src/reference");
    let bless = std::env::var_os("SGARD_DOCS_BLESS").is_some();
    let fresh = tempfile::tempdir().unwrap();
    let target = if bless {
        dir.clone()
    } else {
        fresh.path().to_path_buf()
    };
    let out = Command::new(sgard())
        .args(["man", "--markdown", "--dir"])
        .arg(&target)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sgard man --markdown: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let regenerate = "regenerate them with `cargo run -- man --markdown --dir docs/src/reference`";
    let mut failures = Vec::new();
    let generated = names(&target);
    for name in &generated {
        let want = fs::read_to_string(target.join(name)).unwrap();
        match fs::read_to_string(dir.join(name)) {
            Ok(have) if have == want => {}
            Ok(_) => failures.push(format!(
                "docs/src/reference/{name} is out of date: {regenerate}"
            )),
            Err(_) => failures.push(format!(
                "docs/src/reference/{name} is missing: {regenerate}"
            )),
        }
    }
    for name in names(&dir) {
        if !generated.contains(&name) {
            failures.push(format!(
                "docs/src/reference/{name} is no command's page: {regenerate} (which removes it)"
            ));
        }
    }
    // SUMMARY.md's block: the index, then each command's page.
    let mut block = String::from("- [Commands](reference/index.md)\n");
    for name in generated.iter().filter(|n| *n != "index.md") {
        let title = name.trim_end_matches(".md").replacen('-', " ", 1);
        block.push_str(&format!("  - [{title}](reference/{name})\n"));
    }
    let summary_path = root.join("docs/src/SUMMARY.md");
    let summary = fs::read_to_string(&summary_path).unwrap_or_default();
    match (summary.find(BEGIN), summary.find(END)) {
        (Some(b), Some(e)) if b < e => {
            let have = summary[b + BEGIN.len()..e].trim_start_matches('\n');
            if have != block {
                if bless {
                    let new = format!("{}{BEGIN}\n{block}{}", &summary[..b], &summary[e..]);
                    fs::write(&summary_path, new).unwrap();
                } else {
                    failures.push(format!(
                        "docs/src/SUMMARY.md: the list between {BEGIN} and {END} must be (or run \
                         `SGARD_DOCS_BLESS=1 cargo test --test docs reference`):\n{block}"
                    ));
                }
            }
        }
        _ => failures.push(format!("docs/src/SUMMARY.md: no {BEGIN} … {END} block")),
    }
    fail_with("problem(s) with the command reference", &failures);
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".md"))
                .collect()
        })
        .unwrap_or_default();
    // index.md first, then the commands in name order.
    names.sort_by_key(|n| (n != "index.md", n.clone()));
    names
}

// The runner itself, on the fixtures in tests/docs/fixtures/.

/// The fixture's marker process (`sleep 271828`) is running.
fn marker_running() -> bool {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| fs::read(e.path().join("cmdline")).is_ok_and(|c| c == b"sleep\x00271828\x00"))
}

#[test]
fn fixture_that_passes() {
    let cfg = Config {
        moto: None,
        ..config(Duration::from_secs(20))
    };
    let report = run_files(&cfg, &[fixture("pass.md")]);
    fail_with(
        "failure(s) in tests/docs/fixtures/pass.md",
        &report.failures,
    );
    assert_eq!(report.sessions, 1);
    assert_eq!(report.commands, 17, "commands and blocks run");
    assert_eq!(report.skips.len(), 1, "{:?}", report.skips);
    assert!(
        report.skips[0].contains("pass.md:78: cannot run in CI"),
        "{:?}",
        report.skips
    );
    assert!(
        !marker_running(),
        "the session's background process outlived it"
    );
    let links = links::check(&root(), &[fixture("pass.md")]);
    assert!(links.is_empty(), "{links:?}");
}

/// Runs one failing fixture; its failures.
fn failures_of(name: &str, timeout: Duration) -> String {
    let cfg = Config {
        moto: None,
        ..config(timeout)
    };
    let report = run_files(&cfg, &[fixture(name)]);
    report.failures.join("\n")
}

#[test]
fn fixture_wrong_output() {
    let f = failures_of("fail-output.md", Duration::from_secs(20));
    assert!(f.contains("fail-output.md:4: the output differs"), "{f}");
    assert!(
        f.contains(
            "    echo hello\n--- expected:\n    goodbye\n--- actual (exit status 0):\n    hello"
        ),
        "{f}"
    );
    assert!(f.contains("fail-output.md:8: the output differs"), "{f}");
    assert!(!f.contains("fail-output.md:6"), "{f}");
}

#[test]
fn fixture_failing_script() {
    let f = failures_of("fail-sh.md", Duration::from_secs(20));
    assert!(
        f.contains("fail-sh.md:4: this block failed (exit status 1)"),
        "{f}"
    );
    assert!(f.contains("the rest of this file was not run"), "{f}");
    assert!(!f.contains("not run\n"), "{f}");
}

#[test]
fn fixture_hanging_command() {
    let started = Instant::now();
    let f = failures_of("fail-hang.md", Duration::from_secs(1));
    assert!(
        f.contains("fail-hang.md:4: did not finish within 1 s"),
        "{f}"
    );
    // The command sleeps 600 s: far more than any wait for the other
    // sessions (they hold the same lock) and the 1 s timeout together.
    assert!(started.elapsed() < Duration::from_secs(300));
}

#[test]
fn fixture_markup_mistakes() {
    let f = failures_of("fail-markup.md", Duration::from_secs(20));
    assert!(
        f.contains("fail-markup.md:3: unknown docs-test directive `skipp typo`"),
        "{f}"
    );
    assert!(
        f.contains("fail-markup.md:5: `docs-test: skip` is not right before a code block"),
        "{f}"
    );
    assert!(
        f.contains("fail-markup.md:10: a console block's first line must be a command"),
        "{f}"
    );
}

#[test]
fn fixture_needs_moto() {
    let cfg = Config {
        moto: None,
        ..config(Duration::from_secs(20))
    };
    let report = run_files(&cfg, &[fixture("needs-moto.md")]);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.sessions, 0);
    assert_eq!(report.skips.len(), 1);
}

#[test]
fn fixture_broken_links() {
    let f = links::check(&root(), &[fixture("fail-links.md")]).join("\n");
    assert!(
        f.contains("fail-links.md:3: no-such-page.md: no such file"),
        "{f}"
    );
    assert!(f.contains("fail-links.md:3: pass.md#no-such-heading: tests/docs/fixtures/pass.md has no heading with the id `no-such-heading`"), "{f}");
    assert!(f.contains("fail-links.md:4: #nowhere:"), "{f}");
    assert_eq!(f.lines().count(), 3, "{f}");
}

#[test]
fn virtual_roots() {
    let t = "/tmp/T";
    assert_eq!(
        runner::virtual_roots(
            "ls /home/you x=/srv/a '/mnt/b' (/media/c) a:/home/d /homely a/home/x",
            t
        ),
        "ls /tmp/T/home/you x=/tmp/T/srv/a '/tmp/T/mnt/b' (/tmp/T/media/c) a:/tmp/T/home/d /homely a/home/x"
    );
}
