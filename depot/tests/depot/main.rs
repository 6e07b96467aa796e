//! The depot's tests. Each runs against every backend: memory, a folder,
//! and S3 on a loopback `moto_server` when one is available (see
//! `sgard_depot::moto`; CI always has it).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod docs;
mod fixture;
mod hostile;
mod isolation;
mod moto;
mod objects;
mod outage;
