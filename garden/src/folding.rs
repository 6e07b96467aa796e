//! File systems that fold names: macOS's APFS and HFS+ ignore case (by
//! default) and Unicode normalisation (always), so `~/.Foo` and `~/.foo`,
//! or `café` written composed and decomposed, are one file there. Two
//! entries that fold to one name would overwrite each other on restore;
//! `add` and `restore` refuse them instead (see [`collisions`]).
//!
//! Whether the home folds case is asked of the file system itself, without
//! writing anything: the home folder's own path with its case swapped
//! names the same folder only where case is ignored. Normalisation is
//! folded on macOS, where every file system Apple ships does it.

use std::collections::HashMap;
use std::path::Path;

use unicode_normalization::UnicodeNormalization;

/// How a file system compares names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Folding {
    /// `A` and `a` are one name.
    pub case: bool,
    /// Composed and decomposed forms of a name are one name.
    pub unicode: bool,
}

impl Folding {
    /// How the file system holding `home` compares names.
    pub fn probe(home: &Path) -> Folding {
        Folding {
            case: folds_case(home),
            unicode: cfg!(target_vendor = "apple"),
        }
    }

    /// Reads a test hook's value: `case`, `unicode`, `both` or `none`.
    pub fn parse(s: &str) -> Option<Folding> {
        Some(match s {
            "none" => Folding::default(),
            "case" => Folding {
                case: true,
                unicode: false,
            },
            "unicode" => Folding {
                case: false,
                unicode: true,
            },
            "both" => Folding {
                case: true,
                unicode: true,
            },
            _ => return None,
        })
    }

    /// Whether it folds anything.
    pub fn folds(self) -> bool {
        self.case || self.unicode
    }

    /// The name `path` is on such a file system.
    pub fn key(self, path: &str) -> String {
        let s: String = if self.unicode {
            path.nfc().collect()
        } else {
            path.to_owned()
        };
        if self.case { s.to_lowercase() } else { s }
    }

    /// What to say about it, for an error.
    pub fn says(self) -> &'static str {
        match (self.case, self.unicode) {
            (true, true) => "ignores case and Unicode normalisation",
            (true, false) => "ignores case",
            _ => "ignores Unicode normalisation",
        }
    }
}

/// Whether the folder `home` is also found under its name with the case of
/// its letters swapped (the same device and inode): then its file system
/// ignores case.
fn folds_case(home: &Path) -> bool {
    let Some(s) = home.to_str() else {
        return false;
    };
    let swapped: String = s
        .chars()
        .map(|c| {
            if c.is_lowercase() {
                c.to_uppercase().next().unwrap_or(c)
            } else {
                c.to_lowercase().next().unwrap_or(c)
            }
        })
        .collect();
    if swapped == s {
        return false;
    }
    same_file(home, Path::new(&swapped))
}

#[cfg(unix)]
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_a: &Path, b: &Path) -> bool {
    std::fs::metadata(b).is_ok()
}

/// The pairs among `paths` that `folding` makes one name while they
/// differ, each pair once, the first of `paths` first; with `only`, just
/// the pairs one of whose paths it holds.
pub fn collisions<'a>(
    folding: Folding,
    paths: impl IntoIterator<Item = &'a str>,
    only: Option<&dyn Fn(&str) -> bool>,
) -> Vec<(String, String)> {
    if !folding.folds() {
        return Vec::new();
    }
    let mut first: HashMap<String, &str> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for p in paths {
        // A path given twice (the head's entries and those a restore
        // writes) makes its pair once.
        if !seen.insert(p) {
            continue;
        }
        match first.get(&folding.key(p)) {
            Some(q) if *q != p => {
                if only.is_none_or(|f| f(p) || f(q)) {
                    out.push(((*q).to_owned(), p.to_owned()));
                }
            }
            Some(_) => {}
            None => {
                first.insert(folding.key(p), p);
            }
        }
    }
    out
}

/// The sentence for `pairs` (at least one).
pub fn refusal(folding: Folding, pairs: &[(String, String)]) -> String {
    let shown: Vec<String> = pairs
        .iter()
        .take(3)
        .map(|(a, b)| format!("{a} and {b}"))
        .collect();
    format!(
        "{} {} one file here: this file system {}; keep one of each pair \
         (`sgard remove` the other, on a machine that tells them apart){}",
        shown.join(", "),
        if pairs.len() == 1 { "are" } else { "are each" },
        folding.says(),
        if pairs.len() > 3 {
            format!(" ({} pairs in all)", pairs.len())
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_fold_together_are_found() {
        let both = Folding::parse("both").unwrap();
        let decomposed = "~/cafe\u{301}";
        let paths = [
            "~/.Foo", "~/.bar", "~/.foo", "~/café", decomposed, "~/.bar", "~/.foo",
        ];
        assert_eq!(
            collisions(both, paths, None),
            vec![
                ("~/.Foo".to_owned(), "~/.foo".to_owned()),
                ("~/café".to_owned(), decomposed.to_owned())
            ]
        );
        let case = Folding::parse("case").unwrap();
        assert_eq!(collisions(case, paths, None).len(), 1);
        assert!(collisions(Folding::default(), paths, None).is_empty());
        let only = |p: &str| p == "~/café";
        assert_eq!(collisions(both, paths, Some(&only)).len(), 1);
        assert!(refusal(both, &collisions(both, paths, None)).contains("~/.Foo and ~/.foo"));
    }

    #[test]
    fn this_machine_is_probed_without_writing() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("Home");
        std::fs::create_dir(&home).unwrap();
        // Linux's file systems keep case: the swapped name is another.
        #[cfg(target_os = "linux")]
        assert!(!Folding::probe(&home).case);
        // Windows' file systems ignore case (wine's too): the swapped name
        // is the same folder.
        #[cfg(windows)]
        assert!(Folding::probe(&home).case);
        assert_eq!(std::fs::read_dir(&home).unwrap().count(), 0);
    }
}
