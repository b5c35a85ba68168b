//! The writer over an in-memory pipe of small capacity, whose reader reads only when told.

use std::{pin::pin, time::Duration};

use proptest::prelude::*;
use tokio::io::{AsyncReadExt as _, DuplexStream, duplex};

use super::*;

/// A JSON line of about `size` bytes, numbered `n`.
fn message(n: usize, size: usize) -> serde_json::Value {
    serde_json::json!({ "jsonrpc": "2.0", "method": "m", "params": { "n": n, "pad": "p".repeat(size) } })
}

/// A writer to a pipe of `capacity` bytes, and the pipe's other end.
fn writer(capacity: usize) -> (Arc<Writer<DuplexStream>>, DuplexStream) {
    let (ours, theirs) = duplex(capacity);
    (Writer::new(ours), theirs)
}

/// Everything the other end reads until the pipe closes, as lines, each of which must be JSON:
/// the `n` of each.
async fn read_all(mut theirs: DuplexStream) -> Vec<u64> {
    let mut bytes = Vec::new();
    theirs.read_to_end(&mut bytes).await.expect("read");
    lines(&bytes)
}

fn lines(bytes: &[u8]) -> Vec<u64> {
    assert!(
        bytes.is_empty() || bytes.ends_with(b"\n"),
        "a partial last line"
    );
    bytes
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| {
            let value: serde_json::Value = serde_json::from_slice(line)
                .unwrap_or_else(|e| panic!("a bad line ({e}): {}", String::from_utf8_lossy(line)));
            value["params"]["n"].as_u64().expect("numbered")
        })
        .collect()
}

/// Polls `future` once: it must be waiting.
async fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) {
    let polled = futures::poll!(future);
    assert!(polled.is_pending(), "still waiting");
}

#[tokio::test]
async fn a_write_dropped_mid_line_is_finished_with_the_lines_queued_behind_it() {
    let (writer, theirs) = writer(64);
    let first = writer.push(None, &message(1, 10_000)).expect("queued");
    let mut writing = Box::pin(writer.clone().write(first));
    poll_once(writing.as_mut()).await;
    // Queued behind it, its writer waiting for the pipe.
    let second = writer.push(None, &message(2, 100)).expect("queued");
    let mut waiting = Box::pin(writer.clone().write(second));
    poll_once(writing.as_mut()).await;
    poll_once(waiting.as_mut()).await;
    drop(writing);
    let reader = tokio::spawn(read_all(theirs));
    waiting.await.expect("written after the first");
    writer.close().await;
    assert_eq!(reader.await.expect("read"), [1, 2]);
}

#[tokio::test]
async fn a_line_given_up_before_its_write_started_never_appears() {
    let (writer, theirs) = writer(64);
    let first = writer.push(None, &message(1, 1_000)).expect("queued");
    let mut writing = pin!(writer.clone().write(first));
    poll_once(writing.as_mut()).await;
    let second = writer.push(Some(7), &message(2, 1_000)).expect("queued");
    let third = writer.push(None, &message(3, 1_000)).expect("queued");
    let fourth = writer.push(None, &message(4, 10)).expect("queued");
    {
        let mut waiting = pin!(writer.clone().write(second));
        poll_once(waiting.as_mut()).await;
    }
    assert!(writer.withdraw(second), "no write took it");
    assert!(!writer.withdraw_request(7), "once");
    assert!(writer.withdraw(third));
    let reader = tokio::spawn(read_all(theirs));
    writing.await.expect("written");
    writer.clone().write(fourth).await.expect("written");
    writer.close().await;
    assert_eq!(reader.await.expect("read"), [1, 4]);
}

#[tokio::test]
async fn closing_does_not_wait_for_a_stalled_write_which_closes_the_pipe_when_done() {
    let (writer, theirs) = writer(64);
    let first = writer.push(None, &message(1, 1_000)).expect("queued");
    let mut writing = Box::pin(writer.clone().write(first));
    poll_once(writing.as_mut()).await;
    drop(writing);
    let queued = writer.push(None, &message(2, 10)).expect("queued");
    tokio::time::timeout(Duration::from_secs(5), writer.close())
        .await
        .expect("closed at once");
    let refused = writer.push(None, &message(3, 10)).expect_err("closed");
    assert_eq!(refused.kind(), io::ErrorKind::NotConnected);
    // The line under way is finished, then the pipe closes: end of file. What was queued is
    // not written.
    let reader = tokio::spawn(read_all(theirs));
    let error = writer.clone().write(queued).await.expect_err("closed");
    assert_eq!(error.kind(), io::ErrorKind::NotConnected);
    assert_eq!(reader.await.expect("read"), [1]);
}

#[test]
fn without_a_runtime_a_write_cut_short_closes_the_pipe() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let (writer, mut theirs) = writer(64);
    let first = writer.push(None, &message(1, 1_000)).expect("queued");
    let mut writing = Box::pin(writer.clone().write(first));
    runtime.block_on(poll_once(writing.as_mut()));
    // Dropped outside the runtime: nothing can finish the line.
    drop(writing);
    let refused = writer.push(None, &message(2, 10)).expect_err("failed");
    assert_eq!(refused.kind(), io::ErrorKind::BrokenPipe);
    let read = runtime.block_on(async {
        let mut bytes = Vec::new();
        theirs.read_to_end(&mut bytes).await.expect("read");
        bytes
    });
    assert_eq!(read.len(), 64, "the partial line, then the end of the pipe");
}

/// One caller of a property test: a line of `size` bytes, given up after `patience` polls
/// (`None`: waits until written).
#[derive(Debug, Clone)]
struct Caller {
    size: usize,
    patience: Option<u8>,
}

fn caller() -> impl Strategy<Value = Caller> {
    (1usize..3_000, prop::option::weighted(0.6, 0u8..6))
        .prop_map(|(size, patience)| Caller { size, patience })
}

/// Runs `callers` at once against a pipe of `capacity` read in small chunks: the numbers of the
/// lines read, and those of the lines not withdrawn, in the order they were queued.
async fn run(callers: Vec<Caller>, capacity: usize) -> (Vec<u64>, Vec<u64>) {
    let (writer, mut theirs) = writer(capacity);
    let reader = tokio::spawn(async move {
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 97];
        loop {
            match theirs.read(&mut chunk).await.expect("read") {
                0 => return bytes,
                n => bytes.extend_from_slice(&chunk[..n]),
            }
            tokio::task::yield_now().await;
        }
    });
    let tasks: Vec<_> = callers
        .into_iter()
        .enumerate()
        .map(|(n, caller)| {
            let writer = writer.clone();
            tokio::spawn(async move {
                let ticket = writer
                    .push(Some(n as i64), &message(n, caller.size))
                    .expect("queued");
                let kept = Some((ticket, n as u64));
                let Some(patience) = caller.patience else {
                    writer.clone().write(ticket).await.expect("written");
                    return kept;
                };
                let write = writer.clone().write(ticket);
                let yields = async {
                    for _ in 0..patience {
                        tokio::task::yield_now().await;
                    }
                };
                tokio::select! {
                    biased;
                    written = write => written.expect("written"),
                    () = yields => {}
                }
                if writer.withdraw(ticket) { None } else { kept }
            })
        })
        .collect();
    let mut kept = Vec::new();
    for task in tasks {
        kept.extend(task.await.expect("caller"));
    }
    kept.sort();
    writer.close().await;
    drop(writer);
    let bytes = reader.await.expect("reader");
    (lines(&bytes), kept.into_iter().map(|(_, n)| n).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Callers that write at once and give up at random points: the server reads exactly the
    /// lines of the callers that did not withdraw theirs, each whole, in the order queued.
    #[test]
    fn the_reader_sees_every_line_not_withdrawn_whole_and_in_order(
        callers in prop::collection::vec(caller(), 1..16),
        capacity in 16usize..512,
        threads in prop::bool::ANY,
    ) {
        let runtime = if threads {
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
        } else {
            tokio::runtime::Builder::new_current_thread().enable_all().build()
        }
        .expect("runtime");
        let (read, kept) = runtime.block_on(run(callers, capacity));
        prop_assert_eq!(read, kept);
    }
}
