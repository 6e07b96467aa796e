//! The reader against the writer: whatever [`Manifest::to_yaml`] and
//! [`History::to_yaml`] write (hostile strings, random manifests, big ones)
//! and what the Go sgard writes reads back as it was; damaged text fails
//! without panicking.

use crate::history::{History, Reason, Record};
use crate::{Entry, EntryKind, Error, Hash, Manifest, Mode, Timestamp};

const H1: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

fn ts(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

/// fast reader must take.
const HOSTILE: &[&str] = &[
    "plain",
    "with space",
    "a#b",
    "a #b",
    "#start",
    "a: b",
    "a:b",
    "ends:",
    ":start",
    "'single'",
    "\"double\"",
    "it's",
    "say \"hi\"",
    "é",
    "日本語",
    "😀 emoji",
    "~",
    "~/x",
    "null",
    "Null",
    "NULL",
    "true",
    "False",
    "yes",
    "No",
    "on",
    "y",
    "123",
    "-1",
    "0644",
    "0x1F",
    "0o17",
    "0b101",
    "1e5",
    "1_000",
    ".inf",
    "-.inf",
    ".nan",
    "12:30:45",
    "2026-01-01",
    "2026-01-01T00:00:00Z",
    "",
    " lead",
    "trail ",
    "  ",
    "[x]",
    "x[y]",
    "{y: z}",
    "a{b}",
    "a,b",
    ",start",
    "*alias",
    "&anchor",
    "!tag",
    "!!str x",
    "|block",
    ">fold",
    "%dir",
    "@at",
    "`tick",
    "- dash",
    "-",
    "?",
    "? q",
    "---",
    "...",
    "--- x",
    "<<",
    "=",
    "back\\slash",
    "\\",
    "\\n",
    "ctl\u{1}x",
    "nul\0x",
    "bell\u{7}",
    "esc\u{1b}",
    "del\u{7f}",
    "tab\tx",
    "line\nbreak",
    "cr\rlf",
    "crlf\r\n",
    "nel\u{85}x",
    "ls\u{2028}x",
    "ps\u{2029}x",
    "bom\u{feff}x",
    "\u{feff}",
    "a/b/c.d",
];

/// Strings the emitter writes plain that the fast reader refuses on
/// purpose (it only costs the slow path).
fn hash(n: u64) -> Hash {
    Hash::of(&n.to_le_bytes())
}

fn rich_manifest(s: &str, n: u64) -> Manifest {
    let now = ts("2026-03-23T12:00:00.123456789Z");
    let mut m = Manifest::new(now);
    m.updated = ts("2026-03-24T08:30:00.5Z");
    m.message = Some(s.to_owned());
    // (Beside the folder entry below, not above it: nothing may be
    // tracked below a symlink.)
    let mut link = Entry::new(format!("~/{s}.l"), EntryKind::Link, now);
    link.target = Some(s.to_owned());
    link.mode = Some(Mode::from_st_mode(0o777));
    link.only = vec![s.to_owned(), "os:linux".into()];
    m.upsert(link);
    let mut file = Entry::new(format!("/{s}/f"), EntryKind::File, Timestamp::zero());
    file.hash = Some(hash(n));
    file.plaintext_mac = Some(Box::new(hash(n + 1)));
    file.plaintext_hash = Some(Box::new(hash(n + 2)));
    file.encrypted = true;
    file.locked = true;
    file.mode = Some(Mode::from_st_mode(0o4755));
    file.never = vec!["work".into(), s.to_owned()];
    m.upsert(file);
    let mut dir = Entry::new(format!("~/{s}/d"), EntryKind::Directory, now);
    dir.mode = Some(Mode::from_st_mode(0o700));
    m.upsert(dir);
    // Invalid paths still round-trip through the text; validation then
    // fails the same way on both paths.
    m.upsert(Entry::new(s.to_owned(), EntryKind::Directory, now));
    m.exclude = vec![format!("~/{s}"), s.to_owned()];
    m.absent = vec![format!("~/gone/{s}"), s.to_owned()];
    m.folders = vec![
        crate::FolderMode {
            path: format!("~/{s}"),
            mode: Mode::from_st_mode(0o700),
        },
        crate::FolderMode {
            path: s.to_owned(),
            mode: Mode::from_st_mode(0o2750),
        },
    ];
    m
}

/// [`rich_manifest`] without the entries and rules that fail validation.
fn valid_rich_manifest(s: &str) -> Manifest {
    let mut m = rich_manifest(s, 1);
    m.files.retain(|e| crate::validate_path(&e.path).is_ok());
    m.exclude.retain(|p| crate::validate_path(p).is_ok());
    m.absent.retain(|p| crate::validate_path(p).is_ok());
    m.folders
        .retain(|f| f.path.starts_with("~/") && crate::validate_path(&f.path).is_ok());
    m
}

fn emitted_manifests() -> Vec<Manifest> {
    let now = ts("2026-03-23T12:00:00Z");
    let mut out = vec![Manifest::new(now)];
    let mut all = Manifest::new(now);
    for (i, s) in HOSTILE.iter().enumerate() {
        let m = rich_manifest(s, i as u64);
        for e in &m.files {
            all.upsert(e.clone());
        }
        out.push(m);
    }
    all.message = Some("multi\nline\n\tmessage: with # all \"sorts\"".into());
    out.push(all);
    let mut plain = Manifest::new(now);
    let mut e = Entry::new("~/.bashrc".into(), EntryKind::File, now);
    e.hash = Some(hash(7));
    e.mode = Some(Mode::from_st_mode(0o644));
    plain.upsert(e);
    plain.exclude = vec!["~/.cache".into()];
    out.push(plain);
    out
}

/// [`super::go_manifest`] without its encryption block and in the Go
/// sgard's own indentation (sequence items at their key's column).
fn go_body() -> String {
    let full = super::go_manifest();
    let head = &full[..full.find("encryption:").expect("the sample has encryption")];
    head.lines()
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect()
}

fn go_samples() -> Vec<String> {
    let body = go_body();
    vec![
        body.clone(),
        body.trim_end().to_owned(),
        // Two-space sequences, as in the crate docs.
        format!(
            "version: 1\nfiles:\n  - path: ~/.bashrc\n    hash: {H1}\n    type: file\n    never:\n      - server\n"
        ),
        // Nested list 4 deeper than its key, as our emitter writes.
        body.replace("        - os:linux\n        - work", "          - os:linux\n          - work"),
        // Single quotes and quoted timestamps.
        format!(
            "version: 1\ncreated: '2026-03-23T12:00:00Z'\nmessage: 'it''s: fine # really'\nfiles:\n    - path: '~'\n      type: directory\n      mode: '0700'\n      updated: \"2026-03-23T12:00:00Z\"\n    - path: ~/l\n      type: link\n      target: ''\n    - path: ~/f\n      hash: {H1}\n      plaintext_hash: {H1}\n      encrypted: false\n      locked: false\n      type: file\n      only: []\n      never: []\n"
        ),
        "version: 1\nfiles: []\n".into(),
        "version: 1\nfiles: []\nexclude: []\nabsent: []\n".into(),
        "files: []\nversion: 1\n".into(),
        "version: 1\n".into(),
        "version: 2\nfiles: []\n".into(),
        "version: 0\n".into(),
        // Validation errors must come out the same.
        "version: 1\nfiles:\n    - path: ~/../x\n      type: directory\n".into(),
        "version: 1\nfiles:\n    - path: ~/x\n      type: file\n".into(),
        "version: 1\nfiles:\n    - type: file\n".into(),
        "version: 1\nfiles:\n    - path: \"\"\n      type: directory\n".into(),
        "version: 1\nfiles:\n    - path: ~/d\n      type: directory\n    - path: ~/d\n      type: directory\n".into(),
        format!("version: 1\nfiles:\n    - path: ~/f\n      hash: {H1}\n      type: file\n      mode: \"9999\"\n"),
        "version: 1\ncreated: soon\n".into(),
        "version: 1\nexclude:\n    - relative\n".into(),
    ]
}

/// xorshift64*: deterministic, no dependencies.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn string(&mut self) -> String {
        const PIECES: &[&str] = &[
            "a",
            "b",
            "Z",
            "0",
            "7",
            "x",
            " ",
            " ",
            "#",
            ":",
            ": ",
            " #",
            "-",
            "- ",
            "?",
            "'",
            "\"",
            "\\",
            "~",
            "~/",
            "/",
            "[",
            "]",
            "{",
            "}",
            ",",
            "&",
            "*",
            "!",
            "|",
            ">",
            "%",
            "@",
            "`",
            ".",
            "_",
            "+",
            "e",
            "\n",
            "\t",
            "\r",
            "\u{1}",
            "\u{7f}",
            "é",
            "日",
            "😀",
            "\u{85}",
            "\u{a0}",
            "\u{2028}",
            "\u{feff}",
            "\u{3000}",
            "\u{2003}",
            "null",
            "~",
            "true",
            "yes",
            "No",
            "123",
            "0x1F",
            "0b1",
            "1e5",
            "2026-01-01",
            ".inf",
            "<<",
            "=",
            "---",
            "...",
            "\\n",
            "\\x41",
            "''",
            "T12:00:00Z",
        ];
        let n = self.below(5);
        (0..n).map(|_| *self.pick(PIECES)).collect()
    }

    fn label(&mut self) -> String {
        if self.chance(60) {
            self.pick(&["work", "os:linux", "host:laptop", "arch:arm64"])
                .to_string()
        } else {
            self.string()
        }
    }

    fn path(&mut self) -> String {
        match self.below(10) {
            0 => self.string(),
            1 => "~".into(),
            2..=4 => format!("/etc/{}", self.string()),
            _ => format!("~/{}", self.string()),
        }
    }

    fn time(&mut self) -> Timestamp {
        let secs = (self.next() % 4_000_000_000) as i64;
        let nanos = match self.below(3) {
            0 => 0,
            1 => 500_000_000,
            _ => (self.next() % 1_000_000_000) as u32,
        };
        Timestamp::from_datetime(chrono::DateTime::from_timestamp(secs, nanos).unwrap_or_default())
    }
}

fn random_manifest(rng: &mut Rng) -> Manifest {
    let mut m = Manifest::new(rng.time());
    m.updated = rng.time();
    if rng.chance(50) {
        m.message = Some(rng.string());
    }
    for _ in 0..rng.below(8) {
        let kind = *rng.pick(&[EntryKind::File, EntryKind::Directory, EntryKind::Link]);
        let mut e = Entry::new(rng.path(), kind, rng.time());
        if kind == EntryKind::File || rng.chance(10) {
            e.hash = Some(hash(rng.next()));
        }
        if rng.chance(20) {
            e.plaintext_mac = Some(Box::new(hash(rng.next())));
        }
        if rng.chance(10) {
            e.plaintext_hash = Some(Box::new(hash(rng.next())));
        }
        e.encrypted = rng.chance(20);
        e.locked = rng.chance(20);
        if rng.chance(80) {
            e.mode = Some(Mode::from_st_mode(rng.next() as u32));
        }
        if kind == EntryKind::Link || rng.chance(10) {
            e.target = Some(rng.string());
        }
        let labels: Vec<String> = (0..rng.below(3)).map(|_| rng.label()).collect();
        if rng.chance(50) {
            e.only = labels;
        } else {
            e.never = labels;
        }
        m.upsert(e);
    }
    if rng.chance(30) {
        m.exclude = (0..1 + rng.below(3)).map(|_| rng.path()).collect();
    }
    if rng.chance(30) {
        m.absent = (0..1 + rng.below(3)).map(|_| rng.path()).collect();
    }
    m
}

/// A small random edit of YAML text: a character inserted or deleted,
/// a line duplicated, dropped or re-indented.
fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    let i = rng.below(lines.len());
    match rng.below(6) {
        0 => {
            let mut chars: Vec<char> = lines[i].chars().collect();
            let at = rng.below(chars.len() + 1);
            chars.insert(
                at,
                *rng.pick(&[' ', '#', ':', '-', '"', '\'', '[', '\\', '~', 'x']),
            );
            lines[i] = chars.into_iter().collect();
        }
        1 => {
            let mut chars: Vec<char> = lines[i].chars().collect();
            if !chars.is_empty() {
                chars.remove(rng.below(chars.len()));
            }
            lines[i] = chars.into_iter().collect();
        }
        2 => {
            let dup = lines[i].clone();
            lines.insert(i, dup);
        }
        3 => {
            lines.remove(i);
        }
        4 => {
            let pad: &str = rng.pick::<&str>(&[" ", "  ", "    "]);
            lines[i].insert_str(0, pad);
        }
        _ => {
            let trimmed = lines[i].trim_start_matches(' ').to_owned();
            let indent = lines[i].len() - trimmed.len();
            let cut = rng.below(indent + 1);
            lines[i] = format!("{}{trimmed}", " ".repeat(indent - cut));
        }
    }
    lines.join("\n")
}

fn big_manifest(n: usize) -> Manifest {
    let now = ts("2026-03-23T12:00:00.123456789Z");
    let mut m = Manifest::new(now);
    m.files = (0..n)
        .map(|i| {
            let path = format!(
                "~/tree/a{}/b{}/c{}/f{i:04}.bin",
                i % 10,
                i / 10 % 10,
                i / 100 % 10
            );
            let mut e = Entry::new(path, EntryKind::File, now);
            e.hash = Some(hash(i as u64));
            e.mode = Some(Mode::from_st_mode(0o644));
            e
        })
        .collect();
    m.files.sort_by(|a, b| a.path.cmp(&b.path));
    m
}

/// `m` as a reader gives it: folders and absent paths sorted, an empty
/// message none, each entry with only its kind's fields.
fn normal(mut m: Manifest) -> Manifest {
    m.folders.sort_by(|a, b| a.path.cmp(&b.path));
    m.absent.sort();
    m.message = m.message.filter(|s| !s.is_empty());
    for e in &mut m.files {
        // What only one kind of entry has is dropped from the others.
        if e.kind != EntryKind::File {
            e.hash = None;
        }
        if e.kind != EntryKind::Link {
            e.target = None;
        }
        e.target = e.target.take().filter(|t| !t.is_empty());
    }
    m
}

#[test]
fn everything_the_emitter_writes_reads_back() {
    for m in emitted_manifests() {
        let text = m.to_yaml();
        match Manifest::from_yaml(&text) {
            Ok(back) => assert_eq!(back, normal(m), "for:\n{text}"),
            // Invalid paths are written as they are and refused by
            // validation, never by the YAML reader.
            Err(e) => assert!(!matches!(e, Error::Syntax { .. }), "{e}\nfor:\n{text}"),
        }
    }
    for s in HOSTILE {
        let mut enc = valid_rich_manifest(s);
        enc.encryption = Some(crate::Encryption {
            algorithm: "xchacha20-poly1305".into(),
            ..Default::default()
        });
        for m in [valid_rich_manifest(s), enc] {
            let text = m.to_yaml();
            match Manifest::from_yaml(&text) {
                Ok(back) => assert_eq!(back, normal(m), "for:\n{text}"),
                Err(e) => assert!(!matches!(e, Error::Syntax { .. }), "{e}\nfor:\n{text}"),
            }
        }
    }
}

#[test]
fn go_style_manifests_read() {
    let samples = go_samples();
    // The first nine are valid; the rest each break one rule.
    for (i, text) in samples.iter().enumerate() {
        let r = Manifest::from_yaml(text);
        match i {
            0..=3 | 5..=8 => {
                r.unwrap_or_else(|e| panic!("sample {i}: {e}\n{text}"));
            }
            _ => {
                let e = r
                    .err()
                    .unwrap_or_else(|| panic!("sample {i} read:\n{text}"));
                assert!(!matches!(e, Error::Syntax { .. }), "sample {i}: {e}");
            }
        }
    }
    let m = Manifest::from_yaml(&samples[0]).unwrap();
    assert_eq!(m.files.len(), 4);
    let b = m.get("~/.bashrc").unwrap();
    assert!(b.locked && b.only == ["os:linux", "work"]);
    assert_eq!(
        m.get("~/.hl").unwrap().target.as_deref(),
        Some("/etc/hosts")
    );
    assert_eq!(m.exclude, ["~/.config/app/sub"]);
    let q = Manifest::from_yaml(&samples[4]);
    assert!(
        q.as_ref()
            .is_err_and(|e| e.to_string().contains("link entry has no `target`")),
        "{q:?}"
    );
    // The full Go sample: encryption, and a field a newer version added.
    let full = format!(
        "{}encryption:\n    algorithm: xchacha20-poly1305\n    kek_slots: {{}}\nsome_future_field: ignored\n",
        go_body()
    );
    assert!(Manifest::from_yaml(&full).unwrap().encryption.is_some());
}

#[test]
fn a_history_with_hostile_strings_reads_back() {
    let now = ts("2026-03-23T12:00:00.5Z");
    let mut records = Vec::new();
    for (i, s) in HOSTILE.iter().enumerate() {
        let i = i as u64;
        records.push(Record {
            id: hash(i),
            parent: i.is_multiple_of(2).then(|| hash(i + 100)),
            time: now,
            host: (*s).to_owned(),
            machine: i
                .is_multiple_of(2)
                .then(|| format!("{:032x}", u128::from(i) * 7919)),
            reason: if i.is_multiple_of(3) {
                Reason::Other((*s).to_owned())
            } else {
                Reason::BeforeRestore
            },
            message: Some(format!("{s} then: more # stuff")),
            entries: i,
            bytes: i * 1_000_000_007,
            new_blobs: u64::MAX - i,
            head_before: (i % 3 == 1).then(|| hash(i + 200)),
        });
    }
    for h in [History::default(), History { records }] {
        let text = h.to_yaml();
        assert_eq!(History::from_yaml(&text).unwrap(), h, "for:\n{text}");
    }
}

#[test]
fn random_manifests_read_back_and_damaged_ones_fail_cleanly() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        let m = random_manifest(&mut rng);
        let text = m.to_yaml();
        match Manifest::from_yaml(&text) {
            Ok(back) => assert_eq!(back, normal(m), "for:\n{text}"),
            Err(e) => assert!(!matches!(e, Error::Syntax { .. }), "{e}\nfor:\n{text}"),
        }
        // Raw text straight into a value slot, unquoted or quoted by hand:
        // read or refused, never a panic.
        let v = rng.string();
        let v = match rng.below(3) {
            0 => v,
            1 => format!("\"{v}\""),
            _ => format!("'{v}'"),
        };
        for raw in [
            format!("version: 1\nmessage: {v}\n"),
            format!("version: 1\nexclude:\n    - {v}\n"),
            format!("version: 1\nfiles:\n    - path: ~/a\n      type: link\n      target: {v}\n"),
        ] {
            let _ = Manifest::from_yaml(&raw);
        }
        let mut t = text;
        for _ in 0..4 {
            t = mutate(&mut rng, &t);
            let _ = Manifest::from_yaml(&t);
        }
    }
}

/// serde-saphyr's default budget (250,000 nodes) refused a manifest of
/// 25,000 entries; the budget grows with the text.
#[test]
fn a_manifest_of_thirty_thousand_entries_reads() {
    let m = big_manifest(30_000);
    let text = format!("# written by hand\n{}", m.to_yaml());
    assert_eq!(Manifest::from_yaml(&text).unwrap(), m);
    let h = History {
        records: (0..30_000u64)
            .map(|i| Record {
                id: hash(i),
                parent: None,
                time: ts("2026-03-23T12:00:00Z"),
                host: "h".into(),
                machine: None,
                reason: Reason::BeforeRestore,
                message: None,
                entries: i,
                bytes: i,
                new_blobs: 0,
                head_before: None,
            })
            .collect(),
    };
    assert_eq!(
        History::from_yaml(&h.to_yaml()).unwrap().records.len(),
        30_000
    );
}

/// An entry that does not convert is named by its number and path, after
/// the entries before it converted and whatever follows it was read past.
#[test]
fn the_first_bad_entry_is_named() {
    let text = format!(
        "version: 1\nfiles:\n    - path: ~/a\n      type: directory\n    - path: ~/b\n      type: file\n    - path: ~/c\n      hash: {H1}\n      type: file\n    - path: ~/d\n      type: nonsense\n"
    );
    let e = Manifest::from_yaml(&text).unwrap_err();
    match &e {
        Error::Entry { index, path, .. } => assert_eq!((*index, path.as_str()), (2, "~/b")),
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("file entry has no `hash`"), "{e}");
    // A YAML error after the bad entry is still the error shown.
    let broken = format!("{text}exclude: [\n");
    assert!(matches!(
        Manifest::from_yaml(&broken),
        Err(Error::Syntax { .. })
    ));
}
