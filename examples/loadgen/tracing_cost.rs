//! CallTool `echo` with span export off, then on (to an OTLP collector run here).

use crate::{Plan, broker::BrokerProcess, collector, demo_config};

/// Prints both runs and the difference, at concurrency 1 and 16.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let endpoint = collector::start().await?;
    let exporting = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
    ];
    println!("\n## CallTool echo: span export off vs on");
    for concurrency in [1, 16] {
        let off = BrokerProcess::start(&demo_config(&[], "")?, &[])
            .await?
            .echo_load(concurrency, plan)
            .await?;
        let on = BrokerProcess::start(&demo_config(&[], "")?, &exporting)
            .await?
            .echo_load(concurrency, plan)
            .await?;
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
