//! Starting a session on each transport: a spawned process over stdio, streamable HTTP with
//! rmcp's client, or legacy SSE with ours; a bare `url` is probed first. All of start-up,
//! including the first tools/list, runs within the server's `init_timeout`.
//!
//! The protocol is chosen as MCP 2026-07-28's backward-compatibility rules say: a
//! `server/discover` first, 2026-07-28 (stateless, per-request metadata) if the server knows
//! it, else the `initialize` handshake at 2025-11-25 (rmcp's `Auto` lifecycle). A server the
//! probe upsets (an older SDK that exits on anything before `initialize`, or one that answers
//! it with something else than a discover result) is connected again with the handshake alone.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU8, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ClientHandler, RoleClient,
    model::ProtocolVersion,
    service::{
        ClientCacheConfig, ClientInitializeError, ClientLifecycleMode, ClientServiceExt,
        RunningService,
    },
    transport::{
        IntoTransport, StreamableHttpClientTransport, common::client_side_sse::ExponentialBackoff,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use secrecy::SecretString;
use url::Url;

use crate::domain::{
    caller::{CallerValues, MissingValue},
    config::{Endpoint, HttpMode, HttpSpec, Launch, ServerSpec, TransportSpec},
    offer::Listing,
    outcome::{StartError, StartFailure},
    state::Transport,
};
use crate::upstream::{
    oauth::{Authorizer, Bearer},
    session::changes::Changes,
    session::client_handler::Handler,
    session::interactions::Interactions,
    session::offers_list::{self, Offers},
    session::running::Session,
    session::tools_list,
    transport::explain::explain,
    transport::faults::Faults,
    transport::http::detect::{Detected, detect},
    transport::http::streamable::TracedClient,
    transport::http::{self, SharedHeaders},
    transport::sse,
    transport::stdio::pipe_transport::PipeTransport,
    transport::stdio::process::{self, ChildProcess, EXIT_REPORT_WAIT, STOP_GRACE},
    transport::tap::Tapped,
};

/// A session, and what its server offered at start-up (nothing for a caller's session).
pub type Started = (Session, Listing);

/// What a session is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Shared by callers (or a per-caller server's discovery session): it lists what the
    /// server offers.
    Shared,
    /// One caller's own session: everything on it is that caller's; it lists nothing.
    OneCaller,
}

/// The parts every session of a server is made with.
fn parts(spec: &ServerSpec, purpose: Purpose) -> (Changes, Arc<Interactions>, Handler) {
    let changes = Changes::default();
    let interactions = Interactions::new(purpose == Purpose::OneCaller);
    let roots: Arc<[String]> = spec.roots.clone().into();
    let handler = Handler::new(
        spec.name.clone(),
        changes.clone(),
        interactions.clone(),
        roots,
    );
    (changes, interactions, handler)
}

/// A server's transport as one caller gets it: the process to start, or the headers to send.
#[derive(Debug)]
pub enum Resolved {
    /// A stdio server's process.
    Stdio(Launch),
    /// An HTTP server's headers.
    Http(Endpoint),
}

impl Resolved {
    /// Sends `value` as the `Authorization` header, in place of any configured (an HTTP
    /// server's token exchanged for the caller; a stdio server takes no headers).
    pub fn set_authorization(&mut self, value: SecretString) {
        if let Resolved::Http(endpoint) = self {
            endpoint
                .headers
                .retain(|(name, _)| !name.eq_ignore_ascii_case("authorization"));
            endpoint.headers.push(("Authorization".into(), value));
        }
    }

    /// `spec`'s transport filled in with `caller`'s values.
    pub fn of(spec: &ServerSpec, caller: &dyn CallerValues) -> Result<Self, MissingValue> {
        Ok(match &spec.transport {
            TransportSpec::Stdio(stdio) => Resolved::Stdio(stdio.launch(caller)?),
            TransportSpec::Http(http) => Resolved::Http(http.endpoint(caller)?),
        })
    }
}

/// Starts the server (or connects to it) as `resolved` says, initializes a session and, for a
/// shared session, lists what it offers, all within the server's `init_timeout`. An HTTP
/// server under OAuth gets its tokens from `bearer`. A failure stops whatever was started.
pub async fn start(
    spec: &ServerSpec,
    resolved: &Resolved,
    purpose: Purpose,
    bearer: Option<Bearer>,
    era: &Era,
) -> Result<Started, StartError> {
    let lifecycle = era.lifecycle();
    let remembered = matches!(lifecycle, ClientLifecycleMode::Initialize);
    let started = match (&spec.transport, resolved) {
        (TransportSpec::Http(http), Resolved::Http(endpoint)) => {
            let started = start_http(spec, http, endpoint, purpose, bearer, lifecycle);
            match tokio::time::timeout(spec.init_timeout, started).await {
                Ok(started) => started.map_err(StartError::from),
                Err(_) => Err(StartFailure::InitTimeout(spec.init_timeout).into()),
            }
        }
        (_, Resolved::Stdio(launch)) => start_stdio(spec, launch, purpose, lifecycle).await,
        (TransportSpec::Stdio(_), Resolved::Http(_)) => {
            unreachable!("resolved from the same spec")
        }
    };
    match &started {
        Ok((session, _)) => era.learn(session.is_stateless()),
        // The server may have changed: the next start probes again.
        Err(_) if remembered => era.forget(),
        // Out of time before rmcp's probe gave up on an answer: the server may be one that
        // ignores `server/discover`, so the next start tries the handshake (and, failing,
        // probes again: a slow server is not held to one guess).
        Err(error)
            if matches!(error.failure, StartFailure::InitTimeout(_))
                && spec.init_timeout <= PROBE_WAIT =>
        {
            era.learn(false);
        }
        Err(_) => {}
    }
    started
}

/// How long rmcp's probe waits for an answer to `server/discover` before it sends `initialize`
/// (fixed in rmcp 3.11).
const PROBE_WAIT: Duration = Duration::from_secs(10);

/// What a server's sessions speak, remembered from the last one that started (MCP 2026-07-28
/// advises a client to remember a server's era): the next session of a server that spoke the
/// handshake (a restart, another caller's own) starts with `initialize` at once, without the
/// probe (which costs such a server a round trip, a second start if it exits on it, or 10 s if
/// it ignores it).
#[derive(Debug, Default)]
pub struct Era(AtomicU8);

/// [`Era`]'s values.
const UNKNOWN: u8 = 0;
const HANDSHAKE: u8 = 1;
const STATELESS: u8 = 2;

impl Era {
    /// How the next session starts.
    fn lifecycle(&self) -> ClientLifecycleMode {
        match self.0.load(Ordering::Relaxed) {
            HANDSHAKE => ClientLifecycleMode::Initialize,
            _ => probing(),
        }
    }

    fn learn(&self, stateless: bool) {
        let era = if stateless { STATELESS } else { HANDSHAKE };
        self.0.store(era, Ordering::Relaxed);
    }

    fn forget(&self) {
        self.0.store(UNKNOWN, Ordering::Relaxed);
    }
}

/// The first listing of a shared session: its tools (a failure fails the start), then its
/// resources and prompts (a failure there is logged, and the server serves its tools).
async fn first_listing(
    spec: &ServerSpec,
    service: &RunningService<RoleClient, Handler>,
    purpose: Purpose,
) -> Result<Listing, StartFailure> {
    if purpose == Purpose::OneCaller {
        return Ok(Listing::default());
    }
    let peer = service.peer();
    let tools = tools_list::list_tools(peer)
        .await
        .map_err(StartFailure::Listing)?;
    let offers = Offers::of(peer);
    let server = &spec.name;
    let resources = offers_list::list_resources(peer, offers)
        .await
        .unwrap_or_else(|error| {
            tracing::warn!(%server, %error, "listing resources failed; none are served");
            Default::default()
        });
    let prompts = offers_list::list_prompts(peer, offers)
        .await
        .unwrap_or_else(|error| {
            tracing::warn!(%server, %error, "listing prompts failed; none are served");
            Vec::new()
        });
    Ok(Listing {
        tools,
        resources,
        prompts,
    })
}

async fn start_stdio(
    spec: &ServerSpec,
    launch: &Launch,
    purpose: Purpose,
    lifecycle: ClientLifecycleMode,
) -> Result<Started, StartError> {
    match start_stdio_as(spec, launch, purpose, lifecycle).await {
        Err(Probed::ClosedOnProbe(error)) => {
            tracing::info!(server = %spec.name, %error, "server/discover went wrong; starting the server again with initialize");
            start_stdio_as(spec, launch, purpose, ClientLifecycleMode::Initialize)
                .await
                .map_err(Probed::into_error)
        }
        other => other.map_err(Probed::into_error),
    }
}

/// Why a stdio start failed, telling apart a server the protocol probe upset.
enum Probed {
    /// The process exited while answering `server/discover`, or it went wrong otherwise as
    /// [`probe_went_wrong`] says.
    ClosedOnProbe(StartError),
    /// Any other failure.
    Failed(StartError),
}

impl Probed {
    fn into_error(self) -> StartError {
        match self {
            Probed::ClosedOnProbe(error) | Probed::Failed(error) => error,
        }
    }
}

async fn start_stdio_as(
    spec: &ServerSpec,
    launch: &Launch,
    purpose: Purpose,
    lifecycle: ClientLifecycleMode,
) -> Result<Started, Probed> {
    let probing = matches!(lifecycle, ClientLifecycleMode::Auto { .. });
    let (mut child, pipes) = process::spawn(&spec.name, launch, spec.max_result_bytes)
        .map_err(|e| Probed::Failed(e.into()))?;
    let (changes, interactions, handler) = parts(spec, purpose);
    let pipe = PipeTransport::new(pipes.stdout, pipes.stdin);
    let lane = pipe.lane();
    let transport = Tapped::new(pipe, interactions.clone());
    let mut closed_on_probe = false;
    let startup = async {
        let service = tokio::select! {
            service = handler.serve_with_lifecycle(transport, lifecycle) => match service {
                Ok(service) => service,
                Err(error) => {
                    closed_on_probe = probing && probe_went_wrong(&error);
                    return Err(StartFailure::Initialize(explain(&error)));
                }
            },
            exit = child.wait() => {
                closed_on_probe = probing;
                return Err(StartFailure::ExitedDuringInitialize(exit));
            }
        };
        settle(&service).await;
        let listing = first_listing(spec, &service, purpose).await?;
        Ok((service, listing))
    };
    let started = tokio::time::timeout(spec.init_timeout, startup).await;
    match started {
        Ok(Ok((service, listing))) => {
            let faults = Faults {
                stream: child.stdout_verdict(),
                ..Faults::default()
            };
            let session = Session::new(
                service,
                Some(child),
                (changes, interactions),
                Transport::Stdio,
                faults,
            )
            .with_launch_digest(launch_digest(launch))
            .with_lane(lane);
            Ok((session, listing))
        }
        Ok(Err(failure)) if closed_on_probe => {
            Err(Probed::ClosedOnProbe(fail(child, failure).await))
        }
        Ok(Err(failure)) => Err(Probed::Failed(fail(child, failure).await)),
        Err(_) => {
            let tail = child.stderr_tail();
            child.stop(STOP_GRACE).await;
            Err(Probed::Failed(StartError {
                failure: StartFailure::InitTimeout(spec.init_timeout),
                exit: None,
                stderr: tail.summary(),
            }))
        }
    }
}

/// How a session starts: `server/discover` for 2026-07-28, else the 2025-11-25 handshake.
fn probing() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        // Without it rmcp would offer its own latest, 2026-07-28, to `initialize`.
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// Whether a start failed in a way a server from before 2026-07-28 can cause by how it takes
/// `server/discover`, which rmcp reports as an error rather than a legacy answer: it went away
/// (an SDK that takes nothing before `initialize` and exits), answered with something else
/// than a discover result (the spec counts any such answer as legacy), or answered late, after
/// rmcp had moved on to `initialize` (its probe waits 10 s at most).
fn probe_went_wrong(error: &ClientInitializeError) -> bool {
    match error {
        ClientInitializeError::ConnectionClosed(_)
        | ClientInitializeError::ExpectedInitResult(_)
        | ClientInitializeError::ExpectedInitResponse(_)
        | ClientInitializeError::ConflictInitResponseId(..)
        | ClientInitializeError::UncorrelatedErrorResponse { .. } => true,
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
            matches!(**fallback, ClientInitializeError::ConnectionClosed(_))
        }
        _ => false,
    }
}

/// What every started session is set to before it is used: rmcp's client keeps a response
/// cache for lists and reads, which a broker must not have (it lists on the server's
/// notifications, and one session serves many callers).
async fn settle(service: &RunningService<RoleClient, Handler>) {
    service
        .peer()
        .set_response_cache_config(ClientCacheConfig::disabled())
        .await;
}

/// A start-up failure of a process: waits briefly for its exit status, stops it, and says what
/// it showed (a cut stream is the reason itself).
async fn fail(mut child: ChildProcess, failure: StartFailure) -> StartError {
    let failure = match child.stdout_fault() {
        Some(fault) => StartFailure::Stream(fault),
        None => failure,
    };
    let exit = match &failure {
        // The failure is the exit (or a stream cut): no news in how it ended.
        StartFailure::ExitedDuringInitialize(_) | StartFailure::Stream(_) => None,
        _ => child.exit_within(EXIT_REPORT_WAIT).await,
    };
    // Stopped first: its stderr is then read to the end.
    let tail = child.stderr_tail();
    child.stop(STOP_GRACE).await;
    StartError {
        failure,
        exit,
        stderr: tail.summary(),
    }
}

async fn start_http(
    spec: &ServerSpec,
    http: &HttpSpec,
    endpoint: &Endpoint,
    purpose: Purpose,
    bearer: Option<Bearer>,
    lifecycle: ClientLifecycleMode,
) -> Result<Started, StartFailure> {
    let probing = matches!(lifecycle, ClientLifecycleMode::Auto { .. });
    let url = Url::parse(&http.url).map_err(|e| StartFailure::BadUrl(e.to_string()))?;
    let faults = Faults::default();
    let authorizer = bearer.map(|bearer| Authorizer::new(bearer, faults.auth.clone(), url.clone()));
    if let Some(authorizer) = &authorizer {
        // No token, no session: the reason is the token's, not the server's.
        authorizer
            .token()
            .await
            .map_err(StartFailure::Authorization)?;
    }
    // A refused request's reason is on the fault channel; rmcp only says "auth required".
    let refusal = faults.auth.clone();
    let why = move |failure: StartFailure| match refusal.get() {
        Some(refusal) => StartFailure::Authorization(refusal),
        None => failure,
    };
    let client = http::client()?;
    let headers = http::headers(&endpoint.headers)?;
    let (changes, interactions, handler) = parts(spec, purpose);
    let server = spec.name.clone();
    let max = spec.max_result_bytes;
    let shared = SharedHeaders::new(headers);
    let mode = match http.mode {
        // The MCP authorization spec is for streamable HTTP (config refuses `sse` with OAuth).
        _ if authorizer.is_some() => Detected::StreamableHttp,
        HttpMode::Auto => detect(&client, &url, &shared, handler.get_info(), server, max).await?,
        HttpMode::StreamableHttp => Detected::StreamableHttp,
        HttpMode::Sse => Detected::Sse(Box::new(
            sse::connect(client.clone(), &url, shared.clone(), server, max).await?,
        )),
    };
    let (service, transport, faults) = match mode {
        Detected::StreamableHttp => {
            // The session's headers go with each request (TracedClient), not in rmcp's config:
            // a per-caller session's change with its caller's values.
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            config.retry_config = Arc::new(resume_policy());
            // A result over the limit ends its call, not the broker's memory.
            config.max_sse_event_size = max;
            config.max_json_response_size = max;
            let connect = |lifecycle| {
                let client = TracedClient::new(
                    client.clone(),
                    shared.clone(),
                    faults.oversized.clone(),
                    authorizer.clone(),
                    interactions.clone(),
                );
                let transport = StreamableHttpClientTransport::with_client(client, config.clone());
                let transport = Tapped::new(
                    IntoTransport::<RoleClient, _, _>::into_transport(transport),
                    interactions.clone(),
                );
                handler.clone().serve_with_lifecycle(transport, lifecycle)
            };
            let service = match connect(lifecycle).await {
                Err(error) if probing && probe_went_wrong(&error) => {
                    tracing::info!(server = %spec.name, %error, "server/discover went wrong; connecting again with initialize");
                    connect(ClientLifecycleMode::Initialize).await
                }
                started => started,
            };
            let service = service
                .map_err(|e| StartFailure::Initialize(explain(&e)))
                .map_err(&why)?;
            (service, Transport::StreamableHttp, faults)
        }
        Detected::Sse(transport) => {
            let faults = Faults {
                stream: transport.verdict(),
                ..faults
            };
            let transport = Tapped::new(*transport, interactions.clone());
            // The HTTP+SSE transport predates 2026-07-28.
            let lifecycle = ClientLifecycleMode::Initialize;
            let service = handler
                .serve_with_lifecycle(transport, lifecycle)
                .await
                .map_err(|e| StartFailure::Initialize(explain(&e)))?;
            (service, Transport::Sse, faults)
        }
    };
    settle(&service).await;
    let listing = first_listing(spec, &service, purpose).await.map_err(&why)?;
    let session = Session::new(service, None, (changes, interactions), transport, faults)
        .with_headers(shared);
    Ok((session, listing))
}

/// A broken response stream is resumed once (after the server's `retry` hint, as SEP-1699 asks)
/// before its call is reported lost. rmcp's default retries forever, which would leave a caller
/// waiting for its whole timeout on a call whose server died or restarted.
fn resume_policy() -> ExponentialBackoff {
    let mut policy = ExponentialBackoff::default();
    policy.max_times = Some(1);
    policy.base_duration = Duration::from_millis(200);
    policy.max_delay = Some(Duration::from_secs(1));
    policy
}

/// A fingerprint of a launch, secrets included (in memory only): a per-caller process started
/// with other values (a new token in its environment) is replaced.
pub fn launch_digest(launch: &Launch) -> u64 {
    use secrecy::ExposeSecret;
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    launch.command.hash(&mut hasher);
    launch.args.hash(&mut hasher);
    for (name, value) in &launch.env {
        name.hash(&mut hasher);
        value.expose_secret().hash(&mut hasher);
    }
    launch.cwd.hash(&mut hasher);
    hasher.finish()
}
