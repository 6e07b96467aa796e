use super::*;
use std::fs;

const H1: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

fn go_manifest() -> String {
    format!(
        "version: 1
created: 2026-03-23T12:00:00.123456789Z
updated: \"2026-03-24T08:30:00Z\"
message: first
files:
    - path: ~/.zshrc
      hash: {H1}
      type: file
      mode: \"0644\"
      updated: 2026-03-23T12:00:00.5Z
    - path: ~/.bashrc
      hash: {H1}
      locked: true
      type: file
      mode: \"0600\"
      updated: 2026-03-23T12:00:00Z
      only:
        - os:linux
        - work
    - path: ~/.hl
      type: link
      mode: \"0777\"
      target: /etc/hosts
      updated: 2026-03-23T12:00:00Z
    - path: /etc/app
      type: directory
      mode: \"0755\"
      updated: 0001-01-01T00:00:00Z
exclude:
    - ~/.config/app/sub
encryption:
    algorithm: xchacha20-poly1305
    kek_slots:
        passphrase:
            type: passphrase
            argon2_time: 3
            argon2_memory: 65536
            argon2_threads: 4
            salt: c2FsdHNhbHRzYWx0c2FsdA==
            wrapped_dek: d3JhcHBlZA==
some_future_field: ignored
"
    )
}

#[test]
fn reads_what_go_writes() {
    let m = Manifest::from_yaml(&go_manifest()).unwrap();
    assert_eq!(m.version, 1);
    assert_eq!(m.created.to_string(), "2026-03-23T12:00:00.123456789Z");
    assert_eq!(m.updated.to_string(), "2026-03-24T08:30:00Z");
    assert_eq!(m.message.as_deref(), Some("first"));
    let paths: Vec<_> = m.files.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["/etc/app", "~/.bashrc", "~/.hl", "~/.zshrc"]);
    let b = m.get("~/.bashrc").unwrap();
    assert!(b.locked);
    assert_eq!(b.mode.unwrap().bits(), 0o600);
    assert_eq!(b.only, ["os:linux", "work"]);
    assert_eq!(
        m.get("~/.hl").unwrap().target.as_deref(),
        Some("/etc/hosts")
    );
    assert_eq!(m.get("/etc/app").unwrap().kind, EntryKind::Directory);
    assert_eq!(
        m.get("~/.zshrc").unwrap().updated.to_string(),
        "2026-03-23T12:00:00.5Z"
    );
    assert_eq!(m.exclude, ["~/.config/app/sub"]);
    let enc = m.encryption.as_ref().unwrap();
    assert_eq!(enc.kek_slots["passphrase"].argon2_memory, Some(65536));
}

#[test]
fn round_trips_through_our_writer() {
    let m = Manifest::from_yaml(&go_manifest()).unwrap();
    let text = m.to_yaml();
    assert!(text.contains("\n    - path: /etc/app\n      type: directory\n      mode: \"0755\"\n"));
    assert!(
        text.contains("created: 2026-03-23T12:00:00.123456789Z\n"),
        "{text}"
    );
    let back = Manifest::from_yaml(&text).unwrap();
    assert_eq!(back, m);
    // Writing is deterministic and sorted.
    assert_eq!(back.to_yaml(), text);
}

#[test]
fn hostile_strings_survive_the_writer() {
    let now = Timestamp::parse("2026-01-01T00:00:00Z").unwrap();
    let mut m = Manifest::new(now);
    m.message = Some("yes: no # \"quoted\"\nsecond line\t\u{7}\u{81}\u{9f}".into());
    // (No "~" here: nothing may be tracked below a symlink.)
    for p in [
        "~/a: b", "~/#x", "~/ space", "~/null", "~/é", "/-", "~/'q'", "~/[x]", "/~",
    ] {
        let mut e = Entry::new(p.into(), EntryKind::Link, now);
        e.target = Some(format!("{p} -> target: {{x}}"));
        m.upsert(e);
    }
    let back = Manifest::from_yaml(&m.to_yaml()).unwrap();
    assert_eq!(back, m);
}

#[test]
fn refuses_bad_entries_naming_them() {
    let cases = [
        ("type: socket", "unknown type"),
        ("type: file\n      hash: ../../etc/passwd", "malformed hash"),
        ("type: file\n      hash: ABC", "malformed hash"),
        ("type: file", "no `hash`"),
        ("type: link", "no `target`"),
        (
            &format!("type: file\n      hash: {H1}\n      mode: \"9999\""),
            "octal mode",
        ),
        (
            &format!("type: file\n      hash: {H1}\n      mode: \"17777\""),
            "octal mode",
        ),
        (
            &format!("type: file\n      hash: {H1}\n      only: [a]\n      never: [b]"),
            "mutually exclusive",
        ),
        (
            &format!("type: file\n      hash: {H1}\n      updated: soon"),
            "invalid timestamp",
        ),
        (
            &format!("type: file\n      hash: {H1}\n      run: sometimes"),
            "unknown run",
        ),
        (
            "type: link\n      target: x\n      run: once",
            "cannot be scripts",
        ),
        ("type: template", "no `hash`"),
    ];
    for (body, want) in cases {
        let text = format!("version: 1\nfiles:\n    - path: ~/f\n      {body}\n");
        let err = Manifest::from_yaml(&text).unwrap_err().to_string();
        assert!(err.contains(want), "{body}: {err}");
        assert!(err.contains("entry 1 (~/f)"), "{body}: {err}");
    }
}

#[test]
fn refuses_hostile_paths() {
    for p in [
        "~/../etc/passwd",
        "/etc/../etc/shadow",
        "relative/path",
        "~user/x",
        "~/a//b",
        "~/a/",
        "~/./a",
        "\"~/a\\0b\"",
        "\"\"",
    ] {
        let text = format!("version: 1\nfiles:\n    - path: {p}\n      type: directory\n");
        let err = Manifest::from_yaml(&text).unwrap_err().to_string();
        assert!(err.contains("entry 1"), "{p}: {err}");
    }
}

#[test]
fn refuses_duplicates_newer_versions_and_bad_yaml() {
    let dup =
        "version: 1\nfiles:\n  - {path: ~/d, type: directory}\n  - {path: ~/d, type: directory}\n";
    let err = Manifest::from_yaml(dup).unwrap_err().to_string();
    assert!(err.contains("duplicate of entry 1"), "{err}");
    // Out of order, entries are still numbered as they were read, in
    // either reader (block style is the fast one's).
    for text in [
        "version: 1\nfiles:\n  - {path: ~/d, type: directory}\n  - {path: ~/a, type: directory}\n  - {path: ~/d, type: directory}\n",
        "version: 1\nfiles:\n  - path: ~/d\n    type: directory\n  - path: ~/a\n    type: directory\n  - path: ~/d\n    type: directory\n",
    ] {
        let err = Manifest::from_yaml(text).unwrap_err().to_string();
        assert!(
            err.contains("entry 3") && err.contains("duplicate of entry 1"),
            "{err}"
        );
    }
    let unsorted = "version: 1\nfiles:\n  - path: ~/z\n    type: directory\n  - path: ~/f/x\n    type: directory\n  - path: ~/f\n    type: link\n    target: t\n";
    let err = Manifest::from_yaml(unsorted).unwrap_err().to_string();
    assert!(
        err.contains("entry 2") && err.contains("below entry 3 (~/f)"),
        "{err}"
    );
    let m = Manifest::from_yaml(&unsorted.replace("~/f/x", "~/e")).unwrap();
    let paths: Vec<&str> = m.files.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["~/e", "~/f", "~/z"]);

    let err = Manifest::from_yaml("version: 2\nfiles: []\n").unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedVersion { found: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade sgard"));

    let err = Manifest::from_yaml("version: 1\nfiles:\n  - path: [\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 3"), "{err}");

    assert!(Manifest::from_yaml("").is_err());
    assert!(Manifest::from_yaml("- just\n- a list\n").is_err());
}

#[test]
fn save_is_atomic_and_loads_back() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(MANIFEST_FILE);
    let m = Manifest::from_yaml(&go_manifest()).unwrap();
    m.save(&p).unwrap();
    assert_eq!(Manifest::load(&p).unwrap(), m);
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, [MANIFEST_FILE]);
    let err = Manifest::load(&dir.path().join("nope"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("nope"), "{err}");
}

/// The streamed rendering is the string rendering, byte for byte, past
/// many spills (entries and an `absent` list each far over 64 KiB), and a
/// failing writer's error comes back instead of being lost.
#[test]
fn streamed_yaml_is_the_same_text_and_reports_write_errors() {
    let now = Timestamp::zero();
    let mut m = Manifest::from_yaml(&go_manifest()).unwrap();
    for i in 0..3000 {
        let mut e = Entry::new(format!("~/d{}/f {i}: x", i % 7), EntryKind::File, now);
        e.hash = Some(Hash::of(format!("{i}").as_bytes()));
        e.mode = Some(Mode::from_st_mode(0o100644));
        e.only = vec![format!("host-{i}")];
        m.upsert(e);
        m.absent.push(format!("~/gone/{i}"));
    }
    let text = m.to_yaml();
    assert!(text.len() > 4 * 64 * 1024);
    let mut out = Vec::new();
    m.write_yaml(&mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), text);

    struct Full(usize);
    impl std::io::Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0 < buf.len() {
                return Err(std::io::Error::other("disk full"));
            }
            self.0 -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let err = m.write_yaml(&mut Full(100_000)).unwrap_err();
    assert_eq!(err.to_string(), "disk full");
}

#[test]
fn upsert_keeps_order_and_replaces() {
    let now = Timestamp::zero();
    let mut m = Manifest::new(now);
    for p in ["~/b", "~/a", "~/c", "~/a"] {
        m.upsert(Entry::new(p.into(), EntryKind::Directory, now));
    }
    let paths: Vec<_> = m.files.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["~/a", "~/b", "~/c"]);
    assert!(m.remove("~/b").is_some());
    assert!(m.get("~/b").is_none());
}

#[test]
fn under_is_component_wise() {
    assert!(path_is_under("~/a/sub/x", "~/a/sub"));
    assert!(path_is_under("~/a/sub", "~/a/sub"));
    assert!(!path_is_under("~/a/sub-backup/x", "~/a/sub"));
    assert!(path_is_under("~/x", "~"));
    assert!(path_is_under("/etc/x", "/"));
}

#[test]
fn refuses_entries_below_a_symlink_or_a_file() {
    let h = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
    let text = format!(
        "version: 1\nfiles:\n  - {{path: ~/lnk/through, hash: {h}, type: file}}\n  - {{path: ~/lnk-other, type: directory}}\n  - {{path: ~/lnk, type: link, target: /tmp/escape}}\n"
    );
    let err = Manifest::from_yaml(&text).unwrap_err().to_string();
    assert!(err.contains("~/lnk/through"), "{err}");
    assert!(err.contains("~/lnk)"), "{err}");
    assert!(err.contains("symlink"), "{err}");
    let text = format!(
        "version: 1\nfiles:\n  - {{path: ~/f, hash: {h}, type: file}}\n  - {{path: ~/f/x, hash: {h}, type: file}}\n"
    );
    let err = Manifest::from_yaml(&text).unwrap_err().to_string();
    assert!(err.contains("below entry 1 (~/f), a file"), "{err}");
    // Below a folder entry, and beside a link with a longer name, is fine.
    let text = format!(
        "version: 1\nfiles:\n  - {{path: ~/d, type: directory}}\n  - {{path: ~/d/x, hash: {h}, type: file}}\n  - {{path: ~/l, type: link, target: x}}\n  - {{path: ~/l2/x, hash: {h}, type: file}}\n"
    );
    Manifest::from_yaml(&text).unwrap();
}

#[test]
fn a_doc_over_borrowed_entries_renders_as_the_manifest_holding_them() {
    let now = Timestamp::parse("2026-03-23T12:00:00Z").unwrap();
    let mut m = Manifest::from_yaml(&go_manifest()).unwrap();
    m.absent = vec!["~/zz".into(), "~/absent".into()];
    // Entries held elsewhere, in any order; absent paths in any order.
    let mut held: Vec<Entry> = m.files.clone();
    held.reverse();
    let header = Manifest {
        files: Vec::new(),
        absent: Vec::new(),
        ..m.clone()
    };
    let doc = DocRef::new(&header, held.iter().collect(), vec!["~/zz", "~/absent"]);
    assert_eq!(doc.to_yaml(), m.to_yaml());
    let mut streamed = Vec::new();
    doc.write_yaml(&mut streamed).unwrap();
    assert_eq!(String::from_utf8(streamed).unwrap(), m.to_yaml());
    assert_eq!(doc.files().len(), m.files.len());
    assert_eq!(doc.absent(), ["~/absent", "~/zz"]);
    // Given twice, a path is rendered twice, and the reader refuses it.
    let e = Entry::new("~/dup".into(), EntryKind::Directory, now);
    let twice = DocRef::new(&header, vec![&e, &e], Vec::new());
    let err = Manifest::from_yaml(&twice.to_yaml())
        .unwrap_err()
        .to_string();
    assert!(err.contains("duplicate of entry 1"), "{err}");
}

#[test]
fn templates_and_scripts_round_trip_as_go_skips_them() {
    let text = format!(
        "version: 1\nfiles:\n    - path: ~/t\n      hash: {H1}\n      type: template\n      \
         run: onchange\n      updated: 2026-03-23T12:00:00Z\n"
    );
    let m = Manifest::from_yaml(&text).unwrap();
    let e = m.get("~/t").unwrap();
    assert!(e.template && e.kind == EntryKind::File);
    assert_eq!(e.run, Some(crate::Run::OnChange));
    let out = m.to_yaml();
    // `type: template` is a type the Go sgard's restore and status skip.
    assert!(out.contains("type: template\n"), "{out}");
    assert!(out.contains("run: onchange\n"), "{out}");
    assert_eq!(Manifest::from_yaml(&out).unwrap(), m);
}

#[test]
fn folder_modes_round_trip_and_are_checked() {
    let mut m = Manifest::from_yaml("version: 1\nfiles: []\n").unwrap();
    assert!(m.set_folder_mode("~/.ssh", Some(Mode::from_st_mode(0o700))));
    assert!(m.set_folder_mode("~/.config/app", Some(Mode::from_st_mode(0o750))));
    assert!(!m.set_folder_mode("~/.config", Some(Mode::from_st_mode(0o755))));
    let text = m.to_yaml();
    assert!(
        text.contains("folders:\n    - path: ~/.config/app\n      mode: \"0750\"\n    - path: ~/.ssh\n      mode: \"0700\"\n"),
        "{text}"
    );
    let back = Manifest::from_yaml(&text).unwrap();
    assert_eq!(back, m);
    assert_eq!(back.folder_mode("~/.ssh"), Some(Mode::from_st_mode(0o700)));
    // Back to the default: no record.
    assert!(m.set_folder_mode("~/.ssh", Some(Mode::from_st_mode(0o755))));
    assert_eq!(m.folder_mode("~/.ssh"), None);
    for (bad, why) in [
        ("    - path: /etc\n      mode: \"0700\"\n", "under the home"),
        ("    - path: ~/../x\n      mode: \"0700\"\n", "`..`"),
        ("    - path: ~/x\n      mode: \"9999\"\n", "octal"),
        ("    - path: ~/x\n", "octal"),
        (
            "    - path: ~/x\n      mode: \"0700\"\n    - path: ~/x\n      mode: \"0750\"\n",
            "twice",
        ),
    ] {
        let text = format!("version: 1\nfiles: []\nfolders:\n{bad}");
        let err = Manifest::from_yaml(&text).unwrap_err().to_string();
        assert!(err.contains("folders") && err.contains(why), "{err}");
    }
}

mod emitted;
