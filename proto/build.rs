//! Compiles `sgard/v1/sgard.proto` with protox (pure Rust, no protoc).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=sgard");
    let fds = protox::compile(["sgard/v1/sgard.proto"], ["."])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
