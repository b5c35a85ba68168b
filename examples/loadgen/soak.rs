//! The soak: CallTool `echo` at concurrency 32, each call with a message of its own, while the
//! server's process is SIGKILLed every 2 s. The broker restarts it; calls in flight then fail
//! (UNAVAILABLE) and later ones succeed. What must never happen: an answer that is not the
//! call's own message (answers crossed between calls), or a call that never returns (each has
//! a 10 s deadline of the client's; a call that hits it is counted as hung).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::bail;
use tonic::Code;
use toolbroker::proto::CallToolRequest;

use crate::{Plan, broker::BrokerProcess, demo_config};

/// Callers at once.
const CONCURRENCY: usize = 32;
/// Time between kills.
const KILL_EVERY: Duration = Duration::from_secs(2);
/// A call that takes longer is hung.
const HUNG_AFTER: Duration = Duration::from_secs(10);

/// What the callers saw.
#[derive(Default)]
struct Tally {
    right: AtomicU64,
    wrong: AtomicU64,
    failed: AtomicU64,
    hung: AtomicU64,
}

/// Runs the soak and fails if any answer was wrong or any call hung.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let seconds = if plan.quick { 5 } else { 30 };
    println!(
        "\n## Soak: CallTool echo c={CONCURRENCY} for {seconds} s, the demo server SIGKILLed every {} s",
        KILL_EVERY.as_secs()
    );
    let broker =
        BrokerProcess::start(&demo_config(&[], "    backoff_initial: 100ms\n")?, &[]).await?;
    let client = broker.client().await?;
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
                let counter = match client.call_tool(request).await {
                    Ok(reply) if reply.get_ref().text == message => &tally.right,
                    Ok(_) => &tally.wrong,
                    Err(status) if status.code() == Code::DeadlineExceeded => &tally.hung,
                    Err(_) => &tally.failed,
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

/// The processes `pid` started (from any of its threads).
fn children(pid: u32) -> anyhow::Result<Vec<u32>> {
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
