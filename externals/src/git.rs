//! Git externals, through the `git` command: a reference resolved with
//! `git ls-remote`, one commit fetched shallow into a scratch repository
//! and checked out, the result's `.git` dropped. What is kept is judged by
//! the rules an archive is (no symlink that leaves the folder, the size
//! bound).
//!
//! The command runs with no terminal prompt (`GIT_TERMINAL_PROMPT=0`), the
//! `ext::` transport off, and none of the caller's `GIT_DIR`-style
//! variables, so it can neither hang on a password nor act on another
//! repository; every call is bounded by `Limits::timeout`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{Error, Limits, Result};

/// What a reference names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefKind {
    /// The remote's default branch (no reference given).
    Head,
    /// A branch: it moves, and a refresh follows it.
    Branch,
    /// A tag: it should not move, and a refresh refuses it if it did.
    Tag,
    /// A commit, by its full id.
    Commit,
}

impl RefKind {
    /// Whether the reference pins its content: a tag or a commit.
    pub fn pins(self) -> bool {
        matches!(self, RefKind::Tag | RefKind::Commit)
    }
}

/// A reference resolved at the remote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The commit it names (full hex id).
    pub commit: String,
    /// What it is.
    pub kind: RefKind,
    /// What `git fetch` is asked for.
    fetch: String,
}

/// What [`checkout`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckedOut {
    /// Files and symlinks.
    pub files: u64,
    /// Bytes of the files.
    pub bytes: u64,
}

fn fail(url: &str, reason: impl Into<String>) -> Error {
    Error::Fetch {
        url: url.to_owned(),
        reason: reason.into(),
    }
}

fn is_commit_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Runs `git ARGS` (in `dir` if given) with the safety settings of the
/// module, within `limits.timeout`; its standard output when it succeeds.
fn git(url: &str, dir: Option<&Path>, args: &[&str], limits: &Limits) -> Result<String> {
    let mut cmd = Command::new("git");
    cmd.args([
        // Only the transports a source is fetched with.
        "-c",
        "protocol.allow=never",
        "-c",
        "protocol.https.allow=always",
        "-c",
        "protocol.http.allow=always",
        "-c",
        "protocol.ssh.allow=always",
        "-c",
        "protocol.git.allow=always",
        "-c",
        "protocol.file.allow=always",
        "-c",
        "core.autocrlf=false",
        // No hook of the user's runs on a stranger's checkout.
        "-c",
        "core.hooksPath=/dev/null",
        // No LFS download the repository's attributes would ask for.
        "-c",
        "filter.lfs.process=",
        "-c",
        "filter.lfs.smudge=",
        "-c",
        "filter.lfs.required=false",
    ])
    .args(args)
    .env("GIT_TERMINAL_PROMPT", "0")
    .env("GIT_LFS_SKIP_SMUDGE", "1")
    .env("LC_ALL", "C")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for v in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CEILING_DIRECTORIES",
        "GIT_NAMESPACE",
    ] {
        cmd.env_remove(v);
    }
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let mut child = cmd.spawn().map_err(|e| {
        fail(
            url,
            if e.kind() == std::io::ErrorKind::NotFound {
                "the `git` command is not installed".to_owned()
            } else {
                format!("running git: {e}")
            },
        )
    })?;
    // Both pipes are drained by threads, so a chatty git never blocks.
    let drain = |p: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = p {
                let _ = p.by_ref().take(64 << 20).read_to_end(&mut buf);
                let _ = std::io::copy(&mut p, &mut std::io::sink());
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(fail(url, format!("waiting for git: {e}"))),
        }
        let stopped = limits.interrupted.is_some_and(|f| f());
        if stopped || start.elapsed() > limits.timeout {
            let _ = child.kill();
            let _ = child.wait();
            if stopped {
                return Err(Error::Interrupted);
            }
            return Err(fail(
                url,
                format!("git took longer than {}s", limits.timeout.as_secs()),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if !status.success() {
        let msg = String::from_utf8_lossy(&stderr);
        let msg = msg
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("git failed")
            .to_owned();
        return Err(fail(url, msg));
    }
    String::from_utf8(stdout).map_err(|_| fail(url, "git printed something that is not UTF-8"))
}

/// Refuses a relative path as a URL: git would read it from wherever it
/// runs, which is not where it was given.
fn absolute(url: &str) -> Result<()> {
    let scp_like = url
        .split_once(':')
        .is_some_and(|(host, _)| !host.is_empty() && !host.contains('/'));
    if url.contains("://") || url.starts_with('/') || scp_like {
        return Ok(());
    }
    Err(fail(
        url,
        "a path to a repository must be absolute (or a file:// URL)",
    ))
}

/// Refuses what git would read as an option rather than a URL or a name.
fn plain(url: &str, what: &str, s: &str) -> Result<()> {
    if s.is_empty() || s.starts_with('-') || s.contains(['\n', '\0']) {
        return Err(fail(url, format!("{what} {s:?} is not one git takes")));
    }
    Ok(())
}

/// Resolves `reference` (a branch, a tag or a full commit id; `None`: the
/// default branch) at `url`, without fetching any content.
///
/// # Errors
/// [`Error::Fetch`] naming the URL: unreachable, no such reference, git
/// missing or too slow.
pub fn resolve(url: &str, reference: Option<&str>, limits: &Limits) -> Result<Resolved> {
    plain(url, "the URL", url)?;
    absolute(url)?;
    if let Some(r) = reference {
        plain(url, "the reference", r)?;
    }
    let listing = git(url, None, &["ls-remote", "--", url], limits)?;
    let find = |name: &str| {
        listing.lines().find_map(|l| {
            let (id, r) = l.split_once('\t')?;
            (r == name && is_commit_id(id)).then(|| id.to_ascii_lowercase())
        })
    };
    let Some(r) = reference else {
        let commit = find("HEAD").ok_or_else(|| fail(url, "the remote has no HEAD"))?;
        return Ok(Resolved {
            commit,
            kind: RefKind::Head,
            fetch: "HEAD".into(),
        });
    };
    let tag = format!("refs/tags/{r}");
    if let Some(id) = find(&format!("{tag}^{{}}")).or_else(|| find(&tag)) {
        return Ok(Resolved {
            commit: id,
            kind: RefKind::Tag,
            fetch: tag,
        });
    }
    let branch = format!("refs/heads/{r}");
    if let Some(id) = find(&branch) {
        return Ok(Resolved {
            commit: id,
            kind: RefKind::Branch,
            fetch: branch,
        });
    }
    if is_commit_id(r) {
        return Ok(Resolved {
            commit: r.to_ascii_lowercase(),
            kind: RefKind::Commit,
            fetch: r.to_ascii_lowercase(),
        });
    }
    Err(fail(
        url,
        format!("no branch or tag {r:?} (a commit is given by its full id)"),
    ))
}

/// Fetches the commit `at` names from `url` into a scratch repository in
/// `scratch` (an empty folder) and checks it out into `dest` (a folder
/// that must not exist), without `.git`.
///
/// # Errors
/// [`Error::Fetch`]; [`Error::Hostile`] for a symlink that leaves `dest`;
/// [`Error::TooLarge`] past `limits.max_unpacked`; [`Error::Io`].
pub fn checkout(
    url: &str,
    at: &Resolved,
    scratch: &Path,
    dest: &Path,
    limits: &Limits,
) -> Result<CheckedOut> {
    plain(url, "the URL", url)?;
    absolute(url)?;
    plain(url, "the reference", &at.fetch)?;
    let repo = scratch.join("repo");
    let repo_s = repo.to_str().ok_or_else(|| {
        fail(
            url,
            format!("the scratch folder {} is not UTF-8", scratch.display()),
        )
    })?;
    git(
        url,
        Some(scratch),
        &["init", "-q", "--template=", repo_s],
        limits,
    )?;
    let shallow = git(
        url,
        Some(&repo),
        &[
            "fetch",
            "-q",
            "--depth",
            "1",
            "--no-tags",
            "--",
            url,
            &at.fetch,
        ],
        limits,
    );
    if let Err(e) = shallow {
        // A server may refuse a commit by id; the whole history has it.
        if at.kind != RefKind::Commit {
            return Err(e);
        }
        git(
            url,
            Some(&repo),
            &[
                "fetch",
                "-q",
                "--no-tags",
                "--",
                url,
                "+refs/*:refs/sgard/*",
            ],
            limits,
        )?;
    }
    let want = format!("{}^{{commit}}", at.commit);
    let got = git(
        url,
        Some(&repo),
        &["rev-parse", "--verify", "-q", &want],
        limits,
    )
    .map_err(|_| {
        fail(
            url,
            format!("the remote does not have commit {}", at.commit),
        )
    })?;
    if got.trim() != at.commit {
        return Err(fail(
            url,
            format!("fetched {} where {} was asked for", got.trim(), at.commit),
        ));
    }
    git(
        url,
        Some(&repo),
        &[
            "-c",
            "advice.detachedHead=false",
            "checkout",
            "-q",
            "--detach",
            &at.commit,
        ],
        limits,
    )?;
    let dotgit = repo.join(".git");
    std::fs::remove_dir_all(&dotgit).map_err(|e| Error::io("removing", &dotgit, e))?;
    let mut done = CheckedOut::default();
    judge(&repo, Path::new(""), limits, &mut done)?;
    std::fs::rename(&repo, dest).map_err(|e| Error::io("moving into place", dest, e))?;
    Ok(done)
}

/// Walks the checkout: counts, bounds, and refuses symlinks that leave it
/// (the rule archives follow) and anything but files, folders and links.
fn judge(root: &Path, rel: &Path, limits: &Limits, done: &mut CheckedOut) -> Result<()> {
    let dir = root.join(rel);
    let rd = std::fs::read_dir(&dir).map_err(|e| Error::io("reading", &dir, e))?;
    for ent in rd {
        let ent = ent.map_err(|e| Error::io("reading", &dir, e))?;
        let name: PathBuf = rel.join(ent.file_name());
        let path = root.join(&name);
        let md = std::fs::symlink_metadata(&path).map_err(|e| Error::io("reading", &path, e))?;
        let shown = name.to_string_lossy().into_owned();
        if md.file_type().is_symlink() {
            let target = std::fs::read_link(&path).map_err(|e| Error::io("reading", &path, e))?;
            let target = target.to_str().ok_or_else(|| Error::Hostile {
                entry: shown.clone(),
                why: "is a symlink to a name that is not UTF-8".into(),
            })?;
            crate::unpack::judge_link(&shown, &name, target)?;
            done.files += 1;
        } else if md.is_dir() {
            judge(root, &name, limits, done)?;
        } else if md.is_file() {
            done.files += 1;
            done.bytes += md.len();
            if done.bytes > limits.max_unpacked {
                return Err(Error::TooLarge {
                    what: "the checkout".into(),
                    limit: limits.max_unpacked,
                });
            }
        } else {
            return Err(Error::Hostile {
                entry: shown,
                why: "is no file, folder or symlink".into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
