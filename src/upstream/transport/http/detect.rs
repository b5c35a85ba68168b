//! Which HTTP transport a bare `url` speaks, as the MCP spec's backwards-compatibility section
//! says: POST `initialize` to the URL; if that succeeds it is streamable HTTP, if it fails with
//! 400, 404 or 405 GET the URL and expect the legacy SSE `endpoint` event. A 400 whose body is
//! one of MCP 2026-07-28's own errors (an unsupported version: a server without the handshake)
//! is streamable HTTP too, as 2026-07-28's backward-compatibility rules say.

use http::{HeaderMap, HeaderValue, StatusCode, header};
use rmcp::model::{
    ClientConfig, ClientJsonRpcMessage, ClientRequest, ErrorCode, InitializeRequest, NumberOrString,
};
use url::Url;

use crate::domain::{names::ServerName, outcome::StartFailure};
use crate::upstream::{
    transport::explain::explain,
    transport::http::SharedHeaders,
    transport::sse::{self, SseTransport},
};

/// What the URL turned out to be.
pub enum Detected {
    /// Streamable HTTP: connect with rmcp's client.
    StreamableHttp,
    /// Legacy SSE, already connected (its stream is open and the endpoint known).
    Sse(Box<SseTransport>),
}

/// Probes `url` and returns its transport, or why it speaks neither.
pub async fn detect(
    client: &reqwest::Client,
    url: &Url,
    headers: &SharedHeaders,
    info: ClientConfig,
    server: ServerName,
    max_event: usize,
) -> Result<Detected, StartFailure> {
    let response = probe(client, url, headers.get(), info)
        .await
        .map_err(|e| StartFailure::Unreachable(explain(&e)))?;
    let status = response.status();
    match status {
        s if s.is_success() => {
            speaks_mcp(response.headers())?;
            end_probe_session(client, url, &headers.get(), response.headers()).await;
            Ok(Detected::StreamableHttp)
        }
        StatusCode::BAD_REQUEST if modern_refusal(&response.bytes().await.unwrap_or_default()) => {
            Ok(Detected::StreamableHttp)
        }
        StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED => {
            match sse::connect(client.clone(), url, headers.clone(), server, max_event).await {
                Ok(transport) => Ok(Detected::Sse(Box::new(transport))),
                Err(sse_error) => Err(StartFailure::NeitherTransport {
                    status,
                    sse: Box::new(sse_error),
                }),
            }
        }
        other => Err(StartFailure::ProbeRefused(other)),
    }
}

/// POSTs `initialize` to `url` as a streamable HTTP client would, sending `headers`; a session
/// the answer opens is the caller's to end ([`end_probe_session`]).
pub async fn probe(
    client: &reqwest::Client,
    url: &Url,
    headers: HeaderMap,
    info: ClientConfig,
) -> Result<reqwest::Response, reqwest::Error> {
    let probe = ClientJsonRpcMessage::request(
        ClientRequest::InitializeRequest(InitializeRequest::new(info)),
        NumberOrString::Number(0),
    );
    client
        .post(url.clone())
        .headers(headers)
        .header(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        )
        .json(&probe)
        .send()
        .await
}

/// Whether `body` is a JSON-RPC error only a 2026-07-28 server sends (an unsupported
/// protocol version, a missing client capability, a header mismatch).
fn modern_refusal(body: &[u8]) -> bool {
    const MODERN: [ErrorCode; 3] = [
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        ErrorCode::HEADER_MISMATCH,
    ];
    let Ok(message) = serde_json::from_slice::<serde_json::Value>(body) else {
        return false;
    };
    message["error"]["code"]
        .as_i64()
        .is_some_and(|code| MODERN.iter().any(|modern| i64::from(modern.0) == code))
}

/// A streamable HTTP server answers `initialize` with JSON or an event stream, not a web page.
fn speaks_mcp(headers: &HeaderMap) -> Result<(), StartFailure> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.starts_with("application/json") || content_type.starts_with("text/event-stream")
    {
        Ok(())
    } else {
        Err(StartFailure::NotMcp {
            content_type: content_type.to_owned(),
        })
    }
}

/// Ends the session the probe opened, so the server does not keep it; failure is harmless.
pub async fn end_probe_session(
    client: &reqwest::Client,
    url: &Url,
    headers: &HeaderMap,
    answer: &HeaderMap,
) {
    let Some(session) = answer.get("mcp-session-id") else {
        return;
    };
    let _ = client
        .delete(url.clone())
        .headers(headers.clone())
        .header("mcp-session-id", session.clone())
        .send()
        .await;
}

#[cfg(test)]
mod tests {
    use super::modern_refusal;

    #[test]
    fn only_2026_errors_say_streamable_http() {
        let refusal = |code: i64| {
            format!(r#"{{"jsonrpc":"2.0","id":0,"error":{{"code":{code},"message":"m"}}}}"#)
        };
        assert!(modern_refusal(refusal(-32022).as_bytes()));
        assert!(modern_refusal(refusal(-32021).as_bytes()));
        assert!(modern_refusal(refusal(-32020).as_bytes()));
        assert!(!modern_refusal(refusal(-32600).as_bytes()));
        assert!(!modern_refusal(b"Bad Request"));
        assert!(!modern_refusal(b""));
    }
}
