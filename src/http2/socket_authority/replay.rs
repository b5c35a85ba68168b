//! A client's bytes read through [`LocalAuthority`] without a runtime, a few bytes per read:
//! the entry point of the fuzz target and the unit tests (pure: the bytes are in memory).

use std::{
    io,
    pin::Pin,
    task::{Context, Poll, Waker},
};

use tokio::io::{AsyncRead, ReadBuf};

use super::LocalAuthority;

/// What [`replay`] saw.
pub struct Replay {
    /// What h2 read, or the error that ended the connection.
    pub read: io::Result<Vec<u8>>,
    /// Whether the header blocks were being written again at the end.
    pub mending: bool,
    /// The most bytes allocated at once for what was read and not yet handled or handled and
    /// not yet read.
    pub held: usize,
    /// Header block frames stepped over.
    pub walked: u64,
}

/// A client's bytes, handed over at most `step` at a time.
struct Client<'b> {
    bytes: &'b [u8],
    step: usize,
}

impl AsyncRead for Client<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let n = this.step.min(buf.remaining()).min(this.bytes.len());
        let (now, later) = this.bytes.split_at(n);
        buf.put_slice(now);
        this.bytes = later;
        Poll::Ready(Ok(()))
    }
}

/// Reads `bytes` through [`LocalAuthority`], `step` bytes (at least 1) per read of the client,
/// as h2 would read them (16 KiB at a time), to the end or the first error.
#[doc(hidden)]
pub fn replay(bytes: &[u8], step: usize) -> Replay {
    let client = Client {
        bytes,
        step: step.max(1),
    };
    let mut wrapped = LocalAuthority::new(client);
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    let mut held = 0;
    let mut chunk = vec![0; 16 * 1024];
    let read = loop {
        let mut buf = ReadBuf::new(&mut chunk);
        let polled = Pin::new(&mut wrapped).poll_read(&mut cx, &mut buf);
        held = held.max(wrapped.held());
        match polled {
            Poll::Ready(Ok(())) if buf.filled().is_empty() => break Ok(out),
            Poll::Ready(Ok(())) => out.extend_from_slice(buf.filled()),
            Poll::Ready(Err(e)) => break Err(e),
            Poll::Pending => unreachable!("an in-memory client is always ready"),
        }
    };
    Replay {
        read,
        mending: wrapped.mending(),
        held,
        walked: wrapped.walked,
    }
}
