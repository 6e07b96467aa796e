//! The operations a simulated user performs, and their one-line text form.
//!
//! A case is a list of operations, one per line, each a shell-like line:
//!
//! ```text
//! m1 write .bashrc text:17:40
//! m2 stdin=y,n fault=int@30 sgard usb restore
//! m3 git pull
//! m1 damage srv delete-blob 3
//! ```
//!
//! Every operation is concrete (the generator may look at the world to pick
//! its arguments, but what it picked is written down), so a saved line
//! replays the same way on any world built by the same setup.

use std::fmt;

use crate::Error;

/// Which repository of a machine a command uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Repo {
    /// The shared folder (a USB stick): one folder every machine uses.
    Usb,
    /// The machine's git clone (`~/dots`) of the one origin.
    Git,
    /// The machine's default repository (`~/.sgard`), synced through sgardd.
    Srv,
}

impl Repo {
    /// Every repository kind.
    pub const ALL: [Repo; 3] = [Repo::Usb, Repo::Git, Repo::Srv];

    /// Its name in a case line.
    pub fn name(self) -> &'static str {
        match self {
            Repo::Usb => "usb",
            Repo::Git => "git",
            Repo::Srv => "srv",
        }
    }

    fn parse(s: &str) -> Result<Repo, Error> {
        Repo::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| Error::Case(format!("unknown repository {s:?}")))
    }
}

/// What a written file holds: generated from a seed, so a line names it in
/// a few characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    /// Lines of text.
    Text {
        /// Seeds the generator.
        seed: u32,
        /// Bytes.
        len: u32,
    },
    /// Arbitrary bytes.
    Binary {
        /// Seeds the generator.
        seed: u32,
        /// Bytes.
        len: u32,
    },
    /// Nothing.
    Empty,
    /// 1–3 MiB of bytes that chunk (shared runs across seeds, so an edit
    /// of a big file reuses chunks).
    Big {
        /// Seeds the generator (neighbouring seeds share blocks).
        seed: u32,
        /// Bytes.
        len: u32,
    },
    /// A shell script that appends a line naming its path and seed to the
    /// machine's run log (outside the home).
    Script {
        /// Makes each version's content its own.
        seed: u32,
    },
    /// A template (minijinja) using the host name and tags; every seventh
    /// seed names an undefined variable.
    Template {
        /// Makes each version's content its own.
        seed: u32,
    },
}

impl fmt::Display for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Content::Text { seed, len } => write!(f, "text:{seed}:{len}"),
            Content::Binary { seed, len } => write!(f, "bin:{seed}:{len}"),
            Content::Empty => write!(f, "empty"),
            Content::Big { seed, len } => write!(f, "big:{seed}:{len}"),
            Content::Script { seed } => write!(f, "script:{seed}"),
            Content::Template { seed } => write!(f, "tmpl:{seed}"),
        }
    }
}

impl Content {
    fn parse(s: &str) -> Result<Content, Error> {
        let bad = || Error::Case(format!("bad content {s:?}"));
        let parts: Vec<&str> = s.split(':').collect();
        let num = |i: usize| -> Result<u32, Error> {
            parts.get(i).and_then(|p| p.parse().ok()).ok_or_else(bad)
        };
        Ok(match parts[0] {
            "text" => Content::Text {
                seed: num(1)?,
                len: num(2)?,
            },
            "bin" => Content::Binary {
                seed: num(1)?,
                len: num(2)?,
            },
            "empty" => Content::Empty,
            "big" => Content::Big {
                seed: num(1)?,
                len: num(2)?,
            },
            "script" => Content::Script { seed: num(1)? },
            "tmpl" => Content::Template { seed: num(1)? },
            _ => return Err(bad()),
        })
    }
}

/// A change a user makes in a home folder (paths relative to the home).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FsAct {
    /// Writes a file whole (replacing a link or folder in the way).
    Write {
        /// Relative to the home.
        path: String,
        /// What it holds after.
        content: Content,
    },
    /// Appends to a file that is there.
    Append {
        /// Relative to the home.
        path: String,
        /// What is appended.
        content: Content,
    },
    /// Deletes a file or link.
    Delete {
        /// Relative to the home.
        path: String,
    },
    /// Sets a file's permission bits.
    Chmod {
        /// Relative to the home.
        path: String,
        /// Permission bits.
        mode: u32,
    },
    /// Renames onto a name that is free.
    Rename {
        /// Relative to the home.
        from: String,
        /// Relative to the home.
        to: String,
    },
    /// Makes (or replaces) a symbolic link.
    Symlink {
        /// Relative to the home.
        path: String,
        /// What it points to, as written.
        target: String,
    },
    /// Makes a folder (and those above it).
    Mkdir {
        /// Relative to the home.
        path: String,
    },
    /// Removes a folder and everything in it.
    RmTree {
        /// Relative to the home.
        path: String,
    },
}

/// A git command in a machine's clone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GitAct {
    /// `git add -A && git commit`.
    Commit,
    /// `git pull --no-rebase`; a conflicted merge is aborted.
    Pull,
    /// `git push` (refused when behind).
    Push,
}

/// Something done to a running command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGINT after this many milliseconds.
    Int(u32),
    /// SIGKILL after this many milliseconds.
    Kill(u32),
    /// The `call` system call fails with ENOSPC from its `nth` call on
    /// (under strace): a disk that fills up.
    Enospc {
        /// A system call (`rename` stands for all its forms).
        call: String,
        /// The first call that fails (counted per thread, as strace does).
        nth: u32,
    },
    /// SIGKILL at the `nth` `call` (under strace): a kill at an exact
    /// point, the same on every replay.
    KillAt {
        /// A system call (`rename` stands for all its forms).
        call: String,
        /// The call that kills (counted per thread, as strace does).
        nth: u32,
    },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Int(ms) => write!(f, "int@{ms}"),
            Fault::Kill(ms) => write!(f, "kill@{ms}"),
            Fault::Enospc { call, nth } => write!(f, "enospc:{call}@{nth}"),
            Fault::KillAt { call, nth } => write!(f, "killat:{call}@{nth}"),
        }
    }
}

impl Fault {
    fn parse(s: &str) -> Result<Fault, Error> {
        let bad = || Error::Case(format!("bad fault {s:?}"));
        let (what, n) = s.split_once('@').ok_or_else(bad)?;
        let n: u32 = n.parse().map_err(|_| bad())?;
        Ok(match what {
            "int" => Fault::Int(n),
            "kill" => Fault::Kill(n),
            w => {
                let call_ok = |c: &str| {
                    !c.is_empty()
                        && c.bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                };
                match (w.strip_prefix("enospc:"), w.strip_prefix("killat:")) {
                    (Some(call), _) if call_ok(call) => Fault::Enospc {
                        call: call.to_owned(),
                        nth: n,
                    },
                    (_, Some(call)) if call_ok(call) => Fault::KillAt {
                        call: call.to_owned(),
                        nth: n,
                    },
                    _ => return Err(bad()),
                }
            }
        })
    }
}

/// Damage done to a repository's store behind sgard's back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DamageKind {
    /// A file under `blobs/` is deleted.
    DeleteBlob,
    /// A byte of a file under `blobs/` is changed.
    FlipBlob,
    /// A file under `chunks/` is deleted.
    DeleteChunk,
    /// A byte of a file under `chunks/` is changed.
    FlipChunk,
}

impl DamageKind {
    const ALL: [DamageKind; 4] = [
        DamageKind::DeleteBlob,
        DamageKind::FlipBlob,
        DamageKind::DeleteChunk,
        DamageKind::FlipChunk,
    ];

    fn name(self) -> &'static str {
        match self {
            DamageKind::DeleteBlob => "delete-blob",
            DamageKind::FlipBlob => "flip-blob",
            DamageKind::DeleteChunk => "delete-chunk",
            DamageKind::FlipChunk => "flip-chunk",
        }
    }

    /// Whether it works on `chunks/` rather than `blobs/`.
    pub fn chunks(self) -> bool {
        matches!(self, DamageKind::DeleteChunk | DamageKind::FlipChunk)
    }

    /// Whether it deletes (rather than flips a byte).
    pub fn deletes(self) -> bool {
        matches!(self, DamageKind::DeleteBlob | DamageKind::DeleteChunk)
    }
}

/// One step of a case. `m` is a machine's index (0-based; `m1` in text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// A user's change in a home.
    Fs {
        /// The machine.
        m: usize,
        /// The change.
        act: FsAct,
    },
    /// `sgard [--repo R] ARGS` on a machine.
    Sgard {
        /// The machine.
        m: usize,
        /// Which of its repositories.
        repo: Repo,
        /// The arguments (`@server` for the server's address).
        args: Vec<String>,
        /// Answers, one a line; `Some(empty)` closes standard input at
        /// once; `None` as well (kept apart only for the text form).
        stdin: Option<Vec<String>>,
        /// Done to the command while it runs.
        fault: Option<Fault>,
    },
    /// git in a machine's clone.
    Git {
        /// The machine.
        m: usize,
        /// What git does.
        act: GitAct,
    },
    /// Damage to a repository's store.
    Damage {
        /// The machine whose repository it is (any, for the shared folder).
        m: usize,
        /// Which repository.
        repo: Repo,
        /// What is done.
        kind: DamageKind,
        /// Which file (modulo how many there are, in name order).
        pick: u32,
    },
}

impl Op {
    /// The machine it runs on.
    pub fn machine(&self) -> usize {
        match self {
            Op::Fs { m, .. } | Op::Sgard { m, .. } | Op::Git { m, .. } | Op::Damage { m, .. } => *m,
        }
    }

    /// Parses one line of a case (see the module's documentation).
    pub fn parse(line: &str) -> Result<Op, Error> {
        let bad = |why: &str| Error::Case(format!("{why}: {line}"));
        let words = shlex::split(line).ok_or_else(|| bad("unbalanced quotes"))?;
        let mut w = words.iter().map(String::as_str);
        let m = w
            .next()
            .and_then(|t| t.strip_prefix('m'))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (1..=9).contains(n))
            .ok_or_else(|| bad("a line starts with a machine, m1…m9"))?
            - 1;
        let mut stdin = None;
        let mut fault = None;
        let verb = loop {
            match w.next() {
                Some(t) if t.starts_with("stdin=") => {
                    let list = &t["stdin=".len()..];
                    stdin = Some(if list.is_empty() {
                        Vec::new()
                    } else {
                        list.split(',').map(str::to_owned).collect()
                    });
                }
                Some(t) if t.starts_with("fault=") => {
                    fault = Some(Fault::parse(&t["fault=".len()..])?);
                }
                Some(t) => break t,
                None => return Err(bad("no operation")),
            }
        };
        let rest: Vec<String> = w.map(str::to_owned).collect();
        let arg = |i: usize| rest.get(i).cloned().ok_or_else(|| bad("too few words"));
        let fs = |act| Ok(Op::Fs { m, act });
        match verb {
            "sgard" => {
                let repo = Repo::parse(&arg(0)?)?;
                Ok(Op::Sgard {
                    m,
                    repo,
                    args: rest[1..].to_vec(),
                    stdin,
                    fault,
                })
            }
            _ if stdin.is_some() || fault.is_some() => Err(bad("stdin= and fault= go with sgard")),
            "write" => fs(FsAct::Write {
                path: arg(0)?,
                content: Content::parse(&arg(1)?)?,
            }),
            "append" => fs(FsAct::Append {
                path: arg(0)?,
                content: Content::parse(&arg(1)?)?,
            }),
            "rm" => fs(FsAct::Delete { path: arg(0)? }),
            "chmod" => fs(FsAct::Chmod {
                mode: u32::from_str_radix(&arg(0)?, 8).map_err(|_| bad("bad mode"))?,
                path: arg(1)?,
            }),
            "mv" => fs(FsAct::Rename {
                from: arg(0)?,
                to: arg(1)?,
            }),
            "ln-s" => fs(FsAct::Symlink {
                target: arg(0)?,
                path: arg(1)?,
            }),
            "mkdir" => fs(FsAct::Mkdir { path: arg(0)? }),
            "rm-r" => fs(FsAct::RmTree { path: arg(0)? }),
            "git" => {
                let act = match arg(0)?.as_str() {
                    "commit" => GitAct::Commit,
                    "pull" => GitAct::Pull,
                    "push" => GitAct::Push,
                    _ => return Err(bad("git commit, pull or push")),
                };
                Ok(Op::Git { m, act })
            }
            "damage" => {
                let repo = Repo::parse(&arg(0)?)?;
                let k = arg(1)?;
                let kind = DamageKind::ALL
                    .into_iter()
                    .find(|d| d.name() == k)
                    .ok_or_else(|| bad("unknown damage"))?;
                let pick = arg(2)?.parse().map_err(|_| bad("bad pick"))?;
                Ok(Op::Damage {
                    m,
                    repo,
                    kind,
                    pick,
                })
            }
            _ => Err(bad("unknown operation")),
        }
    }
}

/// Quotes a word for a case line (only when it needs it).
fn q(s: &str) -> String {
    shlex::try_quote(s).map_or_else(|_| format!("{s:?}"), |c| c.into_owned())
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m{} ", self.machine() + 1)?;
        match self {
            Op::Fs { act, .. } => match act {
                FsAct::Write { path, content } => write!(f, "write {} {content}", q(path)),
                FsAct::Append { path, content } => write!(f, "append {} {content}", q(path)),
                FsAct::Delete { path } => write!(f, "rm {}", q(path)),
                FsAct::Chmod { path, mode } => write!(f, "chmod {mode:o} {}", q(path)),
                FsAct::Rename { from, to } => write!(f, "mv {} {}", q(from), q(to)),
                FsAct::Symlink { path, target } => write!(f, "ln-s {} {}", q(target), q(path)),
                FsAct::Mkdir { path } => write!(f, "mkdir {}", q(path)),
                FsAct::RmTree { path } => write!(f, "rm-r {}", q(path)),
            },
            Op::Sgard {
                repo,
                args,
                stdin,
                fault,
                ..
            } => {
                if let Some(s) = stdin {
                    write!(f, "stdin={} ", s.join(","))?;
                }
                if let Some(x) = fault {
                    write!(f, "fault={x} ")?;
                }
                write!(f, "sgard {}", repo.name())?;
                for a in args {
                    write!(f, " {}", q(a))?;
                }
                Ok(())
            }
            Op::Git { act, .. } => write!(
                f,
                "git {}",
                match act {
                    GitAct::Commit => "commit",
                    GitAct::Pull => "pull",
                    GitAct::Push => "push",
                }
            ),
            Op::Damage {
                repo, kind, pick, ..
            } => write!(f, "damage {} {} {pick}", repo.name(), kind.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_reads_back_as_the_operation_it_shows() {
        let ops = vec![
            Op::Fs {
                m: 0,
                act: FsAct::Write {
                    path: ".config/app/a.conf".into(),
                    content: Content::Text { seed: 3, len: 40 },
                },
            },
            Op::Fs {
                m: 2,
                act: FsAct::Chmod {
                    path: ".bashrc".into(),
                    mode: 0o600,
                },
            },
            Op::Fs {
                m: 1,
                act: FsAct::Symlink {
                    path: ".link".into(),
                    target: "a b".into(),
                },
            },
            Op::Sgard {
                m: 1,
                repo: Repo::Usb,
                args: vec!["checkpoint".into(), "-m".into(), "two words".into()],
                stdin: Some(vec!["y".into(), "n".into()]),
                fault: Some(Fault::Enospc {
                    call: "fsync".into(),
                    nth: 3,
                }),
            },
            Op::Sgard {
                m: 0,
                repo: Repo::Srv,
                args: vec!["restore".into()],
                stdin: Some(Vec::new()),
                fault: Some(Fault::Kill(40)),
            },
            Op::Sgard {
                m: 0,
                repo: Repo::Git,
                args: vec!["pull".into()],
                stdin: None,
                fault: Some(Fault::KillAt {
                    call: "rename".into(),
                    nth: 2,
                }),
            },
            Op::Git {
                m: 2,
                act: GitAct::Pull,
            },
            Op::Damage {
                m: 0,
                repo: Repo::Git,
                kind: DamageKind::FlipChunk,
                pick: 7,
            },
        ];
        for op in ops {
            let line = op.to_string();
            assert_eq!(Op::parse(&line).unwrap(), op, "{line}");
        }
    }

    #[test]
    fn a_bad_line_is_an_error_never_a_panic() {
        for line in [
            "",
            "m0 rm x",
            "m1",
            "m1 chmod zz x",
            "m1 fault=int@x sgard usb status",
            "m1 stdin=y rm x",
            "m1 sgard nowhere status",
            "m1 write x big:1",
            "m1 damage usb melt 1",
            "m1 'open",
        ] {
            assert!(Op::parse(line).is_err(), "{line}");
        }
    }
}
