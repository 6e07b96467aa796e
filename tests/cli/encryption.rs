//! Per-file encryption: `encrypt init|list-slots|remove-slot|change-passphrase|
//! rotate-dek`, `add --encrypt/--no-encrypt`, asking for the passphrase only
//! when the data key is really needed, the fingerprint cache, hostile key
//! slots, terminal prompts, and interoperability with the Go sgard's format
//! (fixtures built here with the RustCrypto crates, never with sgard's code).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use chacha20poly1305::aead::Aead;
use chacha20poly1305::{KeyInit, XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};

use crate::common::*;

// ---------------------------------------------------------------- fixtures

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The passphrase of the repositories made here.
const PW: &str = "correct horse battery staple";
/// The encrypted file, as tracked and relative to HOME.
const SECRET: &str = "~/.aws/credentials";
const SECRET_REL: &str = ".aws/credentials";
/// Its content: distinctive enough that finding it anywhere means a leak.
const PLAIN: &[u8] = b"[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n\
aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nregion = eu-west-1\n";

// ---------------------------------------------------------------- helpers

/// Runs sgard with stdin closed, tiny Argon2 parameters and `env` added.
fn run(t: &TestEnv, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = t.command(args);
    c.env("SGARD_TEST_ARGON2", "1").stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap().into()
}

/// Runs sgard with the repository passphrase [`PW`].
fn pw(t: &TestEnv, args: &[&str]) -> Run {
    run(t, args, &[("SGARD_PASSPHRASE", PW)])
}

/// Runs sgard feeding `input` on stdin, with tiny Argon2 parameters and `env`.
fn run_stdin(t: &TestEnv, args: &[&str], env: &[(&str, &str)], input: &str) -> Run {
    let mut c = t.command(args);
    c.env("SGARD_TEST_ARGON2", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    if let Err(e) = child.stdin.take().unwrap().write_all(input.as_bytes()) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    child.wait_with_output().unwrap().into()
}

/// `command`, but run through `prefix` (e.g. `setsid -w`), with the same
/// environment and working folder.
fn wrapped(command: &Command, prefix: &[&str]) -> Command {
    let mut c = Command::new(prefix[0]);
    c.args(&prefix[1..])
        .arg(command.get_program())
        .args(command.get_args());
    copy_env(command, &mut c);
    c
}

/// A status line as `status` prints it.
fn line(state: &str, path: &str) -> String {
    format!("{state:<10} {path}")
}

#[track_caller]
fn has_line(r: &Run, l: &str) {
    assert!(
        r.stdout.lines().any(|x| x.trim_end() == l),
        "no line {l:?}; {r:#?}"
    );
}

/// Initializes encryption with [`PW`] and tracks [`SECRET`] (holding
/// [`PLAIN`], mode 0600) encrypted, and `~/.bashrc` in plaintext.
fn setup(t: &TestEnv) {
    pw(t, &["encrypt", "init"])
        .ok()
        .stdout_has("Encryption initialized with passphrase slot.");
    t.write(SECRET_REL, PLAIN);
    t.chmod(SECRET_REL, 0o600);
    pw(t, &["add", "--encrypt", SECRET]).ok();
    t.write(".bashrc", "export EDITOR=vi\n");
    t.sgard(["add", "~/.bashrc"]).ok();
}

/// The scalar fields of the manifest entry for `path`, quotes removed.
fn entry_in(manifest: &str, path: &str) -> Option<BTreeMap<String, String>> {
    let lines: Vec<&str> = manifest.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim_start() == format!("- path: {path}"))?;
    let indent = lines[start].len() - lines[start].trim_start().len();
    let mut out = BTreeMap::new();
    out.insert("path".to_owned(), path.to_owned());
    for l in &lines[start + 1..] {
        if l.trim().is_empty() {
            continue;
        }
        let lead = l.len() - l.trim_start().len();
        if lead <= indent {
            break;
        }
        if lead == indent + 2
            && let Some((k, v)) = l.trim().split_once(':')
        {
            out.insert(k.to_owned(), unquote(v.trim()));
        }
    }
    Some(out)
}

/// [`entry_in`] of the repository's manifest; panics if not tracked.
#[track_caller]
fn entry(t: &TestEnv, path: &str) -> BTreeMap<String, String> {
    let m = t.manifest();
    entry_in(&m, path).unwrap_or_else(|| panic!("{path} is not tracked; manifest:\n{m}"))
}

/// The fields of key slot `name` in a manifest's `encryption.kek_slots`.
fn slot_in(manifest: &str, name: &str) -> Option<BTreeMap<String, String>> {
    let lines: Vec<&str> = manifest.lines().collect();
    let ks = lines.iter().position(|l| l.trim() == "kek_slots:")?;
    let base = lines[ks].len() - lines[ks].trim_start().len();
    let mut i = ks + 1;
    let mut found = None;
    while i < lines.len() {
        let l = lines[i];
        let lead = l.len() - l.trim_start().len();
        if !l.trim().is_empty() && lead <= base {
            break;
        }
        let key = l.trim().trim_end_matches(':');
        if l.trim().ends_with(':') && unquote(key) == name {
            found = Some((i, lead));
            break;
        }
        i += 1;
    }
    let (at, indent) = found?;
    let mut out = BTreeMap::new();
    for l in &lines[at + 1..] {
        if l.trim().is_empty() {
            continue;
        }
        let lead = l.len() - l.trim_start().len();
        if lead <= indent {
            break;
        }
        if let Some((k, v)) = l.trim().split_once(':') {
            out.insert(k.to_owned(), unquote(v.trim()));
        }
    }
    Some(out)
}

/// [`slot_in`] of the repository's manifest; panics if absent.
#[track_caller]
fn slot(t: &TestEnv, name: &str) -> BTreeMap<String, String> {
    let m = t.manifest();
    slot_in(&m, name).unwrap_or_else(|| panic!("no key slot {name}; manifest:\n{m}"))
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    if v.len() >= 2
        && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\'')))
    {
        v[1..v.len() - 1].to_owned()
    } else {
        v.to_owned()
    }
}

/// Every regular file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd {
            let p = e.unwrap().path();
            let md = fs::symlink_metadata(&p).unwrap();
            if md.is_dir() {
                todo.push(p);
            } else if md.is_file() {
                out.push(p);
            }
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Panics if any file of the repository (blobs, snapshots, manifest,
/// history) holds `secret`.
#[track_caller]
fn assert_not_in_repo(t: &TestEnv, secret: &[u8]) {
    let files = files_under(&t.repo());
    assert!(
        files.iter().any(|f| f.starts_with(t.repo().join("blobs"))),
        "no blobs at all?"
    );
    for f in files {
        let data = fs::read(&f).unwrap();
        assert!(
            !contains(&data, secret),
            "{} holds the plaintext {:?}",
            f.display(),
            String::from_utf8_lossy(secret)
        );
    }
}

/// Checks the encrypted entry `path` holds `plain` as sgard writes it:
/// `encrypted: true`, a keyed `plaintext_mac` and no `plaintext_hash`, a
/// ciphertext blob of plaintext + 40 bytes whose SHA-256 is `hash`.
#[track_caller]
fn assert_encrypted_entry(t: &TestEnv, path: &str, plain: &[u8]) -> String {
    let e = entry(t, path);
    let m = t.manifest();
    assert_eq!(e.get("encrypted").map(String::as_str), Some("true"), "{m}");
    assert!(!e.contains_key("plaintext_hash"), "{m}");
    let mac = e
        .get("plaintext_mac")
        .unwrap_or_else(|| panic!("no plaintext_mac:\n{m}"));
    assert_eq!(mac.len(), 64, "{m}");
    assert_ne!(*mac, sha(plain), "the MAC must be keyed, not a plain hash");
    let hash = e.get("hash").unwrap().clone();
    assert_ne!(hash, sha(plain), "the hash must be of the ciphertext");
    let blob = fs::read(t.blob_path(&hash)).unwrap();
    assert_eq!(
        blob.len(),
        plain.len() + 40,
        "nonce(24) + ciphertext + tag(16)"
    );
    assert_eq!(sha(&blob), hash);
    assert!(!contains(&blob, plain));
    // Never the unkeyed fingerprint of the plaintext either.
    assert!(!m.contains(&sha(plain)), "plaintext SHA-256 leaked:\n{m}");
    hash
}

/// Argon2id, as the Go sgard derives a KEK.
fn argon2id(pass: &[u8], salt: &[u8], t_cost: u32, m_kib: u32, p: u32) -> [u8; 32] {
    let params = argon2::Params::new(m_kib, t_cost, p, Some(32)).unwrap();
    let a = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
    let mut out = [0u8; 32];
    a.hash_password_into(pass, salt, &mut out).unwrap();
    out
}

/// `nonce ‖ XChaCha20-Poly1305(key, plaintext)`.
fn seal(key: &[u8; 32], nonce: &[u8; 24], plaintext: &[u8]) -> Vec<u8> {
    let c = XChaCha20Poly1305::new_from_slice(key).unwrap();
    let n = XNonce::try_from(&nonce[..]).unwrap();
    let mut out = nonce.to_vec();
    out.extend(c.encrypt(&n, plaintext).unwrap());
    out
}

/// Opens a `nonce ‖ ciphertext ‖ tag` envelope.
fn open(key: &[u8], blob: &[u8]) -> Option<Vec<u8>> {
    let c = XChaCha20Poly1305::new_from_slice(key).ok()?;
    let n = XNonce::try_from(&blob[..24]).ok()?;
    c.decrypt(&n, &blob[24..]).ok()
}

/// The data key, unwrapped independently from the manifest's passphrase slot.
#[track_caller]
fn unwrap_dek(manifest: &str, pass: &str) -> Vec<u8> {
    let s = slot_in(manifest, "passphrase").unwrap_or_else(|| panic!("no slot:\n{manifest}"));
    assert_eq!(s["type"], "passphrase");
    let num = |k: &str| s[k].parse::<u32>().unwrap();
    let salt = B64.decode(&s["salt"]).unwrap();
    assert_eq!(salt.len(), 16, "salt of 16 bytes");
    let wrapped = B64.decode(&s["wrapped_dek"]).unwrap();
    assert_eq!(wrapped.len(), 24 + 32 + 16, "nonce + DEK + tag");
    let kek = argon2id(
        pass.as_bytes(),
        &salt,
        num("argon2_time"),
        num("argon2_memory"),
        num("argon2_threads"),
    );
    let dek = open(&kek, &wrapped).expect("the passphrase unwraps the DEK");
    assert_eq!(dek.len(), 32);
    dek
}

/// Deterministic "random" bytes for fixtures.
fn bytes<const N: usize>(label: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let mut i = 0u32;
    let mut filled = 0;
    while filled < N {
        let d = Sha256::digest(format!("{label}/{i}").as_bytes());
        let n = (N - filled).min(32);
        out[filled..filled + n].copy_from_slice(&d[..n]);
        filled += n;
        i += 1;
    }
    out
}

/// A FIDO2 slot as the Go sgard writes it (garbage key material: this sgard
/// can neither use nor re-wrap it).
fn fido2_slot_yaml(indent: &str) -> String {
    format!(
        "{indent}fido2/key:\n\
         {indent}    type: fido2\n\
         {indent}    credential_id: {}\n\
         {indent}    salt: {}\n\
         {indent}    wrapped_dek: {}\n",
        B64.encode(bytes::<48>("cred")),
        B64.encode(bytes::<16>("fido-salt")),
        B64.encode(bytes::<72>("fido-wrapped")),
    )
}

/// Adds a Go-style FIDO2 slot to the repository's manifest.
fn inject_fido2(t: &TestEnv) {
    let m = t.manifest();
    assert!(m.contains("\n    kek_slots:\n"), "{m}");
    let m = m.replacen(
        "\n    kek_slots:\n",
        &format!("\n    kek_slots:\n{}", fido2_slot_yaml("        ")),
        1,
    );
    fs::write(t.repo().join("manifest.yaml"), m).unwrap();
    assert_eq!(slot(t, "fido2/key")["type"], "fido2");
}

/// The snapshot id printed by `checkpoint`.
#[track_caller]
fn snapshot_id(r: &Run) -> String {
    let s = r
        .stdout
        .split("snapshot ")
        .nth(1)
        .unwrap_or_else(|| panic!("no snapshot id; {r:#?}"));
    s.trim().trim_end_matches('.').to_owned()
}

/// The fingerprint cache files of this HOME (XDG_STATE_HOME=$HOME/.state).
fn cache_files(t: &TestEnv) -> Vec<PathBuf> {
    files_under(&t.path(".state/sgard"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "fingerprints"))
        .collect()
}

/// A `SGARD_PASSPHRASE_COMMAND` that leaves `marker` behind and prints [`PW`].
fn asking_command(marker: &Path) -> String {
    format!("touch '{}'; printf '%s\\n' '{PW}'", marker.display())
}

// ---------------------------------------------------------------- 1. round trip

#[test]
fn round_trip_init_add_encrypt_restore() {
    let t = TestEnv::init();
    t.write(SECRET_REL, PLAIN);
    t.chmod(SECRET_REL, 0o600);

    // Before init: refused, nothing recorded.
    let before = t.manifest();
    pw(&t, &["add", "--encrypt", SECRET])
        .code(1)
        .stderr_has("encryption is not initialized; run `sgard encrypt init` first");
    assert_eq!(t.manifest(), before);

    pw(&t, &["encrypt", "init"])
        .ok()
        .stdout_has("Encryption initialized with passphrase slot.");
    let m = t.manifest();
    assert!(m.contains("encryption:"), "{m}");
    assert!(m.contains("algorithm: xchacha20-poly1305"), "{m}");
    let s = slot(&t, "passphrase");
    assert_eq!(s["type"], "passphrase");
    // SGARD_TEST_ARGON2=1: the tiny parameters are what is stored.
    assert_eq!(s["argon2_time"], "1");
    assert_eq!(s["argon2_memory"], "8");
    assert_eq!(s["argon2_threads"], "1");
    assert_eq!(B64.decode(&s["salt"]).unwrap().len(), 16);
    assert_eq!(B64.decode(&s["wrapped_dek"]).unwrap().len(), 72);

    // A second init is refused and changes nothing.
    let before = t.manifest();
    pw(&t, &["encrypt", "init"])
        .code(1)
        .stderr_has("already initialized");
    assert_eq!(t.manifest(), before);

    pw(&t, &["add", "--encrypt", SECRET]).ok();
    let hash = assert_encrypted_entry(&t, SECRET, PLAIN);
    assert_eq!(entry(&t, SECRET)["mode"], "0600");
    assert_not_in_repo(&t, PLAIN);
    assert_not_in_repo(&t, b"wJalrXUtnFEMI/K7MDENG");
    // A checkpoint (snapshot) leaks nothing either.
    pw(&t, &["checkpoint", "-m", "with a secret"]).ok();
    assert_not_in_repo(&t, b"wJalrXUtnFEMI/K7MDENG");
    assert_eq!(entry(&t, SECRET)["hash"], hash);

    fs::remove_file(t.path(SECRET_REL)).unwrap();
    let r = pw(&t, &["restore", "-f"]);
    r.ok().stdout_has(SECRET);
    assert_eq!(t.read(SECRET_REL), PLAIN);
    assert_eq!(mode_of(&t.path(SECRET_REL)), 0o600);
    has_line(&t.sgard(["status"]), &line("ok", SECRET));

    // Overwriting a local edit keeps it for undo, encrypted too.
    t.write(SECRET_REL, "LocalOnlySecret31337\n");
    pw(&t, &["restore", "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), PLAIN);
    assert_not_in_repo(&t, b"LocalOnlySecret31337");
    pw(&t, &["undo"]).ok();
    assert_eq!(t.read(SECRET_REL), b"LocalOnlySecret31337\n");
}

// ---------------------------------------------------------------- 2. wrong passphrase

#[test]
fn wrong_passphrase_fails_and_changes_nothing() {
    let t = TestEnv::init();
    setup(&t);
    let wrong = [("SGARD_PASSPHRASE", "Tr0ub4dor&3")];

    // An edited file: restore and diff need the key.
    t.write(SECRET_REL, "local edit\n");
    let manifest = t.manifest();
    let r = run(&t, &["restore", "-f", SECRET], &wrong);
    r.code(1).stderr_has("wrong passphrase");
    assert_eq!(t.read(SECRET_REL), b"local edit\n");
    assert_eq!(t.manifest(), manifest);

    run(&t, &["diff", SECRET], &wrong)
        .code(1)
        .stderr_has("wrong passphrase");
    run(&t, &["diff"], &wrong)
        .code(1)
        .stderr_has("wrong passphrase");
    assert_eq!(t.manifest(), manifest);

    // A missing file stays missing.
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    run(&t, &["restore", "-f"], &wrong)
        .code(1)
        .stderr_has("wrong passphrase");
    assert!(!t.path(SECRET_REL).exists());
    assert_eq!(t.manifest(), manifest);

    // checkpoint of the edited file with a wrong key keeps the entry.
    t.write(SECRET_REL, "another edit\n");
    let r = run(&t, &["checkpoint"], &wrong);
    r.code(1);
    assert!(
        r.stdout.contains("wrong passphrase") || r.stderr.contains("wrong passphrase"),
        "{r:#?}"
    );
    assert_eq!(entry_in(&t.manifest(), SECRET), entry_in(&manifest, SECRET));

    // The right one still works.
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    pw(&t, &["restore", "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), PLAIN);
}

// ---------------------------------------------------------------- 3. ask only when needed

#[test]
fn passphrase_is_asked_only_when_the_key_is_needed() {
    let t = TestEnv::init();
    setup(&t);
    let marker = t.outside().join("asked");
    let cmd = asking_command(&marker);
    let ask = [("SGARD_PASSPHRASE_COMMAND", cmd.as_str())];
    let asked = || marker.exists();

    // The fingerprint cache: outside the repository, private.
    let caches = cache_files(&t);
    assert_eq!(caches.len(), 1, "{caches:?}");
    assert_eq!(mode_of(&caches[0]), 0o600);
    assert!(!contains(&fs::read(&caches[0]).unwrap(), PLAIN));

    let r = run(&t, &["status"], &ask);
    r.ok();
    has_line(&r, &line("ok", SECRET));
    has_line(&r, &line("ok", "~/.bashrc"));
    assert!(!asked(), "status asked for the passphrase");
    for args in [
        &["verify"][..],
        &["list"],
        &["list", "--json"],
        &["info", SECRET],
        &["checkpoint", "-m", "nothing changed"],
        &["checkpoint"],
        &["log"],
        &["prune"],
        &["restore"],
        &["add", SECRET],
        &["status", "--json"],
    ] {
        run(&t, args, &ask).ok();
        assert!(
            !asked(),
            "`sgard {}` asked for the passphrase",
            args.join(" ")
        );
    }
    has_line(&run(&t, &["status"], &ask), &line("ok", SECRET));

    // Edited: status tells without asking.
    let old_hash = entry(&t, SECRET)["hash"].clone();
    let v2: &[u8] = b"[default]\naws_secret_access_key = SecondSecretValue42\n";
    t.write(SECRET_REL, v2);
    let r = run(&t, &["status"], &ask);
    r.ok();
    has_line(&r, &format!("{}  (content)", line("modified", SECRET)));
    assert!(!asked(), "status asked for the passphrase");

    // checkpoint must encrypt: it asks (once) and re-encrypts.
    let r = run(&t, &["checkpoint"], &ask);
    r.ok();
    has_line(&r, &line("updated", SECRET));
    assert!(asked(), "checkpoint of a changed encrypted file must ask");
    let new_hash = assert_encrypted_entry(&t, SECRET, v2);
    assert_ne!(new_hash, old_hash);
    assert_not_in_repo(&t, b"SecondSecretValue42");
    fs::remove_file(&marker).unwrap();
    has_line(&run(&t, &["status"], &ask), &line("ok", SECRET));
    assert!(!asked());

    // SGARD_PASSPHRASE_FILE: its first line is the passphrase.
    let pwfile = t.outside().join("pw.txt");
    fs::write(&pwfile, format!("{PW}\nnot this line\n")).unwrap();
    let pwfile = pwfile.to_str().unwrap().to_owned();
    let v3: &[u8] = b"[default]\naws_secret_access_key = ThirdSecretValue77\n";
    t.write(SECRET_REL, v3);
    let r = run(&t, &["checkpoint"], &[("SGARD_PASSPHRASE_FILE", &pwfile)]);
    r.ok();
    has_line(&r, &line("updated", SECRET));
    assert_encrypted_entry(&t, SECRET, v3);
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    run(
        &t,
        &["restore", "-f"],
        &[("SGARD_PASSPHRASE_FILE", &pwfile)],
    )
    .ok();
    assert_eq!(t.read(SECRET_REL), v3);

    // A wrong passphrase file is a wrong passphrase.
    let bad = t.outside().join("bad.txt");
    fs::write(&bad, "nope\n").unwrap();
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    run(
        &t,
        &["restore", "-f"],
        &[("SGARD_PASSPHRASE_FILE", bad.to_str().unwrap())],
    )
    .code(1)
    .stderr_has("wrong passphrase");
    assert!(!asked());
}

// ---------------------------------------------------------------- 4. Go → sgard

/// Writes, in `t`'s HOME, a repository exactly as the Go sgard would: one
/// encrypted file (with `plaintext_hash`), one plain file, a passphrase slot
/// with small Argon2 parameters and a FIDO2 slot. Returns the manifest text.
fn go_repo(t: &TestEnv, plain: &[u8]) -> String {
    let repo = t.repo();
    fs::create_dir_all(repo.join("blobs")).unwrap();
    fs::write(repo.join(".gitignore"), "blobs/\ntags\n").unwrap();

    let dek: [u8; 32] = bytes("go-dek");
    let salt: [u8; 16] = bytes("go-salt");
    let kek = argon2id(PW.as_bytes(), &salt, 1, 8, 1);
    let wrapped = seal(&kek, &bytes("go-wrap-nonce"), &dek);
    let blob = seal(&dek, &bytes("go-blob-nonce"), plain);
    let hash = sha(&blob);
    let put = |h: &str, data: &[u8]| {
        let p = t.blob_path(h);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, data).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    };
    put(&hash, &blob);
    let rc = b"alias ll='ls -l'\n";
    put(&sha(rc), rc);

    let manifest = format!(
        "version: 1\n\
         created: 2026-03-20T10:00:00.123456789Z\n\
         updated: 2026-03-20T10:00:00.123456789Z\n\
         files:\n\
         \x20   - path: {SECRET}\n\
         \x20     hash: {hash}\n\
         \x20     plaintext_hash: {ph}\n\
         \x20     encrypted: true\n\
         \x20     type: file\n\
         \x20     mode: \"0600\"\n\
         \x20     updated: 2026-03-20T10:00:00.123456789Z\n\
         \x20   - path: ~/.bashrc\n\
         \x20     hash: {rch}\n\
         \x20     type: file\n\
         \x20     mode: \"0644\"\n\
         \x20     updated: 2026-03-20T10:00:00.123456789Z\n\
         encryption:\n\
         \x20   algorithm: xchacha20-poly1305\n\
         \x20   kek_slots:\n\
         {fido}\
         \x20       passphrase:\n\
         \x20           type: passphrase\n\
         \x20           argon2_time: 1\n\
         \x20           argon2_memory: 8\n\
         \x20           argon2_threads: 1\n\
         \x20           salt: {salt}\n\
         \x20           wrapped_dek: {wrapped}\n",
        ph = sha(plain),
        rch = sha(rc),
        fido = fido2_slot_yaml("        "),
        salt = B64.encode(salt),
        wrapped = B64.encode(&wrapped),
    );
    fs::write(repo.join("manifest.yaml"), &manifest).unwrap();
    manifest
}

#[test]
fn go_repository_is_read_by_sgard() {
    let t = TestEnv::new();
    let go_manifest = go_repo(&t, PLAIN);
    let fido = slot_in(&go_manifest, "fido2/key").unwrap();
    let go_pass_slot = slot_in(&go_manifest, "passphrase").unwrap();
    let marker = t.outside().join("asked");
    let cmd = asking_command(&marker);
    let ask = [("SGARD_PASSPHRASE_COMMAND", cmd.as_str())];

    let r = t.sgard(["encrypt", "list-slots"]);
    r.ok();
    assert!(
        r.stdout
            .lines()
            .any(|l| l.split_whitespace().eq(["fido2/key", "fido2"])),
        "{r:#?}"
    );
    assert!(
        r.stdout
            .lines()
            .any(|l| l.split_whitespace().eq(["passphrase", "passphrase"])),
        "{r:#?}"
    );

    // Status without any passphrase: Go's plaintext_hash tells (no cache yet).
    has_line(&run(&t, &["status"], &ask), &line("missing", SECRET));
    t.write(SECRET_REL, PLAIN);
    t.chmod(SECRET_REL, 0o600);
    t.write(".bashrc", "alias ll='ls -l'\n");
    assert!(
        cache_files(&t).is_empty(),
        "no fingerprint should exist yet"
    );
    let r = run(&t, &["status"], &ask);
    r.ok();
    has_line(&r, &line("ok", SECRET));
    has_line(&r, &line("ok", "~/.bashrc"));
    run(&t, &["verify"], &ask).ok();
    run(&t, &["checkpoint"], &ask).ok();
    assert!(!marker.exists(), "nothing here needed the key");
    // And an edit is seen without the key too.
    t.write(SECRET_REL, "edited\n");
    has_line(
        &run(&t, &["status"], &ask),
        &format!("{}  (content)", line("modified", SECRET)),
    );
    assert!(!marker.exists());

    // Restore decrypts with the passphrase: the FIDO2 slot is skipped.
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    let r = pw(&t, &["restore", "-f"]);
    r.ok();
    assert_eq!(t.read(SECRET_REL), PLAIN);
    assert_eq!(mode_of(&t.path(SECRET_REL)), 0o600);
    // A wrong passphrase is still told apart from the FIDO2 slot.
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    run(&t, &["restore", "-f"], &[("SGARD_PASSPHRASE", "nope")])
        .code(1)
        .stderr_has("wrong passphrase");
    pw(&t, &["restore", "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), PLAIN);

    // A mutating command (re-encrypting an edit) keeps both slots untouched.
    let v2: &[u8] = b"[default]\naws_secret_access_key = EditedOnTheRustSide\n";
    t.write(SECRET_REL, v2);
    let r = pw(&t, &["checkpoint", "-m", "edited"]);
    r.ok();
    has_line(&r, &line("updated", SECRET));
    t.write(".profile", "umask 022\n");
    t.sgard(["add", "~/.profile"]).ok();
    assert_eq!(
        slot(&t, "fido2/key"),
        fido,
        "FIDO2 slot changed:\n{}",
        t.manifest()
    );
    assert_eq!(slot(&t, "passphrase"), go_pass_slot);
    assert_encrypted_entry(&t, SECRET, v2);
    assert_not_in_repo(&t, b"EditedOnTheRustSide");
    // The Go DEK still decrypts what sgard wrote.
    let e = entry(&t, SECRET);
    let blob = fs::read(t.blob_path(&e["hash"])).unwrap();
    assert_eq!(open(&bytes::<32>("go-dek"), &blob).unwrap(), v2);
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    pw(&t, &["restore", "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), v2);
}

// ---------------------------------------------------------------- 5. sgard → Go

#[test]
fn sgard_repository_decrypts_independently() {
    let t = TestEnv::init();
    setup(&t);
    let m = t.manifest();
    let dek = unwrap_dek(&m, PW);
    let e = entry_in(&m, SECRET).unwrap();
    let blob = fs::read(t.blob_path(&e["hash"])).unwrap();
    assert_eq!(sha(&blob), e["hash"]);
    assert_eq!(open(&dek, &blob).unwrap(), PLAIN);
    // A wrong passphrase does not unwrap it.
    let s = slot_in(&m, "passphrase").unwrap();
    let kek = argon2id(b"wrong", &B64.decode(&s["salt"]).unwrap(), 1, 8, 1);
    assert!(open(&kek, &B64.decode(&s["wrapped_dek"]).unwrap()).is_none());
    // Plain entries stay plain.
    let rc = entry_in(&m, "~/.bashrc").unwrap();
    assert!(!rc.contains_key("encrypted"));
    assert_eq!(
        fs::read(t.blob_path(&rc["hash"])).unwrap(),
        b"export EDITOR=vi\n"
    );
}

// ---------------------------------------------------------------- 6. hostile Argon2

#[test]
fn hostile_argon2_parameters_are_refused_before_deriving() {
    let t = TestEnv::init();
    setup(&t);
    let good = t.manifest();
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    for (from, to) in [
        // 2^40 KiB (1 EiB).
        ("argon2_memory: 8\n", "argon2_memory: 1099511627776\n"),
        // 64 GiB: fits Argon2's u32, so only sgard's own bound stops it.
        ("argon2_memory: 8\n", "argon2_memory: 67108864\n"),
        // 2 GiB: just over sgard's 1 GiB bound.
        ("argon2_memory: 8\n", "argon2_memory: 2097152\n"),
        ("argon2_memory: 8\n", "argon2_memory: 0\n"),
        ("argon2_time: 1\n", "argon2_time: 4294967296\n"),
        ("argon2_time: 1\n", "argon2_time: 65\n"),
        ("argon2_time: 1\n", "argon2_time: 33\n"),
        ("argon2_threads: 1\n", "argon2_threads: 0\n"),
        ("argon2_threads: 1\n", "argon2_threads: 65\n"),
    ] {
        assert!(good.contains(from), "{good}");
        let hostile = good.replacen(from, to, 1);
        fs::write(t.repo().join("manifest.yaml"), &hostile).unwrap();
        let start = Instant::now();
        let r = pw(&t, &["restore", "-f"]);
        let took = start.elapsed();
        r.code(1).stderr_has("out of bounds");
        assert!(
            took < Duration::from_secs(10),
            "{to:?}: took {took:?}; derived anyway?"
        );
        assert!(!t.path(SECRET_REL).exists());
        assert_eq!(t.manifest(), hostile);
        // Encrypting a new file fails the same way.
        t.write(".netrc", "machine x password y\n");
        let r = pw(&t, &["add", "--encrypt", "~/.netrc"]);
        r.code(1).stderr_has("out of bounds");
        assert_eq!(t.manifest(), hostile);
    }
    fs::write(t.repo().join("manifest.yaml"), &good).unwrap();
    pw(&t, &["restore", "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), PLAIN);
}

// ---------------------------------------------------------------- 7. change-passphrase

#[test]
fn change_passphrase() {
    let t = TestEnv::init();
    setup(&t);
    let new_pw = "a brand new passphrase";

    // A wrong current passphrase fails first and changes nothing.
    let before = t.manifest();
    run(
        &t,
        &["encrypt", "change-passphrase"],
        &[
            ("SGARD_PASSPHRASE", "wrong"),
            ("SGARD_NEW_PASSPHRASE", new_pw),
        ],
    )
    .code(1)
    .stderr_has("wrong passphrase");
    assert_eq!(t.manifest(), before);

    let old_slot = slot(&t, "passphrase");
    run(
        &t,
        &["encrypt", "change-passphrase"],
        &[("SGARD_PASSPHRASE", PW), ("SGARD_NEW_PASSPHRASE", new_pw)],
    )
    .ok()
    .stdout_has("Passphrase changed.");
    let new_slot = slot(&t, "passphrase");
    assert_ne!(new_slot["salt"], old_slot["salt"], "a fresh salt");
    assert_ne!(new_slot["wrapped_dek"], old_slot["wrapped_dek"]);
    // Same data key: the blobs did not change.
    assert_eq!(entry_in(&t.manifest(), SECRET), entry_in(&before, SECRET));
    assert_eq!(unwrap_dek(&t.manifest(), new_pw), unwrap_dek(&before, PW));

    fs::remove_file(t.path(SECRET_REL)).unwrap();
    pw(&t, &["restore", "-f"])
        .code(1)
        .stderr_has("wrong passphrase");
    assert!(!t.path(SECRET_REL).exists());
    run(&t, &["restore", "-f"], &[("SGARD_PASSPHRASE", new_pw)]).ok();
    assert_eq!(t.read(SECRET_REL), PLAIN);

    // SGARD_NEW_PASSPHRASE_FILE works too.
    let f = t.outside().join("new.txt");
    fs::write(&f, format!("{PW}\n")).unwrap();
    run(
        &t,
        &["encrypt", "change-passphrase"],
        &[
            ("SGARD_PASSPHRASE", new_pw),
            ("SGARD_NEW_PASSPHRASE_FILE", f.to_str().unwrap()),
        ],
    )
    .ok();
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    pw(&t, &["restore", "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), PLAIN);
}

// ---------------------------------------------------------------- 8. rotate-dek

#[test]
fn rotate_dek_reencrypts_and_keeps_old_snapshots_readable() {
    let t = TestEnv::init();
    setup(&t);
    let r = pw(&t, &["checkpoint", "-m", "before rotation"]);
    r.ok();
    let s1 = snapshot_id(&r);
    let before = t.manifest();
    let old = entry_in(&before, SECRET).unwrap();
    let rc = entry_in(&before, "~/.bashrc").unwrap();
    let old_dek = unwrap_dek(&before, PW);

    let r = pw(&t, &["encrypt", "rotate-dek"]);
    r.ok()
        .stdout_has("Data key rotated: 1 file re-encrypted, 1 slot re-wrapped.");
    let after = t.manifest();
    let new = entry_in(&after, SECRET).unwrap();
    assert_ne!(new["hash"], old["hash"]);
    assert_ne!(new["plaintext_mac"], old["plaintext_mac"]);
    assert_encrypted_entry(&t, SECRET, PLAIN);
    assert_eq!(
        entry_in(&after, "~/.bashrc").unwrap(),
        rc,
        "plain entry touched"
    );
    let new_dek = unwrap_dek(&after, PW);
    assert_ne!(new_dek, old_dek, "a new data key");
    let blob = fs::read(t.blob_path(&new["hash"])).unwrap();
    assert_eq!(open(&new_dek, &blob).unwrap(), PLAIN);
    assert!(open(&old_dek, &blob).is_none());
    assert_not_in_repo(&t, b"wJalrXUtnFEMI/K7MDENG");

    // A new version after the rotation, then the old snapshot.
    let v2: &[u8] = b"[default]\naws_secret_access_key = AfterRotation99\n";
    t.write(SECRET_REL, v2);
    let r = pw(&t, &["checkpoint", "-m", "after rotation"]);
    r.ok();
    has_line(&r, &line("updated", SECRET));
    pw(&t, &["restore", "--at", "@~1", "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), PLAIN, "snapshot before the rotation");
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    pw(&t, &["restore", "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), v2);
    assert_eq!(mode_of(&t.path(SECRET_REL)), 0o600);

    // A FIDO2 slot cannot be re-wrapped: rotate-dek asks first.
    inject_fido2(&t);
    let with_fido = t.manifest();
    let r = run_stdin(
        &t,
        &["encrypt", "rotate-dek"],
        &[("SGARD_PASSPHRASE", PW)],
        "n\n",
    );
    r.code(1).stdout_has("fido2/key");
    assert_eq!(
        t.manifest(),
        with_fido,
        "declined rotation changed the manifest"
    );
    let r = run_stdin(
        &t,
        &["encrypt", "rotate-dek"],
        &[("SGARD_PASSPHRASE", PW)],
        "y\n",
    );
    r.ok().stdout_has("fido2/key");
    let m = t.manifest();
    assert!(slot_in(&m, "fido2/key").is_none(), "{m}");
    assert!(!m.contains("fido2"), "{m}");
    assert_ne!(entry_in(&m, SECRET), entry_in(&with_fido, SECRET));
    // Two rotations later, the first snapshot still decrypts.
    pw(&t, &["restore", "--at", &s1, "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), PLAIN);
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    pw(&t, &["restore", "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), v2);
    t.sgard(["verify"]).ok();
}

/// What a manifest write by the Go sgard does: the same manifest without
/// `encryption.retired_deks` (it does not know the field).
fn drop_retired_deks(t: &TestEnv) {
    let m = t.manifest();
    assert!(m.contains("retired_deks:"), "nothing to drop: {m}");
    let mut out = String::new();
    let mut skipping: Option<usize> = None;
    for l in m.lines() {
        let indent = l.len() - l.trim_start().len();
        if let Some(i) = skipping {
            if indent > i || (indent == i && l.trim_start().starts_with("- ")) {
                continue;
            }
            skipping = None;
        }
        if l.trim_start().starts_with("retired_deks:") {
            skipping = Some(indent);
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    fs::write(t.repo().join("manifest.yaml"), out).unwrap();
}

/// Snapshots taken before `rotate-dek` still decrypt after the Go sgard
/// rewrote the manifest without `retired_deks`: the keys are also kept in
/// `<repo>/retired-keys`, through any number of rotations.
#[test]
fn retired_keys_survive_a_go_manifest_write() {
    let t = TestEnv::init();
    setup(&t);
    let r = pw(&t, &["checkpoint", "-m", "v1"]);
    r.ok();
    let s1 = snapshot_id(&r);
    pw(&t, &["encrypt", "rotate-dek"]).ok();
    let v2: &[u8] = b"[default]\naws_secret_access_key = SecondVersion22\n";
    t.write(SECRET_REL, v2);
    let r = pw(&t, &["checkpoint", "-m", "v2"]);
    r.ok();
    let s2 = snapshot_id(&r);
    assert!(t.repo().join("retired-keys").is_file());

    // The Go tool writes the manifest: its retired keys are gone.
    drop_retired_deks(&t);
    pw(&t, &["restore", "--at", &s1, "-f"]).ok();
    assert_eq!(
        t.read(SECRET_REL),
        PLAIN,
        "the snapshot before the rotation"
    );

    // A rotation after that still carries the whole chain, and the Go tool
    // dropping it again loses nothing.
    pw(&t, &["restore", "-f"]).ok();
    pw(&t, &["encrypt", "rotate-dek"]).ok();
    drop_retired_deks(&t);
    for (id, want) in [(&s1, PLAIN), (&s2, v2)] {
        pw(&t, &["restore", "--at", id, "-f"]).ok();
        assert_eq!(t.read(SECRET_REL), want, "snapshot {id}");
    }

    // Without the file (a repository copied without it) the old snapshot
    // cannot decrypt, and the error says why and where the keys are looked for.
    fs::remove_file(t.repo().join("retired-keys")).unwrap();
    pw(&t, &["restore", "--at", &s1, "-f"])
        .code(1)
        .stderr_has("retired key(s)")
        .stderr_has("retired-keys");
    assert_eq!(t.read(SECRET_REL), v2, "a failed restore changed the file");
}

/// Each rotation adds one line to the chain and never re-seals the older
/// ones: after n rotations the file and the manifest hold n keys, every line
/// written once stays byte for byte, and the first snapshot still decrypts
/// from the file alone.
#[test]
fn rotations_grow_the_chain_by_one_line_each() {
    let t = TestEnv::init();
    setup(&t);
    let r = pw(&t, &["checkpoint", "-m", "v1"]);
    r.ok();
    let s1 = snapshot_id(&r);
    let keys = |t: &TestEnv| -> Vec<String> {
        fs::read_to_string(t.repo().join("retired-keys"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    };
    let mut before: Vec<String> = Vec::new();
    for n in 1..=8 {
        pw(&t, &["encrypt", "rotate-dek"]).ok();
        let now = keys(&t);
        assert_eq!(now.len(), n, "after {n} rotation(s): {now:?}");
        assert_eq!(now[..n - 1], before[..], "an older line changed");
        before = now;
    }
    let in_manifest = t
        .manifest()
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("retired_deks:"))
        .skip(1)
        .take_while(|l| l.trim_start().starts_with("- "))
        .count();
    assert_eq!(in_manifest, 8, "{}", t.manifest());
    drop_retired_deks(&t);
    t.write(SECRET_REL, b"changed\n");
    pw(&t, &["restore", "--at", &s1, "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), PLAIN);
}

/// A `retired-keys` file with lines sgard did not write (bytes that are not
/// UTF-8, a stray word) keeps them through a rotation and still opens what it
/// can; a folder in its place makes no command fail, and the manifest's keys
/// still open the old snapshots.
#[test]
fn a_damaged_retired_keys_file_loses_nothing() {
    let t = TestEnv::init();
    setup(&t);
    let r = pw(&t, &["checkpoint", "-m", "v1"]);
    r.ok();
    let s1 = snapshot_id(&r);
    pw(&t, &["encrypt", "rotate-dek"]).ok();
    let file = t.repo().join("retired-keys");
    let mut bytes = fs::read(&file).unwrap();
    let garbage: &[u8] = b"\xff\xfe not a key \x01\nnot-base64!\n";
    bytes.extend_from_slice(garbage);
    fs::write(&file, &bytes).unwrap();

    pw(&t, &["encrypt", "rotate-dek"]).ok();
    let after = fs::read(&file).unwrap();
    assert!(
        after.starts_with(&bytes),
        "the file lost bytes it held: {:?}",
        String::from_utf8_lossy(&after)
    );
    drop_retired_deks(&t);
    pw(&t, &["restore", "--at", &s1, "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), PLAIN);

    // A folder where the file should be: commands work, and say so.
    pw(&t, &["restore", "-f"]).ok();
    let r = pw(&t, &["checkpoint", "-m", "again"]);
    r.ok();
    let s2 = snapshot_id(&r);
    fs::remove_file(&file).unwrap();
    fs::create_dir(&file).unwrap();
    pw(&t, &["encrypt", "rotate-dek"])
        .ok()
        .stderr_has("retired-keys");
    t.sgard(["status"]).ok();
    pw(&t, &["restore", "--at", &s2, "-f"]).ok();
    assert!(file.is_dir(), "sgard replaced a folder it did not make");
}

// ---------------------------------------------------------------- 9. mirror up

#[test]
fn mirror_up_keeps_encrypted_entries_encrypted() {
    let t = TestEnv::init();
    pw(&t, &["encrypt", "init"]).ok();
    t.write(
        ".ssh/id_ed25519",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nfirstkeymaterial\n",
    );
    t.chmod(".ssh/id_ed25519", 0o600);
    t.write(".ssh/config", "Host *\n  ServerAliveInterval 60\n");
    pw(&t, &["add", "--encrypt", "~/.ssh/id_ed25519"]).ok();
    t.sgard(["add", "~/.ssh/config"]).ok();
    let old = entry(&t, "~/.ssh/id_ed25519");

    let key2: &[u8] = b"-----BEGIN OPENSSH PRIVATE KEY-----\nSecondKeyMaterialXYZ\n";
    t.write(".ssh/id_ed25519", key2);
    t.write(".ssh/known_hosts", "host ssh-ed25519 AAAA\n");
    let r = pw(&t, &["mirror", "up", "~/.ssh"]);
    r.ok();
    has_line(&r, &line("updated", "~/.ssh/id_ed25519"));
    has_line(&r, &line("added", "~/.ssh/known_hosts"));
    let hash = assert_encrypted_entry(&t, "~/.ssh/id_ed25519", key2);
    assert_ne!(hash, old["hash"]);
    assert_not_in_repo(&t, b"SecondKeyMaterialXYZ");
    assert_not_in_repo(&t, b"firstkeymaterial");
    assert!(!entry(&t, "~/.ssh/config").contains_key("encrypted"));
    assert!(!entry(&t, "~/.ssh/known_hosts").contains_key("encrypted"));

    fs::remove_file(t.path(".ssh/id_ed25519")).unwrap();
    pw(&t, &["restore", "-f"]).ok();
    assert_eq!(t.read(".ssh/id_ed25519"), key2);
}

// ---------------------------------------------------------------- 10. --no-encrypt

#[test]
fn add_no_encrypt_and_add_keeps_encryption() {
    let t = TestEnv::init();
    setup(&t);

    t.sgard(["add", "--no-encrypt", SECRET]).ok();
    let e = entry(&t, SECRET);
    assert!(!e.contains_key("encrypted"), "{}", t.manifest());
    assert!(!e.contains_key("plaintext_mac"), "{}", t.manifest());
    assert!(!e.contains_key("plaintext_hash"), "{}", t.manifest());
    assert_eq!(e["hash"], sha(PLAIN));
    assert_eq!(fs::read(t.blob_path(&e["hash"])).unwrap(), PLAIN);

    pw(&t, &["add", "--encrypt", SECRET]).ok();
    assert_encrypted_entry(&t, SECRET, PLAIN);

    // `add` with no flag, unchanged: still encrypted, no key needed.
    let marker = t.outside().join("asked");
    let cmd = asking_command(&marker);
    let hash = entry(&t, SECRET)["hash"].clone();
    run(&t, &["add", SECRET], &[("SGARD_PASSPHRASE_COMMAND", &cmd)]).ok();
    assert_eq!(entry(&t, SECRET)["hash"], hash);
    assert!(!marker.exists());

    // `add` with no flag, changed: re-encrypted, never plaintext.
    let v2: &[u8] = b"[default]\naws_secret_access_key = ReAddedSecret55\n";
    t.write(SECRET_REL, v2);
    pw(&t, &["add", SECRET]).ok();
    let h2 = assert_encrypted_entry(&t, SECRET, v2);
    assert_ne!(h2, hash);
    assert_not_in_repo(&t, b"ReAddedSecret55");
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    pw(&t, &["restore", "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), v2);
}

// ---------------------------------------------------------------- 11. slots

#[test]
fn list_and_remove_slots() {
    let t = TestEnv::init();
    t.sgard(["encrypt", "list-slots"])
        .ok()
        .stdout_has("No encryption configured (`sgard encrypt init` sets it up).");
    setup(&t);
    let r = t.sgard(["encrypt", "list-slots"]);
    r.ok();
    assert_eq!(
        r.stdout.lines().next(),
        Some(format!("{:<30} KIND", "SLOT").as_str())
    );
    assert!(
        r.stdout
            .lines()
            .any(|l| l.split_whitespace().eq(["passphrase", "passphrase"])),
        "{r:#?}"
    );

    let before = t.manifest();
    t.sgard(["encrypt", "remove-slot", "passphrase"])
        .code(1)
        .stderr_has("only key slot");
    assert_eq!(t.manifest(), before);
    t.sgard(["encrypt", "remove-slot", "nope"])
        .code(1)
        .stderr_has("nope");
    assert_eq!(t.manifest(), before);

    // With a second slot, one can go.
    inject_fido2(&t);
    let r = t.sgard(["encrypt", "list-slots"]);
    assert!(
        r.stdout
            .lines()
            .any(|l| l.split_whitespace().eq(["fido2/key", "fido2"])),
        "{r:#?}"
    );
    t.sgard(["encrypt", "remove-slot", "fido2/key"]).ok();
    assert!(slot_in(&t.manifest(), "fido2/key").is_none());
    assert_eq!(
        slot(&t, "passphrase"),
        slot_in(&before, "passphrase").unwrap()
    );
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    pw(&t, &["restore", "-f"]).ok();
    assert_eq!(t.read(SECRET_REL), PLAIN);
}

// ---------------------------------------------------------------- 12. terminal

/// Runs `sgard <args>` under a pseudo-terminal, typing `input`.
fn under_pty(t: &TestEnv, args: &str, input: &str) -> Run {
    let mut c = t.command(std::iter::empty::<&OsStr>());
    c.env("SGARD_TEST_ARGON2", "1");
    pty_run(&c, args, input)
}

#[test]
fn terminal_prompt_asks_twice_for_a_new_passphrase() {
    if !on_path("script") {
        eprintln!("note: `script` (util-linux) is not installed; skipping the pty test");
        return;
    }
    let t = TestEnv::init();
    let before = t.manifest();
    // Three mismatches (an empty one among them) and it gives up.
    let r = under_pty(
        &t,
        "encrypt init",
        "first one\nsecond one\n\nthird\nfourth\n",
    );
    assert_ne!(r.code, 0, "{r:#?}");
    assert_eq!(r.stdout.matches("try again").count(), 2, "{r:#?}");
    assert!(
        r.stdout.contains("the passphrase is empty; try again"),
        "{r:#?}"
    );
    assert!(
        r.stdout
            .contains("the two passphrases differ; nothing was changed"),
        "{r:#?}"
    );
    assert_eq!(t.manifest(), before);
    assert!(!t.manifest().contains("encryption"));

    // A mismatch is asked again, and the second pair counts.
    let r = under_pty(
        &t,
        "encrypt init",
        "typed once\ntyped 0nce\ntyped twice\ntyped twice\n",
    );
    r.ok()
        .stdout_has("the two passphrases differ; try again")
        .stdout_has("Encryption initialized with passphrase slot.");
    assert!(t.manifest().contains("encryption:"));
    // What was typed is the passphrase.
    assert_eq!(unwrap_dek(&t.manifest(), "typed twice").len(), 32);
    t.write(SECRET_REL, PLAIN);
    run(
        &t,
        &["add", "--encrypt", SECRET],
        &[("SGARD_PASSPHRASE", "typed twice")],
    )
    .ok();
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    pw(&t, &["restore", "-f"])
        .code(1)
        .stderr_has("wrong passphrase");
    // And the terminal prompt answers a restore too; a mistyped
    // passphrase is asked for again.
    let r = under_pty(&t, "restore -f", "typed tw1ce\ntyped twice\n");
    r.ok()
        .stdout_has("wrong passphrase")
        .stdout_has("try again (2 tries left)");
    assert_eq!(t.read(SECRET_REL), PLAIN);
    // Three wrong ones and it stops, writing nothing.
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    let r = under_pty(&t, "restore -f", "a\nb\nc\n");
    assert_eq!(r.code, 1, "{r:#?}");
    assert_eq!(r.stdout.matches("try again").count(), 2, "{r:#?}");
    assert!(!t.path(SECRET_REL).exists());
}

#[test]
fn no_passphrase_source_and_no_terminal_is_a_clear_error() {
    // sgard must not find a controlling terminal: detach it with setsid
    // when the tests themselves run on one.
    let detach: &[&str] = if on_path("setsid") {
        &["setsid", "-w"]
    } else if fs::File::open("/dev/tty").is_err() {
        &[]
    } else {
        eprintln!("note: on a terminal without `setsid`; skipping");
        return;
    };
    let no_tty = |t: &TestEnv, args: &[&str]| -> Run {
        let mut c = t.command(args);
        c.env("SGARD_TEST_ARGON2", "1");
        let mut c = if detach.is_empty() {
            c
        } else {
            wrapped(&c, detach)
        };
        c.stdin(Stdio::null()).output().unwrap().into()
    };

    let t = TestEnv::init();
    let before = t.manifest();
    no_tty(&t, &["encrypt", "init"])
        .code(1)
        .stderr_has("SGARD_PASSPHRASE");
    assert_eq!(t.manifest(), before);

    setup(&t);
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    no_tty(&t, &["restore", "-f"])
        .code(1)
        .stderr_has("SGARD_PASSPHRASE");
    assert!(!t.path(SECRET_REL).exists());
    t.write(".netrc", "machine x password y\n");
    let before = t.manifest();
    no_tty(&t, &["add", "--encrypt", "~/.netrc"])
        .code(1)
        .stderr_has("SGARD_PASSPHRASE");
    assert_eq!(t.manifest(), before);
}

// ---------------------------------------------------------------- 13. diff

#[test]
fn diff_of_an_encrypted_file_is_a_real_diff() {
    let t = TestEnv::init();
    setup(&t);
    pw(&t, &["diff", SECRET]).ok().stdout_has("No changes.");
    let edited = String::from_utf8(PLAIN.to_vec())
        .unwrap()
        .replace("AKIAIOSFODNN7EXAMPLE", "AKIAROTATEDKEY000001");
    t.write(SECRET_REL, &edited);
    for args in [&["diff", SECRET][..], &["diff"]] {
        let r = pw(&t, args);
        r.ok()
            .stdout_has(&format!("--- {SECRET} (stored)"))
            .stdout_has(&format!("+++ {SECRET} (current)"))
            .stdout_has("@@")
            .stdout_has("\n-aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n")
            .stdout_has("\n+aws_access_key_id = AKIAROTATEDKEY000001\n")
            .stdout_has(" [default]\n");
    }
    pw(&t, &["diff", "--exit-code", SECRET]).code(1);
    let r = pw(&t, &["diff", "--stat", SECRET]);
    r.ok()
        .stdout_has("1 file changed, 1 insertion(+), 1 deletion(-)");
}

#[test]
fn a_wrong_passphrase_records_no_history() {
    let t = TestEnv::init();
    setup(&t);
    fs::remove_file(t.path(SECRET_REL)).unwrap();
    let before = fs::read_to_string(t.repo().join("history.yaml")).unwrap_or_default();
    let r = t
        .command(["restore", "-f"])
        .env("SGARD_TEST_ARGON2", "1")
        .env("SGARD_PASSPHRASE", "not it")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(1), "{r:?}");
    assert!(!t.path(SECRET_REL).exists());
    let after = fs::read_to_string(t.repo().join("history.yaml")).unwrap_or_default();
    assert_eq!(
        after, before,
        "a restore that wrote nothing recorded snapshots"
    );
}

#[test]
fn diff_of_an_unchanged_secret_needs_no_passphrase() {
    let t = TestEnv::init();
    setup(&t);
    let r = t
        .command(["diff", SECRET])
        .env("SGARD_PASSPHRASE_COMMAND", "exit 1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "{r:?}");
    assert_eq!(String::from_utf8_lossy(&r.stdout), "No changes.\n");
}
