//! Each reading of a dependency's text, against the real error from the real dependency: rmcp's
//! streamable HTTP client and its reqwest backend talking to small HTTP servers of the test's
//! own on 127.0.0.1, reqwest resolving a name that cannot exist, and tonic refusing a request
//! over its size limit.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    body::Body,
    extract::State,
    http::{HeaderMap, StatusCode as AxumStatus, header},
    response::{IntoResponse, Response},
    routing::post,
};
use futures::StreamExt as _;
use rmcp::{
    ServiceExt as _,
    model::{
        CallToolRequestParams, ClientCapabilities, ClientConfig, ClientJsonRpcMessage,
        ClientRequest, Implementation, NumberOrString, PingRequest, ProtocolVersion,
    },
    service::ServiceError,
    transport::{
        StreamableHttpClientTransport,
        streamable_http_client::{
            StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpPostResponse,
        },
    },
};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::*;

const WAIT: Duration = Duration::from_secs(10);

/// Serves `router` on a free 127.0.0.1 port; returns the URL of `/mcp`.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}/mcp")
}

/// reqwest as the broker builds it (ring as the TLS provider).
fn client() -> reqwest::Client {
    crate::tls_provider::install();
    reqwest::Client::new()
}

/// A JSON-RPC request, as a client POSTs it.
fn ping() -> ClientJsonRpcMessage {
    ClientJsonRpcMessage::request(
        ClientRequest::PingRequest(PingRequest::default()),
        NumberOrString::Number(1),
    )
}

/// A streamable HTTP server that forgets its first session once a call is waiting on it, as a
/// server that restarted does.
#[derive(Default)]
struct Forgetful {
    sessions: AtomicUsize,
    call_waiting: AtomicBool,
    call_arrived: Notify,
}

async fn forgetful(
    State(server): State<Arc<Forgetful>>,
    headers: HeaderMap,
    Json(message): Json<Value>,
) -> Response {
    let session = headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
    let Some(id) = message.get("id").cloned() else {
        return AxumStatus::ACCEPTED.into_response();
    };
    match message["method"].as_str() {
        Some("initialize") => {
            let n = server.sessions.fetch_add(1, Ordering::SeqCst) + 1;
            let result = json!({
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "forgetful", "version": "1"},
            });
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
            ([("mcp-session-id", format!("s{n}"))], Json(answer)).into_response()
        }
        _ if session == Some("s1") && server.call_waiting.load(Ordering::SeqCst) => {
            AxumStatus::NOT_FOUND.into_response()
        }
        Some("tools/call") => {
            server.call_waiting.store(true, Ordering::SeqCst);
            server.call_arrived.notify_one();
            // An answer stream that stays open and never answers.
            let body = Body::from_stream(futures::stream::pending::<Result<String, String>>());
            ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
        }
        _ => Json(json!({"jsonrpc": "2.0", "id": id, "result": {}})).into_response(),
    }
}

#[tokio::test]
async fn rmcp_fails_a_waiting_call_so_when_it_reinitializes_the_session() {
    let state = Arc::new(Forgetful::default());
    let url = serve(
        Router::new()
            .route(
                "/mcp",
                post(forgetful).get(|| async { AxumStatus::METHOD_NOT_ALLOWED }),
            )
            .with_state(state.clone()),
    )
    .await;
    let transport = StreamableHttpClientTransport::with_client(
        client(),
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let info = ClientConfig::new(ClientCapabilities::default(), Implementation::new("t", "1"))
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
    let client = info.serve(transport).await.expect("initialize");
    let peer = client.peer().clone();
    let call =
        tokio::spawn(async move { peer.call_tool(CallToolRequestParams::new("wait")).await });
    tokio::time::timeout(WAIT, state.call_arrived.notified())
        .await
        .expect("the call reached the server");
    // The next request meets the forgotten session (404): rmcp opens a new one.
    let _ = tokio::time::timeout(
        WAIT,
        client
            .peer()
            .send_request(ClientRequest::PingRequest(PingRequest::default())),
    )
    .await;
    let failed = tokio::time::timeout(WAIT, call)
        .await
        .expect("the waiting call ended")
        .expect("the call task");
    match failed {
        Err(ServiceError::McpError(error)) => assert!(
            is_session_reinitialized(&error),
            "rmcp's words changed: {error:?}"
        ),
        other => panic!("expected rmcp's re-initialization error, got {other:?}"),
    }
    assert_eq!(state.sessions.load(Ordering::SeqCst), 2, "a second session");
}

#[tokio::test]
async fn rmcp_cuts_an_sse_answer_over_the_size_limit_so() {
    let event = format!("data: {{\"x\": \"{}\"}}\n\n", "y".repeat(4096));
    let url = serve(Router::new().route(
        "/mcp",
        post(move || {
            let event = event.clone();
            async move { ([(header::CONTENT_TYPE, "text/event-stream")], event) }
        }),
    ))
    .await;
    let response = client()
        .post_message_with_max_sse_event_size(url.into(), ping(), None, None, HashMap::new(), 1024)
        .await
        .expect("the POST is answered");
    let StreamableHttpPostResponse::Sse(mut stream, _) = response else {
        panic!("an event stream was expected");
    };
    let error = stream
        .next()
        .await
        .expect("an item")
        .expect_err("the event is over the limit");
    assert!(
        is_sse_event_too_large(&error),
        "rmcp's words changed: {error}"
    );
    let other = sse_stream::Error::Body(Box::new(std::io::Error::other("connection reset")));
    assert!(!is_sse_event_too_large(&other));
}

#[tokio::test]
async fn rmcp_reports_a_401_or_403_without_a_challenge_so() {
    for status in [AxumStatus::UNAUTHORIZED, AxumStatus::FORBIDDEN] {
        let url = serve(Router::new().route("/mcp", post(move || async move { status }))).await;
        let error = client()
            .post_message(url.into(), ping(), None, None, HashMap::new())
            .await
            .expect_err("refused");
        assert_eq!(
            unchallenged_refusal(&error).map(|s| s.as_u16()),
            Some(status.as_u16()),
            "rmcp's words changed: {error:?}"
        );
    }
    let not_found = rmcp::transport::streamable_http_client::StreamableHttpError::<
        reqwest::Error,
    >::UnexpectedServerResponse("HTTP 404 Not Found: x".into());
    assert_eq!(unchallenged_refusal(&not_found), None);
}

#[tokio::test]
async fn reqwest_says_so_when_a_host_name_does_not_resolve() {
    // `.invalid` never resolves (RFC 6761), here or anywhere.
    let error = client()
        .get("http://no-such-host.invalid/mcp")
        .send()
        .await
        .expect_err("no such host");
    let mut chain = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        chain.push_str(": ");
        chain.push_str(&cause.to_string());
        source = cause.source();
    }
    assert!(is_dns_failure(&chain), "hyper's words changed: {chain}");
    assert!(!is_dns_failure("connection refused"));
}

#[tokio::test]
async fn tonic_says_so_when_a_request_is_over_its_size_limit() {
    use tower::ServiceExt as _;

    let (_, health) = tonic_health::server::health_reporter();
    let service = health.max_decoding_message_size(8);
    // One gRPC frame: uncompressed, a 64-byte HealthCheckRequest (field 1, a long name).
    let name = "x".repeat(62);
    let mut frame = vec![0u8];
    frame.extend_from_slice(&64u32.to_be_bytes());
    frame.extend_from_slice(&[0x0a, 62]);
    frame.extend_from_slice(name.as_bytes());
    let request = http::Request::builder()
        .method("POST")
        .uri("/grpc.health.v1.Health/Check")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(tonic::body::Body::new(Body::from(frame)))
        .unwrap();
    let response = service.oneshot(request).await.unwrap();
    let headers = response.headers();
    assert_eq!(headers.get("grpc-status").unwrap(), "11", "{headers:?}");
    let message = headers.get("grpc-message").unwrap().to_str().unwrap();
    assert!(
        is_message_too_large(message),
        "tonic's words changed: {message}"
    );
    assert!(!is_message_too_large("deadline exceeded"));
}
