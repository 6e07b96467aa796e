use super::*;
use std::io::Write;

/// A tar of `entries`: (name as raw bytes, kind, content or link target,
/// mode), names written raw into the header (so hostile ones go in too).
fn tar_of(entries: &[(&str, tar::EntryType, &[u8], u32)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, kind, data, mode) in entries {
        let mut h = tar::Header::new_gnu();
        {
            let raw = &mut h.as_old_mut().name;
            raw.fill(0);
            raw[..name.len()].copy_from_slice(name.as_bytes());
        }
        h.set_entry_type(*kind);
        h.set_mode(*mode);
        if kind.is_symlink() || kind.is_hard_link() {
            h.set_link_name_literal(std::str::from_utf8(data).unwrap())
                .unwrap();
            h.set_size(0);
            h.set_cksum();
            b.append(&h, std::io::empty()).unwrap();
        } else {
            h.set_size(data.len() as u64);
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
    }
    b.into_inner().unwrap()
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("dest")).unwrap();
        Case { dir }
    }
    fn dest(&self) -> PathBuf {
        self.dir.path().join("dest")
    }
    fn run(&self, bytes: &[u8], format: Format, strip: usize, limits: &Limits) -> Result<Unpacked> {
        let a = self.dir.path().join("archive");
        fs::write(&a, bytes).unwrap();
        unpack(&a, format, &self.dest(), strip, &[], limits)
    }
    /// Everything in the scratch folder but the archive and `dest`.
    fn outside(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "archive" && n != "dest")
            .collect();
        v.sort();
        v
    }
}

use tar::EntryType as T;

/// Unix: symlinks are made (see the test below for Windows).
#[cfg(unix)]
#[test]
fn a_tar_gz_unpacks_stripped_with_its_modes_and_links() {
    let c = Case::new();
    let t = tar_of(&[
        ("pkg-1.0/", T::Directory, b"", 0o755),
        (
            "pkg-1.0/bin/tool",
            T::Regular,
            b"#!/bin/sh\necho hi\n",
            0o755,
        ),
        ("pkg-1.0/README", T::Regular, b"read me\n", 0o644),
        ("pkg-1.0/docs/link", T::Symlink, b"../README", 0o777),
        ("pkg-1.0/copy", T::Link, b"pkg-1.0/README", 0o644),
    ]);
    let u = c
        .run(&gz(&t), Format::TarGz, 1, &Limits::default())
        .unwrap();
    assert_eq!(u.files, 4);
    let d = c.dest();
    assert_eq!(
        fs::read(d.join("bin/tool")).unwrap(),
        b"#!/bin/sh\necho hi\n"
    );
    assert_eq!(fs::read(d.join("copy")).unwrap(), b"read me\n");
    assert_eq!(
        fs::read_link(d.join("docs/link")).unwrap(),
        Path::new("../README")
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &str| fs::metadata(d.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("bin/tool"), 0o755);
        assert_eq!(mode("README"), 0o644);
    }
}

/// Windows makes no symlink from an archive (that takes a privilege
/// there): one with a symlink is refused, naming it, and without it the
/// rest unpacks as on Unix.
#[cfg(not(unix))]
#[test]
fn a_tar_gz_unpacks_stripped_with_its_links_but_no_symlink() {
    let mut entries = vec![
        ("pkg-1.0/", T::Directory, &b""[..], 0o755),
        (
            "pkg-1.0/bin/tool",
            T::Regular,
            &b"#!/bin/sh\necho hi\n"[..],
            0o755,
        ),
        ("pkg-1.0/README", T::Regular, &b"read me\n"[..], 0o644),
        ("pkg-1.0/copy", T::Link, &b"pkg-1.0/README"[..], 0o644),
    ];
    let c = Case::new();
    let u = c
        .run(&gz(&tar_of(&entries)), Format::TarGz, 1, &Limits::default())
        .unwrap();
    assert_eq!(u.files, 3);
    let d = c.dest();
    assert_eq!(
        fs::read(d.join("bin/tool")).unwrap(),
        b"#!/bin/sh\necho hi\n"
    );
    assert_eq!(fs::read(d.join("copy")).unwrap(), b"read me\n");
    entries.push(("pkg-1.0/docs/link", T::Symlink, &b"../README"[..], 0o777));
    let c = Case::new();
    let e = c
        .run(&gz(&tar_of(&entries)), Format::TarGz, 1, &Limits::default())
        .unwrap_err();
    assert!(
        matches!(&e, Error::Hostile { entry, why } if entry == "pkg-1.0/docs/link" && why.contains("cannot make")),
        "{e}"
    );
    assert!(c.outside().is_empty());
}

#[test]
fn folders_are_made_even_empty_and_keep_their_modes() {
    let c = Case::new();
    let t = tar_of(&[
        ("pkg/", T::Directory, b"", 0o755),
        ("pkg/empty/", T::Directory, b"", 0o755),
        ("pkg/private/", T::Directory, b"", 0o700),
        ("pkg/private/key", T::Regular, b"k\n", 0o600),
        ("pkg/readonly/", T::Directory, b"", 0o555),
        ("pkg/readonly/f", T::Regular, b"f\n", 0o644),
    ]);
    c.run(&t, Format::Tar, 1, &Limits::default()).unwrap();
    let d = c.dest();
    assert!(d.join("empty").is_dir());
    assert_eq!(fs::read(d.join("readonly/f")).unwrap(), b"f\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &str| fs::metadata(d.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode("private"), 0o700);
        assert_eq!(mode("empty"), 0o755);
        // Open to its owner, so the next refresh can replace it.
        assert_eq!(mode("readonly"), 0o755);
    }
}

#[test]
fn names_that_leave_the_folder_are_refused() {
    for (name, why) in [
        ("../evil", "climbs out"),
        ("a/../../evil", "climbs out"),
        ("/etc/evil", "absolute"),
        ("C:/evil", "absolute"),
    ] {
        let c = Case::new();
        let t = tar_of(&[(name, T::Regular, b"x", 0o644)]);
        let e = c.run(&t, Format::Tar, 0, &Limits::default()).unwrap_err();
        assert!(e.to_string().contains(why), "{name}: {e}");
        assert!(c.outside().is_empty(), "{name}: {:?}", c.outside());
    }
}

/// Names Windows would not keep as given: refused there (a stream, a
/// device, a dot or space dropped); files like any other on Unix.
#[test]
fn names_windows_cannot_hold_are_refused_there() {
    for name in [
        "ab:c",
        "d/a:b",
        "d/nul",
        "d/CON.txt",
        "com1",
        "Lpt9.log",
        "dots.",
        "space ",
    ] {
        let c = Case::new();
        let t = tar_of(&[(name, T::Regular, b"x", 0o644)]);
        let got = c.run(&t, Format::Tar, 0, &Limits::default());
        if cfg!(windows) {
            let e = got.unwrap_err();
            assert!(matches!(e, Error::Hostile { .. }), "{name}: {e}");
        } else {
            assert_eq!(got.unwrap().files, 1, "{name}");
            assert_eq!(fs::read(c.dest().join(name)).unwrap(), b"x");
        }
    }
    // Names that only look like them are files everywhere.
    for name in ["console", "com10", "nully.txt", "a.b.c"] {
        let c = Case::new();
        let t = tar_of(&[(name, T::Regular, b"x", 0o644)]);
        assert_eq!(
            c.run(&t, Format::Tar, 0, &Limits::default()).unwrap().files,
            1
        );
    }
}

#[test]
fn symlinks_out_and_writes_through_symlinks_are_refused() {
    for entries in [
        vec![("l", T::Symlink, &b"../outside"[..], 0o777)],
        vec![("a/b/l", T::Symlink, &b"../../../x"[..], 0o777)],
        vec![("l", T::Symlink, &b"/etc"[..], 0o777)],
        // In, then written through.
        vec![
            ("d/", T::Directory, &b""[..], 0o755),
            ("l", T::Symlink, &b"d"[..], 0o777),
            ("l/f", T::Regular, &b"x"[..], 0o644),
        ],
        vec![("f", T::Fifo, &b""[..], 0o644)],
        vec![("h", T::Link, &b"nothing"[..], 0o644)],
        // Each inside by its text, out together: l1 leads to the folder
        // itself, and l2 climbs from there.
        vec![
            ("s/a/b/c/", T::Directory, &b""[..], 0o755),
            ("s/a/b/c/l1", T::Symlink, &b"../../../.."[..], 0o777),
            (
                "l2",
                T::Symlink,
                &b"s/a/b/c/l1/../../../../.ssh/id"[..],
                0o777,
            ),
        ],
    ] {
        let c = Case::new();
        let t = tar_of(&entries);
        let e = c.run(&t, Format::Tar, 0, &Limits::default()).unwrap_err();
        assert!(matches!(e, Error::Hostile { .. }), "{entries:?}: {e}");
        assert!(c.outside().is_empty());
        assert!(!c.dest().join("d/f").exists());
    }
}

#[test]
fn a_decompression_bomb_stops_at_the_bound() {
    // A tar header that says 10 GB, then gzip members of zeros: a few
    // megabytes that would unpack to gigabytes.
    let mut h = tar::Header::new_gnu();
    h.set_path("bomb").unwrap();
    h.set_size(10 << 30);
    h.set_mode(0o644);
    h.set_cksum();
    let mut bytes = gz(h.as_bytes());
    let zeros = gz(&vec![0u8; 1 << 20]);
    for _ in 0..64 {
        bytes.extend_from_slice(&zeros);
    }
    let c = Case::new();
    let limits = Limits {
        max_unpacked: 4 << 20,
        ..Limits::default()
    };
    let e = c.run(&bytes, Format::TarGz, 0, &limits).unwrap_err();
    assert!(matches!(e, Error::TooLarge { .. }), "{e}");
    let written = fs::metadata(c.dest().join("bomb")).map_or(0, |m| m.len());
    assert!(written <= 4 << 20, "{written}");
}

#[test]
fn include_keeps_only_the_files_it_names() {
    let c = Case::new();
    let t = tar_of(&[
        ("p/a.ttf", T::Regular, b"font", 0o644),
        ("p/LICENSE", T::Regular, b"text", 0o644),
    ]);
    let a = c.dir.path().join("archive");
    fs::write(&a, &t).unwrap();
    unpack(
        &a,
        Format::Tar,
        &c.dest(),
        1,
        &["*.ttf".into()],
        &Limits::default(),
    )
    .unwrap();
    assert!(c.dest().join("a.ttf").exists());
    assert!(!c.dest().join("LICENSE").exists());
}

#[test]
fn zip_xz_and_zstd_unpack_too() {
    let t = tar_of(&[("d/f", T::Regular, b"same\n", 0o644)]);
    let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 1);
    xz.write_all(&t).unwrap();
    let xz = xz.finish().unwrap();
    let zst = zstd::stream::encode_all(&t[..], 1).unwrap();
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o = zip::write::SimpleFileOptions::default().unix_permissions(0o755);
    z.start_file("d/f", o).unwrap();
    z.write_all(b"same\n").unwrap();
    let zip_bytes = z.finish().unwrap().into_inner();
    for (bytes, format) in [
        (xz, Format::TarXz),
        (zst, Format::TarZst),
        (zip_bytes, Format::Zip),
    ] {
        let c = Case::new();
        c.run(&bytes, format, 0, &Limits::default()).unwrap();
        assert_eq!(
            fs::read(c.dest().join("d/f")).unwrap(),
            b"same\n",
            "{format}"
        );
    }
    let c = Case::new();
    assert!(matches!(
        c.run(b"not an archive", Format::Zip, 0, &Limits::default()),
        Err(Error::Damaged { .. })
    ));
}
