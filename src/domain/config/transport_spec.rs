//! The validated transport of a server: how to start or reach it, with caller values still to
//! fill in ([`Template`]s), and what it becomes for one caller ([`Launch`], [`Endpoint`]). Pure.

use std::{collections::BTreeMap, path::PathBuf};

use secrecy::SecretString;

use crate::domain::{
    caller::{CallerValues, Destination, MissingValue, Template},
    state::Transport,
};

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportSpec {
    /// A child process speaking JSON-RPC over stdin/stdout.
    Stdio(StdioSpec),
    /// An HTTP endpoint (streamable HTTP or legacy SSE).
    Http(HttpSpec),
}

impl TransportSpec {
    /// The configured transport; `Auto` when the HTTP flavour is detected on connect (and
    /// reported then).
    pub fn kind(&self) -> Transport {
        match self {
            TransportSpec::Stdio(_) => Transport::Stdio,
            TransportSpec::Http(http) => match http.mode {
                HttpMode::Auto => Transport::Auto,
                HttpMode::StreamableHttp => Transport::StreamableHttp,
                HttpMode::Sse => Transport::Sse,
            },
        }
    }
}

/// Names mapped to secret values (env variables, HTTP headers), sorted by name so that equal
/// maps compare equal whatever order the file gave; a value may hold caller values.
pub type Templates = BTreeMap<String, Template>;

/// A server run as a child process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioSpec {
    /// The program, found on `PATH` if it has no `/`.
    pub command: String,
    /// Its arguments, expanded.
    pub args: Vec<Template>,
    /// Variables added to the broker's environment for the child; values are secrets.
    pub env: Templates,
    /// Its working directory; `None` = the broker's.
    pub cwd: Option<Template>,
    /// Whether it gets the broker's whole environment rather than a minimal one.
    pub inherit_env: bool,
}

/// A server reached over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSpec {
    /// The endpoint, `http://` or `https://`.
    pub url: String,
    /// Which HTTP transport to speak.
    pub mode: HttpMode,
    /// Headers sent with every request (e.g. `Authorization`); values are secrets.
    pub headers: Templates,
}

/// Which MCP HTTP transport to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpMode {
    /// Streamable HTTP, falling back to legacy SSE as the MCP spec describes.
    Auto,
    /// Streamable HTTP only.
    StreamableHttp,
    /// Legacy HTTP+SSE only.
    Sse,
}

/// A stdio server's process as one caller gets it.
#[derive(Debug)]
pub struct Launch {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its added variables (secret values).
    pub env: Vec<(String, SecretString)>,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// Whether it gets the broker's whole environment.
    pub inherit_env: bool,
}

/// An HTTP server's headers as one caller gets them (secret values).
#[derive(Debug)]
pub struct Endpoint {
    /// Sent with every request.
    pub headers: Vec<(String, SecretString)>,
}

impl StdioSpec {
    /// The process for `caller` (its values made path-safe); shared servers have no caller
    /// values, so any caller gives the same.
    pub fn launch(&self, caller: &dyn CallerValues) -> Result<Launch, MissingValue> {
        let render = |template: &Template| template.render(caller, Destination::Process);
        Ok(Launch {
            command: self.command.clone(),
            args: self.args.iter().map(render).collect::<Result<_, _>>()?,
            env: secrets(&self.env, caller, Destination::Process)?,
            cwd: self
                .cwd
                .as_ref()
                .map(render)
                .transpose()?
                .map(PathBuf::from),
            inherit_env: self.inherit_env,
        })
    }
}

impl HttpSpec {
    /// The headers for `caller`.
    pub fn endpoint(&self, caller: &dyn CallerValues) -> Result<Endpoint, MissingValue> {
        Ok(Endpoint {
            headers: secrets(&self.headers, caller, Destination::Header)?,
        })
    }
}

impl TransportSpec {
    /// Every template of the transport (to check which caller values it needs).
    pub fn templates(&self) -> Vec<&Template> {
        match self {
            TransportSpec::Stdio(stdio) => stdio
                .args
                .iter()
                .chain(stdio.env.values())
                .chain(&stdio.cwd)
                .collect(),
            TransportSpec::Http(http) => http.headers.values().collect(),
        }
    }
}

fn secrets(
    templates: &Templates,
    caller: &dyn CallerValues,
    to: Destination,
) -> Result<Vec<(String, SecretString)>, MissingValue> {
    templates
        .iter()
        .map(|(name, value)| Ok((name.clone(), value.render(caller, to)?.into())))
        .collect()
}
