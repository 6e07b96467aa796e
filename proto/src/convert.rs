//! Lossless conversions between the manifest crate's types and messages.
//!
//! Converting a message into a [`Manifest`] validates it exactly as loading
//! `manifest.yaml` does (paths, hashes, modes, types, targeting), so nothing
//! a hostile peer sends reaches the disk unchecked.

use chrono::DateTime;
use sgard_manifest::history::{Reason, Record};
use sgard_manifest::{Encryption, Entry, EntryKind, Hash, KekSlot, Manifest, Mode, Run, Timestamp};

use crate::v1;

/// A message that does not make a valid manifest.
#[derive(Debug, thiserror::Error)]
#[error("invalid manifest from peer: {0}")]
pub struct Invalid(pub String);

fn ts(t: &Timestamp) -> prost_types::Timestamp {
    let d = t.datetime();
    prost_types::Timestamp {
        seconds: d.timestamp(),
        nanos: i32::try_from(d.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

fn from_ts(t: Option<&prost_types::Timestamp>) -> Result<Timestamp, Invalid> {
    let Some(t) = t else {
        return Ok(Timestamp::zero());
    };
    let nanos = u32::try_from(t.nanos).map_err(|_| Invalid("negative nanoseconds".into()))?;
    DateTime::from_timestamp(t.seconds, nanos)
        .map(Timestamp::from_datetime)
        .ok_or_else(|| Invalid(format!("timestamp {}s out of range", t.seconds)))
}

fn hex(h: &Option<Hash>) -> String {
    h.map(|h| h.to_hex()).unwrap_or_default()
}

fn hash(s: &str, what: &str) -> Result<Option<Hash>, Invalid> {
    if s.is_empty() {
        return Ok(None);
    }
    Hash::parse(s)
        .map(Some)
        .map_err(|_| Invalid(format!("malformed {what} {s:?}")))
}

fn i32_of(v: Option<u64>) -> i32 {
    v.and_then(|v| i32::try_from(v).ok()).unwrap_or(0)
}

fn u64_of(v: i32) -> Option<u64> {
    u64::try_from(v).ok().filter(|v| *v != 0)
}

fn opt(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// A manifest as a message.
pub fn manifest_to_proto(m: &Manifest) -> v1::Manifest {
    v1::Manifest {
        version: i32::try_from(m.version).unwrap_or(1),
        created: Some(ts(&m.created)),
        updated: Some(ts(&m.updated)),
        message: m.message.clone().unwrap_or_default(),
        data: hex(&m.data),
        folders: m
            .folders
            .iter()
            .map(|f| v1::FolderMode {
                path: f.path.clone(),
                mode: f.mode.to_string(),
            })
            .collect(),
        files: m.files.iter().map(entry_to_proto).collect(),
        encryption: m.encryption.as_ref().map(|e| v1::Encryption {
            algorithm: e.algorithm.clone(),
            kek_slots: e
                .kek_slots
                .iter()
                .map(|(k, s)| {
                    (
                        k.clone(),
                        v1::KekSlot {
                            r#type: s.kind.clone(),
                            argon2_time: i32_of(s.argon2_time),
                            argon2_memory: i32_of(s.argon2_memory),
                            argon2_threads: i32_of(s.argon2_threads),
                            credential_id: s.credential_id.clone().unwrap_or_default(),
                            salt: s.salt.clone().unwrap_or_default(),
                            wrapped_dek: s.wrapped_dek.clone().unwrap_or_default(),
                        },
                    )
                })
                .collect(),
            retired_deks: e.retired_deks.clone(),
        }),
        exclude: m.exclude.clone(),
    }
}

fn entry_to_proto(e: &Entry) -> v1::ManifestEntry {
    v1::ManifestEntry {
        path: e.path.clone(),
        hash: hex(&e.hash),
        r#type: e.type_str().to_owned(),
        mode: e.mode.map(|m| m.to_string()).unwrap_or_default(),
        target: e.target.clone().unwrap_or_default(),
        updated: Some(ts(&e.updated)),
        plaintext_hash: hex(&e.plaintext_hash.as_deref().copied()),
        encrypted: e.encrypted,
        locked: e.locked,
        only: e.only.clone(),
        never: e.never.clone(),
        plaintext_mac: hex(&e.plaintext_mac.as_deref().copied()),
        run: e.run.map(|r| r.as_str().to_owned()).unwrap_or_default(),
    }
}

/// A message as a manifest, validated as `manifest.yaml` would be.
///
/// # Errors
/// [`Invalid`] naming what is wrong.
pub fn manifest_from_proto(p: &v1::Manifest) -> Result<Manifest, Invalid> {
    let mut m = Manifest::new(from_ts(p.created.as_ref())?);
    m.updated = from_ts(p.updated.as_ref())?;
    m.version = u32::try_from(p.version.max(1)).map_err(|_| Invalid("bad version".into()))?;
    m.message = opt(&p.message);
    m.data = hash(&p.data, "data")?;
    for f in &p.folders {
        let mode = Mode::parse(&f.mode).map_err(|r| Invalid(format!("{}: {r}", f.path)))?;
        m.folders.push(sgard_manifest::FolderMode {
            path: f.path.clone(),
            mode,
        });
    }
    // In path order, as the manifest keeps them (the validator below
    // refuses a path given twice).
    m.folders.sort_by(|a, b| a.path.cmp(&b.path));
    m.exclude = p.exclude.clone();
    for f in &p.files {
        let kind = match f.r#type.as_str() {
            "file" | sgard_manifest::TEMPLATE_TYPE => EntryKind::File,
            "directory" => EntryKind::Directory,
            "link" => EntryKind::Link,
            other => return Err(Invalid(format!("{}: unknown type {other:?}", f.path))),
        };
        let mut e = Entry::new(f.path.clone(), kind, from_ts(f.updated.as_ref())?);
        e.hash = hash(&f.hash, "hash")?;
        e.plaintext_hash = hash(&f.plaintext_hash, "plaintext_hash")?.map(Box::new);
        e.plaintext_mac = hash(&f.plaintext_mac, "plaintext_mac")?.map(Box::new);
        e.encrypted = f.encrypted;
        e.locked = f.locked;
        e.mode = if f.mode.is_empty() {
            None
        } else {
            Some(Mode::parse(&f.mode).map_err(|r| Invalid(format!("{}: {r}", f.path)))?)
        };
        e.target = opt(&f.target);
        e.only = f.only.clone();
        e.never = f.never.clone();
        e.template = f.r#type == sgard_manifest::TEMPLATE_TYPE;
        e.run = if f.run.is_empty() {
            None
        } else {
            Some(
                Run::parse(&f.run)
                    .ok_or_else(|| Invalid(format!("{}: unknown run {:?}", f.path, f.run)))?,
            )
        };
        m.files.push(e);
    }
    m.encryption = p.encryption.as_ref().map(|e| Encryption {
        algorithm: e.algorithm.clone(),
        kek_slots: e
            .kek_slots
            .iter()
            .map(|(k, s)| {
                (
                    k.clone(),
                    KekSlot {
                        kind: s.r#type.clone(),
                        argon2_time: u64_of(s.argon2_time),
                        argon2_memory: u64_of(s.argon2_memory),
                        argon2_threads: u64_of(s.argon2_threads),
                        credential_id: opt(&s.credential_id),
                        salt: opt(&s.salt),
                        wrapped_dek: opt(&s.wrapped_dek),
                    },
                )
            })
            .collect(),
        retired_deks: e.retired_deks.clone(),
    });
    // Validate everything else (paths, duplicates, only/never, hashes per
    // type) through the one validator the manifest file goes through.
    let text = m.to_yaml();
    Manifest::from_yaml(&text).map_err(|e| Invalid(e.to_string()))
}

/// A history record as a message.
pub fn record_to_proto(r: &Record) -> v1::HistoryRecord {
    v1::HistoryRecord {
        id: r.id.to_hex(),
        parent: hex(&r.parent),
        time: Some(ts(&r.time)),
        host: r.host.clone(),
        reason: r.reason.as_str().to_owned(),
        message: r.message.clone().unwrap_or_default(),
        entries: r.entries,
        bytes: r.bytes,
        new_blobs: r.new_blobs,
        head_before: hex(&r.head_before),
        machine: r.machine.clone().unwrap_or_default(),
    }
}

/// A message as a history record.
///
/// # Errors
/// [`Invalid`] for malformed ids.
pub fn record_from_proto(p: &v1::HistoryRecord) -> Result<Record, Invalid> {
    Ok(Record {
        id: hash(&p.id, "id")?.ok_or_else(|| Invalid("history record without id".into()))?,
        parent: hash(&p.parent, "parent")?,
        time: from_ts(p.time.as_ref())?,
        host: p.host.clone(),
        machine: Some(p.machine.clone()).filter(|m| sgard_manifest::history::is_machine_id(m)),
        reason: Reason::parse(&p.reason),
        message: opt(&p.message),
        entries: p.entries,
        bytes: p.bytes,
        new_blobs: p.new_blobs,
        head_before: hash(&p.head_before, "head_before")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

    fn sample() -> Manifest {
        let text = format!(
            "version: 1
created: 2026-03-23T12:00:00.123456789Z
updated: 2026-03-24T08:30:00Z
message: hello
files:
    - path: ~/.bashrc
      hash: {H}
      locked: true
      type: file
      mode: \"0600\"
      updated: 2026-03-23T12:00:00.5Z
      only:
        - os:linux
    - path: ~/.ssh/config
      hash: {H}
      plaintext_mac: {H}
      plaintext_hash: {H}
      encrypted: true
      type: file
      mode: \"0600\"
      updated: 2026-03-23T12:00:00Z
      never: [work]
    - path: ~/.hl
      type: link
      mode: \"0777\"
      target: /etc/hosts
      updated: 2026-03-23T12:00:00Z
    - path: /etc/app
      type: directory
      mode: \"0755\"
      updated: 0001-01-01T00:00:00Z
exclude:
    - ~/.cache
encryption:
    algorithm: xchacha20-poly1305
    kek_slots:
        passphrase:
            type: passphrase
            argon2_time: 3
            argon2_memory: 65536
            argon2_threads: 4
            salt: c2FsdA==
            wrapped_dek: d3JhcA==
        fido2/key:
            type: fido2
            credential_id: Y3JlZA==
            salt: c2FsdA==
            wrapped_dek: d3JhcA==
    retired_deks:
        - b2xk
"
        );
        Manifest::from_yaml(&text).unwrap()
    }

    #[test]
    fn manifest_round_trips_losslessly() {
        let m = sample();
        let back = manifest_from_proto(&manifest_to_proto(&m)).unwrap();
        assert_eq!(back, m);
        let empty = Manifest::new(Timestamp::zero());
        assert_eq!(
            manifest_from_proto(&manifest_to_proto(&empty)).unwrap(),
            empty
        );
    }

    #[test]
    fn hostile_messages_are_refused() {
        let mut p = manifest_to_proto(&sample());
        p.files[0].path = "~/../../etc/passwd".into();
        assert!(manifest_from_proto(&p).is_err());
        let mut p = manifest_to_proto(&sample());
        p.files[0].hash = "../../x".into();
        assert!(manifest_from_proto(&p).is_err());
        let mut p = manifest_to_proto(&sample());
        p.files[0].r#type = "socket".into();
        assert!(manifest_from_proto(&p).is_err());
        let mut p = manifest_to_proto(&sample());
        p.files[0].mode = "99999".into();
        assert!(manifest_from_proto(&p).is_err());
    }

    #[test]
    fn records_round_trip() {
        let r = Record {
            id: Hash::of(b"a"),
            parent: Some(Hash::of(b"b")),
            time: Timestamp::parse("2026-03-23T12:00:00.25Z").unwrap(),
            host: "laptop".into(),
            machine: Some("0123456789abcdef0123456789abcdef".into()),
            reason: Reason::Checkpoint,
            message: Some("m".into()),
            entries: 3,
            bytes: 9,
            new_blobs: 1,
            head_before: Some(Hash::of(b"c")),
        };
        assert_eq!(record_from_proto(&record_to_proto(&r)).unwrap(), r);
    }
}
