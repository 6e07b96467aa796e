//! `sgard chunking`

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, anyhow, bail};
use sgard_store::chunks::{Params, Setting, setting::DEFAULT_THRESHOLD};

use super::Ctx;
use crate::ui::bytes;

/// What the flags ask to change.
pub struct Change {
    pub off: bool,
    pub on: bool,
    pub threshold: Option<String>,
    pub sizes: Option<String>,
}

/// `1048576`, `512K`, `1M`, `1MiB`, `2G` (binary units).
fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| anyhow!("{text:?} is not a size (a number of bytes, or with K, M or G)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => bail!("{text:?} is not a size (a number of bytes, or with K, M or G)"),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| anyhow!("{text:?} is too large"))
}

fn describe(s: &Setting, out: &mut dyn Write) -> Result<()> {
    match s {
        Setting::Off => writeln!(
            out,
            "Chunking: off (every file is one blob, as the Go sgard reads them)"
        )?,
        Setting::On { threshold, params } => {
            let (min, avg, max) = params.sizes();
            writeln!(out, "Chunking: on")?;
            writeln!(out, "Threshold: {} ({threshold} bytes)", bytes(*threshold))?;
            writeln!(
                out,
                "Chunk sizes: {} min, {} average, {} max (FastCDC 2020)",
                bytes(min.into()),
                bytes(avg.into()),
                bytes(max.into())
            )?;
            if *params == Params::default() {
                let (min, avg, max) = Params::LARGE.sizes();
                writeln!(
                    out,
                    "From {}: {} min, {} average, {} max",
                    bytes(sgard_store::chunks::LARGE_FROM),
                    bytes(min.into()),
                    bytes(avg.into()),
                    bytes(max.into())
                )?;
            }
        }
    }
    Ok(())
}

fn run(ctx: &Ctx, c: Change, dry_run: bool, out: &mut dyn Write) -> Result<ExitCode> {
    if !c.off && !c.on && c.threshold.is_none() && c.sizes.is_none() {
        let mut g = ctx.open_repository_only()?;
        describe(&g.chunking()?, out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut g = ctx.open_to_change(dry_run)?;
    let new = if c.off {
        Setting::Off
    } else {
        let (mut threshold, mut params) = match g.chunking()? {
            Setting::On { threshold, params } => (threshold, params),
            Setting::Off => (DEFAULT_THRESHOLD, Params::default()),
        };
        if let Some(t) = &c.threshold {
            threshold = parse_size(t)?;
            if threshold == 0 {
                bail!("the threshold must be at least 1 byte");
            }
        }
        if let Some(s) = &c.sizes {
            let v: Vec<u64> = s.split(',').map(parse_size).collect::<Result<_>>()?;
            let [min, avg, max] = v[..] else {
                bail!("--sizes takes three sizes, MIN,AVG,MAX (got {s:?})");
            };
            let small =
                |n: u64| u32::try_from(n).map_err(|_| anyhow!("chunk size {n} is too large"));
            params = Params::new(small(min)?, small(avg)?, small(max)?).map_err(|e| anyhow!(e))?;
        }
        Setting::On { threshold, params }
    };
    let (files, n) = g.configure_chunking(new)?;
    if dry_run {
        writeln!(out, "Dry run: would set")?;
    }
    describe(&new, out)?;
    if files > 0 {
        let files = crate::ui::count(files, "chunked file", "chunked files");
        if dry_run {
            writeln!(
                out,
                "Would store {files} of the head whole ({}), so the Go sgard can read them.",
                bytes(n)
            )?;
        } else {
            writeln!(
                out,
                "Stored {files} of the head whole ({}), so the Go sgard can read them; \
                 `sgard prune` frees their chunks.",
                bytes(n)
            )?;
        }
    }
    if dry_run {
        writeln!(out, "Nothing was changed.")?;
    }
    ctx.finish(g)?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard chunking`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Store every file as one blob (readable by the Go sgard)
    #[arg(long, conflicts_with_all = ["on", "threshold", "sizes"])]
    off: bool,
    /// Say what would change; change nothing
    #[arg(short = 'n', long)]
    dry_run: bool,
    /// Chunk files at or above the threshold
    #[arg(long)]
    on: bool,
    /// Files at least this big are chunked (bytes, or with K, M, G)
    #[arg(long, value_name = "SIZE")]
    threshold: Option<String>,
    /// The chunker's minimum, average and maximum chunk sizes [default: 16K,64K,256K; from 256 MiB, 256K,1M,4M]
    #[arg(long, value_name = "MIN,AVG,MAX")]
    sizes: Option<String>,
}

impl super::Run for Args {
    fn run(
        self,
        ctx: &super::Ctx,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<std::process::ExitCode> {
        run(
            ctx,
            Change {
                off: self.off,
                on: self.on,
                threshold: self.threshold,
                sizes: self.sizes,
            },
            self.dry_run,
            out,
        )
    }

    fn dry_run(&self) -> bool {
        self.dry_run
    }

    fn answers(&self) -> bool {
        self.dry_run || (!self.off && !self.on && self.threshold.is_none() && self.sizes.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("64K").unwrap(), 64 << 10);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        for bad in ["", "K", "1.5M", "1T", "-1", "99999999999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
