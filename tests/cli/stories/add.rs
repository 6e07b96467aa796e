//! Stories of issue 30: add.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Stdio;

use crate::common::*;
use crate::scenarios::entry_paths as tracked;
use crate::templates::files_containing;

/// Runs sgard with the passphrase set (and tiny Argon2 parameters).
fn with_passphrase(t: &TestEnv, args: &[&str]) -> Run {
    t.command(args)
        .env("SGARD_TEST_ARGON2", "1")
        .env("SGARD_PASSPHRASE", "correct horse")
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into()
}

/// Whether any file under `dir` holds `needle`.
fn anywhere_under(dir: &Path, needle: &[u8]) -> bool {
    !files_containing(dir, needle).is_empty()
}

/// Item 1: `add ~`, `add ~/.state` (the XDG state home), `add ~/.cache`
/// and `add ~/.config` never track sgard's own state, cache or
/// configuration, nor its temp files; a checkpoint then has nothing of its
/// own to record, and status stays clean. A direct `add` of one is refused,
/// naming it.
#[test]
fn add_never_tracks_sgards_own_state() {
    let t = TestEnv::init();
    t.write(".bashrc", "alias ll='ls -l'\n");
    t.write(".config/git/config", "[user]\n");
    t.write(".config/sgard/data.yaml", "git:\n  email: me@example.org\n");
    t.write(".cache/sgard/leftover", "x\n");
    t.write(".cache/other/kept", "y\n");
    t.write(".local/state/app/history", "z\n");
    t.write(".sgard-tmp-AbCdEf", "half a write\n");
    t.write(
        ".config/.sgard-restore-999999-aabbcc-0-x",
        "half a restore\n",
    );
    // A live process's (this test's): no sweep of dead processes' debris
    // removes it meanwhile.
    let link_tmp = format!(".config/.sgard-link-{}-aabbcc-y", std::process::id());
    t.write(&link_tmp, "half a link\n");
    // The state folder is there (the index of the repository).
    assert!(t.path(".state/sgard/machine-id").exists());

    for arg in ["~", "~/.state", "~/.cache", "~/.config", "~/.local"] {
        t.sgard(["add", arg]).ok();
    }
    let m = t.manifest();
    let paths = tracked(&m);
    for p in &paths {
        assert!(
            !p.starts_with("~/.state/sgard")
                && !p.starts_with("~/.cache/sgard")
                && !p.starts_with("~/.config/sgard")
                && !p.contains(".sgard-"),
            "sgard's own file {p} was tracked:\n{m}"
        );
    }
    for want in [
        "~/.bashrc",
        "~/.config/git/config",
        "~/.cache/other/kept",
        "~/.local/state/app/history",
    ] {
        assert!(paths.iter().any(|p| p == want), "{want} missing:\n{m}");
    }

    // Nothing of sgard's own changes under a checkpoint's feet.
    t.sgard(["checkpoint", "-m", "first"]).ok();
    let r = t.sgard(["status", "--exit-code"]);
    r.ok();
    let log = t.sgard(["log"]).stdout;
    t.sgard(["checkpoint", "-m", "again"]).ok();
    assert_eq!(
        t.sgard(["log"]).stdout,
        log,
        "a checkpoint with nothing changed here recorded a snapshot"
    );

    // Named directly: refused, clearly, and nothing changes.
    let before = t.manifest();
    let link_tmp = format!("~/{link_tmp}");
    for arg in [
        "~/.state/sgard",
        "~/.state/sgard/machine-id",
        "~/.cache/sgard/leftover",
        "~/.config/sgard/data.yaml",
        "~/.sgard-tmp-AbCdEf",
        link_tmp.as_str(),
    ] {
        let r = t.sgard(["add", arg]);
        assert_eq!(r.code, 1, "add {arg} must be refused; {r:#?}");
        assert!(
            r.stderr.contains("refusing to track sgard's own"),
            "add {arg}: unclear refusal; {r:#?}"
        );
        assert_eq!(t.manifest(), before, "add {arg} changed the manifest");
    }
}

/// Item 1, wherever XDG puts them: a state, cache and configuration home
/// set elsewhere in the home are skipped by a walk of the home too.
#[test]
fn add_skips_sgards_folders_where_xdg_puts_them() {
    let t = TestEnv::init();
    t.write("x.txt", "x\n");
    t.write("cfg/sgard/data.yaml", "a: 1\n");
    t.write("cfg/other.conf", "b\n");
    let xdg = |args: &[&str]| -> Run {
        t.command(args)
            .env("XDG_STATE_HOME", t.path("st"))
            .env("XDG_CACHE_HOME", t.path("ca"))
            .env("XDG_CONFIG_HOME", t.path("cfg"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .into()
    };
    // The state home moves: this run's index goes to ~/st/sgard.
    xdg(&["status"]).ok();
    assert!(t.path("st/sgard").is_dir());
    t.write("ca/sgard/c", "c\n");
    xdg(&["add", "~"]).ok();
    let m = t.manifest();
    let paths = tracked(&m);
    for p in &paths {
        assert!(
            !p.starts_with("~/st/sgard")
                && !p.starts_with("~/ca/sgard")
                && !p.starts_with("~/cfg/sgard"),
            "sgard's own file {p} was tracked:\n{m}"
        );
    }
    assert!(paths.iter().any(|p| p == "~/cfg/other.conf"), "{m}");
    assert!(paths.iter().any(|p| p == "~/x.txt"), "{m}");
    let r = xdg(&["add", "~/cfg/sgard/data.yaml"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stderr.contains("refusing to track sgard's own"), "{r:#?}");
}

/// Takes the entry `from` in the manifest of the repository at `repo` and
/// names it `to` instead (a manifest from elsewhere, as a hostile server or
/// shared folder could write it): only confinement stands between it and
/// the disk.
fn rename_entry(repo: &Path, from: &str, to: &str) {
    let m = repo.join("manifest.yaml");
    let text = fs::read_to_string(&m).unwrap();
    let head = format!("- path: {from}\n");
    assert!(text.contains(&head), "{text}");
    fs::write(&m, text.replace(&head, &format!("- path: {to}\n"))).unwrap();
}

/// Review of item 1: the state folder kept on another disk (a symlink
/// where XDG puts it) is sgard's own all the same. A walk of the folder
/// above passes it by in silence, and so a link elsewhere that leads into
/// it; a restore on another machine has nothing of it to fail on;
/// `mirror down` neither asks about it nor fails on it; named directly,
/// each is refused.
#[test]
fn a_symlinked_state_folder_is_passed_by() {
    use std::os::unix::fs::symlink;
    let t = TestEnv::new();
    let disk = t.outside().join("disk/sgard");
    fs::create_dir_all(&disk).unwrap();
    fs::create_dir_all(t.path(".state")).unwrap();
    symlink(&disk, t.path(".state/sgard")).unwrap();
    t.sgard(["init"]).ok();
    assert!(disk.join("machine-id").exists(), "the state went elsewhere");
    t.write(".state/app/history", "z\n");
    symlink(t.path(".state/sgard"), t.path(".state/alias")).unwrap();
    symlink(disk.join("machine-id"), t.path(".state/id")).unwrap();

    for dry in [true, false] {
        let args: &[&str] = if dry {
            &["add", "-n", "~/.state"]
        } else {
            &["add", "~/.state"]
        };
        let r = t.sgard(args);
        r.ok();
        for name in ["sgard", "alias", "id"] {
            let p = format!("~/.state/{name}");
            assert!(
                !r.stdout.contains(&format!("{p}\n")) && !r.stderr.contains(&p),
                "{p} was not passed by in silence; {r:#?}"
            );
        }
    }
    let m = t.manifest();
    assert_eq!(tracked(&m), ["~/.state/app/history"], "{m}");
    let r = t.sgard(["mirror", "up", "-n", "~/.state"]);
    r.ok();
    assert!(!r.stdout.contains("~/.state/sgard"), "{r:#?}");

    let before = t.manifest();
    for arg in ["~/.state/sgard", "~/.state/alias", "~/.state/id"] {
        let r = t.sgard(["add", arg]);
        assert_eq!(r.code, 1, "add {arg} must be refused; {r:#?}");
        assert!(r.stderr.contains("refusing to track sgard's own"), "{r:#?}");
        assert_eq!(t.manifest(), before, "add {arg} changed the manifest");
    }

    // Another machine restores the repository whole.
    t.sgard(["checkpoint"]).ok();
    let w = TestEnv::new();
    let repo = t.repo();
    let repo = repo.to_str().unwrap();
    w.sgard(["--repo", repo, "restore"]).ok();
    assert_eq!(w.read(".state/app/history"), b"z\n");
    // Its own state is its own folder, not the first machine's link.
    let st = fs::symlink_metadata(w.path(".state/sgard")).unwrap();
    assert!(st.is_dir(), "{st:?}");

    // Untracked but sgard's own: never a question, never a failure.
    let r = t.sgard(["mirror", "down", "-n", "~/.state"]);
    r.ok();
    assert!(
        !r.stdout.contains("~/.state/sgard") && !r.stdout.contains("~/.state/alias"),
        "{r:#?}"
    );
    t.sgard(["mirror", "down", "-f", "~/.state"]).ok();
    for name in ["sgard", "alias", "id"] {
        assert!(fs::symlink_metadata(t.path(&format!(".state/{name}"))).is_ok());
    }
    assert!(disk.join("machine-id").exists());
}

/// Review of item 1: `--no-cache` turns the caches off, not the rule that
/// sgard's cache folder is its own: a walk still passes it by, a direct
/// `add` of a file in it is still refused, and a restore still never
/// writes into it.
#[test]
fn no_cache_leaves_the_cache_folder_sgards_own() {
    let t = TestEnv::init();
    t.write(".cache/sgard/capture/tmpX", "junk\n");
    t.write(".cache/other/kept", "y\n");
    let r = t.sgard(["--no-cache", "add", "-n", "~/.cache"]);
    r.ok();
    assert!(!r.stdout.contains("~/.cache/sgard"), "{r:#?}");
    assert!(r.stdout.contains("~/.cache/other/kept"), "{r:#?}");
    t.sgard(["--no-cache", "add", "~/.cache"]).ok();
    let m = t.manifest();
    assert_eq!(tracked(&m), ["~/.cache/other/kept"], "{m}");
    let r = t.sgard(["--no-cache", "add", "~/.cache/sgard/capture/tmpX"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stderr.contains("refusing to track sgard's own"), "{r:#?}");
    assert_eq!(t.manifest(), m);

    // An entry that names a file in it (a manifest from elsewhere).
    rename_entry(&t.repo(), "~/.cache/other/kept", "~/.cache/sgard/planted");
    let r = t.sgard(["--no-cache", "restore", "-f"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stderr.contains("refusing to write there"), "{r:#?}");
    assert!(!t.path(".cache/sgard/planted").exists());
}

/// Review of item 1: a repository is never tracked, the one in use or any
/// other. With the shared folder as the repository, a walk of the home
/// passes by the default `~/.sgard`, a fresh git clone at `~/dots` (its
/// `.git` too; no `blobs/` yet, git keeping no empty folder) and a Go
/// sgard's repository (a `manifest.yaml` and `blobs/`), saying so
/// once for each; a direct `add` of a path in one is refused; `mirror
/// down` never offers to delete in one; a restore never writes into one.
#[test]
fn a_walk_passes_by_other_sgard_repositories() {
    let t = TestEnv::init();
    t.write(".bashrc", "x\n");
    t.sgard(["add", "~/.bashrc"]).ok();
    t.sgard(["checkpoint"]).ok();
    t.sgard(["--repo", "~/dots", "init"]).ok();
    fs::remove_dir(t.path("dots/blobs")).unwrap();
    t.write("dots/.git/HEAD", "ref: refs/heads/main\n");
    t.write("go/manifest.yaml", "version: 1\nfiles: []\n");
    t.write("go/blobs/ab/cd/abcd", "old\n");
    // Not a repository: a manifest alone.
    t.write("notes/manifest.yaml", "mine\n");
    let usb = t.outside().join("usb");
    let usb = usb.to_str().unwrap();
    let sg = |args: &[&str]| -> Run {
        let mut all = vec!["--repo", usb];
        all.extend_from_slice(args);
        t.sgard(all)
    };
    sg(&["init"]).ok();
    let r = sg(&["add", "~"]);
    r.ok();
    let m = fs::read_to_string(t.outside().join("usb/manifest.yaml")).unwrap();
    let paths = tracked(&m);
    for p in &paths {
        assert!(
            !p.starts_with("~/.sgard/") && !p.starts_with("~/dots/") && !p.starts_with("~/go/"),
            "a repository's file {p} was tracked:\n{m}"
        );
    }
    for want in ["~/.bashrc", "~/notes/manifest.yaml"] {
        assert!(paths.iter().any(|p| p == want), "{want} missing:\n{m}");
    }
    for repo in ["~/.sgard", "~/dots", "~/go"] {
        let note = format!("skipped {repo}: an sgard repository");
        assert_eq!(r.stderr.matches(&note).count(), 1, "{note:?}; {r:#?}");
    }

    for arg in [
        "~/.sgard/manifest.yaml",
        "~/.sgard",
        "~/dots/.git/HEAD",
        "~/go",
        "~/go/blobs/ab/cd/abcd",
    ] {
        let r = sg(&["add", arg]);
        assert_eq!(r.code, 1, "add {arg} must be refused; {r:#?}");
        assert!(r.stderr.contains("an sgard repository"), "{r:#?}");
        let now = fs::read_to_string(t.outside().join("usb/manifest.yaml")).unwrap();
        assert_eq!(now, m, "add {arg} changed the manifest");
    }

    // Untracked files in a repository are never offered for deletion.
    t.write("stray", "s\n");
    let r = sg(&["mirror", "down", "-n", "~"]);
    r.ok();
    assert!(r.stdout.contains("~/stray"), "{r:#?}");
    for repo in ["~/.sgard/", "~/dots/", "~/go/"] {
        assert!(!r.stdout.contains(repo), "{repo}; {r:#?}");
    }

    // An entry that names a file in one (a manifest from elsewhere).
    sg(&["add", "~/stray"]).ok();
    rename_entry(Path::new(usb), "~/stray", "~/dots/planted");
    fs::remove_file(t.path("stray")).unwrap();
    let r = sg(&["restore", "-f"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stderr.contains("refusing to write there"), "{r:#?}");
    assert!(!t.path("dots/planted").exists());
}

/// Item 6: an empty path (an unset `$TYPO`) is a usage error, not the
/// working folder: nothing is walked, nothing is tracked or untracked.
#[test]
fn an_empty_path_is_a_usage_error() {
    let t = TestEnv::tracking(".bashrc", "x\n");
    t.write("big/a", "a\n");
    let before = t.manifest();
    for args in [
        &["add", ""][..],
        &["add", "~/.bashrc", ""],
        &["remove", ""],
        &["status", ""],
        &["checkpoint", ""],
        &["restore", ""],
        &["mirror", "up", ""],
    ] {
        let r = t.sgard(args);
        assert_eq!(
            r.code,
            2,
            "`sgard {}` must be a usage error; {r:#?}",
            args.join(" ")
        );
        assert!(r.stderr.contains("empty"), "{r:#?}");
        assert_eq!(t.manifest(), before);
    }
}

const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\n\
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n\
QyNTUxOQAAACBSecretKeyMaterialThatMustNeverLeakXXXXXXXXXXXXXXXXXXXXXXXX\n\
-----END OPENSSH PRIVATE KEY-----\n";

/// Item 12: a private key met by `add ~/.ssh` is refused (exit 4, naming
/// the file, `--encrypt` and `--plaintext`), and nothing of it reaches the
/// repository; `--plaintext` stores it as asked; status and doctor then
/// flag it.
#[test]
fn add_refuses_a_private_key_in_plaintext() {
    let t = TestEnv::init();
    t.write(".ssh/id_ed25519", KEY);
    t.write(".ssh/id_ed25519.pub", "ssh-ed25519 AAAAC3Nza me@host\n");
    t.write(".ssh/config", "Host *\n  IdentitiesOnly yes\n");
    let before = t.manifest();
    for args in [
        &["add", "~/.ssh"][..],
        &["add", "~/.ssh/id_ed25519"],
        &["add", "-n", "~/.ssh"],
        &["mirror", "up", "~/.ssh"],
    ] {
        let r = t.sgard(args);
        let what = args.join(" ");
        assert_eq!(r.code, 4, "`sgard {what}` must be refused; {r:#?}");
        for want in [
            "~/.ssh/id_ed25519",
            "private key",
            "--encrypt",
            "--plaintext",
        ] {
            assert!(
                r.stderr.contains(want),
                "`sgard {what}`: no {want:?}; {r:#?}"
            );
        }
        assert_eq!(t.manifest(), before, "`sgard {what}` changed the manifest");
        assert!(
            !anywhere_under(&t.repo(), b"SecretKeyMaterial"),
            "`sgard {what}` put the key into the repository"
        );
    }

    // Asked for: stored as it is, and flagged from then on.
    t.sgard(["add", "--plaintext", "~/.ssh"]).ok();
    let paths = tracked(&t.manifest());
    assert!(paths.iter().any(|p| p == "~/.ssh/id_ed25519"), "{paths:?}");
    let r = t.sgard(["status"]);
    r.ok();
    assert!(
        r.stderr.contains("~/.ssh/id_ed25519")
            && r.stderr.contains("plaintext")
            && r.stderr.contains("--encrypt"),
        "status does not flag the plaintext key; {r:#?}"
    );
    assert!(
        !r.stderr.contains("id_ed25519.pub") && !r.stderr.contains("~/.ssh/config"),
        "{r:#?}"
    );
    let r = t.sgard(["doctor"]);
    let flagged = r
        .stdout
        .lines()
        .any(|l| l.starts_with("warning") && l.contains("~/.ssh/id_ed25519"));
    assert!(flagged, "doctor does not flag the plaintext key; {r:#?}");

    // Refreshing what is tracked already is not refused again.
    t.write(".ssh/id_ed25519", format!("{KEY}\n"));
    t.sgard(["add", "~/.ssh/id_ed25519"]).ok();
}

/// Item 12: the credential files of the detector are refused in plaintext;
/// the same files without a secret in them are not; `--encrypt` stores one
/// encrypted, and status then says nothing.
#[test]
fn add_refuses_credential_files_in_plaintext() {
    let t = TestEnv::init();
    let secrets = [
        (
            ".aws/credentials",
            "[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = wJalrXUtnEXAMPLE\n",
        ),
        (
            ".netrc",
            "machine example.org\n  login me\n  password hunter2\n",
        ),
        (".pgpass", "db.example.org:5432:*:me:hunter2\n"),
        (
            ".kube/config",
            "apiVersion: v1\nusers:\n- name: me\n  user:\n    token: eyJhbGciOiJSUzI1NiJ9.x.y\n",
        ),
        (
            "certs/server.pem",
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n",
        ),
    ];
    for (rel, text) in secrets {
        t.write(rel, text);
        let r = t.sgard(["add", rel]);
        assert_eq!(r.code, 4, "add {rel} must be refused; {r:#?}");
        assert!(
            r.stderr.contains(&format!("~/{rel}"))
                && r.stderr.contains("--encrypt")
                && r.stderr.contains("--plaintext"),
            "{r:#?}"
        );
        fs::remove_file(t.path(rel)).unwrap();
    }
    assert!(tracked(&t.manifest()).is_empty(), "{}", t.manifest());

    // The same files holding no secret are ordinary files.
    let harmless = [
        (".aws/config", "[default]\nregion = eu-west-1\n"),
        (".netrc", "machine example.org\n  login me\n"),
        (".pgpass", "# host:port:db:user:password\n"),
        (".kube/config", "apiVersion: v1\nclusters: []\n"),
        (
            "certs/ca.pem",
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        ),
        (
            "notes.md",
            "Keys begin with -----BEGIN OPENSSH PRIVATE KEY----- (never paste one)\n",
        ),
    ];
    for (rel, text) in harmless {
        t.write(rel, text);
        t.sgard(["add", rel]).ok();
    }

    // Encrypted, as asked: no warning from status.
    let pw = |args: &[&str]| with_passphrase(&t, args);
    pw(&["encrypt", "init"]).ok();
    t.write(
        ".netrc",
        "machine example.org\n  login me\n  password hunter2\n",
    );
    pw(&["add", "--encrypt", "~/.netrc"]).ok();
    assert!(!anywhere_under(&t.repo(), b"hunter2"));
    let r = t.sgard(["status"]);
    r.ok();
    assert!(!r.stderr.contains("plaintext"), "{r:#?}");
}

/// Item 19: a name that is not UTF-8 is skipped and shown as `~/…` with the
/// bytes that are not text escaped, never raw and absolute.
#[test]
fn a_name_that_is_not_utf8_is_shown_escaped_under_tilde() {
    let t = TestEnv::init();
    t.write("d/good", "g\n");
    let bad = t.path("d").join(OsStr::from_bytes(b"bad\xffname"));
    fs::write(&bad, "b\n").unwrap();
    let r = t.sgard(["add", "~/d"]);
    r.ok();
    assert!(
        r.stderr.contains("skipped ~/d/bad\\xffname"),
        "want `skipped ~/d/bad\\xffname`; {r:#?}"
    );
    assert!(!r.stderr.contains(&t.home.display().to_string()), "{r:#?}");
    assert!(!r.stderr.contains('\u{fffd}'), "{r:#?}");

    // Named directly: refused, shown the same way.
    let r = t
        .command([OsStr::new("add"), bad.as_os_str()])
        .output()
        .unwrap();
    let r = Run::from(r);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stderr.contains("~/d/bad\\xffname"), "{r:#?}");
    assert!(!r.stderr.contains('\u{fffd}'), "{r:#?}");
}

/// Item 21: `list` marks encrypted entries as it marks scripts.
#[test]
fn list_marks_encrypted_entries() {
    let t = TestEnv::init();
    let pw = |args: &[&str]| with_passphrase(&t, args);
    pw(&["encrypt", "init"]).ok();
    t.write(".token", "s3cret\n");
    t.write(".plain", "p\n");
    pw(&["add", "--encrypt", "~/.token"]).ok();
    t.sgard(["add", "~/.plain"]).ok();
    let r = t.sgard(["list"]);
    r.ok();
    let line_of = |p: &str| {
        r.stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(p))
            .unwrap_or_else(|| panic!("no line for {p}; {r:#?}"))
            .to_owned()
    };
    assert!(line_of("~/.token").contains("encrypted"), "{r:#?}");
    assert!(!line_of("~/.plain").contains("encrypted"), "{r:#?}");
}
