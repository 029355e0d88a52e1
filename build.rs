//! With the `cli` feature: agent-sandbox's sandboxd protobuf (`proto/process/v1/process.proto`)
//! to Rust (`client::sandboxd::pb`), with protox (no system protoc) and tonic-prost-build.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "cli")]
    sandboxd_proto();
}

#[cfg(feature = "cli")]
fn sandboxd_proto() {
    println!("cargo:rerun-if-changed=proto");
    let fds = match protox::compile(["process/v1/process.proto"], ["proto"]) {
        Ok(f) => f,
        Err(e) => panic!("proto/process/v1/process.proto: {e}"),
    };
    if let Err(e) = tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)
    {
        panic!("sandboxd protobuf: {e}");
    }
}
