//! The generated gRPC types of `toolbroker.v1`, and the descriptor set reflection serves.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("toolbroker.v1");

pub mod json;
mod list_tools_response;

/// Hand-written (encoded once per catalog revision by the server); see [`EncodedTools`].
pub use list_tools_response::{EncodedTools, ListToolsResponse, ToolField};

/// Encoded `FileDescriptorSet` of `toolbroker/v1/broker.proto` and its imports.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("toolbroker_descriptor");
