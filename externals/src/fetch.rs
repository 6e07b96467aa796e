//! Reading an external's source into a file: HTTP(S) through `ureq`
//! (rustls), or a local file (`file://…` or a path), bounded in size and
//! time, hashed with SHA-256 as it is read.

use std::io::{Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::{Error, Limits, Result};

/// What [`fetch`] read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// The SHA-256 of the bytes, in hex.
    pub sha256: String,
    /// How many bytes.
    pub bytes: u64,
}

/// Reads `url` into `out` (which it truncates first), at most
/// `limits.max_download` bytes and `limits.timeout` long.
///
/// # Errors
/// [`Error::Fetch`] naming the URL (unreachable, an HTTP error status, a
/// timeout), [`Error::TooLarge`], [`Error::Io`] writing `out`.
pub fn fetch(url: &str, out: &Path, limits: &Limits) -> Result<Fetched> {
    let fail = |reason: String| Error::Fetch {
        url: url.to_owned(),
        reason,
    };
    let mut file = std::fs::File::create(out).map_err(|e| Error::io("creating", out, e))?;
    let fetched = if let Some(local) = local_path(url) {
        let f = std::fs::File::open(&local).map_err(|e| fail(e.to_string()))?;
        copy_bounded(f, &mut file, url, out, limits)?
    } else if url.starts_with("http://") || url.starts_with("https://") {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(limits.timeout))
            .build()
            .into();
        let resp = agent.get(url).call().map_err(|e| fail(e.to_string()))?;
        let body = resp.into_body().into_reader();
        copy_bounded(body, &mut file, url, out, limits)?
    } else {
        return Err(fail(
            "not an http://, https:// or file:// URL, nor a path".into(),
        ));
    };
    file.sync_all().map_err(|e| Error::io("writing", out, e))?;
    Ok(fetched)
}

/// Whether `url` still answers, reading none of its content: a file that
/// exists, an HTTP(S) `HEAD` (a `GET` whose body is left unread where
/// `HEAD` is not allowed) that succeeds, within `limits.timeout`.
///
/// # Errors
/// [`Error::Fetch`] saying why not.
pub fn reachable(url: &str, limits: &Limits) -> Result<()> {
    let fail = |reason: String| Error::Fetch {
        url: url.to_owned(),
        reason,
    };
    if let Some(local) = local_path(url) {
        return std::fs::metadata(&local)
            .map(|_| ())
            .map_err(|e| fail(e.to_string()));
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(fail(
            "not an http://, https:// or file:// URL, nor a path".into(),
        ));
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(limits.timeout))
        .build()
        .into();
    match agent.head(url).call() {
        Ok(_) => Ok(()),
        Err(ureq::Error::StatusCode(405 | 501)) => agent
            .get(url)
            .call()
            .map(|_| ())
            .map_err(|e| fail(e.to_string())),
        Err(e) => Err(fail(e.to_string())),
    }
}

/// The local file a URL names: `file://PATH`, or an absolute path.
fn local_path(url: &str) -> Option<std::path::PathBuf> {
    if let Some(p) = url.strip_prefix("file://") {
        return Some(p.into());
    }
    url.starts_with('/').then(|| url.into())
}

fn copy_bounded(
    mut from: impl Read,
    to: &mut std::fs::File,
    url: &str,
    out: &Path,
    limits: &Limits,
) -> Result<Fetched> {
    let limit = limits.max_download;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut n: u64 = 0;
    loop {
        let k = from.read(&mut buf).map_err(|e| Error::Fetch {
            url: url.to_owned(),
            reason: e.to_string(),
        })?;
        if k == 0 {
            break;
        }
        limits.tick(k as u64)?;
        n += k as u64;
        if n > limit {
            return Err(Error::TooLarge {
                what: url.to_owned(),
                limit,
            });
        }
        hasher.update(&buf[..k]);
        to.write_all(&buf[..k])
            .map_err(|e| Error::io("writing", out, e))?;
    }
    let sha256 = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Fetched { sha256, bytes: n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_file_is_read_hashed_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::write(&src, b"hello\n").unwrap();
        let out = dir.path().join("out");
        let url = format!("file://{}", src.display());
        let f = fetch(&url, &out, &Limits::default()).unwrap();
        assert_eq!(f.bytes, 6);
        assert_eq!(
            f.sha256,
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        assert_eq!(std::fs::read(&out).unwrap(), b"hello\n");
        let small = Limits {
            max_download: 3,
            ..Limits::default()
        };
        assert!(matches!(
            fetch(&url, &out, &small),
            Err(Error::TooLarge { .. })
        ));
        assert!(matches!(
            fetch("ftp://x/y", &out, &Limits::default()),
            Err(Error::Fetch { .. })
        ));
        assert!(matches!(
            fetch("http://127.0.0.1:9/none", &out, &Limits::default()),
            Err(Error::Fetch { .. })
        ));
    }
}
