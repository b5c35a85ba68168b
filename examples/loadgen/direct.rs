//! The baseline: an rmcp client calling the demo server directly over stdio, with no broker in
//! between, so that every broker figure has a same-run direct figure beside it. It starts its
//! session as the broker does (`server/discover`, else `initialize`), so both speak the same
//! protocol version to the server.

use std::process::Stdio;

use rmcp::{
    model::{CallToolRequestParams, ProtocolVersion},
    service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService},
    transport::TokioChildProcess,
};
use serde_json::{Map, Value};

use crate::{
    Plan,
    broker::{measure_process, toolbroker_bin},
    report::Figures,
};

/// A demo server spoken to directly.
pub struct Direct {
    client: RunningService<RoleClient, ()>,
}

impl Direct {
    /// Starts `toolbroker demo-server` (with `args`) as a child and initializes a session.
    pub async fn start(args: &[&str]) -> anyhow::Result<Self> {
        let mut all = vec!["demo-server"];
        all.extend_from_slice(args);
        Self::start_program(&toolbroker_bin()?, &all).await
    }

    /// Starts `program` with `args` as a child MCP server over stdio and initializes a session.
    pub async fn start_program(program: &std::path::Path, args: &[&str]) -> anyhow::Result<Self> {
        let mut command = tokio::process::Command::new(program);
        command.args(args);
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()?;
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        };
        let client = ().serve_with_lifecycle(transport, lifecycle).await?;
        // Once per run: `many` starts 50 servers.
        static TOLD: std::sync::Once = std::sync::Once::new();
        if let Some(info) = client.peer_info() {
            TOLD.call_once(|| {
                eprintln!("(the direct client speaks MCP {})", info.protocol_version)
            });
        }
        Ok(Self { client })
    }

    /// Closed-loop calls of `tool` with `arguments` at `concurrency`, with the CPU per call of
    /// this process: the rmcp client's cost (the load loop's own is negligible beside it).
    pub async fn load(
        &self,
        tool: &'static str,
        arguments: Map<String, Value>,
        concurrency: usize,
        plan: Plan,
    ) -> anyhow::Result<Figures> {
        let peer = self.client.peer().clone();
        let call = move || {
            let peer = peer.clone();
            let params = CallToolRequestParams::new(tool).with_arguments(arguments.clone());
            async move {
                let result = peer.call_tool(params).await?;
                anyhow::ensure!(result.is_error != Some(true), "the call failed: {result:?}");
                anyhow::Ok(())
            }
        };
        measure_process(std::process::id(), concurrency, plan, call).await
    }

    /// The session, to send requests on.
    pub fn peer(&self) -> rmcp::Peer<RoleClient> {
        self.client.peer().clone()
    }

    /// Ends the session (and the child).
    pub async fn stop(self) -> anyhow::Result<()> {
        self.client.cancel().await?;
        Ok(())
    }
}
