//! A snapshot document rendered from borrowed parts.

use crate::yaml::{self, Emitter};
use crate::{Entry, Manifest};

/// The text of a document whose entries are held elsewhere: exactly what a
/// [`Manifest`] with `header`'s fields (its own files and absent paths
/// aside), these files and these absent paths renders, without cloning a
/// single entry (a restore of 100,000 files held each one twice for this).
#[derive(Debug)]
pub struct DocRef<'a> {
    header: &'a Manifest,
    files: Vec<&'a Entry>,
    absent: Vec<&'a str>,
}

impl<'a> DocRef<'a> {
    /// The document of `header` with `files` (put in path order) and
    /// `absent` (sorted). Each is rendered as given: two entries with one
    /// path are two entries (a reader then refuses the text), exactly as a
    /// [`Manifest`] holding them renders.
    pub fn new(header: &'a Manifest, mut files: Vec<&'a Entry>, mut absent: Vec<&'a str>) -> Self {
        if !files.is_sorted_by(|a, b| a.path <= b.path) {
            files.sort_by(|a, b| a.path.cmp(&b.path));
        }
        if !absent.is_sorted() {
            absent.sort_unstable();
        }
        DocRef {
            header,
            files,
            absent,
        }
    }

    /// The entries, in path order.
    pub fn files(&self) -> &[&'a Entry] {
        &self.files
    }

    /// The paths recorded as not existing, sorted.
    pub fn absent(&self) -> &[&'a str] {
        &self.absent
    }

    /// The text (see [`Manifest::to_yaml`]).
    pub fn to_yaml(&self) -> String {
        let mut e = Emitter::new();
        self.emit(&mut e);
        e.finish()
    }

    /// Writes the text to `out` in pieces of about 64 KiB (see
    /// [`Manifest::write_yaml`]).
    ///
    /// # Errors
    /// The first error `out` returned.
    pub fn write_yaml(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut e = Emitter::to_sink(out);
        self.emit(&mut e);
        e.finish_to_sink()
    }

    pub(crate) fn emit(&self, e: &mut Emitter<'_>) {
        e.raw(0, "version", &self.header.version.to_string());
        e.display(0, "created", &self.header.created);
        e.display(0, "updated", &self.header.updated);
        if let Some(m) = self.header.message.as_deref().filter(|m| !m.is_empty()) {
            e.str(0, "message", m);
        }
        if let Some(h) = &self.header.data {
            e.display(0, "data", h);
        }
        if self.files.is_empty() {
            e.raw(0, "files", "[]");
        } else {
            e.open(0, "files");
        }
        for f in &self.files {
            e.spill();
            e.item(4, "path", &f.path);
            if let Some(h) = &f.hash {
                e.display(6, "hash", h);
            }
            if let Some(h) = &f.plaintext_hash {
                e.display(6, "plaintext_hash", h);
            }
            if let Some(h) = &f.plaintext_mac {
                e.display(6, "plaintext_mac", h);
            }
            if let Some(h) = &f.purged {
                e.display(6, "purged", h);
            }
            if f.encrypted {
                e.raw(6, "encrypted", "true");
            }
            if f.locked {
                e.raw(6, "locked", "true");
            }
            e.raw(6, "type", f.type_str());
            if let Some(m) = &f.mode {
                e.raw(6, "mode", &format!("\"{m}\""));
            }
            if let Some(t) = &f.target {
                e.str(6, "target", t);
            }
            if let Some(r) = f.run {
                e.raw(6, "run", r.as_str());
            }
            e.display(6, "updated", &f.updated);
            if !f.only.is_empty() {
                e.list(6, "only", &f.only);
            }
            if !f.never.is_empty() {
                e.list(6, "never", &f.never);
            }
        }
        if !self.header.exclude.is_empty() {
            e.list(0, "exclude", &self.header.exclude);
        }
        if !self.header.folders.is_empty() {
            e.open(0, "folders");
            for f in &self.header.folders {
                e.item(4, "path", &f.path);
                e.raw(6, "mode", &format!("\"{}\"", f.mode));
            }
        }
        if !self.absent.is_empty() {
            e.list(0, "absent", &self.absent);
        }
        if let Some(enc) = &self.header.encryption {
            e.open(0, "encryption");
            e.str(4, "algorithm", &enc.algorithm);
            if enc.kek_slots.is_empty() {
                e.raw(4, "kek_slots", "{}");
            } else {
                e.open(4, "kek_slots");
            }
            for (name, s) in &enc.kek_slots {
                e.open(8, &yaml::scalar(name));
                e.str(12, "type", &s.kind);
                for (k, v) in [
                    ("argon2_time", s.argon2_time),
                    ("argon2_memory", s.argon2_memory),
                    ("argon2_threads", s.argon2_threads),
                ] {
                    if let Some(v) = v.filter(|v| *v != 0) {
                        e.raw(12, k, &v.to_string());
                    }
                }
                for (k, v) in [
                    ("credential_id", &s.credential_id),
                    ("salt", &s.salt),
                    ("wrapped_dek", &s.wrapped_dek),
                ] {
                    if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                        e.str(12, k, v);
                    }
                }
            }
            if !enc.retired_deks.is_empty() {
                e.list(4, "retired_deks", &enc.retired_deks);
            }
        }
    }
}
