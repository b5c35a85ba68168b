//! The floor under a broker call on this machine: what any gRPC unary call costs its server
//! (tonic's own health `Check`, served by a child process that does nothing else:
//! `loadgen null-server`), measured in the same run as the broker. A broker call is one such
//! gRPC call plus one MCP call on a pipe, so the no-op's CPU and latency, added to the direct
//! rmcp client's, bound from below what the broker can reach; what the broker spends above
//! that sum is its own.

use std::process::Stdio;

use anyhow::{Context as _, anyhow};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    net::TcpListener,
    process::{Child, Command},
};
use tonic::transport::{Channel, Server, server::TcpIncoming};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use crate::{Plan, broker::measure_process, report::Figures};

/// Serves tonic's health service on a free loopback port (printed on stdout) until killed,
/// with TCP_NODELAY as the broker sets it.
pub async fn serve() -> anyhow::Result<()> {
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?);
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    Server::builder()
        .add_service(service)
        .serve_with_incoming(incoming)
        .await?;
    Ok(())
}

/// Closed-loop health checks against a fresh `loadgen null-server` at `concurrency`, with that
/// server's CPU per call; every answer checked to be SERVING.
pub async fn no_op_load(concurrency: usize, plan: Plan) -> anyhow::Result<Figures> {
    let server = NullServer::start().await?;
    let channel = Channel::from_shared(format!("http://{}", server.addr))?
        .connect()
        .await?;
    let client = HealthClient::new(channel);
    let call = move || {
        let mut client = client.clone();
        async move {
            let status = client
                .check(HealthCheckRequest::default())
                .await?
                .into_inner()
                .status;
            anyhow::ensure!(status == ServingStatus::Serving as i32, "status {status}");
            anyhow::Ok(())
        }
    };
    let pid = server.child.id().context("the null server exited")?;
    measure_process(pid, concurrency, plan, call).await
}

/// A running `loadgen null-server` (killed when dropped).
struct NullServer {
    child: Child,
    addr: String,
}

impl NullServer {
    async fn start() -> anyhow::Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("null-server")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().expect("piped");
        let addr = BufReader::new(stdout)
            .lines()
            .next_line()
            .await?
            .ok_or_else(|| anyhow!("the null server exited before listening"))?;
        Ok(Self { child, addr })
    }
}
