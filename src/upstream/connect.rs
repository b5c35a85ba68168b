//! Starting a session on each transport: a spawned process over stdio, streamable HTTP with
//! rmcp's client, or legacy SSE with ours; a bare `url` is probed first. All of start-up,
//! including the first tools/list, runs within the server's `init_timeout`.

use std::{sync::Arc, time::Duration};

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    service::RunningService,
    transport::{
        StreamableHttpClientTransport, common::client_side_sse::ExponentialBackoff,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use tokio::sync::Notify;
use url::Url;

use super::{
    detect::{Detected, detect},
    explain::explain,
    faults::Faults,
    handler::Handler,
    http,
    process::{self, ChildProcess, EXIT_REPORT_WAIT, STOP_GRACE},
    session::Session,
    sse, tools_list,
    traced_http::TracedClient,
};
use crate::domain::{
    config::{HttpMode, HttpSpec, ServerSpec, StdioSpec, TransportSpec},
    outcome::{StartError, StartFailure},
    state::Transport,
    tool::ToolSpec,
};

/// A session, and the tools its server offered at start-up.
pub type Started = (Session, Vec<ToolSpec>);

/// Starts the server (or connects to it), initializes a session and lists its tools, all within
/// the server's `init_timeout`. A failure stops whatever was started.
pub async fn start(spec: &ServerSpec) -> Result<Started, StartError> {
    match &spec.transport {
        TransportSpec::Stdio(stdio) => start_stdio(spec, stdio).await,
        TransportSpec::Http(http) => {
            match tokio::time::timeout(spec.init_timeout, start_http(spec, http)).await {
                Ok(started) => started.map_err(StartError::from),
                Err(_) => Err(StartFailure::InitTimeout(spec.init_timeout).into()),
            }
        }
    }
}

async fn start_stdio(spec: &ServerSpec, stdio: &StdioSpec) -> Result<Started, StartError> {
    let (mut child, pipes) = process::spawn(&spec.name, stdio, spec.max_result_bytes)?;
    let tools_changed = Arc::new(Notify::new());
    let handler = Handler::new(spec.name.clone(), tools_changed.clone());
    let startup = async {
        let service = tokio::select! {
            service = handler.serve((pipes.stdout, pipes.stdin)) => service
                .map_err(|e| StartFailure::Initialize(explain(&e)))?,
            exit = child.wait() => return Err(StartFailure::ExitedDuringInitialize(exit)),
        };
        let tools = tools_list::list_tools(service.peer())
            .await
            .map_err(StartFailure::Listing)?;
        Ok((service, tools))
    };
    match tokio::time::timeout(spec.init_timeout, startup).await {
        Ok(Ok((service, tools))) => {
            let faults = Faults {
                stream: child.stdout_verdict(),
                ..Faults::default()
            };
            let session = Session::new(
                service,
                Some(child),
                tools_changed,
                Transport::Stdio,
                faults,
            );
            Ok((session, tools))
        }
        Ok(Err(failure)) => Err(fail(child, failure).await),
        Err(_) => {
            let tail = child.stderr_tail();
            child.stop(STOP_GRACE).await;
            Err(StartError {
                failure: StartFailure::InitTimeout(spec.init_timeout),
                exit: None,
                stderr: tail.summary(),
            })
        }
    }
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

async fn start_http(spec: &ServerSpec, http: &HttpSpec) -> Result<Started, StartFailure> {
    let url = Url::parse(&http.url).map_err(|e| StartFailure::BadUrl(e.to_string()))?;
    let client = http::client()?;
    let headers = http::headers(&http.headers)?;
    let tools_changed = Arc::new(Notify::new());
    let handler = Handler::new(spec.name.clone(), tools_changed.clone());
    let server = spec.name.clone();
    let max = spec.max_result_bytes;
    let mode = match http.mode {
        HttpMode::Auto => detect(&client, &url, &headers, handler.get_info(), server, max).await?,
        HttpMode::StreamableHttp => Detected::StreamableHttp,
        HttpMode::Sse => Detected::Sse(Box::new(
            sse::connect(client.clone(), &url, headers.clone(), server, max).await?,
        )),
    };
    let (service, transport, faults) = match mode {
        Detected::StreamableHttp => {
            let faults = Faults::default();
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(
                    headers
                        .into_iter()
                        .filter_map(|(k, v)| Some((k?, v)))
                        .collect(),
                );
            config.retry_config = Arc::new(resume_policy());
            // A result over the limit ends its call, not the broker's memory.
            config.max_sse_event_size = max;
            config.max_json_response_size = max;
            let client = TracedClient::new(client, faults.oversized.clone());
            let transport = StreamableHttpClientTransport::with_client(client, config);
            let service = initialize(handler, transport).await?;
            (service, Transport::StreamableHttp, faults)
        }
        Detected::Sse(transport) => {
            let faults = Faults {
                stream: transport.verdict(),
                ..Faults::default()
            };
            (
                initialize(handler, *transport).await?,
                Transport::Sse,
                faults,
            )
        }
    };
    let tools = tools_list::list_tools(service.peer())
        .await
        .map_err(StartFailure::Listing)?;
    let session = Session::new(service, None, tools_changed, transport, faults);
    Ok((session, tools))
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

/// The MCP handshake over an HTTP transport.
async fn initialize<T, E, A>(
    handler: Handler,
    transport: T,
) -> Result<RunningService<RoleClient, Handler>, StartFailure>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    handler
        .serve(transport)
        .await
        .map_err(|e| StartFailure::Initialize(explain(&e)))
}
