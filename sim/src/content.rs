//! The bytes of a [`Content`]: the same for the same seed, on every run.

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::op::Content;

const WORDS: &[&str] = &[
    "alias", "export", "PATH", "set", "color", "true", "false", "editor", "vim", "theme", "font",
    "=", "#", "key", "value", "[core]", "user", "email", "home", "--", "ll", "ls", "-la",
];

/// Where a script appends its line: the file `<machine>.runs` beside the
/// homes (never inside one, so no walk of a home tracks it).
pub const RUNS_SUFFIX: &str = ".runs";

/// Text appended to a script stays a comment (text words include `vim`
/// and `ls`: run as commands, they would write into the home).
pub fn appended(content: &Content, path: &str, to_script: bool) -> Vec<u8> {
    let b = bytes(content, path);
    if !to_script {
        return b;
    }
    let mut out = Vec::new();
    for l in b.split(|c| *c == b'\n').filter(|l| !l.is_empty()) {
        out.extend_from_slice(b"# ");
        out.extend_from_slice(l);
        out.push(b'\n');
    }
    out
}

/// The bytes `content` stands for when written at `path` (a script names
/// its path, so the same script at two paths is two scripts).
pub fn bytes(content: &Content, path: &str) -> Vec<u8> {
    match content {
        Content::Empty => Vec::new(),
        Content::Text { seed, len } => text(*seed, *len as usize),
        Content::Binary { seed, len } => {
            let mut v = vec![0u8; *len as usize];
            ChaCha8Rng::seed_from_u64(u64::from(*seed) | 1 << 40).fill_bytes(&mut v);
            v
        }
        Content::Big { seed, len } => big(*seed, *len as usize),
        // It logs its path and the hash of what runs (`$0` is the copy
        // sgard runs), so "once per content" can be judged exactly.
        Content::Script { seed } => format!(
            "#!/bin/sh\n# sgard-sim script {seed}\necho \"{path} $(sha256sum < \"$0\" | cut -c1-64)\" >> \"$HOME/../$SGARD_HOSTNAME{RUNS_SUFFIX}\"\n"
        )
        .into_bytes(),
        Content::Template { seed } => template(*seed),
    }
}

fn text(seed: u32, len: usize) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(seed));
    let mut out = String::new();
    while out.len() < len {
        let n = rng.gen_range(1..8);
        for i in 0..n {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(WORDS[rng.gen_range(0..WORDS.len())]);
        }
        out.push('\n');
    }
    out.truncate(len);
    if len > 0 && !out.ends_with('\n') {
        out.pop();
        out.push('\n');
    }
    out.into_bytes()
}

/// Big contents share most 64 KiB blocks with their neighbours (seeds
/// `8k … 8k+7` differ in one block each), so an edit of a big file stores
/// few new chunks, as a real one does.
fn big(seed: u32, len: usize) -> Vec<u8> {
    const BLOCK: usize = 64 * 1024;
    let blocks = len.div_ceil(BLOCK).max(1);
    let own = seed as usize % blocks;
    let mut out = vec![0u8; blocks * BLOCK];
    for (i, b) in out.chunks_mut(BLOCK).enumerate() {
        let s = if i == own {
            u64::from(seed) << 20 | i as u64
        } else {
            u64::from(seed / 8) << 20 | i as u64 | 1 << 50
        };
        ChaCha8Rng::seed_from_u64(s).fill_bytes(b);
    }
    out.truncate(len);
    out
}

/// A template: a host-dependent line, a block only tagged machines get,
/// and (every seventh seed) a variable no machine defines.
fn template(seed: u32) -> Vec<u8> {
    let mut t = format!(
        "# sgard-sim template {seed}\nhost = {{{{ sgard.hostname }}}}\n{{% if \"work\" in sgard.tags %}}\nwork = yes\n{{% endif %}}\nvalue = {seed}\n"
    );
    if seed.is_multiple_of(7) {
        t.push_str("broken = {{ data.nowhere.at_all }}\n");
    }
    t.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_bytes_and_others_differ() {
        let a = Content::Text { seed: 1, len: 100 };
        assert_eq!(bytes(&a, "x"), bytes(&a, "x"));
        assert_eq!(bytes(&a, "x").len(), 100);
        assert_ne!(
            bytes(&a, "x"),
            bytes(&Content::Text { seed: 2, len: 100 }, "x")
        );
        let b = Content::Big {
            seed: 9,
            len: 1_500_000,
        };
        let c = Content::Big {
            seed: 10,
            len: 1_500_000,
        };
        let (b, c) = (bytes(&b, "x"), bytes(&c, "x"));
        assert_eq!(b.len(), 1_500_000);
        let same = b
            .chunks(65536)
            .zip(c.chunks(65536))
            .filter(|(x, y)| x == y)
            .count();
        assert!(same >= 20, "neighbouring big contents share blocks: {same}");
        let s = bytes(&Content::Script { seed: 4 }, ".scripts/once-a.sh");
        assert!(
            String::from_utf8(s)
                .unwrap()
                .contains("echo \".scripts/once-a.sh $(sha256sum")
        );
    }
}
