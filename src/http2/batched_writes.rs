//! Large answers written to the socket in a few large writes instead of one per HTTP/2 frame.
//!
//! h2 writes each DATA frame of an answer (16 KiB: the largest most gRPC clients accept) with
//! a write of its own and flushes after each. A 2 MB ListTools took 120 writes, and on
//! loopback TCP the same bytes cost twice the CPU in 16 KiB writes as in one. This wrapper
//! holds the frames of a large answer and writes them together.
//!
//! h2 flushes after every frame and once more when it has nothing left to send, so a flush
//! that follows a large frame is put off (the connection's task is woken, so it runs again
//! and flushes again), and the next flush with no write since sends what is held. Small
//! writes (the frames of ordinary calls) go straight through, as before.
//!
//! **What would let it go**: h2 writing the frames it has queued in one vectored write (its
//! codec writes and flushes one frame at a time; not proposed upstream yet), measured as in
//! docs/performance.md ("a large answer in a few writes"). It wraps the socket's public
//! `AsyncWrite` only; its property test drives it with any writes and flushes on any socket.

use std::{
    io::{self, IoSlice},
    pin::Pin,
    task::{Context, Poll, ready},
};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// A write at least this large is a frame of a large answer: it is held, not sent at once.
const LARGE: usize = 4 * 1024;

/// At most this much is held before it is written.
const HOLD_UP_TO: usize = 256 * 1024;

/// A connection whose large answers are written in batches of up to [`HOLD_UP_TO`] bytes.
pub struct BatchedWrites<T> {
    inner: T,
    /// Written by h2, not yet to the socket.
    held: Vec<u8>,
    /// How much of `held` the socket has taken.
    sent: usize,
    /// The last write held was large and no flush has been put off since (read only while
    /// something is held).
    flush_later: bool,
}

impl<T> BatchedWrites<T> {
    /// Wraps a connection.
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            held: Vec::new(),
            sent: 0,
            flush_later: false,
        }
    }
}

impl<T: AsyncWrite + Unpin> BatchedWrites<T> {
    /// Writes everything held.
    fn poll_send_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.held.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.held[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        // Freed, not kept: a connection holds memory only while it sends a large answer.
        self.held = Vec::new();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for BatchedWrites<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if this.held.is_empty() && len < LARGE {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        if this.held.len() + len > HOLD_UP_TO {
            ready!(this.poll_send_held(cx))?;
            if len >= HOLD_UP_TO {
                return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
            }
        }
        if this.held.is_empty() {
            this.held.reserve_exact(HOLD_UP_TO);
        }
        bufs.iter().for_each(|b| this.held.extend_from_slice(b));
        this.flush_later = len >= LARGE;
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        // What h2 sees decides how it writes small frames, which go straight through.
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.flush_later && !this.held.is_empty() {
            this.flush_later = false;
            // More frames may follow in this same turn; if none do, h2 flushes again when
            // it runs next, and this wake makes sure it does.
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_send_held(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send_held(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for BatchedWrites<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: Connected> Connected for BatchedWrites<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use futures::task::{ArcWake, waker};

    use super::*;

    /// A socket that records each write, takes at most `max_write` bytes at a time, and
    /// answers every other call with `Pending` if `stalls`.
    #[derive(Default)]
    struct Socket {
        writes: Vec<Vec<u8>>,
        max_write: Option<usize>,
        stalls: bool,
        stalled: bool,
    }

    impl Socket {
        fn bytes(&self) -> Vec<u8> {
            self.writes.concat()
        }
    }

    impl AsyncWrite for Socket {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            if this.stalls {
                this.stalled = !this.stalled;
                if this.stalled {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
            }
            let n = buf.len().min(this.max_write.unwrap_or(usize::MAX));
            this.writes.push(buf[..n].to_vec());
            Poll::Ready(Ok(n))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl ArcWake for Wakes {
        fn wake_by_ref(arc_self: &Arc<Self>) {
            arc_self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Drives the wrapper by hand, as a connection's task would, counting its wake-ups.
    struct Driver {
        conn: BatchedWrites<Socket>,
        wakes: Arc<Wakes>,
    }

    impl Driver {
        fn new(socket: Socket) -> Self {
            Self {
                conn: BatchedWrites::new(socket),
                wakes: Arc::default(),
            }
        }

        fn poll<R>(
            &mut self,
            mut f: impl FnMut(Pin<&mut BatchedWrites<Socket>>, &mut Context<'_>) -> Poll<R>,
        ) -> R {
            let waker = waker(self.wakes.clone());
            let mut cx = Context::from_waker(&waker);
            loop {
                if let Poll::Ready(r) = f(Pin::new(&mut self.conn), &mut cx) {
                    return r;
                }
            }
        }

        fn write(&mut self, bytes: &[u8]) {
            let mut rest = bytes;
            while !rest.is_empty() {
                let n = self.poll(|c, cx| c.poll_write(cx, rest)).unwrap();
                rest = &rest[n..];
            }
        }

        fn flush(&mut self) {
            self.poll(|c, cx| c.poll_flush(cx)).unwrap();
        }

        fn socket(&self) -> &Socket {
            &self.conn.inner
        }

        fn wakes(&self) -> usize {
            self.wakes.0.load(Ordering::SeqCst)
        }
    }

    fn frame(byte: u8) -> Vec<u8> {
        vec![byte; 16 * 1024]
    }

    #[test]
    fn small_writes_go_straight_through() {
        let mut conn = Driver::new(Socket::default());
        conn.write(b"headers");
        assert_eq!(conn.socket().writes, [b"headers".to_vec()]);
        conn.flush();
        conn.write(b"trailers");
        conn.flush();
        assert_eq!(conn.socket().writes.len(), 2);
        assert_eq!(conn.wakes(), 0);
    }

    #[test]
    fn large_frames_go_out_together_at_the_flush_that_follows_no_write() {
        let mut conn = Driver::new(Socket::default());
        conn.write(&frame(1));
        conn.flush();
        conn.write(&frame(2));
        conn.flush();
        assert!(conn.socket().writes.is_empty(), "held until the last flush");
        assert_eq!(conn.wakes(), 2, "each put-off flush wakes the task");
        conn.flush();
        assert_eq!(conn.socket().writes, [[frame(1), frame(2)].concat()]);
    }

    #[test]
    fn a_small_write_after_large_ones_keeps_its_place_and_is_not_put_off() {
        let mut conn = Driver::new(Socket::default());
        conn.write(&frame(1));
        conn.flush();
        conn.write(b"trailers");
        conn.flush();
        assert_eq!(
            conn.socket().writes,
            [[frame(1), b"trailers".to_vec()].concat()]
        );
    }

    #[test]
    fn no_more_than_the_limit_is_held() {
        let mut conn = Driver::new(Socket::default());
        let frames: Vec<Vec<u8>> = (0..40).map(frame).collect();
        for f in &frames {
            conn.write(f);
            conn.flush();
        }
        conn.flush();
        let writes = &conn.socket().writes;
        assert!(writes.iter().all(|w| w.len() <= HOLD_UP_TO), "{writes:?}");
        assert_eq!(writes.len(), 40 * 16 * 1024 / HOLD_UP_TO + 1);
        assert_eq!(conn.socket().bytes(), frames.concat());
    }

    #[test]
    fn a_write_larger_than_the_limit_is_not_copied() {
        let mut conn = Driver::new(Socket::default());
        conn.write(&frame(1));
        let big = vec![9; HOLD_UP_TO];
        conn.write(&big);
        assert_eq!(conn.socket().writes, [frame(1), big]);
        assert!(conn.conn.held.is_empty());
    }

    #[test]
    fn a_slow_socket_gets_every_byte_in_order() {
        let socket = Socket {
            max_write: Some(1000),
            stalls: true,
            ..Socket::default()
        };
        let mut conn = Driver::new(socket);
        let frames: Vec<Vec<u8>> = (0..20).map(frame).collect();
        for f in &frames {
            conn.write(f);
            conn.flush();
        }
        conn.write(b"trailers");
        conn.flush();
        assert_eq!(
            conn.socket().bytes(),
            [frames.concat(), b"trailers".to_vec()].concat()
        );
        assert!(conn.conn.held.is_empty());
    }

    #[test]
    fn shutting_down_sends_what_is_held() {
        let mut conn = Driver::new(Socket::default());
        conn.write(&frame(3));
        conn.flush();
        conn.poll(|c, cx| c.poll_shutdown(cx)).unwrap();
        assert_eq!(conn.socket().bytes(), frame(3));
    }

    /// One step of a connection's task, as h2 takes it.
    #[derive(Debug, Clone)]
    enum Step {
        Write(usize, u8),
        Flush,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            3 => (1usize..40_000, any::<u8>()).prop_map(|(len, byte)| Step::Write(len, byte)),
            2 => Just(Step::Flush),
        ]
    }

    proptest::proptest! {
        /// Whatever h2 writes and flushes, on a socket however slow: every byte arrives once,
        /// in order; no more than the limit is ever held; a flush that follows no write (h2's
        /// last, when it has nothing left to send) leaves nothing held.
        #[test]
        fn every_byte_arrives_in_order_and_a_second_flush_sends_all(
            steps in proptest::collection::vec(step(), 1..60),
            max_write in proptest::option::of(1usize..70_000),
            stalls in proptest::bool::ANY,
        ) {
            let mut conn = Driver::new(Socket { max_write, stalls, ..Socket::default() });
            let mut written = Vec::new();
            let mut last_was_flush = false;
            for step in steps {
                match step {
                    Step::Write(len, byte) => {
                        let bytes = vec![byte; len];
                        conn.write(&bytes);
                        written.extend_from_slice(&bytes);
                        last_was_flush = false;
                    }
                    Step::Flush => {
                        conn.flush();
                        if last_was_flush {
                            proptest::prop_assert!(conn.conn.held.is_empty());
                        }
                        last_was_flush = true;
                    }
                }
                proptest::prop_assert!(conn.conn.held.len() <= HOLD_UP_TO);
            }
            conn.flush();
            conn.flush();
            proptest::prop_assert!(conn.conn.held.is_empty());
            proptest::prop_assert_eq!(conn.socket().bytes(), written);
        }
    }
}
