//! Prometheus metrics at `/metrics` on `metrics_listen`, in the text exposition format: the
//! semantic-convention histograms recorded where calls happen, the broker's own gauges computed
//! from its state at each scrape, and process metrics (RSS, open fds, CPU) from
//! `metrics-process`. Without `metrics_listen` no recorder is installed and recording is a no-op.

use std::{net::SocketAddr, time::Duration};

use anyhow::Context as _;
use axum::{Router, extract::State, http::header, response::IntoResponse, routing::get};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{core::broker::Broker, domain::state::ServerState, telemetry::semconv};

/// Histogram buckets (seconds) from 1 ms to 60 s: tool calls range from an echo to a crawl.
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// How often the recorder's histograms are maintained.
const UPKEEP: Duration = Duration::from_secs(5);
/// Every state a server can be in, for the one-hot state gauge.
const STATES: [ServerState; 5] = [
    ServerState::Connecting,
    ServerState::Ready,
    ServerState::Reconnecting,
    ServerState::Failed,
    ServerState::Stopped,
];

/// What a scrape needs.
#[derive(Clone)]
struct Scrape {
    handle: PrometheusHandle,
    broker: Broker,
    process: metrics_process::Collector,
}

/// Binds `addr` now (so a bad address fails at start) and serves `/metrics` until `shutdown`.
pub async fn start(
    addr: SocketAddr,
    broker: Broker,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let handle = PrometheusBuilder::new()
        .set_buckets(BUCKETS)
        .context("histogram buckets")?
        .install_recorder()
        .context("cannot install the metrics recorder")?;
    describe();
    let process = metrics_process::Collector::default();
    process.describe();
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen for metrics on {addr}"))?;
    tracing::info!(addr = %listener.local_addr()?, "metrics listening");
    let scrape = Scrape {
        handle: handle.clone(),
        broker,
        process,
    };
    let router = Router::new()
        .route("/metrics", get(render))
        .with_state(scrape);
    tokio::spawn(upkeep(handle, shutdown.clone()));
    tokio::spawn(async move {
        let serving =
            axum::serve(listener, router).with_graceful_shutdown(shutdown.cancelled_owned());
        if let Err(error) = serving.await {
            tracing::warn!(%error, "the metrics server failed");
        }
    });
    Ok(())
}

async fn upkeep(handle: PrometheusHandle, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(UPKEEP) => handle.run_upkeep(),
        }
    }
}

/// `GET /metrics`: the state gauges are set from the current snapshot, then all is rendered.
async fn render(State(scrape): State<Scrape>) -> impl IntoResponse {
    scrape.process.collect();
    let snapshot = scrape.broker.snapshot();
    for view in snapshot.catalog.servers() {
        let server = view.name.to_string();
        for state in STATES {
            let on = if state == view.condition.state {
                1.0
            } else {
                0.0
            };
            metrics::gauge!("toolbroker_server_state", semconv::SERVER => server.clone(), "state" => state.as_str())
                .set(on);
        }
        metrics::gauge!("toolbroker_server_tools", semconv::SERVER => server.clone())
            .set(f64::from(view.tool_count));
        metrics::gauge!("toolbroker_server_sessions", semconv::SERVER => server.clone())
            .set(snapshot.caller_sessions(&view.name) as f64);
        metrics::counter!("toolbroker_server_restarts_total", semconv::SERVER => server)
            .absolute(u64::from(view.condition.restarts));
    }
    metrics::gauge!("toolbroker_watch_subscribers").set(scrape.broker.watchers() as f64);
    metrics::gauge!("toolbroker_catalog_revision").set(snapshot.catalog.revision() as f64);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        scrape.handle.render(),
    )
}

fn describe() {
    use metrics::Unit;
    metrics::describe_histogram!(
        semconv::MCP_CLIENT_OPERATION_DURATION,
        Unit::Seconds,
        "MCP requests the broker sent (mcp.client.operation.duration)"
    );
    metrics::describe_histogram!(
        semconv::MCP_SERVER_OPERATION_DURATION,
        Unit::Seconds,
        "tools/call requests the MCP face served (mcp.server.operation.duration)"
    );
    metrics::describe_histogram!(
        semconv::RPC_SERVER_CALL_DURATION,
        Unit::Seconds,
        "gRPC calls the broker served (rpc.server.call.duration)"
    );
    metrics::describe_gauge!(
        "toolbroker_calls_in_flight",
        "Tool calls waiting for their MCP server"
    );
    metrics::describe_gauge!(
        "toolbroker_server_state",
        "1 for the state each server is in"
    );
    metrics::describe_gauge!("toolbroker_server_tools", "Tools each server exposes");
    metrics::describe_gauge!(
        "toolbroker_server_sessions",
        "Per-caller sessions alive, draining and closing ones included (isolation: per-caller)"
    );
    metrics::describe_counter!(
        "toolbroker_server_restarts_total",
        "Session restarts per server"
    );
    metrics::describe_counter!(
        "toolbroker_rate_limited_total",
        "Calls refused for a call rate, per server and limit (limits.caller_rate, servers[].rate, servers[].caller_rate)"
    );
    metrics::describe_counter!(
        "toolbroker_audit_dropped_total",
        "Audit lines of calls that were let through, not written (a full queue, a failed write)"
    );
    metrics::describe_counter!(
        "toolbroker_audit_refusals_dropped_total",
        "Audit lines of refused calls not written (over their budget, or the log cannot be written)"
    );
    metrics::describe_counter!(
        "toolbroker_audit_refused_calls_total",
        "Calls refused UNAVAILABLE before they ran because the audit log cannot be written"
    );
    metrics::describe_gauge!(
        "toolbroker_tasks_running",
        "Long calls (operations, tasks) this broker runs"
    );
    metrics::describe_counter!(
        "toolbroker_tasks_ended_total",
        "Long calls ended, by state (completed, failed, cancelled)"
    );
    metrics::describe_gauge!("toolbroker_watch_subscribers", "Open Watch streams");
    metrics::describe_gauge!("toolbroker_catalog_revision", "The catalog's revision");
}
