//! Stand-ins for the symlinks Windows refuses to make.
//!
//! Windows makes a symlink only in Developer Mode or with a privilege most
//! accounts lack. Where it refuses, a restore of a link entry writes a
//! stand-in instead, and says so: a **directory junction** for a link to a
//! folder (no privilege needed), a **copy** of the target's content for a
//! link to a file, and nothing (a warning) for a link to nothing. Off
//! Windows there are none: a symlink is always made, and a file where a
//! link is tracked is a type change.
//!
//! Whether what is at a link entry's path is its stand-in is one rule of
//! data, [`stands_in`]: a link whose target is the entry's target made
//! absolute (what a junction holds), or a file whose content is the
//! target's content now. Status, checkpoint and the other callers ask it
//! through [`is_stand_in`], so a stand-in that still matches is the link,
//! `ok`, and never recorded as a change. A copy that no longer matches
//! (edited here, or its target changed since) is a type change, said so.

use std::io;
use std::path::{Path, PathBuf};

use sgard_store::Hash;

use crate::Error;
use crate::fsx::{self, DiskKind};

/// Whether stand-ins exist on this platform (Windows only).
pub(crate) const ACTIVE: bool = cfg!(windows);

/// `ERROR_PRIVILEGE_NOT_HELD`: Windows' refusal of a symlink.
const PRIVILEGE_NOT_HELD: i32 = 1314;

/// What is at a link entry's path, as the rule needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AtPath {
    /// A link (a symlink or a junction) and where it points.
    Link(String),
    /// A regular file and its content's SHA-256.
    File(Hash),
}

/// The rule: whether `at`, at `link` (absolute) where an entry links to
/// `target`, is the stand-in a restore writes for it: a link to the
/// target made absolute against the link's folder (a junction holds only
/// absolute paths; names compare as the platform compares them), or a file
/// holding what the target holds now (`target_now`: its content's SHA-256,
/// `None` when it is no readable file).
pub(crate) fn stands_in(link: &Path, target: &str, at: &AtPath, target_now: Option<Hash>) -> bool {
    match at {
        AtPath::Link(t) => resolve(link, target).is_some_and(|abs| {
            let t = crate::clean(Path::new(t));
            crate::platform::path_is_under(&t, &abs) && crate::platform::path_is_under(&abs, &t)
        }),
        AtPath::File(h) => target_now == Some(*h),
    }
}

/// Where a link at `link` to `target` points, absolute and clean (`None`:
/// nowhere a path can say).
pub(crate) fn resolve(link: &Path, target: &str) -> Option<PathBuf> {
    if target.is_empty() {
        return None;
    }
    let abs = link.parent()?.join(target);
    abs.is_absolute().then(|| crate::clean(&abs))
}

/// Whether what is at `abs` (of kind `disk`) is the stand-in for a link
/// entry to `target`, by [`stands_in`]; never off Windows, and never a
/// link that already says `target` (that is the link itself).
pub(crate) fn is_stand_in(abs: &Path, target: Option<&str>, disk: DiskKind) -> bool {
    if !ACTIVE {
        return false;
    }
    let Some(target) = target else { return false };
    let at = match disk {
        DiskKind::Link => match fsx::read_link(abs) {
            Ok(t) if t != target => AtPath::Link(t),
            _ => return false,
        },
        DiskKind::File => match fsx::hash_file(abs) {
            Ok((h, _)) => AtPath::File(h),
            Err(_) => return false,
        },
        _ => return false,
    };
    let now = match at {
        AtPath::File(_) => resolve(abs, target)
            .and_then(|t| fsx::hash_file(&t).ok())
            .map(|(h, _)| h),
        AtPath::Link(_) => None,
    };
    stands_in(abs, target, &at, now)
}

/// The words status says for a file at a link entry's path that is not
/// its stand-in (on Windows, where it may be one that no longer matches).
pub(crate) fn mismatch(target: Option<&str>) -> Option<String> {
    ACTIVE.then(|| {
        format!(
            "tracked as a link to {}, now a file that does not hold what its target holds: \
             a copy sgard stood in with (Windows refused the symlink), edited here or left \
             behind by a change of its target, or another file; `sgard restore` copies the \
             target again (asking first)",
            target.unwrap_or("?")
        )
    })
}

/// What a restore writes for a link Windows refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// A directory junction to this folder.
    Junction(PathBuf),
    /// A copy of this file.
    Copy(PathBuf),
    /// Nothing, for this reason.
    Skip(String),
}

/// What to write for a link at `abs` to `target` that Windows refused,
/// by what the target is now (followed, as a symlink would be). A file is
/// copied only from under `home`: a link may point anywhere, and a copy,
/// unlike a link, duplicates what it holds where the link's folder lets
/// others read it (a manifest from a clone or a server names the target).
pub(crate) fn plan(abs: &Path, target: &str, home: &Path) -> Plan {
    let Some(t) = resolve(abs, target) else {
        return Plan::Skip(format!("its target {target} is not a path here"));
    };
    match std::fs::metadata(&t) {
        Ok(md) if md.is_dir() => Plan::Junction(t),
        Ok(md) if md.is_file() && !crate::platform::path_is_under(&t, home) => Plan::Skip(format!(
            "its target {} is a file outside the home, which sgard never copies in \
                 place of a link",
            t.display()
        )),
        Ok(md) if md.is_file() => Plan::Copy(t),
        Ok(_) => Plan::Skip(format!(
            "its target {} is neither a file nor a folder",
            t.display()
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Plan::Skip(format!("its target {} does not exist", t.display()))
        }
        Err(e) => Plan::Skip(format!("its target {} cannot be read: {e}", t.display())),
    }
}

/// Whether `err` is Windows' refusal to make a symlink (or sgard's own
/// word for it: see [`refusal`]).
pub(crate) fn is_refusal(err: &Error) -> bool {
    matches!(err, Error::Io { source, .. } if refused(source))
}

/// Whether an error of making a symlink is a refusal: want of privilege,
/// or a symlink Windows said it made that is not there (wine).
pub(crate) fn refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(PRIVILEGE_NOT_HELD) || e.kind() == io::ErrorKind::Unsupported
}

/// The refusal as Windows says it, for the test hook that makes sgard act
/// as if symlinks were refused (`SGARD_TEST_NO_SYMLINKS`).
pub(crate) fn refusal(abs: &Path) -> Error {
    Error::io(
        "creating symlink",
        abs,
        io::Error::from_raw_os_error(PRIVILEGE_NOT_HELD),
    )
}

/// The hint every stand-in's warning ends with.
pub(crate) const HINT: &str =
    "Windows refused the symlink (turn on Developer Mode in Settings for real symlinks)";

/// The order in which to restore `links` (each its absolute path and its
/// target), as indexes: a link whose target is another of them after that
/// one, so a link to a link has something to stand in for by its turn
/// (`~/.a -> .b` after `~/.b -> x`). Otherwise as given; a cycle is
/// left in the order given.
pub(crate) fn link_order(links: &[(PathBuf, String)]) -> Vec<usize> {
    let at: std::collections::HashMap<&Path, usize> = links
        .iter()
        .enumerate()
        .map(|(i, (p, _))| (p.as_path(), i))
        .collect();
    let next = |i: usize| {
        let (p, t) = &links[i];
        resolve(p, t).and_then(|abs| at.get(abs.as_path()).copied())
    };
    // How many links of the list stand between each and a target outside
    // it: bounded by the list's length, so a cycle ends.
    let depth = |mut i: usize| {
        let mut d = 0;
        while let Some(j) = next(i) {
            if d >= links.len() {
                break;
            }
            d += 1;
            i = j;
        }
        d
    };
    let mut order: Vec<usize> = (0..links.len()).collect();
    // Stable: links at one depth keep their (path) order.
    order.sort_by_key(|&i| depth(i));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> PathBuf {
        if cfg!(windows) {
            PathBuf::from(r"C:\Users\me")
        } else {
            PathBuf::from("/home/me")
        }
    }

    #[test]
    fn a_copy_stands_in_while_it_holds_what_the_target_holds() {
        let link = home().join(".vimrc");
        let h = Hash::of(b"set nu\n");
        let at = AtPath::File(h);
        assert!(stands_in(&link, "dotfiles/vimrc", &at, Some(h)));
        // Edited here, or the target changed since: not a stand-in.
        assert!(!stands_in(
            &link,
            "dotfiles/vimrc",
            &at,
            Some(Hash::of(b"set nonu\n"))
        ));
        // The target is gone or no file.
        assert!(!stands_in(&link, "dotfiles/vimrc", &at, None));
    }

    #[test]
    fn a_junction_stands_in_when_it_points_at_the_target_made_absolute() {
        let link = home().join(".config").join("nvim");
        let abs = home().join("dotfiles").join("nvim");
        let at = AtPath::Link(abs.display().to_string());
        assert!(stands_in(&link, "../dotfiles/nvim", &at, None));
        assert!(stands_in(&link, &abs.display().to_string(), &at, None));
        assert!(!stands_in(&link, "../dotfiles/vim", &at, None));
        assert!(!stands_in(&link, "nvim", &at, None));
    }

    #[cfg(windows)]
    #[test]
    fn names_compare_as_windows_compares_them() {
        let link = Path::new(r"C:\Users\me\.config\nvim");
        let at = AtPath::Link(r"C:\USERS\me\Dotfiles\nvim".to_owned());
        assert!(stands_in(link, "../dotfiles/nvim", &at, None));
        assert!(stands_in(link, r"C:/Users/me/dotfiles/nvim", &at, None));
    }

    #[test]
    fn resolve_makes_the_target_absolute_against_the_links_folder() {
        let link = home().join(".config").join("nvim");
        assert_eq!(
            resolve(&link, "../dotfiles/nvim"),
            Some(home().join("dotfiles").join("nvim"))
        );
        assert_eq!(resolve(&link, ""), None);
    }

    #[test]
    fn what_a_refused_link_gets_follows_what_its_target_is() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), b"x").unwrap();
        std::fs::create_dir(dir.path().join("folder")).unwrap();
        let link = dir.path().join("link");
        let home = crate::clean(dir.path());
        assert_eq!(
            plan(&link, "file", &home),
            Plan::Copy(crate::clean(&dir.path().join("file")))
        );
        assert_eq!(
            plan(&link, "folder", &home),
            Plan::Junction(crate::clean(&dir.path().join("folder")))
        );
        assert!(
            matches!(plan(&link, "nothing", &home), Plan::Skip(why) if why.contains("does not exist"))
        );
        // A file outside the home is never copied in: a link may point at
        // anything, a copy would duplicate it.
        let elsewhere = home.join("folder");
        assert!(
            matches!(plan(&link, "file", &elsewhere), Plan::Skip(why) if why.contains("outside the home"))
        );
    }

    #[test]
    fn a_link_to_a_link_is_restored_after_it() {
        let h = home();
        let links = vec![
            (h.join(".a"), ".b".to_owned()),
            (h.join(".b"), "dot/b".to_owned()),
            (h.join(".c"), ".a".to_owned()),
            (h.join(".d"), "dot/d".to_owned()),
        ];
        assert_eq!(link_order(&links), vec![1, 3, 0, 2]);
        // A cycle ends, in the order given.
        let cycle = vec![
            (h.join(".x"), ".y".to_owned()),
            (h.join(".y"), ".x".to_owned()),
        ];
        assert_eq!(link_order(&cycle), vec![0, 1]);
    }

    #[test]
    fn a_refusal_is_known_as_one() {
        assert!(is_refusal(&refusal(&home().join("x"))));
        let other = Error::io("creating symlink", home(), io::Error::other("disk full"));
        assert!(!is_refusal(&other));
    }

    #[test]
    fn off_windows_nothing_stands_in() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t"), b"same").unwrap();
        std::fs::write(dir.path().join("copy"), b"same").unwrap();
        assert_eq!(
            is_stand_in(&dir.path().join("copy"), Some("t"), DiskKind::File),
            cfg!(windows)
        );
        std::fs::write(dir.path().join("copy"), b"edited").unwrap();
        assert!(!is_stand_in(
            &dir.path().join("copy"),
            Some("t"),
            DiskKind::File
        ));
    }
}
