//! Why a request to a server failed, as a [`TransportFailure`] a user can act on: found along
//! the error's chain of causes, looking inside the wrappers (rmcp's, io's) that hide them.

use std::error::Error;

use http::StatusCode;

use crate::{domain::outcome::TransportFailure, foreign_errors};

/// Explains a failed request (HTTP or a pipe) by what is found along its chain of causes: a TLS failure, an
/// HTTP status, a refused connection, a DNS failure or a timeout. Anything else reads as the
/// chain.
pub fn explain(error: &(dyn Error + 'static)) -> TransportFailure {
    let chain = causes(error);
    if let Some(tls) = chain.iter().find_map(|e| e.downcast_ref::<rustls::Error>()) {
        return TransportFailure::Tls(tls.to_string());
    }
    if let Some(status) = chain.iter().find_map(|e| refused_status(*e)) {
        return TransportFailure::Status(status);
    }
    let refused = chain.iter().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    });
    if refused {
        return TransportFailure::Refused;
    }
    let text = describe_chain(&chain);
    if foreign_errors::is_dns_failure(&text) {
        return TransportFailure::Dns(text);
    }
    let timed_out = chain.iter().any(|e| {
        e.downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_timeout)
    });
    if timed_out {
        return TransportFailure::TimedOut(text);
    }
    TransportFailure::Other(text)
}

/// The chain of causes, looking inside the wrappers that hide them from `source()` (io::Error,
/// rmcp's transport errors) and leaving out wrappers that only repeat what they wrap.
fn causes<'a>(error: &'a (dyn Error + 'static)) -> Vec<&'a (dyn Error + 'static)> {
    use rmcp::{
        service::ClientInitializeError,
        transport::{DynamicTransportError, streamable_http_client::StreamableHttpError},
    };
    let mut chain = Vec::new();
    let mut next = Some(error);
    while let Some(error) = next {
        let inner: Option<&'a (dyn Error + 'static)> =
            if let Some(dynamic) = error.downcast_ref::<DynamicTransportError>() {
                Some(dynamic.error.as_ref())
            } else if let Some(ClientInitializeError::TransportError { error, .. }) =
                error.downcast_ref::<ClientInitializeError>()
            {
                Some(error)
            } else if let Some(StreamableHttpError::Client(client)) =
                error.downcast_ref::<StreamableHttpError<reqwest::Error>>()
            {
                Some(client)
            } else if let Some(io) = error.downcast_ref::<std::io::Error>() {
                io.get_ref().map(|e| e as &(dyn Error + 'static))
            } else {
                None
            };
        match inner {
            Some(inner) => next = Some(inner),
            None => {
                chain.push(error);
                next = error.source();
            }
        }
    }
    chain
}

/// The causes joined with ": ", skipping any that repeat the previous one's text.
fn describe_chain(chain: &[&(dyn Error + 'static)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for error in chain {
        let text = error.to_string();
        if !parts.last().is_some_and(|last| last.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

/// A 401/403 as rmcp's streamable HTTP client reports it (with or without a challenge).
fn refused_status(error: &(dyn Error + 'static)) -> Option<StatusCode> {
    use rmcp::transport::streamable_http_client::StreamableHttpError as E;
    match error.downcast_ref::<E<reqwest::Error>>()? {
        E::AuthRequired(_) => Some(StatusCode::UNAUTHORIZED),
        E::InsufficientScope(_) => Some(StatusCode::FORBIDDEN),
        other => foreign_errors::unchallenged_refusal(other),
    }
}
