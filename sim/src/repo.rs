//! Reading a repository folder without sgard: the manifest, the history,
//! snapshots and the store, so the checks judge sgard by what is on disk,
//! not by what it says.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// One manifest entry, as far as the checks need it.
#[derive(Clone, Debug)]
pub struct Entry {
    /// `~/…` or absolute.
    pub path: String,
    /// `file`, `link`, `dir`, `template`.
    pub kind: String,
    /// The content's SHA-256 (of the ciphertext when encrypted).
    pub hash: Option<String>,
    /// Octal digits, as the manifest writes them.
    pub mode: Option<String>,
    /// A link's target.
    pub target: Option<String>,
    /// Whether the content is stored encrypted.
    pub encrypted: bool,
    /// Every field, for comparing two versions of an entry.
    pub raw: Value,
}

impl Entry {
    /// Whether its content lives in the store (a file or a template).
    pub fn has_content(&self) -> bool {
        matches!(self.kind.as_str(), "file" | "template") && self.hash.is_some()
    }

    /// Whether it is plain: its hash is the hash of the file on disk.
    pub fn plain_file(&self) -> bool {
        self.kind == "file" && !self.encrypted
    }
}

/// A manifest (the head or a snapshot).
#[derive(Clone, Debug)]
pub struct Manifest {
    /// Its entries, in its order.
    pub entries: Vec<Entry>,
    /// The whole document.
    pub raw: Value,
}

impl Manifest {
    /// Reads a manifest's text.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let raw: Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        let mut entries = Vec::new();
        if let Some(files) = raw.get("files").and_then(Value::as_array) {
            for f in files {
                let s = |k: &str| f.get(k).and_then(Value::as_str).map(str::to_owned);
                let Some(path) = s("path") else { continue };
                entries.push(Entry {
                    path,
                    kind: s("type").unwrap_or_default(),
                    hash: s("hash"),
                    mode: s("mode").or_else(|| f.get("mode").map(Value::to_string)),
                    target: s("target"),
                    encrypted: f.get("encrypted").and_then(Value::as_bool).unwrap_or(false),
                    raw: f.clone(),
                });
            }
        }
        Ok(Manifest { entries, raw })
    }

    /// `manifest.yaml` of the repository in `dir`: `Ok(None)` when there is
    /// none, `Err` when it does not parse.
    pub fn load(dir: &Path) -> Result<Option<Manifest>, String> {
        match fs::read_to_string(dir.join("manifest.yaml")) {
            Ok(t) => Manifest::parse(&t).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The repository's head as sgard takes it: `manifest.yaml`, unless
    /// the newest record of `history.yaml` installed a whole snapshot
    /// (checkpoint, pull) over it whose write of `manifest.yaml` was lost
    /// (a crash, or a failed sync, between the log record, which is the
    /// commit point, and `manifest.yaml`): then that snapshot, which a
    /// reader takes as the head and the next writer writes out.
    pub fn head(dir: &Path) -> Result<Option<Manifest>, String> {
        let file = sha_file(&dir.join("manifest.yaml"));
        let newest = history(dir).pop();
        if let (Some(file), Some(last)) = (&file, newest)
            && matches!(last.reason.as_str(), "checkpoint" | "pull")
            && last.id != *file
            && last.head_before.as_deref() == Some(file.as_str())
            && let Some(m) = snapshot(dir, &last.id)
        {
            return Ok(Some(m));
        }
        Manifest::load(dir)
    }

    /// The entry of `path`.
    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.path == path)
    }

    /// What a snapshot records, without the times it was made: two
    /// manifests equal here record the same thing.
    pub fn substance(&self) -> Value {
        let mut top = self.raw.clone();
        if let Some(o) = top.as_object_mut() {
            o.remove("created");
            o.remove("updated");
            if let Some(files) = o.get_mut("files").and_then(Value::as_array_mut) {
                for f in files {
                    if let Some(f) = f.as_object_mut() {
                        f.remove("updated");
                        f.remove("created");
                    }
                }
            }
        }
        top
    }
}

/// One record of `history.yaml`.
#[derive(Clone, Debug)]
pub struct Snap {
    /// The snapshot's id (its blob's hash).
    pub id: String,
    /// The snapshot before it.
    pub parent: Option<String>,
    /// `checkpoint`, or what else recorded it.
    pub reason: String,
    /// The head it was recorded over.
    pub head_before: Option<String>,
}

/// The records of `history.yaml` (none when it is missing or damaged).
pub fn history(dir: &Path) -> Vec<Snap> {
    let Ok(text) = fs::read_to_string(dir.join("history.yaml")) else {
        return Vec::new();
    };
    let Ok(v) = serde_saphyr::from_str::<Value>(&text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for r in v
        .get("snapshots")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let s = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_owned);
        if let Some(id) = s("id") {
            out.push(Snap {
                id,
                parent: s("parent"),
                reason: s("reason").unwrap_or_default(),
                head_before: s("head_before"),
            });
        }
    }
    out
}

/// Where the whole blob `hash` lives.
pub fn blob_path(dir: &Path, hash: &str) -> Option<PathBuf> {
    shard(&dir.join("blobs"), hash)
}

fn shard(base: &Path, hash: &str) -> Option<PathBuf> {
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(base.join(&hash[0..2]).join(&hash[2..4]).join(hash))
}

/// The manifest a snapshot recorded (its blob), if readable.
pub fn snapshot(dir: &Path, id: &str) -> Option<Manifest> {
    let text = fs::read_to_string(blob_path(dir, id)?).ok()?;
    Manifest::parse(&text).ok()
}

/// The chunks a chunk list names, when the list is there and reads.
fn chunk_list(dir: &Path, hash: &str) -> Option<Vec<String>> {
    let text = fs::read_to_string(shard(&dir.join("chunk-lists"), hash)?).ok()?;
    let mut chunks = Vec::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        if let (Some(h), Some(n), None) = (w.next(), w.next(), w.next())
            && h.len() == 64
            && n.parse::<u64>().is_ok()
        {
            chunks.push(h.to_owned());
        }
    }
    Some(chunks)
}

/// Whether the store holds `hash`: a blob, or a chunk list whose every
/// chunk is there (existence only, as `status` promises).
pub fn present(dir: &Path, hash: &str) -> bool {
    if blob_path(dir, hash).is_some_and(|p| p.is_file()) {
        return true;
    }
    match chunk_list(dir, hash) {
        Some(chunks) => chunks
            .iter()
            .all(|c| shard(&dir.join("chunks"), c).is_some_and(|p| p.is_file())),
        None => false,
    }
}

fn sha_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// SHA-256 of a file, hex.
pub fn sha_file(p: &Path) -> Option<String> {
    fs::read(p).ok().map(|d| sha_hex(&d))
}

/// Whether `hash` can be read back whole and right: a blob that hashes to
/// its name, or a list whose chunks each hash to theirs and together to
/// `hash`.
pub fn intact(dir: &Path, hash: &str) -> Result<(), String> {
    if let Some(p) = blob_path(dir, hash)
        && let Ok(data) = fs::read(&p)
    {
        return if sha_hex(&data) == hash {
            Ok(())
        } else {
            Err(format!("blob {hash} does not hash to its name"))
        };
    }
    let Some(chunks) = chunk_list(dir, hash) else {
        return Err(format!("{hash}: neither a blob nor a chunk list"));
    };
    let mut whole = Sha256::new();
    for c in &chunks {
        let data = shard(&dir.join("chunks"), c)
            .and_then(|p| fs::read(p).ok())
            .ok_or_else(|| format!("{hash}: chunk {c} is missing"))?;
        if sha_hex(&data) != *c {
            return Err(format!("{hash}: chunk {c} does not hash to its name"));
        }
        whole.update(&data);
    }
    let got: String = whole
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if got == hash {
        Ok(())
    } else {
        Err(format!("{hash}: its chunks make other content"))
    }
}

/// Every content the head and the recorded snapshots of `dir` reference,
/// and the snapshots' own blobs: what `verify` promises is there.
pub fn referenced(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut add = |m: &Manifest| {
        for e in &m.entries {
            if e.has_content()
                && let Some(h) = &e.hash
            {
                out.insert(h.clone());
            }
        }
    };
    if let Ok(Some(m)) = Manifest::load(dir) {
        add(&m);
    }
    let snaps = history(dir);
    for s in &snaps {
        if let Some(m) = snapshot(dir, &s.id) {
            add(&m);
        }
    }
    out
}

/// An independent `verify`: the first problem with what `dir` references
/// (its content and its snapshots' blobs), or `None`.
pub fn damage(dir: &Path) -> Option<String> {
    // The newest snapshot is `manifest.yaml` itself, byte for byte: its
    // blob can always be written again from it (sgard does, at its next
    // write), so a missing one loses nothing.
    let head = sha_file(&dir.join("manifest.yaml"));
    for s in history(dir) {
        match blob_path(dir, &s.id).and_then(|p| fs::read(p).ok()) {
            None if head.as_deref() == Some(s.id.as_str()) => {}
            None => return Some(format!("snapshot {} has no blob", s.id)),
            Some(d) if sha_hex(&d) != s.id => return Some(format!("snapshot {} is damaged", s.id)),
            Some(_) => {}
        }
    }
    referenced(dir)
        .into_iter()
        .find_map(|h| intact(dir, &h).err())
}

/// Every name in the store of `dir` (blobs and chunk lists): contents it
/// could give back.
pub fn stored(dir: &Path, hash: &str) -> bool {
    blob_path(dir, hash).is_some_and(|p| p.is_file())
        || shard(&dir.join("chunk-lists"), hash).is_some_and(|p| p.is_file())
}

/// The files under `dir/sub` (sorted), for damaging one.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_with_its_entries_and_its_substance_drops_times() {
        let text = "version: 1\ncreated: 2026-03-23T12:00:00Z\nupdated: 2026-03-23T12:01:00Z\nfiles:\n    - path: ~/.bashrc\n      hash: 79ac1dab8630122efff2ed050f9beda29c5d2605250907bde8b273d1e17d6101\n      type: file\n      mode: \"0644\"\n      updated: 2026-03-23T12:00:00Z\n    - path: ~/.link\n      type: link\n      mode: \"0777\"\n      target: .bashrc\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.entries.len(), 2);
        assert_eq!(m.entries[0].mode.as_deref(), Some("0644"));
        assert!(m.entries[0].plain_file());
        assert_eq!(m.entries[1].target.as_deref(), Some(".bashrc"));
        let later = text.replace("12:01:00Z", "13:00:00Z").replace(
            "      updated: 2026-03-23T12:00:00Z",
            "      updated: 2026-03-24T12:00:00Z",
        );
        assert_eq!(Manifest::parse(&later).unwrap().substance(), m.substance());
        let other = text.replace("\"0644\"", "\"0600\"");
        assert_ne!(Manifest::parse(&other).unwrap().substance(), m.substance());
    }
}
