//! The one place that reads a dependency's error *text*, for the errors a dependency gives no
//! type to match. Each reading is tested against the real error, provoked from the real
//! dependency (see `tests.rs`), so that an upgrade that rewords one fails a test, not a user.
//! The texts are those of the versions `Cargo.toml` pins exactly (rmcp) or that `Cargo.lock`
//! holds; `docs/dependency-asks.md` says what each dependency could expose instead.

use http::StatusCode;
use rmcp::{ErrorData, transport::streamable_http_client::StreamableHttpError};

/// What rmcp 3.11's streamable HTTP client answers, as a JSON-RPC error, to each call that was
/// waiting for its answer when the client had to initialize a new session (the server forgot
/// the old one: it restarted).
const SESSION_REINITIALIZED: &str = "session was re-initialized before the response arrived";

/// How rmcp 3.11's (private) `BoundedSseStreamError::EventTooLarge` starts, as the body error
/// of an SSE answer stream whose event went over `max_sse_event_size`.
const SSE_EVENT_TOO_LARGE: &str = "SSE event exceeded the maximum size";

/// How hyper-util (through reqwest) says a host name did not resolve, and what the system
/// resolver's error says.
const DNS_FAILURES: [&str; 2] = ["dns error", "failed to lookup address"];

/// How tonic's `grpc-message` says a request was over `max_decoding_message_size`, plain and
/// percent-encoded as it travels in the header.
const MESSAGE_TOO_LARGE: [&str; 2] = ["message length too large", "message%20length%20too%20large"];

/// Whether rmcp failed a call because the session was re-initialized while the call waited.
pub fn is_session_reinitialized(error: &ErrorData) -> bool {
    error.message.contains(SESSION_REINITIALIZED)
}

/// Whether an SSE answer stream broke because one event went over the size limit.
pub fn is_sse_event_too_large(error: &sse_stream::Error) -> bool {
    matches!(error, sse_stream::Error::Body(body) if body.to_string().starts_with(SSE_EVENT_TOO_LARGE))
}

/// The status of a 401 or 403 without an authentication challenge, which rmcp reports as an
/// "unexpected server response" whose text starts with the status.
pub fn unchallenged_refusal(error: &StreamableHttpError<reqwest::Error>) -> Option<StatusCode> {
    let StreamableHttpError::UnexpectedServerResponse(text) = error else {
        return None;
    };
    [StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN]
        .into_iter()
        .find(|status| text.starts_with(&format!("HTTP {}", status.as_u16())))
}

/// Whether the text of a connection error's chain of causes says name resolution failed.
pub fn is_dns_failure(chain: &str) -> bool {
    DNS_FAILURES.iter().any(|text| chain.contains(text))
}

/// Whether a `grpc-message` header value says the request was over the size limit.
pub fn is_message_too_large(grpc_message: &str) -> bool {
    MESSAGE_TOO_LARGE
        .iter()
        .any(|text| grpc_message.contains(text))
}

#[cfg(test)]
mod tests;
