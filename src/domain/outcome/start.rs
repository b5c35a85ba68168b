//! Why a session did not start: every way start-up (spawn or connect, transport detection,
//! initialize, the first `tools/list`) can fail. Pure.

use std::{fmt, io::ErrorKind, time::Duration};

use http::StatusCode;

use super::{
    OAuthFailure,
    failure::{ProcessExit, StatusText, StreamFault, TransportFailure},
    stderr_note,
};

/// Why listing a server's tools failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListingFailure {
    /// The server answered `tools/list` with something else.
    NotAList,
    /// The request failed (rmcp's words).
    Failed(String),
    /// The server sent a cursor it had sent before: it would page forever.
    RepeatedCursor(String),
    /// The server sent more pages than any real server does.
    TooManyPages(usize),
}

impl fmt::Display for ListingFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListingFailure::NotAList => {
                f.write_str("tools/list answered with something other than a tool list")
            }
            ListingFailure::Failed(why) => write!(f, "tools/list failed: {why}"),
            ListingFailure::RepeatedCursor(cursor) => {
                write!(f, "tools/list repeated the cursor {cursor:?}")
            }
            ListingFailure::TooManyPages(pages) => {
                write!(f, "tools/list sent more than {pages} pages")
            }
        }
    }
}

/// What went wrong during start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartFailure {
    /// The command could not be started.
    Spawn {
        /// The configured command.
        command: String,
        /// What kind of OS error it was (for a hint).
        kind: ErrorKind,
        /// What the OS said.
        detail: String,
    },
    /// The process exited before the handshake was done.
    ExitedDuringInitialize(ProcessExit),
    /// The MCP handshake failed.
    Initialize(TransportFailure),
    /// The first `tools/list` failed.
    Listing(ListingFailure),
    /// The transport cut the server's stream during start-up.
    Stream(StreamFault),
    /// Start-up took longer than `init_timeout`.
    InitTimeout(Duration),
    /// The configured URL does not parse (the parser's words).
    BadUrl(String),
    /// The HTTP client could not be set up.
    HttpClient(TransportFailure),
    /// A configured header name is not valid in HTTP.
    BadHeaderName(String),
    /// A configured header's value is not valid in HTTP (the value is a secret: only the name).
    BadHeaderValue(String),
    /// A request could not reach the server.
    Unreachable(TransportFailure),
    /// `POST initialize` (transport detection) was refused with this status.
    ProbeRefused(StatusCode),
    /// The URL answered `initialize` with something other than JSON or an event stream.
    NotMcp {
        /// Its content type.
        content_type: String,
    },
    /// Neither transport: `POST initialize` answered `status`, and legacy SSE failed too.
    NeitherTransport {
        /// The answer to `POST initialize`.
        status: StatusCode,
        /// Why legacy SSE failed.
        sse: Box<StartFailure>,
    },
    /// `GET` of an SSE URL answered with this status.
    SseRefused {
        /// The URL.
        url: String,
        /// The status.
        status: StatusCode,
    },
    /// `GET` of an SSE URL answered with something other than an event stream.
    NotEventStream {
        /// The URL.
        url: String,
        /// Its content type, if any.
        content_type: Option<String>,
    },
    /// The event stream broke before the `endpoint` event (the parser's words).
    EventStreamBroke(String),
    /// The event stream ended without an `endpoint` event.
    NoEndpoint {
        /// The URL.
        url: String,
    },
    /// The `endpoint` event is not a URL.
    EndpointNotUrl {
        /// The event's data.
        data: String,
        /// The parser's words.
        reason: String,
    },
    /// The `endpoint` event points to another origin (our headers must not go there).
    EndpointElsewhere {
        /// The endpoint.
        endpoint: String,
    },
    /// The server's config needs a caller value its `discovery` values do not give.
    DiscoveryValue(String),
    /// The discovery token could not be exchanged (why).
    DiscoveryExchange(String),
    /// No usable OAuth token (which step failed).
    Authorization(OAuthFailure),
}

impl fmt::Display for StartFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartFailure::Spawn {
                command,
                kind,
                detail,
            } => write!(f, "cannot start {command:?}: {detail}{}", spawn_hint(*kind)),
            StartFailure::ExitedDuringInitialize(exit) => write!(f, "{exit} during initialize"),
            StartFailure::Initialize(failure) => write!(f, "initialize failed: {failure}"),
            StartFailure::Listing(failure) => write!(f, "{failure}"),
            StartFailure::Stream(fault) => write!(f, "the server {fault}"),
            StartFailure::InitTimeout(after) => write!(
                f,
                "did not finish starting within {} (init_timeout)",
                humantime::format_duration(*after)
            ),
            StartFailure::BadUrl(why) => write!(f, "bad url: {why}"),
            StartFailure::HttpClient(failure) => {
                write!(f, "cannot set up the HTTP client: {failure}")
            }
            StartFailure::BadHeaderName(name) => {
                write!(f, "header name {name:?} is not valid in HTTP")
            }
            StartFailure::BadHeaderValue(name) => {
                write!(f, "the value of header {name} is not valid in HTTP")
            }
            StartFailure::Unreachable(failure) => write!(f, "{failure}"),
            StartFailure::ProbeRefused(status) => {
                write!(f, "POST initialize answered {}", StatusText(*status))
            }
            StartFailure::NotMcp { content_type } => write!(
                f,
                "the URL answered initialize with {content_type:?}, not MCP (JSON or an event stream)"
            ),
            StartFailure::NeitherTransport { status, sse } => write!(
                f,
                "the URL serves neither MCP transport: POST initialize answered HTTP {status} \
                 (not streamable HTTP), and as legacy SSE: {sse}"
            ),
            StartFailure::SseRefused { url, status } => {
                write!(f, "GET {url} answered {}", StatusText(*status))
            }
            StartFailure::NotEventStream { url, content_type } => write!(
                f,
                "GET {url} did not answer with an event stream ({content_type:?})"
            ),
            StartFailure::EventStreamBroke(why) => write!(f, "the event stream broke: {why}"),
            StartFailure::NoEndpoint { url } => write!(
                f,
                "GET {url} ended its event stream without an endpoint event; is this an MCP SSE \
                 endpoint?"
            ),
            StartFailure::EndpointNotUrl { data, reason } => {
                write!(f, "the endpoint event {data:?} is not a URL: {reason}")
            }
            StartFailure::EndpointElsewhere { endpoint } => {
                write!(f, "the endpoint {endpoint} is not on the server's origin")
            }
            StartFailure::DiscoveryValue(reference) => write!(
                f,
                "the session that lists the tools needs ${{{reference}}}: give it under \
                 `discovery` (id, token, headers, claims)"
            ),
            StartFailure::DiscoveryExchange(why) => {
                write!(f, "the discovery token could not be exchanged: {why}")
            }
            StartFailure::Authorization(failure) => write!(f, "{failure}"),
        }
    }
}

/// A hint for the spawn errors users can fix.
fn spawn_hint(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::NotFound => " (is it installed and on PATH, or is cwd wrong?)",
        ErrorKind::PermissionDenied => " (is it executable?)",
        _ => "",
    }
}

/// Why a session did not start, with what the server process showed of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError {
    /// What went wrong.
    pub failure: StartFailure,
    /// How the server process ended meanwhile, when that is news (stdio).
    pub exit: Option<ProcessExit>,
    /// The server's last stderr lines (stdio), joined.
    pub stderr: Option<String>,
}

impl From<StartFailure> for StartError {
    fn from(failure: StartFailure) -> Self {
        Self {
            failure,
            exit: None,
            stderr: None,
        }
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.failure)?;
        if let Some(exit) = &self.exit {
            write!(f, "; the server {exit}")?;
        }
        stderr_note(f, self.stderr.as_deref())
    }
}

impl std::error::Error for StartError {}
