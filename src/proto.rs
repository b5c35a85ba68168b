//! The generated gRPC types of `toolbroker.v1`, and the descriptor set reflection serves.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("toolbroker.v1");

/// Hand-written (encoded once per catalog revision by the server); see `grpc::listing`.
pub use crate::grpc::listing::ListToolsResponse;

/// Encoded `FileDescriptorSet` of `toolbroker/v1/broker.proto` and its imports.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("toolbroker_descriptor");
