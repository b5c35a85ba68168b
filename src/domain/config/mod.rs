//! The configuration file: what users write (YAML, or JSON, which is YAML; a `servers` list
//! and/or the mcp.json `mcpServers` map) turned into a validated [`Config`]. Owns the validated
//! types, their defaults and [`ConfigError`]. Pure: the file's text and the environment lookup
//! are parameters; reading the file and the environment is the caller's job.
//!
//! Validation reports every problem, each with its field path, and never stops at the first:
//! `toolbroker check` lists them all. Env and header values are secrets (a [`Template`]'s
//! `Debug` never shows its text), so a `Debug` print of a config never shows them.

mod capacity;
mod connections;
mod durations;
mod face;
mod isolation;
mod jwt;
mod oauth;
mod rates;
mod raw;
mod roots;
mod security;
mod shaping;
mod state;
mod tasks;
mod transport;
mod transport_spec;
mod validate;

pub use connections::{
    ConnectionLimits, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONCURRENT_STREAMS,
    DEFAULT_MAX_CONNECTIONS,
};
pub use durations::MAX_DURATION;
pub use face::{
    DEFAULT_MCP_MAX_SESSIONS, DEFAULT_MCP_SESSIONS_PER_CALLER, MAX_MCP_SESSIONS, McpFace,
};
pub use isolation::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_CALLER, Isolation,
    PerCaller, TokenExchange,
};
pub use jwt::{JwksSource, JwtSpec};
pub use oauth::{Client, ClientAuth, CrossApp, Grant, Login, OAuth, PrivateKey, SigningAlgorithm};
pub use rates::{Audit, AuditSink, MAX_RATE_COUNT, OnFailure, Per, Rate};
pub use security::{Auth, Limits, MAX_SIZE, TlsFiles, TokenSource, TokenSpec};
pub use state::{DEFAULT_KEY_PREFIX, OnUnavailable, SharedState, kept_note};
pub use tasks::{DEFAULT_TASK_TTL, DEFAULT_TASKS_PER_CALLER, Tasks};
pub use transport_spec::{
    Endpoint, HttpMode, HttpSpec, Launch, StdioSpec, Templates, TransportSpec,
};

#[cfg(test)]
mod tests;

use std::{
    collections::BTreeMap,
    fmt,
    net::SocketAddr,
    path::PathBuf,
    time::{Duration, SystemTime},
};

use super::{
    caller::FixedCaller,
    catalog::ServerPolicy,
    expand::Lookup,
    names::ServerName,
    outcome::Phase,
    overrides::ToolRule,
    state::{Readiness, ServerCondition},
};

/// A call's timeout when the server entry gives none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Connect + initialize + first tools/list, when the entry gives none; generous because
/// `npx` may download the server first.
pub const DEFAULT_INIT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long in-flight calls may run on after a shutdown signal, when the file gives none.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// The first restart delay after a failure, when the entry gives none.
pub const DEFAULT_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// The longest restart delay, when the entry gives none.
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Calls running at once per server, when the entry gives none.
pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 128;
/// Calls waiting per server, when the entry gives none.
pub const DEFAULT_MAX_QUEUED_CALLS: usize = 1024;
/// How long a call may wait for a slot, when the entry gives none.
pub const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(10);
/// Copies of a stdio server, when the entry gives none.
pub const DEFAULT_REPLICAS: usize = 1;
/// The most copies of one stdio server: each is a process with its own pipes and memory.
pub const MAX_REPLICAS: usize = 64;
/// The most calls one server may run at once: more is no longer a limit, and a semaphore
/// cannot count much higher.
pub const MAX_CONCURRENT_CALLS: u64 = 100_000;
/// The most calls one server may queue.
pub const MAX_QUEUED_CALLS: u64 = 1_000_000;
/// The longest prefix allowed, leaving room for the tool name within the 64 characters
/// LLM APIs accept.
pub const MAX_PREFIX_LEN: usize = 32;
/// Requests larger than this are refused, when `limits` gives no size (gRPC's usual 4 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 << 20;
/// Responses larger than this are refused, when `limits` gives no size.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 32 << 20;
/// The longest Unix socket path: `sun_path` holds 108 bytes on Linux, with the closing NUL.
pub const MAX_UNIX_SOCKET_PATH: usize = 107;
/// A tool result (one stdio line, one HTTP body or event) larger than this ends the call.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 16 << 20;

/// A validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The gRPC address; `None` = the built-in default unless `--listen` says otherwise.
    pub listen: Option<SocketAddr>,
    /// Where Prometheus metrics are served; `None` = off.
    pub metrics_listen: Option<SocketAddr>,
    /// Where the MCP face (the catalog as one MCP server, streamable HTTP at `/mcp`) listens.
    pub mcp_listen: Option<SocketAddr>,
    /// A Unix socket on which the gRPC services are served as well (for agents on the same
    /// host or in the same pod); `None` = none.
    pub unix_listen: Option<PathBuf>,
    /// When the broker reports itself ready.
    pub readiness: Readiness,
    /// How long in-flight calls may run on after SIGTERM/SIGINT.
    pub shutdown_grace: Duration,
    /// How long a client connection may live before the server closes it gracefully (HTTP/2
    /// GOAWAY; the client reconnects, possibly to another replica); `None` = unlimited.
    pub max_connection_age: Option<Duration>,
    /// How long calls and streams on such a connection may run on before it is closed anyway;
    /// `None` = until they end.
    pub max_connection_age_grace: Option<Duration>,
    /// Whether tool arguments and results are recorded on trace spans (truncated).
    pub record_arguments: bool,
    /// Who may call: bearer tokens and/or client certificates; empty = anyone.
    pub auth: Auth,
    /// The listener's certificate, when it speaks TLS.
    pub tls: Option<TlsFiles>,
    /// Whether server reflection is served.
    pub reflection: bool,
    /// Size limits of messages and results, and the per-caller call rate.
    pub limits: Limits,
    /// Where the audit log goes; `None` = off.
    pub audit: Option<Audit>,
    /// The MCP servers: the `servers` list first, then the `mcpServers` map, in file order.
    pub servers: Vec<ServerSpec>,
    /// Named subsets of the catalog: view name → exposed-name patterns.
    pub views: BTreeMap<String, Vec<String>>,
    /// The MCP face's allowed origins and session caps (`mcp_allowed_origins`,
    /// `mcp_sessions_per_caller`, `mcp_max_sessions`).
    pub mcp_face: McpFace,
    /// Long calls: how long a finished one is kept, how many a caller runs at once.
    pub tasks: Tasks,
    /// Where replicas keep what they share; `None` = each its own, in memory.
    pub state: Option<SharedState>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: None,
            metrics_listen: None,
            mcp_listen: None,
            unix_listen: None,
            readiness: Readiness::default(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            max_connection_age: None,
            max_connection_age_grace: None,
            record_arguments: false,
            auth: Auth::default(),
            tls: None,
            reflection: true,
            limits: Limits::default(),
            audit: None,
            servers: Vec::new(),
            views: BTreeMap::new(),
            mcp_face: McpFace::default(),
            tasks: Tasks::default(),
            state: None,
        }
    }
}

/// One MCP server to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Its unique name.
    pub name: ServerName,
    /// How to reach it.
    pub transport: TransportSpec,
    /// The tools to expose (by their names on the server) and how each is reshaped;
    /// empty = all tools as declared.
    pub tools: Vec<ToolRule>,
    /// Put before each tool name to make the exposed name; letters, digits, `_` and `-`.
    pub prefix: String,
    /// The longest a tool call may take.
    pub timeout: Duration,
    /// The longest a call may last when progress notifications keep restarting its `timeout`.
    pub max_timeout: Duration,
    /// The roots the broker tells the server about (`roots/list`): `file://` URIs.
    pub roots: Vec<String>,
    /// The longest connecting, initializing and the first tools/list may take.
    pub init_timeout: Duration,
    /// Restart delays after failures.
    pub backoff: Backoff,
    /// How many calls may run at once, and how many may wait.
    pub concurrency: Concurrency,
    /// The largest tool result read from it (`limits.max_result_bytes`).
    pub max_result_bytes: usize,
    /// How many copies of a stdio server run, calls spread over them; always 1 over HTTP.
    pub replicas: usize,
    /// Whether callers share one session or each gets its own.
    pub isolation: Isolation,
    /// Trade each caller's token for one meant for this server (per-caller HTTP servers).
    pub token_exchange: Option<TokenExchange>,
    /// How the broker gets OAuth tokens for this server (HTTP servers).
    pub oauth: Option<OAuth>,
    /// Calls to this server, all callers together.
    pub rate: Option<Rate>,
    /// Calls to this server per caller.
    pub caller_rate: Option<Rate>,
}

impl ServerSpec {
    /// The caller values its discovery session (the one that lists the tools) is started
    /// with: `discovery` for a per-caller server; none needed for a shared one.
    pub fn discovery_caller(&self) -> FixedCaller {
        match &self.isolation {
            Isolation::PerCaller(per_caller) => per_caller.discovery.clone(),
            Isolation::Shared => FixedCaller::default(),
        }
    }

    /// The condition the server is in before its supervisor has done anything.
    pub fn initial_condition(&self, now: SystemTime) -> ServerCondition {
        Phase::Starting.condition(self.transport.kind(), 0, now)
    }

    /// Whether `other` differs only in what the catalog does with the tools (`tools`, overrides
    /// included), so that the server's sessions may stay as they are.
    pub fn same_sessions(&self, other: &ServerSpec) -> bool {
        let mut reshaped = other.clone();
        reshaped.tools.clone_from(&self.tools);
        *self == reshaped
    }

    /// What the catalog needs to know of this server: its name, prefix and tool rules.
    pub fn policy(&self) -> ServerPolicy {
        ServerPolicy {
            name: self.name.clone(),
            prefix: self.prefix.clone(),
            tools: self.tools.clone(),
        }
    }
}

/// How many calls a server takes at once; the rest queue, up to a bound and for a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency {
    /// Calls running at once.
    pub max_calls: usize,
    /// Calls waiting for a slot; beyond this, calls are refused at once.
    pub max_queued: usize,
    /// How long a call may wait for a slot.
    pub queue_timeout: Duration,
}

impl Default for Concurrency {
    fn default() -> Self {
        Self {
            max_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            max_queued: DEFAULT_MAX_QUEUED_CALLS,
            queue_timeout: DEFAULT_QUEUE_TIMEOUT,
        }
    }
}

/// Restart delays: doubling from `initial` up to `max`, with jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay before the first restart attempt.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: DEFAULT_BACKOFF_INITIAL,
            max: DEFAULT_BACKOFF_MAX,
        }
    }
}

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where: a field path like `servers[2].timeout` or `mcpServers.memory.args[0]`; empty for
    /// the document as a whole.
    pub path: String,
    /// What is wrong, naming the value at fault (never a secret's value).
    pub reason: String,
}

impl ConfigError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "{}: {}", self.path, self.reason)
        }
    }
}

/// Every problem found in a config file (at least one), top-level settings first, then each
/// server in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl std::error::Error for ConfigErrors {}

/// Parses and validates a config file's text; `lookup` resolves `${VAR}` references.
///
/// An empty document (or `{}`) is a valid config with no servers.
pub fn parse(text: &str, lookup: Lookup<'_>) -> Result<Config, ConfigErrors> {
    let document = raw::load(text).map_err(ConfigErrors)?;
    let mut errors = Vec::new();
    let config = validate::config(document, lookup, &mut errors);
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(ConfigErrors(errors))
    }
}

/// Field paths as users read them: `servers[2].env.API_KEY`.
mod path {
    /// `at.key` (or `key` at the top).
    pub fn field(at: &str, key: &str) -> String {
        join(at, key)
    }

    /// `at[i]`.
    pub fn index(at: &str, i: usize) -> String {
        format!("{at}[{i}]")
    }

    /// `at` followed by a relative path such as `args[0]` or `env.KEY`.
    pub fn join(at: &str, rest: &str) -> String {
        if at.is_empty() || rest.is_empty() || rest.starts_with('[') {
            format!("{at}{rest}")
        } else {
            format!("{at}.{rest}")
        }
    }
}
