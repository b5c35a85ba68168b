//! The W3C trace context (`traceparent`, `tracestate`, `baggage`) in and out of the broker:
//! read from a call's gRPC metadata, carried to the MCP server in `params._meta` (MCP SEP-414)
//! and, over HTTP, as headers.

use std::collections::HashMap;

use opentelemetry::{
    Context,
    propagation::{Extractor, Injector, TextMapCompositePropagator},
    trace::TraceContextExt as _,
};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use rmcp::model::RequestMetaObject;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The three propagated fields, as text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceHeaders {
    /// `traceparent`: version, trace id, parent span id, flags.
    pub traceparent: Option<String>,
    /// `tracestate`: vendor entries.
    pub tracestate: Option<String>,
    /// `baggage`: application key-values.
    pub baggage: Option<String>,
}

/// W3C trace context and baggage, the propagators the broker speaks.
pub fn propagator() -> TextMapCompositePropagator {
    TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ])
}

impl TraceHeaders {
    /// The context fields of HTTP request headers.
    pub fn from_headers(headers: &http::HeaderMap) -> Self {
        Self::from_lookup(|name| headers.get(name)?.to_str().ok().map(str::to_owned))
    }

    /// The context fields, each looked up by its header name.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        Self {
            traceparent: get("traceparent"),
            tracestate: get("tracestate"),
            baggage: get("baggage"),
        }
    }

    /// The context fields of an MCP request's `_meta`.
    pub fn from_meta(meta: &RequestMetaObject) -> Self {
        Self {
            traceparent: meta.get_traceparent().map(str::to_owned),
            tracestate: meta.get_tracestate().map(str::to_owned),
            baggage: meta.get_baggage().map(str::to_owned),
        }
    }

    /// The trace id (32 hex digits), if there is a `traceparent`.
    pub fn trace_id(&self) -> Option<&str> {
        trace_id_of(self.traceparent.as_deref()?)
    }

    /// The OpenTelemetry context these fields describe (to parent a span on).
    pub fn context(&self) -> Context {
        opentelemetry::global::get_text_map_propagator(|p| p.extract(self))
    }

    /// What a request made inside `span` sends on: the span's own context when spans are
    /// exported, so the server's spans hang under it; otherwise the caller's context unchanged,
    /// so the server still joins the caller's trace.
    pub fn for_request(incoming: &TraceHeaders, span: &Span) -> TraceHeaders {
        if !super::exporting() {
            return incoming.clone();
        }
        let context = span.context();
        if !context.span().span_context().is_valid() {
            return incoming.clone();
        }
        let mut outgoing = TraceHeaders::default();
        opentelemetry::global::get_text_map_propagator(|p| {
            p.inject_context(&context, &mut outgoing)
        });
        outgoing
    }

    /// Puts the fields into an MCP request's `_meta`.
    pub fn write_to(&self, meta: &mut RequestMetaObject) {
        if let Some(value) = &self.traceparent {
            meta.set_traceparent(value.clone());
        }
        if let Some(value) = &self.tracestate {
            meta.set_tracestate(value.clone());
        }
        if let Some(value) = &self.baggage {
            meta.set_baggage(value.clone());
        }
    }

    /// The fields as HTTP headers.
    pub fn to_headers(&self) -> HashMap<&'static str, &str> {
        [
            ("traceparent", &self.traceparent),
            ("tracestate", &self.tracestate),
            ("baggage", &self.baggage),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value.as_deref()?)))
        .collect()
    }
}

impl Extractor for TraceHeaders {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => self.traceparent.as_deref(),
            "tracestate" => self.tracestate.as_deref(),
            "baggage" => self.baggage.as_deref(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        self.to_headers().into_keys().collect()
    }
}

impl Injector for TraceHeaders {
    fn set(&mut self, key: &str, value: String) {
        match key {
            "traceparent" => self.traceparent = Some(value),
            "tracestate" => self.tracestate = Some(value),
            "baggage" => self.baggage = Some(value),
            _ => {}
        }
    }
}

/// The trace id a `traceparent` value names, if it is well-formed enough to have one.
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    let id = traceparent.split('-').nth(1)?;
    (id.len() == 32).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn headers_round_trip_through_meta() {
        let mut headers = http::HeaderMap::new();
        headers.insert("traceparent", PARENT.parse().unwrap());
        headers.insert("baggage", "user=alice".parse().unwrap());
        let trace = TraceHeaders::from_headers(&headers);
        assert_eq!(trace.trace_id(), Some("0af7651916cd43dd8448eb211c80319c"));
        let mut meta = RequestMetaObject::default();
        trace.write_to(&mut meta);
        assert_eq!(TraceHeaders::from_meta(&meta), trace);
        assert_eq!(trace.to_headers().len(), 2);
    }

    #[test]
    fn without_export_the_callers_context_passes_unchanged() {
        let incoming = TraceHeaders {
            traceparent: Some(PARENT.into()),
            ..Default::default()
        };
        assert_eq!(
            TraceHeaders::for_request(&incoming, &Span::none()),
            incoming
        );
    }

    #[test]
    fn malformed_traceparents_have_no_trace_id() {
        for bad in ["", "00-abc-def-01", "garbage"] {
            let trace = TraceHeaders {
                traceparent: Some(bad.into()),
                ..Default::default()
            };
            assert_eq!(trace.trace_id(), None, "{bad:?}");
        }
    }
}
