//! MCP `tools/call echo` on the demo server three ways in the same run: directly over stdio (the
//! baseline), through the broker's gRPC CallTool, and through the broker's MCP face with rmcp's
//! streamable HTTP client; at concurrency 1, 16 and 64 (64: where the face is compared with the
//! crates.io `mcp-proxy`), in interleaved rounds, every answer checked. One broker serves both
//! the gRPC port and the face, so the two broker paths share its process and upstream. Beside
//! them, the face's floors (`face_floor.rs`): the demo server itself over streamable HTTP, and a
//! bare server of canned JSON (`null_mcp.rs`), each plus the direct client.

use anyhow::{Context as _, bail};
use rmcp::{
    Peer, RoleClient, ServiceExt as _,
    model::CallToolRequestParams,
    service::RunningService,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use tonic::transport::Channel;
use toolbroker::proto::tool_broker_client::ToolBrokerClient;

use crate::{
    Plan,
    broker::{BrokerProcess, measure_process},
    demo_config,
    direct::Direct,
    face_floor::{self, Alone, HttpAlone},
    hello,
    report::{Figures, median},
    streaming::unary_echo,
};

/// Runs the three paths (four with `mcp_proxy`, the path of a crates.io `mcp-proxy` binary to
/// compare with) at each concurrency, interleaved, and prints the medians and each proxying
/// path against direct.
pub async fn run(plan: Plan, mcp_proxy: Option<&str>) -> anyhow::Result<()> {
    let rounds = if plan.quick { 1 } else { 5 };
    println!(
        "\n## tools/call echo: direct (stdio) vs gRPC CallTool vs MCP face (streamable HTTP) \
         (median of {rounds} interleaved rounds)"
    );
    // A port that was free a moment ago; another process taking it in between would only make
    // the broker fail to start, not lie.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let config = demo_config(&[], &format!("mcp_listen: \"127.0.0.1:{port}\"\n"))?;
    let broker = BrokerProcess::start(&config, &[]).await?;
    // Ready (the demo server's tools in the catalog) before the face is asked for them.
    let grpc = broker.client().await?;
    let face = connect(&format!("http://127.0.0.1:{port}/mcp")).await?;
    let direct = Direct::start(&[]).await?;
    let other = match mcp_proxy {
        Some(bin) => Some(OtherProxy::start(bin).await?),
        None => None,
    };
    let alones = [
        (Alone::Sdk, HttpAlone::start(Alone::Sdk).await?),
        (Alone::Bare, HttpAlone::start(Alone::Bare).await?),
    ];
    for concurrency in [1, 16, 64] {
        let (mut direct_runs, mut grpc_runs, mut face_runs) = (Vec::new(), Vec::new(), Vec::new());
        let (mut other_runs, mut alone_runs) = (Vec::new(), [Vec::new(), Vec::new()]);
        for _ in 0..rounds {
            direct_runs.push(direct_load(direct.peer(), concurrency, plan).await?);
            grpc_runs.push(grpc_load(&broker, grpc.clone(), concurrency, plan).await?);
            face_runs.push(face_load(&broker, face.peer().clone(), concurrency, plan).await?);
            for ((_, alone), runs) in alones.iter().zip(&mut alone_runs) {
                runs.push(alone.load(concurrency, plan).await?);
            }
            if let Some(other) = &other {
                other_runs.push(other.load(concurrency, plan).await?);
            }
        }
        let (direct, grpc, face) = (median(direct_runs), median(grpc_runs), median(face_runs));
        let other = (!other_runs.is_empty()).then(|| median(other_runs));
        for ((kind, _), runs) in alones.iter().zip(alone_runs) {
            let alone = median(runs);
            println!(
                "{}",
                alone.row(&format!("c={concurrency} {}", kind.label()))
            );
            let floor =
                face_floor::report(concurrency, (*kind, &alone), &direct, &face, other.as_ref());
            println!("{floor}");
        }
        if let Some(other) = other {
            println!("{}", other.row(&format!("c={concurrency} mcp-proxy")));
            println!(
                "c={concurrency} mcp-proxy vs direct: throughput {:.2}x, p50 {:+.3} ms; \
                 face/mcp-proxy throughput {:.2}x, cpu/call {:.1} / {:.1} µs",
                other.rate() / direct.rate(),
                other.ms(0.5) - direct.ms(0.5),
                face.rate() / other.rate(),
                face.cpu_per_call_us().unwrap_or(f64::NAN),
                other.cpu_per_call_us().unwrap_or(f64::NAN),
            );
        }
        println!("{}", direct.row(&format!("c={concurrency} direct")));
        println!("{}", grpc.row(&format!("c={concurrency} gRPC")));
        println!("{}", face.row(&format!("c={concurrency} face")));
        println!(
            "c={concurrency} vs direct: throughput face {:.2}x, gRPC {:.2}x; p50 face {:+.3} ms, \
             gRPC {:+.3} ms; broker cpu/call face {:.1} µs, gRPC {:.1} µs",
            face.rate() / direct.rate(),
            grpc.rate() / direct.rate(),
            face.ms(0.5) - direct.ms(0.5),
            grpc.ms(0.5) - direct.ms(0.5),
            face.cpu_per_call_us().unwrap_or(f64::NAN),
            grpc.cpu_per_call_us().unwrap_or(f64::NAN),
        );
    }
    face.cancel().await?;
    for (_, alone) in alones {
        alone.stop().await?;
    }
    direct.stop().await?;
    if let Some(other) = other {
        other.stop().await?;
    }
    Ok(())
}

/// The crates.io `mcp-proxy` in front of the same demo server (stdio backend `demo`, so the
/// tool is `demo/echo`), reached by the same HTTP client as the face.
struct OtherProxy {
    child: tokio::process::Child,
    session: RunningService<RoleClient, ()>,
    _dir: tempfile::TempDir,
}

impl OtherProxy {
    async fn start(bin: &str) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let demo = crate::broker::toolbroker_bin()?;
        let config = format!(
            "[proxy]\nname = \"bench\"\n[proxy.listen]\nhost = \"127.0.0.1\"\nport = {port}\n\
             [[backends]]\nname = \"demo\"\ntransport = \"stdio\"\ncommand = {demo:?}\n\
             args = [\"demo-server\"]\n"
        );
        let path = dir.path().join("mcp-proxy.toml");
        std::fs::write(&path, config)?;
        let child = tokio::process::Command::new(bin)
            .arg("--config")
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let session = connect_when_up(&format!("http://127.0.0.1:{port}/")).await?;
        Ok(Self {
            child,
            session,
            _dir: dir,
        })
    }

    /// Closed-loop `demo/echo` at `concurrency`, with the CPU per call of `mcp-proxy` itself
    /// (not of the demo server behind it).
    async fn load(&self, concurrency: usize, plan: Plan) -> anyhow::Result<Figures> {
        let peer = self.session.peer().clone();
        let call = move || mcp_call(peer.clone(), "demo/echo");
        let pid = self.child.id().context("mcp-proxy exited")?;
        measure_process(pid, concurrency, plan, call).await
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        self.session.cancel().await?;
        self.child.kill().await?;
        Ok(())
    }
}

/// An MCP session with the server just started at `url`, once it answers (tried every 50 ms
/// for 10 s).
pub async fn connect_when_up(url: &str) -> anyhow::Result<RunningService<RoleClient, ()>> {
    let mut last = None;
    for _ in 0..200 {
        match connect(url).await {
            Ok(session) => return Ok(session),
            Err(error) => last = Some(error),
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    bail!("the server at {url} did not answer: {last:?}")
}

/// An MCP session with the face at `url`, shared by all the callers of a load as the direct
/// baseline shares its one stdio session.
pub async fn connect(url: &str) -> anyhow::Result<RunningService<RoleClient, ()>> {
    // reqwest is built without a TLS provider of its own, and its client refuses to be built
    // without a process default, even for plain HTTP.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // A client that keeps its connections, as MCP clients do (the Python SDK's httpx, browsers);
    // rmcp's `from_uri` keeps none, and its figures would be mostly TCP set-up and tear-down.
    let config = StreamableHttpClientTransportConfig::with_uri(url);
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    Ok(().serve(transport).await?)
}

/// Closed-loop `echo` at `concurrency` on the direct stdio session, with this process's CPU
/// per call: the rmcp client's (the load loop's own is negligible beside it).
async fn direct_load(
    peer: Peer<RoleClient>,
    concurrency: usize,
    plan: Plan,
) -> anyhow::Result<Figures> {
    let call = move || mcp_echo(peer.clone());
    measure_process(std::process::id(), concurrency, plan, call).await
}

/// Closed-loop CallTool `echo` at `concurrency`, with the broker's CPU per call.
async fn grpc_load(
    broker: &BrokerProcess,
    client: ToolBrokerClient<Channel>,
    concurrency: usize,
    plan: Plan,
) -> anyhow::Result<Figures> {
    let call = move || unary_echo(client.clone());
    measure_process(broker.pid(), concurrency, plan, call).await
}

/// Closed-loop `echo` at `concurrency` on the face's session, with the broker's CPU per call.
async fn face_load(
    broker: &BrokerProcess,
    peer: Peer<RoleClient>,
    concurrency: usize,
    plan: Plan,
) -> anyhow::Result<Figures> {
    let call = move || mcp_echo(peer.clone());
    measure_process(broker.pid(), concurrency, plan, call).await
}

/// `tools/call echo {"message": "hello"}` on an MCP session; the answer must be one text,
/// `hello`, and not an error.
async fn mcp_echo(peer: Peer<RoleClient>) -> anyhow::Result<()> {
    mcp_call(peer, "echo").await
}

/// `tools/call <tool> {"message": "hello"}`, checked as [`mcp_echo`] says.
pub async fn mcp_call(peer: Peer<RoleClient>, tool: &'static str) -> anyhow::Result<()> {
    let result = peer
        .call_tool(CallToolRequestParams::new(tool).with_arguments(hello()))
        .await?;
    match result.content.as_slice() {
        [only]
            if result.is_error != Some(true)
                && only.as_text().is_some_and(|t| t.text == "hello") =>
        {
            Ok(())
        }
        _ => bail!("tools/call echo answered {result:?}"),
    }
}
