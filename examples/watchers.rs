//! Opens many idle Watch streams on a running broker and reports what they cost it in memory.
//!
//! `cargo run --release --example watchers -- --count 1000` starts its own broker (the built-in
//! demo) on a free port, reads its RSS from /proc before and after, and prints the figures.

use std::{process::Stdio, time::Duration};

use tokio::io::{AsyncBufReadExt, BufReader};
use toolbroker::proto::{WatchRequest, tool_broker_client::ToolBrokerClient};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let count: usize = std::env::args()
        .skip_while(|a| a != "--count")
        .nth(1)
        .map_or(Ok(1000), |n| n.parse())?;
    let exe = std::env::current_exe()?;
    let broker_bin = exe
        .parent()
        .and_then(|examples| examples.parent())
        .map(|dir| dir.join("toolbroker"))
        .filter(|p| p.exists())
        .ok_or_else(|| {
            anyhow::anyhow!("build the toolbroker binary first (cargo build --release)")
        })?;
    let mut broker = tokio::process::Command::new(broker_bin)
        .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pid = broker.id().expect("running");
    let mut lines = BufReader::new(broker.stderr.take().expect("piped")).lines();
    let addr = loop {
        let line = lines
            .next_line()
            .await?
            .ok_or_else(|| anyhow::anyhow!("broker exited"))?;
        let json: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if json["message"] == "listening" {
            break json["addr"].as_str().unwrap_or_default().to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let client = ToolBrokerClient::connect(format!("http://{addr}")).await?;
    tokio::time::sleep(Duration::from_millis(500)).await; // let the demo server connect
    let before = rss_kib(pid)?;
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = client
            .clone()
            .watch(WatchRequest::default())
            .await?
            .into_inner();
        stream.message().await?; // the snapshot: the watcher is fully set up
        streams.push(stream);
    }
    let after = rss_kib(pid)?;
    println!(
        "watchers={count} broker_rss_before={:.1}MiB after={:.1}MiB per_watcher={:.1}KiB",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        (after.saturating_sub(before)) as f64 / count as f64
    );
    drop(streams);
    broker.kill().await?;
    Ok(())
}

/// Resident memory of a process, from /proc/PID/status.
fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or_else(|| anyhow::anyhow!("no VmRSS"))?;
    Ok(line.split_whitespace().nth(1).unwrap_or("0").parse()?)
}
