//! HTTP/2 frames as the mender reads and writes them (pure): a frame's header, the walk over a
//! header block's frames (kept between reads, bounded in frames and bytes), the block's
//! fragments joined, and a block written again in frames h2 accepts.

use std::{borrow::Cow, io};

use bytes::{BufMut as _, BytesMut};

use super::{MAX_BLOCK, MAX_BLOCK_FRAMES, MAX_FRAME, broken};

pub(super) use crate::http2::frame::{CONTINUATION, Frame, HEAD, HEADERS};
use crate::http2::frame::{END_HEADERS, END_STREAM, PADDED, PRIORITY};

/// The header block fragment of the whole HEADERS or CONTINUATION `frame` at the start of
/// `buf`: without padding or priority fields.
fn fragment<'b>(frame: &Frame, buf: &'b [u8]) -> io::Result<&'b [u8]> {
    let mut payload = &buf[HEAD..frame.end()];
    if frame.kind == HEADERS {
        let mut pad = 0;
        if frame.flags & PADDED != 0 {
            let (&n, rest) = payload
                .split_first()
                .ok_or_else(|| broken("empty padded frame"))?;
            pad = usize::from(n);
            payload = rest;
        }
        if frame.flags & PRIORITY != 0 {
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

/// How far the header block at the start of the input has been walked. Kept between reads,
/// so that each frame is stepped over once however slowly the block comes in.
#[derive(Default)]
pub(super) struct Walk {
    /// Where the next frame starts (0: at the block's HEADERS frame).
    end: usize,
    /// Frames stepped over.
    frames: usize,
    /// The block's stream.
    stream: u32,
    /// Its END_HEADERS frame has been stepped over.
    done: bool,
}

impl Walk {
    /// Steps over the frames of the block at the start of `buf` (a HEADERS frame) that came
    /// since the last call; once its last frame is here, where the block ends. A block of more
    /// than [`MAX_BLOCK_FRAMES`] frames or [`MAX_BLOCK`] bytes is an error as soon as the header
    /// of the frame that crosses the bound is read. `walked` counts the frames stepped over.
    pub(super) fn block_end(&mut self, buf: &[u8], walked: &mut u64) -> io::Result<Option<usize>> {
        while !self.done {
            let Some(frame) = Frame::head(&buf[self.end..]) else {
                return Ok(None);
            };
            self.check(&frame)?;
            if buf.len() < self.end + frame.end() {
                return Ok(None);
            }
            if self.frames == 0 {
                self.stream = frame.stream;
            }
            self.frames += 1;
            *walked += 1;
            self.end += frame.end();
            self.done = frame.flags & END_HEADERS != 0;
        }
        Ok(Some(self.end))
    }

    /// Whether `frame` may come next in the block.
    fn check(&self, frame: &Frame) -> io::Result<()> {
        if self.frames > 0 && (frame.kind != CONTINUATION || frame.stream != self.stream) {
            return Err(broken(
                "a header block not continued by CONTINUATION frames",
            ));
        }
        if self.frames == MAX_BLOCK_FRAMES {
            return Err(broken("a header block of too many CONTINUATION frames"));
        }
        if self.end + frame.end() > MAX_BLOCK {
            return Err(broken("a header block too large"));
        }
        Ok(())
    }
}

/// A whole header block: a HEADERS frame and its CONTINUATION frames.
pub(super) struct Block<'b> {
    /// The fragments joined (borrowed when the block is one frame).
    pub(super) fragment: Cow<'b, [u8]>,
    pub(super) stream: u32,
    pub(super) end_stream: bool,
}

impl<'b> Block<'b> {
    /// The block whose frames are all of `frames` (as [`Walk::block_end`] found them).
    pub(super) fn join(frames: &'b [u8]) -> io::Result<Block<'b>> {
        let first = Frame::head(frames).expect("walked");
        let mut joined = Cow::Borrowed(fragment(&first, frames)?);
        let mut at = first.end();
        while at < frames.len() {
            let next = Frame::head(&frames[at..]).expect("walked");
            joined
                .to_mut()
                .extend_from_slice(fragment(&next, &frames[at..])?);
            at += next.end();
        }
        Ok(Block {
            fragment: joined,
            stream: first.stream,
            end_stream: first.flags & END_STREAM != 0,
        })
    }
}

/// Writes the header block `encoded` of `stream` to `out` in frames of at most [`MAX_FRAME`]
/// bytes: a HEADERS frame (even when empty), then CONTINUATION frames.
pub(super) fn put_block(out: &mut BytesMut, stream: u32, end_stream: bool, encoded: &[u8]) {
    let mut chunks = encoded.chunks(MAX_FRAME).peekable();
    let mut kind = HEADERS;
    let mut flags = if end_stream { END_STREAM } else { 0 };
    let mut chunk: &[u8] = chunks.next().unwrap_or_default();
    loop {
        if chunks.peek().is_none() {
            flags |= END_HEADERS;
        }
        out.reserve(HEAD + chunk.len());
        out.put_uint(chunk.len() as u64, 3);
        out.put_u8(kind);
        out.put_u8(flags);
        out.put_u32(stream);
        out.extend_from_slice(chunk);
        match chunks.next() {
            Some(next) => chunk = next,
            None => return,
        }
        kind = CONTINUATION;
        flags = 0;
    }
}
