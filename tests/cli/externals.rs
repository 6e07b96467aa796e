//! `sgard external`: files and archives served from loopback (an HTTP
//! server the test runs), pinned, unpacked, stored in the repository and
//! restored on a second machine with the server gone; hostile archives
//! and changed sources refused with nothing written.

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::*;

/// An HTTP/1.0 server on loopback serving `files` by path (404 else);
/// stopped when dropped.
struct Http {
    addr: String,
    files: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

impl Http {
    fn start() -> Http {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let files: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (f, s) = (files.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in l.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut c) = conn else { continue };
                let mut r = BufReader::new(c.try_clone().unwrap());
                let mut line = String::new();
                if r.read_line(&mut line).is_err() {
                    continue;
                }
                // The rest of the request head.
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).map_or(true, |n| n == 0) || h == "\r\n" {
                        break;
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let body = f.lock().unwrap().get(&path).cloned();
                let _ = match body {
                    Some(b) => c
                        .write_all(
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                b.len()
                            )
                            .as_bytes(),
                        )
                        .and_then(|()| c.write_all(&b)),
                    None => c.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    ),
                };
            }
        });
        Http { addr, files, stop }
    }

    fn serve(&self, path: &str, body: Vec<u8>) -> String {
        self.files.lock().unwrap().insert(path.to_owned(), body);
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(&self.addr);
    }
}

/// A tar.gz of (name, content, mode); names written raw (hostile ones too),
/// a name ending in `/` a folder, `link -> target` a symlink.
fn targz(entries: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data, mode) in entries {
        let mut h = tar::Header::new_gnu();
        let (name, link) = match name.split_once(" -> ") {
            Some((n, t)) => (n, Some(t)),
            None => (*name, None),
        };
        {
            let raw = &mut h.as_old_mut().name;
            raw.fill(0);
            raw[..name.len()].copy_from_slice(name.as_bytes());
        }
        h.set_mode(*mode);
        if let Some(t) = link {
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_link_name_literal(t).unwrap();
            h.set_size(0);
        } else if name.ends_with('/') {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_size(0);
        } else {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(data.len() as u64);
        }
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    gz(&b.into_inner().unwrap())
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn pkg() -> Vec<u8> {
    targz(&[
        ("pkg-1.0/", b"", 0o755),
        ("pkg-1.0/bin/tool", b"#!/bin/sh\necho tool\n", 0o755),
        ("pkg-1.0/share/readme", b"read me\n", 0o644),
        ("pkg-1.0/share/link -> readme", b"", 0o777),
    ])
}

/// Everything in `dir` whose name starts with `.sgard-tmp`.
fn debris(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".sgard-tmp"))
                .collect()
        })
        .unwrap_or_default()
}

/// The Done-when story: a pinned archive external unpacked with --strip
/// keeps its executable bits and its symlink, is an ordinary entry to
/// status and list, and restores on a second machine sharing the
/// repository folder with the server gone.
#[test]
fn a_pinned_archive_restores_on_another_machine_with_the_server_gone() {
    let http = Http::start();
    let bytes = pkg();
    let sha = sha(&bytes);
    let url = http.serve("/pkg-1.0.tar.gz", bytes);
    let a = TestEnv::init();
    a.sgard([
        "external",
        "add",
        &url,
        "~/.local/pkg",
        "--archive",
        "--strip",
        "1",
        "--sha256",
        &sha,
        "-n",
    ])
    .ok()
    .stdout_has("Dry run: would fetch");
    assert!(!a.path(".local/pkg").exists());
    a.sgard([
        "external",
        "add",
        &url,
        "~/.local/pkg",
        "--archive",
        "--strip",
        "1",
        "--sha256",
        &sha,
        "--refresh",
        "7d",
    ])
    .ok()
    .stdout_has("3 files stored");
    assert_eq!(a.read(".local/pkg/bin/tool"), b"#!/bin/sh\necho tool\n");
    assert_eq!(mode_of(&a.path(".local/pkg/bin/tool")), 0o755);
    assert_eq!(mode_of(&a.path(".local/pkg/share/readme")), 0o644);
    assert_eq!(
        fs::read_link(a.path(".local/pkg/share/link")).unwrap(),
        Path::new("readme")
    );
    assert!(debris(&a.path(".local")).is_empty());
    a.sgard(["checkpoint", "-m", "pkg"]).ok();
    a.sgard(["status"]).ok();
    let l = a.sgard(["external", "list"]);
    l.ok()
        .stdout_has("tar.gz")
        .stdout_has("~/.local/pkg")
        .stdout_has("pinned");
    let j: serde_json::Value =
        serde_json::from_str(&a.sgard(["external", "list", "--json"]).stdout).unwrap();
    assert_eq!(j[0]["sha256"], sha.as_str());
    assert_eq!(j[0]["strip"], 1);
    assert_eq!(j[0]["refresh"], "7d");
    assert_eq!(j[0]["files"], 3);
    // Its files are entries that say whose they are, and go only whole.
    a.sgard(["list"])
        .ok()
        .stdout_has("~/.local/pkg/bin/tool\t")
        .stdout_has("external ~/.local/pkg");
    let l: serde_json::Value = serde_json::from_str(&a.sgard(["list", "--json"]).stdout).unwrap();
    assert!(
        l["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["external"] == "~/.local/pkg")
    );
    a.sgard(["remove", "~/.local/pkg/bin/tool"])
        .code(4)
        .stderr_has("part of the external at ~/.local/pkg");
    // A second home on the same repository folder, the server gone.
    drop(http);
    let b = TestEnv::new();
    let repo = a.repo();
    let repo = repo.to_str().unwrap();
    b.sgard(["--repo", repo, "restore", "-f"]).ok();
    assert_eq!(b.read(".local/pkg/bin/tool"), b"#!/bin/sh\necho tool\n");
    assert_eq!(mode_of(&b.path(".local/pkg/bin/tool")), 0o755);
    assert_eq!(
        fs::read_link(b.path(".local/pkg/share/link")).unwrap(),
        Path::new("readme")
    );
    b.sgard(["--repo", repo, "verify"]).ok();
}

/// A pinned external whose source changed is refused (exit 3, naming the
/// URL and both hashes) with nothing written; a path that exists is never
/// replaced (exit 4); a plain file external works without --archive.
#[test]
fn a_changed_source_and_an_existing_path_are_refused() {
    let http = Http::start();
    let good = pkg();
    let url = http.serve("/p.tar.gz", targz(&[("other", b"x", 0o644)]));
    let t = TestEnv::init();
    let r = t.sgard([
        "external",
        "add",
        &url,
        "~/p",
        "--archive",
        "--sha256",
        &sha(&good),
    ]);
    r.code(3)
        .stderr_has(&url)
        .stderr_has(&sha(&good))
        .stderr_has("nothing was changed");
    assert!(!t.path("p").exists());
    assert!(debris(&t.home).is_empty(), "{:?}", debris(&t.home));
    assert!(
        t.sgard(["external", "list"])
            .stdout
            .contains("No externals")
    );

    t.write("font.ttf", "mine\n");
    let furl = http.serve("/font.ttf", b"glyphs\n".to_vec());
    t.sgard(["external", "add", &furl, "~/font.ttf"])
        .code(4)
        .stderr_has("exists");
    assert_eq!(t.read("font.ttf"), b"mine\n");
    // Nor is a path that is tracked, though missing here.
    t.write("gone.ttf", "tracked\n");
    t.sgard(["add", "gone.ttf"]).ok();
    fs::remove_file(t.path("gone.ttf")).unwrap();
    t.sgard(["external", "add", &furl, "~/gone.ttf"])
        .code(4)
        .stderr_has("~/gone.ttf is tracked already");
    assert!(!t.path("gone.ttf").exists());
    t.sgard(["external", "add", &furl, "~/.fonts/font.ttf"])
        .ok()
        .stdout_has("1 file stored")
        .stderr_has("not pinned");
    assert_eq!(t.read(".fonts/font.ttf"), b"glyphs\n");
    t.sgard(["list"]).ok().stdout_has("~/.fonts/font.ttf");
    // Unreachable: a clear error naming the URL.
    let missing = format!("http://{}/none", http.addr);
    t.sgard(["external", "add", &missing, "~/none"])
        .code(1)
        .stderr_has(&missing);
    assert!(!t.path("none").exists());
}

/// Hostile archives: absolute paths, `..`, a symlink out, a write through
/// a symlink and a 10 GB decompression bomb are refused, and nothing is
/// written outside the path (nor left at it).
#[test]
fn hostile_archives_write_nothing_outside() {
    let http = Http::start();
    let mut bomb_tar = tar::Header::new_gnu();
    bomb_tar.set_path("bomb").unwrap();
    bomb_tar.set_size(10 << 30);
    bomb_tar.set_mode(0o644);
    bomb_tar.set_cksum();
    let mut bomb = gz(bomb_tar.as_bytes());
    let zeros = gz(&vec![0u8; 1 << 20]);
    for _ in 0..10 * 1024 {
        bomb.extend_from_slice(&zeros);
    }
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "abs",
            targz(&[("/tmp/sgard-evil", b"x", 0o644)]),
            "absolute",
        ),
        (
            "dotdot",
            targz(&[("a/../../evil", b"x", 0o644)]),
            "climbs out",
        ),
        (
            "linkout",
            targz(&[("l -> ../../evil", b"", 0o777)]),
            "points outside",
        ),
        (
            "through",
            targz(&[
                ("d/", b"", 0o755),
                ("l -> d", b"", 0o777),
                ("l/f", b"x", 0o644),
            ]),
            "through a symlink",
        ),
        ("bomb", bomb, "larger than"),
    ];
    let t = TestEnv::init();
    for (name, bytes, why) in cases {
        let url = http.serve(&format!("/{name}.tar.gz"), bytes);
        let r = t.sgard([
            "external",
            "add",
            &url,
            &format!("~/x/{name}"),
            "--archive",
            "--max-size",
            "16M",
        ]);
        r.code(1).stderr_has(why);
        assert!(!t.path(&format!("x/{name}")).exists(), "{name}");
        assert!(
            debris(&t.path("x")).is_empty(),
            "{name}: {:?}",
            debris(&t.path("x"))
        );
    }
    assert!(!t.path("evil").exists() && !t.home.parent().unwrap().join("evil").exists());
    assert!(!Path::new("/tmp/sgard-evil").exists());
    assert!(
        t.sgard(["external", "list"])
            .stdout
            .contains("No externals")
    );
}

/// `sgard` at a later time: `days` after the test's pinned now.
fn later(t: &TestEnv, days: i64, args: &[&str]) -> Run {
    let now = chrono::DateTime::parse_from_rfc3339(&t.now).unwrap() + chrono::Duration::days(days);
    t.command(args)
        .env("SGARD_NOW", now.to_rfc3339())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
        .into()
}

/// `external refresh`: only what is due (all with --force); an unpinned
/// file and an unpinned archive take the new content (files the source
/// dropped are untracked and gone); a pinned archive whose source changed
/// is refused with exit 3 naming the URL and both hashes, and left as it
/// was; local edits are never overwritten; `remove` drops an external
/// whole.
#[test]
fn refresh_follows_unpinned_sources_and_refuses_changed_pins() {
    let http = Http::start();
    let t = TestEnv::init();
    let tool = http.serve("/tool", b"v1\n".to_vec());
    let theme_v1 = targz(&[("colors", b"dark\n", 0o644)]);
    let theme = http.serve("/theme.tar.gz", theme_v1.clone());
    let plug = http.serve(
        "/plug.tar.gz",
        targz(&[("a", b"a1\n", 0o644), ("b", b"b1\n", 0o644)]),
    );
    t.sgard([
        "external",
        "add",
        &tool,
        "~/.local/bin/tool",
        "--refresh",
        "1d",
    ])
    .ok();
    t.sgard([
        "external",
        "add",
        &theme,
        "~/.theme",
        "--archive",
        "--sha256",
        &sha(&theme_v1),
        "--refresh",
        "1d",
    ])
    .ok();
    t.sgard(["external", "add", &plug, "~/.plug", "--archive"])
        .ok();
    t.sgard(["checkpoint", "-m", "externals"]).ok();

    // A file external made executable by hand (and checkpointed) stays so.
    t.chmod(".local/bin/tool", 0o755);
    t.sgard(["checkpoint", "-m", "executable"]).ok();

    // Nothing is due yet; the sources change.
    t.sgard(["external", "refresh"])
        .ok()
        .stdout_has("Nothing to refresh: no external is past its refresh period (3 looked at");
    http.serve("/tool", b"v2\n".to_vec());
    let theme_v2 = targz(&[("colors", b"light\n", 0o644)]);
    http.serve("/theme.tar.gz", theme_v2.clone());
    http.serve(
        "/plug.tar.gz",
        targz(&[("a", b"a2\n", 0o644), ("c", b"c2\n", 0o644)]),
    );

    // Two days on: the tool and the theme are due, the plugin has no period.
    let r = later(&t, 2, &["external", "refresh"]);
    r.code(3)
        .stdout_has("updated    ~/.local/bin/tool")
        .stdout_has("refused    ~/.theme")
        .stdout_has("1 other external not due")
        .stderr_has(&theme)
        .stderr_has(&sha(&theme_v1))
        .stderr_has(&sha(&theme_v2));
    assert_eq!(t.read(".local/bin/tool"), b"v2\n");
    assert_eq!(mode_of(&t.path(".local/bin/tool")), 0o755);
    assert_eq!(t.read(".theme/colors"), b"dark\n");
    assert_eq!(t.read(".plug/b"), b"b1\n");
    let j: serde_json::Value =
        serde_json::from_str(&t.sgard(["external", "list", "--json"]).stdout).unwrap();
    assert_eq!(j[0]["sha256"], sha(b"v2\n").as_str());
    assert_eq!(j[1]["sha256"], sha(&theme_v1).as_str());
    // The refused one is still due: list and doctor say so.
    later(&t, 2, &["external", "list"])
        .ok()
        .stdout_has("~/.theme")
        .stdout_has("due for refresh");
    later(&t, 2, &["doctor"])
        .ok()
        .stdout_has("past the refresh period: ~/.theme");
    // The new content is stored like any change: status agrees with disk.
    t.sgard(["status"]).ok();
    assert!(!t.sgard(["status"]).stdout.contains("modified"));

    // What is in its folder and is no entry of it stays there; a new file
    // is not tracked inside it.
    t.write(".plug/cache/index.zwc", "cache\n");
    t.sgard(["add", "~/.plug/cache"])
        .code(4)
        .stderr_has("inside the external at ~/.plug");
    // Met in a folder, it is skipped, and said so.
    t.sgard(["add", "~/.plug"])
        .ok()
        .stderr_has("inside the external at ~/.plug");
    assert!(!t.sgard(["list"]).stdout.contains("index.zwc"));
    // The plugin, forced: b is gone from disk and from the manifest.
    t.sgard(["external", "refresh", "--force", "~/.plug"])
        .ok()
        .stdout_has("updated    ~/.plug");
    assert_eq!(t.read(".plug/a"), b"a2\n");
    assert_eq!(t.read(".plug/c"), b"c2\n");
    assert!(!t.path(".plug/b").exists());
    assert_eq!(t.read(".plug/cache/index.zwc"), b"cache\n");
    assert!(!t.sgard(["list"]).stdout.contains("~/.plug/b"));
    assert!(!t.sgard(["list"]).stdout.contains("index.zwc"));
    t.sgard(["checkpoint", "-m", "refreshed"]).ok();
    t.sgard(["verify"]).ok();
    // Again: the cache is still not its own, and still there.
    // And a file of it that becomes a folder.
    http.serve(
        "/plug.tar.gz",
        targz(&[("a", b"a4\n", 0o644), ("c/inner", b"in\n", 0o644)]),
    );
    t.sgard(["external", "refresh", "--force", "~/.plug"]).ok();
    assert_eq!(t.read(".plug/a"), b"a4\n");
    assert_eq!(t.read(".plug/c/inner"), b"in\n");
    t.sgard(["list"]).ok().stdout_has("~/.plug/c/inner");
    t.sgard(["verify"]).ok();
    assert_eq!(t.read(".plug/cache/index.zwc"), b"cache\n");
    // The source now ships a file where one of yours is: refused, nothing
    // moved.
    t.write(".plug/local.zsh", "mine\n");
    http.serve(
        "/plug.tar.gz",
        targz(&[("a", b"a5\n", 0o644), ("local.zsh", b"theirs\n", 0o644)]),
    );
    t.sgard(["external", "refresh", "--force", "~/.plug"])
        .code(4)
        .stderr_has("~/.plug/local.zsh is in the way");
    assert_eq!(t.read(".plug/local.zsh"), b"mine\n");
    assert_eq!(t.read(".plug/a"), b"a4\n");
    std::fs::remove_file(t.path(".plug/local.zsh")).unwrap();
    t.sgard(["checkpoint", "-m", "refreshed again"]).ok();

    // A file changed here is never overwritten by a refresh.
    http.serve("/plug.tar.gz", targz(&[("a", b"a3\n", 0o644)]));
    t.write(".plug/a", "mine\n");
    t.sgard(["external", "refresh", "--force", "~/.plug/a"])
        .code(4)
        .stderr_has("changed here");
    assert_eq!(t.read(".plug/a"), b"mine\n");
    assert!(debris(&t.home).is_empty(), "{:?}", debris(&t.home));

    t.sgard(["external", "refresh", "~/.bashrc"])
        .code(2)
        .stderr_has("no external");
    // Removed whole: its entries and its record; its files stay on disk.
    t.sgard(["remove", "~/.plug"]).ok();
    assert!(!t.sgard(["external", "list"]).stdout.contains("~/.plug"));
    assert!(!t.sgard(["list"]).stdout.contains("~/.plug"));
    assert!(t.path(".plug/a").exists());
}

/// Runs git in `dir` with a fixed identity.
fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A git external at a tag is pinned to its commit, keeps executable
/// bits, restores on another machine after its source is gone, and a tag
/// moved at the source is refused (exit 3, naming both commits); one that
/// follows a branch takes the new commit. `doctor` says when a source is
/// gone.
#[test]
fn a_git_external_at_a_tag_restores_after_its_source_is_gone() {
    if !on_path("git") {
        eprintln!("git is not installed: skipped");
        return;
    }
    let a = TestEnv::init();
    let src = a.outside().join("zsh-plugin");
    fs::create_dir_all(&src).unwrap();
    git(&src, &["init", "-q", "-b", "main"]);
    fs::write(src.join("plugin.zsh"), "echo v1\n").unwrap();
    fs::create_dir_all(src.join("bin")).unwrap();
    fs::write(src.join("bin/helper"), "#!/bin/sh\necho help\n").unwrap();
    fs::set_permissions(
        src.join("bin/helper"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    git(&src, &["add", "-A"]);
    git(&src, &["commit", "-q", "-m", "v1"]);
    git(&src, &["tag", "v1"]);
    fs::write(src.join("plugin.zsh"), "echo v2\n").unwrap();
    git(&src, &["commit", "-q", "-am", "v2"]);
    let url = format!("file://{}", src.display());

    // A hook of the user's never runs on the checkout.
    let hooks = a.outside().join("hooks");
    fs::create_dir_all(&hooks).unwrap();
    let marker = a.outside().join("hook-ran");
    fs::write(
        hooks.join("post-checkout"),
        format!("#!/bin/sh\ntouch {}\n", marker.display()),
    )
    .unwrap();
    fs::set_permissions(
        hooks.join("post-checkout"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let global = a.outside().join("gitconfig");
    fs::write(
        &global,
        format!("[core]\n\thooksPath = {}\n", hooks.display()),
    )
    .unwrap();
    let r: Run = a
        .command([
            "external",
            "add",
            "--git",
            &url,
            "~/.zsh/plugin",
            "--ref",
            "v1",
        ])
        .env("GIT_CONFIG_GLOBAL", &global)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
        .into();
    r.ok().stdout_has("commit ").stdout_has("2 files stored");
    assert!(!marker.exists(), "the user's post-checkout hook ran");
    a.sgard(["external", "add", "--git", &url, "~/.zsh/edge"])
        .ok()
        .stderr_has("follows a branch");
    assert_eq!(a.read(".zsh/plugin/plugin.zsh"), b"echo v1\n");
    assert_eq!(a.read(".zsh/edge/plugin.zsh"), b"echo v2\n");
    assert!(!a.path(".zsh/plugin/.git").exists());
    assert_eq!(mode_of(&a.path(".zsh/plugin/bin/helper")), 0o755);
    let j: serde_json::Value =
        serde_json::from_str(&a.sgard(["external", "list", "--json"]).stdout).unwrap();
    assert_eq!(j[0]["format"], "git");
    assert_eq!(j[0]["ref"], "v1");
    assert_eq!(j[0]["pinned"], true);
    assert_eq!(j[1]["pinned"], false);
    let v1 = j[0]["commit"].as_str().unwrap().to_owned();
    a.sgard(["checkpoint", "-m", "plugins"]).ok();
    a.sgard(["doctor"])
        .ok()
        .stdout_has("2 externals, every source answers");

    // The tag moves and the branch goes on.
    fs::write(src.join("plugin.zsh"), "echo v3\n").unwrap();
    git(&src, &["commit", "-q", "-am", "v3"]);
    git(&src, &["tag", "-f", "v1"]);
    let r = a.sgard(["external", "refresh", "--force"]);
    r.code(3)
        .stdout_has("refused    ~/.zsh/plugin")
        .stdout_has("updated    ~/.zsh/edge")
        .stderr_has(&url)
        .stderr_has(&v1)
        .stderr_has("pinned commit");
    assert_eq!(a.read(".zsh/plugin/plugin.zsh"), b"echo v1\n");
    assert_eq!(a.read(".zsh/edge/plugin.zsh"), b"echo v3\n");
    a.sgard(["checkpoint", "-m", "edge"]).ok();

    // The source is gone: another machine restores from the repository.
    fs::remove_dir_all(&src).unwrap();
    let b = TestEnv::new();
    let repo = a.repo();
    let repo = repo.to_str().unwrap();
    b.sgard(["--repo", repo, "restore", "-f"]).ok();
    assert_eq!(b.read(".zsh/plugin/plugin.zsh"), b"echo v1\n");
    assert_eq!(b.read(".zsh/edge/plugin.zsh"), b"echo v3\n");
    assert_eq!(mode_of(&b.path(".zsh/plugin/bin/helper")), 0o755);
    b.sgard(["--repo", repo, "doctor"])
        .ok()
        .stdout_has("externals")
        .stdout_has(&url);
}
