//! Every way a request can be refused or fail, and the one table that says, for each, the gRPC
//! status code, how loudly it is logged and its metric label. Messages name the value at fault
//! and are safe to show to callers. Pure.

use std::{fmt, time::Duration};

use super::{
    caller::MissingValue,
    config::Rate,
    names::ServerName,
    outcome::{OAuthFailure, TransportFailure},
    state::ServerState,
};

/// A configured call rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateLimit {
    /// `limits.caller_rate`: each caller's calls, over all tools.
    Caller(Rate),
    /// `servers[].rate`: calls to a server, all callers together.
    Server {
        /// The server.
        server: ServerName,
        /// Its rate.
        rate: Rate,
    },
    /// `servers[].caller_rate`: each caller's calls to a server.
    ServerCaller {
        /// The server.
        server: ServerName,
        /// Its rate.
        rate: Rate,
    },
}

impl RateLimit {
    /// Its config field, as the `limit` label of `toolbroker_rate_limited_total`.
    pub fn field(&self) -> &'static str {
        match self {
            RateLimit::Caller(_) => "limits.caller_rate",
            RateLimit::Server { .. } => "servers[].rate",
            RateLimit::ServerCaller { .. } => "servers[].caller_rate",
        }
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateLimit::Caller(rate) => {
                write!(f, "this caller's call rate (limits.caller_rate: {rate})")
            }
            RateLimit::Server { server, rate } => write!(
                f,
                "server {server:?}'s call rate, shared by all callers (servers[].rate: {rate})"
            ),
            RateLimit::ServerCaller { server, rate } => write!(
                f,
                "this caller's call rate to server {server:?} (servers[].caller_rate: {rate})"
            ),
        }
    }
}

/// A wait in whole seconds, rounded up and at least 1: what `retry-after` says.
pub fn whole_seconds(wait: Duration) -> u64 {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    seconds.max(1)
}

/// JSON-RPC's "invalid params" code: the server says the arguments are wrong.
pub const INVALID_PARAMS: i32 = -32602;

/// JSON-RPC's "method not found" code: the server does not serve this request at all.
pub const METHOD_NOT_FOUND: i32 = -32601;

/// Why a request did not get what it asked for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The caller did not show valid credentials.
    #[error("{0}")]
    Unauthenticated(AuthFailure),
    /// The caller's token does not allow this tool.
    #[error("the token {caller:?} may not call {tool:?} (auth.tokens[].tools)")]
    PermissionDenied {
        /// The token's name.
        caller: String,
        /// The tool asked for.
        tool: String,
    },
    /// No tool has this exposed name.
    #[error("unknown tool {name:?}; ListTools shows the tools available")]
    UnknownTool {
        /// The name asked for.
        name: String,
    },
    /// The caller's token does not allow this prompt.
    #[error("the token {caller:?} may not get prompt {prompt:?} (auth.tokens[].prompts)")]
    PromptDenied {
        /// The token's name.
        caller: String,
        /// The prompt asked for.
        prompt: String,
    },
    /// The caller's token does not allow this server's resources.
    #[error(
        "the token {caller:?} may not read the resources of server {server:?} \
         (auth.tokens[].resources)"
    )]
    ResourcesDenied {
        /// The token's name.
        caller: String,
        /// The server asked for.
        server: String,
    },
    /// No prompt has this exposed name.
    #[error("unknown prompt {name:?}; ListPrompts shows the prompts available")]
    UnknownPrompt {
        /// The name asked for.
        name: String,
    },
    /// The server has no resource with this URI.
    #[error("server {server:?} has no resource {uri:?}: {message}")]
    UnknownResource {
        /// The server.
        server: ServerName,
        /// The URI asked for.
        uri: String,
        /// The server's words.
        message: String,
    },
    /// The server serves no resources: it announced no `resources` capability (or answered
    /// `resources/read` with "method not found").
    #[error(
        "server {server:?} offers no resources (it announced no resources capability); \
         ListResources shows the resources there are"
    )]
    NoResources {
        /// The server.
        server: ServerName,
    },
    /// No server has this name.
    #[error("unknown server {name:?}; ListServers shows the configured servers")]
    UnknownServer {
        /// The name asked for.
        name: String,
    },
    /// No view has this name.
    #[error("unknown view {name:?}; {known}")]
    UnknownView {
        /// The name asked for.
        name: String,
        /// The views there are, said for the reader.
        known: String,
    },
    /// A search with nothing to search for.
    #[error("the query is empty; say what the tool should do, e.g. \"read a file\"")]
    EmptyQuery,
    /// The arguments are unusable.
    #[error("{0}")]
    InvalidArguments(String),
    /// The call went over a configured call rate.
    #[error("{limit} is used up; retry in {} s", whole_seconds(*retry_after))]
    RateLimited {
        /// Which rate.
        limit: RateLimit,
        /// When a call would next be let through.
        retry_after: Duration,
    },
    /// A request's first message did not come within `limits.header_timeout`.
    #[error(
        "the request's first message did not come within {} (limits.header_timeout)",
        humantime::format_duration(*.0)
    )]
    FirstMessageLate(Duration),
    /// The request is over `limits.max_request_bytes`.
    #[error("the request is over limits.max_request_bytes; send less or raise the limit")]
    RequestTooLarge,
    /// The response would be over `limits.max_response_bytes`.
    #[error(
        "the response would be {size} bytes, over limits.max_response_bytes ({limit}); \
         ask for fewer servers or raise the limit"
    )]
    ResponseTooLarge {
        /// Its encoded size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The broker is draining for shutdown.
    #[error("the broker is shutting down; retry on another instance")]
    ShuttingDown,
    /// The call's audit line cannot be written (`audit.on_failure: refuse`): the call is not
    /// run, or its result is withheld.
    #[error("the audit log cannot be written")]
    AuditUnavailable,
    /// The tool's server has no session.
    #[error("server {server:?} is not ready ({}): {message}", .state.as_str())]
    NotReady {
        /// The server.
        server: ServerName,
        /// Its state.
        state: ServerState,
        /// Why, as its status says.
        message: String,
    },
    /// The session failed while the call was in flight, or the call could not be sent.
    #[error("lost the connection to server {server:?}: {cause}")]
    SessionLost {
        /// The server.
        server: ServerName,
        /// What happened.
        cause: LostCall,
    },
    /// The call took longer than its timeout; the server was told to cancel it.
    #[error("the call to server {server:?} did not finish within {}", humantime::format_duration(*.after))]
    Timeout {
        /// The server.
        server: ServerName,
        /// The timeout that expired.
        after: Duration,
    },
    /// The server answered with a JSON-RPC error.
    #[error("server {server:?} rejected the call: {message}")]
    ServerError {
        /// The server.
        server: ServerName,
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// The server is busy: its call slots are taken and its queue is full, or no slot freed
    /// up in time.
    #[error("server {server:?} is overloaded: {overload}")]
    Overloaded {
        /// The server.
        server: ServerName,
        /// Which limit.
        overload: Overload,
    },
    /// The server sent a result over `limits.max_result_bytes`.
    #[error(
        "server {server:?} sent a result over the {limit}-byte limit (limits.max_result_bytes); {aftermath}"
    )]
    ResultTooLarge {
        /// The server.
        server: ServerName,
        /// The limit in bytes.
        limit: usize,
        /// What happened to the session.
        aftermath: Aftermath,
    },
    /// The server broke the protocol (an answer that is not a tool result, bad base64, ...).
    #[error("server {server:?} sent an invalid result: {reason}")]
    BadResult {
        /// The server.
        server: ServerName,
        /// What was wrong.
        reason: String,
    },
    /// The server asked the call's client for input (MCP 2026-07-28 rounds) that the call
    /// could not give: a sampling request the client refused or a unary call cannot ask.
    #[error("server {server:?} needed input this call did not give: {reason}")]
    InputNotGiven {
        /// The server.
        server: ServerName,
        /// Why not.
        reason: String,
    },
    /// No operation (task) of this caller has that name: never one, another caller's, or
    /// forgotten (`tasks.ttl` after it ended).
    #[error(
        "no operation {name:?} of this caller: it never was, or it ended more than tasks.ttl ago and was forgotten"
    )]
    UnknownOperation {
        /// The name asked for.
        name: String,
    },
    /// The caller runs `tasks.max_per_caller` tasks already.
    #[error(
        "this caller runs {running} long calls already (tasks.max_per_caller: {limit}); wait for one to end or cancel one"
    )]
    TooManyTasks {
        /// How many it runs.
        running: usize,
        /// The limit.
        limit: usize,
    },
    /// The shared state (Redis) could not be reached: for a rate check, with
    /// `state.on_unavailable: refuse`; for a task, always.
    #[error("the shared state (Redis at {redis}) cannot be reached ({reason}); retry shortly")]
    StateUnavailable {
        /// Where Redis is (no password).
        redis: String,
        /// Why it failed.
        reason: String,
    },
    /// What was asked of an operation does not fit where it stands (e.g. deleting a running
    /// one, answering a question it does not have).
    #[error("operation {name:?}: {reason}")]
    OperationState {
        /// The operation.
        name: String,
        /// What does not fit, and what to do.
        reason: String,
    },
    /// A per-caller server's config needs a caller value this caller did not send.
    #[error("server {server:?}: {missing}")]
    MissingCallerValue {
        /// The server.
        server: ServerName,
        /// Which value.
        missing: MissingValue,
    },
    /// Every per-caller session of the server is busy (draining ones count), and a caller
    /// needs a new one.
    #[error(
        "server {server:?} has {max} per-caller sessions alive, all busy (max_sessions); retry \
         later"
    )]
    SessionsExhausted {
        /// The server.
        server: ServerName,
        /// `max_sessions`.
        max: usize,
    },
    /// The caller has `max_sessions_per_caller` sessions of the server alive, all busy, and
    /// needs another (its values changed).
    #[error(
        "server {server:?}: this caller has {max} sessions alive, all busy \
         (max_sessions_per_caller); retry when its calls are done"
    )]
    CallerSessionsExhausted {
        /// The server.
        server: ServerName,
        /// `max_sessions_per_caller`.
        max: usize,
    },
    /// This caller's session of a per-caller server could not be started.
    #[error("server {server:?} could not start a session for this caller: {reason}")]
    CallerSessionFailed {
        /// The server.
        server: ServerName,
        /// Why.
        reason: String,
    },
    /// The token endpoint refused to exchange the caller's token (RFC 8693).
    #[error("server {server:?}: the token exchange was refused: {error}{}", .description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    ExchangeRefused {
        /// The server.
        server: ServerName,
        /// The endpoint's `error`.
        error: String,
        /// Its `error_description`, if any.
        description: Option<String>,
    },
    /// The broker has no usable OAuth token for the server (which step failed, and what to do).
    #[error("server {server:?}: {failure}")]
    Authorization {
        /// The server.
        server: ServerName,
        /// Why.
        failure: OAuthFailure,
    },
    /// The token endpoint could not be reached, or answered with something unusable.
    #[error("server {server:?}: the token endpoint is unavailable: {reason}")]
    ExchangeUnavailable {
        /// The server.
        server: ServerName,
        /// Why.
        reason: String,
    },
}

/// Why the caller is not let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthFailure {
    /// No `authorization` header.
    MissingToken,
    /// An `authorization` header that is not `Bearer <token>`.
    NotBearer,
    /// A bearer token that matches none configured.
    InvalidToken,
    /// No client certificate, where the config requires one.
    ClientCertificateRequired,
    /// A client certificate (the caller's identity) with no URI, DNS or email SAN and no
    /// subject CN.
    NoCertificateIdentity,
    /// A JWT that failed a check.
    Jwt(JwtFailure),
}

impl fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AuthFailure::MissingToken => {
                "missing bearer token: send the header \"authorization: Bearer <token>\""
            }
            AuthFailure::NotBearer => "the authorization header is not \"Bearer <token>\"",
            AuthFailure::InvalidToken => "the bearer token is not valid",
            AuthFailure::ClientCertificateRequired => {
                "a client certificate signed by the configured CA is required"
            }
            AuthFailure::NoCertificateIdentity => "the client certificate names no identity",
            AuthFailure::Jwt(failure) => return write!(f, "the JWT was refused: {failure}"),
        })
    }
}

/// Which check a JWT failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwtFailure {
    /// It is not a well-formed JWT (the parser's words).
    Malformed(String),
    /// Its `alg` is not an asymmetric signature algorithm (`none`, or HMAC, which would let
    /// anyone holding the public key sign).
    Algorithm(String),
    /// No key of the JWKS has its `kid` (none given, when the JWKS has several).
    UnknownKey(Option<String>),
    /// The signature does not verify.
    Signature,
    /// It has expired (`exp`, with 60 s of leeway).
    Expired,
    /// It is not valid yet (`nbf`, with 60 s of leeway).
    NotYetValid,
    /// Its `iss` is not the configured issuer.
    Issuer,
    /// None of its `aud` is the configured audience.
    Audience,
    /// A required claim is missing or malformed (which).
    Claim(String),
    /// The signing keys could not be had (why).
    KeysUnavailable(String),
}

impl fmt::Display for JwtFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JwtFailure::Malformed(why) => write!(f, "not a well-formed JWT ({why})"),
            JwtFailure::Algorithm(alg) => write!(
                f,
                "algorithm {alg} is not accepted; only asymmetric signatures (RS*, PS*, ES*, \
                 EdDSA) are"
            ),
            JwtFailure::UnknownKey(Some(kid)) => {
                write!(f, "no key with kid {kid:?} in the issuer's JWKS")
            }
            JwtFailure::UnknownKey(None) => {
                f.write_str("it names no key (kid) and the issuer's JWKS has several")
            }
            JwtFailure::Signature => f.write_str("the signature does not verify"),
            JwtFailure::Expired => f.write_str("it has expired (exp)"),
            JwtFailure::NotYetValid => f.write_str("it is not valid yet (nbf)"),
            JwtFailure::Issuer => f.write_str("its issuer (iss) is not the one configured"),
            JwtFailure::Audience => f.write_str("it is not meant for this broker (aud)"),
            JwtFailure::Claim(claim) => write!(f, "claim {claim:?} is missing or not a string"),
            JwtFailure::KeysUnavailable(why) => {
                write!(f, "the signing keys are unavailable: {why}")
            }
        }
    }
}

/// How a call in flight was lost with its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostCall {
    /// The server forgot the session (it restarted) while the call waited for its answer.
    Reinitialized,
    /// The connection closed before the answer came.
    Closed,
    /// The request could not be sent, or its answer not read.
    Transport(TransportFailure),
    /// The session cancelled the request.
    Cancelled(Option<String>),
}

impl fmt::Display for LostCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostCall::Reinitialized => f.write_str(
                "the server lost the session during the call (did it restart?); the call may or \
                 may not have run, and was not repeated",
            ),
            LostCall::Closed => f.write_str(
                "the connection closed before the answer came (the call may or may not have run; \
                 it was not repeated)",
            ),
            LostCall::Transport(failure) => write!(
                f,
                "{failure} (the call may or may not have run; it was not repeated)"
            ),
            LostCall::Cancelled(reason) => write!(
                f,
                "the request was cancelled ({})",
                reason.as_deref().unwrap_or("no reason given")
            ),
        }
    }
}

/// Which of a server's call limits refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overload {
    /// Every slot is taken and the queue is full.
    QueueFull {
        /// `max_concurrent_calls`.
        running: usize,
        /// `max_queued_calls`.
        waiting: usize,
    },
    /// The call waited `queue_timeout` and no slot freed up.
    NoSlot {
        /// `queue_timeout`.
        waited: Duration,
        /// `max_concurrent_calls`.
        running: usize,
    },
}

impl fmt::Display for Overload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Overload::QueueFull { running, waiting } => write!(
                f,
                "the queue is full: {running} running and {waiting} waiting calls \
                 (max_concurrent_calls, max_queued_calls); retry later"
            ),
            Overload::NoSlot { waited, running } => write!(
                f,
                "no call slot freed up within {} (max_concurrent_calls {running}, queue_timeout); \
                 retry later",
                humantime::format_duration(*waited)
            ),
        }
    }
}

/// What an over-large result did to its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aftermath {
    /// Only the call failed (an HTTP answer refused whole).
    SessionGoesOn,
    /// The session's stream was cut, so it is restarted (a stdio line, a legacy SSE event).
    SessionDropped,
}

impl fmt::Display for Aftermath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Aftermath::SessionGoesOn => "the call failed; the session goes on",
            Aftermath::SessionDropped => "the session was dropped and is being restarted",
        })
    }
}

/// The gRPC status codes requests end with (the names are gRPC's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// NOT_FOUND
    NotFound,
    /// INVALID_ARGUMENT
    InvalidArgument,
    /// UNAVAILABLE
    Unavailable,
    /// DEADLINE_EXCEEDED
    DeadlineExceeded,
    /// INTERNAL
    Internal,
    /// RESOURCE_EXHAUSTED
    ResourceExhausted,
    /// UNAUTHENTICATED
    Unauthenticated,
    /// PERMISSION_DENIED
    PermissionDenied,
    /// FAILED_PRECONDITION
    FailedPrecondition,
}

impl Code {
    /// The code's gRPC name, as audit lines give it (`NOT_FOUND`).
    pub fn name(self) -> &'static str {
        match self {
            Code::NotFound => "NOT_FOUND",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::Unavailable => "UNAVAILABLE",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::Internal => "INTERNAL",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::Unauthenticated => "UNAUTHENTICATED",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
        }
    }

    /// The code named `name` (as [`Code::name`] gives it).
    pub fn parse(name: &str) -> Option<Self> {
        use Code::*;
        [
            NotFound,
            InvalidArgument,
            Unavailable,
            DeadlineExceeded,
            Internal,
            ResourceExhausted,
            Unauthenticated,
            PermissionDenied,
            FailedPrecondition,
        ]
        .into_iter()
        .find(|code| code.name() == name)
    }
}

/// How loudly an error is logged where it is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Debug: the caller's mistake, or expected (a caller must not be able to fill the log).
    Debug,
    /// Warn: a server or the broker failed the caller.
    Warn,
}

/// How an error is answered, logged and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    /// The gRPC status code.
    pub code: Code,
    /// How loudly it is logged.
    pub level: Level,
    /// A low-cardinality label for metrics and the span's `error.type`.
    pub label: &'static str,
}

impl RequestError {
    /// The table: status code, log level and label of every error.
    pub fn class(&self) -> Class {
        use Code::*;
        use Level::{Debug, Warn};
        let (code, level, label) = match self {
            RequestError::Unauthenticated(_) => (Unauthenticated, Debug, "unauthenticated"),
            RequestError::PermissionDenied { .. } => (PermissionDenied, Debug, "permission_denied"),
            RequestError::UnknownTool { .. } => (NotFound, Debug, "unknown_tool"),
            RequestError::UnknownServer { .. } => (NotFound, Debug, "unknown_server"),
            RequestError::UnknownView { .. } => (NotFound, Debug, "unknown_view"),
            RequestError::EmptyQuery => (InvalidArgument, Debug, "empty_query"),
            RequestError::PromptDenied { .. } | RequestError::ResourcesDenied { .. } => {
                (PermissionDenied, Debug, "permission_denied")
            }
            RequestError::UnknownPrompt { .. } => (NotFound, Debug, "unknown_prompt"),
            RequestError::UnknownResource { .. } => (NotFound, Debug, "unknown_resource"),
            RequestError::NoResources { .. } => (NotFound, Debug, "no_resources"),
            RequestError::InvalidArguments(_) => (InvalidArgument, Debug, "invalid_arguments"),
            RequestError::FirstMessageLate(_) => (DeadlineExceeded, Debug, "first_message_late"),
            RequestError::RequestTooLarge => (ResourceExhausted, Debug, "request_too_large"),
            RequestError::RateLimited { .. } => (ResourceExhausted, Debug, "rate_limited"),
            RequestError::ResponseTooLarge { .. } => {
                (ResourceExhausted, Debug, "response_too_large")
            }
            RequestError::ShuttingDown => (Unavailable, Debug, "shutting_down"),
            // Debug: the audit log warns once when it fails, not once per call.
            RequestError::AuditUnavailable => (Unavailable, Debug, "audit_unavailable"),
            RequestError::NotReady { .. } => (Unavailable, Warn, "not_ready"),
            RequestError::SessionLost { .. } => (Unavailable, Warn, "session_lost"),
            RequestError::Timeout { .. } => (DeadlineExceeded, Warn, "timeout"),
            RequestError::ServerError { code, .. } if *code == INVALID_PARAMS => {
                (InvalidArgument, Debug, "jsonrpc_error")
            }
            RequestError::ServerError { .. } => (Internal, Warn, "jsonrpc_error"),
            RequestError::Overloaded { .. } => (ResourceExhausted, Warn, "overloaded"),
            RequestError::ResultTooLarge { .. } => (ResourceExhausted, Warn, "result_too_large"),
            RequestError::BadResult { .. } => (Internal, Warn, "bad_result"),
            RequestError::InputNotGiven { .. } => (FailedPrecondition, Debug, "input_not_given"),
            RequestError::UnknownOperation { .. } => (NotFound, Debug, "unknown_operation"),
            RequestError::TooManyTasks { .. } => (ResourceExhausted, Debug, "too_many_tasks"),
            RequestError::OperationState { .. } => (FailedPrecondition, Debug, "operation_state"),
            // Debug: the state errors counter and one warning tell of it, not every call.
            RequestError::StateUnavailable { .. } => (Unavailable, Debug, "state_unavailable"),
            RequestError::MissingCallerValue { .. } => {
                (FailedPrecondition, Debug, "missing_caller_value")
            }
            RequestError::SessionsExhausted { .. } => {
                (ResourceExhausted, Warn, "sessions_exhausted")
            }
            RequestError::CallerSessionsExhausted { .. } => {
                (ResourceExhausted, Debug, "caller_sessions_exhausted")
            }
            RequestError::CallerSessionFailed { .. } => {
                (Unavailable, Warn, "caller_session_failed")
            }
            RequestError::ExchangeRefused { .. } => (PermissionDenied, Debug, "exchange_refused"),
            RequestError::ExchangeUnavailable { .. } => (Unavailable, Warn, "exchange_unavailable"),
            RequestError::Authorization { failure, .. } => match failure {
                OAuthFailure::InsufficientScope { .. } => {
                    (PermissionDenied, Warn, "insufficient_scope")
                }
                OAuthFailure::Forbidden { .. } => (PermissionDenied, Warn, "forbidden"),
                // The IdP refused the caller's ID token: the caller's to fix, not a retry's.
                OAuthFailure::CallerRefused(_) => (PermissionDenied, Debug, "caller_refused"),
                OAuthFailure::NoIdToken => (Unauthenticated, Debug, "no_id_token"),
                failure if failure.needs_person() => {
                    (FailedPrecondition, Warn, "authorization_needed")
                }
                _ => (Unavailable, Warn, "authorization_failed"),
            },
        };
        Class { code, level, label }
    }

    /// Whether the call was refused before it could reach a server: by the gate, the
    /// caller's grants, a rate, or its own name, arguments or size, or at shutdown. The audit
    /// log gives the lines of such calls a budget of their own.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            RequestError::Unauthenticated(_)
                | RequestError::PermissionDenied { .. }
                | RequestError::UnknownTool { .. }
                | RequestError::InvalidArguments(_)
                | RequestError::RateLimited { .. }
                | RequestError::RequestTooLarge
                | RequestError::ShuttingDown
                | RequestError::AuditUnavailable
                | RequestError::StateUnavailable { .. }
        )
    }
}

#[cfg(test)]
mod tests;
