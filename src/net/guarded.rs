//! A client connection as the broker holds it: its place in the connection budget (a
//! [`Permit`], given back when the connection is dropped), and on the HTTP/2 listeners a
//! deadline on its first request head (`limits.header_timeout`). Until the client has sent the
//! preface and a complete first header block, the bytes it sends are watched (see
//! [`HeadScan`]); once the deadline passes first, every read and write fails with `TimedOut`,
//! so h2 ends the connection and the socket is closed. Otherwise the bytes pass untouched, at
//! the cost of one branch per read or write.
//!
//! The deadline would go if h2 or hyper's HTTP/2 server bounded the time to a first request
//! head (hyper's HTTP/1 server does: the MCP face uses its `header_read_timeout`).

use std::{
    future::Future,
    io::{self, IoSlice},
    pin::Pin,
    task::{Context, Poll, ready},
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::{Instant, Sleep},
};
use tonic::transport::server::Connected;

use super::budget::Permit;
use crate::http2::head::HeadScan;

/// A connection holding its place in the budget, and its first request head's deadline if
/// it has one.
pub struct Guarded<T> {
    inner: T,
    _permit: Permit,
    /// Until the head is complete; `None` after, or without a deadline.
    head: Option<Watch>,
}

struct Watch {
    scan: HeadScan,
    deadline: Pin<Box<Sleep>>,
}

impl<T> Guarded<T> {
    /// `inner`, holding `permit`.
    pub fn new(inner: T, permit: Permit) -> Self {
        Self {
            inner,
            _permit: permit,
            head: None,
        }
    }

    /// The same connection, which must have sent a complete HTTP/2 request head by
    /// `deadline`.
    pub fn head_by(mut self, deadline: Instant) -> Self {
        self.head = Some(Watch {
            scan: HeadScan::new(),
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
        });
        self
    }

    /// The connection and its permit, apart (to wrap the connection in TLS, say).
    pub fn into_parts(self) -> (T, Permit) {
        (self.inner, self._permit)
    }

    /// An error once the deadline has passed with the head incomplete (and a wake-up then).
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let Some(watch) = &mut self.head else {
            return Ok(());
        };
        match watch.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no complete request head within limits.header_timeout",
            )),
            Poll::Pending => Ok(()),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.head.is_none() {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        // Checked first: a client that keeps sending (pings) is cut off all the same.
        this.check(cx)?;
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let complete = this
            .head
            .as_mut()
            .is_some_and(|watch| watch.scan.feed(&buf.filled()[before..]));
        if complete {
            this.head = None;
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<T: Connected> Connected for Guarded<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, DuplexStream, duplex};

    use super::*;
    use crate::net::{ConnectionBudget, ListenerKind};

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    const TIMEOUT: Duration = Duration::from_secs(10);

    /// A client end, and the broker's end behind a deadline `TIMEOUT` from now.
    fn connection() -> (DuplexStream, Guarded<DuplexStream>) {
        let (client, server) = duplex(1 << 16);
        let permit = ConnectionBudget::new(1).admit(ListenerKind::Grpc).unwrap();
        let server = Guarded::new(server, permit).head_by(Instant::now() + TIMEOUT);
        (client, server)
    }

    /// A HEADERS frame with END_HEADERS and a 3-byte block.
    fn headers() -> Vec<u8> {
        vec![0, 0, 3, 0x1, 0x4, 0, 0, 0, 1, 0x82, 0x86, 0x84]
    }

    /// Reads until the server end fails or `TIMEOUT` and a second have passed; the error.
    async fn read_until_failure(server: &mut Guarded<DuplexStream>) -> Option<io::Error> {
        let mut buf = [0; 64];
        let reading = async {
            loop {
                if let Err(error) = server.read(&mut buf).await {
                    return error;
                }
            }
        };
        tokio::time::timeout(TIMEOUT + Duration::from_secs(1), reading)
            .await
            .ok()
    }

    #[tokio::test(start_paused = true)]
    async fn half_a_preface_fails_at_the_deadline_not_before() {
        let (mut client, mut server) = connection();
        client.write_all(&PREFACE[..10]).await.unwrap();
        let started = Instant::now();
        let error = read_until_failure(&mut server).await.expect("it failed");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(error.to_string().contains("limits.header_timeout"));
        assert_eq!(started.elapsed(), TIMEOUT);
        let buf = [0; 8];
        assert!(server.write(&buf).await.is_err(), "writes fail too");
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_keeps_sending_pings_is_cut_off_all_the_same() {
        let (mut client, mut server) = connection();
        client.write_all(PREFACE).await.unwrap();
        let ping = [0, 0, 8, 0x6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        let pinging = async {
            loop {
                client.write_all(&ping).await.unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let error = tokio::select! {
            error = read_until_failure(&mut server) => error,
            () = pinging => unreachable!(),
        };
        assert_eq!(error.expect("it failed").kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_deadline_bytes_pass_and_the_place_is_given_back_at_the_end() {
        let budget = ConnectionBudget::new(1);
        let (mut client, server) = duplex(1 << 16);
        let mut server = Guarded::new(server, budget.admit(ListenerKind::McpFace).unwrap());
        assert!(budget.admit(ListenerKind::McpFace).is_none());
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        tokio::time::advance(TIMEOUT * 2).await;
        let mut buf = [0; 16];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"GET / HTTP/1.1\r\n");
        drop(server);
        assert!(budget.admit(ListenerKind::McpFace).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_complete_head_in_time_lifts_the_deadline() {
        let (mut client, mut server) = connection();
        let head = [PREFACE, &headers()].concat();
        // Cut in two reads, the second in the frame header.
        client.write_all(&head[..30]).await.unwrap();
        let mut buf = vec![0; head.len()];
        server.read_exact(&mut buf[..30]).await.unwrap();
        client.write_all(&head[30..]).await.unwrap();
        server.read_exact(&mut buf[30..]).await.unwrap();
        assert_eq!(buf, head, "the bytes pass untouched");
        tokio::time::advance(TIMEOUT * 2).await;
        client.write_all(b"later").await.unwrap();
        let mut later = [0; 5];
        server.read_exact(&mut later).await.unwrap();
        assert_eq!(&later, b"later");
        server.write_all(b"answer").await.unwrap();
        assert!(read_until_failure(&mut server).await.is_none());
    }
}
