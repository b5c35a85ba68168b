//! How the broker reads in MCP, the same on both MCP faces (the face at `/mcp` and the
//! `mcp-stdio` bridge): one projection of a tool, a resource, a resource template and a
//! prompt into MCP's types, which server a resource URI is read from, and one table from a
//! refusal to what an MCP client gets for it. Pure: each face brings what it holds (the
//! catalog, or what the broker answered over gRPC) in the domain's terms, and nothing here
//! knows either face.

pub(crate) mod cache;
pub(crate) mod icon;
pub(crate) mod prompt;
pub(crate) mod refusal;
pub(crate) mod resource;
pub(crate) mod tool;

/// MCP's optional text: an empty one is absent (the broker's forms cannot tell the two
/// apart, so neither face shows an empty field).
fn given(text: Option<&str>) -> Option<String> {
    text.filter(|text| !text.is_empty()).map(str::to_owned)
}
