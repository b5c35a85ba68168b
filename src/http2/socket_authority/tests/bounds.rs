//! What a hostile client may cost the mender before it is authenticated: its HPACK table, its
//! header lists, its CONTINUATION frames and the output waiting for h2, each bounded.

use bytes::BytesMut;
use loona_hpack::encoder::encode_integer;

use super::*;
use crate::http2::socket_authority::{frames::Block, hpack::Mender};

/// An HPACK dynamic table size update to `size` (RFC 7541 §6.3).
fn size_update(size: usize) -> Vec<u8> {
    let mut bytes = encode_integer(size, 5);
    bytes[0] |= 0x20;
    bytes
}

/// A literal field added to the table, its name `index` of the static table (§6.2.1).
fn indexed_literal(index: usize, value: &[u8]) -> Vec<u8> {
    let mut bytes = encode_integer(index, 6);
    bytes[0] |= 0x40;
    bytes.extend(encode_integer(value.len(), 7));
    bytes.extend_from_slice(value);
    bytes
}

/// The field at `index` of the tables (§6.1).
fn indexed(index: usize) -> u8 {
    assert!(index < 127);
    0x80 | index as u8
}

/// `user-agent`'s index in the static table: a name h2's encoder finds there, so a value of
/// the client's is written out in full each time it is referred to.
const USER_AGENT: usize = 58;
/// The newest entry of the dynamic table.
const NEWEST: usize = 62;

/// A connection whose first block names a socket path (so that every block is mended).
fn mended_connection(encoder: &mut Encoder<'_>) -> Vec<u8> {
    let block = encode(encoder, &request("/tmp/x.sock", "/a/b"));
    [PREFACE.to_vec(), frame(HEADERS, END_HEADERS, 1, &block)].concat()
}

/// Checks that the connection ended with an error that `says` so.
fn ends_with(replay: &Replay, says: &str, case: &str) {
    let error = replay.read.as_ref().expect_err(case);
    assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{case}: {error}");
    assert!(error.to_string().contains(says), "{case}: {error}");
}

#[test]
fn a_table_size_update_over_the_advertised_size_ends_the_connection() {
    // 25 KB of fields to keep, within a block's bytes.
    let fill: Vec<u8> = (0..250)
        .flat_map(|i| indexed_literal(USER_AGENT, format!("{i:0>100}").as_bytes()))
        .collect();
    let request = encode(&mut Encoder::new(), &request("/tmp/x.sock", "/a/b"));
    let huge = [size_update(1 << 28), fill.clone(), request.clone()].concat();
    let first = [PREFACE.to_vec(), frame(HEADERS, END_HEADERS, 1, &huge)].concat();
    let mut later = mended_connection(&mut Encoder::new());
    later.extend(frame(HEADERS, END_HEADERS, 3, &huge));
    for (name, bytes) in [("first block", first), ("a later block", later)] {
        let replay = replay(&bytes, 64 * 1024);
        ends_with(&replay, "table size update over the size advertised", name);
        assert!(
            replay.held < 64 * 1024,
            "{name}: {} bytes held",
            replay.held
        );
    }
    // Up to the size advertised, as HPACK allows.
    for size in [0, HEADER_TABLE_SIZE] {
        let block = [size_update(size), request.clone()].concat();
        let bytes = [PREFACE.to_vec(), frame(HEADERS, END_HEADERS, 1, &block)].concat();
        let replay = replay(&bytes, 4096);
        assert!(
            replay.read.is_ok() && replay.mending,
            "{size}: {:?}",
            replay.read
        );
    }
}

#[test]
fn a_header_list_over_the_cap_is_refused_before_it_is_encoded() {
    // The client's table holds a 3,000-byte user-agent; each byte that refers to it decodes to
    // 3,042 bytes of header list.
    let big = indexed_literal(USER_AGENT, &[b'a'; 3_000]);
    let mut mender = Mender::default();
    let mut out = BytesMut::new();
    let block = |fragment: Vec<u8>| Block {
        fragment: fragment.into(),
        stream: 1,
        end_stream: false,
    };
    mender.write(&block(big), &mut out).unwrap();
    let under = vec![indexed(NEWEST); 5];
    mender.write(&block(under), &mut out).unwrap();
    let written = out.len();
    // 6 × 3,042 bytes: over 16 KiB.
    let over = vec![indexed(NEWEST); 6];
    let error = mender.write(&block(over), &mut out).unwrap_err();
    assert!(error.to_string().contains("header list over"), "{error}");
    assert_eq!(out.len(), written, "a block over the cap was written");
    assert!(mender.encoded_len() <= MAX_HEADER_LIST_SIZE as usize);

    // Over a connection: the same refusal ends it.
    let mut bytes = mended_connection(&mut Encoder::new());
    bytes.extend(frame(
        HEADERS,
        END_HEADERS,
        3,
        &indexed_literal(USER_AGENT, &[b'a'; 3_000]),
    ));
    bytes.extend(frame(HEADERS, END_HEADERS, 5, &[indexed(NEWEST); 1_000]));
    ends_with(
        &replay(&bytes, 4096),
        "header list over the size advertised",
        "",
    );
}

#[test]
fn mended_output_waits_for_h2_before_more_is_read() {
    // 2,000 blocks of 13 bytes, each decoding to 12 KiB that h2's encoder writes out in full:
    // 24 MiB to h2 from 26 KB of input, never held at once.
    let mut bytes = mended_connection(&mut Encoder::new());
    bytes.extend(frame(
        HEADERS,
        END_HEADERS,
        3,
        &indexed_literal(USER_AGENT, &[b'a'; 3_000]),
    ));
    for stream in 0..2_000 {
        bytes.extend(frame(
            HEADERS,
            END_HEADERS,
            5 + 2 * stream,
            &[indexed(NEWEST); 4],
        ));
    }
    let replay = replay(&bytes, 64 * 1024);
    let read = replay.read.unwrap();
    assert!(read.len() > 24_000_000, "{} bytes to h2", read.len());
    assert!(replay.held < 64 * 1024, "{} bytes held", replay.held);
}

#[test]
fn each_frame_of_a_block_is_walked_once_however_slowly_it_comes() {
    let mut encoder = Encoder::new();
    let mut bytes = PREFACE.to_vec();
    let blocks = 50;
    for stream in 0..blocks {
        let mut fields = request("/tmp/x.sock", "/a/b");
        fields.push((b"x-stream".to_vec(), stream.to_string().into_bytes()));
        let block = encode(&mut encoder, &fields);
        let piece = block.len().div_ceil(MAX_BLOCK_FRAMES);
        let pieces: Vec<&[u8]> = block.chunks(piece).collect();
        assert_eq!(pieces.len(), MAX_BLOCK_FRAMES);
        for (i, piece) in pieces.iter().enumerate() {
            let kind = if i == 0 { HEADERS } else { CONTINUATION };
            let flags = if i + 1 == pieces.len() {
                END_HEADERS
            } else {
                0
            };
            bytes.extend(frame(kind, flags, 1 + 2 * stream, piece));
        }
    }
    for step in [1, 10, 4096] {
        let replay = replay(&bytes, step);
        let (seen, _) = as_h2_reads(&replay.read.unwrap());
        assert_eq!(seen.len(), blocks as usize);
        let frames = (blocks as usize * MAX_BLOCK_FRAMES) as u64;
        assert_eq!(replay.walked, frames, "fed {step} bytes at a time");
    }
}

#[test]
fn a_continuation_flood_ends_the_connection_at_the_bound() {
    let block = encode(&mut Encoder::new(), &request("/tmp/x.sock", "/a/b"));
    let (head, tail) = block.split_at(block.len() / 2);
    let flood = |stream: u32| {
        let mut bytes = frame(HEADERS, 0, stream, head);
        for _ in 0..100_000 {
            bytes.extend(frame(CONTINUATION, 0, stream, &[]));
        }
        bytes.extend(frame(CONTINUATION, END_HEADERS, stream, tail));
        bytes
    };
    let first = [PREFACE.to_vec(), flood(1)].concat();
    let later = [mended_connection(&mut Encoder::new()), flood(3)].concat();
    for (name, bytes, before) in [("first block", first, 0), ("a later block", later, 1)] {
        let replay = replay(&bytes, 4096);
        ends_with(&replay, "too many CONTINUATION frames", name);
        let walked = replay.walked - before;
        assert_eq!(walked, MAX_BLOCK_FRAMES as u64, "{name}");
        assert!(
            replay.held < 64 * 1024,
            "{name}: {} bytes held",
            replay.held
        );
    }
    // A block of the most frames allowed passes.
    let mut bytes = frame(HEADERS, 0, 1, head);
    for _ in 0..MAX_BLOCK_FRAMES - 2 {
        bytes.extend(frame(CONTINUATION, 0, 1, &[]));
    }
    bytes.extend(frame(CONTINUATION, END_HEADERS, 1, tail));
    let replay = replay(&[PREFACE, &bytes].concat(), 4096);
    assert!(replay.read.is_ok() && replay.mending, "{:?}", replay.read);
}

#[test]
fn a_block_over_its_bytes_ends_the_connection_before_it_is_read() {
    // Only the frames' headers are sent: each announces more than a block may hold in all.
    let announce = |len: usize, kind: u8| {
        let mut head = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, 0];
        head.extend(1u32.to_be_bytes());
        head
    };
    let one = [PREFACE.to_vec(), announce(MAX_BLOCK, HEADERS)].concat();
    let mut two = PREFACE.to_vec();
    two.extend(frame(HEADERS, 0, 1, &vec![0x40; MAX_BLOCK / 2]));
    two.extend(announce(MAX_BLOCK / 2, CONTINUATION));
    for (name, bytes) in [("one frame", one), ("two frames", two)] {
        ends_with(&replay(&bytes, 4096), "header block too large", name);
    }
    // A DATA frame is no header block: it passes as it comes, whatever it announces.
    let data = [PREFACE.to_vec(), announce(1 << 20, DATA), vec![7; 100]].concat();
    assert_eq!(replay(&data, 16).read.unwrap(), data);
}
