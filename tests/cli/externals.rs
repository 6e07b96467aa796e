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
