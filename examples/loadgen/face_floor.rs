//! The MCP face's floors, measured beside it: an MCP server over streamable HTTP with nothing
//! behind it, reached by the face's own client. A face call is one MCP call served over
//! streamable HTTP and one made over stdio, so the least it can cost here is such a server's CPU
//! per call plus the direct stdio client's, and its throughput at most the two in series
//! (1 / (1/alone + 1/direct)), as the gRPC floor of `calls` is. Two servers: the demo server
//! itself (rmcp's streamable-HTTP server, as the SDK serves MCP), and `loadgen
//! null-mcp-server` (canned JSON, no SDK: the bare floor).

use anyhow::Context as _;
use rmcp::{RoleClient, service::RunningService};

use crate::{
    Plan,
    broker::{measure_process, toolbroker_bin},
    face::{connect_when_up, mcp_call},
    floor::Helper,
    report::Figures,
};

/// Which server stands alone.
#[derive(Clone, Copy)]
pub enum Alone {
    /// `toolbroker demo-server --transport streamable-http`.
    Sdk,
    /// `loadgen null-mcp-server`.
    Bare,
}

impl Alone {
    /// How its rows are labelled.
    pub fn label(self) -> &'static str {
        match self {
            Alone::Sdk => "rmcp server alone",
            Alone::Bare => "bare server alone",
        }
    }
}

/// A server alone, with a session of the face's client.
pub struct HttpAlone {
    process: Process,
    session: RunningService<RoleClient, ()>,
}

/// The server's process, however it was started.
enum Process {
    Sdk(tokio::process::Child),
    Bare(Helper),
}

impl HttpAlone {
    /// Starts `alone` on a free loopback port and connects once it answers.
    pub async fn start(alone: Alone) -> anyhow::Result<Self> {
        let (process, addr) = match alone {
            Alone::Sdk => {
                // A port that was free a moment ago; another process taking it would only
                // fail the start, not the figures.
                let addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
                let child = tokio::process::Command::new(toolbroker_bin()?)
                    .args(["demo-server", "--transport", "streamable-http", "--listen"])
                    .arg(addr.to_string())
                    .env("RUST_LOG", "warn")
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .kill_on_drop(true)
                    .spawn()?;
                (Process::Sdk(child), addr.to_string())
            }
            Alone::Bare => {
                let helper = Helper::start(&["null-mcp-server"]).await?;
                let addr = helper.addr.clone();
                (Process::Bare(helper), addr)
            }
        };
        let session = connect_when_up(&format!("http://{addr}/mcp")).await?;
        Ok(Self { process, session })
    }

    /// Closed-loop `echo` at `concurrency`, with the server's CPU per call.
    pub async fn load(&self, concurrency: usize, plan: Plan) -> anyhow::Result<Figures> {
        let peer = self.session.peer().clone();
        let call = move || mcp_call(peer.clone(), "echo");
        let pid = match &self.process {
            Process::Sdk(child) => child.id().context("the demo server exited")?,
            Process::Bare(helper) => helper.pid()?,
        };
        measure_process(pid, concurrency, plan, call).await
    }

    /// Ends the session and the server.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.session.cancel().await?;
        if let Process::Sdk(mut child) = self.process {
            child.kill().await?;
        }
        Ok(())
    }
}

/// The floor line of `alone`: the face against that server plus the direct client, and, when
/// measured, `mcp-proxy`'s CPU and the target of 0.6 × it against that floor.
pub fn report(
    concurrency: usize,
    (kind, alone): (Alone, &Figures),
    direct: &Figures,
    face: &Figures,
    proxy: Option<&Figures>,
) -> String {
    let cpu = |figures: &Figures| figures.cpu_per_call_us().unwrap_or(f64::NAN);
    let floor = cpu(alone) + cpu(direct);
    let series = 1.0 / (1.0 / alone.rate() + 1.0 / direct.rate());
    let mut line = format!(
        "c={concurrency} face floor, {}: {:.1} µs + the direct client {:.1} µs = {floor:.1} \
         µs/call, series {series:.0}/s; face {:.1} µs ({:+.1} over the floor), {:.2}x the series",
        kind.label(),
        cpu(alone),
        cpu(direct),
        cpu(face),
        cpu(face) - floor,
        face.rate() / series,
    );
    if let Some(proxy) = proxy {
        let target = 0.6 * cpu(proxy);
        line += &format!(
            "; mcp-proxy {:.1} µs ({:+.1} over the floor, {:.2}x the series): 0.6 × mcp-proxy \
             = {target:.1} µs, {} the floor",
            cpu(proxy),
            cpu(proxy) - floor,
            proxy.rate() / series,
            if target < floor { "below" } else { "above" },
        );
    }
    line
}
