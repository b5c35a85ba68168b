//! A reader over a stdio server's stdout that fails at the first line that cannot be JSON-RPC.
//! rmcp skips such lines, but a server that prints anything else to stdout (a banner, a debug
//! print) is broken: its protocol stream can no longer be trusted, so its session should end
//! and be restarted, with the offending text shown in its status.

use std::{
    io,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
};

use tokio::io::{AsyncRead, ReadBuf};

/// How much of an offending line is quoted in the status message.
const QUOTE: usize = 120;

/// Why the guard ended the stream, once it has.
#[derive(Debug, Clone, Default)]
pub struct Verdict(Arc<Mutex<Option<String>>>);

impl Verdict {
    /// The reason, if the stream was ended for carrying something that is not JSON-RPC.
    pub fn reason(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, reason: String) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason);
    }
}

/// Passes bytes through while every line starts (after blanks) with `{` or `[`, as a JSON-RPC
/// message or batch does; checking the first byte keeps the cost to a scan for newlines.
pub struct StdoutGuard<R> {
    inner: R,
    at_line_start: bool,
    verdict: Verdict,
}

impl<R> StdoutGuard<R> {
    /// Guards `inner`; `verdict` learns why it failed, if it does.
    pub fn new(inner: R, verdict: Verdict) -> Self {
        Self {
            inner,
            at_line_start: true,
            verdict,
        }
    }

    /// Scans newly read bytes; the offending line's start, if any.
    fn check(&mut self, bytes: &[u8]) -> Option<usize> {
        for (index, &byte) in bytes.iter().enumerate() {
            match (self.at_line_start, byte) {
                (_, b'\n') => self.at_line_start = true,
                (true, b' ' | b'\t' | b'\r') => {}
                (true, b'{' | b'[') => self.at_line_start = false,
                (true, _) => return Some(index),
                (false, _) => {}
            }
        }
        None
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for StdoutGuard<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(reason) = self.verdict.reason() {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, reason)));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if !matches!(polled, Poll::Ready(Ok(()))) {
            return polled;
        }
        let Some(bad) = self.check(&buf.filled()[before..]) else {
            return polled;
        };
        let rest = &buf.filled()[before + bad..];
        let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
        let quoted = String::from_utf8_lossy(&line[..line.len().min(QUOTE)])
            .trim()
            .to_owned();
        let reason = format!(
            "wrote text that is not JSON-RPC to stdout ({quoted:?}); MCP servers must log to stderr"
        );
        self.verdict.set(reason);
        // Deliver the lines before the offending one; the next read fails.
        buf.set_filled(before + bad);
        if bad == 0 {
            return self.poll_read(cx, buf);
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    async fn read_all(input: &'static [u8]) -> (io::Result<Vec<u8>>, Option<String>) {
        let verdict = Verdict::default();
        let mut guard = StdoutGuard::new(input, verdict.clone());
        let mut out = Vec::new();
        let result = guard.read_to_end(&mut out).await.map(|_| out);
        (result, verdict.reason())
    }

    #[tokio::test]
    async fn json_lines_pass_through() {
        let input = b"{\"jsonrpc\":\"2.0\"}\n\n  [1]\r\n{\"a\": \"x\\ny\"}\n";
        let (out, verdict) = read_all(input).await;
        assert_eq!(out.unwrap(), input);
        assert!(verdict.is_none());
    }

    #[tokio::test]
    async fn other_text_fails_the_stream_and_is_quoted() {
        let verdict = Verdict::default();
        let input: &[u8] = b"{\"ok\":1}\nServer listening on stdio\n{}\n";
        let mut guard = StdoutGuard::new(input, verdict.clone());
        let mut out = Vec::new();
        let error = guard.read_to_end(&mut out).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            out, b"{\"ok\":1}\n",
            "lines before the bad one are delivered"
        );
        let verdict = verdict.reason();
        let verdict = verdict.unwrap();
        assert!(verdict.contains("(\"Server listening"), "{verdict}");
        let (out, _) = read_all(b"banner\n").await;
        assert!(out.is_err(), "a bad first line fails the first read");
    }

    #[tokio::test]
    async fn long_lines_are_quoted_short() {
        let (_, verdict) = read_all(Box::leak(
            format!("x{}\n", "y".repeat(1000))
                .into_bytes()
                .into_boxed_slice(),
        ))
        .await;
        assert!(verdict.unwrap().len() < QUOTE + 100);
    }
}
