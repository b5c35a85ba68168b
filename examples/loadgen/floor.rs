//! The floor under a broker call on this machine: what a gRPC unary call costs its server (a
//! tonic server of the broker's own service whose `CallTool` answers `echo` at once, run by a
//! child process that does nothing else: `loadgen null-server`, see [`crate::null_broker`]),
//! measured in the same run as the broker, through the same client. A broker call is one such
//! gRPC call plus one MCP call on a pipe, so the no-op's CPU and latency, added to the direct
//! rmcp client's, bound from below what the broker can reach; what the broker spends above
//! that sum is its own. At concurrency 1 a harder floor sits beside it: the no-op plus a bare
//! line's round trip through `cat` on a pipe (no JSON, no MCP), the least that waiting for an
//! answer on a pipe costs here. For ListTools, the floor is the answer's bytes alone sent over
//! loopback TCP (`loadgen bytes-server SIZE`: SIZE bytes for each byte read; no HTTP/2).

use std::{process::Stdio, sync::Arc};

use anyhow::{Context as _, anyhow};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    process::{Child, Command},
};
use tonic::transport::{Channel, Server, server::TcpIncoming};
use toolbroker::proto::{
    tool_broker_client::ToolBrokerClient, tool_broker_server::ToolBrokerServer,
};

use crate::{Plan, broker::measure_process, null_broker::NullBroker, report::Figures};

/// Serves the no-op broker on a free loopback port (printed on stdout) until killed, with
/// TCP_NODELAY as the broker sets it.
pub async fn serve() -> anyhow::Result<()> {
    let service = ToolBrokerServer::new(NullBroker);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?);
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    Server::builder()
        .add_service(service)
        .serve_with_incoming(incoming)
        .await?;
    Ok(())
}

/// Closed-loop CallTool `echo` against a fresh `loadgen null-server` at `concurrency`, with
/// that server's CPU per call; every answer checked to be "hello".
pub async fn no_op_load(concurrency: usize, plan: Plan) -> anyhow::Result<Figures> {
    let server = Helper::start(&["null-server"]).await?;
    let channel = Channel::from_shared(format!("http://{}", server.addr))?
        .connect()
        .await?;
    let client = ToolBrokerClient::new(channel);
    let request = crate::broker::echo_hello();
    let call = move || {
        let mut client = client.clone();
        let request = request.clone();
        async move {
            let reply = client.call_tool(request).await?.into_inner();
            anyhow::ensure!(reply.text == "hello", "wrong answer: {reply:?}");
            anyhow::Ok(())
        }
    };
    measure_process(server.pid()?, concurrency, plan, call).await
}

/// A helper process: a running `loadgen null-server`, `null-mcp-server` or `bytes-server`
/// (killed when dropped).
pub struct Helper {
    child: Child,
    /// The address it listens on.
    pub addr: String,
}

impl Helper {
    /// Starts `loadgen ARGS` and reads the address it prints.
    pub async fn start(args: &[&str]) -> anyhow::Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().expect("piped");
        let addr = BufReader::new(stdout)
            .lines()
            .next_line()
            .await?
            .ok_or_else(|| anyhow!("loadgen {args:?} exited before listening"))?;
        Ok(Self { child, addr })
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> anyhow::Result<u32> {
        self.child.id().context("the helper process exited")
    }
}

/// Closed-loop round trips of one short line through `cat` on a pipe, at concurrency 1, with
/// this process's CPU per round trip; every line checked to come back.
pub async fn pipe_load(plan: Plan) -> anyhow::Result<Figures> {
    let mut cat = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting cat")?;
    let writer = cat.stdin.take().expect("piped");
    let reader = BufReader::new(cat.stdout.take().expect("piped"));
    // One caller at a time (concurrency 1): the lock is never contended.
    let pipe = Arc::new(tokio::sync::Mutex::new((writer, reader, String::new())));
    let call = move || {
        let pipe = pipe.clone();
        async move {
            let mut pipe = pipe.lock().await;
            let (writer, reader, line) = &mut *pipe;
            writer.write_all(b"ping\n").await?;
            line.clear();
            reader.read_line(line).await?;
            anyhow::ensure!(line == "ping\n", "cat answered {line:?}");
            anyhow::Ok(())
        }
    };
    let figures = measure_process(std::process::id(), 1, plan, call).await;
    drop(cat);
    figures
}

/// Serves `size` bytes for each byte read, to each connection, on a free loopback port
/// (printed on stdout) until killed.
pub async fn serve_bytes(size: usize) -> anyhow::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?);
    let blob: Arc<[u8]> = vec![7; size].into();
    loop {
        let (mut stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let blob = blob.clone();
        tokio::spawn(async move {
            let mut asked = [0; 1];
            while stream.read_exact(&mut asked).await.is_ok() {
                if stream.write_all(&blob).await.is_err() {
                    break;
                }
            }
        });
    }
}

/// Closed-loop requests for `size` bytes from a fresh `loadgen bytes-server`, at concurrency
/// 1, with that server's CPU per answer; every answer read whole.
pub async fn bytes_load(size: usize, plan: Plan) -> anyhow::Result<Figures> {
    let server = Helper::start(&["bytes-server", &size.to_string()]).await?;
    let stream = TcpStream::connect(&server.addr).await?;
    stream.set_nodelay(true)?;
    // One caller at a time (concurrency 1): the lock is never contended.
    let link = Arc::new(tokio::sync::Mutex::new((stream, vec![0; size])));
    let call = move || {
        let link = link.clone();
        async move {
            let mut link = link.lock().await;
            let (stream, answer) = &mut *link;
            stream.write_all(&[1]).await?;
            stream.read_exact(answer).await?;
            anyhow::ensure!(answer.last() == Some(&7), "a wrong answer");
            anyhow::Ok(())
        }
    };
    measure_process(server.pid()?, 1, plan, call).await
}
