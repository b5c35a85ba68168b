//! The auth gate as a tower layer around a gRPC service: each request is admitted (async: a
//! JWT may need the issuer's keys fetched) before the service sees it, its [`Caller`] recorded
//! in the request's extensions; a refusal is answered with its gRPC status at once — except a
//! refused `CallTool` or `CallToolStream`, which goes on marked [`Refused`], for the handler to refuse after
//! reading which tool it asked for (the audit log records refused calls with their tool).

use std::{
    convert::Infallible,
    pin::Pin,
    task::{Context, Poll},
};

use tonic::{
    body::Body,
    server::NamedService,
    transport::server::{TcpConnectInfo, TlsConnectInfo},
};
use tower::Service;

use super::status::to_status;
use crate::{auth::Gate, domain::request_error::RequestError};

/// The methods whose refusals reach the service (see the module's doc).
const CALL_TOOL: &str = "/toolbroker.v1.ToolBroker/CallTool";
pub(super) const CALL_TOOL_STREAM: &str = "/toolbroker.v1.ToolBroker/CallToolStream";
const START_TOOL_CALL: &str = "/toolbroker.v1.ToolBroker/StartToolCall";

/// A request the gate refused; the handler must answer with this error and nothing else.
#[derive(Clone)]
pub struct Refused(pub RequestError);

/// `S`, behind the gate.
#[derive(Clone)]
pub struct Authenticated<S> {
    inner: S,
    gate: Gate,
}

impl<S> Authenticated<S> {
    /// `inner`, admitting requests through `gate`.
    pub fn new(inner: S, gate: Gate) -> Self {
        Self { inner, gate }
    }
}

impl<S: NamedService> NamedService for Authenticated<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for Authenticated<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        // The clone that was made ready serves this request; a fresh clone waits for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let gate = self.gate.clone();
        Box::pin(async move {
            let certs = request
                .extensions()
                .get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|info| info.peer_certs());
            let admitted = gate
                .admit(request.headers(), certs.as_deref().map(Vec::as_slice))
                .await;
            match admitted {
                Ok(caller) => {
                    request.extensions_mut().insert(caller);
                    inner.call(request).await
                }
                Err(error)
                    if matches!(
                        request.uri().path(),
                        CALL_TOOL | CALL_TOOL_STREAM | START_TOOL_CALL
                    ) =>
                {
                    request.extensions_mut().insert(Refused(error));
                    inner.call(request).await
                }
                Err(error) => {
                    tracing::debug!(%error, "request refused");
                    Ok(to_status(&error).into_http())
                }
            }
        })
    }
}
