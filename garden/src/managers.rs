//! Password managers in templates: `pass`, `passFields`, `keepassxc`,
//! `onepassword`, `bitwarden`, `vault`, `secretTool` and `output`, each
//! through its own command-line client, never through a shell.
//!
//! A command asks each manager at most once per secret: the answers of one
//! command are kept in [`Answers`] (a plain field of the command's work)
//! and handed to each rendering. A template that calls any of these is a
//! *secret template*: status, diff and checkpoint judge it by what sgard
//! last wrote on this machine and never ask (see [`calls_secrets`]).

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use minijinja::value::{Rest, Value};
use minijinja::{Error as MjError, ErrorKind};

/// The functions that ask a password manager (or run a command).
pub const FUNCTIONS: &[&str] = &[
    "pass",
    "passFields",
    "keepassxc",
    "onepassword",
    "bitwarden",
    "vault",
    "secretTool",
    "output",
];

/// The most a client may print (a secret, a JSON item, a config snippet).
const MAX_OUTPUT: u64 = 1 << 20;

/// What a secret function gives when secrets are masked (`diff`): the
/// rendering shows where a secret stands without asking for it.
pub const MASK: &str = "\u{1}sgard-secret\u{1}";

/// How secret functions behave in one rendering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Ask the managers (restore, render, `status --refresh`).
    #[default]
    Ask,
    /// Give [`MASK`] for every secret, asking nothing (diff).
    Mask,
}

/// One call: the function and its arguments.
type Call = (&'static str, Vec<String>);

/// The answers a command got, by call (errors too: a locked vault fails
/// once, not once per template). Never shown by `Debug`.
#[derive(Default)]
pub struct Answers {
    got: HashMap<Call, std::result::Result<String, String>>,
}

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Answers({} kept)", self.got.len())
    }
}

/// Whether `source` (a template's text) calls any of [`FUNCTIONS`]: one
/// is named as a variable it does not declare, or written as a call
/// (`pass(`) anywhere in it (a name a template assigns from itself, `{% set
/// pass = pass('x') %}`, is declared before it is read). A source that does
/// not parse is not one (its rendering fails anyway, naming the error). Too
/// many is the safe side: such a template is only judged without
/// rendering.
pub fn calls_secrets(source: &str) -> bool {
    let mut env = minijinja::Environment::new();
    if let Ok(syntax) = crate::template::syntax() {
        env.set_syntax(syntax);
    }
    let Ok(t) = env.template_from_str(source) else {
        return false;
    };
    t.undeclared_variables(false)
        .iter()
        .any(|v| FUNCTIONS.contains(&v.as_str()))
        || FUNCTIONS.iter().any(|f| written_as_call(source, f))
}

/// Whether `name(` (spaces allowed before the parenthesis) stands in
/// `text` with no identifier character just before it.
fn written_as_call(text: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(name).any(|(i, _)| {
        let before_ok = text[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !ident(c) && c != '.');
        let after = text[i + name.len()..].trim_start_matches([' ', '\t']);
        before_ok && after.starts_with('(')
    })
}

/// The answers shared with one rendering's functions (minijinja's functions
/// are `'static`): taken from the command's [`Answers`] before it and put
/// back after it by [`Bridge::finish`].
#[derive(Clone)]
pub(crate) struct Bridge {
    answers: Arc<Mutex<Answers>>,
    mode: Mode,
    /// Whether `output` may run the command a template names.
    commands: bool,
}

impl Bridge {
    pub(crate) fn new(answers: Answers, mode: Mode, commands: bool) -> Self {
        Bridge {
            answers: Arc::new(Mutex::new(answers)),
            mode,
            commands,
        }
    }

    /// The answers, back for the command to keep.
    pub(crate) fn finish(self) -> Answers {
        let mut a = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut *a)
    }

    /// Adds the secret functions to `env` (`vars`: the template variables,
    /// where `data.keepassxc.database` names the default database).
    pub(crate) fn install(&self, env: &mut minijinja::Environment<'_>, vars: &serde_json::Value) {
        let b = self.clone();
        env.add_function("pass", move |name: String| {
            let text = b.ask_as("pass", "pass", vec![name], |a| {
                run("pass", &["show", &a[0]])
            })?;
            Ok::<_, MjError>(text.lines().next().unwrap_or("").to_owned())
        });
        let b = self.clone();
        env.add_function("passFields", move |name: String| {
            // The same answer as `pass(name)`: one `pass show` for both.
            let text = b.ask_as("passFields", "pass", vec![name], |a| {
                run("pass", &["show", &a[0]])
            })?;
            if text == MASK {
                return Ok(Value::from_object(Masked));
            }
            Ok(Value::from_pairs(pass_fields(&text)))
        });
        let b = self.clone();
        let default_db = vars
            .pointer("/data/keepassxc/database")
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        env.add_function(
            "keepassxc",
            move |entry: String, attribute: Option<String>, database: Option<String>| {
                let attribute = attribute.unwrap_or_else(|| "Password".into());
                let db = database.or_else(|| default_db.clone()).unwrap_or_default();
                b.ask("keepassxc", vec![entry, attribute, db], |a| {
                    if a[2].is_empty() {
                        return Err("no database: give it as the third argument, or set \
                                    `keepassxc: {database: PATH}` in this machine's data.yaml"
                            .into());
                    }
                    let out = run_interactive(
                        "keepassxc-cli",
                        &["show", "--quiet", "--attributes", &a[1], &a[2], &a[0]],
                    )?;
                    first_line(&out)
                })
            },
        );
        let b = self.clone();
        env.add_function("onepassword", move |reference: String| {
            b.ask("onepassword", vec![reference], |a| {
                run("op", &["read", "--no-newline", &a[0]])
            })
        });
        let b = self.clone();
        env.add_function("bitwarden", move |item: String, field: Option<String>| {
            let field = field.unwrap_or_else(|| "password".into());
            // One `bw get item` per item, whatever fields are read.
            let json = b.ask_as("bitwarden", "bw-item", vec![item.clone()], |a| {
                run("bw", &["get", "item", &a[0]])
            })?;
            if json == MASK {
                return Ok(json);
            }
            bitwarden_field(&json, &field).map_err(|why| {
                MjError::new(
                    ErrorKind::InvalidOperation,
                    format!("bitwarden({item:?}, {field:?}): {why}"),
                )
            })
        });
        let b = self.clone();
        env.add_function("vault", move |path: String, field: String| {
            b.ask("vault", vec![path, field], |a| {
                let flag = format!("-field={}", a[1]);
                run("vault", &["kv", "get", &flag, &a[0]])
            })
        });
        let b = self.clone();
        env.add_function("secretTool", move |attrs: Rest<String>| {
            b.ask("secretTool", attrs.0, |a| {
                if a.is_empty() || a.len() % 2 != 0 {
                    return Err("takes attribute and value pairs".into());
                }
                let mut args = vec!["lookup"];
                args.extend(a.iter().map(String::as_str));
                run("secret-tool", &args)
            })
        });
        let b = self.clone();
        env.add_function("output", move |cmd: String, args: Rest<String>| {
            let mut all = vec![cmd];
            all.extend(args.0);
            let allowed = b.commands;
            b.ask("output", all, |a| {
                if !allowed {
                    return Err("not run: this command runs no command the repository names".into());
                }
                let rest: Vec<&str> = a[1..].iter().map(String::as_str).collect();
                run(&a[0], &rest)
            })
        });
    }

    /// The answer to `func(args)`: from this command's answers, else from
    /// `get` (once), else [`MASK`] when masking.
    fn ask(
        &self,
        func: &'static str,
        args: Vec<String>,
        get: impl FnOnce(&[String]) -> std::result::Result<String, String>,
    ) -> std::result::Result<String, MjError> {
        self.ask_as(func, func, args, get)
    }

    /// As [`Bridge::ask`], the answer kept under `kept` (functions that
    /// read the same secret share it); errors name `func`.
    fn ask_as(
        &self,
        func: &'static str,
        kept: &'static str,
        args: Vec<String>,
        get: impl FnOnce(&[String]) -> std::result::Result<String, String>,
    ) -> std::result::Result<String, MjError> {
        if self.mode == Mode::Mask {
            return Ok(MASK.to_owned());
        }
        // A name given to a client is never taken as one of its options
        // (`pass('--clip')`): a template from a shared repository must not
        // steer the client. `output` runs what it names anyway.
        if func != "output"
            && let Some(a) = args.iter().find(|a| a.starts_with('-'))
        {
            return Err(MjError::new(
                ErrorKind::InvalidOperation,
                format!(
                    "{func}: the argument {a:?} starts with '-', which the client would take as an option"
                ),
            ));
        }
        let key = (kept, args);
        let known = self
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .got
            .get(&key)
            .cloned();
        let answer = match known {
            Some(a) => a,
            None => {
                let a = get(&key.1);
                self.answers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .got
                    .insert(key.clone(), a.clone());
                a
            }
        };
        answer.map_err(|why| {
            let shown: Vec<String> = key.1.iter().map(|a| format!("{a:?}")).collect();
            MjError::new(
                ErrorKind::InvalidOperation,
                format!("{func}({}): {why}", shown.join(", ")),
            )
        })
    }
}

/// Every field of a masked `passFields` item: [`MASK`].
#[derive(Debug)]
struct Masked;

impl minijinja::value::Object for Masked {
    fn get_value(self: &Arc<Self>, _key: &Value) -> Option<Value> {
        Some(Value::from(MASK))
    }
}

/// Runs `program args` (no shell), stdin and stderr the terminal's so a
/// client can ask to be unlocked; its stdout, which must be UTF-8.
fn run_interactive(program: &str, args: &[&str]) -> std::result::Result<String, String> {
    spawn(program, args, Stdio::inherit())
}

/// Runs `program args` (no shell) and returns its stdout. Its stderr is
/// the terminal's when there is one (a client may ask there to be
/// unlocked), else kept for the error when it fails.
fn run(program: &str, args: &[&str]) -> std::result::Result<String, String> {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        spawn(program, args, Stdio::inherit())
    } else {
        spawn(program, args, Stdio::piped())
    }
}

fn spawn(program: &str, args: &[&str], stderr: Stdio) -> std::result::Result<String, String> {
    let shown = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(stderr);
    // A client gets no passphrase sgard was given (as scripts do not).
    for k in crate::env::PASSPHRASE_VARS {
        cmd.env_remove(k);
    }
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("`{program}` is not installed (not found on PATH)")
        } else {
            format!("cannot run `{program}`: {e}")
        }
    })?;
    let mut out = Vec::new();
    let mut err = Vec::new();
    // stderr is read after stdout: bounded, and a client writes little of it.
    if let Some(o) = child.stdout.take() {
        let _ = o.take(MAX_OUTPUT + 1).read_to_end(&mut out);
    }
    if let Some(e) = child.stderr.take() {
        let _ = e.take(64 << 10).read_to_end(&mut err);
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for `{program}`: {e}"))?;
    if !status.success() {
        let said = String::from_utf8_lossy(&err);
        let said = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!(
            "`{shown}` failed ({status}){}",
            if said.is_empty() {
                String::new()
            } else {
                format!(": {}", said.trim())
            }
        ));
    }
    if out.len() as u64 > MAX_OUTPUT {
        return Err(format!("`{shown}` printed more than {MAX_OUTPUT} bytes"));
    }
    String::from_utf8(out).map_err(|_| format!("`{shown}` printed something that is not UTF-8"))
}

fn first_line(text: &str) -> std::result::Result<String, String> {
    Ok(text.lines().next().unwrap_or("").to_owned())
}

/// `pass`'s multi-line format: the password on the first line, then
/// `key: value` lines (others skipped); `password` is the first line.
fn pass_fields(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    if let Some(p) = lines.next() {
        out.insert("password".to_owned(), p.to_owned());
    }
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let k = k.trim();
            if !k.is_empty() && !k.contains(' ') {
                out.insert(k.to_owned(), v.trim().to_owned());
            }
        }
    }
    out
}

/// A field of a `bw get item` JSON item: `password`, `username`, `totp`
/// and `uri` of its login, `notes`, or a custom field by name.
fn bitwarden_field(json: &str, field: &str) -> std::result::Result<String, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|_| "`bw get item` did not print an item".to_owned())?;
    let s = |v: Option<&serde_json::Value>| v.and_then(|x| x.as_str()).map(str::to_owned);
    let found = match field {
        "password" | "username" | "totp" => s(v.pointer(&format!("/login/{field}"))),
        "uri" => s(v.pointer("/login/uris/0/uri")),
        "notes" => s(v.get("notes")),
        _ => v
            .get("fields")
            .and_then(|f| f.as_array())
            .and_then(|fs| {
                fs.iter()
                    .find(|f| f.get("name").and_then(|n| n.as_str()) == Some(field))
            })
            .and_then(|f| s(f.get("value"))),
    };
    found.ok_or_else(|| format!("the item has no field {field:?}"))
}

/// Masks `current` (the file on disk) for a diff against renderings made
/// with [`Mode::Mask`] (`masked`: the current source's first, then others
/// the disk may hold, such as the source sgard last wrote). Only what is
/// known to hold no secret is shown: a line found whole among the
/// renderings' lines without a mask; a line shaped like a rendering line
/// with masks shows its text around them with `********` in their place;
/// every other line is `********`, since a secret may sit anywhere (a
/// filtered, multi-line or edited one). Returns the first rendering and
/// the disk, masked.
pub fn mask_like(masked: &[&str], current: &str) -> (String, String) {
    let known: std::collections::HashSet<&str> = masked
        .iter()
        .flat_map(|m| m.lines())
        .filter(|l| !l.contains(MASK))
        .collect();
    let patterns: Vec<Vec<&str>> = masked
        .iter()
        .flat_map(|m| m.lines())
        .filter(|l| l.contains(MASK))
        .map(|l| l.split(MASK).collect())
        .collect();
    let mut out = String::with_capacity(current.len());
    for piece in current.split_inclusive('\n') {
        let (line, nl) = match piece.strip_suffix('\n') {
            Some(l) => (l, "\n"),
            None => (piece, ""),
        };
        if known.contains(line) {
            out.push_str(piece);
            continue;
        }
        match patterns.iter().find(|p| matches_parts(p, line)) {
            Some(p) => out.push_str(&p.join("********")),
            None => out.push_str("********"),
        }
        out.push_str(nl);
    }
    let first = masked.first().copied().unwrap_or("");
    (first.replace(MASK, "********"), out)
}

/// Whether `line` is `parts` joined by anything (each gap non-empty is not
/// required).
fn matches_parts(parts: &[&str], line: &str) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return false;
    };
    let Some(mut left) = line.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return left.is_empty();
    };
    for m in middle {
        match left.find(m) {
            Some(i) => left = &left[i + m.len()..],
            None => return false,
        }
    }
    left.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_calls_are_found_by_name_and_by_call() {
        assert!(calls_secrets("x = {{ pass('a/b') }}\n"));
        assert!(calls_secrets(
            "{% if true %}{{ output('date') }}{% endif %}"
        ));
        assert!(!calls_secrets("pass = {{ data.pass }}\n"));
        assert!(!calls_secrets("{% set pass = 'x' %}{{ pass }}"));
        assert!(!calls_secrets("{{ broken"));
        assert!(calls_secrets("{% set pass = pass('x') %}{{ pass }}"));
        assert!(calls_secrets("{{ vault ('a', 'b') }}"));
        assert!(!calls_secrets("{{ data.compass(1) }}"));
        assert!(!calls_secrets("{{ data.x.pass(1) }}"));
    }

    #[test]
    fn pass_fields_read_key_value_lines() {
        let f = pass_fields("s3cret\nuser: alice\nurl: https://x\nnot a field\n");
        assert_eq!(f["password"], "s3cret");
        assert_eq!(f["user"], "alice");
        assert_eq!(f["url"], "https://x");
        assert_eq!(f.len(), 3);
    }

    #[test]
    fn bitwarden_fields() {
        let j = r#"{"login":{"username":"u","password":"p","uris":[{"uri":"https://a"}]},
                   "notes":"n","fields":[{"name":"api","value":"k"}]}"#;
        assert_eq!(bitwarden_field(j, "password").unwrap(), "p");
        assert_eq!(bitwarden_field(j, "uri").unwrap(), "https://a");
        assert_eq!(bitwarden_field(j, "api").unwrap(), "k");
        assert!(bitwarden_field(j, "nope").is_err());
        assert!(bitwarden_field("not json", "password").is_err());
    }

    #[test]
    fn masking_hides_secrets_on_both_sides() {
        let masked = format!("user = alice\npassword = {MASK}\ntoken={MASK};x\n");
        let current = "user = alice\npassword = hunter2\ntoken=abc;x\nHUNTER2\nuser = bob\n";
        let (a, b) = mask_like(&[&masked], current);
        assert_eq!(a, "user = alice\npassword = ********\ntoken=********;x\n");
        // Known lines in clear, shaped ones around their masks, any other
        // line (a filtered secret, an edit) masked whole.
        assert_eq!(
            b,
            "user = alice\npassword = ********\ntoken=********;x\n********\n********\n"
        );
        // The source last written shapes lines too.
        let old = format!("password: {MASK}\n");
        let (_, b) = mask_like(&[&masked, &old], "password: hunter2\n");
        assert_eq!(b, "password: ********\n");
    }

    #[test]
    fn arguments_are_never_options_of_the_client() {
        let b = Bridge::new(Answers::default(), Mode::Ask, true);
        let e = b
            .ask("pass", vec!["--clip".into()], |_| Ok("x".into()))
            .unwrap_err();
        assert!(e.to_string().contains("starts with '-'"), "{e}");
        assert!(
            b.ask("pass", vec!["a/-b".into()], |_| Ok("x".into()))
                .is_ok()
        );
    }

    #[test]
    fn a_missing_client_is_named() {
        let e = run("sgard-no-such-client-xyz", &[]).unwrap_err();
        assert!(e.contains("not installed"), "{e}");
    }
}
