//! Time from process start to the port accepting connections, with MCP servers that answer
//! and with one that never does; and the broker's idle RSS.

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use tokio::{net::TcpStream, process::Command};

use crate::{
    Plan,
    broker::{BrokerProcess, toolbroker_bin},
    demo_config,
};

/// Prints start-to-accept times (median and worst of several starts) and idle RSS.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    println!("\n## Start-up: process start → port accepts; idle RSS");
    let starts = if plan.quick { 2 } else { 10 };
    let hanging = "servers:\n  - name: mute\n    command: sleep\n    args: [\"600\"]\n";
    for (label, config) in [
        ("demo server", demo_config(&[], "")?),
        ("a server that never answers", hanging.to_owned()),
    ] {
        let mut times = Vec::with_capacity(starts);
        for _ in 0..starts {
            times.push(time_to_accept(&config).await?);
        }
        times.sort();
        println!(
            "{label:<28} accepts after {:>6.1} ms median, {:>6.1} ms worst ({starts} starts)",
            times[starts / 2].as_secs_f64() * 1e3,
            times[starts - 1].as_secs_f64() * 1e3,
        );
    }
    let broker = BrokerProcess::start(&demo_config(&[], "")?, &[]).await?;
    broker.client().await?;
    tokio::time::sleep(Duration::from_millis(if plan.quick { 100 } else { 1000 })).await;
    println!(
        "idle RSS, demo server configured and READY: {:.1} MiB",
        broker.rss_mib()?
    );
    Ok(())
}

/// Starts a broker on a free port and polls the port until it accepts.
async fn time_to_accept(config: &str) -> anyhow::Result<Duration> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("broker.yaml");
    std::fs::write(&path, config)?;
    // A port that was free a moment ago; another process taking it in between would only
    // make this run fail, not lie.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let addr = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let mut child = Command::new(toolbroker_bin()?)
        .args(["serve", "--listen", &addr, "--config"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let accepted = loop {
        if TcpStream::connect(&addr).await.is_ok() {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(10) {
            anyhow::bail!("the broker did not accept within 10 s");
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    };
    child.start_kill()?;
    child.wait().await?;
    Ok(accepted)
}
