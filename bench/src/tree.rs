//! Deterministic test trees.
//!
//! Every file's size and bytes come from a xorshift64* generator seeded from
//! the scenario seed and the file's index, so two runs (or two machines)
//! write byte-identical trees. Content is written streaming in 1 MiB chunks,
//! so even the 1 GiB file never sits in memory.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

/// xorshift64*: tiny, fast and good enough for file contents and sizes.
pub struct Rng(u64);

impl Rng {
    /// A generator for stream `index` of `seed` (mixed with splitmix64, so
    /// neighbouring indexes give unrelated streams; never zero).
    pub fn new(seed: u64, index: u64) -> Self {
        let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 0x2545_F491_4F6C_DD1D } else { z })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi` (modulo bias is irrelevant here).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Log-uniform in `lo..=hi`: many small values, a few large ones.
    pub fn log_range(&mut self, lo: u64, hi: u64) -> u64 {
        // 53 random bits as a float in [0, 1).
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let (l, h) = ((lo as f64).ln(), (hi as f64).ln());
        ((l + u * (h - l)).exp() as u64).clamp(lo, hi)
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next_u64().to_le_bytes();
        rest.copy_from_slice(&last[..rest.len()]);
    }

    /// Fills `buf` with printable text: lowercase words, spaces, newlines.
    pub fn fill_text(&mut self, buf: &mut [u8]) {
        const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz =#-_\n";
        for c in buf.chunks_mut(8) {
            let mut r = self.next_u64();
            for b in c {
                *b = ALPHABET[(r & 31) as usize];
                r >>= 8;
            }
        }
    }
}

/// What a file's bytes look like.
#[derive(Clone, Copy)]
pub enum Content {
    /// Printable text (config files).
    Text,
    /// Incompressible random bytes.
    Binary,
}

/// One file to generate, relative to the tree root.
pub struct FileSpec {
    /// Path relative to the root (HOME).
    pub rel: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Text or binary.
    pub content: Content,
    /// Seed of this file's content stream.
    pub seed: u64,
}

/// A generated tree: its files and the top-level paths to hand to `sgard add`.
pub struct TreeSpec {
    /// Every file, in a fixed order.
    pub files: Vec<FileSpec>,
    /// Top-level paths (relative to HOME) to track.
    pub roots: Vec<PathBuf>,
}

impl TreeSpec {
    /// Total bytes of all files.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// Writes the tree under `home`.
    pub fn write(&self, home: &Path) -> Result<()> {
        let mut buf = vec![0u8; 1 << 20];
        for f in &self.files {
            let path = home.join(&f.rel);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            write_file(&path, f, &mut buf)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }

    /// The files [`TreeSpec::edit_one_percent`] edits: every 100th, the
    /// first included.
    pub fn edited_files(&self) -> impl Iterator<Item = &FileSpec> {
        self.files.iter().step_by(100)
    }

    /// Appends a line to every 100th file (at least one): the "1% edit".
    /// Returns how many files were edited.
    pub fn edit_one_percent(&self, home: &Path) -> Result<usize> {
        self.edit_first(home, usize::MAX)
    }

    /// Appends a line to the first `most` files of the 1% edit (so a later
    /// 1% edit still changes the same files). Returns how many were edited.
    pub fn edit_first(&self, home: &Path, most: usize) -> Result<usize> {
        let mut n = 0;
        for f in self.edited_files().take(most) {
            let path = home.join(&f.rel);
            let mut out = fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            out.write_all(b"\n# edited by sgard-bench\n")
                .with_context(|| format!("appending to {}", path.display()))?;
            n += 1;
        }
        Ok(n)
    }
}

fn write_file(path: &Path, f: &FileSpec, buf: &mut [u8]) -> Result<()> {
    let mut rng = Rng::new(f.seed, 0);
    let mut out = BufWriter::with_capacity(1 << 16, File::create(path)?);
    let mut left = f.size;
    while left > 0 {
        let n = usize::try_from(left.min(buf.len() as u64))?;
        let chunk = &mut buf[..n];
        match f.content {
            Content::Text => rng.fill_text(chunk),
            Content::Binary => rng.fill(chunk),
        }
        out.write_all(chunk)?;
        left -= n as u64;
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.set_permissions(fs::Permissions::from_mode(f.mode))?;
    Ok(())
}

/// About 300 config files of 100 B to 8 KiB (log-uniform) in a typical
/// dotfiles layout: a dozen top-level rc files plus `.config`, `.local/bin`
/// (executables) and a few nested plugin folders.
pub fn dotfiles() -> TreeSpec {
    const SEED: u64 = 0xD07F_11E5;
    const TOP: [&str; 12] = [
        ".bashrc",
        ".profile",
        ".zshrc",
        ".gitconfig",
        ".vimrc",
        ".tmux.conf",
        ".inputrc",
        ".editorconfig",
        ".npmrc",
        ".curlrc",
        ".wgetrc",
        ".Xresources",
    ];
    const DIRS: [&str; 16] = [
        ".config/nvim",
        ".config/nvim/lua/plugins",
        ".config/nvim/after/ftplugin",
        ".config/fish",
        ".config/fish/functions",
        ".config/fish/completions",
        ".config/git",
        ".config/alacritty",
        ".config/sway",
        ".config/waybar",
        ".config/mpv/scripts",
        ".config/htop",
        ".local/bin",
        ".vim/autoload",
        ".vim/syntax",
        ".ssh",
    ];
    let mut files = Vec::with_capacity(300);
    for name in TOP {
        files.push((PathBuf::from(name), 0o644));
    }
    for i in 0..(300 - TOP.len()) {
        let dir = DIRS[i % DIRS.len()];
        let (name, mode) = match dir {
            ".local/bin" => (format!("tool-{i:03}"), 0o755),
            ".ssh" => (format!("config.d-{i:03}"), 0o600),
            _ => (format!("file-{i:03}.conf"), 0o644),
        };
        files.push((Path::new(dir).join(name), mode));
    }
    let files = files
        .into_iter()
        .enumerate()
        .map(|(i, (rel, mode))| {
            let seed = Rng::new(SEED, i as u64).next_u64();
            FileSpec {
                rel,
                size: Rng::new(seed, 1).log_range(100, 8 * 1024),
                mode,
                content: Content::Text,
                seed,
            }
        })
        .collect();
    let mut roots: Vec<PathBuf> = TOP.iter().map(PathBuf::from).collect();
    roots.extend([".config", ".local", ".vim", ".ssh"].map(PathBuf::from));
    TreeSpec { files, roots }
}

/// One machine's dotfiles for the `server` scenario: 40 text files of
/// 512 B to 24 KiB (log-uniform, about 250 KB in all) in a dotfiles layout,
/// their bytes seeded by `client` so that no two machines share a file.
pub fn client_dotfiles(client: u64) -> TreeSpec {
    const SEED: u64 = 0x5E2F_0000;
    const TOP: [&str; 6] = [
        ".bashrc",
        ".profile",
        ".gitconfig",
        ".vimrc",
        ".tmux.conf",
        ".inputrc",
    ];
    const DIRS: [&str; 5] = [
        ".config/nvim",
        ".config/fish",
        ".config/git",
        ".local/bin",
        ".ssh",
    ];
    let seed = Rng::new(SEED, client).next_u64();
    let mut files = Vec::with_capacity(40);
    for (i, name) in TOP.iter().enumerate() {
        files.push((i, PathBuf::from(name), 0o644));
    }
    for i in TOP.len()..40 {
        let dir = DIRS[i % DIRS.len()];
        let (name, mode) = match dir {
            ".local/bin" => (format!("tool-{i:02}"), 0o755),
            ".ssh" => (format!("config.d-{i:02}"), 0o600),
            _ => (format!("file-{i:02}.conf"), 0o644),
        };
        files.push((i, Path::new(dir).join(name), mode));
    }
    let files = files
        .into_iter()
        .map(|(i, rel, mode)| {
            let seed = Rng::new(seed, i as u64).next_u64();
            FileSpec {
                rel,
                size: Rng::new(seed, 1).log_range(512, 24 * 1024),
                mode,
                content: Content::Text,
                seed,
            }
        })
        .collect();
    let mut roots: Vec<PathBuf> = TOP.iter().map(PathBuf::from).collect();
    roots.extend([".config", ".local", ".ssh"].map(PathBuf::from));
    TreeSpec { files, roots }
}

/// 10,000 binary files in 4 levels (`tree/aN/bN/cN/fNNNN.bin`, 10 folders
/// per level, 10 files per leaf), sizes uniform in 1 B..40 KiB: about
/// 20 KiB on average, about 200 MB in all.
pub fn t10k() -> TreeSpec {
    const SEED: u64 = 0x7E11_0000;
    let mut files = Vec::with_capacity(10_000);
    for i in 0..10_000u64 {
        let (a, b, c) = (i / 1000, i / 100 % 10, i / 10 % 10);
        let rel = PathBuf::from(format!("tree/a{a}/b{b}/c{c}/f{i:04}.bin"));
        let seed = Rng::new(SEED, i).next_u64();
        files.push(FileSpec {
            rel,
            size: Rng::new(seed, 1).range(1, 40 * 1024),
            mode: 0o644,
            content: Content::Binary,
            seed,
        });
    }
    TreeSpec {
        files,
        roots: vec![PathBuf::from("tree")],
    }
}

/// T100k: 100,000 small files (50 B to 1.5 KiB, ~80 MB) in 5 levels, the
/// size of a home with a few package caches or a large source checkout.
pub fn t100k() -> TreeSpec {
    const SEED: u64 = 0x7E11_1000;
    let mut files = Vec::with_capacity(100_000);
    for i in 0..100_000u64 {
        let (a, b, c, d) = (i / 10_000, i / 1000 % 10, i / 100 % 10, i / 10 % 10);
        let rel = PathBuf::from(format!("tree/a{a}/b{b}/c{c}/d{d}/f{i:05}.bin"));
        let seed = Rng::new(SEED, i).next_u64();
        files.push(FileSpec {
            rel,
            size: Rng::new(seed, 1).range(50, 1536),
            mode: 0o644,
            content: Content::Binary,
            seed,
        });
    }
    TreeSpec {
        files,
        roots: vec![PathBuf::from("tree")],
    }
}

/// One 1 GiB binary file, `big.img`.
pub fn big() -> TreeSpec {
    TreeSpec {
        files: vec![FileSpec {
            rel: PathBuf::from("big.img"),
            size: 1 << 30,
            mode: 0o644,
            content: Content::Binary,
            seed: 0xB16_F11E,
        }],
        roots: vec![PathBuf::from("big.img")],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_streams_differ() {
        let a: Vec<u64> = (0..4).map(|_| Rng::new(1, 2).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(Rng::new(1, 2).next_u64(), Rng::new(1, 3).next_u64());
    }

    #[test]
    fn ranges_stay_in_bounds() {
        let mut r = Rng::new(7, 0);
        for _ in 0..10_000 {
            assert!((100..=8192).contains(&r.log_range(100, 8192)));
            assert!((1..=40960).contains(&r.range(1, 40960)));
        }
    }

    #[test]
    fn trees_have_the_advertised_shape() {
        let d = dotfiles();
        assert_eq!(d.files.len(), 300);
        assert!(d.files.iter().all(|f| (100..=8192).contains(&f.size)));
        let t = t10k();
        assert_eq!(t.files.len(), 10_000);
        let total = t.total_bytes();
        assert!((180_000_000..=230_000_000).contains(&total), "{total}");
        assert_eq!(big().total_bytes(), 1 << 30);
        let h = t100k();
        assert_eq!(h.files.len(), 100_000);
        assert!(h.files.iter().all(|f| (50..=1536).contains(&f.size)));
        let (c0, c1) = (client_dotfiles(0), client_dotfiles(1));
        assert_eq!(c0.files.len(), 40);
        let total = c0.total_bytes();
        assert!((100_000..=600_000).contains(&total), "{total}");
        assert_ne!(c0.files[0].seed, c1.files[0].seed);
    }

    #[test]
    fn fill_handles_odd_lengths() {
        let mut buf = [0u8; 13];
        Rng::new(1, 1).fill(&mut buf);
        Rng::new(1, 1).fill_text(&mut buf);
        assert!(buf.iter().all(|b| b.is_ascii()));
    }
}
