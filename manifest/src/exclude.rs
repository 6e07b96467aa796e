//! Exclusion rules: path prefixes (the Go sgard's semantics) and globs.
//!
//! A rule excludes a path when it matches the path itself or any of its
//! ancestors, component by component: `~/a/sub` excludes `~/a/sub` and
//! `~/a/sub/x`, not `~/a/sub-backup/x`. Rules may use globs: `*` and `?`
//! match within one component, `[abc]` a character class, and `**` any
//! number of whole components (`~/.config/*/cache`, `~/**/.DS_Store`).

/// Whether `rule` contains glob syntax.
pub fn is_glob(rule: &str) -> bool {
    rule.contains(['*', '?', '['])
}

/// Whether `rule` excludes `path` (itself or an ancestor).
pub fn excludes(rule: &str, path: &str) -> bool {
    let r: Vec<&str> = components(rule);
    let p: Vec<&str> = components(path);
    if !is_glob(rule) {
        return p.len() >= r.len() && p[..r.len()] == r[..];
    }
    (1..=p.len()).any(|k| match_components(&r, &p[..k]))
}

fn components(s: &str) -> Vec<&str> {
    if s == "/" {
        return vec![""];
    }
    s.split('/').collect()
}

fn match_components(rule: &[&str], path: &[&str]) -> bool {
    match rule.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|i| match_components(rest, &path[i..])),
        Some((first, rest)) => match path.split_first() {
            Some((p, prest)) => {
                match_one(first.as_bytes(), p.as_bytes()) && match_components(rest, prest)
            }
            None => false,
        },
    }
}

/// Glob match of one component: `*`, `?`, `[...]` (with `!` or `^` negation).
fn match_one(pat: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < pat.len() {
            match pat[pi] {
                b'*' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                b'?' => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class(&pat[pi..], s[si])
                        && matched
                    {
                        pi += next;
                        si += 1;
                        continue;
                    }
                }
                c if c == s[si] => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    pat[pi..].iter().all(|&c| c == b'*')
}

/// Matches `c` against a class at the start of `pat`; returns (matched, length).
fn class(pat: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(pat.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < pat.len() {
        if pat[i] == b']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if i + 2 < pat.len() && pat[i + 1] == b'-' && pat[i + 2] != b']' {
            if pat[i] <= c && c <= pat[i + 2] {
                matched = true;
            }
            i += 3;
        } else {
            if pat[i] == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_rules_are_component_wise() {
        assert!(excludes("~/a/sub", "~/a/sub"));
        assert!(excludes("~/a/sub", "~/a/sub/x/y"));
        assert!(!excludes("~/a/sub", "~/a/sub-backup/x"));
        assert!(!excludes("~/a/sub", "~/a"));
        assert!(excludes("/etc", "/etc/hosts"));
    }

    #[test]
    fn glob_rules() {
        assert!(excludes("~/.config/*/cache", "~/.config/app/cache"));
        assert!(excludes("~/.config/*/cache", "~/.config/app/cache/blob"));
        assert!(!excludes("~/.config/*/cache", "~/.config/app/sub/cache"));
        assert!(!excludes("~/.config/*/cache", "~/.config/app/cachex"));
        assert!(excludes("~/**/.DS_Store", "~/a/b/.DS_Store"));
        assert!(excludes("~/**/.DS_Store", "~/.DS_Store"));
        assert!(excludes("~/*.swp", "~/.x.swp"));
        assert!(excludes("~/log?", "~/log1"));
        assert!(!excludes("~/log?", "~/log12"));
        assert!(excludes("~/[ab]c", "~/bc"));
        assert!(!excludes("~/[!ab]c", "~/bc"));
        assert!(excludes("~/[a-c]x", "~/bx"));
        assert!(is_glob("~/*") && !is_glob("~/plain"));
    }
}
