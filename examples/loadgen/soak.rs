//! The soak: CallTool `echo` at concurrency 32, each call with a message of its own, while the
//! server's process is SIGKILLed every 2 s. The broker restarts it; calls in flight then fail
//! (UNAVAILABLE) and later ones succeed. What must never happen: an answer that is not the
//! call's own message (answers crossed between calls), or a call that never returns (each has
//! a 10 s deadline; a call that takes that long is counted as hung, whatever its status:
//! tonic ends a call at its deadline with CANCELLED, the broker with DEADLINE_EXCEEDED).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::bail;
use tonic::transport::Channel;
use toolbroker::proto::{CallToolRequest, tool_broker_client::ToolBrokerClient};

use crate::{Plan, broker::BrokerProcess, demo_config};

/// Callers at once.
pub const CONCURRENCY: usize = 32;
/// Time between kills.
const KILL_EVERY: Duration = Duration::from_secs(2);
/// A call that takes longer is hung.
pub const HUNG_AFTER: Duration = Duration::from_secs(10);

/// What the callers saw.
#[derive(Default)]
pub struct Tally {
    pub right: AtomicU64,
    pub wrong: AtomicU64,
    /// Calls whose callers gave up first (the storm's).
    pub gave_up: AtomicU64,
    pub failed: AtomicU64,
    pub hung: AtomicU64,
}

/// Runs the soak and fails if any answer was wrong or any call hung.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let seconds = if plan.quick { 5 } else { 30 };
    println!(
        "\n## Soak: CallTool echo c={CONCURRENCY} for {seconds} s, the demo server SIGKILLed every {} s",
        KILL_EVERY.as_secs()
    );
    let (broker, client) = start().await?;
    let tally = Arc::new(Tally::default());
    let next = Arc::new(AtomicU64::new(0));
    let stop_at = Instant::now() + Duration::from_secs(seconds);
    let mut callers = Vec::new();
    for _ in 0..CONCURRENCY {
        let (mut client, tally, next) = (client.clone(), tally.clone(), next.clone());
        callers.push(tokio::spawn(async move {
            while Instant::now() < stop_at {
                let message = format!("soak-{}", next.fetch_add(1, Ordering::Relaxed));
                let mut request = tonic::Request::new(CallToolRequest {
                    name: "echo".into(),
                    arguments_json: serde_json::json!({ "message": message }).to_string(),
                    ..Default::default()
                });
                request.set_timeout(HUNG_AFTER);
                let started = Instant::now();
                let answer = tokio::time::timeout(2 * HUNG_AFTER, client.call_tool(request)).await;
                let counter = match answer {
                    Ok(Ok(reply)) if reply.get_ref().text == message => &tally.right,
                    Ok(Ok(_)) => &tally.wrong,
                    Ok(Err(_)) if started.elapsed() < HUNG_AFTER => &tally.failed,
                    _ => &tally.hung,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                if std::ptr::eq(counter, &tally.failed) {
                    // While the server restarts every call fails at once: no busy loop.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }));
    }
    let mut kills = 0;
    while Instant::now() + KILL_EVERY < stop_at {
        tokio::time::sleep(KILL_EVERY).await;
        for child in children(broker.pid())? {
            std::process::Command::new("kill")
                .args(["-KILL", &child.to_string()])
                .status()?;
            kills += 1;
        }
    }
    for caller in callers {
        caller.await?;
    }
    let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let (right, wrong, failed, hung) = (
        count(&tally.right),
        count(&tally.wrong),
        count(&tally.failed),
        count(&tally.hung),
    );
    println!(
        "{kills} kills: {right} right answers, {failed} failed calls (in flight at a kill, or \
         while the server restarted), {wrong} wrong answers, {hung} hung calls"
    );
    if wrong > 0 || hung > 0 || right == 0 || kills == 0 {
        bail!(
            "the soak failed: {wrong} wrong answers, {hung} hung calls, {right} right, {kills} kills"
        );
    }
    Ok(())
}

/// A broker serving the demo server, restarted quickly after a kill, and a client.
pub async fn start() -> anyhow::Result<(BrokerProcess, ToolBrokerClient<Channel>)> {
    let broker =
        BrokerProcess::start(&demo_config(&[], "    backoff_initial: 100ms\n")?, &[]).await?;
    let client = broker.client().await?;
    Ok((broker, client))
}

/// The processes `pid` started (from any of its threads).
pub fn children(pid: u32) -> anyhow::Result<Vec<u32>> {
    let mut all = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let listed = std::fs::read_to_string(task?.path().join("children")).unwrap_or_default();
        all.extend(
            listed
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    Ok(all)
}
