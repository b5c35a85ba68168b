//! Remote MCP servers over streamable HTTP and legacy SSE, set explicitly and auto-detected:
//! our demo server and server-everything, on 127.0.0.1.

use crate::common::{self, Broker, Server, demo, everything, servers::HttpServer, url_server};
use serde_json::json;
use tonic::Code;
use toolbroker::proto::{self, ServerState};

/// A server entry for `url` with prefix `NAME_`, with `transport` unless it is "auto".
fn remote(name: &str, url: &str, transport: &str) -> Server {
    let server = url_server(name, url).prefix(&format!("{name}_"));
    match transport {
        "auto" => server,
        transport => server.set("transport", transport),
    }
}

/// Each tool of `server` without its prefix, with its schema: comparable across transports.
fn tools_of(tools: &[proto::Tool], server: &str) -> Vec<(String, String)> {
    let mut of: Vec<_> = tools
        .iter()
        .filter(|t| t.server == server)
        .map(|t| (t.original_name.clone(), t.input_schema_json.clone()))
        .collect();
    of.sort();
    of
}

#[tokio::test]
async fn demo_server_over_both_http_transports_matches_stdio() {
    let streamable = HttpServer::demo("streamable-http", None).await;
    let sse = HttpServer::demo("sse", None).await;
    let broker = Broker::builder()
        .servers([
            demo("stdio").prefix("stdio_"),
            remote("http", &streamable.url, "streamable-http"),
            remote("sse", &sse.url, "sse"),
            remote("autohttp", &streamable.url, "auto"),
            remote("autosse", &sse.url, "auto"),
        ])
        .start()
        .await;
    broker.wait_ready().await;

    let transports: Vec<_> = broker
        .servers()
        .await
        .iter()
        .map(|s| (s.name.clone(), s.state(), s.transport.clone()))
        .collect();
    let want = [
        ("stdio", "stdio"),
        ("http", "streamable-http"),
        ("sse", "sse"),
        ("autohttp", "streamable-http"),
        ("autosse", "sse"),
    ];
    for ((name, state, transport), (want_name, want_transport)) in transports.iter().zip(want) {
        assert_eq!(
            (name.as_str(), *state, transport.as_str()),
            (want_name, ServerState::Ready, want_transport)
        );
    }

    let tools = broker.tools().await.tools;
    let reference = tools_of(&tools, "stdio");
    assert!(reference.len() >= 10);
    for server in ["http", "sse", "autohttp", "autosse"] {
        assert_eq!(
            tools_of(&tools, server),
            reference,
            "{server} lists the same tools"
        );
        let echo = broker
            .text(&format!("{server}_echo"), r#"{"message": "same"}"#)
            .await;
        assert_eq!(echo, "same");
        let sum = broker
            .text(&format!("{server}_add"), r#"{"a": 20, "b": 22}"#)
            .await;
        assert_eq!(sum, "42");
        let image = broker
            .call(&format!("{server}_tiny_image"), "{}")
            .await
            .unwrap();
        let stdio_image = broker.call("stdio_tiny_image", "{}").await.unwrap();
        assert_eq!(
            image.content, stdio_image.content,
            "{server}: the same bytes"
        );
    }
}

#[tokio::test]
async fn server_everything_over_sse_and_streamable_http_matches_stdio() {
    let streamable = HttpServer::everything("streamableHttp").await;
    let sse = HttpServer::everything("sse").await;
    let servers = [
        everything("stdio").prefix("stdio_"),
        remote("http", &streamable.url, "streamable-http"),
        remote("sse", &sse.url, "sse"),
        remote("autohttp", &streamable.url, "auto"),
        remote("autosse", &sse.url, "auto"),
    ];
    let allowed = || json!(["echo", "get-sum", "get-tiny-image"]);
    let broker = Broker::builder()
        .servers(servers.map(|server| server.set("tools", allowed())))
        .start()
        .await;
    broker.wait_ready().await;
    let servers = broker.servers().await;
    let detected: Vec<_> = servers
        .iter()
        .map(|s| (s.state(), s.transport.as_str()))
        .collect();
    assert_eq!(
        detected,
        [
            (ServerState::Ready, "stdio"),
            (ServerState::Ready, "streamable-http"),
            (ServerState::Ready, "sse"),
            (ServerState::Ready, "streamable-http"),
            (ServerState::Ready, "sse"),
        ],
        "{servers:?}"
    );
    let tools = broker.tools().await.tools;
    let reference = tools_of(&tools, "stdio");
    assert_eq!(reference.len(), 3);
    let stdio_sum = broker.text("stdio_get-sum", r#"{"a": 2, "b": 3}"#).await;
    for server in ["http", "sse", "autohttp", "autosse"] {
        assert_eq!(tools_of(&tools, server), reference, "{server}");
        let sum = broker
            .text(&format!("{server}_get-sum"), r#"{"a": 2, "b": 3}"#)
            .await;
        assert_eq!(sum, stdio_sum, "{server}");
        let echo = broker
            .text(&format!("{server}_echo"), r#"{"message": "hi"}"#)
            .await;
        assert!(echo.contains("hi"), "{server}: {echo}");
    }
}

#[tokio::test]
async fn configured_headers_reach_the_server_and_their_absence_is_explained() {
    let streamable = HttpServer::demo("streamable-http", Some("s3cret")).await;
    let sse = HttpServer::demo("sse", Some("s3cret")).await;
    let header = || json!({"Authorization": "Bearer ${DEMO_TOKEN}"});
    let broker = Broker::builder()
        .servers([
            remote("http", &streamable.url, "streamable-http").set("headers", header()),
            remote("sse", &sse.url, "sse").set("headers", header()),
            remote("auto", &sse.url, "auto").set("headers", header()),
            remote("nohttp", &streamable.url, "streamable-http"),
            remote("nosse", &sse.url, "auto"),
        ])
        .env("DEMO_TOKEN", "s3cret")
        .start()
        .await;
    broker.wait_ready().await;
    for name in ["http", "sse", "auto"] {
        assert_eq!(
            broker.server(name).await.state(),
            ServerState::Ready,
            "{name}"
        );
        assert_eq!(
            broker
                .text(&format!("{name}_echo"), r#"{"message": "ok"}"#)
                .await,
            "ok"
        );
    }
    for name in ["nohttp", "nosse"] {
        let refused = broker.wait_for_state(name, ServerState::Failed).await;
        assert_eq!(refused.state(), ServerState::Failed, "{name}");
        assert!(
            refused.message.contains("401") && refused.message.contains("header"),
            "{name}: {}",
            refused.message
        );
    }
    assert!(
        !broker.dump().contains("s3cret"),
        "the token never appears in the log"
    );
}

#[tokio::test]
async fn a_stopped_server_gives_unavailable_promptly() {
    let mut streamable = HttpServer::demo("streamable-http", None).await;
    let mut sse = HttpServer::demo("sse", None).await;
    // A timeout far beyond the WAIT within which `call` must be answered: an answer within it
    // comes from the stopped server, not from waiting out the call.
    let broker = Broker::builder()
        .servers([
            remote("http", &streamable.url, "streamable-http").set("timeout", "10m"),
            remote("sse", &sse.url, "sse").set("timeout", "10m"),
        ])
        .start()
        .await;
    broker.wait_ready().await;
    streamable.stop().await;
    sse.stop().await;
    for tool in ["http_echo", "sse_echo"] {
        let status = broker
            .call(tool, r#"{"message": "anyone?"}"#)
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{tool}: {status:?}");
    }
    // Both sessions are found dead (the SSE stream ends; the HTTP one fails a ping) and say
    // why: the loss, or (once retrying) that nothing listens any more.
    for name in ["sse", "http"] {
        broker
            .wait_for_status(name, "down with a reason", |s| {
                s.state() != ServerState::Ready
                    && (s.message.contains("session lost")
                        || s.message.contains("connection refused"))
            })
            .await;
    }
}

#[tokio::test]
async fn a_call_lost_with_its_server_is_unavailable_and_not_repeated() {
    let mut server = HttpServer::demo("streamable-http", None).await;
    let broker = Broker::builder()
        .server(remote("http", &server.url, "streamable-http"))
        .start()
        .await;
    broker.wait_ready().await;
    let in_flight = tokio::spawn({
        let mut client = broker.client.clone();
        async move {
            let request = proto::CallToolRequest {
                name: "http_sleep".into(),
                arguments_json: r#"{"ms": 20000}"#.into(),
                ..Default::default()
            };
            client.call_tool(request).await
        }
    });
    server.wait_for_line(|l| l.contains("sleep started")).await;
    server.kill().await;
    server.restart().await;

    let status = tokio::time::timeout(common::WAIT, in_flight)
        .await
        .expect("the lost call is answered well before its timeout")
        .unwrap()
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("not repeated"),
        "{}",
        status.message()
    );

    // The lost call made the broker check the session. Depending on timing the check finds
    // the old process gone (a restart) or the new one already there (rmcp re-initializes the
    // session by itself); either way calls work again, on the new process.
    let again = broker
        .call_when_ready("http", "http_echo", r#"{"message": "again"}"#)
        .await;
    assert_eq!(again.text, "again");
    assert!(
        !server.printed(|l| l.contains("sleep started")),
        "the lost call was not sent again to the new server"
    );
}

#[tokio::test]
async fn urls_that_are_not_reachable_mcp_servers_fail_with_a_reason() {
    let not_mcp = common::servers::not_mcp().await;
    let (refusing, _held) = common::servers::refusing();
    let refused = format!("http://{refusing}/mcp");
    let plain = HttpServer::demo("streamable-http", None).await;
    let tls = plain.url.replace("http://", "https://");
    let broker = Broker::builder()
        .servers([
            remote("notmcp", &not_mcp, "auto"),
            remote("refused", &refused, "auto"),
            remote("tls", &tls, "streamable-http"),
            remote("dns", "http://no-such-host.invalid/mcp", "sse"),
            demo("demo"),
        ])
        .start()
        .await;
    broker.wait_ready().await;
    for (name, hint) in [
        ("notmcp", "serves neither MCP transport"),
        ("refused", "connection refused"),
        ("tls", "TLS"),
        ("dns", "DNS"),
    ] {
        let status = broker.wait_for_state(name, ServerState::Failed).await;
        assert_eq!(status.state(), ServerState::Failed, "{name}");
        assert!(status.message.contains(hint), "{name}: {}", status.message);
    }
    assert_eq!(broker.server("demo").await.state(), ServerState::Ready);
}

#[tokio::test]
async fn https_urls_are_verified_against_the_system_roots() {
    let plain = HttpServer::demo("streamable-http", None).await;
    let (port, ca) = common::servers::tls_proxy(plain.addr()).await;
    let url = format!("https://localhost:{port}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();

    // Trusted through the system store (SSL_CERT_FILE is how it is pointed at a file).
    let trusted = Broker::builder()
        .server(remote("tls", &url, "streamable-http"))
        .env("SSL_CERT_FILE", ca_file.to_str().unwrap())
        .start()
        .await;
    trusted.wait_ready().await;
    assert_eq!(trusted.server("tls").await.state(), ServerState::Ready);
    assert_eq!(
        trusted.text("tls_echo", r#"{"message": "over TLS"}"#).await,
        "over TLS"
    );

    // Not trusted: the certificate's issuer is unknown to the system store.
    let untrusted = Broker::builder()
        .server(remote("tls", &url, "auto"))
        .start()
        .await;
    untrusted.wait_ready().await;
    let status = untrusted.wait_for_state("tls", ServerState::Failed).await;
    assert_eq!(status.state(), ServerState::Failed);
    assert!(
        status.message.contains("TLS handshake failed"),
        "{}",
        status.message
    );
}

/// A server that records the `x-api-key` of every request it gets (and answers 404), and its
/// base URL.
async fn recorder() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>,
) {
    let seen: std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>> = Default::default();
    let record = seen.clone();
    let router = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let key = headers
            .get("x-api-key")
            .map(|v| v.to_str().unwrap().to_owned());
        record.lock().unwrap().push(key);
        async { axum::http::StatusCode::NOT_FOUND }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, seen)
}

/// A server that answers every request with a 307 (method and body kept) to `to`.
async fn redirecting(to: String) -> std::net::SocketAddr {
    let router = axum::Router::new().fallback(move || {
        let to = to.clone();
        async move {
            (
                axum::http::StatusCode::TEMPORARY_REDIRECT,
                [(axum::http::header::LOCATION, to)],
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

#[tokio::test]
async fn configured_headers_never_follow_a_redirect_to_another_origin_or_to_http() {
    let (elsewhere, seen) = recorder().await;
    let cross = redirecting(format!("{elsewhere}/mcp")).await;
    // https://localhost, whose 307 goes to http: a downgrade, and another origin.
    let (port, ca) =
        common::servers::tls_proxy(redirecting(format!("{elsewhere}/mcp")).await).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let key = json!({"X-Api-Key": "key-secret"});
    let broker = Broker::builder()
        .servers([
            remote("cross", &format!("http://{cross}/mcp"), "streamable-http")
                .set("headers", key.clone()),
            remote(
                "down",
                &format!("https://localhost:{port}/mcp"),
                "streamable-http",
            )
            .set("headers", key),
        ])
        .env("SSL_CERT_FILE", ca_file.to_str().unwrap())
        .start()
        .await;
    broker.wait_ready().await;
    for (name, why) in [("cross", "another origin"), ("down", "from https to http")] {
        let status = broker.wait_for_state(name, ServerState::Failed).await;
        assert!(status.message.contains(why), "{name}: {}", status.message);
    }
    let seen = seen.lock().unwrap().clone();
    assert!(seen.is_empty(), "the other origin was asked: {seen:?}");
}
