//! Relative links and images resolve to files (within the book, for its
//! pages), and `#fragment`s to headings of their target; the book's pages
//! are all in SUMMARY.md.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Component, Path, PathBuf};

use super::markdown;

/// Checks the links of `files` (paths on disk, named relative to `root` in
/// messages); one message per broken link. A page under `book` (the
/// book's `src`) may only link within it: what lies outside is not in the
/// built book, so such a link 404s there even though the file exists.
pub fn check(root: &Path, book: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut ids: HashMap<PathBuf, Option<Vec<String>>> = HashMap::new();
    let mut failures = Vec::new();
    for file in files {
        let name = display(root, file);
        let Ok(text) = fs::read_to_string(file) else {
            failures.push(format!("{name}: cannot read"));
            continue;
        };
        let doc = markdown::parse(&text);
        let summary = file.file_name().is_some_and(|n| n == "SUMMARY.md");
        for link in &doc.links {
            let dest = link.dest.trim();
            if dest.is_empty() {
                let what = if summary {
                    "a draft chapter (no file)"
                } else {
                    "an empty link"
                };
                failures.push(format!("{name}:{}: {what}", link.line));
                continue;
            }
            if has_scheme(dest) {
                continue;
            }
            let (path, fragment) = match dest.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (dest, None),
            };
            let target = if path.is_empty() {
                file.clone()
            } else {
                let Some(dir) = file.parent() else { continue };
                normalize(&dir.join(decode(path)))
            };
            if !target.exists() {
                failures.push(format!("{name}:{}: {dest}: no such file", link.line));
                continue;
            }
            if normalize(file).starts_with(book) && !target.starts_with(book) {
                failures.push(format!(
                    "{name}:{}: {dest}: leaves the book; link to the repository file by URL \
                     or name it in text",
                    link.line
                ));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            if target.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let known = ids.entry(target.clone()).or_insert_with(|| {
                fs::read_to_string(&target)
                    .ok()
                    .map(|t| markdown::parse(&t).ids)
            });
            let fragment = decode(fragment);
            if known.as_ref().is_some_and(|ids| !ids.contains(&fragment)) {
                failures.push(format!(
                    "{name}:{}: {dest}: {} has no heading with the id `{fragment}`",
                    link.line,
                    display(root, &target)
                ));
            }
        }
    }
    failures
}

/// Every page under `src` is linked from its SUMMARY.md.
pub fn orphans(root: &Path, src: &Path) -> Vec<String> {
    let summary = src.join("SUMMARY.md");
    let Ok(text) = fs::read_to_string(&summary) else {
        return vec![format!("{}: missing", display(root, &summary))];
    };
    let listed: BTreeSet<PathBuf> = markdown::parse(&text)
        .links
        .iter()
        .filter(|l| !has_scheme(&l.dest))
        .map(|l| normalize(&src.join(decode(l.dest.split('#').next().unwrap_or("")))))
        .collect();
    pages(src)
        .into_iter()
        .filter(|p| *p != summary && !listed.contains(p))
        .map(|p| {
            format!(
                "{}: not in SUMMARY.md (a page a reader cannot reach)",
                display(root, &p)
            )
        })
        .collect()
}

/// The markdown files under `dir`, sorted.
pub fn pages(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

pub fn display(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// `http:`, `mailto:` and the like: not checked.
fn has_scheme(dest: &str) -> bool {
    dest.split_once(':').is_some_and(|(s, _)| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// `%20` and the like.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `a/b/../c` → `a/c`, without asking the disk.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
