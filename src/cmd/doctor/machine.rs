//! The machine around sgard: its platform (what sgard does differently
//! there), git (and the repository's git state), the editor `sgard edit`
//! runs, and the shell completion.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::CommandFactory;
use sgard::context;
use sgard::remote::probe::{Finding, Level};

use super::{Parts, show};
use crate::cli::Cli;
use crate::cmd::Ctx;

/// Runs a program to read its output (stdin closed); `None` when it cannot
/// run or fails.
fn output(cmd: &mut Command) -> Option<String> {
    let o = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        // `git status` may otherwise refresh the index: doctor changes nothing.
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim_end().to_owned())
}

/// The system, and what sgard does on it that differs from elsewhere: how
/// the home's file system compares names, how writes are flushed, where
/// machine-local state lives.
pub(super) fn platform(ctx: &Ctx, out: &mut Vec<Finding>) {
    let folding = ctx
        .env
        .folding
        .unwrap_or_else(|| sgard_garden::folding::Folding::probe(&ctx.env.home));
    let names = if folding.folds() {
        format!(
            "the home's file system {}: two entries that differ only so are refused at add and \
             restore",
            folding.says()
        )
    } else {
        "the home's file system keeps case and Unicode forms apart".to_owned()
    };
    let state = ctx
        .env
        .state_dir
        .as_deref()
        .map_or_else(|| "none".to_owned(), |d| show(ctx, d));
    let mut parts = vec![
        format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        names,
    ];
    parts.extend(specifics().iter().map(|s| (*s).to_owned()));
    parts.push(format!("machine-local state in {state} (XDG)"));
    out.push(Finding::ok("platform", parts.join("; ")));
}

/// What sgard does on this platform that it does not do elsewhere, in the
/// words of the guide's *Platforms* page (docs/src/reference-extra/platforms.md).
fn specifics() -> &'static [&'static str] {
    if cfg!(windows) {
        &[
            "flushes each file through its own handle (Windows cannot flush a folder), and retries a \
             rename while another program holds the file",
            "modes: only the read-only attribute is applied and read; the recorded mode stands",
            "sgard's own folders are known by path (no inode numbers)",
            "no watcher: status looks at every tracked file",
        ]
    } else if cfg!(target_vendor = "apple") {
        &[
            "flushes with F_FULLFSYNC",
            "the lock check cannot name a lock's holder (no /proc/locks)",
            "no watcher: status looks at every tracked file",
        ]
    } else if cfg!(target_os = "linux") {
        &["flushes a batch with one syncfs, else fsync per file"]
    } else {
        &["flushes with fsync per file"]
    }
}

/// `git` on PATH; the repository's branch, uncommitted changes and
/// whether git ignores its contents, when it is in a git work tree.
pub(super) fn git(ctx: &Ctx, have_repo: bool, out: &mut Vec<Finding>) {
    let repo = &ctx.repo;
    let in_tree = have_repo && repo.ancestors().any(|a| a.join(".git").exists());
    let Some(git) = context::find_program("git") else {
        out.push(if in_tree {
            Finding::warning(
                "git",
                format!(
                    "git is not installed, and {} is in a git work tree",
                    show(ctx, repo)
                ),
                "install git to commit and share the repository",
            )
        } else {
            Finding::ok(
                "git",
                "not installed (needed only to keep the repository under git)",
            )
        });
        return;
    };
    let version = output(Command::new(&git).arg("--version"))
        .unwrap_or_else(|| "git (its version cannot be read)".into());
    let g = |args: &[&str]| output(Command::new(&git).arg("-C").arg(repo).args(args));
    let top = if have_repo {
        g(&["rev-parse", "--show-toplevel"])
    } else {
        None
    };
    let Some(top) = top else {
        out.push(Finding::ok(
            "git",
            if have_repo {
                format!("{version}; the repository is not under git")
            } else {
                version
            },
        ));
        return;
    };
    let mut p = Parts::new("git");
    p.ok(version);
    let branch = g(&["symbolic-ref", "--short", "-q", "HEAD"])
        .or_else(|| g(&["rev-parse", "--short", "HEAD"]).map(|h| format!("detached at {h}")))
        .unwrap_or_else(|| "no commit yet".into());
    p.ok(format!(
        "{} is a git work tree ({top}), branch {branch}",
        show(ctx, repo)
    ));
    let shown = show(ctx, repo);
    let unfinished = unfinished_operation(repo, &g);
    if let Some(op) = &unfinished {
        unfinished_finding(op, &shown, &g, &mut p);
    }
    // What git needs to merge the manifest and the history.
    for missing in crate::cmd::git::missing_setup(repo) {
        if missing.byte_exact {
            p.raise(
                Level::Warning,
                missing.what,
                format!(
                    "a command that changes the repository adds the line; commit it \
                     (`git -C {shown} add .gitattributes && git -C {shown} commit`), and on a \
                     clone checked out with core.autocrlf check its files out again once: \
                     `git -C {shown} rm --cached -r -q . && git -C {shown} reset --hard`"
                ),
            );
            continue;
        }
        p.raise(
            Level::Warning,
            format!("{} (the `sgard` merge driver)", missing.what),
            format!(
                "run any sgard command on the repository (`sgard status` defines the driver; \
                 a command that changes it adds .gitattributes), then commit .gitattributes: \
                 `git -C {shown} add .gitattributes && git -C {shown} commit`"
            ),
        );
    }
    // `blobs/` ignored (the Go sgard's .gitignore): a clone has no contents.
    let zero = "0".repeat(64);
    let ignored: Vec<&str> = ["blobs", "chunks", "chunk-lists"]
        .into_iter()
        .filter(|d| {
            Command::new(&git)
                .arg("-C")
                .arg(repo)
                .args(["check-ignore", "-q", &format!("{d}/00/00/{zero}")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if !ignored.is_empty() {
        let dirs: Vec<String> = ignored.iter().map(|d| format!("{d}/")).collect();
        p.raise(
            Level::Warning,
            format!(
                "git ignores {} (a .gitignore from the Go sgard or an older sgard): a clone of \
                 this repository has no contents and restores nothing",
                dirs.join(" and ")
            ),
            format!(
                "remove those lines from {shown}/.gitignore, then `git -C {shown} add -A && git \
                 -C {shown} commit`"
            ),
        );
    }
    match g(&[
        "status",
        "--porcelain",
        "--untracked-files=normal",
        "--",
        ".",
    ]) {
        // What a merge or rebase left is said above.
        Some(_) if unfinished.is_some() => {}
        Some(s) if s.is_empty() => p.ok("nothing uncommitted"),
        Some(s) => {
            let n = s.lines().count();
            p.raise(
                Level::Warning,
                format!(
                    "{n} uncommitted change{} in the repository: other machines do not get {} \
                     until committed and pushed",
                    if n == 1 { "" } else { "s" },
                    if n == 1 { "it" } else { "them" }
                ),
                format!("`git -C {shown} add -A && git -C {shown} commit -m MESSAGE`, then push"),
            );
        }
        None => p.raise(
            Level::Warning,
            "`git status` fails in the repository",
            format!("run `git -C {shown} status` to see why"),
        ),
    }
    out.push(p.finish());
}

/// A git operation left half done in the repository's work tree: its name
/// and the git command that ends it, either way.
struct Unfinished {
    /// `merge`, `rebase`, `cherry-pick`, `revert`.
    what: &'static str,
    /// The subcommand to run with `--abort` / `--continue`.
    command: &'static str,
}

/// The operation git is in the middle of in `repo` (`g` runs git there),
/// from the files it keeps in its folder while one is under way.
fn unfinished_operation(repo: &Path, g: &dyn Fn(&[&str]) -> Option<String>) -> Option<Unfinished> {
    let kinds = [
        ("MERGE_HEAD", "merge", "merge"),
        ("rebase-merge", "rebase", "rebase"),
        ("rebase-apply", "rebase", "rebase"),
        ("CHERRY_PICK_HEAD", "cherry-pick", "cherry-pick"),
        ("REVERT_HEAD", "revert", "revert"),
    ];
    kinds.into_iter().find_map(|(file, what, command)| {
        let at = g(&["rev-parse", "--git-path", file])?;
        sgard_store::durable::lstat_exists(&repo.join(at)).then_some(Unfinished { what, command })
    })
}

/// What doctor says about an unfinished merge (or rebase): while files
/// have conflict markers sgard cannot read them (an error); settled but not
/// committed, a warning.
fn unfinished_finding(
    op: &Unfinished,
    shown: &str,
    g: &dyn Fn(&[&str]) -> Option<String>,
    p: &mut Parts,
) {
    let unmerged: Vec<String> = g(&["diff", "--name-only", "--relative", "--diff-filter=U"])
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    let (what, command) = (op.what, op.command);
    if unmerged.is_empty() {
        p.raise(
            Level::Warning,
            format!("{shown} is in an unfinished git {what}: its conflicts are settled, not yet committed"),
            format!("`git -C {shown} {command} --continue` finishes it"),
        );
    } else {
        p.raise(
            Level::Error,
            format!(
                "{shown} is in an unfinished git {what}: {} still {} conflict markers, which \
                 sgard cannot read",
                super::some_of(&unmerged, 5),
                if unmerged.len() == 1 { "has" } else { "have" }
            ),
            format!(
                "`git -C {shown} {command} --abort` puts the repository back as it was before \
                 the {what}; or settle each of those files, `git -C {shown} add` it and \
                 `git -C {shown} {command} --continue`"
            ),
        );
    }
}

/// The first word of a shell command line (`"my editor" --wait` gives
/// `my editor`).
fn first_word(cmdline: &str) -> Option<String> {
    let s = cmdline.trim_start();
    let mut chars = s.chars();
    match chars.next()? {
        q @ ('"' | '\'') => Some(chars.take_while(|c| *c != q).collect()),
        _ => s.split_whitespace().next().map(str::to_owned),
    }
}

/// The editor `sgard edit` runs resolves to a program.
pub(super) fn editor(out: &mut Vec<Finding>) {
    let (var, cmdline) = context::editor_source();
    let label = match var {
        Some(v) => format!("{v} is `{cmdline}`"),
        None => "neither VISUAL nor EDITOR is set, so `vi`".to_owned(),
    };
    let found = first_word(&cmdline).and_then(|w| context::find_program(&w).map(|p| (w, p)));
    out.push(match found {
        Some((_, p)) => Finding::ok("editor", format!("{label} ({})", p.display())),
        None => Finding::warning(
            "editor",
            format!("{label}: no such program on PATH, so `sgard edit` fails"),
            "set EDITOR (or VISUAL) to an installed editor in your shell's profile, e.g. \
             `export EDITOR=nano`",
        ),
    });
}

/// The completion script of this sgard for the user's shell is installed
/// where the shell looks.
pub(super) fn completion(ctx: &Ctx, out: &mut Vec<Finding>) {
    let Some(shell) = context::shell() else {
        out.push(Finding::ok("completion", "not checked: SHELL is not set"));
        return;
    };
    let name = shell
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let home = &ctx.env.home;
    let data = context::data_home(home);
    let config = context::config_home(home);
    let (kind, places, dir, file, extra) = match name.as_str() {
        "bash" => {
            let dir = data.join("bash-completion/completions");
            (
                clap_complete::Shell::Bash,
                vec![
                    dir.join("sgard"),
                    dir.join("sgard.bash"),
                    PathBuf::from("/usr/local/share/bash-completion/completions/sgard"),
                    PathBuf::from("/usr/share/bash-completion/completions/sgard"),
                    PathBuf::from("/etc/bash_completion.d/sgard"),
                ],
                dir,
                "sgard",
                "",
            )
        }
        "zsh" => {
            let dir = home.join(".zfunc");
            (
                clap_complete::Shell::Zsh,
                vec![
                    dir.join("_sgard"),
                    home.join(".zsh/completions/_sgard"),
                    home.join(".zsh/completion/_sgard"),
                    data.join("zsh/site-functions/_sgard"),
                    PathBuf::from("/usr/local/share/zsh/site-functions/_sgard"),
                    PathBuf::from("/usr/share/zsh/site-functions/_sgard"),
                    PathBuf::from("/usr/share/zsh/vendor-completions/_sgard"),
                ],
                dir,
                "_sgard",
                ", and in ~/.zshrc, before `compinit`: `fpath=(~/.zfunc $fpath)`",
            )
        }
        "fish" => {
            let dir = config.join("fish/completions");
            (
                clap_complete::Shell::Fish,
                vec![
                    dir.join("sgard.fish"),
                    data.join("fish/vendor_completions.d/sgard.fish"),
                    PathBuf::from("/usr/local/share/fish/vendor_completions.d/sgard.fish"),
                    PathBuf::from("/usr/share/fish/vendor_completions.d/sgard.fish"),
                    PathBuf::from("/usr/share/fish/completions/sgard.fish"),
                ],
                dir,
                "sgard.fish",
                "",
            )
        }
        _ => {
            out.push(Finding::ok(
                "completion",
                format!(
                    "not checked for {name} (`sgard completion SHELL` prints scripts for bash, \
                     zsh, fish, elvish and powershell)"
                ),
            ));
            return;
        }
    };
    let target = dir.join(file);
    let install = format!(
        "mkdir -p {d} && sgard completion {name} > {t}{extra}",
        d = show(ctx, &dir),
        t = show(ctx, &target)
    );
    let Some(found) = places.iter().find(|p| p.is_file()) else {
        out.push(Finding::warning(
            "completion",
            format!("no {name} completion for sgard is installed"),
            install,
        ));
        return;
    };
    let mut ours = Vec::new();
    clap_complete::generate(kind, &mut Cli::command(), "sgard", &mut ours);
    out.push(if std::fs::read(found).is_ok_and(|t| t == ours) {
        Finding::ok("completion", format!("{name}: {}", show(ctx, found)))
    } else {
        Finding::warning(
            "completion",
            format!(
                "{name}: {} is not this sgard's (from another version?): commands and flags \
                 may be missing from it",
                show(ctx, found)
            ),
            if found.starts_with(home) {
                format!("sgard completion {name} > {}", show(ctx, found))
            } else {
                format!("update the package that installed it, or install this one: {install}")
            },
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_word_of_an_editor_command() {
        assert_eq!(first_word("code --wait").as_deref(), Some("code"));
        assert_eq!(first_word("  vim").as_deref(), Some("vim"));
        assert_eq!(
            first_word("\"/opt/my editor/ed\" -x").as_deref(),
            Some("/opt/my editor/ed")
        );
        assert_eq!(first_word("   "), None);
    }
}
