//! Unix-socket connections whose clients name the socket's path as the HTTP/2 `:authority`.
//!
//! h2, under tonic, refuses a request whose `:authority` does not parse as one
//! (hyperium/h2#487) before any of our code sees it. Over a Unix socket, grpcio (Python, C++)
//! sends the socket's path percent-encoded and grpcurl sends the path, so every call of theirs
//! would fail. [`LocalAuthority`] reads a connection's frames up to its first header block: if
//! that block's authority parses (tonic, grpc-go and grpc-js send `localhost` or a name), the
//! connection passes on untouched, with no copy from then on. If not, every header block of the
//! connection is decoded with the client's HPACK state and encoded again for h2 with
//! `localhost` as the authority; all other frames pass as they came.

use std::{
    borrow::Cow,
    io::{self, IoSlice},
    pin::Pin,
    task::{Context, Poll, ready},
};

use bytes::{Buf as _, BufMut as _, BytesMut};
use loona_hpack::{Decoder, Encoder};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// What an HTTP/2 client sends first.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// A frame's header: length (3 bytes), type, flags, stream id (4 bytes).
const HEAD: usize = 9;
/// The largest frame h2 accepts by default (SETTINGS_MAX_FRAME_SIZE), for the blocks written
/// again.
const MAX_FRAME: usize = 16 * 1024;
/// A header block larger than this (or frames held this long undecided) ends the connection.
pub const MAX_BLOCK: usize = 1 << 20;
/// What mended blocks name as the authority.
const LOCAL: &[u8] = b"localhost";

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// A Unix-socket connection as h2 should read it (see the module's doc).
pub struct LocalAuthority<S> {
    inner: S,
    state: State,
    /// Read from the client, not yet handled.
    input: BytesMut,
    /// Handled, not yet read by h2.
    output: BytesMut,
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
        }
    }

    /// Whether the connection's header blocks are being written again.
    #[cfg(test)]
    fn mending(&self) -> bool {
        matches!(self.state, State::Mending(_))
    }

    /// Handles what `input` holds: moves every frame that can be decided on to `output`.
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
                    let Some(frame) = Frame::at(&self.input) else {
                        return too_long(self.input.len());
                    };
                    if frame.kind == CONTINUATION {
                        return Err(broken("a CONTINUATION frame outside a header block"));
                    }
                    if frame.kind != HEADERS {
                        self.output
                            .extend_from_slice(&self.input.split_to(frame.end()));
                        continue;
                    }
                    let Some(block) = Block::at(&self.input)? else {
                        return too_long(self.input.len());
                    };
                    match &mut self.state {
                        State::Mending(mender) => {
                            mender.write(&block, &mut self.output)?;
                            self.input.advance(block.end);
                        }
                        // The first block decides; a mended connection starts again from it.
                        _ if authority_parses(&block.fragment)? => self.state = State::Passing,
                        _ => self.state = State::Mending(Box::default()),
                    }
                }
            }
        }
    }
}

/// With nothing complete to decide on: more input is wanted, unless too much is held.
fn too_long(held: usize) -> io::Result<()> {
    if held > MAX_BLOCK + MAX_FRAME {
        return Err(broken("a header block over 1 MiB"));
    }
    Ok(())
}

fn broken(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unix socket client: {what}"),
    )
}

/// A frame's header, when the whole frame is in the buffer.
struct Frame {
    len: usize,
    kind: u8,
    flags: u8,
    stream: u32,
}

impl Frame {
    fn at(buf: &[u8]) -> Option<Frame> {
        let head = buf.get(..HEAD)?;
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let frame = Frame {
            len,
            kind: head[3],
            flags: head[4],
            stream,
        };
        (buf.len() >= frame.end()).then_some(frame)
    }

    fn end(&self) -> usize {
        HEAD + self.len
    }

    /// The header block fragment of a HEADERS or CONTINUATION frame at the start of `buf`:
    /// without padding or priority fields.
    fn fragment<'b>(&self, buf: &'b [u8]) -> io::Result<&'b [u8]> {
        let mut payload = &buf[HEAD..self.end()];
        if self.kind == HEADERS {
            let mut pad = 0;
            if self.flags & PADDED != 0 {
                let (&n, rest) = payload
                    .split_first()
                    .ok_or_else(|| broken("empty padded frame"))?;
                pad = usize::from(n);
                payload = rest;
            }
            if self.flags & PRIORITY != 0 {
                payload = payload
                    .get(5..)
                    .ok_or_else(|| broken("short priority fields"))?;
            }
            let len = payload
                .len()
                .checked_sub(pad)
                .ok_or_else(|| broken("padding longer than its frame"))?;
            payload = &payload[..len];
        }
        Ok(payload)
    }
}

/// A whole header block: a HEADERS frame and its CONTINUATION frames.
struct Block<'b> {
    /// The fragments joined (borrowed when the block is one frame).
    fragment: Cow<'b, [u8]>,
    stream: u32,
    end_stream: bool,
    /// Where its last frame ends in the buffer.
    end: usize,
}

impl<'b> Block<'b> {
    /// The block starting at `buf`'s first frame (a HEADERS frame), once all of it is there.
    /// Frames are only walked until then: a block that comes in slowly is joined once.
    fn at(buf: &'b [u8]) -> io::Result<Option<Block<'b>>> {
        let Some(first) = Frame::at(buf) else {
            return Ok(None);
        };
        let mut end = first.end();
        let mut flags = first.flags;
        let mut rest = Vec::new();
        while flags & END_HEADERS == 0 {
            let Some(next) = Frame::at(&buf[end..]) else {
                return Ok(None);
            };
            if next.kind != CONTINUATION || next.stream != first.stream {
                return Err(broken(
                    "a header block not continued by CONTINUATION frames",
                ));
            }
            if end > MAX_BLOCK {
                return Err(broken("a header block over 1 MiB"));
            }
            rest.push(end);
            end += next.end();
            flags = next.flags;
        }
        let mut fragment = Cow::Borrowed(first.fragment(buf)?);
        for at in rest {
            let next = Frame::at(&buf[at..]).expect("walked above");
            fragment
                .to_mut()
                .extend_from_slice(next.fragment(&buf[at..])?);
        }
        Ok(Some(Block {
            fragment,
            stream: first.stream,
            end_stream: first.flags & END_STREAM != 0,
            end,
        }))
    }
}

/// Whether the first block's `:authority` is absent or one h2 accepts.
fn authority_parses(fragment: &[u8]) -> io::Result<bool> {
    let mut parses = true;
    Decoder::new()
        .decode_with_cb(fragment, |name, value| {
            if &*name == b":authority" {
                parses = http::uri::Authority::try_from(&*value).is_ok();
            }
        })
        .map_err(|e| broken(&format!("a header block HPACK cannot decode ({e:?})")))?;
    Ok(parses)
}

/// The two HPACK contexts of a mended connection: the client's (decoded) and h2's (encoded).
#[derive(Default)]
struct Mender {
    decoder: Decoder<'static>,
    encoder: Encoder<'static>,
    encoded: Vec<u8>,
}

impl Mender {
    /// Writes `block` again to `out`, `localhost` as its authority, in frames h2 accepts.
    fn write(&mut self, block: &Block<'_>, out: &mut BytesMut) -> io::Result<()> {
        let Mender {
            decoder,
            encoder,
            encoded,
        } = self;
        encoded.clear();
        let mut failed = None;
        decoder
            .decode_with_cb(&block.fragment, |name, value| {
                let value: &[u8] = if &*name == b":authority" {
                    LOCAL
                } else {
                    &value
                };
                if let Err(e) = encoder.encode_header_into((&*name, value), encoded) {
                    failed = Some(e);
                }
            })
            .map_err(|e| broken(&format!("a header block HPACK cannot decode ({e:?})")))?;
        if let Some(e) = failed {
            return Err(e);
        }
        let mut chunks = encoded.chunks(MAX_FRAME).peekable();
        let mut kind = HEADERS;
        let mut flags = if block.end_stream { END_STREAM } else { 0 };
        // An empty block is still one HEADERS frame.
        let mut chunk: &[u8] = chunks.next().unwrap_or_default();
        loop {
            let last = chunks.peek().is_none();
            if last {
                flags |= END_HEADERS;
            }
            out.reserve(HEAD + chunk.len());
            out.put_uint(chunk.len() as u64, 3);
            out.put_u8(kind);
            out.put_u8(flags);
            out.put_u32(block.stream);
            out.extend_from_slice(chunk);
            match chunks.next() {
                Some(next) => chunk = next,
                None => return Ok(()),
            }
            kind = CONTINUATION;
            flags = 0;
        }
    }
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
                continue;
            }
            this.advance()?;
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
#[path = "socket_authority_tests.rs"]
mod tests;
