//! The repository and this machine's state for it: version and format,
//! access, the lock, manifest, history, content, temp files, the index,
//! the base, encryption and the passphrase.

use std::path::Path;

use sgard::context::{self, PassphraseSource};
use sgard::remote::probe::{Finding, Level};
use sgard_garden::doctor::{
    self, Debris, IndexProbe, LockProbe, MissingWhy, StateProbe, Unread, probe_content,
};
use sgard_manifest::history::{HISTORY_FILE, History};
use sgard_manifest::{MANIFEST_FILE, Manifest};
use sgard_store::chunks::Setting;

use super::{Parts, count, show, some_of};
use crate::cmd::Ctx;
use crate::ui;

/// Runs the repository's checks into `out`; returns the manifest when
/// there is a repository whose manifest loads.
pub(super) fn checks(ctx: &Ctx, out: &mut Vec<Finding>) -> Option<Manifest> {
    let version = format!("sgard {}", env!("CARGO_PKG_VERSION"));
    let root = &ctx.repo;
    let shown = show(ctx, root);
    let init_hint = format!(
        "`sgard init` creates a repository at {shown}; `--repo PATH` or SGARD_REPO picks \
         another one"
    );
    if !root.join(MANIFEST_FILE).exists() {
        out.push(Finding::ok("version", version));
        let what = if root.exists() {
            format!("{shown} holds no {MANIFEST_FILE}: it is not an sgard repository")
        } else {
            format!("no repository at {shown}")
        };
        out.push(Finding::error("repository", what, init_hint));
        return None;
    }
    let version_at = out.len();
    out.push(Finding::ok("version", version.clone()));
    let read = sgard_garden::fsx::may_read_dir(root);
    if let Err(e) = read {
        out.push(Finding::error(
            "repository",
            format!("{shown} cannot be read ({e})"),
            "fix its permissions, or run sgard as the user who owns it",
        ));
        return None;
    }
    let read_only = sgard_garden::fsx::may_write_dir(root).is_err();
    out.push(if read_only {
        Finding::warning(
            "repository",
            format!("{shown} is read-only for this user"),
            "status, diff, restore and verify work; add, checkpoint, prune and pull need write \
             access (mount it writable or fix its permissions)",
        )
    } else {
        Finding::ok("repository", format!("{shown}: readable and writable"))
    });
    let lock = doctor::probe_lock(root);
    out.push(lock_finding(&lock));
    let writer_at_work = matches!(lock, LockProbe::Held { .. });

    let mpath = root.join(MANIFEST_FILE);
    let m = match Manifest::load_with_hash(&mpath) {
        Ok(x) => Some(x),
        Err(e) => {
            out.push(Finding::error(
                "manifest",
                sgard_garden::error_chain(&e),
                format!(
                    "fix what it names in {}, or put back a good copy (from git, a backup or \
                     another machine)",
                    show(ctx, &mpath)
                ),
            ));
            None
        }
    };
    let history = match History::load(&root.join(HISTORY_FILE)) {
        Ok(h) => Some(h),
        Err(e) => {
            if let Some((m, _)) = &m {
                out.push(manifest_ok(m));
            }
            let p = show(ctx, &root.join(HISTORY_FILE));
            out.push(Finding::error(
                "history",
                sgard_garden::error_chain(&e),
                format!(
                    "repair it, or move it aside (`mv {p} {p}.damaged`): status, list, diff \
                     and restore work meanwhile; log, checkpoint, push, pull, prune and undo \
                     refuse until then"
                ),
            ));
            None
        }
    };
    if let (Some((m, head)), Some(h)) = (&m, &history) {
        match doctor::interrupted_checkpoint(h, *head) {
            Some(id) => out.push(Finding::warning(
                "manifest",
                format!(
                    "valid ({} entries), but a checkpoint (snapshot {}) was recorded and its \
                     write of {MANIFEST_FILE} was cut off",
                    m.files.len(),
                    id.short(12)
                ),
                "run a command that writes (`sgard checkpoint`): it finishes the job from the \
                 snapshot",
            )),
            None => out.push(manifest_ok(m)),
        }
    }
    if let Some(h) = &history {
        out.push(match doctor::missing_snapshots(root, h) {
            Ok(gone) if gone.is_empty() => Finding::ok(
                "history",
                format!("valid: {}", count(h.records.len(), "snapshot", "snapshots")),
            ),
            Ok(gone) => {
                let ids: Vec<String> = gone.iter().map(|g| g.short(12)).collect();
                Finding::warning(
                    "history",
                    format!(
                        "{} of {} snapshots have lost their document: {}",
                        gone.len(),
                        h.records.len(),
                        some_of(&ids, 5)
                    ),
                    "`sgard verify` says what each lacks; `sgard forget ID...` drops the ones \
                     that cannot come back (the Go sgard's prune deletes snapshot documents)",
                )
            }
            Err(e) => Finding::error("history", sgard_garden::error_chain(&e), "see the error"),
        });
    }
    let manifest = m.map(|(m, _)| m);
    out[version_at] = version_finding(version, root, manifest.as_ref());

    if let Some(m) = &manifest {
        out.push(content_finding(root, m));
        out.push(secrets_finding(root, m));
    }
    let state = doctor::probe_state(root, &ctx.env, manifest.as_ref());
    if writer_at_work {
        out.push(Finding::ok(
            "temp-files",
            "not checked: another sgard is writing (its temp files are its own)",
        ));
    } else {
        let d = doctor::probe_debris(root, state.dir.as_deref(), manifest.as_ref(), &ctx.env);
        out.push(debris_finding(ctx, &d));
    }
    out.push(state_finding(ctx, &state));
    if let Some(m) = &manifest {
        out.push(base_finding(&state, m));
    }
    // The passphrase command may wait on the user: writers need not.
    drop(lock);
    if let Some(m) = &manifest {
        encryption(ctx, m, out);
    }
    manifest
}

fn manifest_ok(m: &Manifest) -> Finding {
    let kinds = |k: sgard_manifest::EntryKind| m.files.iter().filter(|e| e.kind == k).count();
    Finding::ok(
        "manifest",
        format!(
            "valid: {} ({}, {}, {})",
            count(m.files.len(), "entry", "entries"),
            count(kinds(sgard_manifest::EntryKind::File), "file", "files"),
            count(kinds(sgard_manifest::EntryKind::Link), "link", "links"),
            count(
                kinds(sgard_manifest::EntryKind::Directory),
                "folder",
                "folders"
            ),
        ),
    )
}

/// sgard's version, the repository's format and its chunking setting.
fn version_finding(version: String, root: &Path, m: Option<&Manifest>) -> Finding {
    let mut p = Parts::new("version");
    p.ok(version);
    if let Some(m) = m {
        p.ok(format!("repository format {}", m.version));
    }
    match Setting::load(root) {
        Ok(Setting::Off) => p.ok("big files stored whole (chunking off)"),
        Ok(Setting::On { threshold, .. }) => p.ok(format!(
            "files from {} stored in chunks, which the Go sgard cannot restore (`sgard \
             chunking --off` keeps the repository Go-readable)",
            ui::bytes(threshold)
        )),
        Err(e) => p.raise(
            Level::Error,
            e.to_string(),
            "fix or remove that file (without it the defaults apply; `sgard chunking` shows them)",
        ),
    }
    if !sgard_store::durable::lstat_exists(&root.join("repo-id")) {
        p.ok(
            "no repo-id yet (made by the Go sgard or an older sgard; the next command that \
             writes adds one)",
        );
    }
    p.finish()
}

/// Who holds the repository lock, if anybody.
fn lock_finding(l: &LockProbe) -> Finding {
    let who = |hs: &[doctor::Holder]| -> String {
        let v: Vec<String> = hs
            .iter()
            .map(|h| {
                let cmd = h
                    .command
                    .as_deref()
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default();
                let stopped = if h.stopped { ", stopped" } else { "" };
                format!("pid {}{cmd}{stopped}", h.pid)
            })
            .collect();
        v.join(", ")
    };
    let end = |hs: &[doctor::Holder]| -> String {
        let pids: Vec<String> = hs.iter().map(|h| h.pid.to_string()).collect();
        let pids = pids.join(" ");
        if hs.iter().any(|h| h.stopped) {
            format!(
                "a stopped process keeps the lock until it goes on: `kill -CONT {pids}` (or \
                 `fg` in its shell), or end it with `kill {pids}`; the lock ends with the \
                 process, nothing stale is left"
            )
        } else {
            format!(
                "let it finish; if it hangs (a question nobody answers, a dead mount), end it \
                 with `kill {pids}`: the lock ends with the process, nothing stale is left"
            )
        }
    };
    match l {
        LockProbe::NoFile => Finding::ok("lock", "free (no lock file yet)"),
        LockProbe::Shared { others, .. } if others.is_empty() => Finding::ok("lock", "free"),
        LockProbe::Shared { others, .. } => Finding::warning(
            "lock",
            format!(
                "read by another sgard: {}; commands that write wait for it",
                who(others)
            ),
            end(others),
        ),
        LockProbe::Held { holders } if holders.is_empty() => Finding::warning(
            "lock",
            "held by a process this machine cannot see (one on another machine sharing this \
             folder?); commands wait for it",
            "find the sgard using this repository on the other machine and let it finish",
        ),
        LockProbe::Held { holders } => Finding::warning(
            "lock",
            format!("held by {}; other commands wait for it", who(holders)),
            end(holders),
        ),
        LockProbe::Failed(e) => Finding::warning(
            "lock",
            format!("cannot try the lock: {e}"),
            "on a network folder, the file server must support locks (NFS: lockd)",
        ),
    }
}

/// Whether a tracked file that looks like a secret (a private key,
/// credentials) is stored in plaintext.
fn secrets_finding(root: &Path, m: &Manifest) -> Finding {
    let store = sgard_store::Store::open(root);
    let found = sgard_garden::secrets::stored_in_plaintext(&store, m.files.iter());
    if found.is_empty() {
        return Finding::ok(
            "secrets",
            "no file stored in plaintext looks like a private key or credentials",
        );
    }
    let names: Vec<String> = found
        .iter()
        .map(|(p, s)| format!("{p} ({})", s.describe()))
        .collect();
    Finding::warning(
        "secrets",
        format!(
            "stored in plaintext, though {} like secrets: {}",
            if found.len() == 1 {
                "it looks"
            } else {
                "they look"
            },
            some_of(&names, 5)
        ),
        "`sgard add --encrypt PATH` encrypts one from now on (`sgard encrypt init` sets \
         encryption up); the snapshots made before keep the plaintext until `sgard forget` \
         and `sgard prune` drop them",
    )
}

/// Whether every content the head names is stored (existence only).
fn content_finding(root: &Path, m: &Manifest) -> Finding {
    let p = match probe_content(root, m) {
        Ok(p) => p,
        Err(e) => {
            return Finding::error(
                "content",
                format!(
                    "cannot inspect the store: {}",
                    sgard_garden::error_chain(&e)
                ),
                "fix the repository folder's permissions",
            );
        }
    };
    if p.missing.is_empty() {
        let chunked = if p.chunked > 0 {
            format!(
                ", {} in {}",
                count(p.chunked, "chunked file", "chunked files"),
                count(p.chunks, "chunk", "chunks")
            )
        } else {
            String::new()
        };
        return Finding::ok(
            "content",
            format!(
                "every content the head names is stored ({}{chunked}); presence only, `sgard \
                 verify` re-hashes",
                count(p.contents, "content", "contents")
            ),
        );
    }
    let mut names = Vec::new();
    let mut entries = 0;
    for x in &p.missing {
        let why = match &x.why {
            MissingWhy::Absent => format!("content {} missing", x.hash.short(12)),
            MissingWhy::Chunks(n) => format!(
                "{n} chunk{} of {} missing",
                if *n == 1 { "" } else { "s" },
                x.hash.short(12)
            ),
            MissingWhy::BadList(e) => format!("chunk list unreadable: {e}"),
        };
        for path in &x.paths {
            entries += 1;
            names.push(format!("{path} ({why})"));
        }
    }
    Finding::error(
        "content",
        format!(
            "{entries} entr{} of the head cannot be restored from this repository: {}",
            if entries == 1 { "y" } else { "ies" },
            some_of(&names, 5)
        ),
        "`sgard verify` lists every damaged entry; bring the content back with `sgard pull` \
         (from a server that has it) or from another machine's copy of the repository, or \
         `sgard add PATH` where the file on disk is still right",
    )
}

/// Temp files interrupted writes left, named place by place (so those in
/// the home are never hidden behind the repository's).
fn debris_finding(ctx: &Ctx, d: &Debris) -> Finding {
    let n = d.repo.len() + d.state.len() + d.home.len();
    if n == 0 {
        return Finding::ok("temp-files", "none");
    }
    let named = |files: &[std::path::PathBuf]| {
        let shown: Vec<String> = files.iter().map(|p| show(ctx, p)).collect();
        some_of(&shown, 3)
    };
    let mut wheres = Vec::new();
    if !d.repo.is_empty() {
        wheres.push(format!(
            "{} in the repository ({}): {}",
            d.repo.len(),
            ui::bytes(d.repo_bytes),
            named(&d.repo)
        ));
    }
    if !d.state.is_empty() {
        wheres.push(format!(
            "{} in this machine's state: {}",
            d.state.len(),
            named(&d.state)
        ));
    }
    if !d.home.is_empty() {
        wheres.push(format!(
            "{} beside tracked files, left by sgard processes that are gone: {}",
            d.home.len(),
            named(&d.home)
        ));
    }
    Finding::warning(
        "temp-files",
        format!(
            "{n} temp file{} of interrupted writes: {}",
            if n == 1 { "" } else { "s" },
            wheres.join("; ")
        ),
        "`sgard prune` removes them; so does the next command that writes there",
    )
}

/// The index (and the stat cache in it), the journals beside it, this
/// home's log.
fn state_finding(ctx: &Ctx, s: &StateProbe) -> Finding {
    let mut p = Parts::new("state");
    let Some(dir) = &s.dir else {
        p.raise(
            Level::Error,
            "this machine has no state folder: sgard cannot keep its record of the last sync",
            "set HOME (or XDG_STATE_HOME) to a folder sgard can write",
        );
        return p.finish();
    };
    let shown = show(ctx, dir);
    if let Some(why) = &s.unwritable {
        p.raise(
            Level::Error,
            format!("this machine's state for the repository cannot be written: {why}"),
            "fix the permissions, or set XDG_STATE_HOME to a folder sgard can write",
        );
    }
    match &s.index {
        IndexProbe::Missing => p.ok(format!(
            "no index yet in {shown} (the next command makes one)"
        )),
        IndexProbe::Unusable => p.raise(
            Level::Warning,
            format!(
                "the index in {shown} is damaged (or from another version of sgard): the \
                 next command sets it aside, treats this machine's record of the last sync as \
                 lost and writes a new one"
            ),
            "nothing to repair: files that differ from the repository then show as \
             conflicts (asked about, never overwritten); settle each with `sgard restore -f \
             PATH` or `sgard add PATH`",
        ),
        IndexProbe::Unreadable(e) => p.raise(
            Level::Error,
            format!("the index in {shown} cannot be read: {e}"),
            "nothing is damaged and nothing is rebuilt: commands fail until it reads (check \
             the disk: free space, `dmesg`)",
        ),
        IndexProbe::Usable { stat, .. } => {
            p.ok(format!(
                "index sound ({shown}; stat cache of {})",
                count(*stat, "file", "files")
            ));
        }
    }
    if s.pending {
        p.raise(
            Level::Warning,
            "an interrupted command left its journal (base.pending)",
            "run `sgard status`: it applies the journal",
        );
    }
    if s.unfinished > 0 {
        p.raise(
            Level::Warning,
            format!(
                "a cut-off pull has {} file{} still to write",
                s.unfinished,
                if s.unfinished == 1 { "" } else { "s" }
            ),
            "`sgard restore` (or the next `sgard pull`) writes them",
        );
    }
    match &s.local_log {
        Ok(_) => {}
        Err(Unread::Damaged(e)) => p.raise(
            Level::Warning,
            format!(
                "this machine's log of its restores is unreadable ({e}): the next command sets \
                 it aside, and undo cannot reach what it held"
            ),
            format!("copy {shown}/undo/history.yaml somewhere first if you need that undo"),
        ),
        Err(Unread::Failed(e)) => p.raise(
            Level::Error,
            format!("this machine's log of its restores cannot be read: {e}"),
            "nothing is damaged and nothing is set aside: commands fail until it reads (check \
             the disk: free space, `dmesg`)",
        ),
    }
    p.finish()
}

/// This machine's record of its last sync with the repository.
fn base_finding(s: &StateProbe, m: &Manifest) -> Finding {
    let total = m.files.len();
    let settle = "nothing is lost: files that differ from the repository show as conflicts \
                  (asked about, never overwritten); settle each with `sgard restore -f PATH` \
                  (the repository's version) or `sgard add PATH` (this one)";
    match (&s.index, &s.legacy_base) {
        (
            IndexProbe::Usable {
                base: Some(n),
                base_covers,
                ..
            },
            _,
        ) => {
            if total > 0 && *base_covers == 0 {
                Finding::warning(
                    "base",
                    format!(
                        "this machine has synced none of the {total} entries (its record holds \
                         {n} other paths)"
                    ),
                    settle,
                )
            } else {
                Finding::ok(
                    "base",
                    format!(
                        "present: this machine's last sync of {base_covers} of {total} entries"
                    ),
                )
            }
        }
        (IndexProbe::Unreadable(_), _) => Finding::warning(
            "base",
            "not read: the index that holds it cannot be read",
            "see state",
        ),
        (IndexProbe::Unusable, _) => Finding::warning(
            "base",
            "lost with the damaged index: until each entry is settled again, a file that \
             differs from the repository is a conflict",
            settle,
        ),
        (IndexProbe::Missing, Some(Some(n))) => Finding::ok(
            "base",
            format!(
                "present in an older sgard's file ({n} records); the next command moves it into \
                 the index"
            ),
        ),
        (IndexProbe::Missing, Some(None)) => Finding::warning(
            "base",
            "an older sgard's record of the last sync is damaged: it is treated as empty",
            settle,
        ),
        _ if total == 0 => Finding::ok("base", "none needed yet (nothing is tracked)"),
        _ => Finding::warning(
            "base",
            format!("this machine has no record of a sync with this repository ({total} entries)"),
            settle,
        ),
    }
}

/// The key slots, this machine's keys among the recipients, and whether
/// the passphrase source works.
fn encryption(ctx: &Ctx, m: &Manifest, out: &mut Vec<Finding>) {
    use sgard_garden::recipients::{self, Probe};
    let Some(enc) = &m.encryption else {
        out.push(Finding::ok("encryption", "not set up"));
        return;
    };
    let encrypted = m.files.iter().filter(|e| e.encrypted).count();
    let usable_kind = |s: &sgard_manifest::KekSlot| {
        sgard_garden::crypto::is_passphrase_slot(s) || s.kind == sgard_garden::recipients::SLOT_KIND
    };
    let slots: Vec<String> = enc
        .kek_slots
        .iter()
        .map(|(name, s)| {
            if usable_kind(s) {
                format!("{name} ({})", s.kind)
            } else {
                format!("{name} ({}, not usable by this sgard)", s.kind)
            }
        })
        .collect();
    let has_passphrase = enc
        .kek_slots
        .values()
        .any(sgard_garden::crypto::is_passphrase_slot);
    let has_recipients = !recipients::slots(enc).is_empty();
    let detail = format!(
        "{} key slot{}: {}; {encrypted} encrypted entr{}",
        slots.len(),
        if slots.len() == 1 { "" } else { "s" },
        slots.join(", "),
        if encrypted == 1 { "y" } else { "ies" }
    );
    if !has_passphrase && !has_recipients {
        out.push(Finding::error(
            "encryption",
            format!("{detail}: no passphrase slot nor recipient, so this sgard cannot unlock the data key"),
            "unlock with the tool that made the other slots (the Go sgard reads FIDO2 slots), \
             and add a passphrase slot there",
        ));
        return;
    }
    out.push(Finding::ok("encryption", detail));
    if has_recipients {
        let candidates = recipients::candidates(
            &ctx.identities,
            ctx.env.config_dir.as_deref(),
            &ctx.env.home,
        );
        let found = recipients::probe(enc, &candidates);
        let opener = found.iter().find_map(|(p, f)| match f {
            Probe::Recipient { slot, encrypted } => Some((p, slot, *encrypted)),
            _ => None,
        });
        let unusable: Vec<String> = found
            .iter()
            .filter_map(|(p, f)| match f {
                Probe::Unusable(why) => Some(format!("{}: {why}", p.display())),
                _ => None,
            })
            .collect();
        let finding = match (opener, has_passphrase) {
            (Some((p, slot, encrypted)), _) => Finding::ok(
                "keys",
                format!(
                    "{} opens the data key (recipient {slot}){}",
                    p.display(),
                    if encrypted {
                        "; its passphrase is asked on the terminal"
                    } else {
                        ""
                    }
                ),
            ),
            (None, true) => Finding::ok(
                "keys",
                "none of this machine's keys is a recipient: the passphrase unlocks",
            ),
            (None, false) => Finding::error(
                "keys",
                format!(
                    "none of this machine's keys is a recipient, and there is no passphrase \
                     slot: commands that decrypt fail here{}",
                    if unusable.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", unusable.join("; "))
                    }
                ),
                "on a machine that can unlock it, run `sgard encrypt add-recipient` with this \
                 machine's public key (`~/.ssh/id_ed25519.pub`, or the one `sgard encrypt \
                 keygen` prints here)",
            ),
        };
        out.push(finding);
    }
    if has_passphrase {
        out.push(passphrase(enc));
    }
}

/// Where the passphrase would come from, and whether it unlocks the key.
fn passphrase(enc: &sgard_manifest::Encryption) -> Finding {
    let mut p = Parts::new("passphrase");
    let (source, empty_var) = context::passphrase_source();
    if empty_var {
        p.raise(
            Level::Warning,
            "SGARD_PASSPHRASE is set but empty, so sgard passes over it",
            "unset it (`unset SGARD_PASSPHRASE`), or give it the passphrase",
        );
    }
    let name = match &source {
        PassphraseSource::Var => "SGARD_PASSPHRASE".to_owned(),
        PassphraseSource::File(f) => format!("SGARD_PASSPHRASE_FILE ({})", f.display()),
        PassphraseSource::Command(c) => format!("SGARD_PASSPHRASE_COMMAND ({c})"),
        PassphraseSource::Terminal => {
            let tty = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/tty")
                .is_ok();
            if tty {
                p.ok(
                    "asked on the terminal when a command needs it (no SGARD_PASSPHRASE, \
                     SGARD_PASSPHRASE_FILE or SGARD_PASSPHRASE_COMMAND)",
                );
            } else {
                p.raise(
                    Level::Warning,
                    "no passphrase source and no terminal: commands that decrypt fail here",
                    "set SGARD_PASSPHRASE_FILE (a file holding it) or SGARD_PASSPHRASE_COMMAND \
                     (e.g. `pass show sgard`)",
                );
            }
            return p.finish();
        }
    };
    let fix = match &source {
        PassphraseSource::Command(_) => {
            "run the command by hand (`sh -c \"$SGARD_PASSPHRASE_COMMAND\"`) and fix it, or \
             unset it to be asked on the terminal"
        }
        PassphraseSource::File(_) => {
            "put the passphrase on the file's first line, or unset SGARD_PASSPHRASE_FILE to be \
             asked on the terminal"
        }
        _ => "give it the passphrase, or unset it to be asked on the terminal",
    };
    match context::passphrase_unattended() {
        Err(e) => p.raise(Level::Error, e, fix),
        Ok(None) => p.raise(Level::Error, format!("{name} gave nothing"), fix),
        Ok(Some(pass)) if pass.is_empty() => {
            p.raise(
                Level::Error,
                format!("{name} gives an empty passphrase"),
                fix,
            );
        }
        Ok(Some(pass)) => match sgard_garden::crypto::unlock(enc, &pass) {
            Ok(_) => p.ok(format!("{name} unlocks the data key")),
            Err(e) => p.raise(
                Level::Error,
                format!("{name} gives a passphrase that does not unlock the data key: {e}"),
                "use the passphrase `sgard encrypt init` (or the last `sgard encrypt \
                 change-passphrase`) set",
            ),
        },
    }
    p.finish()
}
