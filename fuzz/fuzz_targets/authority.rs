//! `http2::socket_authority::replay` on any connection after the preface, read a few bytes at a
//! time (the first input byte says how many): the authority mender must never panic, must hold
//! bounded memory and walk each frame once, and what it hands h2 is either the client's bytes
//! unchanged or the same frames with every header block decoding to the client's fields,
//! `:authority` as `localhost`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loona_hpack::Decoder;
use toolbroker::http2::socket_authority::replay;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Twice what the mender may hold: a block, a read, and the output waiting for h2.
const MOST_HELD: usize = 256 * 1024;

fuzz_target!(|input: &[u8]| {
    let Some((&step, body)) = input.split_first() else {
        return;
    };
    let step = match step {
        0..128 => usize::from(step) + 1,
        _ => usize::from(step - 127) * 512,
    };
    let bytes = [PREFACE, body].concat();
    let replay = replay(&bytes, step);
    assert!(replay.held <= MOST_HELD, "{} bytes held", replay.held);
    let frames = body.len() / 9;
    assert!(replay.walked <= frames as u64, "{} walks", replay.walked);
    let Ok(read) = replay.read else {
        return;
    };
    if !replay.mending {
        assert!(read == bytes, "an undecided or passing connection changed");
        return;
    }
    let (sent, sent_tail) = as_h2_reads(&bytes[PREFACE.len()..]).expect("the client's blocks");
    let (seen, seen_tail) = as_h2_reads(&read[PREFACE.len()..]).expect("the mended blocks");
    assert_eq!(sent_tail, seen_tail, "the cut end changed");
    assert_eq!(sent.len(), seen.len());
    for (sent, seen) in sent.into_iter().zip(seen) {
        match (sent, seen) {
            (Seen::Block(stream, end, mut fields), seen) => {
                for (name, value) in &mut fields {
                    if name == b":authority" {
                        *value = b"localhost".to_vec();
                    }
                }
                assert_eq!(Seen::Block(stream, end, fields), seen);
            }
            (sent, seen) => assert_eq!(sent, seen),
        }
    }
});

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// What h2 reads: header blocks (stream, END_STREAM, fields) or other frames as they are.
#[derive(Debug, PartialEq)]
enum Seen {
    Block(u32, bool, Fields),
    Other(Vec<u8>),
}

/// Reads frames, written independently of the mender's own reading: the whole frames and
/// blocks, and the bytes from where a cut frame or block starts. `None`: a block that does not
/// decode, or a CONTINUATION frame out of place.
fn as_h2_reads(mut bytes: &[u8]) -> Option<(Vec<Seen>, &[u8])> {
    let mut decoder = Decoder::new();
    let mut seen = Vec::new();
    loop {
        let Some((kind, flags, stream, len)) = head(bytes) else {
            return Some((seen, bytes));
        };
        if bytes.len() < 9 + len {
            return Some((seen, bytes));
        }
        match kind {
            0x9 => return None,
            0x1 => {}
            _ => {
                seen.push(Seen::Other(bytes[..9 + len].to_vec()));
                bytes = &bytes[9 + len..];
                continue;
            }
        }
        let Some((block, end)) = block(bytes) else {
            return Some((seen, bytes));
        };
        let fields = decoder.decode(&block?).ok()?;
        seen.push(Seen::Block(stream, flags & 0x1 != 0, fields));
        bytes = &bytes[end..];
    }
}

/// The frame header at the start of `bytes`: type, flags, stream, length.
fn head(bytes: &[u8]) -> Option<(u8, u8, u32, usize)> {
    let h = bytes.get(..9)?;
    let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
    let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
    Some((h[3], h[4], stream, len))
}

/// The fragments of the block at the start of `bytes` joined, and where it ends; `None`
/// while it is cut (whatever its first frame says: its padding is read once it is whole);
/// `Some((None, _))` if it is malformed.
fn block(bytes: &[u8]) -> Option<(Option<Vec<u8>>, usize)> {
    let (_, flags, stream, len) = head(bytes)?;
    let mut payload = bytes.get(9..9 + len)?;
    let mut continuations = Vec::new();
    let mut end = 9 + len;
    let mut last = flags;
    while last & 0x4 == 0 {
        let (kind, flags, next, len) = head(&bytes[end..])?;
        let more = bytes.get(end + 9..end + 9 + len)?;
        if kind != 0x9 || next != stream {
            return Some((None, 0));
        }
        continuations.push(more);
        end += 9 + len;
        last = flags;
    }
    let mut pad = 0;
    if flags & 0x8 != 0 {
        let Some((&n, rest)) = payload.split_first() else {
            return Some((None, 0));
        };
        pad = usize::from(n);
        payload = rest;
    }
    if flags & 0x20 != 0 {
        let Some(rest) = payload.get(5..) else {
            return Some((None, 0));
        };
        payload = rest;
    }
    let Some(keep) = payload.len().checked_sub(pad) else {
        return Some((None, 0));
    };
    let mut fragment = payload[..keep].to_vec();
    for more in continuations {
        fragment.extend_from_slice(more);
    }
    Some((Some(fragment), end))
}
