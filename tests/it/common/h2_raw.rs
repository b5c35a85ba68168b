//! A raw HTTP/2 client, as an attacker writes one: frames built by hand (header blocks by
//! loona-hpack, no Huffman), none of h2's client rules applied (it opens streams past the
//! server's limit), and the server's frames read one by one, header blocks decoded.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncRead, AsyncReadExt as _},
    sync::mpsc,
};

/// What every HTTP/2 client sends first.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const CONTINUATION: u8 = 0x9;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const ACK: u8 = 0x1;
/// RST_STREAM's code for a stream the server did not take.
pub const REFUSED_STREAM: u32 = 0x7;

/// One frame, as sent.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut frame = vec![len[1], len[2], len[3], kind, flags];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// The preface and an empty SETTINGS frame: what a client sends before its first request.
pub fn opening() -> Vec<u8> {
    [PREFACE, &frame(SETTINGS, 0, 0, &[])].concat()
}

/// A PING frame.
pub fn ping() -> Vec<u8> {
    frame(PING, 0, 0, &[1, 2, 3, 4, 5, 6, 7, 8])
}

/// Header blocks of gRPC requests, encoded with one HPACK state (send them in order).
pub struct RequestHeads(loona_hpack::Encoder<'static>);

impl Default for RequestHeads {
    fn default() -> Self {
        Self(loona_hpack::Encoder::new())
    }
}

impl RequestHeads {
    /// The header block of a gRPC request to `path` (e.g. `/grpc.health.v1.Health/Check`),
    /// without credentials.
    pub fn block(&mut self, path: &str) -> Vec<u8> {
        let headers: [(&[u8], &[u8]); 6] = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", path.as_bytes()),
            (b":authority", b"localhost"),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
        ];
        self.0.encode(headers)
    }

    /// A whole HEADERS frame (END_HEADERS, not END_STREAM: the request's message is to follow)
    /// opening `stream`.
    pub fn request(&mut self, stream: u32, path: &str) -> Vec<u8> {
        frame(HEADERS, END_HEADERS, stream, &self.block(path))
    }
}

/// A frame the server sent.
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

/// The next frame from `from`; `None` when the connection ends.
pub async fn read_frame(from: &mut (impl AsyncRead + Unpin)) -> Option<Frame> {
    let mut header = [0; 9];
    from.read_exact(&mut header).await.ok()?;
    let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
    let mut payload = vec![0; len];
    from.read_exact(&mut payload).await.ok()?;
    Some(Frame {
        kind: header[3],
        flags: header[4],
        stream: u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7FFF_FFFF,
        payload,
    })
}

/// How the server ended a stream (or the connection).
#[derive(Debug)]
pub enum Ending {
    /// RST_STREAM with this code.
    Reset {
        #[expect(dead_code, reason = "read in failure messages, through Debug")]
        stream: u32,
        code: u32,
    },
    /// A header block with `grpc-status` (trailers, or a trailers-only answer).
    Status {
        stream: u32,
        status: String,
        message: String,
        at: Instant,
    },
    /// A PING acknowledged.
    PingAck,
    /// GOAWAY, or the connection ended.
    Closed,
}

/// Reads the server's frames until the connection ends, sending what ends each stream.
pub fn endings(
    mut from: impl AsyncRead + Unpin + Send + 'static,
) -> mpsc::UnboundedReceiver<Ending> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut decoder = loona_hpack::Decoder::new();
        let mut block: Vec<u8> = Vec::new();
        while let Some(frame) = read_frame(&mut from).await {
            let ending = match frame.kind {
                RST_STREAM => Some(Ending::Reset {
                    stream: frame.stream,
                    code: u32::from_be_bytes(frame.payload[..4].try_into().unwrap()),
                }),
                PING if frame.flags & ACK != 0 => Some(Ending::PingAck),
                GOAWAY => Some(Ending::Closed),
                HEADERS | CONTINUATION => {
                    block.extend_from_slice(header_block(&frame));
                    if frame.flags & END_HEADERS == 0 {
                        continue;
                    }
                    let headers = decoder.decode(&block).expect("a valid header block");
                    block.clear();
                    status_of(frame.stream, &headers)
                }
                _ => None,
            };
            if let Some(ending) = ending
                && tx.send(ending).is_err()
            {
                return;
            }
        }
        let _ = tx.send(Ending::Closed);
    });
    rx
}

/// A HEADERS or CONTINUATION frame's part of the header block (no padding or priority).
fn header_block(frame: &Frame) -> &[u8] {
    const PADDED: u8 = 0x8;
    const PRIORITY: u8 = 0x20;
    let mut payload = &frame.payload[..];
    if frame.kind != HEADERS {
        return payload;
    }
    let mut padding = 0;
    if frame.flags & PADDED != 0 {
        padding = payload[0] as usize;
        payload = &payload[1..];
    }
    if frame.flags & PRIORITY != 0 {
        payload = &payload[5..];
    }
    &payload[..payload.len() - padding]
}

fn status_of(stream: u32, headers: &[(Vec<u8>, Vec<u8>)]) -> Option<Ending> {
    let fields: HashMap<&[u8], String> = headers
        .iter()
        .map(|(k, v)| (&k[..], String::from_utf8_lossy(v).into_owned()))
        .collect();
    let status = fields.get(&b"grpc-status"[..])?.clone();
    let message = fields
        .get(&b"grpc-message"[..])
        .cloned()
        .unwrap_or_default();
    Some(Ending::Status {
        stream,
        status,
        message: percent_decoded(&message),
        at: Instant::now(),
    })
}

/// `grpc-message` is percent-encoded.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = text
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads and drops what `from` sends until the connection ends (EOF or an error); how long
/// after `opened` that was, or `None` if it is still open after `limit`.
pub async fn time_to_close(
    from: &mut (impl AsyncRead + Unpin),
    opened: Instant,
    limit: Duration,
) -> Option<Duration> {
    let mut buf = [0; 4096];
    let reading = async {
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => return opened.elapsed(),
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, reading).await.ok()
}
