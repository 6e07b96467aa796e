//! Templates: files whose stored content is a Jinja source (minijinja),
//! rendered for each machine.
//!
//! A template entry is a file entry with `template` set (`type: template`
//! in the manifest). Its blob holds the source, encrypted like any file when
//! the entry is; what restore writes, and what status and diff compare the
//! disk with, is the rendering. Checkpoint never stores a rendering in place
//! of a source.
//!
//! Variables: `sgard.hostname`, `sgard.os`, `sgard.arch` (the Go names
//! targeting uses), `sgard.tags`, `sgard.username`, `sgard.home`, and
//! `data`: the mapping in `<repo>/data.yaml`, overlaid key by key (nested
//! mappings merged) by the machine-local `data.yaml` in the configuration
//! folder. Undefined variables are errors (strict mode), naming the
//! expression, its line and column.
//!
//! Functions: the password managers of [`crate::managers`] (`pass`,
//! `onepassword`, …). A template that calls one is judged by status, diff
//! and checkpoint against what sgard last wrote on this machine, never by
//! asking the manager, unless the command asks to refresh.

use crate::Repo;
use crate::Tx;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sgard_manifest::Entry;
use sgard_store::Hash;

use crate::managers::{self, Bridge, Mode};
use crate::{Error, Garden, Result};

/// The repository's template data file.
pub const DATA_FILE: &str = "data.yaml";

/// The largest data file read (a mapping of settings, not a database).
const DATA_MAX: u64 = 4 << 20;

/// The largest template source rendered, and the largest rendering kept.
pub(crate) const SOURCE_MAX: usize = 16 << 20;

/// What templates render with on this machine, built once per command.
#[derive(Default, Debug)]
pub(crate) struct Templates {
    vars: Option<std::result::Result<Value, Error>>,
    /// Rendering hashes by (path, source hash).
    rendered: HashMap<(String, Hash), Hash>,
    /// What the password managers answered this command.
    answers: managers::Answers,
    /// Whether a source calls a password manager, by source hash.
    secret: HashMap<Hash, bool>,
    /// `status --refresh`: secret templates are rendered (asking the
    /// managers) to be compared, not judged by what was last written.
    pub(crate) refresh: bool,
    /// No command a template names is run (`output`): the user asked that
    /// no repository code run (`--no-scripts`).
    pub(crate) no_commands: bool,
}

/// A YAML data file as a JSON mapping (an empty or missing file: none).
fn read_data(path: &Path) -> Result<Option<Map<String, Value>>> {
    let text = match sgard_store::durable::read_regular_to_string_max(path, DATA_MAX) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("reading", path, e)),
    };
    let bad = |message: String| Error::Template {
        path: path.display().to_string(),
        message: format!("template data {}: {message}", path.display()),
    };
    if text.trim().is_empty() {
        return Ok(Some(Map::new()));
    }
    let v: Value =
        serde_saphyr::from_str(&text).map_err(|e| bad(sgard_manifest::yaml_message(&e, path)))?;
    match v {
        Value::Object(m) => Ok(Some(m)),
        Value::Null => Ok(Some(Map::new())),
        other => Err(bad(format!(
            "must be a mapping of names to values, not {}",
            match other {
                Value::Array(_) => "a list",
                Value::String(_) => "a string",
                _ => "a scalar",
            }
        ))),
    }
}

/// Overlays `top` on `base` key by key, merging nested mappings.
fn overlay(base: &mut Map<String, Value>, top: Map<String, Value>) {
    for (k, v) in top {
        match (base.get_mut(&k), v) {
            (Some(Value::Object(b)), Value::Object(t)) => overlay(b, t),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, col)
}

/// A minijinja error as one line: what, where, and the source it points at.
fn describe(err: &minijinja::Error, source: &str) -> String {
    let mut what = match err.kind() {
        minijinja::ErrorKind::UndefinedError => "template: undefined variable".to_owned(),
        minijinja::ErrorKind::SyntaxError => "template: syntax error".to_owned(),
        k => format!("template: {k}"),
    };
    let detail = err.detail();
    if let Some(d) = detail {
        what.push_str(": ");
        what.push_str(d);
    }
    match err.range() {
        Some(r) if source.is_char_boundary(r.start) && source.is_char_boundary(r.end) => {
            let (line, col) = line_col(source, r.start);
            let snippet: String = source[r.clone()].chars().take(80).collect();
            if detail.is_some_and(|d| d.contains(snippet.trim())) {
                format!("{what} at line {line}, column {col}")
            } else {
                format!("{what} (`{snippet}`) at line {line}, column {col}")
            }
        }
        _ => match err.line() {
            Some(line) => format!("{what} at line {line}"),
            None => what,
        },
    }
}

/// The template syntax: a config file's last newline is part of it, and a
/// block tag on a line of its own leaves no line behind: the newline after
/// a tag goes (`trim_blocks`), and so does the indentation before one
/// (`lstrip_blocks`), as in Ansible and most config templating.
pub(crate) fn syntax() -> std::result::Result<minijinja::syntax::SyntaxConfig, minijinja::Error> {
    minijinja::syntax::SyntaxConfig::builder()
        .keep_trailing_newline(true)
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
}

/// Renders `source` with `vars` and no password manager; `name` names it
/// in errors.
#[cfg(test)]
pub(crate) fn render_with(name: &str, source: &[u8], vars: &Value) -> Result<Vec<u8>> {
    render_secret(name, source, vars, None)
}

/// Renders `source` with `vars`, the password-manager functions answered
/// through `secrets` (without it they are undefined); `name` names it in
/// errors.
pub(crate) fn render_secret(
    name: &str,
    source: &[u8],
    vars: &Value,
    secrets: Option<&Bridge>,
) -> Result<Vec<u8>> {
    let bad = |message: String| Error::Template {
        path: name.to_owned(),
        message,
    };
    if source.len() > SOURCE_MAX {
        return Err(bad(format!(
            "template: a source of {} bytes is over the {} MiB templates may have",
            source.len(),
            SOURCE_MAX >> 20
        )));
    }
    let text = std::str::from_utf8(source).map_err(|e| {
        bad(format!(
            "template: not UTF-8 text (at byte {})",
            e.valid_up_to()
        ))
    })?;
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_syntax(syntax().map_err(|e| bad(e.to_string()))?);
    if let Some(b) = secrets {
        b.install(&mut env, vars);
    }
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_recursion_limit(64);
    // Bounds a template that loops forever.
    env.set_fuel(Some(50_000_000));
    let tmpl = env
        .template_from_str(text)
        .map_err(|e| bad(describe(&e, text)))?;
    let out = tmpl
        .render(minijinja::Value::from(minijinja::value::Serde(vars)))
        .map_err(|e| bad(describe(&e, text)))?;
    if out.len() > SOURCE_MAX {
        return Err(bad(format!(
            "template: renders to more than {} MiB",
            SOURCE_MAX >> 20
        )));
    }
    Ok(out.into_bytes())
}

impl Garden {
    /// Records the repository's `data.yaml` as it is now in the manifest
    /// (its content stored, durably, in the chunk store before the manifest
    /// names it), so it travels through sync and history. A file that cannot be
    /// read leaves a note and the last recorded version.
    pub(crate) fn refresh_data(&mut self) {
        let path = self.data_path();
        let now = match sgard_store::durable::read_regular_to_string_max(&path, DATA_MAX) {
            Ok(text) => Some(text),
            // Deleting the file is not taken as news (emptying it is): a
            // pull may bring it back.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && self.repo.manifest.data.is_some() =>
            {
                return;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                self.work.note(format!(
                    "{}: {e}; the version last recorded is kept",
                    path.display()
                ));
                return;
            }
        };
        let hash = now.as_ref().map(|t| Hash::of(t.as_bytes()));
        // Unchanged, and its blob still there (the Go sgard's prune deletes
        // it: then it is stored again).
        if hash == self.repo.manifest.data
            && hash.is_none_or(|h| self.repo.store.contains(&h).unwrap_or(false))
        {
            return;
        }
        // In the chunk store, like a template's source: the Go sgard's
        // prune deletes any blob no `type: file` entry names.
        if let Some(text) = now
            && let Err(e) = self.tx().put_source(text.as_bytes())
        {
            self.work.note(format!(
                "{}: cannot be recorded ({e}); the version last recorded is kept",
                path.display()
            ));
            return;
        }
        self.repo.manifest.data = hash;
    }

    /// Records an edit of `data.yaml` made since the manifest was last
    /// saved (before a push sends the manifest); returns whether there was
    /// one.
    ///
    /// # Errors
    /// Saving the manifest.
    pub fn record_data(&mut self) -> Result<bool> {
        let before = self.repo.manifest.data;
        self.refresh_data();
        if self.repo.manifest.data == before {
            return Ok(false);
        }
        self.repo.manifest.updated = self.repo.env.now;
        self.save()?;
        Ok(true)
    }

    /// The machine-local data file overlaying the repository's.
    pub fn local_data_path(&self) -> Option<PathBuf> {
        self.repo.local_data_path()
    }

    /// The repository's data file.
    pub fn data_path(&self) -> PathBuf {
        self.repo.data_path()
    }

    /// The data templates see: the repository's `data.yaml` overlaid by
    /// the machine-local one.
    ///
    /// # Errors
    /// [`Error::Template`] naming a data file that is not a YAML mapping;
    /// [`Error::Io`].
    pub fn template_data(&self) -> Result<Value> {
        self.repo.template_data()
    }

    /// Every variable templates see on this machine.
    ///
    /// # Errors
    /// As [`Garden::template_data`]; reading the tags.
    pub fn template_vars(&self) -> Result<Value> {
        self.repo.template_vars()
    }

    /// Makes this command render templates that ask a password manager
    /// (`status --refresh`) rather than judge them by what sgard last
    /// wrote on this machine.
    pub fn refresh_secrets(&mut self) {
        self.work.templates.refresh = true;
    }

    /// Makes `output(…)` in templates an error for this command instead of
    /// running the command it names (no repository code is to run).
    pub fn forbid_template_commands(&mut self) {
        self.work.templates.no_commands = true;
    }

    /// Renders `source` for this machine (`path` names it in errors).
    ///
    /// # Errors
    /// [`Error::Template`] for a syntax error, an undefined variable or bad
    /// data, with the line and column.
    pub fn render_source(&mut self, path: &str, source: &[u8]) -> Result<Vec<u8>> {
        self.tx().render_source(path, source)
    }

    /// The rendering of a template entry's stored source (decrypted first
    /// when it is encrypted: the key must be unlocked).
    ///
    /// # Errors
    /// Store and key errors; as [`Garden::render_source`].
    pub fn rendering(&mut self, e: &Entry) -> Result<Vec<u8>> {
        self.tx().rendering(e)
    }
}

impl Repo {
    pub(crate) fn local_data_path(&self) -> Option<PathBuf> {
        self.env.config_dir.as_ref().map(|d| d.join(DATA_FILE))
    }

    pub(crate) fn template_data(&self) -> Result<Value> {
        let mut data = read_data(&self.data_path())?.unwrap_or_default();
        if let Some(local) = self.local_data_path()
            && let Some(top) = read_data(&local)?
        {
            overlay(&mut data, top);
        }
        Ok(Value::Object(data))
    }

    pub(crate) fn data_path(&self) -> PathBuf {
        self.root.join(DATA_FILE)
    }

    pub(crate) fn template_vars(&self) -> Result<Value> {
        let tags = self.tags()?;
        let mut sgard = Map::new();
        for (k, v) in [
            (
                "hostname",
                crate::identity::short_hostname(&self.env.hostname),
            ),
            ("os", crate::identity::go_os().to_owned()),
            ("arch", crate::identity::go_arch().to_owned()),
            ("username", self.env.username.clone()),
            ("home", self.env.home.display().to_string()),
        ] {
            sgard.insert(k.to_owned(), Value::String(v));
        }
        sgard.insert(
            "tags".to_owned(),
            Value::Array(tags.into_iter().map(Value::String).collect()),
        );
        let mut vars = Map::new();
        vars.insert("sgard".to_owned(), Value::Object(sgard));
        vars.insert("data".to_owned(), self.template_data()?);
        Ok(Value::Object(vars))
    }
}

impl Tx<'_> {
    /// The SHA-256 of a template entry's rendering if this command rendered
    /// it already.
    pub(crate) fn rendered_of(&self, e: &Entry) -> Option<Hash> {
        let h = e.hash?;
        self.work
            .templates
            .rendered
            .get(&(e.path.clone(), h))
            .copied()
    }

    /// Stores a template's source (its ciphertext, if encrypted) in the
    /// chunk store, where the Go sgard's prune, which deletes every blob no
    /// `type: file` entry names, never looks; a blob when there is none
    /// (a store outside the repository).
    ///
    /// # Errors
    /// Store errors.
    pub(crate) fn put_source(&mut self, bytes: &[u8]) -> Result<sgard_store::Written> {
        if let Some(cs) = self.repo.store.chunked()
            && self.writes_to_repo()
        {
            let params = match self.chunking()? {
                sgard_store::chunks::Setting::On { params, .. } => params,
                sgard_store::chunks::Setting::Off => sgard_store::chunks::Params::default(),
            };
            let c = cs.write(&mut &bytes[..], params, None)?;
            self.work.known_size(c.hash, c.size);
            return Ok(sgard_store::Written {
                hash: c.hash,
                size: c.size,
                new: c.new_chunks > 0 || c.new_list,
            });
        }
        Ok(self.put(&mut &bytes[..])?)
    }

    /// Writes the data file the manifest records into the repository
    /// folder (after a pull brought another one).
    ///
    /// # Errors
    /// Store errors (a missing or corrupt blob); [`Error::Io`].
    pub(crate) fn install_data(&mut self) -> Result<()> {
        // What was rendered with the old data is stale.
        self.work.templates = Templates::default();
        let path = self.repo.data_path();
        match self.repo.manifest.data {
            None => match std::fs::remove_file(&path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(Error::io("removing", path, e)),
            },
            Some(h) => {
                let bytes = self
                    .repo
                    .store
                    .read(&h)
                    .map_err(|source| Error::Integrity {
                        path: path.display().to_string(),
                        source,
                    })?;
                sgard_store::durable::write_atomic(&path, &bytes, 0o644)?;
                Ok(())
            }
        }
    }

    pub(crate) fn render_source(&mut self, path: &str, source: &[u8]) -> Result<Vec<u8>> {
        self.render_mode(path, source, Mode::Ask)
    }

    /// Renders `source`, the password managers asked (at most once per
    /// secret in a command) or masked as `mode` says.
    pub(crate) fn render_mode(&mut self, path: &str, source: &[u8], mode: Mode) -> Result<Vec<u8>> {
        let t = &mut self.work.templates;
        if t.vars.is_none() {
            t.vars = Some(self.repo.template_vars());
        }
        match t.vars.as_ref() {
            Some(Ok(vars)) => {
                let bridge = Bridge::new(std::mem::take(&mut t.answers), mode, !t.no_commands);
                let out = render_secret(path, source, vars, Some(&bridge));
                t.answers = bridge.finish();
                out
            }
            Some(Err(e)) => Err(Error::Template {
                path: path.to_owned(),
                message: crate::checkpoint::error_chain(e),
            }),
            None => Err(Error::Invalid(
                "internal error: no template variables".into(),
            )),
        }
    }

    /// A template entry's source (decrypted: the key is unlocked if need be).
    pub(crate) fn source_of(&mut self, e: &Entry) -> Result<Vec<u8>> {
        Ok(if e.encrypted {
            self.stored_plaintext(e)?.to_vec()
        } else {
            self.repo.blob_of(e)?
        })
    }

    /// Whether a template entry's source calls a password manager (read
    /// once per source in a command; `None`: encrypted and the key is not
    /// unlocked, so it cannot be told without asking).
    pub(crate) fn is_secret_template(&mut self, e: &Entry) -> Result<Option<bool>> {
        let Some(h) = e.hash else {
            return Ok(Some(false));
        };
        if let Some(s) = self.work.templates.secret.get(&h) {
            return Ok(Some(*s));
        }
        if e.encrypted && !self.is_unlocked() {
            return Ok(None);
        }
        let source = self.source_of(e)?;
        let s = std::str::from_utf8(&source).is_ok_and(managers::calls_secrets);
        self.work.templates.secret.insert(h, s);
        Ok(Some(s))
    }

    /// A template entry's rendering with every password-manager answer
    /// masked ([`managers::MASK`]): nothing is asked.
    pub(crate) fn rendering_masked(&mut self, e: &Entry) -> Result<Vec<u8>> {
        let source = self.source_of(e)?;
        self.render_mode(&e.path, &source, Mode::Mask)
    }

    pub(crate) fn rendering(&mut self, e: &Entry) -> Result<Vec<u8>> {
        let source = self.source_of(e)?;
        let out = self.render_source(&e.path, &source)?;
        if let Some(h) = e.hash {
            self.work
                .templates
                .rendered
                .insert((e.path.clone(), h), Hash::of(&out));
        }
        Ok(out)
    }

    /// The SHA-256 of a template entry's rendering, rendering it once per
    /// command; `None` for an encrypted one when the key is not unlocked
    /// and `unlock` does not allow asking for it.
    ///
    /// # Errors
    /// As [`Garden::rendering`].
    pub(crate) fn rendered_hash(&mut self, e: &Entry, unlock: bool) -> Result<Option<Hash>> {
        if let Some(r) = self.rendered_of(e) {
            return Ok(Some(r));
        }
        if e.hash.is_none() {
            return Ok(None);
        }
        if e.encrypted && !unlock && !self.is_unlocked() {
            return Ok(None);
        }
        // A template that asks a password manager is judged by what sgard
        // last wrote (the base), unless the command must render it.
        if !self.work.templates.refresh {
            let secret = match self.is_secret_template(e)? {
                // Encrypted and locked: `unlock` allows opening it to look.
                None if unlock => {
                    self.dek()?;
                    self.is_secret_template(e)?
                }
                s => s,
            };
            if secret != Some(false) {
                return Ok(None);
            }
        }
        Ok(Some(Hash::of(&self.rendering(e)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Value {
        serde_json::json!({
            "sgard": {"hostname": "work", "os": "linux", "tags": ["laptop"]},
            "data": {"git": {"email": "me@work.example"}},
        })
    }

    #[test]
    fn renders_with_strict_variables_and_keeps_the_last_newline() {
        let out = render_with(
            "~/.gitconfig",
            b"[user]\n  email = {{ data.git.email }}\n{% if 'laptop' in sgard.tags %}# laptop\n{% endif %}",
            &vars(),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[user]\n  email = me@work.example\n# laptop\n"
        );
    }

    #[test]
    fn block_tags_on_their_own_lines_leave_no_lines_behind() {
        let out = render_with(
            "~/.gitconfig",
            b"[core]\n{% if 'laptop' in sgard.tags %}\n  pager = less\n{% endif %}\n  \
              {% for x in [1, 2] %}\n[{{ x }}]\n  {% endfor %}\n  {{ sgard.hostname }}\n",
            &vars(),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[core]\n  pager = less\n[1]\n[2]\n  work\n"
        );
    }

    #[test]
    fn errors_name_the_problem_with_its_line_and_column() {
        let e = render_with("~/t", b"a\nb {{ data.nope }}\n", &vars()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("undefined"), "{msg}");
        assert!(msg.contains("line 2"), "{msg}");
        let e = render_with("~/t", b"x\n{% if %}\n", &vars()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("syntax error"), "{msg}");
        assert!(msg.contains("line 2"), "{msg}");
        let e = render_with(
            "~/t",
            b"{% for i in range(1000000000) %}{% endfor %}",
            &vars(),
        );
        assert!(e.is_err(), "a runaway loop stops");
        assert!(render_with("~/t", &[0xff, 0xfe], &vars()).is_err());
    }

    #[test]
    fn local_data_overlays_nested_mappings_key_by_key() {
        let mut base: Map<String, Value> =
            serde_json::from_str(r#"{"git": {"email": "a@home", "name": "A"}, "editor": "vi"}"#)
                .unwrap();
        let top: Map<String, Value> =
            serde_json::from_str(r#"{"git": {"email": "a@work"}}"#).unwrap();
        overlay(&mut base, top);
        assert_eq!(
            Value::Object(base),
            serde_json::json!({"git": {"email": "a@work", "name": "A"}, "editor": "vi"})
        );
    }

    #[test]
    fn line_and_column_count_from_one() {
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("ab", 0), (1, 1));
    }
}
