//! HTTP/2 framing as RFC 9113 writes it (pure): the client preface, a frame's 9-byte header,
//! and the frame types and flags the broker's readers of raw connections look at (the first
//! request head's deadline, the socket's authority mending).

/// What every HTTP/2 client sends first (RFC 9113, 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// A frame's header: length (3 bytes), type, flags, stream id (4 bytes).
pub const HEAD: usize = 9;

/// Frame types.
pub const HEADERS: u8 = 0x1;
/// A header block's next fragment.
pub const CONTINUATION: u8 = 0x9;
/// Flags.
pub const END_STREAM: u8 = 0x1;
/// The header block ends with this frame.
pub const END_HEADERS: u8 = 0x4;
/// The payload starts with a pad length.
pub const PADDED: u8 = 0x8;
/// A HEADERS payload starts with priority fields.
pub const PRIORITY: u8 = 0x20;

/// A frame's header.
pub struct Frame {
    /// The payload's length.
    pub len: usize,
    /// The frame's type.
    pub kind: u8,
    /// Its flags.
    pub flags: u8,
    /// Its stream id (the reserved bit cleared).
    pub stream: u32,
}

impl Frame {
    /// The header of the frame at the start of `buf`, once its [`HEAD`] bytes are there.
    pub fn head(buf: &[u8]) -> Option<Frame> {
        let head = buf.get(..HEAD)?;
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        Some(Frame {
            len,
            kind: head[3],
            flags: head[4],
            stream,
        })
    }

    /// Where the frame ends, from its start.
    pub fn end(&self) -> usize {
        HEAD + self.len
    }
}
