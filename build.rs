//! Generates the gRPC code and the descriptor set that server reflection serves.
//! protox compiles the .proto files in pure Rust, so no `protoc` is needed.

use std::{env, path::PathBuf};

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/toolbroker/v1/broker.proto";
    println!("cargo:rerun-if-changed={proto}");
    // Google's, vendored (see proto/google/README.md); imported by `proto`, so compiled with it.
    println!("cargo:rerun-if-changed=proto/google");
    let fds = protox::Compiler::new(["proto"])?
        .include_imports(true)
        .include_source_info(true)
        .open_file(proto)?
        .file_descriptor_set();
    let out = PathBuf::from(env::var("OUT_DIR")?);
    std::fs::write(out.join("toolbroker_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Ours, so that ListTools can send an answer encoded once per catalog revision.
        .extern_path(
            ".toolbroker.v1.ListToolsResponse",
            "crate::proto::ListToolsResponse",
        )
        // The status long-running operations end with is tonic-types' `google.rpc.Status`.
        .extern_path(".google.rpc", "::tonic_types::pb")
        .compile_fds(fds)?;
    Ok(())
}
