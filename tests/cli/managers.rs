//! Password managers in templates: a real `pass` store (Debian's `pass`
//! and `gnupg`, a throwaway key made here), and recorded fakes for the
//! clients that cannot run here (`op`, `bw`, `vault`, `secret-tool`,
//! `keepassxc-cli`: each fake logs its arguments and prints an answer), so
//! the command lines sgard runs, and that each secret is asked once per
//! command, are checked. Status and diff never ask.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::*;
use crate::machines::Machine;

/// A GnuPG home with a key and a `pass` store initialised to it; the
/// agent is stopped when dropped.
struct Store {
    _dir: tempfile::TempDir,
    gnupg: PathBuf,
    store: PathBuf,
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .args(["--kill", "gpg-agent"])
            .env("GNUPGHOME", &self.gnupg)
            .output();
    }
}

impl Store {
    /// `None` when `pass` or `gpg` is not installed.
    fn new() -> Option<Store> {
        if !on_path("pass") || !on_path("gpg") {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let gnupg = dir.path().join("g");
        fs::create_dir(&gnupg).unwrap();
        fs::set_permissions(&gnupg, fs::Permissions::from_mode(0o700)).unwrap();
        let store = dir.path().join("store");
        let s = Store {
            _dir: dir,
            gnupg,
            store,
        };
        let o = s
            .cmd("gpg")
            .args([
                "--batch",
                "--pinentry-mode",
                "loopback",
                "--passphrase",
                "",
                "--quick-gen-key",
                "sgard test <test@example.invalid>",
                "future-default",
                "default",
                "never",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = s
            .cmd("pass")
            .args(["init", "test@example.invalid"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        Some(s)
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("GNUPGHOME", &self.gnupg)
            .env("PASSWORD_STORE_DIR", &self.store)
            .stdin(Stdio::null());
        c
    }

    fn insert(&self, name: &str, text: &str) {
        use std::io::Write;
        let mut child = self
            .cmd("pass")
            .args(["insert", "--multiline", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    /// sgard in `m` with this store.
    fn sg(&self, m: &Machine, args: &[&str]) -> Run {
        m.command(args)
            .env("GNUPGHOME", &self.gnupg)
            .env("PASSWORD_STORE_DIR", &self.store)
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .into()
    }
}

const NETRC: &str = "machine {{ passFields('email/work').host }}\n\
login {{ passFields('email/work').user }}\n\
password {{ pass('email/work') }}\n";

/// The Done-when story: a template reading a real `pass` store renders on
/// restore; with the store gone, status and diff still answer without
/// error (judged by what sgard last wrote); a changed secret comes in with
/// `restore --refresh`.
#[test]
fn a_template_reads_a_real_pass_store_and_status_never_asks_it() {
    let Some(store) = Store::new() else {
        eprintln!("skipping: pass or gpg is not installed");
        return;
    };
    store.insert("email/work", "s3cret-pw\nuser: alice\nhost: mail.example\n");
    let shared = tempfile::tempdir().unwrap();
    let m = Machine::new("desk", &shared.path().join("repo"));
    store.sg(&m, &["init"]).ok();
    m.write(".netrc", NETRC);
    store
        .sg(&m, &["add", "--template", "--plaintext", "~/.netrc"])
        .ok();
    store.sg(&m, &["restore"]).ok().stdout_has("~/.netrc");
    assert_eq!(
        m.read(".netrc"),
        "machine mail.example\nlogin alice\npassword s3cret-pw\n"
    );
    store
        .sg(&m, &["status"])
        .ok()
        .stdout_has("ok         ~/.netrc");
    // The secret is not in the repository: only the source is.
    let manifest = fs::read_to_string(m.repo.join("manifest.yaml")).unwrap();
    assert!(!manifest.contains("s3cret"));
    for rel in crate::sync::files_under(&m.repo) {
        let p = m.repo.join(rel);
        let b = fs::read(&p).unwrap();
        assert!(
            !b.windows(9).any(|w| w == b"s3cret-pw"),
            "{} holds the secret",
            p.display()
        );
    }

    // The store is gone (another machine, a locked vault): status, diff,
    // checkpoint and restore of an up-to-date file answer without it.
    let gone = store.store.with_extension("gone");
    fs::rename(&store.store, &gone).unwrap();
    store
        .sg(&m, &["status"])
        .ok()
        .stdout_has("ok         ~/.netrc");
    store.sg(&m, &["diff", "--exit-code"]).ok();
    store.sg(&m, &["checkpoint"]).ok();
    store.sg(&m, &["restore"]).ok();
    // A local edit is `modified`, and diff masks the secrets on both sides:
    // only what the rendering is known to hold without a secret is shown.
    m.write(
        ".netrc",
        "machine mail.example\nlogin alice\npassword s3cret-pw\n# mine\n",
    );
    store
        .sg(&m, &["status"])
        .ok()
        .stdout_has("modified   ~/.netrc");
    let d = store.sg(&m, &["diff"]);
    // A line the rendering does not have may hold anything (a pasted
    // password): it is masked whole.
    d.ok()
        .stdout_has("+********\n")
        .stdout_has(" password ********");
    assert!(!d.stdout.contains("s3cret"), "{d:#?}");
    assert!(!d.stdout.contains("alice"), "{d:#?}");
    // Asking for a rendering now names the template and the function.
    store
        .sg(&m, &["status", "--refresh"])
        .stderr_has("~/.netrc")
        .stderr_has("pass")
        .stderr_has("email/work");

    // Back, with a new password: `restore --refresh -f` brings it in.
    fs::rename(&gone, &store.store).unwrap();
    let o = store
        .cmd("pass")
        .args(["rm", "-f", "email/work"])
        .output()
        .unwrap();
    assert!(o.status.success());
    store.insert("email/work", "n3w-pw\nuser: alice\nhost: mail.example\n");
    // Overwriting the local edit must render: the manager is asked, and
    // the new password comes in.
    store.sg(&m, &["restore", "-f"]).ok();
    assert_eq!(
        m.read(".netrc"),
        "machine mail.example\nlogin alice\npassword n3w-pw\n"
    );
    // The secret changes again: a plain restore leaves the file as sgard
    // last wrote it (asking nothing); `--refresh` brings the change in.
    let o = store
        .cmd("pass")
        .args(["rm", "-f", "email/work"])
        .output()
        .unwrap();
    assert!(o.status.success());
    store.insert("email/work", "third-pw\nuser: alice\nhost: mail.example\n");
    store.sg(&m, &["restore"]).ok();
    assert!(m.read(".netrc").contains("n3w-pw"));
    store
        .sg(&m, &["status", "--refresh"])
        .ok()
        .stdout_has("behind     ~/.netrc");
    store
        .sg(&m, &["restore", "--refresh"])
        .ok()
        .stdout_has("~/.netrc");
    assert_eq!(
        m.read(".netrc"),
        "machine mail.example\nlogin alice\npassword third-pw\n"
    );
    store
        .sg(&m, &["status"])
        .ok()
        .stdout_has("ok         ~/.netrc");
}

/// Writes a fake client `name` into `bin` that appends its arguments (one
/// per line, then `--`) to `bin/log` and prints `answer`.
fn fake(bin: &Path, name: &str, answer: &str) {
    let log = bin.join("log");
    let text = format!(
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> '{}'; done\necho -- >> '{}'\nprintf '%s' '{}'\n",
        log.display(),
        log.display(),
        answer.replace('\'', "'\\''")
    );
    let p = bin.join(name);
    fs::write(&p, text).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
}

/// The other clients, through recorded fakes: the exact command lines
/// (never a shell: an argument with spaces and quotes arrives whole), one
/// call per secret per command however often templates ask, and a
/// missing client named with the template and the function.
#[test]
fn each_manager_is_run_once_per_secret_with_its_own_command_line() {
    let shared = tempfile::tempdir().unwrap();
    let m = Machine::new("desk", &shared.path().join("repo"));
    let bin = m.t.outside().join("bin");
    fs::create_dir_all(&bin).unwrap();
    fake(&bin, "op", "op-secret");
    fake(
        &bin,
        "bw",
        r#"{"login":{"username":"bw-user","password":"bw-pass"},"fields":[{"name":"api","value":"bw-api"}]}"#,
    );
    fake(&bin, "vault", "vault-secret");
    fake(&bin, "secret-tool", "libsecret-secret");
    fake(&bin, "keepassxc-cli", "kp-secret\n");
    fake(&bin, "mycmd", "out-put\n");
    fake(&bin, "pass", "pass-pw\nuser: pass-user\n");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let sg = |args: &[&str]| -> Run {
        m.command(args)
            .env("PATH", &path)
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .into()
    };
    sg(&["init"]).ok();
    m.write(
        ".config/sgard/data.yaml",
        "keepassxc:\n  database: /db/it's mine.kdbx\n",
    );
    let a = "op={{ onepassword('op://vault/item/field') }}\n\
bw={{ bitwarden('item id') }} {{ bitwarden('item id', 'username') }} {{ bitwarden('item id', 'api') }}\n\
vault={{ vault('secret/app', 'token') }}\n\
st={{ secretTool('service', 'my app', 'user', 'me') }}\n\
kp={{ keepassxc('Mail/Work') }}\n\
out={{ output('mycmd', 'a b', \"it's\") }}\n\
pass={{ pass('web/x') }} {{ passFields('web/x').user }}";
    m.write(".a", a);
    // The same secrets again in a second template.
    m.write(
        ".b",
        "{{ onepassword('op://vault/item/field') }} {{ vault('secret/app', 'token') }}\n",
    );
    sg(&["add", "--template", "--plaintext", "~/.a", "~/.b"]).ok();
    assert!(
        !bin.join("log").exists(),
        "adding a template asks no manager"
    );
    sg(&["restore"]).ok();
    assert_eq!(
        m.read(".a"),
        "op=op-secret\nbw=bw-pass bw-user bw-api\nvault=vault-secret\n\
st=libsecret-secret\nkp=kp-secret\nout=out-put\n\npass=pass-pw pass-user"
    );
    assert_eq!(m.read(".b"), "op-secret vault-secret\n");
    let log = fs::read_to_string(bin.join("log")).unwrap();
    let calls: Vec<&str> = log.split("--\n").filter(|c| !c.is_empty()).collect();
    let expected = [
        "read\n--no-newline\nop://vault/item/field\n",
        "get\nitem\nitem id\n",
        "kv\nget\n-field=token\nsecret/app\n",
        "lookup\nservice\nmy app\nuser\nme\n",
        "show\n--quiet\n--attributes\nPassword\n/db/it's mine.kdbx\nMail/Work\n",
        "a b\nit's\n",
        // `pass` and `passFields` of one name: one `pass show`.
        "show\nweb/x\n",
    ];
    for e in expected {
        assert_eq!(
            calls.iter().filter(|c| **c == e).count(),
            1,
            "{e:?} once in {calls:#?}"
        );
    }
    assert_eq!(calls.len(), expected.len(), "{calls:#?}");
    // Status and diff ask none of them.
    fs::remove_file(bin.join("log")).unwrap();
    sg(&["status"]).ok();
    sg(&["diff"]).ok();
    m.write(".a", "changed\n");
    sg(&["status"]).ok().stdout_has("modified   ~/.a");
    sg(&["diff"]).ok().stdout_has("+********");
    assert!(!bin.join("log").exists(), "status and diff asked a manager");

    // --no-scripts: no command the repository names is run.
    fs::remove_file(m.path(".a")).unwrap();
    let r = sg(&["restore", "--no-scripts", "~/.a"]);
    r.code(1)
        .stderr_has("output(\"mycmd\"")
        .stderr_has("not run");
    assert!(!m.path(".a").exists());
    assert!(
        !bin.join("log").exists()
            || !fs::read_to_string(bin.join("log"))
                .unwrap()
                .contains("a b\n")
    );
    sg(&["restore", "~/.a"]).ok();

    // A missing client: the template and the function are named.
    m.write(".c", "{{ bitwarden('x') }}\n");
    sg(&["add", "--template", "--plaintext", "~/.c"]).ok();
    fs::remove_file(bin.join("bw")).unwrap();
    let r: Run = m
        .command(&["restore", "~/.c"])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into();
    r.code(1)
        .stderr_has("~/.c")
        .stderr_has("bitwarden(\"x\")")
        .stderr_has("`bw` is not installed");
    // A client that fails (a locked vault) says what it said.
    fs::write(
        bin.join("bw"),
        "#!/bin/sh\necho 'Vault is locked.' >&2\nexit 1\n",
    )
    .unwrap();
    fs::set_permissions(bin.join("bw"), fs::Permissions::from_mode(0o755)).unwrap();
    sg(&["restore", "~/.c"])
        .code(1)
        .stderr_has("Vault is locked.");
}
