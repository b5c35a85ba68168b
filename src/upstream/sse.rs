//! The legacy HTTP+SSE transport of MCP 2024-11-05, as an rmcp client `Transport` (rmcp has
//! none): GET the URL as an event stream, wait for the `endpoint` event, POST every JSON-RPC
//! message to that endpoint, and read responses and notifications from the stream. When the
//! stream ends, `receive` returns `None` and rmcp ends the session.

use std::future::Future;

use futures::StreamExt;
use http::{HeaderMap, HeaderValue, header};
use rmcp::{
    RoleClient,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use sse_stream::{Sse, SseStream};
use tokio::{sync::mpsc, task::JoinHandle};
use url::Url;

use super::http::{explain, explain_status};
use crate::telemetry::context::TraceHeaders;
use rmcp::model::GetMeta as _;

/// Messages read from the stream but not yet taken by rmcp.
const INCOMING_BUFFER: usize = 64;

/// Why a POST to the endpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    /// The request could not be made.
    #[error("{0}")]
    Request(String),
    /// The server refused it.
    #[error("the endpoint answered {0}")]
    Status(String),
}

/// A connected legacy SSE session.
pub struct SseTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: JoinHandle<()>,
}

/// Opens the event stream at `url` and waits for its `endpoint` event.
pub async fn connect(
    client: reqwest::Client,
    url: &Url,
    headers: HeaderMap,
    server: String,
) -> Result<SseTransport, String> {
    let response = client
        .get(url.clone())
        .headers(headers.clone())
        .header(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        )
        .send()
        .await
        .map_err(|e| explain(&e))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("GET {url} answered {}", explain_status(status)));
    }
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    if !content_type
        .as_ref()
        .is_some_and(|ct| ct.as_bytes().starts_with(b"text/event-stream"))
    {
        return Err(format!(
            "GET {url} did not answer with an event stream ({content_type:?})"
        ));
    }
    let mut events = SseStream::from_bytes_stream(response.bytes_stream());
    let endpoint = endpoint(&mut events, url).await?;
    let (tx, incoming) = mpsc::channel(INCOMING_BUFFER);
    let reader = tokio::spawn(read_messages(events, tx, server));
    Ok(SseTransport {
        client,
        endpoint,
        headers,
        incoming,
        reader,
    })
}

/// The POST endpoint from the first `endpoint` event, resolved against the stream's URL. It
/// must have the same origin, so a server cannot send our headers elsewhere.
async fn endpoint<S>(events: &mut S, url: &Url) -> Result<Url, String>
where
    S: futures::Stream<Item = Result<Sse, sse_stream::Error>> + Unpin,
{
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| format!("the event stream broke: {e}"))?;
        if event.event.as_deref() != Some("endpoint") {
            continue;
        }
        let data = event.data.unwrap_or_default();
        let endpoint = url
            .join(data.trim())
            .map_err(|e| format!("the endpoint event {data:?} is not a URL: {e}"))?;
        if endpoint.origin() != url.origin() {
            return Err(format!(
                "the endpoint {endpoint} is not on the server's origin"
            ));
        }
        return Ok(endpoint);
    }
    Err(format!(
        "GET {url} ended its event stream without an endpoint event; is this an MCP SSE endpoint?"
    ))
}

/// Forwards each `message` event to rmcp until the stream ends or rmcp stops listening.
async fn read_messages<S>(
    mut events: S,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    server: String,
) where
    S: futures::Stream<Item = Result<Sse, sse_stream::Error>> + Unpin,
{
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(%server, %error, "the SSE stream broke");
                return;
            }
        };
        if !matches!(event.event.as_deref(), None | Some("message")) {
            continue;
        }
        let data = event.data.unwrap_or_default();
        match serde_json::from_str(&data) {
            Ok(message) => {
                if tx.send(message).await.is_err() {
                    return;
                }
            }
            Err(error) => {
                tracing::warn!(%server, %error, "skipped an SSE message that is not JSON-RPC")
            }
        }
    }
    tracing::debug!(%server, "the SSE stream ended");
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let mut request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone());
        // The trace context in `_meta` travels as HTTP headers too, for servers that read those.
        for (name, value) in trace_of(&item).to_headers() {
            request = request.header(name, value);
        }
        let request = request.json(&item);
        async move {
            let response = request
                .send()
                .await
                .map_err(|e| SseError::Request(explain(&e)))?;
            let status = response.status();
            if status.is_success() {
                Ok(())
            } else {
                Err(SseError::Status(explain_status(status)))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        Ok(())
    }
}

/// The trace context a client request carries in its `_meta`.
pub fn trace_of(message: &TxJsonRpcMessage<RoleClient>) -> TraceHeaders {
    match message {
        rmcp::model::JsonRpcMessage::Request(request) => {
            TraceHeaders::from_meta(request.request.get_meta())
        }
        _ => TraceHeaders::default(),
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
