//! The generated gRPC types of `toolbroker.v1`, and the descriptor set reflection serves.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// `toolbroker.v1`, nested as its package is, so that its references to
/// `google.longrunning` (two levels up) find [`google`].
mod toolbroker {
    pub mod v1 {
        tonic::include_proto!("toolbroker.v1");
    }
}
pub use toolbroker::v1::*;

/// Google's types the broker serves: long-running operations.
pub mod google {
    /// `google.longrunning`: `Operation` and the `Operations` service.
    pub mod longrunning {
        tonic::include_proto!("google.longrunning");
    }
}

pub mod json;
mod list_tools_response;

/// Hand-written (encoded once per catalog revision by the server); see [`EncodedTools`].
pub use list_tools_response::{EncodedTools, ListToolsResponse, ToolField};

/// Encoded `FileDescriptorSet` of `toolbroker/v1/broker.proto` and its imports.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("toolbroker_descriptor");
