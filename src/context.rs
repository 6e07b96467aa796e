//! The one place that reads the process environment.
//!
//! `HOME`, the working folder, `SGARD_NOW` (an RFC 3339 time used as "now")
//! and `SGARD_HOSTNAME` (overrides the host name) become a
//! [`sgard_garden::Env`]; nothing else in sgard reads the environment.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use sgard_garden::{Env, clean};
use sgard_manifest::Timestamp;

/// Builds the environment of this run.
pub fn env() -> Result<Env> {
    let home = std::env::home_dir()
        .filter(|h| !h.as_os_str().is_empty())
        .context("cannot tell the home folder: set HOME")?;
    if !home.is_absolute() {
        bail!("HOME must be an absolute path, not {}", home.display());
    }
    let cwd = std::env::current_dir().context("reading the working folder")?;
    let now = match std::env::var("SGARD_NOW") {
        Ok(s) if !s.is_empty() => Timestamp::parse(&s)
            .map_err(anyhow::Error::msg)
            .context("SGARD_NOW")?,
        _ => Timestamp::from_datetime(chrono::Utc::now()),
    };
    let hostname = match std::env::var("SGARD_HOSTNAME") {
        Ok(s) if !s.is_empty() => s,
        _ => gethostname::gethostname().to_string_lossy().into_owned(),
    };
    Ok(Env {
        home: clean(&home),
        cwd: clean(&cwd),
        now,
        hostname,
    })
}

/// The repository folder: `--repo`/`SGARD_REPO` resolved like any path
/// argument, else `~/.sgard`.
pub fn repo_path(env: &Env, repo: Option<&Path>) -> PathBuf {
    match repo {
        Some(p) => env.resolve(p.as_os_str()),
        None => env.home.join(".sgard"),
    }
}
