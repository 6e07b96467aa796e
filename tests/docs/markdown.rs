//! Reading a markdown file as mdBook does (pulldown-cmark): its runnable
//! blocks and `docs-test` comments in order, its links, its headings' ids.

use std::collections::HashMap;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// The options mdBook turns on.
pub fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
}

/// One `$ command` of a console block and the output it must print.
#[derive(Debug)]
pub struct Command {
    pub line: usize,
    pub text: String,
    pub expected: Vec<String>,
}

/// What the session does, in the order of the file.
#[derive(Debug)]
pub enum Step {
    /// A `console` block.
    Console(Vec<Command>),
    /// A `sh`/`bash`/`shell` block, or a `<!-- docs-test` setup comment:
    /// bash with `set -eo pipefail`, output ignored.
    Script {
        line: usize,
        text: String,
        setup: bool,
    },
    /// A block not run, because of `<!-- docs-test: skip REASON -->`.
    Skipped { line: usize, reason: String },
}

/// A link or image destination.
#[derive(Debug)]
pub struct Link {
    pub line: usize,
    pub dest: String,
}

#[derive(Debug, Default)]
pub struct Doc {
    pub steps: Vec<Step>,
    pub needs_moto: bool,
    /// Mistakes in the `docs-test` markup or the console blocks: (line, what).
    pub errors: Vec<(usize, String)>,
    pub links: Vec<Link>,
    /// The ids of the headings, as mdBook gives them.
    pub ids: Vec<String>,
}

/// What a skip comment followed by anything but its code block is.
const SKIP_APART: &str =
    "a skip must be right before a code block (`docs-test: skip`, then the block, nothing between)";

/// The languages whose blocks run as scripts.
const SCRIPTS: [&str; 3] = ["sh", "bash", "shell"];

pub fn parse(text: &str) -> Doc {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let line_of = |offset: usize| starts.partition_point(|&s| s <= offset);
    let mut doc = Doc::default();
    let mut seen_ids: HashMap<String, usize> = HashMap::new();
    // (line, reason) of a skip waiting for its block.
    let mut skip: Option<(usize, String)> = None;
    let mut code: Option<(usize, String, String)> = None;
    let mut html: Option<(usize, String)> = None;
    let mut heading: Option<(Option<String>, String)> = None;
    for (event, range) in Parser::new_ext(text, options()).into_offset_iter() {
        let line = line_of(range.start);
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let info = match kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                code = Some((line, info, String::new()));
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((line, info, body)) = code.take() {
                    block(&mut doc, line, &info, &body, skip.take());
                }
            }
            Event::Start(Tag::HtmlBlock) => {
                apart(&mut doc, &mut skip);
                html = Some((line, String::new()));
            }
            Event::End(TagEnd::HtmlBlock) => {
                if let Some((line, body)) = html.take() {
                    comment(&mut doc, line, &body, &mut skip);
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, _, body)) = &mut code {
                    body.push_str(&t);
                } else if let Some((_, h)) = &mut heading {
                    h.push_str(&t);
                }
            }
            Event::Html(t) | Event::InlineHtml(t) => {
                if let Some((_, body)) = &mut html {
                    body.push_str(&t);
                } else if t.contains("docs-test") {
                    doc.errors.push((
                        line,
                        "a docs-test comment must stand alone, with blank lines around it".into(),
                    ));
                }
            }
            Event::Start(Tag::Heading { id, .. }) => {
                apart(&mut doc, &mut skip);
                heading = Some((id.map(|i| i.to_string()), String::new()));
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((id, text)) = heading.take() {
                    let base = id.unwrap_or_else(|| normalize_id(&text));
                    let n = seen_ids.entry(base.clone()).or_insert(0);
                    doc.ids.push(if *n == 0 {
                        base.clone()
                    } else {
                        format!("{base}-{n}")
                    });
                    *n += 1;
                }
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                doc.links.push(Link {
                    line,
                    dest: dest_url.to_string(),
                });
            }
            // Anything else between a skip and its block (a paragraph, a
            // list, a block quote, a table, a rule, …) is a mistake: the
            // skip would jump it and skip a later block.
            Event::Start(_) | Event::Rule => apart(&mut doc, &mut skip),
            _ => {}
        }
    }
    apart(&mut doc, &mut skip);
    doc
}

/// A pending skip that is not right before its code block: an error.
fn apart(doc: &mut Doc, skip: &mut Option<(usize, String)>) {
    if let Some((l, _)) = skip.take() {
        doc.errors.push((l, SKIP_APART.into()));
    }
}

/// mdBook's heading ids (and GitHub's, for what we write): lowercase,
/// whitespace to `-`, punctuation other than `-` and `_` dropped.
pub fn normalize_id(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

fn block(doc: &mut Doc, line: usize, info: &str, body: &str, skip: Option<(usize, String)>) {
    let lang = info.split([' ', ',', '{']).next().unwrap_or("").trim();
    let runs = lang == "console" || SCRIPTS.contains(&lang);
    if let Some((_, reason)) = skip {
        if !runs {
            doc.errors.push((
                line,
                format!("`docs-test: skip` before a ```{lang} block, which never runs"),
            ));
        }
        doc.steps.push(Step::Skipped { line, reason });
        return;
    }
    if SCRIPTS.contains(&lang) {
        doc.steps.push(Step::Script {
            line: line + 1,
            text: body.to_owned(),
            setup: false,
        });
    } else if lang == "console" {
        match console(line + 1, body) {
            Ok(commands) => doc.steps.push(Step::Console(commands)),
            Err(e) => doc.errors.push(e),
        }
    }
}

/// The commands of a console block whose first line is `first`.
fn console(first: usize, body: &str) -> Result<Vec<Command>, (usize, String)> {
    let lines: Vec<&str> = body.lines().collect();
    let prompt = |l: &str| l == "$" || l.starts_with("$ ");
    let mut commands: Vec<Command> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if prompt(l) {
            let line = first + i;
            let mut text = l.strip_prefix('$').unwrap_or(l).trim_start().to_owned();
            while text.ends_with('\\') && i + 1 < lines.len() {
                i += 1;
                text.push('\n');
                text.push_str(lines[i]);
            }
            commands.push(Command {
                line,
                text,
                expected: Vec::new(),
            });
        } else if let Some(c) = commands.last_mut() {
            c.expected.push(l.to_owned());
        } else if !l.trim().is_empty() {
            return Err((
                first + i,
                "a console block's first line must be a command (`$ …`); output without one".into(),
            ));
        }
        i += 1;
    }
    Ok(commands)
}

/// A `<!-- docs-test … -->` comment (other comments are left alone).
fn comment(doc: &mut Doc, line: usize, body: &str, skip: &mut Option<(usize, String)>) {
    let trimmed = body.trim();
    let own = trimmed
        .strip_prefix("<!--")
        .map(|r| r.trim_start_matches([' ', '\t']))
        .and_then(|r| r.strip_prefix("docs-test"));
    let Some(rest) = own else {
        if body.contains("docs-test") {
            // Not its block's start: mdBook's reader would see a comment
            // the test silently ignored.
            doc.errors.push((
                line,
                "a docs-test comment must start its HTML block (a blank line before it, \
                 nothing else in the block)"
                    .into(),
            ));
        }
        return;
    };
    let Some(inner) = rest.trim_end().strip_suffix("-->") else {
        doc.errors
            .push((line, "a docs-test comment must end with `-->`".into()));
        return;
    };
    if inner.contains("-->") {
        doc.errors.push((
            line,
            "a docs-test comment must be alone in its HTML block (blank lines around it)".into(),
        ));
        return;
    }
    if let Some(directive) = inner.strip_prefix(':') {
        let directive = directive.trim();
        let (word, rest) = directive
            .split_once(char::is_whitespace)
            .unwrap_or((directive, ""));
        if word == "skip" {
            let reason = rest.trim();
            if reason.is_empty() {
                doc.errors
                    .push((line, "`docs-test: skip` needs a reason".into()));
            }
            if let Some((l, _)) = skip.replace((line, reason.to_owned())) {
                doc.errors.push((l, SKIP_APART.into()));
            }
        } else if directive == "needs moto" {
            doc.needs_moto = true;
        } else {
            doc.errors
                .push((line, format!("unknown docs-test directive `{directive}`")));
        }
    } else if inner.starts_with(['\n', '\r']) {
        doc.steps.push(Step::Script {
            line: line + 1,
            text: inner.to_owned(),
            setup: true,
        });
    } else {
        doc.errors.push((
            line,
            "a docs-test comment is `<!-- docs-test: skip REASON -->`, `<!-- docs-test: needs \
             moto -->` or `<!-- docs-test` then setup lines then `-->`"
                .into(),
        ));
    }
}
