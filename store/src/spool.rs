//! Copying a stream into a temp file while hashing it.
//!
//! Small inputs are copied on the calling thread through one buffer. Past
//! [`PIPELINE_AFTER`] bytes the work splits in three: this thread reads and
//! writes, a second thread hashes the same chunks (SHA-256 is the slowest
//! step: one core of it is what a big file costs), and a third asks the
//! kernel to write the file back every [`SYNC_EVERY`] bytes, so the final
//! flush has little left to do. Memory stays bounded: at most
//! `DEPTH + 2` chunks exist at once. The bytes hashed are exactly the bytes
//! written, so a file changing while it is read can never be stored under a
//! name that is not its content's.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::mpsc;

use crate::{Error, Hash, Hasher, Result};

/// The buffer of the single-threaded copy.
const BUF_SIZE: usize = 256 * 1024;
/// Inputs longer than this are copied by the pipeline.
const PIPELINE_AFTER: u64 = 8 << 20;
/// The pipeline's chunk size.
const CHUNK: usize = 1 << 20;
/// Chunks in flight between the copying and the hashing thread.
const DEPTH: usize = 4;
/// Bytes between two early write-backs.
const SYNC_EVERY: u64 = 64 << 20;

/// Copies everything `reader` yields to `out` (the temp file at `path`),
/// returning its hash and size.
///
/// # Errors
/// [`Error::Source`] when reading fails, [`Error::Io`] when writing or an
/// early write-back fails, [`Error::TooLarge`] past `max`.
pub(crate) fn copy_hashing(
    reader: &mut dyn Read,
    out: &File,
    path: &Path,
    max: Option<u64>,
) -> Result<(Hash, u64)> {
    let mut hasher = Hasher::new();
    let mut buf = vec![0u8; BUF_SIZE];
    let mut size = 0u64;
    let mut may_pipeline = true;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok((hasher.finish(), size)),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::Source(e)),
        };
        hasher.update(&buf[..n]);
        write_chunk(out, path, &buf[..n], &mut size, max)?;
        if may_pipeline && size >= PIPELINE_AFTER {
            // Asked once, here: on Linux it reads cgroup files.
            if std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
                return pipelined(reader, out, path, max, hasher, size);
            }
            may_pipeline = false;
        }
    }
}

fn write_chunk(
    mut out: &File,
    path: &Path,
    bytes: &[u8],
    size: &mut u64,
    max: Option<u64>,
) -> Result<()> {
    crate::cancel::check()?;
    out.write_all(bytes)
        .map_err(|e| Error::io("writing", path, e))?;
    *size += bytes.len() as u64;
    crate::progress::bytes(bytes.len() as u64);
    match max {
        Some(limit) if *size > limit => Err(Error::TooLarge { limit }),
        _ => Ok(()),
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn fill(reader: &mut dyn Read, buf: &mut [u8]) -> Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::Source(e)),
        }
    }
    Ok(filled)
}

fn stopped(what: &str) -> Error {
    Error::Source(io::Error::other(format!("the {what} thread stopped")))
}

/// The rest of [`copy_hashing`], on three threads.
fn pipelined(
    reader: &mut dyn Read,
    out: &File,
    path: &Path,
    max: Option<u64>,
    mut hasher: Hasher,
    mut size: u64,
) -> Result<(Hash, u64)> {
    let syncer = out
        .try_clone()
        .map_err(|e| Error::io("reopening", path, e))?;
    std::thread::scope(|s| {
        let (work, to_hash) = mpsc::sync_channel::<(Vec<u8>, usize)>(DEPTH);
        let (free, freed) = mpsc::channel::<Vec<u8>>();
        let hashing = s.spawn(move || {
            for (buf, n) in to_hash {
                hasher.update(&buf[..n]);
                if free.send(buf).is_err() {
                    break;
                }
            }
            hasher
        });
        let (sync, to_sync) = mpsc::channel::<()>();
        // Write-back errors are kept, never dropped: a failed fdatasync
        // may mark the pages clean, so a later flush could not report it.
        let syncing = s.spawn(move || -> io::Result<()> {
            for () in to_sync {
                syncer.sync_data()?;
            }
            Ok(())
        });
        let mut made = 0;
        let mut unsynced = 0u64;
        let copied = (|| -> Result<()> {
            loop {
                let mut buf = match freed.try_recv() {
                    Ok(b) => b,
                    Err(_) if made < DEPTH + 2 => {
                        made += 1;
                        vec![0u8; CHUNK]
                    }
                    Err(_) => freed.recv().map_err(|_| stopped("hashing"))?,
                };
                let n = fill(reader, &mut buf)?;
                if n == 0 {
                    return Ok(());
                }
                write_chunk(out, path, &buf[..n], &mut size, max)?;
                unsynced += n as u64;
                if unsynced >= SYNC_EVERY {
                    unsynced = 0;
                    // A stopped syncer has an error to report at the join.
                    let _ = sync.send(());
                }
                work.send((buf, n)).map_err(|_| stopped("hashing"))?;
                if n < CHUNK {
                    return Ok(());
                }
            }
        })();
        drop(work);
        drop(sync);
        let hasher = hashing.join().map_err(|_| stopped("hashing"));
        let synced = syncing.join().map_err(|_| stopped("write-back"));
        copied?;
        synced?.map_err(|e| Error::io("syncing", path, e))?;
        Ok((hasher?.finish(), size))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that yields `len` deterministic bytes in odd-sized reads.
    struct Pattern {
        at: u64,
        len: u64,
    }

    impl Read for Pattern {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = (self.len - self.at).min(buf.len() as u64).min(77_777) as usize;
            for (i, b) in buf[..n].iter_mut().enumerate() {
                let x = self.at + i as u64;
                *b = (x ^ (x >> 9) ^ (x >> 17)) as u8;
            }
            self.at += n as u64;
            Ok(n)
        }
    }

    fn bytes(len: u64) -> Vec<u8> {
        let mut v = Vec::new();
        Pattern { at: 0, len }.read_to_end(&mut v).unwrap();
        v
    }

    #[test]
    fn both_paths_store_and_hash_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        // Below, at and well past the pipeline threshold, with a chunk
        // boundary and a sync boundary inside.
        for len in [
            0,
            1,
            PIPELINE_AFTER,
            PIPELINE_AFTER + 1,
            SYNC_EVERY + 3 * CHUNK as u64 + 5,
        ] {
            let p = dir.path().join(format!("f{len}"));
            let f = File::create(&p).unwrap();
            let (h, n) = copy_hashing(&mut Pattern { at: 0, len }, &f, &p, None).unwrap();
            let want = bytes(len);
            assert_eq!(n, len);
            assert_eq!(h, Hash::of(&want), "hash of {len} bytes");
            assert_eq!(std::fs::read(&p).unwrap(), want, "content of {len} bytes");
        }
    }

    #[test]
    fn limits_and_read_errors_stop_the_pipeline() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let f = File::create(&p).unwrap();
        let limit = PIPELINE_AFTER + 2 * CHUNK as u64;
        let r = copy_hashing(
            &mut Pattern {
                at: 0,
                len: limit * 2,
            },
            &f,
            &p,
            Some(limit),
        );
        assert!(matches!(r, Err(Error::TooLarge { .. })), "{r:?}");

        struct Failing(u64);
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 > PIPELINE_AFTER * 2 {
                    return Err(io::Error::other("dying disk"));
                }
                self.0 += buf.len() as u64;
                Ok(buf.len())
            }
        }
        let r = copy_hashing(&mut Failing(0), &f, &p, None);
        assert!(matches!(r, Err(Error::Source(_))), "{r:?}");
    }
}
