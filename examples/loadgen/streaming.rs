//! CallToolStream against CallTool on the same broker: `echo` (no progress, no questions) at
//! concurrency 1 and 16, in interleaved rounds, every answer checked; what the stream costs in
//! broker CPU per call and latency.

use anyhow::{Context as _, bail};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use toolbroker::proto::{
    CallToolRequest, CallToolStreamRequest, call_tool_stream_request::Message,
    call_tool_stream_response::Event, tool_broker_client::ToolBrokerClient,
};

use crate::{
    Plan,
    broker::{BrokerProcess, measure_process},
    demo_config,
    report::{Figures, median},
};

/// CallTool's `echo` of "hello".
pub fn echo() -> CallToolRequest {
    CallToolRequest {
        name: "echo".into(),
        arguments_json: r#"{"message": "hello"}"#.into(),
        ..Default::default()
    }
}

/// Runs both kinds of call at each concurrency, interleaved, and prints the medians and the
/// stream's cost against the unary call.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let rounds = if plan.quick { 1 } else { 5 };
    println!(
        "\n## CallToolStream vs CallTool: echo with no events (median of {rounds} interleaved rounds)"
    );
    let broker = BrokerProcess::start(&demo_config(&[], "")?, &[]).await?;
    for concurrency in [1, 16] {
        let mut unary = Vec::new();
        let mut streamed = Vec::new();
        for _ in 0..rounds {
            unary.push(load(&broker, concurrency, plan, false).await?);
            streamed.push(load(&broker, concurrency, plan, true).await?);
        }
        let (unary, streamed) = (median(unary), median(streamed));
        println!("{}", unary.row(&format!("c={concurrency} CallTool")));
        println!(
            "{}",
            streamed.row(&format!("c={concurrency} CallToolStream"))
        );
        let cpu = |f: &Figures| f.cpu_per_call_us().unwrap_or(0.0);
        println!(
            "c={concurrency} stream/unary: throughput {:.3}x, p50 {:+.3} ms, broker cpu/call {:.3}x ({:+.1} µs)",
            streamed.rate() / unary.rate(),
            streamed.ms(0.5) - unary.ms(0.5),
            cpu(&streamed) / cpu(&unary).max(f64::MIN_POSITIVE),
            cpu(&streamed) - cpu(&unary),
        );
    }
    Ok(())
}

/// Closed-loop `echo` at `concurrency`, over CallToolStream when `streamed`, each answer
/// checked.
async fn load(
    broker: &BrokerProcess,
    concurrency: usize,
    plan: Plan,
    streamed: bool,
) -> anyhow::Result<Figures> {
    let client = broker.client().await?;
    let call = move || {
        let client = client.clone();
        async move {
            if streamed {
                stream_echo(client).await
            } else {
                unary_echo(client).await
            }
        }
    };
    measure_process(broker.pid(), concurrency, plan, call).await
}

/// CallTool `echo`, its answer checked.
pub async fn unary_echo(mut client: ToolBrokerClient<Channel>) -> anyhow::Result<()> {
    let answer = client.call_tool(echo()).await?.into_inner();
    if answer.text != "hello" {
        bail!("CallTool echo answered {answer:?}");
    }
    Ok(())
}

/// CallToolStream `echo`: the call, half-closed at once; the one event must be the result.
async fn stream_echo(mut client: ToolBrokerClient<Channel>) -> anyhow::Result<()> {
    let (sender, receiver) = tokio::sync::mpsc::channel(1);
    sender
        .send(CallToolStreamRequest {
            message: Some(Message::Call(echo())),
        })
        .await?;
    drop(sender);
    let mut events = client
        .call_tool_stream(ReceiverStream::new(receiver))
        .await?
        .into_inner();
    let first = events.message().await?.context("an event")?;
    match first.event {
        Some(Event::Result(result)) if result.text == "hello" => {}
        other => bail!("CallToolStream echo sent {other:?}"),
    }
    if events.message().await?.is_some() {
        bail!("CallToolStream sent more after the result");
    }
    Ok(())
}
