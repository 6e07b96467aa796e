//! The repository's chunking setting: `<repo>/chunking`.
//!
//! ```text
//! # How sgard stores big files in this repository (`sgard chunking`).
//! chunking on
//! threshold 1048576
//! fastcdc-2020 16384 65536 262144
//! ```
//!
//! or `chunking off` (every file one blob, as the Go sgard reads them). No
//! file means the defaults, on. The setting decides only how new content is
//! written: every chunk list records the sizes it was cut with, so content
//! stored under an older setting reads back whatever the setting is now.

use std::io;
use std::path::Path;

use super::{ALGORITHM, Params};
use crate::{Error, Result, durable};

/// The setting's file name in a repository.
pub const SETTING_FILE: &str = "chunking";

/// The threshold when none is set: files of 1 MiB and more are chunked.
pub const DEFAULT_THRESHOLD: u64 = 1 << 20;

/// How a repository stores new content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// Every file is one blob (the Go sgard's layout).
    Off,
    /// Files of at least `threshold` bytes are split with `params`.
    On {
        /// The smallest size that is chunked.
        threshold: u64,
        /// The chunker's sizes.
        params: Params,
    },
}

impl Default for Setting {
    fn default() -> Self {
        Setting::On {
            threshold: DEFAULT_THRESHOLD,
            params: Params::default(),
        }
    }
}

impl Setting {
    /// The sizes to split content of `size` bytes with, or `None` when it
    /// is stored whole.
    pub fn params_for(&self, size: u64) -> Option<Params> {
        match *self {
            Setting::On { threshold, params } if size >= threshold => Some(params.for_size(size)),
            _ => None,
        }
    }

    /// The setting of the repository at `repo` (the defaults when it has
    /// none).
    ///
    /// # Errors
    /// [`Error::BadSetting`] when the file is malformed, [`Error::Io`]
    /// when it cannot be read.
    pub fn load(repo: &Path) -> Result<Setting> {
        let path = repo.join(SETTING_FILE);
        match durable::read_regular_to_string_max(&path, 64 << 10) {
            Ok(text) => Setting::parse(&text).map_err(|reason| Error::BadSetting { path, reason }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Setting::default()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput
                ) =>
            {
                Err(Error::BadSetting {
                    path,
                    reason: format!("not a short text file ({e})"),
                })
            }
            Err(e) => Err(Error::io("reading", path, e)),
        }
    }

    /// Writes the setting into the repository at `repo`, durably.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn save(&self, repo: &Path) -> Result<()> {
        durable::write_atomic(&repo.join(SETTING_FILE), self.to_text().as_bytes(), 0o644)
    }

    /// The file's text.
    pub fn to_text(&self) -> String {
        let mut t =
            String::from("# How sgard stores big files in this repository (`sgard chunking`).\n");
        match self {
            Setting::Off => t.push_str("chunking off\n"),
            Setting::On { threshold, params } => {
                let (min, avg, max) = params.sizes();
                t.push_str(&format!(
                    "chunking on\nthreshold {threshold}\n{ALGORITHM} {min} {avg} {max}\n"
                ));
            }
        }
        t
    }

    /// Reads the file's text; `Err` says what is wrong.
    ///
    /// # Errors
    /// A message naming the line at fault.
    pub fn parse(text: &str) -> std::result::Result<Setting, String> {
        let mut on = None;
        let mut threshold = DEFAULT_THRESHOLD;
        let mut params = Params::default();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let num = |w: &str| -> std::result::Result<u64, String> {
                w.parse()
                    .map_err(|_| format!("{w:?} in {line:?} is not a number"))
            };
            match words.as_slice() {
                ["chunking", "on"] => on = Some(true),
                ["chunking", "off"] => on = Some(false),
                ["threshold", n] => {
                    threshold = num(n)?;
                    if threshold == 0 {
                        return Err("the threshold must be at least 1 byte".into());
                    }
                }
                [algo, min, avg, max] if *algo == ALGORITHM => {
                    let size = |w: &str| -> std::result::Result<u32, String> {
                        u32::try_from(num(w)?).map_err(|_| format!("{w} is too large a chunk size"))
                    };
                    params = Params::new(size(min)?, size(avg)?, size(max)?)?;
                }
                _ => return Err(format!("unknown line {line:?}")),
            }
        }
        match on {
            Some(true) => Ok(Setting::On { threshold, params }),
            Some(false) => Ok(Setting::Off),
            None => Err("no `chunking on` or `chunking off` line".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_bad_ones_are_refused() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(Setting::load(d.path()).unwrap(), Setting::default());
        let on = Setting::On {
            threshold: 4096,
            params: Params::new(1024, 2048, 8192).unwrap(),
        };
        for s in [Setting::Off, on, Setting::default()] {
            s.save(d.path()).unwrap();
            assert_eq!(Setting::load(d.path()).unwrap(), s);
        }
        assert_eq!(on.params_for(4095), None);
        assert!(on.params_for(4096).is_some());
        // The default sizes grow for a big file; sizes set by hand do not.
        let dflt = Setting::default();
        let from = crate::chunks::LARGE_FROM;
        assert_eq!(dflt.params_for(from - 1), Some(Params::default()));
        assert_eq!(dflt.params_for(from), Some(Params::LARGE));
        let own = Setting::On {
            threshold: 1,
            params: Params::new(8192, 32768, 131_072).unwrap(),
        };
        assert_eq!(
            own.params_for(u64::MAX).map(|p| p.sizes()),
            Some((8192, 32768, 131_072))
        );
        let (min, avg, max) = Params::LARGE.sizes();
        assert!(
            Params::new(min, avg, max).is_ok(),
            "within FastCDC's bounds"
        );
        assert_eq!(Setting::Off.params_for(u64::MAX), None);
        for bad in [
            "",
            "chunking maybe\n",
            "chunking on\nthreshold 0\n",
            "chunking on\nthreshold x\n",
            "chunking on\nfastcdc-2020 1 2 3\n",
            "chunking on\nfastcdc-2020 99999999999 2 3\n",
            "chunking on\nrabin 1 2 3\n",
            &format!("chunking on\n{}", "#".repeat(70 << 10)),
        ] {
            std::fs::write(d.path().join(SETTING_FILE), bad.as_bytes()).unwrap();
            let e = Setting::load(d.path()).unwrap_err();
            assert!(matches!(e, Error::BadSetting { .. }), "{bad:?}: {e}");
        }
    }
}
