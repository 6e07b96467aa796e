//! sgard: checkpoint dotfiles into a portable repository and restore them.
//!
//! This binary is a thin layer: it parses arguments, builds the
//! [`sgard_garden::Env`] (the only place the environment is read), calls one
//! `Garden` method per command, and renders the result. Exit codes: 0 ok,
//! 1 error, 2 usage, 3 integrity failure, 4 conflict or refused.

mod cli;
mod cmd;

mod exit;
mod ui;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    match cmd::run(cli) {
        Ok(code) => code,
        Err(err) => {
            if exit::is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            let code = exit::code_for(&err);
            let mut stderr = io::stderr().lock();
            let _ = writeln!(
                stderr,
                "sgard: error: {}",
                ui::clean_text(&err.to_string(), true)
            );
            for cause in err.chain().skip(1) {
                let _ = writeln!(
                    stderr,
                    "  caused by: {}",
                    ui::clean_text(&cause.to_string(), true)
                );
            }
            ExitCode::from(code)
        }
    }
}
