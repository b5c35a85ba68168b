//! The one table from a refusal to what an MCP client gets, for both MCP faces. A refusal is
//! keyed by its gRPC status code, from the broker's own table ([`RequestError::class`]): the
//! HTTP face has the error itself, the `mcp-stdio` bridge only the status the broker answered
//! it with, so the code is what both can know, and keying on it makes them agree by
//! construction. The message goes as the broker wrote it (it names the value at fault and
//! what to do).
//!
//! MCP's rule (2025-11-25, Tools > Error Handling): unknown tools and malformed requests are
//! protocol errors (JSON-RPC errors, which clients need not show the model); API failures,
//! input validation errors and business-logic errors are tool execution errors (a result with
//! `isError: true`), which the model reads and can act on. Requests other than `tools/call`
//! have no result to carry an error, so they always get a JSON-RPC error. Pure.

use rmcp::{
    ErrorData,
    model::{CallToolResult, ContentBlock, ErrorCode},
};

use crate::domain::request_error::{Code, RequestError};

/// A refused or failed request, as both faces know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Its gRPC status code in the broker's table; `None` for a status the broker never
    /// answers with (only the bridge sees one: its link to the broker failed).
    pub code: Option<Code>,
    /// What went wrong and what to do, as the broker said it.
    pub message: String,
}

impl From<&RequestError> for Refusal {
    fn from(error: &RequestError) -> Self {
        Self {
            code: Some(error.class().code),
            message: error.to_string(),
        }
    }
}

/// What a refused `tools/call` becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A tool result with `isError: true` whose one text block is the message.
    ToolError,
    /// A JSON-RPC error with this code and the message.
    Protocol(ErrorCode),
}

/// The MCP requests other than `tools/call`, by what their refusals may become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// `resources/read` and `resources/subscribe`: MCP has a code of its own for a resource
    /// that is not there.
    Resource,
    /// Anything else: `prompts/get`, `completion/complete`, the lists.
    Other,
}

/// The table for `tools/call`.
pub fn call_outcome(code: Option<Code>) -> Outcome {
    use Outcome::{Protocol, ToolError};
    let Some(code) = code else {
        // The bridge got no answer from the broker (the connection failed, a status the broker
        // never sends): the MCP server itself failed, MCP's internal error.
        return Protocol(ErrorCode::INTERNAL_ERROR);
    };
    match code {
        // No tool of this name for this caller (unknown, or outside the view it called
        // through): MCP's own example of a protocol error, "Unknown tool", -32602.
        Code::NotFound => Protocol(ErrorCode::INVALID_PARAMS),
        // Arguments the tool's schema refuses (or its server refused with -32602): an input
        // validation error, a tool execution error since MCP 2025-11-25 (SEP-1303), so that
        // the model corrects its arguments.
        Code::InvalidArgument => ToolError,
        // The caller's grants, or the server's authorization, refuse this tool: a business
        // rule the model reads, relays or works around with another tool.
        Code::PermissionDenied => ToolError,
        // Credentials the call needs are missing or were refused (an ID token a per-caller
        // server needs, a bridge's token that expired): the model tells the person.
        Code::Unauthenticated => ToolError,
        // A rate, queue, session or size limit: the message says when to retry or what to
        // send less of.
        Code::ResourceExhausted => ToolError,
        // The tool's server is down or restarting, or the broker cannot serve now (shutting
        // down, audit log unwritable): an API failure the model can wait out or report.
        Code::Unavailable => ToolError,
        // The call ran out of time (the server was told to cancel): the model may retry with
        // less work, or report.
        Code::DeadlineExceeded => ToolError,
        // A person must act first (log the broker in to the server, send a caller value):
        // the message says what.
        Code::FailedPrecondition => ToolError,
        // The tool's server answered with a JSON-RPC error or an invalid result: an API
        // failure of the tool.
        Code::Internal => ToolError,
    }
}

/// The table for every other request: the JSON-RPC error code.
pub fn request_code(asked: Asked, code: Option<Code>) -> ErrorCode {
    match (asked, code) {
        // A resource no server the caller may read has: MCP's "Resource not found".
        (Asked::Resource, Some(Code::NotFound)) => ErrorCode::RESOURCE_NOT_FOUND,
        // An unknown prompt (or server, or view): MCP's "Invalid prompt name" is -32602.
        (Asked::Other, Some(Code::NotFound)) => ErrorCode::INVALID_PARAMS,
        // Missing or wrong arguments, the server's -32602 included: invalid params.
        (_, Some(Code::InvalidArgument)) => ErrorCode::INVALID_PARAMS,
        // A prompt or resource the caller was not given is, to it, a name it may not use:
        // invalid params (JSON-RPC has no "forbidden").
        (_, Some(Code::PermissionDenied)) => ErrorCode::INVALID_PARAMS,
        // Nothing wrong with the request itself: the server or the broker failed it (limits,
        // availability, time, a person to act, the server's own error), or the bridge got
        // no answer from the broker.
        (
            _,
            Some(
                Code::Unauthenticated
                | Code::ResourceExhausted
                | Code::Unavailable
                | Code::DeadlineExceeded
                | Code::FailedPrecondition
                | Code::Internal,
            )
            | None,
        ) => ErrorCode::INTERNAL_ERROR,
    }
}

/// A refused `tools/call` as its answer: a result the model reads, or a protocol error.
pub fn refused_call(refusal: Refusal) -> Result<CallToolResult, ErrorData> {
    match call_outcome(refusal.code) {
        Outcome::ToolError => Ok(CallToolResult::error(vec![ContentBlock::text(
            refusal.message,
        )])),
        Outcome::Protocol(code) => Err(ErrorData::new(code, refusal.message, None)),
    }
}

/// A refused request other than a call as its JSON-RPC error.
pub fn refused_request(asked: Asked, refusal: Refusal) -> ErrorData {
    ErrorData::new(request_code(asked, refusal.code), refusal.message, None)
}

/// A `resources/read` (or subscription) of a URI that no resource the caller may read is,
/// and no template fits: asked of no server.
pub fn unlisted_resource(uri: &str) -> ErrorData {
    let message = format!(
        "no resource {uri:?}: resources/list and resources/templates/list show what can be read"
    );
    refused_request(
        Asked::Resource,
        Refusal {
            code: Some(Code::NotFound),
            message,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODES: [Code; 9] = [
        Code::NotFound,
        Code::InvalidArgument,
        Code::PermissionDenied,
        Code::Unauthenticated,
        Code::ResourceExhausted,
        Code::Unavailable,
        Code::DeadlineExceeded,
        Code::FailedPrecondition,
        Code::Internal,
    ];

    #[test]
    fn a_call_is_a_protocol_error_only_for_a_name_it_cannot_call_or_a_broken_link() {
        for code in CODES {
            let expected = match code {
                Code::NotFound => Outcome::Protocol(ErrorCode::INVALID_PARAMS),
                _ => Outcome::ToolError,
            };
            assert_eq!(call_outcome(Some(code)), expected, "{code:?}");
        }
        assert_eq!(
            call_outcome(None),
            Outcome::Protocol(ErrorCode::INTERNAL_ERROR)
        );
    }

    #[test]
    fn other_requests_get_mcps_codes() {
        let table = [
            (
                Asked::Resource,
                Code::NotFound,
                ErrorCode::RESOURCE_NOT_FOUND,
            ),
            (Asked::Other, Code::NotFound, ErrorCode::INVALID_PARAMS),
            (
                Asked::Resource,
                Code::InvalidArgument,
                ErrorCode::INVALID_PARAMS,
            ),
            (
                Asked::Other,
                Code::PermissionDenied,
                ErrorCode::INVALID_PARAMS,
            ),
            (Asked::Other, Code::Unavailable, ErrorCode::INTERNAL_ERROR),
            (Asked::Resource, Code::Internal, ErrorCode::INTERNAL_ERROR),
        ];
        for (asked, code, expected) in table {
            assert_eq!(
                request_code(asked, Some(code)),
                expected,
                "{asked:?} {code:?}"
            );
        }
        assert_eq!(request_code(Asked::Other, None), ErrorCode::INTERNAL_ERROR);
    }

    #[test]
    fn the_message_goes_as_the_broker_wrote_it() {
        let error = RequestError::UnknownTool { name: "x".into() };
        let refused = refused_call(Refusal::from(&error)).unwrap_err();
        assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(refused.message, error.to_string());
        let error = RequestError::InvalidArguments("\"a\" is not an integer".into());
        let result = refused_call(Refusal::from(&error)).unwrap();
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            result.content[0].as_text().unwrap().text,
            "\"a\" is not an integer"
        );
        let unlisted = unlisted_resource("demo://x");
        assert_eq!(unlisted.code, ErrorCode::RESOURCE_NOT_FOUND);
        assert!(unlisted.message.contains("\"demo://x\""), "{unlisted:?}");
    }
}
