//! The one place that reads the process environment.
//!
//! The machine and the moment (`HOME`, `SGARD_NOW`, `SGARD_HOSTNAME`, the
//! XDG folders, the test hooks) are read once by
//! [`sgard_garden::Env::from_process`], which `sgardd` calls too; the rest
//! the CLI needs is read here and nowhere else: the passphrase sources,
//! the editor (`VISUAL`, `EDITOR`), and what `doctor` asks about (`SHELL`,
//! `PATH`, `XDG_DATA_HOME`).

use std::path::{Path, PathBuf};

use anyhow::Result;
use sgard_garden::Env;
use sgard_garden::crypto::KdfParams;
use zeroize::Zeroizing;

/// Builds the environment of this run (see [`Env::from_process`], which
/// does the reading).
pub fn env() -> Result<Env> {
    Ok(Env::from_process()?)
}

/// The repository folder: `--repo`/`SGARD_REPO` resolved like any path
/// argument, else `~/.sgard`.
pub fn repo_path(env: &Env, repo: Option<&Path>) -> PathBuf {
    match repo {
        Some(p) => env.resolve(p.as_os_str()),
        None => env.home.join(".sgard"),
    }
}

/// The passphrase, from the first source that has one: `SGARD_PASSPHRASE`,
/// `SGARD_PASSPHRASE_FILE` (its first line), `SGARD_PASSPHRASE_COMMAND` (its
/// output, run by `sh -c`), else the terminal with echo off.
pub fn passphrase(prompt: &str) -> std::result::Result<Zeroizing<String>, String> {
    from_sources(
        "SGARD_PASSPHRASE",
        "SGARD_PASSPHRASE_FILE",
        Some("SGARD_PASSPHRASE_COMMAND"),
    )?
    .map_or_else(|| read_tty(prompt), Ok)
}

/// A new passphrase for `encrypt init`: the same sources as [`passphrase`],
/// else typed twice on the terminal.
pub fn new_passphrase_for_init() -> std::result::Result<Zeroizing<String>, String> {
    match from_sources(
        "SGARD_PASSPHRASE",
        "SGARD_PASSPHRASE_FILE",
        Some("SGARD_PASSPHRASE_COMMAND"),
    )? {
        Some(p) => Ok(p),
        None => read_tty_twice("New passphrase: "),
    }
}

/// The new passphrase for `encrypt change-passphrase`: `SGARD_NEW_PASSPHRASE`,
/// `SGARD_NEW_PASSPHRASE_FILE`, else typed twice on the terminal.
pub fn new_passphrase_for_change() -> std::result::Result<Zeroizing<String>, String> {
    match from_sources("SGARD_NEW_PASSPHRASE", "SGARD_NEW_PASSPHRASE_FILE", None)? {
        Some(p) => Ok(p),
        None => read_tty_twice("New passphrase: "),
    }
}

/// Argon2 parameters for new key slots: the defaults, or tiny ones when the
/// test hook `SGARD_TEST_ARGON2=1` is set (never use it for real secrets).
pub fn kdf_params() -> KdfParams {
    if std::env::var("SGARD_TEST_ARGON2").is_ok_and(|v| v == "1") {
        KdfParams::TEST
    } else {
        KdfParams::DEFAULT
    }
}

/// Whether the passphrase would be typed at the terminal (no variable,
/// file or command gives it): then a mistyped one is asked for again.
pub fn passphrase_is_typed() -> bool {
    [
        "SGARD_PASSPHRASE",
        "SGARD_PASSPHRASE_FILE",
        "SGARD_PASSPHRASE_COMMAND",
    ]
    .iter()
    .all(|v| std::env::var_os(v).is_none_or(|s| s.is_empty()))
}

fn from_sources(
    var: &str,
    file_var: &str,
    command_var: Option<&str>,
) -> std::result::Result<Option<Zeroizing<String>>, String> {
    // An empty variable is passed over (as if unset); the error at the
    // end says it was set, so nobody hunts for a missing one.
    match std::env::var(var) {
        Ok(p) if !p.is_empty() => return Ok(Some(Zeroizing::new(p))),
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(format!("{var} is not valid UTF-8"));
        }
        Ok(_) | Err(std::env::VarError::NotPresent) => {}
    }
    if let Some(f) = std::env::var_os(file_var).filter(|f| !f.is_empty()) {
        let text = Zeroizing::new(
            std::fs::read_to_string(&f)
                .map_err(|e| format!("{file_var}: reading {}: {e}", Path::new(&f).display()))?,
        );
        let line = text.lines().next().unwrap_or("");
        return Ok(Some(Zeroizing::new(line.to_owned())));
    }
    if let Some(cv) = command_var
        && let Some(cmd) = std::env::var_os(cv).filter(|c| !c.is_empty())
    {
        let out = shell_command(&cmd)
            .stdin(std::process::Stdio::inherit())
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("{cv}: running it: {e}"))?;
        if !out.status.success() {
            return Err(format!("{cv}: the command failed ({})", out.status));
        }
        let text = Zeroizing::new(
            String::from_utf8(out.stdout).map_err(|_| format!("{cv}: output is not UTF-8"))?,
        );
        let line = text.lines().next().unwrap_or("");
        return Ok(Some(Zeroizing::new(line.to_owned())));
    }
    Ok(None)
}

fn read_tty(prompt: &str) -> std::result::Result<Zeroizing<String>, String> {
    rpassword::prompt_password(prompt)
        .map(Zeroizing::new)
        .map_err(|e| {
            let empty = ["SGARD_PASSPHRASE", "SGARD_NEW_PASSPHRASE"]
                .iter()
                .find(|v| std::env::var_os(v).is_some_and(|s| s.is_empty()))
                .map(|v| format!(" ({v} is set, but empty)"))
                .unwrap_or_default();
            format!(
                "no passphrase{empty}: set SGARD_PASSPHRASE, SGARD_PASSPHRASE_FILE or \
                 SGARD_PASSPHRASE_COMMAND, or run sgard on a terminal (no terminal: {e})"
            )
        })
}

/// The identity files to try first: `--identity` flags, then
/// `SGARD_IDENTITY` (`:`-separated, as `PATH` is), relative ones from `cwd`.
pub fn identities(cwd: &Path, flags: Vec<PathBuf>) -> Vec<PathBuf> {
    let from_var: Vec<PathBuf> = std::env::var_os("SGARD_IDENTITY")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    flags
        .into_iter()
        .chain(from_var)
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| cwd.join(p))
        .collect()
}

/// The passphrase of the encrypted SSH key at `path`, typed on the
/// terminal (never taken from `SGARD_PASSPHRASE`: that is the
/// repository's).
pub fn key_passphrase(path: &Path) -> std::result::Result<Zeroizing<String>, String> {
    rpassword::prompt_password(format!("Passphrase for {}: ", path.display()))
        .map(Zeroizing::new)
        .map_err(|e| {
            format!("it is encrypted, and there is no terminal to ask its passphrase ({e})")
        })
}

/// A new passphrase typed twice; an empty one or two that differ are
/// asked for again, three times in all.
fn read_tty_twice(prompt: &str) -> std::result::Result<Zeroizing<String>, String> {
    const TRIES: usize = 3;
    for left in (0..TRIES).rev() {
        let a = read_tty(prompt)?;
        let why = if a.is_empty() {
            "the passphrase is empty"
        } else if *a != *read_tty("Repeat it: ")? {
            "the two passphrases differ"
        } else {
            return Ok(a);
        };
        if left == 0 {
            return Err(format!("{why}; nothing was changed"));
        }
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!("sgard: {why}; try again\n"),
        );
    }
    Err("no passphrase; nothing was changed".into())
}

/// How long a phase of work runs before its progress bar appears (about a
/// second; `SGARD_PROGRESS_DELAY_MS` sets it, so a test on a pseudo-terminal
/// sees a bar without waiting).
pub fn progress_delay() -> std::time::Duration {
    std::env::var("SGARD_PROGRESS_DELAY_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(
            std::time::Duration::from_millis(900),
            std::time::Duration::from_millis,
        )
}

/// The ssh-agent socket (`SSH_AUTH_SOCK`), if set.
pub fn ssh_agent_socket() -> Option<PathBuf> {
    std::env::var_os("SSH_AUTH_SOCK")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
}

/// The editor `sgard edit` runs: `VISUAL`, else `EDITOR`, else `vi`
/// (Windows: `notepad`) (a shell command line; the file is appended as an
/// argument).
pub fn editor() -> String {
    ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        .unwrap_or_else(|| if cfg!(windows) { "notepad" } else { "vi" }.to_owned())
}

/// `line` run by the platform's shell: `sh -c LINE`.
#[cfg(unix)]
pub fn shell_command(line: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut c = std::process::Command::new("sh");
    c.arg("-c").arg(line);
    c
}

/// Windows: `%COMSPEC% /S /C "LINE"` (`cmd.exe` when `COMSPEC` is not
/// set), the line given to it as it is, as `cmd` parses its own command
/// line.
#[cfg(windows)]
pub fn shell_command(line: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    use std::os::windows::process::CommandExt;
    let comspec = std::env::var_os("COMSPEC")
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "cmd.exe".into());
    // `/S /C "LINE"`: cmd takes the outer quotes off and leaves the line
    // as it is, quotes of its own included (`"C:\Program Files\…" --wait`).
    let mut quoted = std::ffi::OsString::from("\"");
    quoted.push(line);
    quoted.push("\"");
    let mut c = std::process::Command::new(comspec);
    c.args(["/S", "/C"]).raw_arg(quoted);
    c
}

/// The command line `editor` (which may carry arguments: `code --wait`)
/// run on `file`, which the shell never parses: `sh -c 'EDITOR "$@"' sh
/// FILE` on Unix; on Windows the file is quoted on `cmd`'s line (a Windows
/// path cannot hold a `"`).
pub fn editor_command(editor: &str, file: &Path) -> std::process::Command {
    if cfg!(windows) {
        shell_command(format!("{editor} \"{}\"", file.display()))
    } else {
        let mut c = shell_command(format!("{editor} \"$@\""));
        c.arg("sh").arg(file);
        c
    }
}

/// Which variable `sgard edit` takes its editor from (`None`: neither is
/// set, and `vi` is used) and the command line it holds.
pub fn editor_source() -> (Option<&'static str>, String) {
    for v in ["VISUAL", "EDITOR"] {
        if let Ok(s) = std::env::var(v)
            && !s.trim().is_empty()
        {
            return (Some(v), s);
        }
    }
    (None, editor())
}

/// Where [`passphrase`] would take the passphrase from (for `doctor`,
/// which never prints the passphrase itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PassphraseSource {
    /// `SGARD_PASSPHRASE`.
    Var,
    /// `SGARD_PASSPHRASE_FILE`: this file's first line.
    File(PathBuf),
    /// `SGARD_PASSPHRASE_COMMAND`: this command's first output line.
    Command(String),
    /// None of them: the terminal.
    Terminal,
}

/// The source [`passphrase`] would use, and whether `SGARD_PASSPHRASE` is
/// set but empty (then it is passed over).
pub fn passphrase_source() -> (PassphraseSource, bool) {
    let empty_var = std::env::var_os("SGARD_PASSPHRASE").is_some_and(|v| v.is_empty());
    let source = if std::env::var("SGARD_PASSPHRASE").is_ok_and(|p| !p.is_empty()) {
        PassphraseSource::Var
    } else if let Some(f) = std::env::var_os("SGARD_PASSPHRASE_FILE").filter(|f| !f.is_empty()) {
        PassphraseSource::File(PathBuf::from(f))
    } else if let Some(c) = std::env::var_os("SGARD_PASSPHRASE_COMMAND").filter(|c| !c.is_empty()) {
        PassphraseSource::Command(c.to_string_lossy().into_owned())
    } else {
        PassphraseSource::Terminal
    };
    (source, empty_var)
}

/// The passphrase from the sources [`passphrase`] tries before the
/// terminal (`None`: none is set); never asks.
pub fn passphrase_unattended() -> std::result::Result<Option<Zeroizing<String>>, String> {
    from_sources(
        "SGARD_PASSPHRASE",
        "SGARD_PASSPHRASE_FILE",
        Some("SGARD_PASSPHRASE_COMMAND"),
    )
}

/// The user's login shell (`SHELL`), if set.
pub fn shell() -> Option<PathBuf> {
    std::env::var_os("SHELL")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
}

/// What a program's name in `PATH` may end with: nothing on Unix; on
/// Windows the extensions of `PATHEXT` (`.COM;.EXE;.BAT;.CMD` when unset),
/// nothing first.
pub fn program_extensions() -> Vec<String> {
    let mut out = vec![String::new()];
    if cfg!(windows) {
        let exts = std::env::var("PATHEXT")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| ".COM;.EXE;.BAT;.CMD".to_owned());
        out.extend(
            exts.split(';')
                .filter(|e| e.starts_with('.'))
                .map(str::to_ascii_lowercase),
        );
    }
    out
}

/// The folders of `PATH`, in order.
pub fn path_dirs() -> Vec<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default()
}

/// The executable `name` resolves to: a path as it is (when it has a
/// `/`), else the first match in `PATH`.
pub fn find_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') || (cfg!(windows) && name.contains('\\')) {
        let p = PathBuf::from(name);
        return runnable(&p).then_some(p);
    }
    let names: Vec<String> = program_extensions()
        .iter()
        .map(|ext| format!("{name}{ext}"))
        .collect();
    path_dirs()
        .into_iter()
        .filter(|d| !d.as_os_str().is_empty())
        .flat_map(|d| names.iter().map(move |n| d.join(n)))
        .find(|p| runnable(p))
}

/// Whether `p` is a file this user may run (an executable bit).
#[cfg(unix)]
fn runnable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Windows: a file (its extension, from `PATHEXT`, is what makes it run).
#[cfg(windows)]
fn runnable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file())
}

/// `XDG_DATA_HOME` (absolute), else `~/.local/share`.
pub fn data_home(home: &Path) -> PathBuf {
    match std::env::var_os("XDG_DATA_HOME") {
        Some(s) if Path::new(&s).is_absolute() => PathBuf::from(s),
        _ => home.join(".local/share"),
    }
}

/// `XDG_CONFIG_HOME` (absolute), else `~/.config`.
pub fn config_home(home: &Path) -> PathBuf {
    match std::env::var_os("XDG_CONFIG_HOME") {
        Some(s) if Path::new(&s).is_absolute() => PathBuf::from(s),
        _ => home.join(".config"),
    }
}
