//! Expected output against actual: line by line, trailing spaces ignored,
//! `...` alone on a line for any number of lines (none too), `[..]` within
//! a line for any text. (The whole of the contract: a page of code, where
//! snapbox would bring its own wildcards, `[EXE]`, `[ROOT]` and others, that
//! a page of prose must not trip over.)

/// Whether `actual` matches `expected`; trailing empty lines of both and
/// trailing spaces of every line are ignored.
pub fn matches(expected: &[String], actual: &[String]) -> bool {
    let e = trimmed(expected);
    let a = trimmed(actual);
    // ok[i][j]: e[i..] matches a[j..].
    let mut ok = vec![vec![false; a.len() + 1]; e.len() + 1];
    ok[e.len()][a.len()] = true;
    for i in (0..e.len()).rev() {
        for j in (0..=a.len()).rev() {
            ok[i][j] = if e[i] == "..." {
                ok[i + 1][j] || (j < a.len() && ok[i][j + 1])
            } else {
                j < a.len() && line_matches(e[i], a[j]) && ok[i + 1][j + 1]
            };
        }
    }
    ok[0][0]
}

/// The lines without trailing spaces, and without the empty lines at the end.
pub fn trimmed(lines: &[String]) -> Vec<&str> {
    let mut out: Vec<&str> = lines.iter().map(|l| l.trim_end()).collect();
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    out
}

/// One line, `[..]` matching any text within it.
pub fn line_matches(expected: &str, actual: &str) -> bool {
    let mut parts = expected.split("[..]");
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.lines().map(str::to_owned).collect()
    }

    #[test]
    fn wildcards() {
        assert!(matches(&v("a\n...\nd"), &v("a\nb\nc\nd")));
        assert!(matches(&v("a\n...\nd"), &v("a\nd")));
        assert!(matches(&v("...\n"), &v("")));
        assert!(matches(&v("x [..] y  "), &v("x 1 2 y\n\n")));
        assert!(matches(&v("[..]"), &v("x")));
        assert!(!matches(&v("[..]"), &v("")));
        assert!(!matches(&v("a"), &v("a\nb")));
        assert!(!matches(&v("a[..]b[..]b"), &v("ab")));
        assert!(matches(&v("a[..]b[..]b"), &v("abb")));
        assert!(!matches(&v("a\n...\nd"), &v("a\nb")));
    }
}
