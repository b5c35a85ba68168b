//! Setting up a session on each transport: a spawned process over stdio, streamable HTTP with
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
    UpstreamError,
    detect::{Detected, detect},
    handler::Handler,
    http, listing,
    process::{self, ChildProcess, StderrTail},
    session::{EXIT_REPORT_WAIT, STOP_GRACE, Session, Started, with_tail},
    sse,
    traced_http::TracedClient,
};
use crate::domain::config::{HttpMode, HttpSpec, ServerSpec, StdioSpec, TransportSpec};

/// Starts a session on the server's transport.
pub async fn start(spec: &ServerSpec) -> Result<Started, UpstreamError> {
    match &spec.transport {
        TransportSpec::Stdio(stdio) => start_stdio(spec, stdio).await,
        TransportSpec::Http(http) => {
            match tokio::time::timeout(spec.init_timeout, start_http(spec, http)).await {
                Ok(started) => started,
                Err(_) => Err(UpstreamError::InitTimeout {
                    after: spec.init_timeout,
                    stderr: None,
                }),
            }
        }
    }
}

async fn start_stdio(spec: &ServerSpec, stdio: &StdioSpec) -> Result<Started, UpstreamError> {
    let (mut child, pipes) = process::spawn(&spec.name, stdio, spec.max_result_bytes)?;
    let tail = child.stderr_tail();
    let tools_changed = Arc::new(Notify::new());
    let handler = Handler::new(spec.name.clone(), tools_changed.clone());
    let startup = async {
        let service = tokio::select! {
            service = handler.serve((pipes.stdout, pipes.stdin)) => service
                .map_err(|e| format!("initialize failed: {e}"))?,
            exit = child.wait() => return Err(format!("{exit} during initialize")),
        };
        let tools = listing::list_tools(service.peer()).await?;
        Ok::<_, String>((service, tools))
    };
    match tokio::time::timeout(spec.init_timeout, startup).await {
        Ok(Ok((service, tools))) => {
            let fault = Some(child.stdout_verdict());
            let session = Session::new(service, Some(child), tools_changed, "stdio", fault);
            Ok((session, tools))
        }
        Ok(Err(reason)) => Err(fail(child, &tail, reason).await),
        Err(_) => {
            child.stop(STOP_GRACE).await;
            Err(UpstreamError::InitTimeout {
                after: spec.init_timeout,
                stderr: tail.summary(),
            })
        }
    }
}

/// A start-up failure: waits briefly for the exit status, stops the process, and explains.
async fn fail(mut child: ChildProcess, tail: &StderrTail, reason: String) -> UpstreamError {
    if let Some(fault) = child.stdout_fault() {
        child.stop(STOP_GRACE).await;
        return UpstreamError::Startup(fault);
    }
    let exit = tokio::time::timeout(EXIT_REPORT_WAIT, child.wait()).await;
    child.stop(STOP_GRACE).await;
    let reason = match exit {
        Ok(exit) if !reason.starts_with(&exit) => format!("{reason}; the server {exit}"),
        _ => reason,
    };
    UpstreamError::Startup(with_tail(reason, Some(tail)))
}

async fn start_http(spec: &ServerSpec, http: &HttpSpec) -> Result<Started, UpstreamError> {
    let url = Url::parse(&http.url).map_err(|e| UpstreamError::Startup(format!("bad url: {e}")))?;
    let client = http::client().map_err(UpstreamError::Startup)?;
    let headers = http::headers(&http.headers).map_err(UpstreamError::Startup)?;
    let tools_changed = Arc::new(Notify::new());
    let handler = Handler::new(spec.name.clone(), tools_changed.clone());
    let server = spec.name.to_string();
    let mode = match http.mode {
        HttpMode::Auto => detect(
            &client,
            &url,
            &headers,
            handler.get_info(),
            server,
            spec.max_result_bytes,
        )
        .await
        .map_err(UpstreamError::Startup)?,
        HttpMode::StreamableHttp => Detected::StreamableHttp,
        HttpMode::Sse => Detected::Sse(Box::new(
            sse::connect(
                client.clone(),
                &url,
                headers.clone(),
                server,
                spec.max_result_bytes,
            )
            .await
            .map_err(UpstreamError::Startup)?,
        )),
    };
    let (service, transport, fault) = match mode {
        Detected::StreamableHttp => {
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(
                    headers
                        .into_iter()
                        .filter_map(|(k, v)| Some((k?, v)))
                        .collect(),
                );
            config.retry_config = Arc::new(resume_policy());
            // A result over the limit ends its call, not the broker's memory.
            config.max_sse_event_size = spec.max_result_bytes;
            config.max_json_response_size = spec.max_result_bytes;
            let transport =
                StreamableHttpClientTransport::with_client(TracedClient(client), config);
            (
                initialize(handler, transport).await?,
                "streamable-http",
                None,
            )
        }
        Detected::Sse(transport) => {
            let fault = Some(transport.verdict());
            (initialize(handler, *transport).await?, "sse", fault)
        }
    };
    let tools = listing::list_tools(service.peer())
        .await
        .map_err(UpstreamError::Startup)?;
    let session = Session::new(service, None, tools_changed, transport, fault);
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

/// The MCP handshake over an HTTP transport, its failure explained.
async fn initialize<T, E, A>(
    handler: Handler,
    transport: T,
) -> Result<RunningService<RoleClient, Handler>, UpstreamError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    handler
        .serve(transport)
        .await
        .map_err(|e| UpstreamError::Startup(format!("initialize failed: {}", http::explain(&e))))
}
