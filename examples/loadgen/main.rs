//! The load generator: what the broker costs, measured side by side with a baseline in the
//! same run so that a noisy machine still gives trustworthy ratios.
//!
//! ```text
//! cargo build --release && cargo run --release --example loadgen -- tracing [--seconds 5]
//! ```
//! `tracing`: CallTool `echo` with span export off, then on (to an OTLP collector run here),
//! at concurrency 1 and 16.

mod broker;
mod calls;
mod collector;
mod report;

use std::time::Duration;

use broker::BrokerProcess;
use toolbroker::proto::CallToolRequest;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: u64 = flag(&args, "--seconds").map_or(Ok(5), |s| s.parse())?;
    let duration = Duration::from_secs(seconds);
    match args.first().map(String::as_str) {
        Some("tracing") => tracing_overhead(duration).await,
        _ => {
            eprintln!("usage: loadgen tracing [--seconds N]");
            std::process::exit(2);
        }
    }
}

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a String> {
    args.iter().skip_while(|a| *a != name).nth(1)
}

/// The demo server, with the binary's own path.
fn demo_config() -> anyhow::Result<String> {
    let bin = broker::toolbroker_bin()?;
    Ok(format!(
        "servers:\n  - name: demo\n    command: {bin:?}\n    args: [demo-server]\n"
    ))
}

/// CallTool `echo` with and without span export, and the difference.
async fn tracing_overhead(duration: Duration) -> anyhow::Result<()> {
    let endpoint = collector::start().await?;
    let exporting = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
    ];
    println!(
        "CallTool echo, span export off vs on ({}s per run)",
        duration.as_secs()
    );
    for concurrency in [1, 16] {
        let off = echo_load(&[], concurrency, duration).await?;
        let on = echo_load(&exporting, concurrency, duration).await?;
        println!("{}", off.row(&format!("c={concurrency} tracing off")));
        println!("{}", on.row(&format!("c={concurrency} tracing on")));
        println!(
            "c={concurrency} on/off: throughput {:.2}x, p50 {:+.3} ms, cpu/call {:+.1} µs",
            on.rate() / off.rate(),
            on.ms(0.5) - off.ms(0.5),
            on.cpu_per_call_us().unwrap_or(0.0) - off.cpu_per_call_us().unwrap_or(0.0),
        );
    }
    Ok(())
}

/// One broker, one load run of CallTool `echo`.
async fn echo_load(
    env: &[(&str, String)],
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<report::Figures> {
    let broker = BrokerProcess::start(&demo_config()?, env).await?;
    let client = broker.client().await?;
    let request = CallToolRequest {
        name: "echo".into(),
        arguments_json: r#"{"message": "hello"}"#.into(),
        ..Default::default()
    };
    let call = move || {
        let mut client = client.clone();
        let request = request.clone();
        async move {
            client.call_tool(request).await?;
            anyhow::Ok(())
        }
    };
    let cpu_before = broker.cpu()?;
    let mut figures = calls::run(concurrency, Duration::from_secs(1), duration, call).await?;
    // CPU over warm-up and run, per measured call: slightly pessimistic, never flattering.
    figures.broker_cpu = Some(broker.cpu()? - cpu_before);
    figures.broker_rss_mib = Some(broker.rss_mib()?);
    Ok(figures)
}
