//! Saved cases: a list of operations, one a line, with `#` comments.

use std::fs;
use std::path::Path;

use crate::Error;
use crate::op::Op;
use crate::run::Failure;

/// Reads a case file's operations.
pub fn read(path: &Path) -> Result<Vec<Op>, Error> {
    let text = fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text)
}

/// The operations of a case's text.
pub fn parse(text: &str) -> Result<Vec<Op>, Error> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(Op::parse)
        .collect()
}

/// A case's text: what found it, then the operations.
pub fn render(seed: Option<u64>, failure: &Failure, ops: &[Op]) -> String {
    let mut out = String::from("# sgard-sim case: replay with `sgard-sim --replay FILE`\n");
    if let Some(s) = seed {
        out.push_str(&format!("# found by seed {s}\n"));
    }
    for (i, l) in failure.to_string().lines().enumerate() {
        out.push_str(if i == 0 { "# failed " } else { "#   " });
        out.push_str(l);
        out.push('\n');
    }
    for op in ops {
        out.push_str(&op.to_string());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rendered_case_reads_back() {
        let ops = parse("m1 write .bashrc text:1:20\n# a note\n\nm2 sgard usb status\n").unwrap();
        let f = Failure {
            step: 1,
            invariant: "x",
            detail: "two\nlines".into(),
        };
        assert_eq!(parse(&render(Some(3), &f, &ops)).unwrap(), ops);
    }
}
