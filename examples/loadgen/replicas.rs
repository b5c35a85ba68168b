//! `replicas`: a server that handles one request at a time (`demo-server --serial`), run as 1
//! and as 4 copies, under CallTool `sleep` (5 ms) at concurrency 16.

use toolbroker::proto::CallToolRequest;

use crate::{Plan, broker::BrokerProcess, demo_config};

/// Prints both runs and the ratio.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    println!("\n## replicas: one-request-at-a-time server, CallTool sleep 5 ms, c=16");
    let request = CallToolRequest {
        name: "sleep".into(),
        arguments_json: r#"{"ms": 5}"#.into(),
        ..Default::default()
    };
    let mut rates = Vec::new();
    for replicas in [1, 4] {
        let config = demo_config(&["--serial"], &format!("    replicas: {replicas}\n"))?;
        let broker = BrokerProcess::start(&config, &[]).await?;
        let figures = broker.call_load(request.clone(), 16, plan).await?;
        println!("{}", figures.row(&format!("replicas={replicas}")));
        rates.push(figures.rate());
    }
    println!(
        "replicas 4 / replicas 1: throughput {:.2}x",
        rates[1] / rates[0]
    );
    Ok(())
}
