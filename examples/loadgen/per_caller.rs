//! `callers`: what `isolation: per-caller` costs. Three measures, each beside its baseline:
//! - a caller's first call (which starts its session) against its later calls, for the demo
//!   server and for server-memory (node; from `tests/npm`);
//! - CallTool `echo` from 16 callers, per-caller sessions against one shared session;
//! - the broker's resident memory per open per-caller session (100 sessions against none).

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use tonic::{Request, transport::Channel};
use toolbroker::proto::{
    CallToolRequest, ListServersRequest, tool_broker_client::ToolBrokerClient,
};

use crate::{
    Plan,
    broker::{BrokerProcess, measure_process, toolbroker_bin},
    report::histogram,
};

/// Prints the three measures.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    println!("\n## callers: isolation per-caller");
    let fresh = if plan.quick { 3 } else { 20 };
    first_calls(
        "demo (stdio)",
        &demo_server()?,
        "echo",
        r#"{"message": "hi"}"#,
        fresh,
    )
    .await?;
    match memory_server() {
        Ok(memory) => {
            first_calls("server-memory (node)", &memory, "read_graph", "{}", fresh).await?
        }
        Err(error) => println!("server-memory skipped: {error}"),
    }
    shared_against_per_caller(plan).await?;
    memory_per_session(if plan.quick { 5 } else { 100 }).await
}

/// A server entry (JSON) running our demo server.
fn demo_server() -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::json!({
        "name": "s",
        "command": toolbroker_bin()?,
        "args": ["demo-server"],
    }))
}

/// A server entry running server-memory, its file per caller in a temp folder.
fn memory_server() -> anyhow::Result<serde_json::Value> {
    let js = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/npm/node_modules/@modelcontextprotocol/server-memory/dist/index.js");
    anyhow::ensure!(js.exists(), "not installed (npm ci --prefix tests/npm)");
    let dir = std::env::temp_dir().join(format!("loadgen-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(serde_json::json!({
        "name": "s",
        "command": "node",
        "args": [js],
        "env": {"MEMORY_FILE_PATH": format!("{}/${{caller.id}}.json", dir.display())},
    }))
}

/// A broker whose server `entry` is per-caller (or shared), with `callers` static tokens:
/// caller `i` sends `token-i`.
async fn broker(
    entry: &serde_json::Value,
    per_caller: bool,
    callers: usize,
) -> anyhow::Result<BrokerProcess> {
    let mut entry = entry.clone();
    if per_caller {
        make_per_caller(&mut entry, callers);
    }
    entry["init_timeout"] = "120s".into();
    with_callers(callers, entry, serde_json::json!({})).await
}

/// Makes server `entry` per-caller, with room for `callers` sessions.
pub fn make_per_caller(entry: &mut serde_json::Value, callers: usize) {
    entry["isolation"] = "per-caller".into();
    entry["max_sessions"] = (callers + 10).into();
}

/// A broker with `callers` static tokens (caller `i` sends `token-i`, see [`as_caller`]) and
/// one server `entry`, plus `extra` top-level config.
pub async fn with_callers(
    callers: usize,
    entry: serde_json::Value,
    extra: serde_json::Value,
) -> anyhow::Result<BrokerProcess> {
    let tokens: Vec<_> = (0..callers)
        .map(|i| serde_json::json!({"name": format!("caller-{i}"), "value_env": format!("TOKEN_{i}")}))
        .collect();
    let mut config = serde_json::json!({"auth": {"tokens": tokens}, "servers": [entry]});
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        config.extend(extra.clone());
    }
    let env: Vec<(String, String)> = (0..callers)
        .map(|i| (format!("TOKEN_{i}"), format!("token-{i}")))
        .collect();
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    BrokerProcess::start(&config.to_string(), &env).await
}

/// `request` as caller `i`.
pub fn as_caller(i: usize, request: &CallToolRequest) -> Request<CallToolRequest> {
    let mut request = Request::new(request.clone());
    let token = format!("Bearer token-{i}").parse().expect("a header value");
    request.metadata_mut().insert("authorization", token);
    request
}

/// CallTool `tool` with `arguments_json`.
pub fn call(tool: &str, arguments_json: &str) -> CallToolRequest {
    CallToolRequest {
        name: tool.into(),
        arguments_json: arguments_json.into(),
        ..Default::default()
    }
}

/// p50 of each fresh caller's first call (its session starts) against p50 of later calls.
async fn first_calls(
    label: &str,
    entry: &serde_json::Value,
    tool: &str,
    arguments: &str,
    callers: usize,
) -> anyhow::Result<()> {
    let broker = broker(entry, true, callers).await?;
    let client = broker.client().await?;
    let request = call(tool, arguments);
    let (mut first, mut later) = (histogram(), histogram());
    for i in 0..callers {
        let mut client = client.clone();
        let started = Instant::now();
        client.call_tool(as_caller(i, &request)).await?;
        first.record(started.elapsed().as_micros().max(1) as u64)?;
        for _ in 0..20 {
            let started = Instant::now();
            client.call_tool(as_caller(i, &request)).await?;
            later.record(started.elapsed().as_micros().max(1) as u64)?;
        }
    }
    let ms = |h: &hdrhistogram::Histogram<u64>| h.value_at_quantile(0.5) as f64 / 1000.0;
    println!(
        "{label}: first call p50 {:.1} ms ({callers} callers), later calls p50 {:.3} ms: the start costs {:.1} ms",
        ms(&first),
        ms(&later),
        ms(&first) - ms(&later)
    );
    Ok(())
}

/// CallTool `echo` from 16 callers, each call from the next caller in turn, through one
/// shared session and through each caller's own, at concurrency 1 and 16.
async fn shared_against_per_caller(plan: Plan) -> anyhow::Result<()> {
    const CALLERS: usize = 16;
    for concurrency in [1, CALLERS] {
        let mut figures = Vec::new();
        for per_caller in [false, true] {
            let broker = broker(&demo_server()?, per_caller, CALLERS).await?;
            let measured = echo_from_callers(&broker, CALLERS, concurrency, plan).await?;
            let label = if per_caller { "per-caller" } else { "shared" };
            println!(
                "{}",
                measured.row(&format!("16 callers, c={concurrency}, {label}"))
            );
            figures.push(measured);
        }
        let cpu = |f: &crate::report::Figures| f.cpu_per_call_us().unwrap_or(f64::NAN);
        println!(
            "c={concurrency} per-caller / shared: throughput {:.2}x, broker cpu/call {:.2}x",
            figures[1].rate() / figures[0].rate(),
            cpu(&figures[1]) / cpu(&figures[0]),
        );
    }
    Ok(())
}

/// Closed-loop `echo` at `concurrency`, each call from the next of `callers` in turn, after one
/// call from each (so that every per-caller session is open before the clock starts).
async fn echo_from_callers(
    broker: &BrokerProcess,
    callers: usize,
    concurrency: usize,
    plan: Plan,
) -> anyhow::Result<crate::report::Figures> {
    let request = call("echo", r#"{"message": "hello"}"#);
    let client = broker.client().await?;
    for i in 0..callers {
        client.clone().call_tool(as_caller(i, &request)).await?;
    }
    let next = Arc::new(AtomicUsize::new(0));
    let load = move || {
        let i = next.fetch_add(1, Ordering::Relaxed) % callers;
        let request = as_caller(i, &request);
        let mut client = client.clone();
        async move {
            client.call_tool(request).await?;
            anyhow::Ok(())
        }
    };
    measure_process(broker.pid(), concurrency, plan, load).await
}

/// The broker's RSS with `sessions` idle per-caller sessions open, against none.
async fn memory_per_session(sessions: usize) -> anyhow::Result<()> {
    let broker = broker(&demo_server()?, true, sessions).await?;
    let client = broker.client().await?;
    let request = call("echo", r#"{"message": "hi"}"#);
    // One session first, so that the broker's one-off allocations (the first session, the
    // first call) are in the baseline.
    client.clone().call_tool(as_caller(0, &request)).await?;
    let before = settled_rss(&broker).await?;
    for i in 1..sessions {
        client.clone().call_tool(as_caller(i, &request)).await?;
    }
    let open = open_sessions(&client).await?;
    let after = settled_rss(&broker).await?;
    let added = open.saturating_sub(1).max(1);
    println!(
        "broker RSS: {before:.1} MiB with 1 session, {after:.1} MiB with {open}: {:.1} KiB per session (broker side; each server process is its own)",
        (after - before) * 1024.0 / added as f64
    );
    Ok(())
}

/// How many per-caller sessions the server has open.
pub async fn open_sessions(client: &ToolBrokerClient<Channel>) -> anyhow::Result<usize> {
    let mut request = Request::new(ListServersRequest {});
    let token = "Bearer token-0".parse().expect("a header value");
    request.metadata_mut().insert("authorization", token);
    let servers = client.clone().list_servers(request).await?.into_inner();
    let server = servers.servers.first().context("no server")?;
    Ok(server.sessions as usize)
}

/// The broker's RSS once allocations settle (two readings a moment apart agree).
pub async fn settled_rss(broker: &BrokerProcess) -> anyhow::Result<f64> {
    let mut last = broker.rss_mib()?;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = broker.rss_mib()?;
        if (now - last).abs() < 0.05 {
            return Ok(now);
        }
        last = now;
    }
    Ok(last)
}
