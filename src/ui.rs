//! Terminal interaction: the stdin prompt, warnings and colours.

use std::io::{self, BufRead, IsTerminal, Write};

use anstyle::{AnsiColor, Style};
use sgard_garden::{Answer, Prompt, State};

/// Reads answers from one buffered stdin reader, so piped `y\nn\n` answers
/// one question per line.
pub struct StdinPrompt {
    input: io::StdinLock<'static>,
}

impl StdinPrompt {
    /// A prompt over this process's stdin.
    pub fn new() -> Self {
        StdinPrompt {
            input: io::stdin().lock(),
        }
    }
}

impl StdinPrompt {
    /// Reads one answer line; `None` at end of input (or on a read error).
    fn answer(&mut self, question: &str, choices: &str) -> Option<String> {
        let mut out = io::stdout().lock();
        let _ = write!(out, "{} [{choices}] ", clean(question));
        let _ = out.flush();
        let mut line = String::new();
        match self.input.read_line(&mut line) {
            Ok(0) | Err(_) => {
                let _ = writeln!(out);
                None
            }
            Ok(_) => {
                // A terminal echoes the answer and its newline; piped input
                // does not, so end the prompt's line ourselves.
                if !io::stdin().is_terminal() {
                    let _ = writeln!(out);
                }
                Some(line.trim().to_ascii_lowercase())
            }
        }
    }
}

impl Prompt for StdinPrompt {
    fn confirm(&mut self, question: &str) -> bool {
        self.answer(question, "y/N")
            .is_some_and(|a| matches!(a.as_str(), "y" | "yes"))
    }

    fn ask(&mut self, question: &str) -> Answer {
        loop {
            let Some(a) = self.answer(question, "y,n,d,a,q,?") else {
                return Answer::NoInput;
            };
            return match a.as_str() {
                "y" | "yes" => Answer::Yes,
                "n" | "no" | "" => Answer::No,
                "d" | "diff" => Answer::Diff,
                "a" | "all" => Answer::All,
                "q" | "quit" => Answer::Quit,
                _ => {
                    let mut out = io::stdout().lock();
                    let _ = writeln!(
                        out,
                        "y - overwrite it with the repository's version\n\
                         n - keep it as it is (the default)\n\
                         d - show the difference, then ask again\n\
                         a - overwrite this one and all the rest\n\
                         q - keep this one and all the rest; ask nothing more"
                    );
                    continue;
                }
            };
        }
    }

    fn show(&mut self, text: &str) {
        let mut out = io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        if !text.ends_with('\n') {
            let _ = writeln!(out);
        }
        let _ = out.flush();
    }
}

/// Text from outside (a path, a host name, a message from a manifest or a
/// server) made safe for a terminal: control characters, which could move
/// the cursor, retitle the window or hide what follows, are shown escaped
/// (`\x1b`, `\u{9b}`); `keep_newlines` keeps line breaks of multi-line
/// messages.
pub fn clean_text(s: &str, keep_newlines: bool) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && !(keep_newlines && c == '\n');
    if !s.chars().any(bad) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !bad(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    std::borrow::Cow::Owned(out)
}

/// [`clean_text`] for one line.
pub fn clean(s: &str) -> std::borrow::Cow<'_, str> {
    clean_text(s, false)
}

/// Prints a warning on stderr.
/// A byte count for people: `512 bytes`, `1.5 KiB`, `64.0 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

pub fn warn(msg: &str) {
    eprintln!("sgard: warning: {}", clean_text(msg, true));
}

/// Prints a note (such as waiting for a lock) on stderr.
pub fn note(msg: &str) {
    eprintln!("sgard: {}", clean_text(msg, true));
}

/// The colour of a status word (used only when stdout gets colour; see
/// `cmd::run`).
pub fn state_style(s: State) -> Style {
    let c = match s {
        State::Ok => AnsiColor::Green,
        State::Modified => AnsiColor::Yellow,
        State::Behind => AnsiColor::Cyan,
        State::Conflict => AnsiColor::BrightRed,
        State::Drifted => AnsiColor::Magenta,
        State::Missing | State::TypeChange | State::Error => AnsiColor::Red,
        State::Skipped => AnsiColor::BrightBlack,
    };
    Style::new().fg_color(Some(c.into()))
}

/// `word` padded to `width`, styled when `colour` is on.
pub fn styled(colour: bool, style: Style, word: &str, width: usize) -> String {
    if colour {
        format!("{style}{word:<width$}{style:#}")
    } else {
        format!("{word:<width$}")
    }
}
