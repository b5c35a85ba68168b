//! The mender's behaviour on whole connections (helpers shared with `bounds`, the tests of
//! what a hostile client may cost).

mod bounds;

use std::io;

use loona_hpack::{Decoder, Encoder};

use super::*;

/// What h2 reads of `bytes`, fed `step` bytes at a time, and whether the connection was
/// being mended at the end.
fn read_through(bytes: &[u8], step: usize) -> (io::Result<Vec<u8>>, bool) {
    let replay = replay(bytes, step);
    (replay.read, replay.mending)
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn request(authority: &str, path: &str) -> Fields {
    [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("grpc-accept-encoding", "identity,deflate,gzip"),
        (
            "user-agent",
            "grpc-python/1.85.1 grpc-c/52.0.0 (linux; chttp2)",
        ),
        ("authorization", "Bearer secret-token"),
    ]
    .iter()
    .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect()
}

fn encode(encoder: &mut Encoder<'_>, fields: &Fields) -> Vec<u8> {
    encoder.encode(fields.iter().map(|(n, v)| (&n[..], &v[..])))
}

// The frame types and flags the tests write, spelled out again as RFC 9113 has them.
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// A connection as grpcio writes one: preface, settings, a window update, then requests whose
/// blocks refer to the dynamic table the earlier ones filled. The first block is padded and
/// has priority fields, the second is cut into CONTINUATION frames.
fn connection(authority: &str) -> (Vec<u8>, Vec<Fields>) {
    let mut encoder = Encoder::new();
    let requests = vec![
        request(authority, "/toolbroker.v1.ToolBroker/CallTool"),
        request(authority, "/toolbroker.v1.ToolBroker/ListTools"),
        request(authority, "/grpc.health.v1.Health/Check"),
    ];
    let mut bytes = PREFACE.to_vec();
    bytes.extend(frame(SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 0]));
    bytes.extend(frame(WINDOW_UPDATE, 0, 0, &[0, 0, 0x10, 0]));
    // Padded (3 bytes) with priority fields.
    let block = encode(&mut encoder, &requests[0]);
    let mut payload = vec![3];
    payload.extend_from_slice(&[0, 0, 0, 0, 15]);
    payload.extend_from_slice(&block);
    payload.extend_from_slice(&[0; 3]);
    bytes.extend(frame(HEADERS, END_HEADERS | PADDED | PRIORITY, 1, &payload));
    bytes.extend(frame(DATA, END_STREAM, 1, b"\0\0\0\0\x05hello"));
    // Cut in three.
    let block = encode(&mut encoder, &requests[1]);
    let third = block.len() / 3;
    bytes.extend(frame(HEADERS, 0, 3, &block[..third]));
    bytes.extend(frame(CONTINUATION, 0, 3, &block[third..2 * third]));
    bytes.extend(frame(CONTINUATION, END_HEADERS, 3, &block[2 * third..]));
    bytes.extend(frame(DATA, END_STREAM, 3, b"\0\0\0\0\0"));
    let block = encode(&mut encoder, &requests[2]);
    bytes.extend(frame(HEADERS, END_HEADERS | END_STREAM, 5, &block));
    (bytes, requests)
}

/// The frames h2 would see: header blocks decoded with one decoder (as h2 keeps one per
/// connection), other frames as (type, flags, stream, payload).
#[derive(Debug, PartialEq)]
enum Seen {
    Block(u32, bool, Fields),
    Other(u8, u8, u32, Vec<u8>),
}

fn as_h2_reads(bytes: &[u8]) -> (Vec<Seen>, usize) {
    assert!(bytes.starts_with(PREFACE));
    let mut rest = &bytes[PREFACE.len()..];
    let mut decoder = Decoder::new();
    let mut seen = Vec::new();
    let mut largest = 0;
    let mut open: Option<(u32, bool, Vec<u8>)> = None;
    while !rest.is_empty() {
        let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        let (kind, flags) = (rest[3], rest[4]);
        let stream = u32::from_be_bytes(rest[5..9].try_into().unwrap());
        let payload = &rest[9..9 + len];
        rest = &rest[9 + len..];
        largest = largest.max(len);
        match kind {
            HEADERS => {
                let pad = if flags & PADDED != 0 { payload[0] } else { 0 };
                let skip =
                    usize::from(flags & PADDED != 0) + 5 * usize::from(flags & PRIORITY != 0);
                let fragment = payload[skip..len - usize::from(pad)].to_vec();
                open = Some((stream, flags & END_STREAM != 0, fragment));
            }
            CONTINUATION => open.as_mut().unwrap().2.extend(payload),
            _ => seen.push(Seen::Other(kind, flags, stream, payload.to_vec())),
        }
        if matches!(kind, HEADERS | CONTINUATION) && flags & END_HEADERS != 0 {
            let (stream, end_stream, block) = open.take().unwrap();
            seen.push(Seen::Block(
                stream,
                end_stream,
                decoder.decode(&block).unwrap(),
            ));
        }
    }
    (seen, largest)
}

#[test]
fn a_connection_whose_authority_parses_passes_byte_for_byte() {
    let (bytes, _) = connection("localhost");
    for step in [1, 7, 4096, 1 << 20] {
        let (read, mending) = read_through(&bytes, step);
        assert_eq!(read.unwrap(), bytes, "fed {step} bytes at a time");
        assert!(!mending);
    }
}

#[test]
fn a_socket_path_authority_becomes_localhost_and_nothing_else_changes() {
    let (bytes, requests) = connection("tmp%2Ftoolbroker.sock");
    let (sent, _) = as_h2_reads(&bytes);
    for step in [1, 7, 4096, 1 << 20] {
        let (read, mending) = read_through(&bytes, step);
        assert!(mending);
        let (seen, _) = as_h2_reads(&read.unwrap());
        assert_eq!(seen.len(), sent.len(), "fed {step} bytes at a time");
        let mut blocks = 0;
        for (seen, sent) in seen.iter().zip(&sent) {
            match (seen, sent) {
                (Seen::Block(stream, end, fields), Seen::Block(sent_stream, sent_end, _)) => {
                    let mut want = requests[blocks].clone();
                    want[3].1 = b"localhost".to_vec();
                    assert_eq!(fields, &want);
                    assert_eq!((stream, end), (sent_stream, sent_end));
                    blocks += 1;
                }
                (seen, sent) => assert_eq!(seen, sent),
            }
        }
        assert_eq!(blocks, 3);
    }
}

#[test]
fn a_mended_block_of_many_frames_comes_out_in_frames_h2_accepts() {
    let mut fields = request("/tmp/toolbroker.sock", "/toolbroker.v1.ToolBroker/CallTool");
    fields.push((b"x-large".to_vec(), vec![b'a'; 12_000]));
    let block = Encoder::new().encode(fields.iter().map(|(n, v)| (&n[..], &v[..])));
    let mut bytes = PREFACE.to_vec();
    let pieces = block.chunks(2_500).count();
    assert!(pieces > 3 && pieces <= MAX_BLOCK_FRAMES, "{pieces} frames");
    for (i, piece) in block.chunks(2_500).enumerate() {
        let kind = if i == 0 { HEADERS } else { CONTINUATION };
        let flags = if i + 1 == pieces { END_HEADERS } else { 0 };
        bytes.extend(frame(kind, flags, 1, piece));
    }
    for step in [1, 4096] {
        let (read, _) = read_through(&bytes, step);
        let (seen, largest) = as_h2_reads(&read.unwrap());
        let mut want = fields.clone();
        want[3].1 = b"localhost".to_vec();
        assert_eq!(seen, [Seen::Block(1, false, want)]);
        assert!(largest <= MAX_FRAME, "a frame of {largest} bytes");
    }
}

#[test]
fn broken_or_endless_blocks_end_the_connection() {
    let mut encoder = Encoder::new();
    let block = encode(&mut encoder, &request("/tmp/x.sock", "/a/b"));
    let interrupted = [
        PREFACE.to_vec(),
        frame(HEADERS, 0, 1, &block),
        frame(DATA, 0, 1, b"data"),
    ]
    .concat();
    // An index no table has.
    let not_hpack = [
        PREFACE.to_vec(),
        frame(HEADERS, END_HEADERS, 1, &[0xff, 0xff, 0x7f]),
    ]
    .concat();
    let mut endless = PREFACE.to_vec();
    endless.extend(frame(HEADERS, 0, 1, &block));
    while endless.len() < 2 * MAX_BLOCK {
        endless.extend(frame(CONTINUATION, 0, 1, &[0x40; 1024]));
    }
    for (name, bytes) in [
        ("interrupted", interrupted),
        ("not HPACK", not_hpack),
        ("endless", endless),
    ] {
        let (read, _) = read_through(&bytes, 64 * 1024);
        let error = read.expect_err(name);
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{name}: {error}");
    }
}
