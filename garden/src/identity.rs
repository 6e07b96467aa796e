//! Per-machine targeting: this machine's labels and which entries apply.
//!
//! Labels are the short lowercase host name, `os:<GOOS>`, `arch:<GOARCH>`
//! (Go's names, so repositories shared with the Go sgard agree) and
//! `tag:<t>` for each of this machine's tags (kept in the machine-local
//! state of the repository; see `tags.rs`).

use std::fs;
use std::io;
use std::path::Path;

use sgard_manifest::Entry;

use crate::{Error, Result};

/// The tags file: in a repository's machine-local state folder (and, as
/// older versions and the Go sgard keep it, inside the repository).
pub const TAGS_FILE: &str = "tags";

/// Go's name for the operating system.
pub fn go_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    }
}

/// Go's name for the processor architecture.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        "mips64" if cfg!(target_endian = "little") => "mips64le",
        "mips" if cfg!(target_endian = "little") => "mipsle",
        other => other,
    }
}

/// The short, lowercase form of a host name (`unknown` when empty).
pub fn short_hostname(name: &str) -> String {
    let short = name.trim().split('.').next().unwrap_or("").to_lowercase();
    if short.is_empty() {
        "unknown".into()
    } else {
        short
    }
}

/// Reads `<dir>/tags`: trimmed lines, blanks dropped, file order.
///
/// # Errors
/// [`Error::Io`] when the file exists but cannot be read.
pub fn read_tags(dir: &Path) -> Result<Vec<String>> {
    let p = dir.join(TAGS_FILE);
    match fs::read_to_string(&p) {
        Ok(s) => Ok(s
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io("reading", p, e)),
    }
}

/// Writes `<dir>/tags` atomically (one tag per line), creating `dir`
/// (private) if needed.
///
/// # Errors
/// [`Error::Store`] when it cannot be written.
pub fn write_tags(dir: &Path, tags: &[String]) -> Result<()> {
    let mut text = String::new();
    for t in tags {
        text.push_str(t);
        text.push('\n');
    }
    sgard_store::durable::create_private_dir_all(dir)?;
    sgard_store::durable::write_atomic(&dir.join(TAGS_FILE), text.as_bytes(), 0o644)?;
    Ok(())
}

/// Checks a tag name: non-empty after trimming, no whitespace inside.
///
/// # Errors
/// [`Error::Invalid`] saying why.
pub fn check_tag(tag: &str) -> Result<String> {
    let t = tag.trim();
    if t.is_empty() || t.chars().any(char::is_whitespace) {
        return Err(Error::Invalid(format!(
            "invalid tag {tag:?}: tags are non-empty and contain no spaces"
        )));
    }
    Ok(t.to_owned())
}

/// This machine's labels, in order.
pub fn labels(hostname: &str, tags: &[String]) -> Vec<String> {
    let mut l = vec![
        short_hostname(hostname),
        format!("os:{}", go_os()),
        format!("arch:{}", go_arch()),
    ];
    l.extend(tags.iter().map(|t| format!("tag:{t}")));
    l
}

/// Whether `entry` applies on a machine with `labels` (case-insensitive).
///
/// # Errors
/// [`Error::Invalid`] when both `only` and `never` are set (the manifest
/// loader already refuses that; this guards entries built in memory).
pub fn applies(entry: &Entry, labels: &[String]) -> Result<bool> {
    let matches = |set: &[String]| {
        set.iter()
            .any(|m| labels.iter().any(|l| l.eq_ignore_ascii_case(m.trim())))
    };
    match (entry.only.is_empty(), entry.never.is_empty()) {
        (false, false) => Err(Error::Invalid(format!(
            "{}: `only` and `never` are mutually exclusive",
            entry.path
        ))),
        (false, true) => Ok(matches(&entry.only)),
        (true, false) => Ok(!matches(&entry.never)),
        (true, true) => Ok(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sgard_manifest::{EntryKind, Timestamp};

    #[test]
    fn targeting_rules() {
        let labels = labels("Laptop.example.com", &["work".into()]);
        assert_eq!(labels[0], "laptop");
        let mut e = Entry::new("~/x".into(), EntryKind::Directory, Timestamp::zero());
        assert!(applies(&e, &labels).unwrap());
        e.only = vec!["LAPTOP".into()];
        assert!(applies(&e, &labels).unwrap());
        e.only = vec![format!("OS:{}", go_os().to_uppercase())];
        assert!(applies(&e, &labels).unwrap());
        e.only = vec!["os:fakeos".into(), "tag:work".into()];
        assert!(applies(&e, &labels).unwrap());
        e.only = vec!["os:fakeos".into()];
        assert!(!applies(&e, &labels).unwrap());
        e.only.clear();
        e.never = vec![format!("arch:{}", go_arch())];
        assert!(!applies(&e, &labels).unwrap());
        e.only = vec!["x".into()];
        assert!(applies(&e, &labels).is_err());
    }

    #[test]
    fn go_names() {
        assert!(
            [
                "amd64", "arm64", "386", "arm", "riscv64", "s390x", "ppc64le", "ppc64", "loong64"
            ]
            .contains(&go_arch())
                || !go_arch().is_empty()
        );
        if cfg!(target_arch = "x86_64") {
            assert_eq!(go_arch(), "amd64");
        }
        if cfg!(target_os = "linux") {
            assert_eq!(go_os(), "linux");
        }
        assert_eq!(short_hostname(""), "unknown");
    }
}
