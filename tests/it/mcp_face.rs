//! The MCP face: the catalog served over streamable HTTP at `/mcp`, used by real MCP clients
//! (rmcp's, the Python SDK's): tools, resources and prompts; calls with progress, elicitation,
//! list changes; the gate (401 and the protected-resource metadata), the token's ACL, audit
//! and rates; Origin checks; protocol versions; trace context continued upstream.

// Logging and resources/subscribe are deprecated by MCP 2026-07-28 (SEP-2577) but are what
// clients before it use.
#![expect(deprecated, reason = "the face serves clients before MCP 2026-07-28")]

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use crate::common::{
    self, Broker, WAIT, demo, everything,
    face::post,
    interactive,
    issuer::{self, Key},
};
use rmcp::{
    ClientHandler, ErrorData, RoleClient, ServiceExt as _,
    model::{
        CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
        ElicitationAction, GetPromptRequestParams, LoggingLevel, LoggingMessageNotificationParam,
        ProgressNotificationParam, ReadResourceRequestParams, ResourceContents,
        ResourceUpdatedNotificationParam, SetLevelRequestParams, SubscribeRequestParams,
        UnsubscribeRequestParams,
    },
    service::{NotificationContext, RequestContext, RunningService},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Map, Value, json};
use toolbroker::proto;

/// A caller's trace context, as a W3C `traceparent`.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A broker serving the demo server (prefix `d_`) on a face; the face's URL.
async fn face(extra: impl FnOnce(common::Builder) -> common::Builder) -> (Broker, String) {
    // reqwest (the tests' raw requests) wants a crypto provider installed.
    toolbroker::tls_provider::install();
    let builder = Broker::builder()
        .server(demo("demo").prefix("d_"))
        .top("mcp_listen", "127.0.0.1:0");
    let broker = extra(builder).start().await;
    broker.wait_ready().await;
    let url = broker.face_url().await;
    (broker, url)
}

/// What the test client saw: progress, list changes, log messages, resource updates; it
/// answers questions with `answer`.
#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<f64>>>,
    tools_changed: Arc<tokio::sync::Notify>,
    logs: Arc<Mutex<Vec<(String, Value)>>>,
    updated: Arc<Mutex<Vec<String>>>,
    answer: Option<String>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder().enable_elicitation().build();
        ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("face-test", "1"),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params.progress);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level).unwrap();
        let level = level.as_str().unwrap().to_owned();
        self.logs.lock().unwrap().push((level, params.data));
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updated.lock().unwrap().push(params.uri);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        Ok(match &self.answer {
            Some(answer) => ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({"answer": format!("{answer} (to {message})")})),
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }
}

async fn connect(
    url: &str,
    token: Option<&str>,
    client: Client,
) -> RunningService<RoleClient, Client> {
    connect_with(url, token, &[], client).await
}

/// A session sending `headers` with every request.
async fn connect_with(
    url: &str,
    token: Option<&str>,
    headers: &[(&'static str, &str)],
    client: Client,
) -> RunningService<RoleClient, Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    for (name, value) in headers {
        config.custom_headers.insert(
            reqwest::header::HeaderName::from_static(name),
            reqwest::header::HeaderValue::from_str(value).unwrap(),
        );
    }
    tokio::time::timeout(
        WAIT,
        client.serve(StreamableHttpClientTransport::from_config(config)),
    )
    .await
    .expect("initialized in time")
    .expect("initialized")
}

fn object(value: Value) -> Map<String, Value> {
    value.as_object().expect("an object").clone()
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(object(arguments))
}

#[tokio::test]
async fn the_catalog_is_served_and_calls_relay_progress_questions_and_list_changes() {
    let (broker, url) = face(|b| b).await;
    let client = Client {
        answer: Some("blue".into()),
        ..Client::default()
    };
    let session = connect(&url, None, client.clone()).await;

    // The same tools as gRPC ListTools, with their raw schemas.
    let mut listed: Vec<String> = session
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    let mut grpc: Vec<String> = broker
        .client
        .clone()
        .list_tools(proto::ListToolsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .tools
        .into_iter()
        .map(|t| t.name)
        .collect();
    listed.sort();
    grpc.sort();
    assert_eq!(listed, grpc);
    let echo = session
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == "d_echo")
        .unwrap();
    assert_eq!(echo.input_schema["required"], json!(["message"]));

    let result = session
        .call_tool(call("d_echo", json!({"message": "through the face"})))
        .await
        .unwrap();
    assert_eq!(
        result.content[0].as_text().unwrap().text,
        "through the face"
    );

    // Progress with the client's token, all of it before the answer.
    // (rmcp's client gives every request a progress token.)
    let slept = session
        .call_tool(call("d_sleep", json!({"ms": 300, "steps": 4})))
        .await
        .unwrap();
    assert_ne!(slept.is_error, Some(true), "{slept:?}");
    assert_eq!(*client.progress.lock().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);

    // A question from the server reaches this client, and its answer the tool.
    let asked = session
        .call_tool(call("d_ask", json!({"question": "Which colour?"})))
        .await
        .unwrap();
    let text = &asked.content[0].as_text().unwrap().text;
    assert!(text.contains("blue (to Which colour?)"), "{text}");

    // Resources (text, the blob byte-exact against gRPC, a templated URI) and a prompt.
    let resources = session.list_all_resources().await.unwrap();
    assert!(
        resources.iter().any(|r| r.uri == "demo://readme"),
        "{resources:?}"
    );
    let templates = session.list_all_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "demo://echo/{text}");
    let read = |uri: &str| session.read_resource(ReadResourceRequestParams::new(uri.to_owned()));
    let ResourceContents::BlobResourceContents { blob, .. } =
        &read("demo://logo.png").await.unwrap().contents[0]
    else {
        panic!("a blob")
    };
    let bytes = base64_decode(blob);
    let via_grpc = broker
        .client
        .clone()
        .read_resource(proto::ReadResourceRequest {
            server: "demo".into(),
            uri: "demo://logo.png".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let Some(proto::resource_contents::Contents::Blob(expected)) = &via_grpc.contents[0].contents
    else {
        panic!("a blob over gRPC")
    };
    assert_eq!(&bytes, expected);
    let ResourceContents::TextResourceContents { text, .. } =
        &read("demo://echo/hello").await.unwrap().contents[0]
    else {
        panic!("text")
    };
    assert!(text.contains("hello"), "{text}");
    let missing = read("demo://nothing").await.unwrap_err().to_string();
    assert!(
        missing.contains("-32002") || missing.contains("no resource"),
        "{missing}"
    );
    let prompt = session
        .get_prompt(
            GetPromptRequestParams::new("d_summarize")
                .with_arguments(object(json!({"topic": "a long story"}))),
        )
        .await
        .unwrap();
    assert!(format!("{:?}", prompt.messages).contains("a long story"));

    // A tool appears upstream: the client is told its list changed, and lists it.
    session
        .call_tool(call("d_add_tool", json!({"name": "fresh"})))
        .await
        .unwrap();
    tokio::time::timeout(WAIT, client.tools_changed.notified())
        .await
        .expect("tools/list_changed");
    let tools = session.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "d_fresh"), "{tools:?}");

    // An unknown tool is a protocol error naming it.
    let unknown = session
        .call_tool(call("d_nothing", json!({})))
        .await
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("d_nothing"), "{unknown}");
    session.cancel().await.unwrap();
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

/// The resource updates `client` saw after the first `seen`, once they include `uri`'s. The
/// client records them as they come; nothing signals one, so this polls.
async fn updates_after(client: &Client, seen: usize, uri: &str) -> Vec<String> {
    let what = format!("notifications/resources/updated for {uri}");
    common::poll(&what, Duration::from_millis(20), || async {
        let later = client.updated.lock().unwrap()[seen..].to_vec();
        later.iter().any(|u| u == uri).then_some(later)
    })
    .await
}

#[tokio::test]
async fn the_gate_acl_audit_and_rates_hold_on_the_face() {
    let dir = tempfile::tempdir().unwrap();
    let key = Key::generate("k1");
    let audit = dir.path().join("audit.jsonl");
    let auth = json!({
        "tokens": [
            {"name": "alice", "value_env": "ALICE"},
            {"name": "narrow", "value_env": "NARROW", "tools": ["d_echo", "r_echo"]},
        ],
        "jwt": {
            "issuer": issuer::ISSUER,
            "audience": issuer::AUDIENCE,
            "jwks_file": issuer::jwks_file(dir.path(), &[&key]),
        },
    });
    let audit_config = json!({"file": audit.to_str().unwrap()});
    let (broker, url) = face(|b| {
        b.server(demo("rated").prefix("r_").set("caller_rate", "1/h"))
            .top("metrics_listen", "127.0.0.1:0")
            .top("auth", auth)
            .top("audit", audit_config)
            .env("ALICE", "alice-token")
            .env("NARROW", "narrow-token")
    })
    .await;
    let http = reqwest::Client::new();
    let ping = |token: Option<&str>| {
        let mut request = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };

    // No token, or a wrong one: 401 naming the protected-resource metadata.
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp");
    let metadata_url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    let refused = ping(None).await.unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(
        refused.headers()["www-authenticate"],
        format!(r#"Bearer resource_metadata="{metadata_url}""#).as_str()
    );
    let wrong = ping(Some("nobody")).await.unwrap();
    assert_eq!(wrong.status(), 401);
    let challenge = wrong.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains(r#"error="invalid_token""#),
        "{challenge}"
    );
    let metadata: Value = http
        .get(&metadata_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], url);
    assert_eq!(metadata["authorization_servers"], json!([issuer::ISSUER]));

    // A refused tools/call is audited as over gRPC: its tool, no caller, UNAUTHENTICATED, the
    // trace of its traceparent header; a refused ping is not a call.
    let refused_call = |token: Option<&str>, tool: &str| {
        let body = json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": {"message": "x"}},
        });
        let mut request = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("traceparent", TRACEPARENT)
            .body(body.to_string());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    assert_eq!(refused_call(None, "d_echo").await.unwrap().status(), 401);
    let unknown = refused_call(Some("nobody"), "nowhere_tool").await.unwrap();
    assert_eq!(unknown.status(), 401);
    let lines = crate::audit_support::lines(&audit, 2).await;
    let refusals: Vec<(&Value, &Value, &Value, &Value, &Value)> = lines
        .iter()
        .map(|l| {
            (
                &l["caller"],
                &l["tool"],
                &l["server"],
                &l["code"],
                &l["trace_id"],
            )
        })
        .collect();
    let trace = json!(TRACEPARENT.split('-').nth(1).unwrap());
    let unauthenticated = json!("UNAUTHENTICATED");
    assert_eq!(
        refusals,
        [
            (
                &Value::Null,
                &json!("d_echo"),
                &json!("demo"),
                &unauthenticated,
                &trace
            ),
            (
                &Value::Null,
                &json!("nowhere_tool"),
                &Value::Null,
                &unauthenticated,
                &trace
            ),
        ],
        "{lines:?}"
    );
    assert!(
        lines.iter().all(|l| l.get("arguments").is_none()),
        "{lines:?}"
    );

    // A JWT from the configured issuer is a caller too.
    let jwt = key.token("carol", json!({}));
    let carol = connect(&url, Some(&jwt), Client::default()).await;
    assert!(!carol.list_all_tools().await.unwrap().is_empty());

    // The token's ACL: only its tools are listed, others cannot be called.
    let narrow = connect(&url, Some("narrow-token"), Client::default()).await;
    let names: Vec<String> = narrow
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["d_echo", "r_echo"]);
    // Refused as a tool error the model reads (the tool exists; this caller may not use it).
    let denied = narrow
        .call_tool(call("d_add", json!({"a": 1, "b": 2})))
        .await
        .unwrap();
    assert_eq!(denied.is_error, Some(true), "{denied:?}");
    let said = &denied.content[0].as_text().unwrap().text;
    assert!(said.contains("may not call \"d_add\""), "{said}");

    // The caller's rate: the second call in the hour is refused, as a tool error the model
    // reads.
    let first = narrow
        .call_tool(call("r_echo", json!({"message": "one"})))
        .await
        .unwrap();
    assert_ne!(first.is_error, Some(true));
    let second = narrow
        .call_tool(call("r_echo", json!({"message": "two"})))
        .await
        .unwrap();
    assert_eq!(second.is_error, Some(true), "{second:?}");
    let said = &second.content[0].as_text().unwrap().text;
    assert!(said.contains("rate"), "{said}");

    // Every call is audited, as over gRPC.
    let lines = crate::audit_support::lines(&audit, 5).await;
    let codes: Vec<(&str, &str)> = lines[2..]
        .iter()
        .map(|l| (l["tool"].as_str().unwrap(), l["code"].as_str().unwrap()))
        .collect();
    assert_eq!(
        codes,
        [
            ("d_add", "PERMISSION_DENIED"),
            ("r_echo", "OK"),
            ("r_echo", "RESOURCE_EXHAUSTED")
        ]
    );
    assert!(
        lines[2..].iter().all(|l| l["caller"] == "narrow"),
        "{lines:?}"
    );

    // And measured: mcp.server.operation.duration, by outcome.
    let metrics = reqwest::get(broker.metrics_url().await)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let count = |error_type: &str| {
        let label = format!(r#"error_type="{error_type}""#);
        metrics
            .lines()
            .filter(|l| l.starts_with("mcp_server_operation_duration_seconds_count{"))
            .filter(|l| l.contains(r#"mcp_method_name="tools/call""#) && l.contains(&label))
            .find_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    assert_eq!(count(""), Some(1.0), "{metrics}");
    assert_eq!(count("rate_limited"), Some(1.0), "{metrics}");
    assert_eq!(count("permission_denied"), Some(1.0), "{metrics}");
}

fn initialize(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }})
}

#[tokio::test]
async fn versions_origins_and_trace_context_are_handled_as_the_spec_says() {
    let (_broker, url) = face(|b| b).await;

    // Each version the face speaks is agreed to; an unknown one gets the newest it has.
    for version in ["2025-06-18", "2025-11-25"] {
        let (status, answer, _) = post(&url, &[], initialize(version)).await;
        assert_eq!(status, 200, "{version}");
        assert_eq!(answer.unwrap()["result"]["protocolVersion"], version);
    }
    let (_, answer, _) = post(&url, &[], initialize("2099-01-01")).await;
    assert_eq!(answer.unwrap()["result"]["protocolVersion"], "2025-11-25");
    // 2026-07-28 has no initialize: the version rides on each request.
    let (status, answer, _) = post(
        &url,
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ],
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }}}),
    )
    .await;
    assert_eq!(status, 200, "{answer:?}");
    let tools = answer.unwrap()["result"]["tools"].clone();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "d_echo"),
        "{tools}"
    );

    // A page from another origin is refused (DNS rebinding); one from this machine is not.
    let (status, _, _) = post(
        &url,
        &[("origin", "http://evil.example")],
        initialize("2025-11-25"),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _, _) = post(
        &url,
        &[("origin", "http://localhost:3000")],
        initialize("2025-11-25"),
    )
    .await;
    assert_eq!(status, 200);

    // Trace context from `_meta`, or else from the HTTP headers, reaches the server.
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let session = connect(&url, None, Client::default()).await;
    let mut params = call("d_echo_meta", json!({}));
    params.meta = Some(serde_json::from_value(json!({"traceparent": traceparent})).unwrap());
    let result = session.call_tool(params).await.unwrap();
    let meta: Value = serde_json::from_str(&result.content[0].as_text().unwrap().text).unwrap();
    assert_eq!(meta["traceparent"], traceparent);

    let common = raw_session(&url).await;
    let mut with_header: Vec<(&str, &str)> = common.iter().map(|(n, v)| (*n, v.as_str())).collect();
    with_header.push(("traceparent", traceparent));
    let (_, answer, _) = post(
        &url,
        &with_header,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "d_echo_meta", "arguments": {}}}),
    )
    .await;
    let text = answer.unwrap()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let meta: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(meta["traceparent"], traceparent);
}

/// A raw session on `url` (initialized), and the headers each of its requests carries.
async fn raw_session(url: &str) -> Vec<(&'static str, String)> {
    let (_, answer, headers) = post(url, &[], initialize("2025-11-25")).await;
    assert!(answer.is_some());
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let common = vec![
        ("mcp-session-id", session),
        ("mcp-protocol-version", "2025-11-25".to_owned()),
    ];
    let borrowed: Vec<_> = common.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = post(url, &borrowed, initialized).await;
    assert_eq!(status, 202);
    common
}

#[tokio::test]
async fn a_call_answered_directly_is_plain_json_unless_something_comes_before_its_answer() {
    let (_broker, url) = face(|b| b).await;
    let common = raw_session(&url).await;
    let headers = |extra: &[(&'static str, &'static str)]| {
        let mut all: Vec<(&str, &str)> = common.iter().map(|(n, v)| (*n, v.as_str())).collect();
        all.extend_from_slice(extra);
        all
    };
    let echo = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "d_echo", "arguments": {"message": "plain"}}})
    };
    let content_type =
        |headers: &reqwest::header::HeaderMap| headers["content-type"].to_str().unwrap().to_owned();

    // Nothing before the answer: one JSON object.
    let (status, answer, response) = post(&url, &headers(&[]), echo(2)).await;
    assert_eq!(status, 200);
    assert_eq!(content_type(&response), "application/json");
    let answer = answer.unwrap();
    assert_eq!(answer["id"], 2);
    assert_eq!(answer["result"]["content"][0]["text"], "plain");

    // What the face does not take itself (here a browser's origin) rmcp answers, the same.
    let (status, answer, response) = post(
        &url,
        &headers(&[("origin", "http://localhost:3000")]),
        echo(3),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(content_type(&response), "text/event-stream");
    assert_eq!(answer.unwrap()["result"]["content"][0]["text"], "plain");

    // Progress first: an SSE stream, the progress events in order, the answer last.
    let slow = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "d_sleep", "arguments": {"ms": 200, "steps": 2},
        "_meta": {"progressToken": "p-4"}}});
    let response = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    let response = headers(&[])
        .into_iter()
        .fold(response, |request, (name, value)| {
            request.header(name, value)
        })
        .body(slow.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(content_type(response.headers()), "text/event-stream");
    let text = response.text().await.unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect();
    let methods: Vec<_> = events
        .iter()
        .map(|event| event["method"].as_str().unwrap_or("(answer)"))
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/progress",
            "notifications/progress",
            "(answer)"
        ],
        "{text}"
    );
    assert_eq!(events[0]["params"]["progressToken"], "p-4");
    assert_eq!(events[2]["id"], 4);
    assert_ne!(events[2]["result"]["isError"], true, "{text}");

    // A session the face does not know is rmcp's to refuse.
    let mut unknown = headers(&[]);
    unknown[0].1 = "no-such-session";
    let (status, _, _) = post(&url, &unknown, echo(5)).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_tools_list_answered_directly_is_plain_json_and_the_same_as_rmcps() {
    // 250 more tools of ~1.4 KB each: over the 256 KiB the face writes at a time.
    let many = demo("many").prefix("m_").args(["--extra-tools", "250"]);
    let (_broker, url) = face(|b| b.server(many)).await;
    let common = raw_session(&url).await;
    let mut headers: Vec<(&str, &str)> = common.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let list = json!({"jsonrpc": "2.0", "id": "all", "method": "tools/list"});
    let content_type =
        |headers: &reqwest::header::HeaderMap| headers["content-type"].to_str().unwrap().to_owned();

    let (status, direct, response) = post(&url, &headers, list.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(content_type(&response), "application/json");
    // Written a piece at a time, not whole.
    let chunked = response
        .get("transfer-encoding")
        .map(|v| v.to_str().unwrap());
    assert_eq!(chunked, Some("chunked"), "{response:?}");
    let direct = direct.unwrap();
    assert_eq!(direct["id"], "all");
    let tools = direct["result"]["tools"].as_array().unwrap();
    let stats = tools.iter().find(|t| t["name"] == "d_stats").unwrap();
    assert!(stats["outputSchema"].is_object(), "{stats}");
    assert_eq!(stats["annotations"]["readOnlyHint"], true, "{stats}");

    // rmcp answers what the face does not take itself (a browser's origin): the same tools,
    // field for field.
    headers.push(("origin", "http://localhost:3000"));
    let (status, through_rmcp, response) = post(&url, &headers, list).await;
    assert_eq!(status, 200);
    assert_eq!(content_type(&response), "text/event-stream");
    let through_rmcp = through_rmcp.unwrap();
    assert_eq!(direct["result"], through_rmcp["result"]);
    assert_eq!(tools.len(), 13 + 13 + 250);
    assert!(direct["result"].get("nextCursor").is_none(), "one page");

    // A page from a cursor (an exposed name), the same both ways; a cursor that is no name is
    // refused both ways.
    headers.pop();
    let from = |cursor: &str| json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": cursor}});
    let (_, direct, response) = post(&url, &headers, from("m_echo")).await;
    assert_eq!(content_type(&response), "application/json");
    let direct = direct.unwrap();
    let names: Vec<&str> = direct["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"m_echo"));
    assert!(names.iter().all(|name| *name >= "m_echo"), "{names:?}");
    headers.push(("origin", "http://localhost:3000"));
    let (_, through_rmcp, _) = post(&url, &headers, from("m_echo")).await;
    assert_eq!(direct["result"], through_rmcp.unwrap()["result"]);
    for through_rmcp in [true, false] {
        if !through_rmcp {
            headers.pop();
        }
        let (_, refused, _) = post(&url, &headers, from("no such tool")).await;
        let refused = refused.unwrap();
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("invalid cursor"),
            "{refused}"
        );
    }
}

#[tokio::test]
async fn the_python_sdk_client_lists_calls_and_sees_progress() {
    let (_broker, url) = face(|b| b).await;
    let seen = common::python::run_script("face_client.py", &[&url]).await;
    assert!(
        seen["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "d_echo"),
        "{seen}"
    );
    assert_eq!(seen["echo"], "from python");
    assert_eq!(seen["progress"], json!([1.0, 2.0, 3.0]));
    assert_eq!(seen["prompt"], "d_summarize");
}

#[tokio::test]
async fn logs_at_the_clients_level_subscriptions_and_completions_are_bridged() {
    let (_broker, url) = face(|b| {
        b.server(everything("everything").prefix("e_"))
            .server(interactive("py").prefix("py_"))
    })
    .await;
    let client = Client::default();
    let session = connect(&url, None, client.clone()).await;

    // The server's log messages during a call reach its client, at the level the client set.
    session
        .set_level(SetLevelRequestParams::new(LoggingLevel::Info))
        .await
        .unwrap();
    let result = session
        .call_tool(call("py_chatty", json!({"count": 3})))
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text().unwrap().text, "logged 3");
    assert_eq!(
        *client.logs.lock().unwrap(),
        [
            ("info".to_owned(), json!("line 2")),
            ("warning".to_owned(), json!("line 3"))
        ],
        "debug is below the level the client set"
    );

    // Completions of a prompt's argument come from its server, by the prompt's exposed name.
    let values = session
        .complete_prompt_simple("e_completable-prompt", "department", "En")
        .await
        .unwrap();
    assert_eq!(values, ["Engineering"]);

    // A subscribed resource's updates reach the subscriber; after unsubscribing, none. A second
    // document stays subscribed: its next update shows that the server's timer sent a round of
    // updates after the unsubscribe.
    let resources = session.list_all_resources().await.unwrap();
    let documents: Vec<String> = resources
        .iter()
        .map(|r| r.uri.clone())
        .filter(|uri| uri.starts_with("demo://resource/static/document/"))
        .collect();
    let [uri, kept, ..] = documents.as_slice() else {
        panic!("server-everything lists two documents or more: {documents:?}");
    };
    for subscribed in [uri, kept] {
        session
            .subscribe(SubscribeRequestParams::new(subscribed.clone()))
            .await
            .unwrap();
    }
    // The server sends an update at once, then every 5 s.
    session
        .call_tool(call("e_toggle-subscriber-updates", json!({})))
        .await
        .unwrap();
    updates_after(&client, 0, uri).await;
    session
        .unsubscribe(UnsubscribeRequestParams::new(uri.clone()))
        .await
        .unwrap();
    let seen = client.updated.lock().unwrap().len();
    let later = updates_after(&client, seen, kept).await;
    assert!(
        !later.contains(uri),
        "an update after unsubscribing: {later:?}"
    );
    session
        .call_tool(call("e_toggle-subscriber-updates", json!({})))
        .await
        .unwrap();
    session.cancel().await.unwrap();
}

#[tokio::test]
async fn each_caller_gets_its_own_session_of_a_per_caller_server() {
    async fn whoami(session: &RunningService<RoleClient, Client>) -> Value {
        let arguments = json!({"env": ["CALLER", "TENANT"]});
        let result = session
            .call_tool(call("m_whoami", arguments))
            .await
            .unwrap();
        serde_json::from_str(&result.content[0].as_text().unwrap().text).unwrap()
    }
    let auth = json!({"tokens": [
        {"name": "alice", "value_env": "ALICE"},
        {"name": "bob", "value_env": "BOB"},
    ]});
    let (_broker, url) = face(|b| {
        b.server(
            demo("mine")
                .prefix("m_")
                .set("isolation", "per-caller")
                .set(
                    "env",
                    json!({"CALLER": "${caller.id}", "TENANT": "${caller.header.x-tenant}"}),
                )
                .set("discovery", json!({"headers": {"x-tenant": "none"}})),
        )
        .top("auth", auth)
        .env("ALICE", "alice-token")
        .env("BOB", "bob-token")
    })
    .await;
    let alice = connect_with(
        &url,
        Some("alice-token"),
        &[("x-tenant", "blue")],
        Client::default(),
    )
    .await;
    let bob = connect_with(
        &url,
        Some("bob-token"),
        &[("x-tenant", "red")],
        Client::default(),
    )
    .await;
    let (a, b) = (whoami(&alice).await, whoami(&bob).await);
    assert_eq!(a["env"], json!({"CALLER": "alice", "TENANT": "blue"}));
    assert_eq!(b["env"], json!({"CALLER": "bob", "TENANT": "red"}));
    assert_ne!(a["pid"], b["pid"], "a process each");
    assert_eq!(
        whoami(&alice).await["pid"],
        a["pid"],
        "the same caller, the same process"
    );
}

#[tokio::test]
async fn a_callers_subscription_opens_the_listen_stream_of_its_own_2026_session() {
    // One caller's session of a 2026-07-28 server opens `subscriptions/listen` only at its
    // caller's first subscription; the subscription is answered once that stream is
    // acknowledged, for each caller on their own session.
    let auth = json!({"tokens": [
        {"name": "alice", "value_env": "ALICE"},
        {"name": "bob", "value_env": "BOB"},
    ]});
    let (_broker, url) = face(|b| {
        b.server(
            common::config::modern("modern")
                .prefix("m_")
                .set("isolation", "per-caller"),
        )
        .top("auth", auth)
        .env("ALICE", "alice-token")
        .env("BOB", "bob-token")
    })
    .await;
    for token in ["alice-token", "bob-token"] {
        let session = connect(&url, Some(token), Client::default()).await;
        let said = session
            .call_tool(call("m_touch", json!({"text": "before"})))
            .await
            .unwrap();
        assert_eq!(said.content[0].as_text().unwrap().text, "touched");
        tokio::time::timeout(
            WAIT,
            session.subscribe(SubscribeRequestParams::new("memo://note")),
        )
        .await
        .expect("the subscription is answered")
        .unwrap_or_else(|e| panic!("{token}'s subscription is acknowledged: {e}"));
        session.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn sigterm_lets_face_calls_in_flight_finish_and_refuses_new_ones() {
    use nix::{
        sys::signal::{Signal, kill},
        unistd::Pid,
    };
    let (broker, url) = face(|b| b.top("shutdown_grace", "10s")).await;
    let session = Arc::new(connect(&url, None, Client::default()).await);
    let running = {
        let session = session.clone();
        tokio::spawn(async move {
            session
                .call_tool(call("d_sleep", json!({"ms": 1500})))
                .await
        })
    };
    broker
        .wait_for_log("sleep started", common::stderr_says("sleep started"))
        .await;
    kill(Pid::from_raw(broker.pid() as i32), Signal::SIGTERM).unwrap();
    broker
        .wait_for_log("the shutdown", |l| l["message"] == "shutting down")
        .await;
    // A tool error the model reads, as every face answers UNAVAILABLE.
    let late = session
        .call_tool(call("d_echo", json!({"message": "too late"})))
        .await
        .unwrap();
    assert_eq!(late.is_error, Some(true), "{late:?}");
    let said = &late.content[0].as_text().unwrap().text;
    assert!(said.contains("shutting down"), "{said}");
    let finished = tokio::time::timeout(WAIT, running).await.unwrap().unwrap();
    let finished = finished.unwrap();
    assert_eq!(finished.content[0].as_text().unwrap().text, "slept 1500 ms");
    let status = broker.terminate().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn a_call_the_client_cancels_is_cancelled_upstream() {
    let (broker, url) = face(|b| b).await;
    let session = connect(&url, None, Client::default()).await;
    let sleeping = session.call_tool(call("d_sleep", json!({"ms": 60000})));
    tokio::select! {
        result = sleeping => panic!("a minute's sleep returned: {result:?}"),
        _ = broker.wait_for_log("the sleep", common::stderr_says("sleep started")) => {}
    }
    // Dropping the call sent notifications/cancelled; the face drops the broker's call, which
    // cancels it upstream.
    let cancelled = broker
        .wait_for_log("the cancellation", common::stderr_says("sleep cancelled"))
        .await;
    let message = cancelled["message"].as_str().unwrap();
    assert!(message.contains("request cancelled"), "{message}");
    let result = session
        .call_tool(call("d_echo", json!({"message": "on"})))
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text().unwrap().text, "on");
}

#[tokio::test]
async fn a_view_is_served_at_its_own_path_and_follows_a_reload() {
    let views = json!({"math": ["d_add", "d_sum"]});
    let (broker, url) = face(|b| b.top("views", views)).await;
    let client = Client::default();
    let math = connect(&format!("{url}/math"), None, client.clone()).await;
    let listed = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools.into_iter().map(|t| t.name.to_string()).collect()
    };
    assert_eq!(listed(math.list_all_tools().await.unwrap()), ["d_add"]);
    let sum = math
        .call_tool(call("d_add", json!({"a": 2, "b": 3})))
        .await
        .unwrap();
    assert!(format!("{:?}", sum.content).contains("\"5\""), "{sum:?}");
    let outside = math
        .call_tool(call("d_echo", json!({"message": "x"})))
        .await
        .unwrap_err()
        .to_string();
    assert!(outside.contains("d_echo"), "{outside}");
    // The whole catalog is still at /mcp.
    let whole = connect(&url, None, Client::default()).await;
    assert!(whole.list_all_tools().await.unwrap().len() > 5);

    // An unknown view: 404 naming the views there are.
    let unknown = reqwest::Client::new()
        .post(format!("{url}/sales"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    assert!(unknown.text().await.unwrap().contains("math"));

    // A reload widens the view: the session is told, and lists the new tool.
    let after = common::Config::new()
        .top("mcp_listen", "127.0.0.1:0")
        .top("views", json!({"math": ["d_add", "d_echo"]}))
        .server(demo("demo").prefix("d_"));
    broker.rewrite_config(&after.text());
    tokio::time::timeout(WAIT, client.tools_changed.notified())
        .await
        .expect("tools/list_changed after the view changed");
    assert_eq!(
        listed(math.list_all_tools().await.unwrap()),
        ["d_add", "d_echo"]
    );
    math.cancel().await.unwrap();
    whole.cancel().await.unwrap();
}
