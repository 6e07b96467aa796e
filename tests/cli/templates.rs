//! Templates, machine data, `edit` and scripts, through the binary: two
//! machines (host names, tags, local data) sharing one repository.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use crate::common::{Run, TestEnv};
use crate::machines::Machine;

const GITCONFIG: &str = "[user]\n    name = Ada\n    email = {{ data.git.email }}\n\
[core]\n    host = {{ sgard.hostname }} ({{ sgard.os }}, {{ sgard.username }})\n\
{% if 'laptop' in sgard.tags %}[credential]\n    helper = cache\n{% endif %}";

/// A shared repository, a desktop and a tagged laptop with its own data.
fn two_machines() -> (tempfile::TempDir, Machine, Machine) {
    let shared = tempfile::tempdir().unwrap();
    let repo = shared.path().join("dotfiles");
    let desk = Machine::new("desktop", &repo);
    let lap = Machine::new("laptop", &repo);
    desk.sg(&["init"]).ok();
    fs::write(
        repo.join("data.yaml"),
        "git:\n  email: ada@home.example\n  signing: false\n",
    )
    .unwrap();
    lap.sg(&["tag", "add", "laptop"]).ok();
    lap.write(
        ".config/sgard/data.yaml",
        "git:\n  email: ada@work.example\n",
    );
    (shared, desk, lap)
}

/// Writes an executable script.
fn write_exe(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every file under `dir` that contains `needle`.
pub(crate) fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for e in walk(dir) {
        if fs::read(&e).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle)) {
            out.push(e.display().to_string());
        }
    }
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A scripted editor: records the file it was given (its last argument) (and that folder's
/// and file's modes), then appends `line` to it and exits `code`.
fn editor(t: &TestEnv, line: &str, code: i32) -> String {
    let script = t.outside().join(format!("editor-{code}.sh"));
    let log = t.outside().join("editor.log");
    write_exe(
        &script,
        &format!(
            "#!/bin/sh\neval f=\\${{$#}}\nprintf '%s %s %s\\n' \"$f\" \"$(stat -c %a \"$(dirname \"$f\")\")\" \
             \"$(stat -c %a \"$f\")\" >> '{}'\nprintf '%s\\n' '{line}' >> \"$f\"\nexit {code}\n",
            log.display()
        ),
    );
    script.display().to_string()
}

/// The files the scripted editor was given, with their folder's and own modes.
fn edited(t: &TestEnv) -> Vec<(String, String, String)> {
    fs::read_to_string(t.outside().join("editor.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let mut w = l.rsplitn(3, ' ');
            let file_mode = w.next().unwrap().to_owned();
            let dir_mode = w.next().unwrap().to_owned();
            (w.next().unwrap().to_owned(), dir_mode, file_mode)
        })
        .collect()
}

fn sg_env(m: &Machine, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = m.command(args);
    c.env("SGARD_TEST_ARGON2", "1").stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap().into()
}

#[test]
fn one_template_renders_for_each_machine_from_shared_and_machine_data() {
    let (_shared, desk, lap) = two_machines();
    desk.write(".gitconfig", GITCONFIG);
    desk.sg(&["add", "--template", "~/.gitconfig"]).ok();
    // The source is stored; the rendering is what belongs on disk.
    assert_eq!(desk.state("~/.gitconfig"), "behind");
    let manifest = fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap();
    assert!(manifest.contains("type: template"), "{manifest}");
    desk.sg(&["restore", "~/.gitconfig"]).ok();
    let home = desk.read(".gitconfig");
    assert!(home.contains("email = ada@home.example"), "{home}");
    assert!(home.contains("host = desktop (linux, tester)"), "{home}");
    assert!(!home.contains("credential"), "{home}");
    assert_eq!(desk.state("~/.gitconfig"), "ok");
    desk.sg(&["checkpoint", "-m", "gitconfig"]).ok();

    // The laptop: its tag, its host name, its own e-mail over the shared one.
    lap.sg(&["restore"])
        .ok()
        .stdout_has("created    ~/.gitconfig");
    let laptop = lap.read(".gitconfig");
    assert!(laptop.contains("email = ada@work.example"), "{laptop}");
    assert!(laptop.contains("host = laptop (linux, tester)"), "{laptop}");
    assert!(
        laptop.contains("[credential]\n    helper = cache\n"),
        "{laptop}"
    );
    assert_eq!(lap.state("~/.gitconfig"), "ok");
    let r = lap.sg(&["render", "~/.gitconfig"]);
    assert_eq!(r.ok().stdout, laptop);
    let r = lap.sg(&["data", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.ok().stdout).unwrap();
    assert_eq!(v["data"]["git"]["email"], "ada@work.example");
    assert_eq!(v["data"]["git"]["signing"], false, "shared keys stay");
    lap.sg(&["data"]).ok().stdout_has("email: ada@work.example");
    // `diff` compares the disk with the rendering, not the source.
    lap.sg(&["diff", "--exit-code", "~/.gitconfig"]).ok();

    // Shared data changes: the rendering is behind, and restore brings it.
    fs::write(
        desk.repo.join("data.yaml"),
        "git:\n  email: ada@new.example\n",
    )
    .unwrap();
    assert_eq!(desk.state("~/.gitconfig"), "behind");
    desk.sg(&["restore", "~/.gitconfig"]).ok();
    assert!(desk.read(".gitconfig").contains("ada@new.example"));
    assert_eq!(
        lap.state("~/.gitconfig"),
        "ok",
        "the laptop's own e-mail wins"
    );
}

#[test]
fn an_edited_rendering_is_modified_and_checkpoint_keeps_the_source() {
    let (_shared, desk, _lap) = two_machines();
    desk.write(".gitconfig", GITCONFIG);
    desk.sg(&["add", "--template", "~/.gitconfig"]).ok();
    desk.sg(&["restore", "~/.gitconfig"]).ok();
    let rendered = desk.read(".gitconfig");
    desk.write(".gitconfig", format!("{rendered}# local edit\n"));
    assert_eq!(desk.state("~/.gitconfig"), "modified");
    let before = fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap();
    desk.sg(&["checkpoint", "-m", "try"])
        .ok()
        .stdout_has("template   ~/.gitconfig")
        .stdout_has("sgard edit ~/.gitconfig");
    let after = fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap();
    let hash = |m: &str| {
        m.lines()
            .skip_while(|l| !l.contains("~/.gitconfig"))
            .find(|l| l.trim_start().starts_with("hash:"))
            .map(str::to_owned)
    };
    assert_eq!(hash(&before), hash(&after), "the source is untouched");
    assert_eq!(desk.sg(&["render", "~/.gitconfig"]).ok().stdout, rendered);
    // A plain `add` never takes the rendering as the source either.
    desk.sg(&["add", "~/.gitconfig"])
        .ok()
        .stderr_has("is a template");
    desk.sg(&["restore", "--force", "~/.gitconfig"]).ok();
    assert_eq!(desk.read(".gitconfig"), rendered);
}

#[test]
fn template_errors_name_the_problem_and_leave_the_file_untouched() {
    let (_shared, desk, _lap) = two_machines();
    desk.write(".good", "ok {{ sgard.hostname }}\n");
    desk.write(".undef", "a = 1\nb = {{ data.nope.deeper }}\n");
    desk.write(".syntax", "x\ny\n{% if %}\n");
    desk.sg(&["add", "--template", "~/.good", "~/.undef", "~/.syntax"])
        .ok()
        .stderr_has("~/.undef: stored, but it does not render");
    let r = desk.sg(&["restore"]);
    r.code(1)
        .stderr_has("~/.undef: template: undefined variable")
        .stderr_has("line 2")
        .stderr_has("~/.syntax: template: syntax error")
        .stderr_has("line 3");
    // The others went on; the broken ones were not written.
    assert_eq!(desk.read(".good"), "ok desktop\n");
    assert_eq!(desk.read(".undef"), "a = 1\nb = {{ data.nope.deeper }}\n");
    assert_eq!(desk.read(".syntax"), "x\ny\n{% if %}\n");
    // An `error` line: status exits 3.
    desk.sg(&["status"])
        .code(3)
        .stderr_has("undefined variable");
    // Data that is not a mapping names its file.
    fs::write(desk.repo.join("data.yaml"), "- a\n- b\n").unwrap();
    desk.sg(&["render", "~/.good"])
        .code(1)
        .stderr_has("data.yaml: must be a mapping");
    fs::write(desk.repo.join("data.yaml"), "git: [unclosed\n").unwrap();
    desk.sg(&["data"]).code(1).stderr_has("data.yaml");
}

#[test]
fn an_encrypted_template_keeps_no_plaintext_and_edits_and_restores() {
    let (_shared, desk, _lap) = two_machines();
    let pw = [("SGARD_PASSPHRASE", "correct horse")];
    sg_env(&desk, &["encrypt", "init"], &pw).ok();
    fs::write(desk.repo.join("data.yaml"), "token: tok-from-data\n").unwrap();
    desk.write(
        ".netrc",
        "machine example.org password {{ data.token }} # SOURCE-MARK\n",
    );
    sg_env(&desk, &["add", "--template", "--encrypt", "~/.netrc"], &pw).ok();
    assert!(
        files_containing(&desk.repo, b"SOURCE-MARK").is_empty(),
        "nothing in the repository holds the source in plaintext"
    );
    sg_env(&desk, &["restore", "~/.netrc"], &pw).ok();
    assert_eq!(
        desk.read(".netrc"),
        "machine example.org password tok-from-data # SOURCE-MARK\n"
    );
    // edit opens a decrypted copy of the source in a private folder.
    let ed = editor(&desk.t, "# by {{ sgard.hostname }}", 0);
    sg_env(&desk, &["edit", "~/.netrc"], &[pw[0], ("EDITOR", &ed)])
        .ok()
        .stdout_has("stored     ~/.netrc");
    let (file, dir_mode, file_mode) = edited(&desk.t).pop().unwrap();
    assert!(
        !Path::new(&file).starts_with(desk.path("")),
        "a copy, not the home file"
    );
    assert_eq!((dir_mode.as_str(), file_mode.as_str()), ("700", "600"));
    assert!(!Path::new(&file).exists(), "the decrypted copy is gone");
    assert!(!Path::new(&file).parent().unwrap().exists());
    assert!(
        desk.read(".netrc")
            .ends_with("# SOURCE-MARK\n# by desktop\n")
    );
    assert!(files_containing(&desk.repo, b"SOURCE-MARK").is_empty());
    assert_eq!(desk.state("~/.netrc"), "ok");
    let r = sg_env(&desk, &["render", "~/.netrc"], &pw);
    assert!(r.ok().stdout.contains("# by desktop"));
}

#[test]
fn edit_stores_plain_files_and_templates_and_a_failing_editor_changes_nothing() {
    let (_shared, desk, _lap) = two_machines();
    desk.write(".plain", "one\n");
    desk.write(".tmpl", "host {{ sgard.hostname }}\n");
    desk.sg(&["add", "~/.plain"]).ok();
    desk.sg(&["add", "--template", "~/.tmpl"]).ok();
    desk.sg(&["restore", "~/.tmpl"]).ok();
    let ok = editor(&desk.t, "two", 0);
    desk.sg(&["checkpoint", "-m", "before"]).ok();
    let run = |args: &[&str], ed: &str| sg_env(&desk, args, &[("EDITOR", ed)]);
    run(&["edit", "~/.plain"], &ok)
        .ok()
        .stdout_has("stored     ~/.plain");
    let (file, _, _) = edited(&desk.t).pop().unwrap();
    assert_eq!(
        file,
        desk.path(".plain").display().to_string(),
        "the file itself"
    );
    assert_eq!(desk.read(".plain"), "one\ntwo\n");
    assert_eq!(desk.state("~/.plain"), "ok");
    desk.sg(&["diff", "--exit-code", "~/.plain"]).ok();

    // A template: the source is edited; the disk gets the new rendering.
    run(&["edit", "~/.tmpl"], &ok).ok();
    assert_eq!(desk.read(".tmpl"), "host desktop\ntwo\n");
    // --no-apply stores the source and leaves the disk.
    let more = editor(&desk.t, "{{ sgard.os }}", 0);
    run(&["edit", "--no-apply", "~/.tmpl"], &more)
        .ok()
        .stdout_has("not applied");
    assert_eq!(desk.read(".tmpl"), "host desktop\ntwo\n");
    assert_eq!(
        desk.sg(&["render", "~/.tmpl"]).ok().stdout,
        "host desktop\ntwo\nlinux\n"
    );
    assert_eq!(desk.state("~/.tmpl"), "behind");

    // An editor that fails changes nothing, even what it wrote.
    let manifest = fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap();
    let bad = editor(&desk.t, "three", 1);
    run(&["edit", "~/.tmpl"], &bad)
        .code(1)
        .stderr_has("nothing was changed");
    assert_eq!(
        fs::read_to_string(desk.repo.join("manifest.yaml")).unwrap(),
        manifest
    );
    // `EDITOR` with arguments works (`sh -c`), and VISUAL comes first.
    let r = sg_env(
        &desk,
        &["edit", "~/.plain"],
        &[("VISUAL", &format!("{ok} --wait")), ("EDITOR", "false")],
    );
    r.ok();
    desk.sg(&["edit", "~/.nope"])
        .code(1)
        .stderr_has("not tracked");
    // A script must be executable: what happened, then what to do.
    desk.write(".notx", "echo hi\n");
    desk.t.chmod(".notx", 0o644);
    desk.sg(&["add", "--run", "once", "~/.notx"]).ok().stderr_has(
        "skipped ~/.notx: is not executable; a script must be (`chmod +x` it, then add it with --run)\n",
    );
    // A tracked file gone from disk: what happened, then what to do.
    fs::remove_file(desk.path(".plain")).unwrap();
    run(&["edit", "~/.plain"], &ok).code(1).stderr_has(
        "sgard: error: ~/.plain: not a file on disk; `sgard restore ~/.plain` brings it back first\n",
    );
}

/// A script that appends `tag`, its working folder and SGARD_OS to the
/// log, then exits with the code in `<outside>/exit-<tag>` (0 if none).
fn script(m: &Machine, rel: &str, tag: &str) -> String {
    let log = m.t.outside().join("scripts.log");
    let code = m.t.outside().join(format!("exit-{tag}"));
    let path = m.write(
        rel,
        format!(
            "#!/bin/sh\necho \"{tag} $PWD $SGARD_OS $SGARD_HOSTNAME\" >> '{}'\n\
             [ -f '{}' ] && exit \"$(cat '{}')\"\nexit 0\n",
            log.display(),
            code.display(),
            code.display()
        ),
    );
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    format!("~/{rel}")
}

fn ran(m: &Machine) -> Vec<String> {
    fs::read_to_string(m.t.outside().join("scripts.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.split(' ').next().unwrap().to_owned())
        .collect()
}

#[test]
fn once_and_onchange_scripts_run_when_due_and_again_after_a_failure() {
    let (_shared, desk, lap) = two_machines();
    let once = script(&desk, "bin/setup", "once");
    let change = script(&desk, "bin/fonts", "change");
    desk.write("bin/plain", "not a script\n");
    desk.sg(&["add", "--run", "once", &once]).ok();
    desk.sg(&["add", "--run", "onchange", &change]).ok();
    desk.sg(&["add", "--run", "once", "~/bin/plain"])
        .ok()
        .stderr_has("is not executable");
    // Never by status, diff, checkpoint or add.
    desk.sg(&["status"]).ok();
    desk.sg(&["checkpoint", "-m", "scripts"]).ok();
    assert!(ran(&desk).is_empty());

    desk.sg(&["restore", "-n"])
        .ok()
        .stdout_has("would run  ~/bin/fonts (onchange)")
        .stdout_has("would run  ~/bin/setup (once)");
    assert!(ran(&desk).is_empty(), "a dry run runs nothing");
    desk.sg(&["restore"]).ok();
    assert_eq!(ran(&desk), ["change", "once"], "in path order");
    let line = fs::read_to_string(desk.t.outside().join("scripts.log")).unwrap();
    assert!(
        line.contains(&format!(
            "{} linux desktop",
            desk.path("").display().to_string().trim_end_matches('/')
        )),
        "{line}"
    );
    desk.sg(&["restore"]).ok();
    desk.sg(&["run-scripts"])
        .ok()
        .stdout_has("No scripts are due.");
    assert_eq!(ran(&desk).len(), 2, "nothing is due twice");

    // A new content: both are due again.
    let mut text = fs::read_to_string(desk.path("bin/fonts")).unwrap();
    text.push_str("# v2\n");
    desk.write("bin/fonts", &text);
    desk.sg(&["checkpoint", "-m", "v2"]).ok();
    desk.sg(&["run-scripts"]).ok();
    assert_eq!(ran(&desk), ["change", "once", "change"]);

    // A failing script: exit 1 naming it, runs again next time.
    fs::write(desk.t.outside().join("exit-change"), "3").unwrap();
    let mut text = fs::read_to_string(desk.path("bin/fonts")).unwrap();
    text.push_str("# v3\n");
    desk.write("bin/fonts", &text);
    desk.sg(&["checkpoint", "-m", "v3"]).ok();
    let r = desk.sg(&["restore"]);
    r.code(1).stderr_has(
        "sgard: error: ~/bin/fonts: the script failed (exit status: 3); it runs again next time",
    );
    assert_eq!(r.stderr.matches("~/bin/fonts").count(), 1, "{r:#?}");
    fs::remove_file(desk.t.outside().join("exit-change")).unwrap();
    desk.sg(&["restore", "--no-scripts"]).ok();
    assert_eq!(ran(&desk).len(), 4, "--no-scripts runs nothing");
    desk.sg(&["restore"]).ok();
    assert_eq!(ran(&desk).len(), 5, "the failed run is due again");
    desk.sg(&["restore"]).ok();
    assert_eq!(ran(&desk).len(), 5);

    // Another machine runs each once for itself, after its own restore.
    lap.sg(&["restore"]).ok();
    let lines = fs::read_to_string(lap.t.outside().join("scripts.log")).unwrap_or_default();
    let desk_lines = fs::read_to_string(desk.t.outside().join("scripts.log")).unwrap();
    assert!(
        lines.is_empty(),
        "the laptop's scripts log to the desktop's folder"
    );
    assert!(desk_lines.contains("laptop"), "{desk_lines}");
}

#[test]
fn restore_at_of_a_template_renders_its_old_source() {
    let (_shared, desk, _lap) = two_machines();
    desk.write(".t", "v1 {{ sgard.hostname }}\n");
    desk.sg(&["add", "--template", "~/.t"]).ok();
    desk.sg(&["checkpoint", "-m", "one"]).ok();
    let ed = editor(&desk.t, "v2", 0);
    sg_env(&desk, &["edit", "~/.t"], &[("EDITOR", &ed)]).ok();
    desk.sg(&["checkpoint", "-m", "two"]).ok();
    assert_eq!(desk.read(".t"), "v1 desktop\nv2\n");
    desk.sg(&["restore", "--force", "--at", "@~1", "~/.t"]).ok();
    assert_eq!(desk.read(".t"), "v1 desktop\n");
}

#[test]
fn a_template_source_lives_where_the_go_sgards_prune_never_deletes() {
    let (_shared, desk, _lap) = two_machines();
    desk.write(".t", "hello {{ sgard.hostname }}\n");
    desk.sg(&["add", "--template", "~/.t"]).ok();
    let h = crate::common::sha("hello {{ sgard.hostname }}\n");
    let names = |dir: &str| -> Vec<String> {
        walk(&desk.repo.join(dir))
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect()
    };
    // The Go sgard's prune deletes every file under blobs/ that no
    // `type: file` entry names: the source is not there, but in chunks.
    assert!(!names("blobs").contains(&h), "not a blob");
    assert!(names("chunk-lists").contains(&h), "a chunk list");
    // So is the template data the manifest records.
    fs::write(desk.repo.join("data.yaml"), "k: v\n").unwrap();
    desk.sg(&["checkpoint", "-m", "data"]).ok();
    let d = crate::common::sha("k: v\n");
    assert!(
        fs::read_to_string(desk.repo.join("manifest.yaml"))
            .unwrap()
            .contains(&format!("data: {d}"))
    );
    assert!(!names("blobs").contains(&d) && names("chunk-lists").contains(&d));
    // Even a repository kept Go-readable keeps them there.
    desk.sg(&["chunking", "--off"]).ok();
    assert!(!names("blobs").contains(&h));
    desk.sg(&["prune"]).ok();
    desk.sg(&["verify"]).ok();
    desk.sg(&["restore", "~/.t"]).ok();
    assert_eq!(desk.read(".t"), "hello desktop\n");
    // merge never folds a rendering into a source.
    desk.write(".t", "changed\n");
    desk.sg(&["merge", "~/.t"])
        .code(1)
        .stderr_has("is a template");
}

#[test]
fn mirror_up_undo_and_edit_never_trade_a_source_for_a_rendering() {
    let (_shared, desk, _lap) = two_machines();
    desk.write("d/t", "h={{ sgard.hostname }}\n");
    desk.sg(&["add", "--template", "~/d/t"]).ok();
    desk.sg(&["restore", "~/d/t"]).ok();
    // mirror up of the folder: the edited rendering is not the new source.
    desk.write("d/t", "edited\n");
    desk.sg(&["mirror", "up", "~/d"]).ok();
    assert_eq!(desk.sg(&["render", "~/d/t"]).ok().stdout, "h=desktop\n");
    // restore -f over the local edit, then undo brings the edit back.
    desk.sg(&["restore", "-f", "~/d/t"]).ok();
    assert_eq!(desk.read("d/t"), "h=desktop\n");
    desk.sg(&["undo"]).ok();
    assert_eq!(desk.read("d/t"), "edited\n");
    // edit while the disk has changes of its own: stored, not applied.
    let ed = editor(&desk.t, "# more", 0);
    sg_env(&desk, &["edit", "~/d/t"], &[("EDITOR", &ed)])
        .ok()
        .stdout_has("not applied: the file on disk has changes of its own");
    assert_eq!(desk.read("d/t"), "edited\n");
    assert_eq!(
        desk.sg(&["render", "~/d/t"]).ok().stdout,
        "h=desktop\n# more\n"
    );
}

#[test]
fn an_edit_the_repository_overtook_is_kept_and_exits_4() {
    let (_shared, desk, _lap) = two_machines();
    desk.write(".t", "v {{ sgard.os }}\n");
    desk.sg(&["add", "--template", "~/.t"]).ok();
    // An editor during which another sgard changes the entry.
    let script = desk.t.outside().join("racing-editor.sh");
    write_exe(
        &script,
        &format!(
            "#!/bin/sh\neval f=\\${{$#}}\necho mine >> \"$f\"\n'{}' --repo '{}' lock '~/.t' >/dev/null\n",
            TestEnv::bin().display(),
            desk.repo.display()
        ),
    );
    let r = sg_env(
        &desk,
        &["edit", "~/.t"],
        &[("EDITOR", script.to_str().unwrap())],
    );
    r.code(4).stderr_has("your edit is kept in");
    let kept = r
        .stderr
        .split("your edit is kept in ")
        .nth(1)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(
        fs::read_to_string(&kept).unwrap(),
        "v {{ sgard.os }}\nmine\n"
    );
    fs::remove_dir_all(Path::new(&kept).parent().unwrap()).unwrap();
}

#[test]
fn a_script_may_run_sgard_itself() {
    let (_shared, desk, _lap) = two_machines();
    desk.write("x", "x\n");
    let path = desk.write(
        "bin/track",
        format!(
            "#!/bin/sh\ntimeout 30 '{}' --repo '{}' add ~/x || exit 9\n",
            TestEnv::bin().display(),
            desk.repo.display()
        ),
    );
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    desk.sg(&["add", "--run", "once", "~/bin/track"]).ok();
    desk.sg(&["run-scripts"])
        .ok()
        .stdout_has("running    ~/bin/track");
    desk.sg(&["list"]).ok().stdout_has("~/x");
}

#[test]
fn a_termination_request_during_edit_stores_nothing_and_removes_the_copy() {
    let (_shared, desk, _lap) = two_machines();
    desk.write(".t", "v {{ sgard.os }}\n");
    desk.sg(&["add", "--template", "~/.t"]).ok();
    // The editor: note the copy, ask sgard (its grandparent) to end, then
    // save an edit and exit 0 as if nothing happened.
    let log = desk.t.outside().join("copy.log");
    let script = desk.t.outside().join("term-editor.sh");
    write_exe(
        &script,
        &format!(
            "#!/bin/sh\neval f=\\${{$#}}\necho \"$f\" > '{}'\n\
             kill -TERM \"$(ps -o ppid= -p $PPID | tr -d ' ')\"\nsleep 0.3\necho mine >> \"$f\"\n",
            log.display()
        ),
    );
    let r = sg_env(
        &desk,
        &["edit", "~/.t"],
        &[("EDITOR", script.to_str().unwrap())],
    );
    r.code(130);
    let copy = fs::read_to_string(&log).unwrap();
    assert!(!Path::new(copy.trim()).exists(), "the copy is removed");
    assert_eq!(
        desk.sg(&["render", "~/.t"]).ok().stdout,
        "v linux\n",
        "nothing stored"
    );
}

#[test]
fn an_edit_of_a_secret_asks_for_the_passphrase_once() {
    let (_shared, desk, _lap) = two_machines();
    sg_env(&desk, &["encrypt", "init"], &[("SGARD_PASSPHRASE", "pw")]).ok();
    desk.write(".netrc", "secret\n");
    sg_env(
        &desk,
        &["add", "--encrypt", "~/.netrc"],
        &[("SGARD_PASSPHRASE", "pw")],
    )
    .ok();
    let count = desk.t.outside().join("asked");
    let ask = format!("echo x >> '{}'; echo pw", count.display());
    let ed = editor(&desk.t, "more", 0);
    sg_env(
        &desk,
        &["edit", "~/.netrc"],
        &[("SGARD_PASSPHRASE_COMMAND", &ask), ("EDITOR", &ed)],
    )
    .ok()
    .stdout_has("stored     ~/.netrc");
    assert_eq!(fs::read_to_string(&count).unwrap().lines().count(), 1);
    assert_eq!(desk.read(".netrc"), "secret\nmore\n");
}
