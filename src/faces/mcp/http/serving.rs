//! The face's HTTP/1.1 server: hyper's, driven here rather than by `axum::serve`, which gives
//! hyper no timer and so no `header_read_timeout`. Connections come from a listener of the
//! shared connection budget; one that has not sent a complete request head within
//! `limits.header_timeout` (its first, or the next on a kept-alive connection) is closed.

use std::time::Duration;

use axum::{Router, serve::Listener};
use hyper::server::conn::http1;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
    service::TowerToHyperService,
};
use tokio_util::sync::CancellationToken;

/// Serves `router` on `listener`'s connections until `closing`; then stops accepting and
/// waits for the connections, each told to close once its request in progress is answered.
pub async fn serve<L: Listener>(
    mut listener: L,
    router: Router,
    header_timeout: Duration,
    closing: CancellationToken,
) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let graceful = GracefulShutdown::new();
    loop {
        let (io, _) = tokio::select! {
            biased;
            () = closing.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(io), service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "an MCP face connection ended");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
