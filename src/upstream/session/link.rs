//! What a client span says about a session's connection.

/// The connection, as the MCP semantic conventions describe it.
#[derive(Clone, Debug)]
pub struct Link {
    /// `network.transport`: `pipe` for stdio, `tcp` for HTTP.
    pub network: &'static str,
    /// `server.address` and `server.port`, for HTTP.
    pub address: Option<(String, u16)>,
    /// `mcp.protocol.version`, as negotiated.
    pub protocol: String,
}
