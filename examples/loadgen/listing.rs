//! ListTools with 10, 1,000 and 10,000 bridged tools, beside a direct `tools/list` of the same
//! demo server (every page, as a client must read them) and `tools/list` through the MCP face.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use prost::Message as _;
use tonic::{client::Grpc, transport::Channel};
use tonic_prost::ProstCodec;
use toolbroker::proto::{CallToolRequest, ListToolsRequest, tool_broker_client::ToolBrokerClient};

use crate::{
    Plan,
    broker::{BrokerProcess, measure_process},
    calls, demo_config,
    direct::Direct,
    report::Figures,
};

/// Answers of 10,000 tools are about 20 MB; tonic's default limit is 4 MiB.
const MAX_ANSWER: usize = 64 << 20;

/// A ListTools answer whose tools are counted, not decoded: the answer is received whole,
/// which separates what the broker and the network take from the client's decoding.
#[derive(Debug, Default)]
struct Undecoded {
    tools: usize,
    /// Fields other than `tools`, and the message's bytes (for a wrong answer's report).
    others: usize,
    bytes: usize,
    /// Field 2, the catalog revision.
    revision: u64,
}

impl prost::Message for Undecoded {
    fn encode_raw(&self, _: &mut impl prost::bytes::BufMut) {}

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: prost::encoding::WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        // Field 1 is `tools`.
        self.tools += usize::from(tag == 1);
        self.others += usize::from(tag != 1);
        let before = buf.remaining();
        let read = if tag == 2 {
            prost::encoding::uint64::merge(wire_type, &mut self.revision, buf, ctx)
        } else {
            prost::encoding::skip_field(wire_type, tag, buf, ctx)
        };
        self.bytes += before - buf.remaining();
        read
    }

    fn encoded_len(&self) -> usize {
        0
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
}

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
        // The demo server has 11 tools of its own.
        let extra = size.saturating_sub(11).to_string();
        let args = ["--extra-tools", extra.as_str()];
        let filter = if size == 10 { TEN } else { "" };
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let extra = format!("{filter}mcp_listen: \"127.0.0.1:{port}\"\n");
        let broker = BrokerProcess::start(&demo_config(&args, &extra)?, &[]).await?;
        let client = broker.client().await?.max_decoding_message_size(MAX_ANSWER);
        let ready_rss = broker.rss_mib()?;
        // The first ListTools of a revision converts and encodes every tool; later ones reuse it.
        let started = Instant::now();
        let first = client
            .clone()
            .list_tools(ListToolsRequest::default())
            .await?
            .into_inner();
        let (tools, message_len) = (first.tools.len(), first.encoded_len());
        let kib = message_len / 1024;
        let first_ms = started.elapsed().as_secs_f64() * 1e3;
        println!("{tools} tools: broker RSS when ready, before any ListTools: {ready_rss:.1} MiB");
        println!(
            "{tools} tools: the first ListTools (converts and encodes the catalog, decoded): {first_ms:.1} ms"
        );
        for concurrency in [1, 16] {
            let figures = decoded(&broker, &client, tools, concurrency, plan).await?;
            println!(
                "{}",
                figures.row(&format!("{tools} tools ({kib} KiB) c={concurrency} broker"))
            );
        }
        let figures = undecoded(&broker, tools, plan).await?;
        println!(
            "{}",
            figures.row(&format!("{tools} tools c=1 broker, not decoded"))
        );
        if let (Some(machine), Some(broker)) =
            (figures.machine_cpu_per_call_us(), figures.cpu_per_call_us())
        {
            // The client's h2 and tonic's copy of the answer are on the p50's path too.
            println!(
                "{tools} tools c=1 not decoded: cpu/call of the machine {machine:.1} µs, of all but the broker (the client, mostly) {:.1} µs",
                machine - broker
            );
        }
        let figures = crate::bare_h2::list_tools(&broker, message_len, plan).await?;
        println!(
            "{}",
            figures.row(&format!("{tools} tools c=1 broker, bare h2 client"))
        );
        let floor = crate::floor::bytes_load(message_len, plan).await?;
        println!(
            "{}",
            floor.row(&format!("{tools} tools c=1 floor: its bytes on TCP"))
        );
        for concurrency in [1, 16] {
            let figures = face_list(&broker, port, tools, concurrency, plan).await?;
            let row = format!("{tools} tools c={concurrency} MCP face");
            println!("{}", figures.row(&row));
        }
        // (The 10-tool catalog names its tools, so an added one would not be exposed.)
        if filter.is_empty() {
            let after = first_after_one_added(&client, first.revision).await?;
            println!(
                "{tools} tools: the first ListTools after a tool was added (decoded): {after:.1} ms"
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

/// Adds a tool through the demo server's `add_tool`, then times the first ListTools that
/// answers with the new revision, in milliseconds.
async fn first_after_one_added(
    client: &ToolBrokerClient<Channel>,
    revision: u64,
) -> anyhow::Result<f64> {
    let mut client = client.clone();
    let add = CallToolRequest {
        name: "add_tool".into(),
        arguments_json: r#"{"name": "loadgen_added"}"#.into(),
        ..Default::default()
    };
    let reply = client.call_tool(add).await?.into_inner();
    anyhow::ensure!(!reply.is_error, "add_tool failed: {reply:?}");
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let started = Instant::now();
        let listed = client.list_tools(ListToolsRequest::default()).await?;
        if listed.into_inner().revision != revision {
            return Ok(started.elapsed().as_secs_f64() * 1e3);
        }
        anyhow::ensure!(Instant::now() < until, "the catalog did not change in 60 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// ListTools at `concurrency`, each answer decoded as an agent would.
async fn decoded(
    broker: &BrokerProcess,
    client: &ToolBrokerClient<Channel>,
    expected: usize,
    concurrency: usize,
    plan: Plan,
) -> anyhow::Result<Figures> {
    let client = client.clone();
    let call = move || {
        let mut client = client.clone();
        async move {
            let listed = client.list_tools(ListToolsRequest::default()).await?;
            let tools = listed.into_inner().tools.len();
            anyhow::ensure!(tools == expected, "ListTools answered {tools} tools");
            anyhow::Ok(())
        }
    };
    measure_process(broker.pid(), concurrency, plan, call).await
}

/// `tools/list` through the MCP face at `concurrency`, every page, with rmcp's client: as
/// many sessions as callers, taken in turn, as `concurrency` agents would list. (rmcp's client
/// parses a JSON answer on its session's one worker task, so callers sharing one session wait
/// on each other's parsing.)
async fn face_list(
    broker: &BrokerProcess,
    port: u16,
    expected: usize,
    concurrency: usize,
    plan: Plan,
) -> anyhow::Result<Figures> {
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut sessions = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        sessions.push(crate::face::connect(&url).await?);
    }
    let peers: Arc<Vec<_>> = Arc::new(sessions.iter().map(|s| s.peer().clone()).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let call = move || {
        let peer = peers[next.fetch_add(1, Ordering::Relaxed) % peers.len()].clone();
        async move {
            let listed = peer.list_all_tools().await?.len();
            anyhow::ensure!(listed == expected, "the face listed {listed} tools");
            anyhow::Ok(())
        }
    };
    let figures = measure_process(broker.pid(), concurrency, plan, call).await;
    for session in sessions {
        session.cancel().await?;
    }
    figures
}

/// ListTools at concurrency 1, each answer received whole and its tools counted, not decoded.
async fn undecoded(broker: &BrokerProcess, expected: usize, plan: Plan) -> anyhow::Result<Figures> {
    let channel = broker.channel().await?;
    let call = move || {
        let mut grpc = Grpc::new(channel.clone()).max_decoding_message_size(MAX_ANSWER);
        async move {
            grpc.ready().await?;
            let path = http::uri::PathAndQuery::from_static("/toolbroker.v1.ToolBroker/ListTools");
            let codec = ProstCodec::<ListToolsRequest, Undecoded>::default();
            let listed = grpc
                .unary(
                    tonic::Request::new(ListToolsRequest::default()),
                    path,
                    codec,
                )
                .await?;
            let (metadata, answer, _) = listed.into_parts();
            anyhow::ensure!(
                answer.tools == expected,
                "ListTools answered {answer:?}, with {metadata:?}"
            );
            anyhow::Ok(())
        }
    };
    measure_process(broker.pid(), 1, plan, call).await
}
