//! Terminal interaction: the stdin prompt, warnings, how much to say
//! (`-q`, `-v`), the one colour palette, and the progress bar.

pub mod progress;

use std::io::{self, BufRead, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use anstyle::{AnsiColor, Style};
use sgard_garden::{Answer, Prompt, State};

/// How much sgard says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    /// `-q`: errors only (and what a query command was asked for).
    Quiet,
    /// The default.
    Normal,
    /// `-v`: also every path as it is handled.
    Verbose,
}

static VERBOSITY: AtomicU8 = AtomicU8::new(1);
/// Whether stderr gets colour (decided once, like stdout's).
static ERR_COLOUR: AtomicBool = AtomicBool::new(false);
/// Whether stdout gets colour (for code that has no `Ctx` at hand).
static OUT_COLOUR: AtomicBool = AtomicBool::new(false);

/// Sets how much to say and whether stdout and stderr get colour; once,
/// at start.
pub fn configure(v: Verbosity, out_colour: bool, err_colour: bool) {
    VERBOSITY.store(v as u8, Ordering::Relaxed);
    OUT_COLOUR.store(out_colour, Ordering::Relaxed);
    ERR_COLOUR.store(err_colour, Ordering::Relaxed);
}

/// Whether stdout gets colour.
pub fn out_colour() -> bool {
    OUT_COLOUR.load(Ordering::Relaxed)
}

/// How much to say.
pub fn verbosity() -> Verbosity {
    match VERBOSITY.load(Ordering::Relaxed) {
        0 => Verbosity::Quiet,
        1 => Verbosity::Normal,
        _ => Verbosity::Verbose,
    }
}

/// What a piece of output means, which decides its colour: the one palette
/// of every command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Done, fine, in agreement (green).
    Good,
    /// Changed here, or would change (yellow).
    Change,
    /// Changed elsewhere; comes in (cyan).
    Incoming,
    /// Needs the user: a conflict, a refusal (bright red).
    Attention,
    /// Failed or lost (red).
    Bad,
    /// Repository-authoritative, drifted (magenta).
    Locked,
    /// Left alone, not for this machine (grey).
    Dim,
    /// A snapshot id or hash (yellow, as git shows them).
    Id,
    /// A heading or a total (bold).
    Heading,
}

impl Role {
    /// The style of this role.
    pub fn style(self) -> Style {
        let fg = |c: AnsiColor| Style::new().fg_color(Some(c.into()));
        match self {
            Role::Good => fg(AnsiColor::Green),
            Role::Change | Role::Id => fg(AnsiColor::Yellow),
            Role::Incoming => fg(AnsiColor::Cyan),
            Role::Attention => fg(AnsiColor::BrightRed),
            Role::Bad => fg(AnsiColor::Red),
            Role::Locked => fg(AnsiColor::Magenta),
            Role::Dim => fg(AnsiColor::BrightBlack),
            Role::Heading => Style::new().bold(),
        }
    }

    /// The role of a status word a command prints first on a line
    /// (`restored ~/x`, `failed ~/y`): one table for every command.
    pub fn of_word(word: &str) -> Role {
        match word.trim() {
            "ok" | "added" | "created" | "restored" | "updated" | "recorded" | "stored"
            | "merged" | "ran" | "deleted" | "pushed" | "pulled" | "settled" | "put back" => {
                Role::Good
            }
            "behind" | "incoming" | "pull" => Role::Incoming,
            "conflict" | "refused" | "ask" => Role::Attention,
            "failed" | "error" | "missing" | "corrupt" | "typechange" | "damaged" => Role::Bad,
            "drifted" | "locked" => Role::Locked,
            "skipped" | "kept" | "unchanged" | "same" | "up to date" | "nothing" => Role::Dim,
            _ => Role::Change,
        }
    }
}

/// `text` in `role`'s colour when `on`.
pub fn paint(on: bool, role: Role, text: &str) -> String {
    if on {
        let s = role.style();
        format!("{s}{text}{s:#}")
    } else {
        text.to_owned()
    }
}

/// A status word padded to `width`, in the palette's colour for it.
pub fn word(on: bool, w: &str, width: usize) -> String {
    styled(on, Role::of_word(w).style(), w, width)
}

/// `1 path`, `2 paths`: a count with its noun in the right number.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// [`count`] for nouns that take an `s`.
pub fn counts(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

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

/// How many times a question is asked before a typo counts as "no".
const TRIES: usize = 3;

impl StdinPrompt {
    /// Reads one answer line; `None` at end of input (or on a read error).
    fn answer(&mut self, question: &str, choices: &str) -> Option<String> {
        let _p = progress::pause();
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

    fn say(&self, text: &str) {
        let _ = writeln!(io::stdout().lock(), "{text}");
    }
}

impl Prompt for StdinPrompt {
    fn confirm(&mut self, question: &str) -> bool {
        for _ in 0..TRIES {
            match self.answer(question, "y/N").as_deref() {
                Some("y" | "yes") => return true,
                None | Some("n" | "no" | "") => return false,
                Some(other) => self.say(&format!(
                    "{:?} is neither yes nor no: answer y or n (Enter: no)",
                    clean(other)
                )),
            }
        }
        false
    }

    fn ask(&mut self, question: &str) -> Answer {
        for _ in 0..TRIES {
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
                    self.say(
                        "y - overwrite it with the repository's version\n\
                         n - keep it as it is (the default)\n\
                         d - show the difference, then ask again\n\
                         a - overwrite this one and all the rest\n\
                         q - keep this one and all the rest; ask nothing more",
                    );
                    continue;
                }
            };
        }
        Answer::No
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
    // Control characters are ASCII's (below 0x20, 0x7f) and U+0080 to
    // U+009F (0xc2 then 0x80..=0x9f in UTF-8): a look at the bytes rules
    // them out for nearly every path (100,000 lines of status) before any
    // character is decoded.
    let maybe = |b: u8| b < 0x20 || b == 0x7f || b == 0xc2;
    if !s.bytes().any(maybe) || !s.chars().any(bad) {
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

/// [`clean_text`] for a message that may run over several lines (a
/// parser's snippet under its first line): each line after the first is
/// indented by `indent`, so it reads as part of the message above it and
/// never as a message of its own.
pub fn clean_lines(s: &str, indent: &str) -> String {
    clean_text(s.trim_end_matches('\n'), true).replace('\n', &format!("\n{indent}"))
}

/// [`clean_text`] for one line.
pub fn clean(s: &str) -> std::borrow::Cow<'_, str> {
    clean_text(s, false)
}

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

/// [`bytes`] with the exact count beside a rounded size: `231 bytes`,
/// `1.5 KiB (1536 bytes)`.
pub fn bytes_exact(n: u64) -> String {
    if n < 1024 {
        bytes(n)
    } else {
        format!("{} ({n} bytes)", bytes(n))
    }
}

/// Prints a warning on stderr (not with `-q`).
pub fn warn(msg: &str) {
    SAID.fetch_add(1, Ordering::Relaxed);
    if verbosity() == Verbosity::Quiet {
        return;
    }
    let _p = progress::pause();
    let on = ERR_COLOUR.load(Ordering::Relaxed);
    to_stderr(format_args!(
        "sgard: {} {}",
        paint(on, Role::Change, "warning:"),
        clean_lines(msg, "  ")
    ));
}

/// Writes one line on stderr. A stderr that cannot be written (a full disk
/// under `2>file`, a closed descriptor) loses the line, never the command:
/// `eprintln!` would panic, and a panic aborts.
/// How many warnings, notes and error lines were said (or, with `-q`,
/// would have been): a status that said any is not printed again from a
/// copy (see `cmd::status`).
static SAID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// See [`SAID`].
pub fn said() -> usize {
    SAID.load(Ordering::Relaxed)
}

fn to_stderr(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Prints a note (such as waiting for a lock) on stderr (not with `-q`).
pub fn note(msg: &str) {
    SAID.fetch_add(1, Ordering::Relaxed);
    if verbosity() == Verbosity::Quiet {
        return;
    }
    let _p = progress::pause();
    to_stderr(format_args!("sgard: {}", clean_lines(msg, "  ")));
}

/// Prints one error line (`sgard: error: …`) on stderr, for a command that
/// goes on after it.
pub fn error_line(msg: &str) {
    SAID.fetch_add(1, Ordering::Relaxed);
    let on = ERR_COLOUR.load(Ordering::Relaxed);
    let _p = progress::pause();
    to_stderr(format_args!(
        "sgard: {} {}",
        paint(on, Role::Bad, "error:"),
        clean_lines(msg, "  ")
    ));
}

/// A unified diff with its lines coloured as git colours them: headers
/// bold, hunks cyan, removed lines red, added lines green.
pub fn paint_diff(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for line in text.split_inclusive('\n') {
        let role = if line.starts_with("+++") || line.starts_with("---") {
            Some(Role::Heading)
        } else if line.starts_with("@@") {
            Some(Role::Incoming)
        } else if line.starts_with('+') {
            Some(Role::Good)
        } else if line.starts_with('-') {
            Some(Role::Bad)
        } else {
            None
        };
        match role {
            Some(r) => {
                let (body, end) = match line.strip_suffix('\n') {
                    Some(b) => (b, "\n"),
                    None => (line, ""),
                };
                out.push_str(&paint(true, r, body));
                out.push_str(end);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// Prints an error and its causes on stderr, each distinct line once.
pub fn error(err: &anyhow::Error) {
    let on = ERR_COLOUR.load(Ordering::Relaxed);
    let _p = progress::pause();
    let mut stderr = io::stderr().lock();
    let head = err.to_string();
    let _ = writeln!(
        stderr,
        "sgard: {} {}{}",
        paint(on, Role::Bad, "error:"),
        clean_lines(&head, "  "),
        hint(err.as_ref()).unwrap_or_default()
    );
    // Wrapped errors often repeat their source's text, or end with it
    // (`connecting: tcp connect error` over `tcp connect error`): print
    // each cause only when no line printed before already says it.
    let mut said = vec![head];
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if text.trim().is_empty() || said.iter().any(|s| s.contains(&text)) {
            continue;
        }
        let _ = writeln!(
            stderr,
            "  caused by: {}{}",
            clean_lines(&text, "    "),
            hint(cause).unwrap_or_default()
        );
        said.push(text);
    }
}

/// What to do about a library error, in the CLI's words, said after its
/// own (the libraries' errors name what happened and never a command).
pub fn hint(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    use sgard_garden::Error as E;
    use sgard_manifest::history::Reason;
    const CHUNKS: &str = "; raise the chunk sizes (`sgard chunking --sizes`) or store the file \
                          whole (`sgard chunking --threshold`)";
    if let Some(sgard_store::Error::TooManyChunks { .. }) = e.downcast_ref::<sgard_store::Error>() {
        return Some(CHUNKS.into());
    }
    Some(match e.downcast_ref::<E>()? {
        E::Unreadable { rule, .. } => {
            format!(" (`sgard exclude {rule}` keeps it out, or make it readable)")
        }
        E::NotARepo(_) => "; run `sgard init` first".into(),
        E::NotTracked(_) => " (`sgard list` shows what is; `sgard add` tracks it)".into(),
        E::Excluded { rule, .. } => {
            format!(" (see `sgard exclude --list`; `sgard include {rule}` lifts it)")
        }
        E::NoEncryption => "; run `sgard encrypt init` first".into(),
        E::KeyChanged { record } => format!(
            "; nothing was decrypted or encrypted (if the repository's encryption was set up \
             again on purpose, remove {})",
            record.display()
        ),
        E::NoKey { .. } => "; on a machine that can unlock it, run `sgard encrypt add-recipient` \
                            with this machine's public key (its `~/.ssh/id_ed25519.pub`, or \
                            the one `sgard encrypt keygen` prints), or name a key with \
                            --identity"
            .into(),
        E::Unsettled { .. } => " (use --theirs or --ours to settle them)".into(),
        E::OutsideHome { .. } => " (`sgard pull --allow-absolute` accepts them)".into(),
        E::NotOnDisk(path) => format!("; `sgard restore {path}` brings it back first"),
        E::AfterCommit {
            reason: Reason::Pull,
            ..
        } => "; it is the head now: the next sgard command that writes to the repository \
              finishes it, and `sgard restore` writes what the pull brought into the home"
            .into(),
        E::AfterCommit { .. } => "; it is the head now, and the next sgard command that \
                                  writes to the repository finishes it"
            .into(),
        E::BelowTracked { above, .. } => format!(
            " (`sgard remove {above}` first, or `sgard add --follow` for a symlink to a \
             folder)"
        ),
        E::TooManyChunks { .. } | E::Store(sgard_store::Error::TooManyChunks { .. }) => {
            CHUNKS.into()
        }
        E::Unmergeable { path, why } => {
            use sgard_garden::Unmergeable as U;
            match why {
                U::Template => format!(
                    "; `sgard edit {path}` changes the source, `sgard restore --force {path}` \
                     renders it again"
                ),
                U::Unresolved => ": edit them away, then `sgard checkpoint` (`sgard restore -f` \
                                  takes the repository's version)"
                    .into(),
                U::Locked => " (`sgard restore`)".into(),
                U::NoBase | U::NotText => "; keep this one with `sgard add`, or take the \
                                           repository's with `sgard restore -f`"
                    .into(),
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// What a report says about a path, with what would change it in the
/// CLI's words (the library says only what happened).
pub fn why(w: &sgard_garden::why::Why) -> String {
    match &w.remedy {
        Some(r) => format!("{}{}", w.what, remedy(r)),
        None => w.what.clone(),
    }
}

/// What settles something, in the CLI's words, said after what happened.
pub fn remedy(r: &sgard_garden::why::Remedy) -> String {
    use sgard_garden::why::Remedy as R;
    match r {
        R::AddToTrack => " (`sgard add` it to track it)".to_owned(),
        R::AddItself => ": `sgard add` the file itself to take it".to_owned(),
        R::AddFile => " (`sgard add` the file to take it)".to_owned(),
        R::ResolveOrAdd => {
            " (resolve them, or `sgard add` the file itself to take it as it is)".to_owned()
        }
        R::TemplateSource => " (`sgard edit` changes the source; `sgard add --template` takes \
                               the file on disk as the new source)"
            .to_owned(),
        R::EditFixes(path) => format!(" (`sgard edit {path}` fixes it)"),
        R::RemoveDrops => " (`sgard remove` drops it)".to_owned(),
        R::Follow(shown) => format!(
            "; `sgard add --follow {shown}` follows it on this machine (restores then write \
             through it)"
        ),
        R::FollowStores => "; `sgard add --follow` stores what it points to".to_owned(),
        R::MakeExecutable if cfg!(windows) => format!(
            " ({}: rename it or give it one, then add it with --run)",
            sgard_garden::scripts::WINDOWS_REFUSED
        ),
        R::MakeExecutable => " (`chmod +x` it, then add it with --run)".to_owned(),
        R::AddStoresAgain(path) => format!(" (`sgard add {path}` stores it again)"),
        R::PullTheirs => " (`sgard pull --theirs` takes the server's)".to_owned(),
        R::RemoveTags => " (`sgard tag remove` any that are not this machine's; that file is \
                          no longer written)"
            .to_owned(),
        R::ChunkingOff => "; `sgard chunking --off` keeps the repository Go-readable".to_owned(),
        _ => String::new(),
    }
}

/// Why `merge` left a file alone, and what does what it did not.
pub fn no_merge(why: sgard_garden::NoMerge) -> String {
    use sgard_garden::NoMerge as N;
    match why {
        N::Matches => why.to_string(),
        N::OnlyHere => format!("{why}: `sgard checkpoint` records it"),
        N::OnlyRepository => format!("{why}: `sgard restore` brings it here"),
    }
}

/// An error and its causes on one line, with what to do about it (see
/// [`hint`]), for lists of per-path failures.
pub fn explained(e: &(dyn std::error::Error + 'static)) -> String {
    format!(
        "{}{}",
        sgard_garden::error_chain(e),
        hint(e).unwrap_or_default()
    )
}

/// The colour of a status word (used only when stdout gets colour; see
/// `cmd::run`).
pub fn state_style(s: State) -> Style {
    match s {
        State::Ok => Role::Good,
        State::Modified => Role::Change,
        State::Behind => Role::Incoming,
        State::Conflict => Role::Attention,
        State::Drifted => Role::Locked,
        State::Missing | State::TypeChange | State::Error => Role::Bad,
        State::Skipped => Role::Dim,
    }
    .style()
}

/// `word` padded to `width`, styled when `colour` is on.
pub fn styled(colour: bool, style: Style, word: &str, width: usize) -> String {
    if colour {
        format!("{style}{word:<width$}{style:#}")
    } else {
        format!("{word:<width$}")
    }
}
