//! ListTools with 10, 1,000 and 10,000 bridged tools, beside a direct `tools/list` of the same
//! demo server (every page, as a client must read them).

use prost::Message as _;
use toolbroker::proto::ListToolsRequest;

use crate::{Plan, broker::BrokerProcess, calls, demo_config, direct::Direct};

/// Ten of the demo server's own tools, for the smallest catalog.
const TEN: &str = "    tools: [echo, add, stats, tiny_image, all_content, fail, sleep, echo_meta, add_tool, remove_tool]\n";

/// Prints ListTools and direct tools/list figures for each catalog size.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    println!("\n## ListTools (whole catalog) vs direct tools/list (all pages of 100)");
    let sizes: &[usize] = if plan.quick {
        &[10, 1_000]
    } else {
        &[10, 1_000, 10_000]
    };
    for &size in sizes {
        let extra = if size > 10 {
            size.to_string()
        } else {
            "0".into()
        };
        let args = ["--extra-tools", extra.as_str()];
        let filter = if size == 10 { TEN } else { "" };
        let broker = BrokerProcess::start(&demo_config(&args, filter)?, &[]).await?;
        let client = broker.client().await?;
        let first = client
            .clone()
            .list_tools(ListToolsRequest::default())
            .await?
            .into_inner();
        let (tools, bytes) = (first.tools.len(), first.encoded_len());
        for concurrency in [1, 16] {
            let call = {
                let client = client.clone();
                move || {
                    let mut client = client.clone();
                    async move {
                        client.list_tools(ListToolsRequest::default()).await?;
                        anyhow::Ok(())
                    }
                }
            };
            let cpu_before = broker.cpu()?;
            let mut figures = calls::run(concurrency, plan.warmup, plan.duration, call).await?;
            figures.broker_cpu = Some(broker.cpu()? - cpu_before);
            figures.broker_rss_mib = Some(broker.rss_mib()?);
            println!(
                "{}",
                figures.row(&format!(
                    "{tools} tools ({} KiB) c={concurrency} broker",
                    bytes / 1024
                ))
            );
        }
        drop(broker);
        let direct = Direct::start(&args).await?;
        let peer = direct.peer();
        let call = move || {
            let peer = peer.clone();
            async move {
                peer.list_all_tools().await?;
                anyhow::Ok(())
            }
        };
        let figures = calls::run(1, plan.warmup, plan.duration, call).await?;
        println!("{}", figures.row(&format!("{tools} tools c=1 direct")));
        direct.stop().await?;
    }
    Ok(())
}
