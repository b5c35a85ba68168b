//! Logs and traces. Log lines go to stderr (text or JSON; level by `RUST_LOG`, default `info`
//! with rmcp's per-message chatter at `warn`); stderr because stdout carries the MCP protocol
//! when this binary is a demo server. Spans are exported over OTLP only when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set, configured by the standard
//! `OTEL_*` variables; otherwise no OpenTelemetry layer exists and spans cost what a log span
//! costs.

pub(crate) mod context;
pub(crate) mod semconv;

use std::{
    io::IsTerminal,
    sync::atomic::{AtomicBool, Ordering},
};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};
use tracing::Level;
use tracing_subscriber::{
    EnvFilter, Layer, filter::Targets, layer::SubscriberExt, util::SubscriberInitExt,
};

/// Log output formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The filter used when `RUST_LOG` is not set.
const DEFAULT_FILTER: &str = "info,rmcp=warn";

/// Whether spans are exported (set once, at start).
static EXPORTING: AtomicBool = AtomicBool::new(false);
/// Whether call arguments and results are recorded on spans (`record_arguments`).
static RECORD_ARGUMENTS: AtomicBool = AtomicBool::new(false);

/// Who is logging: a child's lines are stamped again by the broker that reads its stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The broker (or a client subcommand).
    Broker,
    /// A demo server, whose stderr a broker logs line by line.
    McpServer,
}

impl Role {
    fn service_name(self) -> &'static str {
        match self {
            Role::Broker => "toolbroker",
            Role::McpServer => "toolbroker-demo",
        }
    }
}

/// Keeps the span exporter alive; [`Telemetry::shutdown`] flushes it.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// Installs the global subscriber (and, when configured, the OTLP exporter). Call once, first
/// thing, inside the Tokio runtime (the gRPC exporter needs it).
pub fn init(format: LogFormat, role: Role) -> Telemetry {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let ansi = std::io::stderr().is_terminal();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let logs = match (format, role) {
        (LogFormat::Json, _) => fmt.json().flatten_event(true).boxed(),
        (LogFormat::Text, Role::McpServer) => fmt.without_time().boxed(),
        (LogFormat::Text, Role::Broker) => fmt.boxed(),
    };
    let (provider, problem) = match exporter_requested() {
        true => match tracer_provider(role) {
            Ok(provider) => (Some(provider), None),
            Err(error) => (None, Some(error)),
        },
        false => (None, None),
    };
    // Spans of this crate at info and above, whatever RUST_LOG says about log lines.
    let spans = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("toolbroker"))
            .with_filter(Targets::new().with_target("toolbroker", Level::INFO))
    });
    let subscriber = tracing_subscriber::registry().with(logs.with_filter(filter));
    // Not `.with(spans)` with `None`: an absent layer counts as interested in everything, so
    // every span would be built and recorded for nobody (docs/performance.md, round one,
    // "Spans for nobody").
    match spans {
        Some(spans) => subscriber.with(spans).init(),
        None => subscriber.init(),
    }
    opentelemetry::global::set_text_map_propagator(context::propagator());
    EXPORTING.store(provider.is_some(), Ordering::Relaxed);
    if let Some(error) = problem {
        tracing::warn!(%error, "spans will not be exported");
    }
    Telemetry { provider }
}

/// Whether the standard variables ask for OTLP trace export.
fn exporter_requested() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let is = |name: &str, value: &str| {
        std::env::var(name).is_ok_and(|v| v.trim().eq_ignore_ascii_case(value))
    };
    (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        && !is("OTEL_SDK_DISABLED", "true")
        && !is("OTEL_TRACES_EXPORTER", "none")
}

/// The provider: protocol, endpoint, headers and timeout from `OTEL_EXPORTER_OTLP_*`, sampler
/// from `OTEL_TRACES_SAMPLER`, resource from `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES`,
/// batching from `OTEL_BSP_*`.
fn tracer_provider(role: Role) -> Result<SdkTracerProvider, String> {
    crate::tls_provider::install();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .build()
        .map_err(|e| format!("cannot set up the OTLP exporter: {e}"))?;
    let mut resource = Resource::builder();
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
    if !named {
        resource = resource.with_service_name(role.service_name());
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// Whether spans are being exported.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// Whether tool arguments and results go on spans (the config's `record_arguments`).
pub fn recording_arguments() -> bool {
    RECORD_ARGUMENTS.load(Ordering::Relaxed)
}

/// Sets `record_arguments` (at start and on reload).
pub fn record_arguments(enabled: bool) {
    RECORD_ARGUMENTS.store(enabled, Ordering::Relaxed);
}

impl Telemetry {
    /// Exports the spans still buffered; call before exit.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown()
        {
            eprintln!("toolbroker: flushing spans failed: {error}");
        }
    }
}

/// The trace the current request belongs to: the one the caller's `traceparent` names (the
/// request's span continues it), else the current span's when spans are exported.
pub fn current_trace_id(metadata: &tonic::metadata::MetadataMap) -> Option<String> {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let traceparent = metadata.get("traceparent").and_then(|v| v.to_str().ok());
    if let Some(id) = traceparent.and_then(context::trace_id_of) {
        return Some(id.to_owned());
    }
    if !exporting() {
        return None;
    }
    let id = tracing::Span::current()
        .context()
        .span()
        .span_context()
        .trace_id();
    (id != opentelemetry::trace::TraceId::INVALID).then(|| id.to_string())
}
