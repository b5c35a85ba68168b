//! What one MCP request to the face carries: its HTTP parts, its caller (admitted by the
//! gate), the caller's values for per-caller servers, its trace context.

use std::borrow::Cow;

use opentelemetry::trace::TraceContextExt as _;
use rmcp::model::{Extensions, RequestMetaObject};
use tracing::field;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::{
    auth::Caller,
    domain::{
        caller::{CallerKey, CallerKind, CallerValues},
        grants::Patterns,
        views::Views,
    },
    telemetry::context::TraceHeaders,
};

/// The HTTP request an MCP request came in (rmcp puts its parts in the extensions).
pub fn http_parts(extensions: &Extensions) -> Option<&http::request::Parts> {
    extensions.get::<http::request::Parts>()
}

/// The view a request was made through (`/mcp/<view>`), put in its extensions by
/// [`views::select`](super::views::select).
#[derive(Debug, Clone)]
pub struct FaceView(pub String);

/// Who is asking, and through which view.
#[derive(Clone)]
pub struct Asker {
    /// The caller the gate admitted (anyone without auth).
    pub caller: Caller,
    /// The view of the URL it used, if any.
    pub view: Option<String>,
}

impl Asker {
    /// The asker of one request.
    pub fn of(extensions: &Extensions) -> Self {
        Self::of_parts(http_parts(extensions))
    }

    /// The asker of the HTTP request whose `parts` these are (anyone, if none).
    pub fn of_parts(parts: Option<&http::request::Parts>) -> Self {
        Self {
            caller: parts
                .and_then(|parts| parts.extensions.get::<Caller>())
                .cloned()
                .unwrap_or_else(Caller::anyone),
            view: parts
                .and_then(|parts| parts.extensions.get::<FaceView>())
                .map(|view| view.0.clone()),
        }
    }

    /// The caller as `views` let it see: bound to its view (to nothing, when a reload
    /// removed the view).
    pub fn caller(&self, views: &Views) -> Caller {
        let mut caller = self.caller.clone();
        let view = self.view.as_deref().unwrap_or_default();
        caller.access = views
            .narrow(&caller.access, view)
            .unwrap_or_else(|_| (caller.access.clone()).within(Patterns::only(std::iter::empty())));
        caller
    }
}

/// A caller's values for per-caller servers: the caller, and the HTTP headers it sent.
pub struct FaceCaller<'a> {
    /// Who.
    pub caller: &'a Caller,
    /// The headers of its HTTP request, if it came over HTTP.
    pub headers: Option<&'a http::HeaderMap>,
}

impl CallerValues for FaceCaller<'_> {
    fn key(&self) -> &CallerKey {
        &self.caller.key
    }

    fn first_kind(&self) -> CallerKind {
        self.caller.first_kind()
    }

    fn token(&self) -> Option<&str> {
        self.caller.token()
    }

    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(self.headers?.get(name)?.to_str().ok()?))
    }

    fn claim(&self, name: &str) -> Option<Cow<'_, str>> {
        self.caller.claim(name)
    }
}

/// The trace a request continues: its `params._meta`, else its HTTP headers.
pub fn incoming_trace(meta: &RequestMetaObject, extensions: &Extensions) -> TraceHeaders {
    let from_meta = TraceHeaders::from_meta(meta);
    match http_parts(extensions) {
        Some(parts) if from_meta.traceparent.is_none() => {
            TraceHeaders::from_headers(&parts.headers)
        }
        _ => from_meta,
    }
}

/// The server span of one MCP request, continuing `incoming`, and its trace id.
pub fn server_span(
    method: &'static str,
    incoming: &TraceHeaders,
) -> (tracing::Span, Option<String>) {
    let span = tracing::info_span!(
        target: "toolbroker::rpc",
        "mcp",
        otel.name = method,
        otel.kind = "server",
        rpc.system = "mcp",
        rpc.method = method,
        trace_id = field::Empty,
        tool = field::Empty,
        server = field::Empty,
    );
    if incoming.traceparent.is_some() {
        let _ = span.set_parent(incoming.context());
    }
    let id = span.context().span().span_context().trace_id();
    let trace_id = if id != opentelemetry::trace::TraceId::INVALID {
        Some(id.to_string())
    } else {
        incoming.trace_id().map(str::to_owned)
    };
    if let Some(id) = &trace_id {
        span.record("trace_id", id.as_str());
    }
    (span, trace_id)
}

impl<'a> FaceCaller<'a> {
    /// `caller`'s values, with the headers of the request whose `extensions` these are.
    pub fn of(caller: &'a Caller, extensions: &'a Extensions) -> Self {
        Self {
            caller,
            headers: http_parts(extensions).map(|parts| &parts.headers),
        }
    }
}
