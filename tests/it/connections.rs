//! What a stranger can hold before anyone knows who it is: `limits.max_connections` across the
//! gRPC port, the Unix socket and the MCP face; `limits.max_concurrent_streams`;
//! `limits.header_timeout` on a connection's first request head and on a CallToolStream's
//! first message. Each test plays the stranger with raw sockets and frames.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    pin::Pin,
    time::{Duration, Instant},
};

use crate::common::{
    self, Broker, Builder, WAIT, as_caller, call_request, demo,
    h2_raw::{
        self, CONTINUATION, END_HEADERS, Ending, HEADERS, PREFACE, REFUSED_STREAM, RequestHeads,
        frame, opening, ping,
    },
};
use futures::future::join_all;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncRead, AsyncWriteExt as _},
    net::{TcpStream, UnixStream},
};
use tonic::{Code, transport::Channel};
use toolbroker::proto::{self, tool_broker_client::ToolBrokerClient};

/// RST_STREAM's code for a stream ended normally.
const NO_ERROR: u32 = 0;
const TOKEN: &str = "connections-test-token";
const CALL_TOOL_STREAM: &str = "/toolbroker.v1.ToolBroker/CallToolStream";
/// A partial HTTP/1.1 request head: its headers never end.
const PARTIAL_HEAD: &[u8] = b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: appl";
/// Time a loaded 2-core machine may add to a deadline.
const SLACK: Duration = Duration::from_secs(3);

/// A broker with a token, the demo server, metrics, its socket at `socket` and the MCP face,
/// with these `limits`.
fn guarded(socket: &Path, limits: Value) -> Builder {
    Broker::builder()
        .top(
            "auth",
            json!({"tokens": [{"name": "agent", "value_env": "AGENT_TOKEN"}]}),
        )
        .top("unix_listen", socket.display().to_string())
        .top("mcp_listen", "127.0.0.1:0")
        .top("metrics_listen", "127.0.0.1:0")
        .top("limits", limits)
        .server(demo("demo"))
        .env("AGENT_TOKEN", TOKEN)
}

fn socket_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("grpc.sock")
}

/// A client connection of any listener, boxed.
type Conn = Pin<Box<dyn AsyncRead + Send>>;

/// Where a stranger connects.
#[derive(Clone, Copy)]
enum Door<'a> {
    Port(SocketAddr),
    Socket(&'a Path),
    Face(SocketAddr),
}

/// Connects through `door` and sends `bytes`; the connection (its reading half) and when it
/// was opened.
async fn stranger(door: Door<'_>, bytes: &[u8]) -> (Conn, Instant) {
    let opened = Instant::now();
    let conn: Conn = match door {
        Door::Port(addr) | Door::Face(addr) => {
            let mut tcp = TcpStream::connect(addr).await.expect("connect");
            // A connection the broker already closed may refuse the bytes: fine.
            let _ = tcp.write_all(bytes).await;
            Box::pin(tcp)
        }
        Door::Socket(path) => {
            let mut unix = UnixStream::connect(path)
                .await
                .expect("connect to the socket");
            let _ = unix.write_all(bytes).await;
            Box::pin(unix)
        }
    };
    (conn, opened)
}

/// The sum of a metric's samples over its labels (0 when absent).
async fn metric(url: &str, name: &str) -> f64 {
    let text = reqwest::get(url).await.unwrap().text().await.unwrap();
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A CallTool `echo` as the token's holder on a new connection to `addr`.
async fn authorized_echo(addr: SocketAddr) -> Result<String, String> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    let request = as_caller(
        Some(TOKEN),
        &[],
        call_request("echo", r#"{"message": "served"}"#),
    );
    let answer = ToolBrokerClient::new(channel)
        .call_tool(request)
        .await
        .map_err(|e| e.to_string())?;
    Ok(answer.into_inner().text)
}

#[tokio::test]
async fn a_connection_flood_is_bounded_and_the_broker_still_serves() {
    const MAX: usize = 50;
    const HEADER_TIMEOUT: Duration = Duration::from_secs(4);
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_in(&dir);
    let limits = json!({"max_connections": MAX, "header_timeout": "4s"});
    // Fewer descriptors than the flood: without a budget the broker would run out.
    let broker = guarded(&socket, limits).open_files(300).start().await;
    broker.wait_ready().await;
    let (port, face) = (
        Door::Port(broker.addr),
        Door::Face(broker.face_addr().await),
    );
    let metrics = broker.metrics_url().await;
    toolbroker::tls_provider::install();

    // The harness's client holds one place; strangers take the 49 others, on every listener,
    // idle or with a head begun.
    let partial_headers = [
        opening(),
        frame(HEADERS, END_HEADERS, 1, &[0x82; 40])[..20].to_vec(),
    ]
    .concat();
    let flooded = Instant::now();
    let mut doors: Vec<(Door, &[u8])> = Vec::new();
    doors.extend(
        [
            (port, &b""[..]),
            (port, &PREFACE[..12]),
            (port, &partial_headers[..]),
        ]
        .repeat(10),
    );
    doors.extend(
        [
            (Door::Socket(&socket), &b""[..]),
            (Door::Socket(&socket), &PREFACE[..5]),
        ]
        .repeat(5),
    );
    doors.extend([(face, &b""[..]), (face, PARTIAL_HEAD)].repeat(5));
    doors.truncate(MAX - 1);
    let mut held = Vec::new();
    for (door, bytes) in &doors {
        held.push(stranger(*door, bytes).await);
    }
    // No event says a connection was accepted; the gauge is read until it says so.
    common::poll("every place taken", Duration::from_millis(50), || async {
        (metric(&metrics, "toolbroker_connections_open").await >= MAX as f64).then_some(())
    })
    .await;

    // Past the budget: 350 more, on all three listeners at once, each closed at once.
    let extras = (0..350).map(|i| {
        let door = [port, port, port, port, Door::Socket(&socket), face, face][i % 7];
        async move {
            let (mut conn, opened) = stranger(door, &PREFACE[..8]).await;
            h2_raw::time_to_close(&mut conn, opened, HEADER_TIMEOUT).await
        }
    });
    for closed in join_all(extras).await {
        let after = closed.expect("a connection past the budget was kept open");
        assert!(
            after < Duration::from_secs(1),
            "closed only after {after:?}"
        );
    }
    let refused = metric(&metrics, "toolbroker_connections_refused_total").await;
    assert!(refused >= 350.0, "{refused} refusals counted");
    let warnings = |logs: Vec<Value>| {
        logs.iter()
            .filter(|l| l["message"] == "connections refused: limits.max_connections are open")
            .count()
    };
    assert!(
        (1..=2).contains(&warnings(broker.logs())),
        "{}",
        broker.dump()
    );

    // A reload still reads its file (the broker has descriptors to spare).
    broker.signal(nix::sys::signal::Signal::SIGHUP);
    broker
        .wait_for_log("a reload during the flood", |l| {
            l["message"] == "config reloaded"
        })
        .await;

    // The strangers' places free up at header_timeout: an authorized caller gets one.
    let served = async {
        loop {
            match authorized_echo(broker.addr).await {
                Ok(text) => return text,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    };
    let text = tokio::time::timeout(HEADER_TIMEOUT + SLACK, served)
        .await
        .unwrap_or_else(|_| panic!("no authorized call served; logs:\n{}", broker.dump()));
    assert_eq!(text, "served");
    println!(
        "FIGURE an authorized call served {:?} after a flood of {} connections (header_timeout {HEADER_TIMEOUT:?})",
        flooded.elapsed(),
        MAX - 1 + 350
    );
    for (mut conn, opened) in held {
        let closed = h2_raw::time_to_close(&mut conn, opened, SLACK).await;
        assert!(closed.is_some(), "a stranger outlived header_timeout");
    }
}

#[tokio::test]
async fn a_connection_without_a_complete_request_head_is_closed_after_header_timeout() {
    const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_in(&dir);
    let broker = guarded(&socket, json!({"header_timeout": "1s"}))
        .start()
        .await;
    let (port, face) = (
        Door::Port(broker.addr),
        Door::Face(broker.face_addr().await),
    );
    let mut heads = RequestHeads::default();
    let block = heads.block(CALL_TOOL_STREAM);
    let cases: Vec<(&str, Door, Vec<u8>)> = vec![
        ("gRPC port, nothing", port, vec![]),
        ("gRPC port, half the preface", port, PREFACE[..12].to_vec()),
        (
            "gRPC port, the preface and half a HEADERS frame",
            port,
            [
                opening(),
                frame(HEADERS, END_HEADERS, 1, &block)[..14].to_vec(),
            ]
            .concat(),
        ),
        (
            "gRPC port, HEADERS whose block is never ended",
            port,
            [
                opening(),
                frame(HEADERS, 0, 1, &block[..4]),
                frame(CONTINUATION, 0, 1, &block[4..]),
            ]
            .concat(),
        ),
        (
            "gRPC port, pings only",
            port,
            [opening(), ping(), ping()].concat(),
        ),
        (
            "Unix socket, half the preface",
            Door::Socket(&socket),
            PREFACE[..12].to_vec(),
        ),
        ("MCP face, nothing", face, vec![]),
        (
            "MCP face, part of a request head",
            face,
            PARTIAL_HEAD.to_vec(),
        ),
    ];
    // A connection that sent its head in time (a Health check with no message yet) stays.
    let (kept, mut kept_writer) = TcpStream::connect(broker.addr).await.unwrap().into_split();
    let mut health = RequestHeads::default();
    let head = [opening(), health.request(1, "/grpc.health.v1.Health/Check")].concat();
    kept_writer.write_all(&head).await.unwrap();
    let mut kept_endings = h2_raw::endings(kept);

    let closings = cases.iter().map(|(what, door, bytes)| async move {
        let (mut conn, opened) = stranger(*door, bytes).await;
        let closed = h2_raw::time_to_close(&mut conn, opened, HEADER_TIMEOUT + SLACK).await;
        (what, closed)
    });
    for (what, closed) in join_all(closings).await {
        let after = closed.unwrap_or_else(|| panic!("{what}: still open"));
        assert!(
            after >= HEADER_TIMEOUT.mul_f32(0.9),
            "{what}: closed after {after:?}, before header_timeout"
        );
    }
    kept_writer.write_all(&ping()).await.unwrap();
    let acked = tokio::time::timeout(WAIT, async {
        while let Some(ending) = kept_endings.recv().await {
            match ending {
                Ending::PingAck => return true,
                Ending::Closed => return false,
                _ => {}
            }
        }
        false
    });
    assert!(
        acked.await.unwrap(),
        "a connection that sent its head was closed"
    );
    // The harness's client connected at start and sent nothing: its connection was closed too,
    // and tonic opens another for the next call without failing it.
    broker.wait_ready().await;
    let echo = broker
        .call_as(Some(TOKEN), &[], "echo", r#"{"message": "again"}"#)
        .await
        .expect("the harness's client called again");
    assert_eq!(echo.text, "again");
}

#[tokio::test]
async fn streams_past_the_limit_are_refused_and_the_open_ones_end_at_header_timeout() {
    const STREAMS: u32 = 10_000;
    const OPEN: u32 = 100;
    const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let limits = json!({"max_concurrent_streams": OPEN, "header_timeout": "2s"});
    let broker = guarded(&socket_in(&dir), limits).start().await;
    broker.wait_ready().await;
    let (reader, mut writer) = TcpStream::connect(broker.addr).await.unwrap().into_split();
    let mut endings = h2_raw::endings(reader);
    writer.write_all(&opening()).await.unwrap();
    let before = common::process::rss_kib(broker.pid());

    // CallToolStream HEADERS without a token and without a first message, as fast as h2
    // takes them.
    let mut heads = RequestHeads::default();
    let sent = Instant::now();
    let mut batch = Vec::new();
    for i in 0..STREAMS {
        batch.extend(heads.request(2 * i + 1, CALL_TOOL_STREAM));
        if batch.len() > 64 * 1024 {
            writer.write_all(&batch).await.unwrap();
            batch.clear();
        }
    }
    writer.write_all(&batch).await.unwrap();
    let all_sent = sent.elapsed();

    let (mut refused, mut late) = (0, Vec::new());
    let mut grown = None;
    let collected = tokio::time::timeout(WAIT, async {
        while refused + (late.len() as u32) < STREAMS {
            match endings.recv().await.expect("the reader runs") {
                // NO_ERROR: a stream answered before its client finished sending.
                Ending::Reset { code: NO_ERROR, .. } => {}
                Ending::Reset { code, .. } => {
                    assert_eq!(code, REFUSED_STREAM);
                    refused += 1;
                }
                Ending::Status {
                    status,
                    message,
                    at,
                    ..
                } => late.push((status, message, at)),
                Ending::PingAck => {}
                Ending::Closed => panic!(
                    "the connection ended: {refused} refused, {} ended",
                    late.len()
                ),
            }
            // Measured once every stream was taken or refused and before the first ends:
            // the most the broker holds for them.
            if grown.is_none() && (refused == STREAMS - OPEN || !late.is_empty()) {
                grown = Some(common::process::rss_kib(broker.pid()).saturating_sub(before));
            }
        }
    });
    collected.await.unwrap_or_else(|_| {
        panic!(
            "{refused} refused and {} ended of {STREAMS} streams",
            late.len()
        )
    });
    let grown = grown.expect("measured");
    println!("FIGURE {STREAMS} streams opened, {refused} refused: RSS +{grown} KiB");
    assert!(grown < 8 * 1024, "RSS grew by {grown} KiB");
    assert!(all_sent < HEADER_TIMEOUT, "sending took {all_sent:?}");
    assert_eq!(refused, STREAMS - OPEN);
    assert_eq!(late.len() as u32, OPEN);
    for (status, message, at) in late {
        assert_eq!(status, "4", "{message}");
        assert!(message.contains("limits.header_timeout"), "{message}");
        let after = at.duration_since(sent);
        assert!(
            after >= HEADER_TIMEOUT.mul_f32(0.9),
            "ended after {after:?}"
        );
    }
}

#[tokio::test]
async fn a_call_tool_stream_without_its_first_message_is_deadline_exceeded() {
    let dir = tempfile::tempdir().unwrap();
    let broker = guarded(&socket_in(&dir), json!({"header_timeout": "1s"}))
        .start()
        .await;
    broker.wait_ready().await;
    let started = Instant::now();
    let silent = futures::stream::pending::<proto::CallToolStreamRequest>();
    let request = as_caller(Some(TOKEN), &[], silent);
    let status = tokio::time::timeout(WAIT, broker.client.clone().call_tool_stream(request))
        .await
        .expect("answered")
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(
        status.message(),
        "the request's first message did not come within 1s (limits.header_timeout)"
    );
    assert!(started.elapsed() >= Duration::from_millis(900));
    // The connection and the caller are fine: the next call is answered.
    let echo = broker
        .call_as(Some(TOKEN), &[], "echo", r#"{"message": "next"}"#)
        .await
        .unwrap();
    assert_eq!(echo.text, "next");
}

/// A TLS client that trusts `ca_pem` and offers h2.
fn tls_connector(ca_pem: &str) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
}

#[tokio::test]
async fn over_tls_the_handshake_and_the_head_share_header_timeout_and_the_budget() {
    const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
    let ca = common::certs::Ca::new();
    let issued = ca.issue(&["localhost"]);
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, pem: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path.display().to_string()
    };
    let tls = json!({"cert": write("tls.crt", &issued.cert), "key": write("tls.key", &issued.key)});
    let trust = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&ca.pem))
        .domain_name("localhost");
    // The harness's client and two strangers fill the budget.
    let broker = Broker::builder()
        .top("tls", tls)
        .top(
            "limits",
            json!({"max_connections": 3, "header_timeout": "1s"}),
        )
        .server(demo("demo"))
        .tls(trust)
        .start()
        .await;
    broker.wait_ready().await;

    // One never starts its handshake; one finishes it and sends half the preface.
    let (mut silent, silent_opened) = stranger(Door::Port(broker.addr), b"").await;
    let handshaken_opened = Instant::now();
    let tcp = TcpStream::connect(broker.addr).await.unwrap();
    let server_name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut handshaken = tls_connector(&ca.pem)
        .connect(server_name, tcp)
        .await
        .expect("the handshake");
    handshaken.write_all(&PREFACE[..12]).await.unwrap();

    // Both hold their places: the next connection is closed at once.
    let (mut next, next_opened) = stranger(Door::Port(broker.addr), b"").await;
    let refused = h2_raw::time_to_close(&mut next, next_opened, HEADER_TIMEOUT).await;
    assert!(
        refused.is_some_and(|after| after < HEADER_TIMEOUT / 2),
        "a fourth connection was kept: {refused:?}"
    );
    for (what, closed) in [
        (
            "no handshake",
            h2_raw::time_to_close(&mut silent, silent_opened, HEADER_TIMEOUT + SLACK).await,
        ),
        (
            "half a preface after the handshake",
            h2_raw::time_to_close(&mut handshaken, handshaken_opened, HEADER_TIMEOUT + SLACK).await,
        ),
    ] {
        let after = closed.unwrap_or_else(|| panic!("{what}: still open"));
        assert!(
            after >= HEADER_TIMEOUT.mul_f32(0.9),
            "{what}: closed after {after:?}"
        );
    }
    assert_eq!(
        broker.text("echo", r#"{"message": "over TLS"}"#).await,
        "over TLS"
    );
}

#[tokio::test]
async fn a_request_whose_message_never_follows_its_headers_is_deadline_exceeded() {
    const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
    let dir = tempfile::tempdir().unwrap();
    let broker = guarded(&socket_in(&dir), json!({"header_timeout": "1s"}))
        .start()
        .await;
    let (reader, mut writer) = TcpStream::connect(broker.addr).await.unwrap().into_split();
    let mut endings = h2_raw::endings(reader);
    let mut heads = RequestHeads::default();
    // Streams 1 and 3 send only their heads; 5 sends its message too (and no token).
    let message = prost::Message::encode_to_vec(&call_request("echo", "{}"));
    let mut data = vec![0];
    data.extend_from_slice(&(message.len() as u32).to_be_bytes());
    data.extend_from_slice(&message);
    let sent = Instant::now();
    let bytes = [
        opening(),
        heads.request(1, "/toolbroker.v1.ToolBroker/CallTool"),
        heads.request(3, "/grpc.health.v1.Health/Check"),
        heads.request(5, "/toolbroker.v1.ToolBroker/CallTool"),
        frame(h2_raw::DATA, h2_raw::END_STREAM, 5, &data),
    ]
    .concat();
    writer.write_all(&bytes).await.unwrap();
    let mut statuses = std::collections::BTreeMap::new();
    let collected = tokio::time::timeout(HEADER_TIMEOUT + SLACK, async {
        while statuses.len() < 3 {
            match endings.recv().await.expect("the reader runs") {
                Ending::Status {
                    stream,
                    status,
                    message,
                    at,
                } => {
                    statuses.insert(stream, (status, message, at.duration_since(sent)));
                }
                Ending::Closed => panic!("the connection ended"),
                _ => {}
            }
        }
    });
    collected
        .await
        .unwrap_or_else(|_| panic!("not every stream ended: {statuses:?}"));
    for stream in [1, 3] {
        let (status, message, after) = &statuses[&stream];
        assert_eq!(status, "4", "stream {stream}: {message}");
        assert!(message.contains("limits.header_timeout"), "{message}");
        assert!(
            *after >= HEADER_TIMEOUT.mul_f32(0.9),
            "stream {stream} after {after:?}"
        );
    }
    // The request whose message came is refused for what it is, at once.
    let (status, message, after) = &statuses[&5];
    assert_eq!(status, "16", "{message}");
    assert!(*after < HEADER_TIMEOUT, "{after:?}");
}
