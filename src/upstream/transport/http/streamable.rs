//! rmcp's streamable HTTP client (reqwest), with two additions: a request's trace context,
//! carried in its `_meta`, is also sent as `traceparent` / `tracestate` / `baggage` headers, for
//! servers (and proxies) that read the context from HTTP; and an SSE answer over the size limit
//! is recorded as such on the session's fault channel and ends its call at once with an error
//! answer, where rmcp would only say the stream closed. A server under OAuth gets each request
//! with a token from the session's [`Authorizer`] (renewed or stepped up when refused).
//! A request the server sends on a call's answer stream (elicitation, sampling) is recorded as
//! that call's, so that it reaches the call's caller and no other.

use std::{collections::HashMap, future::Future, sync::Arc};

use futures::{StreamExt, stream::BoxStream};
use http::{HeaderName, HeaderValue};
use rmcp::{
    ErrorData,
    model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage},
    transport::streamable_http_client::{
        StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
        StreamableHttpResponseLimits,
    },
};
use sse_stream::{Error as SseError, Sse};

use crate::foreign_errors;
use crate::upstream::{
    oauth::Authorizer, session::interactions::Interactions, transport::faults::Oversized,
    transport::http::SharedHeaders, transport::sse::trace_of,
};

/// reqwest, plus the session's headers and trace headers on every request, and answers over
/// the size limit told apart.
#[derive(Clone)]
pub struct TracedClient {
    client: reqwest::Client,
    headers: SharedHeaders,
    oversized: Oversized,
    /// Tokens for a server under OAuth.
    authorizer: Option<Authorizer>,
    /// Where server requests on a call's answer stream are tied to the call.
    interactions: Arc<Interactions>,
}

impl TracedClient {
    /// A client sending `headers` (read for each request) whose over-large answers are
    /// recorded in `oversized`, a token from `authorizer` if the server is under OAuth, and the
    /// server's requests on answer streams tied to their calls in `interactions`.
    pub fn new(
        client: reqwest::Client,
        headers: SharedHeaders,
        oversized: Oversized,
        authorizer: Option<Authorizer>,
        interactions: Arc<Interactions>,
    ) -> Self {
        Self {
            client,
            headers,
            oversized,
            authorizer,
            interactions,
        }
    }

    /// What an answer stream is watched for.
    fn watch(&self) -> Watch {
        Watch {
            oversized: self.oversized.clone(),
            interactions: self.interactions.clone(),
        }
    }

    /// Sends `request` by `send`, given rmcp's own token (none: the broker's client has no
    /// auth manager) or, under OAuth, the session's token, renewed or stepped up if the server
    /// refuses it. The request is copied only to be sent again.
    async fn authorized<R: Clone, T, Fut>(
        &self,
        request: R,
        auth_header: Option<String>,
        send: impl Fn(R, Option<String>) -> Fut,
    ) -> Result<T>
    where
        Fut: Future<Output = Result<T>>,
    {
        match &self.authorizer {
            None => send(request, auth_header).await,
            Some(authorizer) => {
                authorizer
                    .send(|token| send(request.clone(), Some(token)))
                    .await
            }
        }
    }

    /// POSTs `message` by `send` (one of rmcp's post methods) with the session's and the trace
    /// headers, authorized, and its answer stream watched.
    fn post<'a, Fut>(
        &'a self,
        (uri, message, session_id): (Arc<str>, ClientJsonRpcMessage, Option<Arc<str>>),
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        send: impl Fn(&'a reqwest::Client, Post, Option<String>) -> Fut + Send + Sync + 'a,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse>> + Send + 'a
    where
        Fut: Future<Output = Result<StreamableHttpPostResponse>> + Send + 'a,
    {
        let headers = with_trace(self.with_session_headers(custom_headers), &message);
        let id = request_id(&message);
        let watch = self.watch();
        let response = self.authorized(
            (uri, message, session_id, headers),
            auth_header,
            move |post, token| send(&self.client, post, token),
        );
        async move { watched(response.await, id, watch) }
    }

    /// rmcp's own headers plus the session's, which win.
    fn with_session_headers(
        &self,
        mut headers: HashMap<HeaderName, HeaderValue>,
    ) -> HashMap<HeaderName, HeaderValue> {
        for (name, value) in &self.headers.get() {
            headers.insert(name.clone(), value.clone());
        }
        headers
    }
}

type Result<T> = std::result::Result<T, StreamableHttpError<reqwest::Error>>;

/// What a POST hands rmcp's client: the URI, the message, the session and the headers.
type Post = (
    Arc<str>,
    ClientJsonRpcMessage,
    Option<Arc<str>>,
    HashMap<HeaderName, HeaderValue>,
);

/// The configured headers plus the message's trace context.
fn with_trace(
    mut headers: HashMap<HeaderName, HeaderValue>,
    message: &ClientJsonRpcMessage,
) -> HashMap<HeaderName, HeaderValue> {
    for (name, value) in trace_of(message).to_headers() {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    headers
}

/// What a request's answer stream is watched for.
struct Watch {
    oversized: Oversized,
    interactions: Arc<Interactions>,
}

/// The two fields that tell a server's request from an answer or a notification.
#[derive(serde::Deserialize)]
struct Peek {
    id: Option<RequestId>,
    method: Option<String>,
}

/// Turns an answer stream's "event too large" error into an error answer to `id`, recorded in
/// `oversized` so that the call reports the size: rmcp ends the stream there either way, and
/// the call learns why at once instead of waiting for its timeout. While interactive calls are
/// in flight, the server's elicitation and sampling requests on the stream are tied to `id`.
fn watched(
    response: Result<StreamableHttpPostResponse>,
    id: Option<RequestId>,
    watch: Watch,
) -> Result<StreamableHttpPostResponse> {
    let (stream, session, id) = match (response, id) {
        (Ok(StreamableHttpPostResponse::Sse(stream, session)), Some(id)) => (stream, session, id),
        (response, _) => return response,
    };
    let Watch {
        oversized,
        interactions,
    } = watch;
    let stream = stream.map(move |item| match item {
        Ok(event) => {
            if interactions.any_interactive()
                && let Some(data) = &event.data
                && let Ok(Peek {
                    id: Some(request),
                    method: Some(method),
                }) = serde_json::from_str::<Peek>(data)
                && matches!(
                    method.as_str(),
                    "elicitation/create" | "sampling/createMessage"
                )
            {
                interactions.relate(request, id.clone());
            }
            Ok(event)
        }
        Err(error) if foreign_errors::is_sse_event_too_large(&error) => {
            oversized.insert(id.clone());
            let answer = ServerJsonRpcMessage::error(
                ErrorData::internal_error(format!("the answer was cut: {error}"), None),
                Some(id.clone()),
            );
            let data = serde_json::to_string(&answer).map_err(|e| SseError::Body(Box::new(e)))?;
            Ok(Sse {
                event: None,
                data: Some(data),
                id: None,
                retry: None,
            })
        }
        other => other,
    });
    Ok(StreamableHttpPostResponse::Sse(stream.boxed(), session))
}

/// The id of a request, which its answer stream answers.
fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    }
}

impl StreamableHttpClient for TracedClient {
    type Error = reqwest::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse>> + Send + '_ {
        self.post(
            (uri, message, session_id),
            auth_header,
            custom_headers,
            move |client, (uri, message, session_id, headers), token| {
                client.post_message(uri, message, session_id, token, headers)
            },
        )
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse>> + Send + '_ {
        self.post(
            (uri, message, session_id),
            auth_header,
            custom_headers,
            move |client, (uri, message, session_id, headers), token| {
                client.post_message_with_max_sse_event_size(
                    uri,
                    message,
                    session_id,
                    token,
                    headers,
                    max_sse_event_size,
                )
            },
        )
    }

    fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse>> + Send + '_ {
        self.post(
            (uri, message, session_id),
            auth_header,
            custom_headers,
            move |client, (uri, message, session_id, headers), token| {
                client.post_message_with_response_limits(
                    uri, message, session_id, token, headers, limits,
                )
            },
        )
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<()>> + Send + '_ {
        let headers = self.with_session_headers(custom_headers);
        self.authorized(
            (uri, session_id, headers),
            auth_header,
            move |(uri, session_id, headers), token| {
                self.client.delete_session(uri, session_id, token, headers)
            },
        )
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<BoxStream<'static, std::result::Result<Sse, SseError>>>> + Send + '_
    {
        let headers = self.with_session_headers(custom_headers);
        self.authorized(
            (uri, session_id, last_event_id, headers),
            auth_header,
            move |(uri, session_id, last_event_id, headers), token| {
                self.client
                    .get_stream(uri, session_id, last_event_id, token, headers)
            },
        )
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<BoxStream<'static, std::result::Result<Sse, SseError>>>> + Send + '_
    {
        let headers = self.with_session_headers(custom_headers);
        self.authorized(
            (uri, session_id, last_event_id, headers),
            auth_header,
            move |(uri, session_id, last_event_id, headers), token| {
                self.client.get_stream_with_max_sse_event_size(
                    uri,
                    session_id,
                    last_event_id,
                    token,
                    headers,
                    max_sse_event_size,
                )
            },
        )
    }
}
