//! Which POSTs the face answers itself (see [`direct_calls`](super::direct_calls)): one
//! `tools/call` or `tools/list` request in a session, sent plainly. The test is deliberately
//! narrower than what rmcp accepts: everything it does not recognise (an `Origin`, a host off
//! the loopback list, SEP-2243 headers, a per-request protocol version, a batch, a retried
//! call) goes to rmcp, which knows every case and answers it as the spec says.

use http::{HeaderMap, header};
use rmcp::{
    model::{
        CallToolRequestMethod, CallToolRequestParams, JsonRpcVersion2_0, ListToolsRequestMethod,
        PaginatedRequestParams, RequestId, RequestMetaObject,
    },
    transport::streamable_http_server::SessionId,
};
use serde::Deserialize;

/// The largest body taken directly; rmcp takes larger ones (up to its own limit).
const MAX_BODY: u64 = 1024 * 1024;

/// The protocol versions with sessions, whose calls may be answered directly.
const SESSION_VERSIONS: [&str; 2] = ["2025-06-18", "2025-11-25"];

/// The host names a face on loopback accepts (rmcp's default list, as hosts appear in a
/// `Host` header).
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// One plain `tools/call` request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlainCall {
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion2_0,
    /// Its JSON-RPC id.
    pub id: RequestId,
    #[serde(rename = "method")]
    _method: CallToolRequestMethod,
    /// The call.
    pub params: CallToolRequestParams,
}

/// One plain `tools/list` request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlainList {
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion2_0,
    /// Its JSON-RPC id.
    pub id: RequestId,
    #[serde(rename = "method")]
    _method: ListToolsRequestMethod,
    /// Its cursor and `_meta`, if it gave them.
    #[serde(default)]
    params: Option<PaginatedRequestParams>,
}

/// The session a POST with `headers` belongs to, if its headers are plain: JSON in, JSON and
/// SSE accepted, a known length, a protocol version with sessions, no `Origin`, no SEP-2243
/// headers (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`: rmcp checks them against the body), and (on a face bound to `loopback`) a loopback host.
pub fn session_of(headers: &HeaderMap, loopback: bool) -> Option<SessionId> {
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let essence = |value: &str| {
        let essence = value.split(';').next().unwrap_or_default();
        essence.trim().to_ascii_lowercase()
    };
    let json_in = essence(text(header::CONTENT_TYPE.as_str())?) == "application/json";
    // A weighted Accept (`;q=`) goes to rmcp, which weighs it.
    let accept = text(header::ACCEPT.as_str()).filter(|accept| !accept.contains(';'))?;
    let accepted = |wanted: &str| accept.split(',').any(|kind| essence(kind) == wanted);
    let both_out = accepted("application/json") && accepted("text/event-stream");
    let length = text(header::CONTENT_LENGTH.as_str())?.parse::<u64>().ok()?;
    let version = text("mcp-protocol-version")?;
    let host = text(header::HOST.as_str())?;
    let plain = json_in
        && both_out
        && length <= MAX_BODY
        && SESSION_VERSIONS.contains(&version)
        && !headers.contains_key(header::ORIGIN)
        && !headers.contains_key("mcp-method")
        && !headers.contains_key("mcp-name")
        && !headers
            .keys()
            .any(|name| name.as_str().starts_with("mcp-param-"))
        && (!loopback || LOOPBACK_HOSTS.contains(&host_name(host)));
    let session = text("mcp-session-id")?;
    plain.then(|| SessionId::from(session))
}

/// A `Host` header's name, without its port.
fn host_name(host: &str) -> &str {
    match host.rfind(':') {
        Some(colon) if !host[colon..].contains(']') => &host[..colon],
        _ => host,
    }
}

/// The call a POST's `body` is, if it is one plain `tools/call` request: no fields beyond
/// JSON-RPC's, no protocol keys in its `_meta`, not the retry of an incomplete call.
pub fn call_of(body: &[u8]) -> Option<PlainCall> {
    let call: PlainCall = serde_json::from_slice(body).ok()?;
    let protocol_meta = has_protocol_keys(call.params.meta.as_ref());
    let retried = call.params.input_responses.is_some() || call.params.request_state.is_some();
    (!protocol_meta && !retried).then_some(call)
}

/// The listing a POST's `body` is, if it is one plain `tools/list` request: no fields beyond
/// JSON-RPC's, no protocol keys in its `_meta`.
pub fn list_of(body: &[u8]) -> Option<PlainList> {
    let list: PlainList = serde_json::from_slice(body).ok()?;
    let meta = list.params.as_ref().and_then(|params| params.meta.as_ref());
    (!has_protocol_keys(meta)).then_some(list)
}

impl PlainList {
    /// The page it asks for: the cursor it gave, if any.
    pub fn cursor(&self) -> Option<&str> {
        self.params.as_ref()?.cursor.as_deref()
    }
}

/// Whether a request's `_meta` has keys of the protocol's own (2026-07-28 puts the version
/// and the client's details there): rmcp reads those.
fn has_protocol_keys(meta: Option<&RequestMetaObject>) -> bool {
    meta.is_some_and(|meta| {
        meta.0
            .keys()
            .any(|key| key.starts_with("io.modelcontextprotocol/"))
    })
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn plain() -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("content-length", "120"),
            ("mcp-protocol-version", "2025-11-25"),
            ("host", "127.0.0.1:8080"),
            ("mcp-session-id", "s-1"),
        ] {
            headers.insert(name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn plain_headers_name_their_session_and_anything_else_goes_to_rmcp() {
        assert_eq!(session_of(&plain(), true).as_deref(), Some("s-1"));
        for host in ["localhost", "[::1]:9", "LOCALHOST:1"] {
            let mut headers = plain();
            headers.insert("host", HeaderValue::from_static(host));
            let expected = (host != "LOCALHOST:1").then_some("s-1");
            assert_eq!(session_of(&headers, true).as_deref(), expected, "{host}");
        }
        let changed: [(&str, Option<&'static str>); 12] = [
            ("mcp-session-id", None),
            ("content-length", None),
            ("content-length", Some("2000000")),
            ("content-type", Some("text/plain")),
            ("accept", Some("application/json")),
            ("accept", Some("application/json, text/event-stream;q=0")),
            ("mcp-protocol-version", Some("2026-07-28")),
            ("mcp-protocol-version", None),
            ("origin", Some("http://localhost:3000")),
            ("mcp-method", Some("tools/call")),
            ("mcp-param-message", Some("hi")),
            ("host", Some("example.com")),
        ];
        for (name, value) in changed {
            let mut headers = plain();
            match value {
                Some(value) => headers.insert(name, HeaderValue::from_static(value)),
                None => headers.remove(name),
            };
            assert_eq!(session_of(&headers, true), None, "{name}: {value:?}");
        }
        let mut elsewhere = plain();
        elsewhere.insert("host", HeaderValue::from_static("tools.example.com"));
        assert_eq!(session_of(&elsewhere, false).as_deref(), Some("s-1"));
    }

    #[test]
    fn only_one_plain_tools_call_request_is_taken() {
        let call = call_of(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":{"progressToken":"p"}}}"#,
        )
        .unwrap();
        assert_eq!(call.id, RequestId::Number(7));
        assert_eq!(call.params.name, "echo");
        assert!(call.params.meta.unwrap().get_progress_token().is_some());
        for body in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}"#,
            r#"[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}]"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","requestState":"s"}}"#,
            r#"{"jsonrpc":"1.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#,
        ] {
            assert!(call_of(body.as_bytes()).is_none(), "{body}");
        }
    }

    #[test]
    fn only_one_plain_tools_list_request_is_taken() {
        for (body, id) in [
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
                RequestId::Number(3),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"l","method":"tools/list","params":{"_meta":{"progressToken":1}}}"#,
                RequestId::String("l".into()),
            ),
        ] {
            let list = list_of(body.as_bytes()).unwrap();
            assert_eq!((&list.id, list.cursor()), (&id, None), "{body}");
        }
        let paged = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"c"}}"#;
        assert_eq!(list_of(paged.as_bytes()).unwrap().cursor(), Some("c"));
        for body in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/list"}"#,
            r#"[{"jsonrpc":"2.0","id":7,"method":"tools/list"}]"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","extra":1}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        ] {
            assert!(list_of(body.as_bytes()).is_none(), "{body}");
        }
        assert!(call_of(br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#).is_none());
    }
}
