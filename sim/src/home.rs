//! What a home holds, path by path, and the user's changes to it.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::content;
use crate::op::FsAct;
use crate::repo::sha_file;

/// One path of a home.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// A regular file: the SHA-256 of its bytes, its permission bits.
    File {
        /// Hex SHA-256.
        sha: String,
        /// Permission bits.
        mode: u32,
    },
    /// A symbolic link.
    Link {
        /// What it points to.
        target: String,
    },
    /// A folder.
    Dir {
        /// Permission bits.
        mode: u32,
    },
    /// Anything else (a FIFO, a socket).
    Other,
}

/// A home, by path relative to it (sgard's own folders and the
/// repositories left out).
pub type Home = BTreeMap<String, Node>;

/// Folders of a home that are sgard's or a repository's: never the user's
/// files. `.sgard` is the default repository, `dots` the git clone.
pub const NOT_THE_USERS: &[&str] = &[
    ".local/state/sgard",
    ".cache/sgard",
    ".config/sgard",
    ".sgard",
    "dots",
];

/// Reads `home`.
pub fn scan(home: &Path) -> Home {
    let mut out = Home::new();
    walk(home, home, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut Home) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(rel) = p.strip_prefix(root) else {
            continue;
        };
        let rel = rel.to_string_lossy().into_owned();
        if NOT_THE_USERS.contains(&rel.as_str()) {
            continue;
        }
        let Ok(md) = fs::symlink_metadata(&p) else {
            continue;
        };
        let mode = md.permissions().mode() & 0o7777;
        let ft = md.file_type();
        let node = if ft.is_symlink() {
            Node::Link {
                target: fs::read_link(&p)
                    .map(|t| t.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            }
        } else if ft.is_dir() {
            walk(root, &p, out);
            Node::Dir { mode }
        } else if ft.is_file() {
            Node::File {
                sha: sha_file(&p).unwrap_or_default(),
                mode,
            }
        } else {
            Node::Other
        };
        out.insert(rel, node);
    }
}

/// The paths whose node differs between `a` and `b` (folders apart: only
/// files, links and the like).
pub fn changed(a: &Home, b: &Home) -> Vec<String> {
    let mut out = Vec::new();
    let leaf = |n: Option<&Node>| n.filter(|n| !matches!(n, Node::Dir { .. })).cloned();
    for p in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        if leaf(a.get(p)) != leaf(b.get(p)) {
            out.push(p.clone());
        }
    }
    out.sort();
    out
}

/// Carries out a user's change (a change that cannot be made, such as
/// deleting what is not there, changes nothing).
pub fn apply(home: &Path, act: &FsAct) {
    let at = |p: &str| home.join(p);
    let parent = |p: &str| {
        if let Some(d) = at(p).parent() {
            let _ = fs::create_dir_all(d);
        }
    };
    match act {
        FsAct::Write { path, content: c } => {
            parent(path);
            let p = at(path);
            // A link or folder in the way goes first, as an editor's save
            // would replace it.
            if fs::symlink_metadata(&p).is_ok_and(|m| !m.is_file()) {
                let _ = fs::remove_dir_all(&p).or_else(|_| fs::remove_file(&p));
            }
            let _ = fs::write(&p, content::bytes(c, path));
            if matches!(c, crate::op::Content::Script { .. }) {
                let _ = fs::set_permissions(&p, fs::Permissions::from_mode(0o755));
            }
        }
        FsAct::Append { path, content: c } => {
            use std::io::Write;
            if fs::symlink_metadata(at(path)).is_ok_and(|m| m.is_file()) {
                let script = fs::read(at(path)).is_ok_and(|b| b.starts_with(b"#!"));
                if let Ok(mut f) = fs::OpenOptions::new().append(true).open(at(path)) {
                    let _ = f.write_all(&content::appended(c, path, script));
                }
            }
        }
        FsAct::Delete { path } => {
            if fs::symlink_metadata(at(path)).is_ok_and(|m| !m.is_dir()) {
                let _ = fs::remove_file(at(path));
            }
        }
        FsAct::Chmod { path, mode } => {
            if fs::symlink_metadata(at(path)).is_ok_and(|m| m.is_file()) {
                let _ = fs::set_permissions(at(path), fs::Permissions::from_mode(*mode));
            }
        }
        FsAct::Rename { from, to } => {
            if fs::symlink_metadata(at(from)).is_ok() && fs::symlink_metadata(at(to)).is_err() {
                parent(to);
                let _ = fs::rename(at(from), at(to));
            }
        }
        FsAct::Symlink { path, target } => {
            parent(path);
            let p = at(path);
            if fs::symlink_metadata(&p).is_ok_and(|m| !m.is_dir()) {
                let _ = fs::remove_file(&p);
            }
            let _ = std::os::unix::fs::symlink(target, &p);
        }
        FsAct::Mkdir { path } => {
            let _ = fs::create_dir_all(at(path));
        }
        FsAct::RmTree { path } => {
            if fs::symlink_metadata(at(path)).is_ok_and(|m| m.is_dir()) {
                let _ = fs::remove_dir_all(at(path));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Content;

    #[test]
    fn a_scan_sees_the_users_changes_and_not_sgards_folders() {
        let d = tempfile::tempdir().unwrap();
        let h = d.path();
        fs::create_dir_all(h.join(".local/state/sgard")).unwrap();
        fs::write(h.join(".local/state/sgard/index"), "x").unwrap();
        let before = scan(h);
        apply(
            h,
            &FsAct::Write {
                path: "a/b".into(),
                content: Content::Text { seed: 1, len: 10 },
            },
        );
        apply(
            h,
            &FsAct::Symlink {
                path: "l".into(),
                target: "a/b".into(),
            },
        );
        let after = scan(h);
        assert_eq!(
            changed(&before, &after),
            vec!["a/b".to_owned(), "l".to_owned()]
        );
        assert!(!after.keys().any(|k| k.starts_with(".local/state/sgard/")));
        apply(
            h,
            &FsAct::Chmod {
                path: "a/b".into(),
                mode: 0o600,
            },
        );
        assert_eq!(changed(&after, &scan(h)), vec!["a/b".to_owned()]);
    }
}
