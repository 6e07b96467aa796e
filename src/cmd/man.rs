//! `sgard man [--markdown] [--dir DIR]`: the man pages, or the book's
//! command reference (docs/src/reference/) as markdown.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::Cli;

pub fn run(args: &Args, out: &mut dyn Write) -> Result<ExitCode> {
    if args.markdown {
        return markdown(args.dir.as_deref(), out);
    }
    let cmd = Cli::command();
    let Some(dir) = args.dir.as_deref() else {
        clap_mangen::Man::new(cmd).render(out)?;
        return Ok(ExitCode::SUCCESS);
    };
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = 0;
    let mut write_page = |name: &str, c: clap::Command| -> Result<()> {
        let mut buf = Vec::new();
        clap_mangen::Man::new(c).render(&mut buf)?;
        let path = dir.join(format!("{name}.1"));
        fs::write(&path, buf).with_context(|| format!("writing {}", path.display()))?;
        written += 1;
        Ok(())
    };
    write_page("sgard", cmd.clone())?;
    for sub in cmd.get_subcommands() {
        let name = format!("sgard-{}", sub.get_name());
        write_page(&name, sub.clone().name(name.clone()))?;
    }
    writeln!(out, "Wrote {written} man page(s) to {}", dir.display())?;
    Ok(ExitCode::SUCCESS)
}

/// The reference pages: `index.md` (the global options and the list of
/// commands) and one `sgard-<command>.md` per command, its subcommands
/// included. Each is (file name, text).
pub fn reference_pages() -> Vec<(String, String)> {
    let cmd = Cli::command();
    let no_extras = || {
        clap_markdown::MarkdownOptions::new()
            .show_footer(false)
            .show_table_of_contents(false)
    };
    let mut index = String::from(
        "# Command reference\n\n\
         Generated from sgard's own definitions by `sgard man --markdown --dir \
         docs/src/reference`: what `sgard <command> --help` says, one page per command.\n\n\
         ## Global options\n\n\
         These work with every command.\n\n",
    );
    let mut pages = Vec::new();
    let mut list = String::new();
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let Some(long) = arg.get_long() else { continue };
        let flag = match arg.get_short() {
            Some(short) => format!("-{short}, --{long}"),
            None => format!("--{long}"),
        };
        let value = match arg.get_value_names() {
            Some(names) if arg.get_action().takes_values() => {
                names.iter().map(|n| format!(" <{n}>")).collect::<String>()
            }
            _ => String::new(),
        };
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        index.push_str(&format!("* `{flag}{value}`: {help}\n"));
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let file = format!("sgard-{}.md", sub.get_name());
        let title = format!("sgard {}", sub.get_name());
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        list.push_str(&format!("* [`{title}`]({file}): {about}\n"));
        let page = sub.clone().name(title.clone());
        let text = clap_markdown::help_markdown_command_custom(&page, &no_extras().title(title));
        pages.push((file, tidy(&text)));
    }
    index.push_str("\n## Commands\n\n");
    index.push_str(&list);
    let mut all = vec![("index.md".to_owned(), index)];
    all.extend(pages);
    all
}

/// The page as it is committed: without clap-markdown's sentence under the
/// title, a `<` of the help text outside code escaped (mdBook would take
/// `<repo>` for an HTML tag), no trailing spaces, one trailing newline.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("This document contains the help content for") {
            continue;
        }
        if line.starts_with("```") {
            fenced = !fenced;
        }
        let line = line.trim_end();
        if fenced {
            out.push_str(line);
        } else {
            let mut code = false;
            for c in line.chars() {
                match c {
                    '`' => {
                        code = !code;
                        out.push(c);
                    }
                    '<' if !code => out.push_str("&lt;"),
                    _ => out.push(c),
                }
            }
        }
        out.push('\n');
    }
    while out.contains("\n\n\n") {
        out = out.replace("\n\n\n", "\n\n");
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

fn markdown(dir: Option<&Path>, out: &mut dyn Write) -> Result<ExitCode> {
    let pages = reference_pages();
    let Some(dir) = dir else {
        for (i, (_, text)) in pages.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            out.write_all(text.as_bytes())?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // A page of a command that is gone goes with it.
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name.starts_with("sgard-") && name.ends_with(".md");
        if ours && !pages.iter().any(|(file, _)| *file == name) {
            fs::remove_file(entry.path())
                .with_context(|| format!("removing {}", entry.path().display()))?;
        }
    }
    for (file, text) in &pages {
        let path = dir.join(file);
        fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    writeln!(
        out,
        "Wrote {} reference page(s) to {}",
        pages.len(),
        dir.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `sgard man`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write sgard.1 and sgard-<command>.1 into this folder (with --markdown: index.md and
    /// sgard-<command>.md)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
    /// Markdown instead of man pages: the book's command reference (regenerate it with
    /// `sgard man --markdown --dir docs/src/reference`)
    #[arg(long)]
    pub markdown: bool,
}
