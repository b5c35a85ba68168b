//! StartToolCall + WaitOperation against CallTool on the same broker: `echo` at concurrency 1
//! and 16, in interleaved rounds, every answer checked; what a long call's record costs in
//! broker CPU per call and latency when the call is short (the worst case for it), with the
//! records in memory and in a real `redis-server` (`state.redis`); and Redis's round trips per
//! long call, counted by `redis-cli monitor`.

use anyhow::{Context as _, bail};
use prost::Message as _;
use tonic::transport::Channel;
use toolbroker::proto::{
    CallToolResponse,
    google::longrunning::{
        WaitOperationRequest, operation::Result as Ended, operations_client::OperationsClient,
    },
    tool_broker_client::ToolBrokerClient,
};

use crate::{
    Plan,
    broker::{BrokerProcess, measure_process},
    demo_config,
    report::{Figures, median},
    shared_rates::Redis,
    streaming::{echo, unary_echo},
};

/// Runs both kinds of call at each concurrency, interleaved, and prints the medians and the
/// operation's cost against the unary call.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let rounds = if plan.quick { 1 } else { 5 };
    println!(
        "\n## StartToolCall + WaitOperation vs CallTool: echo (median of {rounds} interleaved rounds)"
    );
    // Finished records kept briefly: a run starts tens of thousands.
    let broker = BrokerProcess::start(&demo_config(&[], "tasks: {ttl: 5s}\n")?, &[]).await?;
    let redis = Redis::start().await?;
    let shared = format!(
        "tasks: {{ttl: 5s}}\nstate: {{redis: \"{}\"}}\n",
        redis.url()
    );
    let shared = BrokerProcess::start(&demo_config(&[], &shared)?, &[]).await?;
    for concurrency in [1, 16] {
        let (mut unary, mut long, mut in_redis) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            unary.push(load(&broker, concurrency, plan, false).await?);
            long.push(load(&broker, concurrency, plan, true).await?);
            in_redis.push(load(&shared, concurrency, plan, true).await?);
        }
        let (unary, long, in_redis) = (median(unary), median(long), median(in_redis));
        println!("{}", unary.row(&format!("c={concurrency} CallTool")));
        println!(
            "{}",
            long.row(&format!("c={concurrency} StartToolCall+Wait"))
        );
        println!(
            "{}",
            in_redis.row(&format!("c={concurrency} StartToolCall+Wait, Redis"))
        );
        let cpu = |f: &Figures| f.cpu_per_call_us().unwrap_or(0.0);
        for (label, figures) in [("operation", &long), ("operation in Redis", &in_redis)] {
            println!(
                "c={concurrency} {label}/unary: throughput {:.3}x, p50 {:+.3} ms, broker cpu/call {:.3}x ({:+.1} µs)",
                figures.rate() / unary.rate(),
                figures.ms(0.5) - unary.ms(0.5),
                cpu(figures) / cpu(&unary).max(f64::MIN_POSITIVE),
                cpu(figures) - cpu(&unary),
            );
        }
    }
    let calls = if plan.quick { 50 } else { 1000 };
    let (client, operations) = (
        shared.client().await?,
        OperationsClient::new(shared.channel().await?),
    );
    let trips = redis
        .round_trips_per(calls, || operation_echo(client.clone(), operations.clone()))
        .await?;
    println!(
        "redis round trips per long call (StartToolCall + WaitOperation): {trips:.3} (commands sent, over {calls} calls one at a time)"
    );
    Ok(())
}

/// Closed-loop `echo` at `concurrency`, as an operation when `long`, each answer checked.
async fn load(
    broker: &BrokerProcess,
    concurrency: usize,
    plan: Plan,
    long: bool,
) -> anyhow::Result<Figures> {
    let client = broker.client().await?;
    let operations = OperationsClient::new(broker.channel().await?);
    let call = move || {
        let (client, operations) = (client.clone(), operations.clone());
        async move {
            if long {
                operation_echo(client, operations).await
            } else {
                unary_echo(client).await
            }
        }
    };
    measure_process(broker.pid(), concurrency, plan, call).await
}

/// StartToolCall `echo`, then WaitOperation until it is done; the response must be echo's.
async fn operation_echo(
    mut client: ToolBrokerClient<Channel>,
    mut operations: OperationsClient<Channel>,
) -> anyhow::Result<()> {
    let started = client.start_tool_call(echo()).await?.into_inner();
    let mut operation = started;
    while !operation.done {
        let wait = WaitOperationRequest {
            name: operation.name.clone(),
            timeout: Some(prost_types::Duration {
                seconds: 10,
                nanos: 0,
            }),
        };
        operation = operations.wait_operation(wait).await?.into_inner();
    }
    match operation.result.context("a done operation has a result")? {
        Ended::Response(any) => {
            let response = CallToolResponse::decode(any.value.as_slice())?;
            if response.text != "hello" {
                bail!("the operation answered {response:?}");
            }
            Ok(())
        }
        Ended::Error(status) => bail!("the operation failed: {status:?}"),
    }
}
