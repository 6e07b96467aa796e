//! Terminal interaction: the stdin prompt, warnings and colours.

use std::io::{self, BufRead, IsTerminal, Write};

use anstyle::{AnsiColor, Style};
use sgard_garden::{Prompt, State};

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

impl Prompt for StdinPrompt {
    fn confirm(&mut self, question: &str) -> bool {
        let mut out = io::stdout().lock();
        let _ = write!(out, "{question} [y/N] ");
        let _ = out.flush();
        let mut line = String::new();
        match self.input.read_line(&mut line) {
            Ok(0) | Err(_) => {
                let _ = writeln!(out);
                false
            }
            Ok(_) => {
                // A terminal echoes the answer and its newline; piped input
                // does not, so end the prompt's line ourselves.
                if !io::stdin().is_terminal() {
                    let _ = writeln!(out);
                }
                matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
            }
        }
    }
}

/// Prints a warning on stderr.
pub fn warn(msg: &str) {
    eprintln!("sgard: warning: {msg}");
}

/// Prints a note (such as waiting for a lock) on stderr.
pub fn note(msg: &str) {
    eprintln!("sgard: {msg}");
}

/// The colour of a status word (used only when stdout gets colour; see
/// `cmd::run`).
pub fn state_style(s: State) -> Style {
    let c = match s {
        State::Ok => AnsiColor::Green,
        State::Modified => AnsiColor::Yellow,
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
