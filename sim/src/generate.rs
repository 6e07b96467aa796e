//! The seeded generator of operations: ordinary days of three users, with
//! now and then a fault.
//!
//! It looks at the world to pick sensible arguments (a file that exists, an
//! entry that is tracked), and what it picks is written into the
//! operation, so a saved case needs no generator to replay.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::home::{Home, Node};
use crate::op::{Content, DamageKind, Fault, FsAct, GitAct, Op, Repo};
use crate::world::MACHINES;

/// Plain files a user edits.
const FILES: &[&str] = &[
    ".bashrc",
    ".vimrc",
    ".profile",
    ".gitconfig",
    ".config/app/a.conf",
    ".config/app/b.conf",
    ".config/app/sub/c.conf",
    ".local/bin/tool",
    "notes/todo.txt",
];
/// Big files (chunked by sgard from 1 MiB).
const BIG: &[&str] = &["notes/big.bin"];
/// Files tracked as templates.
const TEMPLATES: &[&str] = &[".config/app/tmpl.conf"];
/// Scripts: `once-*` are only ever added with `--run once`, `change-*`
/// with `--run onchange`.
const SCRIPTS: &[&str] = &[".scripts/once-a.sh", ".scripts/change-a.sh"];
/// Files added with `--encrypt`.
const SECRETS: &[&str] = &[".secret", ".config/app/token"];
/// Symbolic links.
const LINKS: &[&str] = &[".link", ".config/app/link"];
const LINK_TARGETS: &[&str] = &[".bashrc", "a.conf", "nowhere", "../.vimrc"];
/// Folders a user adds whole.
const FOLDERS: &[&str] = &[".config", ".config/app", "notes", ".scripts", ".local"];

/// How many `call`s a program makes before its own code runs (the dynamic
/// loader opens four libraries, Rust's start-up `/proc/self/maps`): faults
/// there would test the loader, not sgard.
fn first_of_sgards(call: &str) -> u32 {
    if call == "openat" { 5 } else { 0 }
}

/// The seeded generator.
pub struct Gen {
    rng: ChaCha8Rng,
    /// The last command that was given a fault: users run it again.
    faulted: Option<Op>,
    /// Whether faults that need strace may be drawn.
    strace: bool,
}

fn t(p: &str) -> String {
    format!("~/{p}")
}

impl Gen {
    /// The generator of `seed` (`strace`: full-disk and exact-kill faults
    /// may be drawn).
    pub fn new(seed: u64, strace: bool) -> Gen {
        Gen {
            rng: ChaCha8Rng::seed_from_u64(seed),
            faulted: None,
            strace,
        }
    }

    fn pick<'a>(&mut self, from: &'a [&'a str]) -> &'a str {
        from.choose(&mut self.rng).copied().unwrap_or(".bashrc")
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.gen_bool(p)
    }

    /// The next operation; `homes[m]` is machine `m`'s home now and
    /// `tracked[m][r]` the paths repository `r` of machine `m` tracks.
    pub fn next(&mut self, homes: &[Home], tracked: &[[Vec<String>; 3]]) -> Op {
        if let Some(Op::Sgard {
            m,
            repo,
            args,
            stdin,
            ..
        }) = self.faulted.take()
            && self.chance(0.6)
        {
            return Op::Sgard {
                m,
                repo,
                args,
                stdin,
                fault: None,
            };
        }
        let op = self.draw(homes, tracked);
        if matches!(op, Op::Sgard { fault: Some(_), .. }) {
            self.faulted = Some(op.clone());
        }
        op
    }

    fn draw(&mut self, homes: &[Home], tracked: &[[Vec<String>; 3]]) -> Op {
        let m = self.rng.gen_range(0..MACHINES);
        let roll = self.rng.gen_range(0..100);
        match roll {
            0..=37 => Op::Fs {
                m,
                act: self.fs_act(&homes[m]),
            },
            38..=40 => Op::Git {
                m,
                act: match self.rng.gen_range(0..10) {
                    0..=3 => GitAct::Commit,
                    4..=7 => GitAct::Pull,
                    _ => GitAct::Push,
                },
            },
            41 if self.chance(0.5) => Op::Damage {
                m,
                repo: Repo::ALL[self.rng.gen_range(0..3)],
                kind: match self.rng.gen_range(0..4) {
                    0 => DamageKind::DeleteBlob,
                    1 => DamageKind::FlipBlob,
                    2 => DamageKind::DeleteChunk,
                    _ => DamageKind::FlipChunk,
                },
                pick: self.rng.r#gen(),
            },
            _ => {
                let repo = match self.rng.gen_range(0..10) {
                    0..=3 => Repo::Usb,
                    4..=6 => Repo::Git,
                    _ => Repo::Srv,
                };
                let ri = Repo::ALL.iter().position(|r| *r == repo).unwrap_or(0);
                self.sgard(m, repo, &homes[m], &tracked[m][ri])
            }
        }
    }

    fn existing_file(&mut self, home: &Home) -> Option<String> {
        let files: Vec<&String> = home
            .iter()
            .filter(|(_, n)| matches!(n, Node::File { .. }))
            .map(|(p, _)| p)
            .collect();
        files.choose(&mut self.rng).map(|s| (*s).clone())
    }

    /// One of `pool` that is a file in `home`, if any.
    fn existing_of(&mut self, home: &Home, pool: &[&str]) -> Option<String> {
        let there: Vec<&str> = pool
            .iter()
            .copied()
            .filter(|p| matches!(home.get(*p), Some(Node::File { .. })))
            .collect();
        there.choose(&mut self.rng).map(|p| (*p).to_owned())
    }

    /// Writes one of `pool` (when the operation drawn needs a file that is
    /// not there yet: the user makes it first).
    fn write_one(&mut self, m: usize, pool: &[&str]) -> Op {
        let path = self.pick(pool).to_owned();
        let content = self.content_for(&path);
        Op::Fs {
            m,
            act: FsAct::Write { path, content },
        }
    }

    fn content_for(&mut self, path: &str) -> Content {
        let seed = self.rng.gen_range(0..1000);
        if SCRIPTS.contains(&path) {
            Content::Script { seed }
        } else if TEMPLATES.contains(&path) {
            Content::Template { seed }
        } else if BIG.contains(&path) {
            Content::Big {
                seed,
                len: self.rng.gen_range(1_048_576..3_145_728),
            }
        } else {
            match self.rng.gen_range(0..20) {
                0 => Content::Empty,
                1..=2 => Content::Binary {
                    seed,
                    len: self.rng.gen_range(1..2000),
                },
                _ => Content::Text {
                    seed,
                    len: self.rng.gen_range(1..400),
                },
            }
        }
    }

    fn fs_act(&mut self, home: &Home) -> FsAct {
        match self.rng.gen_range(0..100) {
            0..=44 => {
                let path = match self.rng.gen_range(0..20) {
                    0 => self.pick(BIG),
                    1..=2 => self.pick(TEMPLATES),
                    3..=4 => self.pick(SCRIPTS),
                    5..=6 => self.pick(SECRETS),
                    _ => self.pick(FILES),
                }
                .to_owned();
                let content = self.content_for(&path);
                FsAct::Write { path, content }
            }
            45..=64 => {
                let path = self
                    .existing_file(home)
                    .unwrap_or_else(|| ".bashrc".to_owned());
                let seed = self.rng.gen_range(0..1000);
                FsAct::Append {
                    path,
                    content: Content::Text {
                        seed,
                        len: self.rng.gen_range(1..80),
                    },
                }
            }
            65..=72 => FsAct::Delete {
                path: self
                    .existing_file(home)
                    .unwrap_or_else(|| ".vimrc".to_owned()),
            },
            73..=80 => {
                let path = self
                    .existing_file(home)
                    .unwrap_or_else(|| ".bashrc".to_owned());
                // A script stays executable (a user who took that away
                // would only be told to give it back).
                let modes: &[u32] = if SCRIPTS.contains(&path.as_str()) {
                    &[0o700, 0o755, 0o750]
                } else {
                    &[0o600, 0o644, 0o640, 0o755]
                };
                FsAct::Chmod {
                    mode: *modes.choose(&mut self.rng).unwrap_or(&0o644),
                    path,
                }
            }
            81..=86 => FsAct::Rename {
                from: self.pick(FILES).to_owned(),
                to: self.pick(FILES).to_owned(),
            },
            87..=94 => FsAct::Symlink {
                path: self.pick(LINKS).to_owned(),
                target: self.pick(LINK_TARGETS).to_owned(),
            },
            95..=97 => FsAct::Mkdir {
                path: self
                    .pick(&["notes", ".config/app/sub", ".scripts"])
                    .to_owned(),
            },
            _ => FsAct::RmTree {
                path: self.pick(&["notes", ".config/app/sub"]).to_owned(),
            },
        }
    }

    /// A path to hand to sgard: mostly one the repository tracks, else one
    /// from the pools.
    fn target(&mut self, tracked: &[String]) -> String {
        if !tracked.is_empty() && self.chance(0.8) {
            return tracked.choose(&mut self.rng).cloned().unwrap_or_default();
        }
        t(self.pick(FILES))
    }

    fn answers(&mut self) -> Vec<String> {
        let n = self.rng.gen_range(0..4);
        (0..n)
            .map(|_| {
                (*["y", "n", "a", "q", "y", "n"]
                    .choose(&mut self.rng)
                    .unwrap_or(&"n"))
                .to_owned()
            })
            .collect()
    }

    /// Milliseconds before a signal, spread evenly on a log scale from 1 to
    /// 500: a small command does its writing in its first few, a pull of a
    /// big file in its last hundreds.
    fn delay(&mut self) -> u32 {
        let x: f64 = self.rng.gen_range(0.0..500f64.ln());
        x.exp() as u32
    }

    /// A fault for a command (`networked`: push or pull, whose runtime
    /// writes to event and socket descriptors, where a full disk never
    /// shows: no ENOSPC on `write` for them).
    fn fault(&mut self, networked: bool) -> Option<Fault> {
        match self.rng.gen_range(0..100) {
            0..=3 => Some(Fault::Int(self.delay())),
            4..=7 => Some(Fault::Kill(self.delay())),
            8..=9 if self.strace => {
                let calls: &[&str] = if networked {
                    &["fsync", "openat", "rename", "mkdir"]
                } else {
                    &["write", "fsync", "openat", "rename", "mkdir"]
                };
                let call = *calls.choose(&mut self.rng).unwrap_or(&"fsync");
                let nth = self.rng.gen_range(1..60) + first_of_sgards(call);
                Some(Fault::Enospc {
                    call: call.to_owned(),
                    nth,
                })
            }
            10..=13 if self.strace => {
                let call = *["rename", "fsync", "openat", "unlink", "write"]
                    .choose(&mut self.rng)
                    .unwrap_or(&"rename");
                let nth = self.rng.gen_range(1..12) + first_of_sgards(call);
                Some(Fault::KillAt {
                    call: call.to_owned(),
                    nth,
                })
            }
            _ => None,
        }
    }

    fn sgard(&mut self, m: usize, repo: Repo, home: &Home, tracked: &[String]) -> Op {
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<String>>();
        let mut stdin = None;
        let mut may_fault = true;
        // The server's repository is synced often: that is its point.
        let roll = if repo == Repo::Srv && self.chance(0.25) {
            99
        } else {
            self.rng.gen_range(0..99)
        };
        let args: Vec<String> = match roll {
            0..=13 => {
                let plain: Vec<&str> = FILES.iter().chain(BIG).copied().collect();
                let Some(p) = self.existing_of(home, &plain) else {
                    return self.write_one(m, &plain);
                };
                let mut a = vec!["add".to_owned(), t(&p)];
                if let Some(q) = self
                    .existing_of(home, &plain)
                    .filter(|q| *q != p && self.chance(0.3))
                {
                    a.push(t(&q));
                }
                a
            }
            14..=17 => {
                if self.chance(0.1) {
                    s(&["add", "~"])
                } else {
                    let f = self.pick(FOLDERS);
                    vec!["add".into(), t(f)]
                }
            }
            18..=19 => match self.existing_of(home, SECRETS) {
                Some(p) => vec!["add".into(), "--encrypt".into(), t(&p)],
                None => return self.write_one(m, SECRETS),
            },
            20..=21 => match self.existing_of(home, TEMPLATES) {
                Some(p) => vec!["add".into(), "--template".into(), t(&p)],
                None => return self.write_one(m, TEMPLATES),
            },
            22..=26 => match self.existing_of(home, SCRIPTS) {
                Some(p) => {
                    let how = if p.contains("/once-") {
                        "once"
                    } else {
                        "onchange"
                    };
                    vec!["add".into(), "--run".into(), how.into(), t(&p)]
                }
                None => return self.write_one(m, SCRIPTS),
            },
            27 => vec!["remove".into(), self.target(tracked)],
            28..=37 => {
                let mut a = s(&["checkpoint"]);
                if self.chance(0.3) {
                    a.push("-m".into());
                    a.push(format!("step {}", self.rng.gen_range(0..100)));
                }
                if self.chance(0.15) {
                    a.push(self.target(tracked));
                }
                a
            }
            38..=39 => {
                may_fault = false;
                s(&["checkpoint", "-n"])
            }
            40..=43 => {
                may_fault = false;
                s(&["status"])
            }
            44..=51 => {
                stdin = Some(self.answers());
                s(&["restore"])
            }
            52..=55 => s(&["restore", "-f"]),
            56..=57 => {
                stdin = Some(self.answers());
                vec!["restore".into(), self.target(tracked)]
            }
            58 => {
                may_fault = false;
                s(&["restore", "-n"])
            }
            59..=60 => vec!["merge".into(), self.target(tracked)],
            61..=63 => s(&["undo", "-y"]),
            64 => {
                may_fault = false;
                s(&["undo", "-n"])
            }
            65..=66 => {
                let at = *["@", "@~1", "@~2"].choose(&mut self.rng).unwrap_or(&"@~1");
                let mut a = vec![
                    "restore".into(),
                    "--at".into(),
                    at.into(),
                    self.target(tracked),
                ];
                if self.chance(0.5) {
                    a.push("-f".into());
                } else {
                    stdin = Some(self.answers());
                }
                a
            }
            67 => vec![
                "forget".into(),
                "--keep-last".into(),
                self.rng.gen_range(1..4).to_string(),
            ],
            68 => s(&["prune"]),
            69 => {
                may_fault = false;
                s(&["prune", "-n"])
            }
            70 => vec!["lock".into(), self.target(tracked)],
            71 => vec!["unlock".into(), self.target(tracked)],
            72 => {
                let p = self.target(tracked);
                match self.rng.gen_range(0..3) {
                    0 => vec![
                        "target".into(),
                        p,
                        "--only".into(),
                        format!("m{}", self.rng.gen_range(1..=MACHINES)),
                    ],
                    1 => vec![
                        "target".into(),
                        p,
                        "--never".into(),
                        format!("m{}", self.rng.gen_range(1..=MACHINES)),
                    ],
                    _ => vec!["target".into(), p, "--clear".into()],
                }
            }
            73 => {
                if self.chance(0.5) {
                    s(&["tag", "add", "work"])
                } else {
                    s(&["tag", "remove", "work"])
                }
            }
            74..=76 => {
                may_fault = false;
                s(&["verify"])
            }
            77 => {
                may_fault = false;
                s(&["diff"])
            }
            78..=80 => s(&["run-scripts"]),
            _ if repo == Repo::Srv => {
                if self.chance(0.5) {
                    vec!["push".into(), "-r".into(), crate::world::SERVER.to_owned()]
                } else {
                    stdin = Some(self.answers());
                    vec!["pull".into(), "-r".into(), crate::world::SERVER.to_owned()]
                }
            }
            _ => s(&["checkpoint"]),
        };
        let restoring = matches!(args.first().map(String::as_str), Some("restore" | "pull"));
        let networked = matches!(args.first().map(String::as_str), Some("push" | "pull"));
        let fault = match (may_fault, restoring) {
            (false, _) => None,
            // Twice as often where a cut-off run leaves the most behind.
            (true, true) => self.fault(networked).or_else(|| self.fault(networked)),
            (true, false) => self.fault(networked),
        };
        Op::Sgard {
            m,
            repo,
            args,
            stdin,
            fault,
        }
    }
}
