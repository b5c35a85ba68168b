//! Watch fan-out: N open Watch streams, a change to the tool set, and the time until every
//! stream has seen it.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use toolbroker::proto::{CallToolRequest, WatchRequest, watch_event::Event};

use crate::{Plan, broker::BrokerProcess, demo_config};

/// Prints, per watcher count, the median and worst delivery delay over a few changes.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    println!("\n## Watch fan-out: a tool added, until every watcher has the event");
    let counts: &[usize] = if plan.quick {
        &[10, 100]
    } else {
        &[10, 100, 1_000]
    };
    let rounds = if plan.quick { 2 } else { 10 };
    for &count in counts {
        // Every watcher is a stream of one connection: more than the default 256.
        let limits = "limits:\n  max_concurrent_streams: 2000\n";
        let broker = BrokerProcess::start(&demo_config(&[], limits)?, &[]).await?;
        let client = broker.client().await?;
        let rss_before = broker.rss_mib()?;
        // Each watcher reports the name of every tool it sees added, with when.
        let (seen_tx, mut seen) = mpsc::unbounded_channel::<(String, Instant)>();
        for _ in 0..count {
            let mut stream = client
                .clone()
                .watch(WatchRequest::default())
                .await?
                .into_inner();
            stream.message().await?; // the snapshot
            let seen_tx = seen_tx.clone();
            tokio::spawn(async move {
                while let Ok(Some(event)) = stream.message().await {
                    if let Some(Event::ToolsChanged(changed)) = event.event {
                        for tool in changed.added {
                            let _ = seen_tx.send((tool.name, Instant::now()));
                        }
                    }
                }
            });
        }
        let rss_after = broker.rss_mib()?;
        let (mut medians, mut worst) = (Vec::new(), Duration::ZERO);
        for round in 0..rounds {
            let name = format!("fanout_{round}");
            let started = Instant::now();
            client
                .clone()
                .call_tool(CallToolRequest {
                    name: "add_tool".into(),
                    arguments_json: format!(r#"{{"name": "{name}"}}"#),
                    ..Default::default()
                })
                .await?;
            let mut delays = Vec::with_capacity(count);
            while delays.len() < count {
                let (tool, at) = tokio::time::timeout(Duration::from_secs(30), seen.recv())
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("watchers ended"))?;
                if tool == name {
                    delays.push(at - started);
                }
            }
            delays.sort();
            medians.push(delays[count / 2]);
            worst = worst.max(delays[count - 1]);
        }
        medians.sort();
        println!(
            "{count:>5} watchers: median delivery {:>7.3} ms, worst {:>7.3} ms over {rounds} changes (add_tool round trip included); rss {rss_before:.1} → {rss_after:.1} MiB",
            medians[medians.len() / 2].as_secs_f64() * 1e3,
            worst.as_secs_f64() * 1e3,
        );
    }
    Ok(())
}
