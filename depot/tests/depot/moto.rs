//! The moto test support itself.

use std::net::{Ipv4Addr, TcpStream};

use sgard_depot::moto::MotoServer;

#[test]
fn a_moto_server_stops_when_dropped() {
    let Some(exe) = MotoServer::executable().unwrap() else {
        eprintln!("note: moto_server not found: skipping");
        return;
    };
    let server = MotoServer::start_with(&exe).unwrap();
    let port = server.port();
    server.create_bucket("stop-test").unwrap();
    assert!(TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok());
    // Drop waits for the watchdog, which waits for the server to exit.
    drop(server);
    assert!(
        TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err(),
        "port {port} still answers"
    );
}
