//! rmcp's streamable HTTP client (reqwest), with one addition: a request's trace context,
//! carried in its `_meta`, is also sent as `traceparent` / `tracestate` / `baggage` headers, for
//! servers (and proxies) that read the context from HTTP.

use std::{collections::HashMap, future::Future, sync::Arc};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::{
    model::ClientJsonRpcMessage,
    transport::streamable_http_client::{
        StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
        StreamableHttpResponseLimits,
    },
};
use sse_stream::{Error as SseError, Sse};

use super::sse::trace_of;

/// reqwest, plus trace headers on every POST.
#[derive(Clone)]
pub struct TracedClient(pub reqwest::Client);

type Result<T> = std::result::Result<T, StreamableHttpError<reqwest::Error>>;

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
        let headers = with_trace(custom_headers, &message);
        self.0
            .post_message(uri, message, session_id, auth_header, headers)
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
        let headers = with_trace(custom_headers, &message);
        self.0.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_header,
            headers,
            max_sse_event_size,
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
        let headers = with_trace(custom_headers, &message);
        self.0.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            headers,
            limits,
        )
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<()>> + Send + '_ {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
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
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
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
        self.0.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}
