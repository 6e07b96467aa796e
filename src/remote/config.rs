//! Where the remote is, how to reach it, and the per-server token cache.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// How to reach a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    /// `host:port`.
    pub addr: String,
    /// Use TLS.
    pub tls: bool,
    /// A PEM CA bundle replacing the system roots.
    pub tls_ca: Option<PathBuf>,
}

/// The client config file inside a repository (the Go sgard's).
pub const REMOTE_FILE: &str = "remote.yaml";

/// Resolves the remote: `--remote`, then `SGARD_REMOTE`, then
/// `<repo>/remote.yaml`, then the legacy `<repo>/remote`. `--tls` and
/// `--tls-ca` override the file's settings.
pub fn resolve(
    repo: &Path,
    flag: Option<&str>,
    tls: Option<bool>,
    tls_ca: Option<&Path>,
) -> Result<Remote> {
    let saved = load(repo)?;
    let addr = flag
        .map(str::to_owned)
        .or_else(|| std::env::var("SGARD_REMOTE").ok().filter(|s| !s.is_empty()))
        .or_else(|| saved.as_ref().map(|r| r.addr.clone()))
        .or_else(|| {
            std::fs::read_to_string(repo.join("remote"))
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        });
    let Some(addr) = addr else {
        bail!("no remote configured; use `sgard remote set HOST:PORT` or --remote");
    };
    let from_file = saved.filter(|r| r.addr == addr);
    let tls_ca = tls_ca
        .map(Path::to_path_buf)
        .or_else(|| from_file.as_ref().and_then(|r| r.tls_ca.clone()));
    // A certificate to trust means TLS, wherever it was given (never
    // plaintext to a server the user meant to pin), unless `--no-tls` says
    // otherwise.
    let tls = tls.unwrap_or_else(|| from_file.is_some_and(|r| r.tls) || tls_ca.is_some());
    Ok(Remote { tls, tls_ca, addr })
}

/// Reads `<repo>/remote.yaml`, if any.
pub fn load(repo: &Path) -> Result<Option<Remote>> {
    let p = repo.join(REMOTE_FILE);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", p.display())),
    };
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Raw {
        addr: Option<String>,
        tls: Option<bool>,
        tls_ca: Option<String>,
    }
    let raw: Raw = serde_saphyr::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "parsing {}: {}",
            p.display(),
            sgard_manifest::yaml_message(&e, &p)
        )
    })?;
    Ok(raw.addr.filter(|a| !a.is_empty()).map(|addr| Remote {
        addr,
        tls: raw.tls.unwrap_or(false) || raw.tls_ca.as_deref().is_some_and(|c| !c.is_empty()),
        tls_ca: raw.tls_ca.filter(|c| !c.is_empty()).map(PathBuf::from),
    }))
}

/// Writes `<repo>/remote.yaml` atomically.
pub fn save(repo: &Path, r: &Remote) -> Result<()> {
    let mut text = format!("addr: {}\ntls: {}\n", yaml_str(&r.addr), r.tls);
    if let Some(ca) = &r.tls_ca {
        text.push_str(&format!(
            "tls_ca: {}\n",
            yaml_str(&ca.display().to_string())
        ));
    }
    sgard_store::durable::write_atomic(&repo.join(REMOTE_FILE), text.as_bytes(), 0o644)?;
    Ok(())
}

/// Removes `<repo>/remote.yaml` (and the legacy `remote`); returns whether one existed.
pub fn unset(repo: &Path) -> Result<bool> {
    let mut any = false;
    for f in [REMOTE_FILE, "remote"] {
        match std::fs::remove_file(repo.join(f)) {
            Ok(()) => any = true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {f}")),
        }
    }
    Ok(any)
}

fn yaml_str(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// The token cache file for one server (0600, under the state folder).
pub fn token_path(state_dir: Option<&Path>, addr: &str) -> Option<PathBuf> {
    let key = sgard_store::Hash::of(addr.as_bytes()).short(16);
    state_dir.map(|d| d.join("sgard").join("tokens").join(key))
}

/// The cached token for a server.
pub fn load_token(path: Option<&Path>) -> Option<String> {
    let t = std::fs::read_to_string(path?).ok()?;
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

/// Caches a token (folder 0700, file 0600).
pub fn save_token(path: Option<&Path>, token: &str) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    use std::os::unix::fs::PermissionsExt;
    let dir = sgard_store::durable::parent_of(path);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for d in [dir.clone(), sgard_store::durable::parent_of(&dir)] {
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
    }
    sgard_store::durable::write_atomic(path, format!("{token}\n").as_bytes(), 0o600)?;
    Ok(())
}
