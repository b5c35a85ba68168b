//! `many`: the broker at the scale of many callers (issue 42).
//! - 1,000 callers, each with its own session of a small per-caller stdio server (the demo
//!   server): the broker's memory per session (children not counted), each caller's first
//!   call against the server's own start-up and handshake measured directly, and, once
//!   `idle_timeout` has closed every session, the broker's memory against where it was, and
//!   whether any process is left;
//! - 10,000 callers, each making one call under `limits.caller_rate`, against the same with
//!   no rate: what their rate state costs.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::json;

use crate::{
    Plan,
    broker::{BrokerProcess, cpu_of, toolbroker_bin},
    direct::Direct,
    per_caller::{as_caller, call, make_per_caller, open_sessions, settled_rss, with_callers},
    report::histogram,
    soak::children,
};

/// How long an unused session stays open in the 1,000-caller run (opening them all takes
/// about 10 s here; none may close before the last opens).
const IDLE: Duration = Duration::from_secs(30);
/// The same with `--quick`'s 20 callers.
const QUICK_IDLE: Duration = Duration::from_secs(3);

/// Prints both measures.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let (sessions, callers) = if plan.quick {
        (20, 200)
    } else {
        (1_000, 10_000)
    };
    println!("\n## many callers: {sessions} per-caller sessions, {callers} callers' rates");
    let samples = if plan.quick { 3 } else { 50 };
    let start_up = direct_start_ups(samples).await?;
    let idle = if plan.quick { QUICK_IDLE } else { IDLE };
    sessions_of_many(sessions, idle, &start_up, samples).await?;
    rate_state(callers).await
}

/// The server's own start-up and handshake (and then one call), measured directly: each time a
/// fresh `toolbroker demo-server` with an rmcp client, as the broker starts a caller's session.
async fn direct_start_ups(times: usize) -> anyhow::Result<StartUp> {
    let mut start_up = StartUp::default();
    for _ in 0..times {
        start_up.measure_one().await?;
    }
    println!(
        "direct, {times} fresh demo servers before the broker's run: start-up and handshake p50 {:.2} ms (p90 {:.2}); with the first call p50 {:.2} ms",
        ms(&start_up.handshake, 0.5),
        ms(&start_up.handshake, 0.9),
        ms(&start_up.first, 0.5),
    );
    Ok(start_up)
}

/// Start-up figures of the server alone.
struct StartUp {
    handshake: Histogram<u64>,
    first: Histogram<u64>,
}

impl Default for StartUp {
    fn default() -> Self {
        Self {
            handshake: histogram(),
            first: histogram(),
        }
    }
}

impl StartUp {
    /// One fresh server started, spoken to and stopped.
    async fn measure_one(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        let direct = Direct::start_program(&toolbroker_bin()?, &["demo-server"]).await?;
        record(&mut self.handshake, started)?;
        let result = direct
            .peer()
            .call_tool(
                rmcp::model::CallToolRequestParams::new("echo").with_arguments(crate::hello()),
            )
            .await?;
        anyhow::ensure!(result.is_error != Some(true), "the call failed: {result:?}");
        record(&mut self.first, started)?;
        direct.stop().await
    }
}

fn record(histogram: &mut Histogram<u64>, since: Instant) -> anyhow::Result<()> {
    Ok(histogram.record(since.elapsed().as_micros().max(1) as u64)?)
}

fn ms(histogram: &Histogram<u64>, quantile: f64) -> f64 {
    histogram.value_at_quantile(quantile) as f64 / 1000.0
}

/// The demo server, per caller when `sessions` is given (at most that many at once, closed
/// after `idle` unused).
fn demo(sessions: Option<(usize, Duration)>) -> anyhow::Result<serde_json::Value> {
    let mut entry = json!({
        "name": "s",
        "command": toolbroker_bin()?,
        "args": ["demo-server"],
        "init_timeout": "120s",
    });
    if let Some((sessions, idle)) = sessions {
        make_per_caller(&mut entry, sessions);
        entry["idle_timeout"] = format!("{}s", idle.as_secs()).into();
    }
    Ok(entry)
}

/// `sessions` callers each open a session with a first call, then make a second; the broker's
/// anonymous memory before, with them all open, and after `idle_timeout` closed them. Between
/// the callers, `samples` fresh servers are started directly, so that the server's own start-up
/// is also measured with as many processes about as the broker's sessions have.
async fn sessions_of_many(
    sessions: usize,
    idle: Duration,
    start_up: &StartUp,
    samples: usize,
) -> anyhow::Result<()> {
    let broker = with_callers(sessions, demo(Some((sessions, idle)))?, json!({})).await?;
    let client = broker.client().await?;
    let echo = call("echo", r#"{"message": "hi"}"#);
    // The server's discovery session (which lists its tools) is a process of its own, there
    // before any caller comes and after they all go.
    let kept = children(broker.pid())?.len();
    // One session opened and closed first, so that the broker's one-off allocations (the first
    // session, the first call, the sweep) are in the baseline.
    client.clone().call_tool(as_caller(0, &echo)).await?;
    wait_closed(&broker, &client, kept, idle).await?;
    let before = settled_rss(&broker).await?;
    let before_anon = anon_mib(broker.pid())?;
    let threads_before = threads(broker.pid())?;
    let (mut first, mut later) = (histogram(), histogram());
    let mut beside = StartUp::default();
    let every = (sessions / samples).max(1);
    let mut directly = Duration::ZERO;
    let opening = Instant::now();
    for i in 0..sessions {
        if i % every == every / 2 {
            let started = Instant::now();
            beside.measure_one().await?;
            directly += started.elapsed();
        }
        let started = Instant::now();
        let reply = client.clone().call_tool(as_caller(i, &echo)).await?;
        record(&mut first, started)?;
        anyhow::ensure!(reply.get_ref().text == "hi", "wrong answer: {reply:?}");
        let started = Instant::now();
        client.clone().call_tool(as_caller(i, &echo)).await?;
        record(&mut later, started)?;
    }
    let opened_in = opening.elapsed() - directly;
    let open = open_sessions(&client).await?;
    let servers = children(broker.pid())?.len() - kept;
    let with = settled_rss(&broker).await?;
    let with_anon = anon_mib(broker.pid())?;
    println!(
        "{sessions} callers opened their sessions one after another in {:.1} s: {open} open, {servers} server processes (besides the discovery session's {kept})",
        opened_in.as_secs_f64()
    );
    println!(
        "direct, {} fresh demo servers started between the callers: start-up and handshake p50 {:.2} ms (p90 {:.2}); with the first call p50 {:.2} ms",
        beside.handshake.len(),
        ms(&beside.handshake, 0.5),
        ms(&beside.handshake, 0.9),
        ms(&beside.first, 0.5),
    );
    let over = |alone: &StartUp| ms(&first, 0.5) - ms(&alone.handshake, 0.5);
    println!(
        "first call p50 {:.2} ms (p90 {:.2}), a later call p50 {:.3} ms; over the server's start-up and handshake alone: {:+.2} ms between the callers (≤ +1 ms: {}), {:+.2} ms before the run; {:+.2} ms over start-up, handshake and a call made directly between the callers",
        ms(&first, 0.5),
        ms(&first, 0.9),
        ms(&later, 0.5),
        over(&beside),
        met(over(&beside) <= 1.0),
        over(start_up),
        ms(&first, 0.5) - ms(&beside.first, 0.5),
    );
    let per_session = (with_anon - before_anon) * 1024.0 / open.max(1) as f64;
    println!(
        "broker RSS {before:.1} → {with:.1} MiB (anonymous {before_anon:.1} → {with_anon:.1} MiB) with {open} sessions: {per_session:.1} KiB anonymous per session (≤ 64: {}); {:.1} KiB of all RSS",
        met(per_session <= 64.0),
        (with - before) * 1024.0 / open.max(1) as f64,
    );
    let closing = Instant::now();
    wait_closed(&broker, &client, kept, idle).await?;
    let closed_in = closing.elapsed();
    let left = children(broker.pid())?.len() - kept;
    // The broker gives freed memory back a second after the last close, from its own thread.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The runtime's blocking threads that stopped the servers end 10 s after their last job.
    let deadline = Instant::now() + Duration::from_secs(30);
    while threads(broker.pid())? > threads_before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after = settled_rss(&broker).await?;
    let after_anon = anon_mib(broker.pid())?;
    println!(
        "idle_timeout {}s: every session closed {:.1} s after the last call; {left} processes left (none: {}); broker RSS {after:.1} MiB (anonymous {after_anon:.1}): {:+.1} % of before (within 10 %: {}), anonymous {:+.1} %",
        idle.as_secs(),
        closed_in.as_secs_f64(),
        met(left == 0),
        100.0 * (after / before - 1.0),
        met(after <= before * 1.1),
        100.0 * (after_anon / before_anon - 1.0),
    );
    Ok(())
}

fn met(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

/// Waits until the server has no caller's session open and the broker only its `kept`
/// children (at most a minute past `idle_timeout`).
async fn wait_closed(
    broker: &BrokerProcess,
    client: &toolbroker::proto::tool_broker_client::ToolBrokerClient<tonic::transport::Channel>,
    kept: usize,
    idle: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + idle * 2 + Duration::from_secs(60);
    while open_sessions(client).await? > 0 || children(broker.pid())?.len() > kept {
        anyhow::ensure!(
            Instant::now() < deadline,
            "sessions still open a minute after idle_timeout"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// How many threads a process has.
fn threads(pid: u32) -> anyhow::Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/task"))?.count())
}

/// The anonymous resident memory of a process (its heap and stacks, not its mapped binary), in
/// MiB.
fn anon_mib(pid: u32) -> anyhow::Result<f64> {
    crate::broker::status_mib(pid, "RssAnon")
}

/// `callers` callers each make one call to a shared demo server, with `limits.caller_rate` in
/// memory and with no rate: the two brokers' anonymous memory once every caller has called
/// differs by the callers' rate state (made at start or at a caller's first call).
async fn rate_state(callers: usize) -> anyhow::Result<()> {
    let mut called = Vec::new();
    for rate in [false, true] {
        let extra = if rate {
            json!({"limits": {"caller_rate": "1000000/s"}})
        } else {
            json!({})
        };
        let broker = with_callers(callers, demo(None)?, extra).await?;
        let client = broker.client().await?;
        let echo = call("echo", r#"{"message": "hi"}"#);
        client.clone().call_tool(as_caller(0, &echo)).await?;
        settled_rss(&broker).await?;
        let before = anon_mib(broker.pid())?;
        let (mut latency, cpu_then) = (histogram(), cpu_of(broker.pid())?);
        for i in 1..callers {
            let started = Instant::now();
            client.clone().call_tool(as_caller(i, &echo)).await?;
            record(&mut latency, started)?;
        }
        let cpu = (cpu_of(broker.pid())? - cpu_then) / (callers - 1).max(1) as u32;
        settled_rss(&broker).await?;
        let after = anon_mib(broker.pid())?;
        println!(
            "{callers} callers, one call each, {}: broker anonymous RSS {before:.1} → {after:.1} MiB; a call p50 {:.3} ms, broker cpu/call {:.1} µs ({callers} static tokens)",
            if rate {
                "limits.caller_rate in memory"
            } else {
                "no rate"
            },
            ms(&latency, 0.5),
            cpu.as_secs_f64() * 1e6,
        );
        called.push(after);
    }
    let state = called[1] - called[0];
    println!(
        "{callers} callers' rate state (anonymous RSS with the rate, less without): {state:.2} MiB ({:.0} bytes per caller; < 16 MiB: {})",
        state * 1024.0 * 1024.0 / callers as f64,
        met(state < 16.0),
    );
    Ok(())
}
