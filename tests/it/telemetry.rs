//! One trace across agent → broker → MCP server, exported over OTLP to a collector of the test's
//! own; and the context in `_meta` and HTTP headers. Metrics are in metrics.rs.

use std::collections::HashMap;

use crate::common::{Broker, Builder, WAIT, demo, servers::HttpServer, url_server};
use opentelemetry_proto::tonic::{
    collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    },
    common::v1::any_value::Value as AnyValue,
    trace::v1::{Span, span::SpanKind},
};
use prost::Message as _;
use tokio::sync::watch;
use toolbroker::proto;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// A span as the test looks at it.
#[derive(Debug, Clone)]
struct Seen {
    service: String,
    name: String,
    kind: i32,
    trace_id: String,
    span_id: String,
    parent: String,
    attributes: HashMap<String, String>,
}

/// Everything a collector received.
#[derive(Clone)]
struct Collector {
    spans: watch::Sender<Vec<Seen>>,
}

impl Collector {
    fn new() -> (Self, watch::Receiver<Vec<Seen>>) {
        let (spans, rx) = watch::channel(Vec::new());
        (Self { spans }, rx)
    }

    fn take(&self, request: ExportTraceServiceRequest) {
        let mut seen = Vec::new();
        for resource in request.resource_spans {
            let attributes = resource
                .resource
                .map(|r| attributes(&r.attributes))
                .unwrap_or_default();
            let service = attributes.get("service.name").cloned().unwrap_or_default();
            for scope in resource.scope_spans {
                seen.extend(scope.spans.iter().map(|span| self::seen(&service, span)));
            }
        }
        self.spans.send_modify(|all| all.extend(seen));
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(
    list: &[opentelemetry_proto::tonic::common::v1::KeyValue],
) -> HashMap<String, String> {
    list.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(s)) => s.clone(),
                Some(AnyValue::IntValue(i)) => i.to_string(),
                Some(AnyValue::BoolValue(b)) => b.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

fn seen(service: &str, span: &Span) -> Seen {
    Seen {
        service: service.to_owned(),
        name: span.name.clone(),
        kind: span.kind,
        trace_id: hex(&span.trace_id),
        span_id: hex(&span.span_id),
        parent: hex(&span.parent_span_id),
        attributes: attributes(&span.attributes),
    }
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.take(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// An OTLP/gRPC collector on a free port.
async fn grpc_collector() -> (String, watch::Receiver<Vec<Seen>>) {
    let (collector, spans) = Collector::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    (format!("http://{addr}"), spans)
}

/// An OTLP/HTTP (protobuf) collector on a free port.
async fn http_collector() -> (String, watch::Receiver<Vec<Seen>>) {
    let (collector, spans) = Collector::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| async move {
            collector.take(ExportTraceServiceRequest::decode(body).unwrap());
            ExportTraceServiceResponse::default().encode_to_vec()
        }),
    );
    tokio::spawn(async move { axum::serve(listener, router).await });
    (format!("http://{addr}"), spans)
}

/// Waits until the collector has a span `matches` accepts.
async fn span(
    spans: &mut watch::Receiver<Vec<Seen>>,
    what: &str,
    matches: impl Fn(&Seen) -> bool,
) -> Seen {
    let arrived = tokio::time::timeout(WAIT, spans.wait_for(|all| all.iter().any(&matches)))
        .await
        .is_ok();
    let all = spans.borrow();
    assert!(arrived, "no span {what}; got {all:#?}");
    all.iter().find(|s| matches(s)).cloned().expect("arrived")
}

fn traced_call(name: &str) -> tonic::Request<proto::CallToolRequest> {
    let mut request = tonic::Request::new(proto::CallToolRequest {
        name: name.into(),
        arguments_json: "{}".into(),
        ..Default::default()
    });
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    request
        .metadata_mut()
        .insert("traceparent", traceparent.parse().unwrap());
    request
        .metadata_mut()
        .insert("baggage", "tenant=acme".parse().unwrap());
    request
}

/// A broker builder exporting spans to `endpoint` over `protocol`.
fn exporting(endpoint: &str, protocol: &str) -> Builder {
    Broker::builder()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        // Export within 100 ms instead of the default 5 s.
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
}

/// Starts `builder` with a demo server that sees the OTEL_* variables, and waits until ready.
async fn traced_broker(builder: Builder) -> Broker {
    // The demo server exports its own span only if it sees the OTEL_* variables: children get a
    // minimal environment unless they inherit the broker's.
    let broker = builder
        .server(demo("demo").set("inherit_env", true))
        .start()
        .await;
    broker.wait_ready().await;
    broker
}

#[tokio::test]
async fn one_trace_spans_agent_broker_and_mcp_server() {
    let (endpoint, mut spans) = grpc_collector().await;
    let broker = traced_broker(exporting(&endpoint, "grpc")).await;
    let response = broker
        .client
        .clone()
        .call_tool(traced_call("echo_meta"))
        .await
        .unwrap()
        .into_inner();

    let server = span(&mut spans, "CallTool", |s| {
        s.name == "toolbroker.v1.ToolBroker/CallTool"
    })
    .await;
    assert_eq!(
        (server.trace_id.as_str(), server.parent.as_str()),
        (TRACE_ID, CALLER_SPAN)
    );
    assert_eq!(server.kind, SpanKind::Server as i32);
    assert_eq!(server.service, "toolbroker");
    for (key, want) in [
        ("rpc.system", "grpc"),
        ("rpc.service", "toolbroker.v1.ToolBroker"),
        ("rpc.method", "CallTool"),
        ("rpc.grpc.status_code", "0"),
    ] {
        assert_eq!(
            server.attributes.get(key).map(String::as_str),
            Some(want),
            "{key}: {server:#?}"
        );
    }

    let client = span(&mut spans, "tools/call", |s| {
        s.kind == SpanKind::Client as i32
    })
    .await;
    assert_eq!(client.name, "tools/call echo_meta");
    assert_eq!(
        (client.trace_id.as_str(), client.parent.as_str()),
        (TRACE_ID, server.span_id.as_str())
    );
    for (key, want) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "echo_meta"),
        ("network.transport", "pipe"),
        ("toolbroker.server", "demo"),
        ("mcp.protocol.version", "2026-07-28"),
    ] {
        assert_eq!(
            client.attributes.get(key).map(String::as_str),
            Some(want),
            "{key}: {client:#?}"
        );
    }
    assert!(client.attributes.contains_key("jsonrpc.request.id"));
    assert!(
        !client.attributes.contains_key("gen_ai.tool.call.arguments"),
        "not recorded unless asked"
    );

    // The demo server got the client span as parent in `_meta`, and exported its own span.
    let meta: serde_json::Value = serde_json::from_str(&response.text).unwrap();
    let sent = meta["traceparent"].as_str().unwrap();
    assert_eq!(sent, format!("00-{TRACE_ID}-{}-01", client.span_id));
    assert_eq!(meta["baggage"], "tenant=acme");
    let tool = span(&mut spans, "the demo's", |s| s.service == "toolbroker-demo").await;
    assert_eq!(
        (tool.trace_id.as_str(), tool.parent.as_str()),
        (TRACE_ID, client.span_id.as_str())
    );
    assert_eq!(tool.kind, SpanKind::Server as i32);
    eprintln!(
        "SPAN TREE\n{TRACE_ID}\n└─ {} ({})\n   └─ {} ({})\n      └─ {} ({}, {})",
        server.name,
        server.span_id,
        client.name,
        client.span_id,
        tool.name,
        tool.span_id,
        tool.service
    );
}

#[tokio::test]
async fn tool_errors_and_recorded_arguments_show_on_spans_over_otlp_http() {
    let (endpoint, mut spans) = http_collector().await;
    let broker = exporting(&endpoint, "http/protobuf")
        .env("OTEL_SERVICE_NAME", "broker-under-test")
        .top("record_arguments", true)
        .server(demo("demo"))
        .start()
        .await;
    broker.wait_ready().await;
    let mut request = traced_call("fail");
    request.get_mut().arguments_json = r#"{"message": "no disk"}"#.into();
    broker.client.clone().call_tool(request).await.unwrap();

    let client = span(&mut spans, "tools/call fail", |s| {
        s.name == "tools/call fail" && s.kind == SpanKind::Client as i32
    })
    .await;
    assert_eq!(
        client.attributes.get("error.type").map(String::as_str),
        Some("tool_error")
    );
    assert_eq!(
        client
            .attributes
            .get("gen_ai.tool.call.arguments")
            .map(String::as_str),
        Some(r#"{"message":"no disk"}"#)
    );
    assert!(client.attributes["gen_ai.tool.call.result"].contains("no disk"));
    let server = span(&mut spans, "CallTool", |s| s.name.ends_with("/CallTool")).await;
    assert_eq!(
        server.service, "broker-under-test",
        "OTEL_SERVICE_NAME is honoured"
    );
}

#[tokio::test]
async fn without_otlp_the_callers_context_reaches_the_server_in_meta_and_headers() {
    let http = HttpServer::demo("streamable-http", None).await;
    let broker = Broker::builder()
        .server(demo("demo"))
        .server(url_server("remote", &http.url).prefix("r_"))
        .start()
        .await;
    broker.wait_ready().await;
    let caller = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    for tool in ["echo_meta", "r_echo_meta"] {
        let response = broker
            .client
            .clone()
            .call_tool(traced_call(tool))
            .await
            .unwrap()
            .into_inner();
        let texts: Vec<&str> = response
            .content
            .iter()
            .filter_map(|c| match &c.kind {
                Some(proto::content::Kind::Text(t)) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        let meta: serde_json::Value = serde_json::from_str(texts[0]).unwrap();
        assert_eq!(meta["traceparent"], caller, "{tool}: passed on unchanged");
        if tool == "r_echo_meta" {
            let headers: serde_json::Value = serde_json::from_str(texts[1]).unwrap();
            assert_eq!(
                headers["http_headers"]["traceparent"], caller,
                "and as an HTTP header"
            );
            assert_eq!(headers["http_headers"]["baggage"], "tenant=acme");
        }
    }
}

#[tokio::test]
async fn nothing_is_exported_when_otlp_is_disabled() {
    let (endpoint, spans) = grpc_collector().await;
    let disabled = exporting(&endpoint, "grpc").env("OTEL_SDK_DISABLED", "true");
    let broker = traced_broker(disabled).await;
    broker
        .client
        .clone()
        .call_tool(traced_call("echo_meta"))
        .await
        .unwrap();
    // Shutting down flushes whatever was buffered: after it, the collector has seen all.
    assert!(broker.terminate().await.success());
    assert!(
        spans.borrow().is_empty(),
        "spans arrived: {:#?}",
        spans.borrow()
    );
}

#[tokio::test]
async fn a_long_calls_spans_continue_the_trace_of_the_request_that_started_it() {
    let (endpoint, mut spans) = grpc_collector().await;
    let broker = traced_broker(exporting(&endpoint, "grpc")).await;
    let mut request = traced_call("echo_meta");
    *request.get_mut() = proto::CallToolRequest {
        name: "echo_meta".into(),
        arguments_json: "{}".into(),
        ..Default::default()
    };
    broker
        .client
        .clone()
        .start_tool_call(request)
        .await
        .unwrap();
    let server = span(&mut spans, "StartToolCall", |s| {
        s.name == "toolbroker.v1.ToolBroker/StartToolCall"
    })
    .await;
    assert_eq!(
        (server.trace_id.as_str(), server.parent.as_str()),
        (TRACE_ID, CALLER_SPAN)
    );
    let task = span(&mut spans, "the task's", |s| s.name == "task").await;
    assert_eq!(
        (task.trace_id.as_str(), task.parent.as_str()),
        (TRACE_ID, server.span_id.as_str())
    );
    let client = span(&mut spans, "tools/call", |s| {
        s.kind == SpanKind::Client as i32
    })
    .await;
    assert_eq!(
        (client.trace_id.as_str(), client.parent.as_str()),
        (TRACE_ID, task.span_id.as_str())
    );
}
