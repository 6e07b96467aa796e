//! Path handling: argument resolution, `~` forms, lexical cleaning.
//!
//! Manifest paths are `~`, `~/…` (relative to the home of whoever uses the
//! repository) or absolute. Arguments are resolved lexically, like Go's
//! `filepath.Abs`: symlinks in them are not followed.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use crate::{Env, Error, Result};

/// Cleans a path lexically: drops `.`, resolves `..` against the previous
/// component, never climbs above `/`.
pub fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::RootDir => out.push(std::path::MAIN_SEPARATOR_STR),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::Prefix(p) => out.push(p.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(std::path::MAIN_SEPARATOR_STR);
    }
    out
}

/// A path's text with `/` between its components, as the manifest and
/// messages have it on every platform (Windows: its `\\` become `/`; no
/// Windows name can hold one).
fn slashed(s: &str) -> std::borrow::Cow<'_, str> {
    if cfg!(windows) && s.contains('\\') {
        std::borrow::Cow::Owned(s.replace('\\', "/"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

impl Env {
    /// Resolves a command-line argument to a clean absolute path: `~` and
    /// `~/…` mean the home folder, relative paths start at the working folder.
    pub fn resolve(&self, arg: &OsStr) -> PathBuf {
        let p = Path::new(arg);
        let bytes = arg.as_encoded_bytes();
        let joined = if bytes == b"~" {
            self.home.clone()
        } else if bytes.starts_with(b"~/") {
            // Safe split: "~/" is ASCII.
            self.home.join(Path::new(&arg.to_string_lossy()[2..]))
        } else if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cwd.join(p)
        };
        clean(&joined)
    }

    /// The manifest form of an absolute path: `~`, `~/…` under the home
    /// folder, the absolute path elsewhere.
    ///
    /// # Errors
    /// [`Error::BadPath`] for paths that are not UTF-8 or not storable.
    pub fn to_tilde(&self, abs: &Path) -> Result<String> {
        let home = clean(&self.home);
        let s = if abs == home {
            "~".to_owned()
        } else if let Ok(rest) = abs.strip_prefix(&home) {
            let rest = rest.to_str().ok_or_else(|| self.not_utf8(abs))?;
            format!("~/{}", slashed(rest))
        } else {
            slashed(abs.to_str().ok_or_else(|| self.not_utf8(abs))?).into_owned()
        };
        sgard_manifest::validate_path(&s).map_err(|reason| Error::BadPath {
            path: self.shown(abs),
            reason,
        })?;
        Ok(s)
    }

    /// `abs` for people, whatever its bytes: `~`, `~/…` under the home
    /// folder, the absolute path elsewhere, with each byte that is not part
    /// of UTF-8 text shown as `\xNN` (as control characters are shown).
    /// The manifest form where there is one.
    pub fn shown(&self, abs: &Path) -> String {
        let home = clean(&self.home);
        let (mut out, rest) = if abs == home {
            return "~".to_owned();
        } else if let Ok(rest) = abs.strip_prefix(&home) {
            (String::from("~/"), rest)
        } else {
            (String::new(), abs)
        };
        for chunk in rest.as_os_str().as_encoded_bytes().utf8_chunks() {
            out.push_str(&slashed(chunk.valid()));
            for b in chunk.invalid() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
        out
    }

    fn not_utf8(&self, p: &Path) -> Error {
        Error::BadPath {
            path: self.shown(p),
            reason: "path is not valid UTF-8 and cannot be stored in the manifest".into(),
        }
    }

    /// The absolute path a manifest path means on this machine.
    pub fn expand(&self, tilde: &str) -> PathBuf {
        if tilde == "~" {
            self.home.clone()
        } else if let Some(rest) = tilde.strip_prefix("~/") {
            // One allocation of the right size (`join` grew it twice); the
            // scan expands every tracked path.
            let home = self.home.as_os_str();
            let mut p = std::ffi::OsString::with_capacity(home.len() + 1 + rest.len());
            p.push(home);
            let sep = std::path::MAIN_SEPARATOR;
            if !home.as_encoded_bytes().ends_with(&[sep as u8]) {
                p.push(std::path::MAIN_SEPARATOR_STR);
            }
            // Windows: its own separator, so a path sgard names reads as
            // one (`C:\Users\me\.config\nvim`, not `…\me/.config/nvim`).
            if cfg!(windows) {
                p.push(rest.replace('/', std::path::MAIN_SEPARATOR_STR));
            } else {
                p.push(rest);
            }
            PathBuf::from(p)
        } else {
            PathBuf::from(tilde)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sgard_manifest::Timestamp;

    fn env() -> Env {
        Env {
            chunk_stall: None,
            render_once_max: None,
            folding: None,
            no_symlinks: false,
            sqlite_timeout: None,
            config_dir: None,
            username: "u".into(),
            no_watch: false,
            watch_stall: None,
            home: "/home/u".into(),
            cwd: "/home/u/.config".into(),
            now: Timestamp::zero(),
            hostname: "h".into(),
            state_dir: None,
            cache_dir: None,
            no_cache: false,
            crash_at: None,
            interrupt_at: None,
            wait_at: None,
            scan_window: None,
        }
    }

    #[test]
    fn resolves_like_filepath_abs() {
        let e = env();
        assert_eq!(e.resolve(OsStr::new("~")), PathBuf::from("/home/u"));
        assert_eq!(
            e.resolve(OsStr::new("~/.bashrc")),
            PathBuf::from("/home/u/.bashrc")
        );
        assert_eq!(
            e.resolve(OsStr::new("app/a")),
            PathBuf::from("/home/u/.config/app/a")
        );
        assert_eq!(
            e.resolve(OsStr::new("../x/./y")),
            PathBuf::from("/home/u/x/y")
        );
        assert_eq!(
            e.resolve(OsStr::new("/etc/../etc/hosts")),
            PathBuf::from("/etc/hosts")
        );
        assert_eq!(e.resolve(OsStr::new("/../..")), PathBuf::from("/"));
    }

    #[test]
    fn tilde_forms() {
        let e = env();
        assert_eq!(e.to_tilde(Path::new("/home/u")).unwrap(), "~");
        assert_eq!(e.to_tilde(Path::new("/home/u/.x")).unwrap(), "~/.x");
        assert_eq!(
            e.to_tilde(Path::new("/home/user2/x")).unwrap(),
            "/home/user2/x"
        );
        assert_eq!(e.to_tilde(Path::new("/tmp/x.conf")).unwrap(), "/tmp/x.conf");
        assert_eq!(e.expand("~/.x"), PathBuf::from("/home/u/.x"));
        assert_eq!(e.expand("~"), PathBuf::from("/home/u"));
        assert_eq!(e.expand("/etc/hosts"), PathBuf::from("/etc/hosts"));
        // Spelt with the platform's separator, so a path sgard names reads
        // as one on Windows too.
        let want = if cfg!(windows) {
            r"/home/u\.config\nvim"
        } else {
            "/home/u/.config/nvim"
        };
        assert_eq!(e.expand("~/.config/nvim").to_str(), Some(want));
    }
}
