//! Unix-socket connections whose clients name the socket's path as the HTTP/2 `:authority`.
//!
//! h2, under tonic, refuses a request whose `:authority` does not parse as one
//! (hyperium/h2#487) before any of our code sees it. Over a Unix socket, grpcio (Python, C++)
//! sends the socket's path percent-encoded and grpcurl sends the path, so every call of theirs
//! would fail. [`LocalAuthority`] reads a connection's frames up to its first header block: if
//! that block's authority parses (tonic, grpc-go and grpc-js send `localhost` or a name), the
//! connection passes on untouched, with no copy from then on. If not, every header block of the
//! connection is decoded with the client's HPACK state and encoded again for h2 with
//! `localhost` as the authority; all other frames pass as they came, as they come.
//!
//! **Bounded before anyone is authenticated**, as h2 bounds what it reads itself: the client's
//! HPACK table is capped at the size h2 advertised ([`HEADER_TABLE_SIZE`]; a larger table size
//! update ends the connection), a block's header list at [`MAX_HEADER_LIST_SIZE`] before
//! anything is encoded again, a block at [`MAX_BLOCK_FRAMES`] frames (h2's own CONTINUATION
//! bound) and [`MAX_BLOCK`] bytes; the walk over a block's frames keeps its place between reads
//! (each byte looked at a bounded number of times), and no more is read from the client while
//! mended output waits for h2. Where h2 would answer a header list over its limit with 431 (up to
//! 4 times the limit), the mender ends the connection: it cannot hand such a block on.
//!
//! **What would let it go**: h2 accepting any `:authority` a server does not route on
//! (hyperium/h2#487), or grpcio and grpcurl sending a name over a socket. Until then it leans on
//! `loona-hpack` through the seam of `hpack.rs` only, and `fuzz/fuzz_targets/authority.rs`
//! checks it on any bytes.

mod frames;
mod hpack;
mod replay;

use std::{
    io::{self, IoSlice},
    pin::Pin,
    task::{Context, Poll, ready},
};

use bytes::{Buf as _, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

use frames::{Block, CONTINUATION, Frame, HEADERS, Walk};

use crate::http2::frame::PREFACE;
use hpack::{Mender, authority_parses};
#[doc(hidden)]
pub use replay::{Replay, replay};

/// The HPACK dynamic table size h2 advertises (SETTINGS_HEADER_TABLE_SIZE): neither tonic nor
/// hyper sets one, so it is HPACK's default, which a client's table size updates may not exceed.
pub const HEADER_TABLE_SIZE: usize = 4096;
/// The largest header list the server accepts (SETTINGS_MAX_HEADER_LIST_SIZE, RFC 9113
/// §6.5.2): advertised on every listener (`grpc::server`), and the cap on a mended list.
pub const MAX_HEADER_LIST_SIZE: u32 = 16 * 1024;
/// The largest frame h2 accepts (SETTINGS_MAX_FRAME_SIZE, its default), for the blocks written
/// again.
const MAX_FRAME: usize = 16 * 1024;
/// The most frames of one header block: a HEADERS frame, as many CONTINUATION frames as h2
/// allows for the list and frame sizes above (5), and the last one.
pub const MAX_BLOCK_FRAMES: usize = 2 + max_continuations(MAX_HEADER_LIST_SIZE as usize, MAX_FRAME);
/// The most bytes of one header block, frame headers and padding included: twice the header
/// list cap, room for any list under the cap as encoders write it (h2, grpc-core, grpc-go and
/// nghttp2 write a literal in Huffman code only where that is shorter).
pub const MAX_BLOCK: usize = 2 * MAX_HEADER_LIST_SIZE as usize;
/// Mended output waiting for h2 beyond which no more input is handled (a frame's worth: h2
/// reads its input in pieces of about that size).
const MAX_OUTPUT: usize = 16 * 1024;

/// h2's count of CONTINUATION frames a block may have before its last (`h2::codec::framed_read`):
/// those the largest list needs in the largest frames, a quarter more, and at least 5.
const fn max_continuations(list: usize, frame: usize) -> usize {
    let needed = if list / frame > 1 { list / frame } else { 1 };
    let padded = needed + needed / 4;
    if padded > 5 { padded } else { 5 }
}

/// A Unix-socket connection as h2 should read it (see the module's doc).
pub struct LocalAuthority<S> {
    inner: S,
    state: State,
    /// Read from the client, not yet handled.
    input: BytesMut,
    /// Handled, not yet read by h2.
    output: BytesMut,
    /// Bytes of a frame other than a header block still to pass on as they come.
    through: usize,
    /// How far the header block at the start of `input` has been walked.
    walk: Walk,
    /// Header block frames stepped over (the tests' measure of the walk's work).
    walked: u64,
}

enum State {
    /// The client's preface is not all here yet.
    Preface,
    /// Frames pass until the first header block, which decides.
    Undecided,
    /// The first block's authority parsed: everything passes as it comes.
    Passing,
    /// Every header block is written again.
    Mending(Box<Mender>),
}

impl<S> LocalAuthority<S> {
    /// Wraps a client's connection.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            state: State::Preface,
            input: BytesMut::new(),
            output: BytesMut::new(),
            through: 0,
            walk: Walk::default(),
            walked: 0,
        }
    }

    /// Whether the connection's header blocks are being written again.
    fn mending(&self) -> bool {
        matches!(self.state, State::Mending(_))
    }

    /// Bytes allocated for the connection's buffers: read and not handled, handled and not read
    /// by h2.
    fn held(&self) -> usize {
        self.input.capacity() + self.output.capacity()
    }

    /// Handles what `input` holds: moves every frame that can be decided on to `output`, until
    /// `output` holds [`MAX_OUTPUT`].
    fn advance(&mut self) -> io::Result<()> {
        loop {
            match &mut self.state {
                State::Passing => {
                    let all = self.input.split();
                    self.output.unsplit(all);
                    return Ok(());
                }
                State::Preface => {
                    if self.input.len() < PREFACE.len() {
                        return Ok(());
                    }
                    // Not HTTP/2 with prior knowledge: h2 answers it, we only pass it on.
                    self.state = if self.input.starts_with(PREFACE) {
                        self.output
                            .extend_from_slice(&self.input.split_to(PREFACE.len()));
                        State::Undecided
                    } else {
                        State::Passing
                    };
                }
                State::Undecided | State::Mending(_) => {
                    if self.output.len() >= MAX_OUTPUT || !self.step()? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Handles the next frame, or what has come of it; whether there was anything to handle.
    fn step(&mut self) -> io::Result<bool> {
        if self.through > 0 {
            let n = self.through.min(self.input.len());
            self.output.extend_from_slice(&self.input.split_to(n));
            self.through -= n;
            return Ok(n > 0);
        }
        let Some(frame) = Frame::head(&self.input) else {
            return Ok(false);
        };
        match frame.kind {
            HEADERS => {}
            CONTINUATION => return Err(broken("a CONTINUATION frame outside a header block")),
            _ => {
                self.through = frame.end();
                return Ok(true);
            }
        }
        let Some(end) = self.walk.block_end(&self.input, &mut self.walked)? else {
            return Ok(false);
        };
        self.walk = Walk::default();
        let block = Block::join(&self.input[..end])?;
        match &mut self.state {
            State::Mending(mender) => mender.write(&block, &mut self.output)?,
            // The first block decides: it passes on as it came, with all that follows.
            _ if authority_parses(&block.fragment)? => {
                self.state = State::Passing;
                return Ok(true);
            }
            _ => {
                let mut mender = Box::<Mender>::default();
                mender.write(&block, &mut self.output)?;
                self.state = State::Mending(mender);
            }
        }
        self.input.advance(end);
        Ok(true)
    }
}

fn broken(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unix socket client: {what}"),
    )
}

impl<S: AsyncRead + Unpin> AsyncRead for LocalAuthority<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.output.is_empty() {
                let n = buf.remaining().min(this.output.len());
                buf.put_slice(&this.output[..n]);
                this.output.advance(n);
                return Poll::Ready(Ok(()));
            }
            if matches!(this.state, State::Passing) && this.input.is_empty() {
                // Decided: straight from the socket, no copy.
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            // What is held first: no more is read while it gives h2 something to read.
            this.advance()?;
            if !this.output.is_empty() {
                continue;
            }
            this.input.reserve(8 * 1024);
            let read = ready!(tokio_util::io::poll_read_buf(
                Pin::new(&mut this.inner),
                cx,
                &mut this.input
            ))?;
            if read == 0 {
                // The client is gone: h2 gets what came (a cut frame is its error to report).
                if this.input.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                let rest = this.input.split();
                this.output.unsplit(rest);
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for LocalAuthority<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<S: Connected> Connected for LocalAuthority<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests;
