//! `add --dry-run` and `mirror up --dry-run`: what add would do with one
//! path, decided from the disk and the manifest without storing anything.

use crate::Tx;
use std::path::Path;

use crate::add::{AddOptions, AddOutcome, AddReport};
use crate::fsx::{self, DiskKind};
use crate::scan::Found;
use crate::{Garden, Result, State};

impl Garden {}

impl Tx<'_> {
    /// Records in `report` what [`Garden::add`] would do with `abs`: track
    /// it, refresh it (its content, mode or flags differ), leave it as it
    /// is, or skip it. A secret whose content cannot be compared without
    /// the passphrase counts as refreshed.
    pub(crate) fn preview_add(
        &mut self,
        abs: &Path,
        kind: DiskKind,
        opts: &AddOptions,
        report: &mut AddReport,
    ) -> Result<()> {
        let tilde = self.repo.env.to_tilde(abs)?;
        if matches!(kind, DiskKind::Fifo | DiskKind::Socket | DiskKind::Device) {
            report
                .skipped
                .push((tilde, crate::add::untrackable(kind).into()));
            return Ok(());
        }
        if kind == DiskKind::File && opts.run.is_some() {
            // As the add would record it.
            let recorded = crate::add::recorded_mode(&self.repo.manifest, &tilde, kind);
            let executable = fsx::lstat(abs)?.is_some_and(|md| {
                fsx::mode_to_record(fsx::mode_of(&md), recorded, abs).bits() & 0o111 != 0
            });
            if !executable {
                report.skipped.push((
                    tilde,
                    crate::why::Why::new(
                        crate::add::NOT_EXECUTABLE,
                        crate::why::Remedy::MakeExecutable,
                    ),
                ));
                return Ok(());
            }
        }
        let outcome = match self.repo.manifest.get(&tilde) {
            None => {
                // As the add would refuse it.
                let above = crate::folders::parents_of(&tilde).find(|p| {
                    self.repo
                        .manifest
                        .get(p)
                        .is_some_and(|e| e.kind != sgard_manifest::EntryKind::Directory)
                });
                if let Some(above) = above {
                    return Err(crate::add::below_tracked(&tilde, above));
                }
                AddOutcome::Added
            }
            Some(e) => {
                let file = kind == DiskKind::File;
                let flags = (opts.lock && !e.locked)
                    || (!opts.only.is_empty() && opts.only != e.only)
                    || (!opts.never.is_empty() && opts.never != e.never)
                    || (file && opts.encrypt && !e.encrypted)
                    || (file && opts.no_encrypt && e.encrypted)
                    || (file && opts.template && !e.template)
                    || (file && opts.run.is_some() && opts.run != e.run);
                let same = matches!(
                    self.judge(e, false, &Found::Unknown).map(|j| j.state),
                    Ok(State::Ok)
                );
                if same && !flags {
                    AddOutcome::Unchanged
                } else {
                    AddOutcome::Refreshed
                }
            }
        };
        sgard_store::progress::done(&tilde, "checking");
        report.entries.push((tilde, outcome));
        Ok(())
    }
}
