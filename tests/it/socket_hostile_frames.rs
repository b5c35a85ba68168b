//! What a client that has not authenticated may cost the broker on its Unix socket, where a
//! socket path as `:authority` has every header block decoded and encoded again by the broker
//! (`grpc::socket_authority`): HTTP/2 frames written by hand that grow the HPACK table or flood
//! CONTINUATION frames, the broker's memory and CPU read from /proc before and after, and an
//! authorized call answered after.

use std::{path::Path, time::Duration};

use crate::common::{
    self, WAIT, as_caller, call_request,
    h2_raw::{ACK, CONTINUATION, END_HEADERS, END_STREAM, HEADERS, PING, PREFACE, SETTINGS, frame},
    process,
    unix::{broker_on_socket, socket_channel},
    wait_health,
};
use loona_hpack::{Encoder, encoder::encode_integer};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::UnixStream,
};
use toolbroker::{
    http2::socket_authority::{HEADER_TABLE_SIZE, MAX_HEADER_LIST_SIZE},
    proto::tool_broker_client::ToolBrokerClient,
};

const TOKEN: &str = "hostile-frames-token";

/// A header block cut into frames of at most 16 KiB, as h2 accepts them.
fn block(stream: u32, fragment: &[u8]) -> Vec<u8> {
    let pieces: Vec<&[u8]> = fragment.chunks(16 * 1024).collect();
    let mut out = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        let kind = if i == 0 { HEADERS } else { CONTINUATION };
        let flags = if i + 1 == pieces.len() {
            END_HEADERS
        } else {
            0
        };
        out.extend(frame(kind, flags, stream, piece));
    }
    out
}

/// An HPACK integer of `prefix` bits after the bits of `mask` (RFC 7541 §5.1).
fn with_prefix(value: usize, prefix: u8, mask: u8) -> Vec<u8> {
    let mut bytes = encode_integer(value, prefix);
    bytes[0] |= mask;
    bytes
}

/// An HPACK string literal, without Huffman coding (§5.2).
fn text(bytes: &[u8]) -> Vec<u8> {
    [encode_integer(bytes.len(), 7), bytes.to_vec()].concat()
}

/// A field not added to the table, its name `index` of the static table (§6.2.2).
fn literal(index: usize, value: &[u8]) -> Vec<u8> {
    [with_prefix(index, 4, 0), text(value)].concat()
}

/// grpcio's first request: the socket's path as the authority, so the broker mends.
fn first_request() -> Vec<u8> {
    let fields: [(&[u8], &[u8]); 5] = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/toolbroker.v1.ToolBroker/ListTools"),
        (b":authority", b"tmp%2Ftoolbroker.sock"),
        (b"content-type", b"application/grpc"),
    ];
    block(1, &Encoder::new().encode(fields))
}

/// A connection to the socket, HTTP/2 written and read by hand.
struct Raw {
    stream: UnixStream,
}

impl Raw {
    /// Connects, sends the preface and empty SETTINGS, and returns the SETTINGS the broker
    /// sent first as (identifier, value) pairs.
    async fn connect(socket: &Path) -> (Raw, Vec<(u16, u32)>) {
        let mut raw = Raw {
            stream: UnixStream::connect(socket).await.expect("connect"),
        };
        raw.send(&[PREFACE, &frame(SETTINGS, 0, 0, &[])].concat())
            .await;
        let (kind, _, payload) = raw.next().await.expect("the broker's SETTINGS");
        assert_eq!(kind, SETTINGS);
        let settings = payload
            .chunks(6)
            .map(|s| {
                (
                    u16::from_be_bytes([s[0], s[1]]),
                    u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
                )
            })
            .collect();
        raw.send(&frame(SETTINGS, ACK, 0, &[])).await;
        (raw, settings)
    }

    /// Sends bytes; a broker that closed the connection is not an error here.
    async fn send(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes).await;
    }

    /// The next frame (type, flags, payload), or `None` once the broker closed.
    async fn next(&mut self) -> Option<(u8, u8, Vec<u8>)> {
        let mut head = [0; 9];
        self.stream.read_exact(&mut head).await.ok()?;
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let mut payload = vec![0; len];
        self.stream.read_exact(&mut payload).await.ok()?;
        Some((head[3], head[4], payload))
    }

    /// Sends a PING and waits until the broker has read everything before it: its PING ACK
    /// comes, or the connection ends. Whether it ended.
    async fn settled(mut self) -> bool {
        self.send(&frame(PING, 0, 0, b"settled!")).await;
        let answered = tokio::time::timeout(WAIT, async {
            while let Some((kind, flags, payload)) = self.next().await {
                if kind == PING && flags & ACK != 0 && payload == b"settled!" {
                    return false;
                }
            }
            true
        });
        answered.await.expect("the broker read it all in time")
    }
}

/// The broker's resident memory (bytes) and CPU time used so far.
fn usage(pid: u32) -> (u64, Duration) {
    (process::rss_kib(pid) * 1024, process::cpu_time(pid))
}

/// A broker on a socket, ready (its demo server connected), with a socket's path.
async fn ready_broker(dir: &tempfile::TempDir) -> (common::Broker, std::path::PathBuf) {
    let socket = dir.path().join("grpc.sock");
    let broker = broker_on_socket(&socket, TOKEN).await;
    wait_health(socket_channel(&socket).await, "toolbroker.v1.ToolBroker").await;
    (broker, socket)
}

/// An authorized call over the socket, answered.
async fn call_answers(socket: &Path) {
    let mut client = ToolBrokerClient::new(socket_channel(socket).await);
    let request = as_caller(
        Some(TOKEN),
        &[],
        call_request("echo", r#"{"message":"still"}"#),
    );
    let answer = client.call_tool(request).await.expect("an authorized call");
    assert_eq!(answer.into_inner().text, "still");
}

#[tokio::test]
async fn a_table_size_update_and_a_table_filled_cost_the_broker_no_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, socket) = ready_broker(&dir).await;
    let (mut raw, settings) = Raw::connect(&socket).await;
    // What the broker advertises is what the mender holds socket clients to.
    let setting = |id: u16| settings.iter().find(|(i, _)| *i == id).map(|(_, v)| *v);
    let table = setting(0x1).map_or(4096, |v| v as usize);
    assert_eq!(table, HEADER_TABLE_SIZE, "{settings:?}");
    assert_eq!(setting(0x6), Some(MAX_HEADER_LIST_SIZE), "{settings:?}");
    assert_eq!(setting(0x5).unwrap_or(16_384), 16_384, "{settings:?}");

    let before = usage(broker.pid());
    // The table allowed 256 MiB, then 800 requests (none authenticated) that each add 14 fields
    // of 1 KB to it, each request within what h2 accepts (one frame, a list under 16 KiB): 12 MB
    // the client's table would hold.
    let mut attack = first_request();
    for n in 0..800u32 {
        let mut fragment = Vec::new();
        if n == 0 {
            fragment.extend(with_prefix(1 << 28, 5, 0x20));
        }
        fragment.extend([0x83, 0x86]);
        fragment.extend(literal(4, b"/toolbroker.v1.ToolBroker/ListTools"));
        fragment.extend(literal(1, b"tmp%2Ftoolbroker.sock"));
        fragment.extend(literal(31, b"application/grpc"));
        for field in 0..14 {
            let name = format!("x-fill-{n}-{field}");
            // A literal added to the table, its name a literal too (§6.2.1).
            fragment.push(0x40);
            fragment.extend(text(name.as_bytes()));
            fragment.extend(text(&[b'v'; 1_000]));
        }
        attack.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            3 + 2 * n,
            &fragment,
        ));
    }
    raw.send(&attack).await;
    let closed = raw.settled().await;
    let after = usage(broker.pid());
    let grew = after.0.saturating_sub(before.0);
    assert!(grew < 4 << 20, "the broker's RSS grew {grew} bytes");
    assert!(
        closed,
        "a table size update over the size advertised left the connection open"
    );
    call_answers(&socket).await;
}

#[tokio::test]
async fn a_continuation_flood_costs_the_broker_no_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, socket) = ready_broker(&dir).await;
    let (mut raw, _) = Raw::connect(&socket).await;
    let before = usage(broker.pid());
    // A header block of 100,000 empty CONTINUATION frames: 900 KB, under the 1 MiB a block
    // once could be.
    // Written a frame at a time, as a client trickles them.
    raw.send(&[first_request(), frame(HEADERS, 0, 3, &[0x82])].concat())
        .await;
    let empty = frame(CONTINUATION, 0, 3, &[]);
    for _ in 0..100_000 {
        raw.send(&empty).await;
    }
    raw.send(&frame(CONTINUATION, END_HEADERS, 3, &[0x86]))
        .await;
    let closed = raw.settled().await;
    let after = usage(broker.pid());
    let cpu = after.1.saturating_sub(before.1);
    assert!(
        cpu < Duration::from_millis(300),
        "the flood cost {cpu:?} of CPU"
    );
    assert!(closed, "a CONTINUATION flood left the connection open");
    call_answers(&socket).await;
}
