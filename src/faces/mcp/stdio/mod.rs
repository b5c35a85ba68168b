//! `toolbroker mcp-stdio`: a running broker's catalog served as an MCP server on stdin/stdout,
//! for MCP clients that can only launch a command (desktop apps). It is a client of the
//! broker's gRPC contract and nothing else: tools, resources and prompts are listed from it,
//! calls run over CallToolStream (progress, log messages and the server's questions relayed to
//! the client), and its Watch stream becomes `list_changed` notifications (on the session, or
//! on a 2026-07-28 client's `subscriptions/listen`). Stdout carries the protocol only; logs go
//! to stderr.

mod asking;
mod from_proto;
mod server_handler;
mod watch;

use anyhow::Context as _;
use rmcp::{ServiceExt as _, service::ServerInitializeError};
use tokio_util::sync::CancellationToken;

use crate::{
    cli::{ClientArgs, McpStdioArgs},
    client, proto,
};

use server_handler::StdioFace;

/// A command line `mcp-stdio` cannot start from (a usage mistake: exit 2).
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// The variable `--token-env` names is not set.
    #[error("--token-env {0}: the environment variable is not set")]
    TokenUnset(String),
    /// The variable is set but empty.
    #[error("--token-env {0}: the environment variable is empty")]
    TokenEmpty(String),
    /// The variable's value is not text.
    #[error("--token-env {0}: the environment variable is not valid UTF-8")]
    TokenNotText(String),
}

/// The gRPC client options `args` stand for: the broker's address, and the token read from the
/// variable `--token-env` names.
pub fn client_args(args: &McpStdioArgs) -> Result<ClientArgs, UsageError> {
    let token = match &args.token_env {
        None => None,
        Some(name) => match std::env::var(name) {
            Ok(token) if token.trim().is_empty() => {
                return Err(UsageError::TokenEmpty(name.clone()));
            }
            Ok(token) => Some(token.trim().to_owned()),
            Err(std::env::VarError::NotPresent) => {
                return Err(UsageError::TokenUnset(name.clone()));
            }
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(UsageError::TokenNotText(name.clone()));
            }
        },
    };
    Ok(ClientArgs {
        addr: args.broker.clone(),
        token,
        ca_cert: args.ca_cert.clone(),
    })
}

/// Connects to the broker and serves MCP on stdin/stdout (the tools of `view`, when not empty)
/// until the client closes stdin.
pub async fn serve(args: ClientArgs, view: String) -> anyhow::Result<()> {
    let mut broker = client::connect(&args).await?;
    // One request first, so that a wrong address, token or view is said once, at start, where
    // the client's log shows it, rather than as a failure of every request.
    let first = proto::ListToolsRequest {
        view: view.clone(),
        ..Default::default()
    };
    if let Err(status) = broker.list_tools(first).await {
        let hint = match (status.code(), &args.token) {
            (tonic::Code::Unauthenticated, None) => " (the broker wants a token: --token-env)",
            (tonic::Code::Unauthenticated, Some(_)) => " (the token was refused)",
            _ => "",
        };
        anyhow::bail!(
            "the broker at {} refused to list tools: {:?}: {}{hint}",
            args.addr,
            status.code(),
            status.message()
        );
    }
    let closed = CancellationToken::new();
    let face = StdioFace::new(broker, view, closed.clone());
    tracing::info!(broker = %args.addr, "serving MCP on stdio");
    let running = match face.serve(rmcp::transport::stdio()).await {
        Ok(running) => running,
        // The client went away before the handshake: nothing to serve, and no fault of ours.
        Err(ServerInitializeError::ConnectionClosed(reason)) => {
            tracing::info!(%reason, "stdin closed before initialization");
            return Ok(());
        }
        Err(error) => return Err(error).context("MCP initialization on stdio failed"),
    };
    let reason = running.waiting().await;
    closed.cancel();
    let reason = reason.context("the MCP session failed")?;
    tracing::info!(?reason, "the MCP client went away");
    Ok(())
}
