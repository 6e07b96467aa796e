//! The docs test: every example in README.md and the book (docs/src/, but
//! the generated reference/) runs against the built binaries, every
//! relative link resolves, and the command reference is what `sgard man
//! --markdown` writes. The contract the pages are written to is in
//! ARCHITECTURE.md ("The docs test").
//!
//! `SGARD_DOCS_ONLY=README.md,docs/src/how-to/secrets.md` limits the
//! examples and links checked to those files (empty: all of them).

// Linux only: the pages run `sgard watch` (inotify) and the runner reads
// /proc (processes of a session's group); on other systems they cannot run
// as written.
#![cfg(target_os = "linux")]
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
    doc_files_of(std::env::var("SGARD_DOCS_ONLY").ok().as_deref())
}

/// `doc_files` for the value `only` of SGARD_DOCS_ONLY: one that names no
/// file (empty, `,`) is as if unset.
fn doc_files_of(only: Option<&str>) -> (Vec<PathBuf>, bool) {
    let root = root();
    if let Some(only) = only.filter(|o| o.split(',').any(|s| !s.trim().is_empty())) {
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

fn fixtures() -> PathBuf {
    root().join("tests/docs/fixtures")
}

fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

fn fail_with(what: &str, failures: &[String]) {
    if !failures.is_empty() {
        panic!("{} {what}:\n\n{}\n", failures.len(), failures.join("\n\n"));
    }
}

#[test]
fn examples() {
    let (files, all) = doc_files();
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
    let mut failures = report.failures.clone();
    if all {
        failures.extend(too_few(&report));
    }
    fail_with("failure(s) in the examples", &failures);
}

/// Fewer sessions or commands than the pages hold: the test became vacuous
/// (files not found, blocks not recognised, everything skipped). A file
/// left out whole for want of SGARD_MOTO_SERVER counts as a session, so
/// the test still passes without moto.
const MIN_SESSIONS: usize = 30;
const MIN_COMMANDS: usize = 400;

fn too_few(report: &Report) -> Option<String> {
    let sessions = report.sessions + report.without_moto;
    (sessions < MIN_SESSIONS || report.commands < MIN_COMMANDS).then(|| {
        format!(
            "only {} session(s) (and {} file(s) left for want of moto) and {} command(s) ran \
             (at least {MIN_SESSIONS} and {MIN_COMMANDS} expected): are the pages still found \
             and their blocks recognised?",
            report.sessions, report.without_moto, report.commands
        )
    })
}

/// SGARD_DOCS_BLESS rewrites only when it is `1`.
fn blessing(value: Option<&std::ffi::OsStr>) -> bool {
    value.is_some_and(|v| v == "1")
}

#[test]
fn links() {
    let root = root();
    let (mut files, all) = doc_files();
    if all {
        // The generated pages' links too (their examples are not run).
        files.extend(links::pages(&root.join("docs/src/reference")));
    }
    let mut failures = links::check(&root, &root.join("docs/src"), &files);
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
    let bless = blessing(std::env::var_os("SGARD_DOCS_BLESS").as_deref());
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
    assert_eq!(report.commands, 19, "commands and blocks run");
    assert_eq!(report.skips.len(), 1, "{:?}", report.skips);
    assert!(
        report.skips[0].contains("pass.md:90: cannot run in CI"),
        "{:?}",
        report.skips
    );
    assert!(
        !marker_running(),
        "the session's background process outlived it"
    );
    let links = links::check(&root(), &fixtures(), &[fixture("pass.md")]);
    assert!(links.is_empty(), "{links:?}");
}

/// Runs one failing fixture; its report.
fn report_of(name: &str, timeout: Duration) -> Report {
    let cfg = Config {
        moto: None,
        ..config(timeout)
    };
    run_files(&cfg, &[fixture(name)])
}

/// Runs one failing fixture; its failures.
fn failures_of(name: &str, timeout: Duration) -> String {
    report_of(name, timeout).failures.join("\n")
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
    let report = report_of("fail-sh.md", Duration::from_secs(20));
    let f = report.failures.join("\n");
    assert!(
        f.contains("fail-sh.md:4: this block failed (exit status 1)"),
        "{f}"
    );
    assert!(f.contains("the rest of this file was not run"), "{f}");
    assert!(!f.contains("not run\n"), "{f}");
    // Only the failing block ran: not the console block after it.
    assert_eq!(report.commands, 1, "commands and blocks run: {f}");
    assert_eq!(report.failures.len(), 1, "{f}");
}

/// Scripts and setup run with `set -o pipefail`: a failure inside a pipe
/// fails the setup.
#[test]
fn fixture_failing_pipe() {
    let report = report_of("fail-pipe.md", Duration::from_secs(20));
    let f = report.failures.join("\n");
    assert!(
        f.contains("fail-pipe.md:4: this docs-test setup failed (exit status 1)"),
        "{f}"
    );
    assert_eq!(report.commands, 1, "commands and blocks run: {f}");
}

/// A console command that exits non-zero fails, unless the next command
/// is exactly `echo $?`.
#[test]
fn fixture_exit_status() {
    let report = report_of("fail-status.md", Duration::from_secs(20));
    let f = report.failures.join("\n");
    assert!(
        f.contains("fail-status.md:4: exited with status 3: a command that fails must be followed by `$ echo $?`"),
        "{f}"
    );
    assert!(f.contains("--- its output:\n    out"), "{f}");
    assert!(!f.contains("fail-status.md:6:"), "{f}");
    // The last command of a block has no next command.
    assert!(f.contains("fail-status.md:11: exited with status 1"), "{f}");
    // `echo "$?"` is not `echo $?`.
    assert!(f.contains("fail-status.md:15: exited with status 1"), "{f}");
    assert_eq!(report.failures.len(), 3, "{f}");
    // A failed command does not end the file.
    assert_eq!(report.commands, 7, "{f}");
}

/// A session dropped in the middle (a panic, an early return) kills its
/// process group, and is gone when the drop returns.
#[test]
fn session_dropped_kills_its_group() {
    let _guard = lock();
    let cfg = Config {
        moto: None,
        ..config(Duration::from_secs(20))
    };
    let mut session = runner::Session::start(&cfg).unwrap();
    let group = session.group();
    let ran = session
        .command("sleep 314159 > /dev/null 2>&1 &\nsh -c 'sleep 314160' > /dev/null 2>&1 &")
        .unwrap();
    assert_eq!(ran.map(|r| r.0), Some(0));
    assert!(runner::group_alive(group));
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _session = session;
        panic!("a failure in the middle of a session");
    }));
    assert!(panicked.is_err());
    assert!(
        !runner::group_alive(group),
        "the session's processes outlived its drop"
    );
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
    let apart = "a skip must be right before a code block";
    // Followed by a paragraph, a list, a rule, a block quote.
    for line in [5, 14, 22, 30] {
        assert!(
            f.contains(&format!("fail-markup.md:{line}: {apart}")),
            "line {line}: {f}"
        );
    }
    assert!(
        f.contains("fail-markup.md:10: a console block's first line must be a command"),
        "{f}"
    );
    for line in [38, 42] {
        assert!(
            f.contains(&format!(
                "fail-markup.md:{line}: a docs-test comment must start its HTML block"
            )),
            "line {line}: {f}"
        );
    }
    assert!(
        f.contains("fail-markup.md:44: a docs-test comment must be alone in its HTML block"),
        "{f}"
    );
    assert_eq!(f.matches("fail-markup.md:").count(), 9, "{f}");
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
    assert_eq!(report.without_moto, 1);
    assert_eq!(report.skips.len(), 1);
}

#[test]
fn fixture_broken_links() {
    let f = links::check(&root(), &fixtures(), &[fixture("fail-links.md")]).join("\n");
    assert!(
        f.contains("fail-links.md:3: no-such-page.md: no such file"),
        "{f}"
    );
    assert!(f.contains("fail-links.md:3: pass.md#no-such-heading: tests/docs/fixtures/pass.md has no heading with the id `no-such-heading`"), "{f}");
    assert!(f.contains("fail-links.md:4: #nowhere:"), "{f}");
    // Out of the book (here the fixtures' folder) though the file exists.
    assert!(
        f.contains("fail-links.md:5: ../runner.rs: leaves the book; link to the repository file by URL or name it in text"),
        "{f}"
    );
    assert_eq!(f.lines().count(), 4, "{f}");
    // A file outside the book (README.md) may link anywhere.
    let outside = links::check(
        &root(),
        &root().join("docs/src"),
        &[fixture("fail-links.md")],
    );
    assert_eq!(outside.len(), 3, "{outside:?}");
}

#[test]
fn docs_only_empty_is_unset() {
    for only in [None, Some(""), Some(" "), Some(",")] {
        let (files, all) = doc_files_of(only);
        assert!(all, "{only:?}");
        assert!(files.len() > 30, "{only:?}: {files:?}");
    }
    let (files, all) = doc_files_of(Some("README.md"));
    assert!(!all);
    assert_eq!(files, vec![root().join("README.md")]);
}

#[test]
fn bless_only_on_1() {
    use std::ffi::OsStr;
    assert!(blessing(Some(OsStr::new("1"))));
    for v in ["", "0", "yes", "true"] {
        assert!(!blessing(Some(OsStr::new(v))), "{v:?}");
    }
    assert!(!blessing(None));
}

#[test]
fn too_few_examples_fail() {
    let report = |sessions, commands| Report {
        sessions,
        commands,
        ..Report::default()
    };
    assert!(too_few(&report(0, 0)).is_some());
    assert!(too_few(&report(29, 1000)).is_some());
    assert!(too_few(&report(100, 399)).is_some());
    assert!(too_few(&report(30, 400)).is_none());
    // Files left for want of moto count as sessions.
    let mut without = report(27, 400);
    without.without_moto = 3;
    assert!(too_few(&without).is_none());
    without.without_moto = 2;
    assert!(too_few(&without).is_some());
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
    // The roots alone, before the end, whitespace, a quote, `)`, `;`, `|`,
    // `&` or `>`.
    assert_eq!(runner::virtual_roots("ls /srv", t), "ls /tmp/T/srv");
    assert_eq!(
        runner::virtual_roots("ls /home /media\t/mnt\n'/srv' \"/srv\"", t),
        "ls /tmp/T/home /tmp/T/media\t/tmp/T/mnt\n'/tmp/T/srv' \"/tmp/T/srv\""
    );
    assert_eq!(
        runner::virtual_roots("(cd /srv);ls /mnt|wc; test -d /media&& x=/home>f", t),
        "(cd /tmp/T/srv);ls /tmp/T/mnt|wc; test -d /tmp/T/media&& x=/tmp/T/home>f"
    );
    // After each boundary character.
    assert_eq!(
        runner::virtual_roots(
            "a>/srv/1 <'/srv/2' {/srv/3,/mnt/4} x;/srv/5 y|/srv/6 z&/srv/7 \"/srv/8\"",
            t
        ),
        "a>/tmp/T/srv/1 <'/tmp/T/srv/2' {/tmp/T/srv/3,/tmp/T/mnt/4} x;/tmp/T/srv/5 \
         y|/tmp/T/srv/6 z&/tmp/T/srv/7 \"/tmp/T/srv/8\""
    );
    assert_eq!(runner::virtual_roots("</home", t), "</tmp/T/home");
    // Not a root: another name, a path inside another, an unknown boundary.
    for text in [
        "/homely /srvx /mnt2 /media-x /srv.bak /home,",
        "a/home/x ~/srv/a $X/mnt/b ./media/c -/srv",
        "http://h/srv/x",
    ] {
        assert_eq!(runner::virtual_roots(text, t), text);
    }
}
