//! SearchTools over a catalog of 10,000 tools (the demo server's synthetic tools): the index
//! build and the queries measured in this process on the broker's own code (what the broker
//! does per revision and per query), then SearchTools through the broker beside ListServers
//! (the smallest RPC, the baseline for gRPC's own cost) in the same run.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Map, Value};
use toolbroker::{
    domain::{
        names::{ExposedName, ServerName, ToolName},
        search::SearchIndex,
        tool::{Annotations, ExposedTool, ToolSpec},
    },
    proto::{
        EncodedTools, ListServersRequest, ListToolsRequest, SearchToolsRequest, Tool, ToolField,
    },
};

use crate::{
    Plan,
    broker::{BrokerProcess, measure_process},
    demo_config,
    report::histogram,
};

/// Answers of 10,000 tools are about 20 MB; tonic's default limit is 4 MiB.
const MAX_ANSWER: usize = 64 << 20;

/// Tasks an agent might search for, each naming a few words of the catalog.
const QUERIES: [&str; 6] = [
    "archive invoices in jira",
    "create a pull request on github",
    "delete customer records from salesforce",
    "schedule calendar events in outlook",
    "summarize incidents in pagerduty",
    "export expense reports to quickbooks",
];

/// A query every synthetic tool matches: the worst case, every document scored.
const BROAD: &str = "synthetic tool";

/// Prints the index build time, the query times in process, and SearchTools vs ListServers.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let size: usize = if plan.quick { 1_000 } else { 10_000 };
    println!("\n## SearchTools over {size} tools (demo --extra-tools)");
    // The demo server has 11 tools of its own.
    let extra = size.saturating_sub(11).to_string();
    let broker = BrokerProcess::start(&demo_config(&["--extra-tools", &extra], "")?, &[]).await?;
    let client = broker.client().await?.max_decoding_message_size(MAX_ANSWER);
    let listed = client
        .clone()
        .list_tools(ListToolsRequest::default())
        .await?
        .into_inner()
        .tools;
    let tools: Vec<ExposedTool> = listed.iter().map(exposed).collect();

    // The broker reads the parameters' texts from the revision's encoded tools.
    let encoded = EncodedTools::new(listed.iter().cloned().map(ToolField::Encode), 1);
    let builds = if plan.quick { 2 } else { 10 };
    let mut took = Vec::with_capacity(builds);
    let mut index = None;
    for _ in 0..builds {
        let started = Instant::now();
        let documents = (tools.iter().enumerate()).map(|(i, t)| (t, encoded.param_texts(i)));
        index = Some(SearchIndex::build(documents));
        took.push(started.elapsed());
    }
    took.sort();
    println!(
        "index build, {} tools: median {:.1} ms, max {:.1} ms ({builds} builds)",
        tools.len(),
        ms(took[builds / 2]),
        ms(took[builds - 1])
    );
    let index = index.expect("built");
    for (label, queries) in [
        ("task queries", &QUERIES[..]),
        ("broad query", &[BROAD][..]),
    ] {
        let mut latency = histogram();
        let until = Instant::now() + plan.duration.min(Duration::from_secs(2));
        let mut matched = 0;
        while Instant::now() < until {
            for query in queries {
                let started = Instant::now();
                matched = index.search(query, 10, |_| true).len();
                latency.record(started.elapsed().as_nanos().max(1) as u64 / 1000 + 1)?;
            }
        }
        println!(
            "search in process, {label:<13} p50 {:.3} ms  p99 {:.3} ms  ({} searches, {matched} matches kept)",
            latency.value_at_quantile(0.5) as f64 / 1000.0,
            latency.value_at_quantile(0.99) as f64 / 1000.0,
            latency.len()
        );
    }

    // The first SearchTools of a revision builds its index; later ones only read it.
    let started = Instant::now();
    client.clone().search_tools(search(QUERIES[0])).await?;
    println!(
        "first SearchTools (builds the index): {:.1} ms",
        ms(started.elapsed())
    );
    for concurrency in [1, 16] {
        let baseline = {
            let client = client.clone();
            measure_process(broker.pid(), concurrency, plan, move || {
                let mut client = client.clone();
                async move {
                    client.list_servers(ListServersRequest::default()).await?;
                    anyhow::Ok(())
                }
            })
            .await?
        };
        println!("{}", baseline.row(&format!("ListServers c={concurrency}")));
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let searching = {
            let client = client.clone();
            measure_process(broker.pid(), concurrency, plan, move || {
                let mut client = client.clone();
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                async move {
                    let found = client
                        .search_tools(search(QUERIES[i % QUERIES.len()]))
                        .await?;
                    anyhow::ensure!(!found.into_inner().matches.is_empty(), "no match");
                    anyhow::Ok(())
                }
            })
            .await?
        };
        println!("{}", searching.row(&format!("SearchTools c={concurrency}")));
        println!(
            "SearchTools p50 − ListServers p50 at c={concurrency}: {:.3} ms (the search's own share)",
            searching.ms(0.5) - baseline.ms(0.5)
        );
    }
    Ok(())
}

fn search(query: &str) -> SearchToolsRequest {
    SearchToolsRequest {
        query: query.into(),
        limit: 10,
        ..Default::default()
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// A listed tool as the broker holds it.
fn exposed(tool: &Tool) -> ExposedTool {
    let schema: Map<String, Value> =
        serde_json::from_str(&tool.input_schema_json).expect("an object schema");
    ExposedTool {
        name: ExposedName::derive("", &tool.name).0,
        server: ServerName::parse(&tool.server).expect("a server name"),
        spec: Arc::new(ToolSpec::new(
            ToolName::new(&tool.original_name),
            tool.description.clone(),
            schema,
            None,
            Annotations::default(),
        )),
        fixed: Arc::default(),
    }
}
