//! A reader over a stdio server's stdout that fails at the first line that cannot be JSON-RPC.
//! rmcp skips such lines, but a server that prints anything else to stdout (a banner, a debug
//! print) is broken: its protocol stream can no longer be trusted, so its session should end
//! and be restarted, with the offending text shown in its status.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
};

use tokio::io::{AsyncRead, ReadBuf};

use crate::domain::outcome::StreamFault;
use crate::upstream::transport::faults::Verdict;

/// How much of an offending line is quoted in the status message.
const QUOTE: usize = 120;

/// Passes bytes through while every line starts (after blanks) with `{` or `[`, as a JSON-RPC
/// message or batch does; checking the first byte keeps the cost to a scan for newlines.
pub struct StdoutGuard<R> {
    inner: R,
    at_line_start: bool,
    line_len: usize,
    max_line: usize,
    verdict: Verdict,
}

impl<R> StdoutGuard<R> {
    /// Guards `inner`, allowing lines of up to `max_line` bytes; `verdict` learns why it
    /// failed, if it does.
    pub fn new(inner: R, max_line: usize, verdict: Verdict) -> Self {
        Self {
            inner,
            at_line_start: true,
            line_len: 0,
            max_line,
            verdict,
        }
    }

    /// Scans newly read bytes: the offending line's start and the fault, if any.
    fn check(&mut self, bytes: &[u8]) -> Option<(usize, Option<usize>)> {
        for (index, &byte) in bytes.iter().enumerate() {
            if byte == b'\n' {
                self.at_line_start = true;
                self.line_len = 0;
                continue;
            }
            self.line_len += 1;
            if self.line_len > self.max_line {
                return Some((index, Some(self.max_line)));
            }
            match (self.at_line_start, byte) {
                (true, b' ' | b'\t' | b'\r') => {}
                (true, b'{' | b'[') => self.at_line_start = false,
                (true, _) => return Some((index, None)),
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
        if let Some(fault) = self.verdict.fault() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the server {fault}"),
            )));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if !matches!(polled, Poll::Ready(Ok(()))) {
            return polled;
        }
        let Some((bad, too_long)) = self.check(&buf.filled()[before..]) else {
            return polled;
        };
        let fault = match too_long {
            Some(limit) => StreamFault::TooLong(limit),
            None => {
                let rest = &buf.filled()[before + bad..];
                let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
                let quoted = String::from_utf8_lossy(&line[..line.len().min(QUOTE)]);
                StreamFault::NotJsonRpc(quoted.trim().to_owned())
            }
        };
        self.verdict.set(fault);
        // Deliver what came before a bad line (an over-long line is lost anyway); the next
        // read fails.
        let keep = if too_long.is_some() { 0 } else { bad };
        buf.set_filled(before + keep);
        if keep == 0 {
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
        let mut guard = StdoutGuard::new(input, 1 << 20, verdict.clone());
        let mut out = Vec::new();
        let result = guard.read_to_end(&mut out).await.map(|_| out);
        (result, verdict.fault().map(|f| f.to_string()))
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
        let mut guard = StdoutGuard::new(input, 1 << 20, verdict.clone());
        let mut out = Vec::new();
        let error = guard.read_to_end(&mut out).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            out, b"{\"ok\":1}\n",
            "lines before the bad one are delivered"
        );
        let verdict = verdict.fault().unwrap().to_string();
        assert!(verdict.contains("(\"Server listening"), "{verdict}");
        let (out, _) = read_all(b"banner\n").await;
        assert!(out.is_err(), "a bad first line fails the first read");
    }

    #[tokio::test]
    async fn a_line_over_the_limit_fails_the_stream() {
        let verdict = Verdict::default();
        let input: &[u8] = b"{\"short\":1}\n{\"long\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\n";
        let mut guard = StdoutGuard::new(input, 20, verdict.clone());
        let mut out = Vec::new();
        assert!(guard.read_to_end(&mut out).await.is_err());
        assert_eq!(verdict.fault(), Some(StreamFault::TooLong(20)));
        assert!(
            verdict
                .fault()
                .unwrap()
                .to_string()
                .contains("longer than 20 bytes")
        );
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
