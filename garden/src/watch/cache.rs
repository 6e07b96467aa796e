//! A status that need not look at anything: the last status's lines,
//! kept with what they depended on, and given again while the watcher says
//! nothing changed since.
//!
//! `repos/<key>/status-cache` (binary, with checksums) holds the lines of
//! the last status of every entry that asked the watcher, the token that
//! status asked with (taken before it looked at the disk), the id of the
//! set of tracked paths, the environment it ran in (home, host name, user,
//! configuration folder), and the fingerprint of every file in this
//! machine's state folder for the repository and of the machine-local
//! `data.yaml`, as they were once that status had saved them.
//!
//! The lines stand, without opening the repository, when all of that is
//! as it was and the watcher (which watches the repository's folder too)
//! says that nothing under the tracked paths' folders or in the repository
//! changed since the token: no tracked file, no folder above one, no
//! manifest, log, blob or chunk, no state file. A network file system
//! anywhere in that is never vouched for (the watcher names it in every
//! answer), so the lines are not used there. Anything else, and the status
//! is made as usual.

use std::path::Path;
use std::time::Duration;

use sgard_manifest::codec::{Reader, Writer};
use sgard_store::durable;

use crate::status::{State, StatusLine};
use crate::{Env, Garden, base, index};

/// The file's name in the repository's state folder.
pub const FILE: &str = "status-cache";
const MAGIC: &[u8] = b"sgard-status-cache\n";
const VERSION: u32 = 1;
/// Far above any real section (100,000 lines are about 4 MB).
const MAX_BYTES: u64 = 512 << 20;
/// Far above any real head (a few hundred bytes).
const MAX_HEAD: u64 = 1 << 20;

/// What a status of every entry notes before it reads anything: the
/// watcher's token for that moment (every change after it is reported)
/// and the fingerprints of the files it reads (see [`before_status`]).
#[derive(Clone, Debug)]
pub struct Before {
    token: sgard_watch::Token,
    fps: Vec<(String, String)>,
}

/// [`Before`], when a watcher runs for the repository at `root` (`None`:
/// nothing the status finds will be kept).
pub fn before_status(root: &Path, env: &Env) -> Option<Before> {
    if env.no_cache || env.no_watch {
        return None;
    }
    let state = base::state_dir(env.state_dir.as_deref(), &base::repo_key(root, false))?;
    let socket = state.join(super::SOCKET);
    if !durable::lstat_exists(&socket) {
        return None;
    }
    let token = sgard_watch::now(&socket, Duration::from_secs(3)).ok()?;
    let fps = fingerprints(&state, env, root)?;
    Some(Before { token, fps })
}

/// What a status keeps until [`Garden::finish`] writes it: the start of
/// the head, what it printed (form, whether any entry changed, the bytes),
/// and its lines, encoded.
#[derive(Debug)]
pub(crate) struct Keep {
    /// The fingerprints before the status read anything.
    before: Vec<(String, String)>,
    head: Vec<u8>,
    printed: Option<(u8, bool, Vec<u8>)>,
    lines: Vec<u8>,
}

/// State files whose changes say nothing about a status's lines.
const NOT_STATE: [&str; 6] = [
    FILE,
    super::TOKEN_FILE,
    super::SOCKET,
    super::LOCK,
    "index.lock",
    "lock",
];

/// What a status that looked nothing up gives: the lines, and the
/// plaintext secrets to warn of (path, what it looks like).
#[derive(Debug)]
pub struct Cached {
    /// The status lines (none when `text` is given instead).
    pub lines: Vec<StatusLine>,
    /// The entries stored in plaintext that look like secrets.
    pub secrets: Vec<(String, String)>,
    /// What the status printed, when it was asked for in the form it was
    /// printed in (see [`Garden::keep_status`]), and whether any entry was
    /// not ok: the lines are then not decoded at all.
    pub text: Option<(Text, bool)>,
}

/// What the last status printed, checked against its checksum and left in
/// the file: at 100,000 entries it is 4 MB, which read into memory whole
/// cost a fresh page per 4 KiB (a third of the answer).
#[derive(Debug)]
pub struct Text {
    file: std::fs::File,
    start: u64,
    len: u64,
}

impl Text {
    /// Copies the text to `out`, a piece at a time.
    ///
    /// # Errors
    /// When reading the kept file or writing to `out` fails, or the file
    /// was cut short since it was checked.
    pub fn write_to(mut self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        use std::io::{Read, Seek};
        self.file.seek(std::io::SeekFrom::Start(self.start))?;
        let copied = std::io::copy(&mut (&mut self.file).take(self.len), out)?;
        if copied != self.len {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }
}

/// How the status that kept its output printed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Form {
    /// Whether it printed in colour.
    pub colour: bool,
}

impl Form {
    fn code(self) -> u8 {
        u8::from(self.colour)
    }
}

fn state_code(s: State) -> u8 {
    match s {
        State::Ok => 0,
        State::Modified => 1,
        State::Behind => 2,
        State::Conflict => 3,
        State::Drifted => 4,
        State::Missing => 5,
        State::TypeChange => 6,
        State::Skipped => 7,
        State::Error => 8,
    }
}

fn state_of(c: u8) -> Option<State> {
    Some(match c {
        0 => State::Ok,
        1 => State::Modified,
        2 => State::Behind,
        3 => State::Conflict,
        4 => State::Drifted,
        5 => State::Missing,
        6 => State::TypeChange,
        7 => State::Skipped,
        8 => State::Error,
        _ => return None,
    })
}

/// What the lines were made in: this sgard, the repository and the
/// machine.
fn environment(root: &Path, env: &Env) -> String {
    format!(
        "{}\n{}\n{}\n{}\n{}\n{:?}\n{:?}",
        env!("CARGO_PKG_VERSION"),
        root.display(),
        env.home.display(),
        env.hostname,
        env.username,
        env.config_dir,
        env.folding
    )
}

/// The fingerprint of every state file that can change a status's lines,
/// by name, sorted; of every file at the top of the repository (its
/// manifest, log, tags, … : the watcher reports them too, this is a second
/// look); and of the machine-local `data.yaml`.
fn fingerprints(state: &Path, env: &Env, root: &Path) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (dir, prefix) in [(state, ""), (root, "\0repo/")] {
        for e in std::fs::read_dir(dir).ok()? {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            if NOT_STATE.contains(&name.as_str()) || name.starts_with(".sgard-tmp") {
                continue;
            }
            let md = std::fs::symlink_metadata(e.path()).ok()?;
            if md.is_dir() {
                continue;
            }
            out.push((
                format!("{prefix}{name}"),
                index::Fingerprint::of(&md).to_string(),
            ));
        }
    }
    let data = env.config_dir.as_ref().map(|d| d.join("data.yaml"));
    let fp = data
        .as_deref()
        .and_then(|d| std::fs::symlink_metadata(d).ok())
        .map_or_else(
            || "none".to_owned(),
            |m| index::Fingerprint::of(&m).to_string(),
        );
    out.push(("\0data.yaml".to_owned(), fp));
    out.sort();
    Some(out)
}

/// Reads `n` bytes whose CRC-32 is `sum` from `f` (`None`: short, or
/// not those bytes).
fn section(f: &mut std::fs::File, n: u32, sum: u32) -> Option<Vec<u8>> {
    use std::io::Read;
    // Never more room than the file has.
    let len = f.metadata().ok()?.len();
    if u64::from(n) > len {
        return None;
    }
    let mut buf = Vec::with_capacity(usize::try_from(n).ok()?);
    f.take(u64::from(n)).read_to_end(&mut buf).ok()?;
    (buf.len() as u64 == u64::from(n) && crc32fast::hash(&buf) == sum).then_some(buf)
}

/// Reads a section of `n` bytes through a small buffer: `Some` when it is
/// whole and its CRC-32 is `sum`.
fn checked(f: &mut std::fs::File, n: u32, sum: u32) -> Option<()> {
    use std::io::Read;
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut left = u64::from(n);
    let mut part = f.take(left);
    loop {
        match part.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => {
                crc.update(buf.get(..k)?);
                left = left.checked_sub(k as u64)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    (left == 0 && crc.finalize() == sum).then_some(())
}

/// A section's length and CRC-32, as the head records them.
fn span(r: &mut Reader<'_>) -> Option<(u32, u32)> {
    Some((r.u32()?, r.u32()?))
}

/// The lines of the last status, when nothing they depend on changed since
/// (see the module documentation). `None`: make the status as usual.
/// Holds the repository's lock (shared, as any reader) while it looks.
/// `form`: how this status prints as text (`None`: it does not, as with
/// `--json`); when the kept output was printed so, it is given whole, and
/// the lines are not read.
///
/// The file: the magic, then the head's length and CRC-32 and the head
/// (what the lines depend on, and the length and CRC-32 of each section
/// after it), then what was printed, then the lines.
pub fn cached_status(
    root: &Path,
    env: &Env,
    form: Option<Form>,
    on_wait: &dyn Fn(&str),
) -> Option<Cached> {
    use std::io::Read;
    if env.no_cache || env.no_watch {
        return None;
    }
    // Not a repository: nothing is made there (not even a lock file).
    if !durable::lstat_exists(&root.join(sgard_manifest::MANIFEST_FILE)) {
        return None;
    }
    let _lock = crate::RepoLock::acquire(root, crate::LockMode::Shared, on_wait).ok()?;
    let state = base::state_dir(env.state_dir.as_deref(), &base::repo_key(root, false))?;
    let mut f = durable::open_regular_file(&state.join(FILE)).ok()?;
    let mut start = [0u8; MAGIC.len() + 8];
    f.read_exact(&mut start).ok()?;
    let (magic, lens) = start.split_at(MAGIC.len());
    if magic != MAGIC {
        return None;
    }
    let mut r = Reader::new(lens);
    let (n, sum) = span(&mut r)?;
    if u64::from(n) > MAX_HEAD {
        return None;
    }
    let head = section(&mut f, n, sum)?;
    let mut r = Reader::new(&head);
    if r.u32()? != VERSION || r.str()? != environment(root, env) {
        return None;
    }
    let set = r.str()?;
    let token: sgard_watch::Token = r.str()?.parse().ok()?;
    let n = r.count(2)?;
    let mut fps = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        fps.push((r.str()?, r.str()?));
    }
    let printed = match r.u8()? {
        0 => None,
        1 => Some((r.u8()?, r.u8()? == 1)),
        _ => return None,
    };
    let text = span(&mut r)?;
    let lines = span(&mut r)?;
    if !r.is_empty() || u64::from(text.0) > MAX_BYTES || u64::from(lines.0) > MAX_BYTES {
        return None;
    }
    if fingerprints(&state, env, root)? != fps {
        return None;
    }
    let answer = sgard_watch::ask(
        &state.join(super::SOCKET),
        &set,
        Some(token),
        Duration::from_secs(3),
    )
    .ok()?;
    if !answer.changed.ok()?.is_empty() {
        return None;
    }
    if let (Some(want), Some((code, changed))) = (form, printed)
        && want.code() == code
    {
        use std::io::Seek;
        let start = f.stream_position().ok()?;
        checked(&mut f, text.0, text.1)?;
        return Some(Cached {
            lines: Vec::new(),
            secrets: Vec::new(),
            text: Some((
                Text {
                    file: f,
                    start,
                    len: u64::from(text.0),
                },
                changed,
            )),
        });
    }
    // Past what was printed, to the lines.
    std::io::copy(&mut (&mut f).take(u64::from(text.0)), &mut std::io::sink()).ok()?;
    let body = section(&mut f, lines.0, lines.1)?;
    let mut r = Reader::new(&body);
    let n = r.count(4)?;
    let mut lines = Vec::with_capacity(n.min(index::MAX_RESERVE));
    for _ in 0..n {
        let path = r.str()?;
        let state = state_of(r.u8()?)?;
        let detail = r.opt_str()?;
        let blob_missing = r.u8()? == 1;
        lines.push(StatusLine {
            path,
            state,
            detail,
            blob_missing,
            remedy: None,
        });
    }
    let n = r.count(2)?;
    let mut secrets = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        secrets.push((r.str()?, r.str()?));
    }
    r.is_empty().then_some(Cached {
        lines,
        secrets,
        text: None,
    })
}

impl Garden {
    /// Keeps `lines` (a status of every entry) and the `secrets` it warned
    /// of for the next status, written by [`Garden::finish`] once this
    /// run's state is saved: only when this status asked the watcher, and
    /// no line carries advice (those are made afresh). `printed` is what it
    /// printed and how, when that was all it said (nothing on stderr).
    pub fn keep_status(
        &mut self,
        lines: &[StatusLine],
        secrets: &[(String, String)],
        printed: Option<(Form, &[u8])>,
        before: Option<Before>,
    ) {
        let Some(before) = before else {
            return;
        };
        // Lines with advice are made afresh; and an encrypted entry (whose
        // judging depends on the keys this machine has) or a template
        // (which may read the environment or a password manager) depends
        // on more than the files this cache watches.
        if lines.iter().any(|l| l.remedy.is_some())
            || self
                .repo
                .manifest
                .files
                .iter()
                .any(|e| e.encrypted || e.template)
        {
            return;
        }
        let mut w = Writer::default();
        w.u32(VERSION);
        w.str(&environment(&self.repo.root, &self.repo.env));
        let env = &self.repo.env;
        w.str(&super::set_id(
            &self.repo.head_hash,
            &env.home,
            &self.repo.root,
        ));
        w.str(&before.token.to_string());
        let mut body = Writer::default();
        body.count(lines.len());
        for l in lines {
            body.str(&l.path);
            body.u8(state_code(l.state));
            body.opt_str(l.detail.as_deref());
            body.u8(u8::from(l.blob_missing));
        }
        body.count(secrets.len());
        for (p, s) in secrets {
            body.str(p);
            body.str(s);
        }
        let changed = lines.iter().any(|l| l.state.is_change());
        self.work.status_cache = Some(Keep {
            before: before.fps,
            head: w.buf,
            printed: printed.map(|(form, text)| (form.code(), changed, text.to_vec())),
            lines: body.buf,
        });
    }

    /// Writes what [`Garden::keep_status`] kept, with the fingerprints of
    /// the state files as this run leaves them. A run that keeps nothing
    /// leaves an older file as it is: what it depends on is checked when it
    /// is read.
    pub(crate) fn write_status_cache(&mut self) {
        let Some(state) = self.repo.local_dir.clone() else {
            return;
        };
        let file = state.join(FILE);
        let Some(kept) = self.work.status_cache.take() else {
            return;
        };
        let Some(fps) = fingerprints(&state, &self.repo.env, &self.repo.root) else {
            return;
        };
        // The lines hold only if nothing but this status changed what they
        // were read from since it noted the fingerprints (another command
        // writing the merges, the base, the tags meanwhile): of the state
        // files, this run writes only its index (and the index on disk must
        // be that one) and its memory of the store.
        let ours = |n: &str| n == index::FILE || n == crate::present::FILE;
        let others = |v: &[(String, String)]| -> Vec<(String, String)> {
            v.iter().filter(|(n, _)| !ours(n)).cloned().collect()
        };
        let index_now = self.work.base.file().map(|f| f.to_string());
        let same = others(&fps) == others(&kept.before)
            && fps
                .iter()
                .find(|(n, _)| n == index::FILE)
                .is_none_or(|(_, f)| Some(f) == index_now.as_ref());
        if !same {
            return;
        }
        let mut w = Writer { buf: kept.head };
        w.count(fps.len());
        for (n, f) in &fps {
            w.str(n);
            w.str(f);
        }
        let text = match &kept.printed {
            Some((code, changed, text)) => {
                w.u8(1);
                w.u8(*code);
                w.u8(u8::from(*changed));
                text.as_slice()
            }
            None => {
                w.u8(0);
                &[]
            }
        };
        let (Ok(text_len), Ok(lines_len)) =
            (u32::try_from(text.len()), u32::try_from(kept.lines.len()))
        else {
            let _ = std::fs::remove_file(&file);
            return;
        };
        w.u32(text_len);
        w.u32(crc32fast::hash(text));
        w.u32(lines_len);
        w.u32(crc32fast::hash(&kept.lines));
        let Ok(head_len) = u32::try_from(w.buf.len()) else {
            return;
        };
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&head_len.to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&w.buf).to_le_bytes());
        bytes.extend_from_slice(&w.buf);
        bytes.extend_from_slice(text);
        bytes.extend_from_slice(&kept.lines);
        // A cache that checks itself: failing to keep it, or losing it in
        // a crash, costs the next status a full look.
        if durable::write_replace(&file, &bytes, 0o600).is_err() {
            let _ = std::fs::remove_file(&file);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Seek, SeekFrom, Write};

    use super::*;

    /// A file holding `before`, then `body`, positioned at `body`.
    fn file_with(before: &[u8], body: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(before).unwrap();
        f.write_all(body).unwrap();
        f.seek(SeekFrom::Start(before.len() as u64)).unwrap();
        f
    }

    #[test]
    fn a_kept_text_is_checked_across_many_reads_and_copied_whole() {
        // Past the 64 KiB buffer, at an odd length.
        let body: Vec<u8> = (0..200_003u32).map(|i| (i % 251) as u8).collect();
        let n = u32::try_from(body.len()).unwrap();
        let sum = crc32fast::hash(&body);
        let mut f = file_with(b"head", &body);
        assert_eq!(checked(&mut f, n, sum), Some(()));
        let text = Text {
            file: f,
            start: 4,
            len: u64::from(n),
        };
        let mut out = Vec::new();
        text.write_to(&mut out).unwrap();
        assert_eq!(out, body);
        // One byte past the first buffer changed, a wrong sum, a length
        // past the end of the file: refused.
        let mut bad = body.clone();
        bad[70_000] ^= 1;
        assert_eq!(checked(&mut file_with(b"head", &bad), n, sum), None);
        assert_eq!(checked(&mut file_with(b"head", &body), n, sum ^ 1), None);
        assert_eq!(checked(&mut file_with(b"head", &body), n + 1, sum), None);
        // A file cut short after it was checked: an error, not a short copy.
        let f = file_with(b"head", &body);
        f.set_len(100_000).unwrap();
        let cut = Text {
            file: f,
            start: 4,
            len: u64::from(n),
        };
        assert!(cut.write_to(&mut Vec::new()).is_err());
    }
}
