//! Which POSTs the face answers itself (see [`direct_calls`](super::direct_calls)): one
//! `tools/call` or `tools/list` request in a session, sent plainly. The test is deliberately
//! narrower than what rmcp accepts: everything it does not recognise (an `Origin`, a host off
//! the loopback list, SEP-2243 headers, a per-request protocol version, a batch, a retried
//! call) goes to rmcp, which knows every case and answers it as the spec says.
//!
//! **What would let it go**: with [`direct_calls`](super::direct_calls). Its property tests hold
//! what it takes to what rmcp reads from the same bytes, and any one unusual header to rmcp.

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

    /// Properties of the seam: what the face takes itself, rmcp reads the same way.
    mod properties {
        use proptest::prelude::*;
        use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
        use serde_json::{Value, json};

        use super::*;

        /// A body a client might send to `/mcp`: a request whose method, id, params, `_meta`
        /// keys and extra members vary, or a batch of one.
        fn body() -> impl Strategy<Value = Value> {
            let method = prop_oneof![
                4 => Just("tools/call"),
                2 => Just("tools/list"),
                1 => Just("ping"),
                1 => Just("tools/Call"),
            ];
            let id = prop_oneof![
                any::<i64>().prop_map(Value::from),
                "[a-z0-9-]{0,8}".prop_map(Value::from),
                Just(Value::Null),
            ];
            let meta_key = prop_oneof![
                Just("progressToken".to_owned()),
                Just("io.modelcontextprotocol/protocolVersion".to_owned()),
                "[a-z./]{1,10}",
            ];
            let meta = proptest::collection::btree_map(meta_key, any::<u8>(), 0..3);
            let params = (
                proptest::option::weighted(0.9, "[a-z_]{1,8}"),
                proptest::option::of(proptest::collection::btree_map(
                    "[a-z]{1,4}",
                    any::<i32>(),
                    0..3,
                )),
                proptest::option::of(meta),
                proptest::option::of(prop_oneof![
                    Just("requestState"),
                    Just("inputResponses"),
                    Just("cursor"),
                    Just("task")
                ]),
            )
                .prop_map(|(name, arguments, meta, extra)| {
                    let mut params = json!({});
                    if let Some(name) = name {
                        params["name"] = name.into();
                    }
                    if let Some(arguments) = arguments {
                        params["arguments"] = json!(arguments);
                    }
                    if let Some(meta) = meta {
                        params["_meta"] = json!(meta);
                    }
                    if let Some(extra) = extra {
                        params[extra] = if extra == "inputResponses" || extra == "task" {
                            json!({})
                        } else {
                            json!("s")
                        };
                    }
                    params
                });
            (
                prop_oneof![5 => Just("2.0"), 1 => Just("1.0")],
                proptest::option::weighted(0.9, id),
                method,
                proptest::option::weighted(0.9, params),
                proptest::bool::weighted(0.2),
                prop_oneof![9 => Just(false), 1 => Just(true)],
            )
                .prop_map(|(version, id, method, params, extra, batch)| {
                    let mut request = json!({"jsonrpc": version, "method": method});
                    if let Some(id) = id {
                        request["id"] = id;
                    }
                    if let Some(params) = params {
                        request["params"] = params;
                    }
                    if extra {
                        request["extra"] = 1.into();
                    }
                    if batch { json!([request]) } else { request }
                })
        }

        /// Params as JSON, an empty `_meta` left out (rmcp drops it; it says nothing).
        fn without_empty_meta(mut value: Value) -> Value {
            if value["_meta"] == json!({}) {
                value.as_object_mut().unwrap().remove("_meta");
            }
            value
        }

        proptest! {
            /// A body taken as a plain `tools/call` is the request rmcp reads from it, with
            /// the same id and params; one taken as a plain `tools/list` likewise.
            #[test]
            fn what_the_face_takes_is_what_rmcp_reads(body in body()) {
                let bytes = serde_json::to_vec(&body).unwrap();
                let rmcp: Option<ClientJsonRpcMessage> = serde_json::from_slice(&bytes).ok();
                if let Some(call) = call_of(&bytes) {
                    let Some(JsonRpcMessage::Request(request)) = rmcp else {
                        return Err(TestCaseError::fail(format!("rmcp reads no request in {body}")));
                    };
                    prop_assert_eq!(&request.id, &call.id);
                    let ClientRequest::CallToolRequest(read) = request.request else {
                        return Err(TestCaseError::fail(format!("rmcp reads another method in {body}")));
                    };
                    // rmcp keeps `_meta` beside the params; serialized, it is back among them.
                    let read = serde_json::to_value(&read).unwrap()["params"].clone();
                    prop_assert_eq!(without_empty_meta(read), without_empty_meta(serde_json::to_value(&call.params).unwrap()));
                    prop_assert!(list_of(&bytes).is_none());
                } else if let Some(list) = list_of(&bytes) {
                    let Some(JsonRpcMessage::Request(request)) = rmcp else {
                        return Err(TestCaseError::fail(format!("rmcp reads no request in {body}")));
                    };
                    prop_assert_eq!(&request.id, &list.id);
                    let ClientRequest::ListToolsRequest(read) = request.request else {
                        return Err(TestCaseError::fail(format!("rmcp reads another method in {body}")));
                    };
                    prop_assert_eq!(read.params.as_ref().and_then(|p| p.cursor.as_deref()), list.cursor());
                }
            }

            /// Headers: the plain set names its session whatever other headers come with it;
            /// any one disqualifying header sends the request to rmcp.
            #[test]
            fn one_unusual_header_sends_a_post_to_rmcp(
                others in proptest::collection::vec(("x-[a-z]{1,6}", "[a-z0-9]{0,6}"), 0..4),
                unusual in proptest::option::of(prop_oneof![
                    Just(("origin", "http://a.example")),
                    Just(("mcp-method", "tools/call")),
                    Just(("mcp-name", "echo")),
                    Just(("mcp-param-x", "1")),
                    Just(("mcp-protocol-version", "2026-07-28")),
                    Just(("content-type", "text/plain")),
                    Just(("content-length", "9999999")),
                    Just(("accept", "text/event-stream")),
                    Just(("host", "example.com:80")),
                ]),
            ) {
                let mut headers = plain();
                for (name, value) in &others {
                    headers.insert(
                        http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                        HeaderValue::from_str(value).unwrap(),
                    );
                }
                if let Some((name, value)) = unusual {
                    headers.insert(name, HeaderValue::from_static(value));
                }
                let session = session_of(&headers, true);
                prop_assert_eq!(session.as_deref(), unusual.is_none().then_some("s-1"));
            }
        }
    }
}
