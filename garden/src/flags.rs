//! `lock`, `unlock`, `target`: change the flags of tracked entries.

use std::ffi::OsString;

use sgard_manifest::path_is_under;

use crate::{Error, Garden, Result};

/// Where an entry applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Targeting {
    /// Only on machines matching one of these labels.
    Only(Vec<String>),
    /// Never on machines matching one of these labels.
    Never(Vec<String>),
    /// Everywhere.
    Clear,
}

impl Garden {
    /// Entries selected by `args` (each: the entry itself or those under a
    /// folder path); every argument must select something.
    fn select_each(&self, args: &[OsString]) -> Result<Vec<usize>> {
        let wanted = self.repo.tilde_args(args)?;
        let mut picked = Vec::new();
        for w in &wanted {
            let before = picked.len();
            for (i, e) in self.repo.manifest.files.iter().enumerate() {
                if path_is_under(&e.path, w) && !picked.contains(&i) {
                    picked.push(i);
                }
            }
            if picked.len() == before
                && !self
                    .repo
                    .manifest
                    .files
                    .iter()
                    .any(|e| path_is_under(&e.path, w))
            {
                return Err(Error::NotTracked(w.clone()));
            }
        }
        picked.sort_unstable();
        Ok(picked)
    }

    /// Sets or clears `locked` on the entries selected by `args` (a folder
    /// selects the entries under it). Returns the paths changed.
    ///
    /// # Errors
    /// [`Error::NotTracked`] for an argument that selects nothing (then
    /// nothing is saved).
    pub fn set_locked(&mut self, args: &[OsString], locked: bool) -> Result<Vec<String>> {
        let picked = self.select_each(args)?;
        let mut changed = Vec::new();
        for i in picked {
            let e = &mut self.repo.manifest.files[i];
            e.locked = locked;
            changed.push(e.path.clone());
        }
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        Ok(changed)
    }

    /// Sets the targeting of the entries selected by `args`.
    ///
    /// # Errors
    /// [`Error::NotTracked`]; [`Error::Invalid`] for an empty label list.
    pub fn set_target(&mut self, args: &[OsString], t: &Targeting) -> Result<Vec<String>> {
        let labels_ok = |l: &[String]| !l.is_empty() && l.iter().all(|x| !x.trim().is_empty());
        match t {
            Targeting::Only(l) | Targeting::Never(l) if !labels_ok(l) => {
                return Err(Error::Invalid(
                    "targeting needs at least one non-empty label".into(),
                ));
            }
            _ => {}
        }
        let picked = self.select_each(args)?;
        let mut changed = Vec::new();
        for i in picked {
            let e = &mut self.repo.manifest.files[i];
            let clean = |l: &[String]| l.iter().map(|x| x.trim().to_owned()).collect();
            match t {
                Targeting::Only(l) => {
                    e.only = clean(l);
                    e.never.clear();
                }
                Targeting::Never(l) => {
                    e.never = clean(l);
                    e.only.clear();
                }
                Targeting::Clear => {
                    e.only.clear();
                    e.never.clear();
                }
            }
            changed.push(e.path.clone());
        }
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        Ok(changed)
    }

    /// Adds exclusion rules (paths or globs) and drops the entries they now
    /// exclude. Returns (rules added, entries dropped).
    ///
    /// # Errors
    /// [`Error::BadPath`] for a rule that cannot be stored.
    pub fn exclude(&mut self, args: &[OsString]) -> Result<(Vec<String>, Vec<String>)> {
        let rules = self.repo.tilde_args(args)?;
        let mut added = Vec::new();
        for r in rules {
            if !self.repo.manifest.exclude.contains(&r) && !added.contains(&r) {
                added.push(r);
            }
        }
        self.repo.manifest.exclude.extend(added.iter().cloned());
        let mut dropped = Vec::new();
        let rules = self.repo.manifest.exclude.clone();
        self.repo.manifest.files.retain(|e| {
            let hit = rules
                .iter()
                .any(|r| sgard_manifest::exclude::excludes(r, &e.path));
            if hit {
                dropped.push(e.path.clone());
            }
            !hit
        });
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        Ok((added, dropped))
    }

    /// Removes exclusion rules (exact matches). Entries dropped earlier do not
    /// come back: `add` them again.
    ///
    /// # Errors
    /// [`Error::NotTracked`]-like [`Error::Invalid`] when a rule is not in the
    /// list (nothing is changed then).
    pub fn include(&mut self, args: &[OsString]) -> Result<Vec<String>> {
        let rules = self.repo.tilde_args(args)?;
        for r in &rules {
            if !self.repo.manifest.exclude.contains(r) {
                return Err(Error::Invalid(format!("{r} is not in the exclusion list")));
            }
        }
        self.repo.manifest.exclude.retain(|x| !rules.contains(x));
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        Ok(rules)
    }
}
