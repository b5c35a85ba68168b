//! What mending a Unix-socket client's `:authority` costs: one connection of unary calls (a
//! HEADERS block as grpcio writes it, HPACK with indexing, and a DATA frame each) read through
//! the broker's `LocalAuthority` in this process, with the socket's path as the authority
//! (every block decoded and encoded again), with `localhost` (decided on the first block,
//! then passed on), and read plainly (the baseline). Medians of interleaved rounds.

use std::time::{Duration, Instant};

use loona_hpack::Encoder;
use tokio::io::AsyncReadExt as _;
use toolbroker::http2::socket_authority::LocalAuthority;

use crate::Plan;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Runs the scenario.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let (calls, rounds) = if plan.quick { (1_000, 3) } else { (20_000, 9) };
    println!(
        "\n## A Unix-socket client's authority: {calls} unary calls read in this process, medians of {rounds} rounds"
    );
    let mended = connection(calls, "tmp%2Ftoolbroker.sock");
    let untouched = connection(calls, "localhost");
    let (mut plain, mut kept, mut rewritten) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        plain.push(read(&untouched, false, calls).await?);
        kept.push(read(&untouched, true, calls).await?);
        rewritten.push(read(&mended, true, calls).await?);
    }
    let per_call = |times: &mut Vec<Duration>| {
        times.sort();
        times[times.len() / 2].as_nanos() as f64 / calls as f64
    };
    let (plain, kept, rewritten) = (
        per_call(&mut plain),
        per_call(&mut kept),
        per_call(&mut rewritten),
    );
    println!("read as they are (the baseline)         {plain:8.0} ns per call");
    println!("authority localhost: decided, untouched {kept:8.0} ns per call");
    println!(
        "authority a socket path: rewritten      {rewritten:8.0} ns per call (+{:.0} ns over untouched)",
        rewritten - kept
    );
    Ok(())
}

/// Reads `bytes` to the end (through `LocalAuthority` when `wrapped`), and checks what came
/// out: untouched bytes come back identical, mended ones keep every call and no path.
async fn read(bytes: &[u8], wrapped: bool, calls: usize) -> anyhow::Result<Duration> {
    let mut out = Vec::with_capacity(bytes.len() + 1024);
    let started = Instant::now();
    if wrapped {
        LocalAuthority::new(bytes).read_to_end(&mut out).await?;
    } else {
        let mut plain = bytes;
        plain.read_to_end(&mut out).await?;
    }
    let took = started.elapsed();
    let has_path = out.windows(7).any(|w| w == b"tmp%2Ft");
    if has_path {
        anyhow::bail!("a socket path survived the rewrite");
    }
    if !bytes.windows(7).any(|w| w == b"tmp%2Ft") {
        anyhow::ensure!(out == bytes, "untouched bytes changed");
    } else {
        let data = out.windows(5).filter(|w| *w == b"hello").count();
        anyhow::ensure!(data == calls, "{data} of {calls} calls came through");
    }
    Ok(took)
}

/// A client's connection: the preface, SETTINGS, then `calls` requests on streams 1, 3, 5...
fn connection(calls: usize, authority: &str) -> Vec<u8> {
    let mut encoder = Encoder::new();
    let mut bytes = PREFACE.to_vec();
    frame(&mut bytes, 0x4, 0, 0, &[]);
    for call in 0..calls {
        let stream = 1 + 2 * call as u32;
        let fields: [(&[u8], &[u8]); 9] = [
            (b":path", b"/toolbroker.v1.ToolBroker/CallTool"),
            (b":authority", authority.as_bytes()),
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
            (b"grpc-accept-encoding", b"identity, deflate, gzip"),
            (b"grpc-timeout", b"19999m"),
            (
                b"user-agent",
                b"grpc-python/1.85.1 grpc-c/58.0.0 (linux; chttp2)",
            ),
        ];
        let block = encoder.encode(fields);
        frame(&mut bytes, 0x1, 0x4, stream, &block);
        frame(&mut bytes, 0x0, 0x1, stream, b"\0\0\0\0\x07\n\x05hello");
    }
    bytes
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len();
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}
