//! The legacy HTTP+SSE transport of MCP 2024-11-05, as an rmcp client `Transport` (rmcp has
//! none): GET the URL as an event stream, wait for the `endpoint` event, POST every JSON-RPC
//! message to that endpoint, and read responses and notifications from the stream. When the
//! stream ends, `receive` returns `None` and rmcp ends the session.

use std::future::Future;

use futures::StreamExt;
use http::{HeaderValue, header};
use rmcp::{
    RoleClient,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use sse_stream::{Sse, SseStream};
use tokio::{sync::mpsc, task::JoinHandle};
use url::Url;

use crate::upstream::{
    transport::explain::explain, transport::faults::Verdict, transport::http::SharedHeaders,
};
use crate::{
    domain::{
        names::ServerName,
        outcome::{StartFailure, StreamFault, TransportFailure},
    },
    telemetry::context::TraceHeaders,
};
use rmcp::model::GetMeta as _;

/// Messages read from the stream but not yet taken by rmcp.
const INCOMING_BUFFER: usize = 64;

/// Why a POST to the endpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    /// The request could not be made.
    #[error("{0}")]
    Request(TransportFailure),
    /// The server refused it.
    #[error("the endpoint answered {0}")]
    Status(TransportFailure),
}

/// A connected legacy SSE session.
pub struct SseTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: SharedHeaders,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: JoinHandle<()>,
    verdict: Verdict,
}

impl SseTransport {
    /// Why the stream was cut, once it has been (an event over the size limit).
    pub fn verdict(&self) -> Verdict {
        self.verdict.clone()
    }
}

/// The body, until one event grows past `max` bytes (a result over `limits.max_result_bytes`
/// must not take the broker's memory): then an error, and `verdict` says why.
fn bounded<S>(
    body: S,
    max: usize,
    verdict: Verdict,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>>
where
    S: futures::Stream<Item = Result<bytes::Bytes, reqwest::Error>>,
{
    let mut pending = 0usize;
    body.map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        // Bytes since the last blank line (an event's end); a boundary split across two chunks
        // is missed, which only makes the bound stricter.
        pending = match last_event_end(&chunk) {
            Some(end) => chunk.len() - end,
            None => pending + chunk.len(),
        };
        if pending > max {
            let fault = StreamFault::TooLong(max);
            let error = std::io::Error::other(format!("the server {fault}"));
            verdict.set(fault);
            return Err(error);
        }
        Ok(chunk)
    })
}

/// Where the last event in `chunk` ends (after its blank line), if one does.
fn last_event_end(chunk: &[u8]) -> Option<usize> {
    let lf = chunk.windows(2).rposition(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = chunk
        .windows(4)
        .rposition(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    lf.max(crlf)
}

/// Opens the event stream at `url` and waits for its `endpoint` event.
pub async fn connect(
    client: reqwest::Client,
    url: &Url,
    headers: SharedHeaders,
    server: ServerName,
    max_event: usize,
) -> Result<SseTransport, StartFailure> {
    let response = client
        .get(url.clone())
        .headers(headers.get())
        .header(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        )
        .send()
        .await
        .map_err(|e| StartFailure::Unreachable(explain(&e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(StartFailure::SseRefused {
            url: url.to_string(),
            status,
        });
    }
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    if !content_type
        .as_ref()
        .is_some_and(|ct| ct.as_bytes().starts_with(b"text/event-stream"))
    {
        return Err(StartFailure::NotEventStream {
            url: url.to_string(),
            content_type: content_type.map(|ct| String::from_utf8_lossy(ct.as_bytes()).into()),
        });
    }
    let verdict = Verdict::default();
    let body = bounded(response.bytes_stream(), max_event, verdict.clone());
    let mut events = SseStream::from_bytes_stream(body);
    let endpoint = endpoint(&mut events, url).await?;
    let (tx, incoming) = mpsc::channel(INCOMING_BUFFER);
    let reader = tokio::spawn(read_messages(events, url.clone(), tx, server));
    Ok(SseTransport {
        client,
        endpoint,
        headers,
        incoming,
        reader,
        verdict,
    })
}

/// What one SSE event means to the client.
#[derive(Debug)]
pub enum SseEvent {
    /// `endpoint`: where to POST, resolved against the stream's URL and checked to be on its
    /// origin (so a server cannot have our headers sent elsewhere).
    Endpoint(Result<Url, StartFailure>),
    /// `message` (or an unnamed event): a JSON-RPC message from the server.
    Message(Result<Box<RxJsonRpcMessage<RoleClient>>, serde_json::Error>),
    /// Anything else (comments, pings, unknown event names): ignored.
    Other,
}

/// Reads one event of a stream opened at `base`. Pure.
pub fn read_event(event: Sse, base: &Url) -> SseEvent {
    let data = event.data.unwrap_or_default();
    match event.event.as_deref() {
        Some("endpoint") => SseEvent::Endpoint(
            base.join(data.trim())
                .map_err(|e| StartFailure::EndpointNotUrl {
                    data: data.clone(),
                    reason: e.to_string(),
                })
                .and_then(|endpoint| {
                    if endpoint.origin() == base.origin() {
                        Ok(endpoint)
                    } else {
                        Err(StartFailure::EndpointElsewhere {
                            endpoint: endpoint.to_string(),
                        })
                    }
                }),
        ),
        None | Some("message") => SseEvent::Message(serde_json::from_str(&data)),
        Some(_) => SseEvent::Other,
    }
}

/// Every event of a complete SSE body, as [`read_event`] reads them (for tests and fuzzing).
pub fn decode_body(body: &[u8], base: &Url) -> Vec<Result<SseEvent, String>> {
    let chunk: Result<bytes::Bytes, std::io::Error> = Ok(bytes::Bytes::copy_from_slice(body));
    let events = SseStream::from_bytes_stream(futures::stream::iter([chunk]));
    futures::executor::block_on(events.collect::<Vec<_>>())
        .into_iter()
        .map(|event| {
            event
                .map(|e| read_event(e, base))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// The POST endpoint from the first `endpoint` event.
async fn endpoint<S>(events: &mut S, url: &Url) -> Result<Url, StartFailure>
where
    S: futures::Stream<Item = Result<Sse, sse_stream::Error>> + Unpin,
{
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| StartFailure::EventStreamBroke(e.to_string()))?;
        if let SseEvent::Endpoint(endpoint) = read_event(event, url) {
            return endpoint;
        }
    }
    Err(StartFailure::NoEndpoint {
        url: url.to_string(),
    })
}

/// Forwards each message event to rmcp until the stream ends or rmcp stops listening.
async fn read_messages<S>(
    mut events: S,
    url: Url,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    server: ServerName,
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
        match read_event(event, &url) {
            SseEvent::Message(Ok(message)) => {
                if tx.send(*message).await.is_err() {
                    return;
                }
            }
            SseEvent::Message(Err(error)) => {
                tracing::warn!(%server, %error, "skipped an SSE message that is not JSON-RPC")
            }
            SseEvent::Endpoint(_) | SseEvent::Other => {}
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
            .headers(self.headers.get());
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
                Err(SseError::Status(TransportFailure::Status(status)))
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
