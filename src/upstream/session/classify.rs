//! The one place rmcp's errors become request errors.

use rmcp::{service::ServiceError, transport::DynamicTransportError};

use crate::upstream::transport::explain::explain;
use crate::{
    domain::{
        names::ServerName,
        request_error::{Aftermath, LostCall, RequestError},
    },
    foreign_errors,
};

/// What a call's failure means; `max_result_bytes` is the server's `limits.max_result_bytes`,
/// which a result over it is reported against.
pub fn classify(server: &ServerName, max_result_bytes: usize, error: ServiceError) -> RequestError {
    let server = server.clone();
    let lost = |cause| RequestError::SessionLost {
        server: server.clone(),
        cause,
    };
    match error {
        // rmcp answers a call pending when it had to open a new session with an error: the
        // server lost the call, which is a lost session, not a server's verdict.
        ServiceError::McpError(e) if foreign_errors::is_session_reinitialized(&e) => {
            lost(LostCall::Reinitialized)
        }
        ServiceError::McpError(e) => RequestError::ServerError {
            server,
            code: e.code.0,
            message: e.message.into_owned(),
        },
        ServiceError::TransportClosed => lost(LostCall::Closed),
        ServiceError::TransportSend(error) if too_large(&error) => RequestError::ResultTooLarge {
            server,
            limit: max_result_bytes,
            aftermath: Aftermath::SessionGoesOn,
        },
        ServiceError::TransportSend(error) => lost(LostCall::Transport(explain(&error))),
        ServiceError::Cancelled { reason } => lost(LostCall::Cancelled(reason)),
        ServiceError::Timeout { timeout } => RequestError::Timeout {
            server,
            after: timeout,
        },
        ServiceError::UnexpectedResponse => not_a_tool_result(&server),
        other => RequestError::BadResult {
            server,
            reason: other.to_string(),
        },
    }
}

/// A server that answered `tools/call` with something other than a tool result.
pub fn not_a_tool_result(server: &ServerName) -> RequestError {
    RequestError::BadResult {
        server: server.clone(),
        reason: "it answered tools/call with something other than a tool result".into(),
    }
}

/// Whether a request went without a usable OAuth token (the session's auth fault says why).
pub fn lacked_token(error: &rmcp::service::ServiceError) -> bool {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let ServiceError::TransportSend(error) = error else {
        return false;
    };
    matches!(
        error
            .error
            .downcast_ref::<StreamableHttpError<reqwest::Error>>(),
        Some(StreamableHttpError::Auth(_))
    )
}

/// Whether an HTTP transport refused a response over `max_json_response_size`.
fn too_large(error: &DynamicTransportError) -> bool {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    matches!(
        error
            .error
            .downcast_ref::<StreamableHttpError<reqwest::Error>>(),
        Some(StreamableHttpError::ResponseBodyTooLarge { .. })
    )
}
