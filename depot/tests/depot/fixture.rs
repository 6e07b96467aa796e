//! One fixture per backend, each a fresh, empty depot that several handles
//! (standing for several server replicas) can open.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use sgard_depot::moto::MotoServer;
use sgard_depot::{AwsEnv, Depot, Hash, Location};

/// The bucket every S3 fixture lives in, each under its own prefix.
const BUCKET: &str = "sgard-test";

/// One moto server for the whole test binary (a fresh one per test would
/// cost a second or two each). It stops when the test process ends.
/// A server that was asked for (`SGARD_MOTO_SERVER`) but does not start
/// fails every test that uses it.
fn moto() -> Option<&'static MotoServer> {
    static MOTO: OnceLock<Result<Option<MotoServer>, String>> = OnceLock::new();
    let started = MOTO.get_or_init(|| {
        let Some(server) = MotoServer::start().map_err(|e| format!("starting moto_server: {e}"))?
        else {
            return Ok(None);
        };
        server.create_bucket(BUCKET).map_err(|e| e.to_string())?;
        Ok(Some(server))
    });
    match started {
        Ok(server) => server.as_ref(),
        Err(e) => panic!("{e}"),
    }
}

/// A fresh depot on one backend.
pub struct Fixture {
    /// `memory`, `dir` or `s3`, for assertion messages.
    pub name: &'static str,
    location: Location,
    aws: AwsEnv,
    /// Memory depots are shared by cloning the handle.
    memory: Option<Depot>,
    /// Keeps a folder depot's folder alive.
    pub dir: Option<tempfile::TempDir>,
}

impl Fixture {
    /// A new handle on this fixture's depot.
    pub fn open(&self) -> Depot {
        match &self.memory {
            Some(depot) => depot.clone(),
            None => match Depot::open(&self.location, &self.aws) {
                Ok(depot) => depot,
                Err(e) => panic!("opening {}: {e}", self.location),
            },
        }
    }
}

/// A fresh depot on each backend; `test` names the S3 prefix.
pub fn fixtures(test: &str) -> Vec<Fixture> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut all = vec![
        Fixture {
            name: "memory",
            location: Location::Memory,
            aws: AwsEnv::default(),
            memory: Some(Depot::memory()),
            dir: None,
        },
        Fixture {
            name: "dir",
            location: Location::Dir(dir.path().join("depot")),
            aws: AwsEnv::default(),
            memory: None,
            dir: Some(dir),
        },
    ];
    if let Some(server) = moto() {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        all.push(Fixture {
            name: "s3",
            location: Location::parse(&format!("s3://{BUCKET}/{test}-{n}/depot"))
                .expect("test location"),
            aws: server.aws_env(),
            memory: None,
            dir: None,
        });
    }
    all
}

/// Deterministic pseudo-random bytes (xorshift), so big objects do not
/// compress or repeat.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The SHA-256 of `bytes`.
pub fn hash(bytes: &[u8]) -> Hash {
    Hash::of(bytes)
}

/// The settings for `s3://sgard-test/<path>` on the shared moto server, if
/// there is one.
pub fn s3_location(path: &str) -> Option<(Location, AwsEnv)> {
    let server = moto()?;
    let location = Location::parse(&format!("s3://{BUCKET}/{path}")).expect("test location");
    Some((location, server.aws_env()))
}

/// The settings for `location` (any `s3://` location, say in a bucket that
/// does not exist) on the shared moto server, if there is one.
pub fn s3_at(location: &str) -> Option<(Location, AwsEnv)> {
    let server = moto()?;
    Some((
        Location::parse(location).expect("test location"),
        server.aws_env(),
    ))
}
