use super::*;

/// A git repository at `dir` with one commit of `files` (name, content),
/// tagged `v1`, on branch `main`.
fn repo(dir: &Path, files: &[(&str, &str)]) {
    let run = |args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    std::fs::create_dir_all(dir).unwrap();
    run(&["init", "-q", "-b", "main"]);
    for (name, content) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        if let Some(target) = content.strip_prefix("-> ") {
            std::os::unix::fs::symlink(target, &p).unwrap();
        } else {
            std::fs::write(&p, content).unwrap();
        }
    }
    run(&["add", "-A"]);
    run(&["commit", "-q", "-m", "one"]);
    run(&["tag", "v1"]);
}

fn url(dir: &Path) -> String {
    format!("file://{}", dir.display())
}

#[test]
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
