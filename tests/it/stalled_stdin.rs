//! A stdio server that stops reading its stdin while calls arrive, and callers that give up
//! while their requests are queued or half written: the calls still waiting are answered once
//! the server reads again, those given up affect only themselves, and the server never reads a
//! partial line. The server is `tests/python/stalling_mcp_server.py`, which checks every line
//! it reads and reports what it read.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use futures::{StreamExt as _, stream::FuturesUnordered};

use crate::common::{self, Broker, Server, call_request, command};
use serde_json::Value;
use tonic::Code;

/// The stalling server over stdio (standard-library Python: no venv needed).
fn stalling(name: &str) -> Server {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/stalling_mcp_server.py"
    );
    command(name, "python3", &[script])
}

async fn start() -> Broker {
    let broker = Broker::builder()
        .top("metrics_listen", "127.0.0.1:0")
        .server(stalling("slow"))
        .start()
        .await;
    broker.wait_ready().await;
    broker
}

/// One `echo` call of a test: its message is tagged (the server reports requests by tag) and
/// its caller gives up after `patience` (by its gRPC deadline, or by resetting its stream).
struct Call {
    tag: String,
    arguments: String,
    patience: Duration,
    /// Gives up by resetting its stream (RST_STREAM) rather than by a deadline.
    resets: bool,
}

/// What became of a call: its text or its status code (`None`: it reset its stream), and when.
struct Outcome<'a> {
    call: &'a Call,
    result: Result<String, Option<Code>>,
    after: Duration,
}

impl Call {
    /// A call of `size` bytes that waits `patience` at most (its deadline).
    fn new(tag: String, size: usize, patience: Duration) -> Self {
        let message = format!("{tag}:{}", "m".repeat(size));
        Self {
            arguments: serde_json::json!({ "message": message }).to_string(),
            tag,
            patience,
            resets: false,
        }
    }

    /// The message it sends.
    fn message(&self) -> String {
        let arguments: Value = serde_json::from_str(&self.arguments).expect("JSON");
        arguments["message"].as_str().expect("a message").to_owned()
    }

    async fn run(&self, broker: &Broker) -> Outcome<'_> {
        let mut request = tonic::Request::new(call_request("echo", &self.arguments));
        if !self.resets {
            request.set_timeout(self.patience);
        }
        let started = Instant::now();
        let mut client = broker.client.clone();
        let call = client.call_tool(request);
        let answer = if self.resets {
            tokio::time::timeout(self.patience, call).await.ok()
        } else {
            Some(call.await)
        };
        let result = match answer {
            Some(Ok(response)) => Ok(response.into_inner().text),
            Some(Err(status)) => Err(Some(status.code())),
            None => Err(None),
        };
        Outcome {
            call: self,
            result,
            after: started.elapsed(),
        }
    }
}

/// What the server read so far (see the script's `report`).
async fn report(broker: &Broker) -> Value {
    let text = broker.text("report", "{}").await;
    serde_json::from_str(&text).expect("the report is JSON")
}

/// Tells the server to read nothing for `stall`.
async fn stall(broker: &Broker, stall: Duration) {
    let ms = stall.as_millis();
    let text = broker.text("stall", &format!(r#"{{"ms": {ms}}}"#)).await;
    assert_eq!(text, format!("stalling {ms} ms"));
}

/// The tags listed under `key` in a report.
fn tags(report: &Value, key: &str) -> Vec<String> {
    report[key]
        .as_array()
        .expect("a list")
        .iter()
        .map(|tag| tag.as_str().expect("a tag").to_owned())
        .collect()
}

/// Checks the report: no bad line, every patient call read once and never cancelled, every
/// call given up that the server read (its write had begun) cancelled, and no cancellation of a
/// request it never read.
fn check_report(report: &Value, patient: &[String]) {
    assert_eq!(report["bad"], 0, "the server read a bad line: {report}");
    let echoed = tags(report, "echoed");
    let cancelled: BTreeSet<String> = tags(report, "cancelled").into_iter().collect();
    for tag in patient {
        let reads = echoed.iter().filter(|t| *t == tag).count();
        assert_eq!(reads, 1, "{tag} read {reads} times: {report}");
        assert!(!cancelled.contains(tag), "{tag} was cancelled: {report}");
    }
    let given_up: BTreeSet<String> = echoed
        .iter()
        .filter(|tag| !patient.contains(tag))
        .cloned()
        .collect();
    assert_eq!(
        given_up, cancelled,
        "each given-up call the server read, and only those, is cancelled: {report}"
    );
    assert_eq!(report["cancelled_unknown"], 0, "{report}");
}

/// Checks the outcomes: each patient call answered with its message within `within`, each other
/// one given up.
fn check_outcomes(outcomes: &[Outcome<'_>], patient: &[String], within: Duration) {
    for outcome in outcomes {
        let tag = &outcome.call.tag;
        if patient.contains(tag) {
            let text = outcome.result.as_ref().expect("a patient call is answered");
            assert!(*text == outcome.call.message(), "{tag} answered wrongly");
            assert!(
                outcome.after < within,
                "{tag} answered after {:?}",
                outcome.after
            );
        } else {
            // A deadline is tonic's (CANCELLED, "Timeout expired") or the broker's.
            let code = outcome.result.as_ref().map(String::len);
            assert!(
                matches!(
                    code,
                    Err(None | Some(Code::DeadlineExceeded | Code::Cancelled))
                ),
                "{tag}: {code:?}"
            );
        }
    }
}

/// The tags of the calls that wait longer than `stall`.
fn patient(calls: &[Call], stall: Duration) -> Vec<String> {
    calls
        .iter()
        .filter(|call| call.patience > stall)
        .map(|call| call.tag.clone())
        .collect()
}

#[tokio::test]
async fn calls_queued_behind_a_given_up_write_are_answered_when_the_server_reads_again() {
    let broker = start().await;
    let metrics = Metrics::of(&broker).await;
    // As in issue 36: 12 calls of 200 KB with 0.3 s deadlines and 6 of 30 KB with 20 s
    // deadlines arrive while the server is not reading.
    let calls: Vec<Call> = (0..18)
        .map(|i| match i % 3 {
            2 => Call::new(format!("long{i}"), 30_000, Duration::from_secs(20)),
            _ => Call::new(format!("short{i}"), 200_000, Duration::from_millis(300)),
        })
        .collect();
    let stalled = Duration::from_secs(3);
    stall(&broker, stalled).await;

    // The first fills the pipe and is cut short mid-line by its deadline, with the next one
    // waiting to write and a long one queued behind: each of those three is sent once the one
    // before it is in flight, so they reach the pipe in this order.
    let mut running = FuturesUnordered::new();
    let mut outcomes = Vec::new();
    for (i, call) in calls.iter().enumerate() {
        running.push(call.run(&broker));
        if i < 3 {
            metrics
                .wait_in_flight(&mut running, &mut outcomes, i + 1)
                .await;
        }
    }
    outcomes.extend(running.collect::<Vec<_>>().await);

    let patient = patient(&calls, stalled);
    check_report(&report(&broker).await, &patient);
    // Answered once the server reads again, well before their deadlines.
    check_outcomes(&outcomes, &patient, stalled + Duration::from_secs(4));
}

#[tokio::test]
async fn callers_that_reset_their_streams_mid_write_lose_no_other_call() {
    let broker = start().await;
    let mut rng = fastrand::Rng::with_seed(36);
    let mut patient_so_far = Vec::new();
    for round in 0..2 {
        // Callers that reset their streams at random moments, some before their request is
        // written, some while it is, and patient ones among them.
        let calls: Vec<Call> = (0..20)
            .map(|i| {
                let tag = format!("r{round}c{i}");
                if i % 5 == 4 {
                    Call::new(tag, rng.usize(1..60_000), Duration::from_secs(20))
                } else {
                    let mut call = Call::new(
                        tag,
                        rng.usize(1..300_000),
                        Duration::from_millis(rng.u64(1..600)),
                    );
                    call.resets = true;
                    call
                }
            })
            .collect();
        let stalled = Duration::from_millis(1500);
        stall(&broker, stalled).await;
        let outcomes = futures::future::join_all(calls.iter().map(|c| c.run(&broker))).await;
        let patient = patient(&calls, stalled);
        check_outcomes(&outcomes, &patient, stalled + Duration::from_secs(4));
        patient_so_far.extend(patient);
        check_report(&report(&broker).await, &patient_so_far);
    }
}

#[tokio::test]
async fn a_server_that_stops_reading_gets_no_line_of_callers_that_left() {
    let broker = start().await;
    // Waves of callers that wait 0.15 s and leave: 10 × 16 × 256 KB = 40 MiB in all.
    let waves: Vec<Vec<Call>> = (0..10)
        .map(|wave| {
            (0..16)
                .map(|i| {
                    Call::new(
                        format!("w{wave}c{i}"),
                        256 * 1024,
                        Duration::from_millis(150),
                    )
                })
                .collect()
        })
        .collect();
    stall(&broker, Duration::from_secs(4)).await;
    let before = common::process::rss_kib(broker.pid()) * 1024;
    for calls in &waves {
        futures::future::join_all(calls.iter().map(|c| c.run(&broker))).await;
    }
    let grown = (common::process::rss_kib(broker.pid()) * 1024).saturating_sub(before);
    assert!(
        grown < 48 << 20,
        "the broker grew by {} MiB while the server did not read",
        grown >> 20
    );
    // Once it reads again, it reads the first wave's write, which had begun, and nothing of
    // the callers that came and left while it did not read.
    let report = report(&broker).await;
    check_report(&report, &[]);
    let echoed = tags(&report, "echoed");
    assert!(
        echoed.iter().all(|tag| tag.starts_with("w0c")),
        "lines of callers that had left were written: {echoed:?}"
    );
}

/// The broker's Prometheus metrics.
struct Metrics {
    url: String,
}

impl Metrics {
    async fn of(broker: &Broker) -> Self {
        toolbroker::tls_provider::install();
        Self {
            url: broker.metrics_url().await,
        }
    }

    /// `toolbroker_calls_in_flight` of the stalling server.
    async fn in_flight(&self) -> usize {
        let text = reqwest::get(&self.url)
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("metrics text");
        let line = text
            .lines()
            .find(|l| l.starts_with("toolbroker_calls_in_flight{"))
            .unwrap_or("toolbroker_calls_in_flight 0");
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("a number");
        value as usize
    }

    /// Drives `calls` (keeping those that end in `ended`) until `count` calls are in flight on
    /// the server or ended.
    async fn wait_in_flight<'a, F: Future<Output = Outcome<'a>>>(
        &self,
        calls: &mut FuturesUnordered<F>,
        ended: &mut Vec<Outcome<'a>>,
        count: usize,
    ) {
        let waited = tokio::time::timeout(common::WAIT, async {
            loop {
                tokio::select! {
                    Some(outcome) = calls.next() => ended.push(outcome),
                    _ = tokio::time::sleep(Duration::from_millis(2)) => {}
                }
                if self.in_flight().await + ended.len() >= count {
                    return;
                }
            }
        })
        .await;
        assert!(waited.is_ok(), "{count} calls not in flight in time");
    }
}
