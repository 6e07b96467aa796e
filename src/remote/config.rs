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

/// The certificates `remote set --tls-ca FILE` trusts, kept in the
/// repository (they are public): every machine that shares the repository
/// (a stick, a git clone) reaches the server with them, where a path in
/// `remote.yaml` would name a file of one machine only.
pub const CA_FILE: &str = "remote-ca.pem";

/// The key of `remote.yaml` that says [`CA_FILE`] is trusted (sgard's own:
/// the Go sgard ignores it and takes `--tls-ca` on its command line).
const CA_KEPT_KEY: &str = "tls_ca_in_repo";

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

/// Reads `<repo>/remote.yaml`, if any. The certificate file it trusts: a
/// `tls_ca` path as given (the Go sgard's key, or an older sgard's), else
/// the repository's [`CA_FILE`] where `tls_ca_in_repo` says so; either
/// means TLS.
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
        tls_ca_in_repo: Option<bool>,
    }
    let raw: Raw = serde_saphyr::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "parsing {}: {}",
            p.display(),
            sgard_manifest::yaml_message(&e, &p)
        )
    })?;
    let tls_ca = raw
        .tls_ca
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .or_else(|| (raw.tls_ca_in_repo == Some(true)).then(|| repo.join(CA_FILE)));
    Ok(raw.addr.filter(|a| !a.is_empty()).map(|addr| Remote {
        addr,
        tls: raw.tls.unwrap_or(false) || tls_ca.is_some(),
        tls_ca,
    }))
}

/// Whether `ca` is the copy of a certificate file kept in the repository
/// (not a path of one machine).
pub fn is_kept_ca(repo: &Path, ca: &Path) -> bool {
    ca == repo.join(CA_FILE)
}

/// Writes `<repo>/remote.yaml` atomically. A certificate file to trust is
/// copied into the repository ([`CA_FILE`], its certificates only) and
/// `remote.yaml` says so, naming no path of this machine; without one, an
/// earlier copy is removed first.
///
/// # Errors
/// A certificate file that cannot be read or holds no certificate (nothing
/// is written then); write errors.
pub fn save(repo: &Path, r: &Remote) -> Result<()> {
    let kept = repo.join(CA_FILE);
    match &r.tls_ca {
        Some(ca) if *ca != kept => {
            let pem = super::tls::certs_only_pem(ca)?;
            sgard_store::durable::write_atomic(&kept, pem.as_bytes(), 0o644)?;
        }
        Some(_) => {}
        None => {
            remove_durably(&kept)?;
        }
    }
    let mut text = format!(
        "addr: {}\ntls: {}\n",
        yaml_str(&r.addr),
        r.tls || r.tls_ca.is_some()
    );
    if r.tls_ca.is_some() {
        text.push_str(&format!("{CA_KEPT_KEY}: true\n"));
    }
    sgard_store::durable::write_atomic(&repo.join(REMOTE_FILE), text.as_bytes(), 0o644)?;
    Ok(())
}

/// Removes `path` if it is there, and syncs its folder; whether it was.
fn remove_durably(path: &Path) -> Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => {
            sgard_store::durable::fsync_dir(&sgard_store::durable::parent_of(path))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
    }
}

/// Removes `<repo>/remote.yaml` (and the legacy `remote`, and the kept
/// certificates); returns whether a remote was configured.
pub fn unset(repo: &Path) -> Result<bool> {
    let mut any = false;
    for f in [REMOTE_FILE, "remote"] {
        any |= remove_durably(&repo.join(f))?;
    }
    remove_durably(&repo.join(CA_FILE))?;
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
    let dir = sgard_store::durable::parent_of(path);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Windows: private by the profile's access lists; no mode to set.
    #[cfg(unix)]
    for d in [dir.clone(), sgard_store::durable::parent_of(&dir)] {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
    }
    sgard_store::durable::write_atomic(path, format!("{token}\n").as_bytes(), 0o600)?;
    Ok(())
}
