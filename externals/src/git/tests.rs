use super::*;

/// Runs `git ARGS` in `dir` as the test's author; its standard output.
fn run(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A git repository at `dir` with one commit of `files` (name, content),
/// tagged `v1`, on branch `main`.
fn repo(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    run(dir, &["init", "-q", "-b", "main"]);
    let mut links = Vec::new();
    for (name, content) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        if let Some(target) = content.strip_prefix("-> ") {
            links.push((*name, target));
        } else {
            std::fs::write(&p, content).unwrap();
        }
    }
    run(dir, &["add", "-A"]);
    // Symlinks go straight into the index: making one in the work tree
    // takes a privilege on Windows.
    for (name, target) in links {
        let blob = dir.join(".git").join("link-target");
        std::fs::write(&blob, target).unwrap();
        let id = run(dir, &["hash-object", "-w", "--", blob.to_str().unwrap()]);
        let info = format!("120000,{},{name}", id.trim());
        run(dir, &["update-index", "--add", "--cacheinfo", &info]);
    }
    run(dir, &["commit", "-q", "-m", "one"]);
    run(dir, &["tag", "v1"]);
}

/// A `file://` URL of the folder `dir` (Windows: `file:///C:/…`).
fn url(dir: &Path) -> String {
    let path = dir.to_str().unwrap().replace('\\', "/");
    if path.starts_with('/') {
        format!("file://{path}")
    } else {
        format!("file:///{path}")
    }
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs git for Windows, which wine has not: run with --ignored where it is installed"
)]
fn a_tag_a_branch_and_a_commit_resolve_and_check_out_without_dot_git() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    repo(
        &src,
        &[
            ("plugin.zsh", "echo hi\n"),
            ("lib/a.zsh", "a\n"),
            ("l", "-> lib/a.zsh"),
        ],
    );
    let u = url(&src);
    let l = Limits::default();
    let tag = resolve(&u, Some("v1"), &l).unwrap();
    assert_eq!(tag.kind, RefKind::Tag);
    assert!(tag.kind.pins());
    let branch = resolve(&u, Some("main"), &l).unwrap();
    assert_eq!(branch.kind, RefKind::Branch);
    assert_eq!(branch.commit, tag.commit);
    assert_eq!(resolve(&u, None, &l).unwrap().kind, RefKind::Head);
    let by_id = resolve(&u, Some(&tag.commit), &l).unwrap();
    assert_eq!(by_id.kind, RefKind::Commit);
    for (i, at) in [tag, by_id].iter().enumerate() {
        let scratch = t.path().join(format!("s{i}"));
        std::fs::create_dir(&scratch).unwrap();
        let dest = t.path().join(format!("d{i}"));
        let done = checkout(&u, at, &scratch, &dest, &l).unwrap();
        assert_eq!(done.files, 3);
        assert_eq!(std::fs::read(dest.join("lib/a.zsh")).unwrap(), b"a\n");
        assert!(!dest.join(".git").exists());
    }
    let e = resolve(&u, Some("nope"), &l).unwrap_err().to_string();
    assert!(e.contains("no branch or tag \"nope\""), "{e}");
    assert!(resolve("--upload-pack=evil", None, &l).is_err());
    assert!(resolve(&u, Some("--evil"), &l).is_err());
    assert!(resolve("relative/repo", None, &l).is_err());
    assert!(resolve("ext::sh -c evil", None, &l).is_err());
    let gone = resolve(&url(&t.path().join("none")), None, &l).unwrap_err();
    assert!(matches!(gone, Error::Fetch { .. }));
}

/// Unix: a checkout of git for Windows makes a symlink a plain file
/// holding its target unless `core.symlinks` is on, which takes a
/// privilege.
#[cfg(unix)]
#[test]
fn a_symlink_out_of_the_checkout_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    repo(&src, &[("ok", "x"), ("evil", "-> ../../etc/passwd")]);
    let u = url(&src);
    let l = Limits::default();
    let at = resolve(&u, Some("v1"), &l).unwrap();
    let scratch = t.path().join("s");
    std::fs::create_dir(&scratch).unwrap();
    let e = checkout(&u, &at, &scratch, &t.path().join("d"), &l).unwrap_err();
    assert!(e.to_string().contains("points outside"), "{e}");
    assert!(!t.path().join("d").exists());
}
