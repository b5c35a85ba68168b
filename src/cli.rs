//! The command line: `serve` (the default), `check`, `login`, `demo-server`, two small gRPC
//! clients, and `mcp-stdio` (a broker's catalog as a stdio MCP server).

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use crate::telemetry::LogFormat;

/// toolbroker: the tools of many MCP servers, served to agents over one gRPC contract.
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options of `serve`, accepted without the subcommand name.
    #[command(flatten)]
    pub serve: ServeArgs,
    /// Log format.
    #[arg(
        long,
        global = true,
        value_enum,
        env = "TOOLBROKER_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the configured MCP servers' tools over gRPC (the default).
    Serve(ServeArgs),
    /// Check a config file: exit 0 if valid, 2 with every problem listed if not.
    Check(CheckArgs),
    /// Run the built-in demo MCP server (used when no config is given, and by the tests).
    DemoServer(DemoServerArgs),
    /// List the tools of a running broker.
    Tools(ToolsArgs),
    /// Search the tools of a running broker: the best matches for a task, best first.
    Search(SearchArgs),
    /// Call a tool on a running broker.
    Call(CallArgs),
    /// Serve a running broker's catalog as an MCP server on stdio, for clients that can only
    /// launch a command.
    McpStdio(McpStdioArgs),
    /// Authorize the broker for a server under OAuth (`oauth` with a `token_store`): prints
    /// the authorization URL, waits for the browser's redirect, writes the tokens.
    Login(LoginArgs),
}

/// Options of `login`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server, by its name in the config.
    pub server: String,
    /// The broker's config file.
    #[arg(long, short, env = "TOOLBROKER_CONFIG")]
    pub config: PathBuf,
    /// Only print the URL; do not try to open a browser.
    #[arg(long)]
    pub no_browser: bool,
    /// How long to wait for the redirect (e.g. `5m`, `90s`).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// Options of `serve`.
#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// Config file (YAML or JSON). Without one, the built-in demo server is served.
    #[arg(long, short, env = "TOOLBROKER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on; overrides `listen` in the config. Default 127.0.0.1:50051.
    #[arg(long, env = "TOOLBROKER_LISTEN")]
    pub listen: Option<SocketAddr>,
}

/// Options of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Config file to check.
    #[arg(long, short)]
    pub config: PathBuf,
}

/// Options of `demo-server`.
#[derive(Debug, Args)]
pub struct DemoServerArgs {
    /// Transport to serve on.
    #[arg(long, value_enum, default_value = "stdio")]
    pub transport: DemoTransport,
    /// Address for the HTTP transports (port 0 picks a free one; the URL is logged).
    #[arg(long, default_value = "127.0.0.1:3001")]
    pub listen: SocketAddr,
    /// With an HTTP transport, refuse requests without `Authorization: Bearer <TOKEN>`.
    #[arg(long, env = "DEMO_BEARER_TOKEN", value_name = "TOKEN")]
    pub bearer_token: Option<String>,
    /// Add this many synthetic tools (for load tests).
    #[arg(long, default_value_t = 0)]
    pub extra_tools: usize,
    /// Tools per tools/list page (0: all in one page).
    #[arg(long, default_value_t = crate::demo_server::DEFAULT_PAGE_SIZE)]
    pub page_size: usize,
    /// Handle one tool call at a time (the others wait), like many real MCP servers.
    #[arg(long)]
    pub serial: bool,
    /// Answer `sleep` and `ask` as tasks (MCP 2026-07-28's Tasks extension) to a client that
    /// declares the extension.
    #[arg(long)]
    pub tasks: bool,
    /// A label with no effect but to show in `whoami`'s arguments (to see what a config passed).
    #[arg(long, value_name = "TEXT")]
    pub tag: Option<String>,
}

/// Transports of the demo server.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DemoTransport {
    /// Newline-delimited JSON-RPC on stdin/stdout.
    Stdio,
    /// Legacy HTTP+SSE (MCP 2024-11-05).
    Sse,
    /// Streamable HTTP.
    StreamableHttp,
}

/// Options of the gRPC clients.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Broker address: `host:port` (plaintext), `http://…`, `https://…` or `unix:PATH`.
    #[arg(
        long,
        env = "TOOLBROKER_ADDR",
        default_value = "http://127.0.0.1:50051"
    )]
    pub addr: String,
    /// Bearer token for a broker with `auth` (a static token or a JWT).
    #[arg(long, env = "TOOLBROKER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// For an `https://` address: trust the CA certificates in this PEM file instead of the
    /// system's roots (a broker with a certificate of a private CA).
    #[arg(long, env = "TOOLBROKER_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
}

/// Options of `tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Broker address and connection options.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Only the tools of this view (the broker's `views`).
    #[arg(long)]
    pub view: Option<String>,
}

/// Options of `search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Broker address and connection options.
    #[command(flatten)]
    pub client: ClientArgs,
    /// What the tool should do, in words: "read a file", "create a jira issue".
    pub query: String,
    /// How many matches at most (the broker gives at most 100).
    #[arg(long, default_value_t = 10)]
    pub limit: u32,
    /// Only the tools of this view (the broker's `views`).
    #[arg(long)]
    pub view: Option<String>,
}

/// Options of `mcp-stdio`.
#[derive(Debug, Args)]
pub struct McpStdioArgs {
    /// Broker address: `127.0.0.1:50051` (plaintext), `http://127.0.0.1:50051`,
    /// `https://tools.example.com` or `unix:///run/toolbroker/grpc.sock`.
    #[arg(long, value_name = "ADDR")]
    pub broker: String,
    /// The environment variable that holds the bearer token for a broker with `auth` (the
    /// token itself stays out of the command line, which desktop configs and `ps` show).
    #[arg(long, value_name = "VAR")]
    pub token_env: Option<String>,
    /// For an `https://` broker: trust the CA certificates in this PEM file instead of the
    /// system's roots.
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// Serve only the tools of this view (the broker's `views`).
    #[arg(long, default_value = "")]
    pub view: String,
}

/// Options of `call`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// Broker address and connection options.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Exposed tool name, as `tools` shows it.
    pub name: String,
    /// Arguments as a JSON object.
    #[arg(default_value = "{}")]
    pub arguments: String,
    /// Call over CallToolStream: progress is shown on stderr as it comes, and the server's
    /// questions (elicitation) are answered as --answer or --accept-defaults say, else declined.
    #[arg(long)]
    pub stream: bool,
    /// With --stream: accept every question with this JSON object as the answer.
    #[arg(long, requires = "stream", value_name = "JSON")]
    pub answer: Option<String>,
    /// With --stream: accept every form question with the defaults its schema gives.
    #[arg(long, requires = "stream", conflicts_with = "answer")]
    pub accept_defaults: bool,
}
