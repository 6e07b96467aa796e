//! The watcher, run in a thread over a temporary home.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sgard_watch::daemon::{Config, Set, serve};
use sgard_watch::{Answer, Token, affects, ask, ask_overflowed};

struct Running {
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start(home: &Path, state: &Path, paths: Vec<PathBuf>, set: &str) -> Running {
    start_with_repo(home, state, paths, set, None)
}

fn start_with_repo(
    home: &Path,
    state: &Path,
    paths: Vec<PathBuf>,
    set: &str,
    repo: Option<PathBuf>,
) -> Running {
    let socket = state.join("watch.sock");
    let stop = Arc::new(AtomicBool::new(false));
    let (home, state, set, s2, stop2) = (
        home.to_path_buf(),
        state.to_path_buf(),
        set.to_owned(),
        socket.clone(),
        stop.clone(),
    );
    let thread = std::thread::spawn(move || {
        let mut load = || {
            Ok(Set {
                id: set.clone(),
                paths: paths.clone(),
                home: home.clone(),
                repo: repo.clone(),
                ignored: Vec::new(),
            })
        };
        let stop = || stop2.load(Ordering::SeqCst);
        serve(Config {
            socket: s2,
            lock: state.join("watch.lock"),
            cookies: state.join("cookies"),
            load: &mut load,
            stop: &stop,
            say: &|_| {},
            test_hooks: true,
            stall: None,
            quiet: None,
            on_quiet: &mut |_| {},
        })
        .unwrap();
    });
    // Until it answers: the socket's name is there from its `bind`, a
    // moment before its `listen` (a connect then is refused).
    for _ in 0..500 {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Running {
        socket,
        stop,
        thread: Some(thread),
    }
}

fn q(r: &Running, set: &str, since: Option<Token>) -> Answer {
    ask(&r.socket, set, since, Duration::from_secs(10)).unwrap()
}

#[test]
fn changes_are_answered_since_a_token_and_nothing_is_missed() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    let state = d.path().join("state");
    std::fs::create_dir_all(home.join(".config/nvim")).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(home.join(".zshrc"), "a").unwrap();
    std::fs::write(home.join(".config/nvim/init.lua"), "a").unwrap();
    let tracked = vec![
        home.join(".zshrc"),
        home.join(".config/nvim/init.lua"),
        home.join(".config/git/config"),
    ];
    let r = start(&home, &state, tracked.clone(), "one");

    let info = sgard_watch::probe(&r.socket, Duration::from_secs(5)).unwrap();
    assert_eq!((info.set.as_str(), info.paths), ("one", 3));
    assert!(info.folders >= 3, "{info:?}");
    let first = q(&r, "one", None);
    assert!(first.changed.is_err(), "no token: look at everything");
    let t0 = first.token;
    let none = q(&r, "one", Some(t0));
    assert_eq!(none.changed, Ok(vec![]));

    // A write just before the question is in the answer (the cookie).
    std::fs::write(home.join(".zshrc"), "b").unwrap();
    let a = q(&r, "one", Some(none.token));
    let changed = a.changed.unwrap();
    assert!(affects(&changed, &tracked[0]), "{changed:?}");
    assert!(!affects(&changed, &tracked[1]));

    // A folder that did not exist is created, then a file in it: both
    // seen, though the folder was not watched before.
    std::fs::create_dir(home.join(".config/git")).unwrap();
    std::fs::write(home.join(".config/git/config"), "x").unwrap();
    let b = q(&r, "one", Some(a.token));
    assert!(affects(&b.changed.clone().unwrap(), &tracked[2]));
    std::fs::write(home.join(".config/git/config"), "y").unwrap();
    let c = q(&r, "one", Some(b.token));
    assert!(affects(&c.changed.clone().unwrap(), &tracked[2]), "{c:?}");

    // A rename of a folder above, and a folder replaced by a symlink.
    std::fs::rename(home.join(".config"), home.join(".config.old")).unwrap();
    std::os::unix::fs::symlink(home.join(".config.old"), home.join(".config")).unwrap();
    let e = q(&r, "one", Some(c.token));
    let changed = e.changed.unwrap();
    assert!(affects(&changed, &tracked[1]) && affects(&changed, &tracked[2]));
    // The old folder's watch does not report under the old name.
    std::fs::write(home.join(".config.old/nvim/init.lua"), "moved").unwrap();
    let f = q(&r, "one", Some(e.token));
    // Through the symlink it is the same file: a change there is seen.
    assert!(affects(&f.changed.unwrap(), &tracked[1]));

    // Another set, an overflow, another instance: look at everything.
    let g = q(&r, "two", Some(f.token));
    assert!(g.changed.is_err());
    // (The set loaded is always "one": asking for "two" reloaded it.)
    let h = ask_overflowed(&r.socket, "one", Some(g.token), Duration::from_secs(5)).unwrap();
    let why = h.changed.unwrap_err();
    assert!(why.contains("overflowed"), "{why}");
    let other = Token {
        instance: h.token.instance ^ 1,
        seq: h.token.seq,
    };
    assert!(q(&r, "one", Some(other)).changed.is_err());
    let i = q(&r, "one", Some(h.token));
    assert_eq!(
        i.changed,
        Ok(vec![]),
        "after the loss, the new token is good"
    );
}

#[test]
fn a_second_watcher_is_refused_and_a_dead_one_is_not_running() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    let state = d.path().join("state");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let socket = {
        let r = start(&home, &state, vec![home.join(".x")], "s");
        let mut load = || Ok(Set::default());
        let err = serve(Config {
            socket: state.join("watch.sock"),
            lock: state.join("watch.lock"),
            cookies: state.join("cookies2"),
            load: &mut load,
            stop: &|| true,
            say: &|_| {},
            test_hooks: false,
            stall: None,
            quiet: None,
            on_quiet: &mut |_| {},
        })
        .unwrap_err();
        assert!(
            matches!(err, sgard_watch::Error::AlreadyRunning(_)),
            "{err}"
        );
        r.socket.clone()
    };
    let err = ask(&socket, "s", None, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(err, sgard_watch::Error::NotRunning(_)), "{err}");
}

#[test]
fn a_blind_repository_stays_named_when_a_folder_above_it_is_watched_afresh() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    let state = d.path().join("state");
    let repo = home.join("src/dotfiles");
    let elsewhere = d.path().join("elsewhere");
    for p in [&repo, &state, &elsewhere] {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(home.join("src/.editorconfig"), "a").unwrap();
    // A folder inside the repository through a symlink: it cannot be
    // watched whole, so every answer names it.
    std::os::unix::fs::symlink(&elsewhere, repo.join("blobs")).unwrap();
    let tracked = vec![home.join("src/.editorconfig")];
    let r = start_with_repo(&home, &state, tracked, "one", Some(repo.clone()));
    let blind = || {
        sgard_watch::probe(&r.socket, Duration::from_secs(5))
            .unwrap()
            .blind
    };
    let _ = q(&r, "one", None);
    assert_eq!(blind(), vec![repo.clone()]);

    // The folder above it renamed away and back: watched afresh, and the
    // repository with it, still blind.
    std::fs::rename(home.join("src"), home.join("src.old")).unwrap();
    let _ = q(&r, "one", None);
    std::fs::rename(home.join("src.old"), home.join("src")).unwrap();
    let first = q(&r, "one", None);
    assert_eq!(blind(), vec![repo.clone()]);
    // So a blob lost there is a change in the repository.
    std::fs::write(elsewhere.join("x"), "a").unwrap();
    std::fs::remove_file(elsewhere.join("x")).unwrap();
    let next = q(&r, "one", Some(first.token));
    assert!(
        next.changed.unwrap().iter().any(|p| p.starts_with(&repo)),
        "the repository is not named"
    );
}

/// Unmounts what a test mounted, however it ends.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// `mount --bind FROM TO`, undone when dropped; `None` where mounting is
/// not permitted.
fn bind(from: &Path, to: &Path) -> Option<Mounted> {
    let ok = std::process::Command::new("mount")
        .arg("--bind")
        .arg(from)
        .arg(to)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| Mounted(to.to_path_buf()))
}

/// One test for both, so no other test here mounts meanwhile (a change of
/// the mount table makes the watcher look again, and name the repository).
#[test]
fn a_mount_makes_no_event_but_is_a_change() {
    if !mount_over_a_watched_folder() {
        eprintln!("skipped: mount --bind is not permitted here");
        return;
    }
    mount_inside_the_repository();
}

fn mount_over_a_watched_folder() -> bool {
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    let state = d.path().join("state");
    let elsewhere = d.path().join("elsewhere");
    for p in [&home.join(".config/nvim"), &state, &elsewhere] {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(home.join(".config/nvim/init.lua"), "a").unwrap();
    std::fs::write(elsewhere.join("init.lua"), "b").unwrap();
    let tracked = vec![home.join(".config/nvim/init.lua")];
    let r = start(&home, &state, tracked.clone(), "one");
    let first = q(&r, "one", None);
    let none = q(&r, "one", Some(first.token));
    assert_eq!(none.changed.unwrap(), Vec::<PathBuf>::new());

    // A mount makes no event anywhere: only the mount table says.
    let target = home.join(".config/nvim");
    let Some(mounted) = bind(&elsewhere, &target) else {
        return false;
    };
    let after = q(&r, "one", Some(none.token));
    let changed = after.changed.unwrap();
    assert!(affects(&changed, &tracked[0]), "{changed:?}");
    // And unmounting is one too.
    drop(mounted);
    let back = q(&r, "one", Some(after.token));
    let changed = back.changed.unwrap();
    assert!(affects(&changed, &tracked[0]), "{changed:?}");
    true
}

fn mount_inside_the_repository() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    let state = d.path().join("state");
    let repo = home.join(".sgard");
    let elsewhere = d.path().join("elsewhere");
    for p in [&repo.join("blobs/ab"), &state, &elsewhere] {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(home.join(".zshrc"), "a").unwrap();
    let tracked = vec![home.join(".zshrc")];
    let r = start_with_repo(&home, &state, tracked, "one", Some(repo.clone()));
    let first = q(&r, "one", None);
    let none = q(&r, "one", Some(first.token));
    assert_eq!(none.changed.unwrap(), Vec::<PathBuf>::new());
    let target = repo.join("blobs/ab");
    let _mounted = bind(&elsewhere, &target).expect("mounting worked a moment ago");
    let after = q(&r, "one", Some(none.token));
    let changed = after.changed.unwrap();
    assert!(changed.iter().any(|p| p.starts_with(&repo)), "{changed:?}");
    // And what changes in the mounted folder is seen from now on.
    std::fs::write(target.join("x"), "a").unwrap();
    let next = q(&r, "one", Some(after.token));
    let changed = next.changed.unwrap();
    assert!(changed.iter().any(|p| p.starts_with(&repo)), "{changed:?}");
}
