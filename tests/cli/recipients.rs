//! Machine keys as recipients: the data key wrapped to each machine's SSH
//! or age key, so machines share encrypted files with no passphrase
//! (`encrypt init --recipient`, `add-recipient`, `list-recipients`,
//! `remove-recipient`, `keygen`, `--identity`), checked against the real
//! `ssh-keygen` and, where installed, the `age` command.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine;

use crate::common::*;
use crate::machines::Machine;

const SECRET: &[u8] = b"machine login example.com password hunter2-recipients\n";

/// Makes `~/.ssh/<name>` (type `kind`, passphrase `pass`) in `m`'s home;
/// `None` without ssh-keygen.
fn ssh_key(m: &Machine, name: &str, kind: &str, pass: &str) -> Option<PathBuf> {
    let dir = m.path(".ssh");
    fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    let mut c = Command::new("ssh-keygen");
    c.args(["-q", "-t", kind, "-N", pass, "-C"])
        .arg(format!("{name}@{}", m.t.home.display()))
        .arg("-f")
        .arg(&p)
        .stdin(Stdio::null());
    if kind == "rsa" {
        c.args(["-b", "2048"]);
    }
    match c.output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("ssh-keygen: {e}"),
        Ok(o) => {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            Some(p)
        }
    }
}

fn pub_of(key: &Path) -> PathBuf {
    PathBuf::from(format!("{}.pub", key.display()))
}

/// Three machines on one repository folder, each with its own ed25519
/// key; `None` without ssh-keygen.
fn three() -> Option<(tempfile::TempDir, [Machine; 3])> {
    let shared = tempfile::tempdir().unwrap();
    let repo = shared.path().join("repo");
    let ms = [
        Machine::new("desk", &repo),
        Machine::new("laptop", &repo),
        Machine::new("stranger", &repo),
    ];
    for m in &ms {
        ssh_key(m, "id_ed25519", "ed25519", "")?;
    }
    Some((shared, ms))
}

macro_rules! or_skip {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => {
                eprintln!("skipping: ssh-keygen is not installed");
                return;
            }
        }
    };
}

/// `desk` makes the repository with encryption opened by its own
/// `~/.ssh/id_ed25519` alone; returns that key's `.pub` file.
fn own_key_repo(desk: &Machine) -> PathBuf {
    desk.sg(&["init"]).ok();
    let p = pub_of(&desk.path(".ssh/id_ed25519"));
    desk.sg(&["encrypt", "init", "--recipient", p.to_str().unwrap()])
        .ok();
    p
}

/// `laptop`'s key becomes a recipient labelled `laptop`, the desk stores
/// [`SECRET`] encrypted, and the laptop restores it.
fn share_with_laptop(desk: &Machine, laptop: &Machine) {
    let p = pub_of(&laptop.path(".ssh/id_ed25519"));
    desk.sg(&[
        "encrypt",
        "add-recipient",
        p.to_str().unwrap(),
        "--label",
        "laptop",
    ])
    .ok();
    desk.write(".netrc", SECRET);
    desk.sg(&["add", "--encrypt", ".netrc"]).ok();
    laptop.sg(&["restore"]).ok();
}

/// sgard in `m` with the repository passphrase `pass` (tiny Argon2
/// parameters for new slots), stdin closed.
fn with_pass(m: &Machine, args: &[&str], pass: &str) -> Run {
    m.command(args)
        .env("SGARD_PASSPHRASE", pass)
        .env("SGARD_TEST_ARGON2", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into()
}

/// Every file under `dir`, read whole.
fn all_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    crate::sync::files_under(dir)
        .into_iter()
        .map(|rel| {
            let p = dir.join(rel);
            let b = fs::read(&p).unwrap();
            (p, b)
        })
        .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The Done-when story: two homes with their own SSH keys share encrypted
/// files through one folder with no passphrase anywhere; each restores
/// what the other stored; a third key cannot, and nothing of the secret
/// reaches its disk or the repository.
#[test]
fn two_homes_share_secrets_by_their_own_ssh_keys_and_a_third_cannot() {
    let (_d, [desk, laptop, stranger]) = or_skip!(three());
    desk.sg(&["init"]).ok();
    let desk_pub = pub_of(&desk.path(".ssh/id_ed25519"));
    desk.sg(&["encrypt", "init", "--recipient", desk_pub.to_str().unwrap()])
        .ok()
        .stdout_has("added      age/id_ed25519@")
        .stdout_has("Encryption initialized with 1 recipient (no passphrase).");
    // No passphrase slot at all.
    let m = fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap();
    assert!(!m.contains("type: passphrase"), "{m}");
    assert!(m.contains("type: age"), "{m}");

    desk.write(".netrc", SECRET);
    desk.sg(&["add", "--encrypt", ".netrc"]).ok();
    // The laptop's public key, given as the line itself.
    let laptop_line = fs::read_to_string(pub_of(&laptop.path(".ssh/id_ed25519"))).unwrap();
    desk.sg(&["encrypt", "add-recipient", laptop_line.trim()])
        .ok()
        .stdout_has("Added 1 recipient");
    // Adding it again changes nothing.
    let before = fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap();
    desk.sg(&["encrypt", "add-recipient", laptop_line.trim()])
        .ok()
        .stdout_has("a recipient already");
    assert_eq!(
        before,
        fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap()
    );
    let list = desk.sg(&["encrypt", "list-recipients"]);
    list.ok().stdout_has("ssh-ed25519");
    for m in [&desk, &laptop] {
        let fp = fingerprint_of(&pub_of(&m.path(".ssh/id_ed25519")));
        list.stdout_has(&fp);
    }

    // The laptop restores with its own key: no passphrase exists.
    laptop.sg(&["restore"]).ok().stdout_has("~/.netrc");
    assert_eq!(fs::read(laptop.path(".netrc")).unwrap(), SECRET);
    // …and stores a change the desk can read with its key.
    laptop.write(".netrc", b"changed on the laptop\n");
    laptop.sg(&["checkpoint"]).ok();
    desk.sg(&["restore", "--force"]).ok();
    assert_eq!(desk.read(".netrc"), "changed on the laptop\n");
    // Status asks nothing and needs no key.
    laptop
        .sg(&["status"])
        .ok()
        .stdout_has("ok         ~/.netrc");

    // doctor names the key that opens, and the machine that has none.
    laptop
        .sg(&["doctor"])
        .stdout_has("ok      keys")
        .stdout_has(".ssh/id_ed25519 opens the data key (recipient age/id_ed25519@");
    stranger
        .sg(&["doctor"])
        .code(1)
        .stdout_has("error   keys")
        .stdout_has("encrypt add-recipient");

    // A third key cannot: a clear error naming the slots and what was
    // tried, nothing written.
    let r = stranger.sg(&["restore"]);
    r.code(1)
        .stderr_has("no key of this machine opens the data key")
        .stderr_has("not a recipient of this repository")
        .stderr_has("age/id_ed25519@");
    assert!(!stranger.path(".netrc").exists());
    // Neither plaintext is anywhere in the repository.
    for (p, b) in all_bytes(&desk.repo) {
        assert!(
            !contains(&b, b"hunter2"),
            "{} holds the secret",
            p.display()
        );
        assert!(!contains(&b, b"changed on the laptop"), "{}", p.display());
    }
}

fn fingerprint_of(pubfile: &Path) -> String {
    let o = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(pubfile)
        .output()
        .unwrap();
    assert!(o.status.success());
    String::from_utf8(o.stdout)
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_owned()
}

/// RSA keys, age identities made by `encrypt keygen`, and keys kept
/// elsewhere named by `--identity` / `SGARD_IDENTITY`.
#[test]
fn rsa_keys_age_identities_and_named_identity_files_unlock() {
    let (_d, [desk, laptop, other]) = or_skip!(three());
    own_key_repo(&desk);
    desk.write(".netrc", SECRET);
    desk.sg(&["add", "--encrypt", ".netrc"]).ok();

    // The laptop: an RSA key only.
    fs::remove_file(laptop.path(".ssh/id_ed25519")).unwrap();
    let rsa = or_skip!(ssh_key(&laptop, "id_rsa", "rsa", ""));
    desk.sg(&["encrypt", "add-recipient", pub_of(&rsa).to_str().unwrap()])
        .ok()
        .stdout_has("ssh-rsa");
    laptop.sg(&["restore"]).ok();
    assert_eq!(fs::read(laptop.path(".netrc")).unwrap(), SECRET);

    // The other machine: an age identity sgard made, in its config folder.
    fs::remove_file(other.path(".ssh/id_ed25519")).unwrap();
    let r = other.sg(&["encrypt", "keygen"]);
    r.ok()
        .stdout_has("Its recipient (the public key to add): age1");
    let age_pub = r
        .stdout
        .split_whitespace()
        .find(|w| w.starts_with("age1"))
        .unwrap()
        .to_owned();
    let keys = other.path(".config/sgard/keys.txt");
    assert_eq!(mode_of(&keys) & 0o777, 0o600);
    assert_eq!(mode_of(keys.parent().unwrap()) & 0o777, 0o700);
    // A second keygen never replaces the key.
    let before = fs::read(&keys).unwrap();
    other
        .sg(&["encrypt", "keygen"])
        .code(1)
        .stderr_has("exists already");
    assert_eq!(fs::read(&keys).unwrap(), before);
    desk.sg(&["encrypt", "add-recipient", &age_pub, "--label", "other box"])
        .ok()
        .stdout_has("age/other-box x25519");
    other.sg(&["restore"]).ok();
    assert_eq!(fs::read(other.path(".netrc")).unwrap(), SECRET);

    // Moved out of the default places, the key is found only when named.
    let elsewhere = other.t.outside().join("my-age-key.txt");
    fs::rename(&keys, &elsewhere).unwrap();
    fs::remove_file(other.path(".netrc")).unwrap();
    other
        .sg(&["restore"])
        .code(1)
        .stderr_has("no key of this machine");
    other
        .sg(&["restore", "--identity", elsewhere.to_str().unwrap()])
        .ok();
    assert_eq!(fs::read(other.path(".netrc")).unwrap(), SECRET);
    fs::remove_file(other.path(".netrc")).unwrap();
    other
        .command(&["restore"])
        .env(
            "SGARD_IDENTITY",
            format!("/nonexistent:{}", elsewhere.display()),
        )
        .stdin(Stdio::null())
        .output()
        .map(Run::from)
        .unwrap()
        .code(1)
        .stderr_has("/nonexistent");
    let r: Run = other
        .command(&["restore"])
        .env("SGARD_IDENTITY", elsewhere.as_os_str())
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into();
    r.ok();
    assert_eq!(fs::read(other.path(".netrc")).unwrap(), SECRET);
    // A named file that is not a key is an error naming it (when a key is
    // needed: an up-to-date home needs none).
    let junk = other.write("junk.txt", "not a key\n");
    fs::remove_file(other.path(".netrc")).unwrap();
    other
        .sg(&["restore", "--identity", junk.to_str().unwrap()])
        .code(1)
        .stderr_has("junk.txt");

    // A private key is refused as a recipient, naming the file.
    desk.sg(&[
        "encrypt",
        "add-recipient",
        desk.path(".ssh/id_ed25519").to_str().unwrap(),
    ])
    .code(1)
    .stderr_has("holds a private key");
    desk.sg(&["encrypt", "add-recipient", "ssh-dss AAAAB3NzaC1kc3MAAACBAP"])
        .code(1)
        .stderr_has("ssh-dss");
}

/// An encrypted SSH key is asked for its passphrase (on the terminal, never
/// from SGARD_PASSPHRASE) only when it is a recipient; without a terminal
/// the passphrase slot is used.
#[test]
fn an_encrypted_ssh_key_is_asked_for_only_when_it_is_a_recipient() {
    if !on_path("script") {
        eprintln!("skipping: util-linux script is not installed");
        return;
    }
    let shared = tempfile::tempdir().unwrap();
    let repo = shared.path().join("repo");
    let desk = Machine::new("desk", &repo);
    let key = or_skip!(ssh_key(&desk, "id_ed25519", "ed25519", "key pass phrase"));
    let pw = [
        ("SGARD_PASSPHRASE", "repo pass"),
        ("SGARD_TEST_ARGON2", "1"),
    ];
    let with = |args: &[&str]| -> Run {
        let mut c = desk.command(args);
        c.envs(pw).stdin(Stdio::null());
        c.output().unwrap().into()
    };
    with(&["init"]).ok();
    // Passphrase only: the encrypted key is never asked for.
    with(&["encrypt", "init"]).ok();
    desk.write(".netrc", SECRET);
    with(&["add", "--encrypt", ".netrc"]).ok();
    fs::remove_file(desk.path(".netrc")).unwrap();
    let mut c = desk.command(&[]);
    c.envs(pw);
    let r = pty_run(
        &c,
        &format!("--repo '{}' restore", repo.display()),
        "wrong\n",
    );
    assert!(!r.stdout.contains("Passphrase for"), "{r:#?}");
    assert_eq!(fs::read(desk.path(".netrc")).unwrap(), SECRET);
    // With a recipient slot for another machine's key, this key is still
    // never asked for: it is not a recipient.
    let other = Machine::new("other", &repo);
    let k = other.sg(&["encrypt", "keygen"]);
    let age_pub = k
        .ok()
        .stdout
        .split_whitespace()
        .find(|w| w.starts_with("age1"))
        .unwrap()
        .to_owned();
    with(&["encrypt", "add-recipient", &age_pub]).ok();
    fs::remove_file(desk.path(".netrc")).unwrap();
    let r = pty_run(
        &c,
        &format!("--repo '{}' restore", repo.display()),
        "wrong\n",
    );
    assert!(!r.stdout.contains("Passphrase for"), "{r:#?}");
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(fs::read(desk.path(".netrc")).unwrap(), SECRET);

    // Now a recipient: its passphrase is asked on the terminal, and opens.
    with(&["encrypt", "add-recipient", pub_of(&key).to_str().unwrap()]).ok();
    fs::remove_file(desk.path(".netrc")).unwrap();
    let mut c = desk.command(&[]);
    c.env("SGARD_TEST_ARGON2", "1");
    let r = pty_run(
        &c,
        &format!("--repo '{}' restore", repo.display()),
        "key pass phrase\n",
    );
    assert!(r.stdout.contains("Passphrase for"), "{r:#?}");
    assert!(r.stdout.contains(".ssh/id_ed25519"), "{r:#?}");
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(fs::read(desk.path(".netrc")).unwrap(), SECRET);
    // `edit` opens the repository twice (before and after the editor): the
    // key's passphrase is asked once.
    let editor = desk.t.outside().join("ed.sh");
    fs::write(&editor, "#!/bin/sh\necho edited >> \"$1\"\n").unwrap();
    fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut c = desk.command(&[]);
    c.env("SGARD_TEST_ARGON2", "1").env("EDITOR", &editor);
    let r = pty_run(
        &c,
        &format!("--repo '{}' edit ~/.netrc", repo.display()),
        "key pass phrase\n",
    );
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.stdout.matches("Passphrase for").count(), 1, "{r:#?}");
    let edited = desk.read(".netrc");
    assert!(edited.ends_with("edited\n"), "{edited}");
    // No terminal: the key is passed over and the passphrase slot opens.
    fs::remove_file(desk.path(".netrc")).unwrap();
    let mut c = desk.command(&["restore"]);
    c.envs(pw).stdin(Stdio::null());
    c.env_remove("SSH_AUTH_SOCK");
    let r: Run = Command::new("setsid")
        .arg("-w")
        .arg(TestEnv::bin())
        .args(["--repo", repo.to_str().unwrap(), "restore"])
        .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .current_dir(&desk.t.home)
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into();
    r.ok();
    assert_eq!(desk.read(".netrc"), edited);
}

/// Removing a recipient, rotating the data key without any passphrase,
/// and what the removed machine can still do.
#[test]
fn remove_recipient_then_rotate_locks_the_removed_machine_out_of_new_content() {
    let (_d, [desk, laptop, _]) = or_skip!(three());
    own_key_repo(&desk);
    share_with_laptop(&desk, &laptop);

    let r = desk.sg(&["encrypt", "remove-recipient", "laptop"]);
    r.ok()
        .stdout_has("Removed recipient age/laptop")
        .stderr_has("keeps what it already decrypted")
        .stderr_has("rotate-dek");
    // The last slot stays.
    desk.sg(&["encrypt", "remove-recipient", "nobody"])
        .code(1)
        .stderr_has("no recipient \"nobody\"");
    let desk_fp = fingerprint_of(&pub_of(&desk.path(".ssh/id_ed25519")));
    desk.sg(&["encrypt", "remove-recipient", &desk_fp])
        .code(1)
        .stderr_has("only key slot");
    // Rotation re-wraps the recipient slots with no passphrase asked.
    desk.sg(&["encrypt", "rotate-dek"])
        .ok()
        .stdout_has("1 file re-encrypted, 1 slot re-wrapped");
    fs::remove_file(laptop.path(".netrc")).unwrap();
    laptop
        .sg(&["restore"])
        .code(1)
        .stderr_has("no key of this machine");
    desk.write(".netrc", b"after the rotation\n");
    desk.sg(&["checkpoint"]).ok();
    fs::remove_file(desk.path(".netrc")).unwrap();
    desk.sg(&["restore"]).ok();
    assert_eq!(desk.read(".netrc"), "after the rotation\n");
}

/// The slot is a real age file: the `age` command opens it with the SSH
/// key, and no other key does.
#[test]
fn a_recipient_slot_is_an_age_file_the_age_command_opens() {
    if !on_path("age") {
        eprintln!("skipping: age is not installed");
        return;
    }
    let (_d, [desk, _, stranger]) = or_skip!(three());
    own_key_repo(&desk);
    let m = fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap();
    let wrapped = m
        .lines()
        .find_map(|l| l.trim().strip_prefix("wrapped_dek: "))
        .unwrap()
        .trim_matches('"');
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(wrapped)
        .unwrap();
    assert!(bytes.starts_with(b"age-encryption.org/v1\n-> ssh-ed25519 "));
    let file = desk.t.outside().join("dek.age");
    fs::write(&file, &bytes).unwrap();
    let open = |key: PathBuf| {
        Command::new("age")
            .arg("-d")
            .arg("-i")
            .arg(key)
            .arg(&file)
            .output()
            .unwrap()
    };
    let o = open(desk.path(".ssh/id_ed25519"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout.len(), 32);
    assert!(!open(stranger.path(".ssh/id_ed25519")).status.success());
}

/// Through `sgardd`: the recipient slots travel with a push, and a machine
/// that pulls restores the secrets with the same SSH key it logs in with.
#[test]
fn recipients_travel_through_the_server_and_open_with_the_login_key() {
    use crate::sync::{World, sg};
    let Some(w) = World::new(2) else {
        eprintln!("skipping: ssh-keygen is not installed");
        return;
    };
    let srv = w.serve(&[]);
    let addr = srv.addr.as_str();
    let a = TestEnv::init();
    let b = TestEnv::new();
    // Each machine's login key is its ~/.ssh/id_ed25519 too.
    for (t, k) in [(&a, w.key(0)), (&b, w.key(1))] {
        fs::create_dir_all(t.path(".ssh")).unwrap();
        fs::copy(k, t.path(".ssh/id_ed25519")).unwrap();
        fs::copy(pub_of(k), t.path(".ssh/id_ed25519.pub")).unwrap();
    }
    a.sgard(["encrypt", "init", "--recipient", "~/.ssh/id_ed25519.pub"])
        .ok();
    a.sgard([
        "encrypt",
        "add-recipient",
        pub_of(w.key(1)).to_str().unwrap(),
    ])
    .ok();
    a.write(".netrc", SECRET);
    a.sgard(["add", "--encrypt", ".netrc"]).ok();
    a.sgard(["checkpoint"]).ok();
    sg(&a, w.key(0), &["push", "-r", addr]).ok();
    let on_server = fs::read_to_string(srv.repo.join("manifest.yaml")).unwrap();
    assert_eq!(on_server.matches("type: age").count(), 2, "{on_server}");
    sg(&b, w.key(1), &["pull", "-r", addr]).ok();
    assert_eq!(b.read(".netrc"), SECRET);
}

/// A recipients-only repository gets a passphrase slot later (for a Go
/// machine): unlocked by this machine's key, no old passphrase asked.
#[test]
fn a_passphrase_slot_is_added_to_a_recipients_only_repository() {
    let (_d, [desk, _, stranger]) = or_skip!(three());
    own_key_repo(&desk);
    desk.write(".netrc", SECRET);
    desk.sg(&["add", "--encrypt", ".netrc"]).ok();
    let r: Run = desk
        .command(&["encrypt", "change-passphrase"])
        .env("SGARD_NEW_PASSPHRASE", "for the go machine")
        .env("SGARD_TEST_ARGON2", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into();
    r.ok().stdout_has("Passphrase slot added");
    desk.sg(&["encrypt", "list-slots"])
        .ok()
        .stdout_has("passphrase")
        .stdout_has("age/id_ed25519@");
    // The stranger, with no key, now opens it with the passphrase.
    let r: Run = stranger
        .command(&["restore"])
        .env("SGARD_PASSPHRASE", "for the go machine")
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into();
    r.ok();
    assert_eq!(fs::read(stranger.path(".netrc")).unwrap(), SECRET);
}

/// A recipient slot is not proof of who wrote it: a slot rewritten to wrap
/// another data key to this machine's public key (what anyone who can
/// write the manifest could do) is refused, nothing decrypted or
/// encrypted; a real rotation on another machine is taken.
#[test]
fn a_forged_recipient_slot_is_refused_and_a_rotation_elsewhere_is_taken() {
    if !on_path("age") {
        eprintln!("skipping: age is not installed");
        return;
    }
    let (_d, [desk, laptop, _]) = or_skip!(three());
    let p = own_key_repo(&desk);
    share_with_laptop(&desk, &laptop);

    // A rotation on the laptop: the desk takes the new key (it follows
    // from the one it knew).
    laptop.sg(&["encrypt", "rotate-dek"]).ok();
    fs::remove_file(desk.path(".netrc")).unwrap();
    desk.sg(&["restore"]).ok();
    assert_eq!(fs::read(desk.path(".netrc")).unwrap(), SECRET);

    // Someone rewrites the desk's slot with a key of their own.
    forge(&desk, &p);
    let mpath = desk.repo.join("manifest.yaml");
    desk.write(".new-secret", "would go to the forger\n");
    let r = desk.sg(&["add", "--encrypt", ".new-secret"]);
    r.code(1).stderr_has("is not trusted");
    assert!(
        !fs::read_to_string(&mpath)
            .unwrap()
            .contains("~/.new-secret"),
        "nothing was stored"
    );
}

/// Rotating with a passphrase slot and a recipient: the data key is opened
/// by this machine's key, and the passphrase the slot is re-wrapped with
/// must be the slot's own (a typo would lock every passphrase user out).
#[test]
fn rotation_rewraps_the_passphrase_slot_only_with_its_own_passphrase() {
    let (_d, [desk, _, stranger]) = or_skip!(three());
    let with = with_pass;
    desk.sg(&["init"]).ok();
    let p = pub_of(&desk.path(".ssh/id_ed25519"));
    with(
        &desk,
        &[
            "encrypt",
            "init",
            "--recipient",
            p.to_str().unwrap(),
            "--passphrase",
        ],
        "right one",
    )
    .ok();
    desk.write(".netrc", SECRET);
    desk.sg(&["add", "--encrypt", ".netrc"]).ok();
    let before = fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap();
    with(&desk, &["encrypt", "rotate-dek"], "a typo")
        .code(1)
        .stderr_has("wrong passphrase");
    assert_eq!(
        before,
        fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap(),
        "nothing changed"
    );
    with(&desk, &["encrypt", "rotate-dek"], "right one")
        .ok()
        .stdout_has("2 slots re-wrapped");
    // Both still open it.
    with(&stranger, &["restore"], "right one").ok();
    assert_eq!(fs::read(stranger.path(".netrc")).unwrap(), SECRET);
    fs::remove_file(desk.path(".netrc")).unwrap();
    desk.sg(&["restore"]).ok();
    assert_eq!(fs::read(desk.path(".netrc")).unwrap(), SECRET);
}

/// Rewrites `m`'s own recipient slot (`age/id_ed25519@…`) to wrap a key of
/// someone else's choosing to `m`'s public key `p`, with the `age` command.
fn forge(m: &Machine, p: &Path) {
    let forged_key = m.t.outside().join("forged.bin");
    fs::write(&forged_key, [7u8; 32]).unwrap();
    let o = Command::new("age")
        .arg("-R")
        .arg(p)
        .arg(&forged_key)
        .output()
        .unwrap();
    assert!(o.status.success());
    let forged = base64::engine::general_purpose::STANDARD.encode(&o.stdout);
    let mpath = m.repo.join("manifest.yaml");
    let text = fs::read_to_string(&mpath).unwrap();
    let mut out = String::new();
    let mut in_slot = false;
    for line in text.lines() {
        // A slot's name line (`age/…:`, `passphrase:`) starts a slot.
        let t = line.trim_start();
        if t.ends_with(':') && !t.contains(' ') {
            in_slot = t.starts_with("age/id_ed25519@");
        }
        if in_slot && line.trim_start().starts_with("wrapped_dek:") {
            let indent = &line[..line.len() - line.trim_start().len()];
            out.push_str(&format!("{indent}wrapped_dek: {forged}\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert_ne!(out, text);
    fs::write(&mpath, out).unwrap();
}

/// With a passphrase slot, a forged recipient slot is passed over for the
/// passphrase (which cannot be forged so), and said.
#[test]
fn a_forged_recipient_slot_falls_back_to_the_passphrase() {
    if !on_path("age") {
        eprintln!("skipping: age is not installed");
        return;
    }
    let (_d, [desk, _, stranger]) = or_skip!(three());
    let with = |m: &Machine, args: &[&str]| with_pass(m, args, "pw");
    desk.sg(&["init"]).ok();
    let p = pub_of(&desk.path(".ssh/id_ed25519"));
    with(
        &desk,
        &[
            "encrypt",
            "init",
            "--recipient",
            p.to_str().unwrap(),
            "--passphrase",
        ],
    )
    .ok();
    desk.write(".netrc", SECRET);
    desk.sg(&["add", "--encrypt", ".netrc"]).ok();
    forge(&desk, &p);
    desk.write(".other", "a second secret\n");
    with(&desk, &["add", "--encrypt", ".other"])
        .ok()
        .stderr_has("is not trusted")
        .stderr_has("the passphrase is used instead");
    // Stored under the real key: another machine opens it with the passphrase.
    with(&stranger, &["restore"]).ok();
    assert_eq!(stranger.read(".other"), "a second secret\n");
}
