//! The stdio transport of the demo server: newline-delimited JSON-RPC on stdin/stdout, served
//! until the client closes stdin.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
};

use anyhow::Context as _;
use rmcp::{ServiceExt, service::ServerInitializeError};
use tokio::io::{AsyncRead, ReadBuf};

use super::{DemoOptions, DemoServer};

/// Serves the demo server on stdin/stdout until the client closes stdin, then returns `Ok`.
///
/// Stdout carries the protocol only: the caller must send logs (tracing) to stderr.
pub async fn serve_stdio(options: DemoOptions) -> anyhow::Result<()> {
    let server = DemoServer::new(options);
    tracing::info!(server = ?server, "demo server starting on stdio");
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    // Once stdin is done, rmcp still waits up to 5 s for running calls; stop them at once instead.
    let stopper = server.clone();
    let stdin = EofSignal::new(stdin, move || stopper.stop_running_tools());
    let running = match server.serve((stdin, stdout)).await {
        Ok(running) => running,
        // The client went away before the handshake: nothing to serve, and no fault of ours.
        Err(ServerInitializeError::ConnectionClosed(reason)) => {
            tracing::info!(%reason, "stdin closed before initialization");
            return Ok(());
        }
        Err(error) => return Err(error).context("mcp initialization on stdio failed"),
    };
    let reason = running.waiting().await.context("demo server task failed")?;
    tracing::info!(?reason, "demo server stopped");
    Ok(())
}

/// A reader that calls `on_eof` once, when the reader it wraps reaches end of file.
struct EofSignal<R, F> {
    inner: R,
    on_eof: Option<F>,
}

impl<R, F: FnOnce()> EofSignal<R, F> {
    fn new(inner: R, on_eof: F) -> Self {
        Self {
            inner,
            on_eof: Some(on_eof),
        }
    }
}

impl<R: AsyncRead + Unpin, F: FnOnce() + Unpin> AsyncRead for EofSignal<R, F> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // A read that had room but filled nothing is end of file (tokio's AsyncRead contract).
        let had_room = buf.remaining() > 0;
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if had_room
            && matches!(poll, Poll::Ready(Ok(())))
            && buf.filled().len() == before
            && let Some(on_eof) = self.on_eof.take()
        {
            on_eof();
        }
        poll
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;
    use tokio_util::sync::CancellationToken;

    use super::*;

    #[tokio::test]
    async fn eof_signal_fires_at_end_of_input_only() {
        let eof = CancellationToken::new();
        let mut reader = EofSignal::new(&b"line\n"[..], || eof.cancel());
        let mut first = [0u8; 5];
        reader.read_exact(&mut first).await.unwrap();
        assert!(!eof.is_cancelled());
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).await.unwrap();
        assert!(eof.is_cancelled());
    }
}
