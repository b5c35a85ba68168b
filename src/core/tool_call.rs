//! One tool call as a face hands it to the core: every face (gRPC `CallTool` and
//! `CallToolStream`, the MCP face's `tools/call`) decodes its request into this.

use std::time::Duration;

use crate::{
    auth::Caller,
    conversation::Conversation,
    domain::{call::RawArguments, caller::CallerValues},
    telemetry::context::TraceHeaders,
};

/// One call's whole request.
pub struct ToolCall<'a> {
    /// The tool's exposed name.
    pub name: &'a str,
    /// Its arguments, as sent.
    pub arguments: RawArguments,
    /// The view the call came through (`CallToolRequest.view`, `/mcp/<view>`), if any: the
    /// tool must be one of it.
    pub view: Option<&'a str>,
    /// Who calls, with its grants.
    pub caller: &'a Caller,
    /// The caller's values for a per-caller server's templates (its headers or metadata).
    pub values: &'a dyn CallerValues,
    /// The timeout the caller asked for.
    pub timeout: Option<Duration>,
    /// The time left before the caller's own deadline.
    pub deadline: Option<Duration>,
    /// The trace the call continues.
    pub trace: &'a TraceHeaders,
    /// A streaming call's way back to its client; `None` for a unary call.
    pub conversation: Option<Conversation>,
}
